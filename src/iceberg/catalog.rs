//! The Iceberg catalog a commit goes through: the SQL catalog on SQLite ([`SqlCatalog`]),
//! the AWS Glue Data Catalog ([`GlueCatalog`]) or an S3 Tables table bucket
//! ([`S3TablesCatalog`]), behind the calls a commit and `sluice doctor` make.
//!
//! Guarantees: every catalog keeps the same contract — `ensure_namespace` creates the
//! namespace when missing; `load` and `peek` answer the current metadata location, `None`
//! for a table not in the catalog (`peek` creates nothing); `create` registers a table only
//! when absent and answers `false` when another writer registered it first; `swap` moves
//! the pointer only from the location the caller read and answers `false` when another
//! writer moved it first. Nothing else differs between catalogs for the commit; where
//! the table's files lie (the destination, or S3 Tables' warehouse location) is the
//! change log's choice (`super::ChangeLog`).

use super::glue_catalog::GlueCatalog;
use super::metadata::TableMetadata;
use super::s3tables::S3TablesCatalog;
use super::sql::SqlCatalog;
use crate::error::{Code, Error, Result};

/// One of the catalogs `iceberg.catalog` names.
pub enum Catalog {
    Sql(SqlCatalog),
    Glue(GlueCatalog),
    S3Tables(S3TablesCatalog),
}

impl Catalog {
    /// Creates `namespace` when missing.
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        match self {
            Catalog::Sql(c) => c.ensure_namespace(namespace),
            Catalog::Glue(c) => c.ensure_namespace(namespace).await,
            Catalog::S3Tables(c) => c.ensure_namespace(namespace).await,
        }
    }

    /// The current metadata location of `namespace.table`; `None` when the table is not
    /// in the catalog.
    pub async fn load(&self, namespace: &str, table: &str) -> Result<Option<String>> {
        match self {
            Catalog::Sql(c) => c.load(namespace, table),
            Catalog::Glue(c) => c.load(namespace, table).await,
            Catalog::S3Tables(c) => c.load(namespace, table).await,
        }
    }

    /// [`Catalog::load`] without creating or changing anything (`sluice doctor`).
    pub async fn peek(&self, namespace: &str, table: &str) -> Result<Option<String>> {
        match self {
            Catalog::Sql(c) => c.peek(namespace, table),
            Catalog::Glue(c) => c.load(namespace, table).await,
            Catalog::S3Tables(c) => c.load(namespace, table).await,
        }
    }

    /// Registers `namespace.table` at `location` (whose metadata is `metadata`); `false`
    /// when another writer registered it first.
    pub async fn create(
        &self,
        namespace: &str,
        table: &str,
        location: &str,
        metadata: &TableMetadata,
    ) -> Result<bool> {
        match self {
            Catalog::Sql(c) => c.create(namespace, table, location),
            Catalog::Glue(c) => c.create(namespace, table, location, metadata).await,
            Catalog::S3Tables(c) => c.create(namespace, table, location).await,
        }
    }

    /// Moves `namespace.table` from `old` to `new` (whose metadata is `metadata`); `false`
    /// when the table no longer points at `old`.
    pub async fn swap(
        &self,
        namespace: &str,
        table: &str,
        old: &str,
        new: &str,
        metadata: &TableMetadata,
    ) -> Result<bool> {
        match self {
            Catalog::Sql(c) => c.swap(namespace, table, old, new),
            Catalog::Glue(c) => c.swap(namespace, table, old, new, metadata).await,
            Catalog::S3Tables(c) => c.swap(namespace, table, old, new).await,
        }
    }

    /// What `sluice doctor` checks of the catalog itself before its tables (read only):
    /// the SQL catalog file's directory exists; Glue answers for the namespace's database.
    /// Answers a note for the report.
    pub async fn check(&self, namespace: &str) -> Result<String> {
        match self {
            Catalog::Sql(c) => {
                if !c.directory_exists() {
                    return Err(Error::new(
                        Code::IcebergCatalog,
                        format!(
                            "the directory of the Iceberg catalog file {} does not exist",
                            c.path().display()
                        ),
                    )
                    .hint(
                        "create the directory, or point `iceberg.catalog.uri` at an existing one",
                    ));
                }
                Ok(String::new())
            }
            Catalog::Glue(c) => Ok(match c.database_exists(namespace).await? {
                true => format!("{}, database {namespace}", c.describe()),
                false => format!(
                    "{}, database {namespace} (created by the first commit)",
                    c.describe()
                ),
            }),
            Catalog::S3Tables(c) => {
                c.check_bucket().await?;
                Ok(match c.namespace_exists(namespace).await? {
                    true => format!("{}, namespace {namespace}", c.describe()),
                    false => format!(
                        "{}, namespace {namespace} (created by the first commit)",
                        c.describe()
                    ),
                })
            }
        }
    }
}
