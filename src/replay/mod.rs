//! `sluice sql`: the replay rule as code. For one table of a job it renders the query (or
//! view) that turns the table folder's rows into the table's current state, in DuckDB,
//! Athena (Trino) or Spark SQL; with `--current-state`, the read of the state
//! `sluice materialize` keeps ([`current`]).
//!
//! Guarantees: the rule is the one of docs/output.md, written once ([`query`]) for every
//! dialect ([`dialect`] holds the only differences); the columns and key are the ones the
//! job's newest manifest records ([`shape`]); nothing is written anywhere — the command
//! reads the destination's manifests and prints text. A test runs the DuckDB text against
//! a random workload's parts and compares it with the source.

pub mod current;
pub mod dialect;
pub mod merge;
pub mod query;

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
                crate::registration::table::table_name(table_prefix, table)
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

/// The table's columns and key, after checking the table is the job's and has parts.
async fn shape_of(config: &Config, table: &str) -> Result<Vec<ShapeColumn>> {
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
    let columns = crate::lake::shape::read(destination.as_ref(), table).await?;
    if columns.iter().all(|c| !c.key) && config.baseline.keys.contains_key(table) {
        tracing::warn!(table = %table,
            "{table} has no key and its baseline was chunked by baseline.keys: the multiset replay is exact only if nothing wrote {table} while the baseline read it (without baseline.keys the baseline is one read at an exact point)");
    }
    Ok(columns)
}

/// Renders `sluice sql --merge` for `table`: the MERGE that brings its current-state
/// table up to date from its Iceberg change log ([`merge`]), or with `create` the
/// statement creating that table. `source` overrides the change log (Athena: `db.table`;
/// DuckDB: the metadata file `iceberg_scan` reads), `target` the current-state table,
/// `location` where Athena creates it.
pub async fn render_merge(
    config: &Config,
    dialect: Dialect,
    table: &str,
    source: Option<&str>,
    target: Option<&str>,
    create: bool,
    location: Option<&str>,
) -> Result<String> {
    let columns = shape_of(config, table).await?;
    let iceberg = config
        .iceberg
        .as_ref()
        .filter(|_| config.table_format == crate::config::TableFormat::Iceberg);
    let name = crate::registration::table::table_name(
        iceberg.map_or("", |i| i.table_prefix.as_str()),
        table,
    );
    // Athena names a table of an S3 Tables bucket through the bucket's catalog of the
    // analytics integration, `"s3tablescatalog/<bucket>"."<namespace>"."<table>"`.
    let table_bucket = iceberg.and_then(|i| match &i.catalog {
        crate::config::IcebergCatalogConfig::S3Tables {
            table_bucket_arn, ..
        } => crate::iceberg::s3tables::BucketArn::parse(table_bucket_arn).map(|b| b.name),
        _ => None,
    });
    let qualified = |name: &str| match (dialect, iceberg, &table_bucket) {
        (Dialect::Athena, Some(i), Some(bucket)) => {
            format!("s3tablescatalog/{bucket}.{}.{name}", i.namespace)
        }
        (Dialect::Athena, Some(i), None) => format!("{}.{name}", i.namespace),
        _ => name.to_owned(),
    };
    let log = match source {
        Some(s) => s.to_owned(),
        None => match (dialect, iceberg) {
            (_, None) => {
                return Err(Error::new(
                    Code::ConfigInvalid,
                    format!("the job does not write {table} to an Iceberg change log (table_format is not iceberg)"),
                )
                .hint("set `table_format: iceberg` (docs/iceberg.md), or name the change log with --source"));
            }
            (Dialect::DuckDb, Some(i)) => match &i.catalog {
                crate::config::IcebergCatalogConfig::S3Tables {
                    table_bucket_arn,
                    endpoint_url,
                } => crate::iceberg::s3tables::S3TablesCatalog::new(table_bucket_arn, endpoint_url.as_deref())?
                    .load(&i.namespace, &name)
                    .await?
                    .ok_or_else(|| {
                        Error::new(
                            Code::ReplayNoSchema,
                            format!("the S3 Tables bucket holds no committed table {}.{name} for {table} yet", i.namespace),
                        )
                        .hint("run `sluice drain` with `table_format: iceberg` first (its first commit creates the table), or pass the metadata file with --source")
                    })?,
                _ => metadata_location(i, table, &name)?,
            },
            _ => qualified(&name),
        },
    };
    let target = target.map_or_else(|| qualified(&format!("{name}_current")), str::to_owned);
    if table_bucket.is_some() && location.is_some() {
        return Err(Error::new(
            Code::ConfigInvalid,
            "--location is given but the change log is in an S3 Tables bucket, which places its tables itself",
        )
        .hint("leave --location out: the current-state table is created in the same table bucket and namespace"));
    }
    let location = match (location, &config.destination) {
        (Some(l), _) => Some(l.to_owned()),
        (None, DestinationConfig::S3 { bucket, prefix, .. }) => {
            let prefix = prefix.trim_matches('/');
            Some(if prefix.is_empty() {
                format!("s3://{bucket}/{table}/_current/")
            } else {
                format!("s3://{bucket}/{prefix}/{table}/_current/")
            })
        }
        (None, _) => None,
    };
    let req = merge::MergeRequest {
        dialect,
        table: table.to_owned(),
        columns,
        log,
        target,
    };
    if create {
        let place = match table_bucket {
            Some(_) => merge::NewTable::InTableBucket,
            None => merge::NewTable::At(location.as_deref()),
        };
        merge::render_create(&req, place)
    } else {
        merge::render(&req)
    }
}

/// The current metadata file of `table`'s Iceberg table in the job's SQL catalog (what
/// DuckDB's `iceberg_scan` reads).
fn metadata_location(
    iceberg: &crate::config::IcebergConfig,
    table: &str,
    name: &str,
) -> Result<String> {
    let not_yet = || {
        Error::new(
            Code::ReplayNoSchema,
            format!("the Iceberg catalog holds no table {}.{name} for {table} yet", iceberg.namespace),
        )
        .hint("run `sluice drain` with `table_format: iceberg` first (its first commit creates the table), or pass the metadata file with --source")
    };
    let crate::config::IcebergCatalogConfig::Sql { uri, name: catalog } = &iceberg.catalog else {
        return Err(Error::new(
            Code::ConfigInvalid,
            "DuckDB reads the change log from its metadata file, which only the SQL catalog is read for here".to_owned(),
        )
        .hint("pass the table's current metadata file with --source (the catalog's metadata_location)"));
    };
    let path = crate::iceberg::sql::sqlite_path(uri).ok_or_else(not_yet)?;
    crate::iceberg::sql::SqlCatalog::new(path, catalog)
        .peek(&iceberg.namespace, name)?
        .ok_or_else(not_yet)
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
    let columns = shape_of(config, table).await?;
    let rows = rows_of(config, dialect, table, source)?;
    query::render(&Request {
        dialect,
        table: table.to_owned(),
        columns,
        rows,
        view: view.map(str::to_owned),
    })
}

/// Renders `sluice sql --current-state` for `table`: the query over the files of its
/// current state ([`current`]); `source` overrides the table folder.
pub async fn render_current(
    config: &Config,
    dialect: Dialect,
    table: &str,
    source: Option<&str>,
) -> Result<String> {
    shape_of(config, table).await?;
    let rows = rows_of(config, dialect, table, source)?;
    current::check_names(table, &rows)?;
    current::render(config, dialect, table, rows).await
}

/// Where the rows are: `source` when given (a folder, made absolute; Athena a table),
/// else [`default_rows`].
fn rows_of(config: &Config, dialect: Dialect, table: &str, source: Option<&str>) -> Result<Rows> {
    Ok(match source {
        None => default_rows(config, dialect, table)?,
        Some(s) if dialect == Dialect::Athena => Rows::Table(s.to_owned()),
        Some(s) if Path::new(s).is_relative() && !s.contains("://") => Rows::Folder(
            std::path::absolute(s).map_or_else(|_| s.to_owned(), |p| p.display().to_string()),
        ),
        Some(s) => Rows::Folder(s.to_owned()),
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
