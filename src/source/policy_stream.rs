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
