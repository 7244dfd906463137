//! A table's shape (its columns, which of them are the key) for `sluice sql` and
//! `sluice materialize`, read from
//! what the job wrote: the newest of the table's manifests — `<table>/_manifest.json`
//! (the last clean run), `<table>/_manifests/<run_id>.json` (every run that wrote parts,
//! the newest by name) and `<table>/snapshot/_manifest.json` (the baseline) — so a table
//! with only a baseline, or only interrupted runs, has a shape too.
//!
//! Guarantees: the shape is the one the newest of those documents (by `written_at`)
//! that lists parts records — the newest shape the table's data has; a table with none of
//! them is `SLUICE_REPLAY_NO_SCHEMA`, never a guess.

use serde::Deserialize;

use crate::destination::Destination;
use crate::error::{Code, Error, Result};

/// A column of the table, as a manifest or a part's `sluice.schema` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeColumn {
    pub name: String,
    /// The sluice type name (`int64`, `utf8`, `list<utf8>`, …).
    pub ty: String,
    pub key: bool,
}

#[derive(Debug, Deserialize)]
struct Document {
    #[serde(default)]
    written_at: String,
    #[serde(default)]
    schema: Vec<Column>,
    #[serde(default)]
    parts: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Column {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    key: bool,
}

/// The keys of the documents that may record `table`'s shape, given the keys listed under
/// `<table>/_manifests/`.
fn candidates(table: &str, run_manifests: &[String]) -> Vec<String> {
    let mut keys = vec![
        format!("{table}/_manifest.json"),
        format!("{table}/snapshot/_manifest.json"),
    ];
    if let Some(newest) = run_manifests
        .iter()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap_or_default();
            name.ends_with(".json") && !name.starts_with('.')
        })
        .max()
    {
        keys.push(newest.clone());
    }
    keys
}

/// The shape of `table` from the newest document that records one.
pub async fn read(destination: &dyn Destination, table: &str) -> Result<Vec<ShapeColumn>> {
    let listed = destination.list(&format!("{table}/_manifests/")).await?;
    let mut newest: Option<Document> = None;
    for key in candidates(table, &listed) {
        let Some(body) = destination.get(&key).await? else {
            continue;
        };
        let doc: Document = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                Code::StateCorrupt,
                format!("{} {key} is not a sluice manifest", destination.describe()),
            )
            .hint("restore or remove the document; it is rewritten by the next run")
            .source(e)
        })?;
        // A run that wrote no part of the table records the catalog's shape at its open,
        // which may hold a column no part has yet (added since, nothing written after):
        // a query naming it would fail. The shape is the newest one data has.
        if doc.schema.is_empty() || doc.parts.is_empty() {
            continue;
        }
        if newest
            .as_ref()
            .is_none_or(|n| doc.written_at > n.written_at)
        {
            newest = Some(doc);
        }
    }
    let Some(doc) = newest else {
        return Err(Error::new(
            Code::ReplayNoSchema,
            format!(
                "{} holds no manifest of table {table} yet",
                destination.describe()
            ),
        )
        .hint("run `sluice drain` (or `sluice baseline`) for the job first: its manifests record the table's columns and key"));
    };
    Ok(doc
        .schema
        .into_iter()
        .map(|c| ShapeColumn {
            name: c.name,
            ty: c.ty,
            key: c.key,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_run_manifest_is_a_candidate() {
        let listed = vec![
            "t/_manifests/r1.json".to_owned(),
            "t/_manifests/r2.json".to_owned(),
            "t/_manifests/.r3.json.tmp".to_owned(),
        ];
        assert_eq!(
            candidates("t", &listed),
            [
                "t/_manifest.json",
                "t/snapshot/_manifest.json",
                "t/_manifests/r2.json"
            ]
        );
        assert_eq!(candidates("t", &[]).len(), 2);
    }
}
