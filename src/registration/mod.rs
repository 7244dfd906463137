//! Catalog registration (`catalog: { type: glue, … }`): at the end of a run, each
//! captured table's parts are registered as a Glue table — columns typed from the part
//! schema ([`columns`]), partition projection for a dated layout ([`table`]) — so Athena
//! reads them without a hand-written `CREATE EXTERNAL TABLE` or `MSCK REPAIR`.
//!
//! Guarantees:
//!
//! * registration runs after the run's parts, checkpoint and manifests are committed and
//!   never undoes or fails them: a catalog failure is logged as a warning with its code
//!   (`SLUICE_CATALOG_…`) and shown in the run summary's `catalog` (`failed: <code>`),
//!   and the next run tries again;
//! * an idle run does not call Glue: after a successful registration the table folder
//!   holds `_catalog.json` with the fingerprint of what was registered (readers skip `_`
//!   names); a run calls Glue for a table only when its shape (columns, partitions,
//!   location, database, name) differs from that fingerprint. Glue is then read first
//!   and written only when it holds something else ([`glue::Glue::apply`]);
//! * a dated (partitioned) table gets a second table, `<name>_snapshot`, on its
//!   `snapshot/` folder ([`table::TableSpec::snapshot`]): partition projection reads only
//!   the `dt=` folders;
//! * a table is registered once its schema is known (from the source at open, or from
//!   its changes), before or after its first part;
//! * registration ends by the run's `until` (the drain's abort instant, just before its
//!   deadline): a Glue call still under way then counts as failed
//!   (`SLUICE_CATALOG_UNAVAILABLE`), so a slow catalog never holds a Lambda run past its
//!   deadline with its run record unwritten and its lease held.

pub mod columns;
pub mod glue;
pub mod table;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crate::change::TableSchema;
use crate::config::{CatalogConfig, Config, DestinationConfig};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use table::TableSpec;

/// The name of the marker in a table folder recording what was registered.
pub const MARKER_FILE: &str = "_catalog.json";

/// Checks the `catalog` block: Glue names and an S3 destination for the tables to point
/// at.
pub fn check_config(config: &Config) -> Result<()> {
    let Some(CatalogConfig::Glue {
        database,
        table_prefix,
        ..
    }) = &config.catalog
    else {
        return Ok(());
    };
    let glue_name = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    if database.is_empty() || database.len() > 255 || !glue_name(database) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("catalog.database {database:?} is not a Glue database name Athena can use"),
        )
        .hint("use 1-255 lower-case letters, digits and `_`, e.g. `database: cdc_lake`"));
    }
    if !glue_name(table_prefix) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("catalog.table_prefix {table_prefix:?} has characters Athena table names cannot hold"),
        )
        .hint("use lower-case letters, digits and `_`, e.g. `table_prefix: raw_`"));
    }
    if !matches!(config.destination, DestinationConfig::S3 { .. }) {
        return Err(Error::new(
            Code::ConfigInvalid,
            "catalog is set but the destination is not S3 (a local directory or stdout): a Glue table must point at S3",
        )
        .hint("write to an S3 destination (`destination: { type: s3, bucket: … }`) or remove the catalog block"));
    }
    Ok(())
}

/// One table to register: its name in `source.tables`, its latest schema, and the
/// earliest partition date this run wrote for it (starts a new table's projection).
pub struct Captured {
    pub table: String,
    pub schema: Arc<TableSchema>,
    pub first_date: Option<String>,
}

/// Registers `tables` in the configured catalog by `until`; answers per table what
/// happened for the tables Glue was called for (`created`, `updated`, `unchanged`,
/// `failed: <code>`). Never fails: see the module's guarantees.
pub async fn register(
    config: &Config,
    destination: &dyn Destination,
    tables: Vec<Captured>,
    until: Option<Instant>,
) -> BTreeMap<String, String> {
    let mut outcome = BTreeMap::new();
    let Some(CatalogConfig::Glue {
        endpoint_url,
        region,
        ..
    }) = &config.catalog
    else {
        return outcome;
    };
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let mut glue = None;
    for captured in tables {
        let Some(spec) = wanted(config, &captured, &today) else {
            continue;
        };
        let marker_key = format!("{}/{MARKER_FILE}", captured.table);
        let specs: Vec<TableSpec> = std::iter::once(spec.clone())
            .chain(spec.snapshot())
            .collect();
        let fingerprint = specs
            .iter()
            .map(TableSpec::fingerprint)
            .collect::<Vec<_>>()
            .join("\n");
        match destination.get(&marker_key).await {
            Ok(Some(body)) if marker_fingerprint(&body).as_deref() == Some(&fingerprint) => {
                continue;
            }
            _ => {}
        }
        if glue.is_none() {
            let open = glue::Glue::open(endpoint_url.as_deref(), region.as_deref());
            match by(until, open).await {
                Ok(client) => glue = Some(client),
                Err(e) => {
                    warn(&captured.table, &e);
                    outcome.insert(captured.table, format!("failed: {}", e.code()));
                    continue;
                }
            }
        }
        let Some(client) = glue.as_ref() else {
            continue;
        };
        match by(until, apply_all(client, &specs)).await {
            Ok(applied) => {
                let marker = serde_json::json!({
                    "catalog": "glue",
                    "database": spec.database,
                    "table": spec.name,
                    "fingerprint": fingerprint,
                    "registered_at": chrono::Utc::now().to_rfc3339(),
                });
                if let Err(e) = destination
                    .put_marker(&marker_key, marker.to_string().as_bytes())
                    .await
                {
                    tracing::warn!(table = %captured.table, error = %e,
                        "the catalog table is registered but its marker was not written; the next run checks Glue again");
                }
                outcome.insert(captured.table, applied.as_str().to_owned());
            }
            Err(e) => {
                warn(&captured.table, &e);
                outcome.insert(captured.table, format!("failed: {}", e.code()));
            }
        }
    }
    outcome
}

/// The catalog table `captured` should have, `None` when its schema has no part form.
fn wanted(config: &Config, captured: &Captured, today: &str) -> Option<TableSpec> {
    let schema = match crate::parts::change_schema(&captured.schema) {
        Ok(schema) => schema,
        Err(e) => {
            warn(&captured.table, &e);
            return None;
        }
    };
    let first = captured.first_date.as_deref().unwrap_or(today);
    TableSpec::of(
        config,
        &captured.table,
        columns::hive_columns(&schema),
        first.min(today),
    )
}

/// Applies every spec of one captured table; the strongest change wins the summary
/// (`created` over `updated` over `unchanged`).
async fn apply_all(client: &glue::Glue, specs: &[TableSpec]) -> Result<glue::Applied> {
    let mut strongest = glue::Applied::Unchanged;
    for spec in specs {
        let applied = client.apply(spec).await?;
        tracing::info!(glue_table = %format!("{}.{}", spec.database, spec.name),
            "catalog table {}", applied.as_str());
        strongest = match (strongest, applied) {
            (glue::Applied::Created, _) | (_, glue::Applied::Created) => glue::Applied::Created,
            (glue::Applied::Updated, _) | (_, glue::Applied::Updated) => glue::Applied::Updated,
            _ => glue::Applied::Unchanged,
        };
    }
    Ok(strongest)
}

/// `call`'s result, or `SLUICE_CATALOG_UNAVAILABLE` when `until` comes first.
async fn by<T>(until: Option<Instant>, call: impl Future<Output = Result<T>>) -> Result<T> {
    let Some(until) = until else {
        return call.await;
    };
    tokio::time::timeout_at(until.into(), call)
        .await
        .unwrap_or_else(|_| {
            Err(Error::new(
                Code::CatalogUnavailable,
                "Glue did not answer before the run's deadline",
            )
            .hint("the parts and the checkpoint are committed; the next run registers the table again (check catalog.endpoint_url / the network path to Glue if it persists)"))
        })
}

fn marker_fingerprint(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value["fingerprint"].as_str().map(str::to_owned)
}

fn warn(table: &str, e: &Error) {
    tracing::warn!(code = e.code().as_str(), table = %table, error = %e,
        hint = e.hint_text().unwrap_or_default(),
        "the table was not registered in the catalog; its parts and the checkpoint are committed, the next run tries again");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(destination: &str, catalog: &str) -> Result<Config> {
        let text = format!(
            "job: j\nsource: {{ url_env: U, tables: [t], postgres: {{ slot: s, publication: p }} }}\n\
             destination: {destination}\nstate: {{ type: local, path: st }}\ncatalog: {catalog}\n"
        );
        let config = Config::parse(&text, "test")?;
        check_config(&config)?;
        Ok(config)
    }

    const S3: &str = "{ type: s3, bucket: b, region: us-east-1 }";

    #[test]
    fn the_catalog_block_is_checked_by_its_room() {
        assert!(parsed(S3, "{ type: glue, database: cdc_lake, table_prefix: raw_ }").is_ok());
        for (destination, catalog, says) in [
            (
                "{ type: local, path: out }",
                "{ type: glue, database: lake }",
                "local directory",
            ),
            (S3, "{ type: glue, database: Lake-1 }", "catalog.database"),
            (S3, "{ type: glue, database: '' }", "catalog.database"),
            (
                S3,
                "{ type: glue, database: lake, table_prefix: Raw. }",
                "catalog.table_prefix",
            ),
            (S3, "{ type: hive, database: lake }", "unknown variant"),
        ] {
            let e = parsed(destination, catalog).unwrap_err();
            assert_eq!(e.code(), Code::ConfigInvalid, "{catalog}");
            assert!(e.to_string().contains(says), "{catalog}: {e}");
        }
    }
}
