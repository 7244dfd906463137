//! Baselines: the table's current state as snapshot parts, anchored so the change stream
//! covers everything after it.
//!
//! Snapshot rows have the change-row shape (`__op = 'snapshot'`, `__pos` = the anchor's
//! position text, `__seq = 0`, then the typed columns), so one query — latest
//! `(__pos, __seq)` per key, minus deletes — over `snapshot/` and the change parts gives
//! the current state. The anchor is the position *just before* the stream's start, so
//! every change of the stream sorts after every snapshot row, and a change made while the
//! baseline is being read is in the stream too (overlap, never a gap). A table without a
//! key replays as a multiset, where an overlap would count twice: it is one chunk read at
//! an exact snapshot point, written after a `rebaseline` marker there
//! ([`crate::source::baseline_read::BaselineReader::snapshot_point`], [`tasks::chunk`]).
//!
//! [`run_inline`] runs the four [`tasks`] in one process (CLI, small tables); the Step
//! Functions machine in `infra/stepfunctions/baseline.asl.json` runs them as separate
//! Lambda invocations, started by a drain through [`start`]; [`delivery`] decides whether
//! the plan's chunk list reaches the machine inline or as an S3 object.

pub mod added;
pub mod delivery;
pub mod epoch;
pub mod messages;
pub mod plan;
pub mod start;
pub mod tasks;

use std::time::Instant;

use futures_util::StreamExt;
use serde::Serialize;

use crate::backends::Backends;
use crate::config::{BaselineConfig, Config, invalid};
use crate::error::{Code, Error, Result};
use crate::state::BaselineStatus;

/// What `sluice baseline` prints.
#[derive(Debug, Serialize)]
pub struct BaselineSummary {
    pub status: &'static str,
    pub job: String,
    pub anchor: String,
    pub chunks: usize,
    pub chunks_read: usize,
    pub rows: u64,
    pub duration_ms: u64,
    pub tables: std::collections::BTreeMap<String, messages::TableBaseline>,
    /// Tables whose shape changed while their chunks were read: their baseline was given
    /// up and is wanted anew (read again at a new anchor by the next round).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restarted: Vec<String>,
}

/// Checks the `baseline` block: the state machine ARN, declared keys, chunking and the
/// inline plan ceiling.
pub fn check_config(config: &Config) -> Result<()> {
    if let Some(arn) = &config.baseline.state_machine_arn {
        start::region_from_arn(arn)?;
    }
    for (table, columns) in &config.baseline.keys {
        if !config.source.tables.contains(table) {
            return Err(invalid(format!(
                "baseline.keys names {table:?}, which is not in source.tables"
            ))
            .hint("key a table by its name exactly as source.tables lists it"));
        }
        let mut seen = std::collections::BTreeSet::new();
        if columns.is_empty() || !columns.iter().all(|c| seen.insert(c)) {
            return Err(invalid(format!(
                "baseline.keys.{table} must list one or more distinct columns"
            )));
        }
    }
    if config.baseline.parallel == 0 || config.baseline.chunk_rows == 0 {
        return Err(invalid(format!(
            "baseline.parallel ({}) and baseline.chunk_rows ({}) must be at least 1",
            config.baseline.parallel, config.baseline.chunk_rows
        ))
        .hint("parallel is how many chunks are read at once (Step Functions reads a MaxConcurrency of 0 as unlimited); chunk_rows sizes each chunk"));
    }
    if config.baseline.inline_plan_max_bytes > BaselineConfig::MAX_INLINE_PLAN_BYTES {
        return Err(invalid(format!(
            "baseline.inline_plan_max_bytes {} is above {} (192 KiB)",
            config.baseline.inline_plan_max_bytes,
            BaselineConfig::MAX_INLINE_PLAN_BYTES
        ))
        .hint("Step Functions passes at most 256 KiB between states; larger chunk lists go through S3 (0 sends every plan of an S3 destination through S3)"));
    }
    Ok(())
}

/// Asks for a re-baseline of `table` by an operator (`sluice baseline --table`, the
/// `baseline.anchor` action with a `table`): recorded as wanted at the job's checkpoint,
/// so drains skip its changes until the anchor step anchors it anew; a re-baseline of the
/// table already anchored and not done is resumed instead.
pub async fn request_table(config: &Config, backends: &Backends, table: &str) -> Result<()> {
    let state = backends.state.as_ref();
    let at = state
        .load_checkpoint(&config.job)
        .await?
        .map(|c| c.position)
        .unwrap_or_default();
    crate::state::rebaseline::request(
        state,
        &config.job,
        &config.source.tables,
        crate::state::rebaseline::Ask {
            table,
            at: &at,
            reason: "re-baseline asked by an operator",
            asker: crate::state::rebaseline::Asker::Operator,
            text_column: None,
        },
    )
    .await?;
    Ok(())
}

/// True when no table's baseline must run before the drain: every table's is done, or
/// is a re-baseline (wanted, or anchored and not finished). Re-baselines run after the
/// drain, whose summary reports them. The drain skips a wanted table's changes and the
/// re-baseline is anchored after it, at the checkpoint it leaves — anchored before, at an
/// older checkpoint, the drain could meet the very change that asked for it again (a run
/// that asked, then died before its checkpoint) and the table would be read twice. An
/// anchored one's changes after its anchor are written by the drain as during a first
/// baseline; if its shape changed meanwhile, it is anchored anew after the drain too.
pub async fn ready_to_drain(config: &Config, backends: &Backends) -> Result<bool> {
    for table in &config.source.tables {
        let settled = backends
            .state
            .load_baseline(&config.job, table)
            .await?
            .is_some_and(|s| {
                s.reason.is_some()
                    || matches!(s.status, BaselineStatus::Done | BaselineStatus::Wanted)
            });
        if !settled {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How many rounds a baseline runs in one process while tables keep changing shape
/// mid-read.
const INLINE_ROUNDS: usize = 3;

/// Runs (or resumes) the whole baseline in this process until no table is left to read:
/// a table whose shape changed while it was read ([`tasks::chunk`]) is anchored anew and
/// read again, at most [`INLINE_ROUNDS`] times in all; past that it is an error.
pub async fn run_inline_to_end(
    config: &Config,
    backends: &Backends,
    parallel: usize,
) -> Result<BaselineSummary> {
    let summary = run_inline_rounds(config, backends, parallel).await?;
    if summary.restarted.is_empty() {
        return Ok(summary);
    }
    Err(Error::new(
        Code::BaselineIncomplete,
        format!(
            "the shape of {} changed while its baseline was read, {INLINE_ROUNDS} times in a row",
            summary.restarted.join(", ")
        ),
    )
    .hint("the baseline starts over at a new anchor each time (nothing of the old shape is kept): run `sluice baseline` again once the table's DDL is done"))
}

/// Runs (or resumes) the whole baseline in this process, anchoring anew and reading again
/// each table whose shape changed while it was read, at most [`INLINE_ROUNDS`] times in
/// all; the tables still left (`restarted` of the result) stay wanted.
pub async fn run_inline_rounds(
    config: &Config,
    backends: &Backends,
    parallel: usize,
) -> Result<BaselineSummary> {
    let mut round = 1;
    loop {
        let summary = run_inline(config, backends, parallel).await?;
        if summary.restarted.is_empty() || round == INLINE_ROUNDS {
            return Ok(summary);
        }
        tracing::info!(tables = ?summary.restarted, round, "reading the tables whose shape changed again, at a new anchor");
        round += 1;
    }
}

/// Runs (or resumes) the whole baseline in this process, `parallel` chunks at a time,
/// once: a table whose shape changed while it was read is left wanted (`restarted`).
pub async fn run_inline(
    config: &Config,
    backends: &Backends,
    parallel: usize,
) -> Result<BaselineSummary> {
    let started = Instant::now();
    let anchor = tasks::anchor(config, backends).await?;
    let chunks = tasks::plan_chunks(config, backends).await?;
    let total = chunks.len();
    let mut done = 0usize;
    let mut rows = 0u64;
    let mut read = 0usize;
    let _bar = crate::progress::FinishOnDrop;
    let mut restarted = std::collections::BTreeSet::new();
    let mut results = futures_util::stream::iter(chunks.iter())
        .map(|task| async move {
            let before = backends
                .state
                .load_chunk(&config.job, &task.table, task.chunk)
                .await?;
            let output = tasks::chunk(config, backends, task).await?;
            Ok::<_, Error>((before.is_none(), output))
        })
        .buffer_unordered(parallel.max(1));
    while let Some(result) = results.next().await {
        let (fresh, output) = result?;
        done += 1;
        if output.abandoned {
            restarted.insert(output.table.clone());
        } else if fresh {
            read += 1;
            rows += output.rows;
        }
        let progress = crate::progress::BaselineProgress {
            chunks_done: done,
            chunks: total,
            rows,
            elapsed: started.elapsed(),
        };
        if crate::progress::enabled() {
            crate::progress::show(progress.render());
        } else {
            tracing::info!(
                chunk = %format!("{done}/{total}"),
                table = %output.table,
                rows,
                rows_per_s = progress.rows_per_second(),
                eta_s = progress.eta().unwrap_or_default().as_secs(),
                "baseline progress"
            );
        }
    }
    drop(results);
    let finished = tasks::finish(config, backends).await?;
    restarted.extend(finished.restarted);
    Ok(BaselineSummary {
        status: if restarted.is_empty() {
            "done"
        } else {
            "restarted"
        },
        job: config.job.clone(),
        anchor: anchor.anchor,
        chunks: total,
        chunks_read: read,
        rows: finished.tables.values().map(|t| t.rows).sum(),
        duration_ms: started.elapsed().as_millis() as u64,
        tables: finished.tables,
        restarted: restarted.into_iter().collect(),
    })
}

/// Clears every table's baseline records so the next baseline starts over, and reports
/// what each table's record was. Refuses while snapshot objects exist (parts are never
/// overwritten): it names the prefix to remove and how many objects are under it.
pub async fn reset(config: &Config, backends: &Backends) -> Result<serde_json::Value> {
    let mut cleared = Vec::new();
    let mut records = std::collections::BTreeMap::new();
    for table in &config.source.tables {
        let prefix = format!("{table}/snapshot/");
        let objects = backends.destination.list(&prefix).await?;
        if !objects.is_empty() {
            return Err(Error::new(
                Code::DestinationExists,
                format!("{} objects exist under {prefix} in {}", objects.len(), backends.destination.describe()),
            )
            .hint(format!("parts are never overwritten: move or delete {prefix} first, then run `sluice baseline --reset` again")));
        }
        let record = backends.state.load_baseline(&config.job, table).await?;
        backends.state.clear_baseline(&config.job, table).await?;
        if let Some(record) = &record {
            tracing::info!(table = %table, status = ?record.status, anchor = %record.anchor,
                "baseline records cleared (the snapshot record and every chunk record)");
        }
        cleared.push(table.clone());
        records.insert(
            table.clone(),
            record.map(|r| serde_json::json!({ "status": r.status, "anchor": r.anchor, "run_id": r.run_id })),
        );
    }
    Ok(serde_json::json!({
        "status": "reset",
        "job": config.job,
        "cleared": cleared,
        "records": records,
        "next": "the next `sluice baseline` (or drain with initial: snapshot) anchors at the stream's checkpoint and reads every table again",
    }))
}
