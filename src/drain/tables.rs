//! Routes framed changes to their table's part writer and remembers what each table
//! wrote in this run (for its manifest and the summary).
//!
//! Guarantee: a change for a table the job does not capture is a protocol error, never
//! silently dropped; each table's parts go under its own directory, named exactly as the
//! config names the table.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::change::{ChangeEvent, TableSchema};
use crate::config::Layout;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::schema_history::{History, Shape};
use crate::parts::{FinishedPart, ManifestColumn, ManifestPart, PartSettings, PartWriter};

/// One captured table's output within a run.
pub struct TableOutput {
    pub writer: PartWriter,
    /// Parts of this run that are durable, in order.
    pub parts: Vec<ManifestPart>,
    /// The schema each of `parts` was written with (same order): an Iceberg commit
    /// registers every column any of them holds.
    pub part_schemas: Vec<Arc<TableSchema>>,
    /// How many of `parts` a checkpoint of this run covers (the rest are pending).
    pub committed: usize,
    /// What the run manifest on the destination lists: (`parts`, `parts` + `pending`).
    pub in_manifest: (usize, usize),
    /// The latest schema seen (from the source at open, then from the changes).
    pub schema: Option<Arc<TableSchema>>,
    /// The table's schema history, as stored and then as this run's parts extend it.
    pub history: History,
    /// The shapes this run's parts were the first to have.
    pub new_shapes: Vec<Shape>,
    pub rows: u64,
    pub bytes: u64,
}

/// All captured tables of a run.
pub struct Router {
    pub tables: BTreeMap<String, TableOutput>,
    /// Tables whose re-baseline is wanted: their changes are not written (the new
    /// snapshot, anchored after them, supersedes them).
    pub skipped: std::collections::BTreeSet<String>,
    /// `(table, column)` moved to its text form by this run (asked once each).
    pub moved_to_text: std::collections::BTreeSet<(String, String)>,
    run_id: String,
}

impl Router {
    /// Writers for `tables`, naming parts `<table>/cdc-<run_id>-<nnnnnn>.parquet`, under
    /// the partition folder of `layout` (`<table>/dt=YYYY-MM-DD/cdc-…`) unless it is flat.
    pub fn new(
        tables: &[String],
        schemas: &[Arc<TableSchema>],
        run_id: &str,
        settings: &PartSettings,
        layout: Layout,
    ) -> Result<Self> {
        let tables = tables
            .iter()
            .map(|name| {
                let output = TableOutput {
                    writer: PartWriter::new(
                        name,
                        format!("{name}/cdc-{run_id}-"),
                        1,
                        settings.clone(),
                    )?
                    .with_identity(format!("run:{run_id}"))
                    .with_layout(layout),
                    parts: Vec::new(),
                    part_schemas: Vec::new(),
                    committed: 0,
                    in_manifest: (0, 0),
                    schema: schemas.iter().find(|s| &s.name == name).cloned(),
                    history: History::empty(name),
                    new_shapes: Vec::new(),
                    rows: 0,
                    bytes: 0,
                };
                Ok((name.clone(), output))
            })
            .collect::<Result<_>>()?;
        Ok(Router {
            tables,
            skipped: Default::default(),
            moved_to_text: Default::default(),
            run_id: run_id.to_owned(),
        })
    }

    /// Reads each table's stored schema history (after interrupted runs were settled).
    pub async fn load_histories(&mut self, destination: &dyn Destination) -> Result<()> {
        for (table, output) in &mut self.tables {
            output.history = super::history::load(destination, table).await?;
        }
        Ok(())
    }

    /// Appends one change to its table; returns a part the append closed (schema change).
    /// A change of a skipped table is dropped.
    pub fn append(&mut self, event: &ChangeEvent) -> Result<Option<FinishedPart>> {
        if self.skipped.contains(&event.table.name) {
            return Ok(None);
        }
        let output = self.tables.get_mut(&event.table.name).ok_or_else(|| {
            Error::new(
                Code::SourceProtocol,
                format!(
                    "the source sent a change for table {:?}, which this job does not capture",
                    event.table.name
                ),
            )
            .hint("the publication or filter covers more tables than source.tables; align them")
        })?;
        if !output
            .schema
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, &event.table))
        {
            output.schema = Some(event.table.clone());
        }
        output.writer.append(event)
    }

    /// True when any table's open part has reached its rollover size.
    pub fn any_should_roll(&self) -> bool {
        self.tables.values().any(|t| t.writer.should_roll())
    }

    /// Drops every open part unwritten (a stop inside a transaction): nothing they hold
    /// is checkpointed, so the next run reads it again.
    pub fn abandon_open(&mut self) {
        for output in self.tables.values_mut() {
            output.writer.abandon();
        }
    }

    /// Closes every open part (at a transaction boundary).
    pub fn finish_all(&mut self) -> Result<Vec<FinishedPart>> {
        let mut parts = Vec::new();
        for output in self.tables.values_mut() {
            if let Some(part) = output.writer.finish()? {
                parts.push(part);
            }
        }
        Ok(parts)
    }

    /// Marks every durable part as covered by the checkpoint just written.
    pub fn mark_committed(&mut self) {
        for output in self.tables.values_mut() {
            output.committed = output.parts.len();
        }
    }

    /// The tables to register in the catalog: every captured table whose schema is known
    /// and that is not waiting for a re-baseline, with the earliest partition date it
    /// wrote in this run.
    pub fn captured(&self) -> Vec<crate::registration::Captured> {
        self.tables
            .iter()
            .filter(|(name, _)| !self.skipped.contains(*name))
            .filter_map(|(name, output)| {
                Some(crate::registration::Captured {
                    table: name.clone(),
                    schema: output.schema.clone()?,
                    first_date: first_date(&output.parts),
                })
            })
            .collect()
    }

    /// Records a durable part of `schema` in its table's run totals, with the version of
    /// its shape in the table's schema history (a new one when the shape changed).
    pub fn record_durable(&mut self, schema: Arc<TableSchema>, mut part: ManifestPart) {
        if let Some(output) = self.tables.get_mut(&schema.name) {
            let columns = ManifestColumn::of(&schema);
            let (version, new) = output
                .history
                .observe(&columns, &part.first_pos, &self.run_id);
            part.shape = Some(version);
            output.new_shapes.extend(new);
            output.rows += part.rows;
            output.bytes += part.bytes;
            output.parts.push(part);
            output.part_schemas.push(schema);
        }
    }
}

/// The earliest `dt=YYYY-MM-DD` date among `parts`' partitions (Hive's null partition and
/// flat parts do not count).
fn first_date(parts: &[ManifestPart]) -> Option<String> {
    parts
        .iter()
        .filter_map(|p| p.partition.as_deref()?.strip_prefix("dt="))
        .map(|dt| dt.split('/').next().unwrap_or(dt))
        .filter(|dt| dt.len() == 10 && dt.as_bytes()[4] == b'-')
        .min()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_date_is_the_earliest_dated_partition() {
        let part = |partition: Option<&str>| ManifestPart {
            key: String::new(),
            rows: 1,
            bytes: 1,
            checksum: String::new(),
            first_pos: String::new(),
            last_pos: String::new(),
            partition: partition.map(str::to_owned),
            shape: None,
        };
        let parts = [
            part(Some("dt=2026-12-03/hr=01")),
            part(Some("dt=__HIVE_DEFAULT_PARTITION__")),
            part(Some("dt=2026-01-16/hr=00")),
            part(None),
        ];
        assert_eq!(first_date(&parts).as_deref(), Some("2026-01-16"));
        assert_eq!(first_date(&[part(None)]), None);
    }
}
