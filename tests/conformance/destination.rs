//! One destination conformance suite (the `Destination` contract in
//! `src/destination/mod.rs`), run against the local directory and against S3 (moto's
//! server mode through the real `aws-sdk-s3` client).

use std::path::Path;

use crate::support::{self, proxy::Proxy};
use sluice::destination::Destination;
use sluice::destination::local::LocalDestination;
use sluice::destination::s3::{MultipartSettings, S3Destination};
use sluice::error::Code;
use support::aws::{create_bucket, list_keys, runtime, sdk};

/// Multipart settings small enough that an 11 MiB file is uploaded in three parts.
const SMALL_MULTIPART: MultipartSettings = MultipartSettings {
    threshold: 5 * 1024 * 1024,
    part_size: 5 * 1024 * 1024,
};

async fn parts_are_never_overwritten(dest: &dyn Destination, scratch: &Path) {
    let src = scratch.join("src");
    std::fs::write(&src, b"one").unwrap();
    dest.put_part("t/cdc-1.parquet", &src).await.unwrap();
    std::fs::write(&src, b"two").unwrap();
    let err = dest.put_part("t/cdc-1.parquet", &src).await.unwrap_err();
    assert_eq!(err.code(), Code::DestinationExists, "{}", err.chain());
    assert_eq!(dest.get("t/cdc-1.parquet").await.unwrap().unwrap(), b"one");
    assert_eq!(dest.list("t/").await.unwrap(), vec!["t/cdc-1.parquet"]);
}

async fn markers_are_replaced(dest: &dyn Destination, _scratch: &Path) {
    dest.put_marker("t/_SUCCESS", b"1").await.unwrap();
    dest.put_marker("t/_SUCCESS", b"2").await.unwrap();
    assert_eq!(dest.get("t/_SUCCESS").await.unwrap().unwrap(), b"2");
    assert_eq!(dest.get("t/missing.json").await.unwrap(), None);
}

async fn list_is_sorted_and_scoped(dest: &dyn Destination, scratch: &Path) {
    let src = scratch.join("src");
    std::fs::write(&src, b"x").unwrap();
    for key in ["b/x/1", "a/2", "a/1", "ab/1"] {
        dest.put_part(key, &src).await.unwrap();
    }
    dest.put_marker("a/manifest.json", b"{}").await.unwrap();
    assert_eq!(
        dest.list("a/").await.unwrap(),
        vec!["a/1", "a/2", "a/manifest.json"]
    );
    assert_eq!(
        dest.list("").await.unwrap(),
        vec!["a/1", "a/2", "a/manifest.json", "ab/1", "b/x/1"]
    );
    assert!(dest.list("zzz/").await.unwrap().is_empty());
}

async fn invalid_keys_are_refused(dest: &dyn Destination, scratch: &Path) {
    let src = scratch.join("src");
    std::fs::write(&src, b"x").unwrap();
    for key in ["../x", "a//b", "", "a/./b", "/a"] {
        assert!(dest.put_part(key, &src).await.is_err(), "{key:?}");
        assert!(dest.put_marker(key, b"x").await.is_err(), "{key:?}");
    }
    assert!(dest.list("").await.unwrap().is_empty());
}

async fn a_failed_upload_leaves_nothing(dest: &dyn Destination, scratch: &Path) {
    let err = dest
        .put_part("t/cdc-gone.parquet", &scratch.join("does-not-exist"))
        .await
        .unwrap_err();
    assert_ne!(err.code(), Code::DestinationExists);
    assert!(dest.list("").await.unwrap().is_empty());
    assert_eq!(dest.get("t/cdc-gone.parquet").await.unwrap(), None);
}

async fn large_parts_arrive_whole(dest: &dyn Destination, scratch: &Path) {
    // 11 MiB of non-repeating bytes: three parts on S3 with SMALL_MULTIPART.
    let mut bytes = Vec::with_capacity(11 << 20);
    let mut x: u32 = 0x9e37_79b9;
    while bytes.len() < 11 << 20 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let src = scratch.join("big");
    std::fs::write(&src, &bytes).unwrap();
    dest.put_part("t/cdc-big.parquet", &src).await.unwrap();
    let back = dest.get("t/cdc-big.parquet").await.unwrap().unwrap();
    assert!(back == bytes, "the large part came back different");
    let err = dest.put_part("t/cdc-big.parquet", &src).await.unwrap_err();
    assert_eq!(err.code(), Code::DestinationExists, "{}", err.chain());
}

/// Generates one test per case and backend.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod local {
            $(#[test] fn $case() { super::with_local(|d, s| Box::pin(super::$case(d, s))); })*
        }
        mod s3 {
            $(#[test] fn $case() { super::with_s3(|d, s| Box::pin(super::$case(d, s))); })*
        }
    };
}

conformance!(
    parts_are_never_overwritten,
    markers_are_replaced,
    list_is_sorted_and_scoped,
    invalid_keys_are_refused,
    a_failed_upload_leaves_nothing,
    large_parts_arrive_whole,
);

type Case = for<'a> fn(
    &'a dyn Destination,
    &'a Path,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

fn with_local(case: Case) {
    let dir = tempfile::tempdir().unwrap();
    let dest = LocalDestination::new(&dir.path().join("out")).unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    runtime().block_on(case(&dest, &scratch));
}

fn with_s3(case: Case) {
    let Some(moto) = support::service_url("SLUICE_TEST_AWS_ENDPOINT") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let bucket = create_bucket(&sdk, "sluice-conf").await;
        let dest = S3Destination::new(&sdk, &bucket, "conformance/", SMALL_MULTIPART).unwrap();
        case(&dest, dir.path()).await;
        // Nothing escaped the prefix.
        for key in list_keys(&sdk, &bucket).await {
            assert!(key.starts_with("conformance/"), "{key}");
        }
    });
}

#[test]
fn s3_keys_join_the_prefix_without_extra_slashes() {
    let moto = aws_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let bucket = create_bucket(&sdk, "sluice-prefix").await;
        for prefix in ["", "/", "p", "p/", "/q/r/"] {
            let dest =
                S3Destination::new(&sdk, &bucket, prefix, MultipartSettings::default()).unwrap();
            dest.put_marker(&format!("t{}/_SUCCESS", prefix.len()), b"1")
                .await
                .unwrap();
        }
        assert_eq!(
            list_keys(&sdk, &bucket).await,
            vec![
                "p/t1/_SUCCESS",
                "p/t2/_SUCCESS",
                "q/r/t5/_SUCCESS",
                "t0/_SUCCESS",
                "t1/_SUCCESS"
            ]
        );
        let dest = S3Destination::new(&sdk, &bucket, "p", MultipartSettings::default()).unwrap();
        assert_eq!(dest.describe(), format!("s3://{bucket}/p/"));
        assert_eq!(
            dest.list("").await.unwrap(),
            vec!["t1/_SUCCESS", "t2/_SUCCESS"]
        );
    });
}

#[test]
fn s3_unreachable_is_transient_and_writes_nothing() {
    let moto = aws_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    runtime().block_on(async {
        let direct = sdk(&moto).await;
        let bucket = create_bucket(&direct, "sluice-sever").await;
        let proxied = sdk(&proxy.url())
            .await
            .to_builder()
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
            .build();
        let dest = S3Destination::new(&proxied, &bucket, "", MultipartSettings::default()).unwrap();
        dest.put_part("t/ok", &src).await.unwrap();
        proxy.sever();
        let err = dest.put_part("t/cut", &src).await.unwrap_err();
        assert_eq!(err.code(), Code::DestinationUnavailable, "{}", err.chain());
        assert_eq!(err.class().exit_code(), 3);
        assert!(err.hint_text().is_some());
        let err = dest.put_marker("t/_SUCCESS", b"1").await.unwrap_err();
        assert_eq!(err.code(), Code::DestinationUnavailable, "{}", err.chain());
        proxy.restore();
        assert_eq!(dest.list("t/").await.unwrap(), vec!["t/ok"]);
        dest.put_part("t/cut", &src).await.unwrap();
    });
}

#[test]
fn s3_missing_bucket_is_a_config_error() {
    let moto = aws_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let dest = S3Destination::new(
            &sdk,
            &support::aws::unique_name("sluice-missing"),
            "",
            MultipartSettings::default(),
        )
        .unwrap();
        let err = dest.put_part("t/a", &src).await.unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid, "{}", err.chain());
        assert!(err.hint_text().unwrap().contains("destination.bucket"));
    });
}

#[test]
fn s3_objects_carry_a_crc32c_checksum() {
    let moto = aws_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::write(&small, b"hello parquet").unwrap();
    let big = dir.path().join("big");
    std::fs::write(&big, vec![7u8; 6 << 20]).unwrap();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let bucket = create_bucket(&sdk, "sluice-crc").await;
        let dest = S3Destination::new(&sdk, &bucket, "", SMALL_MULTIPART).unwrap();
        dest.put_part("t/small", &small).await.unwrap();
        dest.put_part("t/big", &big).await.unwrap();
        dest.put_marker("t/_SUCCESS", b"{}").await.unwrap();
        let client = support::aws::s3_client(&sdk);
        for key in ["t/small", "t/big", "t/_SUCCESS"] {
            let head = client
                .head_object()
                .bucket(&bucket)
                .key(key)
                .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
                .send()
                .await
                .unwrap();
            assert!(
                head.checksum_crc32_c().is_some(),
                "{key} has no CRC32C checksum"
            );
        }
        // CRC32C of "hello parquet" (base64 of the big-endian value), computed independently.
        let head = client
            .head_object()
            .bucket(&bucket)
            .key("t/small")
            .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(head.checksum_crc32_c(), Some("iMdVbA=="));
    });
}
