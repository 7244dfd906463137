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
