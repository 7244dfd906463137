//! The two Avro files of an Iceberg snapshot: a manifest naming the data files a commit
//! adds, and the manifest list naming every manifest of the snapshot.
//!
//! Guarantees: both files follow the Iceberg v2 Avro schemas, every field with its
//! `field-id` (readers resolve fields by id); a manifest lists data files with status
//! `ADDED` (1), content `DATA`, format `PARQUET`, an empty partition tuple, their record
//! count and size, and the column metrics the caller gives (value and null counts, lower
//! and upper bounds: [`super::stats`], and a change part's exact `__pos` range); the
//! sequence numbers of its entries are left null, so they inherit the snapshot's (the v2
//! rule for added files). A manifest read back ([`read_manifest`]) keeps each entry's
//! data file record as written, so a rewrite ([`write_entries`]: a compaction's
//! `replace`) carries an entry into a new manifest as `EXISTING` or `DELETED` with its
//! metrics unchanged and its sequence numbers made explicit. A manifest list read back
//! ([`read_list`]) keeps each manifest's counts and sequence numbers, so a later list can
//! carry it over unchanged.

use serde_json::Value as Json;

use super::avro::{self, Value};
use crate::error::Result;

// The Iceberg v2 Avro schemas of the two files, one field a line; the text goes into each
// file's header as it is (`avro.schema`).
const MANIFEST_ENTRY_SCHEMA: &str = concat!(
    r#"{"type":"record","name":"manifest_entry","fields":["#,
    r#"{"name":"status","type":"int","field-id":0},"#,
    r#"{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},"#,
    r#"{"name":"sequence_number","type":["null","long"],"default":null,"field-id":3},"#,
    r#"{"name":"file_sequence_number","type":["null","long"],"default":null,"field-id":4},"#,
    r#"{"name":"data_file","type":{"type":"record","name":"r2","fields":["#,
    r#"{"name":"content","type":"int","doc":"Contents of the file: 0=data, 1=position deletes, 2=equality deletes","field-id":134},"#,
    r#"{"name":"file_path","type":"string","doc":"Location URI with FS scheme","field-id":100},"#,
    r#"{"name":"file_format","type":"string","doc":"File format name: avro, orc, or parquet","field-id":101},"#,
    r#"{"name":"partition","type":{"type":"record","name":"r102","fields":[]},"doc":"Partition data tuple, schema based on the partition spec","field-id":102},"#,
    r#"{"name":"record_count","type":"long","doc":"Number of records in the file","field-id":103},"#,
    r#"{"name":"file_size_in_bytes","type":"long","doc":"Total file size in bytes","field-id":104},"#,
    r#"{"name":"value_counts","type":["null",{"type":"array","items":{"type":"record","name":"k119_v120","fields":["#,
    r#"{"name":"key","type":"int","field-id":119},"#,
    r#"{"name":"value","type":"long","field-id":120}"#,
    r#"]},"logicalType":"map"}],"doc":"Map of column id to total count, including null and NaN","default":null,"field-id":109},"#,
    r#"{"name":"null_value_counts","type":["null",{"type":"array","items":{"type":"record","name":"k121_v122","fields":["#,
    r#"{"name":"key","type":"int","field-id":121},"#,
    r#"{"name":"value","type":"long","field-id":122}"#,
    r#"]},"logicalType":"map"}],"doc":"Map of column id to null value count","default":null,"field-id":110},"#,
    r#"{"name":"lower_bounds","type":["null",{"type":"array","items":{"type":"record","name":"k126_v127","fields":["#,
    r#"{"name":"key","type":"int","field-id":126},"#,
    r#"{"name":"value","type":"bytes","field-id":127}"#,
    r#"]},"logicalType":"map"}],"doc":"Map of column id to lower bound","default":null,"field-id":125},"#,
    r#"{"name":"upper_bounds","type":["null",{"type":"array","items":{"type":"record","name":"k129_v130","fields":["#,
    r#"{"name":"key","type":"int","field-id":129},"#,
    r#"{"name":"value","type":"bytes","field-id":130}"#,
    r#"]},"logicalType":"map"}],"doc":"Map of column id to upper bound","default":null,"field-id":128}"#,
    r#"]},"field-id":2}"#,
    r#"]}"#,
);

const MANIFEST_FILE_SCHEMA: &str = concat!(
    r#"{"type":"record","name":"manifest_file","fields":["#,
    r#"{"name":"manifest_path","type":"string","doc":"Location URI with FS scheme","field-id":500},"#,
    r#"{"name":"manifest_length","type":"long","doc":"Total file size in bytes","field-id":501},"#,
    r#"{"name":"partition_spec_id","type":"int","doc":"Spec ID used to write","field-id":502},"#,
    r#"{"name":"content","type":"int","doc":"Contents of the manifest: 0=data, 1=deletes","field-id":517},"#,
    r#"{"name":"sequence_number","type":"long","doc":"Sequence number when the manifest was added","field-id":515},"#,
    r#"{"name":"min_sequence_number","type":"long","doc":"Lowest sequence number in the manifest","field-id":516},"#,
    r#"{"name":"added_snapshot_id","type":"long","doc":"Snapshot ID that added the manifest","field-id":503},"#,
    r#"{"name":"added_files_count","type":"int","doc":"Added entry count","field-id":504},"#,
    r#"{"name":"existing_files_count","type":"int","doc":"Existing entry count","field-id":505},"#,
    r#"{"name":"deleted_files_count","type":"int","doc":"Deleted entry count","field-id":506},"#,
    r#"{"name":"added_rows_count","type":"long","doc":"Added rows count","field-id":512},"#,
    r#"{"name":"existing_rows_count","type":"long","doc":"Existing rows count","field-id":513},"#,
    r#"{"name":"deleted_rows_count","type":"long","doc":"Deleted rows count","field-id":514}"#,
    r#"]}"#,
);

/// One data file a commit adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Absolute location (`file:///…`, `s3://…`).
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    /// The first and last `__pos` of a change part (its rows are in commit order, so
    /// these bound every `__pos` in it); none for a baseline part.
    pub pos_range: Option<(String, String)>,
    /// `(field id, lower, upper)`: bounds of every value of the column in the file, in
    /// Iceberg's single-value binary form (a string's UTF-8 bytes).
    pub bounds: Vec<(i32, Vec<u8>, Vec<u8>)>,
    /// What the part's footer says of its columns, by name ([`super::stats`]); turned
    /// into the entry's counts and bounds by field id when the commit knows the ids.
    pub metrics: Vec<super::stats::ColumnMetrics>,
    /// `(field id, values, nulls)`: the counts of a column's values (nulls included) and
    /// of its nulls, where known.
    pub counts: Vec<(i32, i64, Option<i64>)>,
}

/// A counts map (`value_counts` / `null_value_counts`), null when empty.
fn counts_map(counts: &[(i32, i64, Option<i64>)], nulls: bool) -> Value {
    let entries: Vec<Value> = counts
        .iter()
        .filter_map(|(id, values, null)| {
            let value = if nulls { (*null)? } else { *values };
            Some(Value::Record(vec![
                ("key".into(), Value::Long(i64::from(*id))),
                ("value".into(), Value::Long(value)),
            ]))
        })
        .collect();
    if entries.is_empty() {
        Value::Null
    } else {
        Value::Array(entries)
    }
}

/// A bounds map (`lower_bounds` / `upper_bounds`), null when empty.
fn bounds_map(bounds: &[(i32, Vec<u8>, Vec<u8>)], upper: bool) -> Value {
    if bounds.is_empty() {
        return Value::Null;
    }
    Value::Array(
        bounds
            .iter()
            .map(|(id, lo, hi)| {
                let value = if upper { hi } else { lo };
                Value::Record(vec![
                    ("key".into(), Value::Long(i64::from(*id))),
                    ("value".into(), Value::Bytes(value.clone())),
                ])
            })
            .collect(),
    )
}

/// A manifest of `files` added by `snapshot_id`; `schema_json` is the table schema the
/// header carries (Iceberg's `schema` key).
pub fn write_manifest(
    snapshot_id: i64,
    schema_json: &str,
    schema_id: i32,
    files: &[DataFile],
) -> Result<Vec<u8>> {
    let records: Vec<Value> = files
        .iter()
        .map(|f| added_entry(snapshot_id, f).to_value())
        .collect();
    write_records(schema_json, schema_id, &records)
}

/// The `ADDED` entry of `f` in a manifest of snapshot `snapshot_id`; its sequence numbers
/// are left null, so they inherit the snapshot's (the v2 rule for added files).
pub fn added_entry(snapshot_id: i64, f: &DataFile) -> Entry {
    Entry {
        status: ADDED,
        snapshot_id: Some(snapshot_id),
        sequence_number: None,
        file_sequence_number: None,
        data_file: Value::Record(vec![
            ("content".into(), Value::Long(0)),
            ("file_path".into(), Value::String(f.path.clone())),
            ("file_format".into(), Value::String("PARQUET".into())),
            ("partition".into(), Value::Record(vec![])),
            ("record_count".into(), Value::Long(f.rows as i64)),
            ("file_size_in_bytes".into(), Value::Long(f.bytes as i64)),
            ("value_counts".into(), counts_map(&f.counts, false)),
            ("null_value_counts".into(), counts_map(&f.counts, true)),
            ("lower_bounds".into(), bounds_map(&f.bounds, false)),
            ("upper_bounds".into(), bounds_map(&f.bounds, true)),
        ]),
    }
}

/// The status of a manifest entry (Iceberg's `status`).
pub const EXISTING: i64 = 0;
pub const ADDED: i64 = 1;
pub const DELETED: i64 = 2;

/// One entry of a manifest as read back: its status, snapshot and sequence numbers, and
/// the data file record as it was written (so an entry carried into a new manifest keeps
/// its counts and bounds byte for byte).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub status: i64,
    pub snapshot_id: Option<i64>,
    pub sequence_number: Option<i64>,
    pub file_sequence_number: Option<i64>,
    pub data_file: Value,
}

impl Entry {
    /// The data file's location.
    pub fn path(&self) -> &str {
        self.data_file
            .field("file_path")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The data file's record count.
    pub fn rows(&self) -> i64 {
        self.data_file
            .field("record_count")
            .and_then(Value::as_long)
            .unwrap_or(0)
    }

    /// Whether the file is data of the snapshot the manifest belongs to (not `DELETED`).
    pub fn live(&self) -> bool {
        self.status != DELETED
    }

    fn to_value(&self) -> Value {
        let opt = |v: Option<i64>| v.map_or(Value::Null, Value::Long);
        Value::Record(vec![
            ("status".into(), Value::Long(self.status)),
            ("snapshot_id".into(), opt(self.snapshot_id)),
            ("sequence_number".into(), opt(self.sequence_number)),
            (
                "file_sequence_number".into(),
                opt(self.file_sequence_number),
            ),
            ("data_file".into(), self.data_file.clone()),
        ])
    }
}

/// The entries of a manifest (`name` names the file in errors).
pub fn read_manifest(body: &[u8], name: &str) -> Result<Vec<Entry>> {
    let (_, records) = avro::read_container(body, name)?;
    Ok(records
        .iter()
        .map(|r| {
            let long = |field: &str| r.field(field).and_then(Value::as_long);
            Entry {
                status: long("status").unwrap_or(ADDED),
                snapshot_id: long("snapshot_id"),
                sequence_number: long("sequence_number"),
                file_sequence_number: long("file_sequence_number"),
                data_file: r.field("data_file").cloned().unwrap_or(Value::Null),
            }
        })
        .collect())
}

/// A manifest of `entries` as they are (statuses, snapshot ids and sequence numbers
/// set by the caller); `schema_json` as for [`write_manifest`].
pub fn write_entries(schema_json: &str, schema_id: i32, entries: &[Entry]) -> Result<Vec<u8>> {
    let records: Vec<Value> = entries.iter().map(Entry::to_value).collect();
    write_records(schema_json, schema_id, &records)
}

fn write_records(schema_json: &str, schema_id: i32, records: &[Value]) -> Result<Vec<u8>> {
    let metadata = [
        ("schema", schema_json.to_owned()),
        ("schema-id", schema_id.to_string()),
        ("partition-spec", "[]".to_owned()),
        ("partition-spec-id", "0".to_owned()),
        ("format-version", "2".to_owned()),
        ("content", "data".to_owned()),
    ];
    avro::write_container(MANIFEST_ENTRY_SCHEMA, &metadata, records)
}

/// One entry of a manifest list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    pub path: String,
    pub length: i64,
    pub partition_spec_id: i64,
    pub content: i64,
    pub sequence_number: i64,
    pub min_sequence_number: i64,
    pub added_snapshot_id: i64,
    pub added_files: i64,
    pub existing_files: i64,
    pub deleted_files: i64,
    pub added_rows: i64,
    pub existing_rows: i64,
    pub deleted_rows: i64,
}

impl ManifestFile {
    pub(crate) fn to_value(&self) -> Value {
        let l = Value::Long;
        Value::Record(vec![
            ("manifest_path".into(), Value::String(self.path.clone())),
            ("manifest_length".into(), l(self.length)),
            ("partition_spec_id".into(), l(self.partition_spec_id)),
            ("content".into(), l(self.content)),
            ("sequence_number".into(), l(self.sequence_number)),
            ("min_sequence_number".into(), l(self.min_sequence_number)),
            ("added_snapshot_id".into(), l(self.added_snapshot_id)),
            ("added_files_count".into(), l(self.added_files)),
            ("existing_files_count".into(), l(self.existing_files)),
            ("deleted_files_count".into(), l(self.deleted_files)),
            ("added_rows_count".into(), l(self.added_rows)),
            ("existing_rows_count".into(), l(self.existing_rows)),
            ("deleted_rows_count".into(), l(self.deleted_rows)),
        ])
    }

    fn of_value(v: &Value) -> ManifestFile {
        let long = |name: &str| v.field(name).and_then(Value::as_long).unwrap_or(0);
        ManifestFile {
            path: v
                .field("manifest_path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            length: long("manifest_length"),
            partition_spec_id: long("partition_spec_id"),
            content: long("content"),
            sequence_number: long("sequence_number"),
            min_sequence_number: long("min_sequence_number"),
            added_snapshot_id: long("added_snapshot_id"),
            added_files: long("added_files_count"),
            existing_files: long("existing_files_count"),
            deleted_files: long("deleted_files_count"),
            added_rows: long("added_rows_count"),
            existing_rows: long("existing_rows_count"),
            deleted_rows: long("deleted_rows_count"),
        }
    }
}

/// The manifest list of snapshot `snapshot_id` (child of `parent`, sequence number
/// `sequence_number`) naming `manifests`.
pub fn write_list(
    snapshot_id: i64,
    parent: Option<i64>,
    sequence_number: i64,
    manifests: &[ManifestFile],
) -> Result<Vec<u8>> {
    let metadata = [
        ("snapshot-id", snapshot_id.to_string()),
        (
            "parent-snapshot-id",
            parent.map_or_else(|| "null".to_owned(), |p| p.to_string()),
        ),
        ("sequence-number", sequence_number.to_string()),
        ("format-version", "2".to_owned()),
    ];
    let records: Vec<Value> = manifests.iter().map(ManifestFile::to_value).collect();
    avro::write_container(MANIFEST_FILE_SCHEMA, &metadata, &records)
}

/// The manifests a manifest list names (`name` names the file in errors).
pub fn read_list(body: &[u8], name: &str) -> Result<Vec<ManifestFile>> {
    let (_, records) = avro::read_container(body, name)?;
    Ok(records.iter().map(ManifestFile::of_value).collect())
}

/// The table schema as the `schema` header key of a manifest (the schema object, with
/// its id).
pub fn schema_header(schema: &super::metadata::SchemaVersion) -> String {
    serde_json::to_value(schema)
        .unwrap_or(Json::Null)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_round_trips() {
        let m = ManifestFile {
            path: "file:///t/_iceberg/metadata/a-m0.avro".into(),
            length: 1234,
            partition_spec_id: 0,
            content: 0,
            sequence_number: 3,
            min_sequence_number: 3,
            added_snapshot_id: 99,
            added_files: 2,
            existing_files: 0,
            deleted_files: 0,
            added_rows: 10,
            existing_rows: 0,
            deleted_rows: 0,
        };
        let body = write_list(99, Some(98), 3, std::slice::from_ref(&m)).unwrap();
        assert_eq!(read_list(&body, "l.avro").unwrap(), vec![m]);
    }

    #[test]
    fn a_manifest_names_its_files_with_field_ids() {
        let files = [DataFile {
            path: "file:///t/cdc-1-000001.parquet".into(),
            rows: 5,
            bytes: 900,
            pos_range: None,
            bounds: vec![(2, b"0/10".to_vec(), b"0/20".to_vec())],
            metrics: Vec::new(),
            counts: vec![(1, 5, Some(2)), (2, 5, None)],
        }];
        let body = write_manifest(7, "{}", 0, &files).unwrap();
        let (meta, records) = avro::read_container(&body, "m.avro").unwrap();
        let schema = String::from_utf8(meta["avro.schema"].clone()).unwrap();
        assert!(schema.contains(r#""field-id":102"#));
        let file = records[0].field("data_file").unwrap();
        assert_eq!(
            file.field("file_path").and_then(Value::as_str),
            Some("file:///t/cdc-1-000001.parquet")
        );
        assert_eq!(file.field("record_count"), Some(&Value::Long(5)));
        assert_eq!(records[0].field("status"), Some(&Value::Long(1)));
        let counts = |field: &str| match file.field(field) {
            Some(Value::Array(entries)) => entries
                .iter()
                .map(|e| {
                    (
                        e.field("key").and_then(Value::as_long),
                        e.field("value").and_then(Value::as_long),
                    )
                })
                .collect::<Vec<_>>(),
            other => panic!("{field}: {other:?}"),
        };
        assert_eq!(
            counts("value_counts"),
            [(Some(1), Some(5)), (Some(2), Some(5))]
        );
        assert_eq!(counts("null_value_counts"), [(Some(1), Some(2))]);
        let upper = file.field("upper_bounds").unwrap();
        assert_eq!(
            upper,
            &Value::Array(vec![Value::Record(vec![
                ("key".into(), Value::Long(2)),
                ("value".into(), Value::Bytes(b"0/20".to_vec())),
            ])])
        );
    }
}
