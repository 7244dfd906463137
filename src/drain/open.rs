//! What a drain opens before it reads: the change stream at the stored checkpoint, and
//! the part writers of every captured table within the run's memory budget.
//!
//! Guarantees: a stream with a checkpoint resumes exactly there, under the identity the
//! checkpoint was written with (the source refuses what it cannot continue, never
//! re-anchors); a stream without one takes a PostgreSQL slot that exists already only
//! when this job created it or may adopt it, and records a new slot as this job's before
//! creating it ([`crate::claims::guard_first_start`]); the writers of all tables together stay within the memory budget
//! ([`crate::spill::memory_budget`]), after a MySQL / MariaDB stream's transaction buffer
//! is set aside.

use super::tables::Router;
use crate::commit::Start;
use crate::config::Config;
use crate::error::Result;
use crate::parts::PartSettings;
use crate::position::Position;
use crate::source::{self, ChangeStream, Resume, StreamInfo};
use crate::spill::memory_budget::MemoryBudget;
use crate::state::{Checkpoint, StateStore};

/// Opens the config's change stream at `stored`, the job's checkpoint (read as `start`).
pub async fn stream(
    config: &Config,
    state: &dyn StateStore,
    stored: Option<&Checkpoint>,
    start: &Start,
) -> Result<Box<dyn ChangeStream>> {
    let resume = match (stored, start.position.clone()) {
        (Some(cp), Some(position)) => Some(Resume {
            position,
            source_identity: cp.source_identity.clone(),
        }),
        _ => None,
    };
    if resume.is_none() {
        crate::claims::guard_first_start(config, state).await?;
    }
    source::open(config, resume.as_ref()).await
}

/// The part writers of every captured table of the stream `info` describes, naming
/// parts after `run_id`, each batching at most its share of the memory budget.
pub fn writers(config: &Config, info: &StreamInfo, run_id: &str) -> Result<Router> {
    let tables = config.source.tables.len();
    // A MySQL / MariaDB stream holds a transaction in memory while the writers batch: the
    // writers get what is left of the budget.
    let (budget, _) = MemoryBudget::for_run(config, matches!(info.start, Position::MySql(_)));
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
    Router::new(
        &config.source.tables,
        &info.tables,
        run_id,
        &settings,
        config.output.layout,
    )
}
