//! SQL Server → local parts, end to end through the real binary and a real server.
//!
//! Needs `SLUICE_TEST_MSSQL_URL`, an admin login URL such as
//! `sqlserver://sa:Passw0rd!@127.0.0.1:1433/master` (a login that may create databases
//! and enable CDC). No SQL Server can be installed on the project's machines
//! (docs/sqlserver.md, "SQL Server verification"), so every live test is
//! `#[ignore = "needs SLUICE_TEST_MSSQL_URL"]`: `cargo test` reports them as *ignored*,
//! never as passed. `make test` runs them with `--ignored` when the variable is set; a
//! live test run without it fails.
//!
//! Each test owns a database (CDC enabled, the capture job stopped) and drives the
//! capture process itself with `sys.sp_cdc_scan`, so a test waits for nothing: after a
//! scan returns, the change table holds every committed change.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{self, Job, Row, ops, read_rows, replay};

const URL_VAR: &str = "SLUICE_TEST_MSSQL_URL";

/// The admin URL. A live test runs only when asked for (`--ignored`), so a missing URL
/// fails it: a test that did not run never counts as passed.
fn admin_url() -> String {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "{URL_VAR} is unset: this live SQL Server test cannot run (it is ignored by \
             default; `make test` runs the live suite when {URL_VAR} names a server)"
        ),
    }
}

/// Every test here but this one needs a server, so every other one is ignored with the
/// reason, and each of those is the one that reads the URL.
#[test]
fn every_live_test_is_ignored_until_a_server_is_named() {
    let source = include_str!("live.rs");
    let test_attr = concat!("#[", "test]\n");
    let ignore_attr = concat!("#[", "ignore = \"needs SLUICE_TEST_MSSQL_URL\"]\n");
    let mut live = 0;
    for test in source.split(test_attr).skip(1) {
        let name = test
            .split("fn ")
            .nth(1)
            .and_then(|rest| rest.split('(').next())
            .unwrap();
        if name == "every_live_test_is_ignored_until_a_server_is_named" {
            continue;
        }
        assert!(
            test.starts_with(ignore_attr),
            "{name} needs a server: mark it {ignore_attr}"
        );
        let body = test.split("\n}\n").next().unwrap();
        assert!(
            body.contains(concat!("admin_url", "()")),
            "{name} is ignored but does not read {URL_VAR}"
        );
        live += 1;
    }
    assert_eq!(live, 21, "the live suite's size changed: update this count");
}

/// A database of its own for one test, with CDC enabled; dropped at the end.
struct MsDb {
    admin_url: String,
    name: String,
    url: String,
    rt: tokio::runtime::Runtime,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn with_database(url: &str, db: &str) -> String {
    let mut parsed = url::Url::parse(url).expect("SQL Server URL");
    parsed.set_path(&format!("/{db}"));
    parsed.to_string()
}

/// Runs a batch and returns the first column of the last result set's rows as text.
fn run_sql(rt: &tokio::runtime::Runtime, url: &str, sql: &str) -> Vec<Option<String>> {
    rt.block_on(async {
        let mut client = sluice::source::sqlserver::connect::connect(
            url,
            &Default::default(),
            &Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting to SQL Server: {}", e.chain()));
        let results = client
            .simple_query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_results()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let Some(last) = results.last() else {
            return vec![];
        };
        last.iter()
            .map(|row| match row.get_column_data(0).unwrap() {
                tiberius::ColumnData::String(s) => s.as_ref().map(|s| s.to_string()),
                tiberius::ColumnData::I32(v) => v.map(|v| v.to_string()),
                tiberius::ColumnData::I64(v) => v.map(|v| v.to_string()),
                tiberius::ColumnData::Binary(b) => b
                    .as_ref()
                    .map(|b| b.iter().map(|x| format!("{x:02X}")).collect::<String>()),
                other => Some(format!("{other:?}")),
            })
            .collect()
    })
}

impl MsDb {
    fn new(admin_url: &str, test: &str) -> MsDb {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("t_{test}_{}_{nanos:x}", std::process::id());
        let rt = runtime();
        run_sql(&rt, admin_url, &format!("CREATE DATABASE [{name}]"));
        let url = with_database(admin_url, &name);
        let db = MsDb {
            admin_url: admin_url.to_owned(),
            name,
            url,
            rt,
        };
        db.sql("EXEC sys.sp_cdc_enable_db");
        db
    }

    fn sql(&self, sql: &str) -> Vec<Option<String>> {
        run_sql(&self.rt, &self.url, sql)
    }

    /// Enables CDC for `dbo.<table>` as instance `dbo_<table>`, stops the Agent's capture
    /// job (the test scans itself), and captures what exists so far.
    fn enable(&self, table: &str) {
        self.sql(&format!(
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', \
             @capture_instance = N'dbo_{table}', @role_name = NULL, @supports_net_changes = 0"
        ));
        self.sql(
            "BEGIN TRY EXEC sys.sp_cdc_stop_job @job_type = N'capture' END TRY BEGIN CATCH END CATCH",
        );
        self.capture();
    }

    /// Runs the capture process once over the log written so far.
    fn capture(&self) {
        // The stopped capture job can hold the log reader for a moment; retry until the
        // scan runs (error 22903 while it is held).
        for attempt in 0.. {
            let result = self.rt.block_on(async {
                let mut client = sluice::source::sqlserver::connect::connect(&self.url, &Default::default(), &Default::default())
                    .await
                    .unwrap();
                client
                    .simple_query(
                        "EXEC sys.sp_cdc_scan @maxtrans = 100000, @maxscans = 100, @continuous = 0, @pollinginterval = 0",
                    )
                    .await?
                    .into_results()
                    .await
                    .map(|_| ())
            });
            match result {
                Ok(()) => return,
                Err(e) if attempt < 50 && e.code() == Some(22903) => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                Err(e) => panic!("sp_cdc_scan: {e}"),
            }
        }
    }

    /// A job capturing `dbo.<table>` through instance `dbo_<table>`.
    fn job(&self, table: &str, extra: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [dbo.{table}]\n  sqlserver: {{ capture_instance: dbo_{table} }}\n\
             destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n{extra}\n",
            job = self.name,
            out = dir.path().join("out").display(),
            state = dir.path().join("state").display(),
        );
        let config = dir.path().join("sluice.yaml");
        std::fs::write(&config, yaml).unwrap();
        Job {
            dir,
            config,
            url_env: ("SLUICE_TEST_SOURCE_URL".into(), self.url.clone()),
        }
    }
}

impl Drop for MsDb {
    fn drop(&mut self) {
        let drop_sql = format!(
            "ALTER DATABASE [{n}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE [{n}]",
            n = self.name
        );
        let rt = runtime();
        let admin = self.admin_url.clone();
        let _ = std::panic::catch_unwind(move || run_sql(&rt, &admin, &drop_sql));
    }
}

const ORDERS: &str =
    "CREATE TABLE dbo.orders (id bigint PRIMARY KEY, note nvarchar(100), amount decimal(12,2))";

/// A failed drain's error code, with its exit code checked.
fn refusal(job: &Job, exit: i32) -> (String, String) {
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, exit, "{}", run.stderr);
    let summary = run.summary();
    (
        run.error_code(),
        format!(
            "{} {}",
            summary["error"]["message"], summary["error"]["hint"]
        ),
    )
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn insert_update_delete_are_captured_in_commit_order() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "iud");
    db.sql(ORDERS);
    db.enable("orders");
    let job = db.job("orders", "");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert_eq!(first["rows"], 0);
    db.sql("INSERT INTO dbo.orders VALUES (1, N'a', 10.50), (2, N'b', 20.00)");
    db.sql("UPDATE dbo.orders SET note = N'a2', amount = 11.25 WHERE id = 1");
    db.sql("DELETE FROM dbo.orders WHERE id = 2");
    db.capture();
    let second = job.drain();
    assert_eq!(second["rows"], 4);
    assert_eq!(second["tables"]["dbo.orders"]["rows"], 4);
    let rows = job.rows("dbo.orders");
    assert_eq!(
        ops(&rows, "note"),
        [
            ("insert".into(), Some("a".into())),
            ("insert".into(), Some("b".into())),
            ("update".into(), Some("a2".into())),
            ("delete".into(), Some("b".into())),
        ]
    );
    assert_eq!(rows[2]["amount"].as_deref(), Some("11.25"));
    assert_eq!(rows[0]["__pos"], rows[1]["__pos"]);
    assert_eq!(
        (rows[0]["__seq"].as_deref(), rows[1]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    assert!(rows[1]["__pos"] < rows[2]["__pos"] && rows[2]["__pos"] < rows[3]["__pos"]);
    assert!(rows.iter().all(|r| r["__ts"].is_some()));
    assert_eq!(replay(&rows, &["id"]).len(), 1);
    assert!(job.out().join("dbo.orders/_SUCCESS").exists());
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn primary_key_update_is_split_into_delete_and_insert() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "keychange");
    db.sql(ORDERS);
    db.enable("orders");
    let job = db.job("orders", "");
    job.drain();
    db.sql("INSERT INTO dbo.orders VALUES (1, N'a', 1)");
    db.sql("UPDATE dbo.orders SET id = 7, note = N'moved' WHERE id = 1");
    db.capture();
    job.drain();
    let rows = job.rows("dbo.orders");
    // SQL Server logs a key update either as operations 1+2 or as 3+4; both arrive as
    // delete of the old key + insert of the new row at one position.
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("delete".into(), Some("1".into())),
            ("insert".into(), Some("7".into())),
        ]
    );
    assert_eq!(rows[1]["__pos"], rows[2]["__pos"]);
    let state = replay(&rows, &["id"]);
    assert_eq!(
        state.keys().cloned().collect::<Vec<_>>(),
        [vec![Some("7".to_string())]]
    );
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn resume_captures_only_new_changes() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "resume");
    db.sql(ORDERS);
    db.enable("orders");
    let job = db.job("orders", "");
    job.drain();
    db.sql("INSERT INTO dbo.orders VALUES (1, N'a', 1)");
    db.capture();
    let s1 = job.drain();
    db.sql("INSERT INTO dbo.orders VALUES (2, N'b', 2)");
    db.capture();
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
    assert!(s1["to"].as_str().unwrap().starts_with("mssql:"));
    let rows = job.rows("dbo.orders");
    assert_eq!(
        ops(&rows, "id"),
        [
            ("insert".into(), Some("1".into())),
            ("insert".into(), Some("2".into()))
        ]
    );
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn idle_first_run_then_change_is_captured() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "idle");
    db.sql(ORDERS);
    db.sql("CREATE TABLE dbo.noise (id int IDENTITY PRIMARY KEY, v nvarchar(10))");
    db.enable("orders");
    db.enable("noise");
    let job = db.job("orders", "");
    assert_eq!(job.drain()["rows"], 0);
    db.sql("INSERT INTO dbo.noise (v) SELECT TOP (500) N'x' FROM sys.all_objects");
    db.capture();
    let idle = job.drain();
    assert_eq!(idle["rows"], 0);
    assert_ne!(
        idle["to"], idle["from"],
        "an idle run still moves to the bound"
    );
    db.sql("INSERT INTO dbo.orders VALUES (5, N'late', 5)");
    db.capture();
    assert_eq!(job.drain()["rows"], 1);
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn legacy_lob_of_a_delete_is_marked_not_logged_never_null() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "lob");
    db.sql("CREATE TABLE dbo.docs (id int PRIMARY KEY, body ntext, n int)");
    db.enable("docs");
    let job = db.job("docs", "");
    job.drain();
    db.sql("INSERT INTO dbo.docs VALUES (1, REPLICATE(CAST(N'x' AS nvarchar(max)), 20000), 0)");
    db.sql("DELETE FROM dbo.docs WHERE id = 1");
    db.capture();
    job.drain();
    let rows = job.rows("dbo.docs");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["body"].as_ref().map(|b| b.len()), Some(20000));
    assert_eq!(rows[1]["__op"].as_deref(), Some("delete"));
    assert_eq!(rows[1]["body"], None);
    assert_eq!(rows[1]["__unlogged"].as_deref(), Some("[body]"));
    assert_eq!(rows[0]["__unlogged"], None);
}

/// Crashes a drain at `point` with changes to deliver, then checks the next drains
/// deliver every change at least once, identical duplicates only, nothing lost.
fn crash_then_recover(admin: &str, point: &str) {
    let db = MsDb::new(admin, &format!("crash_{point}"));
    db.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(20))");
    db.enable("t");
    let job = db.job(
        "t",
        "output: { rollover_rows: 10, row_group_rows: 4 }\nlease: { ttl_seconds: 3 }",
    );
    job.drain();
    for i in 0..50 {
        db.sql(&format!("INSERT INTO dbo.t VALUES ({i}, N'v{i}')"));
    }
    db.sql("UPDATE dbo.t SET v = N'changed' WHERE id % 7 = 0");
    db.sql("DELETE FROM dbo.t WHERE id % 11 = 0");
    db.capture();
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", &format!("{point}@2"))]);
    assert_ne!(
        crashed.code, 0,
        "the fault at {point} did not fire:\n{}",
        crashed.stderr
    );
    assert!(
        crashed.stderr.contains("fault injected"),
        "{}",
        crashed.stderr
    );
    // A crashed run keeps its lease until it expires; the next run waits it out.
    let recovered = job.drain_when_free();
    assert_eq!(recovered["status"], "drained");
    let rows = job.rows("dbo.t");
    assert_eq!(
        support::distinct_changes(&rows),
        50 + 8 + 5,
        "every change once (plus identical duplicates)"
    );
    let state = replay(&rows, &["id"]);
    let expected = db.sql(
        "SELECT STRING_AGG(CAST(id AS nvarchar(10)) + N'=' + v, N',') WITHIN GROUP (ORDER BY CAST(id AS nvarchar(10))) FROM dbo.t",
    );
    let actual: Vec<String> = state
        .values()
        .map(|r| {
            format!(
                "{}={}",
                r["id"].as_deref().unwrap(),
                r["v"].as_deref().unwrap()
            )
        })
        .collect();
    assert_eq!(Some(actual.join(",")), expected[0]);
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn crash_after_part_durable_loses_nothing() {
    let admin = admin_url();
    crash_then_recover(&admin, "part_durable");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn crash_after_checkpoint_written_loses_nothing() {
    let admin = admin_url();
    crash_then_recover(&admin, "checkpoint_written");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn crash_after_source_acked_loses_nothing() {
    let admin = admin_url();
    crash_then_recover(&admin, "source_acked");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn every_supported_type_arrives_typed_and_exact() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "types");
    db.sql(
        "CREATE TABLE dbo.t (id int PRIMARY KEY, ti tinyint, si smallint, bi bigint, flag bit, \
         n decimal(20,4), m money, sm smallmoney, r real, f float, day date, tm time(6), \
         dt datetime, dt2 datetime2(6), sdt smalldatetime, dto datetimeoffset(6), \
         c char(3), vc varchar(10), nc nchar(2), nvc nvarchar(max), txt text, ntxt ntext, \
         bin binary(2), vb varbinary(max), img image, u uniqueidentifier, x xml)",
    );
    db.enable("t");
    let job = db.job("t", "");
    job.drain();
    db.sql(
        "INSERT INTO dbo.t VALUES (1, 255, -32768, 9223372036854775807, 1, -1234567890123456.7891, \
         922337203685477.5807, -214748.3648, 1.5, -2.25e100, '1969-07-20', '23:59:59.999999', \
         '2000-02-29 12:34:56.997', '2000-02-29 12:34:56.789012', '2000-02-29 12:34:00', \
         '2026-12-01 10:00:00.000001 +02:00', 'ab', 'short', N'ü', N'unicode ✓ ünï', 'old', N'ńew', \
         0x00FF, 0x0010, 0xABCD, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', N'<a>1</a>'), \
         (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL, N'', NULL, NULL, NULL, 0x, NULL, NULL, NULL)",
    );
    db.capture();
    job.drain();
    let rows = job.rows("dbo.t");
    assert_eq!(rows.len(), 2);
    let r = &rows[0];
    let cell = |c: &str| r[c].as_deref().unwrap_or("NULL").to_owned();
    assert_eq!(cell("ti"), "255");
    assert_eq!(cell("si"), "-32768");
    assert_eq!(cell("bi"), "9223372036854775807");
    assert_eq!(cell("flag"), "true");
    assert_eq!(cell("n"), "-1234567890123456.7891");
    assert_eq!(cell("m"), "922337203685477.5807");
    assert_eq!(cell("sm"), "-214748.3648");
    assert_eq!(cell("r"), "1.5");
    assert_eq!(cell("f"), "-2.25e100");
    assert_eq!(cell("day"), "1969-07-20");
    assert_eq!(cell("tm"), "23:59:59.999999");
    assert_eq!(cell("dt"), "2000-02-29T12:34:56.996667");
    assert_eq!(cell("dt2"), "2000-02-29T12:34:56.789012");
    assert_eq!(cell("sdt"), "2000-02-29T12:34:00");
    assert_eq!(cell("dto"), "2026-12-01T08:00:00.000001Z");
    assert_eq!(cell("c"), "ab ");
    assert_eq!(cell("vc"), "short");
    assert_eq!(cell("nc"), "ü ");
    assert_eq!(cell("nvc"), "unicode ✓ ünï");
    assert_eq!(cell("txt"), "old");
    assert_eq!(cell("ntxt"), "ńew");
    assert_eq!(cell("bin"), "00ff");
    assert_eq!(cell("vb"), "0010");
    assert_eq!(cell("img"), "abcd");
    assert_eq!(cell("u"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(cell("x"), "<a>1</a>");
    let empty = &rows[1];
    assert_eq!(empty["nvc"].as_deref(), Some(""));
    assert_eq!(empty["vb"].as_deref(), Some(""));
    assert_eq!(empty["m"], None);
    let part = &support::part_files(&job.out().join("dbo.t"), "cdc-")[0];
    let schema = support::read_batches(part)[0].schema();
    let ty = |c: &str| schema.field_with_name(c).unwrap().data_type().to_string();
    assert_eq!(ty("n"), "Decimal128(20, 4)");
    assert_eq!(ty("m"), "Decimal128(19, 4)");
    assert_eq!(ty("sm"), "Decimal128(10, 4)");
    assert_eq!(ty("dto"), "Timestamp(µs, \"UTC\")");
    assert_eq!(ty("dt2"), "Timestamp(µs)");
    assert_eq!(ty("day"), "Date32");
    assert_eq!(ty("tm"), "Utf8");
    assert_eq!(ty("img"), "Binary");
    assert_eq!(ty("ti"), "UInt8");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn sub_microsecond_datetime2_fails_loudly_never_truncated() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "ns");
    db.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, at datetime2(7))");
    db.enable("t");
    let job = db.job("t", "");
    job.drain();
    db.sql("INSERT INTO dbo.t VALUES (1, '2026-01-01 00:00:00.1234567')");
    db.capture();
    let (code, text) = refusal(&job, 5);
    assert_eq!(code, "SLUICE_VALUE_UNREPRESENTABLE");
    assert!(text.contains("dbo.t.at"), "{text}");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn checkpoint_below_the_cleanup_low_water_mark_is_a_log_gap() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "gap");
    db.sql(ORDERS);
    db.enable("orders");
    let job = db.job("orders", "");
    job.drain();
    db.sql("INSERT INTO dbo.orders VALUES (1, N'lost', 1)");
    db.capture();
    db.sql("INSERT INTO dbo.orders VALUES (2, N'later', 2)");
    db.capture();
    db.sql(
        "DECLARE @lwm binary(10) = sys.fn_cdc_get_max_lsn(); \
         EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = @lwm, @threshold = 5000",
    );
    let (code, text) = refusal(&job, 5);
    assert_eq!(code, "SLUICE_SOURCE_LOG_GAP");
    assert!(text.contains("re-baseline"), "{text}");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn checkpoint_from_another_database_is_refused() {
    let admin = admin_url();
    let a = MsDb::new(&admin, "foreign_a");
    let b = MsDb::new(&admin, "foreign_b");
    for db in [&a, &b] {
        db.sql(ORDERS);
        db.enable("orders");
    }
    let mut job = a.job("orders", "");
    job.drain();
    job.url_env.1 = b.url.clone();
    let (code, text) = refusal(&job, 5);
    assert_eq!(code, "SLUICE_SOURCE_FOREIGN_CHECKPOINT");
    assert!(text.contains("family_guid"), "{text}");
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn column_added_after_the_capture_instance_is_refused() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "addcol");
    db.sql(ORDERS);
    db.enable("orders");
    let job = db.job("orders", "");
    job.drain();
    db.sql("ALTER TABLE dbo.orders ADD extra int NULL");
    let (code, text) = refusal(&job, 5);
    assert_eq!(code, "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        text.contains("extra") && text.contains("sys.sp_cdc_enable_table"),
        "{text}"
    );
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn missing_cdc_or_capture_instance_is_a_prerequisite_error() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "nocdc");
    db.sql(ORDERS);
    // CDC enabled for the database, not for the table.
    let job = db.job("orders", "");
    let (code, text) = refusal(&job, 5);
    assert_eq!(code, "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        text.contains("does not exist") && text.contains("sp_cdc_enable_table"),
        "{text}"
    );
    db.sql("EXEC sys.sp_cdc_disable_db");
    let (code, text) = refusal(&job, 5);
    assert_eq!(code, "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        text.contains("not enabled") && text.contains("sp_cdc_enable_db"),
        "{text}"
    );
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn types_without_a_typed_mapping_are_captured_as_text_or_wkb() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "untyped");
    db.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v sql_variant, h hierarchyid, g geography)");
    db.enable("t");
    let job = db.job("t", "");
    assert_eq!(job.drain()["status"], "drained");
    db.sql(
        "INSERT INTO dbo.t VALUES (1, CAST(42 AS int), '/1/2/', geography::Point(47.65, -122.34, 4326)), \
         (2, CAST(N'x' AS nvarchar(10)), '/', NULL)",
    );
    db.capture();
    assert_eq!(job.drain()["rows"], 2);
    let rows = job.rows("dbo.t");
    assert_eq!(rows[0]["v"].as_deref(), Some("42"));
    assert_eq!(rows[0]["h"].as_deref(), Some("/1/2/"));
    assert_eq!(rows[1]["v"].as_deref(), Some("x"));
    assert_eq!(rows[1]["h"].as_deref(), Some("/"));
    assert!(rows[0]["g"].is_some() && rows[1]["g"].is_none());
    let part = &support::part_files(&job.out().join("dbo.t"), "cdc-")[0];
    let schema = support::read_batches(part)[0].schema();
    let form = |c: &str| schema.field_with_name(c).unwrap().metadata()["sluice.form"].clone();
    assert_eq!(
        (form("v"), form("h"), form("g")),
        ("text".into(), "text".into(), "wkb".into())
    );
}

/// Every snapshot and change row of `dbo.<table>`, sorted by (`__pos`, `__seq`): the
/// snapshot's `__pos` (just before the anchor) sorts before every change.
fn all_rows(job: &Job, table: &str) -> Vec<Row> {
    support::baseline_and_changes(&job.out().join(format!("dbo.{table}")))
}

/// The replayed state as sorted `key=v` texts (`key` the output column).
fn replayed(job: &Job, table: &str, key: &str) -> Vec<String> {
    let mut state: Vec<String> = replay(&all_rows(job, table), &[key])
        .values()
        .map(|r| {
            format!(
                "{}={}",
                r[key].as_deref().unwrap(),
                r["v"].as_deref().unwrap_or("NULL")
            )
        })
        .collect();
    state.sort();
    state
}

/// The source's rows as sorted `key=v` texts (`key` a T-SQL expression of the row).
fn source_state(db: &MsDb, table: &str, key: &str) -> Vec<String> {
    let mut state: Vec<String> = db
        .sql(&format!(
            "SELECT CAST(CONCAT({key}, N'=', ISNULL(v, N'NULL')) AS nvarchar(400)) FROM dbo.{table}"
        ))
        .into_iter()
        .map(Option::unwrap)
        .collect();
    state.sort();
    state
}

/// `n` = 1…`rows`, for `INSERT … SELECT … FROM` this.
fn numbers(rows: u32) -> String {
    format!(
        "(SELECT TOP ({rows}) CAST(ROW_NUMBER() OVER (ORDER BY (SELECT 1)) AS int) AS n \
         FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS s"
    )
}

fn config_of(db: &MsDb, job: &Job) -> sluice::config::Config {
    let mut config = sluice::config::Config::load(Some(&job.config)).unwrap();
    config.source.url_env = None;
    config.source.url = Some(db.url.clone());
    config
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn baseline_plans_and_reads_a_composite_key_through_the_snapshot_trait() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "baseline");
    db.sql("CREATE TABLE dbo.t (region varchar(4), id int, v money, PRIMARY KEY (region, id))");
    db.sql(&format!(
        "INSERT INTO dbo.t SELECT CASE WHEN n % 2 = 0 THEN 'eu' ELSE 'us' END, n, n * 1.5 FROM {}",
        numbers(25)
    ));
    db.enable("t");
    let job = db.job("t", "");
    let config = config_of(&db, &job);
    let mut keys = Vec::new();
    runtime().block_on(async {
        let mut snap = sluice::source::open_baseline_reader(&config)
            .await
            .unwrap_or_else(|e| panic!("{}", e.chain()));
        let plan = snap.plan("dbo.t", 10).await.unwrap();
        // The walk: eu has the 12 even ids, us the 13 odd ones; every 10th key splits.
        let uppers: Vec<_> = plan.iter().map(|c| c.upper.clone()).collect();
        assert_eq!(
            uppers,
            [
                Some(vec!["eu".to_owned(), "20".to_owned()]),
                Some(vec!["us".to_owned(), "15".to_owned()]),
                None
            ]
        );
        for bounds in &plan {
            let mut sink = |row: Vec<sluice::change::Value>| {
                keys.push((row[0].clone(), row[1].clone(), row[2].clone()));
                Ok::<(), sluice::error::Error>(())
            };
            let read = snap.read_chunk("dbo.t", bounds, &mut sink).await.unwrap();
            assert!(read <= 10, "{bounds:?}: {read}");
        }
    });
    assert_eq!(keys.len(), 25);
    let mut distinct = keys.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 25, "no row twice, in key order");
    assert_eq!(
        keys[0],
        (
            sluice::change::Value::Text("eu".into()),
            sluice::change::Value::Int(2),
            sluice::change::Value::Decimal(30_000)
        )
    );
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn baseline_with_concurrent_writes_replays_to_the_exact_table() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "bl_concurrent");
    db.sql("CREATE TABLE dbo.t (id bigint PRIMARY KEY, v nvarchar(40))");
    db.sql(&format!(
        "INSERT INTO dbo.t SELECT n, CONCAT(N'seed', n) FROM {}",
        numbers(20_000)
    ));
    db.enable("t");
    let job = db.job("t", "baseline: { chunk_rows: 1000, parallel: 2 }");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (url, stop) = (db.url.clone(), stop.clone());
        std::thread::spawn(move || {
            let rt = runtime();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let (a, b, c) = (
                    (i * 7919) % 20_000 + 1,
                    (i * 104_729) % 20_000 + 1,
                    20_000 + i % 500,
                );
                run_sql(
                    &rt,
                    &url,
                    &format!(
                        "BEGIN TRANSACTION; UPDATE dbo.t SET v = N'upd{i}' WHERE id = {a}; DELETE FROM dbo.t WHERE id = {b}; \
                         MERGE dbo.t AS t USING (SELECT CAST({c} AS bigint) AS id) AS s ON t.id = s.id \
                         WHEN MATCHED THEN UPDATE SET v = N'again{i}' WHEN NOT MATCHED THEN INSERT VALUES (s.id, N'new{i}'); \
                         COMMIT"
                    ),
                );
            }
            i
        })
    };
    let baseline = job.run(&["baseline"], &[]);
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    let summary = baseline.summary();
    assert_eq!(summary["status"], "done");
    assert!(summary["chunks"].as_u64().unwrap() >= 10, "{summary}");
    assert!(writes > 0);
    db.capture();
    job.drain();
    assert_eq!(replayed(&job, "t", "id"), source_state(&db, "t", "id"));
    // Snapshot rows carry the change-row shape, at one position before every change.
    let snap = read_rows(&support::snapshot_dir(&job.out().join("dbo.t")), "part-");
    assert!(
        snap.iter()
            .all(|r| r["__op"].as_deref() == Some("snapshot") && r["__seq"].as_deref() == Some("0"))
    );
    let anchor = snap[0]["__pos"].clone().unwrap();
    assert!(
        snap.iter()
            .all(|r| r["__pos"].as_deref() == Some(anchor.as_str()))
    );
    let changes = job.rows("dbo.t");
    assert!(!changes.is_empty());
    assert!(
        changes
            .iter()
            .all(|r| r["__pos"].as_deref().unwrap() > anchor.as_str()),
        "every change sorts after the snapshot"
    );
    assert!(job.out().join("dbo.t/snapshot/_SUCCESS").exists());
    let again = job.run(&["baseline"], &[]).summary();
    assert_eq!(again["chunks_read"], 0);
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn crashed_baseline_resumes_with_only_the_remaining_chunks() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "bl_crash");
    db.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(20))");
    db.sql(&format!(
        "INSERT INTO dbo.t SELECT n, CONCAT(N'v', n) FROM {}",
        numbers(5_000)
    ));
    db.enable("t");
    let job = db.job(
        "t",
        "baseline: { chunk_rows: 500 }\nlease: { ttl_seconds: 2 }",
    );
    support::baseline_crash_then_resume(&job, "dbo.t", "chunk_done@3:crash", 3, || {
        db.sql("UPDATE dbo.t SET v = N'changed' WHERE id <= 10; DELETE FROM dbo.t WHERE id = 4999");
    });
    db.capture();
    job.drain_when_free();
    assert_eq!(replayed(&job, "t", "id"), source_state(&db, "t", "id"));
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn keys_of_every_kind_are_chunked_without_gaps_or_overlap() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "bl_keys");
    // Each table: its key, the key expression of row n (1…3000), v unique per row.
    let tables = [
        // Index order (id, region) differs from column order; a SQL collation on varchar.
        (
            "c",
            "region varchar(8) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL, id int NOT NULL, v nvarchar(20), PRIMARY KEY (id, region)",
            "region, id",
            "CHOOSE(n % 4 + 1, 'eu', 'US', 'ap', 'Ärger'), n / 4",
        ),
        (
            "n",
            "k nvarchar(20) COLLATE Latin1_General_100_CS_AS_SC NOT NULL PRIMARY KEY, v nvarchar(20)",
            "k",
            "CONCAT(NCHAR(65 + n % 26), N'é🦀', RIGHT(CONCAT('0000', n), 5))",
        ),
        (
            "g",
            "k uniqueidentifier NOT NULL PRIMARY KEY, v nvarchar(20)",
            "k",
            "NEWID()",
        ),
        (
            "d",
            "k datetime NOT NULL PRIMARY KEY, v nvarchar(20)",
            "k",
            "DATEADD(millisecond, n * 7, CAST('1800-01-01' AS datetime))",
        ),
        (
            "o",
            "k datetimeoffset(3) NOT NULL PRIMARY KEY, v nvarchar(20)",
            "k",
            "TODATETIMEOFFSET(DATEADD(second, n, CAST('2024-01-01' AS datetime2(3))), (n % 3) * 90)",
        ),
        (
            "m",
            "k decimal(20,5) NOT NULL PRIMARY KEY, v nvarchar(20)",
            "k",
            "n * 1.00001 - 1500",
        ),
        (
            "b",
            "k varbinary(16) NOT NULL PRIMARY KEY, v nvarchar(20)",
            "k",
            "CAST(n * 7919 AS varbinary(4))",
        ),
    ];
    for (table, columns, key_columns, key) in tables {
        db.sql(&format!("CREATE TABLE dbo.{table} ({columns})"));
        db.sql(&format!(
            "INSERT INTO dbo.{table} ({key_columns}, v) SELECT {key}, CONCAT(N'v', n) FROM {}",
            numbers(3_000)
        ));
        db.enable(table);
        let job = db.job(table, "baseline: { chunk_rows: 250 }");
        let baseline = job.run(&["baseline"], &[]);
        assert_eq!(baseline.code, 0, "{table}: {}", baseline.stderr);
        let summary = baseline.summary();
        assert_eq!(
            summary["tables"][format!("dbo.{table}")]["rows"],
            3000,
            "{table}: {summary}"
        );
        let parts = support::part_files(
            &support::snapshot_dir(&job.out().join(format!("dbo.{table}"))),
            "part-",
        );
        assert!(parts.len() >= 8, "{table}: {summary}");
        db.sql(&format!(
            "UPDATE dbo.{table} SET v = CONCAT(N'x', v) WHERE v LIKE N'v1%'; \
             DELETE FROM dbo.{table} WHERE v LIKE N'v2%'"
        ));
        db.capture();
        job.drain();
        // v is unique per row, so equal v sets mean equal tables.
        let key: Vec<&str> = key_columns.split(", ").collect();
        let mut got: Vec<String> = replay(&all_rows(&job, table), &key)
            .into_values()
            .map(|r| r["v"].clone().unwrap())
            .collect();
        got.sort();
        let mut want: Vec<String> = db
            .sql(&format!("SELECT v FROM dbo.{table}"))
            .into_iter()
            .map(Option::unwrap)
            .collect();
        want.sort();
        assert_eq!(
            got.len(),
            3000 - 1111,
            "{table}: 1111 of 1…3000 start with 2"
        );
        assert_eq!(got, want, "{table}");
    }
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn drain_with_initial_snapshot_baselines_first_then_streams() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "bl_initial");
    db.sql("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(10)); INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b')");
    db.enable("t");
    let job = db.job("t", "initial: snapshot");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert!(job.out().join("dbo.t/snapshot/_SUCCESS").exists());
    db.sql("UPDATE dbo.t SET v = N'b2' WHERE id = 2; INSERT INTO dbo.t VALUES (3, N'c')");
    db.capture();
    job.drain();
    assert_eq!(replayed(&job, "t", "id"), ["1=a", "2=b2", "3=c"]);
    job.drain();
    assert_eq!(
        support::part_files(&support::snapshot_dir(&job.out().join("dbo.t")), "part-").len(),
        1
    );
}

#[test]
#[ignore = "needs SLUICE_TEST_MSSQL_URL"]
fn keys_a_baseline_cannot_bound_are_refused() {
    let admin = admin_url();
    let db = MsDb::new(&admin, "bl_refused");
    // No key at all (a heap), and a capture instance on a unique index of a nullable column.
    db.sql("CREATE TABLE dbo.heap (v int); CREATE TABLE dbo.nul (id int NULL, v int); CREATE UNIQUE INDEX ux_nul ON dbo.nul (id)");
    db.enable("heap");
    db.sql(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'nul', \
         @capture_instance = N'dbo_nul', @role_name = NULL, @index_name = N'ux_nul', @supports_net_changes = 0",
    );
    for (table, needle) in [("heap", "primary key"), ("nul", "nullable")] {
        let run = db.job(table, "").run(&["baseline"], &[]);
        assert_eq!(run.code, 5, "{table}: {}", run.stderr);
        assert_eq!(
            run.error_code(),
            "SLUICE_SOURCE_PREREQUISITE",
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains(needle), "{table}: {}", run.stderr);
    }
}
