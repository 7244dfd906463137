//! The change stream of a job with column policies or row filters (docs/privacy.md), for
//! the engines that hold no row on disk before handing it out (PostgreSQL, SQL Server);
//! MySQL / MariaDB apply the same [`Applier`] inside their stream, before a transaction
//! can spill.
//!
//! Guarantees: the tables' shapes at open ([`StreamInfo::tables`]) are checked against
//! their policies (`SLUICE_CONFIG_POLICY` before a change is read) and handed out as the
//! policy writes them; every change leaves with its table's policy applied, or not at all
//! when the row filter leaves it out; the order of the other events, the `Barrier` last
//! in a batch, and a batch being empty only at the read bound, are kept.

use async_trait::async_trait;

use super::{BatchRoom, ChangeStream, SourceEvent, StreamInfo};
use crate::error::Result;
use crate::policy::Applier;
use crate::position::Position;

/// A change stream with the job's policies applied.
pub struct PolicyStream {
    inner: Box<dyn ChangeStream>,
    applier: Applier,
    info: StreamInfo,
}

/// Checks `info`'s tables against the policies and returns `info` with each table in the
/// shape the policy writes. A table the catalog no longer has (no columns) is left as it
/// is: its shapes come from the stream.
pub fn info_of(applier: &mut Applier, mut info: StreamInfo) -> Result<StreamInfo> {
    for table in &mut info.tables {
        if table.columns.is_empty() {
            continue;
        }
        applier.policies().check(table)?;
        *table = applier.schema(table)?;
    }
    Ok(info)
}

impl PolicyStream {
    /// `inner` with `applier`'s policies applied, or `inner` itself when no table has a
    /// policy.
    pub fn wrap(
        inner: Box<dyn ChangeStream>,
        mut applier: Applier,
    ) -> Result<Box<dyn ChangeStream>> {
        if applier.policies().is_empty() {
            return Ok(inner);
        }
        let info = info_of(&mut applier, inner.info().clone())?;
        Ok(Box::new(PolicyStream {
            inner,
            applier,
            info,
        }))
    }

    /// The event as written; `None` for a change the row filter leaves out.
    fn apply(&mut self, event: SourceEvent) -> Result<Option<SourceEvent>> {
        Ok(match event {
            SourceEvent::Change(change) => self.applier.change(change)?.map(SourceEvent::Change),
            other => Some(other),
        })
    }
}

#[async_trait]
impl ChangeStream for PolicyStream {
    fn info(&self) -> &StreamInfo {
        &self.info
    }

    async fn next(&mut self) -> Result<Option<SourceEvent>> {
        loop {
            let Some(event) = self.inner.next().await? else {
                return Ok(None);
            };
            if let Some(event) = self.apply(event)? {
                return Ok(Some(event));
            }
        }
    }

    async fn next_batch(&mut self, out: &mut Vec<SourceEvent>, room: BatchRoom) -> Result<()> {
        loop {
            let start = out.len();
            self.inner.next_batch(out, room).await?;
            if out.len() == start {
                return Ok(());
            }
            let read: Vec<SourceEvent> = out.drain(start..).collect();
            for event in read {
                if let Some(event) = self.apply(event)? {
                    out.push(event);
                }
            }
            if out.len() > start {
                return Ok(());
            }
        }
    }

    fn end_position(&self) -> Position {
        self.inner.end_position()
    }

    async fn ack(&mut self, upto: &Position) -> Result<()> {
        self.inner.ack(upto).await
    }

    async fn retained_bytes(&mut self) -> Option<u64> {
        self.inner.retained_bytes().await
    }

    async fn filled_without_changes(
        &mut self,
        table: &str,
        column: &str,
    ) -> Result<Option<String>> {
        self.inner.filled_without_changes(table, column).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::change::{Column, ColumnType, Op, RowChange, TableSchema, Value};
    use crate::position::{PgLsn, Position};

    /// A stream handing out `events` in batches of `batch`.
    struct Fake {
        info: StreamInfo,
        events: std::collections::VecDeque<SourceEvent>,
        batch: usize,
    }

    #[async_trait]
    impl ChangeStream for Fake {
        fn info(&self) -> &StreamInfo {
            &self.info
        }
        async fn next(&mut self) -> Result<Option<SourceEvent>> {
            Ok(self.events.pop_front())
        }
        async fn next_batch(&mut self, out: &mut Vec<SourceEvent>, _: BatchRoom) -> Result<()> {
            for _ in 0..self.batch {
                match self.events.pop_front() {
                    Some(e) => out.push(e),
                    None => break,
                }
            }
            Ok(())
        }
        fn end_position(&self) -> Position {
            Position::Postgres(PgLsn(0))
        }
        async fn ack(&mut self, _: &Position) -> Result<()> {
            Ok(())
        }
    }

    fn table() -> Arc<TableSchema> {
        let col = |name: &str, key| Column {
            name: name.into(),
            ty: if key {
                ColumnType::Int32
            } else {
                ColumnType::Utf8
            },
            nullable: !key,
            key,
            source_type: "x".into(),
            field_metadata: Default::default(),
        };
        Arc::new(TableSchema {
            name: "dbo.t".into(),
            columns: vec![col("id", true), col("region", false), col("secret", false)],
        })
    }

    fn insert(id: i64, region: &str) -> SourceEvent {
        SourceEvent::Change(RowChange {
            table: table(),
            op: Op::Insert,
            before: None,
            after: Some(vec![
                Value::Int(id),
                Value::Text(region.into()),
                Value::Text("raw".into()),
            ]),
            before_unlogged: vec![],
            after_unlogged: vec![],
        })
    }

    #[test]
    fn filtered_changes_leave_and_a_batch_is_empty_only_at_the_end() {
        let text = "job: j\nsource:\n  url: sqlserver://sa@127.0.0.1:1433/app\n  tables: [dbo.t]\n  sqlserver: { capture_instance: dbo_t }\n\
                    destination: { type: local, path: o }\nstate: { type: local, path: s }\n\
                    policy:\n  tables:\n    dbo.t: { exclude: [secret], filter: \"region = 'eu'\" }\n";
        let config = crate::config::Config::parse(text, "t").unwrap();
        let policies = Arc::new(crate::policy::Policies::of(&config).unwrap());
        let commit = || SourceEvent::Commit {
            resume: Position::Postgres(PgLsn(1)),
        };
        let fake = Fake {
            info: StreamInfo {
                source_identity: "x".into(),
                start: Position::Postgres(PgLsn(0)),
                bound: Position::Postgres(PgLsn(9)),
                tables: vec![table()],
            },
            // The second batch holds only changes the filter leaves out.
            events: [
                insert(1, "eu"),
                insert(2, "us"),
                insert(3, "us"),
                insert(4, "us"),
                commit(),
            ]
            .into_iter()
            .collect(),
            batch: 2,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut stream =
                PolicyStream::wrap(Box::new(fake), crate::policy::Applier::new(policies)).unwrap();
            let names: Vec<&str> = stream.info().tables[0]
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(names, ["id", "region"], "the open shapes are the output's");
            let mut batches = Vec::new();
            loop {
                let mut out = Vec::new();
                stream
                    .next_batch(&mut out, BatchRoom::new(100, 1 << 20))
                    .await
                    .unwrap();
                if out.is_empty() {
                    break;
                }
                batches.push(out);
            }
            assert_eq!(batches.len(), 2, "{batches:?}");
            let SourceEvent::Change(kept) = &batches[0][0] else {
                panic!()
            };
            assert_eq!(kept.after.as_ref().unwrap().len(), 2);
            assert!(matches!(batches[1][..], [SourceEvent::Commit { .. }]));
        });
    }
}
