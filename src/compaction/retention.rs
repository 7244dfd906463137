//! History retention (`output.history_retention`): a table's changes older than the
//! retention are folded into a baseline of the table's state, an **epoch** the replay rule
//! already understands (DESIGN, "After the drain", rule 3), and the parts that only held
//! them become superseded — the compaction's superseded step drops them, and the earlier
//! baseline plans go with them.
//!
//! Guarantees:
//!
//! * **the cut is a checkpoint**: the newest run manifest (`drained` or `partial`) whose
//!   run started at least the retention ago names the checkpoint `C` its run committed;
//!   the fold is the re-baseline epoch of `C` ([`crate::baseline::epoch::at_checkpoint`]):
//!   its `rebaseline` marker sorts after every change `C` covers and its `snapshot` rows
//!   (at the anchor) before every later change. The state folded in is exactly the replay
//!   rule's ([`crate::fold`]) over the current plan and every change part, rows before
//!   the marker only — the table as of `C`, unlogged values filled. So the replay of the
//!   folder after the fold — the new plan, then the changes after `C` — is the replay
//!   before it, at every position after `C`; history before `C` is what is given up;
//! * **one file, written last**: the plan is one part (`snapshot/<plan>/part-000001.parquet`,
//!   marker row first), verified after writing and uploaded whole, so the plan is either
//!   absent or complete for a reader that applies the rule (the newest plan holding a
//!   `rebaseline` row is current); then `snapshot/_manifest.json` names it for readers
//!   that follow manifests (fault point `retention_plan_written` between). A crash
//!   between leaves a complete plan the rule reads and a manifest naming the previous
//!   one — both give the same state; the next fold writes a newer plan;
//! * **never beside a baseline**: no fold while the table's baseline is not done (a
//!   re-baseline being read would otherwise meet a newer plan than its own), none when the
//!   current plan's marker already sorts at or after the cut, and none more often than
//!   every tenth of the retention (each fold writes the whole state once);
//! * plan ids sort by the anchoring run ([`crate::baseline::tasks::plan_id_of`]): the
//!   fold's plan takes the cut run's id, so a re-baseline anchored after the cut always
//!   sorts after it.
//!
//! Not yet: the state is folded in memory and written as one part (the table must fit the
//! run's memory); an Iceberg change log is not folded (its snapshots are its history).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, new_null_array,
};
use arrow_schema::{DataType, SchemaRef};
use arrow_select::filter::filter_record_batch;
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::step::Fence;
use crate::backends::Backends;
use crate::baseline::epoch;
use crate::baseline::tasks::{KEYLESS_MARKER_SEQ, plan_id_of};
use crate::config::{Config, TableFormat};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::lake::files as inputs;
use crate::lake::shape::ShapeColumn;
use crate::parts::arrow_schema::{METADATA_COLUMNS, OP, POS, SEQ};
use crate::parts::checksum::{EMPTY_SUM, checksum_text, hash_batch_from, verify_batches};
use crate::parts::part::{
    DICTIONARY_PAGE_BYTES, IDENTITY_METADATA_KEY, SCHEMA_METADATA_KEY, created_by,
};
use crate::parts::{MANIFEST_FILE, Manifest, ManifestPart, ManifestStatus, PartSettings};
use crate::position::Position;
use crate::spill::errors::io_error;
use crate::spill::files::{self, SpillKind};
use crate::state::BaselineStatus;

/// A fold that was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The new plan (`snapshot/<plan>/`).
    pub plan: String,
    /// The run whose checkpoint the fold is at.
    pub cut_run: String,
    /// The marker's `__pos`: every change before it is folded.
    pub marker: String,
    /// Rows of the state folded in.
    pub rows: u64,
}

/// Why no fold was written (logged; the compaction goes on).
pub type Skipped = &'static str;

/// Folds `table`'s history older than `retention` (see the module doc). `Ok(Err(why))`
/// when there is nothing to fold now.
pub async fn fold(
    config: &Config,
    backends: &Backends,
    table: &str,
    retention: Duration,
    fence: &mut Fence<'_>,
) -> Result<std::result::Result<Folded, Skipped>> {
    let destination = backends.destination.as_ref();
    if config.table_format == TableFormat::Iceberg {
        return Ok(Err(
            "an Iceberg change log is not folded (its snapshots reference the parts)",
        ));
    }
    if let Some(record) = backends.state.load_baseline(&config.job, table).await?
        && record.status != BaselineStatus::Done
    {
        return Ok(Err("the table's baseline is not done"));
    }
    let now = Utc::now();
    let Some(cut) = cut_run(destination, table, now, retention).await? else {
        return Ok(Err("no run older than the retention"));
    };
    let checkpoint = Position::parse_tagged(&cut.to)?;
    let Ok(epoch) = epoch::at_checkpoint(checkpoint) else {
        return Ok(Err(
            "the source's positions leave no room for an epoch (SQL Server)",
        ));
    };
    let marker = epoch.marker.sortable_text();
    let anchor = epoch.anchor.sortable_text();
    let listing = inputs::list(destination, table).await?;
    let current = inputs::current_plan_id(destination, &listing).await?;
    if let Some(current) = &current {
        let current_run = current.split('_').next().unwrap_or_default();
        if current_run >= cut.run_id.as_str() {
            return Ok(Err("the current plan is as new as the cut"));
        }
        if let (Some(plan_at), Some(cut_at)) = (run_time(current_run), run_time(&cut.run_id))
            && (cut_at - plan_at).to_std().unwrap_or_default() < retention / 10
        {
            return Ok(Err(
                "the current plan is younger than a tenth of the retention",
            ));
        }
    }
    if let Some(current_marker) =
        super::superseded::marker(destination, table, &config.spill_dir()).await?
        && current_marker.as_str() >= marker.as_str()
    {
        return Ok(Err("the current marker is at or after the cut"));
    }
    let Some(newest) = newest_manifest(destination, table).await? else {
        return Ok(Err("no manifest records the table's columns"));
    };
    let columns: Vec<ShapeColumn> = newest
        .schema
        .iter()
        .map(|c| ShapeColumn {
            name: c.name.clone(),
            ty: c.ty.clone(),
            key: c.key,
        })
        .collect();
    let mut batches = Vec::new();
    let mut template = None;
    for key in inputs::all_files(&listing, current.as_deref()) {
        let file = DataFile::read(destination, &key).await?;
        if file.has_columns(&columns) {
            template = Some(file.template);
        }
        for batch in &file.batches {
            batches.push(before(batch, &marker)?);
        }
    }
    let Some(template) = template else {
        return Ok(Err("no data file has the table's newest columns yet"));
    };
    let shape = crate::materialize::shape_of(&columns, &batches);
    let state = crate::fold::fold(&batches, &shape)?;
    let keyless = shape.key.is_empty();
    let plan = plan_id_of(&cut.run_id, &epoch.anchor.to_string());
    let rows = state.num_rows() as u64;
    let batch = template.plan_batch(&state, keyless, &marker, &anchor)?;
    fence.keep().await?;
    let settings = PartSettings::of(config);
    let key = format!("{table}/snapshot/{plan}/part-000001.parquet");
    let part = write_part(&settings, table, &template, &plan, &batch, &key)?;
    let uploaded = destination.put_part(&key, &part.local).await;
    let _ = std::fs::remove_file(&part.local);
    uploaded?;
    crate::faults::hit(crate::faults::FaultPoint::RetentionPlanWritten).await?;
    let manifest = Manifest {
        format_version: Manifest::FORMAT_VERSION,
        job: config.job.clone(),
        table: table.to_owned(),
        run_id: cut.run_id.clone(),
        status: ManifestStatus::Drained,
        from: epoch.anchor.to_string(),
        to: epoch.anchor.to_string(),
        rows: part.entry.rows,
        bytes: part.entry.bytes,
        parts: vec![part.entry],
        schema: newest.schema.clone(),
        keyless,
        written_at: now.to_rfc3339_opts(SecondsFormat::Millis, true),
        pending: None,
        shapes: Vec::new(),
        policy: newest.policy.clone(),
    };
    destination
        .put_marker(
            &format!("{table}/snapshot/{MANIFEST_FILE}"),
            &manifest.to_json_bytes()?,
        )
        .await?;
    let success = serde_json::json!({
        "anchor": epoch.anchor.to_string(), "plan": plan, "rows": rows,
        "history_folded_through": cut.run_id,
    });
    destination
        .put_marker(
            &format!("{table}/snapshot/_SUCCESS"),
            success.to_string().as_bytes(),
        )
        .await?;
    tracing::info!(table, plan = %plan, cut_run = %cut.run_id, rows, "history folded into a new baseline plan");
    Ok(Ok(Folded {
        plan,
        cut_run: cut.run_id,
        marker,
        rows,
    }))
}

/// Removes the part files of every plan folder older than the plan `snapshot/_manifest.json`
/// names, when that plan holds an epoch marker (a re-baseline's or a fold's): no reader
/// that applies the replay rule reads them (the newest plan holding a marker is current),
/// and every row in them sorts before that marker. Returns the files removed.
pub async fn remove_earlier_plans(
    destination: &dyn Destination,
    table: &str,
    spill_dir: &std::path::Path,
    fence: &mut Fence<'_>,
) -> Result<u64> {
    let Some(current) = manifest_plan(destination, table).await? else {
        return Ok(0);
    };
    if super::superseded::marker(destination, table, spill_dir)
        .await?
        .is_none()
    {
        return Ok(0);
    }
    let prefix = format!("{table}/snapshot/");
    let mut earlier: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in destination.list(&prefix).await? {
        let Some((plan, _)) = key.strip_prefix(&prefix).and_then(|r| r.split_once('/')) else {
            continue;
        };
        if plan < current.as_str() && !plan.starts_with('_') {
            earlier
                .entry(plan.to_owned())
                .or_default()
                .push(key.clone());
        }
    }
    let mut removed = 0;
    for keys in earlier.values() {
        fence.keep().await?;
        for key in keys {
            destination.delete(key).await?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The plan id of the parts `snapshot/_manifest.json` lists.
async fn manifest_plan(destination: &dyn Destination, table: &str) -> Result<Option<String>> {
    let key = format!("{table}/snapshot/{MANIFEST_FILE}");
    let Some(body) = destination.get(&key).await? else {
        return Ok(None);
    };
    let manifest: Manifest = serde_json::from_slice(&body).map_err(|e| {
        Error::new(Code::StateCorrupt, format!("{key} is not a manifest")).source(e)
    })?;
    let prefix = format!("{table}/snapshot/");
    Ok(manifest.parts.first().and_then(|p| {
        p.key
            .strip_prefix(&prefix)
            .and_then(|r| r.split_once('/'))
            .map(|(plan, _)| plan.to_owned())
    }))
}

/// The run the fold is cut at: its id and its checkpoint.
struct Cut {
    run_id: String,
    to: String,
}

/// The newest run that started `retention` before `now` and whose manifest records a
/// committed checkpoint.
async fn cut_run(
    destination: &dyn Destination,
    table: &str,
    now: DateTime<Utc>,
    retention: Duration,
) -> Result<Option<Cut>> {
    let Some(limit) = chrono::Duration::from_std(retention)
        .ok()
        .and_then(|r| now.checked_sub_signed(r))
    else {
        return Ok(None);
    };
    let limit = limit.format("%Y%m%dT%H%M%S%3f").to_string();
    let runs = inputs::run_manifests(destination, table).await?;
    for (run, key) in runs
        .iter()
        .rev()
        .filter(|(run, _)| run.as_str() < limit.as_str())
    {
        let Some(body) = destination.get(key).await? else {
            continue;
        };
        let manifest: Manifest = serde_json::from_slice(&body).map_err(|e| {
            Error::new(Code::StateCorrupt, format!("{key} is not a run manifest")).source(e)
        })?;
        if matches!(
            manifest.status,
            ManifestStatus::Drained | ManifestStatus::Partial
        ) && !manifest.to.is_empty()
        {
            return Ok(Some(Cut {
                run_id: run.clone(),
                to: manifest.to,
            }));
        }
    }
    Ok(None)
}

/// The start time a run id records.
fn run_time(run: &str) -> Option<DateTime<Utc>> {
    let stamp = run.get(..18)?;
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%3f")
        .ok()
        .map(|t| t.and_utc())
}

/// The rows of `batch` whose `__pos` sorts before `marker`.
fn before(batch: &RecordBatch, marker: &str) -> Result<RecordBatch> {
    let Some(pos) = batch
        .column_by_name(POS)
        .and_then(|c| c.as_string_opt::<i32>())
    else {
        return Err(Error::new(
            Code::FoldInput,
            "a data file of the table has no text __pos column".to_owned(),
        )
        .hint("move the file out of the table folder, or restore it from the run that wrote it"));
    };
    let keep: BooleanArray = pos
        .iter()
        .map(|p| Some(p.is_some_and(|p| p < marker)))
        .collect();
    filter_record_batch(batch, &keep)
        .map_err(|e| Error::new(Code::Internal, "filtering rows by position".to_owned()).source(e))
}

/// The newest manifest that records the table's columns with parts (the one the
/// table's shape is read from, [`crate::lake::shape`]).
async fn newest_manifest(destination: &dyn Destination, table: &str) -> Result<Option<Manifest>> {
    let mut keys = vec![
        format!("{table}/{MANIFEST_FILE}"),
        format!("{table}/snapshot/{MANIFEST_FILE}"),
    ];
    keys.extend(
        inputs::run_manifests(destination, table)
            .await?
            .pop()
            .map(|(_, key)| key),
    );
    let mut newest: Option<Manifest> = None;
    for key in keys {
        let Some(body) = destination.get(&key).await? else {
            continue;
        };
        let doc: Manifest = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                Code::StateCorrupt,
                format!("{key} is not a sluice manifest"),
            )
            .source(e)
        })?;
        if !doc.schema.is_empty()
            && !doc.parts.is_empty()
            && newest
                .as_ref()
                .is_none_or(|n| doc.written_at > n.written_at)
        {
            newest = Some(doc);
        }
    }
    Ok(newest)
}

/// One data file read whole: its rows and the schema it was written in.
struct DataFile {
    template: Template,
    batches: Vec<RecordBatch>,
}

impl DataFile {
    async fn read(destination: &dyn Destination, key: &str) -> Result<DataFile> {
        let body = destination.get(key).await?.ok_or_else(|| {
            Error::new(Code::LakeFileGone, format!("{key} was listed and is gone"))
                .hint("a forget removed it while this compaction read the folder; run again (it lists the folder anew)")
        })?;
        let not_parquet = |e: parquet::errors::ParquetError| {
            Error::new(
                Code::FoldInput,
                format!("{key} is not a readable Parquet file"),
            )
            .hint("move the file out of the table folder, or restore it from the run that wrote it")
            .source(e)
        };
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(Bytes::from(body)).map_err(not_parquet)?;
        let table_schema = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == SCHEMA_METADATA_KEY))
            .and_then(|k| k.value.clone());
        let schema = builder.schema().clone();
        let batches = builder
            .build()
            .map_err(not_parquet)?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::new(Code::FoldInput, format!("{key} cannot be read")).source(e))?;
        Ok(DataFile {
            template: Template {
                schema,
                table_schema,
            },
            batches,
        })
    }

    /// Whether the file's table columns are `columns`, by name and in order.
    fn has_columns(&self, columns: &[ShapeColumn]) -> bool {
        let names: Vec<&str> = self
            .template
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|n| !METADATA_COLUMNS.contains(n))
            .collect();
        names.len() == columns.len() && names.iter().zip(columns).all(|(n, c)| *n == c.name)
    }
}

/// A data file's schema and `sluice.schema` text: the plan's part is written in the newest
/// one that has the table's newest columns.
struct Template {
    schema: SchemaRef,
    table_schema: Option<String>,
}

impl Template {
    /// The plan's rows in the template's schema: the marker row first, then every row of
    /// `state` as a `snapshot` row at `anchor` (a keyless table's marker is at the anchor
    /// itself, after every row there, as a keyless baseline's).
    fn plan_batch(
        &self,
        state: &RecordBatch,
        keyless: bool,
        marker: &str,
        anchor: &str,
    ) -> Result<RecordBatch> {
        let n = state.num_rows();
        let (marker_pos, marker_seq) = if keyless {
            (anchor, KEYLESS_MARKER_SEQ as i64)
        } else {
            (marker, 0)
        };
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for field in self.schema.fields() {
            let name = field.name().as_str();
            let column: ArrayRef = match name {
                OP => Arc::new(StringArray::from_iter_values(
                    std::iter::once("rebaseline").chain(std::iter::repeat_n("snapshot", n)),
                )),
                POS => Arc::new(StringArray::from_iter_values(
                    std::iter::once(marker_pos).chain(std::iter::repeat_n(anchor, n)),
                )),
                // As a baseline's: a keyed table's rows all at `__seq` 0 (one per key), a
                // keyless table's numbered (each row counts, none is a copy of another).
                SEQ => Arc::new(Int64Array::from_iter_values(
                    std::iter::once(marker_seq)
                        .chain((0..n as i64).map(|i| if keyless { i } else { 0 })),
                )),
                _ if METADATA_COLUMNS.contains(&name) => new_null_array(field.data_type(), n + 1),
                _ => {
                    let values = match state.column_by_name(name) {
                        Some(values) => cast_to(values, field.data_type(), name)?,
                        None => new_null_array(field.data_type(), n),
                    };
                    arrow_select::concat::concat(&[
                        new_null_array(field.data_type(), 1).as_ref(),
                        values.as_ref(),
                    ])
                    .map_err(|e| {
                        Error::new(Code::Internal, format!("building column {name} of a fold"))
                            .source(e)
                    })?
                }
            };
            columns.push(column);
        }
        for field in state.schema().fields() {
            if self.schema.field_with_name(field.name()).is_err() {
                return Err(Error::new(
                    Code::FoldInput,
                    format!(
                        "the state's column {} is in no column of the newest part",
                        field.name()
                    ),
                )
                .hint(
                    "run a drain so a part of the table's newest shape exists, then compact again",
                ));
            }
        }
        RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| {
            Error::new(Code::Internal, "assembling a fold's part".to_owned()).source(e)
        })
    }
}

fn cast_to(values: &ArrayRef, to: &DataType, name: &str) -> Result<ArrayRef> {
    if values.data_type() == to {
        return Ok(values.clone());
    }
    arrow_cast::cast(values.as_ref(), to).map_err(|e| {
        Error::new(
            Code::FoldInput,
            format!("column {name} of the state cannot take the newest part's type {to}"),
        )
        .source(e)
    })
}

/// A written, verified plan part in the spill directory.
struct WrittenPart {
    entry: ManifestPart,
    local: std::path::PathBuf,
}

/// Writes `batch` as one part (the part writer's settings and metadata), fsyncs it, reads
/// it back and checks its rows and checksum.
fn write_part(
    settings: &PartSettings,
    table: &str,
    template: &Template,
    plan: &str,
    batch: &RecordBatch,
    key: &str,
) -> Result<WrittenPart> {
    let dir = &settings.spill_dir;
    let created = files::create(dir, SpillKind::Part { table }).map_err(|failed| {
        io_error(
            failed.source,
            format!("creating spill file {}", failed.path.display()),
            dir,
        )
    })?;
    let failed = |e: parquet::errors::ParquetError| {
        Error::new(Code::Internal, format!("writing the fold part {key}")).source(e)
    };
    let level = ZstdLevel::try_new(settings.zstd_level).map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("zstd level {} is not supported", settings.zstd_level),
        )
        .source(e)
        .hint("set output.zstd_level to a value in 1..=22")
    })?;
    let metadata = template
        .table_schema
        .iter()
        .map(|s| KeyValue::new(SCHEMA_METADATA_KEY.to_owned(), s.clone()))
        .chain(std::iter::once(KeyValue::new(
            IDENTITY_METADATA_KEY.to_owned(),
            format!("retention:{plan}"),
        )))
        .collect();
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(settings.row_group_rows))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
        .set_created_by(created_by())
        .set_key_value_metadata(Some(metadata))
        .build();
    parquet::arrow::add_encoded_arrow_schema_to_metadata(&template.schema, &mut props);
    let options = ArrowWriterOptions::new()
        .with_properties(props)
        .with_skip_arrow_metadata(true);
    let mut writer =
        ArrowWriter::try_new_with_options(created.file, template.schema.clone(), options)
            .map_err(failed)?;
    writer.write(batch).map_err(failed)?;
    writer.finish().map_err(failed)?;
    writer.inner().sync_all().map_err(|e| {
        io_error(
            e,
            format!("fsyncing the fold part {}", created.path.display()),
            dir,
        )
    })?;
    let bytes = writer.bytes_written() as u64;
    drop(writer);
    let checksum = checksum_text(hash_batch_from(EMPTY_SUM, batch)?);
    let file = std::fs::File::open(&created.path)
        .map_err(|e| io_error(e, format!("reading back {}", created.path.display()), dir))?;
    let back: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(failed)?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| {
            Error::new(Code::Internal, format!("reading back the fold part {key}")).source(e)
        })?;
    verify_batches(&checksum, &back)?;
    let pos = batch
        .column_by_name(POS)
        .map(|c| c.as_string::<i32>())
        .filter(|c| !c.is_empty());
    let first = pos.map(|c| c.value(0).to_owned()).unwrap_or_default();
    let last = pos
        .map(|c| c.value(c.len() - 1).to_owned())
        .unwrap_or_default();
    drop(created.hold);
    Ok(WrittenPart {
        entry: ManifestPart {
            key: key.to_owned(),
            rows: batch.num_rows() as u64,
            bytes,
            checksum,
            first_pos: first.clone().min(last.clone()),
            last_pos: first.max(last),
            partition: None,
            shape: None,
        },
        local: created.path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_records_its_start() {
        let t = run_time("20261207T101500123Z-abcdef").unwrap();
        assert_eq!(
            t.to_rfc3339_opts(SecondsFormat::Millis, true),
            "2026-12-07T10:15:00.123Z"
        );
        assert!(run_time("p1").is_none());
    }

    #[test]
    fn only_rows_before_the_marker_are_folded() {
        let batch = RecordBatch::try_from_iter([(
            POS,
            Arc::new(StringArray::from(vec!["0/10", "0/20", "0/30"])) as ArrayRef,
        )])
        .unwrap();
        let kept = before(&batch, "0/20").unwrap();
        assert_eq!(kept.num_rows(), 1);
        assert_eq!(kept.column(0).as_string::<i32>().value(0), "0/10");
    }
}
