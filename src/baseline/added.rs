//! Tables added to a running job's `source.tables`: each is baselined from a new anchor at
//! the job's checkpoint while the stream goes on, through the per-table re-baseline
//! (`crate::state::rebaseline`), so its snapshot carries an epoch marker — a table that
//! was captured before, dropped from the list and added again replays from the new
//! snapshot, never from its stale parts.
//!
//! Guarantees: the source publishes the added tables (PostgreSQL: the publication covers
//! them, `crate::source::prepare_capture`) before their `wanted` records are written, so
//! every chunk of their baseline is read after their changes reach the stream; a table
//! already known to the job (any record) is never touched; a job without a checkpoint
//! has no added tables (its first baseline covers every table).

use crate::backends::Backends;
use crate::config::{Config, Engine};
use crate::error::Result;
use crate::state::rebaseline::{self, Asker};

/// Why an added table is baselined (the `reason` of its record).
pub const REASON: &str = "added to source.tables";

/// Asks a re-baseline of every table of `source.tables` the job has no baseline record
/// of, once the job has a checkpoint; returns those tables.
pub async fn want_added(config: &Config, backends: &Backends) -> Result<Vec<String>> {
    let state = backends.state.as_ref();
    let Some(checkpoint) = state.load_checkpoint(&config.job).await? else {
        return Ok(Vec::new());
    };
    // SQL Server has no per-table re-baseline: an added table there is refused where
    // its stream opens, as before.
    if crate::config::engine_for_url(&config.source_url()?)? == Engine::SqlServer {
        return Ok(Vec::new());
    }
    let mut added = Vec::new();
    for table in &config.source.tables {
        if state.load_baseline(&config.job, table).await?.is_none() {
            added.push(table.clone());
        }
    }
    if added.is_empty() {
        return Ok(added);
    }
    crate::source::prepare_capture(config).await?;
    for table in &added {
        rebaseline::request(
            state,
            &config.job,
            &config.source.tables,
            rebaseline::Ask {
                table,
                at: &checkpoint.position,
                reason: REASON,
                asker: Asker::Drain,
                text_column: None,
            },
        )
        .await?;
        tracing::info!(table = %table, at = %checkpoint.position, "table added to the job: baselining it from the job's checkpoint");
    }
    Ok(added)
}
