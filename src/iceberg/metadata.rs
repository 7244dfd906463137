//! Iceberg table metadata (format version 2), the JSON file a catalog points at.
//!
//! Guarantees: fields another writer put into the metadata and sluice does not model are
//! kept as they were (`extra`); a new table is unpartitioned, sorted by `(__pos, __seq)`
//! and carries the name mapping its parts are read by; [`TableMetadata::set_schema`]
//! adds a schema version only when the fields changed (earlier versions stay in
//! `schemas`); [`TableMetadata::add_snapshot`] moves `main` and `current-snapshot-id` to
//! the new snapshot and records it in `snapshot-log`, with the sequence number one past
//! the table's last.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use super::schema::{Field, name_mapping};
use crate::error::{Code, Error, Result};

/// Where a table's metadata files go, below its folder.
pub const METADATA_DIR: &str = "_iceberg/metadata";

/// The table property Iceberg readers take a name mapping from.
pub const NAME_MAPPING_PROPERTY: &str = "schema.name-mapping.default";

/// One schema version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SchemaVersion {
    #[serde(rename = "type", default = "struct_type")]
    pub ty: String,
    pub schema_id: i32,
    pub fields: Vec<Field>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Json>,
}

fn struct_type() -> String {
    "struct".to_owned()
}

/// One snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Snapshot {
    pub snapshot_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_snapshot_id: Option<i64>,
    #[serde(default)]
    pub sequence_number: i64,
    pub timestamp_ms: i64,
    pub manifest_list: String,
    #[serde(default)]
    pub summary: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_id: Option<i32>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Json>,
}

/// The table metadata file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TableMetadata {
    pub format_version: i32,
    pub table_uuid: String,
    pub location: String,
    pub last_sequence_number: i64,
    pub last_updated_ms: i64,
    pub last_column_id: i32,
    pub current_schema_id: i32,
    pub schemas: Vec<SchemaVersion>,
    pub default_spec_id: i32,
    pub partition_specs: Vec<Json>,
    pub last_partition_id: i32,
    pub default_sort_order_id: i32,
    pub sort_orders: Vec<Json>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_snapshot_id: Option<i64>,
    #[serde(default)]
    pub refs: BTreeMap<String, Json>,
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
    #[serde(default)]
    pub snapshot_log: Vec<Json>,
    #[serde(default)]
    pub metadata_log: Vec<Json>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Json>,
}

impl TableMetadata {
    /// A new, empty table at `location` with `fields` (ids up to `last_column_id`).
    pub fn new(location: &str, fields: Vec<Field>, last_column_id: i32, now_ms: i64) -> Self {
        let id_of = |name: &str| fields.iter().find(|f| f.name == name).map(|f| f.id);
        let sort_fields: Vec<Json> = ["__pos", "__seq"]
            .iter()
            .filter_map(|n| id_of(n))
            .map(|id| {
                json!({"transform": "identity", "source-id": id, "direction": "asc", "null-order": "nulls-first"})
            })
            .collect();
        let mut sort_orders = vec![json!({"order-id": 0, "fields": []})];
        let default_sort_order_id = if sort_fields.is_empty() {
            0
        } else {
            sort_orders.push(json!({"order-id": 1, "fields": sort_fields}));
            1
        };
        let mut properties = BTreeMap::new();
        properties.insert(NAME_MAPPING_PROPERTY.to_owned(), name_mapping(&fields));
        properties.insert(
            "write.metadata.path".to_owned(),
            format!("{location}/{}", METADATA_DIR),
        );
        TableMetadata {
            format_version: 2,
            table_uuid: uuid_v4(),
            location: location.to_owned(),
            last_sequence_number: 0,
            last_updated_ms: now_ms,
            last_column_id,
            current_schema_id: 0,
            schemas: vec![SchemaVersion {
                ty: struct_type(),
                schema_id: 0,
                fields,
                extra: Default::default(),
            }],
            default_spec_id: 0,
            partition_specs: vec![json!({"spec-id": 0, "fields": []})],
            last_partition_id: 999,
            default_sort_order_id,
            sort_orders,
            properties,
            current_snapshot_id: None,
            refs: BTreeMap::new(),
            snapshots: Vec::new(),
            snapshot_log: Vec::new(),
            metadata_log: Vec::new(),
            extra: Default::default(),
        }
    }

    /// Parses a metadata file (`name` names it in errors) and checks that sluice can
    /// append to it: format version 2 and an unpartitioned default spec.
    pub fn parse(body: &[u8], name: &str) -> Result<TableMetadata> {
        let metadata: TableMetadata = serde_json::from_slice(body).map_err(|e| {
            Error::new(
                Code::IcebergMetadata,
                format!("{name} is not Iceberg table metadata sluice can read"),
            )
            .hint("restore the file, or point the catalog row at the previous metadata file (`previous_metadata_location`)")
            .source(e)
        })?;
        let unpartitioned = metadata.partition_specs.iter().any(|s| {
            s.get("spec-id").and_then(Json::as_i64) == Some(i64::from(metadata.default_spec_id))
                && s.get("fields")
                    .and_then(Json::as_array)
                    .is_some_and(Vec::is_empty)
        });
        if metadata.format_version != 2 || !unpartitioned {
            return Err(Error::new(
                Code::IcebergMetadata,
                format!(
                    "{name}: format version {} with a partitioned default spec: sluice appends only to unpartitioned version-2 tables",
                    metadata.format_version
                ),
            )
            .hint("let sluice create the table: commit to a new table (another `iceberg.table_prefix`)"));
        }
        Ok(metadata)
    }

    /// The current schema's fields.
    pub fn current_fields(&self) -> &[Field] {
        self.schemas
            .iter()
            .find(|s| s.schema_id == self.current_schema_id)
            .map_or(&[], |s| s.fields.as_slice())
    }

    /// Makes `fields` the current schema (a new version when they differ), refreshing the
    /// name mapping.
    pub fn set_schema(&mut self, fields: Vec<Field>, last_column_id: i32) {
        self.last_column_id = self.last_column_id.max(last_column_id);
        if self.current_fields() != fields.as_slice() {
            let id = self.schemas.iter().map(|s| s.schema_id).max().unwrap_or(-1) + 1;
            self.properties
                .insert(NAME_MAPPING_PROPERTY.to_owned(), name_mapping(&fields));
            self.schemas.push(SchemaVersion {
                ty: struct_type(),
                schema_id: id,
                fields,
                extra: Default::default(),
            });
            self.current_schema_id = id;
        }
    }

    /// The snapshot `id`.
    pub fn snapshot(&self, id: i64) -> Option<&Snapshot> {
        self.snapshots.iter().find(|s| s.snapshot_id == id)
    }

    /// The current snapshot and its ancestors, newest first.
    pub fn ancestry(&self) -> Vec<&Snapshot> {
        let mut out = Vec::new();
        let mut at = self.current_snapshot_id.and_then(|id| self.snapshot(id));
        while let Some(s) = at {
            out.push(s);
            at = s.parent_snapshot_id.and_then(|id| self.snapshot(id));
        }
        out
    }

    /// Adds `snapshot` (its sequence number is set here) as the current one of `main`.
    pub fn add_snapshot(&mut self, mut snapshot: Snapshot) {
        self.last_sequence_number += 1;
        snapshot.sequence_number = self.last_sequence_number;
        snapshot.schema_id = Some(self.current_schema_id);
        self.last_updated_ms = snapshot.timestamp_ms;
        self.current_snapshot_id = Some(snapshot.snapshot_id);
        self.refs.insert(
            "main".to_owned(),
            json!({"snapshot-id": snapshot.snapshot_id, "type": "branch"}),
        );
        self.snapshot_log.push(
            json!({"timestamp-ms": snapshot.timestamp_ms, "snapshot-id": snapshot.snapshot_id}),
        );
        self.snapshots.push(snapshot);
    }

    /// Records `previous` (the file this metadata replaces) in `metadata-log`, keeping the
    /// newest `write.metadata.previous-versions-max` entries (Iceberg's default: 100).
    pub fn log_previous(&mut self, previous: &str, previous_updated_ms: i64) {
        self.metadata_log
            .push(json!({"timestamp-ms": previous_updated_ms, "metadata-file": previous}));
        let keep = self
            .properties
            .get("write.metadata.previous-versions-max")
            .and_then(|v| v.parse().ok())
            .unwrap_or(100usize)
            .max(1);
        if self.metadata_log.len() > keep {
            self.metadata_log.drain(..self.metadata_log.len() - keep);
        }
    }

    /// The metadata as its JSON file.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(Code::Internal, "serializing Iceberg table metadata").source(e))
    }
}

/// A random (version 4) UUID in its hyphenated text form.
pub fn uuid_v4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(id: i32, name: &str, ty: &str) -> Field {
        Field {
            id,
            name: name.into(),
            required: false,
            ty: json!(ty),
            extra: Default::default(),
        }
    }

    #[test]
    fn new_table_sorts_by_position_and_round_trips() {
        let fields = vec![
            field(1, "__op", "string"),
            field(2, "__pos", "string"),
            field(3, "__seq", "long"),
        ];
        let mut m = TableMetadata::new("file:///out/t", fields, 3, 1000);
        assert_eq!(m.default_sort_order_id, 1);
        assert_eq!(m.sort_orders[1]["fields"][0]["source-id"], 2);
        assert_eq!(m.sort_orders[1]["fields"][1]["source-id"], 3);
        m.add_snapshot(Snapshot {
            snapshot_id: 7,
            parent_snapshot_id: None,
            sequence_number: 0,
            timestamp_ms: 2000,
            manifest_list: "file:///out/t/_iceberg/metadata/snap-7.avro".into(),
            summary: [("operation".to_owned(), "append".to_owned())].into(),
            schema_id: None,
            extra: Default::default(),
        });
        let mut body: Json = serde_json::from_slice(&m.to_json().unwrap()).unwrap();
        assert_eq!(body["current-snapshot-id"], 7);
        assert_eq!(body["refs"]["main"]["snapshot-id"], 7);
        assert_eq!(body["snapshots"][0]["sequence-number"], 1);
        body["unknown-to-sluice"] = json!({"kept": true});
        let again = TableMetadata::parse(body.to_string().as_bytes(), "m.json").unwrap();
        assert_eq!(again.extra["unknown-to-sluice"], json!({"kept": true}));
        assert_eq!(again.ancestry().len(), 1);
    }

    #[test]
    fn a_changed_schema_is_a_new_version() {
        let mut m = TableMetadata::new("file:///t", vec![field(1, "id", "int")], 1, 0);
        m.set_schema(vec![field(1, "id", "int")], 1);
        assert_eq!(m.schemas.len(), 1);
        m.set_schema(vec![field(1, "id", "long"), field(2, "x", "string")], 2);
        assert_eq!(
            (m.schemas.len(), m.current_schema_id, m.last_column_id),
            (2, 1, 2)
        );
        assert!(m.properties[NAME_MAPPING_PROPERTY].contains("\"x\""));
    }

    #[test]
    fn the_metadata_log_keeps_the_newest_hundred() {
        let mut m = TableMetadata::new("file:///t", vec![field(1, "id", "int")], 1, 0);
        for i in 0..150 {
            m.log_previous(&format!("m{i}"), i);
        }
        assert_eq!(m.metadata_log.len(), 100);
        assert_eq!(m.metadata_log[0]["metadata-file"], "m50");
    }

    #[test]
    fn refuses_partitioned_or_v1_tables() {
        let mut m = TableMetadata::new("file:///t", vec![field(1, "id", "int")], 1, 0);
        m.format_version = 1;
        let e = TableMetadata::parse(&m.to_json().unwrap(), "v1.json").unwrap_err();
        assert_eq!(e.code(), Code::IcebergMetadata);
    }
}
