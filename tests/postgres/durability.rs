//! Type fidelity, session independence and bounded memory of the PostgreSQL drain,
//! against a real server through the real binary. The crash cases are in
//! `conformance::source::durability`.

use crate::support::{self, Job, TestDb, ops};

#[test]
fn every_supported_type_arrives_typed_and_exact() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "types");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, s smallint, b bigint, n numeric(20,4), big numeric(50,10), \
         free numeric, r real, d double precision, flag boolean, t text, vc varchar(10), c char(3), \
         raw bytea, day date, tm time, ts timestamp, tstz timestamptz, u uuid, j json, jb jsonb, \
         ints int[], texts text[])",
    );
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    db.sql(
        "INSERT INTO t VALUES (1, -32768, 9223372036854775807, -1234567890123456.7891, \
         1234567890123456789012345678901234567890.0123456789, 3.14159265358979323846, 1.5, -2.25e100, true, \
         'unicode ✓ ünï', 'short', 'ab', '\\x00ff10', '1969-07-20', '23:59:59.999999', \
         '2000-02-29 12:34:56.789012', '2026-12-01 10:00:00.000001+02', \
         'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"k\": [1, 2]}', '{\"b\": true}', \
         '{1,NULL,3}', '{x,\"\",NULL}'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, \
         '\\x', NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{}', NULL)",
    );
    job.drain();
    let rows = job.rows("t");
    assert_eq!(rows.len(), 2);
    let r = &rows[0];
    let cell = |c: &str| r[c].as_deref().unwrap_or("NULL").to_owned();
    assert_eq!(cell("s"), "-32768");
    assert_eq!(cell("b"), "9223372036854775807");
    assert_eq!(cell("n"), "-1234567890123456.7891");
    assert_eq!(
        cell("big"),
        "1234567890123456789012345678901234567890.0123456789"
    );
    assert_eq!(cell("free"), "3.14159265358979323846");
    assert_eq!(cell("r"), "1.5");
    assert_eq!(cell("d"), "-2.25e100");
    assert_eq!(cell("flag"), "true");
    assert_eq!(cell("t"), "unicode ✓ ünï");
    assert_eq!(cell("c"), "ab ");
    assert_eq!(cell("raw"), "00ff10");
    assert_eq!(cell("day"), "1969-07-20");
    assert_eq!(cell("tm"), "23:59:59.999999");
    assert_eq!(cell("ts"), "2000-02-29T12:34:56.789012");
    assert_eq!(cell("tstz"), "2026-12-01T08:00:00.000001Z");
    assert_eq!(cell("u"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(cell("j"), "{\"k\": [1, 2]}");
    assert_eq!(cell("jb"), "{\"b\": true}");
    assert_eq!(cell("ints"), "[1, , 3]");
    assert_eq!(cell("texts"), "[x, , ]");
    let empty = &rows[1];
    assert_eq!(empty["t"].as_deref(), Some(""));
    assert_eq!(empty["raw"].as_deref(), Some(""));
    assert_eq!(empty["ints"].as_deref(), Some("[]"));
    assert_eq!(empty["s"], None);
    // The Arrow types are real types, not strings.
    let part = &support::part_files(&job.out().join("t"), "cdc-")[0];
    let schema = support::read_batches(part)[0].schema();
    let ty = |c: &str| schema.field_with_name(c).unwrap().data_type().to_string();
    assert_eq!(ty("n"), "Decimal128(20, 4)");
    assert_eq!(ty("big"), "Utf8");
    assert_eq!(ty("tstz"), "Timestamp(µs, \"UTC\")");
    assert_eq!(ty("ts"), "Timestamp(µs)");
    assert_eq!(ty("day"), "Date32");
    assert_eq!(ty("tm"), "Utf8");
    assert_eq!(ty("raw"), "Binary");
    assert_eq!(ty("b"), "Int64");
    assert_eq!(ty("s"), "Int16");
}

#[test]
fn output_does_not_depend_on_the_session_timezone_or_datestyle() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "tz");
    db.sql(&format!(
        "ALTER DATABASE {} SET timezone = 'Pacific/Chatham'; ALTER DATABASE {} SET datestyle = 'SQL, DMY'; \
         ALTER DATABASE {} SET lc_monetary = 'C'",
        db.name, db.name, db.name
    ));
    db.sql("CREATE TABLE t (id int PRIMARY KEY, at timestamptz, wall timestamp, day date)");
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    db.sql(
        "INSERT INTO t VALUES (1, '2026-03-01 00:00:00+00', '2026-03-01 00:00:00', '2026-03-01')",
    );
    job.drain();
    let rows = job.rows("t");
    assert_eq!(rows[0]["at"].as_deref(), Some("2026-03-01T00:00:00Z"));
    assert_eq!(rows[0]["wall"].as_deref(), Some("2026-03-01T00:00:00"));
    assert_eq!(rows[0]["day"].as_deref(), Some("2026-03-01"));
}

#[test]
fn large_transaction_drains_with_memory_far_below_its_size() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "bigtxn");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let job = Job::postgres(&db, &["t"], "output: { row_group_rows: 8192 }");
    job.drain();
    // 200k rows of ~1 KB: ~200 MB of row images in one transaction.
    db.sql("INSERT INTO t SELECT i, repeat(md5(i::text), 32) FROM generate_series(1, 200000) i");
    let mut drain = support::PeakRss::wrap(&job.command(&["drain"], &[]));
    let child = drain
        .command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (status, peak_kib) = drain.wait(child);
    assert!(status.success());
    eprintln!(
        "peak RSS for a 200k-row (~200 MB) transaction: {} MiB",
        peak_kib / 1024
    );
    let rows = support::read_rows(&job.out().join("t"), "cdc-");
    assert_eq!(rows.len(), 200_000);
    assert!(
        peak_kib < 150 * 1024,
        "peak RSS {peak_kib} KiB is not far below the 200 MB transaction"
    );
    let ids: std::collections::BTreeSet<_> = rows.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids.len(), 200_000);
    assert_eq!(ops(&rows[..1], "id")[0].0, "insert");
}
