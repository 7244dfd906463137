//! The replay rule executed in process: a table's rows as sluice wrote them (change parts,
//! baseline parts, and a previous current state) in, the table's current state out, as
//! Arrow — the rule `sluice sql` renders as SQL (docs/output.md, "Reading it back"), clause
//! by clause, so the two agree on every table:
//!
//! * **markers**: the newest `truncate` or `rebaseline` row drops every row at or before its
//!   `(__pos, __seq)` and is no row itself (a keyless table keeps a `rebaseline` marker's
//!   own `snapshot` rows at its `__pos`: they are its base);
//! * **duplicates** (byte-identical re-deliveries) count once: per key, one row per
//!   `(__pos, __seq)`;
//! * **latest**: per key the row with the highest `(__pos, __seq)`; a key whose latest row
//!   is a `delete` is not in the state;
//! * **unlogged values** ([`Shape::fillable`] columns only) take the key's previous value
//!   since its last delete, or — for the insert half of a key change (an `insert` right
//!   after a `delete` at the same `__pos`, `__seq` one less) — the value the old key held
//!   just before that delete (which followed its own key changes back the same way);
//! * **a table without a key** is a multiset: after the marker, every `snapshot` and
//!   `insert` row counts +1 and every `delete` −1 per distinct row (all columns, NULLs
//!   equal); `update` rows are not placed.
//!
//! Rows are matched to the shape's columns by name and cast to the shape's types (a column
//! a batch lacks is NULL there, as the SQL's union by name has it). Memory: the state holds
//! one small reference per cell, the batches stay as they were read.

mod cells;
mod hash;
mod keyed;
mod multiset;
mod order;

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};

use crate::error::{Code, Error, Result};

pub use hash::row_hashes;
pub use order::{Op, Ordered};

/// The state a fold produces its rows in: the table's columns, which of them are its key,
/// and which of them a source may leave unlogged.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The table's columns in output order (names, types, field metadata).
    pub fields: Vec<Field>,
    /// Indexes into `fields` of the key columns; empty for a table without a key.
    pub key: Vec<usize>,
    /// Per field: whether a row may list it in `__unlogged` (variable-length types).
    pub fillable: Vec<bool>,
}

impl Shape {
    /// The Arrow schema of the state: the fields, nothing else.
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.fields.clone()))
    }

    fn check(&self) -> Result<()> {
        if self.fields.is_empty() || self.fillable.len() != self.fields.len() {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "a fold shape of {} columns with {} fill flags",
                    self.fields.len(),
                    self.fillable.len()
                ),
            ));
        }
        if let Some(&bad) = self.key.iter().find(|&&i| i >= self.fields.len()) {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "a fold shape's key names column {bad} of {}",
                    self.fields.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Folds `batches` — rows with sluice's metadata columns (`__op`, `__pos`, `__seq`,
/// `__unlogged`) and some of the table's columns — into the table's state under `shape`.
/// The order of `batches` matters only between rows with the same key and `(__pos, __seq)`
/// (duplicates: the first counts).
pub fn fold(batches: &[RecordBatch], shape: &Shape) -> Result<RecordBatch> {
    shape.check()?;
    let columns = cells::Columns::of(batches, shape)?;
    let ordered = Ordered::of(batches)?;
    let picks = if shape.key.is_empty() {
        multiset::fold(&ordered, &columns, shape)?
    } else {
        keyed::fold(&ordered, &columns, shape)?
    };
    let arrays: Vec<ArrayRef> = (0..shape.fields.len())
        .map(|field| columns.assemble(field, &picks))
        .collect::<Result<_>>()?;
    RecordBatch::try_new(shape.schema(), arrays).map_err(|e| {
        Error::new(
            Code::Internal,
            "assembling a folded state's rows".to_owned(),
        )
        .source(e)
    })
}

/// True for a sluice type a source may leave unlogged (variable-length values).
pub fn may_be_unlogged(ty: &str) -> bool {
    const FIXED: [&str; 18] = [
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float32",
        "float64",
        "date",
        "time",
        "timestamp",
        "timestamp_tz",
        "uuid",
        "float16",
        "bool",
    ];
    !FIXED.contains(&ty)
}

#[cfg(test)]
mod tests;
