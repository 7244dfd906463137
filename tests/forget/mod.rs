//! `sluice forget` against real sources: a table with a baseline, updates, key changes and
//! deletes of several keys across several drains, a compaction and a current state; a key
//! deleted in the source, drained, then forgotten — and checked every way a reader or an
//! auditor reads the destination: the folder's replay and `sluice sql` (DuckDB) equal the
//! source, `sluice materialize` equals it, and no byte of any file under the destination
//! (raw, and every cell of every Parquet file decoded) holds the key's values.
//!
//! * `postgres` — the whole flow, an idempotent rerun, the keys-file form, a key the
//!   source still holds refused, a kill at every fault point then a rerun;
//! * `mysql` — the flow on MariaDB with a hashed key column;
//! * `aws` — S3 (moto) and DynamoDB; the Lambda face's `forget` action.

mod aws;
mod mysql;
mod postgres;

use std::path::{Path, PathBuf};

use crate::compaction::{change_files, rows_of};
use crate::support::{self, Job, Row};

/// Every file below `dir`, recursively.
pub fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Panics when any file below `out` holds `needle` in its raw bytes, or any cell of any
/// Parquet file below it (decoded) contains it; returns how many Parquet files it read.
pub fn assert_nowhere(out: &Path, needle: &str) -> usize {
    let mut parquet = 0;
    for path in all_files(out) {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{} holds {needle:?} in its bytes",
            path.display()
        );
        if path.extension().is_some_and(|e| e == "parquet") {
            parquet += 1;
            for batch in support::read_batches(&path) {
                for row in support::render(&batch) {
                    for (column, value) in &row {
                        assert!(
                            !value.as_deref().unwrap_or_default().contains(needle),
                            "{} holds {needle:?} in column {column}: {row:?}",
                            path.display()
                        );
                    }
                }
            }
        }
    }
    parquet
}

/// Panics when any row of any Parquet file below `out` has `column` = `value`.
pub fn assert_no_row(out: &Path, column: &str, value: &str) {
    for path in all_files(out) {
        if path.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        for batch in support::read_batches(&path) {
            for row in support::render(&batch) {
                assert_ne!(
                    row.get(column).cloned().flatten().as_deref(),
                    Some(value),
                    "{} holds a row of {column}={value}: {row:?}",
                    path.display()
                );
            }
        }
    }
}

/// The rows a folder reader reads of `table`: the current plan's parts, then the change
/// parts, by (`__pos`, `__seq`).
pub fn folder_rows(out: &Path, table: &str) -> Vec<Row> {
    let dir = out.join(table);
    let mut rows = support::read_rows(&support::snapshot_dir(&dir), "part-");
    rows.extend(rows_of(&dir, &change_files(&dir)));
    rows.sort_by_key(|r| {
        (
            r["__pos"].clone(),
            r["__seq"].as_deref().map(|s| s.parse::<i64>().unwrap()),
        )
    });
    rows
}

/// `sluice forget --table <table>` with `args`; the run.
pub fn forget(job: &Job, table: &str, args: &[&str], env: &[(&str, &str)]) -> support::Run {
    let mut all = vec!["forget", "--table", table];
    all.extend_from_slice(args);
    job.run(&all, env)
}

/// [`forget`] that must succeed: its summary.
pub fn forget_ok(job: &Job, table: &str, args: &[&str]) -> serde_json::Value {
    let run = forget(job, table, args, &[]);
    assert_eq!(
        run.code, 0,
        "forget failed:\n{}\n{}",
        run.stdout, run.stderr
    );
    serde_json::from_str(run.stdout.trim()).unwrap()
}
