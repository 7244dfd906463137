//! Fault tests of the MySQL/MariaDB drain: the binlog connection cut mid-run or refused at
//! the start (through a loopback TCP proxy, never by touching the shared server), and a
//! full spill volume under a transaction too large for memory (a tiny tmpfs). Each must
//! fail loudly with its code, move nothing (no part, no checkpoint), and leave the next
//! run exact.

use crate::support::{self, Job, TestMysqlDb, proxy::Proxy, tmpfs::Tmpfs};

/// What "nothing moved" compares: the stored checkpoint and the parts written.
#[derive(Debug, PartialEq)]
struct Progress {
    checkpoint: serde_json::Value,
    parts: usize,
}

fn progress(job: &Job, table: &str) -> Progress {
    let doc = job.local_state();
    Progress {
        checkpoint: doc["checkpoint"].clone(),
        parts: support::part_files(&job.out().join(table), "cdc-").len(),
    }
}

/// Every change once (duplicates, if any, identical) and exactly `n` distinct changes.
fn assert_exact(job: &Job, table: &str, n: usize) {
    assert_eq!(
        support::distinct_changes(&job.rows(table)),
        n,
        "distinct changes"
    );
}

/// One transaction of `n` rows of ~200 bytes each, ids `from..from + n`.
fn seed_rows(db: &TestMysqlDb, from: usize, n: usize) {
    db.sql(&format!(
        "INSERT INTO t (id, pad) SELECT seq, REPEAT(MD5(seq), 6) FROM seq_{from}_to_{}",
        from + n - 1
    ));
}

/// The job's source URL with its `host:port` replaced by the proxy's.
fn through(proxy: &Proxy, source_url: &str) -> String {
    let (scheme, rest) = source_url.split_once("://").unwrap();
    let (userinfo, rest) = rest.rsplit_once('@').unwrap();
    let path = &rest[rest.find('/').unwrap_or(rest.len())..];
    let addr = proxy.url();
    let addr = addr.trim_start_matches("http://");
    format!("{scheme}://{userinfo}@{addr}{path}")
}

fn upstream(source_url: &str) -> String {
    let rest = source_url.split_once("://").unwrap().1;
    let rest = rest.rsplit_once('@').unwrap().1;
    rest[..rest.find('/').unwrap_or(rest.len())].to_owned()
}

/// A fresh `t (id, pad)` in database `name`, drained once by a job that reaches the
/// server through a severable proxy.
fn proxied_job(admin: &str, name: &str) -> (TestMysqlDb, Proxy, Job) {
    let db = TestMysqlDb::new(admin, name);
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&upstream(&db.source_url));
    let mut job = Job::mysql(&db, &["t"], "", "");
    job.url_env.1 = through(&proxy, &db.source_url);
    job.drain();
    (db, proxy, job)
}

#[test]
fn binlog_connection_cut_mid_drain_fails_transient_and_moves_nothing() {
    let admin = mysql_or_skip!();
    let (db, proxy, job) = proxied_job(&admin, "fault_cut");
    // One transaction large enough that the binlog is still streaming when we cut: no
    // part can be written before its commit is read, so nothing may move.
    seed_rows(&db, 1, 200_000);
    let before = progress(&job, "t");
    let run = job.run_interrupted(&["drain"], &[], "stream open", || proxy.sever());
    assert_eq!(run.code, 3, "stdout: {}", run.stdout);
    assert!(
        run.error_code().starts_with("SLUICE_SOURCE_"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("hint"), "{}", run.stdout);
    assert_eq!(progress(&job, "t"), before, "the cut run moved something");

    proxy.restore();
    let next = job.drain();
    assert_eq!(next["status"], "drained", "{next}");
    assert_exact(&job, "t", 200_000);
}

#[test]
fn binlog_stalled_mid_drain_fails_transient_within_the_read_timeout() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "fault_stall");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&upstream(&db.source_url));
    let mut job = Job::mysql(&db, &["t"], "", "");
    let normal = std::fs::read_to_string(&job.config).unwrap();
    job.add_source_setting("timeouts: { read_seconds: 2 }");
    job.url_env.1 = through(&proxy, &db.source_url);
    job.drain();
    seed_rows(&db, 1, 200_000);
    let before = progress(&job, "t");
    let started = std::time::Instant::now();
    let run = job.run_interrupted(&["drain"], &[], "stream open", || proxy.stall());
    let took = started.elapsed();
    assert_eq!(run.code, 3, "stdout: {}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT", "{}", run.stdout);
    assert!(
        run.stdout.contains("sent nothing for 2 s"),
        "{}",
        run.stdout
    );
    assert!(
        took < std::time::Duration::from_secs(30),
        "a stalled source held the run for {took:?}"
    );
    assert_eq!(
        progress(&job, "t"),
        before,
        "the stalled run moved something"
    );

    // The next run, with the default timeout (the server may take a moment to let go of
    // the stalled dump registered under the same server_id), is exact.
    proxy.restore();
    std::fs::write(&job.config, &normal).unwrap();
    let next = job.drain_when_free();
    assert_eq!(next["status"], "drained", "{next}");
    assert_exact(&job, "t", 200_000);
}

#[test]
fn source_unreachable_at_start_fails_transient_and_moves_nothing() {
    let admin = mysql_or_skip!();
    let (db, proxy, job) = proxied_job(&admin, "fault_refused");
    seed_rows(&db, 1, 100);
    let before = progress(&job, "t");
    proxy.sever();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT", "{}", run.stdout);
    assert_eq!(progress(&job, "t"), before);
    proxy.restore();
    assert_eq!(job.drain()["rows"], 100);
    assert_exact(&job, "t", 100);
}

#[test]
fn a_transaction_the_spill_volume_cannot_hold_is_refused_naming_the_volume_and_moves_nothing() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "fault_spill");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let spill_dir = tempfile::tempdir().unwrap();
    let Some(tmpfs) = Tmpfs::mount(spill_dir.path(), "256k") else {
        return;
    };
    let job = Job::mysql(
        &db,
        &["t"],
        "{ transaction_memory_bytes: 65536 }",
        &format!(
            "output: {{ spill_dir: {}, row_group_rows: 256 }}",
            spill_dir.path().display()
        ),
    );
    job.drain();
    // One ~4 MB transaction: it must spill, and the volume holds a fraction of it. Retrying
    // cannot help (the transaction is in the log), so it is a refusal that names the
    // volume's free space and the fix — not a full disk, retried for ever.
    seed_rows(&db, 1, 20_000);
    let before = progress(&job, "t");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_SOURCE_TRANSACTION_TOO_LARGE",
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("KiB free"), "{}", run.stdout);
    assert!(run.stdout.contains("ephemeral storage"), "{}", run.stdout);
    let left: Vec<_> = std::fs::read_dir(spill_dir.path()).unwrap().collect();
    assert!(left.is_empty(), "spill files left behind: {left:?}");
    assert_eq!(progress(&job, "t"), before);

    tmpfs.resize("256m");
    assert_eq!(job.drain()["rows"], 20_000);
    assert_exact(&job, "t", 20_000);
}
