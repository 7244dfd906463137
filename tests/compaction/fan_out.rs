//! The compaction machine (infra/stepfunctions/compact.asl.json) walked by the ASL
//! interpreter against the real binary as its Lambda function: every table compacted,
//! a corrupt table recorded as failed while the others are compacted (the execution
//! fails at the end), and a table whose invocation stops at its deadline compacted on
//! by the next invocation until it is done.
//! Objects: database `t_compact_sfn_*`.

use std::time::Duration;

use serde_json::json;

use super::{change_files, config_block, data_files, rows_of};
use crate::support::asl::{self, Walker};
use crate::support::lambda_api::{Function, RuntimeApi};
use crate::support::{Job, TestDb};

const ASL: &str = "infra/stepfunctions/compact.asl.json";

fn table_text(db: &TestDb, table: &str) -> String {
    db.sql(&format!(
        "SELECT coalesce(string_agg(id || '=' || v, ',' ORDER BY id), '') FROM {table}"
    ))
}

/// The replay of every data file of `public.<table>` (what a folder reader reads).
fn replayed(job: &Job, table: &str) -> String {
    let dir = job.out().join(format!("public.{table}"));
    super::replayed(&rows_of(&dir, &data_files(&dir)))
}

#[test]
fn the_definition_is_valid_asl() {
    let Some(validator) = asl::validator() else {
        return;
    };
    asl::valid(&validator, std::path::Path::new(ASL)).unwrap();
}

#[test]
fn every_table_is_compacted_and_a_corrupt_one_fails_the_execution_after_the_others() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "compact_sfn");
    let tables = ["t", "u", "w"];
    for t in tables {
        db.sql(&format!("CREATE TABLE {t} (id int PRIMARY KEY, v text)"));
    }
    let names: Vec<String> = tables.iter().map(|t| format!("public.{t}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let job = Job::postgres(&db, &names, &config_block(1 << 20));
    job.drain();
    for i in 1..=6 {
        for t in tables {
            db.sql(&format!("INSERT INTO {t} VALUES ({i}, '{t}{i}')"));
        }
        db.sql(&format!("UPDATE t SET v = v || '+' WHERE id = {}", i / 2));
        assert_eq!(job.drain()["status"], "drained");
    }
    // u's third part holds another part's rows: its manifest's checksum refuses it.
    let u_dir = job.out().join("public.u");
    let u_files = change_files(&u_dir);
    assert_eq!(u_files.len(), 6, "{u_files:?}");
    let good = std::fs::read(u_dir.join(&u_files[2])).unwrap();
    std::fs::copy(u_dir.join(&u_files[0]), u_dir.join(&u_files[2])).unwrap();

    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let mut walker = Walker::new(&api, None);
    let failed = walker
        .execute(&asl::definition(ASL), json!({"parallel": 2}))
        .expect_err("a table failed, so the execution fails");
    assert_eq!(failed.error, "Sluice.CompactionFailed", "{failed:?}");
    assert_eq!(
        walker.invocations,
        ["compact.plan", "compact", "compact", "compact"],
        "one plan, one compaction per table: {:?}",
        walker.visited
    );
    assert!(walker.visited.iter().any(|s| s == "TableFailed"));
    // The tables before and after the corrupt one were compacted, and replay exactly.
    for t in ["t", "w"] {
        let dir = job.out().join(format!("public.{t}"));
        assert_eq!(change_files(&dir).len(), 1, "{t}: {:?}", change_files(&dir));
        assert_eq!(replayed(&job, t), table_text(&db, t), "{t}");
    }
    // Nothing of u was rewritten or removed.
    assert_eq!(change_files(&u_dir), u_files);

    // Restored, the next execution succeeds: u is compacted, t's and w's single parts are
    // left as they are.
    std::fs::write(u_dir.join(&u_files[2]), good).unwrap();
    let settled: Vec<Vec<String>> = ["t", "w"]
        .iter()
        .map(|t| change_files(&job.out().join(format!("public.{t}"))))
        .collect();
    let mut walker = Walker::new(&api, None);
    let output = walker
        .execute(&asl::definition(ASL), json!({}))
        .expect("every table compacts");
    assert_eq!(
        output["plan"]["parallel"],
        sluice::compaction::fan_out::DEFAULT_PARALLEL
    );
    assert_eq!(output["check"]["failed"], false, "{output}");
    assert_eq!(output["outcome"]["statuses"][1], "compacted", "{output}");
    for (t, files) in ["t", "w"].iter().zip(&settled) {
        assert_eq!(&change_files(&job.out().join(format!("public.{t}"))), files);
    }
    assert_eq!(change_files(&u_dir).len(), 1);
    for t in tables {
        assert_eq!(replayed(&job, t), table_text(&db, t), "{t}");
    }
}

#[test]
fn a_table_stopped_at_its_deadline_is_compacted_on_until_it_is_done() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "compact_sfn_deadline");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    // Targets of three parts' bytes: twelve parts are several steps.
    let job = Job::postgres(&db, &["public.t"], &config_block(1 << 20));
    job.drain();
    for i in 1..=12 {
        db.sql(&format!("INSERT INTO t VALUES ({i}, 'v{i}')"));
        assert_eq!(job.drain()["status"], "drained");
    }
    let dir = job.out().join("public.t");
    let largest = change_files(&dir)
        .iter()
        .map(|f| std::fs::metadata(dir.join(f)).unwrap().len())
        .max()
        .unwrap();
    let yaml = std::fs::read_to_string(&job.config).unwrap().replace(
        &config_block(1 << 20),
        &format!(
            "{}\ndeadline: {{ safety_margin_seconds: 3 }}",
            config_block(largest * 3)
        ),
    );
    std::fs::write(&job.config, yaml).unwrap();
    // The first step's end pauses past the deadline less its margin (8 s - 3 s), within
    // the function's timeout: the invocation stops with one step committed.
    let api = RuntimeApi::start();
    let _function = Function::start(
        &api,
        &job,
        &[("SLUICE_FAULT", "compact_step_done@1:pause=5500")],
    );
    let mut walker = Walker::new(&api, None).with_budget(Duration::from_secs(8));
    let output = walker
        .execute(&asl::definition(ASL), json!({"parallel": 1}))
        .unwrap_or_else(|f| panic!("{f:?}: {:?}", walker.visited));
    let compactions = walker
        .invocations
        .iter()
        .filter(|a| *a == "compact")
        .count();
    assert_eq!(compactions, 2, "{:?}", walker.visited);
    assert_eq!(
        walker
            .visited
            .iter()
            .filter(|s| *s == "StoppedAtDeadline")
            .count(),
        2
    );
    assert_eq!(
        output["outcome"]["statuses"],
        json!(["compacted"]),
        "{output}"
    );
    let files = change_files(&dir);
    assert!(files.len() <= 6, "{files:?}");
    assert_eq!(replayed(&job, "t"), table_text(&db, "t"));
}
