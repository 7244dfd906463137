//! `sluice doctor` against the live PostgreSQL: each check in its good and its bad state,
//! and doctor and drain agreeing on every refusal (same `SLUICE_…` code).

use crate::support::{self, Job, Run, TestDb};

fn doctor(job: &Job) -> (Run, serde_json::Value) {
    let run = job.run(&["doctor", "--json"], &[]);
    let doc = run.summary();
    (run, doc)
}

fn check<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {doc}"))
}

/// The drain fails, and doctor failed a check with the drain's very code.
fn agree(job: &Job, doc: &serde_json::Value, name: &str) {
    let drain = job.run(&["drain"], &[]);
    assert_eq!(drain.code, 5, "drain should refuse:\n{}", drain.stderr);
    let c = check(doc, name);
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(
        c["code"].as_str().unwrap(),
        drain.error_code(),
        "doctor {c} vs drain {}",
        drain.stdout
    );
}

#[test]
fn good_source_passes_and_the_table_format_prints() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_good");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, n int)");
    // The cluster is shared: other tests' slots may retain a lot of WAL; only a warning here.
    let job = Job::postgres(
        &db,
        &["public.t"],
        "doctor: { retained_wal_warn_bytes: 1073741824, retained_wal_fail_bytes: 1125899906842624 }",
    );
    let (run, doc) = doctor(&job);
    assert_eq!(run.code, 0, "{doc}");
    for name in [
        "source connect",
        "wal_level",
        "role REPLICATION",
        "table public.t",
        "checkpoint vs slot",
        "state reachable",
        "destination writable",
    ] {
        assert_eq!(check(&doc, name)["status"], "ok", "{name}: {doc}");
    }
    job.drain();
    let (run, doc) = doctor(&job);
    assert_eq!(run.code, 0, "{doc}");
    let slot = format!("s_{}", db.name);
    assert_eq!(check(&doc, &format!("slot {slot}"))["status"], "ok");
    assert_eq!(
        check(&doc, &format!("slot {slot} retained WAL"))["status"],
        "ok"
    );
    assert_eq!(check(&doc, "last successful run")["status"], "ok");
    assert!(
        check(&doc, "claims")["detail"]
            .as_str()
            .unwrap()
            .contains(&slot)
    );
    let table = job.run(&["doctor"], &[]);
    assert_eq!(table.code, 0);
    assert!(table.stdout.contains("ok    wal_level"), "{}", table.stdout);
}

#[test]
fn replica_identity_nothing_and_missing_key_fail_like_the_drain() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_identity");
    db.sql("CREATE TABLE n (id int PRIMARY KEY); ALTER TABLE n REPLICA IDENTITY NOTHING; CREATE TABLE k (id int)");
    let job = Job::postgres(&db, &["public.n"], "");
    let (run, doc) = doctor(&job);
    assert_eq!(run.code, 5, "{doc}");
    assert!(
        check(&doc, "table public.n")["fix"]
            .as_str()
            .unwrap()
            .contains("REPLICA IDENTITY")
    );
    agree(&job, &doc, "table public.n");
    let job = Job::postgres(&db, &["public.k"], "");
    let (_, doc) = doctor(&job);
    agree(&job, &doc, "table public.k");
}

#[test]
fn toastable_columns_under_default_identity_warn() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_toast");
    db.sql("CREATE TABLE d (id int PRIMARY KEY, body text)");
    // Slots other tests (or `make demo`) left on the shared cluster must not fail it.
    let job = Job::postgres(
        &db,
        &["public.d"],
        "doctor: { retained_wal_warn_bytes: 1073741824, retained_wal_fail_bytes: 1125899906842624 }",
    );
    let (run, doc) = doctor(&job);
    let c = check(&doc, "table public.d");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["fix"].as_str().unwrap().contains("REPLICA IDENTITY FULL"));
    assert_eq!(run.code, 0);
    db.sql("ALTER TABLE d REPLICA IDENTITY FULL");
    let (_, doc) = doctor(&job);
    assert_eq!(check(&doc, "table public.d")["status"], "ok");
}

#[test]
fn an_abandoned_slot_is_named_with_its_drop_statement() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_abandoned");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let abandoned = format!("ab_{}", db.name);
    db.sql(&format!(
        "SELECT pg_create_logical_replication_slot('{abandoned}', 'pgoutput')"
    ));
    db.sql("INSERT INTO t SELECT generate_series(1, 2000)");
    let name = format!("inactive slot {abandoned} (db {})", db.name);
    let warn = Job::postgres(
        &db,
        &["public.t"],
        "doctor: { retained_wal_warn_bytes: 1, retained_wal_fail_bytes: 1099511627776 }",
    );
    let (_, doc) = doctor(&warn);
    let c = check(&doc, &name);
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("pg_drop_replication_slot('{abandoned}')"))
    );
    let fail = Job::postgres(
        &db,
        &["public.t"],
        "doctor: { retained_wal_warn_bytes: 1, retained_wal_fail_bytes: 1 }",
    );
    let (run, doc) = doctor(&fail);
    assert_eq!(check(&doc, &name)["status"], "fail");
    assert_eq!(run.code, 5);
    db.sql(&format!("SELECT pg_drop_replication_slot('{abandoned}')"));
    let (_, doc) = doctor(&warn);
    assert!(
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != name.as_str())
    );
}

#[test]
fn a_role_without_replication_fails() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_grant");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let role = format!("r_{}", db.name);
    db.sql(&format!(
        "CREATE ROLE {role} LOGIN; GRANT SELECT ON t TO {role}"
    ));
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&role).unwrap();
    let mut job = Job::postgres(&db, &["public.t"], "");
    job.url_env.1 = url.to_string();
    let (run, doc) = doctor(&job);
    assert_eq!(check(&doc, "role REPLICATION")["status"], "fail", "{doc}");
    assert!(
        check(&doc, "role REPLICATION")["fix"]
            .as_str()
            .unwrap()
            .contains("REPLICATION")
    );
    assert_eq!(run.code, 5);
    let drain = job.run(&["drain"], &[]);
    assert_eq!(drain.code, 5, "{}", drain.stdout);
    drop(job);
    let _ = support::psql_output(&db.url, &format!("DROP OWNED BY {role}"));
    let admin_db = db.admin_url.clone();
    drop(db);
    support::psql(&admin_db, &format!("DROP ROLE IF EXISTS {role}"));
}

#[test]
fn a_slot_moved_past_the_checkpoint_fails_like_the_drain() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_gap");
    db.sql("CREATE TABLE t (id int PRIMARY KEY)");
    let job = Job::postgres(&db, &["public.t"], "");
    job.drain();
    db.sql("INSERT INTO t VALUES (1)");
    db.sql(&format!(
        "SELECT pg_replication_slot_advance('s_{}', pg_current_wal_lsn())",
        db.name
    ));
    let (run, doc) = doctor(&job);
    assert_eq!(run.code, 5, "{doc}");
    assert_eq!(
        check(&doc, "checkpoint vs slot")["code"],
        "SLUICE_SOURCE_LOG_GAP"
    );
    agree(&job, &doc, "checkpoint vs slot");
}

/// A keyless table (REPLICA IDENTITY FULL): the "baseline key" row agrees with the
/// baseline — one consistent read without a key (the baseline succeeds), keyset chunks
/// once `baseline.keys` declares NOT NULL columns.
#[test]
fn the_baseline_key_row_agrees_with_the_baseline() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_bkey");
    db.sql("CREATE TABLE k (id int NOT NULL, v text); ALTER TABLE k REPLICA IDENTITY FULL; INSERT INTO k VALUES (1, 'a')");
    let row = "table public.k baseline key";
    let job = Job::postgres(&db, &["public.k"], "initial: snapshot");
    let (_, doc) = doctor(&job);
    let c = check(&doc, row).clone();
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(
        c["detail"],
        "no key: one consistent read, replayed as a multiset"
    );
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);

    let plain = Job::postgres(&db, &["public.k"], "");
    assert_eq!(check(&doctor(&plain).1, row)["status"], "ok");
    let declared = Job::postgres(
        &db,
        &["public.k"],
        "initial: snapshot\nbaseline: { keys: { public.k: [id] } }",
    );
    let c = check(&doctor(&declared).1, row).clone();
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(c["detail"], "keyset chunks by (id)");
}

#[test]
fn a_legacy_manifest_or_an_earlier_baseline_folder_among_the_parts_is_named() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_layout");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')");
    let job = Job::postgres(
        &db,
        &["public.t"],
        "initial: snapshot\ndoctor: { retained_wal_warn_bytes: 1073741824, retained_wal_fail_bytes: 1125899906842624 }",
    );
    job.drain();
    let (_, doc) = doctor(&job);
    assert_eq!(
        check(&doc, "table folders read as data")["status"],
        "ok",
        "{doc}"
    );
    // What an earlier sluice (manifest.json) and an earlier baseline (another plan
    // folder) leave among the parts.
    let folder = job.out().join("public.t");
    std::fs::write(folder.join("manifest.json"), b"{}").unwrap();
    let earlier = folder.join("snapshot/20200101T000000000Z-000000_pg-0-0");
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join("part-000000.parquet"), b"old").unwrap();
    let (run, doc) = doctor(&job);
    assert_eq!(run.code, 0, "a warning does not fail doctor: {doc}");
    let layout = check(&doc, "table folders read as data");
    assert_eq!(layout["status"], "warn", "{layout}");
    let detail = layout["detail"].as_str().unwrap();
    assert!(detail.contains("legacy public.t/manifest.json"), "{detail}");
    assert!(
        detail.contains(
            "earlier baseline folder public.t/snapshot/20200101T000000000Z-000000_pg-0-0/"
        ),
        "{detail}"
    );
    assert!(
        !detail.contains(&format!(
            "{}/",
            support::snapshot_dir(&folder)
                .file_name()
                .unwrap()
                .to_string_lossy()
        )),
        "the current plan folder is not stray: {detail}"
    );
    assert!(
        layout["fix"].as_str().unwrap().contains("_superseded/"),
        "{layout}"
    );
    // Done as the hint says, the folder is clean again.
    std::fs::remove_file(folder.join("manifest.json")).unwrap();
    let aside = folder.join("_superseded/20261202T000000Z/snapshot");
    std::fs::create_dir_all(&aside).unwrap();
    std::fs::rename(&earlier, aside.join(earlier.file_name().unwrap())).unwrap();
    let (_, doc) = doctor(&job);
    assert_eq!(
        check(&doc, "table folders read as data")["status"],
        "ok",
        "{doc}"
    );
}

#[test]
fn doctor_says_postgresql_15_cannot_follow_a_failover() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "doctor_failover15");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, n int)");
    let job = Job::postgres(
        &db,
        &["public.t"],
        "doctor: { retained_wal_warn_bytes: 1073741824, retained_wal_fail_bytes: 1125899906842624 }",
    );
    job.drain();
    let (run, doc) = doctor(&job);
    assert_eq!(run.code, 0, "{doc}");
    let failover = check(&doc, "failover");
    assert_eq!(failover["status"], "warn", "{failover}");
    let text = failover.to_string();
    assert!(text.contains("has no failover slots"), "{text}");
    // The slot the first run created on PostgreSQL 15 is a plain one (no failover column).
    let flags = db.sql(&format!(
        "SELECT (to_jsonb(s) ->> 'failover') IS NULL FROM pg_replication_slots s WHERE slot_name = 's_{}'",
        db.name
    ));
    assert_eq!(flags, "t");
}
