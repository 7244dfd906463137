//! Amazon S3 (or an S3-compatible endpoint) as the destination.
//!
//! Keys are `<prefix>/<key>` (no leading slash; an empty prefix means the bucket root).
//! Guarantees:
//! * a part is written with `If-None-Match: *`, so S3 itself refuses to overwrite an
//!   existing key (`412 PreconditionFailed` → `SLUICE_DESTINATION_EXISTS`) even when two
//!   writers race. A 412 whose object is byte for byte the part being sent (same size and
//!   CRC32C, read with `HeadObject`) is our own earlier attempt — the SDK retried a put
//!   whose answer was lost, and part keys carry the run id — so the part is adopted;
//!   any other object stays `SLUICE_DESTINATION_EXISTS`;
//! * every object carries a CRC32C checksum computed by the SDK from the bytes it sends
//!   and verified by S3 before the object exists;
//! * a part above the multipart threshold is uploaded in parts; the object becomes
//!   visible only at `CompleteMultipartUpload` (also `If-None-Match: *`), and a failed
//!   upload is aborted, so a failed or partial upload never leaves an object that could
//!   be mistaken for a complete one (a lifecycle rule `AbortIncompleteMultipartUpload`
//!   reclaims the storage of an abort that did not get through);
//! * `put_part` returns only after S3 acknowledged the whole object (S3 is strongly
//!   consistent: a later `get`/`list` sees it);
//! * every object sluice creates (`PutObject` of parts and markers,
//!   `CreateMultipartUpload`) requests server-side encryption ([`Encryption`]): SSE-S3
//!   unless SSE-KMS is configured, never none, so a bucket policy that denies
//!   unencrypted writes never rejects sluice.
//!
//! Markers (`_manifest.json`, `_SUCCESS`) are plain `PutObject`s that replace the previous
//! version. [`Destination::delete`] is a `DeleteObject` (absent is fine): only a compaction
//! removes parts, after the parts replacing them are durable and recorded.

use std::path::Path;

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::{ByteStream, Length};
use aws_sdk_s3::types::{
    ChecksumAlgorithm, ChecksumMode, CompletedMultipartUpload, CompletedPart, ServerSideEncryption,
};

use super::{Destination, S3Object, crc32c};
use crate::aws::{self, Failure};
pub use crate::config::{Encryption, SseMode};
use crate::error::{Code, Error, Result};

/// When and how a part is split into a multipart upload.
#[derive(Debug, Clone, Copy)]
pub struct MultipartSettings {
    /// Files of at least this many bytes are uploaded in parts.
    pub threshold: u64,
    /// Size of every part but the last (S3 requires at least 5 MiB).
    pub part_size: u64,
}

impl Default for MultipartSettings {
    fn default() -> Self {
        MultipartSettings {
            threshold: 32 * 1024 * 1024,
            part_size: 16 * 1024 * 1024,
        }
    }
}

/// S3's smallest allowed part (all but the last).
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;

/// Checks `destination.encryption` (no I/O).
pub fn check_encryption(encryption: &Encryption) -> Result<()> {
    match (encryption.mode, encryption.kms_key_id.as_deref()) {
        (SseMode::SseS3, Some(_)) => Err(Error::new(
            Code::ConfigInvalid,
            "destination.encryption.kms_key_id is set but destination.encryption.mode is sse-s3",
        )
        .hint("set destination.encryption.mode to sse-kms, or remove kms_key_id")),
        (SseMode::SseKms, Some(id)) if id.trim().is_empty() => Err(Error::new(
            Code::ConfigInvalid,
            "destination.encryption.kms_key_id is empty",
        )
        .hint("give the KMS key id or ARN, or leave kms_key_id out to use the aws/s3 key")),
        _ => Ok(()),
    }
}

/// The `x-amz-server-side-encryption` value and the KMS key id to send for `encryption`.
pub fn sse_headers(encryption: &Encryption) -> (ServerSideEncryption, Option<&str>) {
    match encryption.mode {
        SseMode::SseS3 => (ServerSideEncryption::Aes256, None),
        SseMode::SseKms => (
            ServerSideEncryption::AwsKms,
            encryption.kms_key_id.as_deref(),
        ),
    }
}

/// A bucket and key prefix.
#[derive(Debug, Clone)]
pub struct S3Destination {
    client: Client,
    bucket: String,
    /// Empty, or ends with exactly one `/`.
    prefix: String,
    multipart: MultipartSettings,
    encryption: Encryption,
    /// A location S3 Tables manages (a table's warehouse): no encryption headers (the
    /// table bucket's own setting applies) and no conditional put (a part copied there
    /// again holds the same bytes).
    managed: bool,
}

impl S3Destination {
    /// A destination writing to `bucket` under `prefix` through a client built from `sdk`.
    pub fn new(
        sdk: &SdkConfig,
        bucket: &str,
        prefix: &str,
        multipart: MultipartSettings,
    ) -> Result<Self> {
        if bucket.is_empty() || bucket.contains('/') {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!("destination.bucket {bucket:?} is not a bucket name"),
            )
            .hint("give the bare bucket name; put any path into destination.prefix"));
        }
        if multipart.part_size < MIN_PART_SIZE || multipart.threshold < multipart.part_size {
            return Err(Error::new(
                Code::ConfigInvalid,
                "multipart part size must be at least 5 MiB and at most the threshold",
            ));
        }
        let config = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(aws::custom_endpoint(sdk))
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(aws::CONNECT_TIMEOUT)
                    // Time to the first response byte once a request is sent; generous
                    // because CompleteMultipartUpload of a large object can take a while.
                    .read_timeout(std::time::Duration::from_secs(120))
                    .build(),
            )
            .build();
        Ok(S3Destination {
            client: Client::from_conf(config),
            bucket: bucket.to_owned(),
            prefix: normalize_prefix(prefix)?,
            multipart,
            encryption: Encryption::default(),
            managed: false,
        })
    }

    /// The same client writing to a table's warehouse location, which S3 Tables manages
    /// (`managed`: no encryption headers, no conditional put).
    pub fn managed(mut self) -> Self {
        self.managed = true;
        self
    }

    /// The `x-amz-server-side-encryption` value and KMS key to send: none for a managed
    /// location.
    fn sse(&self) -> (Option<ServerSideEncryption>, Option<String>) {
        if self.managed {
            return (None, None);
        }
        let (sse, kms_key) = sse_headers(&self.encryption);
        (Some(sse), kms_key.map(str::to_owned))
    }

    /// The same destination requesting `encryption` (default: SSE-S3) on every object.
    pub fn with_encryption(mut self, encryption: Encryption) -> Result<Self> {
        check_encryption(&encryption)?;
        self.encryption = encryption;
        Ok(self)
    }

    /// The full object key for a destination key.
    fn object_key(&self, key: &str) -> Result<String> {
        super::check_key(key)?;
        Ok(format!("{}{key}", self.prefix))
    }

    fn url(&self, object_key: &str) -> String {
        format!("s3://{}/{object_key}", self.bucket)
    }

    /// `GetObject` of destination key `key` (of `range`, an HTTP `Range` value, when
    /// given): its object key and the answer, whose body is still to be read; `None` when
    /// there is no such object.
    async fn object(
        &self,
        key: &str,
        range: Option<String>,
    ) -> Result<Option<(String, aws_sdk_s3::operation::get_object::GetObjectOutput)>> {
        let object_key = self.object_key(key)?;
        let answer = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .set_range(range)
            .send()
            .await;
        match answer {
            Ok(output) => Ok(Some((object_key, output))),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(self.error(e, "s3:GetObject", &object_key)),
        }
    }

    /// The body of destination key `key` (of `range`, when given), read whole; `None`
    /// when there is no such object.
    async fn body(&self, key: &str, range: Option<String>) -> Result<Option<Vec<u8>>> {
        let Some((object_key, output)) = self.object(key, range).await? else {
            return Ok(None);
        };
        let bytes = output
            .body
            .collect()
            .await
            .map_err(|e| self.body_error(&object_key, e))?;
        Ok(Some(bytes.into_bytes().to_vec()))
    }

    /// A `GetObject` body that broke off while it was read.
    fn body_error(
        &self,
        object_key: &str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::new(
            Code::DestinationUnavailable,
            format!("S3 GetObject {}: reading the body", self.url(object_key)),
        )
        .hint("the connection broke while reading; retry")
        .source(e)
    }

    /// Maps an SDK failure of `action` on `object_key` to a sluice error.
    fn error<E>(&self, err: SdkError<E, HttpResponse>, action: &str, object_key: &str) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let url = self.url(object_key);
        let what = aws::describe_failure(&err);
        let failure = aws::classify(&err);
        let error = match failure {
            Failure::Unavailable => Error::new(
                Code::DestinationUnavailable,
                format!("S3 {action} {url}: {what}"),
            )
            .hint("S3 could not be reached or refused the request for now; nothing was checkpointed, the next run retries (check destination.endpoint_url / network if it persists)"),
            Failure::Other => Error::new(
                Code::DestinationRejected,
                format!("S3 {action} {url}: {what}"),
            )
            .hint(rejected_hint(aws::service_code(&err).unwrap_or_default())),
            Failure::Denied => Error::new(
                Code::DestinationDenied,
                format!("S3 {action} {url}: {what}"),
            )
            .hint(format!(
                "allow {action} on arn:aws:s3:::{}/{}* for the credentials in use (IAM role or AWS_* environment); see the IAM section of docs/aws.md",
                self.bucket, self.prefix
            )),
            Failure::Missing => Error::new(
                Code::ConfigInvalid,
                format!("S3 bucket {} does not exist ({what})", self.bucket),
            )
            .hint("create the bucket (the Terraform module does) or fix destination.bucket / destination.region"),
        };
        error.source(err)
    }

    async fn put_single(&self, object_key: &str, local: &Path) -> Result<()> {
        let body = ByteStream::from_path(local)
            .await
            .map_err(|e| local_error(local, e))?;
        let (sse, kms_key) = self.sse();
        let sent = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(object_key)
            .set_if_none_match((!self.managed).then(|| "*".to_owned()))
            .checksum_algorithm(ChecksumAlgorithm::Crc32C)
            .set_server_side_encryption(sse)
            .set_ssekms_key_id(kms_key)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(e) => {
                let error = self.part_error(e, "s3:PutObject", object_key);
                self.adopt_if_ours(error, object_key, local, None).await
            }
        }
    }

    /// After a refused conditional put (`error`): adopts the object at `object_key` when
    /// it is exactly `local` as sent (`part_size`: the multipart split) — our own earlier
    /// attempt whose answer was lost — and returns `error` otherwise.
    async fn adopt_if_ours(
        &self,
        error: Error,
        object_key: &str,
        local: &Path,
        part_size: Option<u64>,
    ) -> Result<()> {
        if error.code() != Code::DestinationExists {
            return Err(error);
        }
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(object_key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await;
        let head = match head {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(key = object_key, error = %aws::describe_failure(&e), "could not read the existing object to compare it with the part");
                return Err(error);
            }
        };
        let size = std::fs::metadata(local)
            .map_err(|e| local_error(local, e))?
            .len();
        let crc = crc32c::of_file(local, part_size).map_err(|e| local_error(local, e))?;
        if same_object(head.content_length(), head.checksum_crc32_c(), size, &crc) {
            tracing::info!(
                key = object_key,
                crc32c = %crc,
                "the part is already stored, byte for byte (a retried put whose answer was lost); adopted"
            );
            return Ok(());
        }
        Err(error)
    }

    async fn put_multipart(&self, object_key: &str, local: &Path, size: u64) -> Result<()> {
        let (sse, kms_key) = self.sse();
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(object_key)
            .checksum_algorithm(ChecksumAlgorithm::Crc32C)
            .set_server_side_encryption(sse)
            .set_ssekms_key_id(kms_key)
            .send()
            .await
            .map_err(|e| self.error(e, "s3:PutObject", object_key))?;
        let Some(upload_id) = created.upload_id() else {
            return Err(Error::new(
                Code::DestinationUnavailable,
                format!(
                    "S3 CreateMultipartUpload {} returned no upload id",
                    self.url(object_key)
                ),
            ));
        };
        let result = self.upload_parts(object_key, upload_id, local, size).await;
        if result.is_err() {
            let aborted = self
                .client
                .abort_multipart_upload()
                .bucket(&self.bucket)
                .key(object_key)
                .upload_id(upload_id)
                .send()
                .await;
            if let Err(e) = aborted {
                tracing::warn!(key = object_key, error = %aws::describe_failure(&e),
                    "could not abort a failed multipart upload; a lifecycle rule reclaims it");
            }
        }
        result
    }

    async fn upload_parts(
        &self,
        object_key: &str,
        upload_id: &str,
        local: &Path,
        size: u64,
    ) -> Result<()> {
        let mut completed = Vec::new();
        let mut offset = 0;
        let mut number = 1;
        while offset < size {
            let length = self.multipart.part_size.min(size - offset);
            let body = ByteStream::read_from()
                .path(local)
                .offset(offset)
                .length(Length::Exact(length))
                .build()
                .await
                .map_err(|e| local_error(local, e))?;
            let uploaded = self
                .client
                .upload_part()
                .bucket(&self.bucket)
                .key(object_key)
                .upload_id(upload_id)
                .part_number(number)
                .checksum_algorithm(ChecksumAlgorithm::Crc32C)
                .body(body)
                .send()
                .await
                .map_err(|e| self.error(e, "s3:PutObject", object_key))?;
            completed.push(
                CompletedPart::builder()
                    .part_number(number)
                    .set_e_tag(uploaded.e_tag().map(str::to_owned))
                    .set_checksum_crc32_c(uploaded.checksum_crc32_c().map(str::to_owned))
                    .build(),
            );
            offset += length;
            number += 1;
        }
        let completed = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(object_key)
            .upload_id(upload_id)
            .set_if_none_match((!self.managed).then(|| "*".to_owned()))
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(completed))
                    .build(),
            )
            .send()
            .await;
        match completed {
            Ok(_) => Ok(()),
            Err(e) => {
                let error = self.part_error(e, "s3:PutObject", object_key);
                self.adopt_if_ours(error, object_key, local, Some(self.multipart.part_size))
                    .await
            }
        }
    }

    /// Like [`Self::error`], but a failed `If-None-Match` is `SLUICE_DESTINATION_EXISTS`.
    fn part_error<E>(&self, err: SdkError<E, HttpResponse>, action: &str, object_key: &str) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let code = aws::service_code(&err);
        let status = aws::service_status(&err);
        // 412: the key exists; 409: another conditional write of the same key is in flight.
        if code == Some("PreconditionFailed")
            || code == Some("ConditionalRequestConflict")
            || status == Some(412)
        {
            return Error::new(
                Code::DestinationExists,
                format!("part {} already exists; parts are never overwritten", self.url(object_key)),
            )
            .hint("two writers are producing the same run id — check that only one job uses this destination prefix")
            .source(err);
        }
        self.error(err, action, object_key)
    }
}

/// True when an object S3 holds (its size and CRC32C as `HeadObject` reports them) is
/// the local file of `size` bytes whose checksum, in S3's form, is `crc`. An object
/// without a CRC32C cannot be proven identical.
fn same_object(remote_size: Option<i64>, remote_crc: Option<&str>, size: u64, crc: &str) -> bool {
    remote_size.and_then(|s| u64::try_from(s).ok()) == Some(size) && remote_crc == Some(crc)
}

/// The fix for an S3 answer that will not change by retrying, by its error code.
fn rejected_hint(code: &str) -> &'static str {
    match code {
        "PermanentRedirect"
        | "AuthorizationHeaderMalformed"
        | "IllegalLocationConstraintException" => {
            "the bucket is in another region than the client uses: set destination.region to the bucket's region"
        }
        "InvalidBucketName" => "destination.bucket is not a valid S3 bucket name",
        c if c.starts_with("KMS") => {
            "the KMS key of destination.encryption cannot be used: check kms_key_id (its ARN and region), that the key is enabled, and that the role may use it (kms:GenerateDataKey, kms:Decrypt)"
        }
        _ => {
            "S3 refused the request as wrong for this bucket, so retrying gives the same answer: compare destination (bucket, region, prefix, encryption) with the S3 error above; nothing was checkpointed"
        }
    }
}

/// `""`, `"a"`, `"a/"`, `"/a/b/"` → `""`, `"a/"`, `"a/"`, `"a/b/"`.
fn normalize_prefix(prefix: &str) -> Result<String> {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    if trimmed
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("destination.prefix {prefix:?} has an empty, `.` or `..` segment"),
        )
        .hint("write the prefix as `a/b` (no `//`)"));
    }
    Ok(format!("{trimmed}/"))
}

fn local_error(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::new(
        Code::OutputWrite,
        format!("reading the finished part {}", path.display()),
    )
    .hint("check output.spill_dir: the part file vanished or is unreadable")
    .source(e)
}

#[async_trait]
impl Destination for S3Destination {
    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn root_uri(&self) -> Option<String> {
        Some(format!("s3://{}/{}", self.bucket, self.prefix))
    }

    async fn put_part(&self, key: &str, local: &Path) -> Result<()> {
        let object_key = self.object_key(key)?;
        let size = std::fs::metadata(local)
            .map_err(|e| local_error(local, e))?
            .len();
        if size >= self.multipart.threshold {
            self.put_multipart(&object_key, local, size).await
        } else {
            self.put_single(&object_key, local).await
        }
    }

    async fn put_marker(&self, key: &str, body: &[u8]) -> Result<()> {
        let object_key = self.object_key(key)?;
        let (sse, kms_key) = self.sse();
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .checksum_algorithm(ChecksumAlgorithm::Crc32C)
            .set_server_side_encryption(sse)
            .set_ssekms_key_id(kms_key)
            .body(ByteStream::from(body.to_vec()))
            .send()
            .await
            .map_err(|e| self.error(e, "s3:PutObject", &object_key))?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.body(key, None).await
    }

    async fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Option<Vec<u8>>> {
        if len == 0 {
            return Ok(Some(Vec::new()));
        }
        let range = format!("bytes={start}-{}", start + len - 1);
        self.body(key, Some(range)).await
    }

    async fn get_tail(&self, key: &str, len: u64) -> Result<Option<Vec<u8>>> {
        if len == 0 {
            return Ok(Some(Vec::new()));
        }
        self.body(key, Some(format!("bytes=-{len}"))).await
    }

    async fn download(&self, key: &str, local: &Path) -> Result<bool> {
        use std::io::Write;
        let Some((object_key, mut output)) = self.object(key, None).await? else {
            return Ok(false);
        };
        let written = |e| {
            let what = format!(
                "writing {} (a copy of {})",
                local.display(),
                self.url(&object_key)
            );
            crate::spill::errors::io_error(e, what, local.parent().unwrap_or(local))
        };
        let mut file = std::io::BufWriter::new(std::fs::File::create(local).map_err(written)?);
        while let Some(chunk) = output
            .body
            .try_next()
            .await
            .map_err(|e| self.body_error(&object_key, e))?
        {
            file.write_all(&chunk).map_err(written)?;
        }
        file.flush().map_err(written)?;
        Ok(true)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let full = format!("{}{prefix}", self.prefix);
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&full)
            .into_paginator()
            .send();
        let mut keys = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.error(e, "s3:ListBucket", &full))?;
            for object in page.contents() {
                if let Some(key) = object.key().and_then(|k| k.strip_prefix(&self.prefix)) {
                    keys.push(key.to_owned());
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    async fn list_modified(&self, prefix: &str) -> Result<Vec<(String, Option<i64>)>> {
        let full = format!("{}{prefix}", self.prefix);
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&full)
            .into_paginator()
            .send();
        let mut keys = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.error(e, "s3:ListBucket", &full))?;
            for object in page.contents() {
                if let Some(key) = object.key().and_then(|k| k.strip_prefix(&self.prefix)) {
                    let modified = object.last_modified().and_then(|t| t.to_millis().ok());
                    keys.push((key.to_owned(), modified));
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let object_key = self.object_key(key)?;
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
            .map_err(|e| self.error(e, "s3:DeleteObject", &object_key))?;
        Ok(())
    }

    fn s3_object(&self, key: &str) -> Result<Option<S3Object>> {
        Ok(Some(S3Object {
            bucket: self.bucket.clone(),
            key: self.object_key(key)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::tests::service_error;

    fn destination() -> S3Destination {
        let sdk = SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("eu-west-1"))
            .build();
        S3Destination::new(&sdk, "lake", "cdc", MultipartSettings::default()).unwrap()
    }

    #[test]
    fn s3_answers_map_to_stable_codes_with_hints() {
        let dest = destination();
        let exists = dest.part_error(
            service_error("PreconditionFailed", 412),
            "s3:PutObject",
            "cdc/t/p",
        );
        assert_eq!(exists.code(), Code::DestinationExists);
        let denied = dest.part_error(
            service_error("AccessDenied", 403),
            "s3:PutObject",
            "cdc/t/p",
        );
        assert_eq!(denied.code(), Code::DestinationDenied);
        let hint = denied.hint_text().unwrap();
        assert!(
            hint.contains("s3:PutObject") && hint.contains("arn:aws:s3:::lake/cdc/*"),
            "{hint}"
        );
        assert!(denied.message().contains("s3://lake/cdc/t/p"), "{denied}");
        let busy = dest.error(service_error("SlowDown", 503), "s3:PutObject", "cdc/t/p");
        assert_eq!(busy.code(), Code::DestinationUnavailable);
        assert_eq!(busy.class().exit_code(), 3);
        let missing = dest.error(
            service_error("NoSuchBucket", 404),
            "s3:PutObject",
            "cdc/t/p",
        );
        assert_eq!(missing.code(), Code::ConfigInvalid);
        assert!(
            missing.chain().contains("NoSuchBucket"),
            "the cause is kept: {}",
            missing.chain()
        );
        // An answer that retrying cannot change is a refusal with the fix for its cause.
        let elsewhere = dest.error(
            service_error("PermanentRedirect", 301),
            "s3:PutObject",
            "cdc/t/p",
        );
        assert_eq!(elsewhere.code(), Code::DestinationRejected);
        assert_eq!(elsewhere.class().exit_code(), 5);
        assert!(
            elsewhere
                .hint_text()
                .unwrap()
                .contains("destination.region")
        );
        let kms = dest.error(
            service_error("KMS.DisabledException", 400),
            "s3:PutObject",
            "cdc/t/p",
        );
        assert_eq!(kms.code(), Code::DestinationRejected);
        assert!(kms.hint_text().unwrap().contains("kms_key_id"));
        let damaged = dest.error(service_error("BadDigest", 400), "s3:PutObject", "cdc/t/p");
        assert_eq!(
            damaged.code(),
            Code::DestinationUnavailable,
            "sent again, it succeeds"
        );
    }

    #[test]
    fn only_an_object_of_the_same_size_and_crc32c_is_ours() {
        assert!(same_object(Some(10), Some("4waSgw=="), 10, "4waSgw=="));
        assert!(!same_object(Some(11), Some("4waSgw=="), 10, "4waSgw=="));
        assert!(!same_object(Some(10), Some("AAAAAA=="), 10, "4waSgw=="));
        assert!(
            !same_object(Some(10), None, 10, "4waSgw=="),
            "no checksum, no proof"
        );
        assert!(!same_object(None, Some("4waSgw=="), 10, "4waSgw=="));
        assert!(!same_object(Some(10), Some("4waSgw==-2"), 10, "4waSgw=="));
    }

    #[test]
    fn a_key_names_its_object_under_the_prefix() {
        let dest = destination();
        assert_eq!(
            dest.s3_object("_baseline/chunks-j.json").unwrap(),
            Some(S3Object {
                bucket: "lake".into(),
                key: "cdc/_baseline/chunks-j.json".into()
            })
        );
        assert!(dest.s3_object("../x").is_err());
    }

    #[test]
    fn prefixes_join_without_double_or_leading_slashes() {
        for (prefix, expected) in [
            ("", ""),
            ("/", ""),
            ("cdc", "cdc/"),
            ("cdc/", "cdc/"),
            ("/a/b/", "a/b/"),
        ] {
            assert_eq!(normalize_prefix(prefix).unwrap(), expected, "{prefix:?}");
        }
        for bad in ["a//b", "a/./b", "../a"] {
            assert!(normalize_prefix(bad).is_err(), "{bad:?}");
        }
    }
}
