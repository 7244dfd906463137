//! `sluice verify` against real sources: a clean table verifies equal while a thread
//! writes to it (no false difference), each injected difference — a deleted part, a part
//! edited (a changed cell, a missing row, an extra row), a row taken out of the
//! baseline's snapshot — is found and named by key, `--repair` makes the next verify
//! clean, a keyless table compares as a multiset, and a sampled verify runs.
//!
//! * `postgres` / `mysql` — the same cases on each engine (local destination and state);
//!   `postgres` also verifies a table under a column policy and row filter against the
//!   policy-applied source;
//! * `aws` — S3 and DynamoDB (moto): an object deleted from the bucket, found, repaired,
//!   and verified clean by the CLI and the Lambda face.

pub(crate) mod aws;
mod mysql;
mod postgres;
mod walk;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};

use crate::support::{self, Job};

/// The config block of the tests: small chunks, so a table of a few hundred rows has
/// several.
pub const CONFIG: &str = "baseline: { chunk_rows: 50 }";

/// One verify: exit code, summary line, JSON report.
pub struct Verified {
    pub code: i32,
    pub line: String,
    pub report: serde_json::Value,
    pub stderr: String,
}

impl Verified {
    /// Every difference of every chunk as `(key, kind, columns)`, sorted.
    pub fn differences(&self) -> Vec<(String, String, Vec<String>)> {
        let mut out = Vec::new();
        for chunk in self.report["chunks"].as_array().unwrap() {
            for d in chunk["differences"].as_array().unwrap() {
                let columns = d["columns"]
                    .as_array()
                    .map(|c| c.iter().map(|x| x.as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default();
                out.push((
                    d["key"].as_str().unwrap().to_owned(),
                    d["kind"].as_str().unwrap().to_owned(),
                    columns,
                ));
            }
        }
        out.sort();
        out
    }

    /// Every difference as `(key, kind)`, sorted.
    pub fn keys_and_kinds(&self) -> Vec<(String, String)> {
        self.differences()
            .into_iter()
            .map(|(key, kind, _)| (key, kind))
            .collect()
    }
}

/// Runs `sluice verify --table <table> <extra…> --json <file>`.
pub fn verify(job: &Job, table: &str, extra: &[&str]) -> Verified {
    let json = job.dir.path().join("verify.json");
    let _ = std::fs::remove_file(&json);
    let mut args = vec!["verify", "--table", table, "--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = job.run(&args, &[]);
    let report = std::fs::read(&json)
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or(serde_json::Value::Null);
    Verified {
        code: run.code,
        line: run.stdout.trim().to_owned(),
        report,
        stderr: run.stderr,
    }
}

/// Every `.parquet` below `dir` (no name starting with `_` or `.`, nor `skip`).
fn parquet_files(dir: &Path, skip: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, skip: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('_') || name.starts_with('.') || name == skip {
                continue;
            }
            if path.is_dir() {
                walk(&path, skip, out);
            } else if name.ends_with(".parquet") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, skip, &mut out);
    out
}

/// The change parts of `table` (not the baseline's), in name order.
pub fn change_parts(job: &Job, table: &str) -> Vec<PathBuf> {
    let mut out = parquet_files(&job.out().join(table), "snapshot");
    out.sort_by_key(|p| p.file_name().unwrap().to_owned());
    out
}

/// The part among `parts` holding a row whose `id` is `id`.
pub fn part_with(parts: &[PathBuf], id: i64) -> PathBuf {
    parts
        .iter()
        .find(|p| {
            support::read_batches(p)
                .iter()
                .any(|b| ids(b).contains(&Some(id)))
        })
        .unwrap_or_else(|| panic!("no part holds id {id}"))
        .clone()
}

fn ids(batch: &RecordBatch) -> Vec<Option<i64>> {
    let id = arrow_cast::cast(
        batch.column_by_name("id").unwrap(),
        &arrow_schema::DataType::Int64,
    )
    .unwrap();
    id.as_primitive::<arrow_array::types::Int64Type>()
        .iter()
        .collect()
}

/// Rewrites the part at `path` (one batch) with `edit` — an engineer's manual fix, a
/// tool gone wrong.
pub fn edit_part(path: &Path, edit: impl Fn(RecordBatch) -> RecordBatch) {
    let batches = support::read_batches(path);
    let schema = batches[0].schema();
    let whole = arrow_select::concat::concat_batches(&schema, &batches).unwrap();
    let edited = edit(whole);
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, edited.schema(), None).unwrap();
    writer.write(&edited).unwrap();
    writer.close().unwrap();
}

/// `batch` without the rows whose `id` is `id`.
pub fn without(batch: RecordBatch, id: i64) -> RecordBatch {
    let keep: BooleanArray = ids(&batch).iter().map(|i| Some(*i != Some(id))).collect();
    arrow_select::filter::filter_record_batch(&batch, &keep).unwrap()
}

/// `batch` with `v` set to `value` in the rows whose `id` is `id`.
pub fn with_v(batch: RecordBatch, id: i64, value: &str) -> RecordBatch {
    let ids = ids(&batch);
    let index = batch.schema().index_of("v").unwrap();
    let old = arrow_cast::cast(batch.column(index), &arrow_schema::DataType::Utf8).unwrap();
    let old = old.as_string::<i32>();
    let new: StringArray = (0..batch.num_rows())
        .map(|i| {
            if ids[i] == Some(id) {
                Some(value.to_owned())
            } else {
                old.is_valid(i).then(|| old.value(i).to_owned())
            }
        })
        .collect();
    let new = arrow_cast::cast(&new, batch.column(index).data_type()).unwrap();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[index] = new;
    RecordBatch::try_new(batch.schema(), columns).unwrap()
}

/// `batch` with one more row: a copy of the row whose `id` is `from`, with `id` = `to`.
pub fn with_copy(batch: RecordBatch, from: i64, to: i64) -> RecordBatch {
    let position = ids(&batch).iter().position(|i| *i == Some(from)).unwrap();
    let row = batch.slice(position, 1);
    let index = batch.schema().index_of("id").unwrap();
    let id: ArrayRef = Arc::new(Int64Array::from(vec![to]));
    let id = arrow_cast::cast(&id, batch.column(index).data_type()).unwrap();
    let mut columns: Vec<ArrayRef> = row.columns().to_vec();
    columns[index] = id;
    let row = RecordBatch::try_new(batch.schema(), columns).unwrap();
    arrow_select::concat::concat_batches(&batch.schema(), &[batch, row]).unwrap()
}

/// A thread running `write` (one small transaction) over and over until the returned
/// guard is dropped; returns how many it ran.
pub struct Writer {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Writer {
    pub fn start(write: impl Fn(u64) + Send + 'static) -> Writer {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut n = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                write(n);
                n += 1;
            }
            n
        });
        Writer {
            stop,
            handle: Some(handle),
        }
    }

    pub fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

/// `INSERT INTO <table> VALUES (id, 'v<id>', id), …` for `ids`.
pub fn insert(table: &str, ids: impl Iterator<Item = i64>) -> String {
    let rows: Vec<String> = ids.map(|i| format!("({i}, 'v{i}', {i})")).collect();
    format!("INSERT INTO {table} VALUES {};", rows.join(", "))
}

/// A clean table `t (id, v, n)` of 400 rows over several chunks verifies equal, twice,
/// while a thread updates, inserts and deletes rows of it; a sampled verify reads fewer
/// chunks and is equal too.
pub fn clean_under_writes(job: &Job, table: &str, sql: Arc<dyn Fn(&str) + Send + Sync>) {
    job.drain();
    sql(&insert("t", 1..=400));
    assert_eq!(job.drain()["status"], "drained");
    let writes = sql.clone();
    let writer = Writer::start(move |n| {
        writes(&format!(
            "BEGIN; UPDATE t SET v = concat(v, 'x'), n = n + 1 WHERE id = {}; {} DELETE FROM t WHERE id = {}; COMMIT;",
            n % 400 + 1,
            insert("t", std::iter::once(1000 + n as i64)),
            1000 + n as i64 - 1,
        ))
    });
    for _ in 0..2 {
        let v = verify(job, table, &[]);
        assert_eq!(v.code, 0, "{}\n{}\n{}", v.line, v.report, v.stderr);
        assert_eq!(v.report["mismatched_rows"], 0, "{}", v.report);
        assert!(
            v.report["chunks_read"].as_u64().unwrap() > 1,
            "{}",
            v.report
        );
        assert!(v.line.contains("status=equal"), "{}", v.line);
        eprintln!("under writes: {}", v.line);
    }
    let sampled = verify(job, table, &["--sample", "40%"]);
    let writes = writer.stop();
    assert!(writes > 0, "the writer ran");
    assert_eq!(sampled.code, 0, "{}\n{}", sampled.report, sampled.stderr);
    assert_eq!(sampled.report["mode"], "sample");
    assert!(
        sampled.report["chunks_read"].as_u64() < sampled.report["chunks_planned"].as_u64(),
        "{}",
        sampled.report
    );
    // The sample was walked in the one process (its run folder), and left nothing of the
    // walk behind.
    let runs: Vec<PathBuf> = std::fs::read_dir(job.out().join("_verify"))
        .expect("the sample was walked")
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let left: Vec<PathBuf> = std::fs::read_dir(&runs[0])
        .map(|files| files.map(|f| f.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// Writes rows 1..=200, 301, 302 and an update of 10 to `t` (a drain after each), then
/// deletes the part holding 301 and 302 and edits the one holding 5: id 5's `v` changed,
/// id 7's row gone, a row 5000 the source never had.
pub fn inject_differences(job: &Job, table: &str, sql: &dyn Fn(&str)) {
    job.drain();
    sql(&insert("t", 1..=200));
    job.drain();
    sql(&insert("t", 301..=302));
    job.drain();
    sql("UPDATE t SET v = 'u' WHERE id = 10");
    job.drain();
    let parts = change_parts(job, table);
    let first = part_with(&parts, 5);
    std::fs::remove_file(part_with(&parts, 301)).unwrap();
    edit_part(&first, |b| {
        with_copy(without(with_v(b, 5, "edited"), 7), 8, 5000)
    });
}

/// A deleted part (keys 301, 302 missing), an edited part (id 5's `v` changed, id 7's row
/// gone, a row 5000 the source never had) are each found and named by key — never by
/// value; `--repair` writes the source's rows and the next verify is clean.
pub fn injected_differences_found_and_repaired(
    job: &Job,
    table: &str,
    sql: &dyn Fn(&str),
    source_text: &dyn Fn() -> String,
) {
    inject_differences(job, table, sql);

    let v = verify(job, table, &[]);
    assert_eq!(v.code, 5, "{}\n{}\n{}", v.line, v.report, v.stderr);
    let s = |x: &str| x.to_owned();
    assert_eq!(
        v.differences(),
        vec![
            (s("id=301"), s("missing_in_lake"), vec![]),
            (s("id=302"), s("missing_in_lake"), vec![]),
            (s("id=5"), s("different"), vec![s("v")]),
            (s("id=5000"), s("extra_in_lake"), vec![]),
            (s("id=7"), s("missing_in_lake"), vec![]),
        ],
        "{}",
        v.report
    );
    assert_eq!(v.report["mismatched_rows"], 5);
    let text = v.report.to_string();
    assert!(
        !text.contains("edited") && !text.contains("v7"),
        "the report holds no value: {text}"
    );
    assert!(v.line.contains("status=differs"), "{}", v.line);

    let repaired = verify(job, table, &["--repair"]);
    assert_eq!(
        repaired.code, 0,
        "{}\n{}\n{}",
        repaired.line, repaired.report, repaired.stderr
    );
    assert_eq!(
        repaired.report["repair"]["rows_written"], 5,
        "{}",
        repaired.report
    );
    assert_eq!(repaired.report["repair"]["after_mismatched_rows"], 0);
    sql("UPDATE t SET v = 'after' WHERE id = 5");
    let again = verify(job, table, &[]);
    assert_eq!(again.code, 0, "{}\n{}", again.report, again.stderr);
    if let Some(text) = support::readers::sluice_sql_replayed(job, table, "id", "v", "=") {
        let sorted = |t: String| {
            let mut items: Vec<String> = t.split(',').map(str::to_owned).collect();
            items.sort();
            items
        };
        assert_eq!(
            sorted(text),
            sorted(source_text()),
            "the replay SQL reads the repair"
        );
    }
}

/// A table without a key: equal as a multiset (duplicate rows included); a row copy
/// dropped from a part is found as a count; `--repair` is refused for it.
pub fn keyless_multiset(job: &Job, table: &str, sql: &dyn Fn(&str)) {
    job.drain();
    sql("INSERT INTO k VALUES (1, 'a'), (1, 'a'), (2, 'b'), (3, NULL)");
    job.drain();
    sql("DELETE FROM k WHERE a = 2");
    job.drain();
    let v = verify(job, table, &[]);
    assert_eq!(v.code, 0, "{}\n{}\n{}", v.line, v.report, v.stderr);
    assert_eq!(v.report["multiset"], serde_json::json!([]));
    let parts = change_parts(job, table);
    let key_a = |b: &RecordBatch| {
        let a = arrow_cast::cast(
            b.column_by_name("a").unwrap(),
            &arrow_schema::DataType::Int64,
        )
        .unwrap();
        a.as_primitive::<arrow_array::types::Int64Type>()
            .iter()
            .position(|x| x == Some(1))
    };
    edit_part(&parts[0], |b| {
        let drop = key_a(&b).unwrap();
        let keep: BooleanArray = (0..b.num_rows()).map(|i| Some(i != drop)).collect();
        arrow_select::filter::filter_record_batch(&b, &keep).unwrap()
    });
    let v = verify(job, table, &[]);
    assert_eq!(v.code, 5, "{}\n{}\n{}", v.line, v.report, v.stderr);
    let found = v.report["multiset"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{}", v.report);
    assert_eq!(
        (found[0]["source"].as_i64(), found[0]["lake"].as_i64()),
        (Some(2), Some(1))
    );
    assert_eq!(v.report["mismatched_rows"], 1);
}

/// The baseline's parts of `table` (`snapshot/<plan>/…`), in path order.
pub fn snapshot_parts(job: &Job, table: &str) -> Vec<PathBuf> {
    let mut out = parquet_files(&job.out().join(table).join("snapshot"), "");
    out.sort();
    out
}

/// A table of 300 rows baselined (`job` has `initial: snapshot`); a row taken out of the
/// baseline's part is found by key (`missing_in_lake`), `--repair` brings it back, and
/// the next verify — after more changes — is clean.
pub fn snapshot_row_missing_found_and_repaired(job: &Job, table: &str, sql: &dyn Fn(&str)) {
    sql(&insert("t", 1..=300));
    assert_eq!(job.drain()["status"], "drained");
    let parts = snapshot_parts(job, table);
    assert!(!parts.is_empty(), "the baseline wrote parts");
    edit_part(&part_with(&parts, 42), |b| without(b, 42));

    let v = verify(job, table, &[]);
    assert_eq!(v.code, 5, "{}\n{}\n{}", v.line, v.report, v.stderr);
    assert_eq!(
        v.keys_and_kinds(),
        [("id=42".to_owned(), "missing_in_lake".to_owned())],
        "{}",
        v.report
    );
    let repaired = verify(job, table, &["--repair"]);
    assert_eq!(
        repaired.code, 0,
        "{}\n{}\n{}",
        repaired.line, repaired.report, repaired.stderr
    );
    assert_eq!(repaired.report["repair"]["rows_written"], 1);
    sql("UPDATE t SET v = 'later' WHERE id = 42; DELETE FROM t WHERE id = 43;");
    assert_eq!(job.drain()["status"], "drained");
    let again = verify(job, table, &[]);
    assert_eq!(again.code, 0, "{}\n{}", again.report, again.stderr);
}
