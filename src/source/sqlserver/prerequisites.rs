//! The SQL Server source's refusal decisions, as pure functions over what the catalog
//! said at open.
//!
//! Guarantees: a stream opens only when CDC is enabled for the database, the capture
//! instance exists, belongs to the configured table, carries every column the table has
//! (and no column it lost), and the caller passes its gating role; a checkpoint is used
//! only against the database (`family_guid`) and restore line (`recovery_fork_guid`) it
//! was written for, and only while the change table still holds every change after it.
//! Each refusal names the object and the statement or step that fixes it.

use std::fmt;

use super::queries::{enable_statements, quote, reenable_statements};
use super::values::CaptureColumn;
use crate::error::{Code, Error, Result};
use crate::position::SqlServerLsn as Lsn;

/// The re-baseline steps shared by every refusal that ends the stream.
const REBASELINE: &str = "the stream cannot continue without losing changes: re-baseline the table — \
     clear the job's state with `sluice state clear --config FILE` and run a new baseline; raise the capture \
     instance's retention (`EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = <minutes>`) \
     so it outlasts the longest gap between runs";

/// Who the stream reads from: stored with the checkpoint, compared at every open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceIdentity {
    /// `sys.database_recovery_status.family_guid`: the database and all its backups.
    pub family_guid: String,
    /// `recovery_fork_guid`: changes when the database is restored (a new log line).
    pub recovery_fork_guid: String,
    pub database: String,
    pub capture_instance: String,
}

impl fmt::Display for SourceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mssql:family={}/fork={}/db={}/instance={}",
            self.family_guid, self.recovery_fork_guid, self.database, self.capture_instance
        )
    }
}

impl SourceIdentity {
    /// Parses the text `Display` writes; `None` for any other text.
    pub fn parse(text: &str) -> Option<SourceIdentity> {
        let rest = text.strip_prefix("mssql:family=")?;
        let (family, rest) = rest.split_once("/fork=")?;
        let (fork, rest) = rest.split_once("/db=")?;
        // The database name may contain '/', the instance name may not (sysname rules
        // allow it, but `instance=` is always the last field).
        let (database, instance) = rest.rsplit_once("/instance=")?;
        Some(SourceIdentity {
            family_guid: family.to_owned(),
            recovery_fork_guid: fork.to_owned(),
            database: database.to_owned(),
            capture_instance: instance.to_owned(),
        })
    }
}

/// Refuses a checkpoint written for another database, another restore line, or another
/// capture instance.
pub fn check_identity(stored: &str, current: &SourceIdentity) -> Result<()> {
    let foreign = |what: String, hint: &str| {
        Err(Error::new(Code::SourceForeignCheckpoint, what).hint(hint.to_owned()))
    };
    let Some(stored_id) = SourceIdentity::parse(stored) else {
        return foreign(
            format!(
                "the checkpoint was written for source {stored:?}, which is not a SQL Server database"
            ),
            "the job's state belongs to another engine's stream; point the job at its own state, or clear it with `sluice state clear --config FILE` and re-baseline",
        );
    };
    if stored_id.family_guid != current.family_guid {
        return foreign(
            format!(
                "the checkpoint was written for database {} (family_guid {}), but this is database {} (family_guid {})",
                stored_id.database, stored_id.family_guid, current.database, current.family_guid
            ),
            "the URL points at another database; point source.url at the original, or clear the job's state with `sluice state clear --config FILE` and re-baseline",
        );
    }
    if stored_id.recovery_fork_guid != current.recovery_fork_guid {
        return foreign(
            format!(
                "database {} was restored since the checkpoint (recovery_fork_guid {} → {}); its LSNs no longer continue the checkpoint's",
                current.database, stored_id.recovery_fork_guid, current.recovery_fork_guid
            ),
            "changes after the restore point may differ from what was written; clear the job's state with `sluice state clear --config FILE` and re-baseline the table",
        );
    }
    if stored_id.capture_instance != current.capture_instance {
        return foreign(
            format!(
                "the checkpoint was written for capture instance {}, but source.sqlserver.capture_instance is {}",
                stored_id.capture_instance, current.capture_instance
            ),
            "LSN checkpoints of one capture instance do not cover another's rows; restore the setting, or clear the job's state with `sluice state clear --config FILE` and re-baseline",
        );
    }
    Ok(())
}

/// The checkpoint's LSN; a position of another engine is a foreign checkpoint.
pub fn checkpoint_lsn(position: &crate::position::Position) -> Result<Lsn> {
    match position {
        crate::position::Position::SqlServer(lsn) => Ok(*lsn),
        other => Err(Error::new(
            Code::SourceForeignCheckpoint,
            format!("the checkpoint {other} is not a SQL Server position"),
        )
        .hint("the job's state belongs to another engine's stream; clear the job's state with `sluice state clear --config FILE` and re-baseline")),
    }
}

/// Database-level state read at open.
#[derive(Debug, Clone)]
pub struct DatabaseStatus {
    pub database: String,
    pub cdc_enabled: bool,
    pub family_guid: Option<String>,
    pub recovery_fork_guid: Option<String>,
}

/// Refuses a database without CDC, or whose recovery identity the caller cannot see.
pub fn check_database(
    status: &DatabaseStatus,
    schema: &str,
    table: &str,
    capture_instance: &str,
) -> Result<SourceIdentity> {
    if !status.cdc_enabled {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "change data capture is not enabled for database {}",
                status.database
            ),
        )
        .hint(enable_statements(schema, table, capture_instance)));
    }
    match (&status.family_guid, &status.recovery_fork_guid) {
        (Some(family), Some(fork)) => Ok(SourceIdentity {
            family_guid: family.clone(),
            recovery_fork_guid: fork.clone(),
            database: status.database.clone(),
            capture_instance: capture_instance.to_owned(),
        }),
        _ => Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "sys.database_recovery_status shows no row for database {} to this user",
                status.database
            ),
        )
        .hint("grant VIEW ANY DATABASE (granted to public by default) or make the source user the database owner: sluice records family_guid and recovery_fork_guid to detect restores")),
    }
}

/// The capture instance as `cdc.change_tables` describes it.
#[derive(Debug, Clone)]
pub struct InstanceInfo {
    pub change_table_id: i32,
    pub change_table: String,
    pub source_schema: String,
    pub source_table: String,
    pub source_object_id: i32,
    pub role_name: Option<String>,
    pub is_role_member: bool,
    /// `sys.fn_cdc_get_min_lsn(instance)`: zero when the caller may not read it.
    pub min_lsn: Lsn,
}

/// Refuses a missing instance, one for another table, a gating role the caller lacks, or
/// an instance whose change data the caller cannot read.
pub fn check_instance<'a>(
    info: Option<&'a InstanceInfo>,
    schema: &str,
    table: &str,
    capture_instance: &str,
) -> Result<&'a InstanceInfo> {
    let Some(info) = info else {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!("capture instance {capture_instance} does not exist (cdc.change_tables has no such row)"),
        )
        .hint(enable_statements(schema, table, capture_instance)));
    };
    if info.source_table.is_empty() {
        return Err(not_visible(schema, table, capture_instance));
    }
    if !info.source_schema.eq_ignore_ascii_case(schema)
        || !info.source_table.eq_ignore_ascii_case(table)
    {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "capture instance {capture_instance} captures {}.{}, not the configured table {schema}.{table}",
                info.source_schema, info.source_table
            ),
        )
        .hint("set source.sqlserver.capture_instance to the table's own instance (`EXEC sys.sp_cdc_help_change_data_capture` lists them)"));
    }
    if !info.is_role_member {
        let role = info.role_name.as_deref().unwrap_or_default();
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!("the source user is not a member of gating role {role} of capture instance {capture_instance}"),
        )
        .hint(format!("ALTER ROLE {} ADD MEMBER <source user>;", quote(role))));
    }
    if info.min_lsn.is_zero() {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!("sys.fn_cdc_get_min_lsn('{capture_instance}') returned 0: the source user cannot read the instance's change data"),
        )
        .hint(format!(
            "GRANT SELECT ON SCHEMA::cdc TO <source user>; GRANT SELECT ON {} TO <source user>; (every captured column must be readable)",
            super::queries::qualified(schema, table)
        )));
    }
    Ok(info)
}

/// Refuses a capture instance that does not carry every column of the table (a column
/// added after the instance was created), or carries one the table no longer has.
pub fn check_columns(
    schema: &str,
    table: &str,
    capture_instance: &str,
    source_columns: &[String],
    captured: &[CaptureColumn],
) -> Result<()> {
    if source_columns.is_empty() {
        return Err(not_visible(schema, table, capture_instance));
    }
    let missing: Vec<&str> = source_columns
        .iter()
        .filter(|name| !captured.iter().any(|c| &c.name == *name))
        .map(String::as_str)
        .collect();
    let dropped: Vec<&str> = captured
        .iter()
        .filter(|c| !source_columns.contains(&c.name))
        .map(|c| c.name.as_str())
        .collect();
    if missing.is_empty() && dropped.is_empty() {
        return Ok(());
    }
    let mut what = Vec::new();
    if !missing.is_empty() {
        what.push(format!(
            "does not capture column(s) {} of {schema}.{table}",
            missing.join(", ")
        ));
    }
    if !dropped.is_empty() {
        what.push(format!(
            "captures column(s) {} that {schema}.{table} no longer has (captured as NULL)",
            dropped.join(", ")
        ));
    }
    Err(Error::new(
        Code::SourcePrerequisite,
        format!("capture instance {capture_instance} {}", what.join(" and ")),
    )
    .hint(reenable_statements(schema, table, capture_instance)))
}

/// The source user cannot see the captured table's metadata (no permission on it).
fn not_visible(schema: &str, table: &str, capture_instance: &str) -> Error {
    let qualified = super::queries::qualified(schema, table);
    Error::new(
        Code::SourcePrerequisite,
        format!("the source user cannot see table {qualified}, the source of capture instance {capture_instance}"),
    )
    .hint(format!(
        "GRANT SELECT ON {qualified} TO <source user>; (reading a capture instance requires SELECT on every captured column)"
    ))
}

/// Where the stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartDecision {
    /// First run: anchor here; changes committed after it are captured.
    Anchor(Lsn),
    /// Resume after `checkpoint`: read from `from` (its successor).
    Resume { checkpoint: Lsn, from: Lsn },
}

/// Decides the start from the stored checkpoint and the instance's valid range: its
/// low-water mark `min_lsn` and the database's newest captured commit `max_lsn`.
///
/// * First run: anchor at `max_lsn`, or just below `min_lsn` when the instance is newer
///   than anything the capture job has processed (nothing of the table can precede its
///   instance, and a later run must not mistake the instance's start for a gap).
/// * Resume: refuse when the checkpoint's successor is below `min_lsn` — the cleanup job
///   deleted changes the stream has not read, or the instance was re-created.
///
/// A checkpoint beyond `max_lsn` is not refused: the identity check has already proved
/// the same database on the same restore line, where LSNs only grow, so it means the
/// capture job has not yet reached the anchor; the run reads nothing and waits.
pub fn decide_start(
    capture_instance: &str,
    checkpoint: Option<Lsn>,
    min_lsn: Lsn,
    max_lsn: Lsn,
) -> Result<StartDecision> {
    let Some(checkpoint) = checkpoint else {
        let below_min = min_lsn.decrement().unwrap_or(Lsn::ZERO);
        return Ok(StartDecision::Anchor(max_lsn.max(below_min)));
    };
    let from = checkpoint.increment().unwrap_or(Lsn::MAX);
    if from < min_lsn {
        return Err(Error::new(
            Code::SourceLogGap,
            format!(
                "capture instance {capture_instance} no longer holds the changes after the checkpoint {checkpoint}: \
                 its oldest change is at {min_lsn} (the cleanup job removed the rest, or the instance was re-created)"
            ),
        )
        .hint(REBASELINE));
    }
    Ok(StartDecision::Resume { checkpoint, from })
}

/// The refusal for a window whose start the cleanup job passed while the run read.
pub fn window_gap(capture_instance: &str, from: Lsn, min_lsn: Lsn) -> Error {
    Error::new(
        Code::SourceLogGap,
        format!(
            "capture instance {capture_instance} removed changes the run had not read yet: \
             the next window starts at {from}, its oldest change is now {min_lsn}"
        ),
    )
    .hint(REBASELINE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsn(n: u16) -> Lsn {
        Lsn {
            vlf: 0x2A,
            block: 0x10,
            record: n,
        }
    }

    fn identity() -> SourceIdentity {
        SourceIdentity {
            family_guid: "f1".into(),
            recovery_fork_guid: "r1".into(),
            database: "app/x".into(),
            capture_instance: "dbo_orders".into(),
        }
    }

    fn column(name: &str) -> CaptureColumn {
        CaptureColumn {
            name: name.into(),
            type_name: "int".into(),
            max_length: 4,
            precision: 10,
            scale: 0,
            computed: false,
            key_ordinal: None,
            collation: None,
            nullable: true,
        }
    }

    #[test]
    fn identity_round_trips() {
        let id = identity();
        assert_eq!(SourceIdentity::parse(&id.to_string()), Some(id));
        assert_eq!(SourceIdentity::parse("pg:system=1/db=x"), None);
    }

    #[test]
    fn foreign_checkpoints_are_refused() {
        let current = identity();
        assert!(check_identity(&current.to_string(), &current).is_ok());
        let variants = [
            (
                SourceIdentity {
                    family_guid: "f2".into(),
                    ..identity()
                },
                "another database",
            ),
            (
                SourceIdentity {
                    recovery_fork_guid: "r2".into(),
                    ..identity()
                },
                "restored",
            ),
            (
                SourceIdentity {
                    capture_instance: "other".into(),
                    ..identity()
                },
                "capture instance",
            ),
        ];
        for (stored, needle) in variants {
            let err = check_identity(&stored.to_string(), &current).unwrap_err();
            assert_eq!(err.code(), Code::SourceForeignCheckpoint);
            assert!(
                err.to_string().contains(needle) || err.hint_text().unwrap().contains(needle),
                "{err}"
            );
        }
        let err = check_identity("pg:system=1/db=app/oid=5/slot=s", &current).unwrap_err();
        assert_eq!(err.code(), Code::SourceForeignCheckpoint);
    }

    #[test]
    fn cdc_must_be_enabled_and_identity_visible() {
        let mut status = DatabaseStatus {
            database: "app".into(),
            cdc_enabled: false,
            family_guid: Some("f".into()),
            recovery_fork_guid: Some("r".into()),
        };
        let err = check_database(&status, "dbo", "orders", "dbo_orders").unwrap_err();
        assert_eq!(err.code(), Code::SourcePrerequisite);
        assert!(err.hint_text().unwrap().contains("sys.sp_cdc_enable_db"));
        assert!(
            err.hint_text()
                .unwrap()
                .contains("@source_name = N'orders'")
        );
        status.cdc_enabled = true;
        let id = check_database(&status, "dbo", "orders", "dbo_orders").unwrap();
        assert_eq!(
            id.to_string(),
            "mssql:family=f/fork=r/db=app/instance=dbo_orders"
        );
        status.family_guid = None;
        assert_eq!(
            check_database(&status, "dbo", "orders", "dbo_orders")
                .unwrap_err()
                .code(),
            Code::SourcePrerequisite
        );
    }

    #[test]
    fn instance_checks() {
        let ok = InstanceInfo {
            change_table_id: 1,
            change_table: "dbo_orders_CT".into(),
            source_schema: "dbo".into(),
            source_table: "orders".into(),
            source_object_id: 2,
            role_name: Some("cdc_reader".into()),
            is_role_member: true,
            min_lsn: lsn(1),
        };
        assert!(check_instance(Some(&ok), "dbo", "ORDERS", "dbo_orders").is_ok());
        let missing = check_instance(None, "dbo", "orders", "dbo_orders").unwrap_err();
        assert_eq!(missing.code(), Code::SourcePrerequisite);
        assert!(missing.hint_text().unwrap().contains("sp_cdc_enable_table"));
        let other = InstanceInfo {
            source_table: "items".into(),
            ..ok.clone()
        };
        assert!(
            check_instance(Some(&other), "dbo", "orders", "dbo_orders")
                .unwrap_err()
                .to_string()
                .contains("dbo.items")
        );
        let no_role = InstanceInfo {
            is_role_member: false,
            ..ok.clone()
        };
        let err = check_instance(Some(&no_role), "dbo", "orders", "dbo_orders").unwrap_err();
        assert!(
            err.hint_text()
                .unwrap()
                .contains("ALTER ROLE [cdc_reader] ADD MEMBER")
        );
        let hidden = InstanceInfo {
            source_schema: String::new(),
            source_table: String::new(),
            ..ok.clone()
        };
        let err = check_instance(Some(&hidden), "dbo", "orders", "dbo_orders").unwrap_err();
        assert!(
            err.hint_text()
                .unwrap()
                .contains("GRANT SELECT ON [dbo].[orders]"),
            "{err:?}"
        );
        let blind = InstanceInfo {
            min_lsn: Lsn::ZERO,
            ..ok
        };
        let err = check_instance(Some(&blind), "dbo", "orders", "dbo_orders").unwrap_err();
        assert!(err.hint_text().unwrap().contains("SELECT ON SCHEMA::cdc"));
    }

    #[test]
    fn columns_must_match_the_capture_instance() {
        let source = vec!["id".to_string(), "v".to_string()];
        assert!(check_columns("dbo", "t", "dbo_t", &source, &[column("id"), column("v")]).is_ok());
        let added = check_columns("dbo", "t", "dbo_t", &source, &[column("id")]).unwrap_err();
        assert_eq!(added.code(), Code::SourcePrerequisite);
        assert!(added.to_string().contains("does not capture column(s) v"));
        assert!(
            added
                .hint_text()
                .unwrap()
                .contains("sys.sp_cdc_disable_table")
        );
        assert!(
            added
                .hint_text()
                .unwrap()
                .contains("sys.sp_cdc_enable_table")
        );
        let dropped = check_columns(
            "dbo",
            "t",
            "dbo_t",
            &source[..1],
            &[column("id"), column("v")],
        )
        .unwrap_err();
        assert!(dropped.to_string().contains("no longer has"));
        // No visible column at all is a missing grant, not a dropped-column refusal.
        let hidden = check_columns("dbo", "t", "dbo_t", &[], &[column("id")]).unwrap_err();
        assert!(hidden.to_string().contains("cannot see table"), "{hidden}");
    }

    #[test]
    fn start_decisions() {
        assert_eq!(
            decide_start("i", None, lsn(1), lsn(9)).unwrap(),
            StartDecision::Anchor(lsn(9))
        );
        assert_eq!(
            decide_start("i", Some(lsn(4)), lsn(1), lsn(9)).unwrap(),
            StartDecision::Resume {
                checkpoint: lsn(4),
                from: lsn(5)
            }
        );
        // Caught up: nothing to read, but not a gap.
        assert_eq!(
            decide_start("i", Some(lsn(9)), lsn(1), lsn(9)).unwrap(),
            StartDecision::Resume {
                checkpoint: lsn(9),
                from: lsn(10)
            }
        );
        // The successor of the checkpoint is exactly the low-water mark: nothing lost.
        assert!(decide_start("i", Some(lsn(4)), lsn(5), lsn(9)).is_ok());
        let gap = decide_start("i", Some(lsn(4)), lsn(6), lsn(9)).unwrap_err();
        assert_eq!(gap.code(), Code::SourceLogGap);
        assert!(gap.hint_text().unwrap().contains("re-baseline"));
        // A checkpoint the capture job has not reached yet: nothing to read, no refusal.
        assert_eq!(
            decide_start("i", Some(lsn(10)), lsn(1), lsn(9)).unwrap(),
            StartDecision::Resume {
                checkpoint: lsn(10),
                from: lsn(11)
            }
        );
        // An instance newer than the capture job's progress: anchor just below it, so
        // the next run's successor is exactly its low-water mark.
        assert_eq!(
            decide_start("i", None, lsn(7), lsn(3)).unwrap(),
            StartDecision::Anchor(lsn(6))
        );
        assert!(decide_start("i", Some(lsn(6)), lsn(7), lsn(9)).is_ok());
        assert_eq!(window_gap("i", lsn(5), lsn(7)).code(), Code::SourceLogGap);
    }
}
