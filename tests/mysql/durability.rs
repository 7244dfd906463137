//! Bounded memory of the MySQL / MariaDB drain (spilling a large transaction, refusing
//! one past the hard limit), against the local stack's MariaDB through the real binary.
//! The crash cases are in `conformance::source::durability`.

use crate::support::{self, Job, TestMysqlDb};

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
    let mut drain = support::PeakRss::wrap(&job.command(&["drain"], &[]));
    let child = drain
        .command
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let (status, peak_kib) = drain.wait(child);
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

/// Once a transaction is on disk its later rows events are kept as logged and decoded as
/// it is emitted: every kind of row change after the spill — inserts, updates with both
/// images, deletes, NULLs, several tables' events interleaved, the last event of the
/// transaction — comes out exactly and in order.
#[test]
fn rows_logged_after_a_spill_are_emitted_exactly() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "spilledrows");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(200), n int NULL)");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v varchar(20))");
    let job = Job::mysql(&db, &["t", "u"], "{ transaction_memory_bytes: 16384 }", "");
    job.drain();
    db.sql(
        "BEGIN; \
         INSERT INTO t SELECT seq, REPEAT('a', 50), IF(seq % 2 = 0, seq, NULL) FROM seq_1_to_400; \
         INSERT INTO u VALUES (1, 'one'); \
         UPDATE t SET v = CONCAT('u', id), n = NULL WHERE id % 7 = 0; \
         DELETE FROM t WHERE id % 11 = 0; \
         UPDATE u SET v = 'uno' WHERE id = 1; \
         INSERT INTO t VALUES (1000, 'last', 42); \
         COMMIT;",
    );
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    let updated = (1..=400).filter(|i| i % 7 == 0).count();
    let deleted = (1..=400).filter(|i| i % 11 == 0).count();
    assert_eq!(
        summary["tables"]["t"]["rows"].as_u64().unwrap() as usize,
        400 + updated + deleted + 1,
        "{summary}"
    );
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    let rows = support::read_rows(&job.out().join("t"), "cdc-");
    let seqs: Vec<i64> = rows
        .iter()
        .map(|r| r["__seq"].as_deref().unwrap().parse().unwrap())
        .collect();
    let mut sorted = seqs.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seqs.len(), "one row per ordinal");
    let replayed = support::replay(
        &support::baseline_and_changes(&job.out().join("t")),
        &["id"],
    )
    .values()
    .map(|r| {
        let cell = |c: &str| r[c].clone().unwrap_or_else(|| "NULL".into());
        format!("{}={}|{}", cell("id"), cell("v"), cell("n"))
    })
    .collect::<Vec<_>>()
    .join(",");
    let source = db.sql(
        "SELECT GROUP_CONCAT(CONCAT(id, '=', v, '|', IFNULL(n, 'NULL')) ORDER BY CAST(id AS CHAR) SEPARATOR ',') FROM t",
    );
    assert_eq!(replayed, source.trim());
}
