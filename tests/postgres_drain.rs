//! PostgreSQL → local parts, end to end through the real binary and a real server.
//! Each test owns a database, slot and publication, so tests run in parallel.

mod support;

use support::{Job, TestDb, ops, replay};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note text, amount numeric(12,2))";

#[test]
fn insert_update_delete_are_captured_in_commit_order() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "iud");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["public.orders"], "");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert_eq!(first["rows"], 0);
    db.sql("INSERT INTO orders VALUES (1, 'a', 10.50), (2, 'b', 20.00)");
    db.sql("UPDATE orders SET note = 'a2', amount = 11.25 WHERE id = 1");
    db.sql("DELETE FROM orders WHERE id = 2");
    let second = job.drain();
    assert_eq!(second["status"], "drained");
    assert_eq!(second["rows"], 4);
    assert_eq!(second["tables"]["public.orders"]["rows"], 4);
    let rows = job.rows("public.orders");
    assert_eq!(
        ops(&rows, "note"),
        [
            ("insert".into(), Some("a".into())),
            ("insert".into(), Some("b".into())),
            ("update".into(), Some("a2".into())),
            ("delete".into(), None),
        ]
    );
    assert_eq!(rows[2]["amount"].as_deref(), Some("11.25"));
    assert_eq!(rows[3]["id"].as_deref(), Some("2"));
    // The insert transaction's two rows share a position and have ordinals 0, 1.
    assert_eq!(rows[0]["__pos"], rows[1]["__pos"]);
    assert_eq!(
        (rows[0]["__seq"].as_deref(), rows[1]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    assert!(rows[1]["__pos"] < rows[2]["__pos"] && rows[2]["__pos"] < rows[3]["__pos"]);
    assert!(rows.iter().all(|r| r["__ts"].is_some()));
    let state = replay(&rows, &["id"]);
    assert_eq!(state.len(), 1);
    // Manifest and marker exist for the clean run.
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job.out().join("public.orders/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["rows"], 4);
    assert_eq!(manifest["run_id"], second["run_id"]);
    assert!(job.out().join("public.orders/_SUCCESS").exists());
}

#[test]
fn primary_key_update_is_split_into_delete_and_insert() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "keychange");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["public.orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql("UPDATE orders SET id = 7, note = 'moved' WHERE id = 1");
    job.drain();
    let rows = job.rows("public.orders");
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("delete".into(), Some("1".into())),
            ("insert".into(), Some("7".into())),
        ]
    );
    assert_eq!(rows[1]["__pos"], rows[2]["__pos"]);
    assert_eq!(
        (rows[1]["__seq"].as_deref(), rows[2]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    // The delete of a key-only old image says its other columns were not logged.
    assert!(rows[1]["__unlogged"].as_deref().unwrap().contains("note"));
    let state = replay(&rows, &["id"]);
    assert_eq!(
        state.keys().cloned().collect::<Vec<_>>(),
        [vec![Some("7".to_string())]]
    );
}

#[test]
fn unchanged_toast_value_is_marked_not_logged_never_null() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "toast");
    db.sql("CREATE TABLE docs (id int PRIMARY KEY, body text, n int)");
    db.sql("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL");
    let job = Job::postgres(&db, &["docs"], "");
    job.drain();
    db.sql("INSERT INTO docs SELECT 1, string_agg(md5(i::text), '') , 0 FROM generate_series(1, 500) i");
    db.sql("UPDATE docs SET n = 1 WHERE id = 1");
    job.drain();
    let rows = job.rows("docs");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["body"].as_ref().map(|b| b.len()), Some(500 * 32));
    assert_eq!(rows[1]["__op"].as_deref(), Some("update"));
    assert_eq!(rows[1]["n"].as_deref(), Some("1"));
    assert_eq!(rows[1]["body"], None);
    assert_eq!(rows[1]["__unlogged"].as_deref(), Some("[body]"));
    assert_eq!(rows[0]["__unlogged"], None);
}

#[test]
fn resume_captures_only_new_changes() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "resume");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    let s1 = job.drain();
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    let s2 = job.drain();
    let s3 = job.drain();
    assert_eq!(
        (
            s1["rows"].as_u64(),
            s2["rows"].as_u64(),
            s3["rows"].as_u64()
        ),
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(s2["from"], s1["to"]);
    let rows = job.rows("orders");
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("insert".into(), Some("2".into()))
        ]
    );
}

#[test]
fn idle_first_run_then_change_is_captured_and_slot_follows_other_tables_wal() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "idle");
    db.sql(ORDERS);
    db.sql("CREATE TABLE noise (id serial PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["orders"], "");
    let first = job.drain();
    assert_eq!(first["rows"], 0);
    db.sql("INSERT INTO noise (v) SELECT 'x' FROM generate_series(1, 1000)");
    let idle = job.drain();
    assert_eq!(idle["rows"], 0);
    assert_ne!(
        idle["to"], idle["from"],
        "an idle run still moves past other tables' WAL"
    );
    let slot = db.sql(&format!(
        "SELECT confirmed_flush_lsn >= pg_current_wal_flush_lsn() - 1000000 FROM pg_replication_slots WHERE slot_name = 's_{}'",
        db.name
    ));
    assert_eq!(slot, "t");
    db.sql("INSERT INTO orders VALUES (5, 'late', 5)");
    let after = job.drain();
    assert_eq!(after["rows"], 1);
}

#[test]
fn several_tables_share_one_stream_each_with_its_own_directory() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "multi");
    db.sql(ORDERS);
    db.sql("CREATE SCHEMA shop; CREATE TABLE shop.items (sku text PRIMARY KEY, qty int)");
    let job = Job::postgres(&db, &["public.orders", "shop.items"], "");
    job.drain();
    db.sql("BEGIN; INSERT INTO orders VALUES (1, 'a', 1); INSERT INTO shop.items VALUES ('x', 3); COMMIT");
    let summary = job.drain();
    assert_eq!(summary["tables"]["public.orders"]["rows"], 1);
    assert_eq!(summary["tables"]["shop.items"]["rows"], 1);
    let (orders, items) = (job.rows("public.orders"), job.rows("shop.items"));
    assert_eq!(
        orders[0]["__pos"], items[0]["__pos"],
        "one transaction, one position"
    );
    assert_eq!(
        (orders[0]["__seq"].as_deref(), items[0]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    for table in ["public.orders", "shop.items"] {
        assert!(job.out().join(table).join("_SUCCESS").exists(), "{table}");
        assert!(
            job.out().join(table).join("manifest.json").exists(),
            "{table}"
        );
    }
    let slots = db.sql(&format!(
        "SELECT count(*) FROM pg_replication_slots WHERE database = '{}'",
        db.name
    ));
    assert_eq!(slots, "1");
}

#[test]
fn added_column_mid_backlog_opens_a_new_part_with_the_new_schema() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ddl");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql("ALTER TABLE orders ADD COLUMN colour text");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2, 'red')");
    let summary = job.drain();
    assert_eq!(summary["rows"], 2);
    assert_eq!(summary["parts"], 2);
    let rows = job.rows("orders");
    assert_eq!(
        rows[0].get("colour"),
        None,
        "the first part has the old schema"
    );
    assert_eq!(rows[1]["colour"].as_deref(), Some("red"));
}

#[test]
fn changed_column_type_mid_backlog_fails_naming_the_column() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "retype");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql("ALTER TABLE orders ALTER COLUMN amount TYPE numeric(20,4)");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_SCHEMA_CHANGE");
    assert!(run.stderr.contains("amount"), "{}", run.stderr);
}

#[test]
fn vanished_slot_with_a_checkpoint_is_refused_never_recreated() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "vanished");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    job.drain();
    db.sql(&format!("SELECT pg_drop_replication_slot('s_{}')", db.name));
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_LOG_GAP");
    assert!(run.stderr.contains("re-baseline"), "{}", run.stderr);
    let slots = db.sql(&format!(
        "SELECT count(*) FROM pg_replication_slots WHERE database = '{}'",
        db.name
    ));
    assert_eq!(slots, "0", "no new slot was created");
}

#[test]
fn slot_advanced_by_another_reader_is_refused() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "stolen");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql(&format!(
        "SELECT pg_replication_slot_advance('s_{}', pg_current_wal_flush_lsn())",
        db.name
    ));
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_LOG_GAP");
}

#[test]
fn truncate_is_refused_and_the_checkpoint_stays_before_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "truncate");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.sql("TRUNCATE orders");
    for _ in 0..2 {
        let run = job.run(&["drain"], &[]);
        assert_eq!(run.code, 5, "{}", run.stderr);
        assert_eq!(run.error_code(), "SLUICE_SOURCE_TRUNCATED");
    }
}

#[test]
fn unsupported_column_type_fails_at_open_naming_the_column() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "unsupported");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, span interval)");
    let job = Job::postgres(&db, &["t"], "");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_UNSUPPORTED_TYPE");
    assert!(run.stderr.contains("t.span"), "{}", run.stderr);
}

#[test]
fn numeric_nan_fails_loudly_never_null() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "nan");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x numeric(10,2))");
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    db.sql("INSERT INTO t VALUES (1, 'NaN')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_VALUE_UNREPRESENTABLE");
    assert!(run.stderr.contains("t.x"), "{}", run.stderr);
    assert!(support::part_files(&job.out().join("t"), "cdc-").is_empty());
}

#[test]
fn table_without_key_is_refused_before_publishing_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "nokey");
    db.sql("CREATE TABLE t (a int, b text)");
    let job = Job::postgres(&db, &["t"], "");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("REPLICA IDENTITY FULL"),
        "{}",
        run.stderr
    );
    // The application can still update the table: it was not added to a publication.
    db.sql("INSERT INTO t VALUES (1, 'x'); UPDATE t SET b = 'y'");
}

#[test]
fn lease_held_by_another_run_is_skipped_with_exit_zero() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lease");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    // Hold the lease: a run paused before its checkpoint.
    let mut holder = job
        .command(
            &["drain"],
            &[("SLUICE_FAULT", "before_checkpoint:pause=3000")],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_line(holder.stderr.take().unwrap(), "fault injected: pausing");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let skipped = run.summary();
    assert_eq!(skipped["status"], "skipped");
    assert!(skipped["lease_holder"].as_str().unwrap().contains("pid-"));
    assert!(holder.wait().unwrap().success());
}
