//! MySQL / MariaDB checks of `sluice doctor`.
//!
//! Each refusal the drain can make at open is checked with the drain's own function:
//! the setting rules ([`prerequisites::SETTING_CHECKS`], one row each),
//! [`prerequisites::check_grants`], [`mysql::check_server_id`],
//! [`mysql::checkpoint_position`] (server identity vs the checkpoint), [`schema::resolve`]
//! (table exists, is a base table, types supported), [`binlog::decide_start`] and
//! [`binlog::check_not_past`] (the checkpoint's binlog file still on the server). The
//! remaining checks are advice the drain does not enforce, each a pure function over
//! what the server reported: a table without a key ([`key_advice`]), SELECT on a table
//! (needed by baselines), and binlog retention against the schedule interval
//! ([`retention_check`]). The session is read-only and never registers as a replica.
//!
//! Replicas and failovers: a server that replicates is checked for `log_slave_updates`
//! (the drain refuses without it) and its lag (`SHOW SLAVE STATUS` Seconds_Behind_Master
//! against the schedule interval, [`replica_check`]); [`failover::follow_verdict`] says
//! whether a job reading this server can follow a failover; a checkpoint of another server
//! is judged as the drain judges it ([`source::resume_plan`], [`failover::check_follow`]).

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::{Check, Report, human_bytes};
use crate::config::{Config, DoctorConfig, Initial};
use crate::position::Position;
use crate::redact::redact_url;
use crate::source::Resume;
use crate::source::mysql::connect::{self, Session, errno, query_error, server_errno};
use crate::source::mysql::failover::{self, FollowVerdict};
use crate::source::mysql::prerequisites::{self, ServerVersion, set_persist};
use crate::source::mysql::schema::{self, CapturedTable};
use crate::source::mysql::{self as source, Plan, binlog, mysql_gtid};
use crate::spill::disk_budget::TransactionLimit;

pub async fn checks(config: &Config, report: &mut Report) {
    let my = config.source.mysql.clone().unwrap_or_default();
    let server_id = my.server_id_for(&config.job);
    report.push(spill_volume_check(config, &my));
    let url = match config.source_url() {
        Ok(u) => u,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    let default_db = match connect::options(&url, &config.source.tls) {
        Ok(o) => o.db_name().map(str::to_owned),
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    let session = Session::setup(
        "starting a read-only session",
        "SET SESSION TRANSACTION READ ONLY",
    );
    let timeouts = &config.source.timeouts;
    let mut conn = match connect::connect(&url, &config.source.tls, timeouts, &session).await {
        Ok(c) => c,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    report.push(Check::ok("source connect", redact_url(&url)));

    let version = match source::server_version(&mut conn).await {
        Ok(v) => v,
        Err(e) => return report.push(Check::from_error("server version", &e)),
    };
    report.push(Check::ok("server version", version.to_string()));

    let mut global = None;
    match source::global_settings(&mut conn).await {
        Ok(settings) => {
            global = Some(settings.clone());
            for (name, rule) in prerequisites::SETTING_CHECKS {
                let shown = settings
                    .get(*name)
                    .cloned()
                    .unwrap_or_else(|| "off".to_owned());
                report.push(Check::result(
                    *name,
                    rule(&version, &settings).map(|_| shown),
                ));
            }
        }
        Err(e) => report.push(Check::from_error("binlog settings", &e)),
    }

    report.push(match conn.query::<String, _>("SHOW GRANTS").await {
        Ok(grants) => Check::result(
            "grants",
            prerequisites::check_grants(&version, &grants).map(|_| {
                format!(
                    "REPLICATION SLAVE and {} on *.* (or through a role)",
                    version.client_grant()
                )
            }),
        ),
        Err(e) => Check::from_error(
            "grants",
            &query_error("reading the source user's grants (SHOW GRANTS)", e),
        ),
    });

    let (identity, own_server_id) = match source::identity(&mut conn, &version).await {
        Ok(i) => i,
        Err(e) => return report.push(Check::from_error("server identity", &e)),
    };
    report.push(Check::result(
        "replica server_id",
        source::check_server_id(server_id, own_server_id)
            .map(|_| format!("{server_id} (the server's own server_id is {own_server_id})")),
    ));

    let (policies, key) = super::policy::key_check(config);
    if let Some(key) = key {
        report.push(key);
    }
    for name in &config.source.tables {
        for check in table_checks(&mut conn, config, &policies, name, default_db.as_deref()).await {
            report.push(check);
        }
    }

    let replica = match replica_status(&mut conn).await {
        Ok(status) => {
            let logs = global.as_ref().is_some_and(|g| {
                ["log_slave_updates", "log_replica_updates"]
                    .iter()
                    .any(|n| {
                        g.get(*n)
                            .is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
                    })
            });
            let replica = status.is_some();
            report.push(replica_check(
                status.as_ref(),
                logs,
                config.doctor.schedule_interval_seconds,
            ));
            Some(replica)
        }
        Err(e) => {
            let running = source::replicas_running(&mut conn).await;
            let logs = global.as_ref().is_some_and(|g| {
                ["log_slave_updates", "log_replica_updates"]
                    .iter()
                    .any(|n| {
                        g.get(*n)
                            .is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
                    })
            });
            report.push(unreadable_replica_check(running, logs, &e.to_string()));
            running.map(|n| n > 0)
        }
    };
    if let Some(settings) = &global {
        report.push(
            match failover::follow_verdict(version.flavor, settings, replica.unwrap_or(false)) {
                FollowVerdict::Yes => Check::ok(
                    "failover",
                    match version.flavor {
                        prerequisites::Flavor::MariaDb => "GTIDs in strict mode: after a failover, point source.url at the promoted server and the job follows by GTID, without a re-baseline",
                        prerequisites::Flavor::MySql => "gtid_mode = ON: after a failover, point source.url at the promoted server and the job follows by GTID set, without a re-baseline (a checkpoint carries the set from the stream's start with BACKUP_ADMIN, else from its first binlog rotation on: FLUSH BINARY LOGS once after the first run)",
                    },
                ),
                FollowVerdict::No(why) => Check::warn(
                    "failover",
                    "the job cannot follow a failover of this server (a failover then needs a re-baseline)",
                    why,
                ),
            },
        );
    }

    // A checkpoint of another server cannot be judged against this server's binlog.
    match checkpoint_check(config, &identity, &mut conn, &version).await {
        Ok((check, at)) => {
            report.push(check);
            report.push(binlog_check(&mut conn, &version, at.as_ref()).await);
        }
        Err(check) => report.push(check),
    }
    report.push(match retention_facts(&mut conn).await {
        Ok(facts) => retention_check(&version, &facts, &config.doctor),
        Err(e) => Check::from_error("binlog retention", &e),
    });
}

/// The server identity against the stored checkpoint, by the drain's
/// [`source::resume_plan`]; returns the checkpoint when it belongs to this server. A
/// checkpoint of another server with a GTID position is judged by
/// [`failover::check_follow`], as the drain would.
async fn checkpoint_check(
    config: &Config,
    identity: &str,
    conn: &mut Conn,
    version: &ServerVersion,
) -> Result<(Check, Option<crate::position::BinlogPosition>), Check> {
    let name = "server identity";
    let stored = match crate::state::open(config).await {
        Ok(store) => store.load_checkpoint(&config.job).await,
        Err(e) => Err(e),
    }
    .map_err(|e| Check::from_error(name, &e))?;
    let Some(cp) = stored else {
        return Ok((
            Check::ok(name, format!("{identity}; no checkpoint yet")),
            None,
        ));
    };
    let plan = Position::parse_tagged(&cp.position)
        .and_then(|position| {
            source::resume_plan(
                &Resume {
                    position,
                    source_identity: cp.source_identity.clone(),
                },
                identity,
                version.flavor,
            )
        })
        .map_err(|e| Check::from_error(name, &e))?;
    let position = match plan {
        Plan::Same(position) => position,
        Plan::Follow(position, gtid) => {
            failover::server_gtids(conn)
                .await
                .and_then(|server| failover::check_follow(&gtid, &server))
                .map_err(|e| Check::from_error(name, &e))?;
            // Its file:offset is another server's: there is no binlog file to check.
            return Err(Check::ok(
                name,
                format!(
                    "{identity}: the checkpoint {position} was written for {} — a failover; this server has every transaction up to its GTID position {gtid}, so the next run follows it here",
                    cp.source_identity
                ),
            ));
        }
        Plan::FollowSet(position, set) => {
            mysql_gtid::server_sets(conn)
                .await
                .and_then(|server| mysql_gtid::check_follow(&set, &server))
                .map_err(|e| Check::from_error(name, &e))?;
            return Err(Check::ok(
                name,
                format!(
                    "{identity}: the checkpoint {position} was written for {} — a failover; this server has every transaction of its GTID set {set} and still has in its binlog every one after it, so the next run follows it here",
                    cp.source_identity
                ),
            ));
        }
    };
    Ok((
        Check::ok(
            name,
            format!(
                "{identity}: the checkpoint {position} was written for this server{}",
                gtid_note(version.flavor, &position)
            ),
        ),
        Some(position),
    ))
}

/// MySQL: whether the checkpoint carries the GTID set a failover is followed by. Pure.
pub fn gtid_note(
    flavor: prerequisites::Flavor,
    position: &crate::position::BinlogPosition,
) -> &'static str {
    match (flavor, &position.mark.gtid_set) {
        (prerequisites::Flavor::MariaDb, _) => "",
        (prerequisites::Flavor::MySql, Some(_)) => {
            "; it carries its GTID set, so a failover can be followed from it"
        }
        (prerequisites::Flavor::MySql, None) => {
            "; it carries no GTID set yet (gtid_mode off, or no binlog rotation since the stream started): a failover could not be followed from it"
        }
    }
}

/// The checkpoint's binlog file against `SHOW BINARY LOGS` and the current end, by the
/// drain's [`binlog::decide_start`] and [`binlog::check_not_past`].
async fn binlog_check(
    conn: &mut Conn,
    version: &ServerVersion,
    checkpoint: Option<&crate::position::BinlogPosition>,
) -> Check {
    let name = "checkpoint vs binlog";
    let bound = match binlog::current_position(conn, version).await {
        Ok(b) => b,
        Err(e) => return Check::from_error(name, &e),
    };
    let Some(cp) = checkpoint else {
        return Check::ok(
            name,
            format!(
                "no checkpoint for this server: the first run starts at the current end {bound}"
            ),
        );
    };
    let logs = match binlog::log_files(conn, version).await {
        Ok(l) => l,
        Err(e) => return Check::from_error(name, &e),
    };
    let verdict = binlog::decide_start(&logs, cp).and_then(|_| binlog::check_not_past(cp, &bound));
    Check::result(
        name,
        verdict.map(|_| {
            format!(
                "binlog file {} of the checkpoint is still on the server (oldest {}, current end {bound})",
                cp.file(),
                logs.first().map_or("?", |l| l.name.as_str())
            )
        }),
    )
}

/// What `SHOW SLAVE STATUS` says about a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// `host:port` of the server it replicates from.
    pub source: String,
    /// Seconds_Behind_Master (`None`: NULL, replication not running).
    pub lag: Option<u64>,
    pub last_error: String,
}

/// `SHOW SLAVE STATUS` (`None`: not a replica).
async fn replica_status(
    conn: &mut Conn,
) -> std::result::Result<Option<ReplicaStatus>, mysql_async::Error> {
    let row: Option<mysql_async::Row> = conn.query_first("SHOW SLAVE STATUS").await?;
    Ok(row.map(|row| {
        let text = |name: &str| -> Option<String> {
            row.columns_ref()
                .iter()
                .position(|c| c.name_str().eq_ignore_ascii_case(name))
                .and_then(|i| row.get_opt::<Option<String>, _>(i))
                .and_then(Result::ok)
                .flatten()
        };
        ReplicaStatus {
            source: format!(
                "{}:{}",
                text("Master_Host").unwrap_or_default(),
                text("Master_Port").unwrap_or_default()
            ),
            lag: text("Seconds_Behind_Master").and_then(|v| v.parse().ok()),
            last_error: [text("Last_IO_Error"), text("Last_SQL_Error")]
                .into_iter()
                .flatten()
                .filter(|e| !e.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        }
    }))
}

/// A replica must log what it replicates (the drain refuses otherwise) and should not
/// lag more than one schedule interval behind its primary. Pure.
pub fn replica_check(
    status: Option<&ReplicaStatus>,
    logs_replicated: bool,
    interval: u64,
) -> Check {
    let name = "replication";
    let Some(status) = status else {
        return Check::ok(name, "not a replica (SHOW SLAVE STATUS is empty)");
    };
    if !logs_replicated {
        return Check::fail(
            name,
            format!(
                "a replica of {} that does not write what it replicates to its binlog (log_slave_updates = OFF): the job would see none of the primary's changes",
                status.source
            ),
            "set log_slave_updates = ON (MySQL: log_replica_updates) in the replica's configuration and restart it, or point source.url at the primary",
        );
    }
    match status.lag {
        None => Check::warn(
            name,
            format!(
                "a replica of {}, but replication is not running{}: the job sees no new changes",
                status.source,
                if status.last_error.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", status.last_error)
                }
            ),
            "START SLAVE; on the replica (fix the error it reports first), or point source.url at the primary",
        ),
        Some(lag) if lag > interval => Check::warn(
            name,
            format!(
                "a replica of {} lagging {lag} s behind it, more than the schedule interval ({interval} s): each run delivers changes that old",
                status.source
            ),
            "find what slows the replica (SHOW SLAVE STATUS, slave_parallel_threads), or point source.url at the primary",
        ),
        Some(lag) => Check::ok(
            name,
            format!(
                "a replica of {}, {lag} s behind it (log_slave_updates = ON)",
                status.source
            ),
        ),
    }
}

/// `SHOW SLAVE STATUS` was denied: what MariaDB's `Slaves_running` (`running`) tells. Pure.
pub fn unreadable_replica_check(
    running: Option<u64>,
    logs_replicated: bool,
    denied: &str,
) -> Check {
    let name = "replication";
    let grant = "GRANT SLAVE MONITOR ON *.* TO '<user>'@'<host>'; (MySQL: REPLICATION CLIENT) so doctor can read SHOW SLAVE STATUS (the replica's lag)";
    match running {
        Some(n) if n > 0 && !logs_replicated => Check::fail(
            name,
            "a replica (Slaves_running) that does not write what it replicates to its binlog (log_slave_updates = OFF): the job would see none of the primary's changes",
            "set log_slave_updates = ON in the replica's configuration and restart it, or point source.url at the primary",
        ),
        Some(n) if n > 0 => Check::warn(
            name,
            format!(
                "a replica ({n} replication connection(s) running, log_slave_updates = ON); its lag cannot be read: {denied}"
            ),
            grant,
        ),
        _ => Check::warn(
            name,
            format!("cannot tell whether this server is a replica or how far it lags: {denied}"),
            grant,
        ),
    }
}

/// The table rule of the drain, then the key advice and the SELECT probe.
async fn table_checks(
    conn: &mut Conn,
    config: &Config,
    policies: &crate::policy::Policies,
    name: &str,
    default_db: Option<&str>,
) -> Vec<Check> {
    let check = format!("table {name}");
    let table = match schema::resolve(conn, &[name.to_owned()], default_db).await {
        Ok(mut t) => t.remove(0),
        Err(e) => return vec![Check::from_error(check, &e)],
    };
    let mut out = vec![
        key_advice(&check, &table),
        super::baseline_key_check(config, name, &table.key, &table.shape.columns),
    ];
    out.extend(super::policy::table_check(config, policies, &table.shape));
    let probe = format!(
        "SELECT * FROM {}.{} LIMIT 0",
        quote_ident(&table.database),
        quote_ident(&table.table)
    );
    let select = conn.query_drop(probe).await.map_err(|e| {
        let denied = matches!(
            server_errno(&e),
            Some(errno::TABLE_ACCESS_DENIED | errno::DB_ACCESS_DENIED)
        );
        (denied, query_error(&format!("reading {name}"), e))
    });
    out.push(select_advice(
        &format!("table {name} SELECT"),
        &table,
        config.initial,
        select,
    ));
    out
}

/// A table without a primary key (or NOT NULL unique index) is captured without a key
/// and replayed as a multiset: it works, but a key is cheaper to replay, so this warns.
pub fn key_advice(name: &str, table: &CapturedTable) -> Check {
    let key: Vec<&str> = table
        .shape
        .columns
        .iter()
        .filter(|c| c.key)
        .map(|c| c.name.as_str())
        .collect();
    if key.is_empty() {
        return Check::warn(
            name,
            "no primary key and no unique index over NOT NULL columns: captured without a key and replayed as a multiset (an UPDATE is written as the old row deleted and the new row inserted; a baseline is one consistent read, MariaDB only)",
            format!(
                "ALTER TABLE {}.{} ADD PRIMARY KEY (<columns>);",
                quote_ident(&table.database),
                quote_ident(&table.table)
            ),
        );
    }
    Check::ok(name, format!("key ({})", key.join(", ")))
}

/// SELECT on a captured table: baselines read it (the binlog does not need it), so a
/// denial fails for `initial: snapshot` and warns otherwise.
pub fn select_advice(
    name: &str,
    table: &CapturedTable,
    initial: Initial,
    probe: Result<(), (bool, crate::error::Error)>,
) -> Check {
    let fix = format!(
        "GRANT SELECT ON {}.{} TO '<user>'@'<host>';",
        quote_ident(&table.database),
        quote_ident(&table.table)
    );
    match probe {
        Ok(()) => Check::ok(name, "readable (baselines can read it)"),
        Err((true, e)) => {
            let check = Check::fail(
                name,
                format!(
                    "SELECT is denied: a baseline of this table fails ({})",
                    e.message()
                ),
                fix,
            );
            if initial == Initial::Snapshot {
                check
            } else {
                check.as_warning()
            }
        }
        Err((false, e)) => Check::from_error(name, &e),
    }
}

/// What the server says about binlog expiry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Retention {
    /// `binlog_expire_logs_seconds` (MySQL 8, MariaDB ≥ 10.6); 0 = off.
    pub expire_seconds: Option<u64>,
    /// `expire_logs_days` (fractional on MariaDB); 0 = off.
    pub expire_days: Option<f64>,
    /// `binlog_expire_logs_auto_purge` (MySQL ≥ 8.0.29); OFF = no automatic purge.
    pub auto_purge: Option<bool>,
    /// `max_binlog_total_size` (MariaDB ≥ 11.4); 0 = no size limit.
    pub total_size_limit: Option<u64>,
    /// RDS / Aurora `binlog retention hours` (`mysql.rds_show_configuration`).
    pub rds: Rds,
}

/// Whether the server is RDS / Aurora, and its binlog retention setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Rds {
    /// `mysql.rds_show_configuration` does not exist.
    #[default]
    NotRds,
    /// `binlog retention hours`; `None` (NULL, RDS's default) purges binlogs as soon
    /// as RDS can.
    Hours(Option<u64>),
    /// The procedure may not be executed by this user (MariaDB answers so even where it
    /// does not exist): the server variables are all doctor can judge by.
    Unreadable,
}

async fn retention_facts(conn: &mut Conn) -> crate::error::Result<Retention> {
    let rows: Vec<(String, String)> = conn
        .query(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
             ('binlog_expire_logs_seconds', 'expire_logs_days', 'binlog_expire_logs_auto_purge', 'max_binlog_total_size')",
        )
        .await
        .map_err(|e| query_error("reading the binlog expiry settings", e))?;
    let get = |name: &str| {
        rows.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
    };
    let rds = match conn
        .query::<mysql_async::Row, _>("CALL mysql.rds_show_configuration")
        .await
    {
        Ok(rows) => Rds::Hours(
            rows.iter()
                .find(|r| {
                    r.get::<Option<String>, _>(0)
                        .flatten()
                        .is_some_and(|n| n.eq_ignore_ascii_case("binlog retention hours"))
                })
                .and_then(|r| r.get::<Option<String>, _>(1).flatten())
                .and_then(|v| v.trim().parse().ok()),
        ),
        // ER_SP_DOES_NOT_EXIST: not RDS.
        Err(e) if server_errno(&e) == Some(1305) => Rds::NotRds,
        // ER_PROCACCESS_DENIED_ERROR (and the database-level denial): cannot tell.
        Err(e) if matches!(server_errno(&e), Some(1370 | errno::DB_ACCESS_DENIED)) => {
            Rds::Unreadable
        }
        Err(e) => {
            return Err(query_error(
                "reading RDS's binlog retention (CALL mysql.rds_show_configuration)",
                e,
            ));
        }
    };
    Ok(Retention {
        expire_seconds: get("binlog_expire_logs_seconds").and_then(|v| v.parse().ok()),
        expire_days: get("expire_logs_days").and_then(|v| v.parse().ok()),
        auto_purge: get("binlog_expire_logs_auto_purge")
            .map(|v| v.eq_ignore_ascii_case("ON") || v == "1"),
        total_size_limit: get("max_binlog_total_size").and_then(|v| v.parse().ok()),
        rds,
    })
}

impl Retention {
    /// How long a binlog file is kept, in seconds; `None` when nothing expires it by time.
    pub fn seconds(&self) -> Option<u64> {
        if let Rds::Hours(hours) = self.rds {
            return Some(hours.unwrap_or(0) * 3600);
        }
        if self.auto_purge == Some(false) {
            return None;
        }
        match (self.expire_seconds, self.expire_days) {
            (Some(s), _) if s > 0 => Some(s),
            (_, Some(d)) if d > 0.0 => Some((d * 86_400.0).round() as u64),
            _ => None,
        }
    }
}

/// Binlog retention against the schedule: kept for less than one interval fails (a file
/// can be purged before the next run reads it, which is a re-baseline); for less than
/// interval + `log_retention_margin_seconds` warns; a total-size purge limit warns.
pub fn retention_check(version: &ServerVersion, facts: &Retention, limits: &DoctorConfig) -> Check {
    let name = "binlog retention";
    let interval = limits.schedule_interval_seconds;
    let wanted = interval + limits.log_retention_margin_seconds;
    let schedule = format!(
        "schedule interval {interval}s + margin {}s (doctor.schedule_interval_seconds, doctor.log_retention_margin_seconds)",
        limits.log_retention_margin_seconds
    );
    let fix = match (&facts.rds, version.flavor) {
        (Rds::Hours(_), _) => format!(
            "CALL mysql.rds_set_configuration('binlog retention hours', {});",
            wanted.div_ceil(3600).max(1)
        ),
        _ => set_persist(version, "binlog_expire_logs_seconds", &wanted.to_string()),
    };
    let kept = match facts.seconds() {
        None => "binlogs are not expired by time".to_owned(),
        Some(s) => match facts.rds {
            Rds::Hours(None) => {
                "RDS binlog retention hours is NULL: RDS purges binlogs as soon as it can"
                    .to_owned()
            }
            Rds::Hours(Some(h)) => format!("RDS keeps binlogs {h} h ({s}s)"),
            Rds::NotRds | Rds::Unreadable => format!("binlogs expire after {s}s"),
        },
    };
    let kept = if facts.rds == Rds::Unreadable {
        format!(
            "{kept} (RDS's binlog retention hours, if this is RDS, is not readable by this user)"
        )
    } else {
        kept
    };
    match facts.seconds() {
        Some(s) if s < interval => Check::fail(
            name,
            format!(
                "{kept}, less than the {interval}s between runs: a binlog file can be purged before the next run reads it (a re-baseline)"
            ),
            fix,
        ),
        Some(s) if s < wanted => Check::warn(
            name,
            format!(
                "{kept}: an outage longer than {}s loses the stream ({schedule})",
                s - interval
            ),
            fix,
        ),
        _ => match facts.total_size_limit {
            Some(limit) if limit > 0 => Check::warn(
                name,
                format!(
                    "{kept}, but max_binlog_total_size = {limit}: a burst of writes purges binlogs before their time"
                ),
                set_persist(version, "max_binlog_total_size", "0"),
            ),
            _ => Check::ok(name, format!("{kept}; {schedule}")),
        },
    }
}

/// A MySQL identifier in backticks.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The "spill volume" row: how large a transaction the spill directory can hold, by the
/// drain's own [`TransactionLimit`] — a warning when it is less than
/// `max_transaction_bytes`.
fn spill_volume_check(config: &Config, my: &crate::config::MysqlConfig) -> Check {
    let dir = config.spill_dir();
    let limit = TransactionLimit::for_dir(my.max_transaction(), &dir);
    let free = limit.free.map_or_else(
        || "unknown free space".to_owned(),
        |f| format!("{} free", human_bytes(f)),
    );
    let detail = format!(
        "{} ({free}): transactions up to {} are accepted",
        dir.display(),
        human_bytes(limit.bytes)
    );
    if limit.lowered() {
        Check::warn("spill volume", detail, limit.hint())
    } else {
        Check::ok("spill volume", detail)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_identity_row_says_whether_a_mysql_checkpoint_carries_its_gtid_set() {
        use crate::position::BinlogPosition;
        use crate::source::mysql::prerequisites::Flavor;
        let with = BinlogPosition::parse_checkpoint(
            "binlog.000002:1234;s=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
        )
        .unwrap();
        let without = BinlogPosition::parse_checkpoint("binlog.000002:1234").unwrap();
        assert!(gtid_note(Flavor::MySql, &with).contains("carries its GTID set"));
        assert!(gtid_note(Flavor::MySql, &without).contains("no GTID set yet"));
        assert_eq!(gtid_note(Flavor::MariaDb, &without), "");
    }

    use super::*;

    #[test]
    fn a_replica_is_checked_for_its_binlog_and_its_lag() {
        use super::super::Status;
        let status = |lag| ReplicaStatus {
            source: "10.0.0.1:3306".into(),
            lag,
            last_error: String::new(),
        };
        assert_eq!(replica_check(None, false, 300).status, Status::Ok);
        let no_log = replica_check(Some(&status(Some(0))), false, 300);
        assert_eq!(no_log.status, Status::Fail);
        assert!(no_log.fix.unwrap().contains("log_slave_updates = ON"));
        let fine = replica_check(Some(&status(Some(3))), true, 300);
        assert_eq!(fine.status, Status::Ok);
        assert!(fine.detail.contains("3 s behind"), "{}", fine.detail);
        let lagging = replica_check(Some(&status(Some(900))), true, 300);
        assert_eq!(lagging.status, Status::Warn);
        assert!(lagging.detail.contains("900 s"), "{}", lagging.detail);
        let denied = unreadable_replica_check(Some(1), true, "denied");
        assert_eq!(denied.status, Status::Warn);
        assert!(denied.fix.unwrap().contains("SLAVE MONITOR"));
        assert_eq!(
            unreadable_replica_check(Some(1), false, "denied").status,
            Status::Fail
        );
        assert_eq!(
            unreadable_replica_check(Some(0), false, "denied").status,
            Status::Warn
        );
        let stopped = replica_check(Some(&status(None)), true, 300);
        assert_eq!(stopped.status, Status::Warn);
        assert!(stopped.fix.unwrap().contains("START SLAVE"));
    }
    use crate::doctor::Status;

    fn limits() -> DoctorConfig {
        DoctorConfig {
            schedule_interval_seconds: 300,
            log_retention_margin_seconds: 3600,
            ..DoctorConfig::default()
        }
    }

    fn v(text: &str) -> ServerVersion {
        ServerVersion::parse(text).unwrap()
    }

    #[test]
    fn retention_is_read_the_way_each_server_applies_it() {
        let none = Retention::default();
        assert_eq!(none.seconds(), None);
        let seconds = Retention {
            expire_seconds: Some(600),
            expire_days: Some(2.0),
            ..Retention::default()
        };
        assert_eq!(seconds.seconds(), Some(600), "seconds win over days");
        let days = Retention {
            expire_seconds: Some(0),
            expire_days: Some(0.5),
            ..Retention::default()
        };
        assert_eq!(days.seconds(), Some(43_200));
        let no_purge = Retention {
            auto_purge: Some(false),
            ..seconds.clone()
        };
        assert_eq!(no_purge.seconds(), None);
        let rds_null = Retention {
            rds: Rds::Hours(None),
            ..seconds.clone()
        };
        assert_eq!(rds_null.seconds(), Some(0), "RDS's own setting decides");
        let rds = Retention {
            rds: Rds::Hours(Some(24)),
            ..Retention::default()
        };
        assert_eq!(rds.seconds(), Some(86_400));
        let unreadable = Retention {
            rds: Rds::Unreadable,
            ..seconds.clone()
        };
        assert_eq!(unreadable.seconds(), Some(600), "the variables decide");
    }

    #[test]
    fn retention_against_the_schedule() {
        let maria = v("10.11.19-MariaDB");
        let at = |s: u64| Retention {
            expire_seconds: Some(s),
            ..Retention::default()
        };
        let fail = retention_check(&maria, &at(299), &limits());
        assert_eq!(fail.status, Status::Fail, "{fail:?}");
        assert!(
            fail.fix
                .unwrap()
                .contains("binlog_expire_logs_seconds = '3900'")
        );
        assert_eq!(
            retention_check(&maria, &at(300), &limits()).status,
            Status::Warn
        );
        assert_eq!(
            retention_check(&maria, &at(3899), &limits()).status,
            Status::Warn
        );
        assert_eq!(
            retention_check(&maria, &at(3900), &limits()).status,
            Status::Ok
        );
        assert_eq!(
            retention_check(&maria, &Retention::default(), &limits()).status,
            Status::Ok
        );
        let sized = Retention {
            total_size_limit: Some(1 << 30),
            ..Retention::default()
        };
        let c = retention_check(&maria, &sized, &limits());
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.unwrap().contains("max_binlog_total_size"));
        let rds_null = Retention {
            rds: Rds::Hours(None),
            ..Retention::default()
        };
        let c = retention_check(&v("8.0.36"), &rds_null, &limits());
        assert_eq!(c.status, Status::Fail);
        assert!(c.detail.contains("NULL"), "{}", c.detail);
        assert_eq!(
            c.fix.as_deref(),
            Some("CALL mysql.rds_set_configuration('binlog retention hours', 2);")
        );
        let mysql = retention_check(&v("8.0.36"), &at(10), &limits());
        assert!(
            mysql
                .fix
                .unwrap()
                .starts_with("SET PERSIST binlog_expire_logs_seconds = '3900'")
        );
    }

    fn table(key: &[&str]) -> CapturedTable {
        use crate::change::{Column, ColumnType, TableSchema};
        let columns = ["id", "n"]
            .iter()
            .map(|n| Column {
                name: n.to_string(),
                ty: ColumnType::Int32,
                nullable: false,
                key: key.contains(n),
                source_type: "int".into(),
                field_metadata: Default::default(),
            })
            .collect();
        CapturedTable {
            config_name: "app.t".into(),
            database: "app".into(),
            table: "t".into(),
            key: key.iter().map(|k| k.to_string()).collect(),
            shape: std::sync::Arc::new(TableSchema {
                name: "app.t".into(),
                columns,
            }),
        }
    }

    #[test]
    fn tables_without_a_key_warn_and_select_matters_for_baselines() {
        assert_eq!(key_advice("t", &table(&["id"])).detail, "key (id)");
        let keyless = key_advice("t", &table(&[]));
        assert_eq!(keyless.status, Status::Warn);
        assert!(
            keyless
                .fix
                .unwrap()
                .contains("ALTER TABLE `app`.`t` ADD PRIMARY KEY")
        );
        let denied = || {
            Err((
                true,
                crate::error::Error::new(crate::error::Code::SourcePrerequisite, "denied"),
            ))
        };
        let t = table(&["id"]);
        assert_eq!(
            select_advice("s", &t, Initial::None, Ok(())).status,
            Status::Ok
        );
        assert_eq!(
            select_advice("s", &t, Initial::None, denied()).status,
            Status::Warn
        );
        let c = select_advice("s", &t, Initial::Snapshot, denied());
        assert_eq!(c.status, Status::Fail);
        assert_eq!(
            c.fix.as_deref(),
            Some("GRANT SELECT ON `app`.`t` TO '<user>'@'<host>';")
        );
        assert_eq!(quote_ident("a`b"), "`a``b`");
    }
}
