//! `sluice sql`: the replay rule as code. For one table of a job it renders the query (or
//! view) that turns the table folder's rows into the table's current state, in DuckDB,
//! Athena (Trino) or Spark SQL.
//!
//! Guarantees: the rule is the one of docs/output.md, written once ([`query`]) for every
//! dialect ([`dialect`] holds the only differences); the columns and key are the ones the
//! job's newest manifest records ([`shape`]); nothing is written anywhere — the command
//! reads the destination's manifests and prints text. A test runs the DuckDB text against
//! a random workload's parts and compares it with the source.

pub mod dialect;
pub mod query;
pub mod shape;

use std::path::Path;

pub use dialect::Dialect;
pub use query::{Request, Rows, ShapeColumn};

use crate::config::{CatalogConfig, Config, DestinationConfig};
use crate::error::{Code, Error, Result};

/// Where `sluice sql` reads a table's rows from by default: the table's folder in the
/// destination (DuckDB, Spark), or for Athena a table named after it in the catalog
/// (`public.orders` → `public_orders`; with a `catalog` block the table sluice registers,
/// `<database>.<table_prefix>public_orders`).
pub fn default_rows(config: &Config, dialect: Dialect, table: &str) -> Result<Rows> {
    if dialect == Dialect::Athena {
        return Ok(Rows::Table(match &config.catalog {
            Some(CatalogConfig::Glue {
                database,
                table_prefix,
                ..
            }) => format!(
                "{database}.{}",
                crate::catalog::table::table_name(table_prefix, table)
            ),
            None => query::sanitize(table),
        }));
    }
    Ok(Rows::Folder(match &config.destination {
        DestinationConfig::Local { path } => {
            let root = std::path::absolute(path).map_err(|e| {
                Error::new(
                    Code::ConfigInvalid,
                    format!(
                        "destination.path {} cannot be made absolute",
                        path.display()
                    ),
                )
                .source(e)
            })?;
            root.join(table).display().to_string()
        }
        DestinationConfig::Stdout {} => return Err(no_parts_on_stdout(table)),
        DestinationConfig::S3 { bucket, prefix, .. } => {
            let prefix = prefix.trim_matches('/');
            if prefix.is_empty() {
                format!("s3://{bucket}/{table}")
            } else {
                format!("s3://{bucket}/{prefix}/{table}")
            }
        }
    }))
}

/// Renders the query for `table` (named as in `source.tables`). `source` overrides where
/// the rows are read from: a folder (path or URI) for DuckDB and Spark, a catalog table
/// (`db.table`) for Athena.
pub async fn render(
    config: &Config,
    dialect: Dialect,
    table: &str,
    source: Option<&str>,
    view: Option<&str>,
) -> Result<String> {
    if !config.source.tables.iter().any(|t| t == table) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!(
                "table {table} is not one of the job's source.tables ({})",
                config.source.tables.join(", ")
            ),
        )
        .hint("name the table as source.tables writes it (its output folder)"));
    }
    if matches!(config.destination, DestinationConfig::Stdout {}) {
        return Err(no_parts_on_stdout(table));
    }
    let destination = crate::destination::open(config).await?;
    let columns = shape::read(destination.as_ref(), table).await?;
    if columns.iter().all(|c| !c.key) && config.baseline.keys.contains_key(table) {
        tracing::warn!(table = %table,
            "{table} has no key and its baseline was chunked by baseline.keys: the multiset replay is exact only if nothing wrote {table} while the baseline read it (without baseline.keys the baseline is one read at an exact point)");
    }
    let rows = match source {
        None => default_rows(config, dialect, table)?,
        Some(s) if dialect == Dialect::Athena => Rows::Table(s.to_owned()),
        Some(s) if Path::new(s).is_relative() && !s.contains("://") => Rows::Folder(
            std::path::absolute(s).map_or_else(|_| s.to_owned(), |p| p.display().to_string()),
        ),
        Some(s) => Rows::Folder(s.to_owned()),
    };
    query::render(&Request {
        dialect,
        table: table.to_owned(),
        columns,
        rows,
        view: view.map(str::to_owned),
    })
}

/// A stdout destination keeps neither parts nor the manifests that record a table's shape.
fn no_parts_on_stdout(table: &str) -> Error {
    Error::new(
        Code::ConfigInvalid,
        format!("the job's destination is stdout, which keeps no parts or manifests of {table} to query"),
    )
    .hint("run `sluice sql` with the config of a local or S3 destination the table's parts were written to")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn athena_reads_the_table_the_catalog_registers() {
        let text = "job: j\nsource: { url_env: U, tables: [public.orders], postgres: { slot: s, publication: p } }\n\
                    destination: { type: s3, bucket: b }\nstate: { type: local, path: st }\n";
        let plain = Config::parse(text, "test").unwrap();
        assert_eq!(
            default_rows(&plain, Dialect::Athena, "public.orders").unwrap(),
            Rows::Table("public_orders".into())
        );
        let with_catalog = Config::parse(
            &format!("{text}catalog: {{ type: glue, database: lake, table_prefix: raw_ }}\n"),
            "test",
        )
        .unwrap();
        assert_eq!(
            default_rows(&with_catalog, Dialect::Athena, "public.orders").unwrap(),
            Rows::Table("lake.raw_public_orders".into())
        );
    }
}
