//! A fold's rows in replay order: every row of every batch, sorted by `(__pos, __seq)`
//! (ties kept in batch, then row order, so the first copy of a duplicate comes first), and
//! cut at the newest marker.
//!
//! Guarantees: a batch without the metadata columns, or with an `__op` sluice does not
//! write, is refused (`SLUICE_FOLD_INPUT`), never guessed at.

use arrow_array::cast::AsArray;
use arrow_array::{Array, Int64Array, ListArray, RecordBatch, StringArray};

use crate::error::{Code, Error, Result};
use crate::parts::arrow_schema::{OP, POS, SEQ, UNLOGGED};

/// What a row is (`__op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Update,
    Delete,
    Snapshot,
    Truncate,
    Rebaseline,
}

impl Op {
    fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "insert" => Op::Insert,
            "update" => Op::Update,
            "delete" => Op::Delete,
            "snapshot" => Op::Snapshot,
            "truncate" => Op::Truncate,
            "rebaseline" => Op::Rebaseline,
            _ => return None,
        })
    }

    /// A `truncate` or `rebaseline` row: the end of every row before it.
    pub fn is_marker(self) -> bool {
        matches!(self, Op::Truncate | Op::Rebaseline)
    }
}

/// One row: where it is and what it is.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub batch: u32,
    pub row: u32,
    pub op: Op,
    pub seq: i64,
}

/// Every row of the batches, in replay order.
pub struct Ordered<'a> {
    pos: Vec<&'a StringArray>,
    unlogged: Vec<Option<&'a ListArray>>,
    /// All rows, sorted by `(__pos, __seq)`, then batch and row.
    pub rows: Vec<Row>,
}

fn input_error(message: String) -> Error {
    Error::new(Code::FoldInput, message).hint(
        "the folder holds a Parquet file that is not a sluice part (every part has __op, __pos, __seq and __unlogged); move it out of the table folder",
    )
}

impl<'a> Ordered<'a> {
    /// The rows of `batches` in replay order.
    pub fn of(batches: &'a [RecordBatch]) -> Result<Ordered<'a>> {
        let mut pos = Vec::with_capacity(batches.len());
        let mut unlogged = Vec::with_capacity(batches.len());
        let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
        for (b, batch) in batches.iter().enumerate() {
            let column = |name: &str| {
                batch
                    .column_by_name(name)
                    .ok_or_else(|| input_error(format!("a batch has no {name} column")))
            };
            let ops = column(OP)?
                .as_string_opt::<i32>()
                .ok_or_else(|| input_error(format!("{OP} is not text")))?;
            let positions = column(POS)?
                .as_string_opt::<i32>()
                .ok_or_else(|| input_error(format!("{POS} is not text")))?;
            let seqs: &Int64Array = column(SEQ)?
                .as_primitive_opt()
                .ok_or_else(|| input_error(format!("{SEQ} is not int64")))?;
            let lists = match batch.column_by_name(UNLOGGED) {
                None => None,
                Some(array) => Some(array.as_list_opt::<i32>().ok_or_else(|| {
                    input_error(format!("{UNLOGGED} is not a list of column names"))
                })?),
            };
            for r in 0..batch.num_rows() {
                let text = ops.value(r);
                let op = Op::parse(text)
                    .ok_or_else(|| input_error(format!("a row's {OP} is {text:?}")))?;
                rows.push(Row {
                    batch: b as u32,
                    row: r as u32,
                    op,
                    seq: seqs.value(r),
                });
            }
            pos.push(positions);
            unlogged.push(lists);
        }
        let mut ordered = Ordered {
            pos,
            unlogged,
            rows,
        };
        let mut rows = std::mem::take(&mut ordered.rows);
        rows.sort_by(|a, b| {
            ordered
                .pos(a)
                .cmp(ordered.pos(b))
                .then(a.seq.cmp(&b.seq))
                .then(a.batch.cmp(&b.batch))
                .then(a.row.cmp(&b.row))
        });
        ordered.rows = rows;
        Ok(ordered)
    }

    /// The row's `__pos`.
    pub fn pos(&self, row: &Row) -> &'a str {
        self.pos[row.batch as usize].value(row.row as usize)
    }

    /// True when both rows are at the same `(__pos, __seq)`.
    pub fn same_place(&self, a: &Row, b: &Row) -> bool {
        a.seq == b.seq && self.pos(a) == self.pos(b)
    }

    /// The names the row lists in `__unlogged`.
    pub fn unlogged(&self, row: &Row) -> Vec<String> {
        let Some(list) = self.unlogged[row.batch as usize] else {
            return Vec::new();
        };
        let r = row.row as usize;
        if list.is_null(r) {
            return Vec::new();
        }
        let names = list.value(r);
        match names.as_string_opt::<i32>() {
            Some(names) => names.iter().flatten().map(str::to_owned).collect(),
            None => Vec::new(),
        }
    }

    /// The index in [`Ordered::rows`] of the newest marker, if any.
    pub fn last_marker(&self) -> Option<usize> {
        self.rows.iter().rposition(|r| r.op.is_marker())
    }
}
