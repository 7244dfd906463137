//! The Glue Data Catalog through the real SDK: read a table, create or update it to a
//! [`TableSpec`], create the database when it is missing, check the database for
//! `doctor`.
//!
//! Guarantees: a table is changed only when what Glue holds differs from the spec in
//! columns (names and types), partition keys, location, formats, SerDe or sluice's table
//! parameters — other parameters and settings someone added to the table are kept; an
//! update keeps the earlier `dt` projection start. Every failure is coded:
//! `SLUICE_CATALOG_UNAVAILABLE` (transient: network, throttling, 5xx),
//! `SLUICE_CATALOG_DENIED` (credentials or an IAM action, named in the hint),
//! `SLUICE_CATALOG_REJECTED` (Glue refused the request as invalid).

use std::collections::HashMap;

use aws_sdk_glue::Client;
use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_glue::types::{Column, DatabaseInput, SerDeInfo, StorageDescriptor, Table, TableInput};

use super::table::{INPUT_FORMAT, OUTPUT_FORMAT, SERDE, TableSpec};
use crate::aws::{self, Failure};
use crate::error::{Code, Error, Result};

/// What registering a table did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Created,
    Updated,
    /// Glue already held the table as specified.
    Unchanged,
}

impl Applied {
    /// The word the run summary shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Created => "created",
            Applied::Updated => "updated",
            Applied::Unchanged => "unchanged",
        }
    }
}

/// A Glue client for the `catalog` block's endpoint and region.
pub struct Glue {
    client: Client,
}

impl Glue {
    /// Builds the client (the SDK config is shared per endpoint and region).
    pub async fn open(endpoint_url: Option<&str>, region: Option<&str>) -> Result<Glue> {
        let sdk = aws::shared_config(endpoint_url, region).await?;
        Ok(Glue {
            client: Client::new(&sdk),
        })
    }

    /// The table `name` in `database`, `None` when it (or the database) does not exist.
    pub async fn table(&self, database: &str, name: &str) -> Result<Option<Table>> {
        match self
            .client
            .get_table()
            .database_name(database)
            .name(name)
            .send()
            .await
        {
            Ok(out) => Ok(out.table),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(failure(
                &e,
                &format!("GetTable {database}.{name}"),
                "glue:GetTable",
            )),
        }
    }

    /// True when `database` exists.
    pub async fn database_exists(&self, database: &str) -> Result<bool> {
        match self.client.get_database().name(database).send().await {
            Ok(_) => Ok(true),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(failure(
                &e,
                &format!("GetDatabase {database}"),
                "glue:GetDatabase",
            )),
        }
    }

    /// Creates `database` (an existing one is fine).
    pub async fn create_database(&self, database: &str) -> Result<()> {
        let input = DatabaseInput::builder()
            .name(database)
            .description("CDC tables registered by sluice")
            .build()
            .map_err(|e| Error::new(Code::Internal, "building a Glue database input").source(e))?;
        match self
            .client
            .create_database()
            .database_input(input)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if aws::service_code(&e) == Some("AlreadyExistsException") => Ok(()),
            Err(e) => Err(failure(
                &e,
                &format!("CreateDatabase {database}"),
                "glue:CreateDatabase",
            )),
        }
    }

    /// Makes the catalog hold `spec`: creates the table (and its database when missing),
    /// updates it when its shape differs, or leaves it.
    pub async fn apply(&self, spec: &TableSpec) -> Result<Applied> {
        let existing = self.table(&spec.database, &spec.name).await?;
        let Some(existing) = existing else {
            if !self.database_exists(&spec.database).await? {
                self.create_database(&spec.database).await?;
            }
            let input = table_input(spec, &HashMap::new())?;
            let sent = self.client.create_table().database_name(&spec.database);
            let sent = sent.table_input(input).send().await;
            sent.map_err(|e| table_failure(&e, "CreateTable", spec))?;
            return Ok(Applied::Created);
        };
        let held = spec_of(&spec.database, &existing);
        let wanted = spec
            .clone()
            .keep_earlier_start(held.first_date().map(str::to_owned).as_deref());
        if held.shape() == wanted.shape() && held.first_date() == wanted.first_date() {
            return Ok(Applied::Unchanged);
        }
        let input = table_input(&wanted, existing.parameters().unwrap_or(&HashMap::new()))?;
        let sent = self.client.update_table().database_name(&spec.database);
        let sent = sent.table_input(input).send().await;
        sent.map_err(|e| table_failure(&e, "UpdateTable", spec))?;
        Ok(Applied::Updated)
    }
}

/// The parameters sluice owns: every `projection.*`, `storage.location.template`,
/// `classification`, `EXTERNAL` and `sluice.*`.
fn owned_parameter(key: &str) -> bool {
    key.starts_with("projection.")
        || key.starts_with("sluice.")
        || matches!(
            key,
            "storage.location.template" | "classification" | "EXTERNAL"
        )
}

/// What Glue holds, read back as a spec (only sluice's parameters).
fn spec_of(database: &str, table: &Table) -> TableSpec {
    let columns = |cs: &[Column]| -> Vec<(String, String)> {
        cs.iter()
            .map(|c| {
                (
                    c.name().to_owned(),
                    c.r#type().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let sd = table.storage_descriptor();
    let formats_match = sd.is_some_and(|sd| {
        sd.input_format() == Some(INPUT_FORMAT)
            && sd.output_format() == Some(OUTPUT_FORMAT)
            && sd.serde_info().and_then(|s| s.serialization_library()) == Some(SERDE)
    }) && table.table_type() == Some("EXTERNAL_TABLE");
    TableSpec {
        database: database.to_owned(),
        name: table.name().to_owned(),
        // A table in another format never equals the spec: it is rewritten.
        location: match formats_match {
            true => sd
                .and_then(|sd| sd.location())
                .unwrap_or_default()
                .to_owned(),
            false => String::new(),
        },
        columns: columns(sd.map(|sd| sd.columns()).unwrap_or_default()),
        partition_keys: table
            .partition_keys()
            .iter()
            .map(|c| c.name().to_owned())
            .collect(),
        parameters: table
            .parameters()
            .into_iter()
            .flatten()
            .filter(|(k, _)| owned_parameter(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The Glue table input of `spec`, keeping the parameters of `kept` sluice does not own.
fn table_input(spec: &TableSpec, kept: &HashMap<String, String>) -> Result<TableInput> {
    let column = |name: &str, ty: &str| {
        Column::builder()
            .name(name)
            .r#type(ty)
            .build()
            .map_err(|e| Error::new(Code::Internal, "building a Glue column").source(e))
    };
    let columns = spec
        .columns
        .iter()
        .map(|(n, t)| column(n, t))
        .collect::<Result<Vec<_>>>()?;
    let partition_keys = spec
        .partition_keys
        .iter()
        .map(|n| column(n, "string"))
        .collect::<Result<Vec<_>>>()?;
    let mut parameters: HashMap<String, String> = kept
        .iter()
        .filter(|(k, _)| !owned_parameter(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    parameters.extend(spec.parameters.clone());
    let storage = StorageDescriptor::builder()
        .set_columns(Some(columns))
        .location(&spec.location)
        .input_format(INPUT_FORMAT)
        .output_format(OUTPUT_FORMAT)
        .serde_info(
            SerDeInfo::builder()
                .serialization_library(SERDE)
                .parameters("serialization.format", "1")
                .build(),
        )
        .build();
    TableInput::builder()
        .name(&spec.name)
        .description(format!(
            "sluice change parts of {}",
            spec.parameters
                .get("sluice.table")
                .map_or(spec.name.as_str(), String::as_str)
        ))
        .table_type("EXTERNAL_TABLE")
        .storage_descriptor(storage)
        .set_partition_keys(Some(partition_keys))
        .set_parameters(Some(parameters))
        .build()
        .map_err(|e| Error::new(Code::Internal, "building a Glue table input").source(e))
}

fn not_found<E: ProvideErrorMetadata>(
    err: &SdkError<E, aws_sdk_glue::config::http::HttpResponse>,
) -> bool {
    aws::service_code(err) == Some("EntityNotFoundException")
}

/// A coded error for a failed Glue call.
/// The failure of table operation `operation` (`CreateTable`, `UpdateTable`) on `spec`.
fn table_failure<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    err: &SdkError<E, aws_sdk_glue::config::http::HttpResponse>,
    operation: &str,
    spec: &TableSpec,
) -> Error {
    let what = format!("{operation} {}.{}", spec.database, spec.name);
    failure(err, &what, &format!("glue:{operation}"))
}

fn failure<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    err: &SdkError<E, aws_sdk_glue::config::http::HttpResponse>,
    action: &str,
    iam: &str,
) -> Error {
    let (failure, what) = aws::explain(err);
    let message = format!("Glue {action}: {what}");
    match failure {
        Failure::Unavailable => Error::new(Code::CatalogUnavailable, message)
        .hint("Glue could not be reached or throttled the request; the parts and the checkpoint are committed, the next run registers the table again (check catalog.endpoint_url / network if it persists)"),
        Failure::Denied => Error::new(Code::CatalogDenied, message)
        .hint(format!("allow {iam} on the catalog, the database and its tables to the job's role (the Terraform module `sluice_table` does when its `catalog` input is set); the parts and the checkpoint are committed, the next run registers the table again")),
        Failure::Missing | Failure::Other => Error::new(Code::CatalogRejected, message)
        .hint("Glue refused the request as invalid for this catalog: check catalog.database and catalog.table_prefix (lower-case letters, digits and `_`) and catalog.region; the parts and the checkpoint are committed, the next run tries again"),
    }
}
