//! The baseline state machine definition and the code cannot drift apart: the ASL is
//! validated with `asl-validator`, and a small interpreter walks it — building every
//! task's payload from the definition's own `Parameters` / `ItemSelector` / `ResultSelector`
//! / `ResultPath` / `OutputPath`, taking the `Choice` on the plan's mode, reading a
//! Distributed Map's items from S3 (moto) through its `ItemReader`, and holding every state
//! and Map result to Step Functions' 256 KiB payload limit — invoking the real binary as a
//! Lambda function for each task. Both the inline and the S3 path of the chunk list run.

use std::path::Path;
use std::process::Command;

use crate::support::{self, Job, TestDb, aws::AwsTarget};
use serde_json::{Value, json};
use support::asl::{self, Walker};
use support::lambda_api::{Function, Outcome, RuntimeApi};

const ASL: &str = "infra/stepfunctions/baseline.asl.json";

/// An edit that makes the definition invalid.
type Breakage = fn(&mut Value);

#[test]
fn definition_is_valid_asl_and_the_validator_catches_errors() {
    let Some(validator) = asl::validator() else {
        return;
    };
    let ok = Command::new(&validator)
        .args(["--json-path", ASL])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    // Each breakage must be caught: a dangling Next, a Choice branch to nowhere, a
    // Distributed Map without its ExecutionType or its reader's Resource, and a state name
    // used twice (Step Functions requires unique names across the whole machine).
    let breakages: [(&str, Breakage); 5] = [
        ("a dangling Next", |d| {
            d["States"]["Plan"]["Next"] = json!("NoSuchState")
        }),
        ("a Choice to nowhere", |d| {
            d["States"]["ChunkList"]["Choices"][1]["Next"] = json!("NoSuchState")
        }),
        ("a Distributed Map without ExecutionType", |d| {
            d["States"]["ChunksFromS3"]["ItemProcessor"]["ProcessorConfig"]
                .as_object_mut()
                .unwrap()
                .remove("ExecutionType");
        }),
        ("an ItemReader without Resource", |d| {
            d["States"]["ChunksFromS3"]["ItemReader"]
                .as_object_mut()
                .unwrap()
                .remove("Resource");
        }),
        ("a duplicate state name", |d| {
            let processor = &mut d["States"]["ChunksFromS3"]["ItemProcessor"];
            let task = processor["States"]["ChunkFromS3"].clone();
            processor["States"] = json!({ "Chunk": task });
            processor["StartAt"] = json!("Chunk");
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, breakage) in breakages {
        let mut broken = definition();
        breakage(&mut broken);
        let path = dir.path().join("broken.json");
        std::fs::write(&path, broken.to_string()).unwrap();
        let bad = Command::new(&validator)
            .arg("--json-path")
            .arg(&path)
            .output()
            .unwrap();
        assert!(!bad.status.success(), "the validator accepted {what}");
    }
}

fn definition() -> Value {
    asl::definition(ASL)
}

/// Walks the whole definition from `StartAt` with an empty input.
fn walk(walker: &mut Walker) -> Value {
    walk_with(walker, json!({}))
}

/// Walks the definition for an execution started with `input`.
fn walk_with(walker: &mut Walker, input: Value) -> Value {
    walker
        .execute(&definition(), input)
        .expect("the baseline execution succeeds")
}

/// The replayed snapshot + changes under `out/t`, as `id=v,…` ordered by the id's text.
fn replayed(out: &Path) -> String {
    support::replayed_text(&out.join("t"), &["id"])
}

fn source_rows(db: &TestDb) -> String {
    db.id_v_text()
}

#[test]
fn both_maps_run_the_same_chunk_task() {
    let definition = definition();
    let states = &definition["States"];
    let (inline, distributed) = (&states["Chunks"], &states["ChunksFromS3"]);
    for field in ["ItemSelector", "MaxConcurrencyPath", "ResultPath", "Next"] {
        assert_eq!(inline[field], distributed[field], "{field}");
    }
    let task = |map: &Value| {
        let processor = &map["ItemProcessor"];
        processor["States"][processor["StartAt"].as_str().unwrap()].clone()
    };
    let (inline_task, distributed_task) = (task(inline), task(distributed));
    for field in [
        "Type",
        "Resource",
        "Parameters",
        "ResultSelector",
        "Retry",
        "End",
    ] {
        assert_eq!(inline_task[field], distributed_task[field], "{field}");
    }
    // The Distributed Map gathers its children's outputs even though it discards them.
    assert_eq!(distributed_task["OutputPath"], Value::Null);
    assert!(distributed_task.get("OutputPath").is_some());
    // Every mode Plan can return has a branch.
    let modes: Vec<&str> = states["ChunkList"]["Choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["StringEquals"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["inline", "s3"]);
    assert_eq!(
        serde_json::to_value(sluice::baseline::tasks::PlanMode::Inline).unwrap(),
        "inline"
    );
    assert_eq!(
        serde_json::to_value(sluice::baseline::tasks::PlanMode::S3).unwrap(),
        "s3"
    );
}

/// A database for `test` with `t (id int PRIMARY KEY, v text<more>)` holding 3000 rows
/// (`v` = 'v' || id), analyzed so a baseline plans several chunks.
fn three_thousand_rows(admin: &str, test: &str, more: &str) -> TestDb {
    let db = TestDb::new(admin, test);
    db.sql(&format!(
        "CREATE TABLE t (id int PRIMARY KEY, v text{more})"
    ));
    db.sql("INSERT INTO t (id, v) SELECT i, 'v' || i FROM generate_series(1, 3000) i; ANALYZE t");
    db
}

#[test]
fn walking_the_definition_runs_the_real_handlers_to_an_exact_baseline() {
    let admin = pg_or_skip!();
    let db = three_thousand_rows(&admin, "asl", "");
    let job = Job::postgres(&db, &["t"], "baseline: { chunk_rows: 1000, parallel: 3 }");
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let mut walker = Walker::new(&api, None);
    let output = walk(&mut walker);
    assert_eq!(output["baseline"]["tables"]["t"]["rows"], 3000, "{output}");
    assert_eq!(output["plan"]["mode"], "inline", "{output}");
    assert_eq!(output["plan"]["items"], Value::Null);
    assert!(walker.visited.iter().any(|s| s == "Chunks"));
    assert!(!walker.visited.iter().any(|s| s == "ChunksFromS3"));
    let chunks = walker
        .invocations
        .iter()
        .filter(|a| *a == "baseline.chunk")
        .count();
    assert!(chunks >= 3, "{:?}", walker.invocations);
    assert_eq!(output["plan"]["chunk_count"], chunks);
    assert_eq!(
        walker.invocations.first().map(String::as_str),
        Some("baseline.anchor")
    );
    assert_eq!(
        walker.invocations.last().map(String::as_str),
        Some("baseline.finish")
    );
    // The machine's result is an exact baseline, and drains continue from its anchor.
    db.sql("UPDATE t SET v = 'x' WHERE id = 5");
    let summary = api.call(json!({"action": "drain"}));
    assert_eq!(summary["rows"], 1);
    assert_eq!(replayed(&job.out()), source_rows(&db));
    assert!(source_rows(&db).contains("5=x"));
}

#[test]
fn rb_an_execution_started_with_a_table_rebaselines_that_table_alone() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "rb_asl");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY, v text)",
    );
    db.sql("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 50) i");
    db.sql("INSERT INTO u SELECT i, 'v' || i FROM generate_series(1, 50) i");
    let job = Job::postgres(&db, &["t", "u"], "baseline: { chunk_rows: 20 }");
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    walk(&mut Walker::new(&api, None));
    db.sql("UPDATE t SET v = 'x' WHERE id < 10; DELETE FROM t WHERE id > 40; UPDATE u SET v = 'y' WHERE id = 1");
    api.call(json!({"action": "drain"}));
    // t's output goes stale: its change parts are lost.
    for part in support::part_files(&job.out().join("t"), "cdc-") {
        std::fs::remove_file(part).unwrap();
    }
    assert_ne!(replayed(&job.out()), source_rows(&db));
    let u_record = job.local_state()["snapshots"]["u"].clone();
    let mut walker = Walker::new(&api, None);
    let output = walk_with(&mut walker, json!({"table": "t"}));
    assert_eq!(output["anchor"]["tables"], json!(["t"]), "{output}");
    assert_eq!(output["baseline"]["tables"]["t"]["rows"], 40, "{output}");
    assert_eq!(job.local_state()["snapshots"]["u"], u_record);
    db.sql("INSERT INTO t VALUES (100, 'new')");
    api.call(json!({"action": "drain"}));
    assert_eq!(replayed(&job.out()), source_rows(&db));
    assert_eq!(
        support::replayed_text(&job.out().join("u"), &["id"]),
        db.sql("SELECT coalesce(string_agg(id || '=' || v, ',' ORDER BY id::text), '') FROM u")
    );
}

#[test]
fn a_chunk_list_above_the_inline_limit_goes_through_s3_to_the_distributed_map() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = three_thousand_rows(&admin, "asl_dist", "");
    let target = AwsTarget::new(&moto);
    // One chunk task encodes to more than 64 bytes, so every list goes through S3.
    let job = target.job(
        &db,
        &["t"],
        "baseline: { chunk_rows: 1000, parallel: 3, inline_plan_max_bytes: 64 }",
    );
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);

    // A first Plan (as if the machine's Plan step were retried after it).
    api.call(json!({"action": "baseline.anchor"}));
    let first = api.call(json!({"action": "baseline.plan"}));
    assert_eq!(first["mode"], "s3", "{first}");
    let key = format!("cdc/_baseline/chunks-{}.json", db.name);
    assert_eq!(
        first["items"],
        json!({ "bucket": target.bucket, "key": key })
    );
    let object = |target: &AwsTarget| {
        let out = target.fetch_output(&job);
        std::fs::read(out.join(format!("_baseline/chunks-{}.json", db.name))).unwrap()
    };
    let first_list = object(&target);

    let mut walker = Walker::new(&api, Some(&moto));
    let output = walk(&mut walker);
    let plan = &output["plan"];
    assert_eq!(plan["mode"], "s3", "{output}");
    assert_eq!(plan["chunks"], json!([]), "nothing inline");
    assert_eq!(plan["items"], first["items"]);
    assert!(walker.visited.iter().any(|s| s == "ChunksFromS3"));
    assert!(!walker.visited.iter().any(|s| s == "Chunks"));
    assert_eq!(
        object(&target),
        first_list,
        "a retried Plan writes the same list"
    );
    let listed: Vec<Value> = serde_json::from_slice(&first_list).unwrap();
    let chunks = walker
        .invocations
        .iter()
        .filter(|a| *a == "baseline.chunk")
        .count();
    assert!(chunks >= 3, "{:?}", walker.invocations);
    assert_eq!(
        (listed.len(), plan["chunk_count"].as_u64()),
        (chunks, Some(chunks as u64))
    );
    assert_eq!(output["baseline"]["tables"]["t"]["rows"], 3000, "{output}");

    // The snapshot in S3 plus the changes drained after it replay to the source exactly.
    db.sql("UPDATE t SET v = 'x' WHERE id = 5; DELETE FROM t WHERE id = 7; INSERT INTO t VALUES (3001, 'new')");
    let summary = api.call(json!({"action": "drain"}));
    assert_eq!(summary["rows"], 3, "{summary}");
    let out = target.fetch_output(&job);
    let expected = source_rows(&db);
    assert!(expected.contains("5=x") && expected.contains("3001=new"));
    assert_eq!(replayed(&out), expected);
}

/// The machine's chunk task, when the table changed shape since its plan (a column renamed
/// after the first chunk was read), reads nothing and answers `abandoned` — so the Map
/// completes and Finish finishes the other tables — and a task whose bounds are not its
/// plan's is refused; the next drain re-baselines the table in its new shape.
#[test]
fn a_chunk_task_after_a_rename_is_abandoned_and_a_foreign_one_refused() {
    let admin = pg_or_skip!();
    let db = three_thousand_rows(&admin, "asl_shape", ", x int NOT NULL DEFAULT 7");
    let job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\nbaseline: { chunk_rows: 1000, parallel: 3 }",
    );
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    api.call(json!({"action": "baseline.anchor"}));
    let plan = api.call(json!({"action": "baseline.plan"}));
    let chunks = plan["chunks"].as_array().unwrap().clone();
    assert!(chunks.len() >= 3, "{plan}");

    let mut foreign = chunks[1].clone();
    foreign["bounds"]["upper"] = json!(["5"]);
    let id = api.invoke(
        json!({"action": "baseline.chunk", "chunk": foreign}),
        std::time::Duration::from_secs(120),
    );
    let Outcome::Error(refused) = api.wait(&id, std::time::Duration::from_secs(120)) else {
        panic!("a chunk task with bounds of no plan was read");
    };
    assert!(
        refused.to_string().contains("SLUICE_BASELINE_NOT_ANCHORED"),
        "{refused}"
    );

    let read = api.call(json!({"action": "baseline.chunk", "chunk": chunks[0]}));
    assert!(read["rows"].as_u64().unwrap() > 0, "{read}");
    assert_eq!(read.get("abandoned"), None, "{read}");
    db.sql("ALTER TABLE t RENAME COLUMN x TO y");
    for task in &chunks[1..] {
        let out = api.call(json!({"action": "baseline.chunk", "chunk": task}));
        assert_eq!(out["abandoned"], true, "{out}");
        assert_eq!(out["rows"], 0, "{out}");
    }
    let finish = api.call(json!({"action": "baseline.finish"}));
    assert_eq!(
        finish["tables"],
        json!({}),
        "nothing of the old shape is finished: {finish}"
    );
    assert!(!job.out().join("t/snapshot/_SUCCESS").exists());

    db.sql("UPDATE t SET y = 8 WHERE id = 1");
    api.call(json!({"action": "drain"}));
    assert!(job.out().join("t/snapshot/_SUCCESS").exists());
    let state = support::replay(
        &support::baseline_and_changes(&job.out().join("t")),
        &["id"],
    );
    assert_eq!(state.len(), 3000);
    for (key, row) in &state {
        let want = if key[0].as_deref() == Some("1") {
            "8"
        } else {
            "7"
        };
        assert_eq!(
            row.get("y").cloned().flatten().as_deref(),
            Some(want),
            "{key:?}"
        );
        assert!(!row.contains_key("x"), "{row:?}");
    }
}
