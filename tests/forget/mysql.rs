//! MariaDB: a hashed key column (`policy.tables.h.hash: [email]`) forgotten by its source
//! value: forget hashes it with the job's key to find the rows the lake holds. Objects:
//! database `t_forget_my_*`.

use super::{assert_nowhere, folder_rows, forget, forget_ok};
use crate::compaction::config_block;
use crate::support::{Job, TestMysqlDb, replay};

const KEY_VAR: &str = "SLUICE_TEST_FORGET_KEY";
const KEY: &str = "a forget test key of at least thirty-two bytes";

#[test]
fn mariadb_forget_finds_a_hashed_key_by_its_source_value() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "forget_my");
    db.sql("CREATE TABLE h (email varchar(64) PRIMARY KEY, v varchar(40)) ENGINE=InnoDB");
    db.sql("INSERT INTO h VALUES ('a@x.example', 'PII-a-0'), ('b@x.example', 'b0'), ('c@x.example', 'c0')");
    let job = Job::mysql(
        &db,
        &["h"],
        "",
        &format!(
            "initial: snapshot\n{}\npolicy:\n  hash_key: {{ env: {KEY_VAR} }}\n  tables:\n    h: {{ hash: [email] }}\n",
            config_block(1 << 20)
        ),
    );
    let env = [(KEY_VAR, KEY)];
    let drain = || {
        let run = job.run(&["drain"], &env);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    drain();
    db.sql("UPDATE h SET v = 'PII-a-1' WHERE email = 'a@x.example'; UPDATE h SET v = 'b1' WHERE email = 'b@x.example'");
    drain();
    db.sql("UPDATE h SET v = 'PII-a-2' WHERE email = 'a@x.example'; INSERT INTO h VALUES ('d@x.example', 'd0')");
    drain();
    let run = job.run(&["compact"], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    db.sql("UPDATE h SET v = 'PII-a-3' WHERE email = 'a@x.example'");
    drain();
    let run = job.run(&["materialize", "--table", "h"], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The lake holds the hash, never the address.
    let out = job.out();
    assert_nowhere(&out, "a@x.example");
    let hashed = replay(&folder_rows(&out, "h"), &["email"])
        .values()
        .find(|r| r["v"].as_deref() == Some("PII-a-3"))
        .and_then(|r| r["email"].clone())
        .expect("the key's row");
    assert_eq!(hashed.len(), 64, "{hashed}");
    db.sql("DELETE FROM h WHERE email = 'a@x.example'");
    drain();

    // Without the job's key, forget cannot hash the value: refused as config.
    let keyless = forget(&job, "h", &["--key", "email=a@x.example"], &[]);
    assert_eq!(keyless.code, 1, "{}", keyless.stderr);
    let run = forget(&job, "h", &["--key", "email=a@x.example"], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["status"], "forgotten", "{summary}");
    assert!(
        summary["keys"][0]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:")
    );
    assert_nowhere(&out, "PII-a-");
    assert_nowhere(&out, &hashed);
    let state: Vec<String> = replay(&folder_rows(&out, "h"), &["email"])
        .values()
        .map(|r| r["v"].clone().unwrap_or_default())
        .collect();
    let mut state = state;
    state.sort();
    assert_eq!(state, ["b1", "c0", "d0"]);
    let run = job.run(&["compact"], &env);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let again = forget(&job, "h", &["--key", "email=a@x.example"], &env);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains("\"nothing\""), "{}", again.stdout);
    let _ = forget_ok;
}
