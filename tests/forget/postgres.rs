//! PostgreSQL: a key erased from a baseline, change parts, a compacted part and the
//! current state; an idempotent rerun; the keys-file form; a key the source still holds
//! refused; a kill at every fault point, then a rerun. Objects: database `t_forget_pg_*`.

use super::{assert_no_row, assert_nowhere, folder_rows, forget, forget_ok};
use crate::compaction::{clone_job, compact, config_block};
use crate::support::{Job, TestDb, current_state, readers, replay};

/// `id=v,…` in id-text order, from the replay of `rows` (table `t (id, v)`).
fn replayed(rows: &[crate::support::Row]) -> String {
    let mut out: Vec<String> = replay(rows, &["id"])
        .values()
        .map(|r| {
            format!(
                "{}={}",
                r["id"].as_deref().unwrap(),
                r["v"].as_deref().unwrap_or("NULL")
            )
        })
        .collect();
    out.sort();
    out.join(",")
}

fn sorted(text: &str) -> String {
    let mut items: Vec<&str> = text.split(',').filter(|s| !s.is_empty()).collect();
    items.sort();
    items.join(",")
}

fn source(db: &TestDb) -> String {
    sorted(&db.sql("SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ','), '') FROM t"))
}

/// A table `t` with a baseline, three drains of updates, a key change, inserts and
/// deletes, a compaction, one more drain and a current state; keys 4, 5 and 7 (values
/// `PII-four-…`, `PII-five-…`, `PII-seven-…`) are then deleted in the source and drained.
fn lake(db: &TestDb) -> Job {
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 12) i");
    db.sql("UPDATE t SET v = 'PII-seven-0' WHERE id = 7; UPDATE t SET v = 'PII-four-0' WHERE id = 4; UPDATE t SET v = 'PII-five-0' WHERE id = 5");
    let job = Job::postgres(
        db,
        &["t"],
        &format!("initial: snapshot\n{}", config_block(1 << 20)),
    );
    assert_eq!(job.drain()["status"], "drained");
    db.sql("BEGIN; UPDATE t SET v = 'PII-seven-1' WHERE id = 7; UPDATE t SET v = 'PII-four-1' WHERE id = 4; COMMIT");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("BEGIN; UPDATE t SET id = 109 WHERE id = 9; INSERT INTO t VALUES (20, 'v20'); DELETE FROM t WHERE id = 3; COMMIT");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("BEGIN; UPDATE t SET v = 'PII-seven-2' WHERE id = 7; UPDATE t SET v = 'PII-five-1' WHERE id = 5; COMMIT");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(compact(&job, &[])["status"], "compacted");
    db.sql("BEGIN; UPDATE t SET v = 'PII-seven-3' WHERE id = 7; UPDATE t SET v = 'v1+' WHERE id = 1; COMMIT");
    assert_eq!(job.drain()["status"], "drained");
    let (code, _, stderr) = current_state::materialize(&job, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        current_state::state_text(&job).is_none_or(|s| s.contains("PII-seven-3")),
        "the current state holds the key before the forget"
    );
    db.sql("DELETE FROM t WHERE id IN (4, 5, 7)");
    assert_eq!(job.drain()["status"], "drained");
    job
}

#[test]
fn postgres_forget_erases_a_key_from_every_file_and_replays_the_source() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "forget_pg");
    let job = lake(&db);
    let out = job.out();
    assert_eq!(sorted(&replayed(&folder_rows(&out, "t"))), source(&db));

    // A key the source still holds is refused, and nothing changes.
    let before = super::all_files(&out);
    let refused = forget(&job, "t", &["--key", "id=10"], &[]);
    assert_eq!(refused.code, 5, "{}", refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_FORGET_KEY_PRESENT");
    assert_eq!(super::all_files(&out), before);
    // A key naming another column than the key is refused as config.
    let wrong = forget(&job, "t", &["--key", "v=x"], &[]);
    assert_eq!(wrong.code, 1, "{}", wrong.stderr);

    let summary = forget_ok(&job, "t", &["--key", "id=7"]);
    assert_eq!(summary["status"], "forgotten", "{summary}");
    assert!(summary["rows_removed"].as_u64().unwrap() >= 5, "{summary}");
    assert!(
        !summary["state_files"].as_array().unwrap().is_empty(),
        "{summary}"
    );
    assert!(summary["keys"][0].as_str().unwrap().starts_with("sha256:"));
    let read = assert_nowhere(&out, "PII-seven");
    assert!(read >= 3, "{read} Parquet files read");
    assert_no_row(&out, "id", "7");
    assert_eq!(sorted(&replayed(&folder_rows(&out, "t"))), source(&db));
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        assert_eq!(sorted(&text), source(&db));
    }
    // The current state was built before the source's delete: it lost key 7 only; the
    // next build brings it up to the source.
    if let Some(state) = current_state::state_text(&job) {
        assert!(
            state.contains("PII-four-1") && !state.contains("7="),
            "{state}"
        );
    }
    let (code, _, stderr) = current_state::materialize(&job, &[]);
    assert_eq!(code, 0, "{stderr}");
    if let Some(state) = current_state::state_text(&job) {
        assert_eq!(sorted(&state), source(&db));
    }
    // The record names the keys by digest only.
    let records = super::all_files(&out.join("t/_forgets"));
    assert_eq!(records.len(), 1, "{records:?}");

    // Again: nothing left to do; the lake and the current state go on.
    let again = forget_ok(&job, "t", &["--key", "id=7"]);
    assert_eq!(again["status"], "nothing", "{again}");
    db.sql("UPDATE t SET v = 'v1++' WHERE id = 1; INSERT INTO t VALUES (30, 'v30')");
    assert_eq!(job.drain()["status"], "drained");
    let (code, _, stderr) = current_state::materialize(&job, &[]);
    assert_eq!(code, 0, "{stderr}");
    if let Some(state) = current_state::state_text(&job) {
        assert_eq!(sorted(&state), source(&db));
    }
    assert_eq!(compact(&job, &[])["status"], "compacted");

    // A re-baseline: the earlier plan's parts (which no reader takes now) still hold
    // keys 4 and 5; the batch form erases them there too.
    let rebaseline = job.run(&["baseline", "--table", "t"], &[]);
    assert_eq!(rebaseline.code, 0, "{}", rebaseline.stderr);
    assert_eq!(job.drain()["status"], "drained");
    let plans = std::fs::read_dir(out.join("t/snapshot"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(plans, 2, "two plan folders");
    // The batch form.
    let keys = job.dir.path().join("keys.txt");
    std::fs::write(&keys, "# people who asked\nid=4\n\nid=5\n").unwrap();
    let batch = forget_ok(&job, "t", &["--keys-file", keys.to_str().unwrap()]);
    assert_eq!(batch["status"], "forgotten", "{batch}");
    assert_eq!(batch["keys"].as_array().unwrap().len(), 2);
    assert_nowhere(&out, "PII-four");
    assert_nowhere(&out, "PII-five");
    assert_nowhere(&out, "PII-");
    assert_eq!(sorted(&replayed(&folder_rows(&out, "t"))), source(&db));
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        assert_eq!(sorted(&text), source(&db));
    }
    let (code, _, stderr) = current_state::materialize(&job, &[("SLUICE_LOG", "info")]);
    assert_eq!(code, 0, "{stderr}");
    if let Some(state) = current_state::state_text(&job) {
        assert_eq!(sorted(&state), source(&db));
    }
}

#[test]
fn postgres_forget_killed_at_every_fault_point_finishes_on_the_next_run() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "forget_pg_kill");
    let job = lake(&db);
    let want = source(&db);
    for fault in [
        "forget_part_durable",
        "forget_manifest_written",
        "forget_part_removed",
        "forget_part_removed@2",
        "forget_part_removed@4",
        "forget_state_written",
    ] {
        let copy = clone_job(&job);
        let out = copy.out();
        let killed = forget(&copy, "t", &["--key", "id=7"], &[("SLUICE_FAULT", fault)]);
        assert_ne!(killed.code, 0, "{fault}: {}", killed.stderr);
        // Killed anywhere, the lake replays to the source (the key was deleted there).
        assert_eq!(sorted(&replayed(&folder_rows(&out, "t"))), want, "{fault}");
        if let Some(text) = readers::sluice_sql_replayed(&copy, "t", "id", "v", "=") {
            assert_eq!(sorted(&text), want, "{fault}");
        }
        let done = forget_ok(&copy, "t", &["--key", "id=7"]);
        assert_eq!(done["status"], "forgotten", "{fault}: {done}");
        assert_nowhere(&out, "PII-seven");
        assert_no_row(&out, "id", "7");
        assert_eq!(sorted(&replayed(&folder_rows(&out, "t"))), want, "{fault}");
        let (code, _, stderr) = current_state::materialize(&copy, &[]);
        assert_eq!(code, 0, "{fault}: {stderr}");
        if let Some(state) = current_state::state_text(&copy) {
            assert_eq!(sorted(&state), want, "{fault}");
        }
        let again = forget_ok(&copy, "t", &["--key", "id=7"]);
        assert_eq!(again["status"], "nothing", "{fault}: {again}");
    }
}

#[test]
fn postgres_forget_refuses_a_corrupt_part_and_a_table_without_a_key() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "forget_pg_corrupt");
    let job = lake(&db);
    let out = job.out();
    // The newest run's part (the deletes) replaced by another valid part: its rows no
    // longer sum to what its manifest recorded.
    let dir = out.join("t");
    let cdc: Vec<String> = crate::compaction::change_files(&dir)
        .into_iter()
        .filter(|f| f.starts_with("cdc-"))
        .collect();
    assert!(cdc.len() >= 2, "{cdc:?}");
    let victim = dir.join(&cdc[cdc.len() - 1]);
    std::fs::copy(dir.join(&cdc[cdc.len() - 2]), &victim).unwrap();
    let before = super::all_files(&out);
    let refused = forget(&job, "t", &["--key", "id=7"], &[]);
    assert_eq!(refused.code, 5, "{}", refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_FORGET_PART_CORRUPT");
    assert!(
        refused.stderr.contains(&cdc[cdc.len() - 1]),
        "{}",
        refused.stderr
    );
    assert_eq!(
        super::all_files(&out),
        before,
        "nothing was removed or written"
    );

    let keyless = TestDb::new(&admin, "forget_pg_keyless");
    keyless.sql("CREATE TABLE k (a int, v text); ALTER TABLE k REPLICA IDENTITY FULL");
    keyless.sql("INSERT INTO k VALUES (1, 'x'), (1, 'x'), (2, 'y')");
    let job = Job::postgres(&keyless, &["k"], "initial: snapshot\n");
    assert_eq!(job.drain()["status"], "drained");
    let refused = forget(&job, "k", &["--key", "a=1"], &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_FORGET_UNSUPPORTED");
}
