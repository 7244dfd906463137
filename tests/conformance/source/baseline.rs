//! Baseline cases: anchored first, chunked, resumable, and exact when replayed together
//! with the change stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Engine;
use crate::support::{self, Job, read_rows};

/// The replayed state (snapshot + changes) as `id=v` text, for comparison with the source.
fn replayed(job: &Job, table: &str) -> String {
    support::replayed_text(&job.out().join(table), &["id"])
}

pub fn baseline_with_concurrent_writes_and_drains_replays_to_the_exact_source_state<E: Engine>() {
    let Some(db) = E::for_test("baseline") else {
        return;
    };
    db.create_table("t", &format!("id bigint PRIMARY KEY, v {}", E::TEXT));
    db.insert_series("t", 20000, "seed");
    let job = db.job(&["t"], "baseline: { chunk_rows: 1000, parallel: 2 }");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (sql, stop) = (db.writer(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                sql(&format!(
                    "BEGIN; UPDATE t SET v = 'upd{i}' WHERE id = {a}; DELETE FROM t WHERE id = {b}; {c}; COMMIT",
                    a = (i * 7919) % 20000 + 1,
                    b = (i * 104729) % 20000 + 1,
                    c = E::upsert(
                        "t",
                        20000 + i % 500,
                        &format!("new{i}"),
                        &format!("again{i}")
                    ),
                ));
            }
            i
        })
    };
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    let summary = baseline.summary();
    assert_eq!(summary["status"], "done");
    assert!(summary["chunks"].as_u64().unwrap() >= 10, "{summary}");
    job.drain();
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 0);
    job.drain();
    assert_eq!(replayed(&job, "t"), db.id_v_text("t"));
    // Snapshot rows carry the change-row shape, at the anchor, before every change.
    let snap = read_rows(&support::snapshot_dir(&job.out().join("t")), "part-");
    assert!(
        snap.iter()
            .all(|r| r["__op"].as_deref() == Some("snapshot") && r["__seq"].as_deref() == Some("0"))
    );
    let anchor = snap[0]["__pos"].clone().unwrap();
    assert!(
        snap.iter()
            .all(|r| r["__pos"].as_deref() == Some(anchor.as_str()))
    );
    let changes = read_rows(&job.out().join("t"), "cdc-");
    assert!(!changes.is_empty());
    assert!(
        changes
            .iter()
            .all(|r| r["__pos"].as_deref().unwrap() > anchor.as_str()),
        "every change sorts after the snapshot"
    );
    assert!(job.out().join("t/snapshot/_SUCCESS").exists());
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job.out().join("t/snapshot/_manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["rows"].as_u64().unwrap(), snap.len() as u64);
    // A second baseline run has nothing left to do.
    let again = job.run(&["baseline"], &[]).summary();
    assert_eq!(again["chunks_read"], 0);
}

pub fn crashed_baseline_resumes_with_only_the_remaining_chunks<E: Engine>() {
    let Some(db) = E::for_test("baseline_crash") else {
        return;
    };
    db.create_table(
        "t",
        &format!("id {} PRIMARY KEY, v {}", E::KEY_INT, E::TEXT),
    );
    db.insert_series("t", 5000, "v");
    let job = db.job(
        &["t"],
        "baseline: { chunk_rows: 500 }\nlease: { ttl_seconds: 2 }",
    );
    support::baseline_crash_then_resume(&job, "t", "chunk_done@3:crash", 3, || {
        db.sql("UPDATE t SET v = 'changed' WHERE id <= 10; DELETE FROM t WHERE id = 4999");
    });
    job.drain();
    assert_eq!(replayed(&job, "t"), db.id_v_text("t"));
}

pub fn drain_with_initial_snapshot_baselines_first_then_streams<E: Engine>() {
    let Some(db) = E::for_test("baseline_initial") else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, v {}", E::TEXT));
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let job = db.job(&["t"], "initial: snapshot");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert!(job.out().join("t/snapshot/_SUCCESS").exists());
    db.sql("UPDATE t SET v = 'b2' WHERE id = 2; INSERT INTO t VALUES (3, 'c')");
    job.drain();
    assert_eq!(replayed(&job, "t"), "1=a,2=b2,3=c");
    // Later drains do not baseline again.
    job.drain();
    assert_eq!(
        support::part_files(&support::snapshot_dir(&job.out().join("t")), "part-").len(),
        1
    );
}

pub fn unrepresentable_values_fail_the_chunk_naming_the_column<E: Engine>() {
    let Some((column_type, insert)) = E::unrepresentable() else {
        return;
    };
    let Some(db) = E::for_test("baseline_bad") else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, x {column_type}"));
    db.sql(insert);
    let job = db.job(&["t"], "");
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_VALUE_UNREPRESENTABLE",
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("t.x"), "{}", run.stderr);
}
