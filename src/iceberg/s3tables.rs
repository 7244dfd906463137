//! The Iceberg catalog of an Amazon S3 Tables table bucket, through the real SDK: the
//! namespace is a namespace of the bucket, a table is a table of it (format `ICEBERG`),
//! whose files — metadata and data — lie in the warehouse location S3 Tables assigns it
//! (an S3 location of its own, reached with the ordinary S3 object calls).
//!
//! Guarantees: a table's metadata pointer moves only by [`S3TablesCatalog::swap`] (and
//! the first time by [`S3TablesCatalog::create`]) — `GetTableMetadataLocation`, compare its
//! `metadataLocation` with the one the commit read, then `UpdateTableMetadataLocation`
//! with the `versionToken` it answered (S3 Tables' optimistic concurrency: a
//! stale token is refused with a `ConflictException`) — so of two writers that read the
//! same metadata only one moves it, and the other learns it lost (`false`). A table is
//! created (without metadata) before its first commit writes anything, because its
//! warehouse location only exists from then on ([`S3TablesCatalog::warehouse`]). Every
//! failure is coded: `SLUICE_ICEBERG_CATALOG` (transient), `SLUICE_ICEBERG_CATALOG_DENIED`
//! (credentials or an IAM action, named in the hint), `SLUICE_ICEBERG_CATALOG_REJECTED`
//! (the bucket is missing or the request is invalid).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use aws_sdk_s3tables::Client;
use aws_sdk_s3tables::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3tables::types::OpenTableFormat;

use crate::aws::{self, Failure};
use crate::destination::Destination;
use crate::destination::s3::{MultipartSettings, S3Destination};
use crate::error::{Code, Error, Result};

/// A table bucket's parts, from its ARN
/// (`arn:<partition>:s3tables:<region>:<account>:bucket/<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketArn {
    pub region: String,
    pub account: String,
    pub name: String,
}

impl BucketArn {
    /// Parses a table bucket ARN; `None` when `arn` is not one.
    pub fn parse(arn: &str) -> Option<BucketArn> {
        let mut parts = arn.splitn(6, ':');
        let (
            Some("arn"),
            Some(partition),
            Some("s3tables"),
            Some(region),
            Some(account),
            Some(resource),
        ) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        )
        else {
            return None;
        };
        let name = resource.strip_prefix("bucket/")?;
        let lower = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        let ok = partition.starts_with("aws")
            && lower(region)
            && account.len() == 12
            && account.chars().all(|c| c.is_ascii_digit())
            && (3..=63).contains(&name.len())
            && lower(name);
        ok.then(|| BucketArn {
            region: region.to_owned(),
            account: account.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// A table as S3 Tables holds it.
#[derive(Debug, Clone)]
pub struct Held {
    /// The current metadata file; `None` for a table created but never committed to.
    pub metadata_location: Option<String>,
    /// The table's S3 location (`s3://<id>--table-s3`), where its files go.
    pub warehouse: String,
    version_token: String,
}

/// The Iceberg catalog of the table bucket `arn`, at `endpoint_url` (default: the SDK's).
pub struct S3TablesCatalog {
    arn: String,
    region: String,
    endpoint_url: Option<String>,
    client: tokio::sync::OnceCell<Client>,
    /// Namespaces this process found or created.
    ensured: Mutex<BTreeSet<String>>,
    /// Per `namespace.table`, the metadata location and version token of the last
    /// `GetTableMetadataLocation` answer not yet used by a move: a move from that location
    /// sends that token (S3 Tables refuses it if the table moved since) without reading
    /// the table again.
    versions: Mutex<BTreeMap<String, (Option<String>, String)>>,
}

impl S3TablesCatalog {
    /// The catalog of `arn` (checked by the config check; an unparsable ARN is refused
    /// here too).
    pub fn new(arn: &str, endpoint_url: Option<&str>) -> Result<Self> {
        let parsed = BucketArn::parse(arn).ok_or_else(|| {
            Error::new(
                Code::ConfigInvalid,
                format!("iceberg.catalog.table_bucket_arn {arn:?} is not a table bucket ARN"),
            )
            .hint("write `arn:aws:s3tables:<region>:<account>:bucket/<name>` (the console's table bucket ARN)")
        })?;
        Ok(S3TablesCatalog {
            arn: arn.to_owned(),
            region: parsed.region,
            endpoint_url: endpoint_url.map(str::to_owned),
            client: tokio::sync::OnceCell::new(),
            ensured: Mutex::new(BTreeSet::new()),
            versions: Mutex::new(BTreeMap::new()),
        })
    }

    /// The catalog, for messages.
    pub fn describe(&self) -> String {
        match &self.endpoint_url {
            Some(url) => format!("S3 Tables bucket {} at {url}", self.arn),
            None => format!("S3 Tables bucket {}", self.arn),
        }
    }

    async fn client(&self) -> Result<&Client> {
        self.client
            .get_or_try_init(|| async {
                let sdk =
                    aws::shared_config(self.endpoint_url.as_deref(), Some(&self.region)).await?;
                Ok(Client::new(&sdk))
            })
            .await
    }

    /// Whether the table bucket exists (read only: `sluice doctor`); a missing bucket is
    /// `SLUICE_ICEBERG_CATALOG_REJECTED`.
    pub async fn check_bucket(&self) -> Result<()> {
        let sent = self
            .client()
            .await?
            .get_table_bucket()
            .table_bucket_arn(&self.arn)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failure(&e, "GetTableBucket", "s3tables:GetTableBucket")),
        }
    }

    /// Whether namespace `namespace` exists (read only).
    pub async fn namespace_exists(&self, namespace: &str) -> Result<bool> {
        let sent = self
            .client()
            .await?
            .get_namespace()
            .table_bucket_arn(&self.arn)
            .namespace(namespace)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e) if code(&e) == Some("NotFoundException") => Ok(false),
            Err(e) => Err(self.failure(
                &e,
                &format!("GetNamespace {namespace}"),
                "s3tables:GetNamespace",
            )),
        }
    }

    /// Creates namespace `namespace` when missing.
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        if self.ensured.lock().unwrap().contains(namespace) {
            return Ok(());
        }
        if !self.namespace_exists(namespace).await? {
            let sent = self
                .client()
                .await?
                .create_namespace()
                .table_bucket_arn(&self.arn)
                .namespace(namespace)
                .send()
                .await;
            self.created(
                sent,
                &format!("CreateNamespace {namespace}"),
                "s3tables:CreateNamespace",
            )?;
        }
        self.ensured.lock().unwrap().insert(namespace.to_owned());
        Ok(())
    }

    /// `namespace.table` as S3 Tables holds it (`GetTableMetadataLocation`); `None` when
    /// it (or its namespace) does not exist.
    pub async fn held(&self, namespace: &str, table: &str) -> Result<Option<Held>> {
        let sent = self
            .client()
            .await?
            .get_table_metadata_location()
            .table_bucket_arn(&self.arn)
            .namespace(namespace)
            .name(table)
            .send()
            .await;
        match sent {
            Ok(out) => {
                let held = Held {
                    metadata_location: out.metadata_location().map(str::to_owned),
                    warehouse: out.warehouse_location().trim_end_matches('/').to_owned(),
                    version_token: out.version_token().to_owned(),
                };
                let version = (held.metadata_location.clone(), held.version_token.clone());
                self.versions
                    .lock()
                    .unwrap()
                    .insert(format!("{namespace}.{table}"), version);
                Ok(Some(held))
            }
            Err(e) if code(&e) == Some("NotFoundException") => Ok(None),
            Err(e) => Err(self.failure(
                &e,
                &format!("GetTableMetadataLocation {namespace}.{table}"),
                "s3tables:GetTableMetadataLocation",
            )),
        }
    }

    /// The warehouse location of `namespace.table`, creating the table (without metadata)
    /// when it does not exist and `create` is set; `None` when it does not exist and
    /// `create` is not set.
    pub async fn warehouse(
        &self,
        namespace: &str,
        table: &str,
        create: bool,
    ) -> Result<Option<String>> {
        if let Some(held) = self.held(namespace, table).await? {
            return Ok(Some(held.warehouse));
        }
        if !create {
            return Ok(None);
        }
        let sent = self
            .client()
            .await?
            .create_table()
            .table_bucket_arn(&self.arn)
            .namespace(namespace)
            .name(table)
            .format(OpenTableFormat::Iceberg)
            .send()
            .await;
        self.created(
            sent,
            &format!("CreateTable {namespace}.{table}"),
            "s3tables:CreateTable",
        )?;
        match self.held(namespace, table).await? {
            Some(held) => Ok(Some(held.warehouse)),
            None => Err(Error::new(
                Code::IcebergCatalog,
                format!("S3 Tables created {namespace}.{table} but does not answer for it"),
            )
            .hint("the table was deleted right after it was created; run again")),
        }
    }

    /// The current metadata location of `namespace.table`; `None` when the table does not
    /// exist or was never committed to.
    pub async fn load(&self, namespace: &str, table: &str) -> Result<Option<String>> {
        Ok(self
            .held(namespace, table)
            .await?
            .and_then(|h| h.metadata_location))
    }

    /// Points `namespace.table` (created without metadata) at its first metadata file
    /// `location`; `false` when another writer committed first.
    pub async fn create(&self, namespace: &str, table: &str, location: &str) -> Result<bool> {
        self.move_pointer(namespace, table, None, location).await
    }

    /// Moves `namespace.table` from metadata `old` to `new`; `false` when the table no
    /// longer points at `old` or its version moved between reading and updating it.
    pub async fn swap(&self, namespace: &str, table: &str, old: &str, new: &str) -> Result<bool> {
        self.move_pointer(namespace, table, Some(old), new).await
    }

    async fn move_pointer(
        &self,
        namespace: &str,
        table: &str,
        old: Option<&str>,
        new: &str,
    ) -> Result<bool> {
        // The version this process read last (the commit's load, just before); read it
        // now if there is none. A location other than `old` means the table moved since.
        let key = format!("{namespace}.{table}");
        let mut known = self.versions.lock().unwrap().remove(&key);
        if known.is_none() && self.held(namespace, table).await?.is_some() {
            known = self.versions.lock().unwrap().remove(&key);
        }
        let Some((location, token)) = known else {
            return Ok(false);
        };
        if location.as_deref() != old {
            return Ok(false);
        }
        let sent = self
            .client()
            .await?
            .update_table_metadata_location()
            .table_bucket_arn(&self.arn)
            .namespace(namespace)
            .name(table)
            .version_token(&token)
            .metadata_location(new)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e) if matches!(code(&e), Some("ConflictException" | "NotFoundException")) => {
                Ok(false)
            }
            Err(e) => Err(self.failure(
                &e,
                &format!("UpdateTableMetadataLocation {namespace}.{table}"),
                "s3tables:UpdateTableMetadataLocation",
            )),
        }
    }

    /// The answer to a create call: made, or already there (another writer made it first,
    /// the same namespace or table); a failure otherwise.
    fn created<T, E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        &self,
        sent: std::result::Result<T, SdkError<E, aws_sdk_s3tables::config::http::HttpResponse>>,
        action: &str,
        iam: &str,
    ) -> Result<()> {
        match sent {
            Ok(_) => Ok(()),
            Err(e) if code(&e) == Some("ConflictException") => Ok(()),
            Err(e) => Err(self.failure(&e, action, iam)),
        }
    }

    fn failure<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        &self,
        err: &SdkError<E, aws_sdk_s3tables::config::http::HttpResponse>,
        action: &str,
        iam: &str,
    ) -> Error {
        let (failure, what) = aws::explain(err);
        let message = format!("Iceberg catalog {}, {action}: {what}", self.describe());
        match failure {
            Failure::Unavailable => Error::new(Code::IcebergCatalog, message)
                .hint("S3 Tables could not be reached or throttled the request: check iceberg.catalog.endpoint_url, the ARN's region and the network path; the run failed before its checkpoint, the next run commits again"),
            Failure::Denied => Error::new(Code::IcebergCatalogDenied, message)
                .hint(format!("allow {iam} on the table bucket and its tables to the job's role (the Terraform module `sluice_table` does when its `iceberg` input has `catalog = \"s3tables\"`), or fix the credentials; the run failed before its checkpoint, nothing is lost")),
            Failure::Missing | Failure::Other => Error::new(Code::IcebergCatalogRejected, message)
                .hint("S3 Tables refused the request: check that iceberg.catalog.table_bucket_arn names an existing table bucket (`aws s3tables get-table-bucket --table-bucket-arn …`), and iceberg.namespace and iceberg.table_prefix (lower-case letters, digits and `_`); the run failed before its checkpoint, nothing is lost"),
        }
    }
}

/// A table's warehouse location as the store of its Iceberg files: the S3 objects
/// there, through the ordinary S3 calls (which S3 Tables authorizes as
/// `s3tables:GetTableData` / `s3tables:PutTableData` on the table). A failure is an Iceberg
/// catalog failure of that table, coded as the catalog's own
/// (`SLUICE_ICEBERG_CATALOG`, `…_DENIED`, `…_REJECTED`), never a destination failure.
pub struct Warehouse {
    s3: S3Destination,
    table: String,
    /// The warehouse location, without a trailing `/`.
    location: String,
}

impl Warehouse {
    /// The store at `uri` (`s3://<bucket>[/<prefix>]`) of table `table`
    /// (`namespace.name`), reached like `catalog`.
    pub async fn open(catalog: &S3TablesCatalog, table: &str, uri: &str) -> Result<Warehouse> {
        let (bucket, prefix) = uri
            .strip_prefix("s3://")
            .map(|rest| rest.split_once('/').unwrap_or((rest, "")))
            .filter(|(bucket, _)| !bucket.is_empty())
            .ok_or_else(|| {
                Error::new(
                    Code::IcebergCatalogRejected,
                    format!("S3 Tables gave {table} the warehouse location {uri:?}, which is not an S3 location"),
                )
                .hint("check iceberg.catalog.endpoint_url: it must be S3 Tables (or an emulator of it)")
            })?;
        let sdk =
            aws::shared_config(catalog.endpoint_url.as_deref(), Some(&catalog.region)).await?;
        let s3 = S3Destination::new(&sdk, bucket, prefix, MultipartSettings::default())?.managed();
        Ok(Warehouse {
            s3,
            table: table.to_owned(),
            location: uri.trim_end_matches('/').to_owned(),
        })
    }

    /// The warehouse location (`s3://<bucket>[/<prefix>]`), without a trailing `/`.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// A failure of the warehouse's S3 calls, as the Iceberg catalog failure it is.
    fn failure(&self, e: Error) -> Error {
        let code = match e.code() {
            Code::DestinationUnavailable => Code::IcebergCatalog,
            Code::DestinationDenied => Code::IcebergCatalogDenied,
            Code::DestinationRejected | Code::ConfigInvalid => Code::IcebergCatalogRejected,
            _ => return e,
        };
        let hint = match code {
            Code::IcebergCatalog => "S3 Tables' storage could not be reached for now; the run failed before its checkpoint, the next run commits again".to_owned(),
            Code::IcebergCatalogDenied => format!("allow s3tables:GetTableData and s3tables:PutTableData on table {} to the job's role (the Terraform module `sluice_table` does when its `iceberg` input has `catalog = \"s3tables\"`), or fix the credentials; nothing was checkpointed", self.table),
            _ => format!("S3 Tables refused a file of table {}: check the table bucket's encryption and policy; nothing was checkpointed", self.table),
        };
        Error::new(
            code,
            format!(
                "Iceberg table {}, its warehouse: {}",
                self.table,
                e.message()
            ),
        )
        .hint(hint)
        .source(e)
    }
}

#[async_trait::async_trait]
impl Destination for Warehouse {
    fn describe(&self) -> String {
        self.s3.describe()
    }

    fn root_uri(&self) -> Option<String> {
        self.s3.root_uri()
    }

    async fn put_part(&self, key: &str, local: &std::path::Path) -> Result<()> {
        self.s3
            .put_part(key, local)
            .await
            .map_err(|e| self.failure(e))
    }

    async fn put_marker(&self, key: &str, body: &[u8]) -> Result<()> {
        self.s3
            .put_marker(key, body)
            .await
            .map_err(|e| self.failure(e))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.s3.get(key).await.map_err(|e| self.failure(e))
    }

    async fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Option<Vec<u8>>> {
        self.s3
            .get_range(key, start, len)
            .await
            .map_err(|e| self.failure(e))
    }

    /// S3 Tables lists no objects of a table; nothing in a commit lists them.
    async fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Err(Error::new(
            Code::Internal,
            format!(
                "listing {prefix} in the warehouse of {}: S3 Tables lists no table objects",
                self.table
            ),
        ))
    }
}

fn code<E: ProvideErrorMetadata>(
    err: &SdkError<E, aws_sdk_s3tables::config::http::HttpResponse>,
) -> Option<&str> {
    aws::service_code(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_bucket_arn_is_parsed_and_anything_else_refused() {
        assert_eq!(
            BucketArn::parse("arn:aws:s3tables:eu-west-1:123456789012:bucket/lake-cdc"),
            Some(BucketArn {
                region: "eu-west-1".into(),
                account: "123456789012".into(),
                name: "lake-cdc".into(),
            })
        );
        assert!(
            BucketArn::parse("arn:aws-cn:s3tables:cn-north-1:123456789012:bucket/lake").is_some()
        );
        for bad in [
            "lake",
            "arn:aws:s3:::lake",
            "arn:aws:s3tables:eu-west-1:123456789012:bucket/",
            "arn:aws:s3tables:eu-west-1:1234:bucket/lake",
            "arn:aws:s3tables:eu-west-1:123456789012:table/lake",
            "arn:aws:s3tables:eu-west-1:123456789012:bucket/Lake",
            "arn:aws:s3tables:eu-west-1:123456789012:bucket/lake/table/x",
        ] {
            assert_eq!(BucketArn::parse(bad), None, "{bad}");
        }
    }
}
