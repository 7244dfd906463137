//! A run killed mid-peek leaves its server backend decoding, holding the slot `active`.
//! The next run (which takes the dead run's lease over) ends that backend — it carries
//! this job's `application_name`, `sluice/<job>` — instead of failing
//! `SLUICE_SOURCE_SLOT_BUSY`. A backend under another name is never terminated: the run
//! still fails `SLOT_BUSY`, with a hint naming how to find it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Job, TestDb};

const ROWS: usize = 1_000_000;

/// Polls until a backend holds the job's slot; returns its pid.
fn wait_slot_active(db: &TestDb) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pid = db.sql(&format!(
            "SELECT coalesce(active_pid::text, '') FROM pg_replication_slots WHERE slot_name = 's_{}'",
            db.name
        ));
        if !pid.is_empty() {
            return pid;
        }
        assert!(Instant::now() < deadline, "the slot never became active");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One transaction the server needs seconds to decode.
fn big_transaction(db: &TestDb) {
    db.sql(&format!(
        "INSERT INTO t SELECT i FROM generate_series(1, {ROWS}) i"
    ));
}

#[test]
fn a_killed_peeks_backend_is_ended_by_the_next_run() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "orphan_ours");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    big_transaction(&db);
    let mut child = job
        .command(&["drain"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = wait_slot_active(&db);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        db.sql(&format!(
            "SELECT application_name FROM pg_stat_activity WHERE pid = {pid}"
        )),
        format!("sluice/{}", db.name),
        "the killed run's backend is still decoding under the job's name"
    );

    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("backend of an earlier run of this job"),
        "{}",
        run.stderr
    );
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["rows"], ROWS as u64, "{summary}");
}

#[test]
fn another_consumers_backend_is_never_ended() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "orphan_theirs");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    big_transaction(&db);
    let url = format!(
        "{}{}application_name=someone_else",
        db.url,
        if db.url.contains('?') { "&" } else { "?" }
    );
    let peek = Command::new("psql")
        .arg(&url)
        .args(["-Atc", &format!(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('s_{0}', NULL, NULL, 'proto_version', '1', 'publication_names', 'p_{0}')",
            db.name
        )])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_slot_active(&db);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_SOURCE_SLOT_BUSY",
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("pg_stat_activity"), "{}", run.stdout);
    let out = peek.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the other consumer's peek was ended: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
