//! `sluice forget` in the current state (`<table>/_current_state/`, docs/current-state.md):
//! every file there holding a row of a key is rewritten without it or removed.
//!
//! Guarantees: under the job's materialization lease (no build runs meanwhile), the files
//! the pointer names that hold a key are rewritten — the same rows minus the keys', in
//! order — into the next version's folder; then the pointer naming them replaces the old
//! one (fault point `forget_state_written`); then every file under the folder holding a
//! key (the old ones, and files of earlier versions no pointer names) is removed. A reader
//! reads one pointer's files: before the swap the old version, after it the new one. A
//! crash before the swap leaves an unnamed folder the next build (or forget) clears; after
//! it, the next forget finds the old files unnamed and removes them. The state's watermark
//! is kept: the keys' rows are gone from the parts too, so no later build brings them back.

use std::collections::BTreeMap;

use chrono::{SecondsFormat, Utc};

use super::keys::Matcher;
use super::{FileForgotten, ForgetSummary};
use crate::backends::Backends;
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::faults::{FaultPoint, hit};
use crate::materialize::version::{self, FOLDER};

/// Forgets the keys in `table`'s current state, recording each file in `summary`.
pub async fn forget(
    config: &Config,
    backends: &Backends,
    table: &str,
    matcher: &Matcher,
    summary: &mut ForgetSummary,
) -> Result<()> {
    let destination = backends.destination.as_ref();
    let prefix = format!("{table}/{FOLDER}/");
    let listed = destination.list(&prefix).await?;
    if !listed.iter().any(|k| k.ends_with(".parquet")) {
        return Ok(());
    }
    let owner = crate::state::holder::owner(&summary.forget_id, Some("forget"));
    let leased = crate::state::with_lease(
        backends.state.as_ref(),
        &crate::materialize::lease_name(&config.job),
        &owner,
        config.lease.ttl(),
        |_lease| under_lease(backends, table, matcher),
    )
    .await?;
    match leased {
        crate::state::Leased::Ran(files) => {
            summary.state_files.extend(files);
            Ok(())
        }
        crate::state::Leased::Held { owner, .. } => Err(Error::new(
            Code::StateLeaseHeld,
            format!("a build of job {}'s current state holds its lease ({owner}); the parts are done, the current state is not", config.job),
        )
        .hint("run sluice forget again once the build is done: it finds the parts done and rewrites the current state")),
    }
}

async fn under_lease(
    backends: &Backends,
    table: &str,
    matcher: &Matcher,
) -> Result<Vec<FileForgotten>> {
    let destination = backends.destination.as_ref();
    let pointer = version::read(destination, table).await?;
    let named = pointer.as_ref().map_or(0, |p| p.version);
    // A crashed build's (or forget's) folder was never named: cleared before writing.
    version::remove_files(destination, table, |v, _| v <= named).await?;
    let mut holders: BTreeMap<String, (Vec<arrow_array::RecordBatch>, u64)> = BTreeMap::new();
    for (_, key) in version::listed_versions(destination, table).await? {
        if !key.ends_with(".parquet") {
            continue;
        }
        let batches = crate::lake::files::read_file(destination, &key).await?;
        let mut removed = 0u64;
        let mut kept = Vec::with_capacity(batches.len());
        for batch in &batches {
            let keep = matcher.keep(batch)?;
            removed += (batch.num_rows() - keep.true_count()) as u64;
            kept.push(
                arrow_select::filter::filter_record_batch(batch, &keep).map_err(|e| {
                    Error::new(Code::Internal, "filtering a current-state file").source(e)
                })?,
            );
        }
        if removed > 0 {
            holders.insert(key, (kept, removed));
        }
    }
    if holders.is_empty() {
        return Ok(Vec::new());
    }
    let mut done = Vec::new();
    let mut by: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut sizes: BTreeMap<String, u64> = BTreeMap::new();
    if let Some(old) = pointer
        .as_ref()
        .filter(|p| p.files.iter().any(|f| holders.contains_key(f)))
    {
        let folder = version::folder_key(table, old.version + 1);
        let mut rows = old.rows;
        for file in &old.files {
            let Some((kept, removed)) = holders.get(file) else {
                continue;
            };
            rows = rows.saturating_sub(*removed);
            let left: usize = kept.iter().map(|b| b.num_rows()).sum();
            let new = if left == 0 {
                None
            } else {
                let schema = kept[0].schema();
                let batch = arrow_select::concat::concat_batches(&schema, kept).map_err(|e| {
                    Error::new(Code::Internal, "joining a current-state file's rows").source(e)
                })?;
                let name = file.rsplit('/').next().unwrap_or("bucket.parquet");
                let key = format!("{folder}/{name}");
                let body = crate::materialize::encode(&batch)?;
                sizes.insert(key.clone(), body.len() as u64);
                destination.put_marker(&key, &body).await?;
                Some(key)
            };
            by.insert(file.clone(), new);
        }
        let swap = |f: &String| by.get(f).cloned().unwrap_or_else(|| Some(f.clone()));
        let mut pointer = old.clone();
        pointer.version = old.version + 1;
        pointer.files = old.files.iter().filter_map(swap).collect();
        pointer.buckets = old
            .buckets
            .iter()
            .map(|b| b.as_ref().and_then(swap))
            .collect();
        pointer.bucket_bytes = old
            .buckets
            .iter()
            .enumerate()
            .map(|(b, file)| match file.as_ref().and_then(|f| by.get(f)) {
                Some(new) => new
                    .as_ref()
                    .and_then(|k| sizes.get(k))
                    .copied()
                    .unwrap_or(0),
                None => old.bucket_bytes.get(b).copied().unwrap_or(0),
            })
            .collect();
        pointer.rows = rows;
        pointer.previous_files = old
            .files
            .iter()
            .filter(|f| !holders.contains_key(*f))
            .cloned()
            .collect();
        pointer.build = "forget".into();
        pointer.parts_read = 0;
        pointer.written_at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        version::write(destination, &pointer).await?;
        hit(FaultPoint::ForgetStateWritten).await?;
    }
    for (key, (_, removed)) in &holders {
        destination.delete(key).await?;
        done.push(FileForgotten {
            key: key.clone(),
            by: by.get(key).cloned().flatten(),
            rows_removed: *removed,
        });
    }
    Ok(done)
}
