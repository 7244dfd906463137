//! AWS SDK configuration and error classification shared by the S3 destination and the
//! DynamoDB state store (and the Lambda face).
//!
//! [`sdk_config`] builds one `SdkConfig`: credentials and region from the standard
//! provider chain (environment, profile, web identity, ECS/EKS, IMDS), an explicit
//! `endpoint_url` from the config or else `AWS_ENDPOINT_URL` (read by the loader), retries
//! from the SDK's standard mode (`AWS_MAX_ATTEMPTS` / `AWS_RETRY_MODE` override it), and
//! an HTTPS client on rustls with the `ring` crypto provider. [`shared_config`] memoizes it
//! per `(endpoint, region)` so a process builds its HTTP client and credential cache once,
//! however many drains it runs; the process must keep one async runtime for its lifetime
//! (the CLI and the Lambda face both do).
//!
//! [`classify`] sorts an SDK failure into what sluice does about it: network failures,
//! timeouts, 5xx and throttling are transient; authentication and authorization failures
//! are refusals naming the IAM action; a missing bucket or table is a config error.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use crate::error::{Code, Error, Result};

/// Time allowed to open a TCP + TLS connection before the attempt counts as failed.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Time allowed from sending a request to the first byte of its answer (and for the whole
/// attempt: sluice only reads small documents) before the attempt counts as failed: a
/// network path that goes silent (no reset) fails the attempt instead of hanging the run. It includes sending the body — at most one 32 MiB single put or a
/// 16 MiB multipart part — so it stays generous for slow links.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Overrides [`READ_TIMEOUT`] (seconds, > 0): for very slow links, and for tests.
pub const READ_TIMEOUT_ENV: &str = "SLUICE_AWS_READ_TIMEOUT_SECONDS";

/// The read timeout in force: [`READ_TIMEOUT_ENV`] when it holds a positive number.
pub fn read_timeout() -> Duration {
    std::env::var(READ_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(READ_TIMEOUT, Duration::from_secs_f64)
}

/// Builds an SDK config from the standard provider chain, with `endpoint_url` (else
/// `AWS_ENDPOINT_URL`) and `region` (else the chain's) when given. Fails with
/// `SLUICE_CONFIG_INVALID` when no region can be found.
pub async fn sdk_config(endpoint_url: Option<&str>, region: Option<&str>) -> Result<SdkConfig> {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .read_timeout(read_timeout())
                .operation_attempt_timeout(read_timeout())
                .build(),
        );
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url);
    }
    if let Some(region) = region {
        loader = loader.region(Region::new(region.to_owned()));
    }
    let config = loader.load().await;
    if config.region().is_none() {
        return Err(
            Error::new(Code::ConfigInvalid, "no AWS region configured").hint(
                "set `region` in the destination/state config, or AWS_REGION in the environment",
            ),
        );
    }
    Ok(config)
}

type ConfigKey = (Option<String>, Option<String>);

/// [`sdk_config`], built once per process for each `(endpoint_url, region)`.
pub async fn shared_config(endpoint_url: Option<&str>, region: Option<&str>) -> Result<SdkConfig> {
    static CONFIGS: OnceLock<tokio::sync::Mutex<HashMap<ConfigKey, SdkConfig>>> = OnceLock::new();
    let mut configs = CONFIGS.get_or_init(Default::default).lock().await;
    let key = (endpoint_url.map(str::to_owned), region.map(str::to_owned));
    if let Some(config) = configs.get(&key) {
        return Ok(config.clone());
    }
    let config = sdk_config(endpoint_url, region).await?;
    configs.insert(key, config.clone());
    Ok(config)
}

/// True when requests go to a custom endpoint (moto, LocalStack, MinIO), which usually
/// needs path-style S3 addressing.
pub fn custom_endpoint(config: &SdkConfig) -> bool {
    config.endpoint_url().is_some() || std::env::var_os("AWS_ENDPOINT_URL_S3").is_some()
}

/// What went wrong with an AWS call, as far as sluice's reaction is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Network, timeout, 5xx, throttling: retry later.
    Unavailable,
    /// Credentials missing or rejected, or the action not allowed.
    Denied,
    /// The bucket or table does not exist.
    Missing,
    /// Any other service answer: the request is wrong for this resource and will be
    /// refused again (the caller checks the codes it expects, such as 412, first).
    Other,
}

const DENIED_CODES: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
    "UnrecognizedClientException",
    "MissingAuthenticationTokenException",
    "InvalidSignatureException",
];

const UNAVAILABLE_CODES: &[&str] = &[
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
    "TransactionInProgressException",
    "LimitExceededException",
    "InternalFailure",
    "ServiceUnavailableException",
    // The body was damaged or cut in transit: sending it again succeeds.
    "BadDigest",
    "IncompleteBody",
    "XAmzContentSHA256Mismatch",
    // A conflicting operation on the bucket is in progress.
    "OperationAborted",
];

const MISSING_CODES: &[&str] = &["NoSuchBucket", "ResourceNotFoundException"];

/// Sorts an SDK failure (see [`Failure`]).
pub fn classify<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Failure {
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Failure::Unavailable
        }
        // Raised before anything was sent: most often no credentials could be resolved.
        SdkError::ConstructionFailure(_) => Failure::Denied,
        SdkError::ServiceError(ctx) => {
            let status = ctx.raw().status().as_u16();
            let code = ctx.err().code().unwrap_or_default();
            if MISSING_CODES.contains(&code) {
                Failure::Missing
            } else if DENIED_CODES.contains(&code) || status == 401 || status == 403 {
                Failure::Denied
            } else if UNAVAILABLE_CODES.contains(&code) || status >= 500 || status == 429 {
                Failure::Unavailable
            } else {
                Failure::Other
            }
        }
        _ => Failure::Unavailable,
    }
}

/// The service's error code and HTTP status, for messages (`AccessDenied (HTTP 403)`).
pub fn describe_failure<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> String {
    match err {
        SdkError::ServiceError(ctx) => format!(
            "{} (HTTP {})",
            ctx.err().code().unwrap_or("unknown error"),
            ctx.raw().status().as_u16()
        ),
        SdkError::TimeoutError(_) => "timed out".to_owned(),
        SdkError::DispatchFailure(_) => "could not reach the endpoint".to_owned(),
        SdkError::ResponseError(_) => "unreadable response".to_owned(),
        SdkError::ConstructionFailure(_) => "request not sent (credentials?)".to_owned(),
        _ => "request failed".to_owned(),
    }
}

/// A failure's sort ([`classify`]) and its text for messages: [`describe_failure`], then
/// the service's own message when it sent one (`AccessDenied (HTTP 403): User … is not
/// authorized …`).
pub fn explain<E>(err: &SdkError<E, HttpResponse>) -> (Failure, String)
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let detail = err.message().map(|m| format!(": {m}")).unwrap_or_default();
    (classify(err), format!("{}{detail}", describe_failure(err)))
}

/// The service error code, when the service answered.
pub fn service_code<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Option<&str> {
    match err {
        SdkError::ServiceError(ctx) => ctx.err().code(),
        _ => None,
    }
}

/// The HTTP status, when the service answered.
pub fn service_status<E>(err: &SdkError<E, HttpResponse>) -> Option<u16> {
    match err {
        SdkError::ServiceError(ctx) => Some(ctx.raw().status().as_u16()),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aws_sdk_s3::error::{ConnectorError, ErrorMetadata};
    use aws_sdk_s3::operation::put_object::PutObjectError;
    use aws_sdk_s3::primitives::SdkBody;

    /// A service error answer with `code` and HTTP `status`, as the SDK would return it.
    pub(crate) fn service_error(code: &str, status: u16) -> SdkError<PutObjectError, HttpResponse> {
        let err = PutObjectError::generic(ErrorMetadata::builder().code(code).build());
        let raw = HttpResponse::new(status.try_into().unwrap(), SdkBody::empty());
        SdkError::service_error(err, raw)
    }

    #[test]
    fn failures_are_sorted_by_what_to_do() {
        let cases = [
            ("AccessDenied", 403, Failure::Denied),
            ("InvalidAccessKeyId", 403, Failure::Denied),
            ("UnrecognizedClientException", 400, Failure::Denied),
            ("SlowDown", 503, Failure::Unavailable),
            ("ThrottlingException", 400, Failure::Unavailable),
            (
                "ProvisionedThroughputExceededException",
                400,
                Failure::Unavailable,
            ),
            ("InternalError", 500, Failure::Unavailable),
            ("Whatever", 502, Failure::Unavailable),
            ("NoSuchBucket", 404, Failure::Missing),
            ("ResourceNotFoundException", 400, Failure::Missing),
            ("ValidationException", 400, Failure::Other),
            ("PermanentRedirect", 301, Failure::Other),
            ("AuthorizationHeaderMalformed", 400, Failure::Other),
            ("KMS.NotFoundException", 400, Failure::Other),
            ("BadDigest", 400, Failure::Unavailable),
            ("OperationAborted", 409, Failure::Unavailable),
            ("PreconditionFailed", 412, Failure::Other),
        ];
        for (code, status, expected) in cases {
            assert_eq!(classify(&service_error(code, status)), expected, "{code}");
        }
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let dispatch: SdkError<PutObjectError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io(io.into()));
        assert_eq!(classify(&dispatch), Failure::Unavailable);
        let timeout: SdkError<PutObjectError, HttpResponse> =
            SdkError::timeout_error("attempt timed out");
        assert_eq!(classify(&timeout), Failure::Unavailable);
        let unsigned: SdkError<PutObjectError, HttpResponse> =
            SdkError::construction_failure("no credentials");
        assert_eq!(classify(&unsigned), Failure::Denied);
        assert_eq!(
            describe_failure(&service_error("AccessDenied", 403)),
            "AccessDenied (HTTP 403)"
        );
    }
}
