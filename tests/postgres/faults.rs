//! Fault tests of the PostgreSQL drain: the source connection cut mid-run or refused at
//! the start (through a loopback proxy, never by touching the shared server), a full spill
//! volume (a tiny tmpfs), and a corrupted state file. Each must fail loudly with its code,
//! move nothing (no part, no checkpoint, no slot advance), and leave the next run exact.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::{self, Job, TestDb, pg_proxy::PgProxy, tmpfs::Tmpfs};

/// What "nothing moved" compares: the stored checkpoint, the slot, and the parts.
#[derive(Debug, PartialEq)]
struct Progress {
    checkpoint: serde_json::Value,
    slot: String,
    parts: usize,
}

fn state_file(job: &Job, db: &TestDb) -> PathBuf {
    job.dir
        .path()
        .join("state")
        .join(format!("{}.json", db.name))
}

fn progress(job: &Job, db: &TestDb, table: &str) -> Progress {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state_file(job, db)).unwrap()).unwrap();
    Progress {
        checkpoint: doc["checkpoint"].clone(),
        slot: db.sql(&format!(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's_{}'",
            db.name
        )),
        parts: support::part_files(&job.out().join(table), "cdc-").len(),
    }
}

/// Waits until no backend holds the job's slot (a cut connection's backend may still be
/// finishing the peek it was running).
fn wait_slot_released(db: &TestDb) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let active = db.sql(&format!(
            "SELECT active FROM pg_replication_slots WHERE slot_name = 's_{}'",
            db.name
        ));
        if active == "f" {
            return;
        }
        assert!(Instant::now() < deadline, "the slot stayed active for 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every id once (duplicates, if any, identical) and exactly `n` distinct changes.
fn assert_exact(job: &Job, table: &str, n: usize) {
    let rows = job.rows(table);
    let mut seen = std::collections::BTreeMap::new();
    for row in &rows {
        let at = (row["__pos"].clone(), row["__seq"].clone());
        if let Some(previous) = seen.insert(at.clone(), row.clone()) {
            assert_eq!(previous, *row, "duplicate at {at:?} differs");
        }
    }
    assert_eq!(seen.len(), n, "distinct changes");
}

fn seed_rows(db: &TestDb, n: usize) {
    db.sql(&format!(
        "INSERT INTO t SELECT i, md5(i::text) || md5((i * 7)::text) FROM generate_series(1, {n}) i"
    ));
}

#[test]
fn source_connection_cut_mid_drain_fails_transient_and_moves_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "cut");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = PgProxy::start(&db.url);
    let mut job = Job::postgres(&db, &["t"], "");
    job.url_env.1 = proxy.url(&db.url);
    job.drain();
    // One transaction large enough that the server is still decoding it when we cut.
    seed_rows(&db, 150_000);
    let before = progress(&job, &db, "t");
    let run = job.run_interrupted(&["drain"], &[], "stream open", || proxy.cut());
    assert_eq!(run.code, 3, "stdout: {}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_QUERY", "{}", run.stdout);
    assert_eq!(
        progress(&job, &db, "t"),
        before,
        "the cut run moved something"
    );

    wait_slot_released(&db);
    let next = job.drain();
    assert_eq!(next["status"], "drained");
    assert_exact(&job, "t", 150_000);
    assert!(proxy.accepted() >= 4, "the runs went through the proxy");
}

#[test]
fn source_unreachable_at_start_fails_transient_and_moves_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "refused");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = PgProxy::start(&db.url);
    let mut job = Job::postgres(&db, &["t"], "");
    job.url_env.1 = proxy.url(&db.url);
    job.drain();
    seed_rows(&db, 100);
    let before = progress(&job, &db, "t");
    proxy.refuse(true);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT");
    assert_eq!(progress(&job, &db, "t"), before);
    proxy.refuse(false);
    assert_eq!(job.drain()["rows"], 100);
    assert_exact(&job, "t", 100);
}

#[test]
fn full_spill_volume_fails_spill_full_and_moves_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "spillfull");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let spill_dir = tempfile::tempdir().unwrap();
    let Some(tmpfs) = Tmpfs::mount(spill_dir.path(), "128k") else {
        return;
    };
    let job = Job::postgres(
        &db,
        &["t"],
        &format!(
            "output: {{ spill_dir: {}, row_group_rows: 256 }}",
            spill_dir.path().display()
        ),
    );
    job.drain();
    // ~20 MB of hex text: far more than the volume holds even compressed.
    db.sql("INSERT INTO t SELECT i, repeat(md5(i::text) || md5((i + 1)::text), 8) FROM generate_series(1, 40000) i");
    let before = progress(&job, &db, "t");
    support::tmpfs::assert_spill_full(&job.run(&["drain"], &[]), spill_dir.path());
    assert_eq!(progress(&job, &db, "t"), before);

    tmpfs.resize("256m");
    assert_eq!(job.drain()["rows"], 40_000);
    assert_exact(&job, "t", 40_000);
}

#[test]
fn corrupted_state_file_is_refused_and_moves_nothing() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "corrupt");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    seed_rows(&db, 10);
    job.drain();
    seed_rows_from(&db, 11, 20);
    let path = state_file(&job, &db);
    let good = std::fs::read(&path).unwrap();
    let before = progress(&job, &db, "t");
    let text = String::from_utf8(good.clone()).unwrap();
    let position =
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["checkpoint"]["position"]
            .as_str()
            .unwrap()
            .to_owned();
    let corruptions: [(&str, Vec<u8>); 4] = [
        ("garbage", b"\x00\xff not json".to_vec()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", vec![]),
        (
            "bad position",
            text.replace(&position, "pg:not-an-lsn").into_bytes(),
        ),
    ];
    for (what, bytes) in corruptions {
        std::fs::write(&path, &bytes).unwrap();
        let run = job.run(&["drain"], &[]);
        assert_eq!(run.code, 5, "{what}: {}", run.stderr);
        assert_eq!(
            run.error_code(),
            "SLUICE_STATE_CORRUPT",
            "{what}: {}",
            run.stdout
        );
        std::fs::write(&path, &good).unwrap();
        assert_eq!(progress(&job, &db, "t"), before, "{what}: something moved");
    }
    assert_eq!(job.drain()["rows"], 10);
    assert_exact(&job, "t", 20);
}

fn seed_rows_from(db: &TestDb, from: usize, to: usize) {
    db.sql(&format!(
        "INSERT INTO t SELECT i, md5(i::text) FROM generate_series({from}, {to}) i"
    ));
}

/// A multi-host URL whose first host accepts and never answers still reaches its second
/// host (each host has its own `connect_seconds`, as libpq applies `connect_timeout` per
/// host), and a `hostaddr` is the address connected to, the host name kept for TLS.
#[test]
fn a_silent_first_host_is_passed_over_and_hostaddr_is_the_address_connected_to() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "multihost");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let hole = support::black_hole::BlackHole::start();
    let parsed = url::Url::parse(&db.url).unwrap();
    let server = format!(
        "{}:{}",
        parsed.host_str().unwrap(),
        parsed.port().unwrap_or(5432)
    );
    let mut job = Job::postgres(&db, &["t"], "");
    job.add_source_setting("timeouts: { connect_seconds: 2 }");
    job.url_env.1 = db.url.replacen(
        &format!("@{server}"),
        &format!("@127.0.0.1:{},{server}", hole.addr().port()),
        1,
    );
    assert!(job.url_env.1.contains(','), "{}", job.url_env.1);
    job.drain();
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let summary = job.drain();
    assert_eq!(summary["rows"], 1, "{summary}");
    assert!(hole.accepted() > 0, "the silent first host was tried");

    // `localhost` names the server for TLS and the loopback gate; the address is taken
    // from hostaddr as written (no lookup of the name).
    let mut by_address = parsed.clone();
    by_address.set_host(Some("localhost")).unwrap();
    let separator = if by_address.query().is_some() {
        '&'
    } else {
        '?'
    };
    job.url_env.1 = format!(
        "{by_address}{separator}hostaddr={}",
        parsed.host_str().unwrap()
    );
    db.sql("INSERT INTO t VALUES (2, 'b')");
    let summary = job.drain();
    assert_eq!(summary["rows"], 1, "{summary}");
}
