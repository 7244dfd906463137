//! A table's columns as sluice documents them: in a manifest's `schema`, a schema
//! history's shapes ([`super::schema_history`]) and each part's `sluice.schema` metadata.
//!
//! Guarantees: one column list for all three, in the table's column order; each type is
//! the stable sluice type name of [`type_name`] (`int32`, `decimal(12,2)`,
//! `timestamp_tz`, `list<utf8>`), beside the source's own type name.

use serde::{Deserialize, Serialize};

use crate::change::TableSchema;
use crate::parts::arrow_schema::type_name;

/// One column in a manifest (and in a part's `sluice.schema`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestColumn {
    pub name: String,
    /// Sluice type name ([`type_name`]).
    #[serde(rename = "type")]
    pub ty: String,
    pub source_type: String,
    pub nullable: bool,
    pub key: bool,
    /// The column's policy (`hash-hmac-sha256:v1`, `mask:keep_last=4`, `null`), absent
    /// for a column written as the source has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl ManifestColumn {
    /// The columns of `table`, in order.
    pub fn of(table: &TableSchema) -> Vec<ManifestColumn> {
        table
            .columns
            .iter()
            .map(|c| ManifestColumn {
                name: c.name.clone(),
                ty: type_name(&c.ty),
                source_type: c.source_type.clone(),
                nullable: c.nullable,
                key: c.key,
                policy: c
                    .field_metadata
                    .get(crate::policy::apply::POLICY_KEY)
                    .cloned(),
            })
            .collect()
    }
}

/// `{"table": …, "columns": [{name, type, source_type, nullable, key}, …]}`: the
/// `sluice.schema` key-value metadata of a part.
pub fn schema_json(table: &TableSchema) -> String {
    serde_json::json!({
        "table": table.name,
        "columns": ManifestColumn::of(table),
    })
    .to_string()
}
