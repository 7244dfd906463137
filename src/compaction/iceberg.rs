//! Compaction of an Iceberg change log (`table_format: iceberg`, SQL and Glue catalogs):
//! each step's `replace` snapshot, the steps an interrupted compaction left uncommitted,
//! and the table's maintenance after the steps — snapshot expiry, the parts no retained
//! snapshot references, and orphan files.
//!
//! Guarantees (DESIGN, "After the drain", rules 2 and 4):
//!
//! * order per step: compacted parts durable → compaction manifest (`iceberg: pending`)
//!   → Iceberg `replace` commit → manifest rewritten `committed`; **no part is removed by
//!   a step**: a folder reader sees byte-identical copies (counted once), a reader
//!   following the manifests the live parts, an Iceberg reader the table's current
//!   snapshot — each exact at every instant;
//! * a step whose manifest is still `pending` (a compaction killed before or after its
//!   commit) is committed by the next compaction before anything else is planned, and
//!   never twice ([`crate::iceberg::maintenance::replace`] finds it by
//!   `sluice.compaction-id`, or by its parts already being the table's);
//! * a replaced part is deleted only once no retained snapshot references it: its step
//!   is `committed` and its `replace` snapshot is expired or is the oldest kept one, and
//!   the part is data of neither the oldest kept snapshot nor the current one;
//! * an orphan — a data file (`cdc-…`, `compacted-…`) no run manifest (`parts` or
//!   `pending`), no compaction manifest and no retained snapshot names, or a metadata
//!   file nothing reaches — is removed only when both the object and (for a part) the
//!   run or compaction its name carries are older than the safety age,
//!   max(`iceberg.snapshot_retention`, one day): a drain in flight never loses a part it
//!   may still commit;
//! * every removal happens under the compaction's fenced lease, renewed first.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{NaiveDateTime, Utc};

use super::fence::Fence;
use super::ledger::{CompactionManifest, IcebergRecord, Ledger, is_data_file};
use crate::destination::Destination;
use crate::error::Result;
use crate::faults::{FaultPoint, hit};
use crate::iceberg::ChangeLog;
use crate::iceberg::maintenance::Replaced;
use crate::iceberg::table_commit::RUN_KEY;

/// The shortest safety age of orphan removal.
pub const MIN_ORPHAN_AGE: Duration = Duration::from_secs(24 * 3600);

/// One table's Iceberg change log, as a compaction sees it.
pub struct IcebergTable<'a> {
    pub log: ChangeLog<'a>,
    pub table: &'a str,
    pub retention: Duration,
}

/// What the maintenance after the steps did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Maintained {
    pub snapshots_expired: u64,
    /// Replaced parts and metadata files no retained snapshot references, removed.
    pub files_removed: u64,
    pub orphans_removed: u64,
}

impl IcebergTable<'_> {
    /// Commits `manifest`'s step to the Iceberg table (once) and rewrites the manifest
    /// `committed`. The lease is renewed first.
    pub async fn commit(
        &self,
        destination: &dyn Destination,
        fence: &mut Fence<'_>,
        manifest: &mut CompactionManifest,
    ) -> Result<()> {
        fence.renew().await?;
        let done = self
            .log
            .compaction_step(
                self.table,
                &manifest.replaced,
                &manifest.parts,
                &manifest.step_id(),
            )
            .await?;
        hit(FaultPoint::CompactIcebergCommitted).await?;
        let snapshot_id = match done {
            Replaced::Committed { snapshot_id } => Some(snapshot_id),
            Replaced::AlreadyThere { snapshot_id } => snapshot_id,
        };
        manifest.iceberg = Some(IcebergRecord {
            status: IcebergRecord::COMMITTED.to_owned(),
            snapshot_id,
        });
        destination
            .put_marker(&manifest.key(), &manifest.to_json_bytes()?)
            .await
    }

    /// Commits, in step order, every step an earlier compaction recorded but left
    /// `pending`. Returns how many.
    pub async fn finish_pending(
        &self,
        destination: &dyn Destination,
        fence: &mut Fence<'_>,
        ledger: &Ledger,
    ) -> Result<u64> {
        let mut finished = 0;
        for manifest in ledger.compactions.values() {
            if !manifest
                .iceberg
                .as_ref()
                .is_some_and(IcebergRecord::pending)
            {
                continue;
            }
            tracing::info!(manifest = %manifest.key(), "committing a compaction step an interrupted compaction left pending");
            let mut manifest = manifest.clone();
            self.commit(destination, fence, &mut manifest).await?;
            finished += 1;
        }
        Ok(finished)
    }

    /// The live parts the table's current snapshot holds: only those are planned (a part
    /// written before the table was an Iceberg table is not in it and stays as it is).
    pub async fn restrict(&self, ledger: &mut Ledger) -> Result<()> {
        let live = self.log.live_keys(self.table).await?;
        ledger.listed.retain(|key, _| live.contains(key));
        Ok(())
    }

    /// Expires snapshots, removes the replaced parts and metadata files no retained
    /// snapshot references, then orphans. Reads the folder again first.
    pub async fn maintain(
        &self,
        destination: &dyn Destination,
        fence: &mut Fence<'_>,
    ) -> Result<Maintained> {
        let mut done = Maintained::default();
        fence.renew().await?;
        let Some(kept) = self.log.expire(self.table, self.retention).await? else {
            return Ok(done);
        };
        done.snapshots_expired = kept.expired;
        done.files_removed = kept.files_removed;
        let ledger = Ledger::read(destination, self.table).await?;
        let live: BTreeSet<&str> = ledger.live().map(|p| p.part.key.as_str()).collect();
        let mut doomed = Vec::new();
        for manifest in ledger.compactions.values() {
            let Some(record) = manifest.iceberg.as_ref().filter(|r| !r.pending()) else {
                continue;
            };
            let unreferenced = match record.snapshot_id {
                None => true,
                Some(id) => !kept.ids.contains(&id) || kept.oldest == Some(id),
            };
            if !unreferenced {
                continue;
            }
            for part in &manifest.replaced {
                if ledger.objects.contains(&part.key)
                    && !kept.live.contains(&part.key)
                    && !live.contains(part.key.as_str())
                {
                    doomed.push(part.key.clone());
                }
            }
        }
        if !doomed.is_empty() {
            fence.renew().await?;
        }
        for key in &doomed {
            tracing::info!(part = %key, "removing a part no retained Iceberg snapshot references");
            destination.delete(key).await?;
            done.files_removed += 1;
        }
        done.orphans_removed = self
            .remove_orphans(destination, fence, &ledger, &kept.live)
            .await?;
        Ok(done)
    }

    async fn remove_orphans(
        &self,
        destination: &dyn Destination,
        fence: &mut Fence<'_>,
        ledger: &Ledger,
        kept_live: &BTreeSet<String>,
    ) -> Result<u64> {
        let safety = self.retention.max(MIN_ORPHAN_AGE);
        let before = Utc::now().timestamp_millis() - safety.as_millis() as i64;
        let objects = destination
            .list_modified(&format!("{}/", self.table))
            .await?;
        let mut doomed = self
            .log
            .orphan_metadata(self.table, &objects, before)
            .await?;
        let runs: BTreeSet<String> = self
            .log
            .snapshots(self.table)
            .await?
            .iter()
            .filter_map(|s| s.summary.get(RUN_KEY).cloned())
            .collect();
        let named = |key: &str| {
            ledger.listed.contains_key(key)
                || ledger.replaced.contains(key)
                || ledger.pending.contains(key)
                || kept_live.contains(key)
        };
        for (key, modified) in &objects {
            if !is_data_file(self.table, key) || named(key) || !modified.is_some_and(|m| m < before)
            {
                continue;
            }
            let Some((id, at_ms)) = writer_of(key) else {
                continue;
            };
            if at_ms >= before || runs.contains(id) {
                continue;
            }
            doomed.push(key.clone());
        }
        if !doomed.is_empty() {
            fence.renew().await?;
        }
        for key in &doomed {
            tracing::info!(file = %key, "removing an orphan file of the Iceberg table");
            destination.delete(key).await?;
        }
        Ok(doomed.len() as u64)
    }
}

/// The run or compaction id a drain's or compaction's part name carries
/// (`cdc-<run id>-<n>.parquet`, `compacted-<id>-<n>.parquet`) and when it started (ms);
/// `None` for any other name.
pub fn writer_of(key: &str) -> Option<(&str, i64)> {
    let name = key.rsplit('/').next()?;
    let rest = name
        .strip_prefix("cdc-")
        .or_else(|| name.strip_prefix(super::ledger::COMPACTED_PREFIX))?
        .strip_suffix(".parquet")?;
    let id = rest.rsplit_once('-')?.0;
    let stamp = id.split('-').next()?;
    let at = NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%S%3fZ").ok()?;
    Some((id, at.and_utc().timestamp_millis()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_name_carries_its_writer_and_when_it_started() {
        let (id, at) = writer_of("t/cdc-20261207T010203004Z-a1b2c3-000001.parquet").unwrap();
        assert_eq!(id, "20261207T010203004Z-a1b2c3");
        assert_eq!(at % 1000, 4);
        assert_eq!(
            writer_of("t/dt=2026-12-07/compacted-20261207T010203004Z-a1b2c3-000002.parquet")
                .map(|w| w.0),
            Some("20261207T010203004Z-a1b2c3")
        );
        assert!(writer_of("t/snapshot/p/part-000001.parquet").is_none());
    }
}
