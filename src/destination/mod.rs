//! Where parts, manifests and markers are stored.
//!
//! Contract for every backend: [`Destination::put_part`] returns only once the object is
//! durable and **never overwrites** an existing key (a second write of the same key is
//! `SLUICE_DESTINATION_EXISTS`, and the first object is left as it was); a failed or
//! partial upload leaves no object that could be mistaken for a complete one.
//! [`Destination::put_marker`] writes small documents (`_manifest.json`, `_SUCCESS`) that a
//! later clean run replaces. [`Destination::s3_object`] names the S3 object a key is
//! stored as, for readers outside sluice (a Step Functions `ItemReader`); only an S3
//! backend has one. The stdout backend ([`stdout`]) keeps no documents: it emits parts
//! as NDJSON and drops markers.

mod crc32c;
pub mod local;
pub mod ndjson;
pub mod s3;
pub mod stdout;

use std::path::Path;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::config::{Config, DestinationConfig};
use crate::error::{Code, Error, Result};

/// An object in S3: the bucket and the full object key (destination prefix included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Object {
    pub bucket: String,
    pub key: String,
}

/// Refuses a key that is not a valid destination key: one or more `/`-separated segments,
/// none empty, `.` or `..` — so no key names the root itself or a place outside it.
/// Every backend that stores by key checks it first.
pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty()
        || key
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(Error::new(
            Code::Internal,
            format!("invalid destination key {key:?}"),
        ));
    }
    Ok(())
}

/// Object storage for one job's output. Keys are `/`-separated and relative to the
/// destination's root (bucket prefix or directory; [`check_key`]).
#[async_trait]
pub trait Destination: Send + Sync {
    /// A human-readable, secret-free description (`file:///out`, `s3://bucket/prefix`).
    fn describe(&self) -> String;

    /// Stores the local file at `key`; durable on return; never overwrites.
    async fn put_part(&self, key: &str, local: &Path) -> Result<()>;

    /// Stores a small document at `key`, replacing any previous one; durable on return.
    async fn put_marker(&self, key: &str, body: &[u8]) -> Result<()>;

    /// Reads a document, `None` when absent.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// Keys under `prefix`, sorted.
    async fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Keys under `prefix`, sorted, each with when it was last written (ms since the
    /// epoch), `None` where the backend does not tell: a caller that removes old objects
    /// never removes one of unknown age.
    async fn list_modified(&self, prefix: &str) -> Result<Vec<(String, Option<i64>)>> {
        Ok(self
            .list(prefix)
            .await?
            .into_iter()
            .map(|k| (k, None))
            .collect())
    }

    /// `len` bytes of the object at `key` from byte `start` (fewer at its end); `None` when
    /// absent. Backends that hold large objects read only that range.
    async fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.get(key).await?.map(|body| {
            let from = (start as usize).min(body.len());
            let to = from.saturating_add(len as usize).min(body.len());
            body[from..to].to_vec()
        }))
    }

    /// The last `len` bytes of the object at `key` (all of it when shorter); `None` when
    /// absent. Backends that hold large objects read only those bytes.
    async fn get_tail(&self, key: &str, len: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.get(key).await?.map(|body| {
            let from = body.len().saturating_sub(len as usize);
            body[from..].to_vec()
        }))
    }

    /// Copies the object at `key` into the local file `local` (created or replaced);
    /// `false` when absent. Backends that hold large objects stream them, so a part is
    /// never held in memory whole.
    async fn download(&self, key: &str, local: &Path) -> Result<bool> {
        let Some(body) = self.get(key).await? else {
            return Ok(false);
        };
        std::fs::write(local, body).map_err(|e| {
            let what = format!("writing {} (a copy of {key})", local.display());
            crate::spill::errors::io_error(e, what, local.parent().unwrap_or(local))
        })?;
        Ok(true)
    }

    /// The S3 object `key` is (or would be) stored as; `None` for a backend that is not
    /// S3. Errors only for a key that is not a valid destination key.
    fn s3_object(&self, key: &str) -> Result<Option<S3Object>> {
        let _ = key;
        Ok(None)
    }

    /// The URI every key is under, ending in `/` (`file:///abs/out/`,
    /// `s3://bucket/prefix/`): `<root_uri><key>` names an object for readers outside sluice
    /// (an Iceberg table's file paths). `None` for a backend that keeps no objects (stdout).
    fn root_uri(&self) -> Option<String> {
        None
    }

    /// Removes the object at `key`; absent is fine. `doctor`'s probe removes its document,
    /// a compaction the parts it replaced (only once the parts replacing them are durable
    /// and named by its manifest).
    async fn delete(&self, key: &str) -> Result<()> {
        Err(crate::error::Error::new(
            crate::error::Code::DestinationUnavailable,
            format!("{} cannot delete {key}", self.describe()),
        )
        .hint("this destination does not support deletes yet; remove the object by hand"))
    }
}

/// Checks the `destination` block: an S3 endpoint override and the encryption setting.
pub fn check_config(config: &Config) -> Result<()> {
    if let DestinationConfig::S3 {
        endpoint_url,
        encryption,
        ..
    } = &config.destination
    {
        if let Some(url) = endpoint_url {
            crate::config::check_endpoint("destination.endpoint_url", url)?;
        }
        s3::check_encryption(encryption)?;
    }
    Ok(())
}

/// Builds the destination the config names.
pub async fn open(config: &Config) -> Result<Box<dyn Destination>> {
    match &config.destination {
        DestinationConfig::Local { path } => Ok(Box::new(local::LocalDestination::new(path)?)),
        DestinationConfig::Stdout {} => Ok(Box::new(stdout::StdoutDestination)),
        DestinationConfig::S3 {
            bucket,
            prefix,
            endpoint_url,
            region,
            encryption,
        } => {
            let sdk = crate::aws::shared_config(endpoint_url.as_deref(), region.as_deref()).await?;
            Ok(Box::new(
                s3::S3Destination::new(&sdk, bucket, prefix, s3::MultipartSettings::default())?
                    .with_encryption(encryption.clone())?,
            ))
        }
    }
}
