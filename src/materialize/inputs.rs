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
    let body = destination.get(key).await?.ok_or_else(|| {
        Error::new(
            Code::FoldInput,
            format!("{} {key} was listed and is gone", destination.describe()),
        )
        .hint("a compaction or retention removed it while this run read the folder; run again")
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
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(body))
        .map_err(not_parquet)?
        .build()
        .map_err(not_parquet)?;
    reader
        .map(|batch| {
            batch.map_err(|e| {
                Error::new(
                    Code::FoldInput,
                    format!("{} {key} cannot be read", destination.describe()),
                )
                .source(e)
            })
        })
        .collect()
}

/// The table's batches to fold: the current baseline plan's, then every change part's.
pub async fn read_table(
    destination: &dyn Destination,
    table: &str,
) -> Result<(Vec<RecordBatch>, usize)> {
    let keys = destination.list(&format!("{table}/")).await?;
    let listing = sort_keys(table, &keys);
    let mut batches = Vec::new();
    let mut files = 0;
    if let Some(plan) = current_plan(destination, &listing).await? {
        files += plan.len();
        batches.extend(plan.into_iter().flatten());
    }
    for key in &listing.changes {
        batches.extend(read_file(destination, key).await?);
        files += 1;
    }
    Ok((batches, files))
}

/// The current plan's batches, per file: the newest plan holding a `rebaseline` row, else
/// the oldest plan; `None` without a baseline.
async fn current_plan(
    destination: &dyn Destination,
    listing: &Listing,
) -> Result<Option<Vec<Vec<RecordBatch>>>> {
    for parts in listing.plans.values().rev() {
        let mut files = Vec::with_capacity(parts.len());
        for key in parts {
            files.push(read_file(destination, key).await?);
        }
        if files.iter().flatten().any(has_rebaseline) {
            return Ok(Some(files));
        }
    }
    let Some(oldest) = listing.plans.values().next() else {
        return Ok(None);
    };
    let mut files = Vec::with_capacity(oldest.len());
    for key in oldest {
        files.push(read_file(destination, key).await?);
    }
    Ok(Some(files))
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
