//! Iceberg maintenance by sluice itself (SQL and Glue catalogs): a compaction step's
//! `replace` snapshot, snapshot expiry, and the files no retained snapshot references.
//!
//! Guarantees:
//!
//! * [`replace`] commits one snapshot (operation `replace`) in which the data files a
//!   compaction step replaced are `DELETED` and the compacted parts holding the same rows
//!   are `ADDED`: the table's rows are unchanged. It goes through the catalog's
//!   conditional swap like every commit: when a drain (or anything) moved the pointer
//!   first, it reads the table again and redoes itself on the new metadata, so the
//!   drain's snapshot is kept either way. The snapshot's summary carries the step
//!   (`sluice.compaction-id` = `<compaction id>-<step>`) and `sluice.job`: a step found in
//!   the table's snapshots — or whose compacted parts are data of the current snapshot
//!   while none of its replaced files is — is never committed twice;
//! * only the manifests holding a replaced file are rewritten (merged into one manifest
//!   of `EXISTING` and `DELETED` entries, each with its sequence numbers made explicit);
//!   every other manifest — a drain snapshot's, whose `added_snapshot_id` the drain's
//!   crash rule drops by — is carried unchanged. A step refuses to replace a file that
//!   is not a data file of the current snapshot (`SLUICE_ICEBERG_METADATA`);
//! * [`expire`] keeps the current snapshot, every ancestor newer than the retention, and
//!   every ancestor back to the newest drain snapshot (`sluice.checkpoint`): the one the
//!   drain's crash rule may still have to drop is always reachable from the current one.
//!   The kept snapshots are a newest-first run of the current ancestry, so a manifest or
//!   data file an expired snapshot shares with a kept one is in the oldest kept one:
//!   what it deletes (after the commit) is the expired snapshots' manifest lists, their
//!   manifests the oldest kept snapshot does not list, and metadata JSON files older than
//!   the last [`METADATA_FILES_KEPT`]. Data files are the caller's to delete
//!   ([`Retained`]). Baseline plans of expired snapshots stay known
//!   (`sluice.expired-plan-ids`), so a baseline is never committed twice;
//! * [`orphan_metadata`] names only `.avro` and `.metadata.json` files under
//!   `_iceberg/metadata/` written before a given instant that nothing the current
//!   metadata reaches names.

use std::collections::BTreeSet;

use super::catalog::Catalog;
use super::manifest::{self, DELETED, DataFile, EXISTING, Entry, ManifestFile};
use super::metadata::{Snapshot, TableMetadata};
use super::table_commit::{
    ATTEMPTS, CHECKPOINT_KEY, EXPIRED_PLANS_PROPERTY, JOB_KEY, PLAN_KEY, file_number,
    read_metadata, with_ids,
};
use super::table_ref::TableRef;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};

/// The summary key naming the compaction step a `replace` snapshot commits.
pub const COMPACTION_KEY: &str = "sluice.compaction-id";

/// Metadata JSON files an expiry keeps (the current one and the newest earlier ones).
pub const METADATA_FILES_KEPT: usize = 10;

/// How a `replace` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replaced {
    /// The snapshot is current.
    Committed { snapshot_id: i64 },
    /// An earlier attempt committed it (the snapshot, when still in the table).
    AlreadyThere { snapshot_id: Option<i64> },
}

/// What an expiry kept: the caller may delete a data file only when it is data of no
/// kept snapshot.
#[derive(Debug, Clone, Default)]
pub struct Retained {
    /// The kept snapshots.
    pub ids: BTreeSet<i64>,
    /// The oldest kept snapshot of the current ancestry.
    pub oldest: Option<i64>,
    /// The data files of the oldest kept snapshot and of the current one.
    pub live: BTreeSet<String>,
    /// Snapshots expired now.
    pub expired: u64,
    /// Metadata files (lists, manifests, metadata JSON) deleted now.
    pub files_removed: u64,
}

/// The table's current metadata location and metadata; `None` when it does not exist.
pub async fn current(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
) -> Result<Option<(String, TableMetadata)>> {
    let Some(location) = catalog.load(at.namespace, &at.name).await? else {
        return Ok(None);
    };
    let metadata = read_metadata(store, at, &location).await?;
    Ok(Some((location, metadata)))
}

pub(crate) async fn read_required(
    store: &dyn Destination,
    at: &TableRef<'_>,
    uri: &str,
) -> Result<Vec<u8>> {
    let key = at.key_of(uri)?;
    store.get(&key).await?.ok_or_else(|| {
        Error::new(
            Code::IcebergMetadata,
            format!(
                "{uri}, named by Iceberg table {}, does not exist",
                at.qualified()
            ),
        )
        .hint("restore the file, or point the catalog row at `previous_metadata_location`")
    })
}

/// The manifests of `snapshot`.
pub async fn manifests_of(
    store: &dyn Destination,
    at: &TableRef<'_>,
    snapshot: &Snapshot,
) -> Result<Vec<ManifestFile>> {
    let body = read_required(store, at, &snapshot.manifest_list).await?;
    manifest::read_list(&body, &snapshot.manifest_list)
}

/// The data files (locations) of `snapshot`: every live entry of its data manifests.
pub async fn data_files_of(
    store: &dyn Destination,
    at: &TableRef<'_>,
    snapshot: &Snapshot,
) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for m in manifests_of(store, at, snapshot).await? {
        let body = read_required(store, at, &m.path).await?;
        for e in manifest::read_manifest(&body, &m.path)? {
            if e.live() {
                out.insert(e.path().to_owned());
            }
        }
    }
    Ok(out)
}

/// The data files of the table's current snapshot (empty for a table without one).
pub async fn live_files(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
) -> Result<BTreeSet<String>> {
    let Some((_, metadata)) = current(store, catalog, at).await? else {
        return Ok(BTreeSet::new());
    };
    match metadata
        .current_snapshot_id
        .and_then(|id| metadata.snapshot(id))
    {
        Some(s) => data_files_of(store, at, s).await,
        None => Ok(BTreeSet::new()),
    }
}

/// Commits compaction step `step_id` of `job`: `removed` (data file locations) replaced
/// by `added` (with the metrics of their footers), as one `replace` snapshot.
pub async fn replace(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    removed: &[String],
    added: &[DataFile],
    (job, step_id): (&str, &str),
) -> Result<Replaced> {
    for _ in 0..ATTEMPTS {
        if let Some(done) =
            replace_attempt(store, catalog, at, removed, added, (job, step_id)).await?
        {
            return Ok(done);
        }
        tracing::info!(table = %at.name, "another writer committed to the Iceberg table first; reading it again");
    }
    Err(conflict(at))
}

fn conflict(at: &TableRef<'_>) -> Error {
    super::table_commit::lost_every_race(
        at,
        "drains keep committing to the table: run sluice compact again later (what it did so far is kept and finished by the next run)",
    )
}

async fn replace_attempt(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    removed: &[String],
    added: &[DataFile],
    (job, step_id): (&str, &str),
) -> Result<Option<Replaced>> {
    let now = chrono::Utc::now().timestamp_millis();
    let Some((location, mut metadata)) = current(store, catalog, at).await? else {
        return Err(Error::new(
            Code::IcebergMetadata,
            format!("Iceberg table {} does not exist, but a compaction step of its parts waits for its commit", at.qualified()),
        )
        .hint("the table was dropped after the compaction started: run the drain (it creates the table from its next parts) or drop the table's _compactions/ manifests' Iceberg record; nothing was removed"));
    };
    if let Some(s) = metadata
        .snapshots
        .iter()
        .find(|s| s.summary.get(COMPACTION_KEY).map(String::as_str) == Some(step_id))
    {
        return Ok(Some(Replaced::AlreadyThere {
            snapshot_id: Some(s.snapshot_id),
        }));
    }
    let Some(parent) = metadata
        .current_snapshot_id
        .and_then(|id| metadata.snapshot(id))
        .cloned()
    else {
        return Err(not_data(at, removed.len(), removed.len()));
    };
    let manifests = manifests_of(store, at, &parent).await?;
    let mut read = Vec::with_capacity(manifests.len());
    let mut live = BTreeSet::new();
    for m in manifests {
        let entries = if m.content == 0 {
            let body = read_required(store, at, &m.path).await?;
            manifest::read_manifest(&body, &m.path)?
        } else {
            Vec::new()
        };
        live.extend(
            entries
                .iter()
                .filter(|e| e.live())
                .map(|e| e.path().to_owned()),
        );
        read.push((m, entries));
    }
    let removed_set: BTreeSet<&str> = removed.iter().map(String::as_str).collect();
    let present = removed.iter().filter(|r| live.contains(*r)).count();
    let added_live = added.iter().filter(|f| live.contains(&f.path)).count();
    if present == 0 && added_live == added.len() {
        return Ok(Some(Replaced::AlreadyThere { snapshot_id: None }));
    }
    if present != removed.len() || added_live > 0 {
        return Err(not_data(at, removed.len() - present, removed.len()));
    }

    let snapshot_id = (rand::random::<u64>() >> 1).max(1) as i64;
    let sequence_number = metadata.last_sequence_number + 1;
    let schema = metadata
        .schemas
        .iter()
        .find(|s| s.schema_id == metadata.current_schema_id)
        .cloned();
    let header = schema
        .as_ref()
        .map(manifest::schema_header)
        .unwrap_or_default();
    let schema_id = metadata.current_schema_id;
    let uuid = super::metadata::uuid_v4();
    let mut list = Vec::new();
    let mut removed_rows = 0i64;
    let mut removed_bytes = 0i64;
    // The replaced files' manifests, merged into one of EXISTING and DELETED entries.
    let mut merged: Vec<Entry> = Vec::new();
    let mut carried = Vec::new();
    for (m, entries) in read {
        let touched = entries
            .iter()
            .any(|e| e.live() && removed_set.contains(e.path()));
        if !touched {
            // A manifest of nothing but DELETED entries (an earlier replace's) is data of
            // no later snapshot.
            if m.content != 0 || m.added_files + m.existing_files > 0 {
                carried.push(m);
            }
            continue;
        }
        for mut e in entries.into_iter().filter(Entry::live) {
            e.sequence_number = e.sequence_number.or(Some(m.sequence_number));
            e.file_sequence_number = e.file_sequence_number.or(Some(m.sequence_number));
            if removed_set.contains(e.path()) {
                removed_rows += e.rows();
                removed_bytes += e
                    .data_file
                    .field("file_size_in_bytes")
                    .and_then(super::avro::Value::as_long)
                    .unwrap_or(0);
                e.status = DELETED;
                e.snapshot_id = Some(snapshot_id);
            } else {
                e.status = EXISTING;
                e.snapshot_id = e.snapshot_id.or(Some(m.added_snapshot_id));
            }
            merged.push(e);
        }
    }
    let fields = metadata.current_fields().to_vec();
    let added: Vec<DataFile> = added.iter().map(|f| with_ids(f, &fields)).collect();
    let added_rows: u64 = added.iter().map(|f| f.rows).sum();
    let added_bytes: u64 = added.iter().map(|f| f.bytes).sum();
    if !added.is_empty() {
        let body = manifest::write_manifest(snapshot_id, &header, schema_id, &added)?;
        let key = at.metadata_key(&format!("{uuid}-m0.avro"));
        store.put_marker(&key, &body).await?;
        list.push(ManifestFile {
            path: at.uri(&key),
            length: body.len() as i64,
            partition_spec_id: 0,
            content: 0,
            sequence_number,
            min_sequence_number: sequence_number,
            added_snapshot_id: snapshot_id,
            added_files: added.len() as i64,
            existing_files: 0,
            deleted_files: 0,
            added_rows: added_rows as i64,
            existing_rows: 0,
            deleted_rows: 0,
        });
    }
    if !merged.is_empty() {
        let body = manifest::write_entries(&header, schema_id, &merged)?;
        let key = at.metadata_key(&format!("{uuid}-m1.avro"));
        store.put_marker(&key, &body).await?;
        let existing: Vec<&Entry> = merged.iter().filter(|e| e.status == EXISTING).collect();
        list.push(ManifestFile {
            path: at.uri(&key),
            length: body.len() as i64,
            partition_spec_id: 0,
            content: 0,
            sequence_number,
            min_sequence_number: existing
                .iter()
                .filter_map(|e| e.sequence_number)
                .min()
                .unwrap_or(sequence_number),
            added_snapshot_id: snapshot_id,
            added_files: 0,
            existing_files: existing.len() as i64,
            deleted_files: (merged.len() - existing.len()) as i64,
            added_rows: 0,
            existing_rows: existing.iter().map(|e| e.rows()).sum(),
            deleted_rows: removed_rows,
        });
    }
    list.extend(carried);
    let list_body = manifest::write_list(
        snapshot_id,
        Some(parent.snapshot_id),
        sequence_number,
        &list,
    )?;
    let list_key = at.metadata_key(&format!("snap-{snapshot_id}-1-{uuid}.avro"));
    store.put_marker(&list_key, &list_body).await?;

    let mut summary = std::collections::BTreeMap::new();
    let total = |f: fn(&ManifestFile) -> i64| {
        list.iter()
            .filter(|m| m.content == 0)
            .map(f)
            .sum::<i64>()
            .to_string()
    };
    for (k, v) in [
        ("operation", "replace".to_owned()),
        ("added-data-files", added.len().to_string()),
        ("deleted-data-files", removed.len().to_string()),
        ("added-records", added_rows.to_string()),
        ("deleted-records", removed_rows.to_string()),
        ("added-files-size", added_bytes.to_string()),
        ("removed-files-size", removed_bytes.to_string()),
        (
            "total-data-files",
            total(|m| m.added_files + m.existing_files),
        ),
        ("total-records", total(|m| m.added_rows + m.existing_rows)),
        ("total-delete-files", "0".to_owned()),
        ("total-position-deletes", "0".to_owned()),
        ("total-equality-deletes", "0".to_owned()),
        (JOB_KEY, job.to_owned()),
        (COMPACTION_KEY, step_id.to_owned()),
    ] {
        summary.insert(k.to_owned(), v);
    }
    metadata.add_snapshot(Snapshot {
        snapshot_id,
        parent_snapshot_id: Some(parent.snapshot_id),
        sequence_number,
        timestamp_ms: now,
        manifest_list: at.uri(&list_key),
        summary,
        schema_id: None,
        extra: Default::default(),
    });
    let moved = swap(store, catalog, at, &location, &mut metadata, now, &uuid).await?;
    Ok(moved.then_some(Replaced::Committed { snapshot_id }))
}

fn not_data(at: &TableRef<'_>, missing: usize, of: usize) -> Error {
    Error::new(
        Code::IcebergMetadata,
        format!(
            "Iceberg table {}: {missing} of the {of} parts a compaction step replaces are not data files of its current snapshot (or its compacted parts already are)",
            at.qualified()
        ),
    )
    .hint("another writer rewrote the table's files: keep sluice its only writer (no Spark or S3 Tables maintenance on a table sluice compacts); the folder and its manifests are exact, the Iceberg table keeps the parts as they were")
}

/// Writes `metadata` (logging `location` as the previous file) as the next metadata file
/// and moves the catalog pointer to it from `location`; `false` when another writer
/// moved it first.
async fn swap(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    location: &str,
    metadata: &mut TableMetadata,
    now: i64,
    uuid: &str,
) -> Result<bool> {
    metadata.log_previous(location, metadata.last_updated_ms.min(now));
    metadata.last_updated_ms = now;
    let number = file_number(location) + 1;
    let key = at.metadata_key(&format!("{number:05}-{uuid}.metadata.json"));
    store.put_marker(&key, &metadata.to_json()?).await?;
    catalog
        .swap(at.namespace, &at.name, location, &at.uri(&key), metadata)
        .await
}

/// Expires the snapshots older than `retention_ms` at `now_ms` (see the module's rules),
/// commits the new metadata, then deletes the metadata files only expired snapshots
/// named. Answers what is kept (also when nothing expired); `None` for a table that does
/// not exist.
pub async fn expire(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    now_ms: i64,
    retention_ms: i64,
) -> Result<Option<Retained>> {
    for _ in 0..ATTEMPTS {
        let Some((location, metadata)) = current(store, catalog, at).await? else {
            return Ok(None);
        };
        if let Some(done) = expire_attempt(
            store,
            catalog,
            at,
            (&location, metadata),
            now_ms,
            retention_ms,
        )
        .await?
        {
            return Ok(Some(done));
        }
        tracing::info!(table = %at.name, "another writer committed to the Iceberg table first; reading it again");
    }
    Err(conflict(at))
}

/// The snapshots an expiry keeps at `cutoff_ms`: the current one, its ancestors newer
/// than the cutoff or not older than the newest drain snapshot, and snapshots outside
/// the ancestry newer than the cutoff. With the oldest kept ancestor.
pub fn kept(metadata: &TableMetadata, cutoff_ms: i64) -> (BTreeSet<i64>, Option<i64>) {
    let mut ids = BTreeSet::new();
    let mut oldest = None;
    let mut drain_seen = false;
    for (i, s) in metadata.ancestry().into_iter().enumerate() {
        if i > 0 && s.timestamp_ms < cutoff_ms && drain_seen {
            break;
        }
        ids.insert(s.snapshot_id);
        oldest = Some(s.snapshot_id);
        drain_seen |= s.summary.contains_key(CHECKPOINT_KEY);
    }
    let ancestry: BTreeSet<i64> = metadata.ancestry().iter().map(|s| s.snapshot_id).collect();
    for s in &metadata.snapshots {
        if !ancestry.contains(&s.snapshot_id) && s.timestamp_ms >= cutoff_ms {
            ids.insert(s.snapshot_id);
        }
    }
    (ids, oldest)
}

async fn expire_attempt(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    (location, mut metadata): (&str, TableMetadata),
    now_ms: i64,
    retention_ms: i64,
) -> Result<Option<Retained>> {
    let (ids, oldest) = kept(&metadata, now_ms - retention_ms);
    let mut retained = Retained {
        ids: ids.clone(),
        oldest,
        ..Retained::default()
    };
    let oldest_snapshot = oldest.and_then(|id| metadata.snapshot(id)).cloned();
    let current_snapshot = metadata
        .current_snapshot_id
        .and_then(|id| metadata.snapshot(id))
        .cloned();
    for s in [&oldest_snapshot, &current_snapshot].into_iter().flatten() {
        retained.live.extend(data_files_of(store, at, s).await?);
    }
    let expired: Vec<Snapshot> = metadata
        .snapshots
        .iter()
        .filter(|s| !ids.contains(&s.snapshot_id))
        .cloned()
        .collect();
    if expired.is_empty() {
        return Ok(Some(retained));
    }
    // Manifests a kept snapshot lists: the oldest kept ancestor's, and those of kept
    // snapshots outside the ancestry.
    let ancestry: BTreeSet<i64> = metadata.ancestry().iter().map(|s| s.snapshot_id).collect();
    let mut kept_manifests = BTreeSet::new();
    for s in metadata.snapshots.iter().filter(|s| {
        ids.contains(&s.snapshot_id)
            && (Some(s.snapshot_id) == oldest || !ancestry.contains(&s.snapshot_id))
    }) {
        kept_manifests.extend(
            manifests_of(store, at, s)
                .await?
                .into_iter()
                .map(|m| m.path),
        );
    }
    let mut doomed = BTreeSet::new();
    for s in &expired {
        doomed.insert(s.manifest_list.clone());
        // A list already gone (an expiry killed after its commit left nothing to read).
        let key = at.key_of(&s.manifest_list)?;
        if let Some(body) = store.get(&key).await? {
            for m in manifest::read_list(&body, &s.manifest_list)? {
                if !kept_manifests.contains(&m.path) {
                    doomed.insert(m.path);
                }
            }
        }
    }
    let mut plans: BTreeSet<String> = metadata
        .properties
        .get(EXPIRED_PLANS_PROPERTY)
        .map(|v| {
            v.split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    plans.extend(
        expired
            .iter()
            .filter_map(|s| s.summary.get(PLAN_KEY).cloned()),
    );
    if !plans.is_empty() {
        metadata.properties.insert(
            EXPIRED_PLANS_PROPERTY.to_owned(),
            plans.into_iter().collect::<Vec<_>>().join(","),
        );
    }
    metadata.snapshots.retain(|s| ids.contains(&s.snapshot_id));
    metadata.snapshot_log.retain(|e| {
        e["snapshot-id"]
            .as_i64()
            .is_some_and(|id| ids.contains(&id))
    });
    metadata.refs.retain(|_, r| {
        r["snapshot-id"]
            .as_i64()
            .is_some_and(|id| ids.contains(&id))
    });
    // The metadata log names only files this expiry keeps (the current one is logged
    // by the swap).
    let log_kept = METADATA_FILES_KEPT - 2;
    if metadata.metadata_log.len() > log_kept {
        metadata
            .metadata_log
            .drain(..metadata.metadata_log.len() - log_kept);
    }
    let uuid = super::metadata::uuid_v4();
    let now = chrono::Utc::now().timestamp_millis();
    if !swap(store, catalog, at, location, &mut metadata, now, &uuid).await? {
        return Ok(None);
    }
    crate::faults::hit(crate::faults::FaultPoint::IcebergExpired).await?;
    retained.expired = expired.len() as u64;
    for uri in &doomed {
        store.delete(&at.key_of(uri)?).await?;
        retained.files_removed += 1;
    }
    // Metadata files older than the newest METADATA_FILES_KEPT (the current one counted).
    let newest = file_number(location) + 1;
    let keep_from = newest.saturating_sub(METADATA_FILES_KEPT as u64 - 1);
    let dir = at.metadata_key("");
    for key in store.list(&dir).await? {
        let name = key.rsplit('/').next().unwrap_or_default();
        if name.ends_with(".metadata.json") {
            let n = file_number(name);
            if n > 0 && n < keep_from {
                store.delete(&key).await?;
                retained.files_removed += 1;
            }
        }
    }
    tracing::info!(table = %at.name, expired = retained.expired, files_removed = retained.files_removed, "expired Iceberg snapshots");
    Ok(Some(retained))
}

/// The files under the table's `_iceberg/metadata/` (as `(key, modified ms)`) written
/// before `before_ms` that nothing the current metadata reaches names: not the current
/// metadata file or one its `metadata-log` keeps, not a kept snapshot's manifest list,
/// not a manifest a kept snapshot lists. Only `.avro` and `.metadata.json` names.
pub async fn orphan_metadata(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    objects: &[(String, Option<i64>)],
    before_ms: i64,
) -> Result<Vec<String>> {
    let Some((location, metadata)) = current(store, catalog, at).await? else {
        return Ok(Vec::new());
    };
    let dir = at.metadata_key("");
    let candidates: Vec<&String> = objects
        .iter()
        .filter(|(key, modified)| {
            key.starts_with(&dir)
                && (key.ends_with(".avro") || key.ends_with(".metadata.json"))
                && modified.is_some_and(|m| m < before_ms)
        })
        .map(|(key, _)| key)
        .collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut named = BTreeSet::new();
    named.insert(at.key_of(&location)?);
    for entry in &metadata.metadata_log {
        if let Some(file) = entry["metadata-file"].as_str() {
            named.insert(at.key_of(file)?);
        }
    }
    for s in &metadata.snapshots {
        named.insert(at.key_of(&s.manifest_list)?);
    }
    if candidates
        .iter()
        .any(|k| k.ends_with(".avro") && !named.contains(*k))
    {
        for s in &metadata.snapshots {
            for m in manifests_of(store, at, s).await? {
                named.insert(at.key_of(&m.path)?);
            }
        }
    }
    Ok(candidates
        .into_iter()
        .filter(|k| !named.contains(*k))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(id: i64, parent: Option<i64>, ts: i64, drain: bool) -> Snapshot {
        let mut summary = std::collections::BTreeMap::new();
        if drain {
            summary.insert(CHECKPOINT_KEY.to_owned(), "pg:0/1".to_owned());
        }
        Snapshot {
            snapshot_id: id,
            parent_snapshot_id: parent,
            sequence_number: 0,
            timestamp_ms: ts,
            manifest_list: String::new(),
            summary,
            schema_id: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn expiry_keeps_the_current_the_recent_and_back_to_the_newest_drain_snapshot() {
        let mut m = TableMetadata::new("file:///out/t", Vec::new(), 0, 0);
        m.add_snapshot(snapshot(1, None, 10, true));
        m.add_snapshot(snapshot(2, Some(1), 20, true));
        m.add_snapshot(snapshot(3, Some(2), 30, false));
        m.add_snapshot(snapshot(4, Some(3), 40, false));
        // Everything older than 35: the newest drain snapshot (2) and what follows stay.
        assert_eq!(kept(&m, 35), (BTreeSet::from([2, 3, 4]), Some(2)));
        // The current one always stays.
        m.add_snapshot(snapshot(5, Some(4), 50, true));
        assert_eq!(kept(&m, 100), (BTreeSet::from([5]), Some(5)));
        assert_eq!(kept(&m, 15), (BTreeSet::from([2, 3, 4, 5]), Some(2)));
    }
}
