//! The durable order of a compaction, written once: the compacted parts are uploaded and
//! durable, **then** the compaction manifest naming them and the parts they replace is
//! written, **then** the replaced parts are removed — with a named fault point after each
//! step — and what a compaction killed anywhere left is finished by the next one.
//!
//! Guarantees (DESIGN, "After the drain", rules 2 and 4):
//!
//! * a reader that lists the folder at any instant finds every row at least once, and
//!   any row twice only as a byte-identical copy (the replay rule's duplicates clause
//!   counts it once): before the manifest the compacted parts are extra copies; after it
//!   the replaced parts are, until they are removed;
//! * a reader that follows the manifests finds every row exactly once at any instant
//!   ([`super::ledger::Ledger::live`]): before the manifest, the replaced parts are live
//!   and the compacted ones are named by nothing; after it, the compacted ones are live;
//! * the lease is renewed (a fenced write) before the manifest is written and before the
//!   first removal, so a compaction that lost its lease removes nothing;
//! * [`withdraw_void`]: a manifest naming a part that is gone while every row it replaced
//!   is still held elsewhere (what a compaction fenced just before its manifest leaves)
//!   is withdrawn; otherwise a gone part is `SLUICE_COMPACTION_PART_CORRUPT`;
//! * [`finish_earlier`]: a manifest whose replaced parts are still there (a compaction
//!   killed after writing it) has them removed — once every part it wrote is found in the
//!   folder, else `SLUICE_COMPACTION_PART_CORRUPT` and nothing is removed;
//!   [`sweep_orphans`]: compacted parts no manifest names (a compaction killed before its
//!   manifest, or that failed) are removed, after the manifest folder is listed again.

use std::collections::BTreeSet;

use chrono::Utc;

pub use super::fence::Fence;
use super::iceberg::IcebergTable;
use super::ledger::{COMPACTED_PREFIX, COMPACTIONS_DIR, CompactionManifest, IcebergRecord, Ledger};
use super::rewrite::{Output, corrupt};
use crate::destination::Destination;
use crate::error::Result;
use crate::faults::{FaultPoint, hit};
use crate::parts::ManifestPart;

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StepDone {
    pub replaced: u64,
    pub written: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub rows: u64,
}

/// One step of compaction `compaction_id` of `table`: uploads `outputs` (the compacted
/// parts holding the rows of `replaced`), writes the manifest, removes `replaced`. A step
/// that drops parts a re-baseline superseded has no outputs and names the marker
/// (`superseded_by`).
///
/// With an Iceberg table (`iceberg`) the manifest is written `pending`, the step's
/// `replace` snapshot is committed after it (fault point `compact_iceberg_committed`),
/// the manifest is then rewritten `committed` — and nothing is removed: the table's
/// retained snapshots still reference the replaced parts, which the expiry removes.
#[allow(clippy::too_many_arguments)]
pub async fn commit(
    destination: &dyn Destination,
    fence: &mut Fence<'_>,
    (job, table): (&str, &str),
    (compaction_id, step): (&str, u32),
    outputs: Vec<Output>,
    replaced: Vec<ManifestPart>,
    superseded_by: Option<&str>,
    iceberg: Option<&IcebergTable<'_>>,
) -> Result<StepDone> {
    let mut parts = Vec::with_capacity(outputs.len());
    let mut outputs = outputs.into_iter();
    while let Some(output) = outputs.next() {
        let uploaded = destination.put_part(&output.entry.key, &output.local).await;
        parts.push(output.entry.clone());
        output.discard();
        if let Err(e) = uploaded {
            outputs.for_each(Output::discard);
            return Err(e);
        }
        hit(FaultPoint::CompactPartDurable).await?;
    }
    fence.renew().await?;
    let mut manifest = CompactionManifest::new(
        (job, table),
        (compaction_id, step),
        parts,
        replaced,
        Utc::now(),
    );
    manifest.superseded_by = superseded_by.map(str::to_owned);
    if iceberg.is_some() {
        manifest.iceberg = Some(IcebergRecord {
            status: IcebergRecord::PENDING.to_owned(),
            snapshot_id: None,
        });
    }
    destination
        .put_marker(&manifest.key(), &manifest.to_json_bytes()?)
        .await?;
    tracing::info!(
        table,
        manifest = %manifest.key(),
        written = manifest.parts.len(),
        replaced = manifest.replaced.len(),
        "compaction step recorded"
    );
    hit(FaultPoint::CompactManifestWritten).await?;
    fence.renew().await?;
    // A compaction that took the lease over while this one was paused between its
    // renewal and its manifest may have removed this step's parts as unnamed: then the
    // manifest names what is gone, and is withdrawn before anything is removed.
    for part in &manifest.parts {
        if destination.get_range(&part.key, 0, 1).await?.is_none() {
            destination.delete(&manifest.key()).await?;
            return Err(crate::error::Error::new(
                crate::error::Code::StateFenced,
                format!(
                    "compaction step {} lost its part {} to a compaction that took the lease over; its manifest is withdrawn",
                    manifest.key(),
                    part.key
                ),
            )
            .hint("nothing was removed; the next compaction redoes the step"));
        }
    }
    if let Some(iceberg) = iceberg {
        iceberg.commit(destination, fence, &mut manifest).await?;
    } else {
        for part in &manifest.replaced {
            destination.delete(&part.key).await?;
            hit(FaultPoint::CompactPartRemoved).await?;
        }
    }
    hit(FaultPoint::CompactStepDone).await?;
    Ok(StepDone {
        replaced: manifest.replaced.len() as u64,
        written: manifest.parts.len() as u64,
        bytes_read: manifest.replaced_bytes,
        bytes_written: manifest.bytes,
        rows: manifest.rows,
    })
}

/// Withdraws the compaction manifests that name a part which is gone (and not replaced
/// by a later compaction) while every part they replaced is still in the folder or
/// replaced by another manifest — what a compaction that lost its lease while paused just
/// before its manifest leaves, once the compaction that took over removed its unnamed
/// parts. Their rows are all still held elsewhere, so the manifest is removed and the
/// live parts are whole again. A manifest naming a gone part whose rows are held nowhere
/// else is `SLUICE_COMPACTION_PART_CORRUPT`. Returns how many it withdrew (read the
/// ledger again then).
pub async fn withdraw_void(
    destination: &dyn Destination,
    fence: &mut Fence<'_>,
    ledger: &Ledger,
) -> Result<u64> {
    let mut withdrawn = 0;
    for (key, manifest) in &ledger.compactions {
        let Some(gone) = manifest
            .parts
            .iter()
            .find(|p| !ledger.objects.contains(&p.key) && !ledger.replaced.contains(&p.key))
        else {
            continue;
        };
        let held_elsewhere = |part: &ManifestPart| {
            ledger.objects.contains(&part.key)
                || ledger
                    .compactions
                    .iter()
                    .any(|(k, m)| k != key && m.replaced.iter().any(|r| r.key == part.key))
        };
        if !manifest.replaced.iter().all(held_elsewhere) {
            return Err(corrupt(
                gone,
                format!("is named by compaction manifest {key} but is gone"),
            ));
        }
        if withdrawn == 0 {
            fence.renew().await?;
        }
        tracing::warn!(manifest = %key, part = %gone.key, "withdrawing a compaction manifest whose part is gone and whose rows are held elsewhere (a compaction that lost its lease)");
        destination.delete(key).await?;
        withdrawn += 1;
    }
    Ok(withdrawn)
}

/// Removes what earlier compactions' manifests replaced and is still in the folder: the
/// rest of a compaction killed between its manifest and its last removal. Returns how
/// many parts it removed.
pub async fn finish_earlier(
    destination: &dyn Destination,
    fence: &mut Fence<'_>,
    ledger: &Ledger,
) -> Result<u64> {
    let mut removed = 0;
    for manifest in ledger.compactions.values() {
        // An Iceberg step's replaced parts stay until the expiry removes them.
        if manifest.iceberg.is_some() {
            continue;
        }
        let left: Vec<&ManifestPart> = manifest
            .replaced
            .iter()
            .filter(|p| ledger.objects.contains(&p.key))
            .collect();
        if left.is_empty() {
            continue;
        }
        // Its parts hold the rows of those it replaced: they must be there (or replaced
        // by a later compaction in turn) before anything is removed.
        for part in &manifest.parts {
            if !ledger.objects.contains(&part.key) && !ledger.replaced.contains(&part.key) {
                return Err(corrupt(
                    part,
                    format!(
                        "is named by compaction manifest {} but is gone",
                        manifest.key()
                    ),
                ));
            }
        }
        if removed == 0 {
            fence.renew().await?;
        }
        tracing::info!(manifest = %manifest.key(), parts = left.len(), "finishing an interrupted compaction step");
        for part in left {
            destination.delete(&part.key).await?;
            removed += 1;
            hit(FaultPoint::CompactPartRemoved).await?;
        }
    }
    Ok(removed)
}

/// Removes the compacted parts of `table` that no compaction manifest names (byte-identical
/// copies a compaction killed before its manifest left), except those of `ours`. The
/// manifest folder is listed again first: the parts of a compaction with a manifest
/// written since the ledger was read are kept. Returns how many it removed.
pub async fn sweep_orphans(
    destination: &dyn Destination,
    fence: &mut Fence<'_>,
    ledger: &Ledger,
    table: &str,
    ours: &str,
) -> Result<u64> {
    let orphans = ledger.orphans();
    if orphans.is_empty() {
        return Ok(0);
    }
    fence.renew().await?;
    let manifests: BTreeSet<String> = destination
        .list(&format!("{table}/{COMPACTIONS_DIR}/"))
        .await?
        .into_iter()
        .collect();
    let mut removed = 0;
    for key in orphans {
        let Some(id) = compaction_of(&key) else {
            continue;
        };
        let prefix = format!("{table}/{COMPACTIONS_DIR}/{id}-");
        // A manifest of its compaction written since the ledger was read may name it:
        // left to the next compaction, which reads that manifest.
        let named_since = manifests
            .iter()
            .any(|m| m.starts_with(&prefix) && !ledger.compactions.contains_key(m));
        if id == ours || named_since {
            continue;
        }
        tracing::info!(part = %key, "removing a compacted part no manifest names (a compaction stopped before its manifest)");
        destination.delete(&key).await?;
        removed += 1;
    }
    Ok(removed)
}

/// The compaction id of a compacted part's key.
fn compaction_of(key: &str) -> Option<&str> {
    let name = key.rsplit('/').next()?;
    let rest = name
        .strip_prefix(COMPACTED_PREFIX)?
        .strip_suffix(".parquet")?;
    Some(rest.rsplit_once('-')?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compacted_part_names_its_compaction() {
        assert_eq!(
            compaction_of("t/dt=2026-12-01/compacted-20261201T000000000Z-abcdef-000003.parquet"),
            Some("20261201T000000000Z-abcdef")
        );
        assert_eq!(compaction_of("t/cdc-r-000001.parquet"), None);
    }
}
