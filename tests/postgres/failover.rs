//! Failover slots, live (PostgreSQL ≥ 17; here the stack's 18 binaries): a private primary
//! with `synchronized_standby_slots` and a standby with `sync_replication_slots = on`
//! (`support::pg_cluster`), the standby promoted mid-backlog. The job whose slot is a
//! failover slot follows the promotion on the new timeline without a re-baseline and
//! loses nothing; a job whose slot was not synchronized is refused with
//! `SLUICE_SOURCE_FOREIGN_CHECKPOINT` and the re-baseline steps. The timeline rule of the
//! source identity meets a real promotion, not an edited state. Also on a private server:
//! PostgreSQL 18's `idle_replication_slot_timeout` invalidating the job's slot.

use crate::support::pg_cluster::{self, Cluster};
use crate::support::{self, Job, TestDb};

/// `t (id, v)` as `id=v,…` in id-text order at `url`.
fn id_v_text(url: &str) -> String {
    support::psql(
        url,
        "SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ',' ORDER BY id::text), '') FROM t",
    )
}

/// A second job on `db`'s table `t` with its own name, slot and publication.
fn other_job(db: &TestDb, suffix: &str) -> Job {
    let job = Job::postgres(db, &["t"], "initial: snapshot");
    let yaml = std::fs::read_to_string(&job.config)
        .unwrap()
        .replace(
            &format!("job: {}", db.name),
            &format!("job: {}_{suffix}", db.name),
        )
        .replace(
            &format!("slot: s_{}", db.name),
            &format!("slot: s_{suffix}_{}", db.name),
        )
        .replace(
            &format!("publication: p_{}", db.name),
            &format!("publication: p_{suffix}_{}, adopt_slot: true", db.name),
        );
    std::fs::write(&job.config, yaml).unwrap();
    job
}

#[test]
fn a_promotion_with_failover_slots_is_followed_without_a_rebaseline_and_an_unsynced_slot_is_refused()
 {
    let Some(bin) = pg_cluster::pg18_bin() else {
        return;
    };
    let primary = Cluster::primary(&bin, "synchronized_standby_slots = 'sb'");
    // The standby's settings start as a copy of the primary's (pg_basebackup): once
    // promoted it has no standby of its own, so it must not wait for one ('' — a name of
    // a slot that does not exist there would hold every decoding of a failover slot).
    let standby = Cluster::standby_of(
        &primary,
        "sb",
        "sync_replication_slots = on\nsynchronized_standby_slots = ''",
    );
    let db = TestDb::new(&primary.url("postgres"), "failover");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text); \
         INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 200) i; ANALYZE t",
    );
    let mut job = Job::postgres(&db, &["t"], "initial: snapshot");
    // A job whose slot its operator made without failover (sluice makes failover slots on
    // 17 and later): no standby keeps a copy.
    let mut plain = other_job(&db, "plain");
    db.sql(&format!(
        "SELECT pg_create_logical_replication_slot('s_plain_{}', 'pgoutput')",
        db.name
    ));

    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(plain.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (300, 'a'); UPDATE t SET v = 'u1' WHERE id = 1; DELETE FROM t WHERE id = 2");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(plain.drain()["status"], "drained");
    let slot = format!("s_{}", db.name);
    assert_eq!(
        db.sql(&format!(
            "SELECT failover FROM pg_replication_slots WHERE slot_name = '{slot}'"
        )),
        "t",
        "sluice made a failover slot"
    );

    // The standby's copy is temporary until the primary's slot has moved past what the
    // copy reserved (catalog_xmin, restart_lsn): the job drains on, across
    // running-transactions records, until the copy is persistent — a temporary copy does
    // not survive a promotion.
    let persistent = format!(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}' AND synced AND NOT temporary"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let mut round = 0;
    while standby.sql("postgres", &persistent) != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the standby's copy of {slot} never became persistent: {}",
            standby.sql("postgres", &format!("SELECT synced, temporary, restart_lsn, catalog_xmin FROM pg_replication_slots WHERE slot_name = '{slot}'"))
        );
        round += 1;
        db.sql(&format!(
            "INSERT INTO t VALUES ({id}, 'r'); SELECT pg_log_standby_snapshot()",
            id = 1000 + round
        ));
        assert_eq!(job.drain()["status"], "drained");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    // The backlog the new primary must still deliver: written, replayed by the standby,
    // not drained.
    db.sql(
        "INSERT INTO t SELECT i, 'b' || i FROM generate_series(400, 450) i; \
         UPDATE t SET v = 'u3' WHERE id = 3; DELETE FROM t WHERE id = 4",
    );
    db.sql("UPDATE t SET v = 'u5' WHERE id = 5");
    let written = db.sql("SELECT pg_current_wal_lsn()");
    let confirmed = db.sql(&format!(
        "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{slot}'"
    ));
    standby.wait_for(
        "postgres",
        &format!("SELECT pg_last_wal_replay_lsn() >= '{written}'::pg_lsn"),
        "t",
    );
    // The slot's synchronized copy at the job's last ack.
    standby.wait_for(
        "postgres",
        &format!(
            "SELECT synced AND NOT temporary AND confirmed_flush_lsn = '{confirmed}'::pg_lsn \
             FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ),
        "t",
    );
    let expected = id_v_text(&db.url);

    // Failover: the primary is gone, the standby promoted (a new timeline).
    primary.stop();
    standby.promote();
    let new_primary = standby.url(&db.name);
    job.url_env.1 = new_primary.clone();
    plain.url_env.1 = new_primary.clone();
    let followed = job.run(&["drain"], &[]);
    assert_eq!(followed.code, 0, "{}", followed.stderr);
    let summary = followed.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert!(
        summary
            .get("rebaselined")
            .is_none_or(|r| r.is_null() || r.as_object().is_some_and(|o| o.is_empty())),
        "{summary}"
    );
    assert!(
        followed.stderr.contains("following the failover"),
        "{}",
        followed.stderr
    );
    assert_eq!(
        support::replayed_text(&job.out().join("t"), &["id"]),
        expected,
        "the backlog written before the promotion, nothing lost"
    );

    // The job goes on on the new primary; its checkpoint now names the new timeline.
    support::psql(
        &new_primary,
        "INSERT INTO t VALUES (500, 'after'); UPDATE t SET v = 'u6' WHERE id = 6; DELETE FROM t WHERE id = 7",
    );
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(
        support::replayed_text(&job.out().join("t"), &["id"]),
        id_v_text(&new_primary),
        "0 mismatches after the failover"
    );
    support::assert_exact(
        &job.rows("t"),
        job.rows("t")
            .iter()
            .map(|r| (r["__pos"].clone(), r["__seq"].clone()))
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
    );
    let identity = support::checkpoint(&job).to_string();
    assert!(identity.contains("tli=2"), "{identity}");

    // The job whose slot was not synchronized: refused, with the re-baseline steps.
    let refused = plain.run(&["drain"], &[]);
    assert_eq!(refused.code, 5, "{}", refused.stderr);
    assert_eq!(refused.error_code(), "SLUICE_SOURCE_FOREIGN_CHECKPOINT");
    assert!(
        refused.stderr.contains("timeline 1") && refused.stderr.contains("timeline 2"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("is not on this server"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("sluice state clear"),
        "{}",
        refused.stderr
    );
}

/// PostgreSQL 18's `idle_replication_slot_timeout` on a private server: the job's slot,
/// idle between two runs longer than the timeout, is invalidated at the next checkpoint;
/// the run fails `SLUICE_SOURCE_LOG_GAP` naming the server's `invalidation_reason` and
/// what prevents it, and `sluice doctor` fails the slot's row with the same code and the
/// timeout's row against the job's schedule.
#[test]
fn an_idle_timeout_invalidation_is_named_in_the_error_and_by_doctor() {
    let Some(bin) = pg_cluster::pg18_bin() else {
        return;
    };
    let server = Cluster::primary(&bin, "idle_replication_slot_timeout = 1s");
    let db = TestDb::new(&server.url("postgres"), "idle");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    let slot = format!("s_{}", db.name);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    db.sql("INSERT INTO t VALUES (2, 'b'); CHECKPOINT");
    server.wait_for(
        "postgres",
        &format!("SELECT invalidation_reason FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        "idle_timeout",
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_LOG_GAP");
    assert!(run.stderr.contains("idle_timeout"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("more often than idle_replication_slot_timeout"),
        "{}",
        run.stderr
    );
    let doctor = job.run(&["doctor", "--json"], &[]);
    let doc = doctor.summary();
    let check = |name: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name:?} in {doc}"))
            .clone()
    };
    let row = check(&format!("slot {slot}"));
    assert_eq!(row["status"], "fail", "{doc}");
    assert_eq!(row["code"], "SLUICE_SOURCE_LOG_GAP", "{doc}");
    assert_eq!(check("checkpoint vs slot")["code"], "SLUICE_SOURCE_LOG_GAP");
    let timeout = check("idle_replication_slot_timeout");
    assert_eq!(timeout["status"], "fail", "{doc}");
    assert!(
        timeout["detail"].as_str().unwrap().contains("1 s"),
        "{timeout}"
    );
}
