//! `sluice init`: the configs it writes validate and drain as written; per-table streams
//! get distinct names; a table the drain would refuse is flagged in a comment.

use std::process::Command;

use crate::support::{self, TestDb, read_rows};

fn init(db: &TestDb, out: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let run = support::Run::from(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["init", "--source-env", "INIT_SOURCE_URL", "--out"])
            .arg(out)
            .args(extra)
            .env("INIT_SOURCE_URL", &db.url)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run.summary()
}

#[test]
fn the_written_config_drains() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "init_drain");
    db.sql("CREATE TABLE a (id int PRIMARY KEY, v text); CREATE TABLE b (id int); ALTER TABLE a REPLICA IDENTITY FULL");
    let dir = tempfile::tempdir().unwrap();
    let summary = init(&db, dir.path(), &["--tables", "public.a"]);
    let job = summary["streams"][0]["job"].as_str().unwrap().to_owned();
    let config = dir.path().join(format!("{job}.yaml"));
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("url_env: INIT_SOURCE_URL") && !text.contains("postgres://"),
        "{text}"
    );
    assert!(
        std::fs::read_to_string(dir.path().join("sluice.tf"))
            .unwrap()
            .contains(&format!("module \"{job}\""))
    );
    let drain = |dir: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["drain", "--config"])
            .arg(&config)
            .current_dir(dir)
            .env("INIT_SOURCE_URL", &db.url)
            .output()
            .unwrap();
        let run = support::Run::from(out);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.summary()
    };
    drain(dir.path());
    db.sql("INSERT INTO a VALUES (1, 'x'), (2, 'y')");
    assert_eq!(drain(dir.path())["rows"], 2);
    let rows = read_rows(&dir.path().join(format!("out/{job}/public.a")), "cdc-");
    assert_eq!(rows.len(), 2);
}

#[test]
fn per_table_streams_get_distinct_names_and_refusals_are_flagged() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "init_split");
    db.sql("CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int)");
    let dir = tempfile::tempdir().unwrap();
    let summary = init(&db, dir.path(), &["--per-table"]);
    let streams = summary["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{summary}");
    assert_ne!(streams[0]["job"], streams[1]["job"]);
    assert_ne!(streams[0]["slot"], streams[1]["slot"]);
    let b = streams
        .iter()
        .find(|s| s["tables"][0] == "public.b")
        .unwrap();
    let text = std::fs::read_to_string(
        dir.path()
            .join(format!("{}.yaml", b["job"].as_str().unwrap())),
    )
    .unwrap();
    assert!(
        text.contains("WARNING: the drain refuses this table"),
        "{text}"
    );
    assert!(
        text.contains("every slot decodes ALL the database's WAL"),
        "{text}"
    );
}
