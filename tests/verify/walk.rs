//! The verify walker (infra/stepfunctions/verify.asl.json) walked by the ASL interpreter
//! against the real binary as its Lambda function: the differences one invocation finds
//! are found by chunks (each task folding only its range of the lake), a repair walk makes
//! the table equal, a clean table walks equal under concurrent writes, a key change whose
//! unlogged cells come from another chunk's key is filled across ranges, a table whose key
//! is text is verified whole by the finish, and a chunk list goes through S3 (moto) to
//! the Distributed Map.
//! Objects: databases `t_verify_walk_*`, `t_verify_walk_my_*`, a fresh bucket and state table.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{CONFIG, Writer, change_parts, edit_part, insert, verify};
use crate::support::asl::{self, Walker};
use crate::support::lambda_api::{Function, RuntimeApi};
use crate::support::{self, Job, TestDb, TestMysqlDb};

const ASL: &str = "infra/stepfunctions/verify.asl.json";

/// The report of the newest walk under `out` of its table number `t`
/// (`_verify/<run>/report-<t>.json`; run ids sort by time).
fn table_report(out: &Path, t: usize) -> Value {
    let name = format!("report-{t:04}.json");
    let mut runs: Vec<_> = std::fs::read_dir(out.join("_verify"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join(&name).exists())
        .collect();
    runs.sort();
    let report = runs.last().expect("a walk wrote its report").join(&name);
    serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap()
}

/// The report of the newest walk of a one-table job.
fn latest_report(out: &Path) -> Value {
    table_report(out, 1)
}

/// Every difference of a report as `(key, kind)`, sorted.
fn keys_and_kinds(report: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = report["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["differences"].as_array().unwrap().clone())
        .map(|d| {
            (
                d["key"].as_str().unwrap().to_owned(),
                d["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

/// One walk: the execution's output, or the error it failed with, and the actions run.
fn walk(api: &RuntimeApi, s3: Option<&str>, input: Value) -> (Result<Value, String>, Vec<String>) {
    let mut walker = Walker::new(api, s3);
    let outcome = walker
        .execute(&asl::definition(ASL), input)
        .map_err(|f| format!("{}: {}", f.error, f.cause));
    (outcome, walker.invocations)
}

fn count(actions: &[String], action: &str) -> usize {
    actions.iter().filter(|a| *a == action).count()
}

#[test]
fn the_definition_is_valid_asl() {
    let Some(validator) = asl::validator() else {
        return;
    };
    asl::valid(&validator, Path::new(ASL)).unwrap();
}

/// The cases of `super::injected_differences_found_and_repaired`, walked: the walk names
/// the keys one invocation names, a repair walk makes the table equal.
fn walked_differences_found_and_repaired(job: &Job, table: &str, sql: &dyn Fn(&str)) {
    super::inject_differences(job, table, sql);

    let api = RuntimeApi::start();
    let _function = Function::start(&api, job, &[]);
    let (outcome, actions) = walk(&api, None, json!({"table": table, "parallel": 2}));
    let failed = outcome.expect_err("rows differ");
    assert!(failed.starts_with("Sluice.VerifyDiffers"), "{failed}");
    let report = latest_report(&job.out());
    let s = |x: &str| x.to_owned();
    let expected = vec![
        (s("id=301"), s("missing_in_lake")),
        (s("id=302"), s("missing_in_lake")),
        (s("id=5"), s("different")),
        (s("id=5000"), s("extra_in_lake")),
        (s("id=7"), s("missing_in_lake")),
    ];
    assert_eq!(keys_and_kinds(&report), expected, "{report}");
    let planned = report["chunks_planned"].as_u64().unwrap() as usize;
    assert!(planned > 2, "{report}");
    assert_eq!(count(&actions, "verify.chunk"), planned, "{actions:?}");
    assert_eq!(count(&actions, "verify.finish"), 1, "{actions:?}");
    assert!(
        report["position"].is_string(),
        "re-checked at one position: {report}"
    );
    // One invocation finds exactly the same keys, and so does the CLI's walk.
    let one = verify(job, table, &[]);
    assert_eq!(one.keys_and_kinds(), expected, "{}", one.report);
    let here = verify(job, table, &["--by-chunks"]);
    assert_eq!(here.code, 5, "{}\n{}", here.line, here.stderr);
    assert_eq!(here.keys_and_kinds(), expected, "{}", here.report);
    assert_eq!(here.report["chunks_read"], report["chunks_read"]);
    // The chunk results are gone once the report is written.
    let leftovers: Vec<_> = walkdir(&job.out().join("_verify"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("chunk-")
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let (outcome, _) = walk(&api, None, json!({"table": table, "repair": true}));
    let output = outcome.unwrap_or_else(|e| panic!("the repair walk: {e}"));
    assert_eq!(output["verify"]["status"], "equal", "{output}");
    let report = latest_report(&job.out());
    assert_eq!(report["repair"]["rows_written"], 5, "{report}");
    assert_eq!(report["repair"]["after_mismatched_rows"], 0, "{report}");
    let again = verify(job, table, &[]);
    assert_eq!(again.code, 0, "{}\n{}", again.report, again.stderr);
    let (outcome, _) = walk(&api, None, json!({"table": table}));
    let output = outcome.unwrap();
    assert_eq!(output["verify"]["status"], "equal");
    // A retried finish (its chunk results are gone) answers with the report it wrote.
    let again = api.call(json!({"action": "verify.finish", "run": output["plan"]["run"]}));
    assert_eq!(again["status"], "equal", "{again}");
    assert_eq!(again["tables"], output["verify"]["tables"], "{again}");
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walkdir(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn postgres_a_walk_finds_what_one_invocation_finds_and_repairs_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_walk");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let job = Job::postgres(&db, &["public.t"], CONFIG);
    walked_differences_found_and_repaired(&job, "public.t", &|s: &str| {
        db.sql(s);
    });
}

#[test]
fn mariadb_a_walk_finds_what_one_invocation_finds_and_repairs_it() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "verify_walk_my");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(200), n int) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["t"], "", CONFIG);
    walked_differences_found_and_repaired(&job, "t", &|s: &str| {
        db.sql(s);
    });
}

/// A clean table walks equal while a thread updates, inserts and deletes rows of it (the
/// chunks compare with a lake behind the source; the finish re-checks them at one
/// position), and a sampled walk reads fewer chunks.
#[test]
fn postgres_a_clean_table_walks_equal_under_concurrent_writes() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_walk");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let job = Job::postgres(&db, &["public.t"], CONFIG);
    job.drain();
    db.sql(&insert("t", 1..=400));
    assert_eq!(job.drain()["status"], "drained");
    let url = db.url.clone();
    let writes: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(move |s: &str| {
        support::psql(&url, s);
    });
    let writer = Writer::start(move |n| {
        writes(&format!(
            "BEGIN; UPDATE t SET v = concat(v, 'x'), n = n + 1 WHERE id = {}; {} DELETE FROM t WHERE id = {}; COMMIT;",
            n % 400 + 1,
            insert("t", std::iter::once(1000 + n as i64)),
            1000 + n as i64 - 1,
        ))
    });
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    for _ in 0..2 {
        let (outcome, _) = walk(&api, None, json!({"table": "public.t", "parallel": 3}));
        let output = outcome.unwrap_or_else(|e| panic!("a false difference: {e}"));
        assert_eq!(output["verify"]["status"], "equal", "{output}");
        eprintln!(
            "walked under writes: {}",
            output["verify"]["tables"][0]["summary"]
        );
    }
    let (outcome, actions) = walk(&api, None, json!({"table": "public.t", "sample": 40}));
    let writes = writer.stop();
    assert!(writes > 0, "the writer ran");
    let output = outcome.unwrap_or_else(|e| panic!("a false difference: {e}"));
    assert_eq!(output["verify"]["status"], "equal", "{output}");
    let report = latest_report(&job.out());
    assert_eq!(report["mode"], "sample");
    let read = report["chunks_read"].as_u64().unwrap();
    assert!(
        read < report["chunks_planned"].as_u64().unwrap(),
        "{report}"
    );
    assert_eq!(count(&actions, "verify.chunk") as u64, read);
}

/// A key change (id 5 → 1005, into another chunk) whose TOASTed value PostgreSQL does not
/// log: the new key's chunk fills it from the old key's rows in another range, as the full
/// fold does — the walk is equal, and an edit of that value in the old key's part is found
/// on the new key.
#[test]
fn postgres_a_key_change_across_chunks_is_filled_from_the_old_keys_range() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_walk");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int, big text)");
    db.sql("ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL");
    let job = Job::postgres(&db, &["public.t"], CONFIG);
    job.drain();
    db.sql("INSERT INTO t SELECT i, 'v' || i, i, NULL FROM generate_series(1, 300) i");
    // Incompressible and external: stored out of line, not logged when unchanged.
    db.sql("UPDATE t SET big = (SELECT string_agg(md5(i::text || g::text), '') FROM generate_series(1, 400) g) FROM generate_series(5, 5) i WHERE id = 5");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET id = 1005, n = 0 WHERE id = 5");
    assert_eq!(job.drain()["status"], "drained");
    let unlogged = change_parts(&job, "public.t")
        .iter()
        .flat_map(|p| support::read_batches(p))
        .any(|b| {
            let u = b.column_by_name("__unlogged").unwrap();
            u.null_count() < u.len()
        });
    assert!(
        unlogged,
        "PostgreSQL left the TOASTed value unlogged in the key change"
    );

    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let (outcome, _) = walk(&api, None, json!({"table": "public.t"}));
    let output = outcome.unwrap_or_else(|e| panic!("a false difference: {e}"));
    assert_eq!(output["verify"]["status"], "equal", "{output}");
    let report = latest_report(&job.out());
    assert!(report["chunks_read"].as_u64().unwrap() > 2, "{report}");

    // The old key's value edited in the part that wrote it: the new key differs in `big`.
    let parts = change_parts(&job, "public.t");
    let holder = parts
        .iter()
        .find(|p| {
            support::read_batches(p).iter().any(|b| {
                b.column_by_name("big")
                    .is_some_and(|c| c.null_count() < c.len())
            })
        })
        .unwrap()
        .clone();
    edit_part(&holder, |b| {
        let index = b.schema().index_of("big").unwrap();
        let big = arrow_cast::cast(b.column(index), &arrow_schema::DataType::Utf8).unwrap();
        let big = arrow_array::cast::AsArray::as_string::<i32>(&big);
        let edited: arrow_array::StringArray = big
            .iter()
            .map(|v| {
                v.map(|v| {
                    if v.len() > 100 {
                        "edited".to_owned()
                    } else {
                        v.to_owned()
                    }
                })
            })
            .collect();
        let mut columns = b.columns().to_vec();
        columns[index] = arrow_cast::cast(&edited, b.column(index).data_type()).unwrap();
        arrow_array::RecordBatch::try_new(b.schema(), columns).unwrap()
    });
    let (outcome, _) = walk(&api, None, json!({"table": "public.t"}));
    assert!(outcome.is_err());
    let report = latest_report(&job.out());
    let found: Vec<Value> = report["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["differences"].as_array().unwrap().clone())
        .collect();
    assert_eq!(
        found,
        [json!({"key": "id=1005", "kind": "different", "columns": ["big"]})],
        "{report}"
    );
}

/// A job of two tables, one keyed by text: its chunks follow PostgreSQL's collation, which
/// sluice does not reproduce, so the finish verifies it whole, while the integer-keyed one
/// is walked by chunks — one execution for both; a difference in either fails it and is
/// named in that table's report.
#[test]
fn postgres_a_text_keyed_table_is_verified_whole_beside_a_walked_one() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_walk");
    db.sql("CREATE TABLE s (code text PRIMARY KEY, v text)");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let job = Job::postgres(&db, &["public.s", "public.t"], CONFIG);
    job.drain();
    db.sql("INSERT INTO s SELECT 'c' || i, 'v' || i FROM generate_series(1, 120) i");
    db.sql(&insert("t", 1..=150));
    assert_eq!(job.drain()["status"], "drained");
    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let (outcome, actions) = walk(&api, None, json!({}));
    let output = outcome.unwrap();
    assert_eq!(output["verify"]["status"], "equal", "{output}");
    let chunks = count(&actions, "verify.chunk");
    assert!(chunks >= 3, "t is walked: {actions:?}");
    assert_eq!(actions.len(), chunks + 2, "{actions:?}");
    assert_eq!(output["verify"]["tables"][0]["table"], "public.s");
    assert!(
        output["plan"]["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["table"] == "public.t"),
        "only t is walked by chunks: {output}"
    );
    // The lake holds c7 until a drain; the finish drains, so it is equal again.
    db.sql("DELETE FROM s WHERE code = 'c7'");
    let (outcome, _) = walk(&api, None, json!({"table": "public.s"}));
    assert_eq!(outcome.unwrap()["verify"]["status"], "equal");
    let part = change_parts(&job, "public.s")[0].clone();
    edit_part(&part, |b| {
        let index = b.schema().index_of("v").unwrap();
        let v = arrow_cast::cast(b.column(index), &arrow_schema::DataType::Utf8).unwrap();
        let v = arrow_array::cast::AsArray::as_string::<i32>(&v);
        let edited: arrow_array::StringArray = v
            .iter()
            .map(|x| {
                x.map(|x| {
                    if x == "v9" {
                        "edited".to_owned()
                    } else {
                        x.to_owned()
                    }
                })
            })
            .collect();
        let mut columns = b.columns().to_vec();
        columns[index] = arrow_cast::cast(&edited, b.column(index).data_type()).unwrap();
        arrow_array::RecordBatch::try_new(b.schema(), columns).unwrap()
    });
    let (outcome, _) = walk(&api, None, json!({}));
    assert!(outcome.unwrap_err().starts_with("Sluice.VerifyDiffers"));
    assert_eq!(
        keys_and_kinds(&table_report(&job.out(), 1)),
        [("code=c9".to_owned(), "different".to_owned())]
    );
    let t = table_report(&job.out(), 2);
    assert_eq!(
        (t["table"].as_str(), t["mismatched_rows"].as_u64()),
        (Some("public.t"), Some(0)),
        "{t}"
    );
}

/// On S3 (moto): a chunk list longer than `inline_plan_max_bytes` goes through the bucket
/// to the Distributed Map's ItemReader; an object deleted from the bucket is found by key.
#[test]
fn s3_a_walk_reads_its_chunk_list_from_the_bucket() {
    let admin = pg_or_skip!();
    let moto = aws_or_skip!();
    let db = TestDb::new(&admin, "verify_walk_s3");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let target = crate::support::aws::AwsTarget::new(&moto);
    let job = target.job(
        &db,
        &["t"],
        "baseline: { chunk_rows: 50, inline_plan_max_bytes: 64 }",
    );
    super::aws::lose_the_object_of_301(&db, &job, &target, &moto);

    let api = RuntimeApi::start();
    let _function = Function::start(&api, &job, &[]);
    let mut walker = Walker::new(&api, Some(&moto));
    let failed = walker
        .execute(&asl::definition(ASL), json!({"table": "t"}))
        .expect_err("two rows are missing");
    assert_eq!(failed.error, "Sluice.VerifyDiffers", "{failed:?}");
    assert!(
        walker.visited.iter().any(|s| s == "ChunksFromS3"),
        "{:?}",
        walker.visited
    );
    assert!(count(&walker.invocations, "verify.chunk") > 2);
    let report = latest_report(&target.fetch_output(&job));
    assert_eq!(
        keys_and_kinds(&report),
        [
            ("id=301".to_owned(), "missing_in_lake".to_owned()),
            ("id=302".to_owned(), "missing_in_lake".to_owned())
        ],
        "{report}"
    );
    // The chunk list and the chunk results were removed; the plan and report stay.
    let left: Vec<String> = target
        .keys()
        .into_iter()
        .filter(|k| k.contains("/_verify/"))
        .collect();
    assert!(
        left.iter()
            .all(|k| k.ends_with("/plan.json") || k.ends_with("/report-0001.json")),
        "{left:?}"
    );
}
