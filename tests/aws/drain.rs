//! The drain end to end against AWS stand-ins: real PostgreSQL → S3 parts + DynamoDB
//! state on moto's server mode, through the real binary and the real SDK clients. Covers
//! the single-writer lease under contention, a zombie run fenced off after its lease was
//! taken over, and S3 / DynamoDB outages (cut through a severable proxy) — before the data
//! is durable they must move neither the checkpoint nor the slot; after it (manifest, run
//! record, lease release) they fail the run loudly and lose nothing.

use std::process::Stdio;

use crate::support::{self, Job, Row, TestDb, aws::AwsTarget, proxy::Proxy, replay, wait_for_line};

/// SDK retry settings for runs that are expected to hit a severed endpoint: one attempt,
/// so the failure is reported at once instead of after the production backoff.
const ONE_ATTEMPT: (&str, &str) = ("AWS_MAX_ATTEMPTS", "1");

fn state_of(job: &Job) -> serde_json::Value {
    let run = job.run(&["state", "show"], &[]);
    assert_eq!(
        run.code, 0,
        "state show failed:\n{}{}",
        run.stdout, run.stderr
    );
    run.summary()
}

fn checkpoint_of(job: &Job) -> serde_json::Value {
    state_of(job)["checkpoint"].clone()
}

fn slot_lsn(db: &TestDb) -> String {
    db.sql(&format!(
        "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's_{}'",
        db.name
    ))
}

/// Asserts that `rows` hold every change of `t (id int, v text)` at least once, that
/// every duplicate is identical to its original, and that replaying them gives the
/// table's current content.
fn assert_complete(db: &TestDb, rows: &[Row], changes: usize) {
    assert_eq!(
        support::distinct_changes(rows),
        changes,
        "every change exactly once (+ identical copies)"
    );
    let state = replay(rows, &["id"]);
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
    let expected = db.sql("SELECT string_agg(id || '=' || v, ',' ORDER BY id::text) FROM t");
    assert_eq!(actual.join(","), expected);
}

fn init_state(job: &Job) -> serde_json::Value {
    let run = job.run(&["state", "init"], &[]);
    assert_eq!(
        run.code, 0,
        "state init failed:\n{}{}",
        run.stdout, run.stderr
    );
    run.summary()
}

#[test]
fn full_drain_to_s3_and_dynamodb() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_full");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::without_table(&moto);
    let job = target.job(
        &db,
        &["t"],
        "output: { rollover_rows: 10, row_group_rows: 4 }",
    );
    let created = init_state(&job);
    assert_eq!(created["created"], true, "{created}");
    assert_eq!(init_state(&job)["created"], false, "init is idempotent");

    let first = job.drain();
    assert_eq!(first["status"], "drained", "{first}");
    db.sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 25) g");
    db.sql("UPDATE t SET v = 'changed' WHERE id % 5 = 0");
    db.sql("DELETE FROM t WHERE id = 7");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["rows"], 25 + 5 + 1);
    // Parts roll over at transaction boundaries: the 25-row INSERT is one part.
    assert!(summary["parts"].as_u64().unwrap() >= 2, "{summary}");

    // The layout: parts, the run manifest, _manifest.json and _SUCCESS under <prefix>/t/.
    let keys = target.keys();
    let parts: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with("cdc/t/cdc-") && k.ends_with(".parquet"))
        .collect();
    assert_eq!(
        parts.len() as u64,
        summary["parts"].as_u64().unwrap(),
        "{keys:?}"
    );
    for key in ["cdc/t/_manifest.json", "cdc/t/_SUCCESS"] {
        assert!(keys.iter().any(|k| k == key), "{key} missing from {keys:?}");
    }
    assert!(keys.iter().all(|k| k.starts_with("cdc/t/")), "{keys:?}");

    let out = target.fetch_output(&job);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("t/_manifest.json")).unwrap()).unwrap();
    let success: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("t/_SUCCESS")).unwrap()).unwrap();
    assert_eq!(success["run_id"], summary["run_id"]);
    assert_eq!(success["to"], summary["to"]);
    assert!(
        manifest
            .to_string()
            .contains(summary["run_id"].as_str().unwrap())
    );
    let modified = target.last_modified();
    let success_at = modified["cdc/t/_SUCCESS"];
    assert!(
        modified.values().all(|m| *m <= success_at),
        "_SUCCESS is written last: {modified:?}"
    );
    assert_complete(&db, &job.rows("t"), 25 + 5 + 1);

    // State: the checkpoint is the summary's `to`, the slot was advanced to it, and the
    // run record is there.
    let state = state_of(&job);
    let position = state["checkpoint"]["position"].as_str().unwrap();
    assert_eq!(position, summary["to"].as_str().unwrap());
    assert!(state["lease_owner"].is_null(), "released: {state}");
    assert!(state["runs"][summary["run_id"].as_str().unwrap()]["summary"]["rows"] == 31);
    let slot_at_checkpoint = db.sql(&format!(
        "SELECT confirmed_flush_lsn = '{}'::pg_lsn FROM pg_replication_slots WHERE slot_name = 's_{}'",
        position.trim_start_matches("pg:"),
        db.name
    ));
    assert_eq!(slot_at_checkpoint, "t", "the slot is at the checkpoint");
}

#[test]
fn concurrent_drains_of_one_job_leave_one_writer() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_contend");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], "");
    job.drain();
    const ROUNDS: usize = 10;
    const DRAINS: usize = 8;
    for round in 0..ROUNDS {
        db.sql(&format!(
            "INSERT INTO t SELECT g, 'r{round}' FROM generate_series({}, {}) g",
            round * 3,
            round * 3 + 2
        ));
        // The winner holds its lease a little after acknowledging (a pause fault point it
        // alone reaches), so every contender asks while the lease is certainly held — a
        // contender starting after the winner released would rightly drain (nothing).
        let children: Vec<_> = (0..DRAINS)
            .map(|_| {
                job.command(&["drain"], &[("SLUICE_FAULT", "source_acked:pause=1500")])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let runs: Vec<support::Run> = children
            .into_iter()
            .map(|c| support::Run::from(c.wait_with_output().unwrap()))
            .collect();
        for run in &runs {
            assert!(
                !run.stdout.contains("SLUICE_STATE_FENCED"),
                "round {round}: two runs were granted the lease at once and the fencing token \
                 stopped one — the DynamoDB stand-in is not atomic; start moto through \
                 infra/local/moto.sh, which serializes conditional writes as AWS does:\n{}",
                run.stderr
            );
            assert_eq!(run.code, 0, "round {round}: {}\n{}", run.stdout, run.stderr);
        }
        let summaries: Vec<serde_json::Value> = runs.iter().map(|r| r.summary()).collect();
        let drained: Vec<&serde_json::Value> = summaries
            .iter()
            .filter(|s| s["status"] == "drained")
            .collect();
        assert_eq!(drained.len(), 1, "round {round}: {summaries:?}");
        let winner = drained[0]["run_id"].as_str().unwrap();
        assert_eq!(drained[0]["rows"], 3, "round {round}");
        for summary in summaries.iter().filter(|s| s["status"] != "drained") {
            assert_eq!(summary["status"], "skipped", "round {round}: {summary}");
            let holder = summary["lease_holder"].as_str().unwrap();
            assert!(
                holder.starts_with(winner),
                "round {round}: skipped run names {holder}, the winner is {winner}"
            );
        }
    }
    let out = target.fetch_output(&job);
    assert!(out.join("t").exists());
    let rows = job.rows("t");
    assert_eq!(rows.len(), ROUNDS * 3, "no change lost, none written twice");
    assert_complete(&db, &rows, ROUNDS * 3);
}

/// A run paused past its lease expiry is taken over; when it wakes it must be fenced.
fn zombie_is_fenced(job: &Job, db: &TestDb, rows: impl Fn() -> Vec<Row>) {
    job.drain();
    db.sql("INSERT INTO t SELECT g, 'z' || g FROM generate_series(1, 20) g");
    let mut zombie = job
        .command(
            &["drain"],
            &[("SLUICE_FAULT", "before_checkpoint:pause=6000")],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_line(zombie.stderr.take().unwrap(), "fault injected: pausing");
    // The zombie's part is durable; its lease (2 s) runs out while it sleeps.
    let taker = job.drain_when_free();
    assert_eq!(taker["status"], "drained", "{taker}");
    assert_eq!(taker["rows"], 20);
    let checkpoint = checkpoint_of(job);
    let slot = slot_lsn(db);
    let zombie = support::Run::from(zombie.wait_with_output().unwrap());
    assert_eq!(zombie.code, 3, "{}", zombie.stdout);
    assert_eq!(
        zombie.error_code(),
        "SLUICE_STATE_FENCED",
        "{}",
        zombie.stdout
    );
    assert!(
        zombie.stdout.contains("no longer current"),
        "{}",
        zombie.stdout
    );
    assert_eq!(
        checkpoint_of(job),
        checkpoint,
        "the zombie moved the checkpoint"
    );
    assert_eq!(slot_lsn(db), slot, "the zombie moved the slot");
    db.sql("INSERT INTO t VALUES (100, 'after')");
    assert_eq!(job.drain()["rows"], 1);
    assert_complete(db, &rows(), 21);
}

#[test]
fn zombie_run_cannot_advance_the_checkpoint_dynamodb() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_zombie");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], "lease: { ttl_seconds: 2 }");
    zombie_is_fenced(&job, &db, || {
        target.fetch_output(&job);
        job.rows("t")
    });
}

#[test]
fn zombie_run_cannot_advance_the_checkpoint_local() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "local_zombie");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "lease: { ttl_seconds: 2 }");
    zombie_is_fenced(&job, &db, || job.rows("t"));
}

#[test]
fn s3_outage_moves_neither_checkpoint_nor_slot() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_s3_cut");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    let mut target = AwsTarget::new(&moto);
    target.s3_endpoint = proxy.url();
    let job = target.job(&db, &["t"], "output: { rollover_rows: 5 }");
    job.drain();
    db.sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 12) g");
    let checkpoint = checkpoint_of(&job);
    let slot = slot_lsn(&db);

    proxy.sever();
    let cut = job.run(&["drain"], &[ONE_ATTEMPT]);
    assert_eq!(cut.code, 3, "{}\n{}", cut.stdout, cut.stderr);
    assert_eq!(
        cut.error_code(),
        "SLUICE_DESTINATION_UNAVAILABLE",
        "{}",
        cut.stdout
    );
    assert!(cut.stdout.contains("hint"), "{}", cut.stdout);
    assert_eq!(checkpoint_of(&job), checkpoint);
    assert_eq!(slot_lsn(&db), slot);
    assert!(
        state_of(&job)["lease_owner"].is_null(),
        "the failed run released its lease"
    );

    proxy.restore();
    let summary = job.drain();
    assert_eq!(summary["status"], "drained");
    assert_eq!(summary["rows"], 12);
    target.fetch_output(&job);
    assert_complete(&db, &job.rows("t"), 12);
}

#[test]
fn dynamodb_outage_at_checkpoint_moves_neither_checkpoint_nor_slot() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_ddb_cut");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let proxy = Proxy::start(moto.trim_start_matches("http://"));
    let mut target = AwsTarget::new(&moto);
    target.dynamodb_endpoint = proxy.url();
    let job = target.job(&db, &["t"], "lease: { ttl_seconds: 2 }");
    job.drain();
    db.sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 12) g");
    let checkpoint = checkpoint_of(&job);
    let slot = slot_lsn(&db);

    let cut = job.run_interrupted(
        &["drain"],
        &[("SLUICE_FAULT", "before_checkpoint:pause=500"), ONE_ATTEMPT],
        "fault injected: pausing",
        || proxy.sever(),
    );
    assert_eq!(cut.code, 3, "{}", cut.stdout);
    assert_eq!(
        cut.error_code(),
        "SLUICE_STATE_UNAVAILABLE",
        "{}",
        cut.stdout
    );
    proxy.restore();
    assert_eq!(checkpoint_of(&job), checkpoint);
    assert_eq!(slot_lsn(&db), slot);

    let summary = job.drain_when_free();
    assert_eq!(summary["status"], "drained");
    assert_eq!(summary["rows"], 12);
    target.fetch_output(&job);
    assert_complete(&db, &job.rows("t"), 12);
}

#[test]
fn endpoint_comes_from_aws_endpoint_url_when_the_config_has_none() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_env_endpoint");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let mut target = AwsTarget::new(&moto);
    target.s3_endpoint = String::new();
    target.dynamodb_endpoint = String::new();
    target.prefix = String::new();
    let job = target.job(&db, &["t"], "");
    let env = [("AWS_ENDPOINT_URL", moto.as_str())];
    let first = job.run(&["drain"], &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let run = job.run(&["drain"], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["rows"], 1);
    // An empty prefix writes at the bucket root, without a leading slash.
    assert!(
        target.keys().contains(&"t/_SUCCESS".to_string()),
        "{:?}",
        target.keys()
    );
}

/// S3 or DynamoDB cut after the data is durable, checkpointed and acked (the manifest,
/// `_SUCCESS`, run record and lease release remain): the run fails loudly with the
/// endpoint's code, the data it made durable stays, and the next run is exact.
#[test]
fn outage_after_the_data_is_durable_fails_loudly_and_loses_nothing() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    for (endpoint, code) in [
        ("s3", "SLUICE_DESTINATION_UNAVAILABLE"),
        ("dynamodb", "SLUICE_STATE_UNAVAILABLE"),
    ] {
        let db = TestDb::new(&admin, &format!("aws_late_{endpoint}"));
        db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
        let proxy = Proxy::start(moto.trim_start_matches("http://"));
        let mut target = AwsTarget::new(&moto);
        match endpoint {
            "s3" => target.s3_endpoint = proxy.url(),
            _ => target.dynamodb_endpoint = proxy.url(),
        }
        let job = target.job(&db, &["t"], "lease: { ttl_seconds: 2 }");
        job.drain();
        db.sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 12) g");
        let cut = job.run_interrupted(
            &["drain"],
            &[("SLUICE_FAULT", "source_acked:pause=500"), ONE_ATTEMPT],
            "fault injected: pausing",
            || proxy.sever(),
        );
        proxy.restore();
        assert_eq!(cut.code, 3, "{endpoint}: {}", cut.stdout);
        assert_eq!(cut.error_code(), code, "{endpoint}: {}", cut.stdout);
        assert!(cut.stdout.contains("hint"), "{endpoint}: {}", cut.stdout);

        db.sql("UPDATE t SET v = 'x' WHERE id = 3");
        let next = job.drain_when_free();
        assert_eq!(next["status"], "drained", "{endpoint}: {next}");
        target.fetch_output(&job);
        assert_complete(&db, &job.rows("t"), 13);
    }
}
