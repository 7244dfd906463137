//! Encryption at rest: every object sluice writes to S3 (single-request parts, multipart
//! parts, `_manifest.json`, `_SUCCESS`) carries the server-side encryption it requested,
//! read back with `HeadObject` from moto's server mode through the real SDK: SSE-S3 by
//! default, SSE-KMS with the configured key id, also through the real binary's config.

use std::path::Path;

use crate::support::{self, TestDb};
use aws_sdk_s3::types::ServerSideEncryption;
use sluice::destination::Destination;
use sluice::destination::s3::{Encryption, MultipartSettings, S3Destination, SseMode};
use support::aws::{create_bucket, list_keys, runtime, s3_client, sdk};

/// Small enough that a 6 MiB file goes through CreateMultipartUpload.
const SMALL_MULTIPART: MultipartSettings = MultipartSettings {
    threshold: 5 * 1024 * 1024,
    part_size: 5 * 1024 * 1024,
};

/// The (encryption, KMS key id) S3 reports for every key in `bucket`.
async fn encryption_of_every_object(
    sdk: &aws_config::SdkConfig,
    bucket: &str,
) -> Vec<(String, Option<ServerSideEncryption>, Option<String>)> {
    let client = s3_client(sdk);
    let mut out = Vec::new();
    for key in list_keys(sdk, bucket).await {
        let head = client
            .head_object()
            .bucket(bucket)
            .key(&key)
            .send()
            .await
            .expect("head");
        out.push((
            key,
            head.server_side_encryption().cloned(),
            head.ssekms_key_id().map(str::to_owned),
        ));
    }
    out
}

/// Writes a single-request part, a multipart part and both markers through `dest`.
async fn write_everything(dest: &S3Destination, scratch: &Path) {
    let small = scratch.join("small");
    std::fs::write(&small, b"a small part").unwrap();
    dest.put_part("t/cdc-1.parquet", &small).await.unwrap();
    let large = scratch.join("large");
    std::fs::write(&large, vec![7u8; 6 * 1024 * 1024]).unwrap();
    dest.put_part("t/cdc-2.parquet", &large).await.unwrap();
    dest.put_marker("t/_manifest.json", b"{}").await.unwrap();
    dest.put_marker("t/_SUCCESS", b"{}").await.unwrap();
}

#[test]
fn every_object_is_written_with_sse_s3_by_default() {
    let moto = aws_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let bucket = create_bucket(&sdk, "sluice-sse").await;
        let dest = S3Destination::new(&sdk, &bucket, "enc/", SMALL_MULTIPART).unwrap();
        write_everything(&dest, dir.path()).await;
        let objects = encryption_of_every_object(&sdk, &bucket).await;
        assert_eq!(objects.len(), 4, "{objects:?}");
        for (key, sse, kms) in objects {
            assert_eq!(sse, Some(ServerSideEncryption::Aes256), "{key}");
            assert_eq!(kms, None, "{key}");
        }
    });
}

#[test]
fn kms_mode_sends_the_key_id_on_every_object() {
    let moto = aws_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let key_id = "arn:aws:kms:us-east-1:123456789012:key/0d6a6c2e-5b7e-4a3c-9b4e-1f2a3b4c5d6e";
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let bucket = create_bucket(&sdk, "sluice-kms").await;
        let dest = S3Destination::new(&sdk, &bucket, "enc/", SMALL_MULTIPART)
            .unwrap()
            .with_encryption(Encryption {
                mode: SseMode::SseKms,
                kms_key_id: Some(key_id.to_owned()),
            })
            .unwrap();
        write_everything(&dest, dir.path()).await;
        let objects = encryption_of_every_object(&sdk, &bucket).await;
        assert_eq!(objects.len(), 4, "{objects:?}");
        for (key, sse, kms) in objects {
            assert_eq!(sse, Some(ServerSideEncryption::AwsKms), "{key}");
            assert_eq!(kms.as_deref(), Some(key_id), "{key}");
        }
    });
}

#[test]
fn a_kms_key_without_kms_mode_is_refused() {
    let moto = aws_or_skip!();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let err = S3Destination::new(&sdk, "b", "", SMALL_MULTIPART)
            .unwrap()
            .with_encryption(Encryption {
                mode: SseMode::SseS3,
                kms_key_id: Some("alias/x".into()),
            })
            .unwrap_err();
        assert_eq!(err.code(), sluice::error::Code::ConfigInvalid);
        assert!(err.to_string().contains("kms_key_id"), "{err}");
    });
}

#[test]
fn a_drain_configured_for_kms_encrypts_parts_and_markers() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "sse_drain");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let rt = runtime();
    let bucket = rt.block_on(async { create_bucket(&sdk(&moto).await, "sluice-sse-drain").await });
    let key_id = "alias/sluice-test";
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.yaml");
    std::fs::write(
        &config,
        format!(
            "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [t]\n  postgres: {{ slot: s_{job}, publication: p_{job} }}\n\
             destination:\n  type: s3\n  bucket: {bucket}\n  prefix: cdc/\n  endpoint_url: '{moto}'\n  encryption: {{ mode: sse-kms, kms_key_id: {key_id} }}\n\
             state: {{ type: local, path: {state} }}\n",
            job = db.name,
            state = dir.path().join("state").display(),
        ),
    )
    .unwrap();
    let job = support::Job {
        dir,
        config,
        url_env: ("SLUICE_TEST_SOURCE_URL".into(), db.url.clone()),
    };
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g");
    let summary = job.drain();
    assert_eq!(summary["rows"], 10, "{summary}");
    let objects =
        rt.block_on(async { encryption_of_every_object(&sdk(&moto).await, &bucket).await });
    let keys: Vec<&str> = objects.iter().map(|o| o.0.as_str()).collect();
    for want in ["cdc/t/_manifest.json", "cdc/t/_SUCCESS"] {
        assert!(keys.contains(&want), "{want} missing from {keys:?}");
    }
    assert!(
        keys.iter().any(|k| k.ends_with(".parquet")),
        "no part in {keys:?}"
    );
    for (key, sse, kms) in &objects {
        assert_eq!(sse, &Some(ServerSideEncryption::AwsKms), "{key}");
        assert_eq!(kms.as_deref(), Some(key_id), "{key}");
    }
}
