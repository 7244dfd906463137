//! `sluice sql --current-state`: the query that reads a table's current state as
//! `sluice materialize` last built it (docs/current-state.md) — no replay, the pointer's
//! files as they are.
//!
//! Guarantees: the printed text reads the pointer **when it runs**, not when it was
//! printed, so it stays right across later builds (a version's files are removed two
//! builds after it); it reads exactly the files the pointer names, every row of the state
//! once; nothing is written. Only DuckDB can take a file list from a JSON document inside
//! one query text (`SET VARIABLE` … `getvariable`); the other dialects read the Iceberg
//! table `<name>_current` of a `table_format: iceberg` job (SQL and Glue catalogs)
//! through their catalog, and are otherwise refused with the reader-side recipe
//! (`SLUICE_REPLAY_CURRENT_STATE`), as is a table with no state built yet.

use super::dialect::Dialect;
use super::query::{Rows, check_literal};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::materialize::version;

/// The DuckDB variable the printed script fills with the state's file paths.
const FILES_VARIABLE: &str = "sluice_current_files";

/// Renders the current-state read of `table` in `dialect`; `rows` is the table folder
/// (the default or `--source`): the pointer's file keys are below its parent.
pub async fn render(config: &Config, dialect: Dialect, table: &str, rows: Rows) -> Result<String> {
    if dialect != Dialect::DuckDb
        && let Some((namespace, name)) = iceberg_table(config, table)
    {
        return Ok(catalog_read(dialect, table, &namespace, &name));
    }
    if dialect != Dialect::DuckDb {
        return Err(Error::new(
            Code::ReplayCurrentState,
            format!(
                "`sluice sql --current-state` prints DuckDB only: {dialect} cannot read the file list of the pointer {} inside a query",
                version::pointer_key(table)
            ),
        )
        .hint("read the pointer's `files` and pass them to the reader (Spark: spark.read.parquet(*files); Athena: use --dialect duckdb or read the files; with `table_format: iceberg` on the SQL or Glue catalog the state is also the catalog table `<name>_current`, which both read), see docs/current-state.md"));
    }
    let Rows::Folder(folder) = rows else {
        unreachable!("DuckDB reads a folder")
    };
    let destination = crate::destination::open(config).await?;
    if version::read(destination.as_ref(), table).await?.is_none() {
        return Err(Error::new(
            Code::ReplayCurrentState,
            format!("table {table} has no current state yet: no build wrote its pointer {}", version::pointer_key(table)),
        )
        .hint(format!("run `sluice materialize --table {table}` (or set output.current_state: true so every drain builds it)")));
    }
    Ok(duckdb(table, folder.trim_end_matches('/')))
}

/// The two statements: the pointer's files, made paths below `folder`'s parent, into a
/// variable; then every row of them.
fn duckdb(table: &str, folder: &str) -> String {
    // A pointer's file keys start with `<table>/`: the path is the folder, then the rest.
    let rest_from = table.chars().count() + 1;
    format!(
        "-- The current state of {table} as `sluice materialize` last built it (docs/current-state.md).\n\
         -- Run both statements: the first reads the pointer, so the text stays valid after later builds.\n\
         SET VARIABLE {FILES_VARIABLE} = (\n  \
         SELECT list('{folder}' || substr(f, {rest_from}))\n  \
         FROM (SELECT unnest(files) AS f FROM read_json('{folder}/{pointer}')));\n\
         SELECT * FROM read_parquet(getvariable('{FILES_VARIABLE}'));\n",
        pointer = version::pointer_key(table)
            .strip_prefix(&format!("{table}/"))
            .unwrap_or_default(),
    )
}

/// The Iceberg table `sluice materialize` keeps the state of `table` in (`table_format:
/// iceberg` on the SQL or Glue catalog): its namespace and name.
fn iceberg_table(config: &Config, table: &str) -> Option<(String, String)> {
    use crate::config::{IcebergCatalogConfig, TableFormat};
    let iceberg = config.iceberg.as_ref()?;
    let kept = config.table_format == TableFormat::Iceberg
        && !matches!(iceberg.catalog, IcebergCatalogConfig::S3Tables { .. });
    kept.then(|| {
        let log = crate::registration::table::table_name(&iceberg.table_prefix, table);
        (
            iceberg.namespace.clone(),
            format!("{log}{}", crate::iceberg::current::NAME_SUFFIX),
        )
    })
}

/// A read of the Iceberg current-state table through the catalog the engine is set up
/// with (Athena: the Glue Data Catalog; Spark: its Iceberg catalog as the current one).
fn catalog_read(dialect: Dialect, table: &str, namespace: &str, name: &str) -> String {
    format!(
        "-- The current state of {table} as `sluice materialize` last committed it: the Iceberg table\n\
         -- {namespace}.{name} (docs/current-state.md#as-an-iceberg-table).\n\
         SELECT * FROM {}.{};\n",
        dialect.ident(namespace),
        dialect.ident(name)
    )
}

/// Checks the names that go into the text's string literals.
pub fn check_names(table: &str, rows: &Rows) -> Result<()> {
    check_literal("table name", table)?;
    if let Rows::Folder(folder) = rows {
        check_literal("table folder", folder)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn athena_and_spark_read_the_iceberg_current_state_table_of_an_iceberg_job() {
        let job = "job: j\nsource: { url_env: U, tables: [public.orders], postgres: { slot: s, publication: p } }\n\
                   destination: { type: s3, bucket: b }\nstate: { type: local, path: st }\n";
        let iceberg = Config::parse(
            &format!("{job}table_format: iceberg\niceberg: {{ catalog: {{ type: glue }}, namespace: cdc, table_prefix: raw_ }}\n"),
            "test",
        )
        .unwrap();
        let (namespace, name) = iceberg_table(&iceberg, "public.orders").unwrap();
        assert_eq!(
            (namespace.as_str(), name.as_str()),
            ("cdc", "raw_public_orders_current")
        );
        let athena = catalog_read(Dialect::Athena, "public.orders", &namespace, &name);
        assert!(
            athena.ends_with("SELECT * FROM \"cdc\".\"raw_public_orders_current\";\n"),
            "{athena}"
        );
        let spark = catalog_read(Dialect::Spark, "public.orders", &namespace, &name);
        assert!(
            spark.ends_with("SELECT * FROM `cdc`.`raw_public_orders_current`;\n"),
            "{spark}"
        );
        // Parquet jobs and S3 Tables keep no such table.
        assert!(iceberg_table(&Config::parse(job, "test").unwrap(), "public.orders").is_none());
        let s3tables = Config::parse(
            &format!("{job}table_format: iceberg\niceberg: {{ catalog: {{ type: s3tables, table_bucket_arn: 'arn:aws:s3tables:us-east-1:123456789012:bucket/lake' }}, namespace: cdc }}\n"),
            "test",
        )
        .unwrap();
        assert!(iceberg_table(&s3tables, "public.orders").is_none());
    }

    #[test]
    fn the_script_reads_the_pointer_below_the_folder_given() {
        let text = duckdb("public.orders", "/lake/out/public.orders");
        assert!(
            text.contains("read_json('/lake/out/public.orders/_current_state/_version.json'"),
            "{text}"
        );
        // "public.orders" is 13 characters: the rest of a key starts at the 14th, its `/`.
        assert!(
            text.contains("list('/lake/out/public.orders' || substr(f, 14))"),
            "{text}"
        );
        assert!(
            text.contains("read_parquet(getvariable('sluice_current_files'))"),
            "{text}"
        );
    }
}
