//! The Lambda face stopped by its environment: Lambda sends SIGTERM before it ends an
//! execution environment only to a function with a registered extension, then SIGKILL
//! 500 ms later (internal extensions only). The emulator (tests/support/lambda_api.rs)
//! keeps that rule, so these tests need the function's own internal extension.
//!
//! * mid-drain: the invocation stops at a transaction boundary (`partial`), its
//!   checkpoint is where it stopped, the lease is free, the process exits by itself, and
//!   the next CLI drain resumes from that checkpoint with nothing lost;
//! * a drain stuck where no boundary comes (its source stalled): abandoned after the
//!   grace, answered `SLUICE_RUN_INTERRUPTED`, nothing moved, the lease free;
//! * between invocations: the process exits at once.

use std::time::{Duration, Instant};

use crate::support::{
    self, Job, TestDb,
    proxy::{self, Proxy},
};
use support::lambda_api::{Function, Outcome, RuntimeApi};

/// How long the emulator lets the function take after SIGTERM before SIGKILL. Lambda
/// allows 500 ms; the function's own budget is 450 ms (300 ms grace + 150 ms for the
/// lease release); the rest is slack for a loaded test machine.
const LIMIT: Duration = Duration::from_secs(2);

/// The name the function registers its internal extension under.
const EXTENSION: &str = "sluice-graceful-stop";

/// The function registered exactly its one internal extension, with no events, and the
/// extension called `event/next`.
fn assert_extension_registered(api: &RuntimeApi) {
    let extensions = api.extensions();
    assert_eq!(extensions.len(), 1, "{extensions:?}");
    assert_eq!(extensions[0].name, EXTENSION);
    assert!(extensions[0].events.is_empty(), "{extensions:?}");
    assert!(extensions[0].ready, "the extension never called event/next");
    assert!(
        api.refused_registrations().is_empty(),
        "{:?}",
        api.refused_registrations()
    );
}

#[test]
fn sigterm_mid_drain_stops_at_a_boundary_releases_the_lease_and_exits() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lambda_sigterm");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let job = Job::postgres(&db, &["t"], "output: { rollover_rows: 20 }");
    job.drain();
    // Many small transactions: many boundaries, many parts.
    db.sql(
        "DO $$ BEGIN FOR i IN 1..3000 LOOP \
         INSERT INTO t VALUES (i, md5(i::text)); COMMIT; END LOOP; END $$",
    );
    let before = support::checkpoint(&job);
    let api = RuntimeApi::start();
    let mut function = Function::start(&api, &job, &[]);
    let id = api.invoke(
        serde_json::json!({"action": "drain"}),
        Duration::from_secs(120),
    );
    assert!(
        function.wait_for_log("part written", Duration::from_secs(60)),
        "the drain never wrote a part"
    );
    let ended = api.shut_down(&mut function, LIMIT);
    eprintln!("shut down: {ended:?}");
    assert!(
        ended.sigterm,
        "no extension registered, so Lambda would not send SIGTERM: {ended:?}"
    );
    assert_extension_registered(&api);
    assert!(
        ended.exited_by_itself(0),
        "the function did not exit by itself: {ended:?}"
    );
    let answer = match api.wait(&id, Duration::from_secs(1)) {
        Outcome::Response(v) => v,
        Outcome::Error(e) => panic!("the invocation failed: {e}"),
    };
    assert_eq!(answer["status"], "partial", "{answer}");
    let rows = answer["rows"].as_u64().unwrap();
    assert!(rows > 0 && rows < 3000, "{answer}");
    assert_eq!(answer["from"], before["position"], "{answer}");
    assert!(
        support::lease_owner(&job).is_null(),
        "the lease was released"
    );
    assert_eq!(
        support::checkpoint(&job)["position"].as_str(),
        answer["to"].as_str(),
        "the checkpoint is where the run stopped"
    );

    let next = job.run(&["drain"], &[]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    let next = next.summary();
    assert_eq!(next["status"], "drained", "{next}");
    assert_eq!(next["from"], answer["to"], "resumed where the run stopped");
    assert_eq!(
        rows + next["rows"].as_u64().unwrap(),
        3000,
        "nothing lost, nothing read twice"
    );
    support::assert_exact(&job.rows("t"), 3000);
}

/// The page query: a proxy armed with it stops a drain as it asks for its first page.
const PAGE_QUERY: &str = "COPY (SELECT data FROM pg_logical_slot_peek_binary_changes";

#[test]
fn sigterm_to_a_stuck_drain_answers_interrupted_within_lambdas_budget() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lambda_sigterm_stuck");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)");
    let proxy = Proxy::start(&proxy::upstream_of(&db.url));
    let mut job = Job::postgres(&db, &["t"], "");
    job.url_env.1 = proxy.url_through(&db.url);
    job.drain();
    db.sql("INSERT INTO t SELECT i, md5(i::text) FROM generate_series(1, 100) i");
    let before = support::checkpoint(&job);
    proxy.stall_at(PAGE_QUERY);
    let api = RuntimeApi::start();
    let mut function = Function::start(&api, &job, &[]);
    let id = api.invoke(
        serde_json::json!({"action": "drain"}),
        Duration::from_secs(120),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !proxy.is_stalled() {
        assert!(
            Instant::now() < deadline,
            "the drain never asked for a page"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let ended = api.shut_down(&mut function, LIMIT);
    eprintln!("shut down: {ended:?}");
    assert_extension_registered(&api);
    assert!(
        ended.exited_by_itself(0),
        "the function did not exit by itself: {ended:?}"
    );
    let Outcome::Error(error) = api.wait(&id, Duration::from_secs(1)) else {
        panic!("a stuck drain reported success")
    };
    assert_eq!(error["errorType"], "Sluice.Transient", "{error}");
    let message = error["errorMessage"].as_str().unwrap();
    assert!(message.starts_with("SLUICE_RUN_INTERRUPTED"), "{error}");
    assert!(message.contains("Lambda"), "the hint is Lambda's: {error}");
    assert!(
        support::lease_owner(&job).is_null(),
        "the lease was released"
    );
    assert_eq!(support::checkpoint(&job), before, "nothing moved");
    proxy.sever();
    proxy.restore();

    support::next_drain_is_exact(&job, 100);
}

#[test]
fn sigterm_between_invocations_exits_at_once() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lambda_sigterm_idle");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    let api = RuntimeApi::start();
    let mut function = Function::start(&api, &job, &[]);
    let first = api.call(serde_json::json!({"action": "drain"}));
    assert_eq!(first["status"], "drained", "{first}");
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let second = api.call(serde_json::json!({"action": "drain"}));
    assert_eq!(second["rows"], 1, "{second}");
    // The function is back in its `invocation/next` long poll.
    std::thread::sleep(Duration::from_millis(200));
    let ended = api.shut_down(&mut function, LIMIT);
    eprintln!("shut down: {ended:?}");
    assert_extension_registered(&api);
    assert!(
        ended.exited_by_itself(0),
        "the function did not exit by itself: {ended:?}"
    );
    assert!(
        ended.took < Duration::from_millis(500),
        "an idle function exits at once, took {:?}",
        ended.took
    );
    assert!(support::lease_owner(&job).is_null());
    let next = job.run(&["drain"], &[]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.summary()["status"], "drained");
    assert_eq!(next.summary()["from"], second["to"]);
}
