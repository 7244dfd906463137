//! Values that do not fit their column's typed form (issue 42): a two-dimensional value in
//! an `int[]` column and `NaN` in a `numeric(10,2)` column. The run does not stop: the
//! column moves to its text form, the table alone is re-baselined in it, the other table's
//! changes are written in the same run, and everything replays exactly to the source — on
//! the stream and in a baseline. Every test owns its database, slot and publication.

use std::collections::BTreeMap;

use super::rebaseline::{record, replayed, source};
use crate::support::{self, Job, TestDb, readers};

/// Field metadata per column of the newest part whose name starts with `prefix` in `dir`.
fn newest_field_metadata(
    dir: &std::path::Path,
    prefix: &str,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let parts = support::part_files(dir, prefix);
    let newest = parts.last().expect("a part");
    let batch = &support::read_batches(newest)[0];
    batch
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let meta = f.metadata().clone().into_iter().collect();
            (f.name().clone(), meta)
        })
        .collect()
}

fn declared_text_form(meta: &BTreeMap<String, BTreeMap<String, String>>, column: &str) {
    assert_eq!(
        meta[column].get("sluice.form").map(String::as_str),
        Some("text"),
        "{column}: {meta:?}"
    );
    assert_eq!(
        meta[column].get("sluice.form_reason").map(String::as_str),
        Some("unfit_value"),
        "{column}: {meta:?}"
    );
}

#[test]
fn uf_unfit_values_on_the_stream_move_their_columns_to_text_and_the_other_table_goes_on() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "uf_stream");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a int[], n numeric(10,2))");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, ARRAY[i, i + 1], i * 1.25 FROM generate_series(1, 5) i");
    db.sql("INSERT INTO u SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t", "u"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");

    db.sql("INSERT INTO t VALUES (10, '{10}', 10.5); UPDATE t SET n = 1.5 WHERE id = 1");
    db.sql("INSERT INTO u VALUES (10, 'ten')");
    db.sql("UPDATE t SET a = '{{1,2},{3,4}}' WHERE id = 2");
    db.sql("INSERT INTO t VALUES (20, '{20}', 'NaN')");
    db.sql("UPDATE u SET v = 'one' WHERE id = 1; DELETE FROM t WHERE id = 3; DELETE FROM u WHERE id = 3");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "no value stops the run: {}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    let t = &summary["rebaselined"]["t"];
    assert_eq!(t["baseline"], "done", "{summary}");
    assert!(
        t["reason"].as_str().unwrap().contains("text form"),
        "{summary}"
    );
    assert!(summary["rebaselined"].get("u").is_none(), "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 3, "u's changes: {summary}");
    assert_eq!(
        record(&job, "t")["text_columns"],
        serde_json::json!(["a", "n"]),
        "both columns moved, in the table's baseline record"
    );
    assert_eq!(record(&job, "u").get("text_columns"), None);
    assert_eq!(
        replayed(&job, "t", &["a", "n"]),
        source(&db, "t", &["a", "n"])
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
    assert!(source(&db, "t", &["a", "n"]).contains("2:{{1,2},{3,4}}:2.50"));
    assert!(source(&db, "t", &["a", "n"]).contains("20:{20}:NaN"));

    // The stream goes on in the text form: more such values need no re-baseline.
    db.sql("UPDATE t SET a = '{{5},{6}}', n = 'NaN' WHERE id = 4");
    db.sql("INSERT INTO t VALUES (30, '{1,2}', 3.25); INSERT INTO u VALUES (30, 'thirty')");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 2, "{summary}");
    assert_eq!(
        replayed(&job, "t", &["a", "n"]),
        source(&db, "t", &["a", "n"])
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
    let meta = newest_field_metadata(&job.out().join("t"), "cdc-");
    declared_text_form(&meta, "a");
    declared_text_form(&meta, "n");
    assert_eq!(meta["id"].get("sluice.form"), None);
    // Not checked with DuckDB here: its union of the old parts' list column with the new
    // parts' text picks the list and fails (docs/output.md, "Not yet").
}

#[test]
fn uf_unfit_values_in_a_first_baseline_move_their_columns_to_text() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "uf_baseline");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a int[], n numeric(10,2))");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, ARRAY[i], i * 1.25 FROM generate_series(1, 5) i");
    db.sql("UPDATE t SET a = '{{1,2},{3,4}}' WHERE id = 2; UPDATE t SET n = 'NaN' WHERE id = 4");
    db.sql("INSERT INTO u SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t", "u"], "initial: snapshot");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "no value stops the baseline: {}", run.stderr);
    assert_eq!(run.summary()["status"], "drained", "{}", run.stderr);
    assert_eq!(record(&job, "t")["status"], "done");
    assert_eq!(
        record(&job, "t")["text_columns"],
        serde_json::json!(["a", "n"])
    );
    assert_eq!(record(&job, "u")["status"], "done");
    assert_eq!(
        replayed(&job, "t", &["a", "n"]),
        source(&db, "t", &["a", "n"])
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));

    // Changes after the baseline are written in the text form.
    db.sql("INSERT INTO t VALUES (6, '{{6}}', 'NaN'); UPDATE t SET n = 7.75 WHERE id = 2");
    db.sql("UPDATE u SET v = 'one' WHERE id = 1");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 2, "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 1, "{summary}");
    assert_eq!(
        replayed(&job, "t", &["a", "n"]),
        source(&db, "t", &["a", "n"])
    );
    let meta = newest_field_metadata(&job.out().join("t"), "cdc-");
    declared_text_form(&meta, "a");
    declared_text_form(&meta, "n");
    for column in ["a", "n"] {
        if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", column, ":") {
            assert_eq!(text, source(&db, "t", &[column]), "DuckDB, t.{column}");
        }
    }
}

#[test]
fn uf_a_crash_after_the_move_or_inside_its_baseline_loses_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "uf_crash");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a int[], n numeric(10,2))");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, ARRAY[i], i FROM generate_series(1, 5) i");
    db.sql("INSERT INTO u SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t", "u"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET a = '{{1},{2}}' WHERE id = 1; INSERT INTO u VALUES (6, 'six')");
    db.sql("INSERT INTO t VALUES (6, '{6}', 'NaN'); DELETE FROM u WHERE id = 2");

    // Killed before the run's checkpoint: the move was stored first.
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", "before_checkpoint@1")]);
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    let t = record(&job, "t");
    assert_eq!(t["status"], "wanted", "{t}");
    assert_eq!(t["text_columns"], serde_json::json!(["a", "n"]), "{t}");

    // Killed inside the re-baseline's first chunk.
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", "chunk_opened@1")]);
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);

    let summary = job.drain_when_free();
    assert_eq!(summary["status"], "drained", "{summary}");
    let t = record(&job, "t");
    assert_eq!(t["status"], "done", "{t}");
    assert_eq!(t["text_columns"], serde_json::json!(["a", "n"]), "{t}");
    assert_eq!(
        replayed(&job, "t", &["a", "n"]),
        source(&db, "t", &["a", "n"])
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
}
