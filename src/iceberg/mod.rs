//! `table_format: iceberg`: each run's parts, already durable as typed Parquet, are also
//! committed to one Iceberg table per captured table, through the `iceberg` block's
//! catalog (the SQL catalog on SQLite, pyiceberg's `SqlCatalog`; the AWS Glue Data
//! Catalog, pyiceberg's `GlueCatalog`; or an Amazon S3 Tables table bucket).
//!
//! Guarantees:
//!
//! * the drain commits a table's parts **after** they are durable and listed in the run
//!   manifests and **before** the checkpoint that covers them moves ([`ChangeLog`]); an
//!   Iceberg failure fails the run with its code before that checkpoint, so the next run
//!   reads the same changes and commits them again — nothing is lost;
//! * one snapshot per table and checkpoint that wrote parts of it (usually one per run),
//!   a fast append of those parts; a crash between the commit and the checkpoint never
//!   duplicates rows: the next commit of the stream drops the snapshot whose checkpoint
//!   was never written ([`table_commit`]);
//! * a baseline's parts become one snapshot per plan, made once, before the baseline is
//!   marked done ([`ChangeLog::baseline`]);
//! * with the SQL and Glue catalogs the metadata files (JSON, Avro) are written through
//!   the job's destination under `<table>/_iceberg/metadata/` (an `_` name: folder readers
//!   skip it), the data files are the parts where they lie: the table's location is the
//!   table folder;
//! * with S3 Tables the table's location is the warehouse location S3 Tables gives it:
//!   each part is copied to `<warehouse>/data/…` (same bytes, same name below the table
//!   folder) before the commit that references it, the metadata files go to
//!   `<warehouse>/metadata/`; the parts in the destination stay the run's output.
//!
//! Submodules: [`schema`] (Arrow → Iceberg types, field ids), [`metadata`] (the table
//! metadata JSON), [`avro`] and [`manifest`] (manifest and manifest list files),
//! [`catalog`] (the calls a commit makes of its catalog), [`sql`], [`glue_catalog`] and
//! [`s3tables`] (the catalogs), [`table_ref`] (where one table's files lie), [`table_commit`]
//! (one commit), [`current`] (the `<name>_current` table of a current state, committed by
//! `sluice materialize`).

pub mod avro;
pub mod catalog;
pub mod current;
pub mod glue_catalog;
pub mod maintenance;
pub mod manifest;
pub mod metadata;
pub mod s3tables;
pub mod schema;
pub mod sql;
pub mod stats;
pub mod table_commit;
pub mod table_ref;

use std::sync::Arc;

use crate::change::TableSchema;
use crate::config::{Config, IcebergCatalogConfig, IcebergConfig, TableFormat};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::faults::{FaultPoint, hit};
use crate::parts::ManifestPart;
use crate::position::Position;
use crate::spill::files::{self, SpillKind};
use catalog::Catalog;
use glue_catalog::GlueCatalog;
use manifest::DataFile;
use s3tables::{S3TablesCatalog, Warehouse};
use sql::SqlCatalog;
use table_commit::{Origin, Outcome};
use table_ref::TableRef;

/// How many parts a commit reads the footers of at once (copies into a warehouse go one
/// at a time).
const PARTS_AT_ONCE: usize = 8;

/// Checks `table_format` and the `iceberg` block: the block is there exactly with
/// `table_format: iceberg`, the catalog URI is a `sqlite:///` path, the names are usable,
/// and the destination keeps objects (not stdout).
pub fn check_config(config: &Config) -> Result<()> {
    let invalid = |msg: String, hint: &str| Err(Error::new(Code::ConfigInvalid, msg).hint(hint));
    let Some(iceberg) = &config.iceberg else {
        if config.table_format == TableFormat::Iceberg {
            return invalid(
                "table_format is iceberg but there is no iceberg block".into(),
                "add `iceberg: { catalog: { type: sql, uri: \"sqlite:///catalog.db\" }, namespace: cdc }`",
            );
        }
        return Ok(());
    };
    if config.table_format != TableFormat::Iceberg {
        return invalid(
            "an iceberg block is set but table_format is not iceberg".into(),
            "set `table_format: iceberg` to commit the parts to Iceberg tables, or remove the iceberg block",
        );
    }
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    match &iceberg.catalog {
        IcebergCatalogConfig::Sql { uri, name } => {
            if sql::sqlite_path(uri).is_none() {
                return invalid(
                    format!("iceberg.catalog.uri {uri:?} is not a SQLite URI"),
                    "write `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` (SQLAlchemy's form, as pyiceberg takes it)",
                );
            }
            if !plain(name) || !plain(&iceberg.namespace) {
                return invalid(
                    format!(
                        "iceberg.catalog.name {name:?} or iceberg.namespace {:?} is empty or has characters other than letters, digits, `_` and `-`",
                        iceberg.namespace
                    ),
                    "use plain names, e.g. `namespace: cdc` (a `.` would make a nested namespace)",
                );
            }
        }
        IcebergCatalogConfig::Glue { catalog_id, .. } => {
            check_glue(config, iceberg, catalog_id.as_deref())?
        }
        IcebergCatalogConfig::S3Tables {
            table_bucket_arn,
            endpoint_url,
        } => check_s3tables(iceberg, table_bucket_arn, endpoint_url.as_deref())?,
    }
    if iceberg.retention().is_none() {
        return invalid(
            format!(
                "iceberg.snapshot_retention {:?} is not a duration",
                iceberg.snapshot_retention.as_deref().unwrap_or_default()
            ),
            "write a duration such as `7d`, `36h` or `90m`",
        );
    }
    if !iceberg.table_prefix.is_empty() && !plain(&iceberg.table_prefix) {
        return invalid(
            format!(
                "iceberg.table_prefix {:?} has characters other than letters, digits, `_` and `-`",
                iceberg.table_prefix
            ),
            "use e.g. `table_prefix: raw_`",
        );
    }
    if matches!(
        config.destination,
        crate::config::DestinationConfig::Stdout {}
    ) {
        return invalid(
            "table_format is iceberg but the destination is stdout, which keeps no files".into(),
            "write to a local directory or S3 (`destination: { type: local, path: … }`)",
        );
    }
    Ok(())
}

/// The Glue catalog's own checks: Athena-usable names, an account id of 12 digits, an S3
/// destination (Glue readers read S3), and no name shared with the tables `catalog:`
/// registers the parts as (that registration would rewrite the Iceberg table).
fn check_glue(config: &Config, iceberg: &IcebergConfig, catalog_id: Option<&str>) -> Result<()> {
    let invalid = |msg: String, hint: &str| Err(Error::new(Code::ConfigInvalid, msg).hint(hint));
    let glue_name = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let namespace = &iceberg.namespace;
    if namespace.is_empty() || namespace.len() > 255 || !glue_name(namespace) {
        return invalid(
            format!("iceberg.namespace {namespace:?} is not a Glue database name Athena can use"),
            "use 1-255 lower-case letters, digits and `_`, e.g. `namespace: cdc_iceberg`",
        );
    }
    if !glue_name(&iceberg.table_prefix) {
        return invalid(
            format!(
                "iceberg.table_prefix {:?} has characters Glue table names Athena reads cannot hold",
                iceberg.table_prefix
            ),
            "use lower-case letters, digits and `_`, e.g. `table_prefix: log_`",
        );
    }
    if let Some(id) = catalog_id
        && (id.len() != 12 || !id.chars().all(|c| c.is_ascii_digit()))
    {
        return invalid(
            format!("iceberg.catalog.catalog_id {id:?} is not an AWS account id"),
            "write the 12 digits of the account whose Glue Data Catalog holds the tables, or leave catalog_id out for the caller's own",
        );
    }
    if !matches!(
        config.destination,
        crate::config::DestinationConfig::S3 { .. }
    ) {
        return invalid(
            "iceberg.catalog is glue but the destination is not S3: a Glue table must point at S3"
                .into(),
            "write to an S3 destination (`destination: { type: s3, bucket: … }`), or use `catalog: { type: sql, … }` locally",
        );
    }
    if let Some(crate::config::CatalogConfig::Glue {
        database,
        table_prefix,
        ..
    }) = &config.catalog
        && database == namespace
        && *table_prefix == iceberg.table_prefix
    {
        return invalid(
            format!(
                "catalog.database and iceberg.namespace are both {namespace:?} with the same table prefix: the parts' Glue tables and the Iceberg tables would share names"
            ),
            "give one of them another table prefix (e.g. `iceberg: { table_prefix: log_ }`) or another database",
        );
    }
    Ok(())
}

/// The S3 Tables catalog's own checks: a table bucket ARN, and namespace and table names
/// S3 Tables takes (lower-case letters, digits and `_`, starting and ending with a letter
/// or digit). Any destination that keeps files will do: the parts are copied into each
/// table's warehouse location.
fn check_s3tables(iceberg: &IcebergConfig, arn: &str, endpoint_url: Option<&str>) -> Result<()> {
    let invalid = |msg: String, hint: &str| Err(Error::new(Code::ConfigInvalid, msg).hint(hint));
    if s3tables::BucketArn::parse(arn).is_none() {
        return invalid(
            format!("iceberg.catalog.table_bucket_arn {arn:?} is not a table bucket ARN"),
            "write `arn:aws:s3tables:<region>:<account>:bucket/<name>` (`aws s3tables list-table-buckets` shows it)",
        );
    }
    if let Some(url) = endpoint_url {
        crate::config::check_endpoint("iceberg.catalog.endpoint_url", url)?;
    }
    let s3tables_name = |s: &str| {
        !s.is_empty()
            && s.len() <= 255
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !s.starts_with('_')
            && !s.ends_with('_')
    };
    let namespace = &iceberg.namespace;
    if !s3tables_name(namespace) || namespace.starts_with("aws") {
        return invalid(
            format!("iceberg.namespace {namespace:?} is not an S3 Tables namespace name"),
            "use 1-255 lower-case letters, digits and `_`, starting and ending with a letter or digit and not starting with `aws`, e.g. `namespace: cdc`",
        );
    }
    let prefix = &iceberg.table_prefix;
    if !prefix
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        || prefix.starts_with('_')
    {
        return invalid(
            format!(
                "iceberg.table_prefix {prefix:?} has characters S3 Tables table names cannot hold"
            ),
            "use lower-case letters, digits and `_`, starting with a letter or digit, e.g. `table_prefix: log_`",
        );
    }
    Ok(())
}

/// The checkpoint stored when a commit runs: its position and the source identity it was
/// written with (after a failover, the former primary's until the stream's first
/// checkpoint on the new one).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stored<'a> {
    pub position: Option<&'a Position>,
    pub identity: Option<&'a str>,
}

/// An existing Iceberg table as `sluice doctor` sees it.
#[derive(Debug, Clone)]
pub struct Inspected {
    /// `<namespace>.<name>`.
    pub name: String,
    pub snapshots: usize,
    pub fields: Vec<schema::Field>,
    pub last_column_id: i32,
}

/// The Iceberg side of a job: its catalog, and where its tables lie.
pub struct ChangeLog<'a> {
    config: &'a Config,
    destination: &'a dyn Destination,
    catalog: Catalog,
    root: String,
    /// The tables this change log has committed this stream's changes to: each holds no
    /// snapshot an earlier, crashed run committed past the stored checkpoint any more.
    committed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// With S3 Tables, each table's warehouse location and its store, as found (or made)
    /// by this change log's first commit to it: a table keeps its location, so later
    /// commits neither ask S3 Tables for it again nor open another S3 client.
    warehouses: std::sync::Mutex<std::collections::BTreeMap<String, Arc<Warehouse>>>,
}

impl<'a> ChangeLog<'a> {
    /// The change log of `config`'s job, `None` unless `table_format` is `iceberg`.
    pub fn of(config: &'a Config, destination: &'a dyn Destination) -> Result<Option<Self>> {
        let Some(iceberg) = config
            .iceberg
            .as_ref()
            .filter(|_| config.table_format == TableFormat::Iceberg)
        else {
            return Ok(None);
        };
        let catalog = match &iceberg.catalog {
            IcebergCatalogConfig::Sql { uri, name } => {
                let path = sql::sqlite_path(uri).ok_or_else(|| {
                    Error::new(
                        Code::ConfigInvalid,
                        format!("iceberg.catalog.uri {uri:?} is not a SQLite URI"),
                    )
                    .hint("write `sqlite:////absolute/path.db`")
                })?;
                Catalog::Sql(SqlCatalog::new(path, name))
            }
            IcebergCatalogConfig::Glue {
                catalog_id,
                region,
                endpoint_url,
            } => Catalog::Glue(GlueCatalog::new(
                endpoint_url.as_deref(),
                region.as_deref(),
                catalog_id.as_deref(),
            )),
            IcebergCatalogConfig::S3Tables {
                table_bucket_arn,
                endpoint_url,
            } => Catalog::S3Tables(S3TablesCatalog::new(
                table_bucket_arn,
                endpoint_url.as_deref(),
            )?),
        };
        let root = destination.root_uri().ok_or_else(|| {
            Error::new(
                Code::ConfigInvalid,
                format!(
                    "{} keeps no files for an Iceberg table",
                    destination.describe()
                ),
            )
            .hint("write to a local directory or S3")
        })?;
        Ok(Some(ChangeLog {
            config,
            destination,
            catalog,
            root,
            committed: Default::default(),
            warehouses: Default::default(),
        }))
    }

    fn table<'t>(&'t self, table: &'t str) -> TableRef<'t> {
        let iceberg = self.config.iceberg.as_ref();
        let prefix = iceberg.map_or("", |i| i.table_prefix.as_str());
        let namespace = iceberg.map_or("sluice", |i| i.namespace.as_str());
        let name = crate::registration::table::table_name(prefix, table);
        TableRef::in_destination(table, namespace, name, &self.root)
    }

    /// Where `table`'s Iceberg files lie. With S3 Tables the table's warehouse location,
    /// the table created first (without metadata) when `create` is set; `None` when it
    /// does not exist and `create` is not (`sluice doctor`). Otherwise the destination.
    async fn place<'t>(&'t self, table: &'t str, create: bool) -> Result<Option<Place<'t>>> {
        let at = self.table(table);
        let Catalog::S3Tables(catalog) = &self.catalog else {
            return Ok(Some(Place {
                at,
                warehouse: None,
            }));
        };
        let known = self.warehouses.lock().unwrap().get(table).cloned();
        let store = match known {
            Some(store) => store,
            None => {
                if create {
                    catalog.ensure_namespace(at.namespace).await?;
                }
                let Some(uri) = catalog.warehouse(at.namespace, &at.name, create).await? else {
                    return Ok(None);
                };
                let store = Arc::new(Warehouse::open(catalog, &at.qualified(), &uri).await?);
                self.warehouses
                    .lock()
                    .unwrap()
                    .insert(table.to_owned(), store.clone());
                store
            }
        };
        let at = at.in_warehouse(
            store.root_uri().unwrap_or_default(),
            store.location().to_owned(),
        );
        Ok(Some(Place {
            at,
            warehouse: Some(store),
        }))
    }

    /// The data files of `parts` in `place`: the parts where they lie in the destination,
    /// or — with a warehouse location — copies of them under `data/` there (the same
    /// bytes, the same path below the table folder), made now. A copy made again after a
    /// crash or a lost commit race replaces one with the same bytes. Each with the column
    /// metrics of its footer ([`stats`]); in `parts`' order.
    async fn data_files<'p>(
        &self,
        place: &Place<'_>,
        parts: &'p [ManifestPart],
    ) -> Result<Vec<DataFile>> {
        use futures_util::{StreamExt, TryStreamExt};
        let file = |part: &'p ManifestPart| async move {
            let path = match &place.warehouse {
                None => place.at.uri(&part.key),
                Some(store) => {
                    let below = part
                        .key
                        .strip_prefix(place.at.table)
                        .and_then(|k| k.strip_prefix('/'))
                        .unwrap_or(&part.key);
                    let key = format!("data/{below}");
                    self.copy_part(&part.key, store, &key).await?;
                    place.at.uri(&key)
                }
            };
            Ok::<_, Error>(DataFile {
                path,
                rows: part.rows,
                bytes: part.bytes,
                pos_range: None,
                bounds: Vec::new(),
                metrics: stats::of_part(self.destination, &part.key, part.bytes).await?,
                counts: Vec::new(),
            })
        };
        // Footers a few at a time (a baseline commits many parts), in the parts' order;
        // copies one at a time: each holds a whole part on local disk (Lambda's /tmp) and
        // a multipart upload's buffer in memory.
        let at_once = match place.warehouse {
            Some(_) => 1,
            None => PARTS_AT_ONCE,
        };
        futures_util::stream::iter(parts)
            .map(file)
            .buffered(at_once)
            .try_collect()
            .await
    }

    /// Copies the destination's part `from` to `to` in `store`, through a local file in
    /// `output.spill_dir` (a part is never held in memory whole).
    async fn copy_part(&self, from: &str, store: &Warehouse, to: &str) -> Result<()> {
        let dir = self.config.spill_dir();
        let (local, hold) = match files::create(&dir, SpillKind::Copy) {
            // The download writes the file by its path: only the hold stays open.
            Ok(created) => (created.path, created.hold),
            Err(failed) => {
                let what = format!(
                    "creating a file in {} to copy part {from} through",
                    dir.display()
                );
                return Err(crate::spill::errors::io_error(failed.source, what, &dir));
            }
        };
        let copied = async {
            if !self.destination.download(from, &local).await? {
                return Err(Error::new(
                    Code::IcebergMetadata,
                    format!("part {from} is listed in the run manifests but {} does not hold it", self.destination.describe()),
                )
                .hint("restore the part (it was moved or deleted after it was written), then run again; nothing was checkpointed"));
            }
            store.put_part(to, &local).await
        }
        .await;
        let _ = std::fs::remove_file(&local);
        drop(hold);
        copied
    }

    fn schemas(schemas: &[Arc<TableSchema>]) -> Result<Vec<arrow_schema::Schema>> {
        let mut arrow = Vec::new();
        let mut seen: Vec<&Arc<TableSchema>> = Vec::new();
        for s in schemas {
            if seen
                .iter()
                .any(|t| Arc::ptr_eq(t, s) || t.as_ref() == s.as_ref())
            {
                continue;
            }
            seen.push(s);
            arrow.push(crate::parts::change_schema(s)?.as_ref().clone());
        }
        Ok(arrow)
    }

    /// Commits current-state version `state` of `table` (its versions below the table
    /// folder's `folder`) as the current snapshot of the Iceberg table `<name>_current` in
    /// the change log's catalog and namespace ([`current`]): its name and how the commit
    /// ended. `None` with an S3 Tables catalog, which keeps no current-state table yet.
    pub async fn commit_state(
        &self,
        table: &str,
        folder: &str,
        state: &current::StateVersion<'_>,
    ) -> Result<Option<(String, Outcome)>> {
        if matches!(self.catalog, Catalog::S3Tables(_)) {
            return Ok(None);
        }
        let log = self.table(table);
        let dir = format!("{table}/{folder}");
        let name = format!("{}{}", log.name, current::NAME_SUFFIX);
        let at = TableRef::in_destination(&dir, log.namespace, name, &self.root);
        let outcome = current::commit(self.destination, &self.catalog, &at, state).await?;
        Ok(Some((at.qualified(), outcome)))
    }

    /// What `sluice doctor` reports of the catalog itself (read only): an error with the
    /// code a commit would fail with when it cannot be used; a note (empty for the SQL
    /// catalog) otherwise.
    pub async fn check_catalog(&self) -> Result<String> {
        let namespace = self
            .config
            .iceberg
            .as_ref()
            .map_or("sluice", |i| i.namespace.as_str());
        self.catalog.check(namespace).await
    }

    /// What `sluice doctor` reports for `table`: `Ok(None)` when the table does not exist
    /// yet (the first commit creates it), else its Iceberg name and snapshot count; an
    /// error (with the code a commit would fail with) when a commit could not append to
    /// it. Reads only.
    pub async fn inspect(&self, table: &str) -> Result<Option<Inspected>> {
        let at = self.table(table);
        self.catalog.check(at.namespace).await?;
        let Some(location) = self.catalog.peek(at.namespace, &at.name).await? else {
            return Ok(None);
        };
        let Some(place) = self.place(table, false).await? else {
            return Ok(None);
        };
        let at = &place.at;
        let metadata =
            table_commit::read_metadata(place.store(self.destination), at, &location).await?;
        Ok(Some(Inspected {
            name: at.qualified(),
            snapshots: metadata.snapshots.len(),
            fields: metadata.current_fields().to_vec(),
            last_column_id: metadata.last_column_id,
        }))
    }

    /// Whether parts of `table` with the source's current `schema` could be committed to
    /// its Iceberg table as `inspect` found it (none: a new table): the error a commit
    /// would fail with (`SLUICE_ICEBERG_TYPE`, `SLUICE_ICEBERG_SCHEMA`) otherwise.
    pub fn check_schema(
        &self,
        table: &str,
        schema: &TableSchema,
        existing: Option<&Inspected>,
    ) -> Result<()> {
        let arrow = crate::parts::change_schema(schema)?;
        let (fields, last) = existing.map_or((&[][..], 0), |e| (&e.fields[..], e.last_column_id));
        schema::evolve(table, fields, last, &arrow).map(|_| ())
    }

    /// Commits a drain's `parts` of `table` (written with `schemas`) as one snapshot that
    /// waits for the checkpoint at `checkpoint` (`stored` is the checkpoint stored now).
    pub async fn changes(
        &self,
        table: &str,
        parts: &[ManifestPart],
        schemas: &[Arc<TableSchema>],
        ids: (&str, &str),
        stored: Stored<'_>,
        checkpoint: &Position,
    ) -> Result<()> {
        if parts.is_empty() {
            return Ok(());
        }
        let place = self
            .place(table, true)
            .await?
            .ok_or_else(|| not_created(table))?;
        let arrow = Self::schemas(schemas)?;
        let mut files = self.data_files(&place, parts).await?;
        for (file, part) in files.iter_mut().zip(parts) {
            if !part.first_pos.is_empty() && part.first_pos <= part.last_pos {
                file.pos_range = Some((part.first_pos.clone(), part.last_pos.clone()));
            }
        }
        let outcome = self
            .commit_changes(&place, &arrow, &files, ids, stored, checkpoint)
            .await?;
        if let Outcome::Committed { snapshot_id } = outcome {
            tracing::info!(table = %table, iceberg = %self.table(table).qualified(), snapshot_id, parts = parts.len(), "committed to the Iceberg table");
        }
        hit(FaultPoint::IcebergCommitted).await
    }

    /// Drops from `table`'s Iceberg table the snapshots of this stream whose checkpoint was
    /// never written (past `stored`) — for a table the run writes no part of (one it
    /// re-baselines, whose changes a crashed run had committed) — before the checkpoint
    /// moves past them and they could no longer be told apart. Once per run: a table this
    /// change log committed to already is skipped, and commits nothing when there are none.
    pub async fn drop_uncheckpointed(
        &self,
        table: &str,
        ids: (&str, &str),
        stored: Stored<'_>,
        checkpoint: &Position,
    ) -> Result<()> {
        if self.committed_to(table) {
            return Ok(());
        }
        // A table S3 Tables does not hold yet has no snapshot to drop.
        let Some(place) = self.place(table, false).await? else {
            return Ok(());
        };
        let outcome = self
            .commit_changes(&place, &[], &[], ids, stored, checkpoint)
            .await?;
        if let Outcome::Committed { snapshot_id } = outcome {
            tracing::info!(table = %table, iceberg = %self.table(table).qualified(), snapshot_id, "dropped uncheckpointed snapshots from the Iceberg table");
        }
        Ok(())
    }

    /// True when this change log committed to `table`'s Iceberg table in this run.
    pub fn committed_to(&self, table: &str) -> bool {
        self.committed.lock().unwrap().contains(table)
    }

    /// One commit of this stream's `files` to `table`'s Iceberg table, dropping first the
    /// snapshots past `stored` that no checkpoint covers; the table is then recorded as
    /// committed to.
    async fn commit_changes(
        &self,
        place: &Place<'_>,
        arrow: &[arrow_schema::Schema],
        files: &[DataFile],
        ids: (&str, &str),
        stored: Stored<'_>,
        checkpoint: &Position,
    ) -> Result<Outcome> {
        let (run_id, source_identity) = ids;
        let origin = Origin::Changes {
            job: &self.config.job,
            run_id,
            source_identity,
            stored: stored.position,
            stored_identity: stored.identity,
            checkpoint,
        };
        let store = place.store(self.destination);
        let outcome =
            table_commit::append(store, &self.catalog, &place.at, arrow, files, &origin).await?;
        self.committed
            .lock()
            .unwrap()
            .insert(place.at.table.to_owned());
        Ok(outcome)
    }

    /// Commits a baseline plan's `parts` of `table` as one snapshot, once per plan (a
    /// second commit of the plan finds it and does nothing).
    pub async fn baseline(
        &self,
        table: &str,
        plan_id: &str,
        parts: &[ManifestPart],
        schemas: &[Arc<TableSchema>],
    ) -> Result<Outcome> {
        let place = self
            .place(table, true)
            .await?
            .ok_or_else(|| not_created(table))?;
        let arrow = Self::schemas(schemas)?;
        let origin = Origin::Baseline {
            job: &self.config.job,
            plan_id,
        };
        let store = place.store(self.destination);
        let existing = self
            .catalog
            .load(place.at.namespace, &place.at.name)
            .await?;
        // A plan already in the table is not copied again.
        if let Some(location) = &existing
            && table_commit::holds_plan(
                &table_commit::read_metadata(store, &place.at, location).await?,
                plan_id,
            )
        {
            tracing::info!(table = %table, plan = %plan_id, "baseline already in the Iceberg table");
            return Ok(Outcome::AlreadyThere);
        }
        let files = self.data_files(&place, parts).await?;
        let outcome =
            table_commit::append(store, &self.catalog, &place.at, &arrow, &files, &origin).await?;
        tracing::info!(table = %table, plan = %plan_id, ?outcome, "baseline committed to the Iceberg table");
        hit(FaultPoint::IcebergCommitted).await?;
        Ok(outcome)
    }

    /// Whether sluice maintains this job's Iceberg tables itself (`sluice compact`): with
    /// the SQL and Glue catalogs (the data files are the parts); S3 Tables maintains its
    /// own tables.
    pub fn maintained_by_sluice(&self) -> bool {
        !matches!(self.catalog, Catalog::S3Tables(_))
    }

    /// The destination keys of the data files of `table`'s current snapshot; empty when
    /// the table does not exist.
    pub async fn live_keys(&self, table: &str) -> Result<std::collections::BTreeSet<String>> {
        let at = self.table(table);
        let files = maintenance::live_files(self.destination, &self.catalog, &at).await?;
        Ok(files.iter().filter_map(|uri| at.key_of(uri).ok()).collect())
    }

    /// Commits compaction step `step_id` of `table`: the parts `replaced` are replaced by
    /// the compacted `parts` (holding the same rows) in one `replace` snapshot, once.
    pub async fn compaction_step(
        &self,
        table: &str,
        replaced: &[ManifestPart],
        parts: &[ManifestPart],
        step_id: &str,
    ) -> Result<maintenance::Replaced> {
        let place = Place {
            at: self.table(table),
            warehouse: None,
        };
        let mut files = self.data_files(&place, parts).await?;
        for (file, part) in files.iter_mut().zip(parts) {
            if !part.first_pos.is_empty() && part.first_pos <= part.last_pos {
                file.pos_range = Some((part.first_pos.clone(), part.last_pos.clone()));
            }
        }
        let removed: Vec<String> = replaced.iter().map(|p| place.at.uri(&p.key)).collect();
        let done = maintenance::replace(
            self.destination,
            &self.catalog,
            &place.at,
            &removed,
            &files,
            (&self.config.job, step_id),
        )
        .await?;
        tracing::info!(table = %table, step = %step_id, ?done, "compaction step committed to the Iceberg table");
        Ok(done)
    }

    /// Expires `table`'s snapshots older than `retention` ([`maintenance::expire`]); what
    /// is kept, with data files as destination keys. `None` for a table not created yet.
    pub async fn expire(
        &self,
        table: &str,
        retention: std::time::Duration,
    ) -> Result<Option<maintenance::Retained>> {
        let at = self.table(table);
        let now = chrono::Utc::now().timestamp_millis();
        let Some(mut kept) = maintenance::expire(
            self.destination,
            &self.catalog,
            &at,
            now,
            retention.as_millis() as i64,
        )
        .await?
        else {
            return Ok(None);
        };
        kept.live = kept
            .live
            .iter()
            .filter_map(|uri| at.key_of(uri).ok())
            .collect();
        Ok(Some(kept))
    }

    /// The metadata files of `table` written before `before_ms` that its current metadata
    /// no longer reaches ([`maintenance::orphan_metadata`]), as destination keys.
    pub async fn orphan_metadata(
        &self,
        table: &str,
        objects: &[(String, Option<i64>)],
        before_ms: i64,
    ) -> Result<Vec<String>> {
        let at = self.table(table);
        maintenance::orphan_metadata(self.destination, &self.catalog, &at, objects, before_ms).await
    }

    /// The snapshots of `table` (for the run ids a retained snapshot names).
    pub async fn snapshots(&self, table: &str) -> Result<Vec<metadata::Snapshot>> {
        let at = self.table(table);
        Ok(maintenance::current(self.destination, &self.catalog, &at)
            .await?
            .map(|(_, m)| m.snapshots)
            .unwrap_or_default())
    }
}

/// Where one table's Iceberg files lie: the destination (`warehouse` is `None`) or the
/// warehouse location S3 Tables gave the table.
struct Place<'t> {
    at: TableRef<'t>,
    warehouse: Option<Arc<Warehouse>>,
}

impl Place<'_> {
    /// The store the table's metadata files are read from and written to.
    fn store<'s>(&'s self, destination: &'s dyn Destination) -> &'s dyn Destination {
        match &self.warehouse {
            Some(store) => store.as_ref(),
            None => destination,
        }
    }
}

/// S3 Tables answered that a table it was asked to create does not exist.
fn not_created(table: &str) -> Error {
    Error::new(
        Code::IcebergCatalog,
        format!("the Iceberg table of {table} was not created"),
    )
    .hint("run again; if it persists, check that the catalog is S3 Tables (iceberg.catalog.endpoint_url)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(destination: &str, extra: &str) -> Result<Config> {
        let text = format!(
            "job: j\nsource: {{ url_env: U, tables: [t], postgres: {{ slot: s, publication: p }} }}\n\
             destination: {destination}\nstate: {{ type: local, path: st }}\ntable_format: iceberg\n{extra}\n"
        );
        let config = Config::parse(&text, "test")?;
        check_config(&config)?;
        Ok(config)
    }

    const S3: &str = "{ type: s3, bucket: b, region: us-east-1 }";

    #[test]
    fn the_s3tables_catalog_is_checked_by_its_room() {
        let arn = "arn:aws:s3tables:eu-west-1:123456789012:bucket/lake";
        let yaml = |catalog: &str, rest: &str| format!("iceberg: {{ catalog: {catalog}, {rest} }}");
        let ok = yaml(
            &format!("{{ type: s3tables, table_bucket_arn: '{arn}' }}"),
            "namespace: cdc",
        );
        // Any destination that keeps files: the parts are copied into the warehouse.
        assert!(parsed(S3, &ok).is_ok());
        assert!(parsed("{ type: local, path: out }", &ok).is_ok());
        for (extra, says) in [
            (
                yaml(
                    "{ type: s3tables, table_bucket_arn: lake }",
                    "namespace: cdc",
                ),
                "table_bucket_arn",
            ),
            (
                yaml(
                    &format!("{{ type: s3tables, table_bucket_arn: '{arn}' }}"),
                    "namespace: Cdc-Log",
                ),
                "iceberg.namespace",
            ),
            (
                yaml(
                    &format!("{{ type: s3tables, table_bucket_arn: '{arn}' }}"),
                    "namespace: aws_cdc",
                ),
                "iceberg.namespace",
            ),
            (
                yaml(
                    &format!("{{ type: s3tables, table_bucket_arn: '{arn}' }}"),
                    "namespace: cdc, table_prefix: Raw-",
                ),
                "iceberg.table_prefix",
            ),
            (
                yaml(
                    &format!(
                        "{{ type: s3tables, table_bucket_arn: '{arn}', endpoint_url: 'ftp://x' }}"
                    ),
                    "namespace: cdc",
                ),
                "endpoint_url",
            ),
        ] {
            let e = parsed(S3, &extra).unwrap_err();
            assert_eq!(e.code(), Code::ConfigInvalid, "{extra}");
            assert!(e.to_string().contains(says), "{extra}: {e}");
        }
    }

    #[test]
    fn the_glue_catalog_is_checked_by_its_room() {
        let glue = "iceberg: { catalog: { type: glue, catalog_id: '123456789012', region: eu-west-1 }, namespace: cdc_log }";
        assert!(parsed(S3, glue).is_ok());
        for (destination, extra, says) in [
            (
                "{ type: local, path: out }",
                "iceberg: { catalog: { type: glue }, namespace: cdc }",
                "not S3",
            ),
            (
                S3,
                "iceberg: { catalog: { type: glue }, namespace: Cdc-Log }",
                "iceberg.namespace",
            ),
            (
                S3,
                "iceberg: { catalog: { type: glue }, namespace: cdc, table_prefix: Raw- }",
                "iceberg.table_prefix",
            ),
            (
                S3,
                "iceberg: { catalog: { type: glue, catalog_id: acme }, namespace: cdc }",
                "catalog_id",
            ),
            (
                S3,
                "iceberg: { catalog: { type: glue }, namespace: lake }\ncatalog: { type: glue, database: lake }",
                "share names",
            ),
        ] {
            let e = parsed(destination, extra).unwrap_err();
            assert_eq!(e.code(), Code::ConfigInvalid, "{extra}");
            assert!(e.to_string().contains(says), "{extra}: {e}");
        }
        // The parts' tables and the Iceberg tables in one database, told apart by prefix.
        assert!(
            parsed(
                S3,
                "iceberg: { catalog: { type: glue }, namespace: lake, table_prefix: log_ }\ncatalog: { type: glue, database: lake }"
            )
            .is_ok()
        );
    }
}
