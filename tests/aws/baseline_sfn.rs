//! A drain on a stream with `initial: snapshot` and `baseline.state_machine_arn` anchors the
//! baseline, starts the state machine's execution (moto's Step Functions, through the real
//! SDK client in the binary) exactly once, and drains changes from the anchor meanwhile.

use crate::support::{self, Job, TestDb};
use support::aws::{runtime, sdk, unique_name};

const ASL: &str = "infra/stepfunctions/baseline.asl.json";

async fn create_machine(sdk: &aws_config::SdkConfig) -> String {
    let definition = std::fs::read_to_string(ASL).unwrap().replace(
        "${function_arn}",
        "arn:aws:lambda:us-east-1:123456789012:function:sluice-test-baseline",
    );
    aws_sdk_sfn::Client::new(sdk)
        .create_state_machine()
        .name(unique_name("sluice-baseline"))
        .definition(definition)
        .role_arn("arn:aws:iam::123456789012:role/sluice-test-sfn")
        .send()
        .await
        .expect("create_state_machine")
        .state_machine_arn()
        .to_owned()
}

/// `(name, input)` of every execution of `arn`.
async fn executions(sdk: &aws_config::SdkConfig, arn: &str) -> Vec<(String, serde_json::Value)> {
    let client = aws_sdk_sfn::Client::new(sdk);
    let listed = client
        .list_executions()
        .state_machine_arn(arn)
        .send()
        .await
        .expect("list_executions");
    let mut out = Vec::new();
    for execution in listed.executions() {
        let described = client
            .describe_execution()
            .execution_arn(execution.execution_arn())
            .send()
            .await
            .expect("describe_execution");
        let input = serde_json::from_str(described.input().unwrap_or("null")).unwrap();
        out.push((execution.name().to_owned(), input));
    }
    out
}

fn replayed(job: &Job, table: &str) -> String {
    support::replayed_text(&job.out().join(table), &["id"])
}

#[test]
fn a_drain_anchors_starts_one_execution_and_streams_from_the_anchor() {
    let endpoint = aws_or_skip!();
    let admin = pg_or_skip!();
    let rt = runtime();
    let sdk = rt.block_on(sdk(&endpoint));
    let arn = rt.block_on(create_machine(&sdk));
    let db = TestDb::new(&admin, "sfn_start");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let job = Job::postgres(
        &db,
        &["t"],
        &format!("initial: snapshot\nbaseline: {{ state_machine_arn: \"{arn}\" }}"),
    );
    let env = [("AWS_ENDPOINT_URL", endpoint.as_str())];
    let drain = |job: &Job| {
        let run = job.run(&["drain"], &env);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.summary()
    };

    let first = drain(&job);
    assert_eq!(first["status"], "drained", "{first}");
    assert_eq!(
        first["rows"], 0,
        "the rows before the anchor are the baseline's, not the stream's"
    );
    assert!(
        !job.out().join("t/snapshot").exists(),
        "the chunks are the machine's job, not the drain's"
    );
    let started = rt.block_on(executions(&sdk, &arn));
    assert_eq!(started.len(), 1, "{started:?}");
    let (name, input) = &started[0];
    assert!(name.starts_with("baseline-"), "{name}");
    let anchor = input["anchor"].as_str().unwrap().to_owned();
    assert!(anchor.starts_with("pg:"), "{input}");
    assert_eq!(input["job"], db.name.as_str());
    let state = job.run(&["state", "show"], &[]).stdout;
    assert!(state.contains(&anchor), "the anchor is recorded: {state}");

    // Changes during the baseline are drained; later drains do not start a second execution.
    db.sql("UPDATE t SET v = 'b2' WHERE id = 2; INSERT INTO t VALUES (3, 'c')");
    let second = drain(&job);
    assert_eq!(second["rows"], 2, "{second}");
    assert_eq!(rt.block_on(executions(&sdk, &arn)).len(), 1);

    // What the execution does (the same tasks), then the replay is exact.
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    assert_eq!(baseline.summary()["anchor"], anchor.as_str());
    db.sql("DELETE FROM t WHERE id = 1");
    drain(&job);
    assert_eq!(replayed(&job, "t"), "2=b2,3=c");
    assert_eq!(
        rt.block_on(executions(&sdk, &arn)).len(),
        1,
        "a done baseline starts nothing"
    );
}

#[test]
fn a_drain_that_meets_a_narrowing_starts_the_machine_for_that_table_alone() {
    let endpoint = aws_or_skip!();
    let admin = pg_or_skip!();
    let rt = runtime();
    let sdk = rt.block_on(sdk(&endpoint));
    let arn = rt.block_on(create_machine(&sdk));
    let db = TestDb::new(&admin, "rb_sfn");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, '1'), (2, '2')");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text); INSERT INTO u VALUES (1, 'a')");
    let job = Job::postgres(
        &db,
        &["t", "u"],
        &format!("initial: snapshot\nbaseline: {{ state_machine_arn: \"{arn}\" }}"),
    );
    let env = [("AWS_ENDPOINT_URL", endpoint.as_str())];
    let drain = |job: &Job| {
        let run = job.run(&["drain"], &env);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.summary()
    };
    drain(&job);
    // What the first execution does.
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    assert_eq!(rt.block_on(executions(&sdk, &arn)).len(), 1);

    db.sql("INSERT INTO t VALUES (3, '3'); INSERT INTO u VALUES (2, 'b')");
    db.sql("ALTER TABLE t ALTER COLUMN v TYPE int USING v::int");
    db.sql("INSERT INTO t VALUES (4, 4); UPDATE u SET v = 'a2' WHERE id = 1");
    let summary = drain(&job);
    assert_eq!(
        summary["rebaselined"]["t"]["baseline"], "started",
        "{summary}"
    );
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    let started = rt.block_on(executions(&sdk, &arn));
    assert_eq!(started.len(), 2, "{started:?}");
    let (name, input) = started
        .iter()
        .find(|(_, input)| input.get("tables").is_some())
        .expect("the re-baseline's execution");
    assert_eq!(input["tables"], serde_json::json!(["t"]), "{input}");
    assert!(name.starts_with("baseline-"), "{name}");
    // A later drain asks for the same execution, not a third.
    db.sql("INSERT INTO t VALUES (5, 5)");
    drain(&job);
    assert_eq!(rt.block_on(executions(&sdk, &arn)).len(), 2);
    // What the execution does; then both tables replay to the source.
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    drain(&job);
    assert_eq!(replayed(&job, "t"), "1=1,2=2,3=3,4=4,5=5");
    assert_eq!(replayed(&job, "u"), "1=a2,2=b");
}

#[test]
fn a_missing_state_machine_or_a_malformed_arn_is_a_config_error() {
    let endpoint = aws_or_skip!();
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "sfn_missing");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\nbaseline: { state_machine_arn: \"arn:aws:states:us-east-1:123456789012:stateMachine:no-such-machine\" }",
    );
    let run = job.run(&["drain"], &[("AWS_ENDPOINT_URL", endpoint.as_str())]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_INVALID", "{}", run.stderr);
    assert!(run.stderr.contains("no-such-machine"), "{}", run.stderr);
    let bad = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\nbaseline: { state_machine_arn: \"arn:aws:lambda:us-east-1:123456789012:function:f\" }",
    );
    let run = bad.run(&["drain"], &[("AWS_ENDPOINT_URL", endpoint.as_str())]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("state machine ARN"), "{}", run.stderr);
}
