//! Crash safety and bounded memory of the MySQL / MariaDB drain, against the local
//! stack's MariaDB through the real binary.

mod support;

use support::{Job, TestMysqlDb, replay};

/// Crashes a drain at `point` while it has changes to deliver, then checks that the next
/// drains deliver every change at least once, identical duplicates only, nothing lost.
fn crash_then_recover(point: &str) {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, &format!("crash_{point}"));
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(20))");
    let job = Job::mysql(
        &db,
        &["t"],
        "",
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
    let expected =
        db.sql("SELECT GROUP_CONCAT(CONCAT(id, '=', v) ORDER BY CAST(id AS CHAR)) FROM t");
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
    assert_eq!(actual.join(","), expected);
}

#[test]
fn crash_after_part_durable_loses_nothing() {
    crash_then_recover("part_durable");
}

#[test]
fn crash_before_checkpoint_loses_nothing() {
    crash_then_recover("before_checkpoint");
}

#[test]
fn crash_after_checkpoint_written_loses_nothing() {
    crash_then_recover("checkpoint_written");
}

#[test]
fn crash_after_source_acked_loses_nothing() {
    crash_then_recover("source_acked");
}

#[test]
fn a_500k_row_transaction_drains_under_a_small_memory_cap() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "bigtxn");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad varchar(200))");
    let spill = tempfile::tempdir().unwrap();
    let job = Job::mysql(
        &db,
        &["t"],
        "{ transaction_memory_bytes: 4194304 }",
        &format!(
            "output: {{ row_group_rows: 8192, spill_dir: {} }}",
            spill.path().display()
        ),
    );
    job.drain();
    // 500k rows of ~140 bytes in ONE transaction: ~70 MB of row data, ~200 MB decoded.
    db.sql(
        "SET SESSION max_recursive_iterations = 1000000; INSERT INTO t \
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 500000) \
         SELECT i, REPEAT(MD5(i), 4) FROM s",
    );
    let log = job.dir.path().join("drain.log");
    let child = job
        .command(&["drain"], &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let (status, peak_kib) = support::wait_with_peak_rss(child);
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "drain failed:\n{stderr}");
    assert!(
        stderr.contains("spilling to disk"),
        "the transaction spilled:\n{stderr}"
    );
    eprintln!(
        "peak RSS for a 500k-row (~70 MB of rows) MariaDB transaction with a 4 MiB transaction cap: {} MiB",
        peak_kib / 1024
    );
    let rows = support::read_rows(&job.out().join("t"), "cdc-");
    assert_eq!(rows.len(), 500_000);
    let positions: std::collections::BTreeSet<_> =
        rows.iter().map(|r| r["__pos"].clone()).collect();
    assert_eq!(positions.len(), 1, "one transaction, one position");
    let seqs: Vec<i64> = rows
        .iter()
        .map(|r| r["__seq"].as_deref().unwrap().parse().unwrap())
        .collect();
    assert!(
        seqs.iter().enumerate().all(|(i, s)| *s == i as i64),
        "gap-free ordinals"
    );
    assert!(
        peak_kib < 200 * 1024,
        "peak RSS {peak_kib} KiB is not bounded by the cap and the row group"
    );
    let leftovers: Vec<_> = std::fs::read_dir(spill.path()).unwrap().collect();
    assert!(
        leftovers.is_empty(),
        "spill files are removed: {leftovers:?}"
    );
}

#[test]
fn a_transaction_past_the_hard_limit_fails_loudly() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "hardlimit");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad varchar(200))");
    let job = Job::mysql(
        &db,
        &["t"],
        "{ transaction_memory_bytes: 65536, max_transaction_bytes: 1048576 }",
        "",
    );
    job.drain();
    db.sql(
        "SET SESSION max_recursive_iterations = 1000000; INSERT INTO t WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 20000) \
         SELECT i, REPEAT('x', 100) FROM s",
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_TRANSACTION_TOO_LARGE");
    assert!(
        run.stderr.contains("max_transaction_bytes"),
        "{}",
        run.stderr
    );
    assert!(support::part_files(&job.out().join("t"), "cdc-").is_empty());
}
