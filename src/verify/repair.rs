//! `sluice verify --repair`: the source's rows of the keys a verify found different are
//! written into the lake as change rows the replay rule already understands, so the
//! replay becomes exact with no change to the rule (docs/verify.md, "Repair").
//!
//! Guarantees:
//! * **one exact position**: the chunks holding the differing keys are read again inside
//!   one pinned read at a source position P ([`BaselineReader::pin_read`]: every change
//!   at or before P is in the read, none after). Each differing key becomes one row at
//!   `__pos` = P: its source row as an `update`, or a `delete` (the key only) when the
//!   source has no row for it. Their `__seq` start at [`REPAIR_SEQ_BASE`], above every
//!   ordinal a transaction gives its changes, so a repair row sorts after every change
//!   visible in the read (at or before P — also one whose `__pos` is P itself) and before
//!   every change not visible in it (after P): per key it is the latest row at P, and
//!   every later change still wins — the baseline anchor's argument;
//! * **like a drain's output**: one part (`<table>/repair-<run id>-000001.parquet`, the
//!   drain's writer and checks) and a run manifest (`_manifests/<run id>.json`, status
//!   `drained`, `from` = `to` = P) that lists it, written after a drain has brought the
//!   checkpoint past P (DESIGN rule 1: the part lies within what a checkpoint covers);
//!   part first, then the manifest — a crash between leaves a part a folder reader
//!   replays correctly and the next verify finds nothing left to repair;
//! * a table without a key is refused (`SLUICE_VERIFY_UNSUPPORTED`): its repair would be
//!   a re-baseline (`sluice baseline --table`), which already exists.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, TimeUnit};
use serde::{Deserialize, Serialize};

use super::{ChunkReport, VerifyReport};
use crate::backends::Backends;
use crate::change::{ChangeEvent, Op, TableSchema, Value};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::fold::{self, Shape};
use crate::parts::manifest::{Manifest, ManifestRun, ManifestStatus};
use crate::parts::part::{PartSettings, PartWriter};
use crate::source::baseline_read::ChunkBounds;

/// The first `__seq` of a repair's rows: above every ordinal within a transaction.
pub const REPAIR_SEQ_BASE: u64 = 1 << 62;

/// What a repair wrote, and the verify after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepairReport {
    pub rows_written: u64,
    /// The source position the repair rows carry (tagged text).
    pub position: Option<String>,
    /// The part written.
    pub part: Option<String>,
    /// Keys still different in the verify after the repair.
    pub after_mismatched_rows: u64,
    /// That verify's chunks that are not equal.
    pub after: Vec<ChunkReport>,
}

/// Writes the source's rows of the keys `report` names into the lake; returns what it
/// wrote (the `after` fields are the caller's).
pub async fn repair(
    config: &Config,
    backends: &Backends,
    table: &str,
    report: &VerifyReport,
    ranges: Option<&super::range::KeyRanges>,
) -> Result<RepairReport> {
    if report.multiset.is_some() {
        return Err(Error::new(
            Code::VerifyUnsupported,
            format!("{table} has no key: verify --repair writes rows by key"),
        )
        .hint(format!(
            "re-baseline the table instead: sluice baseline --table {table}"
        )));
    }
    let wanted: HashSet<Vec<u8>> = report
        .chunks
        .iter()
        .flat_map(|c| c.keys.iter().cloned())
        .collect();
    let chunks: Vec<ChunkBounds> = report
        .chunks
        .iter()
        .filter(|c| !c.equal)
        .map(|c| ChunkBounds {
            lower: c.lower.clone(),
            upper: c.upper.clone(),
        })
        .collect();
    let destination = backends.destination.as_ref();
    let columns = crate::lake::shape::read(destination, table).await?;
    let mut reader = crate::source::open_baseline_reader(config).await?;
    let schema = reader.schema(table)?;
    let floor = super::checkpoint(config, backends).await?;
    let Some(point) = reader.pin_read(table, &floor).await? else {
        return Err(Error::new(
            Code::VerifyUnsupported,
            format!(
                "the source of {table} cannot read it at a known position, which a repair needs"
            ),
        )
        .hint(format!(
            "re-baseline the table instead: sluice baseline --table {table}"
        )));
    };
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut read = Vec::new();
    let mut failed = None;
    for bounds in &chunks {
        match read_rows(reader.as_mut(), &schema, table, bounds).await {
            Ok((values, batch)) => {
                rows.extend(values);
                read.push(batch);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    reader.end_pinned_read().await?;
    if let Some(e) = failed {
        return Err(e);
    }
    // The checkpoint passes P before anything is written (DESIGN rule 1).
    super::drain(config, backends).await?;
    // The lake's state of the keys the report names: the whole table's, or — for a walk —
    // that of the differing chunks' ranges only.
    let state = match ranges {
        None => {
            let (batches, shape) = super::lake_rows(destination, table, &columns, None).await?;
            (fold::fold(&batches, &shape)?, shape)
        }
        Some(ranges) => {
            let (batches, shape) =
                super::range::lake_rows_in(destination, table, &columns, ranges, &[], None).await?;
            (ranges.retain(&fold::fold(&batches, &shape)?)?, shape)
        }
    };
    let (state, shape) = state;

    let mut events = Vec::new();
    let mut found: HashSet<Vec<u8>> = HashSet::new();
    let mut at = 0usize;
    for batch in &read {
        let keys = key_rows(batch, &shape)?;
        for (i, key) in keys.iter().enumerate() {
            if wanted.contains(key) && found.insert(key.clone()) {
                events.push((Op::Update, std::mem::take(&mut rows[at + i])));
            }
        }
        at += batch.num_rows();
    }
    // Keys the source does not hold: a delete carrying the key, from the lake's row.
    let keys = key_rows(&state, &shape)?;
    for (i, key) in keys.iter().enumerate() {
        if wanted.contains(key) && !found.contains(key) {
            events.push((Op::Delete, key_image(&state, i, &shape, &schema)?));
        }
    }

    let pos: Arc<str> = point.sortable_arc();
    let run_id = crate::run_id::new_run_id();
    let mut writer = PartWriter::new(
        table,
        format!("{table}/repair-{run_id}-"),
        1,
        PartSettings::of(config),
    )?
    .with_identity(run_id.clone());
    let written = events.len() as u64;
    let mut finished = Vec::new();
    for (n, (op, image)) in events.into_iter().enumerate() {
        let event = ChangeEvent {
            table: schema.clone(),
            op,
            pos: pos.clone(),
            seq: REPAIR_SEQ_BASE + n as u64,
            commit_ts: None,
            image,
            unlogged: vec![],
        };
        if let Some(part) = writer.append(&event)? {
            finished.push(part);
        }
    }
    finished.extend(writer.finish()?);
    let mut entries = Vec::new();
    for part in finished {
        destination.put_part(&part.key, &part.local_path).await?;
        entries.push(part.manifest_entry());
        part.discard()?;
    }
    let part = entries.first().map(|p| p.key.clone());
    crate::faults::hit(crate::faults::FaultPoint::RepairPartWritten).await?;
    if !entries.is_empty() {
        let manifest = Manifest::new(
            ManifestRun {
                job: config.job.clone(),
                table: table.to_owned(),
                run_id: run_id.clone(),
                status: ManifestStatus::Drained,
                from: pos.to_string(),
                to: pos.to_string(),
            },
            entries,
            &schema,
            chrono::Utc::now(),
        );
        destination
            .put_marker(
                &format!("{table}/_manifests/{run_id}.json"),
                &manifest.to_json_bytes()?,
            )
            .await?;
    }
    tracing::info!(table, rows = written, position = %point, "verify repair written");
    Ok(RepairReport {
        rows_written: written,
        position: Some(point.to_string()),
        part,
        after_mismatched_rows: 0,
        after: Vec::new(),
    })
}

/// One chunk's rows both as values (what a part is written from) and as one Arrow batch
/// (what keys are computed from), row for row.
async fn read_rows(
    reader: &mut dyn crate::source::baseline_read::BaselineReader,
    schema: &Arc<TableSchema>,
    table: &str,
    bounds: &ChunkBounds,
) -> Result<(Vec<Vec<Value>>, RecordBatch)> {
    let mut values = Vec::new();
    let mut builder = crate::parts::batch::RowBatchBuilder::new(schema.clone())?;
    let pos: Arc<str> = Arc::from("");
    let mut sink = |image: Vec<Value>| -> Result<()> {
        builder.append(&ChangeEvent {
            table: schema.clone(),
            op: Op::Snapshot,
            pos: pos.clone(),
            seq: 0,
            commit_ts: None,
            image: image.clone(),
            unlogged: vec![],
        })?;
        values.push(image);
        Ok(())
    };
    reader.read_chunk(table, bounds, &mut sink).await?;
    let batch = builder.finish()?.batch;
    Ok((values, batch))
}

/// The key of each row of `batch` in arrow's binary row form, as verify computes it.
fn key_rows(batch: &RecordBatch, shape: &Shape) -> Result<Vec<Vec<u8>>> {
    if batch.num_rows() == 0 {
        return Ok(Vec::new());
    }
    let arrays = fold::conformed(batch, shape)?;
    let converter = RowConverter::new(
        shape
            .key
            .iter()
            .map(|&k| SortField::new(shape.fields[k].data_type().clone()))
            .collect(),
    )
    .map_err(|e| {
        Error::new(
            Code::FoldInput,
            "the key's type rows cannot be compared by".to_owned(),
        )
        .source(e)
    })?;
    let keys: Vec<ArrayRef> = shape.key.iter().map(|&k| arrays[k].clone()).collect();
    let rows = converter
        .convert_columns(&keys)
        .map_err(|e| Error::new(Code::Internal, "encoding keys".to_owned()).source(e))?;
    Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
}

/// A delete's image for row `row` of the lake's state: its key cells, NULL elsewhere.
fn key_image(
    state: &RecordBatch,
    row: usize,
    shape: &Shape,
    schema: &TableSchema,
) -> Result<Vec<Value>> {
    let mut image = vec![Value::Null; schema.columns.len()];
    for &k in &shape.key {
        let name = shape.fields[k].name();
        let Some(at) = schema.columns.iter().position(|c| &c.name == name) else {
            continue;
        };
        image[at] = value_of(state.column(k).as_ref(), row).ok_or_else(|| {
            Error::new(
                Code::VerifyUnsupported,
                format!(
                    "{}.{name} ({}): verify --repair cannot write a delete for a key of this type",
                    schema.name,
                    state.column(k).data_type()
                ),
            )
            .hint(format!(
                "re-baseline the table instead: sluice baseline --table {}",
                schema.name
            ))
        })?;
    }
    Ok(image)
}

/// The value of a key cell, for the key types a repair writes deletes for.
fn value_of(array: &dyn Array, row: usize) -> Option<Value> {
    use arrow_array::types::*;
    if array.is_null(row) {
        return Some(Value::Null);
    }
    Some(match array.data_type() {
        DataType::Boolean => Value::Boolean(array.as_boolean().value(row)),
        DataType::Int8 => Value::Int(array.as_primitive::<Int8Type>().value(row).into()),
        DataType::Int16 => Value::Int(array.as_primitive::<Int16Type>().value(row).into()),
        DataType::Int32 => Value::Int(array.as_primitive::<Int32Type>().value(row).into()),
        DataType::Int64 => Value::Int(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::UInt(array.as_primitive::<UInt8Type>().value(row).into()),
        DataType::UInt16 => Value::UInt(array.as_primitive::<UInt16Type>().value(row).into()),
        DataType::UInt32 => Value::UInt(array.as_primitive::<UInt32Type>().value(row).into()),
        DataType::UInt64 => Value::UInt(array.as_primitive::<UInt64Type>().value(row)),
        DataType::Utf8 => Value::Text(array.as_string::<i32>().value(row).to_owned()),
        DataType::LargeUtf8 => Value::Text(array.as_string::<i64>().value(row).to_owned()),
        DataType::Binary => Value::Bytes(array.as_binary::<i32>().value(row).to_vec()),
        DataType::LargeBinary => Value::Bytes(array.as_binary::<i64>().value(row).to_vec()),
        DataType::FixedSizeBinary(_) => {
            Value::Bytes(array.as_fixed_size_binary().value(row).to_vec())
        }
        DataType::Date32 => Value::Date(array.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Value::Timestamp(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Decimal128(_, _) => {
            Value::Decimal(array.as_primitive::<Decimal128Type>().value(row))
        }
        _ => return None,
    })
}
