//! The PostgreSQL change stream: pages of `pg_logical_slot_peek_binary_changes` bounded
//! by the run's read bound, decoded from pgoutput into source events.
//!
//! How a run reads: the bound is `pg_current_wal_flush_lsn()` at open. Each page is one
//! peek call, its `upto_lsn` and change limit cut by [`Paging`] (a WAL window from the
//! slot's position, widened for the slot's restart lag under the default sizes; the page
//! that reaches the bound, within two windows, has no change limit); the server ends a
//! call only at a transaction boundary. A peek always starts at the slot's confirmed
//! position, so a page that read a commit and ended short of the bound (full, or at its
//! WAL window) ends with [`SourceEvent::Barrier`]: the drain makes everything durable,
//! checkpoints and acks (advances the slot), and the next page then decodes only WAL it has
//! not seen. A window in which no transaction commits (one transaction longer than the
//! window, or only other tables' writes) is read again wider
//! ([`WIDEN`](super::paging::WIDEN) times), until it reaches the bound. The page that
//! reaches the bound ends the run's reading. Slot advances run on a second connection, so a
//! part that rolls over mid-page is acked while the page is still streaming (the peek
//! function has materialized its result and released the slot before the first row
//! arrives).
//!
//! A page is read as `COPY (SELECT data FROM pg_logical_slot_peek_binary_changes(…)) TO
//! STDOUT (FORMAT binary)`: the same rows, each one CopyData message handed to the decoder
//! as a slice of the message ([`FieldStream`]), without a result row's bookkeeping. COPY
//! takes no parameters, so the slot, the LSN and the publication are literals
//! ([`quote_literal`], valid under either `standard_conforming_strings`).
//!
//! Why the flush LSN and not the insert/write LSN: the server decodes only flushed WAL,
//! and a peek reads every record that starts before the bound (a commit record straddling
//! the bound is read whole). Acking the bound after reaching it is therefore safe: no
//! commit that starts before it can still be undecoded.
//!
//! A TRUNCATE is an event, not a stop: one [`Op::Truncate`] change per captured table it
//! names, at its place in the transaction.
//!
//! Columns captured in their text form ([`Decode::Text`]) arrive as binary cells for
//! every type with a send function; the control connection has the server print them
//! ([`Renderer`]) before the change is handed on, so the stream holds the same text the
//! baseline's `col::text` reads.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio_postgres::{Client, CopyOutStream};

use super::catalog::{CapturedTable, quote_literal};
use super::connect::query_error;
use super::copy_binary::FieldStream;
use super::paging::{PagePlan, Paging};
use super::pgoutput::{self, Cell, OldTuple, PgMessage, Relation};
use super::render::Renderer;
use super::slot;
use super::types::{Decode, column_type, decode_cell};
use super::unchanged;
use crate::change::{Column, Op, RowChange, TableSchema, UnfitValue, Value};
use crate::error::{Code, Error, Result};
use crate::position::{PgLsn, Position};
use crate::source::{BatchRoom, ChangeStream, SourceEvent, StreamInfo, next_within};

/// A decoded image: the cells, and the indexes of the cells the source did not log.
type Image = (Vec<Value>, Vec<usize>);

/// A relation as announced in the stream, with the decoders for its columns.
struct KnownRelation {
    schema: Arc<TableSchema>,
    type_oids: Vec<u32>,
    decodes: Vec<Decode>,
}

/// The open PostgreSQL stream.
pub struct PgStream {
    pub(super) info: StreamInfo,
    pub(super) data: Client,
    pub(super) control: Client,
    pub(super) slot: String,
    pub(super) publication: String,
    /// How much each page reads.
    paging: Paging,
    pub(super) bound: PgLsn,
    pub(super) tables: Vec<CapturedTable>,
    /// The slot's confirmed position as far as this run knows.
    pub(super) slot_at: PgLsn,
    page: Option<Page>,
    /// Events decoded from one message and not yet handed out (a TRUNCATE of several
    /// tables).
    pending: std::collections::VecDeque<SourceEvent>,
    finished: bool,
    relations: HashMap<u32, KnownRelation, foldhash::fast::RandomState>,
    /// Relations the stream announced that the job does not capture, by oid.
    foreign: HashMap<u32, String, foldhash::fast::RandomState>,
    /// Oids of the captured tables and of their partitions, as of the open: a foreign
    /// relation among them (a captured table renamed, a partition named by itself) fails
    /// the run; any other foreign relation is a table not in `source.tables` (one removed
    /// from the job, or another table of a shared publication) and its changes are
    /// skipped.
    protected: Option<std::collections::HashSet<u32>>,
    /// Foreign tables whose skipping was logged.
    skipped_logged: std::collections::HashSet<String>,
    current_commit: Option<PgLsn>,
    last_end: Option<PgLsn>,
    /// The longest a page may pause between two rows once it streams.
    read_timeout: std::time::Duration,
    /// The longest wait for a page's first row (`source.timeouts.page_seconds`).
    page_timeout: std::time::Duration,
    renderer: Renderer,
}

struct Page {
    /// The page's changes as a binary COPY of `data`: one chunk per change.
    chunks: Pin<Box<CopyOutStream>>,
    parser: FieldStream,
    /// Changes received and not yet translated.
    ready: VecDeque<Bytes>,
    seen: u64,
    /// The page's `upto_lsn`: short of the bound, or the bound (the last page, which has no
    /// change limit).
    upto: PgLsn,
    /// The slot's restart lag when the page was asked for (bytes; 0 when not asked).
    restart_lag: u64,
    /// The last commit's end when the page was opened: a page whose end differs read a
    /// commit.
    ended_before: Option<PgLsn>,
}

impl PgStream {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        info: StreamInfo,
        data: Client,
        control: Client,
        slot: String,
        publication: String,
        paging: Paging,
        bound: PgLsn,
        tables: Vec<CapturedTable>,
        slot_at: PgLsn,
    ) -> Self {
        PgStream {
            info,
            data,
            control,
            slot,
            publication,
            paging,
            bound,
            tables,
            slot_at,
            page: None,
            pending: std::collections::VecDeque::new(),
            finished: false,
            relations: HashMap::default(),
            foreign: HashMap::default(),
            protected: None,
            skipped_logged: Default::default(),
            current_commit: None,
            last_end: None,
            read_timeout: crate::config::TimeoutsConfig::default().read(),
            page_timeout: crate::config::TimeoutsConfig::default().page(),
            renderer: Renderer::default(),
        }
    }

    /// The same stream giving up when a streaming page pauses longer than `read`
    /// between rows (`source.timeouts.read_seconds`), or a page's first row takes longer
    /// than `page` (`source.timeouts.page_seconds`: the server decodes the whole page
    /// first, which takes as long as the page's transactions are large).
    pub(super) fn with_timeouts(
        mut self,
        read: std::time::Duration,
        page: std::time::Duration,
    ) -> Self {
        self.read_timeout = read;
        self.page_timeout = page;
        self
    }

    /// The oids of the captured tables and their partitions (see `protected`); without
    /// them every foreign relation is protected, so any change of one fails the run.
    pub(super) fn with_protected(mut self, oids: std::collections::HashSet<u32>) -> Self {
        self.protected = Some(oids);
        self
    }

    /// True for a relation the job does not capture and whose changes it may skip.
    fn skippable(&self, oid: u32) -> bool {
        self.protected.as_ref().is_some_and(|p| !p.contains(&oid))
    }

    /// True for a change of a table the job does not capture and may skip.
    fn skips(&self, oid: u32) -> bool {
        self.foreign.contains_key(&oid) && self.skippable(oid)
    }

    /// Bytes of WAL between the slot's restart point and its confirmed position: what the
    /// server decodes again before the next page's first change. It only sizes the page, so
    /// a server that refuses the question sizes the page as without a lag; one that does
    /// not answer within `read_seconds` has stalled, as a page would.
    async fn restart_lag(&self) -> Result<u64> {
        let slot_at = self.slot_at.to_string();
        let asked = tokio::time::timeout(
            self.read_timeout,
            self.control.query_opt(
                "SELECT ($2::text::pg_lsn - restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.slot, &slot_at],
            ),
        )
        .await
        .map_err(|_| {
            self.stalled(
                self.read_timeout,
                "read_seconds",
                "when asked for the slot's restart point",
            )
        })?;
        Ok(match asked {
            Ok(row) => row
                .and_then(|row| row.get::<_, Option<i64>>(0))
                .map_or(0, |lag| lag.max(0) as u64),
            Err(e) => {
                tracing::debug!(slot = %self.slot, error = %e, "the slot's restart point could not be read; the page is sized without it");
                0
            }
        })
    }

    async fn open_page(&mut self) -> Result<()> {
        if let Some(end) = self.last_end
            && self.slot_at < end
        {
            return Err(Error::new(
                Code::Internal,
                format!("a new page was requested before the slot was advanced to {end}"),
            ));
        }
        let restart_lag = if self.paging.follows_restart_lag() {
            self.restart_lag().await?
        } else {
            0
        };
        let PagePlan { upto, limit } = self.paging.plan(self.slot_at, self.bound, restart_lag);
        let limit = limit.map_or_else(
            || "NULL".to_owned(),
            |n| i32::try_from(n).unwrap_or(i32::MAX).to_string(),
        );
        // COPY takes no parameters: the values are literals. The COPY form hands each
        // change over as one chunk, with none of a result row's per-row bookkeeping.
        let statement = format!(
            "COPY (SELECT data FROM pg_logical_slot_peek_binary_changes({}, {}::pg_lsn, {limit}, \
             'proto_version', '1', 'publication_names', {}, 'binary', 'true')) TO STDOUT (FORMAT binary)",
            quote_literal(&self.slot),
            quote_literal(&upto.to_string()),
            quote_literal(&super::catalog::quote_ident(&self.publication)),
        );
        let chunks =
            tokio::time::timeout(self.page_timeout, self.data.copy_out(statement.as_str()))
                .await
                .map_err(|_| {
                    self.stalled(self.page_timeout, "page_seconds", "when asked for a page")
                })?
                .map_err(|e| query_error(&format!("reading replication slot {}", self.slot), e))?;
        self.page = Some(Page {
            chunks: Box::pin(chunks),
            parser: FieldStream::new(),
            ready: VecDeque::new(),
            seen: 0,
            upto,
            restart_lag,
            ended_before: self.last_end,
        });
        self.relations.clear();
        self.foreign.clear();
        Ok(())
    }

    /// The next event (the body of [`ChangeStream::next`], unboxed so a batch pays for
    /// one boxed future, not one per event).
    async fn next_event(&mut self) -> Result<Option<SourceEvent>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            if self.finished {
                return Ok(None);
            }
            if self.page.is_none() {
                self.open_page().await?;
            }
            let page = self.page.as_mut().expect("page was just opened");
            if let Some(data) = page.ready.pop_front() {
                page.seen += 1;
                let message = pgoutput::decode(&data)?;
                // A change with a value its column's typed form cannot hold is not
                // delivered: the drain moves the column to its text form instead.
                let translated = self
                    .translate(message)
                    .or_else(|e| match UnfitValue::of(&e) {
                        Some(unfit) => Ok(Some(SourceEvent::Unfit(unfit.clone()))),
                        None => Err(e),
                    })?;
                if let Some(mut event) = translated {
                    // Boxed: the rendering future is large and rarely needed, and every
                    // event would otherwise move it around inside this one.
                    if let SourceEvent::Change(change) = &mut event
                        && self.has_text_cells(change)
                    {
                        Box::pin(self.render_text_cells(change)).await?;
                    }
                    return Ok(Some(event));
                }
                continue;
            }
            let (limit, setting, place) = if page.seen == 0 {
                (
                    self.page_timeout,
                    "page_seconds",
                    "before the first row of a page",
                )
            } else {
                (self.read_timeout, "read_seconds", "in the middle of a page")
            };
            let next = match next_within(&mut page.chunks, limit).await {
                Ok(next) => next,
                Err(_) => return Err(self.stalled(limit, setting, place)),
            };
            match next {
                Some(chunk) => {
                    let chunk = chunk.map_err(|e| {
                        query_error(&format!("reading replication slot {}", self.slot), e)
                    })?;
                    page.parser.feed(chunk, &mut page.ready)?;
                }
                None => {
                    page.parser.finish()?;
                    let committed = self.last_end != page.ended_before;
                    let short_of_bound = page.upto < self.bound;
                    tracing::info!(slot = %self.slot, upto = %page.upto, restart_lag = page.restart_lag, messages = page.seen, committed, "slot page read");
                    self.page = None;
                    // A page short of the bound (full, or at its window) that read a commit
                    // goes on from the slot once that commit is acked.
                    if short_of_bound && committed {
                        self.paging.committed();
                        return Ok(Some(SourceEvent::Barrier));
                    }
                    if short_of_bound {
                        // Nothing committed in the window: the same start, wider.
                        self.paging.widen();
                        continue;
                    }
                    self.finished = true;
                }
            }
        }
    }

    /// The slot sent nothing for `limit` (`source.timeouts.<setting>`) at `place`.
    fn stalled(&self, limit: std::time::Duration, setting: &str, place: &str) -> Error {
        Error::new(
            Code::SourceConnect,
            format!(
                "replication slot {} sent nothing for {} s {place}",
                self.slot,
                limit.as_secs()
            ),
        )
        .hint(format!("the connection stalled (a network path dropping packets, or an overloaded server); the next run resumes from the checkpoint — source.timeouts.{setting} sets the limit"))
    }

    /// Turns one pgoutput message into at most one source event.
    fn translate(&mut self, message: PgMessage<'_>) -> Result<Option<SourceEvent>> {
        let change = |table,
                      op,
                      before: Option<(Vec<Value>, Vec<usize>)>,
                      after: Option<(Vec<Value>, Vec<usize>)>| {
            let (before, before_unlogged) = before.map_or((None, vec![]), |(v, u)| (Some(v), u));
            let (after, after_unlogged) = after.map_or((None, vec![]), |(v, u)| (Some(v), u));
            Some(SourceEvent::Change(RowChange {
                table,
                op,
                before,
                after,
                before_unlogged,
                after_unlogged,
            }))
        };
        Ok(match message {
            PgMessage::Begin(begin) => {
                self.current_commit = Some(begin.final_lsn);
                Some(SourceEvent::Begin {
                    commit: Position::Postgres(begin.final_lsn),
                    commit_ts: Some(begin.commit_ts),
                })
            }
            PgMessage::Commit(commit) => {
                self.current_commit = None;
                self.last_end = Some(commit.end_lsn);
                Some(SourceEvent::Commit {
                    resume: Position::Postgres(commit.end_lsn),
                })
            }
            PgMessage::Relation(rel) => {
                self.learn_relation(rel)?;
                None
            }
            PgMessage::Insert(insert) if self.skips(insert.rel_oid) => None,
            PgMessage::Update(update) if self.skips(update.rel_oid) => None,
            PgMessage::Delete(delete) if self.skips(delete.rel_oid) => None,
            PgMessage::Insert(insert) => {
                let (table, after) = self.image(insert.rel_oid, &insert.new, false)?;
                change(table, Op::Insert, None, Some(after))
            }
            PgMessage::Update(update) => {
                let (table, mut after) = self.image(update.rel_oid, &update.new, false)?;
                let before = match &update.old {
                    Some(old) => Some(self.old_image(update.rel_oid, old)?),
                    None => None,
                };
                // A full old image holds every unchanged TOASTed value the new one lacks.
                if let (Some(OldTuple::Full(_)), Some((old, old_unlogged))) = (&update.old, &before)
                {
                    let (new, new_unlogged) = &mut after;
                    unchanged::fill_from_old(old, old_unlogged, new, new_unlogged);
                }
                change(table, Op::Update, before, Some(after))
            }
            PgMessage::Delete(delete) => {
                let before = self.old_image(delete.rel_oid, &delete.old)?;
                let table = self.relation(delete.rel_oid)?.schema.clone();
                change(table, Op::Delete, Some(before), None)
            }
            PgMessage::Truncate(truncate) => {
                // One `truncate` row per table it names, in the message's order, at this
                // point of the transaction (pgoutput names only published tables).
                let mut tables = Vec::with_capacity(truncate.rel_oids.len());
                for oid in truncate.rel_oids.iter().filter(|o| !self.skips(**o)) {
                    tables.push(self.relation(*oid)?.schema.clone());
                }
                let mut events = tables
                    .into_iter()
                    .map(|table| change(table, Op::Truncate, None, None));
                let first = events.next().flatten();
                self.pending.extend(events.flatten());
                first
            }
            PgMessage::Origin(_) | PgMessage::Type(_) | PgMessage::Message(_) => None,
        })
    }

    fn relation(&self, oid: u32) -> Result<&KnownRelation> {
        if let Some(name) = self.foreign.get(&oid) {
            return Err(Error::new(
                Code::SourceProtocol,
                format!("the stream carries changes of {name}, which this job does not capture"),
            )
            .hint(
                "the publication includes tables not in source.tables; use a publication per job",
            ));
        }
        self.relations.get(&oid).ok_or_else(|| {
            Error::new(
                Code::SourceProtocol,
                format!("a change for relation {oid} arrived before its Relation message"),
            )
        })
    }

    fn old_image(&self, oid: u32, old: &OldTuple<'_>) -> Result<Image> {
        let key_only = matches!(old, OldTuple::Key(_));
        Ok(self.image(oid, old.cells(), key_only)?.1)
    }

    /// Registers (or re-registers after DDL) a relation announced by the stream. A
    /// relation the job does not capture is remembered as foreign: PostgreSQL 13–15
    /// announce a partition next to its root under `publish_via_partition_root` although
    /// its changes arrive as the root's; a change that does name it fails the run.
    fn learn_relation(&mut self, rel: Relation) -> Result<()> {
        // By oid first: a captured table renamed since (the backlog names it as it was)
        // is still that table. Then by name: a table gone from the catalog (no oid), or an
        // earlier table of the same name (dropped and created again).
        let captured = self
            .tables
            .iter()
            .find(|t| t.oid == Some(rel.oid))
            .or_else(|| {
                self.tables
                    .iter()
                    .find(|t| t.schema == rel.namespace && t.table == rel.name)
            });
        let Some(captured) = captured else {
            self.relations.remove(&rel.oid);
            let name = format!("{}.{}", rel.namespace, rel.name);
            if self.skippable(rel.oid) && self.skipped_logged.insert(name.clone()) {
                tracing::warn!(table = %name, "the stream carries changes of a table not in source.tables (removed from the job, or published for another reader); they are skipped");
            }
            self.foreign.insert(rel.oid, name);
            return Ok(());
        };
        self.foreign.remove(&rel.oid);
        let mut columns = Vec::with_capacity(rel.columns.len());
        let mut type_oids = Vec::with_capacity(rel.columns.len());
        let mut decodes = Vec::with_capacity(rel.columns.len());
        for col in &rel.columns {
            let at_open = captured
                .shape
                .columns
                .iter()
                .position(|c| c.name == col.name)
                .filter(|&i| captured.type_oids[i] == col.type_oid);
            // The open's name describes the column only while its type is the open's (a
            // retype since changes the modifier or the type itself).
            let type_name = match (
                at_open,
                super::types::builtin_type_name(col.type_oid, col.type_modifier),
            ) {
                (_, Some(name)) => name,
                (Some(_), None) => captured
                    .type_names
                    .get(&col.name)
                    .cloned()
                    .unwrap_or_else(|| format!("oid {}", col.type_oid)),
                (None, None) => format!("oid {}", col.type_oid),
            };
            // The open's resolution for a column of the same type; a built-in type's own
            // (its modifier may have changed); else, for a type the catalog did not see
            // at open, its text output — which needs no catalog knowledge.
            let (ty, decode, field_metadata) = match (
                at_open,
                column_type(col.type_oid, col.type_modifier, &type_name),
            ) {
                (None, _) if captured.text_columns.contains(&col.name) => {
                    let r = super::resolve::Resolved::unfit_text();
                    (r.ty, r.decode, r.field_metadata)
                }
                (Some(i), _) if captured.decodes[i] == Decode::Text => {
                    let c = &captured.shape.columns[i];
                    (c.ty.clone(), Decode::Text, c.field_metadata.clone())
                }
                (_, Ok(ty)) => {
                    let r = super::resolve::Resolved::binary(ty, col.type_oid, None);
                    (r.ty, r.decode, r.field_metadata)
                }
                (Some(i), Err(_)) => {
                    let c = &captured.shape.columns[i];
                    (
                        c.ty.clone(),
                        captured.decodes[i].clone(),
                        c.field_metadata.clone(),
                    )
                }
                (None, Err(_)) => {
                    let r = super::resolve::Resolved::text();
                    (r.ty, r.decode, r.field_metadata)
                }
            };
            let nullable = captured
                .shape
                .columns
                .iter()
                .find(|c| c.name == col.name)
                .is_none_or(|c| c.nullable);
            // A table gone from the catalog has no key of its own: the message marks it.
            let key = if captured.oid.is_none() && captured.key.is_empty() {
                col.key
            } else {
                captured.key.contains(&col.name)
            };
            columns.push(Column {
                key,
                name: col.name.clone(),
                ty,
                nullable,
                source_type: type_name,
                field_metadata,
            });
            type_oids.push(col.type_oid);
            decodes.push(decode);
        }
        let schema = TableSchema {
            name: captured.config_name.clone(),
            columns,
        };
        let schema = if schema == *captured.shape {
            captured.shape.clone()
        } else {
            Arc::new(schema)
        };
        self.relations.insert(
            rel.oid,
            KnownRelation {
                schema,
                type_oids,
                decodes,
            },
        );
        Ok(())
    }

    /// True when the change's relation has a column captured in its text form.
    fn has_text_cells(&self, change: &RowChange) -> bool {
        self.relations
            .values()
            .any(|r| Arc::ptr_eq(&r.schema, &change.table) && r.decodes.contains(&Decode::Text))
    }

    /// Replaces the binary cells of text-form columns (left as bytes by `image`) by their
    /// text output, rendered by the server.
    async fn render_text_cells(&mut self, change: &mut RowChange) -> Result<()> {
        let Some(known) = self
            .relations
            .values()
            .find(|r| Arc::ptr_eq(&r.schema, &change.table))
        else {
            return Ok(());
        };
        for values in [change.before.as_mut(), change.after.as_mut()]
            .into_iter()
            .flatten()
        {
            for (i, value) in values.iter_mut().enumerate() {
                if known.decodes[i] != Decode::Text {
                    continue;
                }
                if let Value::Bytes(raw) = value {
                    let what = format!("{}.{}", change.table.name, change.table.columns[i].name);
                    let text = self
                        .renderer
                        .render(&self.control, known.type_oids[i], raw, &what)
                        .await?;
                    *value = Value::Text(text);
                }
            }
        }
        Ok(())
    }

    /// Decodes a tuple into an image; returns the schema, the cells, and the columns that
    /// were not logged (unchanged TOAST, or non-key cells of a key-only old tuple).
    fn image(
        &self,
        oid: u32,
        cells: &[Cell<'_>],
        key_only: bool,
    ) -> Result<(Arc<TableSchema>, Image)> {
        let known = self.relation(oid)?;
        let schema = &known.schema;
        if cells.len() != schema.columns.len() {
            return Err(Error::new(
                Code::SourceProtocol,
                format!(
                    "{}: tuple has {} columns, relation has {}",
                    schema.name,
                    cells.len(),
                    schema.columns.len()
                ),
            ));
        }
        let mut values = Vec::with_capacity(cells.len());
        let mut unlogged = Vec::new();
        for (i, cell) in cells.iter().enumerate() {
            let column = &schema.columns[i];
            let decode = &known.decodes[i];
            let decoded = |raw: &[u8]| {
                decode_cell(&column.ty, decode, raw).map_err(|e| {
                    let at = format!("at commit {}", self.current_commit.unwrap_or_default());
                    e.into_error(&schema.name, column, &at)
                })
            };
            let value = match cell {
                Cell::Null if key_only && !column.key => {
                    unlogged.push(i);
                    Value::Null
                }
                Cell::Null => Value::Null,
                Cell::Unchanged => {
                    unlogged.push(i);
                    Value::Null
                }
                // A text-form column's binary cell is rendered by the server in `next`
                // (`render_text_cells`); a Utf8 column holds no bytes otherwise.
                Cell::Binary(raw) if decode == &Decode::Text => Value::Bytes(raw.to_vec()),
                // A text-form column's text cell is its text output as is.
                Cell::Text(raw) if decode == &Decode::Text => decoded(raw)?,
                Cell::Binary(raw) => decoded(raw)?,
                Cell::Text(_) => {
                    return Err(Error::new(
                        Code::SourceProtocol,
                        format!(
                            "{}.{}: the server sent a text value in binary mode",
                            schema.name, column.name
                        ),
                    ));
                }
            };
            values.push(value);
        }
        Ok((schema.clone(), (values, unlogged)))
    }
}

#[async_trait]
impl ChangeStream for PgStream {
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
        Position::Postgres(self.last_end.map_or(self.bound, |end| end.max(self.bound)))
    }

    async fn retained_bytes(&mut self) -> Option<u64> {
        let row = self
            .control
            .query_opt(
                &format!(
                    "SELECT (({}) - restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1",
                    slot::WAL_END
                ),
                &[&self.slot],
            )
            .await
            .ok()??;
        row.get::<_, Option<i64>>(0).map(|b| b.max(0) as u64)
    }

    async fn filled_without_changes(
        &mut self,
        table: &str,
        column: &str,
    ) -> Result<Option<String>> {
        let Some(captured) = self.tables.iter().find(|t| t.config_name == table) else {
            return Ok(None);
        };
        // `atthasmissing`: added with a non-volatile default, stored once in the catalog
        // (rows not rewritten since read it); `atthasdef`: a default (a volatile one
        // rewrote every row without logging them). Either way a row not changed since
        // has a value the stream never carried. A column no longer in the catalog
        // (renamed or dropped later in the backlog) is judged by what follows.
        let row = self
            .control
            .query_opt(
                "SELECT a.atthasmissing, a.atthasdef FROM pg_attribute a \
                   JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = $3 AND a.attnum > 0 AND NOT a.attisdropped",
                &[&captured.schema, &captured.table, &column],
            )
            .await
            .map_err(|e| query_error(&format!("reading the catalog entry of {table}.{column}"), e))?;
        Ok(row.and_then(|row| {
            let (missing, default): (bool, bool) = (row.get(0), row.get(1));
            (missing || default).then(|| {
                format!("column {column} was added with a default: rows not changed since hold it without a logged change")
            })
        }))
    }

    async fn ack(&mut self, upto: &Position) -> Result<()> {
        let Position::Postgres(upto) = *upto else {
            return Err(Error::new(
                Code::Internal,
                format!("the PostgreSQL stream was asked to ack a foreign position {upto}"),
            ));
        };
        if upto <= self.slot_at {
            return Ok(());
        }
        slot::advance(&self.control, &self.slot, upto).await?;
        self.slot_at = upto;
        Ok(())
    }
}
