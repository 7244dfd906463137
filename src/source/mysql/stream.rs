//! The MySQL / MariaDB change stream: binlog events from the checkpoint to the read
//! bound, framed into committed transactions.
//!
//! How a run reads: one non-blocking binlog dump from the start position; every event of
//! the server is read (other tables' too — they are skipped after their TABLE_MAP), and
//! the run ends after the first event group that reaches the bound. The binlog writes a
//! transaction's rows before its XID (InnoDB) or `COMMIT` query (non-transactional
//! engines), and only that event gives the commit position, so a transaction's captured
//! rows are held in a [`TxnBuffer`] (spilling to disk past its memory cap) and emitted as
//! `Begin` / `Change`… / `Commit` once the commit event arrives; a `ROLLBACK` drops them.
//! `__pos` and the resume checkpoint are both the position just after the commit event.
//!
//! Resume proof: a checkpoint records the creation time of its binlog file and the type,
//! size and timestamp of the event ending at its offset. The dump then starts at that
//! event, and the stream verifies both before reading on; a mismatch (binlog reset, file
//! replaced) is `SLUICE_SOURCE_FOREIGN_CHECKPOINT`. An INCIDENT event (the server lost
//! events) is `SLUICE_SOURCE_LOG_GAP`.
//!
//! GTIDs (MariaDB): the stream starts from the GTID position at its start and records
//! every GTID event's `domain-server-seq`, so each commit position carries the GTID
//! position just after its transaction ([`crate::position::GtidPos`]). A stream that
//! follows a failover ([`Origin::Gtid`]) is dumped from that GTID position on the new
//! server (`@slave_connect_state`): its first file is the one the server names in its
//! first (artificial) ROTATE, and its positions are in the next generation.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use mysql_async::BinlogStream;
use mysql_async::binlog::EventFlags;
use mysql_async::binlog::events::{Event, EventData, TableMapEvent};

use super::binlog::classify_dump_error;
use super::events::{self, MappedTable, MariaGtid, Statement, UnknownEvent};
use super::refusals::{foreign, log_gap};
use super::schema::CapturedTable;
use super::spill::{Held, SpillError, TxnBuffer};
use crate::change::{Op, RowChange};
use crate::error::{Code, Error, Result};
use crate::position::{BinlogMark, BinlogPosition, Gtid, GtidPos, GtidSet, Position};
use crate::source::{BatchRoom, ChangeStream, SourceEvent, StreamInfo, TableSchema};
use crate::spill::disk_budget::TransactionLimit;

const FORMAT_DESCRIPTION: u8 = 15;

/// A TABLE_MAP seen in the stream: for a captured table, its mapping.
struct KnownTable {
    tme: TableMapEvent<'static>,
    mapped: Option<Arc<MappedTable>>,
}

/// The event group being read (between a GTID/BEGIN and its end).
#[derive(Debug, Default)]
struct Group {
    open: bool,
    /// Inside BEGIN … COMMIT (MariaDB: a non-standalone GTID group).
    txn: bool,
    xa: bool,
}

/// A committed transaction being handed out.
struct Emit {
    commit: BinlogPosition,
    commit_ts: i64,
    begun: bool,
}

/// Where the dump started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// At a binlog position (a checkpoint of this server, or a new stream's start).
    Position,
    /// At a GTID position, on a server the checkpoint was not taken on (a failover).
    Gtid {
        /// The server had no transaction after the GTID position at open: the stream
        /// starts (and ends) at the read bound.
        caught_up: bool,
        /// The server's binlog events carry a CRC32 (`binlog_checksum`): the first ROTATE
        /// arrives with it still attached to the file name.
        checksum: bool,
    },
}

/// The GTID side of the stream's start.
#[derive(Debug, Clone)]
pub struct GtidStart {
    pub origin: Origin,
    /// The GTID position at the start (`None`: not tracked).
    pub gtid: Option<GtidPos>,
    /// MySQL: the GTID set executed up to the start (`None`: not known yet; learnt from
    /// the next binlog file's PREVIOUS_GTIDS).
    pub gtid_set: Option<Arc<GtidSet>>,
    /// The generation of every position the stream hands out.
    pub generation: u16,
}

/// Settings the stream needs from the config.
pub struct StreamSettings {
    pub server_id: u32,
    pub spill_dir: std::path::PathBuf,
    pub memory_cap: u64,
    pub max_transaction: TransactionLimit,
    /// The longest the dump may be silent before the run gives up (`source.timeouts`).
    pub read_timeout: std::time::Duration,
    /// The tables' column policies and row filters, applied as rows are decoded.
    pub policy: crate::policy::Applier,
}

/// The open binlog stream.
pub struct MyStream {
    info: StreamInfo,
    dump: Option<BinlogStream>,
    server_id: u32,
    /// The longest the dump may be silent.
    read_timeout: std::time::Duration,
    bound: BinlogPosition,
    /// The checkpoint whose event must be verified before reading on.
    expect: Option<BinlogPosition>,
    /// The file events currently come from.
    file: BinlogPosition,
    /// The end of the last real event read (starts at the requested position).
    position: BinlogPosition,
    file_created: Option<u32>,
    last_event: Option<(u8, u32, u32)>,
    first_rotate_seen: bool,
    format_seen: bool,
    tables: Vec<CapturedTable>,
    collations: HashMap<u16, String>,
    known: HashMap<u64, KnownTable>,
    /// Each captured table's shape as the stream last mapped it: a statement's change
    /// (`truncate`, `rebaseline`) takes it, not the catalog's at the open, which may be
    /// ahead of the backlog (a column added later).
    last_shape: HashMap<String, Arc<TableSchema>>,
    group: Group,
    buffer: TxnBuffer,
    /// Rows of a logged rows event taken from the buffer and decoded, not yet handed out.
    unpacked: std::collections::VecDeque<RowChange>,
    /// The largest transaction this run accepts (configured, lowered by the spill volume).
    limit: TransactionLimit,
    emitting: Option<Emit>,
    finished: bool,
    origin: Origin,
    /// The GTID position after the last GTID event read (`None`: not tracked).
    gtid: Option<GtidPos>,
    /// MySQL: the GTID set read up to.
    gtid_set: super::mysql_gtid::SetTracker,
    generation: u16,
    /// The tables' column policies and row filters: applied to each row as it is decoded,
    /// before the transaction buffer can spill it (a table with a policy is never kept
    /// on disk as logged).
    policy: crate::policy::Applier,
}

impl MyStream {
    /// A stream reading `dump`, which was requested at `requested` (the checkpoint, or
    /// the start of its commit event when the checkpoint carries an event mark).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        info: StreamInfo,
        dump: BinlogStream,
        settings: StreamSettings,
        requested: BinlogPosition,
        expect: Option<BinlogPosition>,
        bound: BinlogPosition,
        tables: Vec<CapturedTable>,
        collations: HashMap<u16, String>,
        start: GtidStart,
    ) -> Self {
        let requested = requested.with_generation(start.generation);
        MyStream {
            info,
            dump: Some(dump),
            server_id: settings.server_id,
            read_timeout: settings.read_timeout,
            bound,
            expect,
            file: requested.clone(),
            position: requested,
            file_created: None,
            last_event: None,
            first_rotate_seen: false,
            format_seen: false,
            tables,
            collations,
            known: HashMap::new(),
            last_shape: HashMap::new(),
            group: Group::default(),
            buffer: TxnBuffer::new(
                settings.spill_dir,
                settings.memory_cap,
                settings.max_transaction.bytes,
            ),
            unpacked: std::collections::VecDeque::new(),
            limit: settings.max_transaction,
            emitting: None,
            finished: false,
            origin: start.origin,
            gtid: start.gtid,
            gtid_set: super::mysql_gtid::SetTracker::new(start.gtid_set),
            generation: start.generation,
            policy: settings.policy,
        }
    }

    /// The current position with its proof.
    fn marked(&self, position: BinlogPosition, event: Option<(u8, u32, u32)>) -> BinlogPosition {
        position.with_mark(BinlogMark {
            file_created: self.file_created,
            event,
            gtid: self.gtid,
            gtid_set: self.gtid_set.current(),
        })
    }

    fn done(&self) -> bool {
        self.format_seen && self.expect.is_none() && !self.group.open && self.position >= self.bound
    }

    async fn close_dump(&mut self) {
        if let Some(dump) = self.dump.take()
            && let Err(e) = dump.close().await
        {
            tracing::debug!(error = %e, "closing the binlog connection");
        }
    }

    /// Handles one event; may set `emitting`.
    fn handle(&mut self, event: Event) -> Result<()> {
        let header = event.header();
        let ty = header.event_type_raw();
        let artificial =
            header.log_pos() == 0 || header.flags().contains(EventFlags::LOG_EVENT_ARTIFICIAL_F);
        let end = (!artificial).then(|| self.file.at(header.log_pos()));
        let at = EventAt {
            end: end.clone(),
            file: self.file.at(0),
        };
        let this_event = (ty, header.event_size(), header.timestamp());

        if let Some(expect) = self.expect.clone()
            && self.format_seen
            && !artificial
            && (ty != FORMAT_DESCRIPTION
                || expect.mark.event.is_some_and(|e| e.0 == FORMAT_DESCRIPTION))
        {
            // The first real event after the FORMAT_DESCRIPTION: the checkpoint's own.
            self.expect = None;
            if let Some(mark) = expect.mark.event {
                if end.as_ref() != Some(&expect) || this_event != mark {
                    return Err(foreign(format!(
                        "the binlog event at {expect} is not the one the checkpoint recorded (type/size/time {mark:?}, found {this_event:?} ending at {at}): the binlog was reset or replaced"
                    )));
                }
                self.position = expect;
                self.last_event = Some(mark);
                return Ok(());
            }
        }

        let mut next_file = None;
        match event.read_data() {
            Err(e) => {
                return Err(Error::new(
                    Code::SourceProtocol,
                    format!("cannot decode the binlog event at {at} (type {ty}): {e}"),
                )
                .hint("report it with the run's log; the checkpoint did not move"));
            }
            Ok(None) => match events::classify_unknown(ty) {
                UnknownEvent::Gtid => {
                    let gtid = MariaGtid::parse(event.data()).ok_or_else(|| {
                        Error::new(
                            Code::SourceProtocol,
                            format!("malformed MariaDB GTID event at {at}"),
                        )
                    })?;
                    self.open_group(!gtid.standalone(), gtid.xa(), &at)?;
                    self.record_gtid(Gtid {
                        domain: gtid.domain_id,
                        server: header.server_id(),
                        seq: gtid.seq_no,
                    });
                }
                UnknownEvent::Skip => {}
                UnknownEvent::Refuse => return Err(unreadable(ty, &at)),
            },
            Ok(Some(data)) => match data {
                EventData::RotateEvent(rotate) => {
                    let name = rotate.name().into_owned();
                    if artificial {
                        // The very first fake ROTATE arrives before the FORMAT_DESCRIPTION,
                        // so its name still carries 4 checksum bytes: use the requested file
                        // (after a failover there is none: strip them).
                        if self.first_rotate_seen {
                            self.file = self.in_generation(&name)?;
                        } else if let Origin::Gtid {
                            caught_up,
                            checksum,
                        } = self.origin
                        {
                            let raw = rotate.name_raw();
                            let raw = match checksum {
                                true => &raw[..raw.len().saturating_sub(4)],
                                false => raw,
                            };
                            self.file = self.in_generation(&String::from_utf8_lossy(raw))?;
                            if !caught_up {
                                self.position = self.file.at(4);
                            }
                        }
                        self.first_rotate_seen = true;
                    } else {
                        next_file = Some(self.in_generation(&name)?);
                    }
                }
                EventData::FormatDescriptionEvent(_) => {
                    if let Some(expect) = &self.expect
                        && let Some(created) = expect.mark.file_created
                        && created != header.timestamp()
                    {
                        return Err(foreign(format!(
                            "binlog file {} was created at {} but the checkpoint's file at {created}: the binlog was reset or replaced",
                            self.file.file(),
                            header.timestamp()
                        )));
                    }
                    self.file_created = Some(header.timestamp());
                    self.format_seen = true;
                    if self.expect.as_ref().is_some_and(|e| e.mark.event.is_none()) {
                        // Only the file can be verified; the dump starts at the offset itself.
                        self.expect = None;
                    }
                }
                EventData::QueryEvent(query) => {
                    let sql = query.query();
                    let schema = query.schema();
                    self.statement(
                        &sql,
                        &schema,
                        &at,
                        end.clone(),
                        this_event,
                        header.timestamp(),
                    )?;
                }
                EventData::XidEvent(_) => {
                    self.commit(end.clone(), this_event, header.timestamp(), &at)?
                }
                EventData::TableMapEvent(tme) => self.table_map(tme, &at)?,
                EventData::RowsEvent(rows) => {
                    let known = self.known.get(&rows.table_id()).ok_or_else(|| {
                        Error::new(
                            Code::SourceProtocol,
                            format!(
                                "a rows event at {at} names table id {} without a TABLE_MAP",
                                rows.table_id()
                            ),
                        )
                    })?;
                    if let Some(mapped) = known.mapped.clone() {
                        if self.group.xa {
                            return Err(xa_refused(&mapped.schema.name, &at));
                        }
                        let buffer = &mut self.buffer;
                        let limit = &self.limit;
                        let policy = &mut self.policy;
                        let logged = events::logged_rows(&mapped, &rows, &at)?;
                        if buffer.spilled() && !policy.touches(&mapped.schema.name) {
                            // Kept as logged, decoded as the transaction is emitted.
                            buffer
                                .push_rows(&mapped, &logged, &at.to_string())
                                .map_err(|e| spill_error(e, &at, limit))?;
                        } else {
                            // A table with a policy: decoded and the policy applied now,
                            // so a spill file holds only the policy's output.
                            events::decode_logged(&mapped, &logged, &at, |change| {
                                match policy.change(change)? {
                                    Some(change) => {
                                        buffer.push(change).map_err(|e| spill_error(e, &at, limit))
                                    }
                                    None => Ok(()),
                                }
                            })?;
                        }
                    }
                }
                EventData::GtidEvent(gtid) => {
                    self.open_group(false, false, &at)?;
                    self.gtid_set.gtid(&gtid, &at);
                }
                EventData::AnonymousGtidEvent(_) => self.open_group(false, false, &at)?,
                EventData::PreviousGtidsEvent(previous) => self.gtid_set.previous(&previous, &at),
                EventData::XaPrepareLogEvent(_) => {
                    if !self.buffer.is_empty() {
                        return Err(xa_refused("a captured table", &at));
                    }
                    self.close_group();
                }
                EventData::IncidentEvent(incident) => {
                    return Err(log_gap(format!(
                        "the server logged an INCIDENT at {at} ({:?}): events around it were lost",
                        incident.message()
                    )));
                }
                EventData::TransactionPayloadEvent(_) => {
                    return Err(Error::new(
                        Code::SourcePrerequisite,
                        format!("a compressed transaction (TRANSACTION_PAYLOAD_EVENT) at {at}"),
                    )
                    .hint("SET GLOBAL binlog_transaction_compression = OFF and make sure no session enables it: a compressed transaction is decompressed whole into memory"));
                }
                EventData::UnknownEvent
                | EventData::LoadEvent(_)
                | EventData::CreateFileEvent(_)
                | EventData::AppendBlockEvent(_)
                | EventData::ExecLoadEvent(_)
                | EventData::DeleteFileEvent(_)
                | EventData::NewLoadEvent(_)
                | EventData::BeginLoadQueryEvent(_)
                | EventData::ExecuteLoadQueryEvent(_)
                | EventData::PreGaWriteRowsEvent(_)
                | EventData::PreGaUpdateRowsEvent(_)
                | EventData::PreGaDeleteRowsEvent(_) => return Err(unreadable(ty, &at)),
                EventData::StartEventV3(_)
                | EventData::StopEvent
                | EventData::SlaveEvent
                | EventData::IntvarEvent(_)
                | EventData::RandEvent(_)
                | EventData::UserVarEvent(_)
                | EventData::HeartbeatEvent
                | EventData::IgnorableEvent(_)
                | EventData::RowsQueryEvent(_)
                | EventData::TransactionContextEvent(_)
                | EventData::ViewChangeEvent(_) => {}
            },
        }
        if let Some(end) = end
            && end > self.position
        {
            self.position = end;
            self.last_event = Some(this_event);
        }
        if let Some(next) = next_file {
            self.file = next;
        }
        Ok(())
    }

    /// A file of the server the stream reads, in the stream's generation.
    fn in_generation(&self, name: &str) -> Result<BinlogPosition> {
        Ok(super::binlog::position(name, 4)?.with_generation(self.generation))
    }

    /// Records a GTID event's transaction as its domain's last one.
    fn record_gtid(&mut self, gtid: Gtid) {
        if let Some(pos) = self.gtid.as_mut()
            && pos.record(gtid).is_err()
        {
            tracing::warn!(%gtid, "the server uses more GTID domains than a checkpoint records; checkpoints keep only file:offset (a failover cannot be followed)");
            self.gtid = None;
        }
    }

    fn open_group(&mut self, txn: bool, xa: bool, at: &dyn std::fmt::Display) -> Result<()> {
        if self.group.open && !self.buffer.is_empty() {
            return Err(Error::new(
                Code::SourceProtocol,
                format!(
                    "an event group began at {at} while a transaction with captured rows was still open"
                ),
            ));
        }
        self.buffer.clear();
        if self.known.len() > 10_000 {
            // TABLE_MAPs are re-sent in every transaction; forget old table ids.
            self.known.clear();
        }
        self.group = Group {
            open: true,
            txn,
            xa,
        };
        Ok(())
    }

    fn close_group(&mut self) {
        self.buffer.clear();
        self.group = Group::default();
    }

    #[allow(clippy::too_many_arguments)]
    fn statement(
        &mut self,
        sql: &str,
        schema: &str,
        at: &dyn std::fmt::Display,
        end: Option<BinlogPosition>,
        this_event: (u8, u32, u32),
        ts: u32,
    ) -> Result<()> {
        match events::classify_statement(sql) {
            Statement::Begin => {
                if !self.group.open {
                    self.open_group(true, false, at)?;
                }
                self.group.txn = true;
            }
            Statement::Commit => self.commit(end, this_event, ts, at)?,
            Statement::Rollback => self.close_group(),
            Statement::Savepoint => {}
            Statement::Xa => {
                if !self.buffer.is_empty() {
                    return Err(xa_refused("a captured table", at));
                }
                let upper = sql.to_ascii_uppercase();
                if ["PREPARE", "COMMIT", "ROLLBACK"]
                    .iter()
                    .any(|w| upper.contains(w))
                {
                    self.close_group();
                } else {
                    self.group.xa = true;
                }
            }
            Statement::Truncate => {
                // A TRUNCATE of a captured table is one `truncate` change at its place. A
                // statement naming the table less surely (another letter case, a form
                // not parsed) re-baselines the table instead: exact either way.
                let mut changes = Vec::new();
                for t in &self.tables {
                    let op = match events::truncated_table(sql) {
                        Some((db, table)) => {
                            let db = db.as_deref().unwrap_or(schema);
                            if db == t.database && table == t.table {
                                Some(Op::Truncate)
                            } else if db.eq_ignore_ascii_case(&t.database)
                                && table.eq_ignore_ascii_case(&t.table)
                            {
                                Some(Op::Rebaseline)
                            } else {
                                None
                            }
                        }
                        None => (events::mentions_table(sql, &t.table)
                            && (schema == t.database || events::mentions_table(sql, &t.database)))
                        .then_some(Op::Rebaseline),
                    };
                    if let Some(op) = op
                        && let Some(shape) = self.statement_shape(&t.config_name)
                    {
                        changes.push((shape, op));
                    }
                }
                self.statement_changes(changes, end, this_event, ts, at)?;
            }
            Statement::Dml => {
                if let Some(table) = self.mentioned(sql, schema) {
                    return Err(Error::new(
                        Code::SourcePrerequisite,
                        format!("a change to {table} at {at} was logged as a statement, not as rows"),
                    )
                    .hint("a session wrote with binlog_format = STATEMENT or MIXED; SET GLOBAL binlog_format = 'ROW', make sure no session overrides it (SET SESSION binlog_format needs SUPER / BINLOG ADMIN — revoke it from applications), then re-baseline the table"));
                }
                self.end_statement_group();
            }
            Statement::Other => {
                // A partition TRUNCATE/DROP/EXCHANGE/REORGANIZE, or a column added with a
                // value for existing rows, changes rows without row events: each captured
                // table it names gets one `rebaseline` change at the statement's place, and
                // the drain re-baselines that table.
                let rewritten: Vec<_> =
                    if events::rewrites_partition_rows(sql) || events::adds_filled_column(sql) {
                        self.tables
                            .iter()
                            .filter(|t| {
                                events::mentions_table(sql, &t.table)
                                    && (schema == t.database
                                        || events::mentions_table(sql, &t.database))
                            })
                            .filter_map(|t| self.statement_shape(&t.config_name))
                            .collect()
                    } else {
                        Vec::new()
                    };
                let changes = rewritten.into_iter().map(|t| (t, Op::Rebaseline)).collect();
                self.statement_changes(changes, end, this_event, ts, at)?;
            }
        }
        Ok(())
    }

    /// A statement that changes captured tables without row events (`TRUNCATE`, a
    /// partition rewrite): one change per table at the statement's place, committed as the
    /// statement's own group (it commits implicitly); nothing captured, it just ends.
    fn statement_changes(
        &mut self,
        changes: Vec<(Arc<TableSchema>, Op)>,
        end: Option<BinlogPosition>,
        this_event: (u8, u32, u32),
        ts: u32,
        at: &dyn std::fmt::Display,
    ) -> Result<()> {
        if changes.is_empty() {
            self.end_statement_group();
            return Ok(());
        }
        for (table, op) in changes {
            let change = RowChange {
                table: self.policy.schema(&table)?,
                op,
                before: None,
                after: None,
                before_unlogged: vec![],
                after_unlogged: vec![],
            };
            self.buffer
                .push(change)
                .map_err(|e| spill_error(e, at, &self.limit))?;
        }
        self.commit(end, this_event, ts, at)
    }

    /// The shape a statement's change of `table` carries: the stream's last one, else the
    /// catalog's at the open.
    fn statement_shape(&self, table: &str) -> Option<Arc<TableSchema>> {
        self.last_shape
            .get(table)
            .or_else(|| self.info.tables.iter().find(|s| s.name == table))
            .cloned()
    }

    /// A statement outside BEGIN … COMMIT is a group of its own (DDL).
    fn end_statement_group(&mut self) {
        if !self.group.txn {
            self.close_group();
        }
    }

    /// The captured table a statement may change: it names the table, and either runs in
    /// the table's database or names that database too.
    fn mentioned(&self, sql: &str, schema: &str) -> Option<String> {
        self.tables
            .iter()
            .find(|t| {
                events::mentions_table(sql, &t.table)
                    && (schema == t.database || events::mentions_table(sql, &t.database))
            })
            .map(|t| t.config_name.clone())
    }

    fn commit(
        &mut self,
        end: Option<BinlogPosition>,
        this_event: (u8, u32, u32),
        ts: u32,
        at: &dyn std::fmt::Display,
    ) -> Result<()> {
        let end = end.ok_or_else(|| {
            Error::new(
                Code::SourceProtocol,
                format!("an artificial commit event at {at}"),
            )
        })?;
        if self.group.xa && !self.buffer.is_empty() {
            return Err(xa_refused("a captured table", at));
        }
        self.group = Group::default();
        self.emitting = Some(Emit {
            commit: self.marked(end, Some(this_event)),
            commit_ts: i64::from(ts) * 1_000_000,
            begun: false,
        });
        Ok(())
    }

    /// Learns a TABLE_MAP; one equal to the table id's last (every transaction repeats it)
    /// is not copied again.
    fn table_map(&mut self, tme: TableMapEvent<'_>, at: &dyn std::fmt::Display) -> Result<()> {
        let id = tme.table_id();
        if let Some(known) = self.known.get(&id)
            && known.tme == tme
        {
            return Ok(());
        }
        let tme = tme.into_owned();
        let database = tme.database_name().into_owned();
        let table = tme.table_name().into_owned();
        let captured = self
            .tables
            .iter()
            .find(|t| t.database == database && t.table == table);
        let mapped = match captured {
            None => None,
            Some(captured) => {
                let columns = events::describe_table_map(&tme, &self.collations)
                    .map_err(|reason| {
                        Error::new(Code::SourceProtocol, format!("{} at {at}: {reason}", captured.config_name))
                    })?
                    .ok_or_else(|| {
                        Error::new(
                            Code::SourcePrerequisite,
                            format!(
                                "{} at {at}: the binlog event carries no column names (it was written with binlog_row_metadata = MINIMAL or NO_LOG)",
                                captured.config_name
                            ),
                        )
                        .hint("sluice never maps binlog rows by column position. SET GLOBAL binlog_row_metadata = 'FULL' (and persist it); the changes written before cannot be read — clear the job's state with `sluice state clear --config FILE` and re-baseline the table")
                    })?;
                Some(Arc::new(events::map_table(captured, columns, at)?))
            }
        };
        if let Some(mapped) = &mapped {
            self.last_shape
                .insert(mapped.schema.name.clone(), mapped.schema.clone());
        }
        self.known.insert(id, KnownTable { tme, mapped });
        Ok(())
    }
}

/// Where an event ends, printed only when a message names it (every event has one, few
/// messages are written).
struct EventAt {
    end: Option<BinlogPosition>,
    file: BinlogPosition,
}

impl std::fmt::Display for EventAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.end {
            Some(end) => end.fmt(f),
            None => write!(f, "{} (artificial event)", self.file.file()),
        }
    }
}

fn unreadable(ty: u8, at: &dyn std::fmt::Display) -> Error {
    Error::new(
        Code::SourcePrerequisite,
        format!("binlog event type {ty} at {at} cannot be read and may carry row changes"),
    )
    .hint("MariaDB: SET GLOBAL log_bin_compress = OFF (compressed events 165–171 cannot be decoded); otherwise report the event type. Nothing after the checkpoint was written; once the source writes readable events, re-baseline the tables whose changes are in the unreadable ones")
}

fn xa_refused(table: &str, at: &dyn std::fmt::Display) -> Error {
    Error::new(
        Code::SourcePrerequisite,
        format!("an XA transaction at {at} changes {table}; XA transactions are not supported"),
    )
    .hint("commit changes to captured tables in ordinary transactions")
}

fn spill_error(
    e: SpillError,
    at: &dyn std::fmt::Display,
    limit_of_run: &TransactionLimit,
) -> Error {
    match e {
        SpillError::TooLarge { limit } => Error::new(
            Code::SourceTransactionTooLarge,
            format!("the transaction ending after {at} holds more than {limit} bytes of captured rows"),
        )
        .hint(limit_of_run.hint()),
        SpillError::Io { ref source, .. } if source.kind() == std::io::ErrorKind::StorageFull => Error::new(
            Code::SpillFull,
            format!("spilling the transaction at {at}: the spill directory is full"),
        )
        .hint("point output.spill_dir at a larger volume or raise the Lambda function's ephemeral storage; or lower source.mysql.max_transaction_bytes to fail sooner")
        .source(e),
        other => Error::new(Code::OutputWrite, format!("spilling the transaction at {at}")).source(other),
    }
}

impl MyStream {
    /// The next event (the body of [`ChangeStream::next`], unboxed so a batch pays for
    /// one boxed future, not one per event).
    async fn next_event(&mut self) -> Result<Option<SourceEvent>> {
        loop {
            if let Some(emit) = self.emitting.as_mut() {
                if !emit.begun {
                    emit.begun = true;
                    return Ok(Some(SourceEvent::Begin {
                        commit: Position::MySql(Box::new(emit.commit.clone())),
                        commit_ts: Some(emit.commit_ts),
                    }));
                }
                if let Some(change) = self.unpacked.pop_front() {
                    return Ok(Some(SourceEvent::Change(change)));
                }
                match self
                    .buffer
                    .pop()
                    .map_err(|e| spill_error(e, &emit.commit, &self.limit))?
                {
                    Some(Held::Change(change)) => return Ok(Some(SourceEvent::Change(change))),
                    Some(Held::Rows(rows)) => {
                        let unpacked = &mut self.unpacked;
                        events::decode_logged(&rows.table, &rows.logged(), &rows.at, |change| {
                            unpacked.push_back(change);
                            Ok(())
                        })?;
                        continue;
                    }
                    None => {
                        self.buffer.clear();
                        let done = self
                            .emitting
                            .take()
                            .expect("a transaction is being emitted");
                        return Ok(Some(SourceEvent::Commit {
                            resume: Position::MySql(Box::new(done.commit)),
                        }));
                    }
                }
            }
            if self.finished {
                return Ok(None);
            }
            if self.done() {
                self.finished = true;
                self.close_dump().await;
                return Ok(None);
            }
            let Some(dump) = self.dump.as_mut() else {
                return Err(Error::new(
                    Code::Internal,
                    "the binlog stream was read after it was closed",
                ));
            };
            let next = match crate::source::next_within(dump, self.read_timeout).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(Error::new(
                        Code::SourceConnect,
                        format!(
                            "the binlog dump sent nothing for {} s at {} (read bound {})",
                            self.read_timeout.as_secs(),
                            self.position,
                            self.bound
                        ),
                    )
                    .hint("the connection stalled (a network path dropping packets, or an overloaded server); the next run resumes from the checkpoint — source.timeouts.read_seconds sets the limit"));
                }
            };
            match next {
                Some(Ok(event)) => self.handle(event)?,
                Some(Err(e)) => return Err(classify_dump_error(e, &self.position, self.server_id)),
                None => {
                    self.dump = None;
                    if !self.done() {
                        return Err(Error::new(
                            Code::SourceQuery,
                            format!(
                                "the binlog dump ended at {} before the read bound {}{}",
                                self.position,
                                self.bound,
                                if self.group.open { " inside a transaction" } else { "" }
                            ),
                        )
                        .hint(format!(
                            "the server closed the stream early (a restart, or another reader registered with server_id {}); the next run resumes from the checkpoint",
                            self.server_id
                        )));
                    }
                }
            }
        }
    }
}

#[async_trait]
impl ChangeStream for MyStream {
    fn info(&self) -> &StreamInfo {
        &self.info
    }

    async fn next(&mut self) -> Result<Option<SourceEvent>> {
        self.next_event().await
    }

    async fn next_batch(&mut self, out: &mut Vec<SourceEvent>, mut room: BatchRoom) -> Result<()> {
        while let Some(event) = self.next_event().await? {
            if !room.push(out, event) {
                break;
            }
        }
        Ok(())
    }

    fn end_position(&self) -> Position {
        Position::MySql(Box::new(
            self.marked(self.position.clone(), self.last_event),
        ))
    }

    async fn ack(&mut self, upto: &Position) -> Result<()> {
        // The binlog is kept by time (binlog_expire_logs_seconds), not by readers: there
        // is nothing to release on the server.
        match upto {
            Position::MySql(_) => Ok(()),
            other => Err(Error::new(
                Code::Internal,
                format!("the MySQL stream was asked to ack a foreign position {other}"),
            )),
        }
    }
}
