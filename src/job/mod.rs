//! The job room: one scheduled invocation of a job, the same for the CLI and the Lambda
//! face — claim the source resources → baseline if one is due → drain under the lease.
//!
//! It is the only module that calls both the baseline and the drain, so neither imports
//! the other. Guarantees: a source the TLS gate refuses is refused before anything is
//! claimed or leased; the claims are taken before anything else (a resource another
//! job holds stops the run before the lease or the source are touched); with `initial:
//! snapshot`, the drain runs only after the baseline is done inline, or once its anchor
//! is recorded and its state machine started (the anchor predates every chunk read, so
//! drains may run meanwhile); a lease held by another run ends the run as `skipped`.
//! The config loader ([`config`]) adds every room's own checks to the parser's.

pub mod config;

use std::collections::BTreeMap;
use std::time::Instant;

use crate::backends::Backends;
use crate::config::{Config, Initial};
use crate::drain::stop::StopRequest;
use crate::drain::{self, DrainOptions};
use crate::error::{Code, Error, Result};
use crate::state::{Leased, RunRecord, with_lease};
use crate::summary::{RunStatus, RunSummary};

/// Runs the job once, opening its backends.
pub async fn run(config: &Config, options: DrainOptions) -> Result<RunSummary> {
    let backends = Backends::open(config).await?;
    run_with(config, &backends, options).await
}

/// One run of the job with no deadline, on open backends: what a lake operation runs
/// (`sluice verify`) to bring the lake past a source read it just made — the drain reads
/// the change log to its end as of its start.
pub async fn drain_now(config: &Config, backends: &Backends) -> Result<RunSummary> {
    run_with(config, backends, DrainOptions::default()).await
}

/// How long recording a failed run may take: the failure is what the caller waits for.
const FAILURE_RECORD_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the job once with already-open backends. A run that fails leaves a `failed` run
/// record (its code and message) when the state store takes it in time, so `sluice
/// status` shows failing jobs; the run's own error is returned either way.
pub async fn run_with(
    config: &Config,
    backends: &Backends,
    options: DrainOptions,
) -> Result<RunSummary> {
    let started = Instant::now();
    let run_id = crate::run_id::new_run_id();
    let result = run_once(config, backends, options, &run_id, started).await;
    if let Err(e) = &result {
        record_failure(config, backends, &run_id, started, e).await;
    }
    result
}

/// Stores the `failed` run record of `run_id`; a store that is down or slow only costs a
/// warning.
async fn record_failure(
    config: &Config,
    backends: &Backends,
    run_id: &str,
    started: Instant,
    e: &Error,
) {
    let duration_ms = started.elapsed().as_millis() as u64;
    let record = RunRecord::failed(&config.job, run_id, e, duration_ms);
    let write = backends.state.put_run(&config.job, &record);
    match tokio::time::timeout(FAILURE_RECORD_ALLOWANCE, write).await {
        Ok(Ok(())) => {}
        Ok(Err(stored)) => {
            tracing::warn!(code = stored.code().as_str(), error = %stored, "the failed run could not be recorded")
        }
        Err(_) => tracing::warn!("the failed run could not be recorded in time"),
    }
}

async fn run_once(
    config: &Config,
    backends: &Backends,
    options: DrainOptions,
    run_id: &str,
    started: Instant,
) -> Result<RunSummary> {
    let run_id = run_id.to_owned();
    if crate::faults::armed() {
        tracing::warn!("fault injection is armed (SLUICE_FAULT); this is for tests only");
    }
    crate::source::check_transport(&config.source_url()?, &config.source.tls)?;
    crate::claims::claim_all(config, backends.state.as_ref()).await?;
    if config.initial == Initial::Snapshot {
        crate::baseline::added::want_added(config, backends).await?;
    }
    if config.initial == Initial::Snapshot
        && !crate::baseline::ready_to_drain(config, backends).await?
    {
        crate::destination::stdout::refuse_baseline(config, "initial: snapshot")?;
        start_baseline(config, backends).await?;
    }
    let owner = crate::state::holder::owner(&run_id, None);
    let stop = options.stop.clone();
    let leased = with_lease(
        backends.state.as_ref(),
        &config.job,
        &owner,
        config.lease.ttl(),
        |lease| {
            let stop = options.stop.clone();
            let drain = drain::run(config, backends, lease, run_id.clone(), started, options);
            abandon_on(stop, drain)
        },
    )
    .await?;
    match leased {
        // A stopped run starts no new work: a pending re-baseline stays wanted, and
        // the next run carries it on.
        Leased::Ran(summary) if stop.as_ref().is_some_and(StopRequest::asked) => Ok(summary),
        Leased::Ran(mut summary) => {
            rebaseline_pending(config, backends, &mut summary).await?;
            if config.output.current_state {
                crate::materialize::after_run(config, backends).await;
            }
            Ok(summary)
        }
        Leased::Held {
            owner,
            expires_at_ms,
        } => {
            tracing::info!(job = %config.job, holder = %owner, "lease held by another run; skipping");
            Ok(RunSummary {
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
                rebaselined: BTreeMap::new(),
                lease_holder: Some(owner),
                lease_expires_at_ms: Some(expires_at_ms),
                catalog: Default::default(),
            })
        }
    }
}

/// Runs `work` until it ends, or until `stop` abandons it (dropped at the await it is in,
/// as a crash there would stop it) with `SLUICE_RUN_INTERRUPTED`.
async fn abandon_on<T>(
    stop: Option<StopRequest>,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(stop) = stop else {
        return work.await;
    };
    tokio::select! {
        result = work => result,
        () = stop.abandoned() => Err(interrupted(stop.signal())),
    }
}

/// The error of a run abandoned after a stop request by `signal`.
pub fn interrupted(signal: Option<i32>) -> Error {
    let by = signal.map_or_else(|| "a stop request".to_owned(), |s| format!("signal {s}"));
    Error::new(
        Code::RunInterrupted,
        format!("stopped by {by} before reaching a transaction boundary; the run was abandoned where it was"),
    )
    .hint("nothing was half-written and the lease was released: the next run resumes from the last checkpoint. To let a run stop at a boundary instead, allow more than 5 s between SIGTERM and SIGKILL")
}

/// After a run: every table whose re-baseline is wanted (this run's, or an earlier run's
/// that did not get to it) is anchored at the checkpoint the run left and read inline
/// (anchored anew and read again when its shape changed since its plan, a few times at
/// most) — or, with a state machine configured, its execution is started; the summary's
/// `rebaselined` names each of these tables and says which.
/// Every other table's baseline record is left untouched.
async fn rebaseline_pending(
    config: &Config,
    backends: &Backends,
    summary: &mut RunSummary,
) -> Result<()> {
    let pending = crate::state::rebaseline::pending(
        backends.state.as_ref(),
        &config.job,
        &config.source.tables,
    )
    .await?;
    if pending.is_empty() {
        return Ok(());
    }
    let tables: Vec<&str> = pending.iter().map(|r| r.table.as_str()).collect();
    crate::destination::stdout::refuse_baseline(
        config,
        &format!("the re-baseline of {}", tables.join(", ")),
    )?;
    // The outcome, and the tables given up because their shape changed while read.
    let result = match &config.baseline.state_machine_arn {
        None => crate::baseline::run_inline_rounds(config, backends, config.baseline.parallel)
            .await
            .map(|done| {
                tracing::info!(tables = ?done.tables.keys().collect::<Vec<_>>(), rows = done.rows, "re-baseline done");
                ("done", done.restarted)
            }),
        Some(arn) => crate::baseline::start::start_rebaseline(config, backends, arn)
            .await
            .map(|started| {
                tracing::info!(execution = %started.execution_name, anchor = %started.anchor, "re-baseline execution started");
                ("started", Vec::new())
            }),
    };
    // The run itself succeeded and checkpointed: a re-baseline that could not run now
    // (lease held, source or Step Functions unreachable), or that was given up because
    // its table changed shape while read, stays wanted and the next run tries again;
    // until it is anchored, drains keep skipping the table.
    let (outcome, restarted) = match result {
        Ok(done) => done,
        Err(e) if e.class() == crate::error::Class::Transient => {
            tracing::warn!(code = e.code().as_str(), error = %e, "the re-baseline could not run now; the next run retries it");
            ("pending", Vec::new())
        }
        Err(e) => return Err(e),
    };
    // Every table re-baselined here is in the summary, the ones an earlier run asked
    // for too (`at`: where their record stands, the asking change or the anchor).
    for record in &pending {
        let entry = summary
            .rebaselined
            .entry(record.table.clone())
            .or_insert_with(|| crate::summary::Rebaselined {
                reason: record.reason.clone().unwrap_or_default(),
                at: record.anchor.clone(),
                baseline: String::new(),
            });
        entry.baseline = if restarted.contains(&record.table) {
            "pending"
        } else {
            outcome
        }
        .to_owned();
    }
    if !summary.rebaselined.is_empty() {
        // The run record says what the summary says.
        backends
            .state
            .put_run(&config.job, &RunRecord::of(summary))
            .await?;
    }
    Ok(())
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
                restarted = ?summary.restarted,
                "inline baseline done (the tables restarted are re-baselined after the drain)"
            );
            Ok(())
        }
        Some(arn) => {
            let pending = crate::state::rebaseline::pending(
                backends.state.as_ref(),
                &config.job,
                &config.source.tables,
            )
            .await?;
            if pending.is_empty() {
                crate::baseline::start::start(config, backends, arn).await?;
            } else {
                crate::baseline::start::start_rebaseline(config, backends, arn).await?;
            }
            Ok(())
        }
    }
}
