//! The current state as an Iceberg table (`<name>_current`), kept by `sluice materialize`
//! beside the change log of a `table_format: iceberg` job: pyiceberg and DuckDB's
//! `iceberg_scan` read it through the catalog equal to the source after every build; an
//! incremental build's snapshot replaces only the buckets it rewrote; a crash after the
//! pointer moved leaves the previous version readable and the next build commits the
//! new one; a new column reaches the schema with the old ids kept; the table holds two
//! snapshots and only the metadata files they need.

use std::path::Path;

use serde_json::Value;

use super::iceberg_yaml;
use crate::support::current_state::{materialize, pointer, state_text};
use crate::support::{Job, TestDb, readers};

/// What pyiceberg reads of `cdc.t_current`: the state as `id=v,…` (the form of
/// `TestDb::id_v_text`), its snapshots' summaries, the schema's field ids and the data
/// files of the current snapshot (below the destination).
const READ_CURRENT: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("default", uri=sys.argv[1])
table = catalog.load_table(("cdc", "t_current"))
data = table.scan().to_arrow()
rows = sorted(zip(data["id"].to_pylist(), data["v"].to_pylist()), key=lambda r: str(r[0]))
root = sys.argv[2]
print(json.dumps({
    "state": ",".join(f"{i}={'NULL' if v is None else v}" for i, v in rows),
    "rows": data.num_rows,
    "summaries": [dict(s.summary.additional_properties, operation=s.summary.operation.value)
                  for s in table.snapshots()],
    "current": dict(table.current_snapshot().summary.additional_properties),
    "ids": {f.name: f.field_id for f in table.schema().fields},
    "files": sorted(t.file.file_path[len(root):] for t in table.scan().plan_files()),
    "metadata": table.metadata_location,
}))
"#;

fn read_current(catalog_dir: &Path, out: &Path) -> Option<Value> {
    let python = readers::python()?;
    let uri = format!("sqlite:///{}", catalog_dir.join("catalog.db").display());
    let root = format!("file://{}/", out.display());
    let text = readers::run(&python, READ_CURRENT, &[Path::new(&uri), Path::new(&root)]);
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
}

/// The files the pointer names, sorted.
fn pointer_files(job: &Job) -> Vec<String> {
    let mut files: Vec<String> = pointer(job)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    files.sort();
    files
}

#[test]
fn iceberg_current_state_table_follows_every_build_and_survives_a_crash() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_current");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 100) i");
    let dir = tempfile::tempdir().unwrap();
    let extra = "initial: snapshot\noutput: { current_state_bucket_rows: 20 }\n";
    let job = Job::postgres(
        &db,
        &["t"],
        &format!("{}{extra}", iceberg_yaml(dir.path(), "")),
    );
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    db.sql("UPDATE t SET v = 'changed' WHERE id % 10 = 0; DELETE FROM t WHERE id > 95");
    assert_eq!(job.drain()["status"], "drained");

    let (code, first, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first["build"], "full", "{first}");
    assert_eq!(first["iceberg_table"], "cdc.t_current", "{first}");
    let Some(read) = read_current(dir.path(), &job.out()) else {
        return;
    };
    assert_eq!(read["state"], db.id_v_text(), "{read}");
    assert_eq!(
        read["files"],
        serde_json::json!(pointer_files(&job)),
        "{read}"
    );
    assert_eq!(read["current"]["sluice.state-version"], "1", "{read}");
    let watermark = pointer(&job)["watermark"].clone();
    assert_eq!(
        read["current"]["sluice.watermark"],
        format!(
            "{}/{}",
            watermark["pos"].as_str().unwrap(),
            watermark["seq"]
        ),
        "{read}"
    );
    // Athena and Spark read it through their catalog: `sluice sql` prints that query.
    for (dialect, query) in [
        ("athena", "SELECT * FROM \"cdc\".\"t_current\";"),
        ("spark", "SELECT * FROM `cdc`.`t_current`;"),
    ] {
        let sql = job.run(
            &[
                "sql",
                "--dialect",
                dialect,
                "--table",
                "t",
                "--current-state",
            ],
            &[],
        );
        assert_eq!(sql.code, 0, "{}", sql.stderr);
        assert!(
            sql.stdout.trim_end().ends_with(query),
            "{dialect}: {}",
            sql.stdout
        );
    }
    let ids = read["ids"].clone();
    assert_eq!(
        ids,
        serde_json::json!({"id": 1, "v": 2}),
        "the table's columns only: {read}"
    );

    // One key changes: the snapshot replaces one bucket's file and keeps the others.
    db.sql("UPDATE t SET v = 'again' WHERE id = 7");
    assert_eq!(job.drain()["status"], "drained");
    let (code, second, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second["build"], "incremental", "{second}");
    let read = read_current(dir.path(), &job.out()).unwrap();
    assert_eq!(read["state"], db.id_v_text(), "{read}");
    assert_eq!(
        read["files"],
        serde_json::json!(pointer_files(&job)),
        "{read}"
    );
    let current = &read["summaries"][1];
    assert_eq!(current["operation"], "overwrite", "{read}");
    assert_eq!(
        (
            current["added-data-files"].clone(),
            current["deleted-data-files"].clone()
        ),
        ("1".into(), "1".into()),
        "{read}"
    );
    assert_eq!(current["total-data-files"], "5", "{read}");

    // A crash after the pointer moved: the Iceberg table still reads the previous
    // version whole; the next build (nothing new to fold) commits the new one.
    let before = read["state"].clone();
    db.sql("DELETE FROM t WHERE id <= 30");
    assert_eq!(job.drain()["status"], "drained");
    let (code, _, _) = materialize(&job, &[("SLUICE_FAULT", "materialize_after_pointer")]);
    assert_ne!(code, 0, "the fault crashes the build");
    let read = read_current(dir.path(), &job.out()).unwrap();
    assert_eq!(read["state"], before, "the previous version, whole: {read}");
    assert_eq!(read["current"]["sluice.state-version"], "2", "{read}");
    let (code, healed, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(healed["build"], "up to date", "{healed}");
    assert_eq!(healed["iceberg_table"], "cdc.t_current", "{healed}");
    let read = read_current(dir.path(), &job.out()).unwrap();
    assert_eq!(read["state"], db.id_v_text(), "{read}");
    assert_eq!(read["current"]["sluice.state-version"], "3", "{read}");
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }

    // A new column: a full build, the schema gains it and keeps the other ids.
    db.sql("ALTER TABLE t ADD COLUMN n int; UPDATE t SET n = id WHERE id > 90");
    assert_eq!(job.drain()["status"], "drained");
    let (code, fourth, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fourth["build"], "full", "{fourth}");
    let read = read_current(dir.path(), &job.out()).unwrap();
    assert_eq!(read["state"], db.id_v_text(), "{read}");
    assert_eq!(
        read["ids"],
        serde_json::json!({"id": 1, "v": 2, "n": 3}),
        "{read}"
    );
    assert_eq!(
        read["files"],
        serde_json::json!(pointer_files(&job)),
        "{read}"
    );

    // Two snapshots, and the metadata files of those two and the previous metadata file.
    assert_eq!(read["summaries"].as_array().unwrap().len(), 2, "{read}");
    let metadata_dir = job.out().join("t/_current_state/_iceberg/metadata");
    let mut names: Vec<String> = std::fs::read_dir(&metadata_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let count = |suffix: &str| names.iter().filter(|n| n.ends_with(suffix)).count();
    assert_eq!(count(".metadata.json"), 2, "{names:?}");
    assert_eq!(
        count(".avro"),
        4,
        "two manifest lists, two manifests: {names:?}"
    );
    assert_eq!(names.len(), 6, "{names:?}");

    // DuckDB's iceberg extension reads the same state from the current metadata file.
    if let Some(duckdb) = crate::support::service_url("SLUICE_TEST_DUCKDB_ICEBERG_PYTHON") {
        let script = r#"
import glob, os, sys, duckdb, duckdb_ext
base = os.path.join(list(duckdb_ext.__path__)[0], "extensions", "v" + duckdb.__version__)
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
for name in ("avro", "iceberg"):
    con.sql("LOAD '%s'" % glob.glob(os.path.join(base, "*", name + ".duckdb_extension"))[0])
rows = con.sql("SELECT id, v FROM iceberg_scan('%s')" % sys.argv[1]).fetchall()
print(",".join(f"{i}={'NULL' if v is None else v}" for i, v in sorted(rows, key=lambda r: str(r[0]))))
"#;
        let metadata = read["metadata"].as_str().unwrap();
        let text = readers::run(&duckdb, script, &[Path::new(metadata)]);
        assert_eq!(text, db.id_v_text());
    }
}

/// A table of that name sluice did not create (a MERGE-kept `<name>_current`, another
/// tool's) is never written: the build writes the state's files and reports the refusal
/// with its code; once the table is dropped, the next build creates sluice's own.
#[test]
fn iceberg_current_state_never_writes_a_table_another_writer_keeps() {
    let admin = pg_or_skip!();
    let Some(python) = readers::python() else {
        return;
    };
    let db = TestDb::new(&admin, "ice_current_foreign");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 10) i");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(
        &db,
        &["t"],
        &format!("{}initial: snapshot\n", iceberg_yaml(dir.path(), "")),
    );
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    let uri = format!("sqlite:///{}", dir.path().join("catalog.db").display());
    let other = dir.path().join("other");
    let script = r#"
import json, sys
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("default", uri=sys.argv[1], warehouse="file://" + sys.argv[2])
if sys.argv[3] == "create":
    catalog.create_namespace_if_not_exists("cdc")
    table = catalog.create_table(("cdc", "t_current"), schema=pa.schema([("id", pa.int32()), ("note", pa.string())]))
    table.append(pa.table({"id": pa.array([42], pa.int32()), "note": ["mine"]}))
elif sys.argv[3] == "read":
    table = catalog.load_table(("cdc", "t_current"))
    print(json.dumps({"rows": table.scan().to_arrow().num_rows, "snapshots": len(table.snapshots()),
                      "columns": [f.name for f in table.schema().fields]}))
else:
    catalog.drop_table(("cdc", "t_current"))
"#;
    let pyiceberg = |what: &str| {
        std::fs::create_dir_all(&other).unwrap();
        readers::run(&python, script, &[Path::new(&uri), &other, Path::new(what)])
    };
    pyiceberg("create");

    let (code, _, err) = materialize(&job, &[]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("SLUICE_ICEBERG_CATALOG_REJECTED"), "{err}");
    assert_eq!(pointer(&job)["version"], 1, "the state itself is built");
    let theirs: Value = serde_json::from_str(&pyiceberg("read")).unwrap();
    assert_eq!(
        theirs,
        serde_json::json!({"rows": 1, "snapshots": 1, "columns": ["id", "note"]}),
        "untouched"
    );

    pyiceberg("drop");
    let (code, built, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(built["iceberg_table"], "cdc.t_current", "{built}");
    let read = read_current(dir.path(), &job.out()).unwrap();
    assert_eq!(read["state"], db.id_v_text(), "{read}");

    // An empty state: no data file, the columns still the table's.
    db.sql("DELETE FROM t");
    assert_eq!(job.drain()["status"], "drained");
    let (code, _, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    let read = read_current(dir.path(), &job.out()).unwrap();
    assert_eq!(
        (read["rows"].clone(), read["files"].clone()),
        (0.into(), serde_json::json!([])),
        "{read}"
    );
    assert_eq!(read["ids"], serde_json::json!({"id": 1, "v": 2}), "{read}");
}

/// On S3 (moto) with the Glue catalog: the current-state table is an Iceberg table in Glue
/// (pyiceberg's representation, so Athena reads it), whose files are the state's files in
/// the bucket; pyiceberg's `GlueCatalog` reads it equal to the source after each build.
#[test]
fn iceberg_current_state_table_on_s3_is_in_glue_and_read_by_pyiceberg() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_current_glue");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 40) i");
    let target = crate::support::aws::AwsTarget::new(&moto);
    let database = super::glue::glue_database();
    let job = target.job(
        &db,
        &["t"],
        &super::glue::glue_yaml(
            &moto,
            &database,
            "initial: snapshot\noutput: { current_state_bucket_rows: 10 }\n",
        ),
    );
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    let script = r#"
import json, sys
from pyiceberg.catalog.glue import GlueCatalog
endpoint, database = sys.argv[1], sys.argv[2]
creds = {"access-key-id": "testing", "secret-access-key": "testing", "region": "us-east-1"}
props = {"glue.endpoint": endpoint, "s3.endpoint": endpoint}
props.update({"glue." + k: v for k, v in creds.items()})
props.update({"s3." + k: v for k, v in creds.items()})
table = GlueCatalog("glue", **props).load_table((database, "t_current"))
data = table.scan().to_arrow()
rows = sorted(zip(data["id"].to_pylist(), data["v"].to_pylist()), key=lambda r: str(r[0]))
print(json.dumps({
    "state": ",".join(f"{i}={'NULL' if v is None else v}" for i, v in rows),
    "location": table.location(),
    "files": sorted(t.file.file_path for t in table.scan().plan_files()),
    "metadata": table.metadata_location,
    "version": table.current_snapshot().summary.additional_properties.get("sluice.state-version"),
}))
"#;
    for (round, change) in [
        "UPDATE t SET v = 'changed' WHERE id % 7 = 0",
        "DELETE FROM t WHERE id > 35; INSERT INTO t VALUES (100, 'new')",
    ]
    .iter()
    .enumerate()
    {
        db.sql(change);
        assert_eq!(job.drain()["status"], "drained");
        let run = job.run(&["materialize", "--table", "t"], &[]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(
            report["tables"][0]["iceberg_table"],
            format!("{database}.t_current"),
            "{report}"
        );
        let Some(python) = readers::python() else {
            return;
        };
        let text = readers::run(&python, script, &[Path::new(&moto), Path::new(&database)]);
        let read: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(read["state"], db.id_v_text(), "round {round}: {read}");
        assert_eq!(read["version"], (round + 1).to_string(), "{read}");
        let location = format!("s3://{}/{}t/_current_state", target.bucket, target.prefix);
        assert_eq!(read["location"], location.as_str(), "{read}");
        target.fetch_output(&job);
        let pointer_files: Vec<String> = pointer_files(&job)
            .iter()
            .map(|f| format!("s3://{}/{}{f}", target.bucket, target.prefix))
            .collect();
        assert_eq!(read["files"], serde_json::json!(pointer_files), "{read}");
        let glue = super::glue::glue_table(&moto, &database, "t_current").expect("the Glue table");
        let parameters = glue.parameters().unwrap();
        assert_eq!(parameters["table_type"], "ICEBERG");
        assert_eq!(
            parameters["metadata_location"].as_str(),
            read["metadata"].as_str().unwrap()
        );
    }
}
