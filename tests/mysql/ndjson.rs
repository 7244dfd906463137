//! `destination: { type: stdout }` against a real MariaDB: the binlog's changes as NDJSON
//! through a real pipe into a reader, every value exact, stdout carrying nothing else.

use serde_json::json;

use crate::support::pipe::PARSE_EVERY_LINE;
use crate::support::{Job, TestMysqlDb};

#[test]
fn ndjson_from_mariadb_into_a_pipe_is_exact_and_alone_on_stdout() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "ndjson_my");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, bu bigint unsigned, bi bigint, d decimal(20,4), \
         dw decimal(50,10), db double, dtm datetime(6), ts timestamp(3) NULL, dt date, \
         vb varbinary(10), j json, vc varchar(20))",
    );
    let job = Job::mysql(&db, &["t"], "", "");
    job.use_stdout_destination();
    let first = job.drain_into_python(PARSE_EVERY_LINE, &[("SLUICE_LOG", "debug")]);
    assert_eq!(first.sluice.code, 0, "{}", first.sluice.stderr);
    assert!(first.lines().is_empty());
    db.sql(
        "SET time_zone = '+02:00'; INSERT INTO t VALUES (1, 18446744073709551615, 42, \
         -1234567890123456.7891, 1234567890123456789012345678901234567890.0123456789, -2.25e100, \
         '2000-02-29 12:34:56.789012', '2026-12-01 10:00:00.123', '1969-07-20', 0xdeadbeef, \
         '{\"k\": [1, 2]}', 'two\\nlines'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL); UPDATE t SET vc = 'changed' WHERE id = 1; DELETE FROM t WHERE id = 2",
    );
    // Not `--stdout`: the config's destination alone sends NDJSON to stdout.
    let run = {
        let mut reader = std::process::Command::new(crate::support::pipe::python());
        reader.arg("-c").arg(PARSE_EVERY_LINE);
        job.piped(&["drain"], &[("SLUICE_LOG", "debug")], reader)
    };
    assert_eq!(run.sluice.code, 0, "{}", run.sluice.stderr);
    let lines = run.lines();
    let ops: Vec<&str> = lines.iter().map(|l| l["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["insert", "insert", "update", "delete"]);
    assert!(lines.iter().all(|l| l["table"] == "t"));
    let row = &lines[0]["row"];
    assert_eq!(row["bu"], "18446744073709551615");
    assert_eq!(row["bi"], 42);
    assert_eq!(row["d"], "-1234567890123456.7891");
    assert_eq!(
        row["dw"],
        "1234567890123456789012345678901234567890.0123456789"
    );
    assert_eq!(row["db"], -2.25e100);
    assert_eq!(row["dtm"], "2000-02-29T12:34:56.789012");
    assert_eq!(row["ts"], "2026-12-01T08:00:00.123000Z");
    assert_eq!(row["dt"], "1969-07-20");
    assert_eq!(row["vb"], "3q2+7w==", "base64 of deadbeef");
    assert_eq!(row["j"], json!({"k": [1, 2]}));
    assert_eq!(row["vc"], "two\nlines");
    for column in [
        "bu", "bi", "d", "dw", "db", "dtm", "ts", "dt", "vb", "j", "vc",
    ] {
        assert_eq!(lines[1]["row"][column], serde_json::Value::Null, "{column}");
    }
    assert_eq!(lines[2]["row"]["vc"], "changed");
    assert_eq!(lines[3]["row"]["id"], 2);
    assert!(
        lines[2]["pos"].as_str() > lines[1]["pos"].as_str(),
        "MariaDB commits each statement: {lines:?}"
    );
    // Logs (debug included) and the summary are on stderr, not in the reader's input.
    assert!(
        run.sluice.stderr.contains("stream open")
            && run.sluice.stderr.contains("part emitted on stdout"),
        "{}",
        run.sluice.stderr
    );
    assert_eq!(run.summary()["status"], "drained");
    assert_eq!(run.summary()["rows"], 4);
}
