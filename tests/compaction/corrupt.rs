//! Corruption is never laundered: a part whose bytes no longer hold the rows its manifest
//! recorded (another valid part's bytes, a truncated file) or that is gone stops that
//! table's compaction with `SLUICE_COMPACTION_PART_CORRUPT` naming it — nothing of the
//! table is rewritten or removed — while the job's other table is compacted.
//! Objects: database `t_compact_bad_*`.

use super::{change_files, config_block};
use crate::support::{Job, TestDb};

fn two_tables_after_runs(runs: i64) -> (TestDb, Job) {
    let admin = std::env::var("SLUICE_TEST_PG_URL").unwrap();
    let db = TestDb::new(&admin, "compact_bad");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY, v text)",
    );
    let job = Job::postgres(&db, &["public.t", "public.u"], &config_block(1 << 20));
    job.drain();
    for i in 1..=runs {
        db.sql(&format!(
            "INSERT INTO t VALUES ({i}, 'v{i}'); INSERT INTO u VALUES ({i}, 'u{i}')"
        ));
        job.drain();
    }
    (db, job)
}

/// Runs a compaction that must refuse table `t` on `bad` and compact `u`.
fn refuses(job: &Job, bad: &str, says: &str) {
    let dir = job.out().join("public.t");
    let files = change_files(&dir);
    let run = job.run(&["compact"], &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "failed", "{summary}");
    let t = &summary["tables"]["public.t"];
    assert_eq!(t["status"], "failed", "{summary}");
    assert_eq!(
        t["error"]["code"], "SLUICE_COMPACTION_PART_CORRUPT",
        "{summary}"
    );
    let message = t["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("public.t/{bad}")),
        "names the part: {message}"
    );
    assert!(message.contains(says), "{message}");
    assert!(
        t["error"]["hint"].as_str().unwrap().contains("restore"),
        "{summary}"
    );
    assert_eq!(summary["error"]["code"], "SLUICE_COMPACTION_PART_CORRUPT");
    // Nothing of t was rewritten or removed.
    assert_eq!(change_files(&dir), files);
    assert!(!dir.join("_compactions").exists());
    // The other table was compacted.
    assert_eq!(
        summary["tables"]["public.u"]["status"], "compacted",
        "{summary}"
    );
    assert_eq!(change_files(&job.out().join("public.u")).len(), 1);
}

#[test]
fn a_part_that_does_not_hold_its_manifests_rows_is_refused_and_the_other_table_goes_on() {
    let _ = pg_or_skip!();
    let (_db, job) = two_tables_after_runs(6);
    let dir = job.out().join("public.t");
    let files = change_files(&dir);
    // A valid Parquet part with other rows in the place of the third.
    std::fs::copy(dir.join(&files[0]), dir.join(&files[2])).unwrap();
    refuses(
        &job,
        &files[2],
        "its manifest recorded 1 rows summing to mix64:",
    );
}

#[test]
fn a_truncated_or_missing_part_is_refused() {
    let _ = pg_or_skip!();
    let (_db, job) = two_tables_after_runs(4);
    let dir = job.out().join("public.t");
    let files = change_files(&dir);
    let bytes = std::fs::read(dir.join(&files[1])).unwrap();
    std::fs::write(dir.join(&files[1]), &bytes[..bytes.len() / 2]).unwrap();
    refuses(&job, &files[1], "does not read as Parquet");

    // Restored; then a part gone from under its manifest.
    std::fs::write(dir.join(&files[1]), &bytes).unwrap();
    std::fs::remove_file(dir.join(&files[3])).unwrap();
    let run = job.run(&["compact"], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    let t = &run.summary()["tables"]["public.t"];
    assert_eq!(t["error"]["code"], "SLUICE_COMPACTION_PART_CORRUPT");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not hold it"),
        "{t}"
    );
    assert_eq!(change_files(&dir).len(), files.len() - 1, "nothing removed");
    assert!(!dir.join("_compactions").exists());
    // Compacting the other table alone works: it was compacted already.
    let run = job.run(&["compact", "--table", "public.u"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["tables"]["public.u"]["status"], "nothing");
    assert!(run.summary()["tables"].get("public.t").is_none());
}
