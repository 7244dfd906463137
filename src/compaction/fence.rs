//! The lease a compaction holds on one table, as every destructive step sees it.
//!
//! Guarantees: [`Fence::renew`] is a fenced write in the state store — it fails with
//! `SLUICE_STATE_FENCED` once another compaction holds the lease — so a compaction that
//! lost its lease removes and commits nothing after its next renewal.

use crate::error::Result;
use crate::state::StateStore;
use crate::state::ops::OpLease;

/// The lease a compaction holds, renewed before every destructive step and whenever a
/// third of its lifetime has passed.
pub struct Fence<'a> {
    pub store: &'a dyn StateStore,
    pub lease: OpLease,
    pub ttl: std::time::Duration,
    /// When it was last granted or renewed.
    pub renewed: std::time::Instant,
}

impl<'a> Fence<'a> {
    /// The fence of a lease just granted.
    pub fn new(store: &'a dyn StateStore, lease: OpLease, ttl: std::time::Duration) -> Self {
        Fence {
            store,
            lease,
            ttl,
            renewed: std::time::Instant::now(),
        }
    }

    /// Renews the lease; `SLUICE_STATE_FENCED` when another compaction holds it now.
    pub async fn renew(&mut self) -> Result<()> {
        self.lease = self.store.renew_op_lease(&self.lease, self.ttl).await?;
        self.renewed = std::time::Instant::now();
        Ok(())
    }

    /// Renews the lease when a third of its lifetime has passed since the last renewal
    /// (a long rewrite keeps it).
    pub async fn keep(&mut self) -> Result<()> {
        if self.renewed.elapsed() >= self.ttl / 3 {
            self.renew().await?;
        }
        Ok(())
    }
}
