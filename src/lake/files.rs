//! The files a table's current state is folded from — the same files `sluice sql` reads:
//! every `.parquet` below the table folder whose path has no name starting with `_` or
//! `.`, change parts wherever they lie, and of the baseline plan folders
//! (`snapshot/<plan>/`) only the current one: the newest holding a `rebaseline` row, else
//! the oldest (never a plan still being read).
//!
//! Guarantees: batches come out baseline first, then change parts in name order (run id,
//! then part number), so the first copy of a re-delivered change is the earliest written;
//! a file that is not Parquet is `SLUICE_FOLD_INPUT`, naming it.

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::arrow_schema::OP;

/// The data files below `<table>/`, split into baseline plans and change parts.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// Plan id → its part keys, in name order.
    pub plans: BTreeMap<String, Vec<String>>,
    /// Change part keys, in file-name order.
    pub changes: Vec<String>,
}

/// The table's data files.
pub async fn list(destination: &dyn Destination, table: &str) -> Result<Listing> {
    Ok(sort_keys(
        table,
        &destination.list(&format!("{table}/")).await?,
    ))
}

/// Sorts the keys listed under `<table>/` into data files; everything else is left out.
pub fn sort_keys(table: &str, keys: &[String]) -> Listing {
    let prefix = format!("{table}/");
    let mut listing = Listing::default();
    for key in keys {
        let Some(rel) = key.strip_prefix(&prefix) else {
            continue;
        };
        let hidden = rel
            .split('/')
            .any(|name| name.starts_with('_') || name.starts_with('.'));
        if hidden || !rel.ends_with(".parquet") {
            continue;
        }
        match rel
            .strip_prefix("snapshot/")
            .and_then(|r| r.split_once('/'))
        {
            Some((plan, _)) => listing
                .plans
                .entry(plan.to_owned())
                .or_default()
                .push(key.clone()),
            None => listing.changes.push(key.clone()),
        }
    }
    for parts in listing.plans.values_mut() {
        parts.sort();
    }
    let file_name = |k: &String| k.rsplit('/').next().unwrap_or(k).to_owned();
    listing
        .changes
        .sort_by(|a, b| file_name(a).cmp(&file_name(b)).then(a.cmp(b)));
    listing
}

/// Every row batch of the file at `key`.
pub async fn read_file(destination: &dyn Destination, key: &str) -> Result<Vec<RecordBatch>> {
    read_file_where(destination, key, |_| None).await
}

/// The row batches of the file at `key` in the row groups `select` picks from its
/// metadata (`None`: every row group).
pub async fn read_file_where(
    destination: &dyn Destination,
    key: &str,
    select: impl Fn(&parquet::file::metadata::ParquetMetaData) -> Option<Vec<usize>>,
) -> Result<Vec<RecordBatch>> {
    let body = destination.get(key).await?.ok_or_else(|| {
        Error::new(
            Code::LakeFileGone,
            format!("{} {key} was listed and is gone", destination.describe()),
        )
        .hint("a compaction or forget removed it while this run read the folder; run again (it lists the folder anew)")
    })?;
    let not_parquet = |e: parquet::errors::ParquetError| {
        Error::new(
            Code::FoldInput,
            format!(
                "{} {key} is not a readable Parquet file",
                destination.describe()
            ),
        )
        .hint("move the file out of the table folder, or restore it from the run that wrote it")
        .source(e)
    };
    let mut builder =
        ParquetRecordBatchReaderBuilder::try_new(Bytes::from(body)).map_err(not_parquet)?;
    let schema = builder.schema().clone();
    if let Some(groups) = select(builder.metadata()) {
        builder = builder.with_row_groups(groups);
    }
    let reader = builder.build().map_err(not_parquet)?;
    let batches: Vec<RecordBatch> = reader
        .map(|batch| {
            batch.map_err(|e| {
                Error::new(
                    Code::FoldInput,
                    format!("{} {key} cannot be read", destination.describe()),
                )
                .source(e)
            })
        })
        .collect::<Result<_>>()?;
    // A file whose every row group was skipped still says what its columns are.
    if batches.is_empty() {
        return Ok(vec![RecordBatch::new_empty(schema)]);
    }
    Ok(batches)
}

/// The Parquet metadata of the file at `key`, read from its footer alone (one ranged read,
/// two when the footer is longer than a first guess); `None` when the file is gone.
pub async fn read_footer(
    destination: &dyn Destination,
    key: &str,
) -> Result<Option<parquet::file::metadata::ParquetMetaData>> {
    const GUESS: u64 = 64 * 1024;
    const TAIL: usize = 8;
    let not_parquet = |why: String| {
        Error::new(
            Code::FoldInput,
            format!(
                "{} {key} is not a readable Parquet file: {why}",
                destination.describe()
            ),
        )
        .hint("move the file out of the table folder, or restore it from the run that wrote it")
    };
    let Some(mut tail) = destination.get_tail(key, GUESS).await? else {
        return Ok(None);
    };
    if tail.len() < TAIL || &tail[tail.len() - 4..] != b"PAR1" {
        return Err(not_parquet("no Parquet footer".to_owned()));
    }
    let length = u32::from_le_bytes(
        tail[tail.len() - TAIL..tail.len() - 4]
            .try_into()
            .unwrap_or_default(),
    ) as usize;
    if length + TAIL > tail.len() {
        let Some(longer) = destination.get_tail(key, (length + TAIL) as u64).await? else {
            return Ok(None);
        };
        tail = longer;
        if tail.len() < length + TAIL {
            return Err(not_parquet(format!(
                "a footer of {length} bytes in a shorter file"
            )));
        }
    }
    let metadata = &tail[tail.len() - TAIL - length..tail.len() - TAIL];
    parquet::file::metadata::ParquetMetaDataReader::decode_metadata(metadata)
        .map(Some)
        .map_err(|e| not_parquet(e.to_string()))
}

/// The columns of the file at `key`, as one batch of no rows, read from its footer alone
/// (the Arrow schema the writer stored, with its field metadata).
pub async fn read_columns(destination: &dyn Destination, key: &str) -> Result<RecordBatch> {
    let metadata = read_footer(destination, key).await?.ok_or_else(|| {
        Error::new(
            Code::LakeFileGone,
            format!("{} {key} was listed and is gone", destination.describe()),
        )
        .hint("a compaction or forget removed it while this run read the folder; run again (it lists the folder anew)")
    })?;
    let file = metadata.file_metadata();
    let schema =
        parquet::arrow::parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata())
            .map_err(|e| {
                Error::new(
                    Code::FoldInput,
                    format!(
                        "{} {key} has columns Arrow cannot read",
                        destination.describe()
                    ),
                )
                .source(e)
            })?;
    Ok(RecordBatch::new_empty(std::sync::Arc::new(schema)))
}

/// Every batch of the files at `keys`, in order.
pub async fn read_files(
    destination: &dyn Destination,
    keys: &[String],
) -> Result<Vec<RecordBatch>> {
    let mut batches = Vec::new();
    for key in keys {
        batches.extend(read_file(destination, key).await?);
    }
    Ok(batches)
}

/// Every data file of the table for a full build: the current plan's parts, then every
/// change part.
pub fn all_files(listing: &Listing, plan: Option<&str>) -> Vec<String> {
    let mut keys: Vec<String> = plan
        .and_then(|p| listing.plans.get(p))
        .cloned()
        .unwrap_or_default();
    keys.extend(listing.changes.iter().cloned());
    keys
}

fn has_rebaseline(batch: &RecordBatch) -> bool {
    batch
        .column_by_name(OP)
        .and_then(|ops| ops.as_string_opt::<i32>())
        .is_some_and(|ops| ops.iter().any(|op| op == Some("rebaseline")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_files_are_sorted_and_everything_else_left_out() {
        let keys: Vec<String> = [
            "t/cdc-2-000000.parquet",
            "t/dt=2026-01-02/cdc-1-000001.parquet",
            "t/_manifest.json",
            "t/_current_state/v-0000000001/part-000000.parquet",
            "t/snapshot/p2/part-000000.parquet",
            "t/snapshot/p1/part-000001.parquet",
            "t/snapshot/p1/part-000000.parquet",
            "t/snapshot/_manifest.json",
            "t/.tmp-x.parquet",
            "other/cdc-0-000000.parquet",
        ]
        .map(String::from)
        .to_vec();
        let listing = sort_keys("t", &keys);
        assert_eq!(
            listing.changes,
            [
                "t/dt=2026-01-02/cdc-1-000001.parquet",
                "t/cdc-2-000000.parquet"
            ]
        );
        assert_eq!(
            listing.plans["p1"],
            [
                "t/snapshot/p1/part-000000.parquet",
                "t/snapshot/p1/part-000001.parquet"
            ]
        );
        assert_eq!(listing.plans.len(), 2);
    }
}

/// How far before the newest run a build consumed it looks again for runs: a run's id is
/// its start time, and a run that started earlier on another host (a clock behind) may
/// commit after it. Longer than any run lasts.
const RUN_ID_MARGIN: chrono::Duration = chrono::Duration::minutes(30);

/// The live change parts whose newest change is at or after `watermark`: those committed
/// runs list (`<table>/_manifests/<run_id>.json`, `parts`, never `pending`) from runs started
/// at most [`RUN_ID_MARGIN`] before `since_run`, and those compactions since then wrote
/// (`<table>/_compactions/*.json`), minus every part those compactions replaced; and the
/// newest run id listed.
pub async fn parts_since(
    destination: &dyn Destination,
    table: &str,
    since_run: Option<&str>,
    watermark: &str,
) -> Result<(Vec<String>, Option<String>)> {
    let floor = since_run.and_then(run_id_floor);
    let runs = run_manifests(destination, table).await?;
    let newest = runs.last().map(|(run, _)| run.clone());
    let mut parts = Vec::new();
    for (run, key) in runs {
        if floor.as_ref().is_some_and(|f| run.as_str() < f.as_str()) {
            continue;
        }
        let Some(body) = destination.get(&key).await? else {
            continue;
        };
        let manifest: crate::parts::manifest::Manifest =
            serde_json::from_slice(&body).map_err(|e| {
                Error::new(
                    Code::StateCorrupt,
                    format!("{} {key} is not a sluice run manifest", destination.describe()),
                )
                .hint("restore or remove the document; `sluice materialize` then rebuilds from the folder")
                .source(e)
            })?;
        for part in manifest.parts {
            if part.last_pos.as_str() >= watermark {
                let key = if part.key.starts_with(&format!("{table}/")) {
                    part.key
                } else {
                    format!("{table}/{}", part.key)
                };
                parts.push(key);
            }
        }
    }
    // Compactions since the floor: their parts are live, the parts they replaced are not
    // (docs/compaction.md, "Manifests a reader follows").
    let compactions = format!("{table}/_compactions/");
    let mut replaced = std::collections::BTreeSet::new();
    for key in destination.list(&compactions).await? {
        let id = key.strip_prefix(&compactions).unwrap_or(&key);
        if floor.as_ref().is_some_and(|f| id < f.as_str()) || !key.ends_with(".json") {
            continue;
        }
        let Some(body) = destination.get(&key).await? else {
            continue;
        };
        let step: CompactionStep = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                Code::StateCorrupt,
                format!(
                    "{} {key} is not a sluice compaction manifest",
                    destination.describe()
                ),
            )
            .hint("restore it from the compaction that wrote it; never edit it by hand")
            .source(e)
        })?;
        replaced.extend(step.replaced.into_iter().map(|p| p.key));
        parts.extend(
            step.parts
                .into_iter()
                .filter(|p| p.last_pos.as_str() >= watermark)
                .map(|p| p.key),
        );
    }
    parts.retain(|key| !replaced.contains(key));
    parts.sort_by(|a, b| {
        let name = |k: &String| k.rsplit('/').next().unwrap_or(k).to_owned();
        name(a).cmp(&name(b)).then(a.cmp(b))
    });
    parts.dedup();
    Ok((parts, newest))
}

/// What [`parts_since`] reads of a compaction step's manifest.
#[derive(serde::Deserialize)]
struct CompactionStep {
    #[serde(default)]
    parts: Vec<StepPart>,
    #[serde(default)]
    replaced: Vec<StepPart>,
}

#[derive(serde::Deserialize)]
struct StepPart {
    key: String,
    #[serde(default)]
    last_pos: String,
}

/// The run manifests of the table, `(run id, key)`, oldest run first.
pub async fn run_manifests(
    destination: &dyn Destination,
    table: &str,
) -> Result<Vec<(String, String)>> {
    let prefix = format!("{table}/_manifests/");
    let mut runs: Vec<(String, String)> = destination
        .list(&prefix)
        .await?
        .into_iter()
        .filter_map(|key| {
            let run = key.strip_prefix(&prefix)?.strip_suffix(".json")?.to_owned();
            Some((run, key))
        })
        .collect();
    runs.sort();
    Ok(runs)
}

/// The smallest run id [`parts_since`] reads again after `run` (its start minus
/// [`RUN_ID_MARGIN`]); `None` for an id that is not a run id (read every run).
fn run_id_floor(run: &str) -> Option<String> {
    let stamp = run.get(..18)?;
    let start = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%3f").ok()?;
    Some(
        (start - RUN_ID_MARGIN)
            .format("%Y%m%dT%H%M%S%3f")
            .to_string(),
    )
}

/// The id of the current baseline plan: the newest holding a `rebaseline` row, else the
/// oldest; `None` without a baseline. Reads plans newest first until one holds a marker.
pub async fn current_plan_id(
    destination: &dyn Destination,
    listing: &Listing,
) -> Result<Option<String>> {
    for (plan, parts) in listing.plans.iter().rev() {
        for key in parts {
            if read_file(destination, key)
                .await?
                .iter()
                .any(has_rebaseline)
            {
                return Ok(Some(plan.clone()));
            }
        }
    }
    Ok(listing.plans.keys().next().cloned())
}

#[cfg(test)]
mod margin_tests {
    #[test]
    fn the_floor_is_the_run_start_minus_the_margin() {
        assert_eq!(
            super::run_id_floor("20261207T064955123Z-a1b2c3").as_deref(),
            Some("20261207T061955123")
        );
        assert_eq!(super::run_id_floor("not-a-run"), None);
    }
}
