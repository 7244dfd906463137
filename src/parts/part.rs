//! [`PartWriter`]: one table's change rows into run-stamped Parquet parts, built in a local
//! spill directory.
//!
//! Guarantees:
//!
//! * memory is bounded by configuration, not by data (docs/state.md, Guarantees): at most one
//!   in-memory batch of `row_group_rows` rows or `row_group_bytes` bytes being built,
//!   whichever comes first, plus the batch being encoded and its encoded row group. Every
//!   full batch is verified ([`crate::parts::batch`]) and handed to the part's encoder
//!   ([`encoder`]: a thread of its own when the process has two CPUs, so decoding and
//!   encoding overlap), which writes it out as its own row group at once, so a 1M-row
//!   transaction sits on local disk, not in the heap;
//! * a part is written with zstd at the configured level, page statistics, `created_by`
//!   `sluice <version>`, the sluice table schema as JSON under the `sluice.schema`
//!   key, and the identity it was written under ([`PartWriter::with_identity`]) under
//!   `sluice.identity`; its spill file has a name no other writer (thread or process) uses and is
//!   fsynced before [`PartWriter::finish`] returns it;
//! * a part holds one table schema: an event with a different schema (columns reordered,
//!   added or dropped, another nullability or source type, a widened type such as
//!   `int32` → `int64`) finishes the open part and starts the next; a column whose type
//!   changed to one that does not widen it is refused with `SLUICE_SOURCE_SCHEMA_CHANGE`,
//!   because no output column holds both types;
//! * a part holds one partition ([`crate::parts::partition`], `output.layout`): an event
//!   whose commit time falls in another partition than the open part's finishes it and
//!   starts the next, keyed under the partition's folder
//!   (`<table>/dt=YYYY-MM-DD/cdc-…`); a transaction has one commit time, so this split
//!   happens between transactions only;
//! * part numbers count finished parts only (no gaps), from `first_number`, six digits;
//! * I/O failures are `SLUICE_OUTPUT_WRITE`, a full spill volume `SLUICE_SPILL_FULL`;
//!   after an error in [`PartWriter::finish`] the writer holds no open part. An unfinished
//!   part's spill file is removed when the writer is dropped; a [`FinishedPart`]'s file
//!   belongs to the caller ([`FinishedPart::discard`] removes it).
//!
//! Rolling at a size threshold happens only where the caller says: [`PartWriter::should_roll`]
//! reports it, and the caller calls [`PartWriter::finish`] at a transaction boundary.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::change::{ChangeEvent, TableSchema};
use crate::config::Layout;
use crate::error::{Code, Error, Result};
use crate::parts::arrow_schema::type_name;
use crate::parts::batch::RowBatchBuilder;
use crate::parts::checksum::{EMPTY_SUM, checksum_text};
use crate::parts::columns::schema_json;
use crate::parts::manifest::ManifestPart;
use crate::parts::partition::{self, Bucket};
use crate::spill::errors::io_error;
use crate::spill::files::{self, SpillKind};

use self::encoder::{Encoder, parquet_error};

/// Key-value metadata key holding the sluice table schema as JSON.
pub const SCHEMA_METADATA_KEY: &str = "sluice.schema";

/// Key-value metadata key holding the identity a part was written under: a change part's
/// run id (`run:<run_id>`), a snapshot part's plan (`plan:<plan id>`). A retried baseline
/// chunk adopts an existing part only when this matches (the committer's `commit_chunk`).
pub const IDENTITY_METADATA_KEY: &str = "sluice.identity";

/// A column chunk's dictionary falls back to plain encoding once its dictionary page
/// holds this many bytes (the Parquet writer's default is 1 MiB). Measured (bench/results/
/// profile.md): a column of mostly distinct values (keys, timestamps, free text) is less
/// than half the size plain + zstd than dictionary-encoded, and costs less CPU; a column of
/// few distinct values (status, country) keeps its dictionary, half its plain size.
pub const DICTIONARY_PAGE_BYTES: usize = 16 * 1024;

/// The `created_by` of every part.
pub fn created_by() -> String {
    format!("sluice {}", env!("CARGO_PKG_VERSION"))
}

/// How parts are cut and written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartSettings {
    /// A part should be finished (at the next transaction boundary) at this many rows.
    pub rollover_rows: u64,
    /// A part should be finished (at the next transaction boundary) at this many bytes.
    pub rollover_bytes: u64,
    /// Rows per in-memory batch and per Parquet row group (the writer's
    /// `max_row_group_row_count`).
    pub row_group_rows: usize,
    /// A batch is also written out once it holds about this many bytes of cells, so wide
    /// rows cannot grow the heap past it. The drain lowers it to each table's share of
    /// `output.memory_budget_bytes` ([`crate::spill::memory_budget`]). Each batch is closed
    /// as its own row group at once, so the Parquet writer's in-progress row group never
    /// holds more than one batch's encoding.
    pub row_group_bytes: usize,
    /// zstd level, 1..=22.
    pub zstd_level: i32,
    /// Local directory for parts being built (`/tmp` on Lambda).
    pub spill_dir: PathBuf,
    /// Whether the Arrow schema stored in each part keeps the columns' extension types
    /// (`arrow.json`). Off for Iceberg tables, whose schema has no JSON type and whose
    /// Python reader (pyiceberg) refuses an extension type; the Parquet JSON logical type
    /// stays either way.
    pub arrow_extensions: bool,
}

impl PartSettings {
    /// Defaults sized for a Lambda function with 1–2 GiB of memory and the default
    /// 512 MiB of ephemeral storage.
    pub fn new(spill_dir: impl Into<PathBuf>) -> Self {
        PartSettings {
            rollover_rows: 5_000_000,
            rollover_bytes: 128 * 1024 * 1024,
            row_group_rows: 65_536,
            // Wide rows reach this before `row_group_rows`; with the encoder thread a writer
            // holds about three batches, and a 40-column batch's builders and column
            // encoders hold more than its cells. Measured (bench, 200k rows of 40 columns,
            // release, peak RSS PostgreSQL / MariaDB): 61.9 / 67.7 MiB at 8 MiB, 59.8 /
            // 64.8 at 6, 47.2 / 56.4 at 4; at 4 MiB six-column tables' row groups hold
            // ~43k rows instead of 65,536: parts 2.5–4.5% larger, 0.2–1.3% more
            // instructions per row (bench/results/profile.md).
            row_group_bytes: 4 * 1024 * 1024,
            zstd_level: 3,
            spill_dir: spill_dir.into(),
            arrow_extensions: true,
        }
    }

    /// The defaults with the job's `output` row-group and zstd settings and its table
    /// format.
    pub fn of(config: &crate::config::Config) -> Self {
        PartSettings {
            row_group_rows: config.output.row_group_rows,
            zstd_level: config.output.zstd_level,
            arrow_extensions: config.table_format != crate::config::TableFormat::Iceberg,
            ..PartSettings::new(config.spill_dir())
        }
    }

    fn compression(&self) -> Result<Compression> {
        let level = ZstdLevel::try_new(self.zstd_level).map_err(|e| {
            Error::new(
                Code::ConfigInvalid,
                format!("zstd level {} is not supported", self.zstd_level),
            )
            .source(e)
            .hint("set output.zstd_level to a value in 1..=22 (3 is a good default)")
        })?;
        if self.row_group_rows == 0 || self.row_group_bytes == 0 {
            return Err(Error::new(
                Code::ConfigInvalid,
                "row groups of zero rows or zero bytes cannot hold data",
            )
            .hint("set output.row_group_rows and output.memory_budget_bytes to positive values (defaults: 65536 rows; half the Lambda function's memory, 512 MiB on the CLI)"));
        }
        Ok(Compression::ZSTD(level))
    }
}

/// A finished part: a complete, fsynced Parquet file in the spill directory, owned by the
/// caller. Dropping it leaves the file; [`FinishedPart::discard`] removes it.
#[derive(Debug)]
pub struct FinishedPart {
    /// Object key below the job's prefix, e.g. `public.orders/cdc-<run_id>-000001.parquet`
    /// (`public.orders/dt=2026-12-03/cdc-…` with a dated layout).
    pub key: String,
    /// The part's partition folder (`dt=2026-12-03`, `dt=2026-12-03/hr=07`); `None` in the
    /// flat layout.
    pub partition: Option<String>,
    pub local_path: PathBuf,
    pub rows: u64,
    /// File size.
    pub bytes: u64,
    /// `mix64:<16 hex>`: the cell checksum of every row of the part, in order
    /// (recomputable from the file with [`crate::parts::checksum::verify_batches`]).
    pub checksum: String,
    /// `__pos` of the first and the last row.
    pub first_pos: String,
    pub last_pos: String,
    pub schema: Arc<TableSchema>,
    /// Keeps the file marked in use (the spill sweep of another process skips it) until
    /// the part is dropped.
    _hold: Option<File>,
}

impl FinishedPart {
    /// Removes the local file (after upload, or to abandon the part).
    pub fn discard(self) -> Result<()> {
        match fs::remove_file(&self.local_path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::new(
                Code::OutputWrite,
                format!("removing spill file {}", self.local_path.display()),
            )
            .source(e)),
        }
    }

    /// The part's entry in the table's manifest.
    pub fn manifest_entry(&self) -> ManifestPart {
        ManifestPart {
            key: self.key.clone(),
            rows: self.rows,
            bytes: self.bytes,
            checksum: self.checksum.clone(),
            first_pos: self.first_pos.clone(),
            last_pos: self.last_pos.clone(),
            partition: self.partition.clone(),
            shape: None,
        }
    }
}

/// Writes one table's change rows into numbered parts.
#[derive(Debug)]
pub struct PartWriter {
    table: String,
    key_prefix: String,
    identity: Option<String>,
    layout: Layout,
    next_number: u32,
    settings: PartSettings,
    compression: Compression,
    open: Option<OpenPart>,
}

impl PartWriter {
    /// A writer for `table` whose parts are keyed `<key_prefix><nnnnnn>.parquet`, numbered
    /// from `first_number`. Fails (`SLUICE_CONFIG_INVALID`) on unusable settings.
    pub fn new(
        table: &str,
        key_prefix: String,
        first_number: u32,
        settings: PartSettings,
    ) -> Result<Self> {
        let compression = settings.compression()?;
        Ok(PartWriter {
            table: table.to_owned(),
            key_prefix,
            identity: None,
            layout: Layout::Flat,
            next_number: first_number,
            settings,
            compression,
            open: None,
        })
    }

    /// Stamps every part with `identity` (the run or plan it is written under) in its
    /// [`IDENTITY_METADATA_KEY`] metadata.
    pub fn with_identity(mut self, identity: String) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Partitions the parts by commit time as `layout` says: each part lies in one
    /// partition folder, inserted before the file name of the key prefix.
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Appends one event. When its schema or its partition differs from the open part's,
    /// the open part is finished and returned (upload it), and the event starts the next
    /// part. On error nothing was appended and the open part is as it was.
    pub fn append(&mut self, ev: &ChangeEvent) -> Result<Option<FinishedPart>> {
        if ev.table.name != self.table {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "a change of table {} was routed to the part writer of {}",
                    ev.table.name, self.table
                ),
            ));
        }
        let schema_changed = self
            .open
            .as_ref()
            .is_some_and(|open| !Arc::ptr_eq(&open.schema, &ev.table) && *open.schema != *ev.table);
        let bucket = partition::bucket(self.layout, ev.commit_ts);
        let partition_changed = self.open.as_ref().is_some_and(|open| open.bucket != bucket);
        if schema_changed || partition_changed || self.open.is_none() {
            if let Some(open) = &self.open {
                refuse_type_changes(&open.schema, &ev.table)?;
            }
            // Open and fill the next part first, so a failure leaves the open part intact.
            let mut next = self.open_part(ev.table.clone(), bucket)?;
            next.append(ev, &self.settings)?;
            let finished = self.finish()?;
            self.open = Some(next);
            return Ok(finished);
        }
        let Some(open) = self.open.as_mut() else {
            return Err(Error::new(Code::Internal, "part writer lost its open part"));
        };
        open.append(ev, &self.settings)?;
        Ok(None)
    }

    /// Rows in the open part.
    /// Drops the open part unwritten (its local file is removed): for a run that stops
    /// inside a transaction, whose rows the next run reads again.
    pub fn abandon(&mut self) {
        self.open = None;
    }

    pub fn rows_in_part(&self) -> u64 {
        self.open.as_ref().map_or(0, |open| open.rows)
    }

    /// Bytes of the open part: written so far, plus estimates of the current row group and
    /// the in-memory batch (an upper bound; the finished file is usually smaller).
    pub fn bytes_in_part(&self) -> u64 {
        self.open.as_ref().map_or(0, |open| {
            open.encoder.bytes_written() + open.builder.approx_bytes() as u64
        })
    }

    /// True when the open part reached `rollover_rows` or `rollover_bytes`: finish it at
    /// the next transaction boundary.
    pub fn should_roll(&self) -> bool {
        self.open.is_some()
            && (self.rows_in_part() >= self.settings.rollover_rows
                || self.bytes_in_part() >= self.settings.rollover_bytes)
    }

    /// The schema of the open part, if any.
    pub fn schema(&self) -> Option<&Arc<TableSchema>> {
        self.open.as_ref().map(|open| &open.schema)
    }

    /// Finishes the open part: writes the last batch and the footer, fsyncs the file, and
    /// returns it. `None` when no part is open or it has no rows.
    pub fn finish(&mut self) -> Result<Option<FinishedPart>> {
        let Some(mut open) = self.open.take() else {
            return Ok(None);
        };
        if open.rows == 0 {
            return Ok(None);
        }
        if !open.builder.is_empty() {
            open.flush_batch()?;
        }
        let path = open.spill.path.clone();
        let bytes = open.encoder.finish()?;
        let number = self.next_number;
        self.next_number = number.checked_add(1).ok_or_else(|| {
            Error::new(
                Code::Internal,
                format!("table {}: part numbers exhausted", self.table),
            )
        })?;
        open.spill.keep = true;
        let hold = open.spill.hold.take();
        let partition = partition::folder(self.layout, open.bucket);
        let key = match &partition {
            None => format!("{}{number:06}.parquet", self.key_prefix),
            Some(folder) => {
                let (dir, file) = self
                    .key_prefix
                    .split_at(self.key_prefix.rfind('/').map_or(0, |i| i + 1));
                format!("{dir}{folder}/{file}{number:06}.parquet")
            }
        };
        Ok(Some(FinishedPart {
            _hold: hold,
            key,
            partition,
            local_path: path,
            rows: open.rows,
            bytes,
            checksum: checksum_text(open.checksum),
            first_pos: open.first_pos.as_deref().unwrap_or_default().to_owned(),
            last_pos: open.last_pos.as_deref().unwrap_or_default().to_owned(),
            schema: open.schema.clone(),
        }))
    }

    fn open_part(&self, schema: Arc<TableSchema>, bucket: Bucket) -> Result<OpenPart> {
        let dir = &self.settings.spill_dir;
        fs::create_dir_all(dir).map_err(|e| {
            io_error(
                e,
                format!("creating spill directory {}", dir.display()),
                dir,
            )
        })?;
        let builder = RowBatchBuilder::new(schema.clone())?;
        let (spill, file) = SpillFile::create(dir, &self.table)?;
        let mut props = WriterProperties::builder()
            .set_compression(self.compression)
            .set_max_row_group_row_count(Some(self.settings.row_group_rows))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
            .set_created_by(created_by())
            .set_key_value_metadata(Some(
                std::iter::once(KeyValue::new(
                    SCHEMA_METADATA_KEY.to_owned(),
                    schema_json(&schema),
                ))
                .chain(self.identity.iter().map(|identity| {
                    KeyValue::new(IDENTITY_METADATA_KEY.to_owned(), identity.clone())
                }))
                .collect(),
            ))
            .build();
        let stored = if self.settings.arrow_extensions {
            builder.schema().as_ref().clone()
        } else {
            crate::parts::arrow_schema::without_extensions(builder.schema())
        };
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&stored, &mut props);
        let options = ArrowWriterOptions::new()
            .with_properties(props)
            .with_skip_arrow_metadata(true);
        let writer = ArrowWriter::try_new_with_options(file, builder.schema().clone(), options)
            .map_err(|e| {
                parquet_error(e, format!("starting part {}", spill.path.display()), dir)
            })?;
        Ok(OpenPart {
            schema,
            bucket,
            builder,
            encoder: Encoder::start(writer, spill.path.clone(), dir.clone()),
            spill,
            rows: 0,
            checksum: EMPTY_SUM,
            first_pos: None,
            last_pos: None,
        })
    }
}

/// The part being built.
struct OpenPart {
    schema: Arc<TableSchema>,
    /// The partition every row of the part is in.
    bucket: Bucket,
    builder: RowBatchBuilder,
    encoder: Encoder,
    spill: SpillFile,
    rows: u64,
    /// Running checksum of the rows already written out.
    checksum: u64,
    first_pos: Option<Arc<str>>,
    last_pos: Option<Arc<str>>,
}

impl std::fmt::Debug for OpenPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPart")
            .field("table", &self.schema.name)
            .field("path", &self.spill.path)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl OpenPart {
    fn append(&mut self, ev: &ChangeEvent, settings: &PartSettings) -> Result<()> {
        self.builder.append(ev)?;
        self.rows += 1;
        if self.first_pos.is_none() {
            self.first_pos = Some(ev.pos.clone());
        }
        self.last_pos = Some(ev.pos.clone());
        if self.builder.len() >= settings.row_group_rows
            || self.builder.approx_bytes() >= settings.row_group_bytes
        {
            self.flush_batch()?;
        }
        Ok(())
    }

    /// Writes the in-memory batch out as one row group, verified by the encoder first.
    fn flush_batch(&mut self) -> Result<()> {
        let approx = self.builder.approx_bytes() as u64;
        let finished = self.builder.finish()?;
        self.checksum = finished.check.expected;
        // The encoder verifies the batch before it encodes it (on its own thread).
        self.encoder.write(finished, approx)
    }
}

/// A spill file that is removed on drop unless it was handed over.
#[derive(Debug)]
struct SpillFile {
    path: PathBuf,
    keep: bool,
    /// The in-use mark ([`crate::spill::files::hold`]), passed on to the finished part.
    hold: Option<File>,
}

impl SpillFile {
    /// Creates the part's spill file ([`SpillKind::Part`]) and returns it with its open
    /// handle.
    fn create(dir: &Path, table: &str) -> Result<(Self, File)> {
        match files::create(dir, SpillKind::Part { table }) {
            Ok(created) => {
                let spill = SpillFile {
                    path: created.path,
                    keep: false,
                    hold: created.hold,
                };
                Ok((spill, created.file))
            }
            Err(failed) => Err(io_error(
                failed.source,
                format!("creating spill file {}", failed.path.display()),
                dir,
            )),
        }
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Refuses a schema in which a column kept its name but changed its type to one that does
/// not widen the old one ([`ColumnType::widens_to`](crate::change::ColumnType::widens_to)).
fn refuse_type_changes(old: &TableSchema, new: &TableSchema) -> Result<()> {
    for column in &new.columns {
        if let Some(before) = old.columns.iter().find(|c| c.name == column.name)
            && before.ty != column.ty
            && !before.ty.widens_to(&column.ty)
        {
            return Err(Error::new(
                Code::SourceSchemaChange,
                format!(
                    "table {}: column {} changed type from {} ({}) to {} ({})",
                    new.name,
                    column.name,
                    type_name(&before.ty),
                    before.source_type,
                    type_name(&column.ty),
                    column.source_type
                ),
            )
            .hint(format!(
                "one output column cannot hold both types; nothing after the last checkpoint was written. Re-baseline table {} (`sluice baseline`) so the snapshot and the changes after it carry the new type",
                new.name
            )));
        }
    }
    Ok(())
}

mod encoder;
#[cfg(test)]
mod tests;
