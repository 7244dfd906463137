//! Tables without a key (`REPLICA IDENTITY FULL`, no primary key) on PostgreSQL: the
//! baseline is one consistent read pinned at an exact WAL position, an UPDATE is written
//! as the old row deleted and the new row inserted, and `sluice sql` replays the table as
//! a multiset — identical rows, NULLs and concurrent writes included — equal to the source.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::support::{Job, TestDb, readers};

/// `table`'s rows as `a|b|c` texts (NULL as `NULL`), sorted, duplicates kept.
fn source_rows(db: &TestDb, table: &str) -> Vec<String> {
    let text = db.sql(&format!(
        "SELECT concat_ws('|', coalesce(a::text, 'NULL'), coalesce(b, 'NULL'), coalesce(c::text, 'NULL')) FROM {table}"
    ));
    let mut rows: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    rows.sort();
    rows
}

fn create(db: &TestDb, table: &str) {
    db.sql(&format!(
        "CREATE TABLE {table} (a int, b text, c int); ALTER TABLE {table} REPLICA IDENTITY FULL;
         INSERT INTO {table} VALUES (1, 'x', NULL), (1, 'x', NULL), (2, NULL, 5), (2, NULL, 5), (3, 'y', 7);
         INSERT INTO {table} SELECT i % 7, CASE WHEN i % 3 = 0 THEN NULL ELSE 'r' || (i % 4) END, i % 2 FROM generate_series(1, 300) i"
    ));
}

/// One small transaction of every kind on `table`: an insert (sometimes of NULLs), an
/// update of one of several identical rows, a delete of one of several identical rows.
fn write_once(db: &TestDb, table: &str, i: u32) {
    db.sql(&format!(
        "INSERT INTO {table} VALUES ({a}, {b}, NULL);
         UPDATE {table} SET c = {i} WHERE ctid = (SELECT ctid FROM {table} WHERE a = {u} LIMIT 1);
         DELETE FROM {table} WHERE ctid = (SELECT ctid FROM {table} WHERE a = {d} LIMIT 1)",
        a = 10 + i % 5,
        b = if i.is_multiple_of(2) {
            "NULL".to_owned()
        } else {
            format!("'w{}'", i % 3)
        },
        u = (i + 1) % 7,
        d = 10 + (i + 2) % 5,
    ));
}

/// The ops the task names, after the baseline: UPDATE one of two identical rows, DELETE
/// one of two identical rows, insert an existing row again and two all-NULL rows.
fn edit_duplicates(db: &TestDb, table: &str) {
    db.sql(&format!(
        "UPDATE {table} SET b = 'changed' WHERE ctid = (SELECT ctid FROM {table} WHERE a = 1 AND b = 'x' LIMIT 1);
         DELETE FROM {table} WHERE ctid = (SELECT ctid FROM {table} WHERE a = 2 AND c = 5 LIMIT 1);
         INSERT INTO {table} VALUES (3, 'y', 7), (NULL, NULL, NULL), (NULL, NULL, NULL)"
    ));
}

fn assert_replays(job: &Job, db: &TestDb, table: &str) {
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
/// identical rows: the first drain baselines it (one pinned read) and streams; UPDATE and
/// DELETE of one of two identical rows and NULL rows follow; `sluice sql` replays it to
/// the source exactly, and the manifests say it is keyless.
#[test]
fn keyless_pg_table_is_baselined_and_replayed_as_a_multiset_under_concurrent_writes() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "keyless_pg");
    create(&db, "kl");
    let job = Job::postgres(&db, &["kl"], "initial: snapshot");

    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU32::new(0));
    let writer = {
        let (stop, writes) = (stop.clone(), writes.clone());
        let url = db.url.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let out = crate::support::psql_output(
                    &url,
                    &format!(
                        "INSERT INTO kl VALUES ({a}, NULL, {i}); UPDATE kl SET c = -{i} WHERE ctid = (SELECT ctid FROM kl WHERE a = {u} LIMIT 1); \
                     DELETE FROM kl WHERE ctid = (SELECT ctid FROM kl WHERE a = {d} LIMIT 1)",
                        a = 20 + i % 3,
                        u = i % 7,
                        d = 20 + (i + 1) % 3
                    ),
                );
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
        write_once(&db, "kl", i);
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
fn keyless_pg_baseline_resumed_reads_only_the_missing_table() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "keyless_pg_resume");
    create(&db, "ka");
    create(&db, "kb");
    let job = Job::postgres(&db, &["ka", "kb"], "initial: snapshot");
    let crashed = job.run(&["baseline"], &[("SLUICE_FAULT", "chunk_done@1")]);
    assert_ne!(
        crashed.code, 0,
        "the fault stops the baseline: {}",
        crashed.stderr
    );
    for i in 0..4 {
        write_once(&db, "ka", i);
        write_once(&db, "kb", i);
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
        write_once(&db, "ka", i);
        write_once(&db, "kb", i);
    }
    job.drain();
    assert_replays(&job, &db, "ka");
    assert_replays(&job, &db, "kb");
}

/// `sluice baseline --table` of a keyless table on a running job, right after a drain:
/// the new snapshot supersedes every earlier row and the table replays exactly.
#[test]
fn keyless_pg_table_is_rebaselined_by_hand() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "keyless_pg_rb");
    create(&db, "kl");
    let job = Job::postgres(&db, &["kl"], "initial: snapshot");
    job.drain();
    edit_duplicates(&db, "kl");
    job.drain();
    let run = job.run(&["baseline", "--table", "kl"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    edit_duplicates(&db, "kl");
    write_once(&db, "kl", 1);
    job.drain();
    assert_replays(&job, &db, "kl");
}

/// Drops a role at the end of a test (declared before the test's database, so it is
/// dropped after it, with the grants in it).
struct RoleGuard(String, String);

impl Drop for RoleGuard {
    fn drop(&mut self) {
        let _ = crate::support::psql_output(&self.0, &format!("DROP ROLE IF EXISTS {}", self.1));
    }
}

/// The pinning `LOCK TABLE … IN SHARE MODE` needs more than SELECT: a least-privilege
/// source user (REPLICATION, SELECT, a publication made by the owner) is refused with a
/// prerequisite error naming the grant — and `sluice doctor`'s "baseline lock" row fails
/// with the same fix — and baselines the table once it has it.
#[test]
fn keyless_pg_baseline_names_the_grant_its_lock_needs() {
    let admin = pg_or_skip!();
    let role = format!("r_keyless_lp_{}", std::process::id());
    crate::support::psql(&admin, &format!("CREATE ROLE {role} LOGIN REPLICATION"));
    let _role = RoleGuard(admin.clone(), role.clone());
    let db = TestDb::new(&admin, "keyless_pg_lp");
    create(&db, "kl");
    db.sql(&format!(
        "GRANT SELECT ON kl TO {role}; CREATE PUBLICATION p_{} FOR TABLE kl",
        db.name
    ));
    let mut job = Job::postgres(&db, &["kl"], "initial: snapshot");
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&role).unwrap();
    job.url_env.1 = url.to_string();

    let lock_row = |job: &Job| {
        let doc = job.run(&["doctor", "--json"], &[]).summary();
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "table kl baseline lock")
            .unwrap_or_else(|| panic!("no baseline lock row: {doc}"))
            .clone()
    };
    let row = lock_row(&job);
    assert_eq!(
        row["status"], "fail",
        "doctor agrees with the baseline: {row}"
    );
    assert!(
        row["fix"].as_str().unwrap().contains("GRANT UPDATE ON"),
        "{row}"
    );
    let refused = job.run(&["baseline"], &[]);
    assert_eq!(refused.code, 5, "{}\n{}", refused.stdout, refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        refused
            .stdout
            .contains("GRANT UPDATE ON \\\"public\\\".\\\"kl\\\""),
        "the hint names the grant: {}",
        refused.stdout
    );
    db.sql(&format!("GRANT UPDATE ON kl TO {role}"));
    assert_eq!(lock_row(&job)["status"], "ok");
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    edit_duplicates(&db, "kl");
    job.drain();
    assert_replays(&job, &db, "kl");
}
