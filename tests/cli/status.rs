//! `sluice status` as an operator meets it: every job of a shared state store on one
//! line each — a job that drains and a job whose runs fail (recorded as `failed` runs
//! with their code) in a local store, and twenty jobs of a DynamoDB store (moto) with
//! held, expired and free leases. Each test owns its databases (`statuscli_*`).

use std::process::{Command, Stdio};

use crate::support::aws::{AwsTarget, runtime, sdk};
use crate::support::{Job, Run, TestDb};
use sluice::position::Position;
use sluice::state::{CheckpointWrite, LeaseOutcome, RunRecord, StateStore};

fn sluice(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("SLUICE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("sluice runs");
    Run::from(out)
}

#[test]
fn status_shows_a_draining_and_a_failing_job_of_one_local_store() {
    let admin = pg_or_skip!();
    let ok_db = TestDb::new(&admin, "statuscli_ok");
    ok_db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let ok = Job::postgres(&ok_db, &["t"], "");
    let bad_db = TestDb::new(&admin, "statuscli_bad");
    let mut bad = Job::postgres(&bad_db, &["t"], "");
    // The failing job shares the first job's state directory and points at a closed port.
    let state = ok.dir.path().join("state");
    let yaml = std::fs::read_to_string(&bad.config).unwrap().replace(
        &bad.dir.path().join("state").display().to_string(),
        &state.display().to_string(),
    );
    std::fs::write(&bad.config, yaml).unwrap();
    bad.url_env.1 = "postgres://postgres@127.0.0.1:9/nothing?connect_timeout=2".into();

    assert_eq!(ok.drain()["status"], "drained");
    ok_db.sql("INSERT INTO t SELECT i, 'v' FROM generate_series(1, 3) i");
    assert_eq!(ok.drain()["rows"], 3);
    let mut code = String::new();
    for _ in 0..2 {
        let run = bad.run(&["drain"], &[]);
        assert_ne!(run.code, 0, "{}", run.stderr);
        code = run.error_code();
    }

    let dir = state.display().to_string();
    let run = sluice(&["status", "--state-dir", &dir, "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let jobs = run.summary()["jobs"].as_array().unwrap().clone();
    let names: Vec<_> = jobs.iter().map(|j| j["job"].as_str().unwrap()).collect();
    let mut want = vec![ok_db.name.as_str(), bad_db.name.as_str()];
    want.sort();
    assert_eq!(names, want);
    let row = |name: &str| jobs.iter().find(|j| j["job"] == name).unwrap().clone();
    let good = row(&ok_db.name);
    assert_eq!(good["last_run"]["status"], "drained", "{good}");
    assert_eq!(good["last_run"]["rows"], 3, "{good}");
    assert_eq!(good["day"]["runs"], 2, "{good}");
    assert_eq!(good["day"]["rows"], 3, "{good}");
    assert_eq!(good["failing_runs"], 0);
    assert_eq!(good["lease"]["state"], "free");
    assert!(
        good["position"].as_str().unwrap().starts_with("pg:"),
        "{good}"
    );
    let failing = row(&bad_db.name);
    assert_eq!(failing["last_run"]["status"], "failed", "{failing}");
    assert_eq!(failing["last_run"]["code"], code.as_str(), "{failing}");
    assert_eq!(failing["failing_runs"], 2, "{failing}");
    assert_eq!(failing["day"]["failed"], 2, "{failing}");
    assert!(failing["position"].is_null());

    let run = sluice(&["status", "--state-dir", &dir]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(lines[0].starts_with("JOB "), "{}", run.stdout);
    let good_line = lines.iter().find(|l| l.starts_with(&ok_db.name)).unwrap();
    assert!(
        good_line.contains("drained") && good_line.contains("+3"),
        "{good_line}"
    );
    let bad_line = lines.iter().find(|l| l.starts_with(&bad_db.name)).unwrap();
    assert!(bad_line.contains("failed"), "{bad_line}");
    assert!(
        bad_line.contains(&code) && bad_line.contains("(2 in a row)"),
        "{bad_line}"
    );

    // The job's own config names the same store.
    let run = sluice(&[
        "status",
        "--config",
        &ok.config.display().to_string(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["jobs"].as_array().unwrap().len(), 2);
}

#[test]
fn status_shows_twenty_jobs_of_a_dynamodb_store() {
    let moto = aws_or_skip!();
    let target = AwsTarget::new(&moto);
    let jobs: Vec<String> = (0..20).map(|i| format!("statuscli-{i:02}")).collect();
    runtime().block_on(async {
        let sdk = sdk(&moto).await;
        let store =
            sluice::state::dynamodb::DynamoStateStore::new(&sdk, &target.table).unwrap();
        let ttl = std::time::Duration::from_secs(600);
        for (i, job) in jobs.iter().enumerate() {
            let LeaseOutcome::Acquired(lease) =
                store.acquire_lease(job, "r@host", ttl).await.unwrap()
            else {
                panic!("lease of {job}");
            };
            let position = Position::parse_tagged("pg:00000000/00000010").unwrap();
            let write = CheckpointWrite {
                lease: &lease,
                ttl,
                expected_version: 0,
                position: &position,
                source_identity: "id",
                run_id: "run",
            };
            store.advance_checkpoint(&write).await.unwrap();
            let run_id = sluice::run_id::new_run_id();
            let record = RunRecord {
                run_id: run_id.clone(),
                summary: serde_json::json!({"status": "drained", "run_id": run_id, "rows": i, "bytes": 100 * i}),
                expires_at_s: 1_900_000_000,
            };
            store.put_run(job, &record).await.unwrap();
            // Every other job's run has ended and given its lease back.
            if i % 2 == 0 {
                store.release_lease(&lease).await.unwrap();
            }
        }
        let _ = store.claim("pg:h:1/db/slot/s", &jobs[0]).await.unwrap();
    });

    let args = |json: bool| {
        let mut a = vec![
            "status",
            "--dynamodb-table",
            target.table.as_str(),
            "--endpoint-url",
            moto.as_str(),
        ];
        if json {
            a.push("--json");
        }
        sluice(&a)
    };
    let run = args(true);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let shown = run.summary()["jobs"].as_array().unwrap().clone();
    let names: Vec<_> = shown.iter().map(|j| j["job"].as_str().unwrap()).collect();
    assert_eq!(names, jobs, "every job, sorted, and no claim");
    for (i, row) in shown.iter().enumerate() {
        let lease = if i % 2 == 0 { "free" } else { "held" };
        assert_eq!(row["lease"]["state"], lease, "{row}");
        assert_eq!(row["position"], "pg:00000000/00000010", "{row}");
        assert_eq!(row["day"]["rows"], i, "{row}");
        assert_eq!(row["day"]["complete"], true, "{row}");
        assert_eq!(row["last_run"]["status"], "drained", "{row}");
    }
    let run = args(false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 21, "{}", run.stdout);
    assert!(
        run.stdout.lines().nth(2).unwrap().contains("held 10m left")
            || run.stdout.lines().nth(2).unwrap().contains("held 9m left"),
        "{}",
        run.stdout
    );

    // A store that cannot be reached is a coded error, not an empty table.
    let run = sluice(&[
        "status",
        "--dynamodb-table",
        "nope",
        "--endpoint-url",
        "http://127.0.0.1:9",
        "--region",
        "us-east-1",
    ]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.error_code().starts_with("SLUICE_STATE_"),
        "{}",
        run.stdout
    );
}
