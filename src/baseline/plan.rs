//! A baseline's stored chunk plan (`<table>/snapshot/<plan id>/_plan.json`) and the table
//! shape it was planned under.
//!
//! Guarantees: the plan is written once per anchoring, with the chunk bounds and the
//! table's shape at planning ([`shape_of`]: every column's name, source type, output type
//! and nullability, in order); every chunk is read only while the table has that shape,
//! so the snapshot parts of one plan all have one shape, the one its manifest names
//! ([`changed`] tells the baseline tasks when the table's shape is no longer the plan's).
//! A plan stored by an earlier sluice — a bare JSON array of bounds, without a shape —
//! is read as one with an unknown shape, which nothing is compared with. The output type
//! is written as sluice names it; a sluice that names a type differently sees a baseline
//! in progress across the upgrade as changed and reads it again (never the reverse).

use serde::{Deserialize, Serialize};

use crate::change::TableSchema;
use crate::error::{Code, Error, Result};
use crate::source::baseline_read::ChunkBounds;

/// A stored plan: the chunk bounds, and the shape of the table when they were planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub chunks: Vec<ChunkBounds>,
    /// [`shape_of`] the table at planning; `None` for a plan stored without one.
    pub shape: Option<Vec<String>>,
}

/// The stored document: the current object form, or an earlier sluice's bare array.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Plan(Plan),
    Bounds(Vec<ChunkBounds>),
}

impl Plan {
    /// Plans `chunks` for a table shaped `schema`.
    pub fn new(chunks: Vec<ChunkBounds>, schema: &TableSchema) -> Plan {
        Plan {
            chunks,
            shape: Some(shape_of(schema)),
        }
    }

    /// Reads the plan stored under `key`.
    pub fn parse(key: &str, bytes: &[u8]) -> Result<Plan> {
        match serde_json::from_slice(bytes) {
            Ok(Stored::Plan(plan)) => Ok(plan),
            Ok(Stored::Bounds(chunks)) => Ok(Plan {
                chunks,
                shape: None,
            }),
            Err(e) => Err(
                Error::new(Code::StateCorrupt, format!("{key} is not a chunk plan"))
                    .hint("delete the baseline (`sluice baseline --reset`) and start it again")
                    .source(e),
            ),
        }
    }

    /// The document to store.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(Code::Internal, "encoding a plan").source(e))
    }

    /// How `schema` differs from the shape this plan was made under — `None` when it is
    /// the same, or when the plan has no shape to compare with.
    pub fn changed(&self, schema: &TableSchema) -> Option<String> {
        let planned = self.shape.as_ref()?;
        let now = shape_of(schema);
        if *planned == now {
            return None;
        }
        let gone: Vec<&str> = planned
            .iter()
            .filter(|c| !now.contains(c))
            .map(String::as_str)
            .collect();
        let new: Vec<&str> = now
            .iter()
            .filter(|c| !planned.contains(c))
            .map(String::as_str)
            .collect();
        Some(if gone.is_empty() && new.is_empty() {
            "its columns were reordered".to_owned()
        } else {
            format!(
                "planned with [{}], now [{}]",
                gone.join(", "),
                new.join(", ")
            )
        })
    }
}

/// A table's shape as a plan records it: one `name source_type output_type [not null]`
/// text per column, in column order.
pub fn shape_of(schema: &TableSchema) -> Vec<String> {
    schema
        .columns
        .iter()
        .map(|c| {
            let null = if c.nullable { "" } else { " not null" };
            format!("{} {} {:?}{null}", c.name, c.source_type, c.ty)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType};

    fn schema(columns: &[(&str, ColumnType, &str, bool)]) -> TableSchema {
        TableSchema {
            name: "app.t".into(),
            columns: columns
                .iter()
                .map(|(name, ty, source_type, nullable)| Column {
                    name: (*name).into(),
                    ty: ty.clone(),
                    nullable: *nullable,
                    key: *name == "id",
                    source_type: (*source_type).into(),
                    field_metadata: Default::default(),
                })
                .collect(),
        }
    }

    /// `id bigint` (the key) followed by `rest`.
    fn keyed(rest: &[(&str, ColumnType, &str, bool)]) -> TableSchema {
        let mut columns = vec![("id", ColumnType::Int64, "bigint", false)];
        columns.extend(rest.iter().cloned());
        schema(&columns)
    }

    fn bounds() -> Vec<ChunkBounds> {
        vec![
            ChunkBounds {
                lower: None,
                upper: Some(vec!["10".into()]),
            },
            ChunkBounds {
                lower: Some(vec!["10".into()]),
                upper: None,
            },
        ]
    }

    #[test]
    fn a_plan_round_trips_and_an_earlier_bare_array_reads_without_a_shape() {
        let table = keyed(&[("x1", ColumnType::Int32, "int(11)", false)]);
        let plan = Plan::new(bounds(), &table);
        assert_eq!(
            plan.shape.as_deref().unwrap(),
            ["id bigint Int64 not null", "x1 int(11) Int32 not null"]
        );
        assert_eq!(Plan::parse("k", &plan.to_json().unwrap()).unwrap(), plan);
        let legacy = serde_json::to_vec(&bounds()).unwrap();
        let read = Plan::parse("k", &legacy).unwrap();
        assert_eq!(read.chunks, bounds());
        assert_eq!(read.shape, None);
        assert_eq!(read.changed(&table), None, "nothing to compare with");
        let error = Plan::parse("t/snapshot/p/_plan.json", b"{\"x\": 1}").unwrap_err();
        assert_eq!(error.code(), Code::StateCorrupt);
    }

    #[test]
    fn a_rename_a_retype_a_new_column_and_nullability_are_changes_of_shape() {
        let planned = keyed(&[("x1", ColumnType::Int32, "int(11)", false)]);
        let plan = Plan::new(bounds(), &planned);
        assert_eq!(plan.changed(&planned), None);
        let renamed = keyed(&[("r2", ColumnType::Int32, "int(11)", false)]);
        assert_eq!(
            plan.changed(&renamed).unwrap(),
            "planned with [x1 int(11) Int32 not null], now [r2 int(11) Int32 not null]"
        );
        let retyped = keyed(&[("x1", ColumnType::Int64, "bigint(20)", true)]);
        assert!(plan.changed(&retyped).is_some());
        let nullable = keyed(&[("x1", ColumnType::Int32, "int(11)", true)]);
        assert!(plan.changed(&nullable).is_some());
        let added = keyed(&[
            ("x1", ColumnType::Int32, "int(11)", false),
            ("x2", ColumnType::Utf8, "text", true),
        ]);
        assert_eq!(
            plan.changed(&added).unwrap(),
            "planned with [], now [x2 text Utf8]"
        );
        let reordered = schema(&[
            ("x1", ColumnType::Int32, "int(11)", false),
            ("id", ColumnType::Int64, "bigint", false),
        ]);
        assert_eq!(
            plan.changed(&reordered).unwrap(),
            "its columns were reordered"
        );
    }
}
