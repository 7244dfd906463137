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
mod shape;

use arrow_array::{ArrayRef, RecordBatch};

use crate::error::{Code, Error, Result};

pub use hash::{fnv1a, row_hashes};
pub use order::{Op, Ordered};
pub use shape::{Shape, may_be_unlogged};

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

/// The shape's columns of `batch`, matched by name and cast to the shape's types (a
/// column the batch lacks is NULL), exactly as [`fold`] reads them: what a row's hashes
/// are computed from, so a source row and a lake row compare in one type.
pub fn conformed(batch: &RecordBatch, shape: &Shape) -> Result<Vec<ArrayRef>> {
    shape.check()?;
    let columns = cells::Columns::of(std::slice::from_ref(batch), shape)?;
    Ok((0..shape.fields.len())
        .map(|f| columns.of_field(f)[0].clone())
        .collect())
}

#[cfg(test)]
mod tests;
