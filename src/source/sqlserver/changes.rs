//! Change-table rows → source events, as a pure state machine.
//!
//! Input: the rows of `cdc.fn_cdc_get_all_changes_<instance>(…, N'all update old')` in
//! the order the query sorts them — `__$start_lsn` (the transaction's commit LSN), then
//! `__$seqval` (the change's order within it), then `__$operation`. Output: for each
//! distinct `__$start_lsn` one `Begin`, its changes, and one `Commit` whose resume
//! position is that commit LSN (the next run starts at its successor).
//!
//! Operations: 1 → delete (old image), 2 → insert (new image), 3 + 4 → one update with the
//! old (3) and new (4) image; the pair shares `__$seqval` and 3 sorts first. A key change
//! is split into delete + insert by the shared framer from the two images. Columns the
//! capture process does not log in an image (see [`Logging`]) are NULL there and listed
//! as unlogged, never presented as data.
//!
//! Guarantees: rows out of order, an old image without its new image, a new image without
//! its old image, or an unknown operation are protocol errors; a transaction is committed
//! only when a row of a later transaction arrives or the input ends ([`Assembler::finish`]),
//! so a window boundary is always a commit boundary (windows end at a commit LSN and hold
//! every row of it).

use std::collections::VecDeque;
use std::sync::Arc;

use super::values::Logging;
use crate::change::{Op, RowChange, TableSchema, Value};
use crate::error::{Code, Error, Result};
use crate::position::{Position, SqlServerLsn as Lsn};
use crate::source::SourceEvent;

/// `__$operation` values.
pub const OP_DELETE: i32 = 1;
pub const OP_INSERT: i32 = 2;
pub const OP_UPDATE_OLD: i32 = 3;
pub const OP_UPDATE_NEW: i32 = 4;

/// One change-table row, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRow {
    /// `__$start_lsn`: the commit LSN of the row's transaction.
    pub start_lsn: Lsn,
    /// `__$seqval`: order within the transaction.
    pub seqval: Lsn,
    /// `__$operation`.
    pub operation: i32,
    /// The transaction's commit time, µs since the Unix epoch, UTC.
    pub commit_ts: Option<i64>,
    /// The captured columns, in the table schema's order.
    pub values: Vec<Value>,
}

/// Groups change rows into transactions and pairs update images.
#[derive(Debug)]
pub struct Assembler {
    table: Arc<TableSchema>,
    logging: Vec<Logging>,
    /// The commit LSN of the transaction whose `Begin` was emitted and `Commit` was not.
    open: Option<Lsn>,
    /// Sort key of the previous row.
    last: Option<(Lsn, Lsn, i32)>,
    /// An old image (operation 3) waiting for its new image.
    pending_old: Option<ChangeRow>,
    /// The commit LSN of the last transaction committed.
    last_commit: Option<Lsn>,
}

impl Assembler {
    /// An assembler for one table; `logging` is per column, in schema order.
    pub fn new(table: Arc<TableSchema>, logging: Vec<Logging>) -> Self {
        debug_assert_eq!(table.columns.len(), logging.len());
        Assembler {
            table,
            logging,
            open: None,
            last: None,
            pending_old: None,
            last_commit: None,
        }
    }

    /// The commit LSN of the last transaction whose `Commit` was emitted.
    pub fn last_commit(&self) -> Option<Lsn> {
        self.last_commit
    }

    /// Consumes one row; appends the events it completes to `out`.
    pub fn push(&mut self, row: ChangeRow, out: &mut VecDeque<SourceEvent>) -> Result<()> {
        if row.values.len() != self.table.columns.len() {
            return Err(protocol(format!(
                "{}: a change row has {} captured columns, the capture instance has {}",
                self.table.name,
                row.values.len(),
                self.table.columns.len()
            )));
        }
        let key = (row.start_lsn, row.seqval, row.operation);
        if let Some(last) = self.last
            && key < last
        {
            return Err(protocol(format!(
                "{}: change rows out of order ({} seq {} op {} after {} seq {} op {})",
                self.table.name, key.0, key.1, key.2, last.0, last.1, last.2
            )));
        }
        self.last = Some(key);
        if let Some(old) = &self.pending_old
            && (row.operation != OP_UPDATE_NEW
                || row.start_lsn != old.start_lsn
                || row.seqval != old.seqval)
        {
            return Err(protocol(format!(
                "{}: the old image of an update at {} seq {} is not followed by its new image",
                self.table.name, old.start_lsn, old.seqval
            )));
        }
        if self.open != Some(row.start_lsn) {
            self.close(out);
            out.push_back(SourceEvent::Begin {
                commit: Position::SqlServer(row.start_lsn),
                commit_ts: row.commit_ts,
            });
            self.open = Some(row.start_lsn);
        }
        match row.operation {
            OP_DELETE => {
                let (before, unlogged) = self.image(row.values, OP_DELETE);
                out.push_back(SourceEvent::Change(RowChange {
                    table: self.table.clone(),
                    op: Op::Delete,
                    before: Some(before),
                    after: None,
                    before_unlogged: unlogged,
                    after_unlogged: vec![],
                }));
            }
            OP_INSERT => {
                let (after, unlogged) = self.image(row.values, OP_INSERT);
                out.push_back(SourceEvent::Change(RowChange {
                    table: self.table.clone(),
                    op: Op::Insert,
                    before: None,
                    after: Some(after),
                    before_unlogged: vec![],
                    after_unlogged: unlogged,
                }));
            }
            OP_UPDATE_OLD => self.pending_old = Some(row),
            OP_UPDATE_NEW => {
                let old = self.pending_old.take().ok_or_else(|| {
                    protocol(format!(
                        "{}: the new image of an update at {} seq {} has no old image (the query must use N'all update old')",
                        self.table.name, row.start_lsn, row.seqval
                    ))
                })?;
                let (before, before_unlogged) = self.image(old.values, OP_UPDATE_OLD);
                let (after, after_unlogged) = self.image(row.values, OP_UPDATE_NEW);
                out.push_back(SourceEvent::Change(RowChange {
                    table: self.table.clone(),
                    op: Op::Update,
                    before: Some(before),
                    after: Some(after),
                    before_unlogged,
                    after_unlogged,
                }));
            }
            other => {
                return Err(protocol(format!(
                    "{}: unknown __$operation {other} at {}",
                    self.table.name, row.start_lsn
                )));
            }
        }
        Ok(())
    }

    /// The input ended (a window, or the whole read): commits the open transaction.
    pub fn finish(&mut self, out: &mut VecDeque<SourceEvent>) -> Result<()> {
        if let Some(old) = &self.pending_old {
            return Err(protocol(format!(
                "{}: the old image of an update at {} seq {} ended the input without its new image",
                self.table.name, old.start_lsn, old.seqval
            )));
        }
        self.close(out);
        Ok(())
    }

    fn close(&mut self, out: &mut VecDeque<SourceEvent>) {
        if let Some(lsn) = self.open.take() {
            out.push_back(SourceEvent::Commit {
                resume: Position::SqlServer(lsn),
            });
            self.last_commit = Some(lsn);
        }
    }

    /// The image with its not-logged cells listed (and kept as NULL placeholders).
    fn image(&self, mut values: Vec<Value>, operation: i32) -> (Vec<Value>, Vec<usize>) {
        let mut unlogged = Vec::new();
        for (i, value) in values.iter_mut().enumerate() {
            let not_logged = match self.logging[i] {
                Logging::Full => false,
                Logging::Never => true,
                Logging::LegacyLob => operation == OP_DELETE || operation == OP_UPDATE_OLD,
                // NULL in an old image unless the column changed; a NULL there may be a
                // real NULL too, and is reported as not logged either way.
                Logging::MaxLob => operation == OP_UPDATE_OLD && *value == Value::Null,
            };
            if not_logged {
                *value = Value::Null;
                unlogged.push(i);
            }
        }
        (values, unlogged)
    }
}

fn protocol(message: String) -> Error {
    Error::new(Code::SourceProtocol, message).hint(
        "the change table returned rows sluice cannot frame; the checkpoint did not move — report it with the run's log",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{ChangeEvent, Column, ColumnType};
    use crate::framer::Framer;

    fn table() -> Arc<TableSchema> {
        let col = |name: &str, ty: ColumnType, key: bool| Column {
            name: name.into(),
            ty,
            nullable: !key,
            key,
            source_type: "x".into(),
            field_metadata: Default::default(),
        };
        Arc::new(TableSchema {
            name: "dbo.orders".into(),
            columns: vec![
                col("id", ColumnType::Int32, true),
                col("qty", ColumnType::Int32, false),
                col("note", ColumnType::Utf8, false),
            ],
        })
    }

    fn assembler() -> Assembler {
        Assembler::new(table(), vec![Logging::Full, Logging::Full, Logging::MaxLob])
    }

    fn lsn(block: u32, record: u16) -> Lsn {
        Lsn {
            vlf: 0x2A,
            block,
            record,
        }
    }

    fn row(
        commit: u32,
        seq: u16,
        operation: i32,
        id: i64,
        qty: i64,
        note: Option<&str>,
    ) -> ChangeRow {
        ChangeRow {
            start_lsn: lsn(commit, 1),
            seqval: lsn(commit, seq),
            operation,
            commit_ts: Some(i64::from(commit) * 1_000_000),
            values: vec![
                Value::Int(id),
                Value::Int(qty),
                note.map_or(Value::Null, |n| Value::Text(n.into())),
            ],
        }
    }

    /// Runs rows through the assembler and the shared framer, as the drain does.
    fn frame(rows: Vec<ChangeRow>) -> Result<(Vec<ChangeEvent>, Vec<Position>)> {
        let mut a = assembler();
        let mut events = VecDeque::new();
        for r in rows {
            a.push(r, &mut events)?;
        }
        a.finish(&mut events)?;
        let mut framer = Framer::new();
        let mut out = Vec::new();
        let mut commits = Vec::new();
        for e in events {
            match e {
                SourceEvent::Begin { commit, commit_ts } => framer.begin(&commit, commit_ts)?,
                SourceEvent::Change(c) => framer.change(c, &mut out)?,
                SourceEvent::Commit { resume } => commits.push(framer.commit(resume)?),
                SourceEvent::Barrier | SourceEvent::Unfit(_) => unreachable!(),
            }
        }
        Ok((out, commits))
    }

    fn summary(events: &[ChangeEvent]) -> Vec<(String, u64, Op, i64)> {
        events
            .iter()
            .map(|e| {
                let Value::Int(id) = e.image[0] else { panic!() };
                (e.pos.to_string(), e.seq, e.op, id)
            })
            .collect()
    }

    #[test]
    fn inserts_updates_and_deletes_of_one_transaction() {
        let (events, commits) = frame(vec![
            row(0x10, 2, OP_INSERT, 1, 5, Some("a")),
            row(0x10, 3, OP_UPDATE_OLD, 1, 5, None),
            row(0x10, 3, OP_UPDATE_NEW, 1, 6, Some("a")),
            row(0x10, 4, OP_DELETE, 1, 6, Some("a")),
        ])
        .unwrap();
        let pos = "0000002A:00000010:0001".to_string();
        assert_eq!(
            summary(&events),
            [
                (pos.clone(), 0, Op::Insert, 1),
                (pos.clone(), 1, Op::Update, 1),
                (pos.clone(), 2, Op::Delete, 1),
            ]
        );
        assert_eq!(
            events[1].image,
            vec![Value::Int(1), Value::Int(6), Value::Text("a".into())]
        );
        assert!(events.iter().all(|e| e.commit_ts == Some(0x10 * 1_000_000)));
        assert_eq!(commits, [Position::SqlServer(lsn(0x10, 1))]);
    }

    #[test]
    fn a_key_change_becomes_delete_then_insert() {
        let (events, _) = frame(vec![
            row(0x10, 2, OP_UPDATE_OLD, 1, 5, None),
            row(0x10, 2, OP_UPDATE_NEW, 2, 5, Some("n")),
        ])
        .unwrap();
        let s = summary(&events);
        assert_eq!((s[0].2, s[0].3, s[0].1), (Op::Delete, 1, 0));
        assert_eq!((s[1].2, s[1].3, s[1].1), (Op::Insert, 2, 1));
        // The old image's max-LOB NULL is reported as not logged, not as data.
        assert_eq!(events[0].unlogged, vec![2]);
        assert!(events[1].unlogged.is_empty());
    }

    #[test]
    fn several_transactions_in_one_window_commit_in_order() {
        let (events, commits) = frame(vec![
            row(0x10, 2, OP_INSERT, 1, 1, None),
            row(0x10, 3, OP_INSERT, 2, 1, None),
            row(0x20, 2, OP_DELETE, 1, 1, None),
            row(0x30, 2, OP_INSERT, 3, 1, None),
        ])
        .unwrap();
        assert_eq!(
            commits,
            [0x10, 0x20, 0x30].map(|c| Position::SqlServer(lsn(c, 1)))
        );
        let seqs: Vec<(u64, i64)> = summary(&events).iter().map(|s| (s.1, s.3)).collect();
        assert_eq!(seqs, [(0, 1), (1, 2), (0, 1), (0, 3)]);
        assert_eq!(events[2].pos.as_ref(), "0000002A:00000020:0001");
    }

    #[test]
    fn window_boundaries_are_commit_boundaries() {
        // Two windows fed to one assembler, finished after each (as the stream does):
        // the first window's transaction commits at its end, the second begins anew.
        let mut a = assembler();
        let mut out = VecDeque::new();
        a.push(row(0x10, 2, OP_INSERT, 1, 1, None), &mut out)
            .unwrap();
        a.push(row(0x10, 3, OP_INSERT, 2, 1, None), &mut out)
            .unwrap();
        a.finish(&mut out).unwrap();
        assert_eq!(a.last_commit(), Some(lsn(0x10, 1)));
        assert!(matches!(out.back(), Some(SourceEvent::Commit { .. })));
        a.push(row(0x20, 2, OP_INSERT, 3, 1, None), &mut out)
            .unwrap();
        a.finish(&mut out).unwrap();
        let kinds: Vec<&str> = out
            .iter()
            .map(|e| match e {
                SourceEvent::Begin { .. } => "B",
                SourceEvent::Change(_) => "C",
                SourceEvent::Commit { .. } => "E",
                SourceEvent::Barrier => "X",
                SourceEvent::Unfit(_) => "U",
            })
            .collect();
        assert_eq!(kinds.join(""), "BCCEBCE");
        // An empty window emits nothing and keeps the last commit.
        let before = out.len();
        a.finish(&mut out).unwrap();
        assert_eq!(out.len(), before);
        assert_eq!(a.last_commit(), Some(lsn(0x20, 1)));
    }

    #[test]
    fn unlogged_columns_by_operation() {
        let mut a = Assembler::new(
            table(),
            vec![Logging::Full, Logging::Never, Logging::LegacyLob],
        );
        let mut out = VecDeque::new();
        a.push(row(0x10, 2, OP_DELETE, 1, 0, None), &mut out)
            .unwrap();
        a.push(row(0x10, 3, OP_INSERT, 2, 0, Some("t")), &mut out)
            .unwrap();
        let changes: Vec<&RowChange> = out
            .iter()
            .filter_map(|e| match e {
                SourceEvent::Change(c) => Some(c),
                _ => None,
            })
            .collect();
        // Delete: text/ntext/image are never logged; computed columns never are.
        assert_eq!(changes[0].before_unlogged, vec![1, 2]);
        // Insert: only the computed column.
        assert_eq!(changes[1].after_unlogged, vec![1]);
        assert_eq!(changes[1].after.as_ref().unwrap()[1], Value::Null);
    }

    #[test]
    fn malformed_input_is_a_protocol_error() {
        let cases: Vec<Vec<ChangeRow>> = vec![
            // Out of order.
            vec![
                row(0x20, 2, OP_INSERT, 1, 1, None),
                row(0x10, 2, OP_INSERT, 1, 1, None),
            ],
            // Old image followed by something else.
            vec![
                row(0x10, 2, OP_UPDATE_OLD, 1, 1, None),
                row(0x10, 3, OP_INSERT, 1, 1, None),
            ],
            // New image without an old one.
            vec![row(0x10, 2, OP_UPDATE_NEW, 1, 1, None)],
            // Old image at the end of the input.
            vec![row(0x10, 2, OP_UPDATE_OLD, 1, 1, None)],
            // Unknown operation.
            vec![row(0x10, 2, 5, 1, 1, None)],
        ];
        for rows in cases {
            let err = frame(rows.clone()).unwrap_err();
            assert_eq!(err.code(), Code::SourceProtocol, "{rows:?}");
        }
        let mut short = row(0x10, 2, OP_INSERT, 1, 1, None);
        short.values.pop();
        assert_eq!(frame(vec![short]).unwrap_err().code(), Code::SourceProtocol);
    }
}
