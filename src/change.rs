//! The engine-neutral change model: column types, cell values, table schemas, and the
//! change events that flow from a source through the framer to the part writers.
//!
//! Guarantees: a [`Value`] is always one of the representable cells of its column's
//! [`ColumnType`] (sources convert or fail, they never substitute NULL for a value they
//! could not read); images are positional over [`TableSchema::columns`], whose names are
//! the source's column names, so consumers map values by name; a column whose value the
//! source did not log is listed in [`ChangeEvent::unlogged`] and holds [`Value::Null`]
//! only as a placeholder that the writer never presents as data.

use std::sync::Arc;

/// The logical type of a captured column; the part writer maps each to one Arrow type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    /// Exact decimal: `Decimal128` up to precision 38, `Decimal256` up to 76.
    Decimal {
        precision: u8,
        scale: i8,
    },
    /// UTF-8 text.
    Utf8,
    /// JSON document, kept as its UTF-8 text (Arrow JSON extension type).
    Json,
    /// UUID in its canonical lower-case hyphenated text form.
    Uuid,
    Binary,
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since midnight.
    Time,
    /// Wall-clock timestamp without zone, microseconds since 1970-01-01 00:00:00.
    Timestamp,
    /// Instant, microseconds since 1970-01-01 00:00:00 UTC.
    TimestampTz,
    /// One-dimensional list of the element type.
    List(Box<ColumnType>),
}

impl ColumnType {
    /// True when every value of `self` is exactly a value of `wider` (and the types
    /// differ): a narrower integer of the same or a wider signedness, `Float32` →
    /// `Float64`, a decimal keeping at least its integer digits and its scale, lists of
    /// such. A column retyped this way (PostgreSQL `int` → `bigint`, `real` → `double
    /// precision`, `numeric(10,2)` → `numeric(14,2)`) continues in its next part with the
    /// wider type; any other type change cannot continue in place.
    pub fn widens_to(&self, wider: &ColumnType) -> bool {
        use ColumnType::*;
        let signed = |t: &ColumnType| match t {
            Int8 => Some(8),
            Int16 => Some(16),
            Int32 => Some(32),
            Int64 => Some(64),
            _ => None,
        };
        let unsigned = |t: &ColumnType| match t {
            UInt8 => Some(8),
            UInt16 => Some(16),
            UInt32 => Some(32),
            UInt64 => Some(64),
            _ => None,
        };
        match (self, wider) {
            (Float32, Float64) => true,
            (
                Decimal {
                    precision: p,
                    scale: s,
                },
                Decimal {
                    precision: p2,
                    scale: s2,
                },
            ) => {
                (p, s) != (p2, s2)
                    && s2 >= s
                    && i16::from(*p2) - i16::from(*s2) >= i16::from(*p) - i16::from(*s)
            }
            (List(a), List(b)) => a.widens_to(b),
            (a, b) => match (signed(a), unsigned(a), signed(b), unsigned(b)) {
                (Some(n), _, Some(m), _) | (_, Some(n), _, Some(m)) => m > n,
                (_, Some(n), Some(m), _) => m > n,
                _ => false,
            },
        }
    }
}

/// One cell. Integers of every width travel as `Int`/`UInt` and are narrowed (checked)
/// by the writer to the column's width.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// Unscaled decimal; the scale is the column's.
    Decimal(i128),
    /// Unscaled decimal wider than 38 digits, as little-endian two's complement (boxed:
    /// rare, and every other value fits in half its size).
    Decimal256(Box<[u8; 32]>),
    Text(String),
    Bytes(Vec<u8>),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since midnight.
    Time(i64),
    /// Microseconds since the Unix epoch (naive or UTC per the column type).
    Timestamp(i64),
    List(Vec<Value>),
}

impl Value {
    /// A rough upper bound of the value's size in Arrow buffers.
    pub fn approx_size(&self) -> usize {
        match self {
            Value::Null | Value::Boolean(_) => 1,
            Value::Date(_) => 4,
            Value::Int(_)
            | Value::UInt(_)
            | Value::Float(_)
            | Value::Time(_)
            | Value::Timestamp(_) => 8,
            Value::Decimal(_) => 16,
            Value::Decimal256(_) => 32,
            Value::Text(s) => 4 + s.len(),
            Value::Bytes(b) => 4 + b.len(),
            Value::List(items) => 5 + items.iter().map(Value::approx_size).sum::<usize>(),
        }
    }
}

/// A captured column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    /// Part of the key that identifies a row (primary key or replica identity).
    pub key: bool,
    /// The source's own type name, for messages and the manifest (`numeric(12,2)`).
    pub source_type: String,
    /// Parquet field metadata the source declares for the column besides its type name
    /// (`sluice.form = text` for a type captured as its text output).
    pub field_metadata: std::collections::BTreeMap<String, String>,
}

/// A captured table's shape as the source describes it at one point in the log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableSchema {
    /// The table name exactly as the config names it (also its output directory).
    pub name: String,
    pub columns: Vec<Column>,
}

impl TableSchema {
    /// Index of a column by name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Indexes of the key columns, in column order.
    pub fn key_indexes(&self) -> Vec<usize> {
        (0..self.columns.len())
            .filter(|&i| self.columns[i].key)
            .collect()
    }

    /// True when both schemas have the same column names and types in the same order.
    pub fn same_shape(&self, other: &TableSchema) -> bool {
        self.columns.len() == other.columns.len()
            && self
                .columns
                .iter()
                .zip(&other.columns)
                .all(|(a, b)| a.name == b.name && a.ty == b.ty)
    }
}

/// A well-formed source value that its column's typed output cannot hold (a
/// two-dimensional array in a one-dimensional column, `NaN` in a bounded numeric, …).
/// Carried in an [`crate::error::Error`]'s source chain (found with [`UnfitValue::of`]) and
/// as a stream event: the column moves to its text form, which holds any value exactly,
/// and the table is re-baselined in that form (docs/types.md, "A value that does not fit").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfitValue {
    /// The table as the config names it.
    pub table: String,
    pub column: String,
    /// Why the value does not fit, without the value itself (it may be personal data).
    pub reason: String,
}

impl std::fmt::Display for UnfitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a value of {}.{} does not fit the column's typed form: {}",
            self.table, self.column, self.reason
        )
    }
}

impl std::error::Error for UnfitValue {}

/// Parquet field metadata key saying why a column holds its text form where its type has
/// a typed one: [`UNFIT_VALUE`] when a value did not fit the typed form.
pub const FORM_REASON_KEY: &str = "sluice.form_reason";

/// [`FORM_REASON_KEY`]'s value for a column moved to its text form by an [`UnfitValue`].
pub const UNFIT_VALUE: &str = "unfit_value";

impl UnfitValue {
    /// The unfit value an error was caused by, if any (searched along its source chain).
    pub fn of(error: &crate::error::Error) -> Option<&UnfitValue> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> =
            std::error::Error::source(error);
        while let Some(c) = cause {
            if let Some(unfit) = c.downcast_ref::<UnfitValue>() {
                return Some(unfit);
            }
            cause = c.source();
        }
        None
    }
}

/// The kind of a change row (`__op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Insert,
    Update,
    Delete,
    /// A baseline row (written under `snapshot/`).
    Snapshot,
    /// The table was emptied (PostgreSQL `TRUNCATE`): the row carries no image (every
    /// column NULL, none listed as unlogged); a replay drops every earlier row of the table.
    Truncate,
    /// A re-baseline's epoch marker (written in the new baseline's plan folder): the row
    /// carries no image; a replay drops every earlier row of the table, exactly as for
    /// [`Op::Truncate`], and the new snapshot's rows and every later change follow it.
    Rebaseline,
}

impl Op {
    /// The `__op` text.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
            Op::Snapshot => "snapshot",
            Op::Truncate => "truncate",
            Op::Rebaseline => "rebaseline",
        }
    }
}

/// A row change as a source decodes it, before framing gives it a position and ordinal.
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    pub table: Arc<TableSchema>,
    pub op: Op,
    /// The old image (deletes, and updates where the engine logs it); under a key-only
    /// identity the non-key cells are `Null` and listed in `before_unlogged`.
    pub before: Option<Vec<Value>>,
    /// The new image (inserts and updates).
    pub after: Option<Vec<Value>>,
    /// Columns of `before` that the source did not log.
    pub before_unlogged: Vec<usize>,
    /// Columns of `after` that the source did not log (e.g. unchanged TOAST values).
    pub after_unlogged: Vec<usize>,
}

impl RowChange {
    /// A rough upper bound of the change's cells in memory or in Arrow buffers.
    pub fn approx_bytes(&self) -> usize {
        let image = |cells: &Option<Vec<Value>>| {
            cells
                .iter()
                .flatten()
                .map(Value::approx_size)
                .sum::<usize>()
        };
        image(&self.before) + image(&self.after)
    }
}

/// A framed change: one output row.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeEvent {
    pub table: Arc<TableSchema>,
    pub op: Op,
    /// The transaction's commit position in its sortable text form (`__pos`).
    pub pos: Arc<str>,
    /// Ordinal within the transaction (`__seq`), from 0.
    pub seq: u64,
    /// Commit time, microseconds since the Unix epoch, UTC (`__ts`).
    pub commit_ts: Option<i64>,
    /// The image written: the new row for insert/update, the old row (or key) for delete.
    pub image: Vec<Value>,
    /// Columns of `image` that were not logged by the source (`__unlogged`).
    pub unlogged: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::ColumnType::*;

    /// Every cell of every row is a `Value`, moved through decode, buffers and builders:
    /// the rare wide decimal is boxed so the common ones stay at two words of payload.
    #[test]
    fn a_value_is_at_most_32_bytes() {
        assert!(std::mem::size_of::<super::Value>() <= 32);
    }

    #[test]
    fn widening_keeps_every_value_and_nothing_else_widens() {
        let dec = |precision, scale| Decimal { precision, scale };
        for (narrow, wide) in [
            (Int16, Int32),
            (Int32, Int64),
            (Int8, Int64),
            (UInt8, UInt32),
            (UInt32, Int64),
            (Float32, Float64),
            (dec(10, 2), dec(14, 2)),
            (dec(10, 2), dec(12, 4)),
            (dec(38, 0), dec(40, 0)),
            (List(Box::new(Int32)), List(Box::new(Int64))),
        ] {
            assert!(narrow.widens_to(&wide), "{narrow:?} -> {wide:?}");
            assert!(!wide.widens_to(&narrow), "{wide:?} -> {narrow:?}");
        }
        for (a, b) in [
            (Int32, Int32),
            (Int64, UInt64),
            (UInt64, Int64),
            (Int32, Float64),
            (Int32, dec(20, 0)),
            (dec(10, 2), dec(11, 4)),
            (dec(10, 2), dec(10, 2)),
            (Utf8, Json),
            (Int32, Utf8),
            (Timestamp, TimestampTz),
        ] {
            assert!(!a.widens_to(&b), "{a:?} -> {b:?}");
        }
    }
}
