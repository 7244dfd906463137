//! `table_format: iceberg` with `catalog: { type: glue }` against moto's Glue and S3 in
//! server mode, through the real SDK: a PostgreSQL job drains (also across a crash between
//! the Iceberg commit and the checkpoint), then **pyiceberg's `GlueCatalog`** loads each
//! table from moto and must read every change exactly once, with the declared types, and
//! replay to the source; the Glue table is pyiceberg's representation. Two writers of the
//! same metadata: one moves the pointer. A name holding a non-Iceberg Glue table and an
//! unreachable catalog are coded refusals. Objects: databases `ice_glue*`, Glue databases
//! `sluice_iceglue_*`.

use std::path::Path;

use aws_sdk_glue::types::Table;
use serde_json::Value;

use super::{doctor_row, source};
use crate::support::aws::{AwsTarget, runtime, sdk, unique_name};
use crate::support::proxy::Proxy;
use crate::support::{TestDb, readers};

/// A Glue database name unique to this test run.
pub(super) fn glue_database() -> String {
    unique_name("sluice_iceglue").replace('-', "_")
}

/// The `table_format` / `iceberg` YAML of a job whose Glue catalog is at `endpoint`.
pub(super) fn glue_yaml(endpoint: &str, database: &str, extra: &str) -> String {
    format!(
        "table_format: iceberg\niceberg:\n  catalog: {{ type: glue, endpoint_url: '{endpoint}', region: us-east-1 }}\n  namespace: {database}\n{extra}"
    )
}

pub(super) fn glue_table(moto: &str, database: &str, name: &str) -> Option<Table> {
    runtime().block_on(async {
        let client = aws_sdk_glue::Client::new(&sdk(moto).await);
        match client
            .get_table()
            .database_name(database)
            .name(name)
            .send()
            .await
        {
            Ok(out) => out.table,
            Err(e) if sluice::aws::service_code(&e) == Some("EntityNotFoundException") => None,
            Err(e) => panic!("GetTable {database}.{name}: {e:?}"),
        }
    })
}

/// What pyiceberg's `GlueCatalog` (on moto's Glue and S3) reads from `database.table`,
/// replayed by `id` (latest change per key by `(__pos, __seq)`, deletes removed).
const READ: &str = concat!(
    crate::py_replay_by_id!(),
    r#"
import json, sys
from pyiceberg.catalog.glue import GlueCatalog
endpoint, database, name = sys.argv[1], sys.argv[2], sys.argv[3]
creds = {"access-key-id": "testing", "secret-access-key": "testing", "region": "us-east-1"}
props = {"glue.endpoint": endpoint, "s3.endpoint": endpoint}
props.update({"glue." + k: v for k, v in creds.items()})
props.update({"s3." + k: v for k, v in creds.items()})
table = GlueCatalog("glue", **props).load_table((database, name))
data = table.scan().to_arrow()
rows = data.to_pylist()
state = replay(rows)
print(json.dumps({
    "rows": data.num_rows,
    "distinct": len(set((r["__pos"], r["__seq"]) for r in rows)),
    "ops": sorted(data["__op"].to_pylist()),
    "types": {f.name: str(f.field_type) for f in table.schema().fields},
    "snapshots": [s.summary.operation.value for s in table.snapshots()],
    "files": len(list(table.scan().plan_files())),
    "metadata": table.metadata_location,
    "location": table.location(),
    "replayed": sorted([k, v] for k, v in state.items()),
}))
"#
);

fn pyiceberg(moto: &str, database: &str, table: &str) -> Option<Value> {
    let python = readers::python()?;
    let out = readers::run(
        &python,
        READ,
        &[Path::new(moto), Path::new(database), Path::new(table)],
    );
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
}

#[test]
fn iceberg_glue_drains_are_read_by_pyicebergs_glue_catalog_exactly_once() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_glue");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, amount numeric(12,2), at timestamptz, tags text[])");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let job = target.job(
        &db,
        &["t"],
        &glue_yaml(&moto, &database, "lease: { ttl_seconds: 2 }\n"),
    );
    // Doctor before any run: the database is missing and created by the first commit.
    let before = doctor_row(&job);
    assert_eq!(before["status"], "ok", "{before}");
    let detail = before["detail"].as_str().unwrap();
    assert!(
        detail.contains("t (created by its first commit)"),
        "{before}"
    );
    assert!(
        detail.contains(&format!(
            "database {database} (created by the first commit)"
        )),
        "{before}"
    );
    let Some(read) = super::drains_across_a_crash(&db, &job, &|| pyiceberg(&moto, &database, "t"))
    else {
        return;
    };
    let location = format!("s3://{}/{}t", target.bucket, target.prefix);
    assert_eq!(read["location"], location.as_str(), "{read}");

    // The Glue table is pyiceberg's representation of it.
    let table = glue_table(&moto, &database, "t").expect("the Glue table");
    assert_eq!(table.table_type(), Some("EXTERNAL_TABLE"));
    let parameters = table.parameters().unwrap();
    assert_eq!(parameters["table_type"], "ICEBERG");
    assert_eq!(
        parameters["metadata_location"].as_str(),
        read["metadata"].as_str().unwrap()
    );
    assert!(
        parameters["previous_metadata_location"]
            .starts_with(&format!("{location}/_iceberg/metadata/00002-")),
        "{parameters:?}"
    );
    let sd = table.storage_descriptor().unwrap();
    assert_eq!(sd.location(), Some(location.as_str()));
    let columns: Vec<String> = sd
        .columns()
        .iter()
        .map(|c| format!("{} {}", c.name(), c.r#type().unwrap()))
        .collect();
    for column in [
        "__seq bigint",
        "id int",
        "v string",
        "amount decimal(12,2)",
        "at timestamp",
        "tags array<string>",
    ] {
        assert!(
            columns.contains(&column.to_owned()),
            "{column}: {columns:?}"
        );
    }
    let id = sd.columns().iter().find(|c| c.name() == "id").unwrap();
    let id_params = id.parameters().unwrap();
    assert_eq!(id_params["iceberg.field.current"], "true");
    assert!(
        id_params["iceberg.field.id"].parse::<i64>().unwrap() > 0,
        "{id_params:?}"
    );
    assert_eq!(id_params["iceberg.field.optional"], "true");

    // Doctor after: the table with its snapshots, the source's columns fit it.
    let after = doctor_row(&job);
    assert_eq!(after["status"], "ok", "{after}");
    let detail = after["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("{database}.t (3 snapshots)")),
        "{after}"
    );
    assert!(
        detail.contains("the source's columns fit each table"),
        "{after}"
    );
    db.sql("ALTER TABLE t ALTER COLUMN id TYPE text");
    let retyped = doctor_row(&job);
    assert_eq!(retyped["code"], "SLUICE_ICEBERG_SCHEMA", "{retyped}");
}

/// A baseline through the Glue catalog: its parts are the table's first snapshot, made
/// once by the baseline's finish; the changes after it are the next.
#[test]
fn iceberg_glue_a_baseline_is_the_first_snapshot() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_glue_base");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'seed' || i FROM generate_series(1, 10) i");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let job = target.job(
        &db,
        &["t"],
        &glue_yaml(
            &moto,
            &database,
            "initial: snapshot\nbaseline: { chunk_rows: 4 }\n",
        ),
    );
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'one' WHERE id = 1; DELETE FROM t WHERE id = 10");
    assert_eq!(job.drain()["rows"], 2);
    let Some(read) = pyiceberg(&moto, &database, "t") else {
        return;
    };
    let ops = read["ops"].as_array().unwrap();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    assert_eq!(
        (count("snapshot"), count("update"), count("delete")),
        (10, 1, 1),
        "{read}"
    );
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append"]),
        "{read}"
    );
    assert_eq!(read["replayed"], source(&db), "replay == source: {read}");
}

/// Two writers that read the same metadata: only one moves the pointer; the other learns
/// it lost (as `SqlCatalog::swap`), and a table is created once.
#[test]
fn iceberg_glue_two_writers_of_the_same_metadata_one_moves_it() {
    let moto = aws_or_skip!();
    let database = glue_database();
    let metadata = sluice::iceberg::metadata::TableMetadata::new("s3://b/cdc/t", Vec::new(), 0, 0);
    runtime().block_on(async {
        let open = || {
            sluice::iceberg::glue_catalog::GlueCatalog::new(Some(&moto), Some("us-east-1"), None)
        };
        let (a, b) = (open(), open());
        a.ensure_namespace(&database).await.unwrap();
        b.ensure_namespace(&database).await.unwrap();
        assert_eq!(a.load(&database, "t").await.unwrap(), None);
        let (made_a, made_b) = tokio::join!(
            a.create(&database, "t", "s3://b/cdc/t/m0a", &metadata),
            b.create(&database, "t", "s3://b/cdc/t/m0b", &metadata),
        );
        let (made_a, made_b) = (made_a.unwrap(), made_b.unwrap());
        assert!(
            made_a ^ made_b,
            "exactly one creates the table: {made_a} {made_b}"
        );
        let m0 = a.load(&database, "t").await.unwrap().unwrap();
        assert_eq!(
            b.load(&database, "t").await.unwrap().as_deref(),
            Some(m0.as_str())
        );
        // Both read m0; a moves first, b's move from m0 is refused.
        assert!(
            a.swap(&database, "t", &m0, "s3://b/cdc/t/m1", &metadata)
                .await
                .unwrap()
        );
        assert!(
            !b.swap(&database, "t", &m0, "s3://b/cdc/t/m2", &metadata)
                .await
                .unwrap()
        );
        assert_eq!(
            b.load(&database, "t").await.unwrap().as_deref(),
            Some("s3://b/cdc/t/m1")
        );
        // b reads again and moves from there.
        assert!(
            b.swap(
                &database,
                "t",
                "s3://b/cdc/t/m1",
                "s3://b/cdc/t/m2",
                &metadata
            )
            .await
            .unwrap()
        );
    });
    let table = glue_table(&moto, &database, "t").unwrap();
    let parameters = table.parameters().unwrap();
    assert_eq!(parameters["metadata_location"], "s3://b/cdc/t/m2");
    assert_eq!(parameters["previous_metadata_location"], "s3://b/cdc/t/m1");
}

/// What Glue answers an `UpdateTable` from a stale `VersionId` (awsJson1.1).
const CONCURRENT_MODIFICATION: &str = r#"{"__type":"ConcurrentModificationException","Message":"Update table failed due to concurrent modifications."}"#;

/// Glue refuses an `UpdateTable` whose `VersionId` is no longer current with
/// `ConcurrentModificationException` — the race inside one swap, between its `GetTable`
/// and its `UpdateTable`. moto does not enforce `VersionId`, so a proxy answers one
/// `UpdateTable` so in Glue's place: the swap learns it lost and moves nothing, and a
/// drain's commit reads the table again and commits once.
#[test]
fn iceberg_glue_a_stale_version_is_a_lost_race_and_the_commit_redoes_itself() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    let database = glue_database();
    let metadata = sluice::iceberg::metadata::TableMetadata::new("s3://b/cdc/x", Vec::new(), 0, 0);
    runtime().block_on(async {
        let glue = sluice::iceberg::glue_catalog::GlueCatalog::new(
            Some(&proxy.url()),
            Some("us-east-1"),
            None,
        );
        glue.ensure_namespace(&database).await.unwrap();
        assert!(
            glue.create(&database, "x", "s3://b/cdc/x/m0", &metadata)
                .await
                .unwrap()
        );
        proxy.answer_to("AWSGlue.UpdateTable", 400, CONCURRENT_MODIFICATION);
        assert!(
            !glue
                .swap(
                    &database,
                    "x",
                    "s3://b/cdc/x/m0",
                    "s3://b/cdc/x/m1",
                    &metadata
                )
                .await
                .unwrap(),
            "a stale VersionId is a lost race"
        );
        assert_eq!(proxy.answered(), 1);
        assert_eq!(
            glue.load(&database, "x").await.unwrap().as_deref(),
            Some("s3://b/cdc/x/m0")
        );
    });

    let db = TestDb::new(&admin, "ice_glue_cme");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], &glue_yaml(&proxy.url(), &database, ""));
    let _ = job.drain();
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 5) i");
    assert_eq!(job.drain()["rows"], 5);
    db.sql("UPDATE t SET v = 'w' WHERE id = 1");
    proxy.answer_to("AWSGlue.UpdateTable", 400, CONCURRENT_MODIFICATION);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["rows"], 1, "{}", run.stdout);
    assert_eq!(proxy.answered(), 2, "the drain's first swap was refused");
    assert!(
        run.stderr
            .contains("another writer committed to the Iceberg table first"),
        "{}",
        run.stderr
    );
    let Some(read) = pyiceberg(&moto, &database, "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct"].clone()),
        (6.into(), 6.into()),
        "{read}"
    );
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append"]),
        "{read}"
    );
    assert_eq!(read["replayed"], source(&db), "{read}");
}

/// Glue refusing an IAM action (a proxy answers `AccessDeniedException` in moto's place,
/// which has no IAM): doctor and the run fail with `SLUICE_ICEBERG_CATALOG_DENIED`
/// naming the action; the run fails before its checkpoint, so the next run commits the
/// change once.
#[test]
fn iceberg_glue_a_denied_action_is_named_and_loses_nothing() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    let denied = |action: &str| {
        format!(
            r#"{{"__type":"AccessDeniedException","Message":"User: arn:aws:sts::123456789012:assumed-role/sluice/j is not authorized to perform: glue:{action}"}}"#
        )
    };
    let db = TestDb::new(&admin, "ice_glue_deny");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let job = target.job(&db, &["t"], &glue_yaml(&proxy.url(), &database, ""));
    proxy.answer_to("AWSGlue.GetDatabase", 400, &denied("GetDatabase"));
    let row = doctor_row(&job);
    assert_eq!(row["status"], "fail", "{row}");
    assert_eq!(row["code"], "SLUICE_ICEBERG_CATALOG_DENIED", "{row}");
    assert!(row.to_string().contains("allow glue:GetDatabase"), "{row}");

    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    proxy.answer_to("AWSGlue.CreateTable", 400, &denied("CreateTable"));
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_ICEBERG_CATALOG_DENIED",
        "{}",
        run.stdout
    );
    let error = &run.summary()["error"];
    assert!(
        error["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("allow glue:CreateTable"),
        "{error}"
    );
    assert!(
        glue_table(&moto, &database, "t").is_none(),
        "nothing was created"
    );
    let summary = job.drain_when_free();
    assert_eq!(
        summary["rows"], 2,
        "the refused run's changes come again: {summary}"
    );
    let Some(read) = pyiceberg(&moto, &database, "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct"].clone()),
        (2.into(), 2.into()),
        "{read}"
    );
    assert_eq!(read["replayed"], source(&db), "{read}");
}

/// A Glue table of the name that is not an Iceberg table is never written: the run and
/// doctor refuse it with `SLUICE_ICEBERG_CATALOG_REJECTED`; an unreachable Glue endpoint
/// fails the run (transient, before its checkpoint) with `SLUICE_ICEBERG_CATALOG`, and the
/// next run with the right endpoint commits every change.
#[test]
fn iceberg_glue_refuses_a_foreign_table_and_an_unreachable_catalog() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_glue_err");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    runtime().block_on(async {
        let client = aws_sdk_glue::Client::new(&sdk(&moto).await);
        client
            .create_database()
            .database_input(
                aws_sdk_glue::types::DatabaseInput::builder()
                    .name(&database)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        client
            .create_table()
            .database_name(&database)
            .table_input(
                aws_sdk_glue::types::TableInput::builder()
                    .name("t")
                    .table_type("EXTERNAL_TABLE")
                    .parameters("classification", "parquet")
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
    });
    let job = target.job(&db, &["t"], &glue_yaml(&moto, &database, ""));
    let row = doctor_row(&job);
    assert_eq!(row["status"], "fail", "{row}");
    assert_eq!(row["code"], "SLUICE_ICEBERG_CATALOG_REJECTED", "{row}");
    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_ICEBERG_CATALOG_REJECTED",
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("is not an Iceberg table"),
        "{}",
        run.stdout
    );
    let table = glue_table(&moto, &database, "t").unwrap();
    assert_eq!(
        table.parameters().unwrap().get("table_type"),
        None,
        "the foreign table is left as it was"
    );

    // The same job on a Glue endpoint nobody answers: transient, nothing moves.
    let other = glue_database();
    let unreachable = target.job(&db, &["t"], &glue_yaml("http://127.0.0.1:9", &other, ""));
    let run = unreachable.run(&["drain"], &[("AWS_MAX_ATTEMPTS", "1")]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_ICEBERG_CATALOG", "{}", run.stdout);
    let summary = run.summary();
    assert!(
        summary["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("endpoint_url"),
        "{summary}"
    );
    // Back on moto (another namespace, so no foreign table): the change is committed.
    let fixed = target.job(&db, &["t"], &glue_yaml(&moto, &other, ""));
    let summary = fixed.drain_when_free();
    assert_eq!(summary["status"], "drained", "{summary}");
    let Some(read) = pyiceberg(&moto, &other, "t") else {
        return;
    };
    assert_eq!(read["replayed"], source(&db), "{read}");
}

/// `sluice compact` of a change log in S3 committed through Glue: the small runs' data
/// files are replaced by one (a `replace` snapshot), pyiceberg's Glue catalog reads the
/// same state before and after, a drain after the compaction commits on top of it, and
/// the replaced objects leave the bucket once the snapshots naming them expire.
#[test]
fn iceberg_glue_compaction_replaces_small_files_and_pyiceberg_reads_the_same_state() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_glue_compact");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let database = glue_database();
    let job = target.job(
        &db,
        &["t"],
        &glue_yaml(
            &moto,
            &database,
            &format!(
                "  snapshot_retention: 1ms\n{}\n",
                crate::compaction::config_block(1 << 20)
            ),
        ),
    );
    assert_eq!(job.drain()["status"], "drained");
    for i in 1..=8 {
        db.sql(&format!(
            "INSERT INTO t VALUES ({i}, 'v{i}'); UPDATE t SET v = v || '+' WHERE id = {}",
            i / 2
        ));
        assert_eq!(job.drain()["status"], "drained");
    }
    let state = |read: &Value| {
        read["replayed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|kv| format!("{}={}", kv[0], kv[1].as_str().unwrap()))
            .collect::<Vec<_>>()
            .join(",")
    };
    let expected =
        || db.sql("SELECT coalesce(string_agg(id || '=' || v, ',' ORDER BY id::text), '') FROM t");
    let Some(before) = pyiceberg(&moto, &database, "t") else {
        return;
    };
    let small_parts: Vec<String> = target
        .keys()
        .into_iter()
        .filter(|k| k.contains("/t/") && k.ends_with(".parquet") && !k.contains("/_"))
        .collect();
    assert_eq!(small_parts.len(), 8, "{small_parts:?}");
    assert_eq!(state(&before), expected(), "{before}");
    assert_eq!(before["files"], 8, "{before}");

    let summary = crate::compaction::compact(&job, &[]);
    let table = &summary["tables"]["t"];
    assert_eq!(table["status"], "compacted", "{summary}");
    assert_eq!(table["parts_replaced"], 8, "{summary}");
    // With a 1 ms retention the older snapshots expire at once; the newest drain
    // snapshot (it carries the checkpoint) is kept, and with it the small parts.
    assert!(
        table["snapshots_expired"].as_u64().unwrap() >= 1,
        "{summary}"
    );
    let after = pyiceberg(&moto, &database, "t").unwrap();
    assert_eq!(state(&after), expected(), "{after}");
    assert_eq!(after["files"], 1, "{after}");
    assert!(
        after["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op == "replace"),
        "{after}"
    );
    assert_eq!(after["rows"], before["rows"], "the same changes: {after}");
    // The Glue table names the compaction's metadata.
    let glue = glue_table(&moto, &database, "t").unwrap();
    assert_eq!(
        glue.parameters().unwrap()["metadata_location"].as_str(),
        after["metadata"].as_str().unwrap()
    );

    db.sql("UPDATE t SET v = 'after' WHERE id = 3; DELETE FROM t WHERE id = 4");
    assert_eq!(job.drain()["status"], "drained");
    let later = pyiceberg(&moto, &database, "t").unwrap();
    assert_eq!(state(&later), expected(), "{later}");
    assert_eq!(later["files"], 2, "{later}");
    // The next compaction's expiry passes the drain snapshot that named the small parts:
    // they leave the bucket, and the table still reads the same.
    let summary = crate::compaction::compact(&job, &[]);
    assert_eq!(summary["tables"]["t"]["status"], "compacted", "{summary}");
    let keys = target.keys();
    for part in &small_parts {
        assert!(
            !keys.contains(part),
            "{part} is still in the bucket: {summary}"
        );
    }
    let last = pyiceberg(&moto, &database, "t").unwrap();
    assert_eq!(state(&last), expected(), "{last}");
}
