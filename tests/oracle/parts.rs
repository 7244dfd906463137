//! Reads every part a job wrote back into rows of canonical cells, straight from the
//! Arrow arrays (not through a display formatter), in the order the runs wrote them — a
//! compaction's parts (`compacted-*`) at the place of their first change — and the live
//! parts the manifests name (docs/compaction.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, Time64MicrosecondType, TimestampMicrosecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::canon::{self, Cell};

/// One row of a part.
#[derive(Debug, Clone, PartialEq)]
pub struct PartRow {
    /// The part's file name (`cdc-<run_id>-<nnnnnn>.parquet`, `compacted-<id>-<n>.parquet`
    /// or `snapshot/<plan>/part-…`).
    pub file: String,
    /// The run that wrote it (`snapshot` for baseline parts; a compacted part's own name,
    /// its rows being in stream order).
    pub run: String,
    pub op: String,
    pub pos: String,
    pub seq: i64,
    /// Columns the source did not log in this row.
    pub unlogged: Vec<String>,
    /// Every column, metadata included, as canonical cells (for identity checks).
    pub all: BTreeMap<String, Cell>,
}

impl PartRow {
    /// A source column's cell.
    pub fn cell(&self, column: &str) -> Option<&Cell> {
        self.all.get(column)
    }
}

const META: [&str; 5] = ["__op", "__pos", "__seq", "__ts", "__unlogged"];

/// True for the metadata columns sluice writes before the source's.
pub fn is_meta(column: &str) -> bool {
    META.contains(&column)
}

/// Every row of `<out>/<table>/snapshot/<plan>/part-*.parquet` then `<out>/<table>/cdc-*.parquet`,
/// parts in name order (run id, then part number), rows in file order. A compacted part
/// (`compacted-*.parquet`) is read as the parts it holds, in their places: its rows are
/// split by the row counts its compaction manifests record (followed through compactions
/// of compacted parts) into segments named after the original parts (`file` =
/// `<original> (in <compacted>)`, `run` = the original's run), so the write order the
/// checks look at is the drains' own. A segment whose original is still in the folder (a
/// compaction stopped before its removals), or that another compacted part also holds,
/// must equal it row for row and is not repeated. A compacted part no manifest names (a
/// compaction stopped before its manifest: copies of parts still there) comes last.
pub fn read_table(out: &Path, table: &str) -> Result<Vec<PartRow>, String> {
    let dir = out.join(table);
    let origins = origins(out, table)?;
    let mut snapshot = Vec::new();
    let mut changes: BTreeMap<String, Vec<PartRow>> = BTreeMap::new();
    let mut compacted = Vec::new();
    for (path, run) in part_files(&dir)? {
        let file = path.strip_prefix(&dir).unwrap().display().to_string();
        if run == "snapshot" {
            snapshot.extend(read_file(&path, &file, &run)?);
        } else if run.starts_with("compacted-") {
            compacted.push((path, file));
        } else {
            changes.insert(file.clone(), read_file(&path, &file, &run)?);
        }
    }
    let mut orphans = Vec::new();
    for (path, file) in compacted {
        let rows = read_file(&path, &file, &file)?;
        let Some(segments) = origins.get(&file) else {
            orphans.extend(rows);
            continue;
        };
        for (original, segment) in split(rows, &file, segments)? {
            match changes.get(&original) {
                Some(held) => same_rows(held, &segment, &original, &file)?,
                None => {
                    changes.insert(original, segment);
                }
            }
        }
    }
    let mut rows = snapshot;
    rows.extend(changes.into_values().flatten());
    rows.extend(orphans);
    Ok(rows)
}

/// The rows of the live change parts `live` (file names relative to the table folder),
/// compacted parts read as the parts they hold ([`read_table`]), in name order.
pub fn read_live(
    out: &Path,
    table: &str,
    live: &BTreeMap<String, usize>,
) -> Result<Vec<PartRow>, String> {
    let dir = out.join(table);
    let origins = origins(out, table)?;
    let mut changes: BTreeMap<String, Vec<PartRow>> = BTreeMap::new();
    for file in live.keys() {
        let path = dir.join(file);
        match origins.get(file) {
            Some(segments) => {
                let rows = read_file(&path, file, file)?;
                for (original, segment) in split(rows, file, segments)? {
                    if changes.insert(original.clone(), segment).is_some() {
                        return Err(format!("{original} is held by two live parts"));
                    }
                }
            }
            None => {
                let run = run_of(file).unwrap_or_else(|| file.clone());
                if changes
                    .insert(file.clone(), read_file(&path, file, &run)?)
                    .is_some()
                {
                    return Err(format!("{file} is held by two live parts"));
                }
            }
        }
    }
    Ok(changes.into_values().flatten().collect())
}

/// `<run_id>` of a drain's part name `cdc-<run_id>-<nnnnnn>.parquet`.
fn run_of(file: &str) -> Option<String> {
    let name = file.rsplit('/').next()?;
    let stem = name.strip_suffix(".parquet")?;
    Some(stem.strip_prefix("cdc-")?.rsplit_once('-')?.0.to_owned())
}

/// For each compacted part a compaction manifest names, the drain parts whose rows it
/// holds, in order, with their row counts (a compacted part compacted again is followed
/// to the drain parts it held).
fn origins(out: &Path, table: &str) -> Result<BTreeMap<String, Vec<(String, u64)>>, String> {
    let dir = out.join(table).join("_compactions");
    let mut direct: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(direct);
    };
    let rel = |part: &serde_json::Value| {
        let key = part["key"].as_str().unwrap_or_default();
        key.strip_prefix(&format!("{table}/"))
            .unwrap_or(key)
            .to_owned()
    };
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{path:?}: {e}"))?;
        let manifest: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{path:?}: {e}"))?;
        // A forget's step holds a subset of its one input's rows: its output stands for
        // that input (the rows it kept, by their own positions).
        if manifest["kind"] == "forget" {
            if let (Some(output), Some(input)) = (
                manifest["parts"].as_array().and_then(|p| p.first()),
                manifest["replaced"].as_array().and_then(|p| p.first()),
            ) {
                direct.insert(
                    rel(output),
                    vec![(rel(input), output["rows"].as_u64().unwrap_or(0))],
                );
            }
            continue;
        }
        let mut inputs = manifest["replaced"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| (rel(p), p["rows"].as_u64().unwrap_or(0)))
            .peekable();
        // Outputs hold the inputs' rows in order, each a run of whole inputs.
        for output in manifest["parts"].as_array().into_iter().flatten() {
            let mut want = output["rows"].as_u64().unwrap_or(0);
            let mut held = Vec::new();
            while want > 0 {
                let Some((input, rows)) = inputs.next() else {
                    return Err(format!(
                        "{path:?}: its parts hold more rows than it replaced"
                    ));
                };
                if rows > want {
                    return Err(format!("{path:?}: {input} does not end where a part does"));
                }
                want -= rows;
                held.push((input, rows));
            }
            direct.insert(rel(output), held);
        }
        if inputs.peek().is_some() && manifest["parts"].as_array().is_some_and(|p| !p.is_empty()) {
            return Err(format!(
                "{path:?}: it replaced more rows than its parts hold"
            ));
        }
    }
    fn expand(
        part: &str,
        direct: &BTreeMap<String, Vec<(String, u64)>>,
        depth: usize,
    ) -> Vec<(String, u64)> {
        match direct.get(part) {
            Some(held) if depth < 64 => held
                .iter()
                .flat_map(|(input, rows)| {
                    if direct.contains_key(input) {
                        expand(input, direct, depth + 1)
                    } else {
                        vec![(input.clone(), *rows)]
                    }
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    Ok(direct
        .keys()
        .map(|part| (part.clone(), expand(part, &direct, 0)))
        .collect())
}

/// Splits a compacted part's rows into the segments of the parts it holds, each row
/// relabelled with its original part and run.
fn split(
    rows: Vec<PartRow>,
    compacted: &str,
    segments: &[(String, u64)],
) -> Result<Vec<(String, Vec<PartRow>)>, String> {
    let total: u64 = segments.iter().map(|(_, n)| n).sum();
    if total != rows.len() as u64 {
        return Err(format!(
            "{compacted} holds {} rows; the parts its manifests say it holds have {total}",
            rows.len()
        ));
    }
    let mut rows = rows.into_iter();
    Ok(segments
        .iter()
        .map(|(original, n)| {
            let run = run_of(original).unwrap_or_else(|| original.clone());
            let segment = rows
                .by_ref()
                .take(*n as usize)
                .map(|mut row| {
                    row.file = format!("{original} (in {compacted})");
                    row.run.clone_from(&run);
                    row
                })
                .collect();
            (original.clone(), segment)
        })
        .collect())
}

/// A part's rows read twice (the part itself and a compacted copy, or two compacted
/// copies) must be the same rows.
fn same_rows(
    held: &[PartRow],
    copy: &[PartRow],
    original: &str,
    compacted: &str,
) -> Result<(), String> {
    let cells = |rows: &[PartRow]| rows.iter().map(|r| r.all.clone()).collect::<Vec<_>>();
    if cells(held) != cells(copy) {
        return Err(format!(
            "{compacted} holds {original}'s rows, but not as they are in {original} ({} rows there, {} in the copy)",
            held.len(),
            copy.len()
        ));
    }
    Ok(())
}

fn read_file(path: &Path, file: &str, run: &str) -> Result<Vec<PartRow>, String> {
    let reader = std::fs::File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| e.to_string()))
        .and_then(|b| b.build().map_err(|e| e.to_string()))
        .map_err(|e| format!("{file}: {e}"))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| format!("{file}: {e}"))?;
        rows.extend(batch_rows(&batch, file, run)?);
    }
    Ok(rows)
}

/// Every row of the files `files` (relative to `<out>/<table>/`) in the order given: a
/// reader's own list of a table's parts (an Iceberg snapshot's data files, older
/// baselines' included).
pub fn read_files(out: &Path, table: &str, files: &[String]) -> Result<Vec<PartRow>, String> {
    let dir = out.join(table);
    let mut rows = Vec::new();
    for file in files {
        let run = match file
            .strip_prefix("cdc-")
            .and_then(|rest| rest.rsplit_once('-'))
        {
            Some((run, _)) => run.to_owned(),
            None if file.starts_with("compacted-") => file.clone(),
            None => "snapshot".to_owned(),
        };
        let path = dir.join(file);
        let reader = std::fs::File::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| e.to_string()))
            .and_then(|b| b.build().map_err(|e| e.to_string()))
            .map_err(|e| format!("{file}: {e}"))?;
        for batch in reader {
            let batch = batch.map_err(|e| format!("{file}: {e}"))?;
            rows.extend(batch_rows(&batch, file, &run)?);
        }
    }
    Ok(rows)
}

/// The live change parts (file names relative to the table folder) the manifests name —
/// every `parts` entry of the run manifests `<out>/<table>/_manifests/*.json` (never
/// `pending`) and of the compaction manifests `_compactions/*.json`, minus every
/// `replaced` entry of the latter — each with how many manifests list it.
pub fn listed_in_run_manifests(out: &Path, table: &str) -> Result<BTreeMap<String, usize>, String> {
    let mut listed = BTreeMap::new();
    let mut replaced = std::collections::BTreeSet::new();
    for folder in ["_manifests", "_compactions"] {
        let dir = out.join(table).join(folder);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue; // a killed run's unpublished temporary file, not a manifest
            }
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{path:?}: {e}"))?;
            let manifest: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("{path:?}: {e}"))?;
            let file_of = |part: &serde_json::Value| {
                let key = part["key"].as_str().unwrap_or_default();
                key.strip_prefix(&format!("{table}/"))
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{path:?} lists {key}, outside {table}/"))
            };
            for part in manifest["parts"].as_array().into_iter().flatten() {
                *listed.entry(file_of(part)?).or_insert(0) += 1;
            }
            for part in manifest["replaced"].as_array().into_iter().flatten() {
                replaced.insert(file_of(part)?);
            }
        }
    }
    listed.retain(|file, _| !replaced.contains(file));
    Ok(listed)
}

/// Every row of one Parquet file (any writer's) as canonical cells by column name.
pub fn read_cells(path: &Path) -> Result<Vec<BTreeMap<String, Cell>>, String> {
    let reader = std::fs::File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| e.to_string()))
        .and_then(|b| b.build().map_err(|e| e.to_string()))
        .map_err(|e| format!("{path:?}: {e}"))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| format!("{path:?}: {e}"))?;
        let schema = batch.schema();
        let columns: Vec<(String, Vec<Cell>)> = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, a)| cells(a).map(|c| (f.name().clone(), c)))
            .collect::<Result<_, String>>()
            .map_err(|e| format!("{path:?}: {e}"))?;
        for i in 0..batch.num_rows() {
            rows.push(
                columns
                    .iter()
                    .map(|(name, cells)| (name.clone(), cells[i].clone()))
                    .collect(),
            );
        }
    }
    Ok(rows)
}

fn part_files(dir: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let list = |d: &Path, prefix: &str| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().path())
                    .filter(|p| {
                        let n = p.file_name().unwrap().to_string_lossy();
                        n.starts_with(prefix) && n.ends_with(".parquet")
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    };
    let mut out: Vec<(PathBuf, String)> = list(&crate::support::snapshot_dir(dir), "part-")
        .into_iter()
        .map(|p| (p, "snapshot".to_owned()))
        .collect();
    for path in list(dir, "compacted-") {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((path, name));
    }
    for path in list(dir, "cdc-") {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // cdc-<run_id>-<nnnnnn>: the run id itself contains one '-'.
        let run = name
            .strip_prefix("cdc-")
            .and_then(|rest| rest.rsplit_once('-'))
            .map(|(run, _)| run.to_owned())
            .ok_or_else(|| format!("part name {name} is not cdc-<run_id>-<n>"))?;
        out.push((path, run));
    }
    // `sluice verify --repair`'s parts: change rows at the repair's position.
    for path in list(dir, "repair-") {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((path, name));
    }
    Ok(out)
}

fn batch_rows(batch: &RecordBatch, file: &str, run: &str) -> Result<Vec<PartRow>, String> {
    let schema = batch.schema();
    let columns: Vec<(String, Vec<Cell>)> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, a)| cells(a).map(|c| (f.name().clone(), c)))
        .collect::<Result<_, String>>()
        .map_err(|e| format!("{file}: {e}"))?;
    let mut rows = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        let all: BTreeMap<String, Cell> = columns
            .iter()
            .map(|(name, cells)| (name.clone(), cells[i].clone()))
            .collect();
        let text = |c: &str| all.get(c).cloned().flatten();
        let unlogged = match text("__unlogged") {
            Some(json) => serde_json::from_str::<Vec<Option<String>>>(&json)
                .map_err(|e| format!("{file}: __unlogged {json}: {e}"))?
                .into_iter()
                .map(|c| c.unwrap_or_default())
                .collect(),
            None => vec![],
        };
        let (op, pos) = if run == "snapshot" {
            (
                text("__op").unwrap_or_else(|| "snapshot".into()),
                text("__pos").unwrap_or_default(),
            )
        } else {
            let need = |c: &str| text(c).ok_or_else(|| format!("{file}: row {i} has no {c}"));
            (need("__op")?, need("__pos")?)
        };
        let seq = text("__seq")
            .map(|s| {
                s.parse::<i64>()
                    .map_err(|e| format!("{file}: __seq {s}: {e}"))
            })
            .transpose()?
            .unwrap_or(i as i64);
        rows.push(PartRow {
            file: file.to_owned(),
            run: run.to_owned(),
            op,
            pos,
            seq,
            unlogged,
            all,
        });
    }
    Ok(rows)
}

/// Canonical cells of one Arrow array.
fn cells(array: &ArrayRef) -> Result<Vec<Cell>, String> {
    let n = array.len();
    let each = |f: &dyn Fn(usize) -> String| -> Vec<Cell> {
        (0..n).map(|i| (!array.is_null(i)).then(|| f(i))).collect()
    };
    Ok(match array.data_type() {
        DataType::Boolean => {
            let a = array.as_boolean();
            each(&|i| a.value(i).to_string())
        }
        DataType::Int8 => {
            let a = array.as_primitive::<Int8Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::Int16 => {
            let a = array.as_primitive::<Int16Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::Int32 => {
            let a = array.as_primitive::<Int32Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::Int64 => {
            let a = array.as_primitive::<Int64Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::UInt8 => {
            let a = array.as_primitive::<UInt8Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::UInt16 => {
            let a = array.as_primitive::<UInt16Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::UInt32 => {
            let a = array.as_primitive::<UInt32Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::UInt64 => {
            let a = array.as_primitive::<UInt64Type>();
            each(&|i| a.value(i).to_string())
        }
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            each(&|i| canon::float32(a.value(i)))
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            each(&|i| canon::float64(a.value(i)))
        }
        DataType::Decimal128(_, scale) => {
            let a = array.as_primitive::<Decimal128Type>();
            each(&|i| canon::decimal(&a.value(i).to_string(), *scale))
        }
        DataType::Decimal256(_, scale) => {
            let a = array.as_primitive::<Decimal256Type>();
            each(&|i| canon::decimal(&a.value(i).to_string(), *scale))
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            each(&|i| a.value(i).to_owned())
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            each(&|i| a.value(i).to_owned())
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            each(&|i| canon::hex(a.value(i)))
        }
        DataType::Date32 => {
            let a = array.as_primitive::<Date32Type>();
            each(&|i| canon::date(i64::from(a.value(i))))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let a = array.as_primitive::<Time64MicrosecondType>();
            each(&|i| canon::time(a.value(i)))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let utc = match tz.as_deref() {
                None => false,
                Some("UTC") => true,
                Some(other) => return Err(format!("timestamp column in zone {other}")),
            };
            let a = array.as_primitive::<TimestampMicrosecondType>();
            each(&|i| canon::timestamp(i128::from(a.value(i)), utc))
        }
        DataType::List(_) => {
            let a = array.as_list::<i32>();
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                if a.is_null(i) {
                    out.push(None);
                } else {
                    out.push(Some(canon::list(&cells(&a.value(i))?)));
                }
            }
            out
        }
        other => return Err(format!("no canonical form for Arrow type {other}")),
    })
}
