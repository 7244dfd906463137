//! S3 and DynamoDB going silent mid-run (packets dropped, no reset), through the real
//! binary and the real SDK clients against moto: each run ends on its own with a coded,
//! transient error within a few read timeouts — never hangs — moves nothing, and the next
//! run is exact.

use std::time::Duration;

use crate::support::proxy::Proxy;

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
    let run = job.run_within(&["drain"], &fast, limit);
    s3.restore();
    let run =
        run.unwrap_or_else(|| panic!("a silent S3 must fail the run, not hang it past {limit:?}"));
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(
        run.error_code(),
        "SLUICE_DESTINATION_UNAVAILABLE",
        "{}",
        run.stdout
    );

    // DynamoDB goes silent: the lease cannot be taken.
    dynamodb.stall();
    let run = job.run_within(&["drain"], &fast, limit);
    dynamodb.restore();
    let run = run.unwrap_or_else(|| {
        panic!("a silent DynamoDB must fail the run, not hang it past {limit:?}")
    });
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(
        run.error_code(),
        "SLUICE_STATE_UNAVAILABLE",
        "{}",
        run.stdout
    );

    // Nothing moved: the next run (the dead holder's lease taken over) drains all of it.
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.summary()["rows"], 10, "{}", run.stdout);
    target.fetch_output(&job);
    assert_eq!(job.rows("t").len(), 10);
}
