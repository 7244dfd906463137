//! The SQL Server change stream: LSN windows of `cdc.fn_cdc_get_all_changes_<instance>`
//! up to the bound fixed at open, assembled into source events.
//!
//! How a run reads: the bound is `sys.fn_cdc_get_max_lsn()` at open — every transaction
//! whose commit LSN is at most the bound is already in the change table (the capture job
//! writes change rows and the `cdc.lsn_time_mapping` entry that max LSN reads in the same
//! transaction). From `from` (the checkpoint's successor) a reader task repeats: re-read
//! the instance's low-water mark and refuse if the cleanup job passed `from`; find the
//! window end = the commit LSN of the `window_changes`-th change row in `[from, bound]`;
//! stream the rows of `[from, end]` in order; continue at the successor of `end`. A window
//! holds whole transactions (all rows of a transaction share its commit LSN), so every
//! window end is a commit boundary. The reader task owns the connection and hands rows
//! over a bounded channel, so memory stays bounded by the channel, not the window.
//!
//! Resume: a commit's checkpoint position is its commit LSN; the next run starts at
//! `sys.fn_cdc_increment_lsn(checkpoint)` ([`Lsn::increment`]). `ack` releases nothing:
//! CDC keeps change rows for the cleanup job's retention, whoever reads them.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::TryStreamExt;
use tokio::sync::mpsc;

use super::catalog::{self, Captured};
use super::changes::{Assembler, ChangeRow};
use super::connect::{SqlClient, query_error};
use super::prerequisites::window_gap;
use super::queries;
use super::values::{self, CaptureColumn};
use crate::change::TableSchema;
use crate::error::{Code, Error, Result};
use crate::position::{Position, SqlServerLsn as Lsn};
use crate::source::{ChangeStream, SourceEvent, StreamInfo};

/// Rows in flight between the reader task and the stream.
const CHANNEL_ROWS: usize = 1024;

/// What the reader task sends.
#[derive(Debug)]
enum Feed {
    Row(ChangeRow),
    /// The window `[_, end]` is complete.
    WindowEnd(Lsn),
    /// Every window up to the bound was read.
    Done,
}

/// What the reader task needs to read the windows.
struct WindowPlan {
    from: Lsn,
    bound: Lsn,
    window_changes: i64,
    capture_instance: String,
    change_table: String,
    changes_sql: String,
    columns: Vec<CaptureColumn>,
    shape: Arc<TableSchema>,
    utc_offset_us: i64,
}

/// The open SQL Server stream.
pub struct SqlServerStream {
    info: StreamInfo,
    bound: Lsn,
    rx: mpsc::Receiver<Result<Feed>>,
    assembler: Assembler,
    pending: VecDeque<SourceEvent>,
    done: bool,
}

impl SqlServerStream {
    /// Starts the reader task on `client` for `[from, bound]`.
    pub(super) fn start(
        info: StreamInfo,
        client: SqlClient,
        captured: &Captured,
        from: Lsn,
        bound: Lsn,
        window_changes: u64,
    ) -> Self {
        let plan = WindowPlan {
            from,
            bound,
            window_changes: i64::try_from(window_changes).unwrap_or(i64::MAX),
            capture_instance: captured.capture_instance.clone(),
            change_table: captured.instance.change_table.clone(),
            changes_sql: queries::changes(&captured.capture_instance, &captured.columns),
            columns: captured.columns.clone(),
            shape: captured.shape.clone(),
            utc_offset_us: i64::from(captured.utc_offset_minutes) * 60_000_000,
        };
        let (tx, rx) = mpsc::channel(CHANNEL_ROWS);
        tokio::spawn(async move {
            let mut client = client;
            let result = read_windows(&mut client, &plan, &tx).await;
            if let Err(e) = result {
                let _ = tx.send(Err(e)).await;
            }
            let _ = client.close().await;
        });
        SqlServerStream {
            info,
            bound,
            rx,
            assembler: Assembler::new(captured.shape.clone(), captured.logging()),
            pending: VecDeque::new(),
            done: false,
        }
    }
}

/// Reads every window of `[plan.from, plan.bound]` into `tx`; stops early when the
/// stream was dropped.
async fn read_windows(
    client: &mut SqlClient,
    plan: &WindowPlan,
    tx: &mpsc::Sender<Result<Feed>>,
) -> Result<()> {
    let window_end_sql = queries::window_end(&plan.change_table);
    let mut from = plan.from;
    while from <= plan.bound {
        let min = catalog::min_lsn(client, &plan.capture_instance).await?;
        if min > from {
            return Err(window_gap(&plan.capture_instance, from, min));
        }
        let (from_raw, bound_raw) = (from.to_bytes().to_vec(), plan.bound.to_bytes().to_vec());
        let row = catalog::one_row(
            client,
            &window_end_sql,
            &[&from_raw, &bound_raw, &plan.window_changes],
            "planning the next LSN window",
        )
        .await?;
        let Some(end) = row
            .as_ref()
            .map(|r| catalog::lsn_cell(r, 0))
            .transpose()?
            .flatten()
        else {
            break;
        };
        let end_raw = end.to_bytes().to_vec();
        let what = format!(
            "reading cdc.fn_cdc_get_all_changes_{} window {from}..{end}",
            plan.capture_instance
        );
        let mut rows = client
            .query(plan.changes_sql.as_str(), &[&from_raw, &end_raw])
            .await
            .map_err(|e| query_error(&what, e))?
            .into_row_stream();
        while let Some(row) = rows.try_next().await.map_err(|e| query_error(&what, e))? {
            let row = change_row(
                row.into_iter().collect(),
                &plan.columns,
                &plan.shape,
                plan.utc_offset_us,
            )?;
            if tx.send(Ok(Feed::Row(row))).await.is_err() {
                return Ok(());
            }
        }
        drop(rows);
        if tx.send(Ok(Feed::WindowEnd(end))).await.is_err() {
            return Ok(());
        }
        match end.increment() {
            Some(next) => from = next,
            None => break,
        }
    }
    let _ = tx.send(Ok(Feed::Done)).await;
    Ok(())
}

/// Converts one result row (`__$start_lsn`, `__$seqval`, `__$operation`, commit time,
/// captured columns…) into a typed change row.
pub fn change_row(
    cells: Vec<tiberius::ColumnData<'static>>,
    columns: &[CaptureColumn],
    shape: &TableSchema,
    utc_offset_us: i64,
) -> Result<ChangeRow> {
    use tiberius::ColumnData as D;
    if cells.len() != 4 + columns.len() {
        return Err(Error::new(
            Code::SourceProtocol,
            format!(
                "{}: a change row has {} cells, expected {}",
                shape.name,
                cells.len(),
                4 + columns.len()
            ),
        ));
    }
    let mut cells = cells.into_iter();
    let mut lsn = |what: &str| match cells.next() {
        Some(D::Binary(Some(raw))) => Lsn::try_from(raw.as_ref()).map_err(|e| {
            Error::new(
                Code::SourceProtocol,
                format!("{}: malformed {what}", shape.name),
            )
            .source(e)
        }),
        other => Err(Error::new(
            Code::SourceProtocol,
            format!("{}: {what} is {other:?}, not binary(10)", shape.name),
        )),
    };
    let start_lsn = lsn("__$start_lsn")?;
    let seqval = lsn("__$seqval")?;
    let operation = match cells.next() {
        Some(D::I32(Some(op))) => op,
        other => {
            return Err(Error::new(
                Code::SourceProtocol,
                format!("{}: __$operation is {other:?}", shape.name),
            ));
        }
    };
    let commit_ts = match cells.next() {
        Some(D::DateTime(Some(dt))) => {
            Some(values::datetime_us(dt.days(), dt.seconds_fragments()) - utc_offset_us)
        }
        _ => None,
    };
    let mut out = Vec::with_capacity(columns.len());
    for (i, data) in cells.enumerate() {
        let column = &shape.columns[i];
        let value = values::convert(&column.ty, data).map_err(|why| {
            Error::new(
                Code::ValueUnrepresentable,
                format!(
                    "{}.{} ({}) at commit {start_lsn}: {why}",
                    shape.name, column.name, column.source_type
                ),
            )
            .hint("the value has no exact representation in the column's output type (e.g. datetime2(7) with a 100 ns digit); change the column (datetime2(6)) or the row at the source, and re-baseline")
        })?;
        out.push(value);
    }
    Ok(ChangeRow {
        start_lsn,
        seqval,
        operation,
        commit_ts,
        values: out,
    })
}

#[async_trait]
impl ChangeStream for SqlServerStream {
    fn info(&self) -> &StreamInfo {
        &self.info
    }

    async fn next(&mut self) -> Result<Option<SourceEvent>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            if self.done {
                return Ok(None);
            }
            match self.rx.recv().await {
                Some(Ok(Feed::Row(row))) => self.assembler.push(row, &mut self.pending)?,
                Some(Ok(Feed::WindowEnd(end))) => {
                    self.assembler.finish(&mut self.pending)?;
                    tracing::debug!(%end, "LSN window read");
                }
                Some(Ok(Feed::Done)) => {
                    self.assembler.finish(&mut self.pending)?;
                    self.done = true;
                }
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(Error::new(
                        Code::Internal,
                        "the SQL Server reader task ended before reaching the bound",
                    ));
                }
            }
        }
    }

    fn end_position(&self) -> Position {
        let last = self.assembler.last_commit().unwrap_or(self.bound);
        Position::SqlServer(last.max(self.bound))
    }

    async fn ack(&mut self, upto: &Position) -> Result<()> {
        match upto {
            Position::SqlServer(_) => Ok(()),
            other => Err(Error::new(
                Code::Internal,
                format!("ack at {other}, which is not a SQL Server position"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType, Value};
    use std::borrow::Cow;
    use tiberius::ColumnData as D;

    fn columns() -> (Vec<CaptureColumn>, TableSchema) {
        let cc = |name: &str, type_name: &str| CaptureColumn {
            name: name.into(),
            type_name: type_name.into(),
            max_length: 4,
            precision: 10,
            scale: 0,
            computed: false,
            key_ordinal: (name == "id").then_some(1),
            collation: None,
            nullable: name != "id",
        };
        let cols = vec![cc("id", "int"), cc("note", "varchar")];
        let shape = TableSchema {
            name: "dbo.t".into(),
            columns: cols
                .iter()
                .map(|c| Column {
                    name: c.name.clone(),
                    ty: c.column_type().unwrap(),
                    nullable: c.nullable,
                    key: c.is_key(),
                    source_type: c.declaration(),
                    field_metadata: Default::default(),
                })
                .collect(),
        };
        (cols, shape)
    }

    fn lsn_cell(record: u16) -> D<'static> {
        D::Binary(Some(Cow::Owned(
            Lsn {
                vlf: 1,
                block: 2,
                record,
            }
            .to_bytes()
            .to_vec(),
        )))
    }

    #[test]
    fn result_rows_become_typed_change_rows() {
        let (cols, shape) = columns();
        // Commit at 1970-01-02 00:00:00 server time, server at UTC+02:00.
        let commit = tiberius::time::DateTime::new(25_568, 0);
        let cells = vec![
            lsn_cell(7),
            lsn_cell(9),
            D::I32(Some(2)),
            D::DateTime(Some(commit)),
            D::I32(Some(5)),
            D::String(Some(Cow::Borrowed("x"))),
        ];
        let row = change_row(cells, &cols, &shape, 120 * 60_000_000).unwrap();
        assert_eq!(
            row.start_lsn,
            Lsn {
                vlf: 1,
                block: 2,
                record: 7
            }
        );
        assert_eq!(row.seqval.record, 9);
        assert_eq!(row.operation, 2);
        assert_eq!(row.commit_ts, Some(86_400_000_000 - 7_200_000_000));
        assert_eq!(row.values, vec![Value::Int(5), Value::Text("x".into())]);
        assert_eq!(shape.columns[0].ty, ColumnType::Int32);
    }

    #[test]
    fn malformed_rows_are_refused() {
        let (cols, shape) = columns();
        let base = || {
            vec![
                lsn_cell(7),
                lsn_cell(9),
                D::I32(Some(2)),
                D::DateTime(None),
                D::I32(Some(5)),
                D::String(None),
            ]
        };
        assert!(
            change_row(base(), &cols, &shape, 0)
                .unwrap()
                .commit_ts
                .is_none()
        );
        let mut short = base();
        short.pop();
        assert_eq!(
            change_row(short, &cols, &shape, 0).unwrap_err().code(),
            Code::SourceProtocol
        );
        let mut bad_lsn = base();
        bad_lsn[0] = D::Binary(Some(Cow::Owned(vec![1, 2, 3])));
        assert_eq!(
            change_row(bad_lsn, &cols, &shape, 0).unwrap_err().code(),
            Code::SourceProtocol
        );
        let mut bad_value = base();
        bad_value[4] = D::String(Some(Cow::Borrowed("five")));
        let err = change_row(bad_value, &cols, &shape, 0).unwrap_err();
        assert_eq!(err.code(), Code::ValueUnrepresentable);
        assert!(err.to_string().contains("dbo.t.id"), "{err}");
    }
}
