//! `table_format: iceberg` with `catalog: { type: s3tables }` against moto's S3 Tables and
//! S3 in server mode, through the real SDK. moto models S3 Tables as AWS does where it
//! matters here: each table gets a warehouse location of its own (a bucket), the metadata
//! pointer only moves to a file under it and only with the current version token. A
//! PostgreSQL job drains (also across a crash between the Iceberg commit and the
//! checkpoint); then **boto3's `s3tables` client** asks moto for the table's metadata
//! location and **pyiceberg** reads the table from it: every change exactly once, the
//! declared types, every file inside the warehouse, replay == source. Objects: databases
//! `ice_s3t*`, table buckets `sluice-s3t-*`.

use std::path::Path;

use serde_json::Value;

use super::{doctor_row, source};
use crate::support::aws::{AwsTarget, runtime, sdk, table_bucket};
use crate::support::{Job, TestDb, readers};

/// The `table_format` / `iceberg` YAML of a job committing to table bucket `arn` on moto.
fn s3tables_yaml(moto: &str, arn: &str, extra: &str) -> String {
    format!(
        "table_format: iceberg\niceberg:\n  catalog: {{ type: s3tables, table_bucket_arn: '{arn}', endpoint_url: '{moto}' }}\n  namespace: cdc\n{extra}"
    )
}

/// What boto3 and pyiceberg read of table `cdc.<name>` of bucket `arn`: S3 Tables'
/// answer (metadata and warehouse locations) and the table, replayed by `id`.
const READ: &str = concat!(
    crate::py_replay_by_id!(),
    r#"
import json, sys, boto3
from pyiceberg.table import StaticTable
endpoint, arn, name = sys.argv[1], sys.argv[2], sys.argv[3]
creds = dict(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
s3tables = boto3.client("s3tables", endpoint_url=endpoint, **creds)
held = s3tables.get_table(tableBucketARN=arn, namespace="cdc", name=name)
props = {"s3.endpoint": endpoint, "s3.access-key-id": "testing",
         "s3.secret-access-key": "testing", "s3.region": "us-east-1"}
table = StaticTable.from_metadata(held["metadataLocation"], properties=props)
data = table.scan().to_arrow()
rows = data.to_pylist()
state = replay(rows)
files = [t.file.file_path for t in table.scan().plan_files()]
print(json.dumps({
    "warehouse": held["warehouseLocation"],
    "metadata": held["metadataLocation"],
    "location": table.location(),
    "files": files,
    "rows": data.num_rows,
    "distinct": len(set((r["__pos"], r["__seq"]) for r in rows)),
    "ops": sorted(data["__op"].to_pylist()),
    "types": {f.name: str(f.field_type) for f in table.schema().fields},
    "snapshots": [s.summary.operation.value for s in table.snapshots()],
    "manifest_lists": [s.manifest_list for s in table.snapshots()],
    "replayed": sorted([k, v] for k, v in state.items()),
}))
"#
);

fn read(moto: &str, arn: &str, table: &str) -> Option<Value> {
    let python = readers::python()?;
    let out = readers::run(
        &python,
        READ,
        &[Path::new(moto), Path::new(arn), Path::new(table)],
    );
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
}

/// Every file the table references — data files, manifest lists, the metadata file —
/// lies in the warehouse S3 Tables gave the table.
fn assert_inside_the_warehouse(read: &Value) {
    let warehouse = read["warehouse"].as_str().unwrap().trim_end_matches('/');
    assert_eq!(read["location"], warehouse, "{read}");
    assert!(
        read["metadata"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{warehouse}/metadata/")),
        "{read}"
    );
    for list in read["manifest_lists"].as_array().unwrap() {
        assert!(
            list.as_str()
                .unwrap()
                .starts_with(&format!("{warehouse}/metadata/")),
            "{read}"
        );
    }
    let files = read["files"].as_array().unwrap();
    assert!(!files.is_empty(), "{read}");
    for file in files {
        assert!(
            file.as_str()
                .unwrap()
                .starts_with(&format!("{warehouse}/data/")),
            "{read}"
        );
    }
}

#[test]
fn iceberg_s3tables_drains_land_in_the_warehouse_and_read_exactly_once() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_s3t");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, amount numeric(12,2), at timestamptz, tags text[])");
    let target = AwsTarget::new(&moto);
    let arn = table_bucket(&moto);
    let job = target.job(
        &db,
        &["t"],
        &s3tables_yaml(&moto, &arn, "lease: { ttl_seconds: 2 }\n"),
    );
    let before = doctor_row(&job);
    assert_eq!(before["status"], "ok", "{before}");
    let detail = before["detail"].as_str().unwrap();
    assert!(
        detail.contains("t (created by its first commit)"),
        "{before}"
    );
    assert!(
        detail.contains("namespace cdc (created by the first commit)"),
        "{before}"
    );
    let Some(read) = super::drains_across_a_crash(&db, &job, &|| read(&moto, &arn, "t")) else {
        return;
    };
    assert_inside_the_warehouse(&read);
    // Each data file is a byte-for-byte copy of a part, at the part's path below the
    // table folder; the parts stay the run's output in the destination.
    let out = target.fetch_output(&job);
    let warehouse = read["warehouse"].as_str().unwrap().trim_end_matches('/');
    for file in read["files"].as_array().unwrap() {
        let below = file
            .as_str()
            .unwrap()
            .strip_prefix(&format!("{warehouse}/data/"))
            .unwrap();
        let part = std::fs::read(out.join("t").join(below))
            .unwrap_or_else(|e| panic!("the destination's part {below}: {e}"));
        let (bucket, key) = file
            .as_str()
            .unwrap()
            .strip_prefix("s3://")
            .unwrap()
            .split_once('/')
            .unwrap();
        let copy = runtime().block_on(async {
            let s3 = crate::support::aws::s3_client(&sdk(&moto).await);
            let got = s3
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .unwrap();
            got.body.collect().await.unwrap().into_bytes().to_vec()
        });
        assert_eq!(copy, part, "{file}");
    }

    // `sluice sql --merge` names the change log as Athena's S3 Tables catalog does, and
    // DuckDB's from the metadata file S3 Tables points at.
    let bucket = arn.rsplit('/').next().unwrap();
    let sql = |args: &[&str]| {
        let run = job.run(
            &[&["sql", "--table", "t", "--merge"][..], args].concat(),
            &[],
        );
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run.stdout
    };
    let merge = sql(&["--dialect", "athena"]);
    assert!(
        merge.contains(&format!("\"s3tablescatalog/{bucket}\".\"cdc\".\"t\"")),
        "{merge}"
    );
    let create = sql(&["--dialect", "athena", "--create"]);
    assert!(
        create.starts_with(&format!(
            "CREATE TABLE \"s3tablescatalog/{bucket}\".\"cdc\".\"t_current\"\nWITH (format = 'PARQUET')\n"
        )),
        "{create}"
    );
    let duckdb = sql(&["--dialect", "duckdb"]);
    assert!(
        duckdb.contains(&format!(
            "iceberg_scan('{}')",
            read["metadata"].as_str().unwrap()
        )),
        "{duckdb}"
    );
    let placed = job.run(
        &[
            "sql",
            "--table",
            "t",
            "--merge",
            "--dialect",
            "athena",
            "--create",
            "--location",
            "s3://x/y/",
        ],
        &[],
    );
    assert_ne!(placed.code, 0, "S3 Tables places its tables itself");
    assert!(placed.stderr.contains("--location"), "{}", placed.stderr);

    let after = doctor_row(&job);
    assert_eq!(after["status"], "ok", "{after}");
    let detail = after["detail"].as_str().unwrap();
    assert!(detail.contains("cdc.t (3 snapshots)"), "{after}");
    assert!(
        detail.contains("the source's columns fit each table"),
        "{after}"
    );
}

/// A local destination (a laptop's run) committing to S3 Tables: the baseline's chunk
/// parts become the table's first snapshot, copied into the warehouse; a finish that runs
/// again after its commit commits nothing more.
#[test]
fn iceberg_s3tables_a_local_baseline_is_the_first_snapshot() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_s3t_base");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'seed' || i FROM generate_series(1, 10) i");
    let arn = table_bucket(&moto);
    let job = Job::postgres(
        &db,
        &["t"],
        &s3tables_yaml(
            &moto,
            &arn,
            "initial: snapshot\nbaseline: { chunk_rows: 4 }\n",
        ),
    );
    // The finish fails right after its commit, before the baseline is marked done; the
    // baseline run again finds its plan in the table.
    let run = job.run(
        &["baseline"],
        &[("SLUICE_FAULT", "iceberg_committed:error")],
    );
    assert_eq!(run.error_code(), "SLUICE_FAULT_INJECTED", "{}", run.stdout);
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    db.sql("UPDATE t SET v = 'one' WHERE id = 1; DELETE FROM t WHERE id = 10");
    assert_eq!(job.drain()["rows"], 2);
    let Some(read) = read(&moto, &arn, "t") else {
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
    assert_inside_the_warehouse(&read);
    // Three chunk parts (4 + 4 + 2 rows) and one change part.
    assert_eq!(read["files"].as_array().unwrap().len(), 4, "{read}");
}

/// Two writers through S3 Tables: the table is created once (both get the same
/// warehouse), only one first commit points it at its metadata, and of two writers that
/// read the same metadata only one moves it — S3 Tables' version token decides when both
/// read the table before either updates it.
#[test]
fn iceberg_s3tables_two_writers_of_the_same_metadata_one_moves_it() {
    let moto = aws_or_skip!();
    let arn = table_bucket(&moto);
    runtime().block_on(async {
        let open = || sluice::iceberg::s3tables::S3TablesCatalog::new(&arn, Some(&moto)).unwrap();
        let (a, b) = (open(), open());
        a.ensure_namespace("cdc").await.unwrap();
        b.ensure_namespace("cdc").await.unwrap();
        assert_eq!(a.warehouse("cdc", "t", false).await.unwrap(), None);
        let (wa, wb) = tokio::join!(a.warehouse("cdc", "t", true), b.warehouse("cdc", "t", true));
        let (wa, wb) = (wa.unwrap().unwrap(), wb.unwrap().unwrap());
        assert_eq!(wa, wb, "one table, one warehouse");
        assert_eq!(a.load("cdc", "t").await.unwrap(), None, "no metadata yet");
        let m = |n: &str| format!("{wa}/metadata/{n}.metadata.json");
        let (first_a, first_b) = (m("00001-a"), m("00001-b"));
        let (made_a, made_b) = tokio::join!(
            a.create("cdc", "t", &first_a),
            b.create("cdc", "t", &first_b)
        );
        let (made_a, made_b) = (made_a.unwrap(), made_b.unwrap());
        assert!(
            made_a ^ made_b,
            "exactly one first commit: {made_a} {made_b}"
        );
        let m1 = a.load("cdc", "t").await.unwrap().unwrap();
        // Both read m1 and move at once: one wins, the other's token (or location) is stale.
        let (next_a, next_b) = (m("00002-a"), m("00002-b"));
        let (moved_a, moved_b) = tokio::join!(
            a.swap("cdc", "t", &m1, &next_a),
            b.swap("cdc", "t", &m1, &next_b)
        );
        let (moved_a, moved_b) = (moved_a.unwrap(), moved_b.unwrap());
        assert!(
            moved_a ^ moved_b,
            "exactly one moves it: {moved_a} {moved_b}"
        );
        let m2 = b.load("cdc", "t").await.unwrap().unwrap();
        assert_eq!(m2, m(if moved_a { "00002-a" } else { "00002-b" }));
        // The loser reads again and moves from there.
        assert!(b.swap("cdc", "t", &m2, &m("00003-b")).await.unwrap());
        // S3 Tables takes no metadata file outside the table's warehouse.
        let outside = b
            .swap(
                "cdc",
                "t",
                &m("00003-b"),
                "s3://elsewhere/metadata/x.metadata.json",
            )
            .await;
        let e = outside.unwrap_err();
        assert_eq!(e.code(), sluice::error::Code::IcebergCatalogRejected, "{e}");
    });
}

/// A table bucket that does not exist: doctor and the run refuse it with
/// `SLUICE_ICEBERG_CATALOG_REJECTED` (a hint that names the check), before the
/// checkpoint; the same job on an existing bucket then commits every change once.
#[test]
fn iceberg_s3tables_a_missing_table_bucket_is_refused_and_loses_nothing() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "ice_s3t_err");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let missing = "arn:aws:s3tables:us-east-1:123456789012:bucket/no-such-table-bucket";
    let job = target.job(&db, &["t"], &s3tables_yaml(&moto, missing, ""));
    let row = doctor_row(&job);
    assert_eq!(row["status"], "fail", "{row}");
    assert_eq!(row["code"], "SLUICE_ICEBERG_CATALOG_REJECTED", "{row}");
    assert!(row.to_string().contains("get-table-bucket"), "{row}");
    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_ICEBERG_CATALOG_REJECTED",
        "{}",
        run.stdout
    );
    let arn = table_bucket(&moto);
    let fixed = target.job(&db, &["t"], &s3tables_yaml(&moto, &arn, ""));
    let summary = fixed.drain_when_free();
    assert_eq!(
        summary["rows"], 2,
        "the refused run's changes come again: {summary}"
    );
    let Some(read) = read(&moto, &arn, "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct"].clone()),
        (2.into(), 2.into()),
        "{read}"
    );
    assert_eq!(read["replayed"], source(&db), "{read}");
}

/// S3 Tables refusing a metadata move with a `ConflictException` (a stale version token:
/// another writer moved the table between this commit's read and its update) and refusing
/// it for want of an IAM action — a proxy answers one `UpdateTableMetadataLocation` each
/// time in moto's place (moto has no IAM, and a token going stale inside one swap cannot
/// be timed from outside). The lost race: the commit reads the table again and commits
/// once. The refusal: `SLUICE_ICEBERG_CATALOG_DENIED` naming the action, before the
/// checkpoint; the next run commits the change once.
#[test]
fn iceberg_s3tables_a_stale_token_is_a_lost_race_and_a_denied_move_loses_nothing() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let proxy = crate::support::proxy::Proxy::start(moto.trim_start_matches("http://"));
    let db = TestDb::new(&admin, "ice_s3t_race");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let arn = table_bucket(&moto);
    let job = target.job(&db, &["t"], &s3tables_yaml(&proxy.url(), &arn, ""));
    let _ = job.drain();
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 5) i");
    assert_eq!(job.drain()["rows"], 5);

    // The table exists now: the next `PUT /tables/…` is the metadata move.
    db.sql("UPDATE t SET v = 'w' WHERE id = 1");
    proxy.answer_to(
        "PUT /tables/",
        409,
        r#"{"__type":"ConflictException","message":"Provided version token does not match the table version token."}"#,
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["rows"], 1, "{}", run.stdout);
    assert_eq!(proxy.answered(), 1, "the drain's first move was refused");
    assert!(
        run.stderr
            .contains("another writer committed to the Iceberg table first"),
        "{}",
        run.stderr
    );

    db.sql("INSERT INTO t VALUES (6, 'six')");
    proxy.answer_to(
        "PUT /tables/",
        403,
        r#"{"__type":"AccessDeniedException","message":"User: arn:aws:sts::123456789012:assumed-role/sluice/j is not authorized to perform: s3tables:UpdateTableMetadataLocation"}"#,
    );
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
            .contains("allow s3tables:UpdateTableMetadataLocation"),
        "{error}"
    );
    let summary = job.drain_when_free();
    assert_eq!(
        summary["rows"], 1,
        "the refused run's change comes again: {summary}"
    );

    let Some(read) = read(&moto, &arn, "t") else {
        return;
    };
    assert_eq!(
        (read["rows"].clone(), read["distinct"].clone()),
        (7.into(), 7.into()),
        "{read}"
    );
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append", "append"]),
        "{read}"
    );
    assert_eq!(read["replayed"], source(&db), "{read}");
}

/// A part above the multipart threshold (32 MiB) is copied into a table's warehouse in
/// parts, without encryption headers or a conditional put (S3 Tables manages the
/// location), and comes back byte for byte; copying it again replaces it with the same bytes.
#[test]
fn iceberg_s3tables_a_large_part_is_copied_in_parts() {
    use sluice::destination::Destination;
    let moto = aws_or_skip!();
    let arn = table_bucket(&moto);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("part.parquet");
    let size = 40 * 1024 * 1024 + 123;
    let body: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&local, &body).unwrap();
    runtime().block_on(async {
        let catalog = sluice::iceberg::s3tables::S3TablesCatalog::new(&arn, Some(&moto)).unwrap();
        catalog.ensure_namespace("cdc").await.unwrap();
        let uri = catalog
            .warehouse("cdc", "big", true)
            .await
            .unwrap()
            .unwrap();
        let store = sluice::iceberg::s3tables::Warehouse::open(&catalog, "cdc.big", &uri)
            .await
            .unwrap();
        store.put_part("data/p.parquet", &local).await.unwrap();
        store.put_part("data/p.parquet", &local).await.unwrap();
        let back = store.get("data/p.parquet").await.unwrap().unwrap();
        assert_eq!(back.len(), body.len());
        assert!(back == body, "the copy is byte for byte the part");
        let tail = store
            .get_range("data/p.parquet", size as u64 - 10, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tail, body[size - 10..]);
    });
}
