//! PostgreSQL source: a logical slot read through SQL functions with `pgoutput`.
//!
//! Prerequisites: PostgreSQL ≥ 14 with `wal_level = logical`; a source user with the
//! `REPLICATION` attribute (to create and advance the slot) and `SELECT` on the captured
//! tables; the publication created by the tables' owner (or by sluice when the user owns
//! them); each table has a primary key, a replica-identity index, or `REPLICA IDENTITY
//! FULL`. No replication connection and no `pg_hba.conf` replication line are needed.
//!
//! This module only wires the parts: [`connect`] (TLS gate, the bounded establishment of
//! `establish`, each session's `statement_timeout`), [`catalog`] (tables and
//! types at open), [`slot`] (publication, slot, the start decision), [`stream`] (pages of
//! decoded changes), [`resolve`] (each column's output type and decoder), [`render`]
//! (text output of binary cells, by the server), [`pgoutput`] and [`types`] (pure decoders), [`unchanged`] (unchanged TOAST values
//! completed from a full old image).

pub mod baseline_read;
pub mod catalog;
pub mod connect;
pub mod copy_binary;
pub mod errors;
mod establish;
pub mod failover;
pub mod orphan;
pub mod paging;
pub mod pgoutput;
pub mod published;
pub mod render;
pub mod resolve;
pub mod slot;
pub mod stream;
pub mod types;
pub mod unchanged;

use crate::config::{Config, PostgresConfig, invalid};
use crate::error::{Code, Error, Result};
use crate::position::{PgLsn, Position};
use crate::source::{ChangeStream, Resume, StreamInfo};
use connect::Session;
use slot::StartDecision;

/// Checks the `source.postgres` block: slot and publication names, page size.
pub fn check_config(config: &Config) -> Result<()> {
    let Some(pg) = &config.source.postgres else {
        return Ok(());
    };
    for (what, name) in [("slot", &pg.slot), ("publication", &pg.publication)] {
        if name.is_empty()
            || name.len() > 63
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(invalid(format!(
                "source.postgres.{what} {name:?} is not a valid name"
            ))
            .hint("use 1-63 lower-case letters, digits or '_'"));
        }
    }
    if pg.page_changes == Some(0) {
        return Err(invalid("source.postgres.page_changes must be at least 1"));
    }
    if pg.page_wal_bytes == Some(0) {
        return Err(invalid("source.postgres.page_wal_bytes must be at least 1"));
    }
    Ok(())
}

/// The oids of the captured tables and of every partition under them: a change naming
/// one of these is never skipped as a table the job does not capture.
async fn protected_oids(
    client: &tokio_postgres::Client,
    tables: &[catalog::CapturedTable],
) -> Result<std::collections::HashSet<u32>> {
    let names: Vec<String> = tables.iter().map(catalog::CapturedTable::quoted).collect();
    let rows = client
        .query(
            "SELECT r.rel::oid FROM unnest($1::text[]::regclass[]) r(rel) \
             UNION SELECT t.relid::oid FROM unnest($1::text[]::regclass[]) r(rel), LATERAL pg_partition_tree(r.rel) t",
            &[&names],
        )
        .await
        .map_err(|e| connect::query_error("reading the captured tables' oids", e))?;
    Ok(rows.iter().map(|r| r.get::<_, u32>(0)).collect())
}

/// Makes the publication cover every table of `source.tables` (see
/// [`slot::ensure_publication`]) without opening a stream: a table's baseline must not
/// read before its changes are published.
pub async fn prepare_capture(config: &Config) -> Result<()> {
    let pg = config.source.postgres.clone().ok_or_else(|| {
        Error::new(Code::ConfigInvalid, "source.postgres is missing")
            .hint("add `postgres: { slot: <name>, publication: <name> }` under source")
    })?;
    let url = config.source_url()?;
    let name = orphan::application_name(&config.job);
    let timeouts = &config.source.timeouts;
    let session = Session::control(timeouts).named(&name);
    let control = connect::connect(&url, &config.source.tls, timeouts, &session).await?;
    // A table gone from the catalog is not published again: its backlog is read as it was.
    let (tables, _gone) =
        catalog::resolve_present(&control, &config.source.tables, &config.source.text_columns)
            .await?;
    let policies = crate::policy::Policies::of(config)?;
    slot::ensure_publication(&control, &pg, &tables, &policies).await
}

/// Opens the PostgreSQL stream at `resume` (or creates the stream's resources on a first
/// run), fixing the read bound.
pub async fn open(
    config: &Config,
    resume: Option<&Resume>,
    policies: &crate::policy::Policies,
) -> Result<Box<dyn ChangeStream>> {
    let pg = config.source.postgres.clone().ok_or_else(|| {
        Error::new(Code::ConfigInvalid, "source.postgres is missing")
            .hint("add `postgres: { slot: <name>, publication: <name> }` under source")
    })?;
    let url = config.source_url()?;
    let timeouts = &config.source.timeouts;
    let name = orphan::application_name(&config.job);
    // Text output (text cells of the stream, cells the server renders) prints the same
    // on every path and run. The control connection's statements are short (see
    // `Session::control`); the data connection's page COPY streams as long as the drain
    // consumes it, bounded client-side by page_seconds and read_seconds.
    let text = "configuring the session's text output";
    let control = Session::control(timeouts)
        .named(&name)
        .setup(text, types::TEXT_OUTPUT_SETTINGS);
    let data = Session::bulk()
        .named(&name)
        .setup(text, types::TEXT_OUTPUT_SETTINGS);
    let control = connect::connect(&url, &config.source.tls, timeouts, &control).await?;
    let data = connect::connect(&url, &config.source.tls, timeouts, &data).await?;

    check_wal_level(&control).await?;
    let (identity, database) = identity(&control, &pg).await?;
    let info = slot::slot_info(&control, &pg.slot).await?;
    let checkpoint = match resume {
        Some(resume) => {
            let version = failover::server_version_num(&control).await?;
            let facts = failover::facts(version, info.as_ref());
            Some(checkpoint_lsn(resume, &identity, &pg.slot, &facts)?)
        }
        None => None,
    };
    let (mut tables, gone) =
        catalog::resolve_present(&control, &config.source.tables, &config.source.text_columns)
            .await?;
    if let Some(first) = gone.first()
        && checkpoint.is_none()
    {
        // Nothing of it was ever streamed: the configuration names a table that is not there.
        return Err(catalog::resolve(
            &control,
            std::slice::from_ref(first),
            &config.source.text_columns,
        )
        .await
        .err()
        .unwrap_or_else(|| {
            Error::new(
                Code::SourcePrerequisite,
                format!("table {first} does not exist"),
            )
        }));
    }
    // A policy that does not fit a table is refused before anything is created.
    for table in &tables {
        policies.check(&table.shape)?;
    }
    slot::ensure_publication(&control, &pg, &tables, policies).await?;
    // Under the job's lease: a backend an earlier run of this job left holding the slot
    // is ended; anyone else's is refused below.
    let info = orphan::release(&control, &config.job, &pg.slot, info).await?;
    check_slot_free(&pg.slot, info.as_ref())?;
    let start = match slot::decide_start(&pg.slot, info.as_ref(), checkpoint, &database)? {
        StartDecision::CreateSlot => slot::create_slot(&control, &pg).await?,
        StartDecision::AtSlot(at) => at,
        StartDecision::CatchUp(cp) => {
            tracing::info!(slot = %pg.slot, to = %cp, "slot behind the checkpoint (crash before ack): advancing it");
            slot::advance(&control, &pg.slot, cp).await?;
            cp
        }
    };
    let protected = protected_oids(&control, &tables).await?;
    let bound = read_bound(&control).await?.max(start);
    let info = StreamInfo {
        source_identity: identity,
        start: Position::Postgres(start),
        bound: Position::Postgres(bound),
        tables: tables.iter().map(|t| t.shape.clone()).collect(),
    };
    for name in &gone {
        tracing::warn!(
            code = Code::SourceTableGone.as_str(),
            table = %name,
            "table {name} no longer exists (dropped, or renamed) while the job has a checkpoint: its changes still in the backlog are written; \
             remove it from source.tables (or name its new name there: that table is then baselined)"
        );
        tables.push(catalog::CapturedTable::gone(name));
    }
    Ok(Box::new(
        stream::PgStream::new(
            info,
            data,
            control,
            pg.slot.clone(),
            pg.publication.clone(),
            paging::Paging::new(pg.page_wal_bytes, pg.page_changes),
            bound,
            tables,
            start,
        )
        .with_timeouts(timeouts.read(), timeouts.page())
        .with_protected(protected),
    ))
}

/// True when the job's slot exists (asked before a run without a checkpoint opens the
/// stream, so the job can refuse a slot it cannot prove its own).
pub async fn slot_exists(config: &Config) -> Result<bool> {
    let Some(pg) = &config.source.postgres else {
        return Ok(false);
    };
    let timeouts = &config.source.timeouts;
    let session = Session::control(timeouts);
    let client = connect::connect(
        &config.source_url()?,
        &config.source.tls,
        timeouts,
        &session,
    )
    .await?;
    Ok(slot::slot_info(&client, &pg.slot).await?.is_some())
}

/// The server-side name of the job's database — `pg:system=<system identifier>/db=<name>/
/// oid=<oid>`, the stream's source identity without its slot — as the server reports it,
/// whatever host name or address the URL uses (what resource claims are keyed on).
pub async fn server_name(config: &Config) -> Result<String> {
    let Some(pg) = &config.source.postgres else {
        return Err(Error::new(
            Code::ConfigInvalid,
            "source.postgres is missing",
        ));
    };
    let timeouts = &config.source.timeouts;
    let session = Session::control(timeouts);
    let client = connect::connect(
        &config.source_url()?,
        &config.source.tls,
        timeouts,
        &session,
    )
    .await?;
    let (identity, _) = identity(&client, pg).await?;
    Ok(identity
        .rsplit_once("/slot=")
        .map_or(identity.clone(), |(server, _)| server.to_owned()))
}

/// Refuses a slot another server process is streaming from (also used by `doctor`).
pub fn check_slot_free(slot: &str, info: Option<&slot::SlotInfo>) -> Result<()> {
    if let Some(pid) = info.and_then(|s| s.active_pid) {
        return Err(Error::new(
            Code::SourceSlotBusy,
            format!("replication slot {slot} is in use by server process {pid}"),
        )
        .hint(format!("another consumer is streaming from this slot (not a session of this job, whose own left-overs are ended automatically); a slot has one consumer — give this job its own slot, or see who it is: SELECT application_name, client_addr, backend_start FROM pg_stat_activity WHERE pid = {pid}")));
    }
    Ok(())
}

/// Refuses a server whose `wal_level` is not `logical` (also used by `doctor`).
pub async fn check_wal_level(client: &tokio_postgres::Client) -> Result<()> {
    let row = client
        .query_one("SELECT current_setting('wal_level')", &[])
        .await
        .map_err(|e| connect::query_error("reading wal_level", e))?;
    let level: String = row.get(0);
    if level != "logical" {
        return Err(Error::new(Code::SourcePrerequisite, format!("wal_level is {level}, not logical"))
            .hint("set wal_level = logical in postgresql.conf (RDS: rds.logical_replication = 1 in the parameter group) and restart the server"));
    }
    Ok(())
}

/// The source identity: cluster system identifier, database name and oid, and slot.
pub async fn identity(
    client: &tokio_postgres::Client,
    pg: &PostgresConfig,
) -> Result<(String, String)> {
    let row = client
        .query_one(
            "SELECT current_database()::text, (SELECT oid::int8 FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await
        .map_err(|e| connect::query_error("reading the database identity", e))?;
    let database: String = row.get(0);
    let oid: i64 = row.get(1);
    // pg_control_system() is executable by default; a hardened server may revoke it, and
    // then the cluster is identified by database oid alone.
    let system = match client
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
    {
        Ok(row) => row.get::<_, String>(0),
        Err(_) => "unknown".to_owned(),
    };
    // The timeline changes with a point-in-time restore or a promotion: the WAL after
    // the fork is another history, so a checkpoint from the old timeline must not be
    // resumed silently. Unreadable (revoked) means the identity carries none.
    let timeline = match client.query_one(TIMELINE, &[]).await {
        Ok(row) => format!("/tli={}", row.get::<_, i64>(0)),
        Err(_) => match client
            .query_one("SELECT timeline_id::int8 FROM pg_control_checkpoint()", &[])
            .await
        {
            Ok(row) => format!("/tli={}", row.get::<_, i64>(0)),
            Err(_) => String::new(),
        },
    };
    Ok((
        format!(
            "pg:system={system}/db={database}/oid={oid}/slot={}{timeline}",
            pg.slot
        ),
        database,
    ))
}

/// The server's current timeline. On a primary it is the one its WAL is written on now
/// (the first 8 hex digits of the current WAL file's name): `pg_control_checkpoint()`
/// keeps the old timeline until the checkpoint after a promotion completes, and a run in
/// between would not see the promotion. A standby has no current WAL file of its own
/// (`pg_walfile_name` refuses to run in recovery); there the last restartpoint's
/// timeline is the one it replays.
const TIMELINE: &str = "SELECT CASE WHEN pg_is_in_recovery() \
     THEN (SELECT timeline_id::int8 FROM pg_control_checkpoint()) \
     ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END";

/// `identity` without its timeline, and the timeline when it carries one.
fn split_timeline(identity: &str) -> (&str, Option<&str>) {
    match identity.rsplit_once("/tli=") {
        Some((base, tli)) => (base, Some(tli)),
        None => (identity, None),
    }
}

/// Checks a checkpoint written for source `stored` may resume on source `current`: the
/// same cluster, database and slot, and the same timeline — or another one the job can
/// follow ([`failover::check_timeline`]). A checkpoint written before timelines were
/// recorded, or by a server whose timeline is unreadable, matches on the rest.
fn check_same_source(
    stored: &str,
    current: &str,
    slot: &str,
    facts: &failover::FailoverFacts,
) -> Result<()> {
    let (stored_base, stored_tli) = split_timeline(stored);
    let (current_base, current_tli) = split_timeline(current);
    if stored_base != current_base {
        return Err(Error::new(
            Code::SourceForeignCheckpoint,
            format!(
                "the checkpoint was written for source {stored:?}, but this source is {current:?}"
            ),
        )
        .hint("the URL points at another server or database (or it was restored from a backup); point source.url at the original, or clear the job's state with `sluice state clear --config FILE` and re-baseline"));
    }
    if let (Some(was), Some(now)) = (stored_tli, current_tli) {
        failover::check_timeline(slot, was, now, facts)?;
    }
    Ok(())
}

/// Checks the checkpoint belongs to this source (`facts`: the server's failover facts
/// for `slot`, when the timeline changed) and returns its LSN.
pub fn checkpoint_lsn(
    resume: &Resume,
    identity: &str,
    slot: &str,
    facts: &failover::FailoverFacts,
) -> Result<PgLsn> {
    check_same_source(&resume.source_identity, identity, slot, facts)?;
    match &resume.position {
        Position::Postgres(lsn) => Ok(*lsn),
        other => Err(Error::new(
            Code::SourceForeignCheckpoint,
            format!("the checkpoint {other} is not a PostgreSQL position"),
        )
        .hint("the job's state was written by another engine's source; point source.url at the original server, or clear the job's state with `sluice state clear --config FILE` and re-baseline")),
    }
}

/// The run's read bound: the server's flush position — on a standby its replay position
/// ([`slot::WAL_END`]).
async fn read_bound(client: &tokio_postgres::Client) -> Result<PgLsn> {
    let row = client
        .query_one(&format!("SELECT ({})::text", slot::WAL_END), &[])
        .await
        .map_err(|e| connect::query_error("reading the end of the WAL", e))?;
    let text: String = row.get(0);
    text.parse()
        .map_err(|e| Error::new(Code::SourceProtocol, "the server returned a bad LSN").source(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "pg:system=7312/db=shop/oid=16384/slot=sluice_orders";

    /// A PostgreSQL 15 server (no failover slots) with the job's slot.
    const PG15: failover::FailoverFacts = failover::FailoverFacts {
        version_num: 150_008,
        slot_exists: true,
        slot_failover: false,
        slot_synced: false,
    };

    fn check_same_source(stored: &str, current: &str) -> Result<()> {
        super::check_same_source(stored, current, "sluice_orders", &PG15)
    }

    #[test]
    fn a_promoted_standby_with_the_synced_failover_slot_continues_on_its_timeline() {
        let synced = failover::FailoverFacts {
            version_num: 170_002,
            slot_failover: true,
            slot_synced: true,
            ..PG15
        };
        let (was, now) = (format!("{BASE}/tli=1"), format!("{BASE}/tli=2"));
        super::check_same_source(&was, &now, "sluice_orders", &synced).unwrap();
        let unsynced = failover::FailoverFacts {
            slot_synced: false,
            ..synced
        };
        let err = super::check_same_source(&was, &now, "sluice_orders", &unsynced).unwrap_err();
        assert_eq!(err.code(), Code::SourceForeignCheckpoint);
        // Another cluster is refused whatever its slot.
        let other = now.replace("system=7312", "system=9999");
        let err = super::check_same_source(&was, &other, "sluice_orders", &synced).unwrap_err();
        assert_eq!(err.code(), Code::SourceForeignCheckpoint);
    }

    #[test]
    fn a_checkpoint_resumes_only_on_its_own_timeline() {
        let on = |tli: u32| format!("{BASE}/tli={tli}");
        assert!(check_same_source(&on(1), &on(1)).is_ok());
        let forked = check_same_source(&on(1), &on(2)).unwrap_err();
        assert_eq!(forked.code(), Code::SourceForeignCheckpoint);
        assert!(forked.to_string().contains("timeline 1"), "{forked}");
        assert!(forked.to_string().contains("timeline 2"), "{forked}");
    }

    #[test]
    fn an_identity_without_a_timeline_matches_on_the_rest() {
        // Written before timelines were recorded, or by a server that hides them.
        assert!(check_same_source(BASE, &format!("{BASE}/tli=3")).is_ok());
        assert!(check_same_source(&format!("{BASE}/tli=3"), BASE).is_ok());
        let other = BASE.replace("oid=16384", "oid=16385");
        let err = check_same_source(&format!("{other}/tli=1"), &format!("{BASE}/tli=1"));
        assert_eq!(err.unwrap_err().code(), Code::SourceForeignCheckpoint);
    }
}
