//! The Iceberg catalog in the AWS Glue Data Catalog — Iceberg's and pyiceberg's
//! `GlueCatalog` representation, through the real SDK: the namespace is a Glue database,
//! a table is an `EXTERNAL_TABLE` whose parameters hold `table_type=ICEBERG`,
//! `metadata_location` and `previous_metadata_location`, whose storage descriptor's
//! location is the table location and whose columns mirror the Iceberg schema (current
//! fields first, then fields only older schemas hold, each with `iceberg.field.id`,
//! `iceberg.field.optional`, `iceberg.field.current`), so Athena's console shows them.
//!
//! Guarantees: a table's metadata pointer moves only by [`GlueCatalog::swap`] — `GetTable`,
//! compare its `metadata_location` with the one the commit read, `UpdateTable` with the
//! `VersionId` that `GetTable` answered (Glue's optimistic concurrency: a stale version is
//! refused with `ConcurrentModificationException`) — so of two writers that read the same
//! metadata only one moves it, and the other learns it lost (`false`); a table is created
//! only when absent (`CreateTable`; `AlreadyExistsException` is `false`); a name that holds
//! a Glue table that is not an Iceberg table is never written (`SLUICE_ICEBERG_CATALOG_REJECTED`).
//! Parameters and the description or owner others set on the table are kept. Every
//! failure is coded: `SLUICE_ICEBERG_CATALOG` (transient: network, throttling, 5xx),
//! `SLUICE_ICEBERG_CATALOG_DENIED` (credentials or an IAM action, named in the hint),
//! `SLUICE_ICEBERG_CATALOG_REJECTED` (Glue refused the request as invalid).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use aws_sdk_glue::Client;
use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_glue::types::{Column, DatabaseInput, StorageDescriptor, Table, TableInput};
use serde_json::Value as Json;

use super::metadata::TableMetadata;
use super::schema::Field;
use crate::aws::{self, Failure};
use crate::error::{Code, Error, Result};

/// The Glue table parameters of an Iceberg table (pyiceberg's and Iceberg's names).
pub const TABLE_TYPE: &str = "table_type";
pub const ICEBERG: &str = "ICEBERG";
pub const METADATA_LOCATION: &str = "metadata_location";
pub const PREVIOUS_METADATA_LOCATION: &str = "previous_metadata_location";

/// An Iceberg catalog in Glue: the account `catalog_id` (default: the caller's) at
/// `endpoint_url` / `region` (default: the SDK's chain).
pub struct GlueCatalog {
    endpoint_url: Option<String>,
    region: Option<String>,
    catalog_id: Option<String>,
    client: tokio::sync::OnceCell<Client>,
    /// Databases this process found or created.
    ensured: Mutex<BTreeSet<String>>,
}

/// A table as Glue holds it: its current metadata location and Glue version.
struct Held {
    location: String,
    version_id: Option<String>,
    table: Table,
}

impl GlueCatalog {
    pub fn new(endpoint_url: Option<&str>, region: Option<&str>, catalog_id: Option<&str>) -> Self {
        GlueCatalog {
            endpoint_url: endpoint_url.map(str::to_owned),
            region: region.map(str::to_owned),
            catalog_id: catalog_id.map(str::to_owned),
            client: tokio::sync::OnceCell::new(),
            ensured: Mutex::new(BTreeSet::new()),
        }
    }

    /// The catalog, for messages (`Glue catalog 123456789012 in eu-west-1`).
    pub fn describe(&self) -> String {
        let mut s = String::from("Glue catalog");
        if let Some(id) = &self.catalog_id {
            s.push_str(&format!(" {id}"));
        }
        if let Some(region) = &self.region {
            s.push_str(&format!(" in {region}"));
        }
        if let Some(url) = &self.endpoint_url {
            s.push_str(&format!(" at {url}"));
        }
        s
    }

    async fn client(&self) -> Result<&Client> {
        self.client
            .get_or_try_init(|| async {
                let sdk = aws::shared_config(self.endpoint_url.as_deref(), self.region.as_deref())
                    .await?;
                Ok(Client::new(&sdk))
            })
            .await
    }

    /// Whether database `namespace` exists (read only: `sluice doctor`).
    pub async fn database_exists(&self, namespace: &str) -> Result<bool> {
        let client = self.client().await?;
        let sent = client
            .get_database()
            .set_catalog_id(self.catalog_id.clone())
            .name(namespace)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e) if code(&e) == Some("EntityNotFoundException") => Ok(false),
            Err(e) => Err(failure(
                &e,
                &format!("GetDatabase {namespace}"),
                "glue:GetDatabase",
            )),
        }
    }

    /// Creates database `namespace` when missing.
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        if self.ensured.lock().unwrap().contains(namespace) {
            return Ok(());
        }
        if !self.database_exists(namespace).await? {
            let input = DatabaseInput::builder()
                .name(namespace)
                .description("Iceberg change-log tables committed by sluice")
                .build()
                .map_err(|e| {
                    Error::new(Code::Internal, "building a Glue database input").source(e)
                })?;
            let sent = self
                .client()
                .await?
                .create_database()
                .set_catalog_id(self.catalog_id.clone())
                .database_input(input)
                .send()
                .await;
            match sent {
                Ok(_) => {}
                Err(e) if code(&e) == Some("AlreadyExistsException") => {}
                Err(e) => {
                    return Err(failure(
                        &e,
                        &format!("CreateDatabase {namespace}"),
                        "glue:CreateDatabase",
                    ));
                }
            }
        }
        self.ensured.lock().unwrap().insert(namespace.to_owned());
        Ok(())
    }

    /// The Iceberg table `namespace.table` as Glue holds it; `None` when it (or its
    /// database) does not exist; a Glue table there that is not Iceberg is refused.
    async fn held(&self, namespace: &str, table: &str) -> Result<Option<Held>> {
        let sent = self
            .client()
            .await?
            .get_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(namespace)
            .name(table)
            .send()
            .await;
        let found = match sent {
            Ok(out) => out.table,
            Err(e) if code(&e) == Some("EntityNotFoundException") => None,
            Err(e) => {
                return Err(failure(
                    &e,
                    &format!("GetTable {namespace}.{table}"),
                    "glue:GetTable",
                ));
            }
        };
        let Some(found) = found else {
            return Ok(None);
        };
        let parameters = found.parameters();
        let param = |k: &str| parameters.and_then(|p| p.get(k)).map(String::as_str);
        let kind = param(TABLE_TYPE).unwrap_or_default();
        if !kind.eq_ignore_ascii_case(ICEBERG) {
            return Err(Error::new(
                Code::IcebergCatalogRejected,
                format!(
                    "Glue table {namespace}.{table} is not an Iceberg table (its parameter table_type is {})",
                    if kind.is_empty() { "not set".to_owned() } else { format!("{kind:?}") }
                ),
            )
            .hint("sluice commits only to an Iceberg table of that name: set `iceberg.table_prefix` (or `iceberg.namespace`) so its tables get names of their own, or drop that Glue table; if `catalog:` registers the parts in the same database, give the two different prefixes"));
        }
        let Some(location) = param(METADATA_LOCATION).filter(|l| !l.is_empty()) else {
            return Err(Error::new(
                Code::IcebergCatalogRejected,
                format!("Glue table {namespace}.{table} is an Iceberg table without a metadata_location parameter"),
            )
            .hint("set its `metadata_location` parameter to its current metadata file (`previous_metadata_location` names the one before), or drop the table so the next commit creates it"));
        };
        Ok(Some(Held {
            location: location.to_owned(),
            version_id: found.version_id().map(str::to_owned),
            table: found.clone(),
        }))
    }

    /// The current metadata location of `namespace.table`; `None` when the table is not in
    /// the catalog. Reads only.
    pub async fn load(&self, namespace: &str, table: &str) -> Result<Option<String>> {
        Ok(self.held(namespace, table).await?.map(|h| h.location))
    }

    /// Registers `namespace.table` at `location` (its metadata `metadata`); `false` when
    /// another writer registered it first.
    pub async fn create(
        &self,
        namespace: &str,
        table: &str,
        location: &str,
        metadata: &TableMetadata,
    ) -> Result<bool> {
        let input = table_input(table, location, None, metadata, None)?;
        let sent = self
            .client()
            .await?
            .create_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(namespace)
            .table_input(input)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e) if lost(code(&e)) => Ok(false),
            Err(e) => Err(failure(
                &e,
                &format!("CreateTable {namespace}.{table}"),
                "glue:CreateTable",
            )),
        }
    }

    /// Moves `namespace.table` from metadata `old` to `new` (its metadata `metadata`);
    /// `false` when the table no longer points at `old` or Glue's version moved between
    /// reading and updating it (another writer committed).
    pub async fn swap(
        &self,
        namespace: &str,
        table: &str,
        old: &str,
        new: &str,
        metadata: &TableMetadata,
    ) -> Result<bool> {
        let Some(held) = self.held(namespace, table).await? else {
            return Ok(false);
        };
        if held.location != old {
            return Ok(false);
        }
        let Some(version_id) = held.version_id else {
            return Err(Error::new(
                Code::IcebergCatalogRejected,
                format!("Glue answered table {namespace}.{table} without a VersionId"),
            )
            .hint("without it the pointer cannot move conditionally: check that iceberg.catalog.endpoint_url is AWS Glue (or a Glue emulator that answers VersionId)"));
        };
        let input = table_input(table, new, Some(old), metadata, Some(&held.table))?;
        let sent = self
            .client()
            .await?
            .update_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(namespace)
            .table_input(input)
            .version_id(version_id)
            // As Iceberg's and pyiceberg's default (`glue.skip-archive`): a change log
            // commits every run, and Glue keeps a limited number of table versions.
            .skip_archive(true)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e) if lost(code(&e)) || code(&e) == Some("EntityNotFoundException") => Ok(false),
            Err(e) => Err(failure(
                &e,
                &format!("UpdateTable {namespace}.{table}"),
                "glue:UpdateTable",
            )),
        }
    }
}

/// True for the error codes that mean another writer moved the table first.
fn lost(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("ConcurrentModificationException" | "AlreadyExistsException")
    )
}

fn code<E: ProvideErrorMetadata>(
    err: &SdkError<E, aws_sdk_glue::config::http::HttpResponse>,
) -> Option<&str> {
    aws::service_code(err)
}

/// The Glue table input of an Iceberg table at `location` (`previous` before it), keeping
/// what `existing` holds beyond the Iceberg parameters: its other parameters, description
/// and owner — pyiceberg's `_construct_table_input`.
fn table_input(
    name: &str,
    location: &str,
    previous: Option<&str>,
    metadata: &TableMetadata,
    existing: Option<&Table>,
) -> Result<TableInput> {
    let mut parameters: HashMap<String, String> = existing
        .and_then(Table::parameters)
        .cloned()
        .unwrap_or_default();
    parameters.extend(metadata.properties.clone());
    parameters.insert(TABLE_TYPE.into(), ICEBERG.into());
    parameters.insert(METADATA_LOCATION.into(), location.into());
    match previous {
        Some(p) => parameters.insert(PREVIOUS_METADATA_LOCATION.into(), p.into()),
        None => parameters.remove(PREVIOUS_METADATA_LOCATION),
    };
    let storage = StorageDescriptor::builder()
        .set_columns(Some(columns(metadata)?))
        .location(&metadata.location)
        .build();
    TableInput::builder()
        .name(name)
        .table_type("EXTERNAL_TABLE")
        .set_description(existing.and_then(|t| t.description().map(str::to_owned)))
        .set_owner(existing.and_then(|t| t.owner().map(str::to_owned)))
        .storage_descriptor(storage)
        .set_parameters(Some(parameters))
        .build()
        .map_err(|e| Error::new(Code::Internal, "building a Glue table input").source(e))
}

/// The Glue columns of `metadata`: the current schema's fields, then the fields only
/// older schemas hold (by name), each with its Iceberg field id, optionality and whether
/// it is current — pyiceberg's `_to_columns`.
fn columns(metadata: &TableMetadata) -> Result<Vec<Column>> {
    let current = metadata.current_fields();
    let older = metadata
        .schemas
        .iter()
        .filter(|s| s.schema_id != metadata.current_schema_id)
        .flat_map(|s| s.fields.iter());
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (field, is_current) in current
        .iter()
        .map(|f| (f, true))
        .chain(older.map(|f| (f, false)))
    {
        if !seen.insert(field.name.clone()) {
            continue;
        }
        out.push(column(field, is_current)?);
    }
    Ok(out)
}

fn column(field: &Field, is_current: bool) -> Result<Column> {
    Column::builder()
        .name(&field.name)
        .r#type(glue_type(&field.ty))
        .set_comment(
            field
                .extra
                .get("doc")
                .and_then(Json::as_str)
                .map(str::to_owned),
        )
        .parameters("iceberg.field.id", field.id.to_string())
        .parameters("iceberg.field.optional", (!field.required).to_string())
        .parameters("iceberg.field.current", is_current.to_string())
        .build()
        .map_err(|e| Error::new(Code::Internal, "building a Glue column").source(e))
}

/// The Glue (Hive) type of an Iceberg type — pyiceberg's `_IcebergSchemaToGlueType`.
pub fn glue_type(ty: &Json) -> String {
    match ty {
        Json::String(p) => match p.as_str() {
            "long" => "bigint".into(),
            "time" | "uuid" => "string".into(),
            "timestamptz" | "timestamp_ns" | "timestamptz_ns" => "timestamp".into(),
            p if p.starts_with("fixed[") => "binary".into(),
            p if p.starts_with("decimal(") => p.replace(' ', ""),
            p => p.into(),
        },
        Json::Object(o) => match o.get("type").and_then(Json::as_str) {
            Some("list") => format!("array<{}>", glue_type(&o["element"])),
            Some("map") => format!("map<{},{}>", glue_type(&o["key"]), glue_type(&o["value"])),
            Some("struct") => {
                let fields = o
                    .get("fields")
                    .and_then(Json::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        format!(
                            "{}:{}",
                            f["name"].as_str().unwrap_or_default(),
                            glue_type(&f["type"])
                        )
                    })
                    .collect();
                format!("struct<{}>", fields.join(","))
            }
            _ => "string".into(),
        },
        _ => "string".into(),
    }
}

/// A coded error for a failed Glue call `action` that needs IAM action `iam`.
fn failure<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    err: &SdkError<E, aws_sdk_glue::config::http::HttpResponse>,
    action: &str,
    iam: &str,
) -> Error {
    let (failure, what) = aws::explain(err);
    let message = format!("Iceberg Glue catalog, {action}: {what}");
    match failure {
        Failure::Unavailable => Error::new(Code::IcebergCatalog, message)
            .hint("Glue could not be reached or throttled the request: check iceberg.catalog.endpoint_url and region and the network path to Glue; the run failed before its checkpoint, the next run commits again"),
        Failure::Denied => Error::new(Code::IcebergCatalogDenied, message)
            .hint(format!("allow {iam} on the catalog, the namespace's database and its tables to the job's role (the Terraform module `sluice_table` does when its `iceberg` input has `catalog = \"glue\"`), or fix the credentials; the run failed before its checkpoint, nothing is lost")),
        Failure::Missing | Failure::Other => Error::new(Code::IcebergCatalogRejected, message)
            .hint("Glue refused the request as invalid for this catalog: check iceberg.namespace and iceberg.table_prefix (lower-case letters, digits and `_`), iceberg.catalog.catalog_id and region; the run failed before its checkpoint, nothing is lost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn iceberg_types_have_pyicebergs_glue_types() {
        for (ty, glue) in [
            (json!("boolean"), "boolean"),
            (json!("int"), "int"),
            (json!("long"), "bigint"),
            (json!("float"), "float"),
            (json!("double"), "double"),
            (json!("date"), "date"),
            (json!("time"), "string"),
            (json!("string"), "string"),
            (json!("uuid"), "string"),
            (json!("timestamp"), "timestamp"),
            (json!("timestamptz"), "timestamp"),
            (json!("binary"), "binary"),
            (json!("fixed[16]"), "binary"),
            (json!("decimal(12, 2)"), "decimal(12,2)"),
            (
                json!({"type": "list", "element-id": 9, "element": "string", "element-required": false}),
                "array<string>",
            ),
            (
                json!({"type": "map", "key-id": 1, "key": "string", "value-id": 2, "value": "long", "value-required": false}),
                "map<string,bigint>",
            ),
            (
                json!({"type": "struct", "fields": [{"id": 3, "name": "a", "type": "int", "required": false}]}),
                "struct<a:int>",
            ),
        ] {
            assert_eq!(glue_type(&ty), glue, "{ty}");
        }
    }

    #[test]
    fn columns_mirror_the_current_schema_then_older_fields() {
        let field = |id: i32, name: &str, ty: &str| Field {
            id,
            name: name.into(),
            required: false,
            ty: json!(ty),
            extra: Default::default(),
        };
        let mut m = TableMetadata::new(
            "s3://b/t",
            vec![field(1, "id", "int"), field(2, "gone", "string")],
            2,
            0,
        );
        m.set_schema(vec![field(1, "id", "long"), field(3, "new", "date")], 3);
        let cols = columns(&m).unwrap();
        let shown: Vec<(&str, &str, &str, &str)> = cols
            .iter()
            .map(|c| {
                let p = c.parameters().unwrap();
                (
                    c.name(),
                    c.r#type().unwrap(),
                    p["iceberg.field.id"].as_str(),
                    p["iceberg.field.current"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("id", "bigint", "1", "true"),
                ("new", "date", "3", "true"),
                ("gone", "string", "2", "false"),
            ]
        );
        assert_eq!(
            cols[0].parameters().unwrap()["iceberg.field.optional"],
            "true"
        );
    }

    #[test]
    fn the_table_input_is_pyicebergs_and_keeps_what_others_set() {
        let m = TableMetadata::new("s3://b/cdc/t", Vec::new(), 0, 0);
        let created = table_input("t", "s3://b/cdc/t/m1.json", None, &m, None).unwrap();
        let p = created.parameters().unwrap();
        assert_eq!(p[TABLE_TYPE], "ICEBERG");
        assert_eq!(p[METADATA_LOCATION], "s3://b/cdc/t/m1.json");
        assert!(!p.contains_key(PREVIOUS_METADATA_LOCATION));
        assert_eq!(created.table_type(), Some("EXTERNAL_TABLE"));
        assert_eq!(
            created.storage_descriptor().unwrap().location(),
            Some("s3://b/cdc/t")
        );
        let held = Table::builder()
            .name("t")
            .description("owned by the lake team")
            .parameters("owner_team", "lake")
            .parameters(METADATA_LOCATION, "s3://b/cdc/t/m1.json")
            .build()
            .unwrap();
        let moved = table_input(
            "t",
            "s3://b/cdc/t/m2.json",
            Some("s3://b/cdc/t/m1.json"),
            &m,
            Some(&held),
        )
        .unwrap();
        let p = moved.parameters().unwrap();
        assert_eq!(p[METADATA_LOCATION], "s3://b/cdc/t/m2.json");
        assert_eq!(p[PREVIOUS_METADATA_LOCATION], "s3://b/cdc/t/m1.json");
        assert_eq!(p["owner_team"], "lake");
        assert_eq!(moved.description(), Some("owned by the lake team"));
    }

    #[test]
    fn a_stale_version_or_a_table_created_first_is_a_lost_race() {
        assert!(lost(Some("ConcurrentModificationException")));
        assert!(lost(Some("AlreadyExistsException")));
        assert!(!lost(Some("AccessDeniedException")));
        assert!(!lost(None));
    }
}
