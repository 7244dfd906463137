//! The catalog table sluice wants for one captured table: name, location, columns,
//! partition keys and table parameters — pure data, computed from the config and the
//! table's part schema, compared with what the catalog holds.
//!
//! Guarantees: the table is an external Parquet table (`EXTERNAL_TABLE`, Parquet SerDe,
//! `classification=parquet`) on the table folder `s3://<bucket>/<prefix>/<table>/`; its
//! columns are the part schema's ([`super::columns`]); with a dated `output.layout` it is
//! partitioned by `dt` (and `hr`), both `string`, with Athena partition projection
//! (`projection.enabled`, `dt` a `date` projection `yyyy-MM-dd` from the earliest date
//! sluice registered up to `NOW`, `hr` an `enum` of `00`…`23`,
//! `storage.location.template` the partition folders), so Athena needs no `MSCK REPAIR`.
//! Two tables have the same [`TableSpec::shape`] exactly when they differ at most in the
//! projection range's start, which only moves earlier.

use std::collections::BTreeMap;

use crate::config::{CatalogConfig, Config, DestinationConfig, Layout};

/// Hive's Parquet input format.
pub const INPUT_FORMAT: &str = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat";
/// Hive's Parquet output format.
pub const OUTPUT_FORMAT: &str = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat";
/// Hive's Parquet SerDe.
pub const SERDE: &str = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe";
/// The table parameter holding the first date of the `dt` projection.
pub const DT_RANGE: &str = "projection.dt.range";

/// A catalog table as sluice registers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub database: String,
    pub name: String,
    /// `s3://<bucket>/<prefix>/<table>/`.
    pub location: String,
    /// `(name, hive type)`, in the part's order.
    pub columns: Vec<(String, String)>,
    /// Partition key names (all `string`), outermost first.
    pub partition_keys: Vec<String>,
    pub parameters: BTreeMap<String, String>,
}

/// The catalog table name of `table` (as `source.tables` names it): `table_prefix` and the
/// table, lower case, every character other than a letter, digit or `_` as `_`
/// (`public.orders` → `public_orders`, the name `sluice sql --dialect athena` assumes).
pub fn table_name(prefix: &str, table: &str) -> String {
    format!("{prefix}{table}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The table folder's URI: `s3://<bucket>/<prefix>/<table>/`; `None` for a local or
/// stdout destination (no catalog can point at it).
pub fn location(config: &Config, table: &str) -> Option<String> {
    match &config.destination {
        DestinationConfig::S3 { bucket, prefix, .. } => {
            let prefix = prefix.trim_matches('/');
            Some(if prefix.is_empty() {
                format!("s3://{bucket}/{table}/")
            } else {
                format!("s3://{bucket}/{prefix}/{table}/")
            })
        }
        DestinationConfig::Local { .. } | DestinationConfig::Stdout {} => None,
    }
}

impl TableSpec {
    /// The table for `table` with `columns`; `first_date` (`YYYY-MM-DD`) starts the `dt`
    /// projection of a dated layout. `None` without a Glue catalog or an S3 destination.
    pub fn of(
        config: &Config,
        table: &str,
        columns: Vec<(String, String)>,
        first_date: &str,
    ) -> Option<TableSpec> {
        let Some(CatalogConfig::Glue {
            database,
            table_prefix,
            ..
        }) = &config.catalog
        else {
            return None;
        };
        let location = location(config, table)?;
        let layout = config.output.layout;
        let mut parameters = BTreeMap::from([
            ("EXTERNAL".to_owned(), "TRUE".to_owned()),
            ("classification".to_owned(), "parquet".to_owned()),
            ("sluice.table".to_owned(), table.to_owned()),
        ]);
        if layout != Layout::Flat {
            let template = match layout {
                Layout::DatedHourly => format!("{location}dt=${{dt}}/hr=${{hr}}/"),
                _ => format!("{location}dt=${{dt}}/"),
            };
            parameters.extend(
                [
                    ("projection.enabled", "true".to_owned()),
                    ("projection.dt.type", "date".to_owned()),
                    ("projection.dt.format", "yyyy-MM-dd".to_owned()),
                    (DT_RANGE, format!("{first_date},NOW")),
                    ("projection.dt.interval", "1".to_owned()),
                    ("projection.dt.interval.unit", "DAYS".to_owned()),
                    ("storage.location.template", template),
                ]
                .map(|(k, v)| (k.to_owned(), v)),
            );
            if layout == Layout::DatedHourly {
                let hours: Vec<String> = (0..24).map(|h| format!("{h:02}")).collect();
                parameters.insert("projection.hr.type".into(), "enum".into());
                parameters.insert("projection.hr.values".into(), hours.join(","));
            }
        }
        Some(TableSpec {
            database: database.clone(),
            name: table_name(table_prefix, table),
            location,
            columns,
            partition_keys: layout
                .partition_keys()
                .iter()
                .map(|k| (*k).to_owned())
                .collect(),
            parameters,
        })
    }

    /// For a partitioned (dated) table, the table of its baseline: `<name>_snapshot` on
    /// `<table>/snapshot/`, the same columns, no partitions and no projection — partition
    /// projection reads only the `dt=` folders, so the snapshot parts need a table of
    /// their own. `None` for an unpartitioned table, which holds its snapshot already.
    pub fn snapshot(&self) -> Option<TableSpec> {
        if self.partition_keys.is_empty() {
            return None;
        }
        let mut parameters = self.parameters.clone();
        parameters.retain(|k, _| !k.starts_with("projection.") && k != "storage.location.template");
        parameters.insert("sluice.content".to_owned(), "snapshot".to_owned());
        Some(TableSpec {
            database: self.database.clone(),
            name: format!("{}_snapshot", self.name),
            location: format!("{}snapshot/", self.location),
            columns: self.columns.clone(),
            partition_keys: Vec::new(),
            parameters,
        })
    }

    /// Everything but the projection range's start: equal shapes need no update.
    pub fn shape(&self) -> TableSpec {
        let mut shape = self.clone();
        shape.parameters.remove(DT_RANGE);
        shape
    }

    /// The first date of the `dt` projection, when there is one.
    pub fn first_date(&self) -> Option<&str> {
        self.parameters
            .get(DT_RANGE)
            .and_then(|range| range.split(',').next())
    }

    /// This table with the projection starting at the earlier of its own start and
    /// `other`'s (`YYYY-MM-DD` sorts as text).
    pub fn keep_earlier_start(mut self, other: Option<&str>) -> TableSpec {
        if let (Some(mine), Some(other)) = (self.first_date(), other)
            && other < mine
            && other.len() == 10
        {
            let range = format!("{other},NOW");
            self.parameters.insert(DT_RANGE.to_owned(), range);
        }
        self
    }

    /// A stable text of the shape, for the marker that lets idle runs skip the catalog.
    pub fn fingerprint(&self) -> String {
        let shape = self.shape();
        serde_json::json!({
            "database": shape.database,
            "name": shape.name,
            "location": shape.location,
            "columns": shape.columns,
            "partition_keys": shape.partition_keys,
            "parameters": shape.parameters,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(layout: &str, destination: &str) -> Config {
        let text = format!(
            "job: j\nsource: {{ url_env: U, tables: [public.orders], postgres: {{ slot: s, publication: p }} }}\n\
             destination: {destination}\nstate: {{ type: local, path: st }}\n\
             output: {{ layout: {layout} }}\ncatalog: {{ type: glue, database: lake, table_prefix: raw_ }}\n"
        );
        Config::parse(&text, "test").unwrap()
    }

    const S3: &str = "{ type: s3, bucket: b, prefix: /cdc/x/ }";

    #[test]
    fn a_flat_table_is_unpartitioned_on_the_table_folder() {
        let spec = TableSpec::of(
            &config("flat", S3),
            "public.orders",
            vec![("id".into(), "bigint".into())],
            "2026-12-03",
        )
        .unwrap();
        assert_eq!(spec.database, "lake");
        assert_eq!(spec.name, "raw_public_orders");
        assert_eq!(spec.location, "s3://b/cdc/x/public.orders/");
        assert!(spec.partition_keys.is_empty());
        assert!(!spec.parameters.contains_key("projection.enabled"));
        assert_eq!(spec.parameters["classification"], "parquet");
    }

    #[test]
    fn a_dated_table_projects_its_partitions() {
        let spec = TableSpec::of(
            &config("dated-hourly", S3),
            "public.orders",
            vec![],
            "2026-12-03",
        )
        .unwrap();
        assert_eq!(spec.partition_keys, ["dt", "hr"]);
        let p = &spec.parameters;
        assert_eq!(p["projection.enabled"], "true");
        assert_eq!(p["projection.dt.type"], "date");
        assert_eq!(p["projection.dt.format"], "yyyy-MM-dd");
        assert_eq!(p["projection.dt.range"], "2026-12-03,NOW");
        assert_eq!(p["projection.hr.type"], "enum");
        assert!(p["projection.hr.values"].starts_with("00,01,"));
        assert!(p["projection.hr.values"].ends_with(",23"));
        assert_eq!(
            p["storage.location.template"],
            "s3://b/cdc/x/public.orders/dt=${dt}/hr=${hr}/"
        );
        let daily =
            TableSpec::of(&config("dated", S3), "public.orders", vec![], "2026-12-03").unwrap();
        assert_eq!(daily.partition_keys, ["dt"]);
        assert_eq!(
            daily.parameters["storage.location.template"],
            "s3://b/cdc/x/public.orders/dt=${dt}/"
        );
        assert!(!daily.parameters.contains_key("projection.hr.type"));
    }

    #[test]
    fn a_dated_table_has_a_snapshot_table_and_a_flat_one_holds_its_own() {
        let dated = TableSpec::of(
            &config("dated", S3),
            "public.orders",
            vec![("id".into(), "bigint".into())],
            "2026-12-03",
        )
        .unwrap();
        let snapshot = dated.snapshot().unwrap();
        assert_eq!(snapshot.name, "raw_public_orders_snapshot");
        assert_eq!(snapshot.location, "s3://b/cdc/x/public.orders/snapshot/");
        assert_eq!(snapshot.columns, dated.columns);
        assert!(snapshot.partition_keys.is_empty());
        assert!(
            snapshot
                .parameters
                .keys()
                .all(|k| !k.starts_with("projection.") && k != "storage.location.template"),
            "{:?}",
            snapshot.parameters
        );
        assert_eq!(snapshot.parameters["classification"], "parquet");
        let flat = TableSpec::of(&config("flat", S3), "public.orders", vec![], "2026-12-03");
        assert_eq!(flat.unwrap().snapshot(), None);
    }

    #[test]
    fn the_projection_start_only_moves_earlier_and_is_not_part_of_the_shape() {
        let c = config("dated", S3);
        let spec = TableSpec::of(&c, "public.orders", vec![], "2026-12-03").unwrap();
        let earlier = spec.clone().keep_earlier_start(Some("2026-01-15"));
        assert_eq!(earlier.first_date(), Some("2026-01-15"));
        assert_eq!(earlier.shape(), spec.shape());
        assert_eq!(earlier.fingerprint(), spec.fingerprint());
        let later = spec.clone().keep_earlier_start(Some("2027-01-01"));
        assert_eq!(later.first_date(), Some("2026-12-03"));
        let wider =
            TableSpec::of(&c, "public.orders", vec![("a".into(), "int".into())], "x").unwrap();
        assert_ne!(wider.fingerprint(), spec.fingerprint());
    }

    #[test]
    fn no_catalog_table_for_a_local_destination() {
        let c = config("flat", "{ type: local, path: out }");
        assert_eq!(
            TableSpec::of(&c, "public.orders", vec![], "2026-12-03"),
            None
        );
        assert_eq!(table_name("", "Sales-2026.Orders"), "sales_2026_orders");
    }
}
