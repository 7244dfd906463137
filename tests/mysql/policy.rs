//! Column policies where only MySQL / MariaDB can fail them: a transaction larger than
//! its memory share spills to disk inside the stream, so the policy must be applied
//! before — a raw value of a policed column is never in a spill file, while a table
//! without a policy is spilled as the binlog logged it (the control that shows the spill
//! file was seen). Each test owns its database (`policy_*` names).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{self, Job, TestMysqlDb};

const KEY_VAR: &str = "SLUICE_TEST_POLICY_KEY";
const KEY: &str = "a test key of at least thirty-two bytes, never written";

/// Copies every spill file that appears in `dir` while `running`, as often as it can:
/// what a transaction's spill held while the drain read it.
fn watch_spills(
    dir: std::path::PathBuf,
    running: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        // The longest copy of each file: a spill file only grows until it is removed.
        let mut seen = std::collections::BTreeMap::<std::path::PathBuf, Vec<u8>>::new();
        while running.load(Ordering::Relaxed) {
            for entry in std::fs::read_dir(&dir).into_iter().flatten() {
                let path = entry.unwrap().path();
                if path.to_string_lossy().ends_with(".spill")
                    && let Ok(bytes) = std::fs::read(&path)
                {
                    let kept = seen.entry(path).or_default();
                    if bytes.len() > kept.len() {
                        *kept = bytes;
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        seen.into_values().flatten().collect()
    })
}

#[test]
fn a_spilled_transaction_holds_only_the_policys_output() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "policy_spill");
    db.sql(
        "CREATE TABLE p (id int PRIMARY KEY, ssn varchar(40), email varchar(60), v varchar(200))",
    );
    db.sql("CREATE TABLE plain (id int PRIMARY KEY, v varchar(40))");
    let spill = tempfile::tempdir().unwrap();
    let job = Job::mysql(
        &db,
        &["p", "plain"],
        "{ transaction_memory_bytes: 8192 }",
        &format!(
            "output: {{ spill_dir: {} }}\npolicy:\n  hash_key: {{ env: {KEY_VAR} }}\n  tables:\n    p: {{ exclude: [ssn], hash: [email] }}\n",
            spill.path().display()
        ),
    );
    let run = job.run(&["drain"], &[(KEY_VAR, KEY)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // One transaction far past the memory share: thousands of rows of both tables.
    db.sql(
        "BEGIN; \
         INSERT INTO p SELECT seq, CONCAT('SSN-RAW-', seq), CONCAT('mail', seq, '.raw@example.com'), REPEAT('x', 150) FROM seq_1_to_6000; \
         INSERT INTO plain SELECT seq, CONCAT('PLAIN-RAW-', seq) FROM seq_1_to_3000; \
         UPDATE p SET email = CONCAT('new', id, '.raw@example.com') WHERE id % 3 = 0; \
         COMMIT;",
    );
    let running = Arc::new(AtomicBool::new(true));
    let watcher = watch_spills(spill.path().to_owned(), running.clone());
    let run = job.run(&["drain"], &[(KEY_VAR, KEY)]);
    running.store(false, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["tables"]["p"]["rows"], 8000, "{}", run.stdout);
    let contains = |needle: &str| seen.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(
        contains("PLAIN-RAW-"),
        "the transaction spilled and its file was read ({} bytes seen)",
        seen.len()
    );
    assert!(
        !contains("SSN-RAW-"),
        "an excluded value reached the spill file"
    );
    assert!(
        !contains(".raw@example.com"),
        "a raw hashed value reached the spill file"
    );
    let rows = support::read_rows(&job.out().join("p"), "cdc-");
    assert!(rows.iter().all(|r| !r.contains_key("ssn")));
    assert!(
        rows.iter()
            .all(|r| r["email"].as_deref().is_some_and(|e| e.len() == 64))
    );
}
