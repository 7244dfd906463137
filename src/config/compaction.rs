//! The `compaction` block: how `sluice compact` rewrites a table's small change parts
//! into few large ones (docs/compaction.md).
//!
//! Guarantees: every key has a default, so a config without the block compacts with
//! them; the values are range-checked at parse ([`CompactionConfig::check`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};

/// `compaction:` in the config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionConfig {
    /// A compacted part is cut once it holds about this many bytes of its inputs; a part
    /// at least three quarters of it is left as it is.
    pub target_bytes: u64,
    /// Only parts whose run manifest was last written at least this long ago are
    /// rewritten: a recent run's parts are left to the next compaction.
    pub min_age_seconds: u64,
    /// Lifetime of the compaction's lease of a table, renewed as the work goes on.
    pub lease_ttl_seconds: u64,
    /// Remove the change parts a re-baseline superseded (every change before the
    /// table's current epoch marker, which the replay rule drops anyway).
    pub drop_superseded: bool,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            target_bytes: 128 * 1024 * 1024,
            min_age_seconds: 3600,
            lease_ttl_seconds: 900,
            drop_superseded: true,
        }
    }
}

impl CompactionConfig {
    /// Smallest `target_bytes` accepted (tests use small targets; real ones are MiBs).
    pub const MIN_TARGET_BYTES: u64 = 1024;

    /// The lease lifetime.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_seconds)
    }

    /// The age a part's run manifest must have.
    pub fn min_age(&self) -> Duration {
        Duration::from_secs(self.min_age_seconds)
    }

    /// Range checks.
    pub fn check(&self) -> Result<()> {
        if self.target_bytes < Self::MIN_TARGET_BYTES {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!(
                    "compaction.target_bytes ({}) must be at least {}",
                    self.target_bytes,
                    Self::MIN_TARGET_BYTES
                ),
            )
            .hint("the default, 134217728 (128 MiB), suits most readers"));
        }
        if self.lease_ttl_seconds < 2 {
            return Err(Error::new(
                Code::ConfigInvalid,
                "compaction.lease_ttl_seconds must be at least 2",
            ));
        }
        Ok(())
    }
}
