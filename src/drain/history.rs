//! Reads and writes each table's `_schema_history.json` beside its parts.
//!
//! Guarantees: the stored history never lists a shape no checkpointed part has: a run
//! writes it at its end, after its last checkpoint, and a run that died before its end is
//! covered by its run manifest, whose `shapes` the next run merges when it settles that
//! manifest (keeping only shapes its data parts have). Until then the history may lag the
//! parts, never lead them; the run manifests are the record a reader can always rebuild
//! it from.

use crate::destination::Destination;
use crate::error::Result;
use crate::parts::schema_history::{History, Shape, history_key};

/// The stored history of `table`, empty when there is none yet.
pub async fn load(destination: &dyn Destination, table: &str) -> Result<History> {
    match destination.get(&history_key(table)).await? {
        Some(body) => History::parse(table, &body),
        None => Ok(History::empty(table)),
    }
}

/// Stores `history`.
pub async fn save(destination: &dyn Destination, history: &History) -> Result<()> {
    destination
        .put_marker(&history_key(&history.table), &history.to_json_bytes()?)
        .await
}

/// Adds `shapes` (a settled run manifest's) to the stored history of `table`, when it
/// lacks any of them.
pub async fn merge(destination: &dyn Destination, table: &str, shapes: &[Shape]) -> Result<()> {
    if shapes.is_empty() {
        return Ok(());
    }
    let mut history = load(destination, table).await?;
    let before = history.clone();
    history.merge(shapes);
    if history != before {
        save(destination, &history).await?;
    }
    Ok(())
}
