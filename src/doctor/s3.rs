//! Doctor's own S3 client, for what the destination itself does not offer: reading the
//! bucket's default encryption ([`super::encryption`]) and deleting the probe object.
//!
//! Guarantees: built from the same SDK config as the destination (same endpoint, region,
//! credentials, path-style addressing for custom endpoints); the only write is
//! `DeleteObject` of the probe key under the destination's prefix.

use aws_sdk_s3::Client;

use crate::config::{Config, DestinationConfig};
use crate::error::{Code, Error, Result};

/// A client for the S3 destination's endpoint and region.
pub async fn client(endpoint_url: Option<&str>, region: Option<&str>) -> Result<Client> {
    let sdk = crate::aws::shared_config(endpoint_url, region).await?;
    Ok(Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(crate::aws::custom_endpoint(&sdk))
            .build(),
    ))
}

/// The object key of destination key `key` under `prefix` (leading and trailing `/` of
/// the prefix ignored, as the destination does).
pub fn object_key(prefix: &str, key: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}/{key}")
    }
}

/// Deletes destination key `key` of an S3 destination.
pub async fn delete(config: &Config, key: &str) -> Result<()> {
    let DestinationConfig::S3 {
        bucket,
        prefix,
        endpoint_url,
        region,
        ..
    } = &config.destination
    else {
        return Err(Error::new(
            Code::DestinationUnavailable,
            "not an S3 destination",
        ));
    };
    let object = object_key(prefix, key);
    client(endpoint_url.as_deref(), region.as_deref())
        .await?
        .delete_object()
        .bucket(bucket)
        .key(&object)
        .send()
        .await
        .map_err(|e| {
            Error::new(
                Code::DestinationUnavailable,
                format!(
                    "deleting s3://{bucket}/{object} failed: {}",
                    crate::aws::describe_failure(&e)
                ),
            )
            .hint("allow s3:DeleteObject on the destination prefix to the role running doctor")
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_prefix() {
        assert_eq!(object_key("", "_sluice_doctor/p"), "_sluice_doctor/p");
        assert_eq!(
            object_key("cdc/", "_sluice_doctor/p"),
            "cdc/_sluice_doctor/p"
        );
        assert_eq!(object_key("/a/b", "k"), "a/b/k");
    }
}
