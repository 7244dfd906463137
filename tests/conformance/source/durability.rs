//! Crash cases: a drain killed at each fault point of the durable order (part →
//! checkpoint → ack) loses nothing; the next drains deliver every change at least once,
//! duplicates identical.

use super::Engine;
use crate::support::{self, replay};

/// Crashes a drain at `point` while it has changes to deliver, then checks that the next
/// drains deliver every change at least once, identical duplicates only, nothing lost.
fn crash_then_recover<E: Engine>(point: &str) {
    let Some(db) = E::for_test(&format!("crash_{point}")) else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, v {}", E::TEXT));
    // Small parts so the crash happens with work both before and after it.
    let job = db.job(
        &["t"],
        "output: { rollover_rows: 10, row_group_rows: 4 }\nlease: { ttl_seconds: 3 }",
    );
    job.drain();
    for i in 0..50 {
        db.sql(&format!("INSERT INTO t VALUES ({i}, 'v{i}')"));
    }
    db.sql("UPDATE t SET v = 'changed' WHERE id % 7 = 0");
    db.sql("DELETE FROM t WHERE id % 11 = 0");
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", &format!("{point}@2"))]);
    assert_ne!(
        crashed.code, 0,
        "the fault at {point} did not fire:\n{}",
        crashed.stderr
    );
    assert!(
        crashed.stderr.contains("fault injected"),
        "{}",
        crashed.stderr
    );
    // What a `*.parquet` glob of the table's folder matches is published parts only: an
    // upload cut short leaves no file a reader would take for a part.
    let unpublished: Vec<String> = std::fs::read_dir(job.out().join("t"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".parquet") && !name.starts_with("cdc-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(unpublished.is_empty(), "a glob would read {unpublished:?}");
    // A crashed run keeps its lease until it expires; the next run waits it out.
    let recovered = job.drain_when_free();
    assert_eq!(recovered["status"], "drained");
    let rows = job.rows("t");
    // 50 inserts, one update statement (8 rows), one delete statement (5 rows).
    assert_eq!(
        support::distinct_changes(&rows),
        50 + 8 + 5,
        "every change once (plus identical duplicates)"
    );
    let state = replay(&rows, &["id"]);
    let actual: Vec<String> = state
        .values()
        .map(|r| {
            format!(
                "{}={}",
                r["id"].as_deref().unwrap(),
                r["v"].as_deref().unwrap()
            )
        })
        .collect();
    assert_eq!(actual.join(","), db.id_v_text("t"));
}

pub fn crash_after_part_durable_loses_nothing<E: Engine>() {
    crash_then_recover::<E>("part_durable");
}

pub fn crash_mid_upload_loses_nothing<E: Engine>() {
    crash_then_recover::<E>("mid_upload");
}

pub fn crash_before_checkpoint_loses_nothing<E: Engine>() {
    crash_then_recover::<E>("before_checkpoint");
}

pub fn crash_after_checkpoint_written_loses_nothing<E: Engine>() {
    crash_then_recover::<E>("checkpoint_written");
}

pub fn crash_after_source_acked_loses_nothing<E: Engine>() {
    crash_then_recover::<E>("source_acked");
}

/// A first run killed right after it opened the stream keeps its start: changes committed
/// while no run was reading are delivered by the next run, not skipped by a re-anchor at
/// a later "now" (MySQL and SQL Server hold no server-side position for a job).
pub fn a_killed_first_run_keeps_its_start<E: Engine>() {
    let Some(db) = E::for_test("first_killed") else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, v {}", E::TEXT));
    let job = db.job(&["t"], "lease: { ttl_seconds: 2 }");
    let mut first = job
        .command(&["drain"], &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_line(first.stderr.take().unwrap(), "stream open");
    first.kill().unwrap();
    first.wait().unwrap();
    db.sql("INSERT INTO t VALUES (1, 'while nobody read')");
    let next = job.drain_when_free();
    assert_eq!(next["status"], "drained", "{next}");
    let rows = job.rows("t");
    assert_eq!(
        support::ops(&rows, "v"),
        [("insert".into(), Some("while nobody read".into()))],
        "the change made after the killed first run"
    );
}
