//! On S3 and DynamoDB (moto, through the real SDK clients): a key erased from a baseline,
//! change parts and a compacted part in the bucket; and the Lambda face's `forget` action.
//! Objects: database `t_forget_s3_*` / `t_forget_lambda_*`, a fresh bucket and state table.

use std::time::Duration;

use super::{assert_no_row, assert_nowhere, folder_rows};
use crate::compaction::{compact, config_block};
use crate::support::aws::AwsTarget;
use crate::support::lambda_api::{Function, Outcome, RuntimeApi};
use crate::support::{Job, TestDb, replay};

fn source(db: &TestDb) -> String {
    db.sql(
        "SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ',' ORDER BY id), '') FROM t",
    )
}

fn replayed(out: &std::path::Path) -> String {
    let mut rows: Vec<(i64, String)> = replay(&folder_rows(out, "t"), &["id"])
        .values()
        .map(|r| {
            (
                r["id"].as_deref().unwrap().parse().unwrap(),
                r["v"].clone().unwrap_or_else(|| "NULL".into()),
            )
        })
        .collect();
    rows.sort();
    rows.iter()
        .map(|(id, v)| format!("{id}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A baseline, two drains of updates to key 7, a compaction, then key 7 deleted and
/// drained.
fn history(job: &Job, db: &TestDb, env: &[(&str, &str)]) {
    let drain = || {
        let run = job.run(&["drain"], env);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    drain();
    db.sql("UPDATE t SET v = 'PII-seven-1' WHERE id = 7; UPDATE t SET v = 'w2' WHERE id = 2");
    drain();
    db.sql("UPDATE t SET v = 'PII-seven-2' WHERE id = 7; INSERT INTO t VALUES (20, 'v20')");
    drain();
    let run = job.run(&["compact"], env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    db.sql("DELETE FROM t WHERE id = 7");
    drain();
}

fn table(db: &TestDb) {
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, CASE WHEN i = 7 THEN 'PII-seven-0' ELSE 'v' || i END FROM generate_series(1, 10) i");
}

#[test]
fn s3_forget_erases_a_key_from_every_object() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "forget_s3");
    table(&db);
    let target = AwsTarget::new(&moto);
    let job = target.job(
        &db,
        &["t"],
        &format!("initial: snapshot\n{}", config_block(1 << 20)),
    );
    history(&job, &db, &[]);
    let out = target.fetch_output(&job);
    assert_eq!(replayed(&out), source(&db));
    let run = job.run(&["forget", "--table", "t", "--key", "id=7"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "forgotten", "{summary}");
    let out = target.fetch_output(&job);
    assert_nowhere(&out, "PII-seven");
    assert_no_row(&out, "id", "7");
    assert_eq!(replayed(&out), source(&db));
    assert!(
        target.keys().iter().any(|k| k.contains("/t/_forgets/")),
        "the record is in the bucket"
    );
    // The table goes on: a drain and a compaction after the forget.
    db.sql("UPDATE t SET v = 'w2+' WHERE id = 2");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(compact(&job, &[])["status"], "compacted");
    let out = target.fetch_output(&job);
    assert_eq!(replayed(&out), source(&db));
}

#[test]
fn the_lambda_forget_action_forgets_and_refuses_a_bad_payload() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "forget_lambda");
    table(&db);
    let job = Job::postgres(
        &db,
        &["t"],
        &format!("initial: snapshot\n{}", config_block(1 << 20)),
    );
    history(&job, &db, &[]);
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let id = api.invoke(
        serde_json::json!({"action": "forget", "table": "t", "keys": ["id=7"]}),
        Duration::from_secs(60),
    );
    let response = match api.wait(&id, Duration::from_secs(60)) {
        Outcome::Response(v) => v,
        Outcome::Error(e) => panic!("forget failed: {e}"),
    };
    assert_eq!(response["status"], "forgotten", "{response}");
    assert_nowhere(&job.out(), "PII-seven");
    assert_eq!(replayed(&job.out()), source(&db));
    let id = api.invoke(
        serde_json::json!({"action": "forget", "table": "t", "keys": "id=7"}),
        Duration::from_secs(60),
    );
    match api.wait(&id, Duration::from_secs(60)) {
        Outcome::Error(e) => assert!(e.to_string().contains("SLUICE_CONFIG_INVALID"), "{e}"),
        Outcome::Response(v) => panic!("accepted {v}"),
    }
}
