//! The end of a drain's read: the last re-baseline checks, the final flush, the run
//! summary and the per-table manifests.
//!
//! Guarantees: a run that reached its bound checkpoints at least the bound (an idle run
//! still releases the log other tables' writes produced); one stopped at a boundary
//! checkpoints its last transaction; one stopped inside a transaction keeps nothing past
//! its last checkpoint, and fails with `SLUICE_SOURCE_TRANSACTION_TOO_LONG` when that
//! checkpoint is where it started (the next run would stop there again). The run's
//! manifests are written only after its last checkpoint, `_manifest.json` and `_SUCCESS`
//! only at a clean end.

use std::time::Instant;

use super::pass::{Ended, Pass, parts_of};
use crate::commit::Start;
use crate::error::{Code, Error, Result};
use crate::position::Position;
use crate::summary::{RunStatus, RunSummary, TableCounts};

impl Pass<'_> {
    /// Ends the run after its read `ended`: re-baselines a table whose shape changed
    /// without a change this run saw, flushes and checkpoints the end, and writes the run
    /// manifests of the summary it returns. `start` is where the run's checkpoint stood
    /// when it started, at `started`.
    pub async fn finish(
        &mut self,
        ended: Ended,
        start: &Start,
        started: Instant,
    ) -> Result<RunSummary> {
        if ended == Ended::Drained && !matches!(self.info.start, Position::SqlServer(_)) {
            self.rebaseline_unchanged().await?;
        }
        let end = match ended {
            Ended::InsideTransaction => {
                let at = self.durable.committer.checkpoint();
                tracing::warn!(checkpoint = ?at.as_ref().map(|p| p.to_string()), "deadline reached inside a transaction; stopped there, keeping nothing past the checkpoint");
                if at == start.position {
                    return Err(transaction_too_long(at));
                }
                None
            }
            Ended::Drained => Some(self.stream.end_position()),
            Ended::AtBoundary => self.last_commit.clone(),
        };
        if let Some(end) = end {
            let end = match self.last_commit.clone() {
                Some(commit) if commit > end => commit,
                _ => end,
            };
            self.flush(end).await?;
        }
        let summary = self.summary(ended, started).await;
        self.durable
            .manifests
            .at_end(&self.router, &summary)
            .await?;
        Ok(summary)
    }

    /// A table no change of which this run saw may still have changed shape in the
    /// catalog (PostgreSQL logs no DDL): a column added with a default holds values no
    /// part has, so it is re-baselined now rather than at its next change.
    async fn rebaseline_unchanged(&mut self) -> Result<()> {
        let unchanged = self
            .shapes
            .check_unchanged(&self.info.tables, self.stream.as_mut())
            .await?;
        for (table, reason) in unchanged {
            let at = Some(
                self.last_commit
                    .clone()
                    .unwrap_or_else(|| self.stream.end_position()),
            );
            let why = super::rebaseline::Why::Changed(&reason);
            self.rebaselines
                .ask(&mut self.router, &table, at, why)
                .await?;
        }
        Ok(())
    }

    /// The run's summary: what it wrote, from where to its checkpoint, how long it took
    /// and how far behind the source it ended.
    async fn summary(&mut self, ended: Ended, started: Instant) -> RunSummary {
        let status = match ended {
            Ended::Drained => RunStatus::Drained,
            Ended::AtBoundary | Ended::InsideTransaction => RunStatus::Partial,
        };
        let lag_seconds = match (self.newest_commit_ts, status) {
            (Some(ts), _) => {
                Some(((chrono::Utc::now().timestamp_micros() - ts).max(0)) as f64 / 1e6)
            }
            (None, RunStatus::Drained) => Some(0.0),
            (None, _) => None,
        };
        let committer = &self.durable.committer;
        let to = committer.checkpoint().map(|p| p.to_string());
        let source_retained_bytes = self.stream.retained_bytes().await;
        let tables = &self.router.tables;
        RunSummary {
            rebaselined: std::mem::take(&mut self.rebaselines.asked),
            status,
            job: self.config.job.clone(),
            run_id: committer.run_id().to_owned(),
            rows: tables.values().map(|t| t.rows).sum(),
            parts: parts_of(&self.router),
            bytes: tables.values().map(|t| t.bytes).sum(),
            from: Some(self.info.start.to_string()),
            to,
            duration_ms: started.elapsed().as_millis() as u64,
            lag_seconds,
            source_retained_bytes,
            tables: tables
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
            catalog: Default::default(),
        }
    }
}

/// A run stopped inside a transaction without moving the checkpoint: the next run under
/// the same deadline would stop there again.
fn transaction_too_long(checkpoint: Option<Position>) -> Error {
    let at = checkpoint.map_or_else(|| "the stream's start".to_owned(), |p| p.to_string());
    Error::new(
        Code::SourceTransactionTooLong,
        format!("the transaction after {at} could not be drained before the run's deadline; the run stopped inside it and kept nothing past {at}"),
    )
    .hint("give one run more time: raise the Lambda function's timeout (up to 900 s) or the CLI's --max-duration, or drain this backlog once with the CLI without --max-duration; the schedule then continues from there")
}
