//! `table_format: iceberg` against real services: a PostgreSQL job on a local destination
//! with the SQL catalog on SQLite; **pyiceberg** (the readers' venv) loads each table
//! through the same catalog and must read every change exactly once, with the declared
//! types — also after a crash between the Iceberg commit and the checkpoint.

mod current;
mod foreign;
mod glue;
mod json;
mod merge;
mod s3tables;

use std::path::Path;

use serde_json::Value;

use crate::support::{Job, TestDb, TestMysqlDb, readers};

/// The source table `t` (`id int, v text`, …) as `[[id, v], …]` by id: what a replay of
/// its change log by `id` must equal.
fn source(db: &TestDb) -> Value {
    let text =
        db.sql("SELECT coalesce(json_agg(json_build_array(id, v) ORDER BY id), '[]') FROM t");
    serde_json::from_str(text.trim()).unwrap()
}

/// The `iceberg` row of `sluice doctor --json`.
fn doctor_row(job: &Job) -> Value {
    let doc = job.run(&["doctor", "--json"], &[]).summary();
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "iceberg")
        .cloned()
        .unwrap_or_else(|| panic!("no iceberg check in {doc}"))
}

/// The change-log scenario the AWS catalogs share, on `db`'s table
/// `t (id int PRIMARY KEY, v text, amount numeric(12,2), at timestamptz, tags text[])`:
/// 20 inserts, then 5 updates and 2 deletes in a run that crashes after its Iceberg commit
/// (the snapshot is current until the next run drops it), then a late insert. `read`
/// answers what pyiceberg reads of `t` (`rows`, `distinct`, `ops`, `snapshots`, `replayed`,
/// `types`; `None`: no reader, skipped). Checks every change once, the dropped snapshot,
/// the replay and the declared types; answers the last read.
fn drains_across_a_crash(
    db: &TestDb,
    job: &Job,
    read: &dyn Fn() -> Option<Value>,
) -> Option<Value> {
    let _ = job.drain();
    db.sql(
        "INSERT INTO t SELECT i, 'v' || i, i + 0.25, timestamptz '2026-12-03 10:00:00+00', \
         ARRAY['a'] FROM generate_series(1, 20) i",
    );
    assert_eq!(job.drain()["rows"], 20);
    db.sql("UPDATE t SET v = 'changed' WHERE id <= 5");
    db.sql("DELETE FROM t WHERE id > 18");
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed")]);
    assert_ne!(run.code, 0, "the fault crashes the run: {}", run.stderr);
    let crashed = read()?;
    assert_eq!(crashed["rows"], 27, "the snapshot is committed: {crashed}");
    db.sql("INSERT INTO t (id, v) VALUES (100, 'late')");
    let summary = job.drain_when_free();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["rows"], 8, "{summary}");

    let read = read().unwrap();
    assert_eq!(read["rows"], 28, "{read}");
    assert_eq!(read["distinct"], 28, "every change exactly once: {read}");
    let ops = read["ops"].as_array().unwrap();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    assert_eq!(
        (count("insert"), count("update"), count("delete")),
        (21, 5, 2),
        "{read}"
    );
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append", "overwrite"]),
        "the crashed run's snapshot is dropped by the next: {read}"
    );
    assert_eq!(read["replayed"], source(db), "replay == source: {read}");
    for (column, ty) in [
        ("__op", "string"),
        ("__seq", "long"),
        ("__ts", "timestamptz"),
        ("id", "int"),
        ("v", "string"),
        ("amount", "decimal(12, 2)"),
        ("at", "timestamptz"),
        ("tags", "list<string>"),
    ] {
        assert_eq!(read["types"][column], ty, "{column}: {read}");
    }
    Some(read)
}

/// The `table_format` / `iceberg` YAML of a job whose catalog is `catalog.db` in `dir`.
fn iceberg_yaml(dir: &Path, extra: &str) -> String {
    format!(
        "table_format: iceberg\niceberg:\n  catalog: {{ type: sql, uri: \"sqlite:///{}\" }}\n  namespace: cdc\n{extra}",
        dir.join("catalog.db").display()
    )
}

const READ: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("default", uri=sys.argv[1])
table = catalog.load_table(("cdc", sys.argv[2]))
data = table.scan().to_arrow()
pos = data["__pos"].to_pylist()
seq = data["__seq"].to_pylist()
ops = data["__op"].to_pylist()
ids = data["id"].to_pylist()
print(json.dumps({
    "distinct_with_id": len(set(zip(ops, pos, seq, ids))),
    "rows": data.num_rows,
    "distinct": len(set(zip(pos, seq))),
    "ops": sorted(ops),
    "types": {f.name: str(f.field_type) for f in table.schema().fields},
    "arrow": {f.name: str(f.type) for f in data.schema},
    "snapshots": [s.summary.operation.value for s in table.snapshots()],
    "sort": [f.source_id for f in table.sort_order().fields],
    "ids": {f.name: f.field_id for f in table.schema().fields},
    "notes": sorted(data["note"].to_pylist(), key=lambda v: (v is not None, v)) if "note" in data.column_names else None,
}))
"#;

/// DuckDB (its packaged `iceberg` extension, `infra/local/duckdb-iceberg.sh`) reads the
/// table from the metadata file `argv[1]`.
const DUCKDB_READ: &str = r#"
import glob, json, os, sys, duckdb, duckdb_ext
base = os.path.join(list(duckdb_ext.__path__)[0], "extensions", "v" + duckdb.__version__)
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
for name in ("avro", "iceberg"):
    con.sql("LOAD '%s'" % glob.glob(os.path.join(base, "*", name + ".duckdb_extension"))[0])
scan = "iceberg_scan('%s')" % sys.argv[1]
rows, distinct = con.sql(f"SELECT count(*), count(DISTINCT (__pos, __seq)) FROM {scan}").fetchone()
ops = dict(con.sql(f"SELECT __op, count(*) FROM {scan} GROUP BY 1").fetchall())
types = {r[0]: r[1] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
print(json.dumps({"rows": rows, "distinct": distinct, "ops": ops, "types": types}))
"#;

/// What pyiceberg reads from table `name` of the job's catalog; `None` (skipped loudly)
/// without the readers' venv.
fn pyiceberg(catalog: &Path, name: &str) -> Option<Value> {
    let python = readers::python()?;
    let uri = format!("sqlite:///{}", catalog.join("catalog.db").display());
    let out = readers::run(&python, READ, &[Path::new(&uri), Path::new(name)]);
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
}

#[test]
fn iceberg_pg_drains_are_read_by_pyiceberg_exactly_once_with_their_types() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_read");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, big bigint, amount numeric(12,2), note text, \
         at timestamptz, day date, ok boolean, score float8, tags text[])",
    );
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql(
        "INSERT INTO t SELECT i, i * 1000000000000, i + 0.25, 'n' || i, \
         timestamptz '2026-12-03 10:00:00+00' + i * interval '1 minute', date '2026-12-03', \
         i % 2 = 0, i / 3.0, ARRAY['a', 'b' || i] FROM generate_series(1, 50) i",
    );
    assert_eq!(job.drain()["rows"], 50);
    let Some(first) = pyiceberg(dir.path(), "t") else {
        return;
    };
    assert_eq!(first["rows"], 50, "{first}");
    assert_eq!(first["distinct"], 50, "{first}");
    db.sql("UPDATE t SET note = 'changed' WHERE id <= 10");
    db.sql("DELETE FROM t WHERE id > 45");
    db.sql("INSERT INTO t (id, note) VALUES (100, 'late')");
    assert_eq!(job.drain()["rows"], 16);
    let read = pyiceberg(dir.path(), "t").unwrap();
    assert_eq!(read["rows"], 66, "{read}");
    assert_eq!(read["distinct"], 66, "every change exactly once: {read}");
    let parquet = job.rows("t");
    assert_eq!(parquet.len(), 66, "the parts hold the same changes");
    let ops = read["ops"].as_array().unwrap();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    assert_eq!(
        (count("insert"), count("update"), count("delete")),
        (51, 10, 5)
    );
    let types = &read["types"];
    for (column, ty) in [
        ("__op", "string"),
        ("__pos", "string"),
        ("__seq", "long"),
        ("__ts", "timestamptz"),
        ("__unlogged", "list<string>"),
        ("id", "int"),
        ("big", "long"),
        ("amount", "decimal(12, 2)"),
        ("note", "string"),
        ("at", "timestamptz"),
        ("day", "date"),
        ("ok", "boolean"),
        ("score", "double"),
        ("tags", "list<string>"),
    ] {
        assert_eq!(types[column], ty, "{column}: {types}");
    }
    assert_eq!(read["arrow"]["amount"], "decimal128(12, 2)", "{read}");
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append"]),
        "{read}"
    );
    let ids = &read["ids"];
    assert_eq!(
        read["sort"],
        serde_json::json!([ids["__pos"], ids["__seq"]])
    );
    // The parts' `__pos` bounds are in the manifests: a filter on `__pos` prunes the first
    // drain's part and still finds exactly the rows it asks for.
    let python = readers::python().unwrap();
    let uri = format!("sqlite:///{}", dir.path().join("catalog.db").display());
    let pruned = readers::run(
        &python,
        r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import GreaterThan
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", "t"))
everything = table.scan().to_arrow()
first_max = sorted(everything["__pos"].to_pylist())[49]
scan = table.scan(row_filter=GreaterThan("__pos", first_max))
expected = sum(1 for p in everything["__pos"].to_pylist() if p > first_max)
print(json.dumps({"files": len(list(table.scan().plan_files())),
    "planned": len(list(scan.plan_files())), "rows": scan.to_arrow().num_rows,
    "expected": expected}))
"#,
        &[Path::new(&uri)],
    );
    let pruned: Value = serde_json::from_str(&pruned).unwrap();
    assert_eq!(pruned["files"], 2, "{pruned}");
    assert_eq!(
        pruned["planned"], 1,
        "the first part is pruned by its bounds: {pruned}"
    );
    assert_eq!(pruned["rows"], pruned["expected"], "{pruned}");
    assert_eq!(pruned["rows"], 16, "{pruned}");
    // An idle drain commits nothing.
    assert_eq!(job.drain()["rows"], 0);
    let idle = pyiceberg(dir.path(), "t").unwrap();
    assert_eq!(idle["snapshots"].as_array().unwrap().len(), 2, "{idle}");
}

/// A crash after the Iceberg commit and before the checkpoint: the committed snapshot
/// is visible until the next run, which reads the same changes again and drops it — no
/// change is read twice, none is lost.
#[test]
fn iceberg_crash_between_commit_and_checkpoint_duplicates_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_crash");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    let yaml = iceberg_yaml(dir.path(), "lease: { ttl_seconds: 2 }\n");
    let job = Job::postgres(&db, &["t", "u"], &yaml);
    let _ = job.drain();
    db.sql("INSERT INTO t SELECT i, 'a' || i FROM generate_series(1, 20) i");
    db.sql("INSERT INTO u SELECT i, 'a' || i FROM generate_series(1, 5) i");
    assert_eq!(job.drain()["rows"], 25);
    db.sql("INSERT INTO t SELECT i, 'b' || i FROM generate_series(21, 30) i");
    db.sql("INSERT INTO u VALUES (6, 'b')");
    // Crashes after the first table's commit (`t`), before `u`'s and before the checkpoint.
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed")]);
    assert_ne!(run.code, 0, "the fault crashes the run: {}", run.stderr);
    let Some(crashed) = pyiceberg(dir.path(), "t") else {
        return;
    };
    assert_eq!(crashed["rows"], 30, "the snapshot is committed: {crashed}");
    assert_eq!(
        job.rows("t").len(),
        30,
        "the crashed run's parts stay in the folder"
    );

    db.sql("INSERT INTO t VALUES (31, 'c')");
    let summary = job.drain_when_free();
    assert_eq!(summary["status"], "drained", "{summary}");
    let t = pyiceberg(dir.path(), "t").unwrap();
    assert_eq!(t["rows"], 31, "{t}");
    assert_eq!(t["distinct"], 31, "{t}");
    assert_eq!(
        job.rows("t").len(),
        41,
        "the folder holds the crashed run's parts too"
    );
    assert_eq!(
        t["snapshots"],
        serde_json::json!(["append", "append", "overwrite"]),
        "the crashed run's snapshot is dropped by the next: {t}"
    );
    let u = pyiceberg(dir.path(), "u").unwrap();
    assert_eq!(
        (u["rows"].clone(), u["distinct"].clone()),
        (6.into(), 6.into()),
        "{u}"
    );

    // The same with an error instead of a crash (the lease is released at once).
    db.sql("INSERT INTO t VALUES (32, 'd')");
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed:error")]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_FAULT_INJECTED");
    assert_eq!(job.drain_when_free()["status"], "drained");
    let t = pyiceberg(dir.path(), "t").unwrap();
    assert_eq!(
        (t["rows"].clone(), t["distinct"].clone()),
        (32.into(), 32.into()),
        "{t}"
    );
}

/// A baseline's parts become the table's first snapshot, once: a baseline that failed
/// after its Iceberg commit and runs again finds its plan in the table.
#[test]
fn iceberg_baseline_is_one_snapshot_made_once() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_base");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 30) i");
    let dir = tempfile::tempdir().unwrap();
    let yaml = iceberg_yaml(
        dir.path(),
        "initial: snapshot\nbaseline: { chunk_rows: 10 }\n",
    );
    let job = Job::postgres(&db, &["t"], &yaml);
    let run = job.run(
        &["baseline"],
        &[("SLUICE_FAULT", "iceberg_committed:error")],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_FAULT_INJECTED", "{}", run.stdout);
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    db.sql("UPDATE t SET v = 'new' WHERE id <= 3");
    assert_eq!(job.drain_when_free()["rows"], 3);
    let Some(read) = pyiceberg(dir.path(), "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct_with_id"].clone()),
        (33.into(), 33.into()),
        "every snapshot row and change once: {read}"
    );
    let ops = read["ops"].as_array().unwrap();
    assert_eq!(
        ops.iter().filter(|o| *o == "snapshot").count(),
        30,
        "{read}"
    );
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append"]),
        "{read}"
    );
}

/// The table's schema follows the source: an added column gets a new field id (older
/// rows read it as null), a widened column is promoted in place keeping its id.
#[test]
fn iceberg_schema_follows_added_and_widened_columns() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_evolve");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, n int)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1, 10)");
    assert_eq!(job.drain()["rows"], 1);
    let Some(before) = pyiceberg(dir.path(), "t") else {
        return;
    };
    db.sql("ALTER TABLE t ALTER COLUMN n TYPE bigint");
    db.sql("ALTER TABLE t ADD COLUMN note text");
    db.sql("INSERT INTO t VALUES (2, 5000000000, 'two')");
    let summary = job.drain();
    assert_eq!(summary["rows"], 1, "{summary}");
    let after = pyiceberg(dir.path(), "t").unwrap();
    assert_eq!(after["rows"], 2, "{after}");
    assert_eq!(after["types"]["n"], "long", "{after}");
    assert_eq!(
        after["ids"]["n"], before["ids"]["n"],
        "a promoted column keeps its id"
    );
    assert_eq!(after["types"]["note"], "string", "{after}");
    assert!(after["ids"]["note"].as_i64() > before["ids"]["id"].as_i64());
    assert_eq!(after["notes"], serde_json::json!([null, "two"]), "{after}");
}

/// An S3 destination (moto): the same code writes the metadata next to the parts in the
/// bucket, with `s3://` locations; pyiceberg reads the table from S3 through the catalog.
#[test]
fn iceberg_on_an_s3_destination_is_read_by_pyiceberg() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    let target = crate::support::aws::AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], &iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 12) i");
    assert_eq!(job.drain()["rows"], 12);
    db.sql("DELETE FROM t WHERE id = 1");
    assert_eq!(job.drain()["rows"], 1);
    let Some(python) = readers::python() else {
        return;
    };
    let uri = format!("sqlite:///{}", dir.path().join("catalog.db").display());
    let script = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("default", uri=sys.argv[1], **{"s3.endpoint": sys.argv[2],
    "s3.access-key-id": "testing", "s3.secret-access-key": "testing", "s3.region": "us-east-1"})
table = catalog.load_table(("cdc", "t"))
data = table.scan().to_arrow()
print(json.dumps({"rows": data.num_rows, "location": table.location(),
    "metadata": table.metadata_location, "ops": sorted(data["__op"].to_pylist())}))
"#;
    let out = readers::run(&python, script, &[Path::new(&uri), Path::new(&moto)]);
    let read: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(read["rows"], 13, "{read}");
    let location = format!("s3://{}/{}t", target.bucket, target.prefix);
    assert_eq!(read["location"], location.as_str(), "{read}");
    let metadata = read["metadata"].as_str().unwrap();
    assert!(
        metadata.starts_with(&format!("{location}/_iceberg/metadata/00002-")),
        "{read}"
    );
}

/// `sluice doctor`'s `iceberg` row: a table not there yet is fine (the first commit
/// creates it), a committed one is named with its snapshots, a catalog whose directory is
/// missing fails with the code a run would fail with.
#[test]
fn iceberg_doctor_reports_the_catalog_and_each_table() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_doctor");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &iceberg_yaml(dir.path(), ""));
    let row = doctor_row;
    let before = row(&job);
    assert_eq!(before["status"], "ok", "{before}");
    assert!(
        before["detail"]
            .as_str()
            .unwrap()
            .contains("t (created by its first commit)"),
        "{before}"
    );
    assert!(
        !dir.path().join("catalog.db").exists(),
        "doctor creates nothing"
    );
    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1)");
    assert_eq!(job.drain()["rows"], 1);
    let after = row(&job);
    assert_eq!(after["status"], "ok", "{after}");
    let detail = after["detail"].as_str().unwrap();
    assert!(detail.contains("cdc.t (1 snapshots)"), "{after}");
    assert!(
        detail.contains("the source's columns fit each table"),
        "{after}"
    );
    // A retyping Iceberg cannot promote is found before the run meets it.
    db.sql("ALTER TABLE t ALTER COLUMN id TYPE text");
    let retyped = row(&job);
    assert_eq!(retyped["status"], "fail", "{retyped}");
    assert_eq!(retyped["code"], "SLUICE_ICEBERG_SCHEMA", "{retyped}");

    let gone = Job::postgres(
        &db,
        &["t"],
        &iceberg_yaml(&dir.path().join("no/such/dir"), ""),
    );
    let failed = row(&gone);
    assert_eq!(failed["status"], "fail", "{failed}");
    assert_eq!(failed["code"], "SLUICE_ICEBERG_CATALOG", "{failed}");
}

/// A per-table re-baseline (a column added with a default, which no part holds): the
/// new baseline — its epoch marker first — is one more snapshot of the same Iceberg
/// table, and the added column appears with a new field id.
#[test]
fn iceberg_rebaseline_appends_its_epoch_and_snapshot() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_rebase");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(
        &db,
        &["t"],
        &iceberg_yaml(dir.path(), "initial: snapshot\n"),
    );
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'one' WHERE id = 1");
    assert_eq!(job.drain()["rows"], 1);
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    let summary = job.drain();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    let Some(read) = pyiceberg(dir.path(), "t") else {
        return;
    };
    let ops = read["ops"].as_array().unwrap();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    assert_eq!(
        (count("snapshot"), count("update"), count("rebaseline")),
        (10, 1, 1),
        "{read}"
    );
    assert_eq!(read["rows"], 12, "{read}");
    assert_eq!(read["types"]["d"], "int", "{read}");
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append", "append"]),
        "{read}"
    );
}

/// A run writes changes, meets a column added with a default (the table must be
/// re-baselined), commits the changes to Iceberg and crashes before its checkpoint: the
/// next run skips the table's changes and re-baselines it instead of writing them again,
/// and the crashed run's snapshot — changes no checkpointed run holds — is dropped all
/// the same; the table reads the first run's changes and the new baseline, nothing else.
#[test]
fn iceberg_rebaseline_after_a_crashed_commit_drops_the_crashed_snapshot() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_crash_rebase");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    // `initial: none`: no inline baseline runs before the drain, so the wanted table is
    // skipped by the whole next drain and re-baselined after it.
    let yaml = iceberg_yaml(dir.path(), "lease: { ttl_seconds: 2 }\n");
    let job = Job::postgres(&db, &["t"], &yaml);
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t SELECT i, 'a' || i FROM generate_series(1, 20) i");
    assert_eq!(job.drain()["rows"], 20);
    db.sql("INSERT INTO t SELECT i, 'b' || i FROM generate_series(21, 30) i");
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    db.sql("INSERT INTO t VALUES (31, 'c', 8)");
    // The run writes 21..30, asks for the table's re-baseline at the ALTER, commits the
    // ten to Iceberg and crashes before its checkpoint.
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed")]);
    assert_ne!(run.code, 0, "the fault crashes the run: {}", run.stderr);
    let Some(crashed) = pyiceberg(dir.path(), "t") else {
        return;
    };
    assert_eq!(crashed["rows"], 30, "the snapshot is committed: {crashed}");

    // The next run skips the wanted table's changes from its start, then re-baselines it.
    let summary = job.drain_when_free();
    assert_eq!(summary["tables"]["t"]["rows"], 0, "{summary}");
    let read = pyiceberg(dir.path(), "t").unwrap();
    let ops = read["ops"].as_array().unwrap();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    assert_eq!(
        (count("insert"), count("snapshot"), count("rebaseline")),
        (20, 31, 1),
        "the crashed run's ten inserts are gone, the baseline holds every row: {read}"
    );
    assert_eq!(read["distinct_with_id"], read["rows"], "{read}");
}

/// A MariaDB job: its drains read exactly by pyiceberg, MariaDB's types declared.
#[test]
fn iceberg_mariadb_drains_are_read_by_pyiceberg_exactly_once() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "ice_maria");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, small tinyint, amount decimal(10,3), note varchar(20), at datetime(6))");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::mysql(&db, &["t"], "", &iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql(
        "INSERT INTO t VALUES (1, 1, 1.5, 'a', '2026-12-03 10:00:00.25'), (2, -2, 2.25, 'b', NULL)",
    );
    assert_eq!(job.drain()["rows"], 2);
    db.sql("UPDATE t SET note = 'c' WHERE id = 1; DELETE FROM t WHERE id = 2");
    assert_eq!(job.drain()["rows"], 2);
    let Some(read) = pyiceberg(dir.path(), "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct"].clone()),
        (4.into(), 4.into()),
        "{read}"
    );
    let types = &read["types"];
    for (column, ty) in [
        ("id", "int"),
        ("small", "int"),
        ("amount", "decimal(10, 3)"),
        ("note", "string"),
        ("at", "timestamp"),
    ] {
        assert_eq!(types[column], ty, "{column}: {types}");
    }
}

/// DuckDB's `iceberg` extension reads the table from its current metadata file: every
/// change once, the declared types.
#[test]
fn iceberg_duckdb_reads_the_table_with_its_types() {
    let admin = pg_or_skip!();
    let Some(duckdb) = crate::support::service_url("SLUICE_TEST_DUCKDB_ICEBERG_PYTHON") else {
        return;
    };
    let db = TestDb::new(&admin, "ice_duck");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, big bigint, amount numeric(12,2), at timestamptz, \
         day date, ok boolean, score float8, tags text[])",
    );
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql(
        "INSERT INTO t SELECT i, i * 1000000000000, i + 0.25, now(), date '2026-12-03', \
         i % 2 = 0, i / 3.0, ARRAY['a'] FROM generate_series(1, 20) i",
    );
    assert_eq!(job.drain()["rows"], 20);
    db.sql("UPDATE t SET ok = NULL WHERE id <= 5; DELETE FROM t WHERE id > 18");
    assert_eq!(job.drain()["rows"], 7);
    let Some(python) = readers::python() else {
        return;
    };
    let uri = format!("sqlite:///{}", dir.path().join("catalog.db").display());
    let metadata = readers::run(
        &python,
        "import sys\nfrom pyiceberg.catalog.sql import SqlCatalog\nprint(SqlCatalog('default', uri=sys.argv[1]).load_table(('cdc', 't')).metadata_location)",
        &[Path::new(&uri)],
    );
    let duck: Value =
        serde_json::from_str(&readers::run(&duckdb, DUCKDB_READ, &[Path::new(&metadata)])).unwrap();
    assert_eq!(
        (duck["rows"].clone(), duck["distinct"].clone()),
        (27.into(), 27.into()),
        "{duck}"
    );
    assert_eq!(
        duck["ops"],
        serde_json::json!({"delete": 2, "insert": 20, "update": 5}),
        "{duck}"
    );
    for (column, ty) in [
        ("__seq", "BIGINT"),
        ("__ts", "TIMESTAMP WITH TIME ZONE"),
        ("__unlogged", "VARCHAR[]"),
        ("id", "INTEGER"),
        ("big", "BIGINT"),
        ("amount", "DECIMAL(12,2)"),
        ("at", "TIMESTAMP WITH TIME ZONE"),
        ("day", "DATE"),
        ("ok", "BOOLEAN"),
        ("score", "DOUBLE"),
        ("tags", "VARCHAR[]"),
    ] {
        assert_eq!(duck["types"][column], ty, "{column}: {duck}");
    }
}

/// A crash at every fault point of the drain (the n-th hit, with runs that checkpoint
/// several times): after the next run, pyiceberg reads every change exactly once.
#[test]
fn iceberg_crash_at_every_fault_point_leaves_every_change_once() {
    let admin = pg_or_skip!();
    for (i, point) in [
        "part_durable@2",
        "before_checkpoint@3",
        "iceberg_committed@2",
        "iceberg_committed@3",
        "checkpoint_written@3",
        "source_acked@3",
    ]
    .iter()
    .enumerate()
    {
        let db = TestDb::new(&admin, &format!("ice_fault{i}"));
        db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
        db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
        let dir = tempfile::tempdir().unwrap();
        let yaml = iceberg_yaml(
            dir.path(),
            "lease: { ttl_seconds: 2 }\noutput: { rollover_rows: 5 }\n",
        );
        let job = Job::postgres(&db, &["t", "u"], &yaml);
        let _ = job.drain();
        // Six transactions of four rows per table: a part reaches rollover every other
        // transaction, so the run checkpoints (and commits) several times.
        let write = |from: i32| {
            for tx in 0..6 {
                let a = from + tx * 4;
                db.sql(&format!(
                    "BEGIN; INSERT INTO t SELECT i, 'v' || i FROM generate_series({a}, {b}) i; \
                     INSERT INTO u SELECT i, 'v' || i FROM generate_series({a}, {b}) i; COMMIT;",
                    b = a + 3
                ));
            }
        };
        write(1);
        assert_eq!(job.drain()["rows"], 48);
        write(25);
        let run = job.run(&["drain"], &[("SLUICE_FAULT", point)]);
        assert_ne!(run.code, 0, "{point}: the fault fires: {}", run.stderr);
        write(49);
        let summary = job.drain_when_free();
        assert_eq!(summary["status"], "drained", "{point}: {summary}");
        for table in ["t", "u"] {
            let Some(read) = pyiceberg(dir.path(), table) else {
                return;
            };
            assert_eq!(
                (read["rows"].clone(), read["distinct"].clone()),
                (72.into(), 72.into()),
                "{point}, table {table}: every change once: {read}"
            );
        }
    }
}

/// A run that lost its lease before its Iceberg commit (paused past the lease's TTL
/// while a newer run drained the same changes) stops with `SLUICE_STATE_FENCED` before it
/// commits: the newer run's snapshot stands alone.
#[test]
fn iceberg_a_fenced_run_commits_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_zombie");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(
        &db,
        &["t"],
        &iceberg_yaml(dir.path(), "lease: { ttl_seconds: 2 }\n"),
    );
    let _ = job.drain();
    db.sql("INSERT INTO t SELECT g, 'z' || g FROM generate_series(1, 20) g");
    let mut zombie = job
        .command(&["drain"], &[("SLUICE_FAULT", "part_durable:pause=6000")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::support::wait_for_line(zombie.stderr.take().unwrap(), "fault injected: pausing");
    let taker = job.drain_when_free();
    assert_eq!(taker["rows"], 20, "{taker}");
    let zombie = crate::support::Run::from(zombie.wait_with_output().unwrap());
    assert_eq!(zombie.code, 3, "{}", zombie.stdout);
    assert_eq!(
        zombie.error_code(),
        "SLUICE_STATE_FENCED",
        "{}",
        zombie.stdout
    );
    let Some(read) = pyiceberg(dir.path(), "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct"].clone()),
        (20.into(), 20.into()),
        "{read}"
    );
    assert_eq!(read["snapshots"], serde_json::json!(["append"]), "{read}");
}

/// A column Iceberg has no type for (MariaDB's `bigint unsigned`) fails the run before
/// its checkpoint, naming the column: the next run meets the same change again.
#[test]
fn iceberg_refuses_a_column_without_an_iceberg_type_and_moves_nothing() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "ice_type");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, huge bigint unsigned)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::mysql(&db, &["t"], "", &iceberg_yaml(dir.path(), ""));
    // Doctor finds it before any run, with the code the run fails with.
    let doctor = job.run(&["doctor", "--json"], &[]).summary();
    let row = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "iceberg")
        .cloned()
        .unwrap_or_else(|| panic!("no iceberg row: {doctor}"));
    assert_eq!(row["status"], "fail", "{row}");
    assert_eq!(row["code"], "SLUICE_ICEBERG_TYPE", "{row}");
    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1, 18446744073709551615)");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_ICEBERG_TYPE", "{}", run.stdout);
    assert!(run.stdout.contains("column huge"), "{}", run.stdout);
    let again = job.run(&["drain"], &[]);
    assert_eq!(
        again.error_code(),
        "SLUICE_ICEBERG_TYPE",
        "{}",
        again.stdout
    );
    assert!(!dir.path().join("catalog.db").exists() || pyiceberg_has_no_table(dir.path()));
}

/// True when the catalog holds no table `t` (the refused run registered nothing).
fn pyiceberg_has_no_table(catalog: &Path) -> bool {
    let Some(python) = readers::python() else {
        return true;
    };
    let uri = format!("sqlite:///{}", catalog.join("catalog.db").display());
    let script = "import sys\nfrom pyiceberg.catalog.sql import SqlCatalog\nprint(SqlCatalog('default', uri=sys.argv[1]).table_exists(('cdc', 't')))";
    readers::run(&python, script, &[Path::new(&uri)]) == "False"
}

/// Each data file's manifest entry carries its column metrics, as pyiceberg reads them:
/// value and null counts, and lower and upper bounds in the table's types (strings
/// truncated to 16 characters and still bounding); a filtered scan plans only the files
/// whose bounds can match.
#[test]
fn iceberg_data_files_carry_their_column_metrics_and_scans_skip_by_them() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_metrics");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, big bigint, note text, at timestamptz, day date, \
         ok boolean, amount numeric(12,2), tags text[])",
    );
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql(
        "INSERT INTO t SELECT i, i * 1000, NULL, timestamptz '2026-12-05 10:00:00+00' + i * interval '1 s', \
         date '2026-12-01' + i, i % 2 = 0, i + 0.5, ARRAY['x'] FROM generate_series(1, 10) i",
    );
    assert_eq!(job.drain()["rows"], 10);
    db.sql(
        "INSERT INTO t SELECT i, -i, 'a long note that runs past sixteen characters ' || i, NULL, \
         date '2027-01-01', true, NULL, NULL FROM generate_series(100, 110) i",
    );
    assert_eq!(job.drain()["rows"], 11);
    let Some(python) = readers::python() else {
        return;
    };
    const METRICS: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.conversions import from_bytes
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", "t"))
schema = table.schema()
def named(m, decode):
    out = {}
    for fid, v in (m or {}).items():
        f = schema.find_field(fid)
        out[f.name] = decode(f, v)
    return out
def value(f, b):
    v = from_bytes(f.field_type, b)
    return v if isinstance(v, (int, bool)) else str(v)
files = []
for task in sorted(table.scan().plan_files(), key=lambda t: t.file.file_path):
    d = task.file
    files.append({
        "rows": d.record_count,
        "values": named(d.value_counts, lambda f, v: v),
        "nulls": named(d.null_value_counts, lambda f, v: v),
        "lower": named(d.lower_bounds, value),
        "upper": named(d.upper_bounds, value),
    })
planned = lambda expr: len(list(table.scan(row_filter=expr).plan_files()))
print(json.dumps({
    "files": files,
    "ids_from_100": planned("id >= 100"),
    "ids_below_5": planned("id < 5"),
    "day_2027": planned("day = '2027-01-01'"),
    "negative_big": planned("big < 0"),
    "rows_from_100": table.scan(row_filter="id >= 100").to_arrow().num_rows,
}))
"#;
    let uri = format!("sqlite:///{}", dir.path().join("catalog.db").display());
    let out = readers::run(&python, METRICS, &[Path::new(&uri)]);
    let read: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let files = read["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{read}");
    let (first, second) = if files[0]["rows"] == 10 {
        (&files[0], &files[1])
    } else {
        (&files[1], &files[0])
    };
    assert_eq!(first["values"]["id"], 10, "{first}");
    assert_eq!(first["nulls"]["note"], 10, "{first}");
    assert_eq!(first["nulls"]["id"], 0, "{first}");
    assert_eq!(
        (first["lower"]["id"].clone(), first["upper"]["id"].clone()),
        (1.into(), 10.into()),
        "{first}"
    );
    assert_eq!(
        (first["lower"]["big"].clone(), first["upper"]["big"].clone()),
        (1000.into(), 10000.into()),
        "{first}"
    );
    assert_eq!(first["lower"]["ok"], false, "{first}");
    assert_eq!(first["upper"]["ok"], true, "{first}");
    // Dates as days and timestamps as microseconds since the epoch, as Iceberg stores them.
    let days = |d: &str| {
        (chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap()
            - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap())
        .num_days()
    };
    assert_eq!(first["lower"]["day"], days("2026-12-02"), "{first}");
    assert_eq!(first["upper"]["day"], days("2026-12-11"), "{first}");
    let micros = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .unwrap()
            .timestamp_micros()
    };
    assert_eq!(
        first["lower"]["at"],
        micros("2026-12-05T10:00:01Z"),
        "{first}"
    );
    assert_eq!(
        first["upper"]["at"],
        micros("2026-12-05T10:00:10Z"),
        "{first}"
    );
    assert!(
        first["lower"].get("note").is_none(),
        "a column of nulls has no bounds: {first}"
    );
    assert!(
        first["lower"].get("amount").is_none(),
        "decimals get counts only: {first}"
    );
    assert!(
        first["values"].get("tags").is_none(),
        "nested columns get nothing: {first}"
    );
    assert_eq!(first["values"]["amount"], 10, "{first}");
    assert_eq!(
        (second["lower"]["id"].clone(), second["upper"]["id"].clone()),
        (100.into(), 110.into()),
        "{second}"
    );
    assert_eq!(second["lower"]["note"], "a long note that", "{second}");
    assert_eq!(second["upper"]["note"], "a long note thau", "{second}");
    assert!(
        second["lower"]["__pos"].is_string(),
        "the exact __pos range stays: {second}"
    );
    // pyiceberg plans only the files whose bounds can match.
    assert_eq!(read["ids_from_100"], 1, "{read}");
    assert_eq!(read["ids_below_5"], 1, "{read}");
    assert_eq!(read["day_2027"], 1, "{read}");
    assert_eq!(read["negative_big"], 1, "{read}");
    assert_eq!(read["rows_from_100"], 11, "{read}");
}
