//! The keyed rule: per key the latest row, deletes removing the key, unlogged cells filled
//! from the key's previous row or across a key change.
//!
//! Guarantees: applied in replay order this is exactly clauses 1–4 of docs/output.md's
//! rule — a cell an `__unlogged` list names (a fillable column) refers to the cell the key
//! (or, for a key change's insert half with no row of its own, the old key just before its
//! delete) held, which was itself filled the same way; the state's rows come out in key
//! order (the keys' binary row encoding), so one input gives one output.

use std::collections::{HashMap, HashSet};

use arrow_row::{RowConverter, Rows, SortField};

use super::cells::{Cell, Columns};
use super::order::{Op, Ordered, Row};
use super::shape::Shape;
use crate::error::{Code, Error, Result};

/// The state's rows: a cell per field, per live key.
pub fn fold(ordered: &Ordered<'_>, columns: &Columns, shape: &Shape) -> Result<Vec<Vec<Cell>>> {
    let keys = encode_keys(columns, shape)?;
    let key_of = |row: &Row| keys[row.batch as usize].row(row.row as usize);
    let start = ordered.last_marker().map_or(0, |m| m + 1);
    let live = &ordered.rows[start..];

    let mut state: HashMap<Vec<u8>, Vec<Cell>> = HashMap::new();
    // The previous distinct row and, when it was a delete, the cells it removed.
    let mut previous: Option<(Row, Option<Vec<Cell>>)> = None;
    // Keys seen at the current `(__pos, __seq)`: a second row of one is a duplicate.
    let mut here: HashSet<Vec<u8>> = HashSet::new();
    let mut here_at: Option<Row> = None;
    for row in live {
        let key = key_of(row).as_ref().to_vec();
        if !here_at.is_some_and(|at| ordered.same_place(&at, row)) {
            here.clear();
            here_at = Some(*row);
        }
        if !here.insert(key.clone()) {
            continue;
        }
        match row.op {
            Op::Delete => {
                let removed = state.remove(&key);
                previous = Some((*row, removed));
            }
            Op::Insert | Op::Update | Op::Snapshot => {
                let unlogged = ordered.unlogged(row);
                let prior = state.get(&key);
                let across = match (&previous, prior, row.op) {
                    (Some((before, Some(removed))), None, Op::Insert)
                        if before.op == Op::Delete
                            && before.seq == row.seq - 1
                            && ordered.pos(before) == ordered.pos(row) =>
                    {
                        Some(removed)
                    }
                    _ => None,
                };
                let cells = shape
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(f, field)| {
                        let filled = shape.fillable[f]
                            && !shape.key.contains(&f)
                            && unlogged.iter().any(|name| name == field.name());
                        if filled {
                            prior.or(across).map_or(Cell::NULL, |from| from[f])
                        } else {
                            Cell::at(row.batch, row.row)
                        }
                    })
                    .collect();
                state.insert(key, cells);
                previous = Some((*row, None));
            }
            Op::Truncate | Op::Rebaseline => {
                return Err(Error::new(
                    Code::Internal,
                    "a marker after the newest marker".to_owned(),
                ));
            }
        }
    }
    let mut rows: Vec<(Vec<u8>, Vec<Cell>)> = state.into_iter().collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(rows.into_iter().map(|(_, cells)| cells).collect())
}

/// Each batch's key columns in arrow's binary row form: equal keys, equal bytes.
fn encode_keys(columns: &Columns, shape: &Shape) -> Result<Vec<Rows>> {
    let fields = shape
        .key
        .iter()
        .map(|&k| SortField::new(shape.fields[k].data_type().clone()))
        .collect();
    let converter = RowConverter::new(fields).map_err(|e| {
        Error::new(
            Code::FoldInput,
            "the table's key columns have a type rows cannot be compared by".to_owned(),
        )
        .source(e)
    })?;
    let batches = shape.key.first().map_or(0, |&k| columns.of_field(k).len());
    (0..batches)
        .map(|b| {
            let arrays: Vec<_> = shape
                .key
                .iter()
                .map(|&k| columns.of_field(k)[b].clone())
                .collect();
            converter.convert_columns(&arrays).map_err(|e| {
                Error::new(Code::Internal, "encoding key columns".to_owned()).source(e)
            })
        })
        .collect()
}
