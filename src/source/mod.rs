//! The pull-based change-stream contract every engine implements, and the factory that
//! opens the engine a config names: its change stream ([`open`]) or its baseline reader
//! ([`open_baseline_reader`], whose contract is [`baseline_read`]).
//!
//! Contract (all engines): a stream is opened at the stored checkpoint with a read bound
//! fixed at open (the end of the log *as of the start of the run*); `next` yields
//! `Begin`, `Change`… and `Commit` events of committed transactions in commit order and
//! returns `None` once the bound is reached; `ack` is called only after everything up to
//! that position is durable in the destination **and** recorded in the checkpoint, and
//! lets the source release the log it retains. Opening refuses — never re-anchors — when
//! the log can no longer supply the changes after the checkpoint.

pub mod baseline_read;
pub mod establish;
pub mod mysql;
pub mod policy_read;
pub mod policy_stream;
pub mod postgres;
pub mod sqlserver;

use std::sync::Arc;

use async_trait::async_trait;

use crate::change::{RowChange, TableSchema};
use crate::config::Config;
pub use crate::config::{Engine, engine_for_url};
use crate::error::Result;
use crate::position::Position;

/// One item of a change stream.
#[derive(Debug)]
pub enum SourceEvent {
    /// A transaction starts; all its changes share this commit position.
    Begin {
        commit: Position,
        /// Commit time, µs since the Unix epoch (UTC), where the engine records it.
        commit_ts: Option<i64>,
    },
    /// One row change of the open transaction.
    Change(RowChange),
    /// The open transaction is complete; `resume` is where a checkpoint may move to.
    Commit { resume: Position },
    /// A change of the open transaction holds a value its column's typed output cannot
    /// hold: the change is not delivered; the drain moves the column to its text form and
    /// re-baselines the table (the stream goes on with the other tables).
    Unfit(crate::change::UnfitValue),
    /// The stream can continue only after everything read so far is durable,
    /// checkpointed and acked (PostgreSQL: the next page starts at the slot's position).
    Barrier,
}

/// Where the stream starts and what it is reading from.
#[derive(Debug, Clone)]
pub struct StreamInfo {
    /// Identity of the source (server + database + stream resources) stored with the
    /// checkpoint and compared on every open.
    pub source_identity: String,
    /// The position the stream resumes from.
    pub start: Position,
    /// The read bound fixed at open.
    pub bound: Position,
    /// The captured tables as the source described them at open.
    pub tables: Vec<Arc<TableSchema>>,
}

/// A change stream opened at a checkpoint with a fixed read bound.
#[async_trait]
pub trait ChangeStream: Send {
    /// Start, bound and identity, fixed at open.
    fn info(&self) -> &StreamInfo;

    /// The next event, or `None` once the read bound is reached.
    async fn next(&mut self) -> Result<Option<SourceEvent>>;

    /// Appends the next events to `out` while [`BatchRoom`] has room for them (at least
    /// one, unless the read bound is reached: then nothing). A `Barrier` is always the last
    /// event of a batch — the stream goes on only once everything before it is
    /// checkpointed. The same events in the same order as [`ChangeStream::next`]; one
    /// call instead of one per event.
    async fn next_batch(&mut self, out: &mut Vec<SourceEvent>, room: BatchRoom) -> Result<()> {
        let _ = room;
        if let Some(event) = self.next().await? {
            out.push(event);
        }
        Ok(())
    }

    /// The position a checkpoint may move to after `next` returned `None`: at least the
    /// bound, so an idle run still releases the log other tables' writes produced.
    fn end_position(&self) -> Position;

    /// Lets the source discard its log up to `upto`. Called only after `upto` is durable
    /// and checkpointed; must be idempotent.
    async fn ack(&mut self, upto: &Position) -> Result<()>;

    /// Bytes of log the source still retains for this stream, where the engine can tell.
    async fn retained_bytes(&mut self) -> Option<u64> {
        None
    }

    /// Asked when `column` appears in `table`'s shape mid-stream: why rows the stream
    /// will never show again may hold a value for it (PostgreSQL: the column was added
    /// with a default — rows not touched since have it without a logged change), or
    /// `None` when a row without a change since has it NULL (or the engine cannot tell).
    async fn filled_without_changes(
        &mut self,
        table: &str,
        column: &str,
    ) -> Result<Option<String>> {
        let _ = (table, column);
        Ok(None)
    }
}

/// What one [`ChangeStream::next_batch`] may still take: a number of events and bytes of
/// cells ([`crate::change::RowChange::approx_bytes`]), so a batch of wide rows stays small.
#[derive(Debug, Clone, Copy)]
pub struct BatchRoom {
    events: usize,
    bytes: usize,
}

impl BatchRoom {
    /// Room for `events` events and `bytes` bytes of cells.
    pub fn new(events: usize, bytes: usize) -> Self {
        BatchRoom { events, bytes }
    }

    /// Adds `event` to the batch `out`; whether another may follow it (never after a
    /// `Barrier`).
    pub fn push(&mut self, out: &mut Vec<SourceEvent>, event: SourceEvent) -> bool {
        self.events = self.events.saturating_sub(1);
        let more = match &event {
            SourceEvent::Barrier => false,
            SourceEvent::Change(change) => {
                self.bytes = self.bytes.saturating_sub(change.approx_bytes());
                self.events > 0 && self.bytes > 0
            }
            _ => self.events > 0,
        };
        out.push(event);
        more
    }
}

/// The next item of `stream`, or `Err` when none came within `limit`. A timer is armed
/// only when no item is ready: `limit` bounds a wait, and an item already received costs
/// no clock read.
pub async fn next_within<S>(
    stream: &mut S,
    limit: std::time::Duration,
) -> std::result::Result<Option<S::Item>, tokio::time::error::Elapsed>
where
    S: futures_util::Stream + Unpin,
{
    use futures_util::{FutureExt, StreamExt};
    match stream.next().now_or_never() {
        Some(next) => Ok(next),
        None => tokio::time::timeout(limit, stream.next()).await,
    }
}

/// The checkpoint a stream is opened at, as loaded from state.
#[derive(Debug, Clone)]
pub struct Resume {
    pub position: Position,
    pub source_identity: String,
}

/// The one `SLUICE_SOURCE_UNSUPPORTED_TYPE` refusal for a table, naming **every**
/// offending column (`offenders`: one `<column> has type <type>: <why>` each), so an
/// operator fixes them all at once; `Ok` when there are none.
pub fn refuse_unsupported(table: &str, offenders: &[String], hint: &str) -> Result<()> {
    if offenders.is_empty() {
        return Ok(());
    }
    let what = if offenders.len() == 1 {
        "a column".to_owned()
    } else {
        format!("{} columns", offenders.len())
    };
    Err(crate::error::Error::new(
        crate::error::Code::SourceUnsupportedType,
        format!(
            "{table} has {what} sluice cannot capture: {}",
            offenders
                .iter()
                .map(|o| format!("{table}.{o}"))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    )
    .hint(hint.to_owned()))
}

/// Checks the `source` block's engine settings, each by its engine, and — for a URL
/// written in the config — its TLS gate.
pub fn check_config(config: &Config) -> Result<()> {
    if let Some(url) = &config.source.url {
        check_transport(url, &config.source.tls)?;
    }
    postgres::check_config(config)?;
    if let Some(ms) = &config.source.sqlserver {
        sqlserver::validate_config(ms, &config.source.tables)?;
    }
    mysql::check_config(config)?;
    if let Some(url) = &config.source.url
        && (url.starts_with("postgres://") || url.starts_with("postgresql://"))
        && config.source.postgres.is_none()
    {
        return Err(crate::config::invalid(
            "source.url is a PostgreSQL URL but source.postgres is missing",
        )
        .hint("add `postgres: { slot: <name>, publication: <name> }` under source"));
    }
    Ok(())
}

/// The TLS gate of the engine `url` names, decided without connecting or reading a
/// file: what opening the source would refuse before sending a packet is refused here,
/// so it is reported by `validate` and before any claim or lease is taken.
pub fn check_transport(url: &str, tls: &crate::config::TlsConfig) -> Result<()> {
    match engine_for_url(url)? {
        Engine::Postgres => postgres::connect::check_transport(url, tls),
        Engine::MySql => mysql::connect::check_transport(url, tls),
        Engine::SqlServer => sqlserver::connect::check_transport(url, tls),
    }
}

/// Makes the source publish every table of `source.tables` before one of them is
/// baselined into a running job: PostgreSQL adds it to the publication (or refuses when
/// sluice does not manage it); the binlog and CDC tables need nothing.
pub async fn prepare_capture(config: &Config) -> Result<()> {
    match engine_for_url(&config.source_url()?)? {
        Engine::Postgres => postgres::prepare_capture(config).await,
        Engine::MySql | Engine::SqlServer => Ok(()),
    }
}

/// Opens a baseline reader ([`baseline_read::BaselineReader`]) for the source the config names.
/// The job's column policies and row filters are applied to its rows
/// ([`policy_read::PolicyReader`]).
pub async fn open_baseline_reader(
    config: &Config,
) -> Result<Box<dyn baseline_read::BaselineReader>> {
    let policies = Arc::new(crate::policy::Policies::of(config)?);
    let engine = engine_for_url(&config.source_url()?)?;
    let reader: Box<dyn baseline_read::BaselineReader> = match engine {
        Engine::Postgres => {
            Box::new(postgres::baseline_read::PgBaselineReader::open(config).await?)
        }
        Engine::MySql => Box::new(mysql::baseline_read::MyBaselineReader::open(config).await?),
        Engine::SqlServer => {
            Box::new(sqlserver::baseline_read::SqlServerBaselineReader::open(config).await?)
        }
    };
    policy_read::PolicyReader::wrap(reader, policies, engine, &config.source.tables)
}

/// Opens the change stream the config names, with the job's column policies and row
/// filters applied to its changes (MySQL / MariaDB inside the stream, before a
/// transaction can spill; the others by [`policy_stream::PolicyStream`]).
pub async fn open(config: &Config, resume: Option<&Resume>) -> Result<Box<dyn ChangeStream>> {
    let policies = Arc::new(crate::policy::Policies::of(config)?);
    let applier = crate::policy::Applier::new(policies.clone());
    match engine_for_url(&config.source_url()?)? {
        Engine::Postgres => policy_stream::PolicyStream::wrap(
            postgres::open(config, resume, &policies).await?,
            applier,
        ),
        Engine::MySql => mysql::open(config, resume, applier).await,
        Engine::SqlServer => {
            policy_stream::PolicyStream::wrap(sqlserver::open(config, resume).await?, applier)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn change(text: &str) -> SourceEvent {
        SourceEvent::Change(RowChange {
            table: Arc::new(TableSchema {
                name: "t".into(),
                columns: Vec::new(),
            }),
            op: crate::change::Op::Insert,
            before: None,
            after: Some(vec![crate::change::Value::Text(text.into())]),
            before_unlogged: Vec::new(),
            after_unlogged: Vec::new(),
        })
    }

    #[test]
    fn a_batch_ends_at_its_event_count_its_bytes_or_a_barrier() {
        let commit = || SourceEvent::Commit {
            resume: Position::Postgres(crate::position::PgLsn(1)),
        };
        let mut out = Vec::new();
        let mut room = BatchRoom::new(3, 1 << 20);
        assert!(room.push(&mut out, commit()));
        assert!(room.push(&mut out, change("a")));
        assert!(!room.push(&mut out, commit()), "three events");
        let mut room = BatchRoom::new(100, 64);
        assert!(room.push(&mut out, change("small")));
        assert!(
            !room.push(&mut out, change(&"x".repeat(60))),
            "over 64 bytes of cells"
        );
        let mut room = BatchRoom::new(100, 1 << 20);
        assert!(
            !room.push(&mut out, SourceEvent::Barrier),
            "nothing follows a barrier"
        );
        assert_eq!(out.len(), 6, "every event is kept, in order");
        assert!(matches!(out.last(), Some(SourceEvent::Barrier)));
    }

    #[test]
    fn the_scheme_chooses_the_engine() {
        assert_eq!(
            engine_for_url("postgres://u@h/db").unwrap(),
            Engine::Postgres
        );
        assert_eq!(
            engine_for_url("postgresql://u@h/db").unwrap(),
            Engine::Postgres
        );
        assert_eq!(engine_for_url("MySQL://u@h:3306/").unwrap(), Engine::MySql);
        assert_eq!(
            engine_for_url("sqlserver://u@h:1433/db").unwrap(),
            Engine::SqlServer
        );
        for url in ["mssql://u:secret@h/db", "h:5432", ""] {
            let err = engine_for_url(url).unwrap_err();
            assert_eq!(err.code(), Code::ConfigUnsupportedSource, "{url}");
            assert!(!err.to_string().contains("secret"));
        }
    }
}
