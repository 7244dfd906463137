//! The `destination` and `state` blocks: where parts go (local directory or S3, with the
//! server-side encryption requested — or, for pipes, NDJSON on stdout) and where lease,
//! checkpoint and run records live.
//! Data only: the destination and the state store check their own blocks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where the parts go.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DestinationConfig {
    /// A local directory (CLI use, tests).
    Local { path: PathBuf },
    /// An S3 bucket; objects go to `<prefix>/<table>/…`. Credentials and (unless given)
    /// the region come from the standard AWS provider chain.
    S3 {
        bucket: String,
        #[serde(default)]
        prefix: String,
        /// A custom endpoint (moto, MinIO); default: `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
        region: Option<String>,
        /// Server-side encryption requested on every object; default SSE-S3.
        #[serde(default)]
        encryption: Encryption,
    },
    /// One JSON object per change on the process's stdout (docs/output.md, NDJSON): no
    /// parts, manifests or markers; the state store still holds the checkpoint. CLI only.
    Stdout {},
}

/// Where the lease, checkpoint and run records live.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StateConfig {
    /// A local directory holding one state file per job.
    Local { path: PathBuf },
    /// A DynamoDB table (`pk`/`sk` strings), shared by any number of jobs.
    Dynamodb {
        table: String,
        /// A custom endpoint (moto, DynamoDB Local); default: `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
        region: Option<String>,
    },
}

/// `destination.encryption`: the server-side encryption requested on every object
/// (checked by `crate::destination::s3::check_encryption`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Encryption {
    /// `sse-s3` (default, `AES256`) or `sse-kms` (`aws:kms`).
    #[serde(default)]
    pub mode: SseMode,
    /// `sse-kms` only: the KMS key (id, ARN or alias ARN); unset means the account's
    /// AWS-managed `aws/s3` key.
    pub kms_key_id: Option<String>,
}

/// The server-side encryption S3 applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SseMode {
    /// S3-managed keys (`x-amz-server-side-encryption: AES256`).
    #[default]
    SseS3,
    /// KMS keys (`x-amz-server-side-encryption: aws:kms`).
    SseKms,
}
