//! The durable order, written once: **part durable → checkpoint → ack**.
//!
//! [`Committer`] owns the lease, the checkpoint version and the stream's acknowledgement.
//! Parts are uploaded before any checkpoint that covers them; the checkpoint write is
//! conditional on the lease token and the previous version (a lost lease stops the run
//! with `SLUICE_STATE_FENCED` before anything is acked); the source is acked only up to a
//! position the checkpoint already holds. Checkpoints only move forward. Named fault
//! points sit between the steps.

use std::time::{Duration, Instant};

use super::faults::{FaultPoint, hit};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::position::Position;
use crate::sink::FinishedPart;
use crate::source::ChangeStream;
use crate::state::{Lease, StateStore};

/// The durable-order state of one run.
pub struct Committer<'a> {
    pub state: &'a dyn StateStore,
    pub destination: &'a dyn Destination,
    pub lease: Lease,
    pub ttl: Duration,
    pub run_id: String,
    source_identity: String,
    /// Version of the stored checkpoint (0 = none yet).
    version: u64,
    /// The stored checkpoint position, if any.
    pub checkpoint: Option<Position>,
    /// The position the source has been acked to.
    acked: Option<Position>,
    lease_renewed: Instant,
}

impl<'a> Committer<'a> {
    /// A committer for a run holding `lease`, starting from the stored checkpoint.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        state: &'a dyn StateStore,
        destination: &'a dyn Destination,
        lease: Lease,
        ttl: Duration,
        run_id: String,
        source_identity: String,
        version: u64,
        checkpoint: Option<Position>,
    ) -> Self {
        Committer {
            state,
            destination,
            lease,
            ttl,
            run_id,
            source_identity,
            version,
            acked: checkpoint,
            checkpoint,
            lease_renewed: Instant::now(),
        }
    }

    /// Step 1: uploads a finished part; durable on return. The local file is removed
    /// afterwards whether or not the upload succeeded (a retry rebuilds it from the log).
    pub async fn make_durable(&self, part: FinishedPart) -> Result<()> {
        let uploaded = self.destination.put_part(&part.key, &part.local_path).await;
        if let Err(e) = part.discard() {
            tracing::warn!(error = %e, "could not remove a spilled part file");
        }
        uploaded?;
        hit(FaultPoint::PartDurable).await
    }

    /// Steps 2 and 3: moves the checkpoint to `position` (all parts covering it must
    /// already be durable), then acks the source up to it. A position at or behind the
    /// stored checkpoint only re-acks.
    pub async fn checkpoint_and_ack(
        &mut self,
        position: Position,
        stream: &mut dyn ChangeStream,
    ) -> Result<()> {
        let ahead = match &self.checkpoint {
            None => true,
            Some(current) => match position.partial_cmp(current) {
                Some(std::cmp::Ordering::Greater) => true,
                Some(_) => false,
                None => {
                    return Err(Error::new(
                        Code::Internal,
                        format!("position {position} cannot be compared with checkpoint {current}"),
                    ));
                }
            },
        };
        if ahead {
            hit(FaultPoint::BeforeCheckpoint).await?;
            let (stored, lease) = self
                .state
                .advance_checkpoint(
                    &self.lease,
                    self.ttl,
                    self.version,
                    &position.to_string(),
                    &self.source_identity,
                    &self.run_id,
                )
                .await?;
            self.version = stored.version;
            self.lease = lease;
            self.lease_renewed = Instant::now();
            self.checkpoint = Some(position);
            hit(FaultPoint::CheckpointWritten).await?;
        }
        let needs_ack = match (&self.acked, &self.checkpoint) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(acked), Some(cp)) => acked < cp,
        };
        if needs_ack && let Some(cp) = self.checkpoint {
            stream.ack(&cp).await?;
            self.acked = Some(cp);
            hit(FaultPoint::SourceAcked).await?;
        }
        Ok(())
    }

    /// Renews the lease when a third of its lifetime has passed since the last renewal.
    pub async fn keep_lease(&mut self) -> Result<()> {
        if self.lease_renewed.elapsed() >= self.ttl / 3 {
            self.lease = self.state.renew_lease(&self.lease, self.ttl).await?;
            self.lease_renewed = Instant::now();
        }
        Ok(())
    }
}
