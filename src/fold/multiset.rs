//! The rule for a table without a key: a multiset of whole rows.
//!
//! Guarantees: after the newest marker (a `rebaseline` marker's own `snapshot` rows at its
//! `__pos` included; no other `snapshot` row once a marker exists), each distinct row —
//! every column, NULLs equal — counts +1 per `snapshot` or `insert` and −1 per `delete`; a
//! change at one `(__pos, __seq)` counts once however many copies the folder holds;
//! `update` rows are not placed (docs/output.md, "Tables without a key"). Rows come out in
//! the order their first copy was applied, each as many times as it counts.

use std::collections::HashMap;

use arrow_row::{RowConverter, SortField};

use super::cells::{Cell, Columns};
use super::order::{Op, Ordered, Row};
use super::shape::Shape;
use crate::error::{Code, Error, Result};

/// The state's rows: a cell per field, a row repeated as many times as it counts.
pub fn fold(ordered: &Ordered<'_>, columns: &Columns, shape: &Shape) -> Result<Vec<Vec<Cell>>> {
    let fields = shape.fields.len();
    let converter = RowConverter::new(
        (0..fields)
            .map(|f| SortField::new(shape.fields[f].data_type().clone()))
            .collect(),
    )
    .map_err(|e| {
        Error::new(
            Code::FoldInput,
            "the table's columns have a type rows cannot be compared by".to_owned(),
        )
        .source(e)
    })?;
    let batches = columns.of_field(0).len();
    let encoded = (0..batches)
        .map(|b| {
            let arrays: Vec<_> = (0..fields)
                .map(|f| columns.of_field(f)[b].clone())
                .collect();
            converter
                .convert_columns(&arrays)
                .map_err(|e| Error::new(Code::Internal, "encoding rows".to_owned()).source(e))
        })
        .collect::<Result<Vec<_>>>()?;

    let marker = ordered.last_marker().map(|m| ordered.rows[m]);
    let counts_row = |row: &Row| match (row.op, marker) {
        (Op::Snapshot, None) => true,
        (Op::Snapshot, Some(m)) => m.op == Op::Rebaseline && ordered.pos(row) == ordered.pos(&m),
        (Op::Insert | Op::Delete, None) => true,
        (Op::Insert | Op::Delete, Some(m)) => {
            let (p, mp) = (ordered.pos(row), ordered.pos(&m));
            p > mp || (p == mp && row.seq > m.seq)
        }
        _ => false,
    };
    let mut counts: HashMap<Vec<u8>, (i64, Row)> = HashMap::new();
    let mut first_seen: Vec<Vec<u8>> = Vec::new();
    let mut last_change: Option<Row> = None;
    for row in ordered.rows.iter().filter(|r| counts_row(r)) {
        if row.op != Op::Snapshot {
            if last_change.is_some_and(|at| ordered.same_place(&at, row)) {
                continue;
            }
            last_change = Some(*row);
        }
        let bytes = encoded[row.batch as usize]
            .row(row.row as usize)
            .as_ref()
            .to_vec();
        let delta = if row.op == Op::Delete { -1 } else { 1 };
        match counts.get_mut(&bytes) {
            Some((n, _)) => *n += delta,
            None => {
                first_seen.push(bytes.clone());
                counts.insert(bytes, (delta, *row));
            }
        }
    }
    let mut rows = Vec::new();
    for bytes in first_seen {
        let (n, row) = counts[&bytes];
        for _ in 0..n.max(0) {
            rows.push(vec![Cell::at(row.batch, row.row); fields]);
        }
    }
    Ok(rows)
}
