//! [`RowBatchBuilder`]: change events of one table into one checked Arrow batch.
//!
//! Guarantees:
//!
//! * every cell is converted with a checked conversion to its column's Arrow type; a value
//!   that does not fit (an integer out of the column's range, a decimal wider than its
//!   precision, a float that would round, a non-canonical UUID, a time of day past 24:00) or
//!   of the wrong kind fails with `SLUICE_VALUE_UNREPRESENTABLE` naming table, column,
//!   `__pos` and `__seq` — never a NULL, never a panic;
//! * a failed append leaves the batch as it was: the whole row is checked before any
//!   builder is touched;
//! * a column listed in [`ChangeEvent::unlogged`] is written as NULL and named in
//!   `__unlogged`, which is NULL when every column was logged;
//! * every batch [`RowBatchBuilder::finish`] builds carries its [`BatchCheck`]: the
//!   [`CellHasher`] sum of the appended cells against [`hash_batch_from`] over the built
//!   batch, failing with `SLUICE_OUTPUT_CHECKSUM` when they differ; the batch's writer
//!   runs it before writing (the part encoder, on its own thread). The sum runs on across
//!   batches (see [`crate::parts::checksum`]).

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Decimal256Builder,
    Float32Builder, Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder,
    ListBuilder, StringBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
    UInt8Builder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::types::{Decimal128Type, Decimal256Type, DecimalType};
use arrow_array::{ArrayRef, ListArray, RecordBatch};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer, i256};
use arrow_schema::{FieldRef, SchemaRef};

use crate::change::{ChangeEvent, ColumnType, TableSchema, Value};
use crate::error::{Code, Error, Result};
use crate::parts::arrow_schema::{self as mapping, SEQ, UTC};
use crate::parts::checksum::{CellHasher, EMPTY_SUM, checksum_text, hash_batch_from};

/// A built batch and the check it must pass before it is written.
#[derive(Debug)]
pub struct FinishedBatch {
    pub batch: RecordBatch,
    /// Its `expected` is the running checksum of every row the builder has finished so
    /// far, this batch included.
    pub check: BatchCheck,
}

/// The proof a built batch holds the cells appended: the [`CellHasher`] sum of those cells
/// must equal [`hash_batch_from`] over the built columns, both continuing from the sum of
/// the builder's earlier batches. Cheap to move to another thread (the encoder's).
#[derive(Debug)]
pub struct BatchCheck {
    /// The running sum both paths agreed on before this batch.
    from: u64,
    /// The running sum of the appended cells, this batch included.
    pub expected: u64,
    table: Arc<TableSchema>,
    rows: usize,
    first_pos: Option<Arc<str>>,
    last_pos: Option<Arc<str>>,
}

impl FinishedBatch {
    /// `batch` with the check its own columns pass (tests of the writers downstream).
    #[cfg(test)]
    pub fn of(batch: RecordBatch) -> FinishedBatch {
        let expected = hash_batch_from(EMPTY_SUM, &batch).expect("sluice column types");
        let check = BatchCheck {
            from: EMPTY_SUM,
            expected,
            table: Arc::new(TableSchema {
                name: "t".to_owned(),
                columns: Vec::new(),
            }),
            rows: batch.num_rows(),
            first_pos: None,
            last_pos: None,
        };
        FinishedBatch { batch, check }
    }
}

impl BatchCheck {
    /// Fails with `SLUICE_OUTPUT_CHECKSUM` when `batch`'s columns do not sum to the cells
    /// appended.
    pub fn verify(&self, batch: &RecordBatch) -> Result<()> {
        let actual = hash_batch_from(self.from, batch)?;
        if actual == self.expected {
            return Ok(());
        }
        Err(Error::new(
            Code::OutputChecksum,
            format!(
                "table {}: the batch of {} rows (__pos {} to {}) does not hold the decoded cells: cells sum to {}, the built columns to {}",
                self.table.name,
                self.rows,
                self.first_pos.as_deref().unwrap_or("-"),
                self.last_pos.as_deref().unwrap_or("-"),
                checksum_text(self.expected),
                checksum_text(actual),
            ),
        )
        .hint("nothing was written or checkpointed; this is a sluice bug in value conversion — report it with the table schema and the position range, and pin the previous release"))
    }
}

/// Builds Arrow batches of change rows for one [`TableSchema`].
pub struct RowBatchBuilder {
    table: Arc<TableSchema>,
    schema: SchemaRef,
    op: StringBuilder,
    pos: StringBuilder,
    seq: Int64Builder,
    ts: TimestampMicrosecondBuilder,
    unlogged: ListBuilder<StringBuilder>,
    columns: Vec<Cells>,
    /// Scratch: which columns of the current event were not logged.
    unlogged_mask: Vec<bool>,
    hasher: CellHasher,
    /// The cells' running sum at the last finish (where the next batch's check starts).
    finished_sum: u64,
    rows: usize,
    approx_bytes: usize,
    first_pos: Option<Arc<str>>,
    last_pos: Option<Arc<str>>,
    poisoned: bool,
}

impl std::fmt::Debug for RowBatchBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowBatchBuilder")
            .field("table", &self.table.name)
            .field("rows", &self.rows)
            .field("approx_bytes", &self.approx_bytes)
            .finish_non_exhaustive()
    }
}

impl RowBatchBuilder {
    /// A builder for `table`'s change rows (fails when a column type has no Arrow form).
    pub fn new(table: Arc<TableSchema>) -> Result<Self> {
        let schema = mapping::change_schema(&table)?;
        let columns = table
            .columns
            .iter()
            .map(|c| Cells::new(&c.ty))
            .collect::<Result<Vec<_>>>()?;
        let unlogged_item = match mapping::unlogged_type() {
            arrow_schema::DataType::List(item) => item,
            _ => return Err(Error::new(Code::Internal, "__unlogged is not a list type")),
        };
        Ok(RowBatchBuilder {
            unlogged_mask: vec![false; table.columns.len()],
            table,
            schema,
            op: StringBuilder::new(),
            pos: StringBuilder::new(),
            seq: Int64Builder::new(),
            ts: TimestampMicrosecondBuilder::new().with_timezone(UTC),
            unlogged: ListBuilder::new(StringBuilder::new()).with_field(unlogged_item),
            columns,
            hasher: CellHasher::new(),
            finished_sum: EMPTY_SUM,
            rows: 0,
            approx_bytes: 0,
            first_pos: None,
            last_pos: None,
            poisoned: false,
        })
    }

    /// The table schema this builder writes.
    pub fn table(&self) -> &Arc<TableSchema> {
        &self.table
    }

    /// The Arrow schema of the batches.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows appended since the last finish.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when no row was appended since the last finish.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// A rough, upper-bound size in bytes of the rows held since the last finish.
    pub fn approx_bytes(&self) -> usize {
        self.approx_bytes
    }

    /// Appends one change row. On error nothing was appended.
    pub fn append(&mut self, ev: &ChangeEvent) -> Result<()> {
        self.ensure_usable()?;
        if !Arc::ptr_eq(&ev.table, &self.table) && *ev.table != *self.table {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "table {}: an event with another schema reached the batch of {} at __pos {} __seq {}",
                    ev.table.name, self.table.name, ev.pos, ev.seq
                ),
            ));
        }
        if ev.image.len() != self.columns.len() {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "table {}: image of {} cells for {} columns at __pos {} __seq {}",
                    self.table.name,
                    ev.image.len(),
                    self.columns.len(),
                    ev.pos,
                    ev.seq
                ),
            ));
        }
        self.unlogged_mask.fill(false);
        for &i in &ev.unlogged {
            match self.unlogged_mask.get_mut(i) {
                Some(slot) => *slot = true,
                None => {
                    return Err(Error::new(
                        Code::Internal,
                        format!(
                            "table {}: unlogged column index {i} out of range at __pos {} __seq {}",
                            self.table.name, ev.pos, ev.seq
                        ),
                    ));
                }
            }
        }
        let seq = i64::try_from(ev.seq).map_err(|_| {
            self.unrepresentable(ev, SEQ, "int64", "ordinal exceeds the int64 range")
        })?;

        // Check the whole row before touching a builder.
        for (i, value) in ev.image.iter().enumerate() {
            if !self.unlogged_mask[i]
                && let Err(reason) = self.columns[i].put(value, false)
            {
                let column = &self.table.columns[i];
                return Err(self.unrepresentable(
                    ev,
                    &column.name,
                    &column_label(&column.ty, &column.source_type),
                    &reason,
                ));
            }
        }

        // Write: cannot fail unless `check` and `write` disagree (then the batch is poisoned).
        self.op.append_value(ev.op.as_str());
        self.pos.append_value(&ev.pos);
        self.seq.append_value(seq);
        self.ts.append_option(ev.commit_ts);
        let any_unlogged = self.unlogged_mask.iter().any(|&u| u);
        if any_unlogged {
            for (column, _) in self
                .table
                .columns
                .iter()
                .zip(&self.unlogged_mask)
                .filter(|(_, u)| **u)
            {
                self.unlogged.values().append_value(&column.name);
            }
            self.unlogged.append(true);
        } else {
            self.unlogged.append_null();
        }
        for (i, value) in ev.image.iter().enumerate() {
            let cells = &mut self.columns[i];
            if self.unlogged_mask[i] {
                cells.put_null();
            } else if let Err(reason) = cells.put(value, true) {
                self.poisoned = true;
                return Err(Error::new(
                    Code::Internal,
                    format!(
                        "table {}, column {}: a checked value failed to append ({reason}) at __pos {} __seq {}",
                        self.table.name, self.table.columns[i].name, ev.pos, ev.seq
                    ),
                ));
            }
        }

        // Path (a) of the checksum: the cells as they should now be in the batch.
        let h = &mut self.hasher;
        h.text(ev.op.as_str());
        h.text(&ev.pos);
        h.int(seq);
        h.timestamp(ev.commit_ts);
        let mask = &self.unlogged_mask;
        let names = self
            .table
            .columns
            .iter()
            .zip(mask)
            .filter(|(_, u)| **u)
            .map(|(c, _)| c.name.as_str());
        h.text_list(any_unlogged.then(|| names.collect::<Vec<_>>().into_iter()));
        let mut bytes = 24 + ev.op.as_str().len() + ev.pos.len();
        for ((column, value), &unlogged) in self.table.columns.iter().zip(&ev.image).zip(mask) {
            if unlogged {
                h.null();
                bytes += 1;
            } else {
                h.value(&column.ty, value);
                bytes += value.approx_size();
            }
        }
        h.end_row();

        self.rows += 1;
        self.approx_bytes += bytes;
        if self.first_pos.is_none() {
            self.first_pos = Some(ev.pos.clone());
        }
        self.last_pos = Some(ev.pos.clone());
        Ok(())
    }

    /// Builds the batch of the rows appended since the last finish and resets the builder
    /// for the next batch. The batch carries the check that proves it holds the appended
    /// cells ([`BatchCheck::verify`]), which its writer runs before writing it.
    pub fn finish(&mut self) -> Result<FinishedBatch> {
        self.ensure_usable()?;
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        arrays.push(Arc::new(self.op.finish()));
        arrays.push(Arc::new(self.pos.finish()));
        arrays.push(Arc::new(self.seq.finish()));
        arrays.push(Arc::new(self.ts.finish()));
        arrays.push(Arc::new(self.unlogged.finish()));
        for cells in &mut self.columns {
            arrays.push(cells.finish().inspect_err(|_| self.poisoned = true)?);
        }
        let (first_pos, last_pos) = (self.first_pos.take(), self.last_pos.take());
        let rows = std::mem::take(&mut self.rows);
        self.approx_bytes = 0;
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| {
            self.poisoned = true;
            Error::new(
                Code::Internal,
                format!(
                    "table {}: assembling a batch of {rows} rows",
                    self.table.name
                ),
            )
            .source(e)
        })?;
        let check = BatchCheck {
            from: self.finished_sum,
            expected: self.hasher.sum(),
            table: self.table.clone(),
            rows,
            first_pos,
            last_pos,
        };
        self.finished_sum = check.expected;
        Ok(FinishedBatch { batch, check })
    }

    /// [`RowBatchBuilder::finish`] with the check run here; a builder whose batch failed
    /// it is not used again.
    #[cfg(test)]
    pub fn finish_verified(&mut self) -> Result<FinishedBatch> {
        let finished = self.finish()?;
        finished
            .check
            .verify(&finished.batch)
            .inspect_err(|_| self.poisoned = true)?;
        Ok(finished)
    }

    fn ensure_usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "table {}: the batch builder is unusable after an earlier failure",
                    self.table.name
                ),
            ));
        }
        Ok(())
    }

    fn unrepresentable(&self, ev: &ChangeEvent, column: &str, ty: &str, reason: &str) -> Error {
        Error::new(
            Code::ValueUnrepresentable,
            format!(
                "table {}, column {column} ({ty}) at __pos {} __seq {}: {reason}",
                self.table.name, ev.pos, ev.seq
            ),
        )
        .hint("the value cannot be written as the column's type, so the run stopped before writing it; check the column's declared source type, and report the type mapping if the source holds this value legitimately")
    }
}

fn column_label(ty: &ColumnType, source_type: &str) -> String {
    format!("{} from {source_type}", mapping::type_name(ty))
}

/// Why a value does not fit its column (the caller adds table, column and position).
type Reason = String;

fn wrong_kind(value: &Value, column: &str) -> Reason {
    let kind = match value {
        Value::Null => "NULL",
        Value::Boolean(_) => "a boolean",
        Value::Int(_) => "a signed integer",
        Value::UInt(_) => "an unsigned integer",
        Value::Float(_) => "a float",
        Value::Decimal(_) => "a decimal",
        Value::Decimal256(_) => "a 256-bit decimal",
        Value::Text(_) => "a text",
        Value::Bytes(_) => "a byte string",
        Value::Date(_) => "a date",
        Value::Time(_) => "a time of day",
        Value::Timestamp(_) => "a timestamp",
        Value::List(_) => "a list",
    };
    format!("{kind} value cannot be written as {column} (a source decoding bug)")
}

/// Largest byte length an Arrow Utf8/Binary array (i32 offsets) can hold.
const MAX_BYTES_PER_BATCH: usize = i32::MAX as usize;

fn fits_bytes(held: usize, more: usize) -> Result<(), Reason> {
    if held.saturating_add(more) > MAX_BYTES_PER_BATCH {
        return Err(format!(
            "{more} more bytes would take this column of the batch past {MAX_BYTES_PER_BATCH} bytes, the most an Arrow string or binary column holds (batches close at 4 MiB, so the value itself is that large)"
        ));
    }
    Ok(())
}

/// The Arrow builder of one column, with the conversion rules of its [`ColumnType`].
enum Cells {
    Boolean(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    UInt8(UInt8Builder),
    UInt16(UInt16Builder),
    UInt32(UInt32Builder),
    UInt64(UInt64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Decimal128(Decimal128Builder, u8, i8),
    Decimal256(Decimal256Builder, u8, i8),
    Text(StringBuilder, TextKind),
    Binary(BinaryBuilder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Timestamp(TimestampMicrosecondBuilder),
    List(Box<ListCells>),
}

struct ListCells {
    field: FieldRef,
    offsets: Vec<i32>,
    validity: NullBufferBuilder,
    items: Cells,
    item_ty: ColumnType,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Utf8,
    Json,
    Uuid,
}

/// Microseconds in a day: the largest time of day (`24:00:00`, which PostgreSQL accepts).
const MICROS_PER_DAY: i64 = 86_400_000_000;

macro_rules! put_int {
    ($builder:expr, $native:ty, $name:literal, $value:expr, $write:expr) => {{
        let converted: $native = match $value {
            Value::Int(v) => <$native>::try_from(*v).ok(),
            Value::UInt(v) => <$native>::try_from(*v).ok(),
            other => return Err(wrong_kind(other, $name)),
        }
        .ok_or_else(|| {
            format!(
                concat!("integer out of range for ", $name, " ({}..={})"),
                <$native>::MIN,
                <$native>::MAX
            )
        })?;
        if $write {
            $builder.append_value(converted);
        }
        Ok(())
    }};
}

impl Cells {
    fn new(ty: &ColumnType) -> Result<Self> {
        let invalid = |e: arrow_schema::ArrowError| {
            Error::new(
                Code::SourceUnsupportedType,
                format!("{} has no Arrow form", mapping::type_name(ty)),
            )
            .source(e)
        };
        Ok(match ty {
            ColumnType::Boolean => Cells::Boolean(BooleanBuilder::new()),
            ColumnType::Int8 => Cells::Int8(Int8Builder::new()),
            ColumnType::Int16 => Cells::Int16(Int16Builder::new()),
            ColumnType::Int32 => Cells::Int32(Int32Builder::new()),
            ColumnType::Int64 => Cells::Int64(Int64Builder::new()),
            ColumnType::UInt8 => Cells::UInt8(UInt8Builder::new()),
            ColumnType::UInt16 => Cells::UInt16(UInt16Builder::new()),
            ColumnType::UInt32 => Cells::UInt32(UInt32Builder::new()),
            ColumnType::UInt64 => Cells::UInt64(UInt64Builder::new()),
            ColumnType::Float32 => Cells::Float32(Float32Builder::new()),
            ColumnType::Float64 => Cells::Float64(Float64Builder::new()),
            &ColumnType::Decimal { precision, scale } => {
                // Validates precision and scale the same way the schema does.
                mapping::arrow_type(ty)?;
                if precision <= mapping::MAX_DECIMAL128_PRECISION {
                    Cells::Decimal128(
                        Decimal128Builder::new()
                            .with_precision_and_scale(precision, scale)
                            .map_err(invalid)?,
                        precision,
                        scale,
                    )
                } else {
                    Cells::Decimal256(
                        Decimal256Builder::new()
                            .with_precision_and_scale(precision, scale)
                            .map_err(invalid)?,
                        precision,
                        scale,
                    )
                }
            }
            ColumnType::Utf8 => Cells::Text(StringBuilder::new(), TextKind::Utf8),
            ColumnType::Json => Cells::Text(StringBuilder::new(), TextKind::Json),
            ColumnType::Uuid => Cells::Text(StringBuilder::new(), TextKind::Uuid),
            ColumnType::Binary => Cells::Binary(BinaryBuilder::new()),
            ColumnType::Date => Cells::Date(Date32Builder::new()),
            ColumnType::Time => Cells::Time(Time64MicrosecondBuilder::new()),
            ColumnType::Timestamp => Cells::Timestamp(TimestampMicrosecondBuilder::new()),
            ColumnType::TimestampTz => {
                Cells::Timestamp(TimestampMicrosecondBuilder::new().with_timezone(UTC))
            }
            ColumnType::List(item) => Cells::List(Box::new(ListCells {
                field: mapping::list_item_field(item)?,
                offsets: vec![0],
                validity: NullBufferBuilder::new(0),
                items: Cells::new(item)?,
                item_ty: (**item).clone(),
            })),
        })
    }

    /// Checks `value` against the column and, when `write`, appends it. A value that fails
    /// the check is never appended.
    fn put(&mut self, value: &Value, write: bool) -> Result<(), Reason> {
        if matches!(value, Value::Null) {
            if write {
                self.put_null();
            }
            return Ok(());
        }
        match self {
            Cells::Boolean(b) => match value {
                Value::Boolean(v) => {
                    if write {
                        b.append_value(*v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "boolean")),
            },
            Cells::Int8(b) => put_int!(b, i8, "int8", value, write),
            Cells::Int16(b) => put_int!(b, i16, "int16", value, write),
            Cells::Int32(b) => put_int!(b, i32, "int32", value, write),
            Cells::Int64(b) => put_int!(b, i64, "int64", value, write),
            Cells::UInt8(b) => put_int!(b, u8, "uint8", value, write),
            Cells::UInt16(b) => put_int!(b, u16, "uint16", value, write),
            Cells::UInt32(b) => put_int!(b, u32, "uint32", value, write),
            Cells::UInt64(b) => put_int!(b, u64, "uint64", value, write),
            Cells::Float32(b) => match value {
                Value::Float(v) => {
                    let narrow = *v as f32;
                    if f64::from(narrow) != *v && !v.is_nan() {
                        return Err("float does not fit a float32 exactly (it would round)".into());
                    }
                    if write {
                        b.append_value(narrow);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "float32")),
            },
            Cells::Float64(b) => match value {
                Value::Float(v) => {
                    if write {
                        b.append_value(*v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "float64")),
            },
            Cells::Decimal128(b, precision, scale) => match value {
                Value::Decimal(v) => {
                    if !Decimal128Type::is_valid_decimal_precision(*v, *precision) {
                        return Err(format!(
                            "decimal has more than {precision} digits for decimal({precision},{scale})"
                        ));
                    }
                    if write {
                        b.append_value(*v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, &format!("decimal({precision},{scale})"))),
            },
            Cells::Decimal256(b, precision, scale) => {
                let v = match value {
                    Value::Decimal(v) => i256::from_i128(*v),
                    Value::Decimal256(le) => i256::from_le_bytes(**le),
                    other => {
                        return Err(wrong_kind(other, &format!("decimal({precision},{scale})")));
                    }
                };
                if !Decimal256Type::is_valid_decimal_precision(v, *precision) {
                    return Err(format!(
                        "decimal has more than {precision} digits for decimal({precision},{scale})"
                    ));
                }
                if write {
                    b.append_value(v);
                }
                Ok(())
            }
            // JSON text is not re-parsed: the engines validate it on input, and a strict
            // parser would refuse documents they accept (numbers beyond f64).
            Cells::Text(b, kind) => match value {
                Value::Text(s) => {
                    if *kind == TextKind::Uuid && !is_canonical_uuid(s) {
                        return Err(
                            "text is not a UUID in canonical lower-case hyphenated form".into()
                        );
                    }
                    fits_bytes(b.values_slice().len(), s.len())?;
                    if write {
                        b.append_value(s);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(
                    other,
                    match kind {
                        TextKind::Utf8 => "utf8",
                        TextKind::Json => "json",
                        TextKind::Uuid => "uuid",
                    },
                )),
            },
            Cells::Binary(b) => match value {
                Value::Bytes(v) => {
                    fits_bytes(b.values_slice().len(), v.len())?;
                    if write {
                        b.append_value(v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "binary")),
            },
            Cells::Date(b) => match value {
                Value::Date(v) => {
                    if write {
                        b.append_value(*v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "date")),
            },
            Cells::Time(b) => match value {
                Value::Time(v) => {
                    if !(0..=MICROS_PER_DAY).contains(v) {
                        return Err("time of day outside 00:00:00..=24:00:00".into());
                    }
                    if write {
                        b.append_value(*v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "time")),
            },
            Cells::Timestamp(b) => match value {
                Value::Timestamp(v) => {
                    if write {
                        b.append_value(*v);
                    }
                    Ok(())
                }
                other => Err(wrong_kind(other, "timestamp")),
            },
            Cells::List(list) => match value {
                Value::List(items) => {
                    let held = list.offsets.last().copied().unwrap_or(0);
                    let end = i32::try_from(items.len())
                        .ok()
                        .and_then(|n| held.checked_add(n))
                        .ok_or_else(|| {
                            format!("the batch would exceed {} list elements in this column; lower output.row_group_rows", i32::MAX)
                        })?;
                    for (k, item) in items.iter().enumerate() {
                        list.items
                            .put(item, write)
                            .map_err(|reason| format!("element {k}: {reason}"))?;
                    }
                    if write {
                        list.offsets.push(end);
                        list.validity.append_non_null();
                    }
                    Ok(())
                }
                other => Err(wrong_kind(
                    other,
                    &format!("list<{}>", mapping::type_name(&list.item_ty)),
                )),
            },
        }
    }

    fn put_null(&mut self) {
        match self {
            Cells::Boolean(b) => b.append_null(),
            Cells::Int8(b) => b.append_null(),
            Cells::Int16(b) => b.append_null(),
            Cells::Int32(b) => b.append_null(),
            Cells::Int64(b) => b.append_null(),
            Cells::UInt8(b) => b.append_null(),
            Cells::UInt16(b) => b.append_null(),
            Cells::UInt32(b) => b.append_null(),
            Cells::UInt64(b) => b.append_null(),
            Cells::Float32(b) => b.append_null(),
            Cells::Float64(b) => b.append_null(),
            Cells::Decimal128(b, _, _) => b.append_null(),
            Cells::Decimal256(b, _, _) => b.append_null(),
            Cells::Text(b, _) => b.append_null(),
            Cells::Binary(b) => b.append_null(),
            Cells::Date(b) => b.append_null(),
            Cells::Time(b) => b.append_null(),
            Cells::Timestamp(b) => b.append_null(),
            Cells::List(list) => {
                let held = list.offsets.last().copied().unwrap_or(0);
                list.offsets.push(held);
                list.validity.append_null();
            }
        }
    }

    fn finish(&mut self) -> Result<ArrayRef> {
        Ok(match self {
            Cells::Boolean(b) => Arc::new(b.finish()),
            Cells::Int8(b) => Arc::new(b.finish()),
            Cells::Int16(b) => Arc::new(b.finish()),
            Cells::Int32(b) => Arc::new(b.finish()),
            Cells::Int64(b) => Arc::new(b.finish()),
            Cells::UInt8(b) => Arc::new(b.finish()),
            Cells::UInt16(b) => Arc::new(b.finish()),
            Cells::UInt32(b) => Arc::new(b.finish()),
            Cells::UInt64(b) => Arc::new(b.finish()),
            Cells::Float32(b) => Arc::new(b.finish()),
            Cells::Float64(b) => Arc::new(b.finish()),
            Cells::Decimal128(b, _, _) => Arc::new(b.finish()),
            Cells::Decimal256(b, _, _) => Arc::new(b.finish()),
            Cells::Text(b, _) => Arc::new(b.finish()),
            Cells::Binary(b) => Arc::new(b.finish()),
            Cells::Date(b) => Arc::new(b.finish()),
            Cells::Time(b) => Arc::new(b.finish()),
            Cells::Timestamp(b) => Arc::new(b.finish()),
            Cells::List(list) => {
                let offsets = std::mem::replace(&mut list.offsets, vec![0]);
                let values = list.items.finish()?;
                let nulls = list.validity.finish();
                let array = ListArray::try_new(
                    list.field.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    values,
                    nulls,
                )
                .map_err(|e| Error::new(Code::Internal, "assembling a list column").source(e))?;
                Arc::new(array)
            }
        })
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lower-case hex.
fn is_canonical_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

#[cfg(test)]
mod tests;
