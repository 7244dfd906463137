//! What only the PostgreSQL drain does or refuses, end to end through the real binary and
//! a real server: TOAST, slots (one per job, following other tables' WAL, vanished or
//! moved), schemas and DDL mid-backlog, replica identity. Each test owns a database, slot
//! and publication, so tests run in parallel. The drain cases every engine shares are in
//! `conformance::source::drain`.

use crate::support::{Job, TestDb};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note text, amount numeric(12,2))";

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
fn idle_first_run_then_change_is_captured_and_slot_follows_other_tables_wal() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "idle");
    db.sql(ORDERS);
    db.sql("CREATE TABLE noise (id serial PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["orders"], "");
    let first = job.drain();
    assert_eq!(first["rows"], 0);
    db.sql("INSERT INTO noise (v) SELECT 'x' FROM generate_series(1, 1000)");
    // The WAL end once the noise is written (other tests write WAL beside this one, so
    // the end at any later moment says nothing about this run).
    let after_noise = db.sql("SELECT pg_current_wal_flush_lsn()");
    let idle = job.drain();
    assert_eq!(idle["rows"], 0);
    assert_ne!(
        idle["to"], idle["from"],
        "an idle run still moves past other tables' WAL"
    );
    // Past the noise's ~100 KB of WAL, to within a page of its end.
    let slot = db.sql(&format!(
        "SELECT confirmed_flush_lsn >= '{}'::pg_lsn - 8192 FROM pg_replication_slots WHERE slot_name = 's_{}'",
        after_noise.trim(),
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
            job.out().join(table).join("_manifest.json").exists(),
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
fn narrowed_column_type_mid_backlog_rebaselines_the_table_naming_the_column() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "retype");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    // numeric(12,2) -> numeric(8,2) narrows (a widening continues: postgres::ddl).
    db.sql("ALTER TABLE orders ALTER COLUMN amount TYPE numeric(8,2)");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    // The table is re-baselined (postgres::rebaseline has the two-table cases).
    let summary = job.drain();
    let reason = summary["rebaselined"]["orders"]["reason"].as_str().unwrap();
    assert!(reason.contains("amount"), "{summary}");
    assert_eq!(summary["rebaselined"]["orders"]["baseline"], "done");
    let snapshot = crate::support::baseline_and_changes(&job.out().join("orders"));
    let ops: Vec<_> = snapshot
        .iter()
        .map(|r| r["__op"].clone().unwrap())
        .collect();
    assert_eq!(ops, ["rebaseline", "snapshot", "snapshot"], "{snapshot:?}");
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
fn a_checkpoint_from_another_timeline_is_refused_and_one_without_a_timeline_is_upgraded() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "timeline");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    let read_identity = || -> String {
        job.local_state()["checkpoint"]["source_identity"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let write_identity = |identity: &str| {
        let mut state = job.local_state();
        state["checkpoint"]["source_identity"] = identity.into();
        job.write_local_state(&state);
    };
    let timeline = db.sql("SELECT timeline_id FROM pg_control_checkpoint()");
    let identity = read_identity();
    let suffix = format!("/tli={timeline}");
    assert!(
        identity.ends_with(&suffix),
        "{identity} records the server's timeline"
    );
    let base = identity.strip_suffix(&suffix).unwrap().to_owned();

    // As after a point-in-time restore: the checkpoint names an earlier timeline.
    let other: u32 = timeline.parse::<u32>().unwrap() + 7;
    write_identity(&format!("{base}/tli={other}"));
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_FOREIGN_CHECKPOINT");
    assert!(
        run.stderr.contains(&format!("timeline {other}")),
        "{}",
        run.stderr
    );
    // PostgreSQL 15: no failover slots, so a timeline change is never followed.
    assert!(run.stderr.contains("before 17"), "{}", run.stderr);

    // A checkpoint written before timelines were recorded resumes, and the next
    // checkpoint records the timeline.
    write_identity(&base);
    let drained = job.drain();
    assert_eq!(drained["rows"], 1);
    assert_eq!(read_identity(), identity);
}

#[test]
fn a_transaction_longer_than_the_deadline_stops_inside_it_and_keeps_nothing_past_the_checkpoint() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "longtxn");
    db.sql(ORDERS);
    let job = Job::postgres(&db, &["orders"], "deadline: { safety_margin_seconds: 2 }");
    job.drain();
    db.sql("INSERT INTO orders VALUES (0, 'before', 0)");
    assert_eq!(job.drain()["rows"], 1);
    let checkpoint = || job.local_state()["checkpoint"]["position"].clone();
    let before = checkpoint();
    // Far more than a debug build drains before the run must stop (2.5 s after it starts),
    // however fast the drain gets.
    db.sql("INSERT INTO orders SELECT i, repeat('x', 40), i FROM generate_series(1, 1000000) i");

    let started = std::time::Instant::now();
    let run = job.run(&["drain", "--max-duration", "3s"], &[]);
    let took = started.elapsed();
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_TRANSACTION_TOO_LONG");
    assert!(run.stdout.contains("--max-duration"), "{}", run.stdout);
    assert!(
        took < std::time::Duration::from_secs(6),
        "the run stopped inside the transaction near its deadline, not after it: {took:?}"
    );
    assert_eq!(checkpoint(), before, "nothing past the checkpoint was kept");
    let lease = job.run(&["drain"], &[]);
    assert_eq!(lease.code, 0, "the lease was released: {}", lease.stderr);
    let rows = job.rows("orders");
    assert_eq!(
        rows.iter()
            .filter(|r| r["__op"].as_deref() == Some("insert"))
            .count(),
        1_000_001
    );
}

/// Pages bounded by a WAL window smaller than most transactions: a transaction far larger
/// than the window is read whole (the window widens until one commits), small ones page
/// by page — each page a flush, so several parts — and the output replays to the source
/// exactly, then the next run finds nothing left.
#[test]
fn pages_bounded_by_a_small_wal_window_read_every_transaction_whole() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "walpage");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    set_postgres(&job, "page_wal_bytes: 4096");
    job.drain();
    let small = |from: i32| {
        for i in from..from + 40 {
            db.sql(&format!("INSERT INTO t VALUES ({i}, 'small{i}')"));
        }
    };
    small(3000);
    db.sql("INSERT INTO t SELECT i, repeat('x', 200) || i FROM generate_series(1, 2000) i");
    small(4000);
    db.sql("UPDATE t SET v = 'u' || id WHERE id <= 10; DELETE FROM t WHERE id = 3001");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["rows"], 40 + 2000 + 40 + 10 + 1, "{summary}");
    assert!(
        summary["parts"].as_u64().unwrap() >= 3,
        "one flush per page: {summary}"
    );
    assert_eq!(
        crate::support::replayed_text(&job.out().join("t"), &["id"]),
        db.id_v_text()
    );
    assert_eq!(job.drain()["rows"], 0);
}

/// Adds `setting` (e.g. `page_changes: 100`) to the job's `postgres: { … }`.
fn set_postgres(job: &Job, setting: &str) {
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    let set = yaml.replacen(" }\n", &format!(", {setting} }}\n"), 1);
    assert!(set.contains(setting), "{set}");
    std::fs::write(&job.config, set).unwrap();
}

/// The page that reads to the bound has no change limit: a transaction larger than
/// `page_changes` there is read once, not followed by a page that decodes it again only to
/// find the rest of the backlog.
#[test]
fn the_last_page_reads_a_transaction_larger_than_page_changes_once() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "lastpage");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    set_postgres(&job, "page_changes: 100");
    job.drain();
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3000) i");
    db.sql("INSERT INTO t VALUES (5000, 'after')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["rows"], 3001, "{}", run.stdout);
    assert_eq!(
        run.stderr.matches("slot page read").count(),
        1,
        "one page to the bound: {}",
        run.stderr
    );
    assert_eq!(
        crate::support::replayed_text(&job.out().join("t"), &["id"]),
        db.id_v_text()
    );
}

/// A transaction far longer than the WAL window is found with few failed windows: each
/// failed window is read again by the next, eight times wider (doubling would fail about
/// nine times over this transaction).
#[test]
fn a_transaction_many_windows_long_is_found_within_a_few_pages() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "widen");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    set_postgres(&job, "page_wal_bytes: 4096");
    job.drain();
    db.sql("INSERT INTO t SELECT i, repeat('x', 100) || i FROM generate_series(1, 20000) i");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["rows"], 20000, "{}", run.stdout);
    let pages = run.stderr.matches("slot page read").count();
    assert!(
        (2..=5).contains(&pages),
        "{pages} pages for one transaction of about 2.5 MB of WAL in 4 KiB windows: {}",
        run.stderr
    );
    assert_eq!(
        crate::support::replayed_text(&job.out().join("t"), &["id"]),
        db.id_v_text()
    );
}

/// A page never leaves the next one less than a window: a backlog within two windows of
/// WAL is read in one page (one part), a longer one in windows (a part each).
#[test]
fn a_backlog_within_two_windows_is_read_in_one_page() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "twowindows");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    job.drain();
    let set_window = |bytes: u64| {
        let windowed = yaml.replacen(" }\n", &format!(", page_wal_bytes: {bytes} }}\n"), 1);
        assert!(windowed.contains("page_wal_bytes"), "{windowed}");
        std::fs::write(&job.config, windowed).unwrap();
    };
    // The WAL of 300 single-row transactions, measured from the slot's position.
    let slot = format!("s_{}", db.name);
    let backlog = |from: u64| -> u64 {
        db.sql(&format!(
            "DO $$ BEGIN FOR i IN {from}..{from} + 299 LOOP INSERT INTO t VALUES (i, 'v' || i); COMMIT; END LOOP; END $$"
        ));
        db.sql(&format!(
            "SELECT (pg_current_wal_flush_lsn() - confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ))
        .trim()
        .parse()
        .unwrap()
    };

    // The run's own backlog is `to` - `from`: other databases' WAL written between the
    // measurement and the run's start (tests run in parallel) can push it past two
    // windows, and then the run is rightly paged; such an attempt is repeated.
    let lsn = |v: &serde_json::Value| -> u64 {
        let text = v.as_str().unwrap().trim_start_matches("pg:");
        let (hi, lo) = text.split_once('/').unwrap();
        (u64::from_str_radix(hi, 16).unwrap() << 32) + u64::from_str_radix(lo, 16).unwrap()
    };
    let mut conclusive = false;
    for attempt in 0..5 {
        let wal = backlog(10_000 * (attempt + 1));
        let window = wal * 2 / 3;
        set_window(window);
        let summary = job.drain();
        assert_eq!(summary["rows"], 300, "{summary}");
        if lsn(&summary["to"]) - lsn(&summary["from"]) <= 2 * window {
            assert_eq!(
                summary["parts"], 1,
                "within two windows, one page: {summary}"
            );
            conclusive = true;
            break;
        }
    }
    assert!(conclusive, "other WAL outgrew every attempt's two windows");

    // Beyond two windows, a page per window. Other databases' WAL in a window before the
    // first commit of ours widens it eight times, and then the run may rightly read the
    // rest in one page; such an attempt is repeated.
    let mut paged = false;
    for attempt in 0..5 {
        let wal = backlog(1000 + 1000 * attempt);
        set_window(wal / 4);
        let summary = job.drain();
        assert_eq!(summary["rows"], 300, "{summary}");
        if summary["parts"].as_u64().unwrap() >= 2 {
            paged = true;
            break;
        }
    }
    assert!(paged, "beyond two windows, never a page per window");
    assert_eq!(
        crate::support::replayed_text(&job.out().join("t"), &["id"]),
        db.id_v_text()
    );
    assert_eq!(job.drain()["rows"], 0);
}

/// With the default page sizes a page reads at least four times the slot's restart lag
/// (the WAL every page decodes again): a backlog of 600 MB, which 128 MiB windows would
/// read in four pages, each decoding the previous one again, is read in at most three,
/// the later ones logging the lag they were widened for.
#[test]
fn default_pages_grow_with_the_slots_restart_lag() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "restartlag");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    // Stored out of line and uncompressed: each row is 1 MiB of WAL.
    db.sql("ALTER TABLE t ALTER COLUMN v SET STORAGE EXTERNAL");
    let job = Job::postgres(&db, &["t"], "");
    job.drain();
    db.sql(
        "DO $$ BEGIN FOR i IN 1..600 LOOP \
           INSERT INTO t VALUES (i, repeat(chr(97 + i % 26), 1048576)); COMMIT; END LOOP; END $$",
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["rows"], 600, "{summary}");
    let pages: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("slot page read"))
        .collect();
    assert!(
        (2..=3).contains(&pages.len()),
        "{} pages for 600 MiB in default windows: {}",
        pages.len(),
        run.stderr
    );
    let lag = |line: &str| -> u64 {
        let value = line
            .split("restart_lag=")
            .nth(1)
            .expect("restart_lag logged");
        value.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(
        pages[1..].iter().any(|line| lag(line) > 0),
        "no later page saw a restart lag: {pages:?}"
    );
    assert_eq!(job.drain()["rows"], 0);
}

#[test]
fn a_database_with_standard_conforming_strings_off_is_drained_exactly() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "escape_strings");
    db.sql(ORDERS);
    // Backslashes are escapes in plain literals here: the page query (literals, since COPY
    // takes no parameters) must not depend on it.
    db.sql(&format!(
        "ALTER DATABASE {} SET standard_conforming_strings = off",
        db.name
    ));
    let job = Job::postgres(&db, &["orders"], "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, E'it''s a \\\\ test', 1.5)");
    let run = job.drain();
    assert_eq!(run["rows"], 1);
    let rows = job.rows("orders");
    assert_eq!(rows[0]["note"].as_deref(), Some("it's a \\ test"));
}
