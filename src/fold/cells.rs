//! The table's columns of every batch, matched to the state's shape by name and cast to
//! its types, and the assembly of a state's rows from references to their cells.
//!
//! Guarantees: a cell of the state is a cell some batch holds, taken as it is (a cast only
//! where the batch's type differs from the shape's); a column a batch lacks is NULL in its
//! rows; a cast that cannot hold a value fails (`SLUICE_FOLD_INPUT`), never truncates.

use arrow_array::{Array, ArrayRef, RecordBatch, new_null_array};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_select::interleave::interleave;

use super::shape::Shape;
use crate::error::{Code, Error, Result};

/// Where a state's cell comes from: a row of a batch, or NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    batch: u32,
    row: u32,
}

impl Cell {
    /// A NULL cell.
    pub const NULL: Cell = Cell {
        batch: u32::MAX,
        row: 0,
    };

    /// The cell of a column at `row` of `batch`.
    pub fn at(batch: u32, row: u32) -> Cell {
        Cell { batch, row }
    }
}

/// Per shape field, per batch: the batch's column as the shape's type.
pub struct Columns {
    arrays: Vec<Vec<ArrayRef>>,
    /// Per field: one NULL of its type, the source of [`Cell::NULL`].
    nulls: Vec<ArrayRef>,
}

impl Columns {
    /// The shape's columns of every batch.
    pub fn of(batches: &[RecordBatch], shape: &Shape) -> Result<Columns> {
        let options = CastOptions {
            safe: false,
            ..Default::default()
        };
        let mut arrays = Vec::with_capacity(shape.fields.len());
        let mut nulls = Vec::with_capacity(shape.fields.len());
        for field in &shape.fields {
            let ty = field.data_type();
            let mut per_batch = Vec::with_capacity(batches.len());
            for batch in batches {
                let array = match batch.column_by_name(field.name()) {
                    None => new_null_array(ty, batch.num_rows()),
                    Some(array) if array.data_type() == ty => array.clone(),
                    Some(array) => cast_with_options(array, ty, &options).map_err(|e| {
                        Error::new(
                            Code::FoldInput,
                            format!(
                                "column {} is {} in one part and {ty} in the table's newest shape",
                                field.name(),
                                array.data_type()
                            ),
                        )
                        .hint("the part's values do not fit the column's newest type; re-baseline the table (sluice baseline --table T) so every part has one type")
                        .source(e)
                    })?,
                };
                per_batch.push(array);
            }
            arrays.push(per_batch);
            nulls.push(new_null_array(ty, 1));
        }
        Ok(Columns { arrays, nulls })
    }

    /// The column `field` of every batch.
    pub fn of_field(&self, field: usize) -> &[ArrayRef] {
        &self.arrays[field]
    }

    /// The column `field` of the state whose rows are `rows` (each a cell per field).
    pub fn assemble(&self, field: usize, rows: &[Vec<Cell>]) -> Result<ArrayRef> {
        let null_source = self.arrays[field].len();
        let mut sources: Vec<&dyn Array> = self.arrays[field].iter().map(|a| a.as_ref()).collect();
        sources.push(self.nulls[field].as_ref());
        let picks: Vec<(usize, usize)> = rows
            .iter()
            .map(|cells| {
                let cell = cells[field];
                if cell == Cell::NULL {
                    (null_source, 0)
                } else {
                    (cell.batch as usize, cell.row as usize)
                }
            })
            .collect();
        interleave(&sources, &picks).map_err(|e| {
            Error::new(Code::Internal, "assembling a folded column".to_owned()).source(e)
        })
    }
}
