//! MySQL / MariaDB source: the binlog read as a replica (`mysql_async` binlog dump).
//!
//! Prerequisites (each refused at open with `SLUICE_SOURCE_PREREQUISITE` and its fix, see
//! [`prerequisites`]): MySQL ≥ 8.0.1 or MariaDB ≥ 10.5 with `log_bin=ON`,
//! `binlog_format=ROW`, `binlog_row_image=FULL`, `binlog_row_metadata=FULL`, no binlog
//! compression; a source user with REPLICATION SLAVE and REPLICATION CLIENT (MariaDB:
//! BINLOG MONITOR) on `*.*` and SELECT on the captured tables; a direct connection (a
//! proxy cannot carry the binlog dump). The dump registers as a replica with
//! `source.mysql.server_id`, which must be unique among the server's replicas — a second
//! connection with the same id makes the server drop the first.
//!
//! Identity: the checkpoint's `source_identity` is the server's `server_uuid` (MySQL) or
//! `server_id` + `gtid_domain_id` (MariaDB); its position records the commit event it ends
//! at and its file's creation time ([`crate::position::BinlogPosition`]), verified when
//! the stream resumes.
//!
//! Failover: a checkpoint of another server that carries a GTID position (MariaDB) or a
//! GTID set (MySQL) is followed on this server when its binlog holds everything up to it
//! ([`failover::check_follow`], [`mysql_gtid::check_follow`]): the dump starts at the
//! GTID position (`@slave_connect_state`) or after the set (`COM_BINLOG_DUMP_GTID`), the
//! positions move to the next generation, and the next checkpoint records this server's
//! identity.
//! A replica is read like a primary; it must write what it replicates to its own binlog
//! (`log_slave_updates`).
//!
//! This module only wires the parts: [`connect`] (`source.tls`, errors), [`probe`]
//! (`verify-ca`), [`prerequisites`]
//! (pure checks), [`schema`] (`information_schema`), [`binlog`] (coordinates, start
//! decision, dump), [`events`], [`values`], [`cell`], [`charset`] and [`forms`] (pure decoders), [`spill`] (the transaction
//! buffer), [`stream`] (the change stream), [`baseline_read`] (baseline chunk reads).

pub mod baseline_read;
pub mod binlog;
pub mod cell;
pub mod charset;
pub mod connect;
pub mod events;
pub mod failover;
pub mod forms;
pub mod mysql_gtid;
pub mod prerequisites;
pub mod probe;
pub mod refusals;
pub mod rows;
pub mod schema;
pub mod spill;
pub mod stream;
pub mod values;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::config::{Config, invalid};
use crate::error::{Code, Error, Result};
use crate::position::{BinlogPosition, Position};
use crate::source::{ChangeStream, Resume, StreamInfo};
use crate::spill::disk_budget::TransactionLimit;
use crate::spill::memory_budget::MemoryBudget;
use connect::{Session, bounded, query_error};
use prerequisites::{Flavor, ServerVersion, Settings};
use stream::{GtidStart, MyStream, Origin, StreamSettings};

/// Opens the binlog stream at `resume` (or, on a first run, at a
/// Checks the `source.mysql` block: the replica server id and the transaction limits.
pub fn check_config(config: &Config) -> Result<()> {
    let Some(my) = &config.source.mysql else {
        return Ok(());
    };
    if my.server_id == Some(0) {
        return Err(invalid("source.mysql.server_id must not be 0").hint(
            "choose an id unique among the server's replicas (1..=4294967295), or omit it to derive one from the job name",
        ));
    }
    if my.transaction_memory() == 0 || my.max_transaction() < my.transaction_memory() {
        return Err(invalid(
            "source.mysql.transaction_memory_bytes must be positive and at most max_transaction_bytes",
        ));
    }
    Ok(())
}

/// [`binlog::consistent_position`] — the baseline anchor), fixing the read bound.
pub async fn open(
    config: &Config,
    resume: Option<&Resume>,
    mut policy: crate::policy::Applier,
) -> Result<Box<dyn ChangeStream>> {
    let my = config.source.mysql.clone().unwrap_or_default();
    let server_id = my.server_id_for(&config.job);
    let url = config.source_url()?;
    let default_db = connect::options(&url, &config.source.tls)?
        .db_name()
        .map(str::to_owned);
    let timeouts = config.source.timeouts;
    let tls = &config.source.tls;
    let mut control = connect::connect(&url, tls, &timeouts, &Session::plain()).await?;
    // Every statement on the control connection is bounded client-side.
    let limit = timeouts.statement();

    let version = bounded(
        limit,
        "reading the server version",
        server_version(&mut control),
    )
    .await?;
    let settings = bounded(
        limit,
        "reading the binlog settings",
        global_settings(&mut control),
    )
    .await?;
    prerequisites::check_settings(&version, &settings)?;
    let grants_read = async {
        control
            .query::<String, _>("SHOW GRANTS")
            .await
            .map_err(|e| query_error("reading the source user's grants (SHOW GRANTS)", e))
    };
    let grants = bounded(
        limit,
        "reading the source user's grants (SHOW GRANTS)",
        grants_read,
    )
    .await?;
    prerequisites::check_grants(&version, &grants)?;
    let (identity, own_server_id) = bounded(
        limit,
        "reading the server identity",
        identity(&mut control, &version),
    )
    .await?;
    check_server_id(server_id, own_server_id)?;
    bounded(
        limit,
        "reading the replica settings",
        check_replica_logs(&mut control, &settings),
    )
    .await?;
    let plan = match resume {
        Some(resume) => Some(resume_plan(resume, &identity, version.flavor)?),
        None => None,
    };
    let checkpoint = match &plan {
        Some(Plan::Same(cp)) => Some(cp.clone()),
        _ => None,
    };
    let tables_read =
        schema::resolve_present(&mut control, &config.source.tables, default_db.as_deref());
    let (mut tables, gone) = bounded(limit, "reading the captured tables", tables_read).await?;
    if let Some(first) = gone.first()
        && plan.is_none()
    {
        // Nothing of it was ever streamed: the configuration names a table that is not there.
        let table_read = schema::resolve(
            &mut control,
            std::slice::from_ref(first),
            default_db.as_deref(),
        );
        return Err(bounded(limit, "reading the captured tables", table_read)
            .await
            .err()
            .unwrap_or_else(|| {
                Error::new(
                    Code::SourcePrerequisite,
                    format!("table {first} does not exist"),
                )
            }));
    }
    let collations = bounded(
        limit,
        "reading the collations",
        schema::collations(&mut control),
    )
    .await?;
    let anchor = match plan {
        None => {
            let names: Vec<(String, String)> = tables
                .iter()
                .map(|t| (t.database.clone(), t.table.clone()))
                .collect();
            let anchor = binlog::consistent_position(&mut control, &version, &names);
            Some(bounded(limit, "taking the baseline anchor", anchor).await?)
        }
        Some(_) => None,
    };
    // Positions after a followed failover are in the next generation: the bound too, so
    // it compares with them (and with the checkpoints written after it).
    let generation = match &plan {
        None => 0,
        Some(Plan::Same(cp)) => cp.generation(),
        Some(Plan::Follow(cp, _) | Plan::FollowSet(cp, _)) => {
            cp.generation().checked_add(1).ok_or_else(|| {
                failover::gap("the checkpoint has been through 65535 failovers".to_owned())
            })?
        }
    };
    let bound = bounded(
        limit,
        "reading the binlog position",
        binlog::current_position(&mut control, &version),
    )
    .await?
    .with_generation(generation);
    let maria = version.flavor == Flavor::MariaDb;
    let (start, requested, expect, gtid_start) = match (plan, anchor) {
        (Some(Plan::Follow(cp, gtid)), _) => {
            let server = bounded(
                limit,
                "reading the server's GTID state",
                failover::server_gtids(&mut control),
            )
            .await?;
            failover::check_follow(&gtid, &server)?;
            let now_read = async {
                control
                    .query_first::<(String, String), _>(
                        "SELECT @@GLOBAL.gtid_binlog_pos, @@GLOBAL.binlog_checksum",
                    )
                    .await
                    .map_err(|e| query_error("reading @@gtid_binlog_pos", e))
            };
            let (now, checksum) = bounded(limit, "reading @@gtid_binlog_pos", now_read)
                .await?
                .unwrap_or_default();
            let caught_up = crate::position::GtidPos::parse(&now) == Some(gtid);
            tracing::warn!(checkpoint = %cp, gtid = %gtid, server = %identity, generation, "the checkpoint was taken on another server; following the failover by GTID");
            let requested = if caught_up {
                bound.clone()
            } else {
                bound.at(4)
            };
            let origin = Origin::Gtid {
                caught_up,
                checksum: !checksum.eq_ignore_ascii_case("NONE"),
            };
            (
                cp,
                requested,
                None,
                GtidStart {
                    origin,
                    gtid: Some(gtid),
                    gtid_set: None,
                    generation,
                },
            )
        }
        (Some(Plan::FollowSet(cp, set)), _) => {
            let server = bounded(
                limit,
                "reading the server's GTID sets",
                mysql_gtid::server_sets(&mut control),
            )
            .await?;
            mysql_gtid::check_follow(&set, &server)?;
            let checksum_read = async {
                control
                    .query_first::<String, _>("SELECT @@GLOBAL.binlog_checksum")
                    .await
                    .map_err(|e| query_error("reading @@binlog_checksum", e))
            };
            let checksum = bounded(limit, "reading @@binlog_checksum", checksum_read).await?;
            let caught_up = server.executed == *set;
            tracing::warn!(checkpoint = %cp, gtid_set = %set, server = %identity, generation, "the checkpoint was taken on another server; following the failover by GTID set");
            let requested = if caught_up {
                bound.clone()
            } else {
                bound.at(4)
            };
            let origin = Origin::Gtid {
                caught_up,
                checksum: !checksum.unwrap_or_default().eq_ignore_ascii_case("NONE"),
            };
            (
                cp,
                requested,
                None,
                GtidStart {
                    origin,
                    gtid: None,
                    gtid_set: Some(set),
                    generation,
                },
            )
        }
        (_, anchor) if checkpoint.is_none() => {
            let start = anchor.unwrap_or_else(|| bound.clone());
            let gtid = match maria {
                true => {
                    bounded(
                        limit,
                        "reading the anchor's GTID position",
                        failover::gtid_at(&mut control, &start),
                    )
                    .await?
                }
                false => None,
            };
            // The new stream's first checkpoint (and a baseline's anchor) carry it too.
            let mark = crate::position::BinlogMark {
                gtid,
                ..start.mark.clone()
            };
            let start = start.with_mark(mark);
            // MySQL: the anchor's set (performance_schema.log_status), else learnt from
            // the next binlog file's PREVIOUS_GTIDS.
            let gtid_set = start.mark.gtid_set.clone();
            (
                start.clone(),
                start,
                None,
                GtidStart {
                    origin: Origin::Position,
                    gtid,
                    gtid_set,
                    generation: 0,
                },
            )
        }
        (_, _) => {
            let Some(cp) = checkpoint else {
                unreachable!("a checkpoint of this server")
            };
            let logs = bounded(
                limit,
                "listing the binlog files",
                binlog::log_files(&mut control, &version),
            )
            .await?;
            binlog::decide_start(&logs, &cp)?;
            binlog::check_not_past(&cp, &bound)?;
            let requested = match cp.mark.event {
                Some((_, len, _)) if len <= cp.offset() && cp.offset() - len >= 4 => {
                    cp.at(cp.offset() - len)
                }
                _ => cp.at(cp.offset()),
            };
            let gtid = match (cp.gtid(), maria) {
                (Some(gtid), _) => Some(gtid),
                (None, true) => {
                    bounded(
                        limit,
                        "reading the checkpoint's GTID position",
                        failover::gtid_at(&mut control, &cp),
                    )
                    .await?
                }
                (None, false) => None,
            };
            let start = GtidStart {
                origin: Origin::Position,
                gtid,
                gtid_set: cp.mark.gtid_set.clone(),
                generation: cp.generation(),
            };
            (cp.clone(), requested, Some(cp), start)
        }
    };
    drop(control);
    tracing::info!(%version, server_id, from = %start, bound = %bound, "opening the binlog dump");
    let dump_conn = connect::connect(&url, tls, &timeouts, &Session::plain()).await?;
    let from = match (gtid_start.origin, &gtid_start.gtid, &gtid_start.gtid_set) {
        (Origin::Position, _, _) => binlog::DumpFrom::Position(&requested),
        (Origin::Gtid { .. }, Some(gtid), _) => binlog::DumpFrom::MariaGtid(&requested, gtid),
        (Origin::Gtid { .. }, None, Some(set)) => binlog::DumpFrom::MySqlGtidSet(&requested, set),
        (Origin::Gtid { .. }, None, None) => {
            unreachable!("a GTID start has a GTID position or set")
        }
    };
    let dump = binlog::open_dump(dump_conn, &version, server_id, from);
    let dump = bounded(limit, "opening the binlog dump", dump).await?;
    let info = StreamInfo {
        source_identity: identity,
        start: Position::MySql(Box::new(start)),
        bound: Position::MySql(Box::new(bound.clone())),
        tables: tables.iter().map(|t| t.shape.clone()).collect(),
    };
    // The tables as their policies write them, checked against their columns.
    let info = crate::source::policy_stream::info_of(&mut policy, info)?;
    for name in &gone {
        tracing::warn!(
            code = Code::SourceTableGone.as_str(),
            table = %name,
            "table {name} no longer exists (dropped or renamed, or the source user lost SELECT on it) while the job has a checkpoint: \
             its changes still in the backlog are written; remove it from source.tables (or name its new name there: that table is then baselined)"
        );
        tables.push(schema::CapturedTable::gone(name, default_db.as_deref())?);
    }
    let spill_dir = config.spill_dir();
    let max_transaction = TransactionLimit::for_dir(my.max_transaction(), &spill_dir);
    if max_transaction.lowered() {
        tracing::warn!(
            configured = my.max_transaction(),
            limit = max_transaction.bytes,
            free = max_transaction.free,
            spill_dir = %spill_dir.display(),
            "the spill volume cannot hold source.mysql.max_transaction_bytes; a larger transaction fails with SLUICE_SOURCE_TRANSACTION_TOO_LARGE"
        );
    }
    let settings = StreamSettings {
        server_id,
        spill_dir,
        memory_cap: MemoryBudget::for_run(config, true)
            .1
            .unwrap_or(my.transaction_memory()),
        max_transaction,
        read_timeout: timeouts.read(),
        policy,
    };
    Ok(Box::new(MyStream::new(
        info, dump, settings, requested, expect, bound, tables, collations, gtid_start,
    )))
}

/// The server's family and version (`SELECT VERSION()`).
pub async fn server_version(conn: &mut Conn) -> Result<ServerVersion> {
    let text: Option<String> = conn
        .query_first("SELECT VERSION()")
        .await
        .map_err(|e| query_error("reading the server version", e))?;
    let text = text.unwrap_or_default();
    ServerVersion::parse(&text).ok_or_else(|| {
        Error::new(
            Code::SourceProtocol,
            format!("cannot read the server version {text:?}"),
        )
    })
}

/// The global variables [`prerequisites::check_settings`] reads.
pub async fn global_settings(conn: &mut Conn) -> Result<Settings> {
    let names = prerequisites::SETTING_NAMES
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows: Vec<(String, String)> = conn
        .query(format!(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})"
        ))
        .await
        .map_err(|e| query_error("reading the binlog settings (SHOW GLOBAL VARIABLES)", e))?;
    Ok(rows
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect())
}

/// The server identity stored with the checkpoint, and the server's own server_id.
pub async fn identity(conn: &mut Conn, version: &ServerVersion) -> Result<(String, u32)> {
    match version.flavor {
        Flavor::MySql => {
            let row: Option<(String, u32)> = conn
                .query_first("SELECT @@server_uuid, @@server_id")
                .await
                .map_err(|e| query_error("reading the server identity", e))?;
            let (uuid, id) = row.unwrap_or_default();
            Ok((format!("mysql:mysql/server_uuid={uuid}"), id))
        }
        Flavor::MariaDb => {
            let row: Option<(u32, u32)> = conn
                .query_first("SELECT @@server_id, @@gtid_domain_id")
                .await
                .map_err(|e| query_error("reading the server identity", e))?;
            let (id, domain) = row.unwrap_or_default();
            Ok((
                format!("mysql:mariadb/server_id={id}/gtid_domain_id={domain}"),
                id,
            ))
        }
    }
}

/// The server's name as it reports itself, whatever host the URL names (what resource
/// claims are keyed on): MySQL `mysql:server_uuid=<uuid>`; MariaDB, which has no server
/// UUID, `mysql:mariadb/hostname=<@@hostname>/port=<@@port>/server_id=<@@server_id>`.
pub async fn server_name(config: &Config) -> Result<String> {
    let timeouts = config.source.timeouts;
    let (url, tls) = (config.source_url()?, &config.source.tls);
    let mut conn = connect::connect(&url, tls, &timeouts, &Session::plain()).await?;
    let limit = timeouts.statement();
    let version = bounded(
        limit,
        "reading the server version",
        server_version(&mut conn),
    )
    .await?;
    match version.flavor {
        Flavor::MySql => {
            let read = async {
                conn.query_first::<String, _>("SELECT @@server_uuid")
                    .await
                    .map_err(|e| query_error("reading @@server_uuid", e))
            };
            let uuid = bounded(limit, "reading @@server_uuid", read).await?;
            Ok(format!("mysql:server_uuid={}", uuid.unwrap_or_default()))
        }
        Flavor::MariaDb => {
            let what = "reading @@hostname, @@port, @@server_id";
            let read = async {
                conn.query_first::<(String, u32, u32), _>("SELECT @@hostname, @@port, @@server_id")
                    .await
                    .map_err(|e| query_error(what, e))
            };
            let row = bounded(limit, what, read).await?;
            let (host, port, id) = row.unwrap_or_default();
            Ok(format!(
                "mysql:mariadb/hostname={}/port={port}/server_id={id}",
                host.to_ascii_lowercase()
            ))
        }
    }
}

/// Refuses a replica `server_id` equal to the source server's own.
pub fn check_server_id(server_id: u32, own_server_id: u32) -> Result<()> {
    if own_server_id == server_id {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("source.mysql.server_id {server_id} is the source server's own server_id"),
        )
        .hint("choose a server_id unique among the server and its replicas"));
    }
    Ok(())
}

/// Whether this server writes what it replicates to its binlog; a replica that does not
/// (`log_slave_updates = OFF`) is refused — its binlog lacks the primary's changes.
/// A user that may not run `SHOW SLAVE STATUS` is not checked here (doctor says so).
async fn check_replica_logs(conn: &mut Conn, settings: &Settings) -> Result<()> {
    let replica = match conn.query::<Row, _>("SHOW SLAVE STATUS").await {
        Ok(rows) => !rows.is_empty(),
        Err(_) => replicas_running(conn).await.unwrap_or(0) > 0,
    };
    let logs = ["log_slave_updates", "log_replica_updates"]
        .iter()
        .any(|n| {
            settings
                .get(*n)
                .is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
        });
    if replica && !logs {
        return Err(Error::new(
            Code::SourcePrerequisite,
            "this server is a replica that does not write the changes it replicates to its own binlog (log_slave_updates = OFF)",
        )
        .hint("set log_slave_updates = ON (MySQL: log_replica_updates) in the replica's configuration and restart it, or point source.url at the primary"));
    }
    Ok(())
}

/// How many replication connections of this server are running (MariaDB's
/// `Slaves_running` status, which needs no privilege, unlike `SHOW SLAVE STATUS`);
/// `None` when the server does not report it (MySQL).
pub async fn replicas_running(conn: &mut Conn) -> Option<u64> {
    let row: Option<(String, String)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Slaves_running'")
        .await
        .ok()
        .flatten();
    row.and_then(|(_, v)| v.parse().ok())
}

/// How a checkpoint is resumed on this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The checkpoint was taken on this server: resume at its binlog position.
    Same(BinlogPosition),
    /// It was taken on another server (a MariaDB failover): follow its GTID position here.
    Follow(BinlogPosition, crate::position::GtidPos),
    /// It was taken on another server (a MySQL failover): follow its GTID set here.
    FollowSet(BinlogPosition, std::sync::Arc<crate::position::GtidSet>),
}

/// Decides how to resume `resume` on the server `identity` of `flavor`. Pure.
pub fn resume_plan(resume: &Resume, identity: &str, flavor: Flavor) -> Result<Plan> {
    let position = match &resume.position {
        Position::MySql(position) => (**position).clone(),
        other => {
            return Err(refusals::foreign(format!(
                "the checkpoint {other} is not a binlog position"
            )));
        }
    };
    if resume.source_identity == identity {
        return Ok(Plan::Same(position));
    }
    match (flavor, position.gtid(), position.mark.gtid_set.clone()) {
        (Flavor::MariaDb, Some(gtid), _) => Ok(Plan::Follow(position, gtid)),
        (Flavor::MySql, _, Some(set)) => Ok(Plan::FollowSet(position, set)),
        _ => Err(refusals::foreign(format!(
            "the checkpoint was written for source {:?}, but this server is {identity:?}, and the checkpoint has no GTID position to follow a failover by",
            resume.source_identity
        ))),
    }
}

/// Checks the checkpoint belongs to this server and returns its position.
pub fn checkpoint_position(resume: &Resume, identity: &str) -> Result<BinlogPosition> {
    match resume_plan(resume, identity, Flavor::MySql)? {
        Plan::Same(position) | Plan::Follow(position, _) | Plan::FollowSet(position, _) => {
            Ok(position)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::PgLsn;

    #[test]
    fn checkpoints_of_other_servers_or_engines_are_refused() {
        let me = "mysql:mariadb/server_id=1/gtid_domain_id=0";
        let ok = Resume {
            position: "mysql:b.000001:4".parse().unwrap(),
            source_identity: me.into(),
        };
        assert_eq!(checkpoint_position(&ok, me).unwrap().offset(), 4);
        let other_server = Resume {
            source_identity: "mysql:mariadb/server_id=2/gtid_domain_id=0".into(),
            ..ok.clone()
        };
        assert_eq!(
            checkpoint_position(&other_server, me).unwrap_err().code(),
            Code::SourceForeignCheckpoint
        );
        let pg = Resume {
            position: Position::Postgres(PgLsn(1)),
            source_identity: me.into(),
        };
        assert_eq!(
            checkpoint_position(&pg, me).unwrap_err().code(),
            Code::SourceForeignCheckpoint
        );
    }

    #[test]
    fn a_mysql_checkpoint_with_a_gtid_set_is_followed_on_another_server() {
        let a = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let old = format!("mysql:mysql/server_uuid={a}");
        let new = "mysql:mysql/server_uuid=8a94f357-aab4-11df-86ab-c80aa9429562";
        let with_set = Resume {
            position: format!("mysql:binlog.000009:1234;s={a}:1-100")
                .parse()
                .unwrap(),
            source_identity: old.clone(),
        };
        match resume_plan(&with_set, new, Flavor::MySql).unwrap() {
            Plan::FollowSet(cp, set) => {
                assert_eq!(cp.to_string(), "binlog.000009:1234");
                assert_eq!(set.to_string(), format!("{a}:1-100"));
            }
            other => panic!("{other:?}"),
        }
        // The same server resumes at its position; a MariaDB server never follows a set.
        assert!(matches!(
            resume_plan(&with_set, &old, Flavor::MySql).unwrap(),
            Plan::Same(_)
        ));
        assert_eq!(
            resume_plan(&with_set, new, Flavor::MariaDb)
                .unwrap_err()
                .code(),
            Code::SourceForeignCheckpoint
        );
        // Without a set (gtid_mode off, or written before it was learnt): refused.
        let without = Resume {
            position: "mysql:binlog.000009:1234".parse().unwrap(),
            source_identity: old,
        };
        let err = resume_plan(&without, new, Flavor::MySql).unwrap_err();
        assert_eq!(err.code(), Code::SourceForeignCheckpoint);
    }
}
