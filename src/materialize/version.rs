//! A table's current-state versions: the files a build writes,
//! `<table>/_current_state/v-<version>/bucket-<n>.parquet`, and the pointer
//! `<table>/_current_state/_version.json` naming the files of the version to read (a
//! bucket no later build touched keeps its file from an earlier version's folder).
//!
//! Guarantees: a version's files are written before the pointer names them, and a version
//! folder is never written twice once a pointer has named it (a crashed build's leftovers,
//! in a folder no pointer named, are removed before the next build writes there); the
//! files the previous pointer named stay until the pointer after this one replaces it, so
//! a reader that read the pointer just before a swap finishes its read.

use serde::{Deserialize, Serialize};

use crate::destination::Destination;
use crate::error::{Code, Error, Result};

/// The folder below a table's folder that holds its current-state versions.
pub const FOLDER: &str = "_current_state";

/// What the pointer says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    pub format_version: u32,
    pub table: String,
    /// The version to read.
    pub version: u64,
    /// The state's files (keys below the destination's root): every row of the state is
    /// in exactly one of them, and they are all of it.
    pub files: Vec<String>,
    /// Per bucket, its file (`None`: the bucket holds no row).
    pub buckets: Vec<Option<String>>,
    /// How rows are assigned to the buckets.
    #[serde(default)]
    pub bucketing: super::buckets::Bucketing,
    /// Per bucket, the rows it held when written (at most what it holds: `sluice forget`
    /// removes rows without counting them again); empty in a pointer written before counts
    /// were kept.
    #[serde(default)]
    pub bucket_rows: Vec<u64>,
    /// Per bucket, the size in bytes of its file (0: no file, or a pointer written before
    /// sizes were kept); an Iceberg commit of the version lists them.
    #[serde(default)]
    pub bucket_bytes: Vec<u64>,
    pub rows: u64,
    /// The newest change folded in: the state is exact as of this `(__pos, __seq)`.
    pub watermark: Option<Watermark>,
    /// The newest run whose manifest the build read (where the next build looks again).
    pub runs_through: Option<String>,
    /// The baseline plan folded in (`snapshot/<plan>/`).
    pub plan: Option<String>,
    /// Every plan folder listed at the build, with its file count: while they stay the
    /// same, the current plan is the same and no plan part is read again.
    #[serde(default)]
    pub plans_seen: std::collections::BTreeMap<String, usize>,
    /// The state's columns, `name type` in order: a build for another shape starts over.
    pub columns: Vec<String>,
    /// The files the version named before this one, kept for readers that read that
    /// pointer just before this one replaced it.
    pub previous_files: Vec<String>,
    /// `full` (every file of the table folded), `incremental` (the buckets new changes
    /// touched, on top of the previous version) or `forget` (`sluice forget` rewrote the
    /// files holding a key; watermark and buckets kept).
    pub build: String,
    /// How many part files this build read.
    pub parts_read: usize,
    /// RFC 3339 time of the build.
    pub written_at: String,
}

/// The newest change a state holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    pub pos: String,
    pub seq: i64,
}

impl Pointer {
    /// The current `format_version`.
    pub const FORMAT_VERSION: u32 = 1;
}

/// The pointer's key.
pub fn pointer_key(table: &str) -> String {
    format!("{table}/{FOLDER}/_version.json")
}

/// The folder of `version`, below the destination's root.
pub fn folder_key(table: &str, version: u64) -> String {
    format!("{table}/{FOLDER}/v-{version:010}")
}

/// The pointer, if one was written.
pub async fn read(destination: &dyn Destination, table: &str) -> Result<Option<Pointer>> {
    let key = pointer_key(table);
    let Some(body) = destination.get(&key).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        Error::new(
            Code::StateCorrupt,
            format!("{} {key} is not a sluice current-state pointer", destination.describe()),
        )
        .hint("remove it; the next `sluice materialize` builds the current state again from the parts")
        .source(e)
    })
}

/// Replaces the pointer (one object, written whole).
pub async fn write(destination: &dyn Destination, pointer: &Pointer) -> Result<()> {
    let body = serde_json::to_vec_pretty(pointer).map_err(|e| {
        Error::new(
            Code::Internal,
            "serializing a current-state pointer".to_owned(),
        )
        .source(e)
    })?;
    destination
        .put_marker(&pointer_key(&pointer.table), &body)
        .await
}

/// The version number of each version folder under the table's current-state folder.
pub async fn listed_versions(
    destination: &dyn Destination,
    table: &str,
) -> Result<Vec<(u64, String)>> {
    let prefix = format!("{table}/{FOLDER}/v-");
    let mut versions = Vec::new();
    for key in destination.list(&prefix).await? {
        let Some(rest) = key.strip_prefix(&prefix) else {
            continue;
        };
        if let Some(version) = rest.split('/').next().and_then(|v| v.parse::<u64>().ok()) {
            versions.push((version, key));
        }
    }
    Ok(versions)
}

/// Removes every file under the table's current-state folder that `keep` does not accept;
/// how many were removed.
pub async fn remove_files(
    destination: &dyn Destination,
    table: &str,
    keep: impl Fn(u64, &str) -> bool,
) -> Result<usize> {
    let mut removed = 0;
    for (version, key) in listed_versions(destination, table).await? {
        if !keep(version, &key) {
            destination.delete(&key).await?;
            removed += 1;
        }
    }
    Ok(removed)
}
