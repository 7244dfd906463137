//! SQL Server checks of `sluice doctor`.
//!
//! The live part only reads facts — [`catalog::read_facts`], the drain's
//! [`catalog::max_lsn`], the SQL Server Agent service status, the stored checkpoint — and
//! hands them to pure functions that apply the drain's own rules one row each:
//! [`prerequisites::check_database`] (CDC on the database), [`prerequisites::check_instance`]
//! (the capture instance exists, captures the configured table, the gating role, the
//! change data readable), [`prerequisites::check_columns`] + [`catalog::shape`] (the
//! instance covers the table's columns with supported types),
//! [`prerequisites::check_identity`], [`prerequisites::checkpoint_lsn`] and
//! [`prerequisites::decide_start`] (the checkpoint ≥ `fn_cdc_get_min_lsn`), and
//! [`keys::baseline_key`] (the key a baseline chunks by). The Agent row is advice: the
//! drain does not refuse a stopped Agent, but no change reaches the change table while
//! it is stopped.

use super::{Check, Report};
use crate::config::{Config, Initial};
use crate::error::Result;
use crate::position::{Position, SqlServerLsn as Lsn};
use crate::redact::redact_url;
use crate::source::sqlserver::catalog::{self, CatalogFacts};
use crate::source::sqlserver::keys;
use crate::source::sqlserver::prerequisites::{self, SourceIdentity, StartDecision};
use crate::source::sqlserver::values::CaptureColumn;
use crate::source::sqlserver::{self as source, connect};

/// The stored checkpoint: source identity text and position.
pub type Stored = (String, Position);

pub async fn checks(config: &Config, report: &mut Report) {
    let ms = match source::settings(config) {
        Ok(ms) => ms,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    let url = match config.source_url() {
        Ok(u) => u,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    let mut client = match connect::connect(&url, &config.source.tls, &config.source.timeouts).await
    {
        Ok(c) => c,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    report.push(Check::ok("source connect", redact_url(&url)));
    let config_name = &config.source.tables[0];
    let facts = match catalog::read_facts(&mut client, &ms.capture_instance).await {
        Ok(f) => f,
        Err(e) => return report.push(Check::from_error("cdc database", &e)),
    };
    let (rows, identity, min_lsn) = catalog_checks(config_name, &ms.capture_instance, &facts);
    for row in rows {
        report.push(row);
    }
    let max_lsn = catalog::max_lsn(&mut client).await;
    let agent = agent_status(&mut client).await;
    report.push(capture_job_check(&max_lsn, agent.as_deref()));
    let Some(identity) = identity else {
        return;
    };
    report.push(baseline_key_check(
        config_name,
        &facts.columns,
        &config.baseline.keys,
        config.initial,
    ));
    let (policies, key) = super::policy::key_check(config);
    if let Some(key) = key {
        report.push(key);
    }
    if let Ok(shape) = catalog::shape(config_name, &facts.columns)
        && let Some(check) = super::policy::table_check(config, &policies, &shape)
    {
        report.push(check);
    }
    let stored = match crate::state::open(config).await {
        Ok(store) => store.load_checkpoint(&config.job).await,
        Err(e) => Err(e),
    }
    .and_then(|cp| {
        cp.map(|cp| Ok((cp.source_identity, Position::parse_tagged(&cp.position)?)))
            .transpose()
    });
    report.push(match stored {
        Ok(stored) => checkpoint_check(stored.as_ref(), &identity, min_lsn, max_lsn.ok()),
        Err(e) => Check::from_error(CHECKPOINT, &e),
    });
}

const CHECKPOINT: &str = "checkpoint vs capture instance";

/// `sys.dm_server_services`' status of SQL Server Agent; `None` when the user may not
/// read it (VIEW SERVER STATE) or the service is not listed (Azure SQL, RDS).
async fn agent_status(client: &mut connect::SqlClient) -> Option<String> {
    let row = catalog::one_row(
        client,
        "SELECT status_desc FROM sys.dm_server_services WHERE servicename LIKE N'SQL Server Agent%'",
        &[],
        "reading sys.dm_server_services",
    )
    .await
    .ok()??;
    catalog::cell::<&str>(&row, 0).ok()?.map(str::to_owned)
}

/// The catalog rows, each by the drain's rule, in the drain's order (a failed row ends
/// the list: the later rules cannot be judged). Returns the rows, the source identity
/// and the instance's `min_lsn` when the catalog passed. Pure.
pub fn catalog_checks(
    config_name: &str,
    capture_instance: &str,
    facts: &CatalogFacts,
) -> (Vec<Check>, Option<SourceIdentity>, Lsn) {
    let (schema, table) = catalog::split_name(config_name);
    let mut rows = Vec::new();
    let database = format!("cdc database {}", facts.status.database);
    let identity =
        match prerequisites::check_database(&facts.status, &schema, &table, capture_instance) {
            Ok(identity) => {
                rows.push(Check::ok(
                    database,
                    format!(
                        "CDC enabled (family_guid {}, recovery_fork_guid {})",
                        identity.family_guid, identity.recovery_fork_guid
                    ),
                ));
                identity
            }
            Err(e) => {
                rows.push(Check::from_error(database, &e));
                return (rows, None, Lsn::ZERO);
            }
        };
    let name = format!("capture instance {capture_instance}");
    let instance = match prerequisites::check_instance(
        facts.instance.as_ref(),
        &schema,
        &table,
        capture_instance,
    ) {
        Ok(instance) => {
            rows.push(Check::ok(
                name,
                format!(
                    "captures {schema}.{table} into cdc.{}, readable from {}",
                    instance.change_table, instance.min_lsn
                ),
            ));
            instance
        }
        Err(e) => {
            rows.push(Check::from_error(name, &e));
            return (rows, None, Lsn::ZERO);
        }
    };
    let name = format!("capture instance {capture_instance} columns");
    let covered = prerequisites::check_columns(
        &schema,
        &table,
        capture_instance,
        &facts.source_columns,
        &facts.columns,
    )
    .and_then(|_| catalog::shape(config_name, &facts.columns));
    match covered {
        Ok(shape) => rows.push(Check::ok(
            name,
            format!(
                "covers all {} column(s) of {schema}.{table} with supported types",
                shape.columns.len()
            ),
        )),
        Err(e) => {
            rows.push(Check::from_error(name, &e));
            return (rows, None, Lsn::ZERO);
        }
    }
    (rows, Some(identity), instance.min_lsn)
}

/// The key a baseline chunks by, by the baseline's own rule ([`keys::baseline_key`]): a
/// table it would refuse fails with `initial: snapshot` and warns otherwise (a later
/// re-baseline would need it). Pure.
pub fn baseline_key_check(
    config_name: &str,
    columns: &[CaptureColumn],
    declared: &std::collections::BTreeMap<String, Vec<String>>,
    initial: Initial,
) -> Check {
    let judged = catalog::shape(config_name, columns)
        .and_then(|shape| keys::baseline_key(config_name, columns, &shape.columns, declared))
        .map(|keys| keys.into_iter().map(|k| k.name).collect());
    super::baseline_key_row(config_name, judged, initial)
}

/// The capture job: `fn_cdc_get_max_lsn` must have a value (the drain's
/// [`catalog::max_lsn`] refuses otherwise), and SQL Server Agent, which runs the job,
/// must be running when its status is visible. Pure.
pub fn capture_job_check(max_lsn: &Result<Lsn>, agent: Option<&str>) -> Check {
    let name = "capture job";
    let max = match max_lsn {
        Ok(max) => *max,
        Err(e) => return Check::from_error(name, e),
    };
    match agent {
        Some(status) if !status.eq_ignore_ascii_case("Running") => Check::fail(
            name,
            format!(
                "SQL Server Agent is {status}: the capture job does not run, so fn_cdc_get_max_lsn stays at {max} and new changes never reach the change table"
            ),
            "start SQL Server Agent (and the capture job: EXEC sys.sp_cdc_start_job @job_type = N'capture')",
        ),
        Some(_) => Check::ok(
            name,
            format!("SQL Server Agent running; fn_cdc_get_max_lsn {max}"),
        ),
        None => Check::ok(
            name,
            format!(
                "fn_cdc_get_max_lsn {max}; SQL Server Agent's status is not visible to this user (VIEW SERVER STATE), and it runs by default on RDS"
            ),
        ),
    }
}

/// The stored checkpoint against the database and the instance's valid range, by the
/// drain's rules. Pure.
pub fn checkpoint_check(
    stored: Option<&Stored>,
    identity: &SourceIdentity,
    min_lsn: Lsn,
    max_lsn: Option<Lsn>,
) -> Check {
    let checkpoint = match stored {
        None => None,
        Some((stored_identity, position)) => {
            let lsn = prerequisites::check_identity(stored_identity, identity)
                .and_then(|_| prerequisites::checkpoint_lsn(position));
            match lsn {
                Ok(lsn) => Some(lsn),
                Err(e) => return Check::from_error(CHECKPOINT, &e),
            }
        }
    };
    let max = max_lsn.unwrap_or(Lsn::ZERO);
    match prerequisites::decide_start(&identity.capture_instance, checkpoint, min_lsn, max) {
        Ok(StartDecision::Anchor(at)) => Check::ok(
            CHECKPOINT,
            format!("no checkpoint: the first run anchors at {at}"),
        ),
        Ok(StartDecision::Resume { checkpoint, from }) => Check::ok(
            CHECKPOINT,
            format!(
                "the checkpoint {checkpoint} is at or after the instance's oldest change {min_lsn}: the next run reads from {from}"
            ),
        ),
        Err(e) => Check::from_error(CHECKPOINT, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;
    use crate::error::{Code, Error};
    use crate::source::sqlserver::prerequisites::{DatabaseStatus, InstanceInfo};
    use crate::source::sqlserver::values::CaptureColumn;

    fn lsn(n: u16) -> Lsn {
        Lsn {
            vlf: 0x2A,
            block: 0x10,
            record: n,
        }
    }

    fn column(name: &str, type_name: &str) -> CaptureColumn {
        CaptureColumn {
            name: name.into(),
            type_name: type_name.into(),
            max_length: 4,
            precision: 10,
            scale: 0,
            computed: false,
            key_ordinal: (name == "id").then_some(1),
            collation: None,
            nullable: name != "id",
        }
    }

    fn good() -> CatalogFacts {
        CatalogFacts {
            status: DatabaseStatus {
                database: "app".into(),
                cdc_enabled: true,
                family_guid: Some("f".into()),
                recovery_fork_guid: Some("r".into()),
            },
            utc_offset_minutes: 0,
            instance: Some(InstanceInfo {
                change_table_id: 1,
                change_table: "dbo_orders_CT".into(),
                source_schema: "dbo".into(),
                source_table: "orders".into(),
                source_object_id: 2,
                role_name: None,
                is_role_member: true,
                min_lsn: lsn(5),
            }),
            columns: vec![column("id", "int"), column("v", "bigint")],
            source_columns: vec!["id".into(), "v".into()],
        }
    }

    fn statuses(rows: &[Check]) -> Vec<(&str, Status)> {
        rows.iter().map(|c| (c.name.as_str(), c.status)).collect()
    }

    #[test]
    fn a_good_catalog_passes_every_row() {
        let (rows, identity, min) = catalog_checks("dbo.orders", "dbo_orders", &good());
        assert_eq!(
            statuses(&rows),
            [
                ("cdc database app", Status::Ok),
                ("capture instance dbo_orders", Status::Ok),
                ("capture instance dbo_orders columns", Status::Ok),
            ]
        );
        assert_eq!(identity.unwrap().capture_instance, "dbo_orders");
        assert_eq!(min, lsn(5));
        // The drain's own composition agrees.
        assert!(catalog::decide("dbo.orders", "dbo_orders", good()).is_ok());
    }

    #[test]
    fn the_baseline_key_row_applies_the_baselines_rule() {
        let no_keys = std::collections::BTreeMap::new();
        let ok = baseline_key_check("dbo.orders", &good().columns, &no_keys, Initial::Snapshot);
        assert_eq!(ok.status, Status::Ok);
        assert_eq!(ok.detail, "keyset chunks by (id)");
        let mut nullable = good().columns;
        nullable[0].nullable = true;
        let mut keyless = good().columns;
        keyless[0].key_ordinal = None;
        for (columns, needle) in [(nullable, "nullable"), (keyless, "no primary key")] {
            let fail = baseline_key_check("dbo.orders", &columns, &no_keys, Initial::Snapshot);
            assert_eq!(fail.status, Status::Fail);
            assert_eq!(fail.code.as_deref(), Some("SLUICE_SOURCE_PREREQUISITE"));
            assert!(fail.detail.contains(needle), "{}", fail.detail);
            let warn = baseline_key_check("dbo.orders", &columns, &no_keys, Initial::None);
            assert_eq!(warn.status, Status::Warn);
        }
        // A table without a key baselines by the columns `baseline.keys` declares.
        let mut keyless = good().columns;
        keyless[0].key_ordinal = None;
        let declared = [("dbo.orders".to_owned(), vec![keyless[0].name.clone()])].into();
        let ok = baseline_key_check("dbo.orders", &keyless, &declared, Initial::Snapshot);
        assert_eq!(ok.status, Status::Ok, "{}", ok.detail);
        assert_eq!(ok.detail, format!("keyset chunks by ({})", keyless[0].name));
        keyless[0].nullable = true;
        let fail = baseline_key_check("dbo.orders", &keyless, &declared, Initial::Snapshot);
        assert_eq!(fail.status, Status::Fail);
        assert!(fail.detail.contains("nullable"), "{}", fail.detail);
        // A declared key beside the table's own is a config error.
        let both = baseline_key_check("dbo.orders", &good().columns, &declared, Initial::Snapshot);
        assert_eq!(both.code.as_deref(), Some("SLUICE_CONFIG_INVALID"));
    }

    #[test]
    fn each_catalog_refusal_is_its_row_with_the_drains_code() {
        let mut off = good();
        off.status.cdc_enabled = false;
        off.instance = None;
        let mut missing = good();
        missing.instance = None;
        let mut other_table = good();
        other_table.instance.as_mut().unwrap().source_table = "items".into();
        let mut added_column = good();
        added_column.source_columns.push("w".into());
        let mut unsupported = good();
        unsupported.columns[1] = column("v", "decimal");
        unsupported.columns[1].precision = 0;
        let cases = [
            (off, "cdc database app", "sp_cdc_enable_db"),
            (
                missing,
                "capture instance dbo_orders",
                "sp_cdc_enable_table",
            ),
            (
                other_table,
                "capture instance dbo_orders",
                "capture_instance",
            ),
            (
                added_column,
                "capture instance dbo_orders columns",
                "sp_cdc_disable_table",
            ),
            (unsupported, "capture instance dbo_orders columns", "type"),
        ];
        for (facts, row, fix) in cases {
            let (rows, identity, _) = catalog_checks("dbo.orders", "dbo_orders", &facts);
            let last = rows.last().unwrap();
            assert_eq!((last.name.as_str(), last.status), (row, Status::Fail));
            assert!(identity.is_none());
            assert!(
                last.fix.as_deref().unwrap_or_default().contains(fix),
                "{row}: {last:?} lacks {fix}"
            );
            let drain = catalog::decide("dbo.orders", "dbo_orders", facts).unwrap_err();
            assert_eq!(last.code.as_deref(), Some(drain.code().as_str()), "{row}");
            assert!(
                rows[..rows.len() - 1]
                    .iter()
                    .all(|c| c.status == Status::Ok)
            );
        }
    }

    #[test]
    fn the_capture_job_must_run() {
        let ok = capture_job_check(&Ok(lsn(9)), Some("Running"));
        assert_eq!(ok.status, Status::Ok);
        let stopped = capture_job_check(&Ok(lsn(9)), Some("Stopped"));
        assert_eq!(stopped.status, Status::Fail);
        assert!(stopped.fix.unwrap().contains("sp_cdc_start_job"));
        assert_eq!(capture_job_check(&Ok(lsn(9)), None).status, Status::Ok);
        let never = Err(Error::new(Code::SourcePrerequisite, "no LSN"));
        assert_eq!(
            capture_job_check(&never, Some("Running")).code.as_deref(),
            Some("SLUICE_SOURCE_PREREQUISITE")
        );
    }

    #[test]
    fn the_checkpoint_must_be_at_or_after_the_oldest_change() {
        let (_, identity, _) = catalog_checks("dbo.orders", "dbo_orders", &good());
        let identity = identity.unwrap();
        let at = |n| (identity.to_string(), Position::SqlServer(lsn(n)));
        let first = checkpoint_check(None, &identity, lsn(5), Some(lsn(9)));
        assert_eq!(first.status, Status::Ok);
        assert!(first.detail.contains("anchors"), "{}", first.detail);
        assert_eq!(
            checkpoint_check(Some(&at(4)), &identity, lsn(5), Some(lsn(9))).status,
            Status::Ok
        );
        let gap = checkpoint_check(Some(&at(3)), &identity, lsn(5), Some(lsn(9)));
        assert_eq!(gap.code.as_deref(), Some("SLUICE_SOURCE_LOG_GAP"));
        let restored = (
            identity.to_string().replace("fork=r", "fork=r2"),
            Position::SqlServer(lsn(7)),
        );
        let foreign = checkpoint_check(Some(&restored), &identity, lsn(5), Some(lsn(9)));
        assert_eq!(
            foreign.code.as_deref(),
            Some("SLUICE_SOURCE_FOREIGN_CHECKPOINT")
        );
        let pg = (
            identity.to_string(),
            Position::Postgres(crate::position::PgLsn(1)),
        );
        assert_eq!(
            checkpoint_check(Some(&pg), &identity, lsn(5), Some(lsn(9)))
                .code
                .as_deref(),
            Some("SLUICE_SOURCE_FOREIGN_CHECKPOINT")
        );
    }
}
