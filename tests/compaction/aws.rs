//! On S3 and DynamoDB (moto, through the real SDK clients): many small runs compacted —
//! S3 deletes included — and read back; a compaction killed after its manifest, finished
//! by the next; the Lambda face's `compact` action, with one EMF document per table.
//! Objects: database `t_compact_s3_*`, a fresh bucket and state table.

use std::time::Duration;

use super::postgres::{small_runs, source_text};
use super::{assert_reads, change_files, changes, compact, config_block, replayed, rows_of};
use crate::support::TestDb;
use crate::support::aws::AwsTarget;
use crate::support::lambda_api::{Function, Outcome, RuntimeApi};

#[test]
fn s3_parts_are_compacted_and_a_killed_compaction_is_finished() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "compact_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["public.t"], &config_block(1 << 20));
    job.drain();
    small_runs(&job, &db, 1, 12);
    target.fetch_output(&job);
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));

    let summary = compact(&job, &[]);
    assert_eq!(summary["tables"]["public.t"]["files_after"], 1, "{summary}");
    let keys = target.keys();
    let parts: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with("cdc/public.t/") && k.ends_with(".parquet"))
        .collect();
    assert_eq!(parts.len(), 1, "{keys:?}");
    assert!(parts[0].starts_with("cdc/public.t/compacted-"), "{parts:?}");
    assert!(
        keys.iter()
            .any(|k| k.starts_with("cdc/public.t/_compactions/"))
    );
    target.fetch_output(&job);
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));

    // Killed after its manifest, before removing anything: both copies are read once.
    small_runs(&job, &db, 13, 5);
    target.fetch_output(&job);
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let run = job.run(
        &["compact"],
        &[("SLUICE_FAULT", "compact_manifest_written")],
    );
    assert_eq!(run.code, -1, "{}", run.stderr);
    target.fetch_output(&job);
    assert_eq!(change_files(&dir).len(), 7, "inputs and output both there");
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    let next = compact(&job, &[]);
    assert_eq!(next["tables"]["public.t"]["finished_earlier"], 6, "{next}");
    target.fetch_output(&job);
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(rows.len(), expected.len(), "no copy left");
    assert_eq!(change_files(&dir).len(), 1);

    // The DynamoDB record shows in `sluice status`.
    let status = job.run(&["status", "--json"], &[]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let jobs = status.summary()["jobs"].clone();
    let row = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == db.name.as_str())
        .unwrap();
    assert_eq!(row["compaction"]["public.t"]["files_after"], 1, "{row}");
}

#[test]
fn the_lambda_compact_action_compacts_and_reports_metrics_per_table() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "compact_lambda");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = crate::support::Job::postgres(&db, &["public.t"], &config_block(1 << 20));
    job.drain();
    small_runs(&job, &db, 1, 6);
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let api = RuntimeApi::start();
    let function = Function::start(&api, &job, &[]);
    let id = api.invoke(
        serde_json::json!({"action": "compact", "tables": ["public.t"]}),
        Duration::from_secs(60),
    );
    let response = match api.wait(&id, Duration::from_secs(60)) {
        Outcome::Response(v) => v,
        Outcome::Error(e) => panic!("compact failed: {e}"),
    };
    assert_eq!(response["status"], "compacted", "{response}");
    assert_eq!(
        response["tables"]["public.t"]["files_after"], 1,
        "{response}"
    );
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    let emf = function.emf_lines();
    let doc = emf
        .iter()
        .find(|d| d.get("compaction_files_before").is_some())
        .unwrap_or_else(|| panic!("no compaction EMF line in {emf:?}"));
    assert_eq!(doc["table"], "public.t");
    assert_eq!(doc["compaction_files_before"], 6);
    assert_eq!(doc["compaction_files_after"], 1);
    assert_eq!(doc["compaction_failed"], 0);
    // A bad payload is a config error naming it.
    let id = api.invoke(
        serde_json::json!({"action": "compact", "tables": "t"}),
        Duration::from_secs(60),
    );
    match api.wait(&id, Duration::from_secs(60)) {
        Outcome::Error(e) => assert!(e.to_string().contains("SLUICE_CONFIG_INVALID"), "{e}"),
        Outcome::Response(v) => panic!("accepted {v}"),
    }
}

/// MariaDB's parts on S3 and its state in DynamoDB, compacted and read back.
#[test]
fn mariadb_parts_on_s3_are_compacted() {
    let admin = mysql_or_skip!();
    let moto = aws_or_skip!();
    let db = crate::support::TestMysqlDb::new(&admin, "compact_my_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(40)) ENGINE=InnoDB");
    let target = AwsTarget::new(&moto);
    let job = crate::support::Job::mysql(&db, &["t"], "", &config_block(1 << 20));
    // The same job, writing to the bucket and the state table instead.
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    let yaml: String = yaml
        .lines()
        .map(|line| {
            if line.starts_with("destination:") {
                format!(
                    "destination: {{ type: s3, bucket: {}, prefix: '{}', endpoint_url: '{}' }}",
                    target.bucket, target.prefix, target.s3_endpoint
                )
            } else if line.starts_with("state:") {
                format!(
                    "state: {{ type: dynamodb, table: {}, endpoint_url: '{}' }}",
                    target.table, target.dynamodb_endpoint
                )
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&job.config, yaml).unwrap();
    job.drain();
    for i in 1..=8 {
        db.sql(&format!(
            "INSERT INTO t VALUES ({i}, 'v{i}'); UPDATE t SET v = 'w{i}' WHERE id = {}",
            (i + 1) / 2
        ));
        job.drain();
    }
    target.fetch_output(&job);
    let dir = job.out().join("t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let summary = compact(&job, &[]);
    assert_eq!(summary["tables"]["t"]["files_after"], 1, "{summary}");
    target.fetch_output(&job);
    let rows = assert_reads(&job.out(), "t", &expected);
    assert_eq!(rows.len(), expected.len());
    let source = db.sql("SELECT group_concat(concat(id, '=', v) ORDER BY id SEPARATOR ',') FROM t");
    assert_eq!(replayed(&rows), source);
}
