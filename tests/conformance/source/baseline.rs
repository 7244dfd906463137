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

/// `t (id, v, x int NOT NULL DEFAULT 7)` seeded with `rows` rows, and a job that baselines
/// it first (`initial: snapshot`) in chunks of 500 read one at a time, `extra` appended.
fn chunked_table_with_x<E: Engine>(db: &E, rows: u64, extra: &str) -> Job {
    db.create_table(
        "t",
        &format!("id {} PRIMARY KEY, v {}", E::KEY_INT, E::TEXT),
    );
    db.insert_series("t", rows, "v");
    db.sql("ALTER TABLE t ADD COLUMN x int NOT NULL DEFAULT 7");
    db.job(
        &["t"],
        &format!("initial: snapshot\nbaseline: {{ chunk_rows: 500, parallel: 1 }}\n{extra}"),
    )
}

/// A column renamed while a baseline is half read (a run crashed after its first chunks):
/// the chunks read before have the old name, so the baseline is not resumed but read
/// again at a new anchor — by the next drain (`initial: snapshot`), and by `sluice
/// baseline` after a crashed `--table` re-baseline — and every part the snapshot's
/// manifest names has the new name, with its values.
pub fn a_column_renamed_between_baseline_chunks_restarts_the_baseline<E: Engine>() {
    let Some(db) = E::for_test("baseline_rename") else {
        return;
    };
    let job = chunked_table_with_x(&db, 3000, "lease: { ttl_seconds: 2 }");
    let dir = job.out().join("t");
    // The current snapshot has `column` and not `old` in every row, and the table replays
    // to the source, its `column` holding `want(id)`.
    let assert_reads = |column: &str, old: &str, want: &dyn Fn(u64) -> &'static str| {
        let mut rows = read_rows(&support::snapshot_dir(&dir), "part-");
        rows.retain(|r| r["__op"].as_deref() == Some("snapshot"));
        assert_eq!(rows.len(), 3000);
        assert!(
            rows.iter()
                .all(|r| r.contains_key(column) && !r.contains_key(old)),
            "one shape, the new one: {:?}",
            rows[0]
        );
        assert_eq!(replayed(&job, "t"), db.id_v_text("t"));
        let state = support::replay(&support::baseline_and_changes(&dir), &["id"]);
        assert_eq!(state.len(), 3000);
        for row in state.values() {
            let id: u64 = row["id"].as_deref().unwrap().parse().unwrap();
            let value = row.get(column).cloned().flatten();
            assert_eq!(value.as_deref(), Some(want(id)), "id {id}");
        }
    };

    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", "chunk_done@2:crash")]);
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    let abandoned = support::snapshot_dir(&dir);
    assert_eq!(support::part_files(&abandoned, "part-").len(), 2);
    db.sql("ALTER TABLE t RENAME COLUMN x TO y");
    db.sql("UPDATE t SET y = 8 WHERE id <= 5");
    job.drain();
    job.drain();
    assert!(dir.join("snapshot/_SUCCESS").exists());
    assert_ne!(support::snapshot_dir(&dir), abandoned, "a new plan folder");
    assert_reads("y", "x", &|id| if id <= 5 { "8" } else { "7" });

    // The same through `sluice baseline`: a re-baseline by hand crashed after one chunk,
    // a rename, and the next `sluice baseline` reads the table again in the new shape.
    let crashed = job.run(
        &["baseline", "--table", "t"],
        &[("SLUICE_FAULT", "chunk_done@1:crash")],
    );
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    db.sql("ALTER TABLE t RENAME COLUMN y TO z");
    let again = job.run(&["baseline"], &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let summary = again.summary();
    assert_eq!(summary["status"], "done", "{summary}");
    assert_eq!(summary["chunks_read"], summary["chunks"], "{summary}");
    db.sql("UPDATE t SET z = 9 WHERE id = 3000");
    job.drain();
    assert_reads("z", "y", &|id| match id {
        ..=5 => "8",
        3000 => "9",
        _ => "7",
    });
}

/// A column retyped while a chunk is read (after the chunk's shape check, before its
/// rows): the table's shape is checked again after the read — which failed, or decoded
/// the new type as the old — so the chunk is not recorded and the baseline starts over
/// in the new shape; the drain that ran it still drains, and re-baselines the table after
/// itself.
pub fn a_column_retyped_during_a_chunk_read_restarts_the_baseline<E: Engine>() {
    let Some(db) = E::for_test("baseline_retype") else {
        return;
    };
    let job = chunked_table_with_x(&db, 2000, "");
    let mut drain = job
        .command(&["drain"], &[("SLUICE_FAULT", "chunk_opened@2:pause=3000")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_line(drain.stderr.take().unwrap(), "fault injected: pausing");
    db.sql(&E::retype("t", "x", "bigint"));
    let output = drain.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let dir = job.out().join("t");
    assert!(dir.join("snapshot/_SUCCESS").exists());
    let parts = support::part_files(&support::snapshot_dir(&dir), "part-");
    assert!(parts.len() >= 4, "{parts:?}");
    for part in &parts {
        for batch in support::read_batches(part) {
            let x = batch.schema().field_with_name("x").unwrap().clone();
            assert_eq!(x.data_type(), &arrow_schema::DataType::Int64, "{part:?}");
        }
    }
    db.sql("UPDATE t SET x = 8 WHERE id = 1");
    job.drain();
    let replayed = support::replay(&support::baseline_and_changes(&dir), &["id"]);
    assert_eq!(replayed.len(), 2000);
    for (key, row) in &replayed {
        let want = if key[0].as_deref() == Some("1") {
            "8"
        } else {
            "7"
        };
        assert_eq!(row["x"].as_deref(), Some(want), "{key:?}");
    }
    assert_eq!(support::replayed_text(&dir, &["id"]), db.id_v_text("t"));
}

/// A re-baseline stopped after its first chunk reads, through `sluice sql`'s query over
/// the table folder, as the last complete snapshot and the changes since — never as the
/// new plan's chunks read so far — and, once finished, as the new snapshot.
pub fn a_rebaseline_in_progress_reads_as_the_last_complete_snapshot<E: Engine>() {
    let Some(db) = E::for_test("baseline_window") else {
        return;
    };
    let job = chunked_table_with_x(&db, 2000, "");
    job.drain();
    db.sql("UPDATE t SET v = 'changed' WHERE id <= 3; DELETE FROM t WHERE id = 1999");
    job.drain();
    let sorted = |text: String| {
        let mut rows: Vec<String> = text.split(',').map(|r| r.replace(':', "=")).collect();
        rows.sort();
        rows
    };
    let queried =
        || crate::support::readers::sluice_sql_replayed(&job, "t", "id", "v", ":").map(sorted);
    let want = sorted(db.id_v_text("t"));
    assert_eq!(want.len(), 1999);
    let Some(before) = queried() else {
        return support::skipped("DuckDB (the readers' python) is not set up");
    };
    assert_eq!(before, want);

    let crashed = job.run(
        &["baseline", "--table", "t"],
        &[("SLUICE_FAULT", "chunk_done@1:crash")],
    );
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    let folders = std::fs::read_dir(job.out().join("t/snapshot"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(folders, 2, "the first baseline's and the one in progress");
    assert_eq!(
        queried().unwrap(),
        want,
        "while the re-baseline is half read"
    );

    db.sql("UPDATE t SET v = 'after' WHERE id = 1500");
    job.drain();
    assert!(job.out().join("t/snapshot/_SUCCESS").exists());
    assert_eq!(
        queried().unwrap(),
        sorted(db.id_v_text("t")),
        "once it is done"
    );
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

/// A baseline that meets a value with no form in its column's typed output reads the
/// table again with the column in its text form.
pub fn unrepresentable_values_move_the_column_to_text_and_the_baseline_reads_again<E: Engine>() {
    let Some((column_type, insert, text)) = E::unrepresentable() else {
        return;
    };
    let Some(db) = E::for_test("baseline_bad") else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, v {column_type}"));
    db.sql(insert);
    let job = db.job(&["t"], "");
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("SLUICE_SOURCE_TABLE_REBASELINED") && run.stderr.contains("t.v"),
        "{}",
        run.stderr
    );
    assert_eq!(replayed(&job, "t"), format!("1={text}"));
}
