//! One Iceberg commit: a fast append of durable parts to one table, as one snapshot,
//! swapped into the catalog conditionally.
//!
//! Guarantees:
//!
//! * the snapshot's files are written (manifest, manifest list, metadata file — new
//!   names, never overwritten) before the catalog pointer moves, and the pointer moves
//!   only from the metadata this commit read ([`Catalog::swap`]); when another writer
//!   moved it first the commit reads the table again and redoes itself, up to
//!   [`ATTEMPTS`] times, then fails with `SLUICE_ICEBERG_CONFLICT`;
//! * **a change-log snapshot is data only once its checkpoint is**: each carries the
//!   checkpoint it waits for (`sluice.checkpoint`, with `sluice.job` and
//!   `sluice.source-identity`). A commit of the stream drops from the table every
//!   snapshot of the same stream whose checkpoint is past the one stored (its run died
//!   between its Iceberg commit and its checkpoint; the changes it holds are read and
//!   written again by this run): the new snapshot's manifest list leaves their manifests
//!   out (operation `overwrite`, `sluice.dropped-snapshots` naming them). So a crash
//!   between commit and checkpoint never duplicates a row;
//! * which snapshots lie past the stored checkpoint is decided from the checkpoint the
//!   committing run holds under its lease: the drain renews the lease right before it
//!   commits (`SLUICE_STATE_FENCED` when a newer run took it over), so a run that lost
//!   its lease never drops a newer run's snapshots (the window left is a pause longer
//!   than the lease's TTL between that renewal and the catalog swap);
//! * a baseline commit (`sluice.plan-id`) is made once per plan: a second commit of the
//!   same plan finds it in the table and does nothing; baseline snapshots are never
//!   dropped.

use std::collections::{BTreeMap, BTreeSet};

use arrow_schema::Schema as ArrowSchema;

use super::catalog::Catalog;
use super::manifest::{self, DataFile, ManifestFile};
use super::metadata::{Snapshot, TableMetadata};
use super::table_ref::TableRef;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::position::Position;

/// How often a commit that lost the catalog race is redone.
pub const ATTEMPTS: u32 = 5;

/// Summary keys sluice records in its snapshots.
pub const JOB_KEY: &str = "sluice.job";
pub const RUN_KEY: &str = "sluice.run-id";
pub const IDENTITY_KEY: &str = "sluice.source-identity";
pub const CHECKPOINT_KEY: &str = "sluice.checkpoint";
pub const PLAN_KEY: &str = "sluice.plan-id";
pub const PARTS_KEY: &str = "sluice.parts";
pub const DROPPED_KEY: &str = "sluice.dropped-snapshots";

/// The table property listing the baseline plans whose snapshots an expiry removed
/// (`super::maintenance`): [`holds_plan`] still finds them.
pub const EXPIRED_PLANS_PROPERTY: &str = "sluice.expired-plan-ids";

/// What a commit belongs to.
#[derive(Debug, Clone)]
pub enum Origin<'a> {
    /// A drain's parts, covered by the checkpoint at `checkpoint` once it is written;
    /// `stored` is the checkpoint stored now.
    Changes {
        job: &'a str,
        run_id: &'a str,
        source_identity: &'a str,
        stored: Option<&'a Position>,
        /// The identity `stored` was written with: a snapshot of that identity is this
        /// stream's too (a failover changes the identity between a crashed run and the next).
        stored_identity: Option<&'a str>,
        checkpoint: &'a Position,
    },
    /// A baseline plan's parts.
    Baseline { job: &'a str, plan_id: &'a str },
}

/// How a commit ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A new snapshot is current.
    Committed { snapshot_id: i64 },
    /// The table already holds this baseline plan.
    AlreadyThere,
    /// Nothing to add and nothing to drop: the table is as it was.
    Unchanged,
}

/// Appends `files` (the parts, with the Arrow schemas they were written with) to the
/// table `at` names, creating the table on its first commit; its metadata files are read
/// from and written to `store` (the destination, or the table's warehouse location).
pub async fn append(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    schemas: &[ArrowSchema],
    files: &[DataFile],
    origin: &Origin<'_>,
) -> Result<Outcome> {
    catalog.ensure_namespace(at.namespace).await?;
    for _ in 0..ATTEMPTS {
        if let Some(outcome) = attempt(store, catalog, at, schemas, files, origin).await? {
            return Ok(outcome);
        }
        tracing::info!(table = %at.name, "another writer committed to the Iceberg table first; reading it again");
    }
    Err(lost_every_race(
        at,
        "another process keeps committing to this table: make sluice its only writer (compaction and expiry in between runs), then run again; the run's data stays and the next run commits it",
    ))
}

/// `SLUICE_ICEBERG_CONFLICT`: another writer moved the table's pointer first at each of
/// [`ATTEMPTS`] tries; `hint` says what to do for the commit that gave up.
pub(crate) fn lost_every_race(at: &TableRef<'_>, hint: &str) -> Error {
    Error::new(
        Code::IcebergConflict,
        format!(
            "Iceberg table {}: another writer committed first at each of {ATTEMPTS} attempts",
            at.qualified()
        ),
    )
    .hint(hint)
}

/// One try: `None` when the catalog pointer moved under it.
async fn attempt(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    schemas: &[ArrowSchema],
    files: &[DataFile],
    origin: &Origin<'_>,
) -> Result<Option<Outcome>> {
    let now = chrono::Utc::now().timestamp_millis();
    let current = catalog.load(at.namespace, &at.name).await?;
    let mut metadata = match &current {
        Some(location) => read_metadata(store, at, location).await?,
        None => TableMetadata::new(&at.location, Vec::new(), 0, now),
    };
    if let Origin::Baseline { plan_id, .. } = origin
        && holds_plan(&metadata, plan_id)
    {
        return Ok(Some(Outcome::AlreadyThere));
    }
    let mut fields = metadata.current_fields().to_vec();
    let mut last_id = metadata.last_column_id;
    for schema in schemas {
        (fields, last_id) = super::schema::evolve(at.table, &fields, last_id, schema)?;
    }
    if current.is_none() {
        metadata = TableMetadata::new(&at.location, fields, last_id, now);
    } else {
        metadata.set_schema(fields, last_id);
    }
    let dropped = match origin {
        Origin::Changes { .. } => not_checkpointed(&metadata, origin)?,
        Origin::Baseline { .. } => BTreeSet::new(),
    };
    if let Some(foreign) = rewritten_after(&metadata, &dropped) {
        let ids: Vec<String> = dropped.iter().map(i64::to_string).collect();
        return Err(Error::new(
            Code::IcebergMetadata,
            format!(
                "Iceberg table {}: snapshot(s) {} of a run that died before its checkpoint must be dropped, but snapshot {} ({}) by another writer came after them and may have rewritten their rows",
                at.qualified(),
                ids.join(","),
                foreign.snapshot_id,
                foreign.summary.get("operation").map_or("unknown operation", String::as_str),
            ),
        )
        .hint(format!("sluice cannot prove which rows to drop: roll the table back to the parent of snapshot {} (Spark `CALL <catalog>.system.rollback_to_snapshot(…)`, pyiceberg `manage_snapshots().rollback_to_snapshot(…)`) and run again — the next run commits every change since then once; keep compaction from running between a failed run and the next", ids.first().map_or("", String::as_str))));
    }
    if files.is_empty() && dropped.is_empty() {
        return Ok(Some(Outcome::Unchanged));
    }

    let parent = metadata.current_snapshot_id;
    let mut manifests = Vec::new();
    if let Some(snapshot) = parent.and_then(|id| metadata.snapshot(id)) {
        let key = at.key_of(&snapshot.manifest_list)?;
        let body = store.get(&key).await?.ok_or_else(|| {
            Error::new(
                Code::IcebergMetadata,
                format!(
                    "manifest list {} of the current snapshot does not exist",
                    snapshot.manifest_list
                ),
            )
            .hint("restore the file, or point the catalog row at `previous_metadata_location`")
        })?;
        manifests = manifest::read_list(&body, &snapshot.manifest_list)?;
        manifests.retain(|m| !dropped.contains(&m.added_snapshot_id));
    }

    let snapshot_id = (rand::random::<u64>() >> 1).max(1) as i64;
    let sequence_number = metadata.last_sequence_number + 1;
    let schema_version = metadata
        .schemas
        .iter()
        .find(|s| s.schema_id == metadata.current_schema_id)
        .cloned();
    let header = schema_version
        .as_ref()
        .map(manifest::schema_header)
        .unwrap_or_default();
    let fields = metadata.current_fields();
    let files: Vec<DataFile> = files.iter().map(|f| with_ids(f, fields)).collect();
    let files = files.as_slice();
    let uuid = super::metadata::uuid_v4();
    // A commit that only drops snapshots (a table this run writes no part of) adds no
    // manifest.
    if !files.is_empty() {
        let manifest_body =
            manifest::write_manifest(snapshot_id, &header, metadata.current_schema_id, files)?;
        let manifest_key = at.metadata_key(&format!("{uuid}-m0.avro"));
        store.put_marker(&manifest_key, &manifest_body).await?;
        let added_rows: u64 = files.iter().map(|f| f.rows).sum();
        manifests.insert(
            0,
            ManifestFile {
                path: at.uri(&manifest_key),
                length: manifest_body.len() as i64,
                partition_spec_id: 0,
                content: 0,
                sequence_number,
                min_sequence_number: sequence_number,
                added_snapshot_id: snapshot_id,
                added_files: files.len() as i64,
                existing_files: 0,
                deleted_files: 0,
                added_rows: added_rows as i64,
                existing_rows: 0,
                deleted_rows: 0,
            },
        );
    }
    let list_body = manifest::write_list(snapshot_id, parent, sequence_number, &manifests)?;
    let list_key = at.metadata_key(&format!("snap-{snapshot_id}-1-{uuid}.avro"));
    store.put_marker(&list_key, &list_body).await?;

    let mut summary = summary_of(origin, files, &manifests);
    if !dropped.is_empty() {
        summary.insert("operation".into(), "overwrite".into());
        let ids: Vec<String> = dropped.iter().map(i64::to_string).collect();
        summary.insert(DROPPED_KEY.into(), ids.join(","));
        tracing::warn!(table = %at.name, dropped = %ids.join(","),
            "dropping Iceberg snapshots whose checkpoint was never written (their run died before it); this run writes their changes again");
    }
    metadata.add_snapshot(Snapshot {
        snapshot_id,
        parent_snapshot_id: parent,
        sequence_number,
        timestamp_ms: now,
        manifest_list: at.uri(&list_key),
        summary,
        schema_id: None,
        extra: Default::default(),
    });
    let (_, moved) = publish(
        store,
        catalog,
        at,
        current.as_deref(),
        &mut metadata,
        (now, &uuid),
    )
    .await?;
    Ok(moved.then_some(Outcome::Committed { snapshot_id }))
}

/// Writes `metadata` as the table's next metadata file (logging `current`, the file it
/// replaces) and points the catalog at it — creating the table when `current` is `None`,
/// else moving the pointer only from `current`: the new file's key, and `false` when
/// another writer registered or moved the table first.
pub(crate) async fn publish(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    current: Option<&str>,
    metadata: &mut TableMetadata,
    (now, uuid): (i64, &str),
) -> Result<(String, bool)> {
    let number = current.map_or(0, file_number) + 1;
    if let Some(previous) = current {
        metadata.log_previous(previous, now);
    }
    let metadata_key = at.metadata_key(&format!("{number:05}-{uuid}.metadata.json"));
    store
        .put_marker(&metadata_key, &metadata.to_json()?)
        .await?;
    let new_location = at.uri(&metadata_key);
    let moved = match current {
        None => {
            catalog
                .create(at.namespace, &at.name, &new_location, metadata)
                .await?
        }
        Some(old) => {
            catalog
                .swap(at.namespace, &at.name, old, &new_location, metadata)
                .await?
        }
    };
    Ok((metadata_key, moved))
}

/// `file` with its column metrics and its exact `__pos` range keyed by the field ids of
/// `fields` (the table's current schema); a column the schema lacks is left out.
pub(crate) fn with_ids(file: &DataFile, fields: &[super::schema::Field]) -> DataFile {
    let mut f = file.clone();
    f.bounds.clear();
    f.counts.clear();
    for m in &file.metrics {
        let Some(field) = fields.iter().find(|x| x.name == m.name) else {
            continue;
        };
        f.counts.push((field.id, m.values, m.nulls));
        if field.name == crate::parts::arrow_schema::POS {
            continue;
        }
        if let Some((lo, hi)) = m
            .range
            .as_ref()
            .and_then(|r| super::stats::encode(r, &field.ty))
        {
            f.bounds.push((field.id, lo, hi));
        }
    }
    if let (Some(field), Some((lo, hi))) = (
        fields
            .iter()
            .find(|x| x.name == crate::parts::arrow_schema::POS),
        &file.pos_range,
    ) {
        f.bounds
            .push((field.id, lo.as_bytes().to_vec(), hi.as_bytes().to_vec()));
    }
    f
}

/// Whether the table's current history holds the baseline snapshot of plan `plan_id`
/// (or held it before an expiry: `sluice.expired-plan-ids`).
pub fn holds_plan(metadata: &TableMetadata, plan_id: &str) -> bool {
    let expired = metadata
        .properties
        .get(EXPIRED_PLANS_PROPERTY)
        .is_some_and(|plans| plans.split(',').any(|p| p == plan_id));
    expired
        || metadata
            .ancestry()
            .iter()
            .any(|s| s.summary.get(PLAN_KEY).map(String::as_str) == Some(plan_id))
}

/// The number a metadata file's name starts with (`00003-<uuid>.metadata.json` → 3);
/// 0 for another name.
pub(crate) fn file_number(location: &str) -> u64 {
    let name = location.rsplit('/').next().unwrap_or_default();
    name.split('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The snapshots of this stream in the current ancestry whose checkpoint was never
/// written: past the stored one (the caller holds the lease, so `stored` is the stored
/// checkpoint), also when past this commit's own (a crashed run that read further).
fn not_checkpointed(metadata: &TableMetadata, origin: &Origin<'_>) -> Result<BTreeSet<i64>> {
    let Origin::Changes {
        job,
        source_identity,
        stored,
        stored_identity,
        ..
    } = origin
    else {
        return Ok(BTreeSet::new());
    };
    let mut dropped = BTreeSet::new();
    for s in metadata.ancestry() {
        let identity = s.summary.get(IDENTITY_KEY).map(String::as_str);
        let ours = s.summary.get(JOB_KEY).map(String::as_str) == Some(*job)
            && (identity == Some(*source_identity)
                || (identity.is_some() && identity == *stored_identity));
        let Some(theirs) = s
            .summary
            .get(CHECKPOINT_KEY)
            .filter(|_| ours)
            .and_then(|p| Position::parse_tagged(p).ok())
        else {
            continue;
        };
        let past = |p: &Position| theirs.partial_cmp(p).is_some_and(|o| o.is_gt());
        if stored.is_none_or(past) {
            dropped.insert(s.snapshot_id);
        }
    }
    Ok(dropped)
}

/// The newest snapshot of another writer (no `sluice.job` in its summary) that came
/// after a snapshot in `dropped`: a rewrite (compaction, a delete, an overwrite) that
/// may have moved the dropped snapshot's rows into files of its own, which dropping the
/// snapshot's manifests would then not remove. `None` when there is none.
fn rewritten_after<'m>(
    metadata: &'m TableMetadata,
    dropped: &BTreeSet<i64>,
) -> Option<&'m Snapshot> {
    let mut foreign = None;
    for s in metadata.ancestry() {
        if dropped.contains(&s.snapshot_id) && foreign.is_some() {
            return foreign;
        }
        if foreign.is_none() && !s.summary.contains_key(JOB_KEY) {
            foreign = Some(s);
        }
    }
    None
}

fn summary_of(
    origin: &Origin<'_>,
    files: &[DataFile],
    manifests: &[ManifestFile],
) -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    s.insert("operation".to_owned(), "append".to_owned());
    let rows: u64 = files.iter().map(|f| f.rows).sum();
    let bytes: u64 = files.iter().map(|f| f.bytes).sum();
    s.insert("added-data-files".into(), files.len().to_string());
    s.insert("added-records".into(), rows.to_string());
    s.insert("added-files-size".into(), bytes.to_string());
    let total = |f: fn(&ManifestFile) -> i64| manifests.iter().map(f).sum::<i64>().to_string();
    s.insert(
        "total-data-files".into(),
        total(|m| m.added_files + m.existing_files),
    );
    s.insert(
        "total-records".into(),
        total(|m| m.added_rows + m.existing_rows),
    );
    s.insert("total-delete-files".into(), "0".into());
    s.insert("total-position-deletes".into(), "0".into());
    s.insert("total-equality-deletes".into(), "0".into());
    match origin {
        Origin::Changes {
            job,
            run_id,
            source_identity,
            checkpoint,
            ..
        } => {
            s.insert(JOB_KEY.into(), (*job).to_owned());
            s.insert(RUN_KEY.into(), (*run_id).to_owned());
            s.insert(IDENTITY_KEY.into(), (*source_identity).to_owned());
            s.insert(CHECKPOINT_KEY.into(), checkpoint.to_string());
        }
        Origin::Baseline { job, plan_id } => {
            s.insert(JOB_KEY.into(), (*job).to_owned());
            s.insert(PLAN_KEY.into(), (*plan_id).to_owned());
        }
    }
    let names: Vec<&str> = files
        .iter()
        .map(|f| f.path.rsplit('/').next().unwrap_or_default())
        .collect();
    let parts = match names.as_slice() {
        [first, .., last] if names.len() > MAX_NAMED_PARTS => {
            format!("{first}..{last} ({} parts)", names.len())
        }
        _ => names.join(","),
    };
    s.insert(PARTS_KEY.into(), parts);
    s
}

/// A snapshot summary names at most this many parts one by one (a large baseline's are
/// summed up as `<first>..<last> (<n> parts)`: every commit rewrites the metadata).
const MAX_NAMED_PARTS: usize = 50;

/// The table metadata the catalog points `at` at (`location`), read from `store`; a
/// pointer to a missing file is `SLUICE_ICEBERG_METADATA`.
pub async fn read_metadata(
    store: &dyn Destination,
    at: &TableRef<'_>,
    location: &str,
) -> Result<TableMetadata> {
    let key = at.key_of(location)?;
    let body = store.get(&key).await?.ok_or_else(|| {
        Error::new(
            Code::IcebergMetadata,
            format!(
                "the catalog points {} at {location}, which does not exist",
                at.qualified()
            ),
        )
        .hint("restore the file, or point the catalog row at `previous_metadata_location`")
    })?;
    TableMetadata::parse(&body, location)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::iceberg::metadata::Snapshot;

    fn table_with(snapshots: &[(i64, &str, &str)]) -> TableMetadata {
        let mut m = TableMetadata::new("file:///out/t", Vec::new(), 0, 0);
        let mut parent = None;
        for (id, job, checkpoint) in snapshots {
            let summary = [
                (JOB_KEY.to_owned(), (*job).to_owned()),
                (IDENTITY_KEY.to_owned(), "pg:sys/1".to_owned()),
                (CHECKPOINT_KEY.to_owned(), (*checkpoint).to_owned()),
            ];
            m.add_snapshot(Snapshot {
                snapshot_id: *id,
                parent_snapshot_id: parent,
                sequence_number: 0,
                timestamp_ms: 0,
                manifest_list: String::new(),
                summary: summary.into(),
                schema_id: None,
                extra: Default::default(),
            });
            parent = Some(*id);
        }
        m
    }

    fn check(m: &TableMetadata, stored: &str, checkpoint: &str) -> Result<BTreeSet<i64>> {
        let stored = Position::parse_tagged(stored).unwrap();
        let checkpoint = Position::parse_tagged(checkpoint).unwrap();
        let origin = Origin::Changes {
            job: "j",
            run_id: "r",
            source_identity: "pg:sys/1",
            stored: Some(&stored),
            stored_identity: Some("pg:sys/1"),
            checkpoint: &checkpoint,
        };
        not_checkpointed(m, &origin)
    }

    #[test]
    fn after_a_failover_the_former_primarys_crashed_snapshot_is_this_streams() {
        // The crashed run read the former primary (identity pg:sys/1) past the stored
        // checkpoint; the next run reads the promoted one (pg:sys/2) from that checkpoint,
        // still stored under the former identity.
        let m = table_with(&[(1, "j", "pg:0/10"), (2, "j", "pg:0/30")]);
        let stored = Position::parse_tagged("pg:0/20").unwrap();
        let checkpoint = Position::parse_tagged("pg:0/35").unwrap();
        let after_failover = |stored_identity| Origin::Changes {
            job: "j",
            run_id: "r",
            source_identity: "pg:sys/2",
            stored: Some(&stored),
            stored_identity,
            checkpoint: &checkpoint,
        };
        assert_eq!(
            not_checkpointed(&m, &after_failover(Some("pg:sys/1"))).unwrap(),
            BTreeSet::from([2])
        );
        // Once a checkpoint of the new identity is stored, the former one's snapshots are
        // history: another source's positions are not compared.
        assert_eq!(
            not_checkpointed(&m, &after_failover(Some("pg:sys/2"))).unwrap(),
            BTreeSet::new()
        );
    }

    #[test]
    fn snapshots_past_the_stored_checkpoint_are_dropped_others_kept() {
        let m = table_with(&[
            (1, "j", "pg:0/10"),
            (2, "other", "pg:0/40"),
            (3, "j", "pg:0/30"),
        ]);
        // Stored at 0/20: snapshot 3 (waiting for 0/30) never got its checkpoint; the
        // other job's snapshot is not this stream's.
        assert_eq!(
            check(&m, "pg:0/20", "pg:0/35").unwrap(),
            BTreeSet::from([3])
        );
        assert_eq!(check(&m, "pg:0/30", "pg:0/35").unwrap(), BTreeSet::new());
    }

    #[test]
    fn a_snapshot_to_drop_with_a_foreign_rewrite_after_it_is_found() {
        let mut m = table_with(&[(1, "j", "pg:0/10"), (2, "j", "pg:0/30")]);
        // A compaction after the crashed run's snapshot 2.
        m.add_snapshot(Snapshot {
            snapshot_id: 3,
            parent_snapshot_id: Some(2),
            sequence_number: 0,
            timestamp_ms: 0,
            manifest_list: String::new(),
            summary: [("operation".to_owned(), "replace".to_owned())].into(),
            schema_id: None,
            extra: Default::default(),
        });
        let dropped = check(&m, "pg:0/20", "pg:0/35").unwrap();
        assert_eq!(dropped, BTreeSet::from([2]));
        assert_eq!(
            rewritten_after(&m, &dropped).map(|s| s.snapshot_id),
            Some(3)
        );
        // Nothing to drop, or the rewrite came before the dropped snapshot: nothing found.
        assert!(rewritten_after(&m, &BTreeSet::new()).is_none());
        let mut before = table_with(&[(1, "j", "pg:0/10")]);
        before.add_snapshot(m.snapshot(3).unwrap().clone());
        before.snapshots.last_mut().unwrap().parent_snapshot_id = Some(1);
        let mut crashed = m.snapshot(2).unwrap().clone();
        crashed.parent_snapshot_id = Some(3);
        before.add_snapshot(crashed);
        assert!(rewritten_after(&before, &BTreeSet::from([2])).is_none());
    }

    #[test]
    fn a_crashed_run_that_read_further_is_dropped_too() {
        // The crashed run committed up to 0/50; this run (from 0/10) checkpoints at 0/30
        // first: the snapshot is still not data.
        let m = table_with(&[(1, "j", "pg:0/10"), (2, "j", "pg:0/50")]);
        assert_eq!(
            check(&m, "pg:0/10", "pg:0/30").unwrap(),
            BTreeSet::from([2])
        );
    }

    #[test]
    fn a_large_commit_sums_its_part_names_up() {
        let files: Vec<DataFile> = (1..=60)
            .map(|n| DataFile {
                path: format!("file:///out/t/snapshot/p/part-{n:06}.parquet"),
                rows: 1,
                bytes: 10,
                pos_range: None,
                bounds: Vec::new(),
                metrics: Vec::new(),
                counts: Vec::new(),
            })
            .collect();
        let origin = Origin::Baseline {
            job: "j",
            plan_id: "p",
        };
        let s = summary_of(&origin, &files, &[]);
        assert_eq!(
            s[PARTS_KEY],
            "part-000001.parquet..part-000060.parquet (60 parts)"
        );
        assert_eq!(s["added-records"], "60");
        let s = summary_of(&origin, &files[..2], &[]);
        assert_eq!(s[PARTS_KEY], "part-000001.parquet,part-000002.parquet");
    }

    #[test]
    fn metadata_file_numbers_count_up() {
        assert_eq!(
            file_number("file:///t/_iceberg/metadata/00007-ab-cd.metadata.json"),
            7
        );
        assert_eq!(file_number("s3://b/t/metadata/v3.metadata.json"), 0);
    }
}
