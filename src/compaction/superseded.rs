//! Change parts a re-baseline superseded: every row of a part whose last change sorts
//! before the table's current epoch marker (the `rebaseline` row a re-baseline writes, or
//! a keyless baseline's snapshot point) is dropped by the replay rule's first clause, so
//! such parts are no longer data for any reader that applies the rule — they only keep old
//! shapes (a list column since moved to its text form) in front of folder readers.
//!
//! Guarantees: the marker is read from the table's **current** baseline —
//! `snapshot/_manifest.json`, written once the baseline is complete — by reading the first
//! row of the first part it lists, which must be a `rebaseline` row (a first keyed
//! baseline has none: nothing is superseded); a part is superseded only when its
//! `last_pos` sorts strictly before the marker's `__pos`. Nothing here removes anything:
//! the compaction drops the parts in a step of its own, whose manifest names them
//! (`replaced`, with no `parts`) and the marker (`superseded_by`).

use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::ledger::Ledger;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::{MANIFEST_FILE, Manifest, ManifestPart};
use crate::spill::errors::io_error;
use crate::spill::files::{self, SpillKind};

/// The `__pos` of `table`'s current epoch marker, `None` when its current baseline has
/// none (or there is no complete baseline).
pub async fn marker(
    destination: &dyn Destination,
    table: &str,
    spill_dir: &Path,
) -> Result<Option<String>> {
    let key = format!("{table}/snapshot/{MANIFEST_FILE}");
    let Some(body) = destination.get(&key).await? else {
        return Ok(None);
    };
    let manifest: Manifest = serde_json::from_slice(&body).map_err(|e| {
        Error::new(
            Code::StateCorrupt,
            format!("{key} is not a sluice manifest"),
        )
        .hint("restore the document from a version; it is rewritten by the next baseline")
        .source(e)
    })?;
    let Some(first) = manifest.parts.first() else {
        return Ok(None);
    };
    std::fs::create_dir_all(spill_dir).map_err(|e| {
        io_error(
            e,
            format!("creating spill directory {}", spill_dir.display()),
            spill_dir,
        )
    })?;
    let created = files::create(spill_dir, SpillKind::Copy).map_err(|failed| {
        io_error(
            failed.source,
            format!(
                "creating a file in {} to read {} through",
                spill_dir.display(),
                first.key
            ),
            spill_dir,
        )
    })?;
    let read = async {
        if !destination.download(&first.key, &created.path).await? {
            return Ok(None);
        }
        first_marker(&created.path, &first.key)
    }
    .await;
    let _ = std::fs::remove_file(&created.path);
    read
}

/// The `__pos` of the first row of the Parquet file at `path` when that row is a
/// `rebaseline` marker.
fn first_marker(path: &Path, key: &str) -> Result<Option<String>> {
    let unreadable = |e: parquet::errors::ParquetError| {
        Error::new(
            Code::CompactionPartCorrupt,
            format!("baseline part {key} does not read as Parquet"),
        )
        .hint(format!(
            "restore {key} from a version or a backup, then run `sluice compact` again"
        ))
        .source(e)
    };
    let file = std::fs::File::open(path)
        .map_err(|e| io_error(e, format!("opening {}", path.display()), path))?;
    let mut reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(unreadable)?
        .with_batch_size(1)
        .build()
        .map_err(unreadable)?;
    let Some(batch) = reader
        .next()
        .transpose()
        .map_err(|e| unreadable(e.into()))?
    else {
        return Ok(None);
    };
    let text = |name: &str| {
        let column = batch.column_by_name(name)?;
        let strings = column.as_string_opt::<i32>()?;
        (!strings.is_null(0)).then(|| strings.value(0).to_owned())
    };
    Ok(match (text("__op").as_deref(), text("__pos")) {
        (Some("rebaseline"), Some(pos)) => Some(pos),
        _ => None,
    })
}

/// The live change parts of `table` whose every change sorts before `marker`, listed at
/// or before `listed_before_ms`, in key order.
pub fn parts_before(
    ledger: &Ledger,
    table: &str,
    marker: &str,
    listed_before_ms: i64,
) -> Vec<ManifestPart> {
    let prefix = format!("{table}/");
    let snapshot = format!("{table}/snapshot/");
    ledger
        .live()
        .filter(|l| l.part.key.starts_with(&prefix) && !l.part.key.starts_with(&snapshot))
        .filter(|l| l.listed_at_ms.is_some_and(|at| at <= listed_before_ms))
        .filter(|l| !l.part.last_pos.is_empty() && l.part.last_pos.as_str() < marker)
        .map(|l| l.part.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::ledger::LivePart;

    fn live(key: &str, first: &str, last: &str) -> LivePart {
        LivePart {
            part: ManifestPart {
                key: key.into(),
                rows: 1,
                bytes: 1,
                checksum: String::new(),
                first_pos: first.into(),
                last_pos: last.into(),
                partition: None,
                shape: None,
            },
            listed_at_ms: Some(0),
        }
    }

    #[test]
    fn only_parts_wholly_before_the_marker_are_superseded() {
        let mut ledger = Ledger::default();
        for p in [
            live(
                "t/cdc-a-000001.parquet",
                "00000001/00000010",
                "00000001/00000020",
            ),
            live(
                "t/cdc-b-000001.parquet",
                "00000001/00000030",
                "00000001/00000050",
            ),
            live(
                "t/cdc-c-000001.parquet",
                "00000001/00000060",
                "00000001/00000070",
            ),
            live(
                "t/snapshot/p/part-000001.parquet",
                "00000001/00000001",
                "00000001/00000001",
            ),
        ] {
            ledger.listed.insert(p.part.key.clone(), p);
        }
        let keys = |parts: Vec<ManifestPart>| parts.into_iter().map(|p| p.key).collect::<Vec<_>>();
        assert_eq!(
            keys(parts_before(&ledger, "t", "00000001/00000050", 0)),
            ["t/cdc-a-000001.parquet"],
            "a part reaching the marker's position stays"
        );
        assert_eq!(
            keys(parts_before(&ledger, "t", "00000001/00000051", 0)).len(),
            2
        );
        assert!(
            parts_before(&ledger, "t", "00000001/00000051", -1).is_empty(),
            "too new"
        );
    }
}
