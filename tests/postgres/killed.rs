//! A `sluice drain` killed mid-run (SIGKILL: nothing of it runs any more) must not block
//! the job: its lease names a dead process on this host, so the next run takes the lease
//! over at once — for the local state file and for DynamoDB (moto) — and the replay is
//! exact. The run is made to hang first by stalling its source connection (a proxy that
//! holds every byte), as a silent network would.
//!
//! A drain stopped by SIGTERM stops at its next transaction boundary (`partial`, exit
//! 143), or — stuck where no boundary comes — is abandoned after the grace period
//! (`SLUICE_RUN_INTERRUPTED`, exit 143, nothing moved); either way it releases its lease.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{
    self, Job, TestDb,
    aws::AwsTarget,
    proxy::{self, Proxy},
};

fn seed(db: &TestDb, from: usize, to: usize) {
    db.sql(&format!(
        "INSERT INTO t SELECT i, md5(i::text) FROM generate_series({from}, {to}) i"
    ));
}

/// The page query: a proxy armed with it stops a drain as it asks for its first page.
const PAGE_QUERY: &str = "COPY (SELECT data FROM pg_logical_slot_peek_binary_changes";

/// Waits until the proxy holds the drain's page query (the drain is stuck reading).
fn wait_for_the_stall(proxy: &Proxy) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !proxy.is_stalled() {
        assert!(
            Instant::now() < deadline,
            "the drain never asked for a page"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// Starts a drain, stalls its source as it asks for its first page, SIGKILLs it, then
/// runs the next drain, which must proceed at once (not `skipped`) and take the lease over.
fn killed_run_is_taken_over(job: &Job, db: &TestDb, proxy: &Proxy) {
    job.drain();
    seed(db, 1, 100);
    proxy.stall_at(PAGE_QUERY);
    let mut child = job
        .command(&["drain"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_the_stall(proxy);
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
    let proxy = Proxy::start(&proxy::upstream_of(&db.url));
    let mut job = Job::postgres(&db, &["t"], "");
    job.url_env.1 = proxy.url_through(&db.url);
    killed_run_is_taken_over(&job, &db, &proxy);
    support::assert_exact(&job.rows("t"), 150);
}

#[test]
fn killed_drain_is_taken_over_at_once_with_dynamodb_state() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "lease_kill_ddb");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&proxy::upstream_of(&db.url));
    let target = AwsTarget::new(&moto);
    let mut job = target.job(&db, &["t"], "");
    job.url_env.1 = proxy.url_through(&db.url);
    killed_run_is_taken_over(&job, &db, &proxy);
    target.fetch_output(&job);
    support::assert_exact(&job.rows("t"), 150);
}

fn sigterm(child: &std::process::Child) {
    // SAFETY: signalling our own child process by its pid.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
}

#[test]
fn sigterm_stops_a_drain_at_a_transaction_boundary_and_releases_the_lease() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lease_sigterm");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let job = Job::postgres(&db, &["t"], "output: { rollover_rows: 20 }");
    job.drain();
    // Many small transactions: many boundaries, many parts.
    db.sql(
        "DO $$ BEGIN FOR i IN 1..3000 LOOP \
         INSERT INTO t VALUES (i, md5(i::text)); COMMIT; END LOOP; END $$",
    );
    let mut child = job
        .command(&["drain"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_line(child.stderr.take().unwrap(), "part written");
    sigterm(&child);
    let run = support::Run::from(child.wait_with_output().unwrap());
    assert_eq!(run.code, 143, "{}", run.stdout);
    let summary = run.summary();
    assert_eq!(summary["status"], "partial", "{summary}");
    let rows = summary["rows"].as_u64().unwrap();
    assert!(rows > 0 && rows < 3000, "{summary}");
    assert!(
        support::lease_owner(&job).is_null(),
        "the lease was released"
    );
    assert_eq!(
        support::checkpoint(&job)["position"].as_str(),
        summary["to"].as_str(),
        "the checkpoint is where the run stopped"
    );

    support::next_drain_is_exact(&job, 3000);
}

#[test]
fn sigterm_to_a_stuck_drain_abandons_it_after_the_grace_and_releases_the_lease() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lease_sigterm_stuck");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&proxy::upstream_of(&db.url));
    let mut job = Job::postgres(&db, &["t"], "");
    job.url_env.1 = proxy.url_through(&db.url);
    job.drain();
    seed(&db, 1, 100);
    let before = support::checkpoint(&job);
    proxy.stall_at(PAGE_QUERY);
    let child = job
        .command(&["drain"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_the_stall(&proxy);
    let asked = Instant::now();
    sigterm(&child);
    let run = support::Run::from(child.wait_with_output().unwrap());
    let took = asked.elapsed();
    assert_eq!(run.code, 143, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_RUN_INTERRUPTED", "{}", run.stdout);
    assert!(took < Duration::from_secs(9), "took {took:?}");
    assert!(
        support::lease_owner(&job).is_null(),
        "the lease was released"
    );
    assert_eq!(support::checkpoint(&job), before, "nothing moved");
    proxy.sever();
    proxy.restore();

    let next = job.run(&["drain"], &[]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.summary()["status"], "drained");
    support::assert_exact(&job.rows("t"), 100);
}

/// The source goes silent (a path that keeps TCP alive but forwards nothing, which
/// keepalive cannot see) once the stream is open: the run ends on its own with a
/// transient `SLUICE_SOURCE_CONNECT` within its page/read timeouts, nothing moved, and
/// the next run is exact.
#[test]
fn a_source_stalled_mid_stream_fails_transient_within_its_timeouts() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "stall_source");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&proxy::upstream_of(&db.url));
    let mut job = Job::postgres(&db, &["t"], "");
    job.add_source_setting("timeouts: { read_seconds: 2, page_seconds: 4 }");
    job.url_env.1 = proxy.url_through(&db.url);
    job.drain();
    seed(&db, 1, 20_000);
    let started = Instant::now();
    let limit = Duration::from_secs(40);
    let run = job.run_interrupted_within(&["drain"], &[], "stream open", || proxy.stall(), limit);
    let took = started.elapsed();
    proxy.sever();
    proxy.restore();
    let run = run.unwrap_or_else(|| panic!("a stalled source held the run past {limit:?}"));
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert!(
        run.stdout.contains("SLUICE_SOURCE_CONNECT"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("sent nothing for"), "{}", run.stdout);
    assert!(took < Duration::from_secs(30), "took {took:?}");

    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    support::assert_exact(&job.rows("t"), 20_000);
}

/// A source connection that stalls in its startup *under the lease* (the proxy holds the
/// startup message of the stream's connections, named `sluice/<job>`, while the claims'
/// connections before the lease pass): the run ends within `connect_seconds` with a
/// transient `SLUICE_SOURCE_CONNECT` naming the phase, the lease it took is released, and
/// the next run is not `skipped` and is exact. Before the bound, tokio-postgres bounded
/// only the TCP connect, and this run hung until killed.
#[test]
fn a_stream_connection_stalled_in_its_startup_ends_within_connect_seconds_and_frees_the_lease() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "stall_startup");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&proxy::upstream_of(&db.url));
    let mut job = Job::postgres(&db, &["t"], "");
    job.add_source_setting("timeouts: { connect_seconds: 2 }");
    job.url_env.1 = proxy.url_through(&db.url);
    job.drain();
    seed(&db, 1, 100);
    let leases_before = job.local_state()["lease_token"].as_u64().unwrap_or(0);
    proxy.stall_at(&format!("sluice/{}", db.name));
    let started = Instant::now();
    let run = job.run_within(&["drain"], &[], Duration::from_secs(60));
    let took = started.elapsed();
    proxy.sever();
    proxy.restore();
    let run = run.expect("a source stalled in its startup held the run past 60 s");
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT", "{}", run.stdout);
    assert!(
        run.stdout.contains("no startup response after 2 s"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("source.timeouts.connect_seconds"),
        "{}",
        run.stdout
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let leases_after = job.local_state()["lease_token"].as_u64().unwrap_or(0);
    assert!(
        leases_after > leases_before,
        "the stalled connection was opened under a lease"
    );

    let next = job.run(&["drain"], &[]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.summary()["status"], "drained", "{}", next.stdout);
    support::assert_exact(&job.rows("t"), 100);
}
