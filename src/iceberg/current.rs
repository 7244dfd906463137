//! The Iceberg table of a captured table's current state, `<name>_current`
//! (docs/current-state.md): each current-state version `sluice materialize` writes becomes
//! the current snapshot of an Iceberg table in the change log's catalog, whose data files
//! are the version's own files (no copy).
//!
//! Guarantees:
//!
//! * a snapshot names exactly the files of one version's pointer — every row of the state
//!   in one of them; an empty state's one file of no rows is left out — and is committed
//!   only after that pointer moved (the files are durable), through the catalog's
//!   conditional swap; the version is in its summary (`sluice.state-version`, with the
//!   watermark), so a version is committed once and a commit of the version the table
//!   holds does nothing;
//! * one manifest per snapshot: the files the version carried from the previous one are
//!   `EXISTING` entries (their snapshot and sequence numbers kept), the files it wrote
//!   `ADDED`, the files it replaced `DELETED` (operation `overwrite`; `append` when it
//!   replaced none);
//! * the table keeps two snapshots, the current one and its parent (the previous version,
//!   whose files a build keeps for readers that loaded the table just before the swap),
//!   and the metadata files those two and the previous metadata file need; older
//!   snapshots are dropped from the metadata and their files removed (their data files
//!   went with their versions);
//! * the schema is the state's columns, in its order: a column keeps its field id while
//!   its type stays one Iceberg reads its files as; a dropped column leaves the schema (a
//!   new shape is a full build, so no file keeps it); a column retyped beyond Iceberg's
//!   promotions gives the schema new ids.

use std::collections::{BTreeMap, BTreeSet};

use arrow_schema::Schema as ArrowSchema;

use super::catalog::Catalog;
use super::manifest::{self, DELETED, DataFile, EXISTING, Entry, ManifestFile};
use super::metadata::{Snapshot, TableMetadata};
use super::schema::{self, Field};
use super::table_commit::{
    ATTEMPTS, JOB_KEY, Outcome, lost_every_race, publish, read_metadata, with_ids,
};
use super::table_ref::TableRef;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};

/// The summary key holding the current-state version a snapshot is.
pub const VERSION_KEY: &str = "sluice.state-version";
/// The summary key holding the watermark of that version: `<__pos>/<__seq>`.
pub const WATERMARK_KEY: &str = "sluice.watermark";

/// The suffix of a current-state table's name: `<change log's name>_current`.
pub const NAME_SUFFIX: &str = "_current";

/// One current-state version, as its pointer names it.
#[derive(Debug, Clone)]
pub struct StateVersion<'a> {
    pub job: &'a str,
    pub version: u64,
    /// Each file (a destination key) with its size in bytes (0: unknown, read here).
    pub files: Vec<(String, u64)>,
    /// The newest change folded in: `(__pos, __seq)`.
    pub watermark: Option<(String, i64)>,
}

/// Commits `state` as the current snapshot of the table `at` names (created on its first
/// commit); its metadata files are read from and written to `store`, the destination.
pub async fn commit(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    state: &StateVersion<'_>,
) -> Result<Outcome> {
    catalog.ensure_namespace(at.namespace).await?;
    for _ in 0..ATTEMPTS {
        if let Some(outcome) = attempt(store, catalog, at, state).await? {
            return Ok(outcome);
        }
        tracing::info!(table = %at.name, "another writer committed to the Iceberg table first; reading it again");
    }
    Err(lost_every_race(
        at,
        "sluice keeps this table alone: stop the other writer, then run `sluice materialize` again (the current state itself is built; its Iceberg table follows at the next build)",
    ))
}

/// One try: `None` when the catalog pointer moved under it.
async fn attempt(
    store: &dyn Destination,
    catalog: &Catalog,
    at: &TableRef<'_>,
    state: &StateVersion<'_>,
) -> Result<Option<Outcome>> {
    let now = chrono::Utc::now().timestamp_millis();
    let current = catalog.load(at.namespace, &at.name).await?;
    let mut metadata = match &current {
        Some(location) => {
            // Another writer's table: metadata outside the destination, or not marked.
            if at.key_of(location).is_err() {
                return Err(foreign(at));
            }
            let metadata = read_metadata(store, at, location).await?;
            let follows = metadata.properties.get(FOLLOWS_PROPERTY);
            if follows.map(String::as_str) != Some(at.table) {
                return Err(foreign(at));
            }
            metadata
        }
        None => TableMetadata::new(&at.location, Vec::new(), 0, now),
    };
    let parent = metadata
        .current_snapshot_id
        .and_then(|id| metadata.snapshot(id))
        .cloned();
    let version = state.version.to_string();
    if parent
        .as_ref()
        .is_some_and(|p| p.summary.get(VERSION_KEY) == Some(&version))
    {
        return Ok(Some(Outcome::Unchanged));
    }
    let Some((first, _)) = state.files.first() else {
        return Err(Error::new(
            Code::Internal,
            format!(
                "current-state version {version} of {} names no file",
                at.table
            ),
        ));
    };
    let columns = crate::lake::files::read_columns(store, first).await?;
    let (fields, last_id) = fields_for(at.table, &metadata, &columns.schema())?;
    match current {
        None => {
            metadata = TableMetadata::new(&at.location, fields, last_id, now);
            metadata
                .properties
                .insert(FOLLOWS_PROPERTY.to_owned(), at.table.to_owned());
        }
        Some(_) => metadata.set_schema(fields, last_id),
    }

    // The parent's files, each entry with its sequence numbers and snapshot made explicit
    // (a carried entry no longer inherits them from a manifest of its own).
    let mut previous: BTreeMap<String, Entry> = BTreeMap::new();
    let mut parent_keys = Vec::new();
    if let Some(p) = &parent {
        parent_keys.push(at.key_of(&p.manifest_list)?);
        for m in super::maintenance::manifests_of(store, at, p).await? {
            parent_keys.push(at.key_of(&m.path)?);
            if m.content != 0 {
                continue;
            }
            let body = super::maintenance::read_required(store, at, &m.path).await?;
            for mut e in manifest::read_manifest(&body, &m.path)? {
                if !e.live() {
                    continue;
                }
                e.sequence_number = e.sequence_number.or(Some(m.sequence_number));
                e.file_sequence_number = e.file_sequence_number.or(Some(m.sequence_number));
                e.snapshot_id = e.snapshot_id.or(Some(m.added_snapshot_id));
                previous.insert(e.path().to_owned(), e);
            }
        }
    }

    let snapshot_id = (rand::random::<u64>() >> 1).max(1) as i64;
    let sequence_number = metadata.last_sequence_number + 1;
    let fields = metadata.current_fields().to_vec();
    let mut entries = Vec::with_capacity(state.files.len() + previous.len());
    for (key, size) in &state.files {
        let path = at.uri(key);
        match previous.remove(&path) {
            Some(mut carried) => {
                carried.status = EXISTING;
                entries.push(carried);
            }
            None => {
                let file = data_file(store, key, *size, path).await?;
                // The one file of an empty state only carries its columns, which the
                // table's schema holds (readers skip a file of no rows anyway).
                if file.rows > 0 {
                    entries.push(manifest::added_entry(
                        snapshot_id,
                        &with_ids(&file, &fields),
                    ));
                }
            }
        }
    }
    for (_, mut replaced) in previous {
        replaced.status = DELETED;
        replaced.snapshot_id = Some(snapshot_id);
        entries.push(replaced);
    }
    let totals = Totals::of(&entries);

    let schema = metadata
        .schemas
        .iter()
        .find(|s| s.schema_id == metadata.current_schema_id)
        .map(manifest::schema_header)
        .unwrap_or_default();
    let uuid = super::metadata::uuid_v4();
    let manifest_body = manifest::write_entries(&schema, metadata.current_schema_id, &entries)?;
    let manifest_key = at.metadata_key(&format!("{uuid}-m0.avro"));
    store.put_marker(&manifest_key, &manifest_body).await?;
    let listed = ManifestFile {
        path: at.uri(&manifest_key),
        length: manifest_body.len() as i64,
        partition_spec_id: 0,
        content: 0,
        sequence_number,
        min_sequence_number: entries
            .iter()
            .filter(|e| e.status == EXISTING)
            .filter_map(|e| e.sequence_number)
            .min()
            .unwrap_or(sequence_number),
        added_snapshot_id: snapshot_id,
        added_files: totals.added_files,
        existing_files: totals.existing_files,
        deleted_files: totals.deleted_files,
        added_rows: totals.added_rows,
        existing_rows: totals.existing_rows,
        deleted_rows: totals.deleted_rows,
    };
    let parent_id = parent.as_ref().map(|p| p.snapshot_id);
    let list_body = manifest::write_list(snapshot_id, parent_id, sequence_number, &[listed])?;
    let list_key = at.metadata_key(&format!("snap-{snapshot_id}-1-{uuid}.avro"));
    store.put_marker(&list_key, &list_body).await?;

    metadata.add_snapshot(Snapshot {
        snapshot_id,
        parent_snapshot_id: parent_id,
        sequence_number,
        timestamp_ms: now,
        manifest_list: at.uri(&list_key),
        summary: totals.summary(state),
        schema_id: None,
        extra: Default::default(),
    });
    keep_two_snapshots(&mut metadata, snapshot_id, parent_id);
    metadata
        .properties
        .insert(PREVIOUS_VERSIONS_PROPERTY.to_owned(), "1".to_owned());
    let (metadata_key, moved) = publish(
        store,
        catalog,
        at,
        current.as_deref(),
        &mut metadata,
        (now, &uuid),
    )
    .await?;
    if !moved {
        return Ok(None);
    }
    let mut kept: BTreeSet<String> = [metadata_key, manifest_key, list_key].into();
    kept.extend(parent_keys);
    if let Some(old) = &current {
        kept.insert(at.key_of(old)?);
    }
    remove_unneeded(store, at, &kept).await?;
    Ok(Some(Outcome::Committed { snapshot_id }))
}

/// The refusal to write a table of the current-state table's name that sluice did not
/// create for it.
fn foreign(at: &TableRef<'_>) -> Error {
    Error::new(
        Code::IcebergCatalogRejected,
        format!(
            "Iceberg table {} exists and is not the current-state table sluice keeps for {} (a table `sluice sql --merge` keeps under its default name, or another tool's)",
            at.qualified(),
            at.table.split('/').next().unwrap_or_default(),
        ),
    )
    .hint(format!("sluice writes nothing to it: drop or rename it (a MERGE keeps its table under any `--target`), and the next `sluice materialize` creates {} with the whole state; meanwhile the current state's files are built, only its Iceberg table waits", at.qualified()))
}

/// The table property naming the current-state folder the table follows (set when sluice
/// creates it): a table of the same name without it is another writer's, never written.
pub const FOLLOWS_PROPERTY: &str = "sluice.current-state-of";

/// The table property naming how many earlier metadata files the metadata logs.
const PREVIOUS_VERSIONS_PROPERTY: &str = "write.metadata.previous-versions-max";

/// The Iceberg fields of the state's columns `arrow`, evolved from the table's current
/// schema (fresh ids for all when a column changed type beyond a promotion), in the
/// state's column order; with the highest id in use.
fn fields_for(
    table: &str,
    metadata: &TableMetadata,
    arrow: &ArrowSchema,
) -> Result<(Vec<Field>, i32)> {
    let last = metadata.last_column_id;
    let (fields, last) = match schema::evolve(table, metadata.current_fields(), last, arrow) {
        Err(e) if e.code() == Code::IcebergSchema => schema::evolve(table, &[], last, arrow)?,
        other => other?,
    };
    let ordered = arrow
        .fields()
        .iter()
        .filter_map(|a| fields.iter().find(|f| &f.name == a.name()).cloned())
        .collect();
    Ok((ordered, last))
}

/// The manifest entry data of a file the version wrote: its rows and metrics from its
/// footer.
async fn data_file(
    store: &dyn Destination,
    key: &str,
    size: u64,
    path: String,
) -> Result<DataFile> {
    let size = match size {
        0 => size_of(store, key).await?,
        known => known,
    };
    let footer = super::stats::footer(store, key, size).await?;
    Ok(DataFile {
        path,
        rows: footer.file_metadata().num_rows().max(0) as u64,
        bytes: size,
        pos_range: None,
        bounds: Vec::new(),
        metrics: super::stats::metrics(&footer),
        counts: Vec::new(),
    })
}

/// The size of a file whose pointer kept none (written before sizes were kept).
async fn size_of(store: &dyn Destination, key: &str) -> Result<u64> {
    let body = store.get(key).await?.ok_or_else(|| {
        Error::new(
            Code::LakeFileGone,
            format!(
                "{} {key}, named by the current-state pointer, is gone",
                store.describe()
            ),
        )
        .hint(
            "run `sluice materialize` again: a build clears what no pointer names and starts over",
        )
    })?;
    Ok(body.len() as u64)
}

/// Keeps `snapshot_id` and `parent` (and the refs and log entries of those) only.
fn keep_two_snapshots(metadata: &mut TableMetadata, snapshot_id: i64, parent: Option<i64>) {
    let kept: BTreeSet<i64> = std::iter::once(snapshot_id).chain(parent).collect();
    metadata.snapshots.retain(|s| kept.contains(&s.snapshot_id));
    let of = |v: &serde_json::Value| v.get("snapshot-id").and_then(serde_json::Value::as_i64);
    metadata
        .snapshot_log
        .retain(|e| of(e).is_some_and(|id| kept.contains(&id)));
    metadata
        .refs
        .retain(|_, r| of(r).is_some_and(|id| kept.contains(&id)));
}

/// Removes every metadata file of the table that `kept` does not name: the files of
/// dropped snapshots, of older metadata files, and of commits that lost their swap.
async fn remove_unneeded(
    store: &dyn Destination,
    at: &TableRef<'_>,
    kept: &BTreeSet<String>,
) -> Result<()> {
    let prefix = at.metadata_key("");
    for key in store.list(&prefix).await? {
        if !kept.contains(&key) {
            store.delete(&key).await?;
        }
    }
    Ok(())
}

/// The counts of one snapshot's manifest.
#[derive(Debug, Default)]
struct Totals {
    added_files: i64,
    existing_files: i64,
    deleted_files: i64,
    added_rows: i64,
    existing_rows: i64,
    deleted_rows: i64,
    added_bytes: i64,
    deleted_bytes: i64,
}

impl Totals {
    fn of(entries: &[Entry]) -> Totals {
        let mut t = Totals::default();
        for e in entries {
            let bytes = e
                .data_file
                .field("file_size_in_bytes")
                .and_then(super::avro::Value::as_long)
                .unwrap_or(0);
            match e.status {
                EXISTING => {
                    t.existing_files += 1;
                    t.existing_rows += e.rows();
                }
                DELETED => {
                    t.deleted_files += 1;
                    t.deleted_rows += e.rows();
                    t.deleted_bytes += bytes;
                }
                _ => {
                    t.added_files += 1;
                    t.added_rows += e.rows();
                    t.added_bytes += bytes;
                }
            }
        }
        t
    }

    fn summary(&self, state: &StateVersion<'_>) -> BTreeMap<String, String> {
        let operation = if self.deleted_files > 0 {
            "overwrite"
        } else {
            "append"
        };
        let mut s: BTreeMap<String, String> = [
            ("operation", operation.to_owned()),
            ("added-data-files", self.added_files.to_string()),
            ("deleted-data-files", self.deleted_files.to_string()),
            ("added-records", self.added_rows.to_string()),
            ("deleted-records", self.deleted_rows.to_string()),
            ("added-files-size", self.added_bytes.to_string()),
            ("removed-files-size", self.deleted_bytes.to_string()),
            (
                "total-data-files",
                (self.added_files + self.existing_files).to_string(),
            ),
            (
                "total-records",
                (self.added_rows + self.existing_rows).to_string(),
            ),
            ("total-delete-files", "0".to_owned()),
            ("total-position-deletes", "0".to_owned()),
            ("total-equality-deletes", "0".to_owned()),
            (JOB_KEY, state.job.to_owned()),
            (VERSION_KEY, state.version.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some((pos, seq)) = &state.watermark {
            s.insert(WATERMARK_KEY.to_owned(), format!("{pos}/{seq}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field as ArrowField};

    fn arrow(columns: &[(&str, DataType)]) -> ArrowSchema {
        ArrowSchema::new(
            columns
                .iter()
                .map(|(n, t)| ArrowField::new(*n, t.clone(), true))
                .collect::<Vec<_>>(),
        )
    }

    fn table(columns: &[(&str, DataType)]) -> TableMetadata {
        let (fields, last) = fields_for(
            "t",
            &TableMetadata::new("file:///t", Vec::new(), 0, 0),
            &arrow(columns),
        )
        .unwrap();
        TableMetadata::new("file:///t", fields, last, 0)
    }

    #[test]
    fn columns_keep_their_ids_leave_when_dropped_and_renumber_when_retyped() {
        let m = table(&[("id", DataType::Int32), ("note", DataType::Utf8)]);
        let ids = |fields: &[Field]| -> Vec<(String, i32)> {
            fields.iter().map(|f| (f.name.clone(), f.id)).collect()
        };
        assert_eq!(
            ids(m.current_fields()),
            [("id".into(), 1), ("note".into(), 2)]
        );
        // A column added, one dropped, one promoted: ids kept, the new one next.
        let (fields, last) = fields_for(
            "t",
            &m,
            &arrow(&[("id", DataType::Int64), ("at", DataType::Date32)]),
        )
        .unwrap();
        assert_eq!(ids(&fields), [("id".into(), 1), ("at".into(), 3)]);
        assert_eq!(fields[0].ty, serde_json::json!("long"));
        assert_eq!(last, 3);
        // Retyped beyond a promotion (int → string): every column gets a new id.
        let (fields, last) = fields_for(
            "t",
            &m,
            &arrow(&[("id", DataType::Utf8), ("note", DataType::Utf8)]),
        )
        .unwrap();
        assert_eq!(ids(&fields), [("id".into(), 3), ("note".into(), 4)]);
        assert_eq!(last, 4);
    }

    #[test]
    fn only_the_current_snapshot_and_its_parent_stay() {
        let mut m = table(&[("id", DataType::Int32)]);
        for id in 1..=4 {
            m.add_snapshot(Snapshot {
                snapshot_id: id,
                parent_snapshot_id: (id > 1).then_some(id - 1),
                sequence_number: 0,
                timestamp_ms: id,
                manifest_list: String::new(),
                summary: Default::default(),
                schema_id: None,
                extra: Default::default(),
            });
        }
        m.refs.insert(
            "old-tag".into(),
            serde_json::json!({"snapshot-id": 1, "type": "tag"}),
        );
        keep_two_snapshots(&mut m, 4, Some(3));
        let ids: Vec<i64> = m.snapshots.iter().map(|s| s.snapshot_id).collect();
        assert_eq!(ids, [3, 4]);
        assert_eq!(m.snapshot_log.len(), 2);
        assert_eq!(m.refs.keys().collect::<Vec<_>>(), ["main"]);
        assert_eq!(m.current_snapshot_id, Some(4));
    }
}
