//! The drain: one pass of the sluice gate under the job's lease, the same for the CLI and
//! the Lambda face (the job room, `crate::job`, takes the lease and runs it).
//!
//! load checkpoint → open the stream at it (the source fixes its read
//! bound; a new stream's start is checkpointed at once) → frame and route changes → at a transaction boundary where a part reached
//! rollover, a page ended, or the deadline is near: parts durable → run manifests list
//! them as pending ([`manifests`]) → checkpoint → ack →
//! at the end: final flush → checkpoint (at least the bound) → ack → per-table
//! `_manifests/<run_id>.json`, `_manifest.json` and `_SUCCESS` → run record.
//!
//! Guarantees: nothing is acked before it is durable and checkpointed (the order is
//! [`crate::commit::Committer`]'s); an early stop happens only at a transaction boundary
//! and is reported as `partial`. Progress (position, rows, rate, parts) is shown while it
//! runs when the process asked for it ([`progress`]).

pub mod history;
pub mod manifests;
pub mod progress;
pub mod shapes;
pub mod stop;
pub mod tables;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tables::Router;

use crate::backends::Backends;
use crate::commit::{Committer, Start};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::framer::Framer;
use crate::position::Position;
use crate::sink::{FinishedPart, PartSettings};
use crate::source::{self, ChangeStream, Resume, SourceEvent};
use crate::spill::memory_budget::MemoryBudget;
use crate::state::{Lease, RunRecord};
use crate::summary::{Rebaselined, RunStatus, RunSummary, TableCounts};
use manifests::RunManifests;

/// What one call asks of the source ([`ChangeStream::next_batch`]): one boxed future per
/// batch instead of one per event; the events wait in memory, in order, only until the
/// loop takes them — at most this many, and about this many bytes of cells plus one row.
/// Sixteen measured best (bench/results/profile.md, fifth pass): larger batches keep more
/// rows alive at once and lose malloc's per-thread cache of just-freed blocks.
const BATCH_EVENTS: usize = 16;
const BATCH_BYTES: usize = 1 << 20;

/// When the run must stop.
#[derive(Debug, Clone, Default)]
pub struct DrainOptions {
    /// Stop at the first transaction boundary after this instant (the deadline minus the
    /// configured safety margin).
    pub stop_at: Option<Instant>,
    /// Past this instant (the deadline minus a quarter of the margin) a run still inside
    /// a transaction stops there: its open parts are dropped unwritten and nothing past
    /// the last checkpoint is kept, so the lease is released and the run reports before
    /// the deadline instead of being killed.
    pub abort_at: Option<Instant>,
    /// With a deadline, completed transactions are flushed at least this often, so a
    /// stop inside a long transaction loses little work.
    pub flush_every: Option<Duration>,
    /// Stop at the first transaction boundary once this is asked (SIGTERM / SIGINT).
    pub stop: Option<stop::StopRequest>,
}

impl DrainOptions {
    /// Options for a run that must be over by `deadline`, keeping `margin` in reserve
    /// for the final flush, checkpoint and ack.
    pub fn with_deadline(deadline: Option<Instant>, margin: Duration) -> Self {
        let now = Instant::now();
        let before = |d: Instant, by: Duration| d.checked_sub(by).unwrap_or(d).max(now);
        let stop_at = deadline.map(|d| before(d, margin));
        DrainOptions {
            stop_at,
            abort_at: deadline.map(|d| before(d, margin / 4)),
            flush_every: stop_at.map(|s| (s - now) / 4),
            stop: None,
        }
    }

    /// The same options, also stopping when `stop` is asked.
    pub fn stopped_by(mut self, stop: stop::StopRequest) -> Self {
        self.stop = Some(stop);
        self
    }

    fn deadline_reached(&self) -> bool {
        self.stop_at.is_some_and(|t| Instant::now() >= t)
    }

    fn abort_reached(&self) -> bool {
        self.abort_at.is_some_and(|t| Instant::now() >= t)
    }

    fn flush_due(&self, last_flush: Instant) -> bool {
        self.flush_every
            .is_some_and(|every| last_flush.elapsed() >= every)
    }

    fn stop_asked(&self) -> bool {
        self.stop.as_ref().is_some_and(stop::StopRequest::asked)
    }
}

/// Drains the stream under `lease` (taken by the job room for run `run_id`, which
/// started at `started`): from the stored checkpoint to the bound fixed at open.
pub async fn run(
    config: &Config,
    backends: &Backends,
    lease: Lease,
    run_id: String,
    started: Instant,
    options: DrainOptions,
) -> Result<RunSummary> {
    crate::spill::sweep::sweep(&config.spill_dir());
    let config =
        &*crate::state::text_form::with_text_columns(config, backends.state.as_ref()).await?;
    let job = &config.job;
    let stored = backends.state.load_checkpoint(job).await?;
    let start = Start::of(stored.as_ref())?;
    let resume = match (&stored, start.position.clone()) {
        (Some(cp), Some(position)) => Some(Resume {
            position,
            source_identity: cp.source_identity.clone(),
        }),
        _ => None,
    };
    if resume.is_none() {
        crate::claims::guard_first_start(config, backends.state.as_ref()).await?;
    }
    let mut stream = source::open(config, resume.as_ref()).await?;
    let info = stream.info().clone();
    let mut committer = Committer::new(
        backends,
        lease,
        config.lease.ttl(),
        run_id,
        info.source_identity.clone(),
        start.clone(),
    );
    let committer = &mut committer;
    if start.position.is_none() {
        // A new stream's start is recorded before anything is read: a first run that
        // fails later resumes here instead of re-anchoring at a later "now" (MySQL and
        // SQL Server keep no server-side position for us), so nothing in between is lost.
        committer.start_checkpoint(info.start.clone()).await?;
    }
    tracing::info!(from = %info.start, bound = %info.bound, "stream open");

    let tables = config.source.tables.len();
    // A MySQL / MariaDB stream holds a transaction in memory while the writers batch: the
    // writers get what is left of the budget.
    let (budget, _) = MemoryBudget::for_run(
        config,
        matches!(info.start, crate::position::Position::MySql(_)),
    );
    let row_group_bytes = PartSettings::new(config.spill_dir()).row_group_bytes;
    let settings = PartSettings {
        rollover_rows: config.output.rollover_rows,
        rollover_bytes: config.output.rollover_bytes,
        row_group_bytes: budget.table_cap(tables, row_group_bytes),
        ..PartSettings::of(config)
    };
    tracing::info!(
        budget_bytes = budget.bytes,
        table_cap_bytes = settings.row_group_bytes,
        "memory budget: {}",
        budget.describe(tables, row_group_bytes)
    );
    let mut router = Router::new(
        &config.source.tables,
        &info.tables,
        committer.run_id(),
        &settings,
        config.output.layout,
    )?;
    let state = backends.state.as_ref();
    for record in
        crate::state::rebaseline::wanted(state, &config.job, &config.source.tables).await?
    {
        tracing::info!(table = %record.table, reason = ?record.reason,
            "the table's re-baseline is wanted: its changes are not written until it is anchored");
        router.skipped.insert(record.table);
    }
    let mut rebaselined = BTreeMap::new();
    let mut shapes = shapes::Shapes::at_open(&info.tables)
        .load_stored(backends.destination.as_ref(), &config.source.tables)
        .await?;
    if let Some(checkpoint) = stored.as_ref().filter(|c| c.run_id != committer.run_id()) {
        manifests::settle_interrupted(
            backends.destination.as_ref(),
            router.tables.keys(),
            checkpoint,
        )
        .await?;
    }
    router.load_histories(backends.destination.as_ref()).await?;
    let run_id = committer.run_id().to_owned();
    let manifests = RunManifests {
        config,
        destination: backends.destination.as_ref(),
        run_id: &run_id,
        from: info.start.to_string(),
    };
    let manifests = &manifests;
    let iceberg = crate::iceberg::ChangeLog::of(config, backends.destination.as_ref())?;
    let iceberg = iceberg.as_ref();
    let mut framer = Framer::new();
    let mut framed = Vec::new();
    let mut last_commit: Option<Position> = None;
    let mut newest_commit_ts: Option<i64> = None;
    let mut status = RunStatus::Drained;
    let mut last_flush = Instant::now();
    let mut stopped_inside_transaction = false;
    let mut open_commit: Option<Position> = None;
    let mut tracker = progress::Tracker::start();
    let parts_of = |router: &Router| router.tables.values().map(|t| t.parts.len() as u64).sum();

    let mut batch = Vec::with_capacity(BATCH_EVENTS);
    'read: loop {
        let room = source::BatchRoom::new(BATCH_EVENTS, BATCH_BYTES);
        stream.next_batch(&mut batch, room).await?;
        if batch.is_empty() {
            if framer.in_transaction() {
                // A source hands out whole transactions; an end inside one would lose its
                // rest behind the end position's checkpoint.
                return Err(Error::new(
                    Code::Internal,
                    format!(
                        "the source's change stream ended inside the transaction committed at {}",
                        open_commit.as_ref().map_or("-".to_owned(), |p| p.to_string())
                    ),
                )
                .hint("nothing of the transaction was checkpointed and the next run reads it again; this is a sluice bug — report it with the run's log"));
            }
            break;
        }
        for event in batch.drain(..) {
            match event {
                SourceEvent::Begin { commit, commit_ts } => {
                    framer.begin(&commit, commit_ts)?;
                    open_commit = Some(commit);
                    newest_commit_ts = newest_commit_ts.max(commit_ts);
                }
                SourceEvent::Change(change) => {
                    if options.abort_reached() {
                        router.abandon_open();
                        stopped_inside_transaction = true;
                        status = RunStatus::Partial;
                        break 'read;
                    }
                    tracker.change(|| parts_of(&router));
                    framer.change(change, &mut framed)?;
                    for event in framed.drain(..) {
                        if router.skipped.contains(&event.table.name) {
                            continue;
                        }
                        if event.op == crate::change::Op::Rebaseline {
                            let asked = Asked {
                                config,
                                state,
                                table: &event.table.name,
                                at: open_commit.clone(),
                            };
                            let reason = "the source changed the table's rows without logging them as row changes (a partition TRUNCATE, DROP, EXCHANGE or REORGANIZE)";
                            rebaseline(asked, reason, &mut router, &mut rebaselined).await?;
                            continue;
                        }
                        if let Some(reason) = shapes.check(&event.table, stream.as_mut()).await?
                            && !matches!(open_commit, Some(Position::SqlServer(_)))
                        {
                            let asked = Asked {
                                config,
                                state,
                                table: &event.table.name,
                                at: open_commit.clone(),
                            };
                            rebaseline(asked, &reason, &mut router, &mut rebaselined).await?;
                            continue;
                        }
                        match router.append(&event) {
                            Ok(Some(part)) => publish_part(committer, &mut router, part).await?,
                            Ok(None) => {}
                            // SQL Server has no position for a per-table re-baseline
                            // (crate::baseline::epoch): the run stops there as before.
                            Err(e)
                                if e.code() == Code::SourceSchemaChange
                                    && !matches!(open_commit, Some(Position::SqlServer(_))) =>
                            {
                                let asked = Asked {
                                    config,
                                    state,
                                    table: &event.table.name,
                                    at: open_commit.clone(),
                                };
                                rebaseline(asked, e.message(), &mut router, &mut rebaselined)
                                    .await?;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }

                SourceEvent::Unfit(unfit) => {
                    let asked = Asked {
                        config,
                        state,
                        table: &unfit.table,
                        at: open_commit.clone(),
                    };
                    move_to_text_form(asked, &unfit, &mut router, &mut rebaselined).await?;
                }
                SourceEvent::Commit { resume } => {
                    let position = framer.commit(resume)?;
                    last_commit = Some(position.clone());
                    let deadline = options.deadline_reached();
                    let asked = options.stop_asked();
                    if deadline
                        || asked
                        || router.any_should_roll()
                        || options.flush_due(last_flush)
                    {
                        flush(
                            committer,
                            manifests,
                            iceberg,
                            &mut router,
                            &mut shapes,
                            position.clone(),
                            stream.as_mut(),
                        )
                        .await?;
                        last_flush = Instant::now();
                    }
                    if deadline || asked {
                        status = RunStatus::Partial;
                        let why = if asked {
                            "stop requested"
                        } else {
                            "deadline reached"
                        };
                        tracing::info!(at = %position, "{why}; stopping at a transaction boundary");
                        break 'read;
                    }
                    tracker.commit(position, || parts_of(&router));
                    committer.keep_lease().await?;
                }
                SourceEvent::Barrier => {
                    if let Some(position) = last_commit.clone() {
                        flush(
                            committer,
                            manifests,
                            iceberg,
                            &mut router,
                            &mut shapes,
                            position,
                            stream.as_mut(),
                        )
                        .await?;
                    }
                    if options.stop_asked() {
                        status = RunStatus::Partial;
                        tracing::info!("stop requested; stopping at a page boundary");
                        break 'read;
                    }
                    committer.keep_lease().await?;
                }
            }
        }
    }

    drop(tracker);
    // A table no change of which this run saw may still have changed shape in the
    // catalog (PostgreSQL logs no DDL): a column added with a default holds values no part
    // has, so it is re-baselined now rather than at its next change.
    if status == RunStatus::Drained
        && !stopped_inside_transaction
        && !matches!(info.start, Position::SqlServer(_))
    {
        for (table, reason) in shapes
            .check_unchanged(&info.tables, stream.as_mut())
            .await?
        {
            let asked = Asked {
                config,
                state,
                table: &table,
                at: Some(last_commit.clone().unwrap_or_else(|| stream.end_position())),
            };
            rebaseline(asked, &reason, &mut router, &mut rebaselined).await?;
        }
    }
    if stopped_inside_transaction {
        let at = committer.checkpoint();
        tracing::warn!(checkpoint = ?at.as_ref().map(|p| p.to_string()), "deadline reached inside a transaction; stopped there, keeping nothing past the checkpoint");
        if at == start.position {
            return Err(transaction_too_long(at));
        }
    }
    let end = match status {
        _ if stopped_inside_transaction => None,
        RunStatus::Drained => Some(stream.end_position()),
        _ => last_commit.clone(),
    };
    if let Some(end) = end {
        let end = match last_commit {
            Some(commit) if commit > end => commit,
            _ => end,
        };
        flush(
            committer,
            manifests,
            iceberg,
            &mut router,
            &mut shapes,
            end,
            stream.as_mut(),
        )
        .await?;
    }
    let lag_seconds = match (newest_commit_ts, status) {
        (Some(ts), _) => Some(((chrono::Utc::now().timestamp_micros() - ts).max(0)) as f64 / 1e6),
        (None, RunStatus::Drained) => Some(0.0),
        (None, _) => None,
    };
    let to = committer.checkpoint().map(|p| p.to_string());
    let source_retained_bytes = stream.retained_bytes().await;
    let summary = RunSummary {
        rebaselined,
        status,
        job: job.clone(),
        run_id: committer.run_id().to_owned(),
        rows: router.tables.values().map(|t| t.rows).sum(),
        parts: router.tables.values().map(|t| t.parts.len() as u64).sum(),
        bytes: router.tables.values().map(|t| t.bytes).sum(),
        from: Some(info.start.to_string()),
        to: to.clone(),
        duration_ms: started.elapsed().as_millis() as u64,
        lag_seconds,
        source_retained_bytes,
        tables: router
            .tables
            .iter()
            .map(|(name, t)| {
                let counts = TableCounts {
                    rows: t.rows,
                    parts: t.parts.len() as u64,
                };
                (name.clone(), counts)
            })
            .collect(),
        lease_holder: None,
        lease_expires_at_ms: None,
        catalog: BTreeMap::new(),
    };
    manifests.at_end(&router, &summary).await?;
    // After everything is committed; a catalog failure is a warning (crate::catalog).
    let mut summary = summary;
    summary.catalog = crate::catalog::register(
        config,
        backends.destination.as_ref(),
        router.captured(),
        options.abort_at,
    )
    .await;
    backends
        .state
        .put_run(job, &RunRecord::of(&summary))
        .await?;
    Ok(summary)
}

/// Which table asked for a re-baseline, and where.
struct Asked<'a> {
    config: &'a Config,
    state: &'a dyn crate::state::StateStore,
    table: &'a str,
    /// The commit position of the transaction the change is in.
    at: Option<Position>,
}

/// Stops writing `asked.table`'s changes and records that it needs a re-baseline — before
/// anything after this change is checkpointed — then goes on with the other tables. The
/// job room re-baselines it after the run, anchored at the run's checkpoint, which is
/// after every change of the table not written here.
async fn rebaseline(
    asked: Asked<'_>,
    reason: &str,
    router: &mut Router,
    rebaselined: &mut BTreeMap<String, Rebaselined>,
) -> Result<()> {
    if router.skipped.contains(asked.table) {
        return Ok(());
    }
    ask(asked, reason, None, router, rebaselined).await
}

/// Records the re-baseline [`rebaseline`] asks for (moving `text_column` to its text form
/// with it) and stops writing the table's changes.
async fn ask(
    asked: Asked<'_>,
    reason: &str,
    text_column: Option<&str>,
    router: &mut Router,
    rebaselined: &mut BTreeMap<String, Rebaselined>,
) -> Result<()> {
    let Asked {
        config,
        state,
        table,
        at,
    } = asked;
    let at = at.map(|p| p.to_string()).unwrap_or_default();
    tracing::warn!(code = Code::SourceTableRebaselined.as_str(), table = %table, at = %at, reason = %reason,
        "a change of the table cannot be carried in place: the table alone is re-baselined after this run; the other tables go on");
    crate::state::rebaseline::request(
        state,
        &config.job,
        &config.source.tables,
        crate::state::rebaseline::Ask {
            table,
            at: &at,
            reason,
            asker: crate::state::rebaseline::Asker::Drain,
            text_column,
        },
    )
    .await?;
    router.skipped.insert(table.to_owned());
    rebaselined.insert(
        table.to_owned(),
        Rebaselined {
            reason: reason.to_owned(),
            at,
            baseline: "pending".to_owned(),
        },
    );
    Ok(())
}

/// A value of `unfit.column` does not fit the column's typed form: the column moves to
/// its text form and the table is re-baselined in it ([`rebaseline`]), in one state
/// write. A table already re-baselined by this run still records the column, so its new
/// baseline reads it as text.
async fn move_to_text_form(
    asked: Asked<'_>,
    unfit: &crate::change::UnfitValue,
    router: &mut Router,
    rebaselined: &mut BTreeMap<String, Rebaselined>,
) -> Result<()> {
    let moved = (unfit.table.clone(), unfit.column.clone());
    if router.moved_to_text.contains(&moved) {
        return Ok(());
    }
    let reason = format!("{unfit}; the column moves to its text form");
    router.skipped.remove(asked.table);
    router.moved_to_text.insert(moved);
    ask(asked, &reason, Some(&unfit.column), router, rebaselined).await
}

/// Closes every open part, makes them durable, lists them as pending in the run
/// manifests, stores the column names seen ([`shapes::Shapes::save`]), commits each
/// table's pending parts to its Iceberg table (with `table_format: iceberg`), then
/// checkpoints and acks `position`.
async fn flush(
    committer: &mut Committer<'_>,
    manifests: &RunManifests<'_>,
    iceberg: Option<&crate::iceberg::ChangeLog<'_>>,
    router: &mut Router,
    shapes: &mut shapes::Shapes,
    position: Position,
    stream: &mut dyn ChangeStream,
) -> Result<()> {
    for part in router.finish_all()? {
        publish_part(committer, router, part).await?;
    }
    shapes.save(manifests.destination, &router.skipped).await?;
    manifests
        .before_checkpoint(router, committer.checkpoint(), position.clone())
        .await?;
    let pending = router.tables.values().any(|t| t.committed < t.parts.len());
    // A table re-baselined by this run writes no parts, yet a crashed run may have
    // committed its changes: its Iceberg table is cleared of them too, once.
    let unswept =
        |log: &crate::iceberg::ChangeLog<'_>| router.skipped.iter().any(|t| !log.committed_to(t));
    if let Some(log) = iceberg.filter(|log| pending || unswept(log)) {
        // The commit drops snapshots past the checkpoint this run knows: only the lease
        // holder knows it is the stored one.
        committer.confirm_lease().await?;
        let stored = committer.checkpoint();
        let stored = crate::iceberg::Stored {
            position: stored.as_ref(),
            identity: committer.checkpoint_identity(),
        };
        let ids = (committer.run_id(), committer.source_identity());
        for (table, output) in &router.tables {
            let pending = output.committed..;
            let (parts, schemas) = (
                &output.parts[pending.clone()],
                &output.part_schemas[pending],
            );
            log.changes(table, parts, schemas, ids, stored, &position)
                .await?;
        }
        for table in &router.skipped {
            log.drop_uncheckpointed(table, ids, stored, &position)
                .await?;
        }
    }
    committer.checkpoint_and_ack(position, stream).await?;
    router.mark_committed();
    Ok(())
}

/// Makes one finished part durable through the committer and records it in its table's
/// manifest entries.
async fn publish_part(
    committer: &Committer<'_>,
    router: &mut Router,
    part: FinishedPart,
) -> Result<()> {
    tracing::info!(key = %part.key, rows = part.rows, bytes = part.bytes, "part written");
    let schema = part.schema.clone();
    let entry = part.manifest_entry();
    committer.make_durable(part).await?;
    router.record_durable(schema, entry);
    Ok(())
}

/// A run stopped inside a transaction without moving the checkpoint: the next run under
/// the same deadline would stop there again.
fn transaction_too_long(checkpoint: Option<Position>) -> crate::error::Error {
    let at = checkpoint.map_or_else(|| "the stream's start".to_owned(), |p| p.to_string());
    crate::error::Error::new(
        crate::error::Code::SourceTransactionTooLong,
        format!("the transaction after {at} could not be drained before the run's deadline; the run stopped inside it and kept nothing past {at}"),
    )
    .hint("give one run more time: raise the Lambda function's timeout (up to 900 s) or the CLI's --max-duration, or drain this backlog once with the CLI without --max-duration; the schedule then continues from there")
}
