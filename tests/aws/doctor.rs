//! `sluice doctor`'s destination checks against moto's S3: the probe object (bucket
//! present and writable vs missing, agreeing with the drain's code) and the bucket's
//! default encryption (absent → warn with the fix, present → ok naming the algorithm).

use crate::support::{self, Job, TestDb};
use aws_sdk_s3::types::{
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
    ServerSideEncryptionRule,
};
use support::aws::{AwsTarget, runtime, s3_client, sdk};

fn check(job: &Job, name: &str) -> (i32, serde_json::Value) {
    let run = job.run(&["doctor", "--json"], &[]);
    let doc = run.summary();
    let found = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {doc}"))
        .clone();
    (run.code, found)
}

#[test]
fn bucket_default_encryption_absent_warns_and_present_passes() {
    let moto = aws_or_skip!();
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["public.t"], "");

    let (_, writable) = check(&job, "destination writable");
    assert_eq!(writable["status"], "ok", "{writable}");
    assert!(
        target.keys().is_empty(),
        "the probe object was left behind: {:?}",
        target.keys()
    );

    let (_, bare) = check(&job, "destination encryption");
    assert_eq!(bare["status"], "warn", "{bare}");
    assert!(
        bare["detail"]
            .as_str()
            .unwrap()
            .contains("sluice's own writes request SSE-S3"),
        "{bare}"
    );
    assert!(
        bare["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("put-bucket-encryption --bucket {}", target.bucket)),
        "{bare}"
    );

    runtime().block_on(async {
        let rule = ServerSideEncryptionRule::builder()
            .apply_server_side_encryption_by_default(
                ServerSideEncryptionByDefault::builder()
                    .sse_algorithm(ServerSideEncryption::AwsKms)
                    .kms_master_key_id("alias/sluice-test")
                    .build()
                    .unwrap(),
            )
            .build();
        s3_client(&sdk(&moto).await)
            .put_bucket_encryption()
            .bucket(&target.bucket)
            .server_side_encryption_configuration(
                ServerSideEncryptionConfiguration::builder()
                    .rules(rule)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect("put bucket encryption");
    });
    let (_, on) = check(&job, "destination encryption");
    assert_eq!(on["status"], "ok", "{on}");
    assert_eq!(
        on["detail"],
        format!(
            "s3://{}: default encryption aws:kms (key alias/sluice-test)",
            target.bucket
        )
    );
}

#[test]
fn a_missing_bucket_fails_writable_with_the_drains_code() {
    let moto = aws_or_skip!();
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_s3_missing");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let mut target = AwsTarget::new(&moto);
    target.bucket = support::aws::unique_name("sluice-missing");
    let job = target.job(&db, &["public.t"], "");
    let (code, writable) = check(&job, "destination writable");
    assert_eq!(code, 5);
    assert_eq!(writable["status"], "fail", "{writable}");
    // A first run may write nothing (no changes yet); one with a change must write.
    let first = job.run(&["drain"], &[]);
    db.sql("INSERT INTO t VALUES (1)");
    let drain = if first.code == 0 {
        job.run(&["drain"], &[])
    } else {
        first
    };
    assert_ne!(drain.code, 0, "{}", drain.stderr);
    assert_eq!(
        writable["code"].as_str().unwrap(),
        drain.error_code(),
        "{}",
        drain.stdout
    );
    let (_, encryption) = check(&job, "destination encryption");
    assert_eq!(encryption["status"], "warn", "{encryption}");
}
