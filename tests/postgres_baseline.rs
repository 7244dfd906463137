//! Baselines against a real PostgreSQL: anchor first, chunked, resumable, and exact when
//! replayed together with the change stream.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use support::{Job, TestDb, read_rows};

/// The replayed state as `id=v` text, for comparison with the source.
fn replayed(job: &Job, table: &str) -> String {
    support::replayed_text(&job.out().join(table), &["id"])
}

fn source_state(db: &TestDb) -> String {
    db.id_v_text()
}

#[test]
fn baseline_with_concurrent_writes_and_drains_replays_to_the_exact_source_state() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "baseline");
    db.sql("CREATE TABLE t (id bigint PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'seed' || i FROM generate_series(1, 20000) i");
    db.sql("ANALYZE t");
    let job = Job::postgres(&db, &["t"], "baseline: { chunk_rows: 1000, parallel: 2 }");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (url, stop) = (db.url.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                support::psql(
                    &url,
                    &format!(
                        "BEGIN; UPDATE t SET v = 'upd{i}' WHERE id = {a}; DELETE FROM t WHERE id = {b}; \
                         INSERT INTO t VALUES ({c}, 'new{i}') ON CONFLICT (id) DO UPDATE SET v = 'again{i}'; COMMIT",
                        a = (i * 7919) % 20000 + 1,
                        b = (i * 104729) % 20000 + 1,
                        c = 20000 + i % 500,
                    ),
                );
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
    assert_eq!(replayed(&job, "t"), source_state(&db));
    // Snapshot rows carry the change-row shape.
    let snap = read_rows(&job.out().join("t/snapshot"), "part-");
    assert!(snap.iter().all(|r| r["__op"].as_deref() == Some("snapshot") && r["__seq"].as_deref() == Some("0")));
    assert!(job.out().join("t/snapshot/_SUCCESS").exists());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.out().join("t/snapshot/manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["rows"].as_u64().unwrap(), snap.len() as u64);
    // A second baseline run has nothing left to do.
    let again = job.run(&["baseline"], &[]).summary();
    assert_eq!(again["chunks_read"], 0);
}

#[test]
fn crashed_baseline_resumes_with_only_the_remaining_chunks() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "baseline_crash");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 5000) i");
    db.sql("ANALYZE t");
    let job = Job::postgres(
        &db,
        &["t"],
        "baseline: { chunk_rows: 500 }\nlease: { ttl_seconds: 2 }",
    );
    support::baseline_crash_then_resume(&job, "t", "chunk_done@3", 3, || {
        db.sql("UPDATE t SET v = 'changed' WHERE id <= 10");
    });
    job.drain();
    assert_eq!(replayed(&job, "t"), source_state(&db));
}

#[test]
fn drain_with_initial_snapshot_baselines_first_then_streams() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "initial");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert!(job.out().join("t/snapshot/_SUCCESS").exists());
    db.sql("UPDATE t SET v = 'b2' WHERE id = 2; INSERT INTO t VALUES (3, 'c')");
    job.drain();
    assert_eq!(replayed(&job, "t"), "1=a,2=b2,3=c");
    // Later drains do not baseline again.
    job.drain();
    assert_eq!(
        support::part_files(&job.out().join("t/snapshot"), "part-").len(),
        1
    );
}

#[test]
fn reset_refuses_while_snapshot_parts_exist_and_clears_records_otherwise() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "reset");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')");
    let job = Job::postgres(&db, &["t"], "");
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    let refused = job.run(&["baseline", "--reset"], &[]);
    assert_eq!(refused.code, 5, "{}", refused.stderr);
    assert!(refused.stderr.contains("t/snapshot/"), "{}", refused.stderr);
    std::fs::remove_dir_all(job.out().join("t/snapshot")).unwrap();
    let reset = job.run(&["baseline", "--reset"], &[]);
    assert_eq!(reset.code, 0, "{}", reset.stderr);
    let summary = reset.summary();
    assert_eq!(summary["cleared"], serde_json::json!(["t"]));
    assert_eq!(summary["records"]["t"]["status"], "done", "{summary}");
    assert!(
        summary["records"]["t"]["anchor"]
            .as_str()
            .is_some_and(|a| a.starts_with("pg:")),
        "{summary}"
    );
    let again = job.run(&["baseline"], &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.summary()["chunks_read"], 1);
}

/// On a terminal `sluice baseline` draws one progress bar (chunks, rows, rows/s, ETA)
/// beneath its log lines; piped, it logs plain `baseline progress` lines instead.
#[test]
fn baseline_shows_a_progress_bar_on_a_terminal_and_plain_lines_otherwise() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "baseline_bar");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 2000) i; ANALYZE t");
    let job = Job::postgres(&db, &["t"], "baseline: { chunk_rows: 500 }");
    // `script` (util-linux, in every Debian) runs the command on a pseudo-terminal.
    let line = format!(
        "{} baseline --config {}",
        env!("CARGO_BIN_EXE_sluice"),
        job.config.display()
    );
    let out = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env(&job.url_env.0, &job.url_env.1)
        .env("SLUICE_LOG", "info")
        .env_remove("SLUICE_FAULT")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(
        tty.contains("baseline [########################] 4/4 chunks  2,000 rows"),
        "{tty}"
    );
    assert!(tty.contains("rows/s  ETA"), "{tty}");
    assert!(
        tty.contains("\r\x1b[2K"),
        "the bar is redrawn in place: {tty:?}"
    );
    assert!(!tty.contains("baseline progress"), "{tty}");

    let plain = TestDb::new(&admin, "baseline_plain");
    plain.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    plain.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 2000) i; ANALYZE t");
    let job = Job::postgres(&plain, &["t"], "baseline: { chunk_rows: 500 }");
    let piped = job.run(&["baseline"], &[]);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert!(
        piped.stderr.contains("baseline progress"),
        "{}",
        piped.stderr
    );
    assert!(!piped.stderr.contains("\x1b[2K"), "{:?}", piped.stderr);
    assert!(!piped.stderr.contains("baseline ["), "{}", piped.stderr);
}

/// A table without a key (REPLICA IDENTITY FULL) is refused until `baseline.keys`
/// declares NOT NULL columns; a nullable declared column is refused; with a declared key
/// the baseline chunks by it and replays exactly.
#[test]
fn a_table_without_a_key_is_baselined_by_its_declared_key() {
    let admin = pg_or_skip!();
    let keyless = |name: &str| {
        let db = TestDb::new(&admin, name);
        db.sql("CREATE TABLE t (id int NOT NULL, v text); ALTER TABLE t REPLICA IDENTITY FULL");
        db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3000) i; ANALYZE t");
        db
    };
    let bare = keyless("baseline_keyless");
    let run = Job::postgres(&bare, &["t"], "baseline: { chunk_rows: 500 }").run(&["baseline"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_SOURCE_PREREQUISITE",
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("baseline.keys"),
        "the hint names the setting: {}",
        run.stdout
    );

    let nullable = keyless("baseline_nullkey");
    let run = Job::postgres(
        &nullable,
        &["t"],
        "baseline: { chunk_rows: 500, keys: { t: [v] } }",
    )
    .run(&["baseline"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_SOURCE_PREREQUISITE",
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("nullable"), "{}", run.stdout);

    let db = keyless("baseline_declared");
    let job = Job::postgres(
        &db,
        &["t"],
        "baseline: { chunk_rows: 500, keys: { t: [id] } }",
    );
    let summary = job.run(&["baseline"], &[]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    let summary = summary.summary();
    assert_eq!(summary["rows"], 3000, "{summary}");
    assert!(summary["chunks"].as_u64().unwrap() >= 4, "{summary}");
    db.sql("UPDATE t SET v = 'changed' WHERE id <= 10; DELETE FROM t WHERE id > 2990; INSERT INTO t VALUES (5000, 'new')");
    job.drain();
    assert_eq!(replayed(&job, "t"), source_state(&db));
}
