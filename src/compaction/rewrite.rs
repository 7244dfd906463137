//! One group's rewrite: its parts read back one after the other, each verified against
//! the checksum its manifest recorded, their rows written unchanged into compacted parts
//! in the spill directory, and each compacted part read back and verified before it is
//! handed over for upload.
//!
//! Guarantees:
//!
//! * **corruption is never laundered**: a part whose rows do not sum to the checksum (or
//!   the row count) its manifest recorded, that does not read as Parquet, or that is gone
//!   stops the rewrite with `SLUICE_COMPACTION_PART_CORRUPT` naming it; nothing of the
//!   group reaches the destination;
//! * **rows are byte-identical**: every batch is written as it was read — same values,
//!   same metadata columns (`__op`, `__pos`, `__seq`, `__ts`, `__unlogged`), in the same
//!   order — under the input's own Arrow schema (field metadata included) and its
//!   `sluice.schema`; a compacted part never mixes two schemas (a part whose schema
//!   differs from the open output's starts the next output). A finished output is read
//!   back: its rows must sum (`mix64`) to the running sum of the inputs' rows, its row
//!   count must be theirs, and its Parquet schema (physical and logical types) the
//!   first input's — else `SLUICE_INTERNAL`, and nothing is uploaded;
//! * **`sluice forget`'s filter** ([`Rewriter::keep`]): with one, an output holds the
//!   rows of its inputs the filter keeps — each byte-identical, in order — and its sum is
//!   theirs; the inputs are verified whole all the same. A file no manifest records
//!   (given with an empty checksum, forget only) is read without a sum to check;
//! * memory is bounded by one input batch and one output row group (the writer flushes
//!   at `output.row_group_rows` rows or the row-group byte limit); a part is never held
//!   in memory whole: inputs are downloaded to, and outputs built in, the spill directory.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::SchemaDescPtr;

use super::ledger::compacted_key;
use super::plan::Group;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::checksum::{Algorithm, EMPTY_SUM, checksum_text, hash_batch_from};
use crate::parts::part::{
    DICTIONARY_PAGE_BYTES, IDENTITY_METADATA_KEY, SCHEMA_METADATA_KEY, created_by,
};
use crate::parts::{ManifestPart, PartSettings};
use crate::spill::errors::io_error;
use crate::spill::files::{self, SpillKind};

/// Rows per batch read from an input.
const READ_BATCH_ROWS: usize = 8192;

/// A verified compacted part in the spill directory, ready for upload.
#[derive(Debug)]
pub struct Output {
    pub entry: ManifestPart,
    pub local: PathBuf,
    /// Keeps the spill file marked in use until the output is dropped.
    _hold: Option<File>,
}

impl Output {
    /// Removes the local file.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.local);
    }
}

/// Writes one table's compacted parts for one compaction.
pub struct Rewriter<'a> {
    pub destination: &'a dyn Destination,
    pub table: &'a str,
    pub compaction_id: &'a str,
    pub settings: &'a PartSettings,
    /// The next compacted part's number (they count on across the compaction's steps).
    pub next_number: u32,
    /// `sluice forget`'s row filter: the rows it keeps of each input batch (`None`:
    /// every row, compaction's case). An output then holds a subset of its inputs' rows,
    /// each byte-identical and in order.
    pub keep: Option<&'a Keep<'a>>,
}

/// Which rows of a batch an output keeps (true: kept).
pub type Keep<'a> =
    dyn Fn(&arrow_array::RecordBatch) -> Result<arrow_array::BooleanArray> + Sync + 'a;

/// The compacted part being written.
struct Open {
    writer: ArrowWriter<File>,
    /// The schema the writer writes: the inputs' with the JSON extension on every column
    /// whose Parquet logical type is JSON (an Iceberg table's parts store their Arrow
    /// schema without it; the writer needs it to write the JSON logical type again).
    writing: SchemaRef,
    path: PathBuf,
    hold: Option<File>,
    schema: SchemaRef,
    /// The input's `sluice.schema` text.
    table_schema: Option<String>,
    /// The first input's Parquet schema, which the output must have.
    parquet_schema: SchemaDescPtr,
    rows: u64,
    /// Running `mix64` of the rows written.
    sum: u64,
    first_pos: String,
    last_pos: String,
    shape: Option<u32>,
}

/// An input part opened from its local copy.
struct Input {
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    schema: SchemaRef,
    table_schema: Option<String>,
    parquet_schema: SchemaDescPtr,
}

impl Rewriter<'_> {
    /// Rewrites `group` into compacted parts, each at most about the target (the group is
    /// planned to fit one; a schema change inside it cuts it). `stop` is asked between
    /// inputs: when it says so, the outputs so far are dropped and `Ok(None)` returned.
    pub async fn rewrite(
        &mut self,
        group: &Group,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Output>>> {
        let mut outputs = Vec::new();
        let mut open: Option<Open> = None;
        let result = self
            .rewrite_into(group, stop, &mut open, &mut outputs)
            .await;
        match result {
            Ok(true) => Ok(Some(outputs)),
            other => {
                if let Some(open) = open {
                    let _ = std::fs::remove_file(&open.path);
                }
                for output in outputs {
                    output.discard();
                }
                other.map(|_| None)
            }
        }
    }

    async fn rewrite_into(
        &mut self,
        group: &Group,
        stop: &dyn Fn() -> bool,
        open: &mut Option<Open>,
        outputs: &mut Vec<Output>,
    ) -> Result<bool> {
        let dir = self.settings.spill_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| {
            io_error(
                e,
                format!("creating spill directory {}", dir.display()),
                &dir,
            )
        })?;
        for part in &group.parts {
            if stop() {
                return Ok(false);
            }
            let (local, hold) = match files::create(&dir, SpillKind::Copy) {
                Ok(created) => (created.path, created.hold),
                Err(failed) => {
                    let what = format!(
                        "creating a file in {} to read part {} through",
                        dir.display(),
                        part.key
                    );
                    return Err(io_error(failed.source, what, &dir));
                }
            };
            let copied = self.copy_into(part, group, &local, open, outputs).await;
            let _ = std::fs::remove_file(&local);
            drop(hold);
            copied?;
        }
        if let Some(done) = open.take() {
            outputs.push(self.finish(done, group)?);
        }
        Ok(true)
    }

    /// Downloads `part` to `local`, verifies it, and appends its rows to the open output.
    async fn copy_into(
        &mut self,
        part: &ManifestPart,
        group: &Group,
        local: &Path,
        open: &mut Option<Open>,
        outputs: &mut Vec<Output>,
    ) -> Result<()> {
        if !self.destination.download(&part.key, local).await? {
            return Err(corrupt(
                part,
                format!(
                    "is listed as data but {} does not hold it",
                    self.destination.describe()
                ),
            ));
        }
        // A file no manifest records (an earlier baseline's plan folder, `_superseded/`:
        // only `sluice forget` reads those) has no checksum to verify against.
        let unrecorded = part.checksum.is_empty() && self.keep.is_some();
        let parsed = if unrecorded {
            Some((Algorithm::Mix64, 0))
        } else {
            Algorithm::parse(&part.checksum)
        };
        let Some((algorithm, want)) = parsed else {
            return Err(corrupt(
                part,
                format!(
                    "has no checksum this sluice can verify ({:?})",
                    part.checksum
                ),
            ));
        };
        let mut input = open_input(part, local)?;
        let same = open
            .as_ref()
            .is_some_and(|o| o.schema == input.schema && o.table_schema == input.table_schema);
        // (`schema` holds the fields only: the file's key-value metadata, which the reader
        // adds to the schema, differs per part by its identity.)
        if !same {
            if let Some(done) = open.take() {
                outputs.push(self.finish(done, group)?);
            }
            *open = Some(self.open_output(&input, part)?);
        }
        let Some(out) = open.as_mut() else {
            return Err(Error::new(
                Code::Internal,
                "compaction lost its open output",
            ));
        };
        let mut verified = algorithm.empty_sum();
        let mut rows = 0u64;
        let mut written = 0u64;
        for batch in input.reader.by_ref() {
            let batch =
                batch.map_err(|e| corrupt(part, "does not read as Parquet".into()).source(e))?;
            verified = algorithm.hash_batch_from(verified, &batch)?;
            rows += batch.num_rows() as u64;
            let batch = match self.keep {
                Some(keep) => arrow_select::filter::filter_record_batch(&batch, &keep(&batch)?)
                    .map_err(|e| Error::new(Code::Internal, "filtering a part's rows").source(e))?,
                None => batch,
            };
            if batch.num_rows() == 0 {
                continue;
            }
            written += batch.num_rows() as u64;
            out.sum = hash_batch_from(out.sum, &batch)?;
            let batch = if out.writing.as_ref() == batch.schema().as_ref() {
                batch
            } else {
                arrow_array::RecordBatch::try_new(out.writing.clone(), batch.columns().to_vec())
                    .map_err(|e| {
                        Error::new(Code::Internal, "re-labelling a batch's JSON columns").source(e)
                    })?
            };
            out.writer
                .write(&batch)
                .map_err(|e| self.write_error(e, &out.path))?;
            if out.writer.in_progress_size() >= self.settings.row_group_bytes {
                out.writer
                    .flush()
                    .map_err(|e| self.write_error(e, &out.path))?;
            }
        }
        if !unrecorded && (verified != want || rows != part.rows) {
            return Err(corrupt(
                part,
                format!(
                    "holds {rows} rows summing to {}{verified:016x}; its manifest recorded {} rows summing to {}",
                    algorithm.prefix(),
                    part.rows,
                    part.checksum
                ),
            ));
        }
        out.rows += written;
        if out.first_pos.is_empty() {
            out.first_pos.clone_from(&part.first_pos);
        }
        out.last_pos.clone_from(&part.last_pos);
        Ok(())
    }

    fn open_output(&self, input: &Input, first: &ManifestPart) -> Result<Open> {
        let dir = &self.settings.spill_dir;
        let created =
            files::create(dir, SpillKind::Part { table: self.table }).map_err(|failed| {
                io_error(
                    failed.source,
                    format!("creating spill file {}", failed.path.display()),
                    dir,
                )
            })?;
        let level = ZstdLevel::try_new(self.settings.zstd_level).map_err(|e| {
            Error::new(
                Code::ConfigInvalid,
                format!("zstd level {} is not supported", self.settings.zstd_level),
            )
            .source(e)
            .hint("set output.zstd_level to a value in 1..=22")
        })?;
        let metadata = input
            .table_schema
            .iter()
            .map(|s| KeyValue::new(SCHEMA_METADATA_KEY.to_owned(), s.clone()))
            .chain(std::iter::once(KeyValue::new(
                IDENTITY_METADATA_KEY.to_owned(),
                format!("compaction:{}", self.compaction_id),
            )))
            .collect();
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(self.settings.row_group_rows))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
            .set_created_by(created_by())
            .set_key_value_metadata(Some(metadata))
            .build();
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&input.schema, &mut props);
        let options = ArrowWriterOptions::new()
            .with_properties(props)
            .with_skip_arrow_metadata(true);
        let writing = with_json_extensions(&input.schema, &input.parquet_schema)?;
        let writer = ArrowWriter::try_new_with_options(created.file, writing.clone(), options)
            .map_err(|e| self.write_error(e, &created.path))?;
        Ok(Open {
            writer,
            writing,
            path: created.path,
            hold: created.hold,
            schema: input.schema.clone(),
            table_schema: input.table_schema.clone(),
            parquet_schema: input.parquet_schema.clone(),
            rows: 0,
            sum: EMPTY_SUM,
            first_pos: String::new(),
            last_pos: String::new(),
            shape: first.shape,
        })
    }

    /// Finishes, fsyncs and verifies the output: read back, its rows, sum and Parquet
    /// schema must be what was written.
    fn finish(&mut self, mut open: Open, group: &Group) -> Result<Output> {
        open.writer
            .finish()
            .map_err(|e| self.write_error(e, &open.path))?;
        let dir = &self.settings.spill_dir;
        open.writer.inner().sync_all().map_err(|e| {
            io_error(
                e,
                format!("fsyncing compacted part {}", open.path.display()),
                dir,
            )
        })?;
        let bytes = open.writer.bytes_written() as u64;
        let number = self.next_number;
        self.next_number += 1;
        let key = compacted_key(
            self.table,
            group.partition.as_deref(),
            self.compaction_id,
            number,
        );
        let wrong = |what: String| {
            let _ = std::fs::remove_file(&open.path);
            Error::new(Code::Internal, format!("compacted part {key} (built as {}): {what}", open.path.display()))
                .hint("nothing was uploaded or removed; this is a bug in sluice, please report it with the log")
        };
        let part = ManifestPart {
            key: key.clone(),
            rows: open.rows,
            bytes,
            checksum: checksum_text(open.sum),
            first_pos: open.first_pos.clone(),
            last_pos: open.last_pos.clone(),
            partition: group.partition.clone(),
            shape: open.shape,
        };
        let back = open_input(&part, &open.path).map_err(|e| wrong(e.to_string()))?;
        if back.parquet_schema.root_schema() != open.parquet_schema.root_schema() {
            let (ours, theirs) = (back.parquet_schema.columns(), open.parquet_schema.columns());
            let differ = ours
                .iter()
                .zip(theirs)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!(": column {a:?} where the inputs have {b:?}"))
                .unwrap_or_default();
            return Err(wrong(format!(
                "its Parquet schema is not its inputs'{differ}"
            )));
        }
        if back.schema != open.schema || back.table_schema != open.table_schema {
            return Err(wrong("its schema metadata is not its inputs'".into()));
        }
        let mut sum = EMPTY_SUM;
        let mut rows = 0u64;
        for batch in back.reader {
            let batch = batch.map_err(|e| wrong(format!("reading it back: {e}")))?;
            sum = hash_batch_from(sum, &batch)?;
            rows += batch.num_rows() as u64;
        }
        if sum != open.sum || rows != open.rows {
            return Err(wrong(format!(
                "read back it holds {rows} rows summing to {}, not the {} rows summing to {} written",
                checksum_text(sum),
                open.rows,
                checksum_text(open.sum)
            )));
        }
        Ok(Output {
            entry: part,
            local: open.path,
            _hold: open.hold,
        })
    }

    fn write_error(&self, err: ParquetError, path: &Path) -> Error {
        let what = format!("writing compacted part {}", path.display());
        let dir = &self.settings.spill_dir;
        match &err {
            ParquetError::External(inner) => match inner.downcast_ref::<std::io::Error>() {
                Some(io) => crate::spill::errors::volume_error(io, &what, dir)
                    .unwrap_or_else(|| Error::new(Code::OutputWrite, what.clone()))
                    .source(err),
                None => Error::new(Code::OutputWrite, what).source(err),
            },
            _ => Error::new(Code::OutputWrite, what).source(err),
        }
    }
}

/// Opens the local copy of `part` for reading.
fn open_input(part: &ManifestPart, local: &Path) -> Result<Input> {
    let file = File::open(local).map_err(|e| {
        Error::new(
            Code::OutputWrite,
            format!("opening {} (a copy of {})", local.display(), part.key),
        )
        .source(e)
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| corrupt(part, "does not read as Parquet".into()).source(e))?;
    let table_schema = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == SCHEMA_METADATA_KEY))
        .and_then(|k| k.value.clone());
    // The fields with their metadata, as the part's stored Arrow schema has them; not the
    // file's key-value metadata, which the reader adds at the schema level.
    let schema = Arc::new(arrow_schema::Schema::new(builder.schema().fields().clone()));
    let parquet_schema = builder.metadata().file_metadata().schema_descr_ptr();
    let reader = builder
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(|e| corrupt(part, "does not read as Parquet".into()).source(e))?;
    Ok(Input {
        reader,
        schema,
        table_schema,
        parquet_schema,
    })
}

/// `schema` with the JSON extension on each string column (or list of strings) whose
/// Parquet leaf in `parquet` has the JSON logical type and which lacks it: the stored
/// Arrow schema of an Iceberg table's parts leaves it out, the writer needs it to write
/// that logical type.
fn with_json_extensions(schema: &SchemaRef, parquet: &SchemaDescPtr) -> Result<SchemaRef> {
    use arrow_schema::extension::Json;
    use arrow_schema::{DataType, Field};
    use parquet::basic::LogicalType;
    let json: std::collections::BTreeSet<String> = parquet
        .columns()
        .iter()
        .filter(|c| matches!(c.logical_type_ref(), Some(LogicalType::Json)))
        .filter_map(|c| c.path().parts().first().cloned())
        .collect();
    if json.is_empty() {
        return Ok(schema.clone());
    }
    let extended = |field: &Field| -> Result<Field> {
        let mut f = field.clone();
        if f.extension_type_name().is_none() {
            f.try_with_extension_type(Json::default()).map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("attaching the JSON extension to {}", field.name()),
                )
                .source(e)
            })?;
        }
        Ok(f)
    };
    let mut fields = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let f = match field.data_type() {
            _ if !json.contains(field.name()) => field.as_ref().clone(),
            DataType::Utf8 | DataType::LargeUtf8 => extended(field)?,
            DataType::List(item)
                if matches!(item.data_type(), DataType::Utf8 | DataType::LargeUtf8) =>
            {
                let item = Arc::new(extended(item)?);
                Field::new(field.name(), DataType::List(item), field.is_nullable())
                    .with_metadata(field.metadata().clone())
            }
            _ => field.as_ref().clone(),
        };
        fields.push(f);
    }
    Ok(Arc::new(arrow_schema::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )))
}

/// `SLUICE_COMPACTION_PART_CORRUPT` for `part`.
pub fn corrupt(part: &ManifestPart, what: String) -> Error {
    Error::new(
        Code::CompactionPartCorrupt,
        format!("part {} {what}", part.key),
    )
    .hint(format!(
        "the table's compaction stopped and removed nothing: restore {} from a version or a backup (its manifest records rows {}, checksum {}), then run `sluice compact` again; the other tables were compacted",
        part.key, part.rows, part.checksum
    ))
}
