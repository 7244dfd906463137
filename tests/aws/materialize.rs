//! `sluice materialize` on S3 and DynamoDB (moto, through the real SDK clients): a full
//! build, an incremental one after more changes, its lease an item of the DynamoDB state
//! table (not a job `sluice status` lists), and the state read back equal to the source.

use crate::support::TestDb;
use crate::support::aws::AwsTarget;
use crate::support::current_state::{materialize, pointer, state_text};

#[test]
fn materialize_builds_on_s3_and_dynamodb() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "aws_materialize");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let target = AwsTarget::new(&moto);
    let job = target.job(&db, &["t"], "");
    job.drain();
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 50) i");
    assert_eq!(job.drain()["status"], "drained");
    let (code, first, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first["build"], "full", "{first}");
    db.sql("UPDATE t SET v = 'x' WHERE id = 3; DELETE FROM t WHERE id = 4");
    assert_eq!(job.drain()["status"], "drained");
    let (code, second, err) = materialize(&job, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second["build"], "incremental", "{second}");
    assert_eq!(second["rows"], 49, "{second}");

    target.fetch_output(&job);
    assert_eq!(pointer(&job)["version"], 2);
    if let Some(state) = state_text(&job) {
        assert_eq!(state, db.id_v_text());
    }
    let keys = target.keys();
    assert!(
        keys.iter()
            .any(|k| k.ends_with("t/_current_state/_version.json")),
        "{keys:?}"
    );
    let status = job.run(&["status", "--json"], &[]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let jobs = status.summary()["jobs"].clone();
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .any(|j| j["job"] == db.name.as_str()),
        "{jobs}"
    );
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .all(|j| !j["job"].as_str().unwrap_or_default().contains('#')),
        "the materialization lease is no job: {jobs}"
    );
}
