//! What a table folder holds, as the manifests record it: the parts the run manifests list
//! as data, the compaction manifests (`<table>/_compactions/<id>-<step>.json`) with the
//! parts each wrote and the parts each replaced, and the data files the folder lists.
//!
//! Guarantees: the **live** parts of a table ([`Ledger::live`]) are every part a run
//! manifest lists in `parts` (never `pending`) or a compaction manifest lists in `parts`,
//! minus every part a compaction manifest lists in `replaced` — a set difference, so it
//! does not depend on the order manifests are read in, and it follows a part through any
//! number of compactions (a compacted part compacted again is `replaced` by the later
//! one). Their rows are exactly the rows the run manifests' parts held: each compaction
//! manifest's `parts` hold the rows of its `replaced` parts, byte-identical. A document
//! that does not parse is `SLUICE_STATE_CORRUPT` naming it; nothing here writes.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SecondsFormat, Utc};
use futures_util::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::{Manifest, ManifestPart};

/// The folder of a table's compaction manifests, below the table folder.
pub const COMPACTIONS_DIR: &str = "_compactions";

/// The file name prefix of a compacted part: `compacted-<compaction id>-<nnnnnn>.parquet`.
/// A drain's parts are `cdc-<run id>-…` and a baseline's `part-…` under `snapshot/`, so
/// no compacted name is ever one of theirs; like theirs it ends in `.parquet` and starts
/// with neither `_` nor `.`, so every folder reader (and `sluice sql`'s glob) takes it.
pub const COMPACTED_PREFIX: &str = "compacted-";

/// Run manifests and compaction manifests read at once.
const READS_AT_ONCE: usize = 16;

/// `<table>/_compactions/<compaction id>-<step>.json`: one step of one compaction — the
/// parts it wrote and the parts whose rows they hold, which it then removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionManifest {
    /// 1.
    pub format_version: u32,
    pub job: String,
    pub table: String,
    /// The compaction run's id (a run id: it sorts by start time).
    pub compaction_id: String,
    /// The step of that run, from 1.
    pub step: u32,
    /// The parts this step wrote, in stream order (the same fields as a run manifest's
    /// parts; `checksum` is the `mix64` of their rows, which equals the running sum of
    /// the replaced parts' rows in this order).
    pub parts: Vec<ManifestPart>,
    /// The parts whose rows `parts` hold (as their manifests listed them), in stream
    /// order; removed after this document is written.
    pub replaced: Vec<ManifestPart>,
    /// Rows and bytes of `parts`.
    pub rows: u64,
    pub bytes: u64,
    /// Bytes of `replaced`.
    pub replaced_bytes: u64,
    /// Set when the step dropped parts a re-baseline superseded (`parts` is then empty):
    /// the `__pos` of the epoch marker every change of `replaced` sorts before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// `forget` for a step of `sluice forget` (absent: a compaction's): its `parts` then
    /// hold the rows of its `replaced` minus the forgotten keys' rows (each kept row
    /// byte-identical, in order), and `files` names the files no run manifest lists that
    /// it rewrote the same way (baseline parts, earlier plans).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// With `kind: forget`: the baseline (and other unlisted) files the step rewrote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<RewrittenFile>,
    /// With `kind: forget`: the rows of the forgotten keys the step removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_removed: Option<u64>,
    /// RFC 3339, UTC, milliseconds.
    pub written_at: String,
    /// With `table_format: iceberg`: the step's `replace` snapshot — `pending` from the
    /// manifest's first write until the snapshot is committed, then `committed` with its
    /// id. Absent for a plain folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iceberg: Option<IcebergRecord>,
}

/// A compaction step's Iceberg commit, as its manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IcebergRecord {
    /// `pending` or `committed`.
    pub status: String,
    /// The `replace` snapshot (absent while pending, or when the snapshot was found
    /// committed but already expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
}

impl IcebergRecord {
    pub const PENDING: &'static str = "pending";
    pub const COMMITTED: &'static str = "committed";

    /// True while the step's snapshot is not known committed.
    pub fn pending(&self) -> bool {
        self.status != Self::COMMITTED
    }
}

/// A file no run manifest lists that a `forget` step rewrote: `key` is removed after the
/// manifest, `by` (absent when no row was left) holds the rest of its rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewrittenFile {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<ManifestPart>,
}

impl CompactionManifest {
    /// The current `format_version`.
    pub const FORMAT_VERSION: u32 = 1;

    /// The manifest of step `step` of compaction `compaction_id`.
    pub fn new(
        (job, table): (&str, &str),
        (compaction_id, step): (&str, u32),
        parts: Vec<ManifestPart>,
        replaced: Vec<ManifestPart>,
        written_at: DateTime<Utc>,
    ) -> Self {
        CompactionManifest {
            format_version: Self::FORMAT_VERSION,
            job: job.to_owned(),
            table: table.to_owned(),
            compaction_id: compaction_id.to_owned(),
            step,
            rows: parts.iter().map(|p| p.rows).sum(),
            bytes: parts.iter().map(|p| p.bytes).sum(),
            replaced_bytes: replaced.iter().map(|p| p.bytes).sum(),
            superseded_by: None,
            kind: None,
            files: Vec::new(),
            rows_removed: None,
            iceberg: None,
            parts,
            replaced,
            written_at: written_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        }
    }

    /// The step's name in an Iceberg snapshot summary (`sluice.compaction-id`):
    /// `<compaction id>-<step>`.
    pub fn step_id(&self) -> String {
        format!("{}-{:04}", self.compaction_id, self.step)
    }

    /// Its key.
    pub fn key(&self) -> String {
        manifest_key(&self.table, &self.compaction_id, self.step)
    }

    /// The document as pretty-printed JSON.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(Code::Internal, "serializing a compaction manifest").source(e))
    }
}

/// The key of step `step` of compaction `compaction_id` of `table`.
pub fn manifest_key(table: &str, compaction_id: &str, step: u32) -> String {
    format!("{table}/{COMPACTIONS_DIR}/{compaction_id}-{step:04}.json")
}

/// The key of compacted part `number` of compaction `compaction_id` in `partition` (the
/// folder below the table folder, dated layouts) of `table`.
pub fn compacted_key(
    table: &str,
    partition: Option<&str>,
    compaction_id: &str,
    number: u32,
) -> String {
    let name = format!("{COMPACTED_PREFIX}{compaction_id}-{number:06}.parquet");
    match partition {
        Some(folder) => format!("{table}/{folder}/{name}"),
        None => format!("{table}/{name}"),
    }
}

/// True for a key that names a data file a folder reader takes: a `.parquet` object
/// below the table folder none of whose names starts with `_` or `.`.
pub fn is_data_file(table: &str, key: &str) -> bool {
    let Some(rel) = key.strip_prefix(table).and_then(|k| k.strip_prefix('/')) else {
        return false;
    };
    rel.ends_with(".parquet")
        && rel
            .split('/')
            .all(|segment| !segment.starts_with('_') && !segment.starts_with('.'))
}

/// True for a compacted part's key.
pub fn is_compacted(key: &str) -> bool {
    key.rsplit('/')
        .next()
        .is_some_and(|name| name.starts_with(COMPACTED_PREFIX) && name.ends_with(".parquet"))
}

/// A live part and where its record comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePart {
    pub part: ManifestPart,
    /// `written_at` of the manifest that lists it (a run's, or the compaction's that wrote
    /// it), ms since the epoch; `None` when it does not parse (treated as new).
    pub listed_at_ms: Option<i64>,
}

/// A table folder as its manifests record it.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Every part a run or compaction manifest lists as data, by key (the first record
    /// read wins; two manifests never list one part).
    pub listed: BTreeMap<String, LivePart>,
    /// Every part a compaction manifest replaced.
    pub replaced: BTreeSet<String>,
    /// The compaction manifests, by key.
    pub compactions: BTreeMap<String, CompactionManifest>,
    /// Every object key below the table folder, as listed.
    pub objects: BTreeSet<String>,
    /// Every part a run manifest lists as `pending` (not data, but a run may still
    /// settle it into `parts`).
    pub pending: BTreeSet<String>,
}

impl Ledger {
    /// Reads `table`'s folder in `destination`: one listing, then every run manifest and
    /// compaction manifest (a few at a time).
    pub async fn read(destination: &dyn Destination, table: &str) -> Result<Ledger> {
        let objects: BTreeSet<String> = destination
            .list(&format!("{table}/"))
            .await?
            .into_iter()
            .collect();
        let runs_dir = format!("{table}/_manifests/");
        let compactions_dir = format!("{table}/{COMPACTIONS_DIR}/");
        let documents: Vec<String> = objects
            .iter()
            .filter(|k| {
                let name = k.rsplit('/').next().unwrap_or_default();
                name.ends_with(".json")
                    && !name.starts_with('.')
                    && (k.starts_with(&runs_dir) || k.starts_with(&compactions_dir))
            })
            .cloned()
            .collect();
        let read = |key: String| async move {
            let body = destination.get(&key).await?;
            Ok::<_, Error>((key, body))
        };
        let bodies: Vec<(String, Option<Vec<u8>>)> = futures_util::stream::iter(documents)
            .map(read)
            .buffered(READS_AT_ONCE)
            .try_collect()
            .await?;
        let mut ledger = Ledger {
            objects,
            ..Ledger::default()
        };
        for (key, body) in bodies {
            // Listed, then gone: a run manifest is never removed, a compaction manifest
            // only when withdrawn as void (its rows held elsewhere); either way nothing
            // of it is data any more.
            let Some(body) = body else { continue };
            if key.starts_with(&runs_dir) {
                let manifest: Manifest = parse(destination, &key, &body)?;
                let at = millis(&manifest.written_at);
                if let Some(pending) = &manifest.pending {
                    ledger
                        .pending
                        .extend(pending.parts.iter().map(|p| p.key.clone()));
                }
                ledger.list(manifest.parts, at);
            } else {
                let manifest: CompactionManifest = parse(destination, &key, &body)?;
                let at = millis(&manifest.written_at);
                ledger
                    .replaced
                    .extend(manifest.replaced.iter().map(|p| p.key.clone()));
                ledger.list(manifest.parts.clone(), at);
                ledger.compactions.insert(key, manifest);
            }
        }
        Ok(ledger)
    }

    fn list(&mut self, parts: Vec<ManifestPart>, listed_at_ms: Option<i64>) {
        for part in parts {
            self.listed
                .entry(part.key.clone())
                .or_insert(LivePart { part, listed_at_ms });
        }
    }

    /// The live parts: listed and not replaced, in key order.
    pub fn live(&self) -> impl Iterator<Item = &LivePart> {
        self.listed
            .values()
            .filter(|p| !self.replaced.contains(&p.part.key))
    }

    /// The data files `table`'s folder holds now (one listing).
    pub async fn files(destination: &dyn Destination, table: &str) -> Result<u64> {
        let keys = destination.list(&format!("{table}/")).await?;
        Ok(keys.iter().filter(|k| is_data_file(table, k)).count() as u64)
    }

    /// The data files the folder holds (what a folder reader opens).
    pub fn data_files(&self, table: &str) -> usize {
        self.objects
            .iter()
            .filter(|k| is_data_file(table, k))
            .count()
    }

    /// Compacted parts in the folder that no compaction manifest names: what a
    /// compaction that died before its manifest left (byte-identical copies of live rows).
    pub fn orphans(&self) -> Vec<String> {
        let named: BTreeSet<&str> = self
            .compactions
            .values()
            .flat_map(|m| m.parts.iter().map(|p| p.key.as_str()))
            .collect();
        self.objects
            .iter()
            .filter(|k| is_compacted(k) && !named.contains(k.as_str()))
            .cloned()
            .collect()
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    destination: &dyn Destination,
    key: &str,
    body: &[u8],
) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        Error::new(
            Code::StateCorrupt,
            format!("{} {key} is not a sluice manifest", destination.describe()),
        )
        .hint("restore the document from a version (or a backup); compaction reads every manifest of the table and stops while one does not parse")
        .source(e)
    })
}

fn millis(rfc3339: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(key: &str) -> ManifestPart {
        ManifestPart {
            key: key.into(),
            rows: 1,
            bytes: 10,
            checksum: "mix64:0000000000000000".into(),
            first_pos: "a".into(),
            last_pos: "a".into(),
            partition: None,
            shape: None,
        }
    }

    #[test]
    fn names_cannot_collide_and_are_read_as_data() {
        let key = compacted_key("t", None, "20261201T000000000Z-abcdef", 1);
        assert_eq!(key, "t/compacted-20261201T000000000Z-abcdef-000001.parquet");
        assert!(is_data_file("t", &key) && is_compacted(&key));
        let dated = compacted_key("t", Some("dt=2026-12-01"), "c", 2);
        assert_eq!(dated, "t/dt=2026-12-01/compacted-c-000002.parquet");
        assert!(is_data_file("t", &dated));
        assert!(!is_compacted(
            "t/cdc-20261201T000000000Z-abcdef-000001.parquet"
        ));
        assert!(!is_data_file("t", "t/_compactions/c-0001.json"));
        assert!(!is_data_file("t", "t/.tmp-1-0-x.parquet"));
        assert!(!is_data_file(
            "t",
            "t/_superseded/x/snapshot/p/part-000001.parquet"
        ));
        assert!(!is_data_file("tt", "t/x.parquet"));
        assert_eq!(manifest_key("t", "c", 3), "t/_compactions/c-0003.json");
    }

    #[test]
    fn live_parts_are_listed_minus_replaced_in_any_order() {
        let mut ledger = Ledger::default();
        ledger.list(
            vec![
                part("t/cdc-a-000001.parquet"),
                part("t/cdc-b-000001.parquet"),
            ],
            None,
        );
        // A compaction of both, then a compaction of its output and a newer part.
        ledger.list(vec![part("t/compacted-c1-000001.parquet")], None);
        ledger.replaced.extend([
            "t/cdc-a-000001.parquet".into(),
            "t/cdc-b-000001.parquet".into(),
        ]);
        ledger.list(vec![part("t/cdc-d-000001.parquet")], None);
        ledger.list(vec![part("t/compacted-c2-000001.parquet")], None);
        ledger.replaced.extend([
            "t/compacted-c1-000001.parquet".into(),
            "t/cdc-d-000001.parquet".into(),
        ]);
        let live: Vec<&str> = ledger.live().map(|p| p.part.key.as_str()).collect();
        assert_eq!(live, ["t/compacted-c2-000001.parquet"]);
    }

    #[test]
    fn orphans_are_compacted_parts_no_manifest_names() {
        let mut ledger = Ledger::default();
        ledger.objects.extend([
            "t/compacted-c1-000001.parquet".to_owned(),
            "t/compacted-c2-000001.parquet".to_owned(),
            "t/cdc-a-000001.parquet".to_owned(),
        ]);
        let m = CompactionManifest::new(
            ("j", "t"),
            ("c1", 1),
            vec![part("t/compacted-c1-000001.parquet")],
            vec![part("t/cdc-z-000001.parquet")],
            Utc::now(),
        );
        assert_eq!((m.rows, m.bytes, m.replaced_bytes), (1, 10, 10));
        ledger.compactions.insert(m.key(), m);
        assert_eq!(ledger.orphans(), ["t/compacted-c2-000001.parquet"]);
        assert_eq!(ledger.data_files("t"), 3);
    }
}
