//! The drain: one pass of the sluice gate, the same for the CLI and the Lambda face.
//!
//! acquire lease → load checkpoint → open the stream at it (the source fixes its read
//! bound) → frame and route changes → at a transaction boundary where a part reached
//! rollover, a page ended, or the deadline is near: parts durable → checkpoint → ack →
//! at the end: final flush → checkpoint (at least the bound) → ack → per-table
//! `_manifests/<run_id>.json`, `manifest.json` and `_SUCCESS` → run record → release.
//!
//! Guarantees: nothing is acked before it is durable and checkpointed (see
//! [`commit::Committer`]); an early stop happens only at a transaction boundary and is
//! reported as `partial`; a lease held by someone else ends the run as `skipped`.

pub mod commit;
pub mod faults;
pub mod summary;
pub mod tables;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use commit::Committer;
use summary::{RunStatus, RunSummary, TableCounts};
use tables::Router;

use crate::config::{Config, Initial};
use crate::destination::{self, Destination};
use crate::error::Result;
use crate::framer::Framer;
use crate::position::Position;
use crate::sink::{FinishedPart, Manifest, ManifestRun, ManifestStatus, PartSettings};
use crate::source::{self, ChangeStream, Resume, SourceEvent};
use crate::state::{self, Lease, LeaseOutcome, RunRecord, StateStore};

/// How long run records are kept (DynamoDB TTL).
const RUN_RECORD_TTL_S: i64 = 14 * 24 * 3600;

/// When the run must stop.
#[derive(Debug, Clone, Copy, Default)]
pub struct DrainOptions {
    /// Stop at the first transaction boundary after this instant (the deadline minus the
    /// configured safety margin).
    pub stop_at: Option<Instant>,
}

impl DrainOptions {
    /// Options for a run that must be over by `deadline`, keeping `margin` in reserve
    /// for the final flush, checkpoint and ack.
    pub fn with_deadline(deadline: Option<Instant>, margin: Duration) -> Self {
        DrainOptions {
            stop_at: deadline.map(|d| d.checked_sub(margin).unwrap_or(d).max(Instant::now())),
        }
    }

    fn deadline_reached(&self) -> bool {
        self.stop_at.is_some_and(|t| Instant::now() >= t)
    }
}

/// The state store and destination of a job, built once and reused across runs (the
/// Lambda face keeps them for the container's lifetime).
pub struct Backends {
    pub state: Box<dyn StateStore>,
    pub destination: Box<dyn Destination>,
}

impl Backends {
    /// Opens the backends the config names.
    pub async fn open(config: &Config) -> Result<Backends> {
        Ok(Backends {
            state: state::open(config).await?,
            destination: destination::open(config).await?,
        })
    }
}

/// Runs one drain of the job the config describes, opening its backends.
pub async fn drain(config: &Config, options: DrainOptions) -> Result<RunSummary> {
    let backends = Backends::open(config).await?;
    drain_with(config, &backends, options).await
}

/// Runs one drain with already-open backends.
pub async fn drain_with(
    config: &Config,
    backends: &Backends,
    options: DrainOptions,
) -> Result<RunSummary> {
    let started = Instant::now();
    let run_id = crate::run_id::new_run_id();
    if faults::armed() {
        tracing::warn!("fault injection is armed (SLUICE_FAULT); this is for tests only");
    }
    crate::claims::claim_all(config, backends.state.as_ref()).await?;
    if config.initial == Initial::Snapshot && !crate::baseline::is_done(config, backends).await? {
        start_baseline(config, backends).await?;
    }
    let state = backends.state.as_ref();
    let owner = format!("{run_id}/pid-{}", std::process::id());
    let lease = match state
        .acquire_lease(&config.job, &owner, config.lease.ttl())
        .await?
    {
        LeaseOutcome::Acquired(lease) => lease,
        LeaseOutcome::Held {
            owner,
            expires_at_ms,
        } => {
            tracing::info!(job = %config.job, holder = %owner, "lease held by another run; skipping");
            return Ok(RunSummary {
                status: RunStatus::Skipped,
                job: config.job.clone(),
                run_id,
                rows: 0,
                parts: 0,
                bytes: 0,
                from: None,
                to: None,
                duration_ms: started.elapsed().as_millis() as u64,
                lag_seconds: None,
                source_retained_bytes: None,
                tables: BTreeMap::new(),
                lease_holder: Some(owner),
                lease_expires_at_ms: Some(expires_at_ms),
            });
        }
    };
    tracing::info!(job = %config.job, run_id = %run_id, token = lease.token, "lease acquired");
    crate::sink::spill_sweep::sweep(&config.spill_dir());
    // The release needs only the lease's token and owner, which renewals keep.
    let result = drain_under_lease(config, options, backends, lease.clone(), run_id, started).await;
    if let Err(e) = state.release_lease(&lease).await {
        tracing::warn!(error = %e, "could not release the lease; it expires on its own");
    }
    result
}

/// A stream with `initial: snapshot` whose baseline is not done: run it inline, or —
/// with a state machine configured — anchor it and start the machine's execution for the
/// chunks (drains run meanwhile: the anchor predates every chunk read).
async fn start_baseline(config: &Config, backends: &Backends) -> Result<()> {
    match &config.baseline.state_machine_arn {
        None => {
            let summary =
                crate::baseline::run_inline(config, backends, config.baseline.parallel).await?;
            tracing::info!(
                rows = summary.rows,
                chunks = summary.chunks,
                "inline baseline done"
            );
            Ok(())
        }
        Some(arn) => {
            crate::baseline::start::start(config, backends, arn).await?;
            Ok(())
        }
    }
}

async fn drain_under_lease(
    config: &Config,
    options: DrainOptions,
    backends: &Backends,
    lease: Lease,
    run_id: String,
    started: Instant,
) -> Result<RunSummary> {
    let job = &config.job;
    let stored = backends.state.load_checkpoint(job).await?;
    let resume = match &stored {
        Some(cp) => Some(Resume {
            position: Position::parse_tagged(&cp.position)?,
            source_identity: cp.source_identity.clone(),
        }),
        None => None,
    };
    let mut stream = source::open(config, resume.as_ref()).await?;
    let info = stream.info().clone();
    let mut committer = Committer::new(
        backends.state.as_ref(),
        backends.destination.as_ref(),
        lease,
        config.lease.ttl(),
        run_id,
        info.source_identity.clone(),
        stored.as_ref().map_or(0, |c| c.version),
        resume.as_ref().map(|r| r.position),
    );
    let committer = &mut committer;
    tracing::info!(from = %info.start, bound = %info.bound, "stream open");

    let settings = PartSettings {
        rollover_rows: config.output.rollover_rows,
        rollover_bytes: config.output.rollover_bytes,
        row_group_rows: config.output.row_group_rows,
        zstd_level: config.output.zstd_level,
        ..PartSettings::new(config.spill_dir())
    };
    let mut router = Router::new(
        &config.source.tables,
        &info.tables,
        &committer.run_id,
        &settings,
    )?;
    let mut framer = Framer::new();
    let mut framed = Vec::new();
    let mut last_commit: Option<Position> = None;
    let mut newest_commit_ts: Option<i64> = None;
    let mut status = RunStatus::Drained;

    while let Some(event) = stream.next().await? {
        match event {
            SourceEvent::Begin { commit, commit_ts } => {
                framer.begin(&commit, commit_ts)?;
                newest_commit_ts = newest_commit_ts.max(commit_ts);
            }
            SourceEvent::Change(change) => {
                framer.change(change, &mut framed)?;
                for event in framed.drain(..) {
                    if let Some(part) = router.append(&event)? {
                        make_durable(committer, &mut router, part).await?;
                    }
                }
            }
            SourceEvent::Commit { resume } => {
                let position = framer.commit(resume)?;
                last_commit = Some(position);
                let stop = options.deadline_reached();
                if stop || router.any_should_roll() {
                    flush(committer, &mut router, position, stream.as_mut()).await?;
                }
                if stop {
                    status = RunStatus::Partial;
                    tracing::info!(at = %position, "deadline reached; stopping at a transaction boundary");
                    break;
                }
                committer.keep_lease().await?;
            }
            SourceEvent::Barrier => {
                if let Some(position) = last_commit {
                    flush(committer, &mut router, position, stream.as_mut()).await?;
                }
                committer.keep_lease().await?;
            }
        }
    }

    let end = match status {
        RunStatus::Drained => Some(stream.end_position()),
        _ => last_commit,
    };
    if let Some(end) = end {
        let end = match last_commit {
            Some(commit) if commit > end => commit,
            _ => end,
        };
        flush(committer, &mut router, end, stream.as_mut()).await?;
    }
    let lag_seconds = match (newest_commit_ts, status) {
        (Some(ts), _) => Some(((chrono::Utc::now().timestamp_micros() - ts).max(0)) as f64 / 1e6),
        (None, RunStatus::Drained) => Some(0.0),
        (None, _) => None,
    };
    let to = committer.checkpoint.map(|p| p.to_string());
    let source_retained_bytes = stream.retained_bytes().await;
    let summary = RunSummary {
        status,
        job: job.clone(),
        run_id: committer.run_id.clone(),
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
    };
    write_manifests(config, committer.destination, &router, &summary).await?;
    let record = RunRecord {
        run_id: summary.run_id.clone(),
        summary: serde_json::to_value(&summary).unwrap_or_default(),
        expires_at_s: chrono::Utc::now().timestamp() + RUN_RECORD_TTL_S,
    };
    committer.state.put_run(job, &record).await?;
    Ok(summary)
}

/// Closes every open part, makes them durable, then checkpoints and acks `position`.
async fn flush(
    committer: &mut Committer<'_>,
    router: &mut Router,
    position: Position,
    stream: &mut dyn ChangeStream,
) -> Result<()> {
    for part in router.finish_all()? {
        make_durable(committer, router, part).await?;
    }
    committer.checkpoint_and_ack(position, stream).await
}

async fn make_durable(
    committer: &Committer<'_>,
    router: &mut Router,
    part: FinishedPart,
) -> Result<()> {
    tracing::info!(key = %part.key, rows = part.rows, bytes = part.bytes, "part written");
    let table = part.schema.name.clone();
    let entry = part.manifest_entry();
    committer.make_durable(part).await?;
    router.record_durable(&table, entry);
    Ok(())
}

/// Writes each table's run manifest, and at a clean end its `manifest.json` and then
/// `_SUCCESS`.
async fn write_manifests(
    config: &Config,
    destination: &dyn Destination,
    router: &Router,
    summary: &RunSummary,
) -> Result<()> {
    let status = match summary.status {
        RunStatus::Partial => ManifestStatus::Partial,
        _ => ManifestStatus::Drained,
    };
    for (table, output) in &router.tables {
        let Some(schema) = output.schema.as_deref() else {
            continue;
        };
        let run = ManifestRun {
            job: config.job.clone(),
            table: table.clone(),
            run_id: summary.run_id.clone(),
            status,
            from: summary.from.clone().unwrap_or_default(),
            to: summary.to.clone().unwrap_or_default(),
        };
        let manifest = Manifest::new(run, output.parts.clone(), schema, chrono::Utc::now());
        let body = manifest.to_json_bytes()?;
        if !output.parts.is_empty() {
            destination
                .put_marker(
                    &format!("{table}/_manifests/{}.json", summary.run_id),
                    &body,
                )
                .await?;
        }
        if summary.status == RunStatus::Drained {
            destination
                .put_marker(&format!("{table}/manifest.json"), &body)
                .await?;
            let success = serde_json::json!({ "run_id": summary.run_id, "to": summary.to });
            destination
                .put_marker(&format!("{table}/_SUCCESS"), success.to_string().as_bytes())
                .await?;
        }
    }
    Ok(())
}
