//! What only the MySQL / MariaDB drain does or refuses, end to end through the real binary
//! and a real server (the local stack's MariaDB 10.11): its types, rollbacks and
//! non-transactional tables, binlog rotation, purge and reset, server identity, binlog
//! settings and metadata, grants and proxies. Each test owns a database and a job; every
//! test holds the binlog lock shared, the ones that rewrite the binlog hold it
//! exclusively. The drain cases every engine shares are in `conformance::source::drain`.

use crate::support::{self, GlobalSetting, Job, TestMysqlDb, current_binlog_file, ops};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note varchar(20), amount decimal(12,2)) ENGINE=InnoDB";

#[test]
fn every_supported_type_arrives_typed_and_exact() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "types");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, ti tinyint, tu tinyint unsigned, si smallint, su smallint unsigned, \
         mi mediumint, mu mediumint unsigned, i int, iu int unsigned, bi bigint, bu bigint unsigned, \
         d decimal(20,4), dw decimal(50,10), f float, db double, dt date, dtm datetime(6), dt0 datetime, \
         ts timestamp(3) NULL, tm time(6), y year, c char(3), vc varchar(10), tx text, \
         l1 varchar(10) CHARACTER SET latin1, bn binary(4), vb varbinary(10), bl blob, j json, \
         e enum('small','large'), st set('a','b','c'), bt bit(10))",
    );
    let job = Job::mysql(&db, &["t"], "", "");
    job.drain();
    db.sql(
        "SET time_zone = '+02:00'; INSERT INTO t VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, \
         -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, -1234567890123456.7891, \
         1234567890123456789012345678901234567890.0123456789, 1.5, -2.25e100, '1969-07-20', \
         '2000-02-29 12:34:56.789012', '2024-01-02 03:04:05', '2026-12-01 10:00:00.123', '23:59:59.999999', 2024, \
         'ab', 'short', 'unicode ✓ ünï', 'café €', 0x00ff10, 0xdeadbeef, 0x0001, '{\"k\": [1, 2]}', 'large', \
         'a,c', b'1000000001'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', '', '', '', NULL, '', '', NULL, NULL, '', NULL); \
         UPDATE t SET vc = 'changed', tu = 7 WHERE id = 1; DELETE FROM t WHERE id = 2",
    );
    job.drain();
    let rows = job.rows("t");
    assert_eq!(rows.len(), 4);
    let r = &rows[0];
    let cell = |c: &str| r[c].as_deref().unwrap_or("NULL").to_owned();
    for (column, want) in [
        ("ti", "-128"),
        ("tu", "255"),
        ("si", "-32768"),
        ("su", "65535"),
        ("mi", "-8388608"),
        ("mu", "16777215"),
        ("i", "-2147483648"),
        ("iu", "4294967295"),
        ("bi", "-9223372036854775808"),
        ("bu", "18446744073709551615"),
        ("d", "-1234567890123456.7891"),
        ("dw", "1234567890123456789012345678901234567890.0123456789"),
        ("f", "1.5"),
        ("db", "-2.25e100"),
        ("dt", "1969-07-20"),
        ("dtm", "2000-02-29T12:34:56.789012"),
        ("dt0", "2024-01-02T03:04:05"),
        ("ts", "2026-12-01T08:00:00.123Z"),
        ("tm", "23:59:59.999999"),
        ("y", "2024"),
        ("c", "ab"),
        ("vc", "short"),
        ("tx", "unicode ✓ ünï"),
        ("l1", "café €"),
        ("bn", "00ff1000"),
        ("vb", "deadbeef"),
        ("bl", "0001"),
        ("j", "{\"k\": [1, 2]}"),
        ("e", "large"),
        ("st", "a,c"),
        ("bt", "513"),
    ] {
        assert_eq!(cell(column), want, "column {column}");
    }
    let empty = &rows[1];
    for column in ["c", "vc", "tx", "l1", "vb", "bl", "st"] {
        assert_eq!(empty[column].as_deref(), Some(""), "column {column}");
    }
    assert_eq!(empty["ti"], None);
    assert_eq!(empty["ts"], None);
    assert_eq!(
        (
            rows[2]["__op"].as_deref(),
            rows[2]["vc"].as_deref(),
            rows[2]["tu"].as_deref()
        ),
        (Some("update"), Some("changed"), Some("7"))
    );
    assert_eq!(
        (
            rows[3]["__op"].as_deref(),
            rows[3]["id"].as_deref(),
            rows[3]["vb"].as_deref()
        ),
        (Some("delete"), Some("2"), Some("")),
        "a delete carries the whole old row"
    );
    let part = &support::part_files(&job.out().join("t"), "cdc-")[0];
    let schema = support::read_batches(part)[0].schema();
    let ty = |c: &str| schema.field_with_name(c).unwrap().data_type().to_string();
    for (column, want) in [
        ("ti", "Int8"),
        ("tu", "UInt8"),
        ("mu", "UInt32"),
        ("bu", "UInt64"),
        ("d", "Decimal128(20, 4)"),
        ("dw", "Utf8"),
        ("f", "Float32"),
        ("db", "Float64"),
        ("dt", "Date32"),
        ("dtm", "Timestamp(µs)"),
        ("ts", "Timestamp(µs, \"UTC\")"),
        ("tm", "Utf8"),
        ("y", "Int16"),
        ("bn", "Binary"),
        ("j", "Utf8"),
        ("bt", "UInt64"),
    ] {
        assert_eq!(ty(column), want, "column {column}");
    }
    let json = schema.field_with_name("j").unwrap();
    assert_eq!(
        json.metadata()
            .get("ARROW:extension:name")
            .map(String::as_str),
        Some("arrow.json"),
        "MariaDB's JSON (a checked LONGTEXT) is typed as JSON"
    );
}

#[test]
fn multi_statement_transactions_keep_only_captured_changes_with_gap_free_ordinals() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "multi");
    db.sql(ORDERS);
    db.sql("CREATE TABLE items (sku varchar(10) PRIMARY KEY, qty int)");
    db.sql("CREATE TABLE noise (id int PRIMARY KEY)");
    db.sql("CREATE TABLE plain (id int PRIMARY KEY) ENGINE=MyISAM");
    let job = Job::mysql(&db, &["orders", &format!("{}.items", db.name)], "", "");
    job.drain();
    db.sql(
        "BEGIN; INSERT INTO noise VALUES (1); INSERT INTO orders VALUES (1, 'a', 1); INSERT INTO noise VALUES (2); \
         INSERT INTO items VALUES ('x', 3); UPDATE orders SET amount = 2 WHERE id = 1; COMMIT",
    );
    // Rolled back: the MyISAM row stays (and is logged), the InnoDB rows must not surface.
    db.sql(
        "BEGIN; INSERT INTO orders VALUES (2, 'gone', 1); INSERT INTO plain VALUES (1); ROLLBACK",
    );
    db.sql("BEGIN; INSERT INTO noise VALUES (3); COMMIT");
    db.sql("INSERT INTO orders VALUES (3, 'c', 3)");
    let summary = job.drain();
    assert_eq!(summary["tables"]["orders"]["rows"], 3, "{summary}");
    let items_name = format!("{}.items", db.name);
    assert_eq!(summary["tables"][&items_name]["rows"], 1);
    let (orders, items) = (job.rows("orders"), job.rows(&items_name));
    assert_eq!(
        ops(&orders, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("update".into(), Some("1".into())),
            ("insert".into(), Some("3".into())),
        ]
    );
    // One transaction, one position; ordinals count captured changes only, across tables.
    assert_eq!(orders[0]["__pos"], items[0]["__pos"]);
    assert_eq!(orders[1]["__pos"], items[0]["__pos"]);
    let seqs = [&orders[0], &items[0], &orders[1]].map(|r| r["__seq"].clone().unwrap());
    assert_eq!(seqs, ["0", "1", "2"]);
    assert_eq!(orders[2]["__seq"].as_deref(), Some("0"));
    assert!(orders[1]["__pos"] < orders[2]["__pos"]);
}

#[test]
fn changes_across_a_binlog_rotation_are_read_in_order() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "rotate");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    db.admin("FLUSH BINARY LOGS");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    job.drain();
    let rows = job.rows("orders");
    assert_eq!(rows.len(), 2);
    let file = |r: &support::Row| {
        r["__pos"]
            .as_deref()
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_ne!(
        file(&rows[0]),
        file(&rows[1]),
        "the two commits are in different files"
    );
    assert_eq!(rows[0]["id"].as_deref(), Some("1"));
}

#[test]
fn a_foreign_checkpoint_is_refused() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "foreign");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    job.drain();
    let path = job.state_file();
    let original = std::fs::read_to_string(&path).unwrap();
    // The checkpoint of another server (another server_id), written without a GTID
    // position (as before GTIDs were recorded): nothing to follow a failover by. (One
    // with a GTID position is followed: `mysql::failover`.)
    let without_gtid = support::replica::without_gtid(&original);
    assert!(!without_gtid.contains(";g="), "{without_gtid}");
    let other = without_gtid.replace("server_id=1/", "server_id=99/");
    assert_ne!(
        other, original,
        "the state file records the server identity"
    );
    std::fs::write(&path, &other).unwrap();
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_FOREIGN_CHECKPOINT");
    // A checkpoint whose file was created at another time (a replaced binlog file).
    let state: serde_json::Value = serde_json::from_str(&original).unwrap();
    let position = find_position(&state).expect("a checkpoint position");
    let created = position
        .split(";f=")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let replaced = original.replace(
        &format!(";f={created}"),
        &format!(";f={}", created.parse::<u64>().unwrap() - 1),
    );
    std::fs::write(&path, &replaced).unwrap();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_FOREIGN_CHECKPOINT");
    assert!(run.stderr.contains("reset or replaced"), "{}", run.stderr);
    // Restored, the job goes on and nothing was lost.
    std::fs::write(&path, &original).unwrap();
    let resumed = job.drain();
    assert_eq!(resumed["rows"], 1);
}

/// The `mysql:…` checkpoint position anywhere in the state document.
fn find_position(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) if s.starts_with("mysql:") && s.contains(";f=") => {
            Some(s.clone())
        }
        serde_json::Value::Object(map) => map.values().find_map(find_position),
        serde_json::Value::Array(items) => items.iter().find_map(find_position),
        _ => None,
    }
}

#[test]
fn a_change_logged_as_a_statement_is_refused() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "statement");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    db.sql("SET SESSION binlog_format = 'STATEMENT'; INSERT INTO orders VALUES (1, 'a', 1)");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("logged as a statement"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_row_image_without_all_columns_is_refused() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "minimal_image");
    db.sql(ORDERS);
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    db.sql("SET SESSION binlog_row_image = 'MINIMAL'; UPDATE orders SET note = 'b' WHERE id = 1");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(run.stderr.contains("binlog_row_image"), "{}", run.stderr);
}

/// A negative TIME with one or two fractional digits is the cell mysql_common 0.37's
/// decoder overflows on (`u32 - 0x100`): sluice decodes TIME itself, so the drain
/// captures it — as the server's text of it — neither aborting nor stopping.
#[test]
fn a_negative_fractional_time_is_captured_not_a_crash() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "negtime");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, t1 time(1), t2 time(2))");
    let job = Job::mysql(&db, &["t"], "", "");
    job.drain();
    db.sql("INSERT INTO t VALUES (1, '00:00:01.5', '23:59:59.99')");
    db.sql("INSERT INTO t VALUES (2, '12:00:00.1', '-00:00:01.25')");
    let ok = job.drain();
    assert_eq!(ok["rows"], 2, "{ok}");
    let rows = job.rows("t");
    let texts: Vec<(Option<String>, Option<String>)> = rows
        .iter()
        .map(|r| (r["t1"].clone(), r["t2"].clone()))
        .collect();
    assert_eq!(
        texts,
        [
            (Some("00:00:01.5".into()), Some("23:59:59.99".into())),
            (Some("12:00:00.1".into()), Some("-00:00:01.25".into())),
        ]
    );
}

#[test]
fn a_missing_table_and_missing_grants_are_refused_with_the_fix() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "grants");
    db.sql(ORDERS);
    let missing = Job::mysql(&db, &["nope"], "", "");
    let run = missing.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(run.stderr.contains("nope does not exist"), "{}", run.stderr);

    let user = format!("u_{}", &db.name[db.name.len() - 8..]);
    db.admin(&format!(
        "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT SELECT ON {}.* TO '{user}'@'127.0.0.1'",
        db.name
    ));
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&user).unwrap();
    url.set_password(Some("pw")).unwrap();
    let job = Job::mysql(&db, &["orders"], "", "");
    let run = job.run(&["drain"], &[("SLUICE_TEST_SOURCE_URL", url.as_str())]);
    db.admin(&format!("DROP USER '{user}'@'127.0.0.1'"));
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(
        hint.contains("GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*"),
        "{hint}"
    );
    assert!(!run.stdout.contains("pw@"), "the password is never printed");
}

#[test]
fn a_url_with_another_scheme_is_a_config_error() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "scheme");
    let job = Job::mysql(&db, &["orders"], "", "");
    let run = job.run(
        &["drain"],
        &[("SLUICE_TEST_SOURCE_URL", "mssql://u:secret@127.0.0.1/db")],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_CONFIG_UNSUPPORTED_SOURCE");
    assert!(!run.stdout.contains("secret"));
}

#[test]
fn a_purged_binlog_is_a_log_gap_never_a_silent_skip() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "purged");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'lost', 1)");
    db.admin("FLUSH BINARY LOGS");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    db.admin(&format!(
        "PURGE BINARY LOGS TO '{}'",
        current_binlog_file(&db)
    ));
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_LOG_GAP");
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("re-baseline"), "{hint}");
    assert!(support::part_files(&job.out().join("orders"), "cdc-").is_empty());
}

#[test]
fn a_binlog_renumbered_by_reset_master_is_a_foreign_checkpoint() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "reset");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    db.admin("FLUSH BINARY LOGS");
    db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    job.drain();
    db.admin("RESET MASTER");
    db.sql("INSERT INTO orders VALUES (2, 'b', 2)");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_FOREIGN_CHECKPOINT");
    assert!(run.stderr.contains("RESET MASTER"), "{}", run.stderr);
}

#[test]
fn an_event_written_under_minimal_metadata_is_refused_naming_table_and_position() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "minimal_meta");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    {
        let _minimal = GlobalSetting::set(&db, "binlog_row_metadata", "MINIMAL");
        db.sql("INSERT INTO orders VALUES (1, 'a', 1)");
    }
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    let message = run.summary()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("orders at mariadb-bin."), "{message}");
    assert!(message.contains("MINIMAL"), "{message}");
    assert!(support::part_files(&job.out().join("orders"), "cdc-").is_empty());
}

#[test]
fn compressed_binlog_events_fail_the_run_instead_of_being_skipped() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "compressed");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    {
        let _min = GlobalSetting::set(&db, "log_bin_compress_min_len", "10");
        let _compress = GlobalSetting::set(&db, "log_bin_compress", "ON");
        db.sql("INSERT INTO orders VALUES (1, 'aaaaaaaaaaaaaaaaaaa', 1), (2, 'bbbbbbbbbbbbbbbbbbb', 2)");
    }
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr
            .contains("cannot be read and may carry row changes"),
        "{}",
        run.stderr
    );
}

#[test]
fn each_missing_binlog_setting_is_refused_at_open_with_its_fix() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "settings");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    for (name, bad) in [
        ("binlog_format", "MIXED"),
        ("binlog_row_image", "MINIMAL"),
        ("binlog_row_metadata", "NO_LOG"),
        ("log_bin_compress", "ON"),
    ] {
        let run = {
            let _bad = GlobalSetting::set(&db, name, bad);
            job.run(&["drain"], &[])
        };
        assert_eq!(run.code, 5, "{name}: {}", run.stderr);
        assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE", "{name}");
        let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
        assert!(
            hint.contains(&format!("SET GLOBAL {name} =")),
            "{name}: {hint}"
        );
    }
    assert_eq!(job.drain()["status"], "drained");
}

#[test]
fn a_proxy_that_cannot_carry_the_binlog_dump_is_reported_as_such() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "proxy");
    db.sql(ORDERS);
    let upstream = url::Url::parse(&db.url).unwrap();
    let port = support::refusing_replication_proxy(&format!(
        "{}:{}",
        upstream.host_str().unwrap(),
        upstream.port().unwrap()
    ));
    let mut proxied = upstream.clone();
    proxied.set_port(Some(port)).unwrap();
    let job = Job::mysql(&db, &["orders"], "", "");
    let run = job.run(&["drain"], &[("SLUICE_TEST_SOURCE_URL", proxied.as_str())]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("does not carry the binlog dump"),
        "{}",
        run.stderr
    );
    let hint = run.summary()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("proxy"), "{hint}");
}
