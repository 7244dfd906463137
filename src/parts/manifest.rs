//! The per-table `_manifest.json` of a clean run: which parts it wrote, their rows, bytes
//! and checksums, the position range, and the table schema.
//!
//! Guarantees on naming: every document sluice writes beside parts has a name starting
//! with `_` ([`MANIFEST_FILE`], `_SUCCESS`, `_manifests/`, `_plan.json`), the prefix
//! pyarrow, Spark, Hive and Athena skip, so a table folder reads as data only.
//!
//! Guarantees: the document is a public contract (docs/output.md, Manifests), versioned by
//! `format_version` (currently 1); `rows` and `bytes` are the sums over `parts`, which are
//! listed in the order they were written; columns are listed as [`ManifestColumn`]s, in
//! the stable sluice type names (`int32`, `decimal(12,2)`, `timestamp_tz`, `list<utf8>`).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::change::TableSchema;
use crate::error::{Code, Error, Result};
use crate::parts::columns::ManifestColumn;
use crate::parts::schema_history::Shape;
use crate::policy::record::PolicyRecord;

/// The manifest's file name in a table folder and in its `snapshot/` folder.
pub const MANIFEST_FILE: &str = "_manifest.json";

/// The name an earlier sluice gave the manifest; readers trip over it (`doctor` warns).
pub const LEGACY_MANIFEST_FILE: &str = "manifest.json";

/// How the run that wrote the manifest ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManifestStatus {
    /// The run reached its read bound.
    Drained,
    /// The run stopped early (deadline) at a transaction boundary; more is pending.
    Partial,
    /// The run is under way (or was fenced by a newer run): `parts` are checkpointed,
    /// `pending` is not yet.
    Running,
    /// The run ended without a clean end; a later run settled its `pending` parts.
    Interrupted,
}

/// Parts a run made durable that its next checkpoint (at `to`) will cover. Not data until
/// that checkpoint is written: a later run moves them into `parts` when the job's stored
/// checkpoint is this run's at `to`, and drops them otherwise (their changes are written
/// again from the older checkpoint).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingParts {
    /// Position text of the checkpoint the parts wait for.
    pub to: String,
    pub parts: Vec<ManifestPart>,
}

/// One part in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestPart {
    pub key: String,
    pub rows: u64,
    pub bytes: u64,
    /// `mix64:<16 hex>` (`fnv1a64:<16 hex>` from earlier versions; both verified by
    /// [`crate::parts::checksum::verify_batches`]).
    pub checksum: String,
    pub first_pos: String,
    pub last_pos: String,
    /// The part's partition folder below the table folder (`dt=2026-12-03`,
    /// `dt=2026-12-03/hr=07`) with a dated `output.layout`; absent in the flat layout and
    /// for snapshot parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The version of the table's shape the part has, in its schema history
    /// (`_schema_history.json`, [`crate::parts::schema_history`]); change parts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<u32>,
}

/// Who wrote the manifest and over what range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestRun {
    pub job: String,
    pub table: String,
    pub run_id: String,
    pub status: ManifestStatus,
    /// Position text the run started from.
    pub from: String,
    /// Position text the run's checkpoint reached.
    pub to: String,
}

/// `_manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub job: String,
    pub table: String,
    pub run_id: String,
    pub status: ManifestStatus,
    pub from: String,
    pub to: String,
    pub rows: u64,
    pub bytes: u64,
    pub parts: Vec<ManifestPart>,
    pub schema: Vec<ManifestColumn>,
    /// The table has no key column: its current state is the multiset replay
    /// (docs/output.md), not the latest row per key. Absent when the table has a key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keyless: bool,
    /// RFC 3339, UTC, milliseconds.
    pub written_at: String,
    /// Only while `status` is `running`: parts waiting for the next checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingParts>,
    /// The shapes of the table this run's parts were the first to have (their `since`,
    /// columns and changes), as added to the table's schema history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<Shape>,
    /// The column policy and row filter the parts were written under (docs/privacy.md);
    /// absent for a table without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRecord>,
}

impl Manifest {
    /// The current `format_version`.
    pub const FORMAT_VERSION: u32 = 1;

    /// A manifest of `parts` (in write order) with `schema` (the last part's schema, or the
    /// table's current one when the run wrote no part).
    pub fn new(
        run: ManifestRun,
        parts: Vec<ManifestPart>,
        schema: &TableSchema,
        written_at: DateTime<Utc>,
    ) -> Self {
        Manifest {
            format_version: Self::FORMAT_VERSION,
            job: run.job,
            table: run.table,
            run_id: run.run_id,
            status: run.status,
            from: run.from,
            to: run.to,
            rows: parts.iter().map(|p| p.rows).sum(),
            bytes: parts.iter().map(|p| p.bytes).sum(),
            parts,
            schema: ManifestColumn::of(schema),
            keyless: !schema.columns.is_empty() && schema.columns.iter().all(|c| !c.key),
            written_at: written_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            pending: None,
            shapes: Vec::new(),
            policy: None,
        }
    }

    /// The same manifest recording the table's `policy`.
    pub fn with_policy(mut self, policy: Option<PolicyRecord>) -> Self {
        self.policy = policy;
        self
    }

    /// The same manifest listing the new `shapes` its parts introduced.
    pub fn with_shapes(mut self, shapes: Vec<Shape>) -> Self {
        self.shapes = shapes;
        self
    }

    /// The same manifest with `pending` parts waiting for the checkpoint at `to`.
    pub fn with_pending(mut self, to: String, parts: Vec<ManifestPart>) -> Self {
        self.pending = (!parts.is_empty()).then_some(PendingParts { to, parts });
        self
    }

    /// Settles an interrupted run's manifest against the job's stored checkpoint (written
    /// by this manifest's run): the pending parts become data when `covered(pending.to)`
    /// — the stored checkpoint reached the one they waited for — and are dropped
    /// otherwise. Returns whether anything changed.
    pub fn settle(&mut self, covered: impl Fn(&str) -> bool, written_at: DateTime<Utc>) -> bool {
        if self.status != ManifestStatus::Running {
            return false;
        }
        if let Some(pending) = self.pending.take()
            && covered(&pending.to)
        {
            self.parts.extend(pending.parts);
            self.to = pending.to;
        }
        self.rows = self.parts.iter().map(|p| p.rows).sum();
        self.bytes = self.parts.iter().map(|p| p.bytes).sum();
        // A shape only dropped parts had is not history: the next run meets it again.
        let parts = &self.parts;
        self.shapes
            .retain(|s| parts.iter().any(|p| p.shape == Some(s.version)));
        self.status = ManifestStatus::Interrupted;
        self.written_at = written_at.to_rfc3339_opts(SecondsFormat::Millis, true);
        true
    }

    /// The document as pretty-printed JSON.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(Code::Internal, "serializing _manifest.json").source(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType};
    use crate::parts::columns::schema_json;

    fn table() -> TableSchema {
        TableSchema {
            name: "public.orders".into(),
            columns: vec![
                Column {
                    name: "id".into(),
                    ty: ColumnType::Int64,
                    nullable: false,
                    key: true,
                    source_type: "bigint".into(),
                    field_metadata: Default::default(),
                },
                Column {
                    name: "tags".into(),
                    ty: ColumnType::List(Box::new(ColumnType::Utf8)),
                    nullable: true,
                    key: false,
                    source_type: "text[]".into(),
                    field_metadata: Default::default(),
                },
            ],
        }
    }

    fn part(n: u32, rows: u64, bytes: u64) -> ManifestPart {
        ManifestPart {
            key: format!("public.orders/cdc-r1-{n:06}.parquet"),
            rows,
            bytes,
            checksum: "fnv1a64:0123456789abcdef".into(),
            first_pos: "00000000/00000010".into(),
            last_pos: "00000000/00000020".into(),
            partition: None,
            shape: None,
        }
    }

    fn manifest() -> Manifest {
        let run = ManifestRun {
            job: "orders".into(),
            table: "public.orders".into(),
            run_id: "r1".into(),
            status: ManifestStatus::Drained,
            from: "pg:00000000/00000001".into(),
            to: "pg:00000000/00000020".into(),
        };
        let at = DateTime::parse_from_rfc3339("2024-05-01T12:00:00.5Z")
            .unwrap()
            .with_timezone(&Utc);
        Manifest::new(run, vec![part(1, 10, 1000), part(2, 5, 600)], &table(), at)
    }

    #[test]
    fn totals_and_fields_follow_the_contract() {
        let m = manifest();
        assert_eq!((m.rows, m.bytes), (15, 1600));
        let json: serde_json::Value = serde_json::from_slice(&m.to_json_bytes().unwrap()).unwrap();
        assert_eq!(json["format_version"], 1);
        assert_eq!(json["status"], "drained");
        assert_eq!(json["written_at"], "2024-05-01T12:00:00.500Z");
        assert_eq!(
            json["parts"][1]["key"],
            "public.orders/cdc-r1-000002.parquet"
        );
        assert_eq!(
            json["schema"][1],
            serde_json::json!({
                "name": "tags", "type": "list<utf8>", "source_type": "text[]",
                "nullable": true, "key": false
            })
        );
        let keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        for key in [
            "format_version",
            "job",
            "table",
            "run_id",
            "status",
            "from",
            "to",
            "rows",
            "bytes",
            "parts",
            "schema",
            "written_at",
        ] {
            assert!(keys.iter().any(|k| k == key), "missing {key}");
        }
    }

    #[test]
    fn round_trips_and_is_pretty() {
        let m = manifest();
        let bytes = m.to_json_bytes().unwrap();
        assert!(bytes.contains(&b'\n'));
        let back: Manifest = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, m);
        let partial = serde_json::to_string(&ManifestStatus::Partial).unwrap();
        assert_eq!(partial, "\"partial\"");
    }

    #[test]
    fn schema_json_names_the_table_and_columns() {
        let json: serde_json::Value = serde_json::from_str(&schema_json(&table())).unwrap();
        assert_eq!(json["table"], "public.orders");
        assert_eq!(json["columns"][0]["type"], "int64");
        assert_eq!(json["columns"][0]["key"], true);
    }

    fn running() -> Manifest {
        let mut m = manifest();
        m.status = ManifestStatus::Running;
        m.to = "pg:00000000/00000010".into();
        m.with_pending("pg:00000000/00000020".into(), vec![part(3, 7, 700)])
    }

    #[test]
    fn pending_parts_are_no_data_until_settled() {
        let m = running();
        assert_eq!(
            (m.rows, m.bytes),
            (15, 1600),
            "pending parts are not counted"
        );
        let json: serde_json::Value = serde_json::from_slice(&m.to_json_bytes().unwrap()).unwrap();
        assert_eq!(json["status"], "running");
        assert_eq!(json["pending"]["to"], "pg:00000000/00000020");
        assert_eq!(json["parts"].as_array().unwrap().len(), 2);
        let back: Manifest = serde_json::from_slice(&m.to_json_bytes().unwrap()).unwrap();
        assert_eq!(back, m);
        assert!(
            manifest()
                .to_json_bytes()
                .unwrap()
                .windows(9)
                .all(|w| w != b"\"pending\"")
        );
    }

    #[test]
    fn settling_keeps_pending_parts_only_when_their_checkpoint_was_written() {
        let now = Utc::now();
        let mut written = running();
        assert!(written.settle(|to| to == "pg:00000000/00000020", now));
        assert_eq!(written.status, ManifestStatus::Interrupted);
        assert_eq!(written.parts.len(), 3);
        assert_eq!(
            (written.rows, written.to.as_str()),
            (22, "pg:00000000/00000020")
        );
        assert_eq!(written.pending, None);

        let mut lost = running();
        assert!(lost.settle(|_| false, now));
        assert_eq!((lost.parts.len(), lost.rows), (2, 15));
        assert_eq!(lost.to, "pg:00000000/00000010");
        assert_eq!(lost.pending, None);

        let mut clean = manifest();
        assert!(!clean.settle(|_| true, now), "a finished run is left alone");
        assert_eq!(clean, manifest());
    }
}
