//! Destination encryption at rest: the S3 bucket's default encryption
//! (`GetBucketEncryption`), judged by [`verdict`], a pure function over what S3 answered.
//!
//! Guarantees: read-only (one `GetBucketEncryption` call); `ok` only when S3 reports a
//! default-encryption rule, naming its algorithm (and KMS key); no rule, or a call that
//! is denied or fails, is a warning with the statement or permission that fixes it —
//! the drain does not refuse by it (its own writes request `destination.encryption`,
//! which the row then names). A local directory has no such setting.

use aws_sdk_s3::Client;

use super::Check;
use crate::config::{Config, DestinationConfig};
use crate::destination::s3::SseMode;

/// The check's name in the report.
pub const NAME: &str = "destination encryption";

/// What S3 said about a bucket's default encryption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The default-encryption rules: algorithm (`AES256`, `aws:kms`, `aws:kms:dsse`) and
    /// KMS key when one is named.
    Rules(Vec<(String, Option<String>)>),
    /// `ServerSideEncryptionConfigurationNotFoundError`: no default encryption.
    NotConfigured,
    /// The caller may not read the setting (`s3:GetEncryptionConfiguration`).
    Denied(String),
    /// Any other failure (network, missing bucket …).
    Failed(String),
}

/// The encryption row for the job's destination.
pub async fn check(config: &Config) -> Check {
    match &config.destination {
        DestinationConfig::Local { .. } => {
            Check::ok(NAME, "not applicable to a local directory (S3 only)")
        }
        DestinationConfig::Stdout {} => Check::ok(NAME, "not applicable to stdout (S3 only)"),
        DestinationConfig::S3 {
            bucket,
            endpoint_url,
            region,
            encryption,
            ..
        } => {
            let client = match super::s3::client(endpoint_url.as_deref(), region.as_deref()).await {
                Ok(c) => c,
                Err(e) => return Check::from_error(NAME, &e).as_warning(),
            };
            let answer = ask(&client, bucket).await;
            let mut row = verdict(bucket, &answer);
            if matches!(&answer, Answer::NotConfigured)
                || matches!(&answer, Answer::Rules(r) if r.is_empty())
            {
                let requested = match encryption.mode {
                    SseMode::SseS3 => "SSE-S3",
                    SseMode::SseKms => "SSE-KMS",
                };
                row.detail.push_str(&format!(
                    " (sluice's own writes request {requested} on every object)"
                ));
            }
            row
        }
    }
}

/// Asks S3 for the bucket's default encryption.
pub async fn ask(client: &Client, bucket: &str) -> Answer {
    match client.get_bucket_encryption().bucket(bucket).send().await {
        Ok(out) => Answer::Rules(
            out.server_side_encryption_configuration()
                .map(|c| c.rules())
                .unwrap_or_default()
                .iter()
                .filter_map(|r| r.apply_server_side_encryption_by_default())
                .map(|d| {
                    (
                        d.sse_algorithm().as_str().to_owned(),
                        d.kms_master_key_id().map(str::to_owned),
                    )
                })
                .collect(),
        ),
        Err(e) => {
            let described = crate::aws::describe_failure(&e);
            match crate::aws::service_code(&e) {
                Some("ServerSideEncryptionConfigurationNotFoundError") => Answer::NotConfigured,
                _ if crate::aws::classify(&e) == crate::aws::Failure::Denied => {
                    Answer::Denied(described)
                }
                _ => Answer::Failed(described),
            }
        }
    }
}

/// The verdict on S3's answer, pure.
pub fn verdict(bucket: &str, answer: &Answer) -> Check {
    let enable = format!(
        "aws s3api put-bucket-encryption --bucket {bucket} --server-side-encryption-configuration \
         '{{\"Rules\":[{{\"ApplyServerSideEncryptionByDefault\":{{\"SSEAlgorithm\":\"aws:kms\"}},\"BucketKeyEnabled\":true}}]}}' \
         (the Terraform stack module sets KMS default encryption and a TLS-only policy)"
    );
    match answer {
        Answer::Rules(rules) if !rules.is_empty() => {
            let shown: Vec<String> = rules
                .iter()
                .map(|(algorithm, key)| match key {
                    Some(key) => format!("{algorithm} (key {key})"),
                    None => algorithm.clone(),
                })
                .collect();
            Check::ok(
                NAME,
                format!("s3://{bucket}: default encryption {}", shown.join(", ")),
            )
        }
        Answer::Rules(_) | Answer::NotConfigured => Check::warn(
            NAME,
            format!(
                "s3://{bucket} has no default encryption: objects written without an SSE header are stored unencrypted"
            ),
            enable,
        ),
        Answer::Denied(why) => Check::warn(
            NAME,
            format!("s3://{bucket}: reading the default encryption was denied: {why}"),
            "allow s3:GetEncryptionConfiguration on the bucket to the role running doctor, then check again",
        ),
        Answer::Failed(why) => Check::warn(
            NAME,
            format!("s3://{bucket}: reading the default encryption failed: {why}"),
            "check the bucket name, region and endpoint (the destination writable check says more)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn verdicts() {
        let kms = verdict(
            "b",
            &Answer::Rules(vec![("aws:kms".into(), Some("arn:aws:kms:k".into()))]),
        );
        assert_eq!(kms.status, Status::Ok);
        assert_eq!(
            kms.detail,
            "s3://b: default encryption aws:kms (key arn:aws:kms:k)"
        );
        assert_eq!(
            verdict("b", &Answer::Rules(vec![("AES256".into(), None)])).status,
            Status::Ok
        );
        for bare in [Answer::NotConfigured, Answer::Rules(Vec::new())] {
            let c = verdict("b", &bare);
            assert_eq!(c.status, Status::Warn);
            assert!(c.fix.unwrap().contains("put-bucket-encryption --bucket b"));
        }
        let denied = verdict("b", &Answer::Denied("AccessDenied (HTTP 403)".into()));
        assert!(
            denied
                .fix
                .unwrap()
                .contains("s3:GetEncryptionConfiguration")
        );
        assert_eq!(
            verdict("b", &Answer::Failed("x".into())).status,
            Status::Warn
        );
    }
}
