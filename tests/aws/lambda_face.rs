//! The real binary as a Lambda function: driven through the Runtime API protocol by
//! tests/support/lambda_api.rs, draining a real PostgreSQL.

use std::time::Duration;

use crate::support::{self, Job, TestDb};
use support::lambda_api::{Function, Outcome, RuntimeApi, epoch_ms};

fn scheduled_event() -> serde_json::Value {
    serde_json::json!({
        "version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602", "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "123456789012", "time": "2026-12-01T12:00:00Z",
        "region": "us-east-1", "resources": ["arn:aws:events:us-east-1:123456789012:rule/sluice"], "detail": {}
    })
}

fn response(outcome: Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Response(v) => v,
        Outcome::Error(e) => panic!("invocation failed: {e}"),
    }
}

#[test]
fn scheduled_event_runs_a_real_drain_and_reports_metrics() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lambda");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    let api = RuntimeApi::start();
    let function = Function::start(&api, &job, &[]);
    let first = response(api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    ));
    assert_eq!(first["status"], "drained");
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let second = api.invoke(
        serde_json::json!({"action": "drain"}),
        Duration::from_secs(60),
    );
    let second = response(api.wait(&second, Duration::from_secs(60)));
    assert_eq!(second["status"], "drained");
    assert_eq!(second["rows"], 2);
    assert_eq!(second["tables"]["t"]["rows"], 2);
    assert_eq!(second["from"], first["to"]);
    assert_eq!(job.rows("t").len(), 2);
    let emf = function.emf_lines();
    assert_eq!(emf.len(), 2, "one EMF line per invocation");
    assert_eq!(emf[1]["rows"], 2);
    assert_eq!(emf[1]["run_drained"], 1);
    assert!(emf[1]["source_retained_bytes"].as_u64().is_some());
    assert_eq!(
        emf[1]["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        "sluice"
    );
    // The current-state action: the report sluice materialize prints.
    let built = api.invoke(
        serde_json::json!({"action": "materialize", "tables": ["t"]}),
        Duration::from_secs(60),
    );
    let built = response(api.wait(&built, Duration::from_secs(60)));
    assert_eq!(built["tables"][0]["build"], "full", "{built}");
    assert_eq!(built["tables"][0]["rows"], 2, "{built}");
    if let Some(state) = crate::support::current_state::state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }
}

/// The deployed shape: S3 destination and DynamoDB state on moto, reached by the
/// function's own SDK clients over HTTP.
#[test]
fn scheduled_event_drains_into_s3_with_dynamodb_state() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "lambda_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = support::aws::AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], "");
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let first = response(api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    ));
    assert_eq!(first["status"], "drained", "{first}");
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    db.sql("UPDATE t SET v = 'b2' WHERE id = 2");
    let second = response(api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    ));
    assert_eq!(second["status"], "drained", "{second}");
    assert_eq!(second["rows"], 3);
    let keys = target.keys();
    assert!(
        keys.iter()
            .any(|k| k.starts_with("cdc/t/") && k.ends_with("_SUCCESS")),
        "{keys:?}"
    );
    target.fetch_output(&job);
    let rows = job.rows("t");
    assert_eq!(
        support::ops(&rows, "v"),
        [
            ("insert".into(), Some("a".into())),
            ("insert".into(), Some("b".into())),
            ("update".into(), Some("b2".into())),
        ]
    );
    // The checkpoint the function wrote to DynamoDB is where the run ended.
    let state = job.run(&["state", "show"], &[]);
    assert_eq!(state.code, 0, "{}", state.stderr);
    assert!(
        state.stdout.contains(second["to"].as_str().unwrap()),
        "checkpoint {} not in {}",
        second["to"],
        state.stdout
    );
}

#[test]
fn deadline_stops_at_a_transaction_boundary_and_the_next_invocation_continues() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "deadline");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(
        &db,
        &["t"],
        "output: { rollover_rows: 5 }\ndeadline: { safety_margin_seconds: 1.5 }",
    );
    let api = RuntimeApi::start();
    // The first part upload is slowed past the stop point, so the run cannot finish in time.
    let _function = Function::start(&api, &job, &[("SLUICE_FAULT", "part_durable@2:pause=3800")]);
    response(api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    ));
    db.sql("DO $$ BEGIN FOR i IN 1..40 LOOP INSERT INTO t VALUES (i, 'v' || i); COMMIT; END LOOP; END $$");
    let budget = Duration::from_secs(5);
    let deadline_ms = epoch_ms() + budget.as_millis() as u64;
    let partial = response(api.wait(
        &api.invoke(scheduled_event(), budget),
        Duration::from_secs(60),
    ));
    let ended_ms = epoch_ms();
    assert_eq!(partial["status"], "partial", "{partial}");
    assert!(
        ended_ms < deadline_ms,
        "the run ended {} ms after its deadline",
        ended_ms - deadline_ms
    );
    let partial_rows = partial["rows"].as_u64().unwrap();
    assert!(partial_rows > 0 && partial_rows < 40, "{partial}");
    let rest = response(api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    ));
    assert_eq!(rest["status"], "drained");
    assert_eq!(rest["from"], partial["to"]);
    assert_eq!(
        partial_rows + rest["rows"].as_u64().unwrap(),
        40,
        "nothing lost, nothing duplicated"
    );
    let rows = job.rows("t");
    let ids: std::collections::BTreeSet<_> =
        rows.iter().map(|r| r["id"].clone().unwrap()).collect();
    assert_eq!((rows.len(), ids.len()), (40, 40));
}

#[test]
fn errors_map_to_retryable_refusal_and_config_types() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lambdaerr");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["t"], "");
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    response(api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    ));
    let unknown = api.wait(
        &api.invoke(
            serde_json::json!({"action": "explode"}),
            Duration::from_secs(60),
        ),
        Duration::from_secs(60),
    );
    let Outcome::Error(unknown) = unknown else {
        panic!("unknown action succeeded")
    };
    assert_eq!(unknown["errorType"], "Sluice.Config");
    assert!(
        unknown["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("SLUICE_CONFIG_INVALID")
    );
    db.sql(&format!("SELECT pg_drop_replication_slot('s_{}')", db.name));
    let refused = api.wait(
        &api.invoke(scheduled_event(), Duration::from_secs(60)),
        Duration::from_secs(60),
    );
    let Outcome::Error(refused) = refused else {
        panic!("a vanished slot was not refused")
    };
    assert_eq!(refused["errorType"], "Sluice.Refusal");
    assert!(
        refused["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("SLUICE_SOURCE_LOG_GAP"),
        "{refused}"
    );
}

#[test]
fn invalid_config_fails_every_invocation_as_a_config_error() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lambdacfg");
    let job = Job::postgres(&db, &["t"], "bogus_key: 1");
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    for _ in 0..2 {
        let outcome = api.wait(
            &api.invoke(scheduled_event(), Duration::from_secs(60)),
            Duration::from_secs(60),
        );
        let Outcome::Error(e) = outcome else {
            panic!("invalid config accepted")
        };
        assert_eq!(e["errorType"], "Sluice.Config");
        assert!(
            e["errorMessage"].as_str().unwrap().contains("bogus_key"),
            "{e}"
        );
    }
}
