//! `sluice status`: one row per job in a state store — lease, checkpoint, last run, lag,
//! the last day's volume, baseline progress and each table's last compaction
//! ([`compaction`]) — read only from the store, so it needs no source or destination and
//! works for every job sharing the store.
//!
//! Guarantees: nothing is written; a job whose records cannot be read is shown with the
//! error instead of hiding the other jobs; the day's totals say how many run records they
//! come from and whether the store still keeps the whole day (`day.complete`).

pub mod compaction;
pub mod render;

use serde::Serialize;

use crate::error::Result;
use crate::state::{RunRecord, StateStore};

/// The window the volume columns cover.
pub const DAY_MS: i64 = 24 * 3600 * 1000;

/// The lease as the store holds it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LeaseView {
    Free,
    /// A run holds it for `expires_in_s` more seconds.
    Held {
        owner: String,
        expires_in_s: i64,
    },
    /// Its holder stopped without releasing it `expired_s` seconds ago; the next run takes over.
    Expired {
        owner: String,
        expired_s: i64,
    },
}

/// The newest run record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastRun {
    pub run_id: String,
    /// `drained`, `partial`, `skipped` or `failed`.
    pub status: String,
    /// Seconds since the run started (from its run id).
    pub age_s: Option<i64>,
    pub rows: u64,
    /// Position the checkpoint reached.
    pub to: Option<String>,
    /// The error code of a failed run.
    pub code: Option<String>,
}

/// Totals over the run records of the last 24 hours.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Day {
    pub runs: u64,
    pub failed: u64,
    pub rows: u64,
    pub bytes: u64,
    /// False when the store may no longer keep every run of the day (the local store
    /// keeps the newest 50 per job), so the totals are a lower bound.
    pub complete: bool,
}

/// Baseline records by status.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Baseline {
    pub tables: u64,
    pub done: u64,
    pub running: u64,
    pub anchored: u64,
    pub wanted: u64,
    /// Chunk records written (chunks read) of tables not yet done.
    pub chunks_read: u64,
}

/// One job's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    pub job: String,
    pub lease: LeaseView,
    pub position: Option<String>,
    /// Seconds since the checkpoint last moved.
    pub checkpoint_age_s: Option<i64>,
    pub last_run: Option<LastRun>,
    /// Lag the newest successful run reported (seconds between its newest commit read
    /// and its end).
    pub lag_s: Option<f64>,
    /// Failed runs since the newest successful one.
    pub failing_runs: u64,
    pub day: Day,
    pub baseline: Baseline,
    /// Each compacted table's last compaction, by table.
    pub compaction: std::collections::BTreeMap<String, compaction::CompactionView>,
    /// Set when the job's records could not be read; the other fields are then empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads every job of `store` at `now_ms`.
pub async fn collect(store: &dyn StateStore, now_ms: i64) -> Result<Vec<JobStatus>> {
    // Operation leases (`<job>#materialize`) are items of the store, not jobs.
    let jobs: Vec<String> = store
        .list_jobs()
        .await?
        .into_iter()
        .filter(|job| !job.contains('#'))
        .collect();
    let since = run_id_prefix(now_ms - DAY_MS);
    let mut rows = Vec::with_capacity(jobs.len());
    for job in jobs {
        let read = async {
            let shown = store.show(&job).await?;
            let runs = store.runs_since(&job, &since).await?;
            let ops = store.list_ops(&job).await?;
            Ok::<_, crate::error::Error>((shown, runs, ops))
        };
        rows.push(match read.await {
            Ok((shown, runs, ops)) => {
                let mut row = job_status(&job, &shown, &runs, store.runs_kept(), now_ms);
                row.compaction = compaction::views(&ops, now_ms);
                row
            }
            Err(e) => unreadable(&job, &e),
        });
    }
    Ok(rows)
}

/// The run-id prefix (`YYYYMMDDTHHMMSS`) of a run started at `ms`.
pub fn run_id_prefix(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y%m%dT%H%M%S")
        .to_string()
}

/// When the run with `run_id` started, ms since the epoch.
fn run_started_ms(run_id: &str) -> Option<i64> {
    let stamp = run_id.get(..18)?;
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%3f")
        .ok()
        .map(|t| t.and_utc().timestamp_millis())
}

fn unreadable(job: &str, e: &crate::error::Error) -> JobStatus {
    JobStatus {
        job: job.to_owned(),
        lease: LeaseView::Free,
        position: None,
        checkpoint_age_s: None,
        last_run: None,
        lag_s: None,
        failing_runs: 0,
        day: Day::default(),
        baseline: Baseline::default(),
        compaction: Default::default(),
        error: Some(format!("{}: {e}", e.code().as_str())),
    }
}

/// One job's row from its `state show` document and its last day of run records.
pub fn job_status(
    job: &str,
    shown: &serde_json::Value,
    day_runs: &[RunRecord],
    runs_kept: Option<usize>,
    now_ms: i64,
) -> JobStatus {
    let checkpoint = &shown["checkpoint"];
    let mut runs: Vec<&serde_json::Value> = shown["runs"]
        .as_object()
        .map(|r| r.values().map(|r| &r["summary"]).collect())
        .unwrap_or_default();
    runs.sort_by(|a, b| a["run_id"].as_str().cmp(&b["run_id"].as_str()));
    let successful =
        |s: &serde_json::Value| matches!(s["status"].as_str(), Some("drained" | "partial"));
    let failing_runs = runs
        .iter()
        .rev()
        .take_while(|s| !successful(s))
        .filter(|s| s["status"] == "failed")
        .count() as u64;
    JobStatus {
        job: job.to_owned(),
        lease: lease_view(shown, now_ms),
        position: checkpoint["position"].as_str().map(str::to_owned),
        checkpoint_age_s: checkpoint["updated_at_ms"]
            .as_i64()
            .map(|at| (now_ms - at) / 1000),
        last_run: runs.last().map(|s| last_run(s, now_ms)),
        lag_s: runs
            .iter()
            .rev()
            .find(|s| successful(s))
            .and_then(|s| s["lag_seconds"].as_f64()),
        failing_runs,
        day: day(day_runs, runs_kept),
        baseline: baseline(shown),
        compaction: Default::default(),
        error: None,
    }
}

fn lease_view(shown: &serde_json::Value, now_ms: i64) -> LeaseView {
    match (
        shown["lease_owner"].as_str(),
        shown["lease_expires_at_ms"].as_i64(),
    ) {
        (Some(owner), Some(expires)) if expires > now_ms => LeaseView::Held {
            owner: owner.to_owned(),
            expires_in_s: (expires - now_ms + 999) / 1000,
        },
        (Some(owner), Some(expires)) => LeaseView::Expired {
            owner: owner.to_owned(),
            expired_s: (now_ms - expires) / 1000,
        },
        _ => LeaseView::Free,
    }
}

fn last_run(s: &serde_json::Value, now_ms: i64) -> LastRun {
    let run_id = s["run_id"].as_str().unwrap_or_default().to_owned();
    LastRun {
        age_s: run_started_ms(&run_id).map(|at| (now_ms - at) / 1000),
        run_id,
        status: s["status"].as_str().unwrap_or("unknown").to_owned(),
        rows: s["rows"].as_u64().unwrap_or(0),
        to: s["to"].as_str().map(str::to_owned),
        code: s["code"].as_str().map(str::to_owned),
    }
}

fn day(runs: &[RunRecord], kept: Option<usize>) -> Day {
    let mut day = Day::default();
    for run in runs {
        let s = &run.summary;
        day.runs += 1;
        day.failed += u64::from(s["status"] == "failed");
        day.rows += s["rows"].as_u64().unwrap_or(0);
        day.bytes += s["bytes"].as_u64().unwrap_or(0);
    }
    // A store that keeps only its newest `kept` records may have dropped some of the day's.
    day.complete = kept.is_none_or(|kept| runs.len() < kept);
    day
}

fn baseline(shown: &serde_json::Value) -> Baseline {
    let mut b = Baseline::default();
    let mut unfinished = Vec::new();
    for record in shown["snapshots"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        b.tables += 1;
        match record["status"].as_str() {
            Some("done") => b.done += 1,
            Some("running") => b.running += 1,
            Some("anchored") => b.anchored += 1,
            Some("wanted") => b.wanted += 1,
            _ => {}
        }
        if record["status"] != "done" {
            unfinished.push(record["table"].as_str().unwrap_or_default().to_owned());
        }
    }
    b.chunks_read = shown["chunks"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter(|c| {
            c["table"]
                .as_str()
                .is_some_and(|t| unfinished.iter().any(|u| u == t))
        })
        .count() as u64;
    b
}

#[cfg(test)]
mod tests;
