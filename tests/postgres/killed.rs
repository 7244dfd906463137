//! A `sluice drain` killed mid-run (SIGKILL: nothing of it runs any more) must not block
//! the job: its lease names a dead process on this host, so the next run takes the lease
//! over at once — for the local state file and for DynamoDB (moto) — and the replay is
//! exact. The run is made to hang first by stalling its source connection (a proxy that
//! holds every byte), as a silent network would.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{self, Job, TestDb, aws::AwsTarget, proxy::Proxy};

/// `url` with its host and port replaced by the proxy's.
fn through(proxy: &Proxy, url: &str) -> String {
    let port = proxy
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    let mut parsed = url::Url::parse(url).unwrap();
    parsed.set_host(Some("127.0.0.1")).unwrap();
    parsed.set_port(Some(port)).unwrap();
    parsed.to_string()
}

fn upstream(url: &str) -> String {
    let parsed = url::Url::parse(url).unwrap();
    format!(
        "{}:{}",
        parsed.host_str().unwrap(),
        parsed.port().unwrap_or(5432)
    )
}

fn seed(db: &TestDb, from: usize, to: usize) {
    db.sql(&format!(
        "INSERT INTO t SELECT i, md5(i::text) FROM generate_series({from}, {to}) i"
    ));
}

/// Every change once (duplicates identical) and exactly `n` distinct changes.
fn assert_exact(rows: &[support::Row], n: usize) {
    let mut seen = std::collections::BTreeMap::new();
    for row in rows {
        let at = (row["__pos"].clone(), row["__seq"].clone());
        if let Some(previous) = seen.insert(at.clone(), row.clone()) {
            assert_eq!(previous, *row, "duplicate at {at:?} differs");
        }
    }
    assert_eq!(seen.len(), n, "distinct changes");
}

/// Starts a drain, stalls its source once the stream is open, SIGKILLs it, then runs the
/// next drain, which must proceed at once (not `skipped`) and take the lease over.
fn killed_run_is_taken_over(job: &Job, db: &TestDb, proxy: &Proxy) {
    job.drain();
    seed(db, 1, 100);
    let mut child = job
        .command(&["drain"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_line(child.stderr.take().unwrap(), "stream open");
    proxy.stall();
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // The held bytes of the dead run are dropped, never delivered.
    proxy.sever();
    proxy.restore();
    seed(db, 101, 150);

    let started = Instant::now();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}\n{}", run.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        run.stderr.contains("lease holder is provably gone"),
        "the takeover is logged: {}",
        run.stderr
    );
}

#[test]
fn killed_drain_is_taken_over_at_once_with_local_state() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lease_kill_local");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&upstream(&db.url));
    let mut job = Job::postgres(&db, &["t"], "");
    job.url_env.1 = through(&proxy, &db.url);
    killed_run_is_taken_over(&job, &db, &proxy);
    assert_exact(&job.rows("t"), 150);
}

#[test]
fn killed_drain_is_taken_over_at_once_with_dynamodb_state() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "lease_kill_ddb");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&upstream(&db.url));
    let target = AwsTarget::new(&moto);
    let mut job = target.job(&db, &["t"], "");
    job.url_env.1 = through(&proxy, &db.url);
    killed_run_is_taken_over(&job, &db, &proxy);
    target.fetch_output(&job);
    assert_exact(&job.rows("t"), 150);
}
