//! One read of the change stream up to its bound: the event loop and what each event
//! does.
//!
//! Guarantees: changes are framed into transactions and routed to their table's part
//! writer; at a commit the run flushes ([`super::durable`]) when a part reached rollover,
//! a flush is due or the run must stop, and at a barrier (the stream goes on only once
//! everything before it is checkpointed) it always flushes; it stops only at a
//! transaction boundary, except past the abort time, where it drops the open
//! transaction's parts unwritten. A change the parts cannot carry in place, or a value its
//! column cannot hold, asks for the table's re-baseline ([`super::rebaseline`]) instead of
//! stopping the run — except on SQL Server, which has no position to re-baseline a table
//! at ([`crate::baseline::epoch`]): there a schema change stops the run as before. A
//! stream that ends inside a transaction is a sluice bug, reported as one.

use std::time::Instant;

use super::durable::Durable;
use super::options::DrainOptions;
use super::rebaseline::{Rebaselines, Why};
use super::shapes::Shapes;
use super::tables::Router;
use super::tracker::Tracker;
use crate::change::{ChangeEvent, Op};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::framer::Framer;
use crate::position::Position;
use crate::source::{BatchRoom, ChangeStream, SourceEvent, StreamInfo};

/// What one call asks of the source ([`ChangeStream::next_batch`]): one boxed future per
/// batch instead of one per event; the events wait in memory, in order, only until the
/// loop takes them — at most this many, and about this many bytes of cells plus one row.
/// Sixteen measured best (bench/results/profile.md, fifth pass): larger batches keep more
/// rows alive at once and lose malloc's per-thread cache of just-freed blocks.
const BATCH_EVENTS: usize = 16;
const BATCH_BYTES: usize = 1 << 20;

/// Why the read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The stream reached its read bound.
    Drained,
    /// Stopped at a transaction boundary (deadline or stop request): more is pending.
    AtBoundary,
    /// Stopped inside a transaction past the abort time: its open parts were dropped
    /// unwritten.
    InsideTransaction,
}

/// The drain's state while it reads: the stream, where it stands, and everything a change
/// goes through on its way into a durable part.
pub struct Pass<'a> {
    pub config: &'a Config,
    pub options: &'a DrainOptions,
    pub stream: Box<dyn ChangeStream>,
    /// Start, bound and tables, fixed at open.
    pub info: StreamInfo,
    pub durable: Durable<'a>,
    pub router: Router,
    pub shapes: Shapes,
    pub rebaselines: Rebaselines<'a>,
    framer: Framer,
    framed: Vec<ChangeEvent>,
    /// The commit position of the open transaction.
    open_commit: Option<Position>,
    /// The last complete transaction's resume position.
    pub last_commit: Option<Position>,
    /// The newest commit time seen (µs since the epoch), for the lag.
    pub newest_commit_ts: Option<i64>,
    last_flush: Instant,
}

impl<'a> Pass<'a> {
    /// A read of `stream` (opened with `info`) into `router`'s writers.
    pub fn new(
        config: &'a Config,
        options: &'a DrainOptions,
        stream: Box<dyn ChangeStream>,
        durable: Durable<'a>,
        router: Router,
        shapes: Shapes,
        rebaselines: Rebaselines<'a>,
    ) -> Self {
        Pass {
            config,
            options,
            info: stream.info().clone(),
            stream,
            durable,
            router,
            shapes,
            rebaselines,
            framer: Framer::new(),
            framed: Vec::new(),
            open_commit: None,
            last_commit: None,
            newest_commit_ts: None,
            last_flush: Instant::now(),
        }
    }

    /// Reads the stream in batches until it reaches its bound or the run must stop,
    /// showing progress while it runs when the process asked for it.
    pub async fn read(&mut self) -> Result<Ended> {
        let mut tracker = Tracker::start();
        let mut batch = Vec::with_capacity(BATCH_EVENTS);
        loop {
            let room = BatchRoom::new(BATCH_EVENTS, BATCH_BYTES);
            self.stream.next_batch(&mut batch, room).await?;
            if batch.is_empty() {
                self.check_transaction_closed()?;
                return Ok(Ended::Drained);
            }
            for event in batch.drain(..) {
                if let Some(ended) = self.on_event(event, &mut tracker).await? {
                    return Ok(ended);
                }
            }
        }
    }

    /// A source hands out whole transactions; an end inside one would lose its rest
    /// behind the end position's checkpoint.
    fn check_transaction_closed(&self) -> Result<()> {
        if !self.framer.in_transaction() {
            return Ok(());
        }
        Err(Error::new(
            Code::Internal,
            format!(
                "the source's change stream ended inside the transaction committed at {}",
                self.open_commit.as_ref().map_or("-".to_owned(), |p| p.to_string())
            ),
        )
        .hint("nothing of the transaction was checkpointed and the next run reads it again; this is a sluice bug — report it with the run's log"))
    }

    /// Takes one event of the stream; `Some` when the read ends with it.
    async fn on_event(
        &mut self,
        event: SourceEvent,
        tracker: &mut Tracker,
    ) -> Result<Option<Ended>> {
        match event {
            SourceEvent::Begin { commit, commit_ts } => {
                self.framer.begin(&commit, commit_ts)?;
                self.open_commit = Some(commit);
                self.newest_commit_ts = self.newest_commit_ts.max(commit_ts);
            }
            SourceEvent::Change(change) => {
                if self.options.abort_reached() {
                    self.router.abandon_open();
                    return Ok(Some(Ended::InsideTransaction));
                }
                tracker.change(|| parts_of(&self.router));
                // One buffer for every change's framed events, kept between changes.
                let mut framed = std::mem::take(&mut self.framed);
                self.framer.change(change, &mut framed)?;
                for event in framed.drain(..) {
                    self.route(event).await?;
                }
                self.framed = framed;
            }
            SourceEvent::Unfit(unfit) => {
                let at = self.open_commit.clone();
                let why = Why::Unfit(&unfit);
                self.rebaselines
                    .ask(&mut self.router, &unfit.table, at, why)
                    .await?;
            }
            SourceEvent::Commit { resume } => {
                let position = self.framer.commit(resume)?;
                self.last_commit = Some(position.clone());
                let deadline = self.options.deadline_reached();
                let asked = self.options.stop_asked();
                if deadline
                    || asked
                    || self.router.any_should_roll()
                    || self.options.flush_due(self.last_flush)
                {
                    self.flush(position.clone()).await?;
                    self.last_flush = Instant::now();
                }
                if deadline || asked {
                    let why = if asked {
                        "stop requested"
                    } else {
                        "deadline reached"
                    };
                    tracing::info!(at = %position, "{why}; stopping at a transaction boundary");
                    return Ok(Some(Ended::AtBoundary));
                }
                tracker.commit(position, || parts_of(&self.router));
                self.durable.committer.keep_lease().await?;
            }
            SourceEvent::Barrier => {
                if let Some(position) = self.last_commit.clone() {
                    self.flush(position).await?;
                }
                if self.options.stop_asked() {
                    tracing::info!("stop requested; stopping at a page boundary");
                    return Ok(Some(Ended::AtBoundary));
                }
                self.durable.committer.keep_lease().await?;
            }
        }
        Ok(None)
    }

    /// Routes one framed change to its table's writer, publishing a part that reached
    /// rollover; a change the parts cannot carry asks for the table's re-baseline.
    async fn route(&mut self, event: ChangeEvent) -> Result<()> {
        let table = &event.table.name;
        if self.router.skipped.contains(table) {
            return Ok(());
        }
        if event.op == Op::Rebaseline {
            let reason = "the source changed the table's rows without logging them as row changes (a partition TRUNCATE, DROP, EXCHANGE or REORGANIZE)";
            return self.rebaseline(table, reason).await;
        }
        // SQL Server has no position for a per-table re-baseline (crate::baseline::epoch):
        // the run stops at a schema change there as before.
        let per_table = !matches!(self.open_commit, Some(Position::SqlServer(_)));
        if let Some(reason) = self
            .shapes
            .check(&event.table, self.stream.as_mut())
            .await?
            && per_table
        {
            return self.rebaseline(table, &reason).await;
        }
        match self.router.append(&event) {
            Ok(Some(part)) => self.durable.publish(&mut self.router, part).await,
            Ok(None) => Ok(()),
            Err(e) if e.code() == Code::SourceSchemaChange && per_table => {
                self.rebaseline(table, e.message()).await
            }
            Err(e) => Err(e),
        }
    }

    /// Asks for `table`'s re-baseline for a change of the open transaction.
    async fn rebaseline(&mut self, table: &str, reason: &str) -> Result<()> {
        let at = self.open_commit.clone();
        self.rebaselines
            .ask(&mut self.router, table, at, Why::Changed(reason))
            .await
    }

    /// Flushes everything read so far and checkpoints `position` ([`Durable::flush`]).
    pub async fn flush(&mut self, position: Position) -> Result<()> {
        self.durable
            .flush(
                &mut self.router,
                &mut self.shapes,
                position,
                self.stream.as_mut(),
            )
            .await
    }
}

/// Parts the run has made durable so far.
pub fn parts_of(router: &Router) -> u64 {
    router.tables.values().map(|t| t.parts.len() as u64).sum()
}
