//! S3 and DynamoDB going silent mid-run (packets dropped, no reset), through the real
//! binary and the real SDK clients against moto: each run ends on its own with a coded,
//! transient error within a few read timeouts — never hangs — moves nothing, and the next
//! run is exact.

use std::time::{Duration, Instant};

use crate::support::Job;
use crate::support::proxy::Proxy;

/// Runs `sluice drain`, killing it if it has not ended within `limit`; returns its exit
/// code, stdout and how long it took (`None` when it had to be killed).
fn drain_within(
    job: &Job,
    env: &[(&str, &str)],
    limit: Duration,
) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut child = job
        .command(&["drain"], env)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
            return (status.code(), out, started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, String::new(), started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn error_code(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn a_silent_s3_or_dynamodb_fails_the_run_transient_within_its_read_timeouts() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = crate::support::TestDb::new(&admin, "aws_stalls");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let s3 = Proxy::start(moto.trim_start_matches("http://"));
    let dynamodb = Proxy::start(moto.trim_start_matches("http://"));
    let mut target = crate::support::aws::AwsTarget::new(&moto);
    target.s3_endpoint = s3.url();
    target.dynamodb_endpoint = dynamodb.url();
    let job = target.job(&db, &["t"], "");
    job.drain();
    let fast = [("SLUICE_AWS_READ_TIMEOUT_SECONDS", "1")];
    let limit = Duration::from_secs(45);

    db.sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g");
    // S3 goes silent: the lease is taken and the stream read, then the part upload hangs.
    s3.stall();
    let (code, out, took) = drain_within(&job, &fast, limit);
    s3.restore();
    assert_eq!(
        code,
        Some(3),
        "a silent S3 must fail the run, not hang it ({took:?}): {out}"
    );
    assert_eq!(error_code(&out), "SLUICE_DESTINATION_UNAVAILABLE", "{out}");

    // DynamoDB goes silent: the lease cannot be taken.
    dynamodb.stall();
    let (code, out, took) = drain_within(&job, &fast, limit);
    dynamodb.restore();
    assert_eq!(
        code,
        Some(3),
        "a silent DynamoDB must fail the run, not hang it ({took:?}): {out}"
    );
    assert_eq!(error_code(&out), "SLUICE_STATE_UNAVAILABLE", "{out}");

    // Nothing moved: the next run (the dead holder's lease taken over) drains all of it.
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.summary()["rows"], 10, "{}", run.stdout);
    target.fetch_output(&job);
    assert_eq!(job.rows("t").len(), 10);
}
