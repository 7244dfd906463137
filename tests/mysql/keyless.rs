//! Tables without a key on MariaDB: the baseline is one `WITH CONSISTENT SNAPSHOT` read
//! pinned at the binlog position MariaDB reports for it, an UPDATE is written as the old
//! row deleted and the new row inserted, and `sluice sql` replays the table as a
//! multiset — identical rows, NULLs and concurrent writes included — equal to the source.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::support::{Job, TestMysqlDb, mysql_cli_output, readers};

/// `table`'s rows as `a|b|c` texts (NULL as `NULL`), sorted, duplicates kept.
fn source_rows(db: &TestMysqlDb, table: &str) -> Vec<String> {
    let text = db.sql(&format!(
        "SELECT CONCAT_WS('|', COALESCE(a, 'NULL'), COALESCE(b, 'NULL'), COALESCE(c, 'NULL')) FROM {table}"
    ));
    let mut rows: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    rows.sort();
    rows
}

fn create(db: &TestMysqlDb, table: &str) {
    db.sql(&format!(
        "CREATE TABLE {table} (a int, b varchar(20), c int);
         INSERT INTO {table} VALUES (1, 'x', NULL), (1, 'x', NULL), (2, NULL, 5), (2, NULL, 5), (3, 'y', 7);
         INSERT INTO {table} SELECT seq % 7, IF(seq % 3 = 0, NULL, CONCAT('r', seq % 4)), seq % 2 FROM seq_1_to_300"
    ));
}

fn write_sql(table: &str, i: u32) -> String {
    format!(
        "START TRANSACTION;
         INSERT INTO {table} VALUES ({a}, {b}, NULL);
         UPDATE {table} SET c = {i} WHERE a = {u} LIMIT 1;
         DELETE FROM {table} WHERE a = {d} LIMIT 1;
         COMMIT",
        a = 10 + i % 5,
        b = if i.is_multiple_of(2) {
            "NULL".to_owned()
        } else {
            format!("'w{}'", i % 3)
        },
        u = (i + 1) % 7,
        d = 10 + (i + 2) % 5,
    )
}

/// The ops the task names, after the baseline: UPDATE one of two identical rows, DELETE
/// one of two identical rows, insert an existing row again and two all-NULL rows.
fn edit_duplicates(db: &TestMysqlDb, table: &str) {
    db.sql(&format!(
        "UPDATE {table} SET b = 'changed' WHERE a = 1 AND b = 'x' LIMIT 1;
         DELETE FROM {table} WHERE a = 2 AND c = 5 LIMIT 1;
         INSERT INTO {table} VALUES (3, 'y', 7), (NULL, NULL, NULL), (NULL, NULL, NULL)"
    ));
}

fn assert_replays(job: &Job, db: &TestMysqlDb, table: &str) {
    let source = source_rows(db, table);
    let distinct: std::collections::BTreeSet<_> = source.iter().collect();
    assert!(
        distinct.len() < source.len(),
        "the source has identical rows"
    );
    let Some(replayed) = readers::sluice_sql_multiset(job, table) else {
        return;
    };
    assert_eq!(replayed.len(), source.len(), "row count of {table}");
    assert_eq!(
        replayed, source,
        "{table} replays to the source as a multiset"
    );
}

fn manifest(job: &Job, path: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(job.out().join(path)).unwrap()).unwrap()
}

/// `initial: snapshot` on a keyless table while a writer inserts, updates and deletes
/// identical rows: the first drain baselines it (one consistent-snapshot read) and
/// streams; UPDATE … LIMIT 1 and DELETE … LIMIT 1 of identical rows and NULL rows follow;
/// `sluice sql` replays it to the source exactly, and the manifests say it is keyless.
#[test]
fn keyless_mysql_table_is_baselined_and_replayed_as_a_multiset_under_concurrent_writes() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "keyless_my");
    create(&db, "kl");
    let job = Job::mysql(&db, &["kl"], "", "initial: snapshot");

    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU32::new(0));
    let writer = {
        let (stop, writes) = (stop.clone(), writes.clone());
        let url = db.url.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let out = mysql_cli_output(&url, &write_sql("kl", 100 + i));
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                writes.fetch_add(1, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    while writes.load(Ordering::SeqCst) < 3 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let first = job.drain();
    let during = writes.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert_eq!(first["status"], "drained", "{first}");
    assert!(
        during > 3,
        "the writer wrote while the baseline ran ({during})"
    );

    edit_duplicates(&db, "kl");
    for i in 0..5 {
        db.sql(&write_sql("kl", i));
    }
    job.drain();
    assert_replays(&job, &db, "kl");

    let snapshot = manifest(&job, "kl/snapshot/_manifest.json");
    assert_eq!(snapshot["keyless"], true, "{snapshot}");
    let changes = manifest(&job, "kl/_manifest.json");
    assert_eq!(changes["keyless"], true, "{changes}");
    let updates = job
        .rows("kl")
        .iter()
        .filter(|r| r["__op"].as_deref() == Some("update"))
        .count();
    assert_eq!(updates, 0, "a keyless UPDATE is a delete and an insert");
}

/// A baseline of two keyless tables stopped after the first table's chunk is recorded:
/// the resumed baseline reads only the missing one (at its own, later snapshot point,
/// with the writes made meanwhile in both the read and the stream), and both replay
/// exactly.
#[test]
fn keyless_mysql_baseline_resumed_reads_only_the_missing_table() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "keyless_my_resume");
    create(&db, "ka");
    create(&db, "kb");
    let job = Job::mysql(&db, &["ka", "kb"], "", "initial: snapshot");
    let crashed = job.run(&["baseline"], &[("SLUICE_FAULT", "chunk_done@1")]);
    assert_ne!(
        crashed.code, 0,
        "the fault stops the baseline: {}",
        crashed.stderr
    );
    for i in 0..4 {
        db.sql(&write_sql("ka", i));
        db.sql(&write_sql("kb", i));
    }
    edit_duplicates(&db, "ka");
    edit_duplicates(&db, "kb");

    let resumed = job.run(&["baseline"], &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let summary = resumed.summary();
    assert_eq!(summary["chunks"], 2, "{summary}");
    assert_eq!(
        summary["chunks_read"], 1,
        "only the missing chunk is read: {summary}"
    );

    for i in 4..8 {
        db.sql(&write_sql("ka", i));
        db.sql(&write_sql("kb", i));
    }
    job.drain();
    assert_replays(&job, &db, "ka");
    assert_replays(&job, &db, "kb");
}

/// `sluice baseline --table` of a keyless table on a running job, asked right after a
/// drain (so its snapshot may be read at the checkpoint itself, before the re-baseline's
/// anchor): the new snapshot supersedes every earlier row and the table replays exactly.
#[test]
fn keyless_mysql_table_is_rebaselined_by_hand() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "keyless_my_rb");
    create(&db, "kl");
    let job = Job::mysql(&db, &["kl"], "", "initial: snapshot");
    job.drain();
    edit_duplicates(&db, "kl");
    job.drain();
    let run = job.run(&["baseline", "--table", "kl"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    edit_duplicates(&db, "kl");
    db.sql(&write_sql("kl", 1));
    job.drain();
    assert_replays(&job, &db, "kl");
}
