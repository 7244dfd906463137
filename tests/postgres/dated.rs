//! The dated layout (`output.layout: dated-hourly`) on PostgreSQL, end to end: change
//! parts land in the `dt=…/hr=…` folder of their rows' commit time (`__ts`, UTC), the
//! baseline stays under `snapshot/`, the run manifests list each part with its partition,
//! pyarrow and DuckDB read the partitions back, and `sluice sql`'s DuckDB query replays
//! the folder to the source's state. PostgreSQL's commit times cannot be set, so the rows
//! fall in the hour the test runs in (the split at a boundary is the unit test
//! `dated_layout_cuts_parts_at_the_partition_boundary`, a two-date drain the MariaDB
//! test). Objects: database, slot and publication `t_dated_pg_*`.

use crate::support::{Job, TestDb, dated, readers};

#[test]
fn pg_dated_layout_partitions_changes_by_commit_hour_and_readers_read_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "dated_pg");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text); \
         INSERT INTO t SELECT g, 'base ' || g FROM generate_series(1, 5) g",
    );
    let job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\noutput: { layout: dated-hourly }",
    );
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (6, 'six'), (7, 'seven')");
    db.sql("UPDATE t SET v = 'changed' WHERE id = 2; DELETE FROM t WHERE id = 3");
    db.sql("UPDATE t SET v = NULL WHERE id = 6");
    let summary = job.drain();
    assert_eq!(summary["rows"], 5, "{summary}");

    let partitions = dated::check(&job.out(), "t", true, 5, 5);
    assert!(!partitions.is_empty());
    assert!(
        job.out().join("t/snapshot/_manifest.json").is_file(),
        "the baseline keeps its own prefix"
    );
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        assert_eq!(text, db.id_v_text());
    }
}
