//! The drain: one pass of the sluice gate under the job's lease, the same for the CLI and
//! the Lambda face (the job room, `crate::job`, takes the lease and runs it). [`run`] is
//! the spine; each step is a module of its own:
//!
//! load checkpoint → open the stream at it (the source fixes its read bound; a new
//! stream's start is checkpointed at once) and the tables' writers ([`open`]) → frame and
//! route changes ([`pass`]) → at a transaction boundary where a part reached rollover, a
//! page ended, or the deadline is near: parts durable → run manifests list them as
//! pending ([`manifests`]) → checkpoint → ack ([`durable`]) → at the end: final flush →
//! checkpoint (at least the bound) → ack → per-table `_manifests/<run_id>.json`,
//! `_manifest.json` and `_SUCCESS` ([`end`]) → run record. A table whose change cannot be
//! carried in place is re-baselined alone, asked in one place ([`rebaseline`]).
//!
//! Guarantees: nothing is acked before it is durable and checkpointed (the order is
//! [`crate::commit::Committer`]'s); an early stop ([`DrainOptions`]) happens only at a
//! transaction boundary and is reported as `partial`. Progress (position, rows, rate,
//! parts) is shown while it runs when the process asked for it ([`tracker`]).

pub mod durable;
pub mod end;
pub mod history;
pub mod manifests;
pub mod open;
pub mod options;
pub mod pass;
pub mod policy;
pub mod rebaseline;
pub mod shapes;
pub mod stop;
pub mod tables;
pub mod tracker;

use std::time::Instant;

pub use options::DrainOptions;

use crate::backends::Backends;
use crate::commit::{Committer, Start};
use crate::config::Config;
use crate::error::Result;
use crate::state::{Lease, RunRecord};
use crate::summary::RunSummary;
use durable::Durable;
use manifests::RunManifests;
use pass::Pass;
use rebaseline::Rebaselines;
use shapes::Shapes;

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
    let state = backends.state.as_ref();
    let destination = backends.destination.as_ref();
    let config = &*crate::state::text_form::with_text_columns(config, state).await?;
    let stored = state.load_checkpoint(&config.job).await?;

    // The tables whose column policy or row filter changed since they were written: set
    // before the stream opens (a source that publishes the policy is set to the new one),
    // re-baselined before anything is read.
    let policies = crate::policy::Policies::of(config)?;
    let changed = policy::changed(config, &policies, destination, stored.as_ref()).await?;
    policy::check_carriable(config, &changed)?;
    let mut with_changes;
    let config = if changed.is_empty() {
        config
    } else {
        with_changes = config.clone();
        with_changes.policy.changed = changed.keys().cloned().collect();
        &with_changes
    };

    // Open: the stream at the stored checkpoint (the source fixes its read bound), and the
    // committer that owns the durable order from there.
    let start = Start::of(stored.as_ref())?;
    let stream = open::stream(config, state, stored.as_ref(), &start).await?;
    let info = stream.info().clone();
    let ttl = config.lease.ttl();
    let identity = info.source_identity.clone();
    let mut committer = Committer::new(backends, lease, ttl, run_id, identity, start.clone());
    if start.position.is_none() {
        // A new stream's start is recorded before anything is read: a first run that
        // fails later resumes here instead of re-anchoring at a later "now" (MySQL and
        // SQL Server keep no server-side position for us), so nothing in between is lost.
        committer.start_checkpoint(info.start.clone()).await?;
    }
    tracing::info!(from = %info.start, bound = %info.bound, "stream open");

    // The tables' writers, minus the tables whose re-baseline is wanted; the shapes the
    // last run stored; what a run that died before its end left pending.
    let mut router = open::writers(config, &info, committer.run_id())?;
    let mut rebaselines = Rebaselines::new(config, state);
    rebaselines.skip_wanted(&mut router).await?;
    for (table, change) in &changed {
        let why = change.reason();
        rebaselines
            .ask(
                &mut router,
                table,
                Some(info.start.clone()),
                rebaseline::Why::Changed(&why),
            )
            .await?;
    }
    let shapes = Shapes::at_open(&info.tables)
        .load_stored(destination, &config.source.tables)
        .await?;
    if let Some(checkpoint) = stored.as_ref().filter(|c| c.run_id != committer.run_id()) {
        manifests::settle_interrupted(destination, router.tables.keys(), checkpoint).await?;
    }
    router.load_histories(destination).await?;
    let manifests = RunManifests {
        config,
        destination,
        run_id: committer.run_id().to_owned(),
        from: info.start.to_string(),
        policies: config
            .source
            .tables
            .iter()
            .filter_map(|t| Some((t.clone(), crate::policy::record::of(config, &policies, t)?)))
            .collect(),
    };
    let iceberg = crate::iceberg::ChangeLog::of(config, destination)?;
    let durable = Durable {
        committer,
        manifests,
        iceberg,
    };

    // Read: frame and route the changes up to the bound; at a transaction boundary where
    // it is due, parts durable → run manifests → checkpoint → ack.
    let mut pass = Pass::new(
        config,
        &options,
        stream,
        durable,
        router,
        shapes,
        rebaselines,
    );
    let ended = pass.read().await?;

    // End: the final flush and checkpoint, the manifests, the catalog, the run record.
    let mut summary = pass.finish(ended, &start, started).await?;
    // After everything is committed; a catalog failure is a warning (crate::registration).
    let captured = pass.router.captured();
    summary.catalog =
        crate::registration::register(config, destination, captured, options.abort_at).await;
    state.put_run(&config.job, &RunRecord::of(&summary)).await?;
    Ok(summary)
}
