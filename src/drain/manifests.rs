//! The drain's run manifests, `<table>/_manifests/<run_id>.json`: a reader that follows
//! them finds every checkpointed part exactly once, also when the run died later.
//!
//! Guarantees: before each checkpoint the run rewrites its manifest (status `running`)
//! listing the parts earlier checkpoints cover in `parts` and the parts the coming
//! checkpoint will cover in `pending`; `pending` is never data. At a clean end the
//! manifest is rewritten with its final status and no `pending`. A run that finds the
//! job's stored checkpoint written by another run settles that run's manifests first
//! (pending parts become data when the checkpoint reached the one they waited for, else
//! they are dropped) — before it writes a checkpoint of its own, so no manifest is left with
//! data in `pending`. A run that was fenced keeps status `running`; its `parts` are data.

use chrono::Utc;

use super::tables::Router;
use crate::config::Config;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::{MANIFEST_FILE, Manifest, ManifestRun, ManifestStatus};
use crate::position::Position;
use crate::state::Checkpoint;
use crate::summary::{RunStatus, RunSummary};

/// The key of `run_id`'s manifest for `table`.
pub fn run_manifest_key(table: &str, run_id: &str) -> String {
    format!("{table}/_manifests/{run_id}.json")
}

/// Settles the manifests the run that wrote `checkpoint` left `running` (it died before
/// its clean end), for each of `tables`.
pub async fn settle_interrupted<'a>(
    destination: &dyn Destination,
    tables: impl IntoIterator<Item = &'a String>,
    checkpoint: &Checkpoint,
) -> Result<()> {
    if checkpoint.run_id.is_empty() {
        return Ok(());
    }
    let reads = tables.into_iter().map(|table| async move {
        let key = run_manifest_key(table, &checkpoint.run_id);
        let body = destination.get(&key).await?;
        Ok::<_, Error>((key, body))
    });
    for read in futures_util::future::join_all(reads).await {
        let (key, body) = read?;
        let Some(body) = body else { continue };
        let mut manifest: Manifest = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                Code::StateCorrupt,
                format!("{key} is not a sluice run manifest"),
            )
            .hint(format!(
                "restore the object from a version, or move it aside (e.g. under _superseded/) and rerun; \
                 the parts of run {} are its cdc-{}-*.parquet objects",
                checkpoint.run_id, checkpoint.run_id
            ))
            .source(e)
        })?;
        let stored = Position::parse_tagged(&checkpoint.position)?;
        let covered = |to: &str| {
            Position::parse_tagged(to)
                .ok()
                .and_then(|to| to.partial_cmp(&stored))
                .is_some_and(|order| order.is_le())
        };
        if manifest.settle(covered, Utc::now()) {
            tracing::info!(%key, parts = manifest.parts.len(), "settled the run manifest of an interrupted run");
            super::history::merge(destination, &manifest.table, &manifest.shapes).await?;
            destination
                .put_marker(&key, &manifest.to_json_bytes()?)
                .await?;
        }
    }
    Ok(())
}

/// Who is writing, for the manifests of one run.
pub struct RunManifests<'a> {
    pub config: &'a Config,
    pub destination: &'a dyn Destination,
    pub run_id: String,
    /// Position text the run started from.
    pub from: String,
    /// Each table's policy, as its manifests record it (absent: none).
    pub policies: std::collections::BTreeMap<String, crate::policy::record::PolicyRecord>,
}

impl RunManifests<'_> {
    /// Before the checkpoint at `to`: each table whose manifest is not current gets it
    /// rewritten — the parts earlier checkpoints cover in `parts`, the rest in `pending`
    /// for `to` — so at every checkpoint write the manifest lists every durable part.
    /// `committed` is the run's current checkpoint.
    pub async fn before_checkpoint(
        &self,
        router: &mut Router,
        committed: Option<Position>,
        to: Position,
    ) -> Result<()> {
        for (table, output) in &mut router.tables {
            let listing = (output.committed, output.parts.len());
            if listing == output.in_manifest {
                continue;
            }
            let Some(schema) = output.schema.as_deref() else {
                continue;
            };
            let run = self.run(table, ManifestStatus::Running, committed.clone());
            let manifest = Manifest::new(
                run,
                output.parts[..output.committed].to_vec(),
                schema,
                Utc::now(),
            )
            .with_pending(to.to_string(), output.parts[output.committed..].to_vec())
            .with_shapes(output.new_shapes.clone())
            .with_policy(self.policies.get(table).cloned());
            self.destination
                .put_marker(
                    &run_manifest_key(table, &self.run_id),
                    &manifest.to_json_bytes()?,
                )
                .await?;
            output.in_manifest = listing;
        }
        Ok(())
    }

    /// At the run's end: each table's run manifest with its final status, and at a clean
    /// end its `_manifest.json` and then `_SUCCESS`.
    pub async fn at_end(&self, router: &Router, summary: &RunSummary) -> Result<()> {
        let status = match summary.status {
            RunStatus::Partial => ManifestStatus::Partial,
            _ => ManifestStatus::Drained,
        };
        for (table, output) in &router.tables {
            let Some(schema) = output.schema.as_deref() else {
                continue;
            };
            let mut run = self.run(table, status, None);
            run.to = summary.to.clone().unwrap_or_default();
            let manifest = Manifest::new(run, output.parts.clone(), schema, Utc::now())
                .with_shapes(output.new_shapes.clone())
                .with_policy(self.policies.get(table).cloned());
            let body = manifest.to_json_bytes()?;
            if !output.new_shapes.is_empty() {
                super::history::save(self.destination, &output.history).await?;
            }
            if !output.parts.is_empty() {
                self.destination
                    .put_marker(&run_manifest_key(table, &self.run_id), &body)
                    .await?;
            }
            if summary.status == RunStatus::Drained {
                self.destination
                    .put_marker(&format!("{table}/{MANIFEST_FILE}"), &body)
                    .await?;
                let success = serde_json::json!({ "run_id": self.run_id, "to": summary.to });
                self.destination
                    .put_marker(&format!("{table}/_SUCCESS"), success.to_string().as_bytes())
                    .await?;
            }
        }
        Ok(())
    }

    fn run(&self, table: &str, status: ManifestStatus, to: Option<Position>) -> ManifestRun {
        ManifestRun {
            job: self.config.job.clone(),
            table: table.to_owned(),
            run_id: self.run_id.to_owned(),
            status,
            from: self.from.clone(),
            to: to.map(|p| p.to_string()).unwrap_or_default(),
        }
    }
}
