//! A table's current-state versions: `<table>/_current_state/v-<version>/part-<n>.parquet`,
//! and the pointer `<table>/_current_state/_version.json` naming the one to read.
//!
//! Guarantees: a version's files are written before the pointer names it, and a version is
//! never written twice under a name the pointer has named (a crashed build's leftovers, in
//! a folder the pointer never named, are removed before the next build writes there); the
//! version the pointer named before stays readable until the next build replaces the
//! pointer again, so a reader that read the pointer just before a swap finishes its read.

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
    /// The version to read: its files are all of `files`, and nothing else.
    pub version: u64,
    /// The folder of the version, below the table folder (`_current_state/v-…`).
    pub folder: String,
    /// Its files' keys below the destination's root.
    pub files: Vec<String>,
    pub rows: u64,
    /// The newest `__pos` folded in: the state is exact as of this position.
    pub watermark: Option<String>,
    /// How many part files were folded.
    pub parts_read: usize,
    /// RFC 3339 time of the build.
    pub written_at: String,
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

/// Removes every file of the versions `keep` does not accept.
pub async fn remove_versions(
    destination: &dyn Destination,
    table: &str,
    keep: impl Fn(u64) -> bool,
) -> Result<usize> {
    let mut removed = 0;
    for (version, key) in listed_versions(destination, table).await? {
        if !keep(version) {
            destination.delete(&key).await?;
            removed += 1;
        }
    }
    Ok(removed)
}
