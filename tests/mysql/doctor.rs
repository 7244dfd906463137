//! `sluice doctor` against the live MariaDB: each MySQL check in its good and its bad
//! state, and doctor and drain agreeing on every refusal (same `SLUICE_…` code). Tests
//! that change a global setting or purge binlogs hold the binlog lock exclusively.

use crate::support::{self, GlobalSetting, Job, Run, TestMysqlDb, current_binlog_file};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note varchar(20)) ENGINE=InnoDB";

fn doctor(job: &Job, env: &[(&str, &str)]) -> (Run, serde_json::Value) {
    let run = job.run(&["doctor", "--json"], env);
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

fn status(doc: &serde_json::Value, name: &str) -> String {
    check(doc, name)["status"].as_str().unwrap().to_owned()
}

/// The drain refuses with `exit`, and doctor failed `name` with the drain's very code.
fn agree(job: &Job, env: &[(&str, &str)], doc: &serde_json::Value, name: &str, exit: i32) {
    let drain = job.run(&["drain"], env);
    assert_eq!(drain.code, exit, "drain should refuse:\n{}", drain.stderr);
    let c = check(doc, name);
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(
        c["code"].as_str().unwrap(),
        drain.error_code(),
        "doctor {c} vs drain {}",
        drain.stdout
    );
}

/// A MariaDB user for one test, dropped at the end even when the test fails.
struct User<'a> {
    db: &'a TestMysqlDb,
    name: String,
    url: String,
}

impl<'a> User<'a> {
    fn new(db: &'a TestMysqlDb, tag: &str, grants: &[&str]) -> User<'a> {
        let name = format!("{tag}_{}", &db.name[db.name.len() - 8..]);
        db.admin(&format!(
            "CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY 'pw'"
        ));
        let user = User {
            db,
            url: {
                let mut url = url::Url::parse(&db.url).unwrap();
                url.set_username(&name).unwrap();
                url.set_password(Some("pw")).unwrap();
                url.to_string()
            },
            name,
        };
        for grant in grants {
            user.grant(grant);
        }
        user
    }

    fn grant(&self, what: &str) {
        self.db.admin(&format!(
            "GRANT {} TO '{}'@'127.0.0.1'",
            what.replace("DB", &self.db.name),
            self.name
        ));
    }
}

impl Drop for User<'_> {
    fn drop(&mut self) {
        let _ = support::mysql_cli_output(
            &self.db.admin_url,
            &format!("DROP USER IF EXISTS '{}'@'127.0.0.1'", self.name),
        );
    }
}

#[test]
fn a_good_server_passes_and_a_table_without_a_key_warns() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "doctor_good");
    db.sql(ORDERS);
    db.sql("CREATE TABLE nokey (a int, b int)");
    let job = Job::mysql(&db, &["orders", "nokey"], "", "");
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 0, "{doc}");
    for name in [
        "source connect",
        "server version",
        "log_bin",
        "binlog_format",
        "binlog_row_image",
        "binlog_row_metadata",
        "binlog compression",
        "binlog_row_value_options",
        "grants",
        "replica server_id",
        "table orders",
        "table orders SELECT",
        "server identity",
        "checkpoint vs binlog",
        "binlog retention",
        "spill volume",
        "state reachable",
        "destination writable",
    ] {
        assert_eq!(status(&doc, name), "ok", "{name}: {doc}");
    }
    assert_eq!(check(&doc, "table orders")["detail"], "key (id)");
    let keyless = check(&doc, "table nokey");
    assert_eq!(keyless["status"], "warn", "{keyless}");
    assert!(
        keyless["fix"].as_str().unwrap().contains(&format!(
            "ALTER TABLE `{}`.`nokey` ADD PRIMARY KEY",
            db.name
        )),
        "{keyless}"
    );
    db.sql("ALTER TABLE nokey ADD PRIMARY KEY (a)");
    let (_, doc) = doctor(&job, &[]);
    assert_eq!(check(&doc, "table nokey")["detail"], "key (a)");

    // What doctor passed, the drain runs; then the checkpoint is checked too.
    job.drain();
    db.sql("INSERT INTO orders VALUES (1, 'a')");
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 0, "{doc}");
    assert!(
        check(&doc, "server identity")["detail"]
            .as_str()
            .unwrap()
            .contains("was written for this server"),
        "{doc}"
    );
    let binlog = check(&doc, "checkpoint vs binlog");
    assert_eq!(binlog["status"], "ok", "{binlog}");
    assert!(
        binlog["detail"]
            .as_str()
            .unwrap()
            .contains("still on the server"),
        "{binlog}"
    );
    let server_id = check(&doc, "replica server_id")["detail"]
        .as_str()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        check(&doc, "claims")["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("/server_id/{server_id} → ")),
        "{doc}"
    );
    let table = job.run(&["doctor"], &[]);
    assert_eq!(table.code, 0);
    assert!(
        table.stdout.contains("ok    binlog_format"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("warn"), "{}", table.stdout);
}

#[test]
fn missing_grants_fail_like_the_drain_and_pass_once_granted() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "doctor_grants");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");

    // SELECT only: no replication grants.
    let user = User::new(&db, "g", &["SELECT ON DB.*"]);
    let env = [("SLUICE_TEST_SOURCE_URL", user.url.as_str())];
    let (run, doc) = doctor(&job, &env);
    assert_eq!(run.code, 5, "{doc}");
    let grants = check(&doc, "grants");
    assert!(
        grants["fix"]
            .as_str()
            .unwrap()
            .contains("GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*"),
        "{grants}"
    );
    agree(&job, &env, &doc, "grants", 5);

    // Replication grants and another table of the database, but no privilege on the
    // captured one: it is invisible to the user.
    db.sql("CREATE TABLE other (id int PRIMARY KEY)");
    let blind = User::new(
        &db,
        "b",
        &[
            "REPLICATION SLAVE, BINLOG MONITOR ON *.*",
            "SELECT ON DB.other",
        ],
    );
    let env = [("SLUICE_TEST_SOURCE_URL", blind.url.as_str())];
    let (_, doc) = doctor(&job, &env);
    assert_eq!(status(&doc, "grants"), "ok", "{doc}");
    assert!(
        check(&doc, "table orders")["fix"]
            .as_str()
            .unwrap()
            .contains("GRANT SELECT ON"),
        "{doc}"
    );
    agree(&job, &env, &doc, "table orders", 5);

    // INSERT only on the table: visible, captured, but a baseline cannot read it.
    blind.grant("INSERT ON DB.orders");
    let (run, doc) = doctor(&job, &env);
    assert_eq!(status(&doc, "table orders"), "ok", "{doc}");
    assert_eq!(status(&doc, "table orders SELECT"), "warn", "{doc}");
    assert_eq!(run.code, 0, "{doc}");
    let snapshot = Job::mysql(&db, &["orders"], "", "initial: snapshot");
    let (run, doc) = doctor(&snapshot, &env);
    assert_eq!(status(&doc, "table orders SELECT"), "fail", "{doc}");
    assert_eq!(run.code, 5);

    blind.grant("SELECT ON DB.orders");
    let (run, doc) = doctor(&snapshot, &env);
    assert_eq!(status(&doc, "table orders SELECT"), "ok", "{doc}");
    assert_eq!(run.code, 0, "{doc}");
    assert!(
        !run.stdout.contains(":pw@"),
        "the password is never printed"
    );
}

#[test]
fn the_replica_server_id_must_not_be_the_servers_own() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "doctor_own_id");
    db.sql(ORDERS);
    let own = db.admin("SELECT @@server_id");
    let job = Job::mysql(&db, &["orders"], &format!("{{ server_id: {own} }}"), "");
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 5, "{doc}");
    agree(&job, &[], &doc, "replica server_id", 1);
    let fine = Job::mysql(&db, &["orders"], "{ server_id: 4000000001 }", "");
    let (_, doc) = doctor(&fine, &[]);
    assert_eq!(status(&doc, "replica server_id"), "ok", "{doc}");
}

#[test]
fn a_checkpoint_of_another_server_fails_like_the_drain() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "doctor_foreign");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    let path = job.state_file();
    let original = std::fs::read_to_string(&path).unwrap();
    // Without a GTID position there is no failover to follow (with one, doctor says
    // whether this server can continue it: `mysql::failover`).
    let other = support::replica::without_gtid(&original).replace("server_id=1/", "server_id=99/");
    assert_ne!(
        other, original,
        "the state file records the server identity"
    );
    std::fs::write(&path, &other).unwrap();
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 5, "{doc}");
    assert_eq!(
        check(&doc, "server identity")["code"],
        "SLUICE_SOURCE_FOREIGN_CHECKPOINT"
    );
    assert!(
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "checkpoint vs binlog"),
        "a foreign checkpoint is not judged against this binlog: {doc}"
    );
    agree(&job, &[], &doc, "server identity", 5);
    std::fs::write(&path, &original).unwrap();
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 0, "{doc}");
    assert_eq!(status(&doc, "server identity"), "ok");
}

#[test]
fn a_checkpoint_naming_a_purged_binlog_file_fails_like_the_drain() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "doctor_purged");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    job.drain();
    let (_, doc) = doctor(&job, &[]);
    assert_eq!(status(&doc, "checkpoint vs binlog"), "ok", "{doc}");
    db.sql("INSERT INTO orders VALUES (1, 'lost')");
    db.admin("FLUSH BINARY LOGS");
    db.sql("INSERT INTO orders VALUES (2, 'b')");
    // MariaDB keeps a file until its binlog checkpoint has moved on; retry until gone.
    let current = current_binlog_file(&db);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        db.admin(&format!("PURGE BINARY LOGS TO '{current}'"));
        let oldest = db.admin("SHOW BINARY LOGS");
        if oldest.split_whitespace().next() == Some(current.as_str()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not purged: {oldest}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 5, "{doc}");
    let c = check(&doc, "checkpoint vs binlog");
    assert_eq!(c["code"], "SLUICE_SOURCE_LOG_GAP", "{c}");
    assert!(c["fix"].as_str().unwrap().contains("re-baseline"), "{c}");
    agree(&job, &[], &doc, "checkpoint vs binlog", 5);
}

#[test]
fn each_bad_binlog_setting_fails_like_the_drain() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "doctor_settings");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    for (name, bad) in [
        ("binlog_format", "MIXED"),
        ("binlog_row_image", "MINIMAL"),
        ("binlog_row_metadata", "NO_LOG"),
    ] {
        let _bad = GlobalSetting::set(&db, name, bad);
        let (run, doc) = doctor(&job, &[]);
        assert_eq!(run.code, 5, "{name}: {doc}");
        let c = check(&doc, name);
        assert!(
            c["fix"]
                .as_str()
                .unwrap()
                .contains(&format!("SET GLOBAL {name} =")),
            "{c}"
        );
        agree(&job, &[], &doc, name, 5);
    }
    let (run, doc) = doctor(&job, &[]);
    assert_eq!(run.code, 0, "{doc}");
    assert_eq!(status(&doc, "binlog_row_metadata"), "ok");
}

#[test]
fn binlog_retention_is_compared_with_the_schedule_interval() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::exclusive(&admin, "doctor_retention");
    db.sql(ORDERS);
    let with = |doctor: &str| Job::mysql(&db, &["orders"], "", &format!("doctor: {doctor}"));
    // Thirty days: longer than anything on this test server, so nothing is purged.
    let _expire = GlobalSetting::set(&db, "binlog_expire_logs_seconds", "2592000");
    let (run, doc) = doctor(&with("{ schedule_interval_seconds: 2678400 }"), &[]);
    assert_eq!(run.code, 5, "{doc}");
    let c = check(&doc, "binlog retention");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(c["detail"].as_str().unwrap().contains("2592000s"), "{c}");
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("SET GLOBAL binlog_expire_logs_seconds = '2764800'"),
        "{c}"
    );
    let (_, doc) = doctor(
        &with("{ schedule_interval_seconds: 2505600, log_retention_margin_seconds: 172800 }"),
        &[],
    );
    assert_eq!(status(&doc, "binlog retention"), "warn", "{doc}");
    let (run, doc) = doctor(&with("{ schedule_interval_seconds: 300 }"), &[]);
    assert_eq!(status(&doc, "binlog retention"), "ok", "{doc}");
    assert_eq!(run.code, 0, "{doc}");
}

/// A table without a key: the "baseline key" row agrees with the baseline — one
/// consistent read without a key (the baseline succeeds), keyset chunks once
/// `baseline.keys` declares NOT NULL columns.
#[test]
fn the_baseline_key_row_agrees_with_the_baseline() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "doctor_bkey");
    db.sql("CREATE TABLE k (id int NOT NULL, v text); INSERT INTO k VALUES (1, 'a')");
    let row = "table k baseline key";
    let job = Job::mysql(&db, &["k"], "", "initial: snapshot");
    let (_, doc) = doctor(&job, &[]);
    let c = check(&doc, row).clone();
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(
        c["detail"],
        "no key: one consistent read, replayed as a multiset"
    );
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);

    let plain = Job::mysql(&db, &["k"], "", "");
    assert_eq!(status(&doctor(&plain, &[]).1, row), "ok");
    let declared = Job::mysql(
        &db,
        &["k"],
        "",
        "initial: snapshot\nbaseline: { keys: { k: [id] } }",
    );
    let c = check(&doctor(&declared, &[]).1, row).clone();
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(c["detail"], "keyset chunks by (id)");
}

#[test]
fn a_spill_volume_smaller_than_the_transaction_limit_warns_with_the_drains_limit() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "doctor_spill");
    db.sql(ORDERS);
    let spill_dir = tempfile::tempdir().unwrap();
    let Some(_tmpfs) = support::tmpfs::Tmpfs::mount(spill_dir.path(), "3m") else {
        return;
    };
    let job = Job::mysql(
        &db,
        &["orders"],
        "",
        &format!("output: {{ spill_dir: {} }}", spill_dir.path().display()),
    );
    let (_, doc) = doctor(&job, &[]);
    let spill = check(&doc, "spill volume");
    assert_eq!(spill["status"], "warn", "{doc}");
    assert!(
        spill["detail"]
            .as_str()
            .unwrap()
            .contains("transactions up to 2.0 MiB"),
        "{spill}"
    );
    assert!(
        spill["fix"].as_str().unwrap().contains("ephemeral storage"),
        "{spill}"
    );
}
