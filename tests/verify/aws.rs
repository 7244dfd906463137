//! On S3 and DynamoDB (moto, through the real SDK clients): a change object deleted from
//! the bucket (as a lifecycle rule or a hand would) is found by key, `--repair` writes the
//! missing rows to the bucket, and the next verify — the CLI's and the Lambda face's —
//! is clean; the bucket's replay then equals the source.
//! Objects: database `t_verify_s3_*`, a fresh bucket and state table.

use std::time::Duration;

use super::{CONFIG, change_parts, insert, part_with, verify};
use crate::compaction::{data_files, replayed, rows_of};
use crate::support::aws::{AwsTarget, runtime, s3_client, sdk};
use crate::support::lambda_api::{Function, Outcome, RuntimeApi};
use crate::support::{Job, TestDb};

/// Rows 1..=200, then 301 and 302, each drained into the bucket; the object holding 301
/// and 302 then deleted there (as a lifecycle rule or a hand would). Its key.
pub(super) fn lose_the_object_of_301(
    db: &TestDb,
    job: &Job,
    target: &AwsTarget,
    moto: &str,
) -> String {
    assert_eq!(job.drain()["status"], "drained");
    db.sql(&insert("t", 1..=200));
    assert_eq!(job.drain()["status"], "drained");
    db.sql(&insert("t", 301..=302));
    assert_eq!(job.drain()["status"], "drained");

    // The object holding 301 and 302, deleted in the bucket.
    let out = target.fetch_output(job);
    let part = part_with(&change_parts(job, "t"), 301);
    let key = format!(
        "{}{}",
        target.prefix,
        part.strip_prefix(&out).unwrap().display()
    );
    runtime().block_on(async {
        s3_client(&sdk(moto).await)
            .delete_object()
            .bucket(&target.bucket)
            .key(&key)
            .send()
            .await
            .expect("delete_object");
    });
    key
}

#[test]
fn s3_a_deleted_change_object_is_found_by_key_and_repaired() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "verify_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], CONFIG);
    let key = lose_the_object_of_301(&db, &job, &target, &moto);
    assert!(!target.keys().contains(&key));

    let v = verify(&job, "t", &[]);
    assert_eq!(v.code, 5, "{}\n{}\n{}", v.line, v.report, v.stderr);
    assert_eq!(
        v.keys_and_kinds(),
        [
            ("id=301".to_owned(), "missing_in_lake".to_owned()),
            ("id=302".to_owned(), "missing_in_lake".to_owned())
        ],
        "{}",
        v.report
    );

    let repaired = verify(&job, "t", &["--repair"]);
    assert_eq!(
        repaired.code, 0,
        "{}\n{}\n{}",
        repaired.line, repaired.report, repaired.stderr
    );
    assert_eq!(repaired.report["repair"]["rows_written"], 2);

    // The Lambda face on the same bucket and state table: equal, metric 0.
    let api = RuntimeApi::start();
    let function = Function::start(&api, &job, &[]);
    let id = api.invoke(
        serde_json::json!({"action": "verify", "table": "t"}),
        Duration::from_secs(120),
    );
    let response = match api.wait(&id, Duration::from_secs(120)) {
        Outcome::Response(v) => v,
        Outcome::Error(e) => panic!("verify failed: {e}"),
    };
    assert_eq!(response["tables"][0]["mismatched_rows"], 0, "{response}");
    let emf = function.emf_lines();
    assert!(
        emf.iter()
            .any(|d| d["verify_mismatched_rows"] == 0 && d["table"] == "t"),
        "{emf:?}"
    );

    let dir = target.fetch_output(&job).join("t");
    assert_eq!(
        replayed(&rows_of(&dir, &data_files(&dir))),
        db.sql("SELECT coalesce(string_agg(id || '=' || v, ',' ORDER BY id), '') FROM t")
    );
}
