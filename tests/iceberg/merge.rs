//! `sluice sql --merge` against real engines: a PostgreSQL job commits its changes to an
//! Iceberg change log (SQL catalog); after every drain DuckDB 1.4 (with its packaged
//! `iceberg` extension reading the change log) runs the printed MERGE into a
//! current-state table, which must then equal the source table — TOASTed values left
//! unlogged, a key change, a TRUNCATE and a re-baseline among the drains. The Athena text
//! runs in the same DuckDB unchanged (its change log `"cdc"."t"` a DuckDB view over
//! `iceberg_scan`), and sqlglot parses it as Trino SQL. Each test owns its database
//! (`ice_merge_*`).

use std::path::Path;

use crate::support::{Job, TestDb, readers};

/// Loads DuckDB's packaged `iceberg` extension, then in the database file `argv[1]` runs
/// the statements of files `argv[2..]` (`@meta <path>`: first makes `cdc.t` a view over
/// that metadata file) and prints the data rows of `argv[-1]`, the current-state table.
const DUCKDB_MERGE: &str = r#"
import glob, os, sys, duckdb, duckdb_ext
base = os.path.join(list(duckdb_ext.__path__)[0], "extensions", "v" + duckdb.__version__)
con = duckdb.connect(sys.argv[1], config={"allow_unsigned_extensions": "true"})
for name in ("avro", "iceberg"):
    con.sql("LOAD '%s'" % glob.glob(os.path.join(base, "*", name + ".duckdb_extension"))[0])
args = sys.argv[2:-1]
while args:
    if args[0] == "@meta":
        con.execute("CREATE SCHEMA IF NOT EXISTS cdc")
        con.execute("CREATE OR REPLACE VIEW cdc.t AS SELECT * FROM iceberg_scan('%s')" % args[1])
        args = args[2:]
        continue
    con.execute(open(args[0]).read())
    args = args[1:]
rows = con.execute(
    "SELECT id, coalesce(v, 'NULL'), coalesce(md5(body), 'NULL'), coalesce(CAST(n AS VARCHAR), 'NULL') FROM %s WHERE __watermark_pos IS NULL ORDER BY id" % sys.argv[-1]
).fetchall()
marks = con.execute("SELECT count(*) FROM %s WHERE __watermark_pos IS NOT NULL" % sys.argv[-1]).fetchone()[0]
print(",".join("|".join(str(c) for c in r) for r in rows) + " watermarks=%d" % marks)
"#;

/// The source table in the form [`DUCKDB_MERGE`] prints.
fn source_rows(db: &TestDb) -> String {
    db.sql(
        "SELECT coalesce(string_agg(id || '|' || coalesce(v, 'NULL') || '|' || coalesce(md5(body), 'NULL') || '|' || coalesce(n::text, 'NULL'), ',' ORDER BY id), '') || ' watermarks=1' FROM t",
    )
}

/// `sluice sql --merge <extra>` for table `t`, written to `file` in the job's folder.
fn statement(job: &Job, extra: &[&str], file: &str) -> std::path::PathBuf {
    let mut args = vec!["sql", "--merge", "--table", "t"];
    args.extend_from_slice(extra);
    let run = job.run(&args, &[]);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    let path = job.dir.path().join(file);
    std::fs::write(&path, &run.stdout).unwrap();
    path
}

/// Runs both MERGEs after a drain; returns (DuckDB dialect's table, Athena text's table).
fn merged(job: &Job, duckdb: &str) -> (String, String) {
    let create = statement(job, &["--dialect", "duckdb", "--create"], "create.sql");
    let merge = statement(job, &["--dialect", "duckdb"], "merge.sql");
    let text = std::fs::read_to_string(&merge).unwrap();
    let metadata = text
        .split("iceberg_scan('")
        .nth(1)
        .and_then(|t| t.split('\'').next())
        .expect("the DuckDB MERGE reads the catalog's metadata file")
        .to_owned();
    let state = job.dir.path().join("current.duckdb");
    let local = readers::run(
        duckdb,
        DUCKDB_MERGE,
        &[&state, &create, &merge, Path::new("t_current")],
    );
    let athena = statement(job, &["--dialect", "athena"], "athena.sql");
    let athena_text = std::fs::read_to_string(&athena).unwrap();
    assert!(
        athena_text.starts_with("MERGE INTO \"cdc\".\"t_current\" t\nUSING (\n"),
        "{athena_text}"
    );
    assert!(
        athena_text.contains("  FROM \"cdc\".\"t\"\n"),
        "{athena_text}"
    );
    let create_athena_target = statement(
        job,
        &[
            "--dialect",
            "duckdb",
            "--create",
            "--target",
            "cdc.t_current",
        ],
        "create_cdc.sql",
    );
    let from_athena = readers::run(
        duckdb,
        DUCKDB_MERGE,
        &[
            &job.dir.path().join("athena.duckdb"),
            Path::new("@meta"),
            Path::new(&metadata),
            &create_athena_target,
            &athena,
            Path::new("cdc.t_current"),
        ],
    );
    (local, from_athena)
}

#[test]
fn iceberg_merge_keeps_the_current_state_table_equal_to_the_source_after_every_drain() {
    let admin = pg_or_skip!();
    let Some(duckdb) = crate::support::service_url("SLUICE_TEST_DUCKDB_ICEBERG_PYTHON") else {
        return;
    };
    let db = TestDb::new(&admin, "ice_merge");
    // `body` is stored out of line (TOAST): an UPDATE that leaves it alone does not log it.
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, body text, n int)");
    db.sql("ALTER TABLE t ALTER COLUMN body SET STORAGE EXTERNAL");
    let big = |seed: &str| {
        format!("(SELECT string_agg(md5('{seed}' || i::text), '') FROM generate_series(1, 400) i)")
    };
    db.sql(&format!(
        "INSERT INTO t SELECT i, 'seed' || i, {}, i FROM generate_series(1, 6) i",
        big("a")
    ));
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(
        &db,
        &["t"],
        &super::iceberg_yaml(dir.path(), "initial: snapshot\n"),
    );
    let check = |what: &str| {
        let want = source_rows(&db);
        let (local, athena) = merged(&job, &duckdb);
        assert_eq!(local, want, "duckdb dialect, {what}");
        assert_eq!(athena, want, "athena text, {what}");
    };
    // The baseline: the first MERGE rebuilds from the change log (no watermark yet).
    assert_eq!(job.drain()["status"], "drained");
    check("baseline");

    // Updates that leave `body` unlogged, on keys whose body only the target holds; a key
    // updated twice in one batch, the first time with a new body; a key change whose new
    // key's body is unlogged (its value is the old key's, in the target); a delete; an insert.
    db.sql("UPDATE t SET n = n + 10 WHERE id IN (1, 3)");
    db.sql(&format!("UPDATE t SET body = {} WHERE id = 4", big("b")));
    db.sql("UPDATE t SET v = 'four' WHERE id = 4");
    db.sql("UPDATE t SET id = 102, n = 0 WHERE id = 2");
    db.sql("DELETE FROM t WHERE id = 5");
    db.sql(&format!(
        "INSERT INTO t VALUES (7, NULL, {}, NULL)",
        big("c")
    ));
    let summary = job.drain();
    assert!(summary["rows"].as_u64().unwrap() >= 7, "{summary}");
    let unlogged = job
        .rows("t")
        .iter()
        .filter(|r| r["__unlogged"].as_deref() == Some("[body]"))
        .count();
    assert!(
        unlogged >= 4,
        "the workload leaves body unlogged: {unlogged}"
    );
    check("unlogged values and a key change");

    // A key changed twice in one batch, then updated without its body.
    db.sql("UPDATE t SET id = 202 WHERE id = 102");
    db.sql("UPDATE t SET id = 302 WHERE id = 202");
    db.sql("UPDATE t SET v = 'moved' WHERE id = 302");
    assert_eq!(job.drain()["status"], "drained");
    check("chained key changes");

    // A batch with nothing but updates on rows the target holds.
    db.sql("UPDATE t SET n = -1 WHERE id = 7");
    assert_eq!(job.drain()["rows"], 1);
    check("an update alone");

    // TRUNCATE: every earlier row goes, the target's too.
    db.sql("UPDATE t SET v = 'gone' WHERE id = 1");
    db.sql(&format!(
        "TRUNCATE t; INSERT INTO t VALUES (8, 'eight', {}, 8), (9, 'nine', {}, 9)",
        big("d"),
        big("e")
    ));
    assert_eq!(job.drain()["status"], "drained");
    check("truncate");
    db.sql("UPDATE t SET n = 80 WHERE id = 8");
    assert_eq!(job.drain()["rows"], 1);
    check("an unlogged value after a truncate");

    // A re-baseline: its epoch marker drops every earlier row; its snapshot is the base.
    db.sql("UPDATE t SET v = 'before' WHERE id = 9");
    db.sql(&format!(
        "INSERT INTO t VALUES (10, 'ten', {}, 10)",
        big("f")
    ));
    let run = job.run(&["baseline", "--table", "t"], &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    let ops: Vec<_> = crate::support::baseline_and_changes(&job.out().join("t"))
        .iter()
        .filter_map(|r| r["__op"].clone())
        .collect();
    assert!(ops.iter().any(|o| o == "rebaseline"), "{ops:?}");
    check("a re-baseline");
    db.sql("UPDATE t SET n = 100 WHERE id = 10; DELETE FROM t WHERE id = 8");
    assert_eq!(job.drain()["rows"], 2);
    check("changes after the re-baseline");

    // Nothing new: the MERGE changes nothing.
    check("an idle MERGE");
}

/// The Athena text parses as Trino SQL (sqlglot), and names the change log and the
/// current-state table of the job's Iceberg namespace; a keyless table is refused.
#[test]
fn iceberg_merge_athena_text_parses_as_trino_and_keyless_tables_are_refused() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_merge_parse");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE k (a int, b text)");
    db.sql("ALTER TABLE k REPLICA IDENTITY FULL");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t", "k"], &super::iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql("INSERT INTO t VALUES (1, 'a'); INSERT INTO k VALUES (1, 'x')");
    assert_eq!(job.drain()["rows"], 2);
    let athena = statement(&job, &["--dialect", "athena"], "athena.sql");
    let run = job.run(
        &["sql", "--merge", "--dialect", "athena", "--table", "k"],
        &[],
    );
    assert_eq!(run.code, 5, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.summary()["error"]["code"],
        "SLUICE_REPLAY_MERGE_KEYLESS"
    );
    assert!(run.stderr.contains("--view"), "{}", run.stderr);
    let run = job.run(
        &["sql", "--merge", "--dialect", "spark", "--table", "t"],
        &[],
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let run = job.run(
        &[
            "sql",
            "--merge",
            "--view",
            "v",
            "--dialect",
            "athena",
            "--table",
            "t",
        ],
        &[],
    );
    assert_eq!(run.code, 2, "--view and --merge conflict: {}", run.stderr);
    let create = job.run(
        &[
            "sql",
            "--merge",
            "--create",
            "--dialect",
            "athena",
            "--table",
            "t",
            "--location",
            "s3://b/p/t/_current/",
        ],
        &[],
    );
    assert_eq!(create.code, 0, "{}{}", create.stdout, create.stderr);
    assert!(
        create
            .stdout
            .starts_with("CREATE TABLE \"cdc\".\"t_current\"\nWITH (table_type = 'ICEBERG'"),
        "{}",
        create.stdout
    );
    let Some(python) = readers::python() else {
        return;
    };
    let parsed = readers::run(
        &python,
        "import sys, sqlglot\nfor f in sys.argv[1:]:\n    e = sqlglot.parse_one(open(f).read(), read='trino')\n    print(type(e).__name__)",
        &[&athena],
    );
    assert_eq!(parsed, "Merge");
}

/// The DuckDB MERGE of a real job's shape against a model of the replay rule over 80
/// random change logs (`merge_model.py`): also the cases a live workload cannot stage on
/// demand — a baseline whose rows land behind the watermark, which must turn the same
/// statement into a rebuild.
#[test]
fn iceberg_merge_equals_the_replay_model_over_random_change_logs() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_merge_model");
    db.sql(
        "CREATE TABLE orders (id bigint PRIMARY KEY, note text, amount numeric(12,2), at timestamptz)",
    );
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["orders"], &super::iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1.50, now())");
    assert_eq!(job.drain()["rows"], 1);
    let run = job.run(
        &[
            "sql",
            "--merge",
            "--dialect",
            "duckdb",
            "--table",
            "orders",
            "--target",
            "cdc.public_orders_current",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let merge = job.dir.path().join("merge.sql");
    std::fs::write(&merge, &run.stdout).unwrap();
    let Some(python) = readers::python() else {
        return;
    };
    let out = readers::run(
        &python,
        include_str!("merge_model.py"),
        &[&merge, Path::new("0"), Path::new("80")],
    );
    assert_eq!(out.lines().last(), Some("bad 0"), "{out}");
}
