//! The `table_format` key and the `iceberg` block: whether each run's parts are also
//! committed to an Iceberg table per captured table, and through which catalog. Data only:
//! the Iceberg room (`crate::iceberg`) checks the block and does the committing.

use serde::{Deserialize, Serialize};

/// What the job's output is, beyond the Parquet parts themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableFormat {
    /// Parquet parts with sluice's manifests only (the default).
    #[default]
    Parquet,
    /// The same parts, each run's also appended to an Iceberg change-log table.
    Iceberg,
}

/// Where the Iceberg tables are registered (`iceberg:` beside `table_format: iceberg`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IcebergConfig {
    pub catalog: IcebergCatalogConfig,
    /// The namespace the tables go into (created by the first commit when missing).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Prepended to every table's Iceberg name (`raw_` → `raw_public_orders`).
    #[serde(default)]
    pub table_prefix: String,
    /// How long `sluice compact` keeps a table's snapshots (`7d`, `36h`: humantime);
    /// default [`DEFAULT_SNAPSHOT_RETENTION`]. Checked by the Iceberg room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_retention: Option<String>,
}

/// `iceberg.snapshot_retention` when unset.
pub const DEFAULT_SNAPSHOT_RETENTION: &str = "7d";

impl IcebergConfig {
    /// `snapshot_retention` as a duration; `None` when it does not parse.
    pub fn retention(&self) -> Option<std::time::Duration> {
        humantime::parse_duration(
            self.snapshot_retention
                .as_deref()
                .unwrap_or(DEFAULT_SNAPSHOT_RETENTION),
        )
        .ok()
    }
}

fn default_namespace() -> String {
    "sluice".to_owned()
}

/// The Iceberg catalog.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum IcebergCatalogConfig {
    /// pyiceberg's `SqlCatalog` (Iceberg's JDBC catalog tables) in a SQLite file.
    Sql {
        /// `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` (SQLAlchemy's form,
        /// so the same text opens the catalog in pyiceberg).
        uri: String,
        /// The catalog's name (the `catalog_name` column; pyiceberg's first argument).
        #[serde(default = "default_catalog_name")]
        name: String,
    },
    /// The AWS Glue Data Catalog, as Iceberg's and pyiceberg's `GlueCatalog` keep Iceberg
    /// tables in it (the namespace is the Glue database).
    Glue {
        /// The catalog's AWS account id; default: the caller's account.
        catalog_id: Option<String>,
        /// Glue's region; default: the standard chain's (`AWS_REGION`).
        region: Option<String>,
        /// A custom endpoint (moto); default: `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
    },
    /// An Amazon S3 Tables table bucket: each table is a table of the bucket, its files
    /// (parts copied in, metadata) in the warehouse location S3 Tables gives it.
    #[serde(rename = "s3tables")]
    S3Tables {
        /// `arn:aws:s3tables:<region>:<account>:bucket/<name>`; the region is the ARN's.
        table_bucket_arn: String,
        /// A custom endpoint for S3 Tables and the warehouse's S3 objects (moto); default:
        /// `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
    },
}

fn default_catalog_name() -> String {
    "default".to_owned()
}
