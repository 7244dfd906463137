//! The transaction framer shared by every engine.
//!
//! A source reports `begin(commit position, commit time)`, its row changes, and
//! `commit(resume position)`. The framer stamps every change of the transaction with the
//! commit position text (`__pos`) and a gap-free ordinal (`__seq`, from 0), splits an
//! UPDATE that changed the key into a delete of the old key followed by an insert of the
//! new row (consecutive ordinals, same position), writes a truncate as one row without
//! an image (every cell NULL, nothing unlogged), and refuses a change outside a
//! transaction or a commit without a begin. Only `commit` yields a checkpointable
//! position, so checkpoints can land only on commit boundaries.

use std::sync::Arc;

use crate::change::{ChangeEvent, Op, RowChange, Value};
use crate::error::{Code, Error, Result};
use crate::position::Position;

/// The transaction currently open.
#[derive(Debug)]
struct OpenTxn {
    pos_text: Arc<str>,
    commit_ts: Option<i64>,
    next_seq: u64,
}

/// Frames a source's begin / change / commit calls into ordered change events.
#[derive(Debug, Default)]
pub struct Framer {
    open: Option<OpenTxn>,
}

impl Framer {
    /// A framer with no transaction open.
    pub fn new() -> Self {
        Framer::default()
    }

    /// True while a transaction is open (between `begin` and `commit`).
    pub fn in_transaction(&self) -> bool {
        self.open.is_some()
    }

    /// Opens a transaction whose commit is at `pos`.
    pub fn begin(&mut self, pos: &Position, commit_ts: Option<i64>) -> Result<()> {
        if self.open.is_some() {
            return Err(protocol("a transaction began while another was still open"));
        }
        self.open = Some(OpenTxn {
            pos_text: pos.sortable_arc(),
            commit_ts,
            next_seq: 0,
        });
        Ok(())
    }

    /// Frames one row change into one event, or two for a key-changing update — and for
    /// every update of a table without a key (whose old image the source logs whole), so
    /// such a table replays as a multiset: the old row out, the new row in.
    pub fn change(&mut self, change: RowChange, out: &mut Vec<ChangeEvent>) -> Result<()> {
        let txn = self
            .open
            .as_mut()
            .ok_or_else(|| protocol("a row change arrived outside a transaction"))?;
        let mut emit = |op, image: Vec<Value>, unlogged: Vec<usize>| {
            out.push(ChangeEvent {
                table: change.table.clone(),
                op,
                pos: txn.pos_text.clone(),
                seq: txn.next_seq,
                commit_ts: txn.commit_ts,
                image,
                unlogged,
            });
            txn.next_seq += 1;
        };
        match change.op {
            Op::Insert | Op::Snapshot => {
                let after = change
                    .after
                    .ok_or_else(|| protocol("an insert without a row"))?;
                emit(change.op, after, change.after_unlogged);
            }
            Op::Delete => {
                let before = change
                    .before
                    .ok_or_else(|| protocol("a delete without a key"))?;
                emit(Op::Delete, before, change.before_unlogged);
            }
            Op::Truncate | Op::Rebaseline => {
                let columns = change.table.columns.len();
                emit(change.op, vec![Value::Null; columns], vec![]);
            }
            Op::Update => {
                let after = change
                    .after
                    .ok_or_else(|| protocol("an update without a row"))?;
                let keys = change.table.key_indexes();
                match change.before {
                    Some(before) if keys.is_empty() || key_changed(&keys, &before, &after) => {
                        emit(Op::Delete, before, change.before_unlogged);
                        emit(Op::Insert, after, change.after_unlogged);
                    }
                    _ => emit(Op::Update, after, change.after_unlogged),
                }
            }
        }
        Ok(())
    }

    /// Closes the transaction; returns the position a checkpoint may now move to.
    pub fn commit(&mut self, resume: Position) -> Result<Position> {
        self.open
            .take()
            .ok_or_else(|| protocol("a commit arrived without a begin"))?;
        Ok(resume)
    }
}

/// True when any key cell differs between the old and the new image.
fn key_changed(keys: &[usize], before: &[Value], after: &[Value]) -> bool {
    keys.iter().any(|&i| before.get(i) != after.get(i))
}

fn protocol(what: &str) -> Error {
    Error::new(Code::SourceProtocol, format!("change stream out of order: {what}"))
        .hint("this is a bug in sluice or an unexpected server message; the checkpoint did not move — report it with the run's log")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType, TableSchema};
    use crate::position::PgLsn;

    fn table() -> Arc<TableSchema> {
        let col = |name: &str, key: bool| Column {
            name: name.into(),
            ty: ColumnType::Int64,
            nullable: !key,
            key,
            source_type: "bigint".into(),
            field_metadata: Default::default(),
        };
        Arc::new(TableSchema {
            name: "t".into(),
            columns: vec![col("id", true), col("v", false)],
        })
    }

    fn change(op: Op, before: Option<[i64; 2]>, after: Option<[i64; 2]>) -> RowChange {
        let row = |r: [i64; 2]| r.iter().map(|&v| Value::Int(v)).collect();
        RowChange {
            table: table(),
            op,
            before: before.map(row),
            after: after.map(row),
            before_unlogged: vec![],
            after_unlogged: vec![],
        }
    }

    fn pos(n: u64) -> Position {
        Position::Postgres(PgLsn(n))
    }

    #[test]
    fn stamps_position_and_gap_free_ordinals() {
        let mut f = Framer::new();
        let mut out = vec![];
        f.begin(&pos(0x10), Some(7)).unwrap();
        f.change(change(Op::Insert, None, Some([1, 1])), &mut out)
            .unwrap();
        f.change(change(Op::Update, None, Some([1, 2])), &mut out)
            .unwrap();
        f.change(change(Op::Delete, Some([1, 2]), None), &mut out)
            .unwrap();
        assert_eq!(f.commit(pos(0x20)).unwrap(), pos(0x20));
        let seqs: Vec<_> = out.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
        assert!(
            out.iter()
                .all(|e| &*e.pos == "00000000/00000010" && e.commit_ts == Some(7))
        );
        assert_eq!(out[2].image, vec![Value::Int(1), Value::Int(2)]);
    }

    #[test]
    fn key_change_becomes_delete_then_insert() {
        let mut f = Framer::new();
        let mut out = vec![];
        f.begin(&pos(1), None).unwrap();
        f.change(change(Op::Insert, None, Some([9, 9])), &mut out)
            .unwrap();
        f.change(change(Op::Update, Some([1, 5]), Some([2, 5])), &mut out)
            .unwrap();
        f.change(change(Op::Update, Some([2, 5]), Some([2, 6])), &mut out)
            .unwrap();
        let ops: Vec<_> = out.iter().map(|e| (e.op, e.seq)).collect();
        assert_eq!(
            ops,
            [
                (Op::Insert, 0),
                (Op::Delete, 1),
                (Op::Insert, 2),
                (Op::Update, 3)
            ]
        );
        assert_eq!(out[1].image[0], Value::Int(1));
        assert_eq!(out[2].image[0], Value::Int(2));
    }

    #[test]
    fn a_keyless_update_is_the_old_row_deleted_then_the_new_row_inserted() {
        let mut keyless = (*table()).clone();
        keyless.columns.iter_mut().for_each(|c| c.key = false);
        let keyless = Arc::new(keyless);
        let mut f = Framer::new();
        let mut out = vec![];
        f.begin(&pos(1), None).unwrap();
        let same = RowChange {
            table: keyless.clone(),
            ..change(Op::Update, Some([1, 5]), Some([1, 6]))
        };
        f.change(same, &mut out).unwrap();
        let without_old = RowChange {
            table: keyless,
            ..change(Op::Update, None, Some([1, 7]))
        };
        f.change(without_old, &mut out).unwrap();
        let rows: Vec<_> = out
            .iter()
            .map(|e| (e.op, e.seq, e.image[1].clone()))
            .collect();
        assert_eq!(
            rows,
            [
                (Op::Delete, 0, Value::Int(5)),
                (Op::Insert, 1, Value::Int(6)),
                (Op::Update, 2, Value::Int(7))
            ]
        );
    }

    #[test]
    fn truncate_is_one_row_without_an_image_at_its_ordinal() {
        let mut f = Framer::new();
        let mut out = vec![];
        f.begin(&pos(1), None).unwrap();
        f.change(change(Op::Insert, None, Some([1, 1])), &mut out)
            .unwrap();
        f.change(change(Op::Truncate, None, None), &mut out)
            .unwrap();
        f.change(change(Op::Insert, None, Some([2, 2])), &mut out)
            .unwrap();
        let ops: Vec<_> = out.iter().map(|e| (e.op, e.seq)).collect();
        assert_eq!(ops, [(Op::Insert, 0), (Op::Truncate, 1), (Op::Insert, 2)]);
        assert_eq!(out[1].image, vec![Value::Null, Value::Null]);
        assert!(out[1].unlogged.is_empty());
    }

    #[test]
    fn ordinals_restart_per_transaction() {
        let mut f = Framer::new();
        let mut out = vec![];
        for n in 0..2 {
            f.begin(&pos(n), None).unwrap();
            f.change(change(Op::Insert, None, Some([1, 1])), &mut out)
                .unwrap();
            f.commit(pos(n + 1)).unwrap();
        }
        assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), [0, 0]);
    }

    #[test]
    fn refuses_out_of_order_calls() {
        let mut f = Framer::new();
        let mut out = vec![];
        let err = f.change(change(Op::Insert, None, Some([1, 1])), &mut out);
        assert_eq!(err.unwrap_err().code(), Code::SourceProtocol);
        assert_eq!(f.commit(pos(1)).unwrap_err().code(), Code::SourceProtocol);
        f.begin(&pos(1), None).unwrap();
        assert_eq!(
            f.begin(&pos(2), None).unwrap_err().code(),
            Code::SourceProtocol
        );
        assert!(out.is_empty());
    }
}
