//! `sluice compact` against real sources and backends: many small runs, then compactions
//! — plain, killed at every fault point, paused while a reader lists the folder or a
//! drain runs, twice at once, on a corrupt part — each checked the three ways a reader
//! can read the output: every data file in the folder (duplicates byte-identical, the
//! replay equal to the source), the live parts the manifests name (every change exactly
//! once), and `sluice sql`'s query run by DuckDB.
//!
//! * `postgres` / `mysql` — the plain flow on each engine, chains of compactions, the
//!   dated layout (MariaDB over two dates);
//! * `crashes` — a kill at every fault point then the next compaction, readers and a
//!   drain during a compaction, two compactions at once, a compaction that lost its lease;
//! * `corrupt` — a part that does not hold its manifest's rows is refused, the other
//!   tables go on;
//! * `retention` — history older than `output.history_retention` folded into a new
//!   baseline plan, the parts it superseded and the earlier plan removed;
//! * `aws` — S3 (moto) and DynamoDB;
//! * `fan_out` — the compaction state machine walked over the real Lambda face.

mod aws;
mod corrupt;
mod crashes;
mod fan_out;
mod iceberg;
mod mysql;
mod postgres;
mod retention;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::{self, Job, Row};

/// The config block of the tests: every part old enough, small targets.
pub fn config_block(target_bytes: u64) -> String {
    format!(
        "compaction: {{ min_age_seconds: 0, target_bytes: {target_bytes}, lease_ttl_seconds: 30 }}"
    )
}

/// Every data file below `table_dir` (a `.parquet` no name of whose path starts with `_`
/// or `.`: what a folder reader opens), relative, sorted.
pub fn data_files(table_dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('_') || name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                walk(&path, root, out);
            } else if name.ends_with(".parquet") {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(table_dir, table_dir, &mut out);
    out.sort();
    out
}

/// The change files among `data_files` (not the baseline's).
pub fn change_files(table_dir: &Path) -> Vec<String> {
    data_files(table_dir)
        .into_iter()
        .filter(|f| !f.starts_with("snapshot/"))
        .collect()
}

/// Every row of `files` (relative to `table_dir`), sorted by (`__pos`, `__seq`).
pub fn rows_of(table_dir: &Path, files: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for file in files {
        for batch in support::read_batches(&table_dir.join(file)) {
            rows.extend(support::render(&batch));
        }
    }
    rows.sort_by_key(|r| {
        (
            r["__pos"].clone(),
            r["__seq"].as_deref().map(|s| s.parse::<i64>().unwrap()),
        )
    });
    rows
}

/// The distinct changes of `rows` by (`__pos`, `__seq`); panics when two copies differ.
pub fn changes(rows: &[Row]) -> BTreeMap<(Option<String>, Option<String>), Row> {
    let mut by_position = BTreeMap::new();
    for row in rows {
        let at = (row["__pos"].clone(), row["__seq"].clone());
        if let Some(previous) = by_position.insert(at.clone(), row.clone()) {
            assert_eq!(previous, *row, "copies at {at:?} differ");
        }
    }
    by_position
}

/// The live parts of `table` as docs/compaction.md defines them: every `parts` entry of
/// the run manifests and the compaction manifests, minus every `replaced` entry; file
/// names relative to the table folder. Panics when two manifests list one part.
pub fn live_files(out: &Path, table: &str) -> BTreeSet<String> {
    let dir = out.join(table);
    let mut listed = BTreeSet::new();
    let mut replaced = BTreeSet::new();
    for folder in ["_manifests", "_compactions"] {
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let doc: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let rel = |p: &serde_json::Value| {
                p["key"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(&format!("{table}/"))
                    .unwrap()
                    .to_owned()
            };
            for part in doc["parts"].as_array().into_iter().flatten() {
                assert!(listed.insert(rel(part)), "{} listed twice", rel(part));
            }
            for part in doc["replaced"].as_array().into_iter().flatten() {
                replaced.insert(rel(part));
            }
        }
    }
    listed.difference(&replaced).cloned().collect()
}

/// Checks `table`'s folder against `expected` (the distinct changes before any
/// compaction) every way a reader reads it: the folder's change rows are those changes
/// (copies identical), the live parts exist and hold each change exactly once. Returns
/// the folder's rows, sorted.
pub fn assert_reads(
    out: &Path,
    table: &str,
    expected: &BTreeMap<(Option<String>, Option<String>), Row>,
) -> Vec<Row> {
    let dir = out.join(table);
    let rows = rows_of(&dir, &change_files(&dir));
    assert_eq!(&changes(&rows), expected, "the folder's distinct changes");
    let live: Vec<String> = live_files(out, table).into_iter().collect();
    for file in &live {
        assert!(
            dir.join(file).is_file(),
            "live part {file} is not in the folder"
        );
    }
    let followed = rows_of(&dir, &live);
    assert_eq!(
        followed.len(),
        expected.len(),
        "the live parts hold each change once"
    );
    assert_eq!(&changes(&followed), expected, "the live parts' changes");
    rows
}

/// `id=v,…` in id order (NULL as `NULL`) of the replayed `rows` (key `id`, column `v`).
pub fn replayed(rows: &[Row]) -> String {
    let mut state: Vec<(i64, String)> = support::replay(rows, &["id"])
        .values()
        .map(|r| {
            (
                r["id"].as_deref().unwrap().parse().unwrap(),
                r["v"].clone().unwrap_or_else(|| "NULL".into()),
            )
        })
        .collect();
    state.sort();
    state
        .into_iter()
        .map(|(id, v)| format!("{id}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs `sluice compact` (with `env`); must exit 0; its summary.
pub fn compact(job: &Job, env: &[(&str, &str)]) -> serde_json::Value {
    let run = job.run(&["compact"], env);
    assert_eq!(
        run.code, 0,
        "compact failed:\n{}\n{}",
        run.stdout, run.stderr
    );
    run.summary()
}

/// A copy of `job` (config, output and state) in a new directory, to crash a compaction
/// on without touching the original.
pub fn clone_job(job: &Job) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let from = job.dir.path();
    copy_dir(&from.join("out"), &dir.path().join("out"));
    copy_dir(&from.join("state"), &dir.path().join("state"));
    let yaml = std::fs::read_to_string(&job.config).unwrap().replace(
        &from.display().to_string(),
        &dir.path().display().to_string(),
    );
    let config = dir.path().join("sluice.yaml");
    std::fs::write(&config, yaml).unwrap();
    Job {
        dir,
        config,
        url_env: job.url_env.clone(),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target: PathBuf = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// The only compaction manifest of `table` (panics unless there is exactly `n`).
pub fn compaction_manifests(out: &Path, table: &str) -> Vec<serde_json::Value> {
    let mut docs: Vec<(String, serde_json::Value)> =
        std::fs::read_dir(out.join(table).join("_compactions"))
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .map(|p| {
                        (
                            p.display().to_string(),
                            serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    docs.into_iter().map(|(_, d)| d).collect()
}
