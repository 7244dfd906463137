//! History retention (`output.history_retention`) on PostgreSQL: the changes older than
//! the retention are folded into a new baseline plan of the table's state by `sluice
//! compact`, the parts that only held them and the earlier plan are removed, and every
//! reader still replays the source — `sluice sql` run by DuckDB (values a source left
//! unlogged included) and `sluice materialize`'s state; a compaction killed between the
//! plan and its manifest leaves an exact table and the next one tidies up.
//! Objects: database `t_retention_pg_*`.

use std::time::{Duration, Instant};

use super::change_files;
use super::postgres::small_runs;
use crate::support::current_state::{materialize, state_text};
use crate::support::{Job, TestDb, readers};

const RETENTION_SECS: u64 = 3;

/// A table of `id`, `v` and an out-of-line TOAST column `big`, baselined, then runs.
fn table_with_history(admin: &str, name: &str) -> (TestDb, Job) {
    let db = TestDb::new(admin, name);
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, big text)");
    db.sql(
        "INSERT INTO t SELECT i, 'b' || i, CASE WHEN i <= 5 THEN \
         (SELECT string_agg(md5(random()::text || i || g), '') FROM generate_series(1, 300) g) END \
         FROM generate_series(1, 20) i",
    );
    let job = Job::postgres(
        &db,
        &["t"],
        &format!(
            "initial: snapshot\n\
             compaction: {{ min_age_seconds: 0, target_bytes: 1048576, lease_ttl_seconds: 2 }}\n\
             output: {{ history_retention: {RETENTION_SECS}s }}"
        ),
    );
    assert_eq!(job.run(&["baseline"], &[]).code, 0);
    (db, job)
}

/// `sluice compact`, waiting out a crashed one's lease.
fn compact(job: &Job) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = job.run(&["compact"], &[]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        let summary = run.summary();
        if summary["tables"]["t"]["status"] != "held" {
            return summary;
        }
        assert!(
            Instant::now() < deadline,
            "the compaction lease was never freed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The plan folders below `snapshot/` that hold a file (the local destination leaves a
/// folder whose files were removed).
fn plans(job: &Job) -> Vec<String> {
    let mut plans: Vec<String> = std::fs::read_dir(job.out().join("t/snapshot"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && std::fs::read_dir(p).unwrap().next().is_some())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    plans.sort();
    plans
}

/// Every reader against the source: `sluice sql` (both columns, `big` filled where the
/// source left it unlogged) and a fresh current state.
fn assert_exact(job: &Job, db: &TestDb, when: &str) {
    let v =
        "SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ',' ORDER BY id), '') FROM t";
    let big = "SELECT coalesce(string_agg(id || '=' || coalesce(big, 'NULL'), ',' ORDER BY id), '') FROM t";
    if let Some(replayed) = readers::sluice_sql_replayed(job, "t", "id", "v", "=") {
        assert_eq!(replayed, db.sql(v), "{when}: sluice sql, v");
        let replayed = readers::sluice_sql_replayed(job, "t", "id", "big", "=").unwrap();
        assert_eq!(replayed, db.sql(big), "{when}: sluice sql, big");
    }
    let (code, _, err) = materialize(job, &[]);
    assert_eq!(code, 0, "{when}: {err}");
    if let Some(state) = state_text(job) {
        assert_eq!(state, db.id_v_text(), "{when}: the current state");
    }
}

#[test]
fn history_older_than_the_retention_is_folded_and_every_reader_stays_exact() {
    let admin = pg_or_skip!();
    let (db, job) = table_with_history(&admin, "retention_pg");
    let first_plan = plans(&job);
    assert_eq!(first_plan.len(), 1);
    small_runs(&job, &db, 100, 8);
    // Updates that leave `big` unlogged (REPLICA IDENTITY DEFAULT, TOAST out of line).
    db.sql("UPDATE t SET v = 'old-side' WHERE id IN (1, 2)");
    assert_eq!(job.drain()["status"], "drained");
    let old_files = change_files(&job.out().join("t"));
    assert_eq!(old_files.len(), 9, "{old_files:?}");

    std::thread::sleep(Duration::from_secs(RETENTION_SECS + 1));
    small_runs(&job, &db, 200, 3);
    db.sql("UPDATE t SET v = 'new-side' WHERE id IN (2, 3)");
    assert_eq!(job.drain()["status"], "drained");
    assert_exact(&job, &db, "before the fold");

    let summary = compact(&job);
    let table = &summary["tables"]["t"];
    assert_eq!(table["status"], "compacted", "{summary}");
    let cut = table["history_folded_through"]
        .as_str()
        .unwrap_or_else(|| panic!("no fold: {summary}"));
    assert!(
        table["superseded_dropped"].as_u64().unwrap() >= 9,
        "{summary}"
    );
    assert!(
        table["plan_files_removed"].as_u64().unwrap() >= 1,
        "{summary}"
    );
    let now_plans = plans(&job);
    assert_eq!(now_plans.len(), 1, "only the fold's plan: {now_plans:?}");
    assert!(now_plans[0].starts_with(cut), "{now_plans:?} {cut}");
    // The runs before the cut left no part; the later ones are all kept.
    for file in change_files(&job.out().join("t")) {
        assert!(
            !old_files.contains(&file) || file.contains("compacted-"),
            "{file} survived the fold"
        );
    }
    assert_exact(&job, &db, "after the fold");

    // More history, then a compaction killed with the new plan written and its manifest
    // not yet: the table replays exactly (the plan is whole), the next one finishes.
    std::thread::sleep(Duration::from_secs(RETENTION_SECS + 1));
    small_runs(&job, &db, 300, 2);
    db.sql("UPDATE t SET v = 'crash-side' WHERE id IN (1, 3); DELETE FROM t WHERE id = 4");
    assert_eq!(job.drain()["status"], "drained");
    let crashed = job.run(&["compact"], &[("SLUICE_FAULT", "retention_plan_written")]);
    assert_ne!(crashed.code, 0, "{}", crashed.stdout);
    assert!(
        crashed.stderr.contains("fault injected"),
        "{}",
        crashed.stderr
    );
    assert_eq!(
        plans(&job).len(),
        2,
        "the new plan beside the one the manifest names"
    );
    assert_exact(&job, &db, "after a crash between the plan and its manifest");
    std::thread::sleep(Duration::from_secs(RETENTION_SECS + 1));
    db.sql("UPDATE t SET v = 'last' WHERE id = 5");
    assert_eq!(job.drain()["status"], "drained");
    let next = compact(&job);
    assert!(
        next["tables"]["t"]["history_folded_through"].is_string(),
        "{next}"
    );
    assert_eq!(plans(&job).len(), 1, "{:?}", plans(&job));
    assert_exact(&job, &db, "after the next fold");
}
