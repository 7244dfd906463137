//! Current-state tables kept by sluice (`sluice materialize`): each captured table's
//! current state — one row per key, the table's columns only, the replay rule applied by
//! [`crate::fold`] — as plain Parquet under `<table>/_current_state/v-<version>/`, named by
//! the pointer `<table>/_current_state/_version.json`, so any reader reads it with one glob
//! and no SQL of ours (docs/current-state.md).
//!
//! Guarantees (the lake rules of DESIGN.md):
//! * it folds exactly the files `sluice sql` reads, so both give one state; the parts and
//!   the checkpoint come first, a build only reads what is already written;
//! * a build writes a new version's files, then replaces the pointer, then removes the
//!   versions older than the one the pointer named before — a reader never sees a
//!   half-written version, a crash anywhere leaves the previous version readable, and the
//!   next build starts over;
//! * a table that cannot be built (no shape yet, a file that is not a part) fails alone:
//!   the other tables are built and the report names it.
//!
//! Not yet: a build folds the whole table (its cost follows the table, not the run's
//! changes), holds the table's rows in memory, and takes no lease of its own — run one
//! `sluice materialize` per job at a time.

mod inputs;
pub mod version;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::Field;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::config::Config;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::fold::{self, Shape};
use crate::parts::arrow_schema::POS;
use version::Pointer;

/// Rows per current-state file.
const ROWS_PER_FILE: usize = 1_000_000;

/// Builds the current state of `tables` (every captured table when empty); one JSON
/// object per table in the report, failed tables included.
pub async fn run(config: &Config, tables: &[String]) -> Result<serde_json::Value> {
    let destination = crate::destination::open(config).await?;
    let chosen: Vec<&String> = if tables.is_empty() {
        config.source.tables.iter().collect()
    } else {
        tables.iter().collect()
    };
    let mut report = Vec::new();
    let mut failed = None;
    for table in chosen {
        match build(destination.as_ref(), table).await {
            Ok(pointer) => report.push(serde_json::json!({
                "table": table,
                "version": pointer.version,
                "rows": pointer.rows,
                "files": pointer.files,
                "parts_read": pointer.parts_read,
                "watermark": pointer.watermark,
            })),
            Err(e) => {
                report.push(serde_json::json!({
                    "table": table, "error": e.code().as_str(), "message": e.to_string(),
                }));
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) if report.len() == 1 => Err(e),
        _ => Ok(serde_json::json!({ "job": config.job, "tables": report })),
    }
}

/// Builds one table's next current-state version and points readers at it.
pub async fn build(destination: &dyn Destination, table: &str) -> Result<Pointer> {
    let columns = crate::replay::shape::read(destination, table).await?;
    let previous = version::read(destination, table).await?;
    let named = previous.as_ref().map_or(0, |p| p.version);
    // A crashed build's folder was never named: clear it before writing there again.
    version::remove_versions(destination, table, |v| v <= named).await?;

    let (batches, parts_read) = inputs::read_table(destination, table).await?;
    let shape = shape_of(table, &columns, &batches)?;
    let state = fold::fold(&batches, &shape)?;
    let watermark = newest_pos(&batches);
    drop(batches);

    let next = named + 1;
    let folder = version::folder_key(table, next);
    let mut files = Vec::new();
    let mut offset = 0;
    while offset < state.num_rows() || files.is_empty() {
        let len = ROWS_PER_FILE.min(state.num_rows() - offset);
        let key = format!("{folder}/part-{:06}.parquet", files.len());
        destination
            .put_marker(&key, &encode(&state.slice(offset, len))?)
            .await?;
        files.push(key);
        offset += len;
    }
    crate::faults::hit(crate::faults::FaultPoint::MaterializeBeforePointer).await?;
    let pointer = Pointer {
        format_version: 1,
        table: table.to_owned(),
        version: next,
        folder: folder
            .strip_prefix(&format!("{table}/"))
            .unwrap_or(&folder)
            .to_owned(),
        files,
        rows: state.num_rows() as u64,
        watermark,
        parts_read,
        written_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    };
    version::write(destination, &pointer).await?;
    crate::faults::hit(crate::faults::FaultPoint::MaterializeAfterPointer).await?;
    // The version named before stays for readers that read the pointer just before.
    version::remove_versions(destination, table, |v| v == named || v == next).await?;
    Ok(pointer)
}

/// The fold's shape: the newest manifest's columns, each with the type and field metadata
/// of the newest part that has it.
fn shape_of(
    table: &str,
    columns: &[crate::replay::ShapeColumn],
    batches: &[RecordBatch],
) -> Result<Shape> {
    let mut fields = Vec::with_capacity(columns.len());
    for column in columns {
        let field = batches
            .iter()
            .rev()
            .find_map(|b| b.schema().field_with_name(&column.name).ok().cloned())
            .map(|f| Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone()))
            .ok_or_else(|| {
                Error::new(
                    Code::FoldInput,
                    format!("table {table}'s manifest names column {} and no part holds it", column.name),
                )
                .hint("a part the manifests list is missing from the table folder: restore it, or re-baseline the table (sluice baseline --table T)")
            })?;
        fields.push(field);
    }
    Ok(Shape {
        key: (0..columns.len()).filter(|&i| columns[i].key).collect(),
        fillable: columns
            .iter()
            .map(|c| fold::may_be_unlogged(&c.ty))
            .collect(),
        fields,
    })
}

/// The highest `__pos` of the batches.
fn newest_pos(batches: &[RecordBatch]) -> Option<String> {
    batches
        .iter()
        .filter_map(|b| b.column_by_name(POS)?.as_string_opt::<i32>().cloned())
        .filter_map(|positions| positions.iter().flatten().max().map(str::to_owned))
        .max()
}

/// One current-state file: Parquet, zstd, the batch's schema.
fn encode(batch: &RecordBatch) -> Result<Vec<u8>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut out = Vec::new();
    let failed = |e: parquet::errors::ParquetError| {
        Error::new(Code::Internal, "encoding a current-state file".to_owned()).source(e)
    };
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).map_err(failed)?;
    writer.write(batch).map_err(failed)?;
    writer.close().map_err(failed)?;
    Ok(out)
}
