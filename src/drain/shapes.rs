//! Watches each table's shape along the stream and names the changes of shape a part
//! cannot carry in place — the table is then re-baselined instead.
//!
//! Guarantees: between two consecutive shapes of a table in the stream, a column renamed
//! (names gone and names new at once), a type changed to one that does not widen the old,
//! or a new column whose rows may hold a value without a logged change (the source says
//! so: [`ChangeStream::filled_without_changes`]) is reported; a column dropped, a nullable
//! column added without a default and a widening are not (they continue in the next
//! part). The first shape of a table in a run is compared with the catalog at the open,
//! which is *later*: a rename or a narrowing still ahead in the backlog is reported at the
//! table's first change (early, never late — a re-baseline from an earlier point is as
//! exact).
//!
//! Between runs: a run stores the column names it last saw per table in
//! `<table>/_stream_shape.json` ([`Shapes::save`]) before each checkpoint, whenever they
//! differ from what the file holds; the next run compares the table's first shape with
//! them, so a rename or a column added with a default between two runs is caught too,
//! also after a run that died past a checkpoint; a table no run has stored names for
//! since its (re-)baseline starts from the baseline manifest's columns. The file never lags a
//! checkpoint's names; it may lead the checkpoint (names seen past it, by a run that died
//! or stopped inside a transaction): the replay from the checkpoint then meets the older
//! shape first and the change of shape again, judged as within a run — a re-baseline too
//! many at worst, never one too few. A re-baselined table's file is reset
//! (`{"columns": null}`), at the first save after the request: its new snapshot has the
//! catalog's shape.
//! At the end of a drained run each table's catalog shape at the open is compared with the
//! last shape the stream showed of it ([`Shapes::check_unchanged`]): a column added with a
//! default after the run's last change of the table re-baselines it in that run.
//! Not compared across runs: types (a narrowing between runs whose parts never meet in
//! one part writer is not caught).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::change::TableSchema;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::source::ChangeStream;

/// The stored document: the column names a run last saw, `null` when unknown.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    columns: Option<Vec<String>>,
}

/// Where a table's last seen column names are kept between runs.
pub fn shape_key(table: &str) -> String {
    format!("{table}/_stream_shape.json")
}

/// The last shape seen per table, and whether it came from the catalog at open; the
/// column names the previous run saw last, until the table's first shape of this run;
/// what each table's file is known to hold (absent: unknown or no file).
pub struct Shapes {
    last: HashMap<String, (Arc<TableSchema>, bool), foldhash::fast::RandomState>,
    stored: HashMap<String, Vec<String>, foldhash::fast::RandomState>,
    saved: HashMap<String, Option<Vec<String>>, foldhash::fast::RandomState>,
}

impl Shapes {
    /// Starts from the shapes the source read from its catalog at open.
    pub fn at_open(tables: &[Arc<TableSchema>]) -> Self {
        Shapes {
            last: tables
                .iter()
                .map(|t| (t.name.clone(), (t.clone(), true)))
                .collect(),
            stored: HashMap::default(),
            saved: HashMap::default(),
        }
    }

    /// Reads what the previous run stored for `tables`. A table without a stored list (no
    /// run has seen a change of it since its baseline, or a re-baseline reset it) starts
    /// from the column names of its current baseline's manifest: the stream continues that
    /// snapshot, so a rename or a column added with a default after it is still caught. An
    /// unreadable document counts as none.
    pub async fn load_stored(
        mut self,
        destination: &dyn Destination,
        tables: &[String],
    ) -> Result<Self> {
        for table in tables {
            let stored = match destination.get(&shape_key(table)).await? {
                None => None,
                Some(body) => match serde_json::from_slice::<Stored>(&body) {
                    Ok(Stored { columns }) => {
                        self.saved.insert(table.clone(), columns.clone());
                        columns
                    }
                    Err(e) => {
                        tracing::warn!(table = %table, error = %e, "ignoring an unreadable {}", shape_key(table));
                        None
                    }
                },
            };
            let stored = match stored {
                Some(columns) => Some(columns),
                None => snapshot_columns(destination, table).await?,
            };
            if let Some(columns) = stored {
                self.stored.insert(table.clone(), columns);
            }
        }
        Ok(self)
    }

    /// Stores, per table, the column names this run saw last (`null` for a table whose
    /// re-baseline is asked for) where they differ from what its file holds; tables this
    /// run saw no change of keep their document. Called before each checkpoint (the
    /// run's last included), so the file never lags one.
    pub async fn save(
        &mut self,
        destination: &dyn Destination,
        rebaselined: &BTreeSet<String>,
    ) -> Result<()> {
        // What each file should hold, where it holds something else; compared without
        // copying the names, as this runs at every checkpoint.
        let mut changed = Vec::new();
        for (table, (shape, from_open)) in &self.last {
            if *from_open || rebaselined.contains(table) {
                continue;
            }
            let names = shape.columns.iter().map(|c| &c.name);
            if !matches!(self.saved.get(table), Some(Some(saved)) if saved.iter().eq(names)) {
                let names = shape.columns.iter().map(|c| c.name.clone()).collect();
                changed.push((table.clone(), Some(names)));
            }
        }
        for table in rebaselined {
            if self.saved.get(table) != Some(&None) {
                changed.push((table.clone(), None));
            }
        }
        for (table, columns) in changed {
            let body = serde_json::to_vec(&Stored {
                columns: columns.clone(),
            })
            .map_err(|e| Error::new(Code::Internal, "encoding a stream shape").source(e))?;
            destination.put_marker(&shape_key(&table), &body).await?;
            self.saved.insert(table, columns);
        }
        Ok(())
    }

    /// Records `shape` as the table's current one; returns why the table must be
    /// re-baselined, if it must.
    pub async fn check(
        &mut self,
        shape: &Arc<TableSchema>,
        stream: &mut dyn ChangeStream,
    ) -> Result<Option<String>> {
        if let Some(names) = self.stored.remove(&shape.name)
            && let Some(reason) = since_stored(&names, shape, stream).await?
        {
            self.last.insert(shape.name.clone(), (shape.clone(), false));
            return Ok(Some(reason));
        }
        let Some((last, from_open)) = self.last.get(&shape.name) else {
            self.last.insert(shape.name.clone(), (shape.clone(), false));
            return Ok(None);
        };
        if Arc::ptr_eq(last, shape) || **last == **shape {
            if *from_open {
                self.last.insert(shape.name.clone(), (shape.clone(), false));
            }
            return Ok(None);
        }
        let (last, from_open) = (last.clone(), *from_open);
        self.last.insert(shape.name.clone(), (shape.clone(), false));
        // Order the two shapes in the log: the catalog at open is after every change.
        let (earlier, later) = if from_open {
            (shape.as_ref(), last.as_ref())
        } else {
            (last.as_ref(), shape.as_ref())
        };
        if let Some(reason) = incompatible(earlier, later) {
            return Ok(Some(reason));
        }
        if !from_open {
            for column in &later.columns {
                if earlier.index_of(&column.name).is_none()
                    && let Some(reason) = stream
                        .filled_without_changes(&later.name, &column.name)
                        .await?
                {
                    return Ok(Some(reason));
                }
            }
        }
        Ok(None)
    }
}

impl Shapes {
    /// For each table of `open` (the catalog's shapes at the open): why its catalog shape
    /// cannot continue the names the stream showed last — the last change's shape this run
    /// saw, else the names the previous run stored — a column added with a default (rows
    /// hold it without a logged change) or a rename that no change has shown yet. The
    /// catalog is after every change of the run, so a reason here is early, never late.
    /// Each table is judged once.
    pub async fn check_unchanged(
        &mut self,
        open: &[Arc<TableSchema>],
        stream: &mut dyn ChangeStream,
    ) -> Result<Vec<(String, String)>> {
        let mut reasons = Vec::new();
        for shape in open {
            let seen = match self.last.get(&shape.name) {
                Some((last, false)) => Some(last.columns.iter().map(|c| c.name.clone()).collect()),
                _ => None,
            };
            let Some(names) = seen.or_else(|| self.stored.remove(&shape.name)) else {
                continue;
            };
            if let Some(reason) = since_stored(&names, shape, stream).await? {
                reasons.push((shape.name.clone(), reason));
            }
        }
        Ok(reasons)
    }
}

/// The column names of `table`'s current baseline (`<table>/snapshot/_manifest.json`),
/// if it has one; an unreadable manifest counts as none.
async fn snapshot_columns(
    destination: &dyn Destination,
    table: &str,
) -> Result<Option<Vec<String>>> {
    let key = format!("{table}/snapshot/{}", crate::parts::MANIFEST_FILE);
    let Some(body) = destination.get(&key).await? else {
        return Ok(None);
    };
    match serde_json::from_slice::<crate::parts::Manifest>(&body) {
        Ok(manifest) => Ok(Some(manifest.schema.into_iter().map(|c| c.name).collect())),
        Err(e) => {
            tracing::warn!(table = %table, error = %e, "ignoring an unreadable {key}");
            Ok(None)
        }
    }
}

/// Why the table's first shape of a run cannot continue the column names the previous
/// run saw last: a rename, or a new column filled without changes.
async fn since_stored(
    names: &[String],
    shape: &TableSchema,
    stream: &mut dyn ChangeStream,
) -> Result<Option<String>> {
    let gone: Vec<&str> = names
        .iter()
        .filter(|n| shape.index_of(n).is_none())
        .map(String::as_str)
        .collect();
    let new: Vec<&str> = shape
        .columns
        .iter()
        .filter(|c| !names.contains(&c.name))
        .map(|c| c.name.as_str())
        .collect();
    if !gone.is_empty() && !new.is_empty() {
        return Ok(Some(format!(
            "columns {gone:?} gave way to {new:?} since the last run (a rename): rows written before carry the old name"
        )));
    }
    for column in new {
        if let Some(reason) = stream.filled_without_changes(&shape.name, column).await? {
            return Ok(Some(reason));
        }
    }
    Ok(None)
}

/// Why `later` cannot continue `earlier` in place: a rename, or a type change that does
/// not widen.
fn incompatible(earlier: &TableSchema, later: &TableSchema) -> Option<String> {
    let gone: Vec<&str> = earlier
        .columns
        .iter()
        .filter(|c| later.index_of(&c.name).is_none())
        .map(|c| c.name.as_str())
        .collect();
    let new: Vec<&str> = later
        .columns
        .iter()
        .filter(|c| earlier.index_of(&c.name).is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !gone.is_empty() && !new.is_empty() {
        return Some(format!(
            "columns {gone:?} gave way to {new:?} at once (a rename): rows written before carry the old name"
        ));
    }
    for column in &later.columns {
        if let Some(before) = earlier.columns.iter().find(|c| c.name == column.name)
            && before.ty != column.ty
            && !before.ty.widens_to(&column.ty)
        {
            return Some(format!(
                "column {} changed type from {} to {}, which does not widen it",
                column.name, before.source_type, column.source_type
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType};

    fn shape(columns: &[(&str, ColumnType)]) -> TableSchema {
        TableSchema {
            name: "t".into(),
            columns: columns
                .iter()
                .map(|(name, ty)| Column {
                    name: (*name).into(),
                    ty: ty.clone(),
                    nullable: true,
                    key: *name == "id",
                    source_type: format!("{ty:?}"),
                    field_metadata: Default::default(),
                })
                .collect(),
        }
    }

    #[test]
    fn renames_and_narrowings_are_incompatible_drops_adds_and_widenings_are_not() {
        use ColumnType::*;
        let base = shape(&[("id", Int32), ("v", Utf8)]);
        let renamed = shape(&[("id", Int32), ("w", Utf8)]);
        let retyped = shape(&[("id", Int32), ("v", Int32)]);
        let widened = shape(&[("id", Int64), ("v", Utf8)]);
        let dropped = shape(&[("id", Int32)]);
        let added = shape(&[("id", Int32), ("v", Utf8), ("d", Int32)]);
        assert!(incompatible(&base, &renamed).unwrap().contains("rename"));
        assert!(incompatible(&base, &retyped).unwrap().contains("column v"));
        for ok in [&widened, &dropped, &added] {
            assert_eq!(incompatible(&base, ok), None, "{ok:?}");
        }
    }
}
