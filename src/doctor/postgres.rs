//! PostgreSQL checks of `sluice doctor`.
//!
//! Each refusal the drain can make is checked with the drain's own function:
//! [`check_wal_level`], [`catalog::resolve`] (table exists, types supported,
//! [`catalog::check_identity`]), [`slot::ensure_publication`] (with creation turned
//! off), [`check_slot_free`], [`checkpoint_lsn`] and [`slot::decide_start`]. The
//! remaining checks are advice the drain does not enforce: the `REPLICATION` attribute,
//! TOAST-able columns under `REPLICA IDENTITY DEFAULT`, retained WAL (ours and every
//! other inactive slot's), `max_slot_wal_keep_size`, PostgreSQL 18's
//! `idle_replication_slot_timeout` against the job's schedule ([`idle_timeout`]), a slot
//! the server invalidated (its `invalidation_reason`, [`slot::invalidated`]), whether a
//! failover can be followed ([`failover::follow_check`]), and on a standby what logical
//! decoding there needs ([`standby_feedback`], [`replay_lag`]). The session is read-only.

use tokio_postgres::Client;

use super::{Check, Report, human_bytes};
use crate::config::{Config, DoctorConfig, PostgresConfig};
use crate::error::{Code, Error};
use crate::position::Position;
use crate::redact::redact_url;
use crate::source::Resume;
use crate::source::postgres::catalog::{self, CapturedTable};
use crate::source::postgres::connect::{self, Session, query_error};
use crate::source::postgres::failover;
use crate::source::postgres::slot::{self, StartDecision, WAL_END};
use crate::source::postgres::{check_slot_free, check_wal_level, checkpoint_lsn, identity};

pub async fn checks(config: &Config, report: &mut Report) {
    let Some(pg) = config.source.postgres.clone() else {
        return;
    };
    let url = match config.source_url() {
        Ok(u) => u,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    let timeouts = &config.source.timeouts;
    let session = Session::control(timeouts).setup(
        "starting a read-only session",
        "SET default_transaction_read_only = on",
    );
    let client = match connect::connect(&url, &config.source.tls, timeouts, &session).await {
        Ok(c) => c,
        Err(e) => return report.push(Check::from_error("source connect", &e)),
    };
    report.push(Check::ok("source connect", redact_url(&url)));
    let limits = &config.doctor;

    report.push(Check::result(
        "wal_level",
        check_wal_level(&client).await.map(|_| "logical".to_owned()),
    ));
    report.push(role_check(&client).await);
    report.push(keep_size_check(&client).await);
    report.push(idle_timeout_check(&client, limits.schedule_interval_seconds).await);
    for check in standby_checks(&client, limits.schedule_interval_seconds).await {
        report.push(check);
    }

    let (policies, key) = super::policy::key_check(config);
    if let Some(key) = key {
        report.push(key);
    }
    let mut tables = Vec::new();
    for name in &config.source.tables {
        let check = format!("table {name}");
        match catalog::resolve(
            &client,
            std::slice::from_ref(name),
            &config.source.text_columns,
        )
        .await
        {
            Ok(mut t) => {
                let table = t.remove(0);
                report.push(toast_check(&client, &check, &table).await);
                report.push(super::baseline_key_check(
                    config,
                    name,
                    &table.key,
                    &table.shape.columns,
                ));
                if table.key.is_empty() && !config.baseline.keys.contains_key(name) {
                    report.push(lock_grant_check(&client, name, &table, config.initial).await);
                }
                if let Some(check) = super::policy::table_check(config, &policies, &table.shape) {
                    report.push(check);
                }
                tables.push(table);
            }
            Err(e) => report.push(Check::from_error(check, &e)),
        }
    }
    if tables.len() == config.source.tables.len() {
        report.push(publication_check(&client, &pg, &tables, &policies).await);
    }

    let info = match slot::slot_info(&client, &pg.slot).await {
        Ok(i) => i,
        Err(e) => return report.push(Check::from_error(format!("slot {}", pg.slot), &e)),
    };
    let invalidated = info
        .as_ref()
        .and_then(|i| i.invalidation_reason.as_deref())
        .map(|reason| slot::invalidated(&pg.slot, reason));
    report.push(match check_slot_free(&pg.slot, info.as_ref()) {
        _ if invalidated.is_some() => {
            Check::from_error(format!("slot {}", pg.slot), invalidated.as_ref().unwrap())
        }
        Ok(()) => Check::ok(
            format!("slot {}", pg.slot),
            match &info {
                Some(i) => format!(
                    "exists, inactive, wal_status {}",
                    i.wal_status.as_deref().unwrap_or("unknown")
                ),
                None => "does not exist yet".to_owned(),
            },
        ),
        Err(e) => Check::from_error(format!("slot {}", pg.slot), &e).as_warning(),
    });
    report.push(start_check(config, &client, &pg, info.as_ref()).await);
    report.push(failover_check(&client, info.as_ref()).await);
    if info.is_some() {
        report.push(match retained(&client, &pg.slot).await {
            Ok(bytes) => retained_check(
                &format!("slot {} retained WAL", pg.slot),
                &pg.slot,
                bytes,
                limits,
                true,
            ),
            Err(e) => Check::from_error(format!("slot {} retained WAL", pg.slot), &e),
        });
    }
    for check in inactive_slot_checks(&client, &pg.slot, limits).await {
        report.push(check);
    }
}

/// The source user can create and advance slots: `REPLICATION`, superuser, or (RDS /
/// Aurora) membership in `rds_replication`.
async fn role_check(client: &Client) -> Check {
    let row = client
        .query_one(
            "SELECT current_user::text, r.rolreplication, r.rolsuper, \
             COALESCE((SELECT pg_has_role(current_user, g.oid, 'MEMBER') FROM pg_roles g WHERE g.rolname = 'rds_replication'), false) \
             FROM pg_roles r WHERE r.rolname = current_user",
            &[],
        )
        .await;
    match row {
        Ok(r) => replication_role(&r.get::<_, String>(0), r.get(1), r.get(2), r.get(3)),
        Err(e) => Check::from_error("role REPLICATION", &query_error("reading pg_roles", e)),
    }
}

/// The `REPLICATION` decision, pure.
pub fn replication_role(user: &str, replication: bool, superuser: bool, rds: bool) -> Check {
    let name = "role REPLICATION";
    if replication || superuser || rds {
        let how = if superuser {
            "superuser"
        } else if replication {
            "REPLICATION"
        } else {
            "member of rds_replication"
        };
        return Check::ok(name, format!("{user}: {how}"));
    }
    Check::fail(
        name,
        format!("{user} has no REPLICATION attribute: it cannot create or advance the slot"),
        format!(
            "ALTER ROLE {} REPLICATION; (RDS/Aurora: GRANT rds_replication TO {};)",
            catalog::quote_ident(user),
            catalog::quote_ident(user)
        ),
    )
}

async fn keep_size_check(client: &Client) -> Check {
    match client
        .query_one("SELECT current_setting('max_slot_wal_keep_size')", &[])
        .await
    {
        Ok(r) => keep_size(&r.get::<_, String>(0)),
        Err(e) => Check::from_error(
            "max_slot_wal_keep_size",
            &query_error("reading max_slot_wal_keep_size", e),
        ),
    }
}

/// PostgreSQL 18's `idle_replication_slot_timeout` in seconds (`None` before 18).
async fn idle_timeout_check(client: &Client, schedule_seconds: u64) -> Check {
    let row = client
        .query_opt(
            "SELECT (setting::numeric * CASE unit WHEN 'min' THEN 60 WHEN 'ms' THEN 0.001 ELSE 1 END)::int8 \
             FROM pg_settings WHERE name = 'idle_replication_slot_timeout'",
            &[],
        )
        .await;
    match row {
        Ok(row) => idle_timeout(row.map(|r| r.get::<_, i64>(0)), schedule_seconds),
        Err(e) => Check::from_error(
            "idle_replication_slot_timeout",
            &query_error("reading idle_replication_slot_timeout", e),
        ),
    }
}

/// The idle-timeout decision, pure: `timeout` is the setting in seconds (`None`: a
/// server before 18; `0`: off). A slot is idle between two runs, so a timeout not longer
/// than the schedule's interval invalidates it every time; one shorter than two intervals,
/// after one missed or late run.
pub fn idle_timeout(timeout: Option<i64>, schedule_seconds: u64) -> Check {
    let name = "idle_replication_slot_timeout";
    let fix = format!(
        "raise idle_replication_slot_timeout well above the job's schedule ({schedule_seconds} s, doctor.schedule_interval_seconds), \
         e.g. to a day, or run the job more often; an invalidated slot means a re-baseline"
    );
    match timeout {
        None => Check::ok(name, "not on this server (PostgreSQL before 18)"),
        Some(0) => Check::ok(name, "0 (off): idle slots are never invalidated"),
        Some(t) if t as u64 <= schedule_seconds => Check::fail(
            name,
            format!(
                "{t} s, not longer than the job's schedule ({schedule_seconds} s): the slot is idle that long between runs and the server invalidates it"
            ),
            fix,
        ),
        Some(t) if (t as u64) < 2 * schedule_seconds => Check::warn(
            name,
            format!(
                "{t} s, less than two of the job's intervals ({schedule_seconds} s): one missed or late run gets the slot invalidated"
            ),
            fix,
        ),
        Some(t) => Check::ok(
            name,
            format!("{t} s, above the job's schedule ({schedule_seconds} s)"),
        ),
    }
}

/// On a standby: `hot_standby_feedback` and the physical slot it streams through (without
/// them the primary may remove catalog rows the job's slot needs, which invalidates it:
/// `rows_removed`), and how far replay lags what the standby received (a run reads only
/// what was replayed). Nothing on a primary.
async fn standby_checks(client: &Client, schedule_seconds: u64) -> Vec<Check> {
    let row = client
        .query_one(
            "SELECT pg_is_in_recovery(), current_setting('hot_standby_feedback'), \
                    current_setting('primary_slot_name', true), \
                    COALESCE((pg_last_wal_receive_lsn() - pg_last_wal_replay_lsn())::int8, 0), \
                    COALESCE(extract(epoch FROM now() - pg_last_xact_replay_timestamp())::int8, 0)",
            &[],
        )
        .await;
    let row = match row {
        Ok(row) => row,
        Err(e) => {
            return vec![Check::from_error(
                "standby",
                &query_error("reading the standby's settings", e),
            )];
        }
    };
    if !row.get::<_, bool>(0) {
        return Vec::new();
    }
    let feedback: String = row.get(1);
    let slot: Option<String> = row.get(2);
    vec![
        Check::ok(
            "standby",
            "this server is a standby: the job decodes here (PostgreSQL 16 or later; the primary needs wal_level = logical, \
             which the slot's creation checks), the publication is made on the primary (docs/postgresql.md#reading-from-a-standby)",
        ),
        standby_feedback(&feedback, slot.as_deref().unwrap_or("")),
        replay_lag(row.get(3), row.get(4), schedule_seconds),
    ]
}

/// The feedback decision, pure.
pub fn standby_feedback(hot_standby_feedback: &str, primary_slot_name: &str) -> Check {
    let name = "hot_standby_feedback";
    if hot_standby_feedback != "on" {
        return Check::fail(
            name,
            "off: the primary may vacuum away catalog rows the job's slot needs, and the standby then invalidates the slot (rows_removed)",
            "set hot_standby_feedback = on on this standby (and stream through a physical slot: primary_slot_name)",
        );
    }
    if primary_slot_name.is_empty() {
        return Check::warn(
            name,
            "on, but the standby streams without a physical slot: while it is disconnected its feedback is not kept, and the slot may be invalidated",
            "create a physical slot on the primary (SELECT pg_create_physical_replication_slot('<name>');) and set primary_slot_name = '<name>' here",
        );
    }
    Check::ok(
        name,
        format!("on, streaming through physical slot {primary_slot_name}"),
    )
}

/// The replay-lag decision, pure: `bytes` received and not yet replayed, `seconds` since
/// the last replayed transaction committed on the primary (large on an idle primary too).
pub fn replay_lag(bytes: i64, seconds: i64, schedule_seconds: u64) -> Check {
    let name = "standby replay lag";
    let detail = format!(
        "{} received and not yet replayed; the last replayed transaction committed {seconds} s ago",
        human_bytes(bytes.max(0) as u64)
    );
    if bytes > 0 && seconds.max(0) as u64 > schedule_seconds {
        return Check::warn(
            name,
            detail,
            "the standby's replay lags (a run reads only what was replayed): check the standby's load and recovery conflicts (pg_stat_database_conflicts)",
        );
    }
    Check::ok(name, detail)
}

/// Unset (`-1`) means a forgotten slot can fill the disk.
pub fn keep_size(setting: &str) -> Check {
    let name = "max_slot_wal_keep_size";
    if setting.trim() == "-1" {
        return Check::warn(
            name,
            "unset (-1): an abandoned slot retains WAL until the disk is full",
            "set max_slot_wal_keep_size (e.g. '50GB', well above the WAL written between two runs); a slot past it is invalidated and its job must re-baseline, which beats a full disk",
        );
    }
    Check::ok(name, setting.to_owned())
}

/// A keyless table's baseline pins its snapshot with `LOCK TABLE … IN SHARE MODE`, which
/// PostgreSQL allows only with UPDATE, DELETE or TRUNCATE on the table (17: MAINTAIN, not
/// probed here): without one the baseline is refused, so this fails with `initial:
/// snapshot` and warns otherwise (a later re-baseline would need it).
async fn lock_grant_check(
    client: &tokio_postgres::Client,
    name: &str,
    table: &catalog::CapturedTable,
    initial: crate::config::Initial,
) -> Check {
    let check = format!("table {name} baseline lock");
    let quoted = table.quoted();
    let granted = client
        .query_one(
            "SELECT has_table_privilege($1, 'UPDATE') OR has_table_privilege($1, 'DELETE') \
             OR has_table_privilege($1, 'TRUNCATE')",
            &[&quoted],
        )
        .await;
    match granted {
        Ok(row) if row.get::<_, bool>(0) => Check::ok(
            check,
            "LOCK TABLE … IN SHARE MODE allowed (pins the keyless baseline)",
        ),
        Ok(_) => {
            let failed = Check::fail(
                check,
                "the source user may not LOCK TABLE … IN SHARE MODE, which pins the baseline of a table without a key",
                format!(
                    "GRANT UPDATE ON {quoted} TO <source user>; (sluice holds the lock for milliseconds and never writes; PostgreSQL 17: GRANT MAINTAIN) — or give {name} a primary key"
                ),
            );
            if initial == crate::config::Initial::Snapshot {
                failed
            } else {
                failed.as_warning()
            }
        }
        Err(e) => Check::from_error(check, &query_error("reading the table's privileges", e)),
    }
}

/// `REPLICA IDENTITY DEFAULT` (or an index) with TOAST-able non-key columns: an UPDATE
/// that leaves such a column unchanged does not carry its value.
async fn toast_check(client: &Client, name: &str, table: &CapturedTable) -> Check {
    let row = client
        .query_one(
            "SELECT c.relreplident::text, \
             COALESCE(array_agg(a.attname::text ORDER BY a.attnum) FILTER (WHERE a.attstorage <> 'p'), '{}') \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             WHERE n.nspname = $1 AND c.relname = $2 GROUP BY c.relreplident",
            &[&table.schema, &table.table],
        )
        .await;
    match row {
        Ok(r) => {
            let toastable: Vec<String> = r.get(1);
            let toastable: Vec<String> = toastable
                .into_iter()
                .filter(|c| !table.key.contains(c))
                .collect();
            toast_advice(
                name,
                &table.config_name,
                &r.get::<_, String>(0),
                &table.key,
                &toastable,
            )
        }
        Err(e) => Check::from_error(name, &query_error("reading pg_attribute", e)),
    }
}

/// The TOAST advice, pure (the identity rule itself already passed).
pub fn toast_advice(
    name: &str,
    table: &str,
    replident: &str,
    key: &[String],
    toastable: &[String],
) -> Check {
    let identity = match replident {
        "f" => "REPLICA IDENTITY FULL".to_owned(),
        "i" => format!("replica-identity index ({})", key.join(", ")),
        _ => format!("primary key ({})", key.join(", ")),
    };
    if replident == "f" || toastable.is_empty() {
        return Check::ok(name, identity);
    }
    Check::warn(
        name,
        format!(
            "{identity}; TOAST-able column(s) {} are not in UPDATE images when unchanged",
            toastable.join(", ")
        ),
        format!(
            "ALTER TABLE {table} REPLICA IDENTITY FULL; (or accept unchanged TOAST values arriving as unchanged)"
        ),
    )
}

async fn publication_check(
    client: &Client,
    pg: &PostgresConfig,
    tables: &[CapturedTable],
    policies: &crate::policy::Policies,
) -> Check {
    let name = format!("publication {}", pg.publication);
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&pg.publication],
        )
        .await;
    match exists {
        Err(e) => return Check::from_error(name, &query_error("reading pg_publication", e)),
        Ok(None) if pg.create => {
            return Check::ok(
                name,
                "does not exist yet; the first run creates it (the source user must own the tables)",
            );
        }
        Ok(_) => {}
    }
    let probe = PostgresConfig {
        create: false,
        adopt_slot: false,
        ..pg.clone()
    };
    match slot::ensure_publication(client, &probe, tables, policies).await {
        Ok(()) => Check::ok(
            name,
            "publishes insert, update, delete, truncate of every configured table",
        ),
        // sluice manages it: a column list or filter of the job's policy is set by the
        // next run (the drain's rule), anything else stays a refusal.
        Err(e)
            if pg.create
                && !policies.is_empty()
                && e.code() == crate::error::Code::SourcePublicationFiltered =>
        {
            Check::warn(
                name,
                e.message().to_owned(),
                "the next drain sets the publication to the job's policies (source.postgres.create: true); a filter no policy of the job names is refused there",
            )
        }
        Err(e) => Check::from_error(name, &e),
    }
}

/// The checkpoint against the slot, by the drain's [`slot::decide_start`].
async fn start_check(
    config: &Config,
    client: &Client,
    pg: &PostgresConfig,
    info: Option<&slot::SlotInfo>,
) -> Check {
    let name = "checkpoint vs slot";
    let stored = match crate::state::open(config).await {
        Ok(store) => store.load_checkpoint(&config.job).await,
        Err(e) => Err(e),
    };
    let stored = match stored {
        Ok(s) => s,
        Err(e) => return Check::from_error(name, &e),
    };
    let (source_identity, database) = match identity(client, pg).await {
        Ok(i) => i,
        Err(e) => return Check::from_error(name, &e),
    };
    let checkpoint = match stored {
        None => None,
        Some(cp) => {
            let resume = Position::parse_tagged(&cp.position).map(|position| Resume {
                position,
                source_identity: cp.source_identity.clone(),
            });
            let facts = match failover::server_version_num(client).await {
                Ok(version) => failover::facts(version, info),
                Err(e) => return Check::from_error(name, &e),
            };
            match resume.and_then(|r| checkpoint_lsn(&r, &source_identity, &pg.slot, &facts)) {
                Ok(lsn) => Some(lsn),
                Err(e) => return Check::from_error(name, &e),
            }
        }
    };
    match slot::decide_start(&pg.slot, info, checkpoint, &database) {
        Ok(StartDecision::CreateSlot) if pg.create => {
            Check::ok(name, "no checkpoint and no slot: the first run creates the slot")
        }
        Ok(StartDecision::CreateSlot) => Check::from_error(
            name,
            &Error::new(Code::SourcePrerequisite, format!("replication slot {} does not exist", pg.slot))
                .hint(format!("run SELECT pg_create_logical_replication_slot('{}', 'pgoutput'); as a user with REPLICATION, or set source.postgres.create: true", pg.slot)),
        ),
        Ok(StartDecision::AtSlot(at)) => Check::ok(name, format!("the next run resumes at {at}")),
        Ok(StartDecision::CatchUp(cp)) => Check::ok(
            name,
            format!("the slot is behind the checkpoint {cp} (a run stopped between checkpoint and ack); the next run advances it"),
        ),
        Err(e) => Check::from_error(name, &e),
    }
}

/// Whether the job can follow a failover to a standby ([`failover::follow_check`]).
async fn failover_check(client: &Client, info: Option<&slot::SlotInfo>) -> Check {
    let name = "failover";
    let standby_slots: Option<String> = client
        .query_one(
            "SELECT current_setting('synchronized_standby_slots', true)",
            &[],
        )
        .await
        .ok()
        .and_then(|row| row.get(0));
    match slot::server_kind(client).await {
        Ok((_, true)) => Check::warn(
            name,
            "this server is a standby: a slot made here cannot be a failover slot, so a promotion of this standby is followed by a re-baseline",
            "to follow failovers without a re-baseline, read the primary with a failover slot (PostgreSQL 17 or later, docs/postgresql.md#failover)",
        ),
        Ok((version, false)) => {
            match failover::follow_check(&failover::facts(version, info), standby_slots.as_deref())
            {
                Ok(detail) => Check::ok(name, detail),
                Err((detail, fix)) => Check::warn(name, detail, fix),
            }
        }
        Err(e) => Check::from_error(name, &e),
    }
}

async fn retained(client: &Client, slot: &str) -> Result<u64, Error> {
    let row = client
        .query_one(
            &format!(
                "SELECT COALESCE((({}) - restart_lsn)::int8, 0) FROM pg_replication_slots WHERE slot_name = $1",
                WAL_END
            ),
            &[&slot],
        )
        .await
        .map_err(|e| query_error("reading the slot's retained WAL", e))?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// The retained-WAL decision, pure: `ours` is this job's slot (the fix is to run the job
/// more often); another slot's fix is to drop it if nothing uses it.
pub fn retained_check(
    name: &str,
    slot: &str,
    bytes: u64,
    limits: &DoctorConfig,
    ours: bool,
) -> Check {
    let detail = format!("{} of WAL retained", human_bytes(bytes));
    let fix = if ours {
        "run the job more often (or longer: --max-duration) so it keeps up; the retained WAL is released at each ack".to_owned()
    } else {
        format!(
            "if nothing consumes slot {slot} any more, drop it: SELECT pg_drop_replication_slot('{slot}');"
        )
    };
    if bytes >= limits.retained_wal_fail_bytes {
        Check::fail(
            name,
            format!(
                "{detail} (fail threshold {})",
                human_bytes(limits.retained_wal_fail_bytes)
            ),
            fix,
        )
    } else if bytes >= limits.retained_wal_warn_bytes {
        Check::warn(
            name,
            format!(
                "{detail} (warn threshold {})",
                human_bytes(limits.retained_wal_warn_bytes)
            ),
            fix,
        )
    } else {
        Check::ok(name, detail)
    }
}

/// Every other inactive slot in the cluster retaining WAL above the warn threshold (WAL
/// is cluster-wide: an abandoned slot of any database fills the same disk).
async fn inactive_slot_checks(client: &Client, ours: &str, limits: &DoctorConfig) -> Vec<Check> {
    let rows = client
        .query(
            &format!(
                "SELECT slot_name::text, COALESCE(database::text, ''), COALESCE((({}) - restart_lsn)::int8, 0) \
                 FROM pg_replication_slots WHERE NOT active AND slot_name <> $1 ORDER BY 3 DESC",
                WAL_END
            ),
            &[&ours],
        )
        .await;
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            return vec![Check::from_error(
                "inactive slots",
                &query_error("reading pg_replication_slots", e),
            )];
        }
    };
    let mut checks = Vec::new();
    let mut quiet = 0;
    for row in &rows {
        let (name, db, bytes): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
        let bytes = bytes.max(0) as u64;
        if bytes < limits.retained_wal_warn_bytes {
            quiet += 1;
            continue;
        }
        let label = format!("inactive slot {name} (db {db})");
        checks.push(retained_check(&label, &name, bytes, limits, false));
    }
    checks.push(Check::ok(
        "inactive slots",
        format!(
            "{} other inactive slot(s); {} retain(s) at least {}",
            rows.len(),
            rows.len() - quiet,
            human_bytes(limits.retained_wal_warn_bytes)
        ),
    ));
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn retained_thresholds() {
        let limits = DoctorConfig {
            retained_wal_warn_bytes: 10,
            retained_wal_fail_bytes: 100,
            ..DoctorConfig::default()
        };
        assert_eq!(
            retained_check("n", "s", 9, &limits, true).status,
            Status::Ok
        );
        assert_eq!(
            retained_check("n", "s", 10, &limits, true).status,
            Status::Warn
        );
        let other = retained_check("n", "old", 100, &limits, false);
        assert_eq!(other.status, Status::Fail);
        assert!(
            other
                .fix
                .unwrap()
                .contains("pg_drop_replication_slot('old')")
        );
    }

    #[test]
    fn the_idle_timeout_is_weighed_against_the_schedule() {
        assert_eq!(idle_timeout(None, 300).status, Status::Ok);
        assert_eq!(idle_timeout(Some(0), 300).status, Status::Ok);
        let fail = idle_timeout(Some(300), 300);
        assert_eq!(fail.status, Status::Fail);
        assert!(fail.fix.unwrap().contains("idle_replication_slot_timeout"));
        assert_eq!(idle_timeout(Some(599), 300).status, Status::Warn);
        assert_eq!(idle_timeout(Some(86_400), 300).status, Status::Ok);
    }

    #[test]
    fn a_standby_needs_feedback_through_a_physical_slot() {
        assert_eq!(standby_feedback("off", "s").status, Status::Fail);
        assert_eq!(standby_feedback("on", "").status, Status::Warn);
        assert_eq!(standby_feedback("on", "s").status, Status::Ok);
        assert_eq!(replay_lag(0, 10_000, 300).status, Status::Ok);
        assert_eq!(replay_lag(1 << 20, 10, 300).status, Status::Ok);
        assert_eq!(replay_lag(1 << 20, 900, 300).status, Status::Warn);
    }

    #[test]
    fn advice() {
        assert_eq!(keep_size("-1").status, Status::Warn);
        assert_eq!(keep_size("10GB").status, Status::Ok);
        assert_eq!(
            replication_role("u", false, false, false).status,
            Status::Fail
        );
        assert_eq!(replication_role("u", false, false, true).status, Status::Ok);
        let key = vec!["id".to_string()];
        let warn = toast_advice("t", "public.t", "d", &key, &["body".into()]);
        assert_eq!(warn.status, Status::Warn);
        assert!(warn.fix.unwrap().contains("REPLICA IDENTITY FULL"));
        assert_eq!(
            toast_advice("t", "public.t", "f", &[], &["body".into()]).status,
            Status::Ok
        );
        assert_eq!(
            toast_advice("t", "public.t", "d", &key, &[]).status,
            Status::Ok
        );
    }
}
