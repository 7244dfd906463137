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
