//! The `catalog` block: where sluice registers each captured table's parts as a catalog
//! table (the Glue Data Catalog). Data only: the catalog room (`crate::registration`) checks
//! the block (names, an S3 destination) and does the registering.

use serde::{Deserialize, Serialize};

/// The catalog the tables are registered in.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum CatalogConfig {
    /// The AWS Glue Data Catalog (what Athena, EMR and Redshift Spectrum read).
    Glue {
        /// The Glue database the tables go into (created by the first run when missing).
        database: String,
        /// Prepended to every table's catalog name (`raw_` → `raw_public_orders`).
        #[serde(default)]
        table_prefix: String,
        /// A custom endpoint (moto); default: `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
        region: Option<String>,
    },
}
