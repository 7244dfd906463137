//! `sluice drain --stdout` against a real PostgreSQL: NDJSON through a real pipe into a
//! reader process, every change exact; a reader that goes away fails the run with
//! `SLUICE_DESTINATION_STDOUT_CLOSED` and the next run emits the changes again; stdout
//! carries nothing but NDJSON; baselines are refused.

use std::process::Command;

use serde_json::json;

use crate::support::pipe::{PARSE_EVERY_LINE, python};
use crate::support::{Job, TestDb};

const TABLE: &str = "CREATE TABLE nd (id bigint PRIMARY KEY, big bigint, price numeric(20,4), \
     at timestamptz, naive timestamp, day date, blob bytea, note text, doc jsonb, tags text[], \
     f float8, r real)";

#[test]
fn ndjson_into_a_python_pipe_carries_every_change_typed_and_exact() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_types");
    db.sql(TABLE);
    let job = Job::postgres(&db, &["nd"], "");
    let first = job.drain_into_python(PARSE_EVERY_LINE, &[]);
    assert_eq!(first.sluice.code, 0, "{}", first.sluice.stderr);
    assert!(first.lines().is_empty());
    db.sql(
        "INSERT INTO nd VALUES (1, 9223372036854775807, 12345678901234.5678, \
         '2024-02-29 12:34:56.789012+02', '2024-02-29 12:34:56.5', '1969-07-20', '\\x00ff10', \
         E'two\\nlines \"q\"', '{\"b\": [1, 2.50], \"a\": null}', ARRAY['x', NULL], 'NaN', 1.5); \
         INSERT INTO nd (id) VALUES (2); \
         UPDATE nd SET big = -9007199254740991, note = NULL WHERE id = 1; \
         DELETE FROM nd WHERE id = 2",
    );
    let run = job.drain_into_python(PARSE_EVERY_LINE, &[]);
    assert_eq!(run.sluice.code, 0, "{}", run.sluice.stderr);
    let lines = run.lines();
    let ops: Vec<&str> = lines.iter().map(|l| l["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["insert", "insert", "update", "delete"]);
    for l in &lines {
        assert_eq!(l["table"], "nd");
        assert!(l["pos"].as_str().is_some_and(|p| !p.is_empty()), "{l}");
        assert!(l["seq"].is_u64(), "{l}");
        assert!(
            l["ts"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z') && t.len() == 27),
            "RFC 3339, µs, UTC: {l}"
        );
    }
    for l in &lines[..3] {
        assert_eq!(l["unlogged"], serde_json::Value::Null, "{l}");
    }
    assert_eq!(
        lines[3]["unlogged"],
        json!([
            "big", "price", "at", "naive", "day", "blob", "note", "doc", "tags", "f", "r"
        ]),
        "a delete carries only the key; the rest was not logged"
    );
    let row = &lines[0]["row"];
    assert_eq!(row["id"], 1);
    assert_eq!(row["big"], "9223372036854775807", "beyond 2^53: exact text");
    assert_eq!(row["price"], "12345678901234.5678");
    assert_eq!(row["at"], "2024-02-29T10:34:56.789012Z");
    assert_eq!(row["naive"], "2024-02-29T12:34:56.500000");
    assert_eq!(row["day"], "1969-07-20");
    assert_eq!(row["blob"], "AP8Q", "base64");
    assert_eq!(row["note"], "two\nlines \"q\"");
    assert_eq!(row["doc"], json!({"a": null, "b": [1, 2.5]}));
    assert_eq!(row["tags"], json!(["x", null]));
    assert_eq!(row["f"], "NaN");
    assert_eq!(row["r"], 1.5);
    let nulls = &lines[1]["row"];
    assert_eq!(nulls["id"], 2);
    for column in [
        "big", "price", "at", "naive", "day", "blob", "note", "doc", "tags", "f",
    ] {
        assert_eq!(nulls[column], serde_json::Value::Null, "{column}");
    }
    assert_eq!(
        lines[2]["row"]["big"], -9007199254740991i64,
        "within 2^53: a number"
    );
    assert_eq!(lines[2]["row"]["note"], serde_json::Value::Null);
    assert_eq!(lines[3]["row"]["id"], 2, "a delete carries the key");
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3], "one transaction, in order");

    // The summary and the logs went to stderr; the checkpoint moved past the changes.
    let summary = run.summary();
    assert_eq!(summary["status"], "drained");
    assert_eq!(summary["rows"], 4);
    assert!(
        run.sluice.stderr.contains("stream open"),
        "{}",
        run.sluice.stderr
    );
    let again = job.drain_into_python(PARSE_EVERY_LINE, &[]);
    assert_eq!(again.sluice.code, 0, "{}", again.sluice.stderr);
    assert!(
        again.lines().is_empty(),
        "nothing is emitted twice after a clean run"
    );
    assert!(
        !job.out().exists(),
        "stdout writes no parts, manifests or markers"
    );
}

#[test]
fn ndjson_reader_closing_the_pipe_fails_the_run_and_the_next_run_emits_again() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_epipe");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    assert_eq!(job.drain_into_python(PARSE_EVERY_LINE, &[]).sluice.code, 0);
    db.sql("INSERT INTO t SELECT i, repeat('v', 100) FROM generate_series(1, 500) i");
    let before = job.local_state()["checkpoint"]["position"].clone();

    // The reader takes ten bytes and exits: the rest of the batch is never read.
    let mut head = Command::new(python());
    head.args(["-c", "import os; os.read(0, 10)"]);
    let cut = job.piped(&["drain", "--stdout"], &[], head);
    assert_eq!(cut.sluice.code, 3, "transient: {}", cut.sluice.stderr);
    assert!(
        cut.sluice
            .stderr
            .contains("SLUICE_DESTINATION_STDOUT_CLOSED"),
        "{}",
        cut.sluice.stderr
    );
    assert_eq!(
        cut.summary()["status"],
        "failed",
        "the failure is reported on stderr"
    );
    assert_eq!(
        job.local_state()["checkpoint"]["position"],
        before,
        "the checkpoint did not move past what the reader did not read"
    );

    let full = job.drain_into_python(PARSE_EVERY_LINE, &[]);
    assert_eq!(full.sluice.code, 0, "{}", full.sluice.stderr);
    let ids: Vec<i64> = full
        .lines()
        .iter()
        .map(|l| l["row"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ids,
        (1..=500).collect::<Vec<_>>(),
        "every change emitted again"
    );
    assert!(
        job.drain_into_python(PARSE_EVERY_LINE, &[])
            .lines()
            .is_empty()
    );
}

#[test]
fn ndjson_stdout_carries_only_ndjson_while_logs_and_summary_go_to_stderr() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_only");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "output: { rollover_rows: 7 }");
    job.drain_into_python(PARSE_EVERY_LINE, &[]);
    for i in 0..5 {
        db.sql(&format!(
            "INSERT INTO t SELECT g, 'x' FROM generate_series({}, {}) g",
            i * 10 + 1,
            i * 10 + 10
        ));
    }
    // jq, when installed, is the reader every line must satisfy; python otherwise.
    let debug = [("SLUICE_LOG", "debug")];
    let run = match Command::new("jq").arg("--version").output() {
        Ok(out) if out.status.success() => {
            let mut jq = Command::new("jq");
            jq.args(["-c", "-s", "."]);
            job.piped(&["drain", "--stdout"], &debug, jq)
        }
        _ => job.drain_into_python(PARSE_EVERY_LINE, &debug),
    };
    assert_eq!(run.sluice.code, 0, "{}", run.sluice.stderr);
    let lines = run.lines();
    assert_eq!(lines.len(), 50, "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l["op"] == "insert" && l["row"].is_object()),
        "every stdout line is a change object: {lines:?}"
    );
    assert!(
        run.sluice.stderr.contains("stream open")
            && run.sluice.stderr.contains("part emitted on stdout"),
        "the logs are on stderr: {}",
        run.sluice.stderr
    );
    assert_eq!(run.summary()["rows"], 50);

    // The same with the raw bytes: nothing but complete NDJSON lines.
    db.sql("INSERT INTO t VALUES (100, 'last')");
    let raw = job.run(&["drain", "--stdout"], &debug);
    assert_eq!(raw.code, 0, "{}", raw.stderr);
    assert!(raw.stdout.ends_with('\n'));
    let parsed: Vec<serde_json::Value> = raw
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0]["row"], json!({"id": 100, "v": "last"}));
}

#[test]
fn ndjson_refuses_a_baseline_with_a_coded_error() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_base");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    let drain = job.run(&["drain", "--stdout"], &[]);
    assert_eq!(drain.code, 1, "{}", drain.stderr);
    assert!(drain.stdout.is_empty(), "{}", drain.stdout);
    assert!(
        drain.stderr.contains("SLUICE_DESTINATION_STDOUT_BASELINE")
            && drain.stderr.contains("hint: take the baseline"),
        "{}",
        drain.stderr
    );
    job.use_stdout_destination();
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 1, "{}", baseline.stderr);
    assert_eq!(baseline.error_code(), "SLUICE_DESTINATION_STDOUT_BASELINE");
}

#[test]
fn ndjson_a_table_needing_a_rebaseline_fails_every_stdout_run_loudly() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_rebase");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    assert_eq!(job.drain_into_python(PARSE_EVERY_LINE, &[]).sluice.code, 0);
    db.sql("INSERT INTO t VALUES (1, '1')");
    db.sql("ALTER TABLE t ALTER COLUMN v TYPE int USING v::int");
    db.sql("INSERT INTO t VALUES (2, 2)");
    let run = job.drain_into_python(PARSE_EVERY_LINE, &[]);
    assert_eq!(run.sluice.code, 1, "{}", run.sluice.stderr);
    assert!(
        run.sluice
            .stderr
            .contains("SLUICE_DESTINATION_STDOUT_BASELINE")
            && run.sluice.stderr.contains("the re-baseline of t"),
        "{}",
        run.sluice.stderr
    );
    // The table's changes from the re-baseline request on are superseded by the snapshot
    // (taken with a local or S3 destination), as with parts: none is emitted.
    let lines = run.lines();
    assert!(
        lines.iter().all(|l| l["row"]["id"] != 2),
        "nothing after the retype: {lines:?}"
    );
    // Until the table is re-baselined elsewhere, every stdout run says so.
    let again = job.drain_into_python(PARSE_EVERY_LINE, &[]);
    assert_eq!(again.sluice.code, 1, "{}", again.sluice.stderr);
    assert!(again.lines().is_empty());
}

#[test]
fn ndjson_doctor_and_sql_know_a_stdout_destination() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_doctor");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["t"], "");
    job.use_stdout_destination();
    let doctor = job.run(&["doctor", "--json"], &[]);
    let report = doctor.summary();
    let row = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "destination writable")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    assert_eq!(row["status"], "ok", "{row}");
    assert!(row["detail"].as_str().unwrap().contains("stdout"), "{row}");
    assert!(!job.out().exists(), "doctor probed nothing on disk");

    let sql = job.run(&["sql", "--dialect", "duckdb", "--table", "t"], &[]);
    assert_eq!(sql.code, 1, "{}", sql.stderr);
    assert!(
        sql.stderr.contains("SLUICE_CONFIG_INVALID") && sql.stderr.contains("keeps no parts"),
        "{}",
        sql.stderr
    );
}

#[test]
fn ndjson_reader_exiting_with_lines_left_in_the_pipe_fails_the_run() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ndjson_pg_unread");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["t"], "");
    assert_eq!(job.drain_into_python(PARSE_EVERY_LINE, &[]).sluice.code, 0);
    db.sql("INSERT INTO t SELECT generate_series(1, 3)");
    // A few hundred bytes: every write succeeds (the pipe holds them), so only waiting for
    // the reader to take them out tells that it never did.
    let mut late = Command::new(python());
    late.args(["-c", "import os, time; time.sleep(1); os.read(0, 10)"]);
    let cut = job.piped(&["drain", "--stdout"], &[], late);
    assert_eq!(cut.sluice.code, 3, "{}", cut.sluice.stderr);
    assert!(
        cut.sluice
            .stderr
            .contains("SLUICE_DESTINATION_STDOUT_CLOSED"),
        "{}",
        cut.sluice.stderr
    );
    let ids: Vec<i64> = job
        .drain_into_python(PARSE_EVERY_LINE, &[])
        .lines()
        .iter()
        .map(|l| l["row"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3], "emitted again");
}
