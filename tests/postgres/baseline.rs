//! What only PostgreSQL baselines show: the `pg:` anchor in the records `--reset`
//! prints, the progress bar, and a keyless (REPLICA IDENTITY FULL) table baselined by its
//! declared key. The baseline cases every engine shares are in
//! `conformance::source::baseline`.

use crate::support::{self, Job, TestDb};

/// The replayed state as `id=v` text, for comparison with the source.
fn replayed(job: &Job, table: &str) -> String {
    support::replayed_text(&job.out().join(table), &["id"])
}

fn source_state(db: &TestDb) -> String {
    db.id_v_text()
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

/// A table without a key (REPLICA IDENTITY FULL) may declare NOT NULL columns in
/// `baseline.keys` to chunk its baseline by (a table without them is one pinned read:
/// `postgres::keyless`); a nullable declared column is refused; with a declared key the
/// baseline chunks by it and replays exactly.
#[test]
fn a_table_without_a_key_is_baselined_by_its_declared_key() {
    let admin = pg_or_skip!();
    let keyless = |name: &str| {
        let db = TestDb::new(&admin, name);
        db.sql("CREATE TABLE t (id int NOT NULL, v text); ALTER TABLE t REPLICA IDENTITY FULL");
        db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3000) i; ANALYZE t");
        db
    };
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

/// The recovery `SLUICE_SOURCE_LOG_GAP` suggests — remove the job's state, drop the slot,
/// baseline again — must not adopt the earlier baseline's parts: the new anchoring writes
/// under its own plan folder, and the manifest names exactly its parts.
#[test]
fn a_baseline_anchored_again_never_adopts_an_earlier_baselines_parts() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "rebaseline_stale");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'old' FROM generate_series(1, 100) i");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    let old = support::snapshot_dir(&job.out().join("t"));

    std::fs::remove_dir_all(job.dir.path().join("state")).unwrap();
    db.sql(&format!("SELECT pg_drop_replication_slot('s_{}')", db.name));
    db.sql("UPDATE t SET v = 'new'");
    let again = job.run(&["drain"], &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("adopting"), "{}", again.stderr);

    let new = support::snapshot_dir(&job.out().join("t"));
    assert_ne!(new, old, "a new anchoring writes under a new plan folder");
    assert!(
        old.join("part-000001.parquet").exists(),
        "the old part is left, never overwritten"
    );
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job.out().join("t/snapshot/_manifest.json")).unwrap(),
    )
    .unwrap();
    let keys: Vec<&str> = manifest["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    let folder = format!("t/snapshot/{}/", new.file_name().unwrap().to_string_lossy());
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k.starts_with(&folder)),
        "{keys:?}"
    );
    assert_eq!(keys.len(), support::part_files(&new, "part-").len());
    assert_eq!(replayed(&job, "t"), source_state(&db));
    assert!(source_state(&db).split(',').all(|kv| kv.ends_with("=new")));
}
