//! The drain's side of the durable order: what a flush at a transaction boundary writes,
//! and in which order, before the checkpoint moves.
//!
//! Guarantees: at a flush every open part is closed and made durable
//! ([`crate::commit::Committer::make_durable`]), the column names seen are stored, the run
//! manifests list the parts the coming checkpoint will cover as pending, and — with
//! `table_format: iceberg` — each table's pending parts are committed to its Iceberg table
//! under a freshly confirmed lease; only then are the checkpoint written and the source
//! acked, by the committer, which owns that order. A part's manifest entry is recorded
//! only once the part is durable.

use super::manifests::RunManifests;
use super::shapes::Shapes;
use super::tables::Router;
use crate::commit::Committer;
use crate::error::Result;
use crate::iceberg::{ChangeLog, Stored};
use crate::parts::FinishedPart;
use crate::position::Position;
use crate::source::ChangeStream;

/// Where a run's parts go and what each checkpoint is preceded by.
pub struct Durable<'a> {
    pub committer: Committer<'a>,
    pub manifests: RunManifests<'a>,
    /// The Iceberg change log (`table_format: iceberg`).
    pub iceberg: Option<ChangeLog<'a>>,
}

impl Durable<'_> {
    /// Closes every open part, makes them durable, lists them as pending in the run
    /// manifests, stores the column names seen ([`Shapes::save`]), commits each table's
    /// pending parts to its Iceberg table (with `table_format: iceberg`), then checkpoints
    /// and acks `position`.
    pub async fn flush(
        &mut self,
        router: &mut Router,
        shapes: &mut Shapes,
        position: Position,
        stream: &mut dyn ChangeStream,
    ) -> Result<()> {
        for part in router.finish_all()? {
            self.publish(router, part).await?;
        }
        shapes
            .save(self.manifests.destination, &router.skipped)
            .await?;
        self.manifests
            .before_checkpoint(router, self.committer.checkpoint(), position.clone())
            .await?;
        let pending = router.tables.values().any(|t| t.committed < t.parts.len());
        // A table re-baselined by this run writes no parts, yet a crashed run may have
        // committed its changes: its Iceberg table is cleared of them too, once.
        let unswept = |log: &ChangeLog<'_>| router.skipped.iter().any(|t| !log.committed_to(t));
        if let Some(log) = self.iceberg.as_ref().filter(|log| pending || unswept(log)) {
            let committer = &mut self.committer;
            // The commit drops snapshots past the checkpoint this run knows: only the lease
            // holder knows it is the stored one.
            committer.confirm_lease().await?;
            let stored = committer.checkpoint();
            let stored = Stored {
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
        self.committer.checkpoint_and_ack(position, stream).await?;
        router.mark_committed();
        Ok(())
    }

    /// Makes one finished part durable through the committer and records it in its
    /// table's manifest entries.
    pub async fn publish(&self, router: &mut Router, part: FinishedPart) -> Result<()> {
        tracing::info!(key = %part.key, rows = part.rows, bytes = part.bytes, "part written");
        let schema = part.schema.clone();
        let entry = part.manifest_entry();
        self.committer.make_durable(part).await?;
        router.record_durable(schema, entry);
        Ok(())
    }
}
