//! A job that reads from a physical standby (logical decoding on a standby, PostgreSQL ≥
//! 16): the stack's PostgreSQL 18 and its streaming standby (`infra/local/postgres18.sh`).
//! The slot is made on the standby, the read bound is the standby's replay position, the
//! baseline reads the standby, and the output replays to the primary's state; what a
//! standby cannot do (create the publication) is refused with the statement for the
//! primary.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::{self, Job, TestDb, psql, service_url, with_database};

/// Calls `pg_log_standby_snapshot()` on the primary every 100 ms until dropped: a slot
/// being created on a standby waits for the primary's next running-transactions record,
/// which an idle primary writes only every 15 s.
pub struct StandbySnapshots {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandbySnapshots {
    pub fn start(primary: &str) -> StandbySnapshots {
        let stop = Arc::new(AtomicBool::new(false));
        let url = primary.to_owned();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let _ = support::psql_output(&url, "SELECT pg_log_standby_snapshot()");
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        StandbySnapshots {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for StandbySnapshots {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Waits until the standby at `standby` has replayed everything the primary at `primary`
/// has written so far. Asked in the standby's `postgres` database: a database just made
/// on the primary may not exist on the standby before it has replayed that far.
pub fn caught_up(primary: &str, standby: &str) {
    let lsn = psql(primary, "SELECT pg_current_wal_lsn()");
    let standby = &with_database(standby, "postgres");
    let deadline = Instant::now() + Duration::from_secs(60);
    while psql(
        standby,
        &format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"),
    ) != "t"
    {
        assert!(
            Instant::now() < deadline,
            "the standby did not replay {lsn} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn slots_named(url: &str, slot: &str) -> String {
    psql(
        url,
        &format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    )
}

#[test]
fn a_job_reading_from_a_standby_baselines_and_drains_exactly() {
    let admin = pg18_or_skip!();
    let Some(standby_admin) = service_url("SLUICE_TEST_PG18_STANDBY_URL") else {
        return;
    };
    let db = TestDb::new(&admin, "standby");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text); \
         INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 300) i; ANALYZE t",
    );
    let standby = with_database(&standby_admin, &db.name);
    let mut job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\nbaseline: { chunk_rows: 50 }",
    );
    job.url_env.1 = standby.clone();
    let slot = format!("s_{}", db.name);

    // A standby is read-only: the publication is made on the primary, and the refusal says so.
    caught_up(&db.url, &standby);
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("standby") && run.stderr.contains("CREATE PUBLICATION"),
        "{}",
        run.stderr
    );
    db.sql(&format!(
        "CREATE PUBLICATION p_{} FOR TABLE t WITH (publish_generated_columns = stored)",
        db.name
    ));
    caught_up(&db.url, &standby);

    // The first run makes the slot on the standby (the primary's running-transactions
    // records let it finish), baselines from the standby, then streams; writes meanwhile.
    let snapshots = StandbySnapshots::start(&db.url);
    let writer = {
        let url = db.url.clone();
        std::thread::spawn(move || {
            for i in 0..20 {
                psql(
                    &url,
                    &format!(
                        "INSERT INTO t VALUES ({id}, 'w{i}'); UPDATE t SET v = 'u{i}' WHERE id = {up}; DELETE FROM t WHERE id = {del}",
                        id = 1000 + i,
                        up = 1 + i,
                        del = 100 + i
                    ),
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let first = job.drain();
    writer.join().unwrap();
    assert_eq!(first["status"], "drained", "{first}");
    assert_eq!(
        slots_named(&standby, &slot),
        "1",
        "the slot is on the standby"
    );
    assert_eq!(
        db.sql(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"
        )),
        "0",
        "and not on the primary"
    );

    // Later changes, drained after the standby replayed them.
    db.sql("INSERT INTO t VALUES (2000, 'late'); UPDATE t SET v = 'again' WHERE id = 2; DELETE FROM t WHERE id = 3");
    caught_up(&db.url, &standby);
    let bound = psql(&standby, "SELECT pg_last_wal_replay_lsn()");
    let second = job.drain();
    assert_eq!(second["status"], "drained", "{second}");
    // The read bound is the standby's replay position: the run read no further than the
    // standby had replayed when it ended.
    let to = second["to"].as_str().unwrap().trim_start_matches("pg:");
    assert_eq!(
        psql(
            &standby,
            &format!(
                "SELECT '{to}'::pg_lsn >= '{bound}'::pg_lsn AND '{to}'::pg_lsn <= pg_last_wal_replay_lsn()"
            )
        ),
        "t",
        "to {to}, replayed {bound} before the run"
    );
    drop(snapshots);

    // doctor on the standby: what decoding there needs, and the job's slot there.
    let run = job.run(&["doctor", "--json"], &[]);
    let doc = run.summary();
    let check = |name: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name:?} in {doc}"))
            .clone()
    };
    for name in [
        "standby",
        "hot_standby_feedback",
        "standby replay lag",
        "checkpoint vs slot",
        "idle_replication_slot_timeout",
    ] {
        assert_eq!(check(name)["status"], "ok", "{name}: {doc}");
    }
    // A slot on a standby is no failover slot: a promotion of this standby re-baselines.
    assert_eq!(check("failover")["status"], "warn", "{doc}");
    assert!(
        check("hot_standby_feedback")["detail"]
            .as_str()
            .unwrap()
            .contains("sluice_standby"),
        "{doc}"
    );
    assert!(
        check(&format!("slot {slot} retained WAL"))["status"] != "fail",
        "{doc}"
    );
    assert_eq!(
        support::replayed_text(&job.out().join("t"), &["id"]),
        db.id_v_text(),
        "the output replays to the primary's state"
    );
}
