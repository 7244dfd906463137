//! MariaDB failovers and replicas, end to end: a job that follows a promoted replica by
//! GTID without a re-baseline and loses nothing, a lossy failover refused with
//! `SLUICE_SOURCE_FAILOVER_GAP`, and a job that reads from a replica from the start.
//!
//! The replica is the local stack's second MariaDB (infra/local/mariadb-replica.sh,
//! `SLUICE_TEST_MYSQL_REPLICA_URL`), replicating from the shared one by GTID. Each test
//! holds it exclusively (a cross-process lock), makes it a fresh clone first
//! (`mariadb-replica.sh reset`) and again at the end, since a test may promote it.

use crate::support::replica::MariaReplica;
use crate::support::{self, Job, TestMysqlDb, mysql_cli, readers, replayed_text};

const T: &str = "CREATE TABLE t (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB";

fn replica_or_skip() -> Option<MariaReplica> {
    support::service_url("SLUICE_TEST_MYSQL_REPLICA_URL").map(MariaReplica::take)
}

/// The source's rows of `t` as `replayed_text` renders them (key-text order).
fn source_text(url: &str) -> String {
    mysql_cli(
        url,
        "SELECT IFNULL(GROUP_CONCAT(CONCAT(id, '=', IFNULL(v, 'NULL')) ORDER BY CAST(id AS CHAR) SEPARATOR ','), '') FROM t",
    )
}

/// `sluice doctor --json`'s check `name`.
fn doctor_check(job: &Job, name: &str) -> serde_json::Value {
    let run = job.run(&["doctor", "--json"], &[]);
    let doc = run.summary();
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {doc}"))
        .clone()
}

fn checkpoint(job: &Job) -> serde_json::Value {
    job.local_state()["checkpoint"].clone()
}

#[test]
fn a_drain_follows_a_promoted_replica_by_gtid_without_a_rebaseline() {
    let admin = mysql_or_skip!();
    let Some(replica) = replica_or_skip() else {
        return;
    };
    let db = TestMysqlDb::new(&admin, "gtid_follow");
    db.sql(T);
    let mut job = Job::mysql(&db, &["t"], "", "");
    job.drain();
    db.sql(
        "INSERT INTO t VALUES (10, 'a'), (11, 'b'), (12, 'c'); UPDATE t SET v = 'a2' WHERE id = 10",
    );
    job.drain();
    let before = checkpoint(&job);
    let position = before["position"].as_str().unwrap().to_owned();
    assert!(position.contains(";g=0-1-"), "{before}");
    assert!(!position.contains(";n="), "{before}");

    // A backlog the job has not read yet, replicated; then the primary is gone: the
    // replica stops replicating and takes the writes.
    db.sql("INSERT INTO t VALUES (13, 'd'); DELETE FROM t WHERE id = 11; UPDATE t SET v = 'c2' WHERE id = 12");
    replica.promote(&admin);
    let on_replica = replica.url_for(&db.url);
    mysql_cli(
        &on_replica,
        "INSERT INTO t VALUES (14, 'e'); UPDATE t SET v = 'd2' WHERE id = 13",
    );
    job.url_env.1 = replica.url_for(&db.source_url);
    // Doctor judges the checkpoint as the drain will.
    let identity = doctor_check(&job, "server identity");
    assert_eq!(identity["status"], "ok", "{identity}");
    assert!(
        identity["detail"]
            .as_str()
            .unwrap()
            .contains("follows it here"),
        "{identity}"
    );
    let failover = doctor_check(&job, "failover");
    assert_eq!(failover["status"], "ok", "{failover}");

    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    let after = checkpoint(&job);
    assert!(
        after["source_identity"]
            .as_str()
            .unwrap()
            .contains("server_id=2"),
        "{after}"
    );
    let position = after["position"].as_str().unwrap();
    assert!(position.contains(";n=1"), "{after}");
    assert!(position.contains(";g=0-2-"), "{after}");
    assert_eq!(
        replayed_text(&job.out().join("t"), &["id"]),
        source_text(&on_replica)
    );

    // Later drains go on on the new primary.
    mysql_cli(
        &on_replica,
        "INSERT INTO t VALUES (15, 'f'); DELETE FROM t WHERE id = 10",
    );
    job.drain();
    assert_eq!(
        replayed_text(&job.out().join("t"), &["id"]),
        source_text(&on_replica)
    );
    assert_eq!(source_text(&on_replica), "12=c2,13=d2,14=e,15=f");
    // The documented replay query orders the new server's changes (its binlog numbered
    // lower than the old one's) after the old server's.
    if let Some(replayed) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        assert_eq!(replayed, "12=c2,13=d2,14=e,15=f");
    }
    let rows = job.rows("t");
    assert!(
        !job.out().join("t").join("snapshot").exists(),
        "no re-baseline"
    );
    // Every change arrived exactly once, and the ones after the failover sort after
    // the ones before it.
    let ops = support::ops(&rows, "id");
    assert_eq!(
        ops.iter()
            .filter(|(_, id)| id.as_deref() == Some("13"))
            .count(),
        2,
        "{ops:?}"
    );
    let positions: Vec<&str> = rows
        .iter()
        .map(|r| r["__pos"].as_deref().unwrap())
        .collect();
    let (old, new): (Vec<&str>, Vec<&str>) =
        positions.iter().partition(|p| !p.starts_with("~00001~"));
    // The backlog was read from the new primary too: 4 changes before, 7 after.
    assert_eq!((old.len(), new.len()), (4, 7), "{positions:?}");
    assert!(
        old.iter().all(|o| new.iter().all(|n| o < n)),
        "{positions:?}"
    );
}

#[test]
fn a_lossy_failover_is_refused_naming_the_missing_gtids() {
    let admin = mysql_or_skip!();
    let Some(replica) = replica_or_skip() else {
        return;
    };
    let db = TestMysqlDb::new(&admin, "gtid_lossy");
    db.sql(T);
    let mut job = Job::mysql(&db, &["t"], "", "");
    job.drain();
    db.sql("INSERT INTO t VALUES (10, 'a')");
    replica.catch_up(&admin);
    // Replication breaks; the primary goes on, and the job reads those changes.
    replica.sql("STOP SLAVE");
    db.sql("INSERT INTO t VALUES (11, 'lost'); UPDATE t SET v = 'lost' WHERE id = 10");
    job.drain();
    let missing = mysql_cli(&admin, "SELECT @@gtid_binlog_pos");
    job.url_env.1 = replica.url_for(&db.source_url);

    let identity = doctor_check(&job, "server identity");
    assert_eq!(identity["status"], "fail", "{identity}");
    assert_eq!(identity["code"], "SLUICE_SOURCE_FAILOVER_GAP", "{identity}");
    let user = url::Url::parse(&db.source_url)
        .unwrap()
        .username()
        .to_owned();
    mysql_cli(
        &replica.admin_url,
        &format!("GRANT SLAVE MONITOR ON *.* TO '{user}'@'127.0.0.1'"),
    );
    let replication = doctor_check(&job, "replication");
    assert_eq!(replication["status"], "warn", "{replication}");
    assert!(
        replication["detail"]
            .as_str()
            .unwrap()
            .contains("not running"),
        "{replication}"
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_SOURCE_FAILOVER_GAP",
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("are missing"), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("..{missing}")) || run.stderr.contains("..0-1-"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("sluice state clear --config FILE"),
        "{}",
        run.stderr
    );
    // The checkpoint did not move.
    assert!(
        checkpoint(&job)["source_identity"]
            .as_str()
            .unwrap()
            .contains("server_id=1")
    );
}

#[test]
fn a_job_reading_a_replica_from_the_start_replays_exactly() {
    let admin = mysql_or_skip!();
    let Some(replica) = replica_or_skip() else {
        return;
    };
    let db = TestMysqlDb::new(&admin, "gtid_replica");
    db.sql(T);
    db.sql("INSERT INTO t VALUES (10, 'before'), (11, 'x')");
    replica.catch_up(&admin);
    let mut job = Job::mysql(&db, &["t"], "", "");
    job.url_env.1 = replica.url_for(&db.source_url);
    // Without SLAVE MONITOR doctor can tell it reads a replica, not how far it lags.
    let replication = doctor_check(&job, "replication");
    assert_eq!(replication["status"], "warn", "{replication}");
    assert!(
        replication["detail"]
            .as_str()
            .unwrap()
            .contains("a replica (1 replication"),
        "{replication}"
    );
    let user = url::Url::parse(&db.source_url)
        .unwrap()
        .username()
        .to_owned();
    db.admin(&format!(
        "GRANT SLAVE MONITOR ON *.* TO '{user}'@'127.0.0.1'"
    ));
    replica.catch_up(&admin);
    let replication = doctor_check(&job, "replication");
    assert_eq!(replication["status"], "ok", "{replication}");
    assert!(
        replication["detail"]
            .as_str()
            .unwrap()
            .contains("s behind it"),
        "{replication}"
    );
    assert_eq!(doctor_check(&job, "failover")["status"], "ok");
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    db.sql("INSERT INTO t VALUES (12, 'y'); UPDATE t SET v = 'after' WHERE id = 10; DELETE FROM t WHERE id = 11");
    replica.catch_up(&admin);
    job.drain();
    db.sql("INSERT INTO t VALUES (13, 'z'), (14, NULL)");
    replica.catch_up(&admin);
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(
        replayed_text(&job.out().join("t"), &["id"]),
        source_text(&db.url)
    );
    assert_eq!(source_text(&db.url), "10=after,12=y,13=z,14=NULL");
    let cp = checkpoint(&job);
    assert!(
        cp["source_identity"]
            .as_str()
            .unwrap()
            .contains("server_id=2"),
        "{cp}"
    );
    // The replica's binlog carries the primary's GTIDs (log_slave_updates).
    assert!(cp["position"].as_str().unwrap().contains(";g=0-1-"), "{cp}");
}

#[test]
fn a_checkpoint_written_without_a_gtid_position_gets_one_on_its_next_write() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "gtid_upgrade");
    db.sql(T);
    let job = Job::mysql(&db, &["t"], "", "");
    job.drain();
    db.sql("INSERT INTO t VALUES (10, 'a')");
    job.drain();
    // The checkpoint as a version before GTID positions wrote it: `file:offset;f=…;e=…`.
    let mut state = job.local_state();
    let position = state["checkpoint"]["position"].as_str().unwrap().to_owned();
    let old = position.split(";g=").next().unwrap().to_owned();
    assert_ne!(old, position);
    state["checkpoint"]["position"] = old.clone().into();
    job.write_local_state(&state);
    db.sql("INSERT INTO t VALUES (11, 'b'); UPDATE t SET v = 'a2' WHERE id = 10");
    job.drain();
    let position = checkpoint(&job)["position"].as_str().unwrap().to_owned();
    let gtid = mysql_cli(&admin, "SELECT @@gtid_binlog_pos");
    assert!(position.contains(";g=0-1-"), "{position}");
    assert_eq!(
        replayed_text(&job.out().join("t"), &["id"]),
        source_text(&db.url)
    );
    // The recorded GTID position is the server's own at that binlog position.
    let recorded = position
        .split(";g=")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let file_offset = position
        .trim_start_matches("mysql:")
        .split(';')
        .next()
        .unwrap();
    let (file, offset) = file_offset.rsplit_once(':').unwrap();
    assert_eq!(
        mysql_cli(
            &admin,
            &format!("SELECT BINLOG_GTID_POS('{file}', {offset})")
        ),
        recorded,
        "the server's GTID position now is {gtid}"
    );
}

/// `table_format: iceberg` across a failover: a run commits its Iceberg snapshot on the
/// primary and fails before its checkpoint; the primary is then gone and the next run
/// reads the promoted replica (another source identity) from the stored checkpoint. That
/// run drops the failed run's snapshot — written under the former identity — and commits
/// the same changes again from the replica: pyiceberg reads every change once.
#[test]
fn iceberg_a_failed_commit_before_a_failover_is_dropped_on_the_promoted_replica() {
    let admin = mysql_or_skip!();
    let Some(replica) = replica_or_skip() else {
        return;
    };
    let db = TestMysqlDb::new(&admin, "gtid_iceberg");
    db.sql(T);
    let dir = tempfile::tempdir().unwrap();
    let catalog = format!("sqlite:///{}", dir.path().join("catalog.db").display());
    let iceberg = format!(
        "table_format: iceberg\niceberg: {{ catalog: {{ type: sql, uri: \"{catalog}\" }}, namespace: cdc }}\n"
    );
    let mut job = Job::mysql(&db, &["t"], "", &iceberg);
    job.drain();
    db.sql("INSERT INTO t VALUES (10, 'a'), (11, 'b')");
    assert_eq!(job.drain()["rows"], 2);
    db.sql("INSERT INTO t VALUES (12, 'c'); UPDATE t SET v = 'a2' WHERE id = 10");
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed:error")]);
    assert_eq!(run.error_code(), "SLUICE_FAULT_INJECTED", "{}", run.stdout);

    replica.promote(&admin);
    let on_replica = replica.url_for(&db.url);
    mysql_cli(&on_replica, "DELETE FROM t WHERE id = 11");
    job.url_env.1 = replica.url_for(&db.source_url);
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["rows"], 3, "{summary}");
    assert!(
        checkpoint(&job)["source_identity"]
            .as_str()
            .unwrap()
            .contains("server_id=2")
    );

    let Some(python) = readers::python() else {
        return;
    };
    const READ: &str = concat!(
        crate::py_replay_by_id!(),
        r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", "t"))
rows = table.scan().to_arrow().to_pylist()
state = replay(rows)
print(json.dumps({
    "rows": len(rows),
    "ops": sorted(r["__op"] for r in rows),
    "snapshots": [s.summary.operation.value for s in table.snapshots()],
    "replayed": ",".join(f"{k}={v}" for k, v in sorted(state.items())),
}))
"#
    );
    let out = readers::run(&python, READ, &[std::path::Path::new(&catalog)]);
    let read: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(read["rows"], 5, "each change once: {read}");
    assert_eq!(
        read["ops"],
        serde_json::json!(["delete", "insert", "insert", "insert", "update"]),
        "{read}"
    );
    assert_eq!(
        read["snapshots"],
        serde_json::json!(["append", "append", "overwrite"]),
        "the failed run's snapshot is dropped: {read}"
    );
    assert_eq!(read["replayed"], source_text(&on_replica), "{read}");
}
