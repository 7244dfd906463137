//! Where one Iceberg table lies: its catalog name, its location, and the store keys and
//! URIs of its files — in the job's destination (the SQL and Glue catalogs: the table
//! folder is the table), or in a warehouse location (S3 Tables: the store is the table).
//!
//! Guarantees: metadata files go under `<table>/_iceberg/metadata/` in the destination
//! and under `metadata/` in a warehouse location (Iceberg's own layout); a file the
//! table's metadata names outside the store is refused (`SLUICE_ICEBERG_METADATA`), never
//! read from elsewhere.

use super::metadata::METADATA_DIR;
use crate::error::{Code, Error, Result};

/// One table as the catalog and the store of its Iceberg files (the destination, or the
/// table's warehouse location) see it.
pub struct TableRef<'a> {
    /// The table as `source.tables` names it (its folder).
    pub table: &'a str,
    pub namespace: &'a str,
    /// The Iceberg table name.
    pub name: String,
    /// The Iceberg table's location URI, without a trailing `/`.
    pub location: String,
    /// The store's root URI, ending in `/`.
    root: String,
    /// The table's folder as a key of the store: the table folder in the destination,
    /// empty for a warehouse location (the store is the table).
    dir: String,
}

impl<'a> TableRef<'a> {
    /// The table `table` in the destination whose root URI is `root`, named `namespace`.`name`
    /// in the catalog: its files lie in the destination, its location is its folder.
    pub fn in_destination(table: &'a str, namespace: &'a str, name: String, root: &str) -> Self {
        TableRef {
            table,
            namespace,
            name,
            location: format!("{root}{table}"),
            root: root.to_owned(),
            dir: table.to_owned(),
        }
    }

    /// The same table with its files in the warehouse location `location` of a store
    /// whose root URI is `root` (S3 Tables): the store is the table.
    pub fn in_warehouse(self, root: String, location: String) -> Self {
        TableRef {
            location,
            root,
            dir: String::new(),
            ..self
        }
    }

    /// `namespace.name`, as a catalog names the table.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }

    /// The store key of metadata file `file`: `<table>/_iceberg/metadata/<file>` in the
    /// destination, `metadata/<file>` in a warehouse location (Iceberg's own layout).
    pub fn metadata_key(&self, file: &str) -> String {
        match self.dir.as_str() {
            "" => format!("metadata/{file}"),
            dir => format!("{dir}/{METADATA_DIR}/{file}"),
        }
    }

    /// The URI of destination key `key`.
    pub fn uri(&self, key: &str) -> String {
        format!("{}{key}", self.root)
    }

    /// The destination key of `uri`; refused when the file lies outside the destination.
    pub fn key_of(&self, uri: &str) -> Result<String> {
        uri.strip_prefix(&self.root)
            .map(str::to_owned)
            .ok_or_else(|| {
                Error::new(
                    Code::IcebergMetadata,
                    format!("Iceberg table {}.{} names {uri}, which is outside the destination {}", self.namespace, self.name, self.root),
                )
                .hint("the table was created or moved by another tool: commit to a new table (another `iceberg.table_prefix`), or move the table back under the destination")
            })
    }
}
