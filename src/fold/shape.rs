//! The shape a fold produces its state in: the table's columns, its key, and which
//! columns a source may leave unlogged.
//!
//! Guarantees: a shape that names a key column past its columns, or whose fill flags do not
//! match its columns, is refused before any row is folded (`SLUICE_INTERNAL`).

use std::sync::Arc;

use arrow_schema::{Field, Schema, SchemaRef};

use crate::error::{Code, Error, Result};

/// The state a fold produces its rows in: the table's columns, which of them are its key,
/// and which of them a source may leave unlogged.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The table's columns in output order (names, types, field metadata).
    pub fields: Vec<Field>,
    /// Indexes into `fields` of the key columns; empty for a table without a key.
    pub key: Vec<usize>,
    /// Per field: whether a row may list it in `__unlogged` (variable-length types).
    pub fillable: Vec<bool>,
}

impl Shape {
    /// The Arrow schema of the state: the fields, nothing else.
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.fields.clone()))
    }

    pub(super) fn check(&self) -> Result<()> {
        if self.fields.is_empty() || self.fillable.len() != self.fields.len() {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "a fold shape of {} columns with {} fill flags",
                    self.fields.len(),
                    self.fillable.len()
                ),
            ));
        }
        if let Some(&bad) = self.key.iter().find(|&&i| i >= self.fields.len()) {
            return Err(Error::new(
                Code::Internal,
                format!(
                    "a fold shape's key names column {bad} of {}",
                    self.fields.len()
                ),
            ));
        }
        Ok(())
    }
}

/// True for a sluice type a source may leave unlogged (variable-length values).
pub fn may_be_unlogged(ty: &str) -> bool {
    const FIXED: [&str; 18] = [
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float32",
        "float64",
        "date",
        "time",
        "timestamp",
        "timestamp_tz",
        "uuid",
        "float16",
        "bool",
    ];
    !FIXED.contains(&ty)
}
