//! A directory sluice may not write to is a refusal (exit 5), not a transient failure a
//! scheduler would retry forever: the destination, the state and the spill directory,
//! each on a read-only volume (which stops root too).

use crate::support::tmpfs::Tmpfs;
use crate::support::{Job, TestDb};

/// A drain of a job whose `key` directory (`out`, `state`, `spill`) is read-only.
fn drain_with_read_only(key: &str, extra: &str, code: &str) {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, &format!("ro_{key}"));
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["public.t"], extra);
    let dir = job.dir.path().join(key);
    let Some(volume) = Tmpfs::mount(&dir, "1m") else {
        return;
    };
    if key == "out" {
        // The first drain creates the slot and the table's folder.
        job.drain();
    }
    volume.read_only();
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), code, "{}", run.stdout);
    assert_eq!(run.summary()["error"]["class"], "refusal");
}

#[test]
fn a_read_only_destination_is_a_refusal() {
    drain_with_read_only("out", "", "SLUICE_DESTINATION_DENIED");
}

#[test]
fn a_read_only_state_directory_is_a_refusal() {
    drain_with_read_only("state", "", "SLUICE_STATE_DENIED");
}

#[test]
fn a_read_only_spill_directory_is_a_refusal() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ro_spill");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["public.t"], "");
    job.drain();
    let spill = job.dir.path().join("spill");
    let Some(volume) = Tmpfs::mount(&spill, "1m") else {
        return;
    };
    volume.read_only();
    let text = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(
        &job.config,
        format!("{text}output: {{ spill_dir: {} }}\n", spill.display()),
    )
    .unwrap();
    db.sql("INSERT INTO t VALUES (1, 'a')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SPILL_DENIED", "{}", run.stdout);
    assert!(run.stdout.contains("output.spill_dir"), "{}", run.stdout);
}
