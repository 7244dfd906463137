//! `sluice materialize` as an operator meets it: the first build folds every part, later
//! builds fold only the changes since and rewrite only the buckets they touch, a build
//! with nothing new writes nothing, a crash on either side of the pointer swap leaves a
//! readable state and the next build finishes, and a table without a key keeps its
//! duplicate rows. The state is read by DuckDB from the files the pointer names and
//! compared with the source. Each test owns its database and slot (`matcli_*` names).

use std::path::Path;

use crate::support::current_state::{materialize, pointer, state_text, state_text_by_sql};
use crate::support::{Job, TestDb, readers};

/// The files under the table's current-state folder.
fn state_files(out: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let root = out.join("t/_current_state");
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).unwrap() {
                files.push(
                    f.unwrap()
                        .path()
                        .strip_prefix(out)
                        .unwrap()
                        .display()
                        .to_string(),
                );
            }
        }
    }
    files.sort();
    files
}

#[test]
fn builds_fold_only_new_changes_and_a_crash_leaves_a_readable_state() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "matcli_keyed");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 200) i");
    let job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\noutput: { current_state_bucket_rows: 20 }",
    );
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    db.sql("UPDATE t SET v = 'changed' WHERE id % 10 = 0; DELETE FROM t WHERE id > 190");
    assert_eq!(job.drain()["status"], "drained");

    let (code, first, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first["build"], "full", "{first}");
    assert_eq!(first["rows"], 190);
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }
    let full_files = pointer(&job)["files"].as_array().unwrap().len();
    assert_eq!(full_files, 10, "190 rows in buckets of 20 at most");

    // One key changes: one bucket is rewritten, from one new part.
    db.sql("UPDATE t SET v = 'again' WHERE id = 7");
    assert_eq!(job.drain()["status"], "drained");
    let (code, second, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second["build"], "incremental", "{second}");
    // The new run's part, and the previous one (its last change is at the watermark's
    // position, which a transaction split across parts may share).
    assert!(second["parts_read"].as_u64().unwrap() <= 2, "{second}");
    assert_eq!(second["rows"], 190);
    let p = pointer(&job);
    let rewritten: Vec<&str> = p["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .filter(|f| f.contains("/v-0000000002/"))
        .collect();
    assert_eq!(rewritten.len(), 1, "{p}");
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }

    // Nothing new: nothing written.
    let (code, third, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(third["build"], "up to date", "{third}");
    assert_eq!(pointer(&job)["version"], 2);

    // A crash before the pointer names the new files: the old version is still whole.
    db.sql("DELETE FROM t WHERE id < 50; UPDATE t SET v = NULL WHERE id = 60");
    assert_eq!(job.drain()["status"], "drained");
    let before = state_text(&job);
    let (code, _, err) = materialize(&job, &[("SLUICE_FAULT", "materialize_before_pointer")]);
    assert_ne!(code, 0, "the fault crashes the build: {err}");
    assert_eq!(pointer(&job)["version"], 2, "the pointer did not move");
    assert_eq!(
        state_text(&job),
        before,
        "the previous version reads as before"
    );
    // A crash after the swap: the new version is whole, the old files still there.
    let (code, _, err) = materialize(&job, &[("SLUICE_FAULT", "materialize_after_pointer")]);
    assert_ne!(code, 0, "{err}");
    assert_eq!(pointer(&job)["version"], 3);
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }
    // A truncate touches every bucket; the build after it removes every file no pointer
    // since the previous one names.
    db.sql("TRUNCATE t; INSERT INTO t VALUES (1, 'one'), (2, NULL)");
    assert_eq!(job.drain()["status"], "drained");
    let (code, fourth, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fourth["build"], "incremental", "{fourth}");
    assert_eq!(fourth["rows"], 2);
    if let Some(state) = state_text(&job) {
        assert_eq!(state, "1=one,2=NULL");
    }
    let p = pointer(&job);
    let mut named: Vec<String> = p["files"]
        .as_array()
        .unwrap()
        .iter()
        .chain(p["previous_files"].as_array().unwrap())
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    named.sort();
    named.dedup();
    assert_eq!(state_files(&job.out()), named, "only named files remain");
}

#[test]
fn a_table_without_a_key_keeps_its_duplicates_and_sql_agrees() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "matcli_keyless");
    db.sql("CREATE TABLE t (id int, v text); ALTER TABLE t REPLICA IDENTITY FULL");
    let job = Job::postgres(&db, &["t"], "");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (1, 'a'), (1, 'a'), (2, 'b'), (3, NULL)");
    assert_eq!(job.drain()["status"], "drained");
    let (code, first, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first["rows"], 4, "{first}");
    db.sql("DELETE FROM t WHERE ctid = (SELECT min(ctid) FROM t WHERE id = 1); UPDATE t SET v = 'c' WHERE id = 2");
    assert_eq!(job.drain()["status"], "drained");
    let (code, second, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second["build"], "incremental", "{second}");
    assert_eq!(second["rows"], 3, "{second}");
    if let (Some(state), Some(mut by_sql)) =
        (state_text(&job), readers::sluice_sql_multiset(&job, "t"))
    {
        assert_eq!(state, "1=a,2=c,3=NULL");
        by_sql.sort();
        let by_sql: Vec<String> = by_sql.iter().map(|r| r.replacen('|', "=", 1)).collect();
        assert_eq!(by_sql.join(","), state, "sluice sql's multiset");
    }

    // Two builds at once: the second finds the first's lease and builds nothing; a drain
    // beside them is not held up (the drain's lease is another).
    db.sql("INSERT INTO t VALUES (4, 'd')");
    assert_eq!(job.drain()["status"], "drained");
    let mut first = job
        .command(
            &["materialize", "--table", "t"],
            &[("SLUICE_FAULT", "materialize_before_pointer:pause=4000")],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let second = job.run(&["materialize", "--table", "t"], &[]);
    assert_eq!(second.code, 3, "{}{}", second.stdout, second.stderr);
    assert_eq!(second.summary()["error"]["code"], "SLUICE_STATE_LEASE_HELD");
    assert_eq!(job.drain()["status"], "drained", "the drain does not wait");
    assert!(first.wait().unwrap().success());
    if let Some(state) = state_text(&job) {
        assert_eq!(state, "1=a,2=c,3=NULL,4=d");
    }
}

#[test]
fn with_output_current_state_every_drain_builds_the_state() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "matcli_after_run");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "output: { current_state: true }");
    // No state yet: the query is refused with the command that builds one.
    let none = job.run(
        &[
            "sql",
            "--dialect",
            "duckdb",
            "--table",
            "t",
            "--current-state",
        ],
        &[],
    );
    assert_ne!(none.code, 0, "{}", none.stdout);
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(pointer(&job)["build"], "full");
    // An empty state is one file of no rows: its query reads nothing (and does not fail).
    db.sql("DELETE FROM t");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(
        pointer(&job)["files"].as_array().unwrap().len(),
        1,
        "{}",
        pointer(&job)
    );
    if let Some(state) = state_text_by_sql(&job) {
        assert_eq!(state, "");
    }
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(pointer(&job)["build"], "incremental");
    // The text printed now reads every later version too: it reads the pointer when run.
    let printed = job.run(
        &[
            "sql",
            "--dialect",
            "duckdb",
            "--table",
            "t",
            "--current-state",
        ],
        &[],
    );
    assert_eq!(printed.code, 0, "{}", printed.stderr);
    db.sql("UPDATE t SET v = 'B' WHERE id = 2");
    assert_eq!(job.drain()["status"], "drained");
    let p = pointer(&job);
    assert_eq!(p["build"], "incremental", "{p}");
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
        assert_eq!(state, "1=a,2=B");
        assert_eq!(
            state_text_by_sql(&job).unwrap(),
            state,
            "sluice sql --current-state"
        );
        let again = job.run(
            &[
                "sql",
                "--dialect",
                "duckdb",
                "--table",
                "t",
                "--current-state",
            ],
            &[],
        );
        assert_eq!(
            again.stdout, printed.stdout,
            "the text does not name a version"
        );
    }
    // Spark and Athena cannot follow the pointer inside a query: refused with the recipe.
    let spark = job.run(
        &[
            "sql",
            "--dialect",
            "spark",
            "--table",
            "t",
            "--current-state",
        ],
        &[],
    );
    assert_eq!(spark.code, 5, "{}{}", spark.stdout, spark.stderr);
    assert_eq!(
        spark.summary()["error"]["code"],
        "SLUICE_REPLAY_CURRENT_STATE"
    );
}

/// A table keyed by one integer column is bucketed by key range: appends and updates of
/// recent rows rewrite only the newest bucket and the new ones, and a key moved across
/// buckets rewrites the two it leaves and enters — the state stays the source's.
#[test]
fn an_integer_key_is_bucketed_by_range_so_recent_changes_rewrite_the_newest_buckets() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "matcli_range");
    db.sql("CREATE TABLE t (id bigint PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 400) i");
    let job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\noutput: { current_state_bucket_rows: 100 }",
    );
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    let (code, first, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first["build"], "full", "{first}");
    let p = pointer(&job);
    assert_eq!(
        p["bucketing"],
        serde_json::json!({ "by": "range", "base": 1, "width": 100 }),
        "{p}"
    );
    assert_eq!(p["files"].as_array().unwrap().len(), 4, "{p}");

    let written_by = |version: &str| -> Vec<String> {
        let p = pointer(&job);
        p["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.as_str())
            .filter(|f| f.contains(&format!("/v-{version}/")))
            .map(str::to_owned)
            .collect()
    };
    // Recent rows updated and new ones appended: the newest bucket and one new bucket.
    db.sql("UPDATE t SET v = 'recent' WHERE id > 390");
    db.sql("INSERT INTO t SELECT i, 'new' || i FROM generate_series(401, 450) i");
    assert_eq!(job.drain()["status"], "drained");
    let (code, second, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second["build"], "incremental", "{second}");
    assert_eq!(second["rows"], 450, "{second}");
    let mut rewritten = written_by("0000000002");
    rewritten.sort();
    assert_eq!(
        rewritten,
        [
            "t/_current_state/v-0000000002/bucket-0003.parquet",
            "t/_current_state/v-0000000002/bucket-0004.parquet"
        ],
        "{second}"
    );
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }

    // A key moved from the first bucket far past the last: both buckets are rewritten.
    db.sql("UPDATE t SET id = 1000 WHERE id = 5");
    assert_eq!(job.drain()["status"], "drained");
    let (code, third, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(third["rows"], 450, "{third}");
    let mut rewritten = written_by("0000000003");
    rewritten.sort();
    assert_eq!(
        rewritten,
        [
            "t/_current_state/v-0000000003/bucket-0000.parquet",
            "t/_current_state/v-0000000003/bucket-0009.parquet"
        ],
        "{third}"
    );
    assert_eq!(pointer(&job)["buckets"].as_array().unwrap().len(), 10);
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }
    assert_eq!(
        state_text_by_sql(&job),
        state_text(&job),
        "sluice sql --current-state reads the same state"
    );
}
