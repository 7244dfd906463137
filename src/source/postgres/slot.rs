//! The stream's server-side resources — publication and logical slot — and the decision
//! of where a run may start.
//!
//! Guarantees: the publication is created before the slot (pgoutput reads the
//! publication through the slot's historic snapshot, so a publication created later
//! would be "missing" for the WAL in between); a checkpoint is never silently re-anchored:
//! a vanished or invalidated slot, or a slot moved past the checkpoint by someone else, is
//! `SLUICE_SOURCE_LOG_GAP`; a checkpoint from another server or database is
//! `SLUICE_SOURCE_FOREIGN_CHECKPOINT`. [`decide_start`] is a pure function so `doctor`
//! and the drain refuse by the same rule. [`create_slot_sql`] creates the job's slot with
//! `failover = true` on a primary that supports it (≥ 17, so a standby with
//! `sync_replication_slots = on` keeps a copy) and with the two-argument call before and
//! on a standby (which refuses failover slots). From PostgreSQL 18 on the publication
//! publishes stored generated columns ([`publication_options`]), which the catalog then
//! captures.

use tokio_postgres::Client;

use super::catalog::{CapturedTable, quote_ident};
use super::connect::query_error;
use super::published::{Definition, Definitions};
use crate::config::PostgresConfig;
use crate::error::{Code, Error, Result};
use crate::policy::Policies;
use crate::position::PgLsn;

/// What `pg_replication_slots` says about our slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotInfo {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub confirmed_flush: Option<PgLsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
    pub active_pid: Option<i32>,
    /// `failover` (PostgreSQL ≥ 17; false before).
    pub failover: bool,
    /// `synced` (PostgreSQL ≥ 17; false before): synchronized from a primary.
    pub synced: bool,
    /// Why the server invalidated the slot: `invalidation_reason` (PostgreSQL ≥ 17:
    /// `wal_removed`, `rows_removed`, `wal_level_insufficient`, 18's `idle_timeout`), or on
    /// 16 `rows_removed` when the slot is `conflicting`; `None` while it is valid.
    pub invalidation_reason: Option<String>,
}

/// The server's current end of WAL as an expression: the flush position on a primary, the
/// replay position on a standby (where `pg_current_wal_*` refuse to run) — what a run's
/// read bound and the WAL a slot retains are measured against.
pub const WAL_END: &str = "CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() \
     ELSE pg_current_wal_flush_lsn() END";

/// Where the run starts, and whether the slot must first catch up with the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartDecision {
    /// Create the slot; start wherever it is created.
    CreateSlot,
    /// Start at the slot's position (first run on a pre-created slot, or normal resume).
    AtSlot(PgLsn),
    /// The checkpoint is ahead of the slot (a crash between checkpoint and ack): advance
    /// the slot to the checkpoint, then start there.
    CatchUp(PgLsn),
}

/// Decides where to start from the slot's state and the stored checkpoint.
pub fn decide_start(
    slot_name: &str,
    slot: Option<&SlotInfo>,
    checkpoint: Option<PgLsn>,
    database: &str,
) -> Result<StartDecision> {
    let Some(slot) = slot else {
        return match checkpoint {
            None => Ok(StartDecision::CreateSlot),
            Some(cp) => Err(log_gap(format!(
                "replication slot {slot_name} does not exist, but the checkpoint is at {cp}: the changes after it are gone"
            ))),
        };
    };
    if slot.plugin.as_deref() != Some("pgoutput") {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "slot {slot_name} exists but is not a pgoutput logical slot (plugin {:?})",
                slot.plugin
            ),
        )
        .hint("choose another source.postgres.slot, or drop that slot if nothing uses it"));
    }
    if slot.database.as_deref() != Some(database) {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "slot {slot_name} belongs to database {:?}, not {database:?}",
                slot.database
            ),
        )
        .hint("slots are per database; use a slot name of this database"));
    }
    if let Some(reason) = &slot.invalidation_reason {
        return Err(invalidated(slot_name, reason));
    }
    if slot.wal_status.as_deref() == Some("lost") {
        return Err(invalidated(slot_name, "wal_removed"));
    }
    let Some(at) = slot.confirmed_flush else {
        return Err(log_gap(format!(
            "replication slot {slot_name} has no confirmed position"
        )));
    };
    match checkpoint {
        None => Ok(StartDecision::AtSlot(at)),
        Some(cp) if at == cp => Ok(StartDecision::AtSlot(at)),
        Some(cp) if at < cp => Ok(StartDecision::CatchUp(cp)),
        Some(cp) => Err(log_gap(format!(
            "replication slot {slot_name} is at {at}, past this job's checkpoint {cp}: another reader consumed changes this job never wrote"
        ))),
    }
}

/// Whether a job without a checkpoint may start from its slot, which exists already: only
/// when the job's state records that this job created it (`created_by_us`: the intent is
/// recorded before the slot is created, so a first run that died after creating it
/// resumes) or the operator set `source.postgres.adopt_slot`. Otherwise the slot may be
/// another job's, or this job's from before its state was lost, and starting from it
/// would skip what its earlier consumer read: `SLUICE_SOURCE_SLOT_NOT_OURS`.
pub fn check_adoption(slot_name: &str, created_by_us: bool, adopt_slot: bool) -> Result<()> {
    if created_by_us || adopt_slot {
        return Ok(());
    }
    Err(Error::new(
        Code::SourceSlotNotOurs,
        format!(
            "replication slot {slot_name} exists, but this job has no checkpoint and its state does not record creating the slot"
        ),
    )
    .hint(format!(
        "if the slot is another job's (or another state store's), give this job its own source.postgres.slot; \
         if it was created for this job (or its state was moved), set source.postgres.adopt_slot: true to start from it; \
         to start over, drop it (SELECT pg_drop_replication_slot('{slot_name}');) and baseline again"
    )))
}

/// The refusal of a slot the server invalidated, saying why (`reason`: its
/// `invalidation_reason`) and what keeps it from happening again.
pub fn invalidated(slot_name: &str, reason: &str) -> Error {
    let (why, prevent) = match reason {
        "wal_removed" => (
            "the WAL it needed was removed (max_slot_wal_keep_size exceeded)",
            "run the job often enough that its slot never retains more than max_slot_wal_keep_size, or raise that limit",
        ),
        "idle_timeout" => (
            "it stayed idle longer than idle_replication_slot_timeout",
            "schedule the job more often than idle_replication_slot_timeout (sluice doctor compares the two), or raise that setting",
        ),
        "rows_removed" => (
            "the catalog rows it needed were removed on the primary (on a standby: a recovery conflict)",
            "on a standby, set hot_standby_feedback = on and stream through a physical slot (primary_slot_name), so the primary keeps the rows the slot needs",
        ),
        "wal_level_insufficient" => (
            "the primary's wal_level fell below logical",
            "keep wal_level = logical on the primary",
        ),
        _ => ("", "see pg_replication_slots.invalidation_reason"),
    };
    let why = if why.is_empty() {
        format!("invalidation_reason {reason}")
    } else {
        format!("invalidation_reason {reason}: {why}")
    };
    log_gap(format!(
        "replication slot {slot_name} was invalidated by the server ({why})"
    ))
    .hint(format!(
        "the stream cannot continue without losing changes: re-baseline — `sluice state clear --config FILE`, drop the slot \
         (SELECT pg_drop_replication_slot('{slot_name}');) and run again (the first run creates the slot and baselines); \
         then, so it does not happen again: {prevent}"
    ))
}

fn log_gap(message: String) -> Error {
    Error::new(Code::SourceLogGap, message).hint(
        "the stream cannot continue without losing changes: re-baseline the table(s) — clear the job's state \
         with `sluice state clear --config FILE`, drop the slot if it still exists, and run a new baseline; \
         make sure no other consumer uses this slot",
    )
}

/// Reads our slot's row of `pg_replication_slots`.
pub async fn slot_info(client: &Client, slot: &str) -> Result<Option<SlotInfo>> {
    let row = client
        .query_opt(
            // `failover`, `synced` and `invalidation_reason` exist from PostgreSQL 17 on,
            // `conflicting` from 16 on: read through to_jsonb so one statement serves every
            // version.
            "SELECT plugin::text, database::text, confirmed_flush_lsn::text, wal_status, active_pid, \
             COALESCE((to_jsonb(s) ->> 'failover')::bool, false), COALESCE((to_jsonb(s) ->> 'synced')::bool, false), \
             COALESCE(to_jsonb(s) ->> 'invalidation_reason', \
                      CASE WHEN (to_jsonb(s) ->> 'conflicting')::bool THEN 'rows_removed' END) \
             FROM pg_replication_slots s WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(|e| query_error("reading pg_replication_slots", e))?;
    Ok(row.map(|r| SlotInfo {
        plugin: r.get(0),
        database: r.get(1),
        confirmed_flush: r.get::<_, Option<String>>(2).and_then(|t| t.parse().ok()),
        wal_status: r.get(3),
        active_pid: r.get(4),
        failover: r.get(5),
        synced: r.get(6),
        invalidation_reason: r.get(7),
    }))
}

/// `server_version_num` of the first release with failover slots.
pub const FAILOVER_SLOTS: i32 = 170_000;

/// The statement creating the job's slot (`$1`: its name) on a server of `version_num`;
/// `standby`: the server is in recovery (a slot made on a standby cannot be a failover
/// slot).
pub fn create_slot_sql(version_num: i32, standby: bool) -> &'static str {
    if version_num >= FAILOVER_SLOTS && !standby {
        // (slot_name, plugin, temporary, twophase, failover)
        "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
    } else {
        "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')"
    }
}

/// `server_version_num`, and whether the server is a standby (`pg_is_in_recovery()`).
pub async fn server_kind(client: &Client) -> Result<(i32, bool)> {
    client
        .query_one(
            "SELECT current_setting('server_version_num')::int, pg_is_in_recovery()",
            &[],
        )
        .await
        .map(|row| (row.get(0), row.get(1)))
        .map_err(|e| query_error("reading server_version_num", e))
}

/// Creates the slot (the publication must exist already); returns its start position.
pub async fn create_slot(client: &Client, pg: &PostgresConfig) -> Result<PgLsn> {
    if !pg.create {
        return Err(Error::new(Code::SourcePrerequisite, format!("replication slot {} does not exist", pg.slot))
            .hint(format!("run SELECT pg_create_logical_replication_slot('{}', 'pgoutput'); as a user with REPLICATION and set source.postgres.adopt_slot: true, or set source.postgres.create: true", pg.slot)));
    }
    let (version, standby) = server_kind(client).await?;
    let row = client
        .query_one(create_slot_sql(version, standby), &[&pg.slot])
        .await
        .map_err(|e| query_error(&format!("creating replication slot {}", pg.slot), e))?;
    let text: String = row.get(0);
    text.parse()
        .map_err(|e| Error::new(Code::SourceProtocol, "slot creation returned a bad LSN").source(e))
}

/// Ensures the publication exists and covers every captured table for insert, update,
/// delete and truncate. With `create` (sluice manages the publication), a missing
/// publication is created, a captured table it lacks is added and a table it publishes
/// that is not captured is dropped from it; without, a missing publication or table is a
/// prerequisite error naming the statement, and an extra table is only logged (the
/// stream skips its changes).
///
/// On a standby (read-only: a job that decodes on a standby) nothing can be created or
/// altered: the publication is checked as with `create: false`, and a refusal's hint says
/// to run its statement on the primary, whose catalog the standby replays.
pub async fn ensure_publication(
    client: &Client,
    pg: &PostgresConfig,
    tables: &[CapturedTable],
    policies: &Policies,
) -> Result<()> {
    let (_, standby) = server_kind(client).await?;
    if !standby {
        return manage_publication(client, pg, tables, policies).await;
    }
    let checked = PostgresConfig {
        create: false,
        ..pg.clone()
    };
    manage_publication(client, &checked, tables, policies)
        .await
        .map_err(|e| {
            let hint = format!(
                "this server is a standby (read-only): run the statement on its primary, whose catalog the standby replays, then run the job again — {}",
                e.hint_text().unwrap_or_default()
            );
            e.hint(hint)
        })
}

/// [`ensure_publication`] on a server that can write.
async fn manage_publication(
    client: &Client,
    pg: &PostgresConfig,
    tables: &[CapturedTable],
    policies: &Policies,
) -> Result<()> {
    // `pubgencols` exists from PostgreSQL 18 on: read through to_jsonb so one statement
    // serves every version.
    let publication = client
        .query_opt(
            "SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot, \
                    COALESCE(to_jsonb(p) ->> 'pubgencols', ''), \
                    current_setting('server_version_num')::int \
             FROM pg_publication p WHERE pubname = $1",
            &[&pg.publication],
        )
        .await
        .map_err(|e| query_error("reading pg_publication", e))?;
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(|e| query_error("reading server_version_num", e))?
        .get(0);
    let definitions = Definitions::of(policies, tables, version)?;
    let table_list = tables
        .iter()
        .map(|t| definitions.clause(t))
        .collect::<Vec<_>>()
        .join(", ");
    // A partitioned table is captured as its parent: its partitions' changes are
    // published as the parent's (pgoutput would otherwise name each partition).
    let partitioned: Vec<String> = tables
        .iter()
        .filter(|t| t.partitioned)
        .map(CapturedTable::quoted)
        .collect();
    let Some(row) = publication else {
        let create = format!(
            "CREATE PUBLICATION {} FOR TABLE {table_list}{}",
            quote_ident(&pg.publication),
            publication_options(version, !partitioned.is_empty())
        );
        if !pg.create {
            return Err(Error::new(
                Code::SourcePrerequisite,
                format!("publication {} does not exist", pg.publication),
            )
            .hint(format!(
                "run {create}; as the tables' owner, or set source.postgres.create: true"
            )));
        }
        client
            .batch_execute(&create)
            .await
            .map_err(|e| query_error(&format!("creating publication {}", pg.publication), e))?;
        return Ok(());
    };
    let actions: [bool; 4] = [row.get(1), row.get(2), row.get(3), row.get(4)];
    if actions.iter().any(|a| !a) {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "publication {} does not publish all of insert, update, delete, truncate",
                pg.publication
            ),
        )
        .hint(format!(
            "ALTER PUBLICATION {} SET (publish = 'insert, update, delete, truncate')",
            quote_ident(&pg.publication)
        )));
    }
    if row.get::<_, bool>(0) {
        return Err(all_tables(&pg.publication, &table_list));
    }
    if version >= GENERATED_COLUMNS && row.get::<_, String>(6) != "s" {
        publish_generated_columns(client, pg, tables).await?;
    }
    if !partitioned.is_empty() && !row.get::<_, bool>(5) {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!(
                "{} is partitioned, but publication {} publishes its changes as each partition's",
                partitioned.join(", "),
                pg.publication
            ),
        )
        .hint(format!(
            "ALTER PUBLICATION {} SET (publish_via_partition_root = true); as the tables' owner: sluice captures a partitioned table as its parent",
            quote_ident(&pg.publication)
        )));
    }
    // PostgreSQL 15 adds row filters and column lists (`prqual`, `prattrs`; NULL when the
    // table has none — unlike `pg_publication_tables.attnames`, which then lists every
    // column, generated ones included).
    let filters = version >= super::published::FILTERS_SINCE;
    let current = if filters {
        client
            .query(
                "SELECT n.nspname::text, c.relname::text, pg_get_expr(pr.prqual, pr.prrelid), \
                        (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a \
                         WHERE a.attrelid = pr.prrelid AND a.attnum = ANY(pr.prattrs::int2[])) \
                 FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid \
                 JOIN pg_class c ON c.oid = pr.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE p.pubname = $1 AND (pr.prqual IS NOT NULL OR pr.prattrs IS NOT NULL)",
                &[&pg.publication],
            )
            .await
            .map_err(|e| query_error("reading pg_publication_rel", e))?
    } else {
        vec![]
    };
    // A definition that differs from the policy's is set to it where sluice manages the
    // publication and the difference is the policy's own (it has a filter or a column
    // list, or it changed since the table's baseline, which is then taken again); any
    // other difference is someone else's filter: refused, as the stream would be a subset.
    let mut filtered = Vec::new();
    let mut reconcile = Vec::new();
    for t in tables {
        let (rowfilter, published_columns): (Option<String>, Option<Vec<String>>) = current
            .iter()
            .find(|r| r.get::<_, String>(0) == t.schema && r.get::<_, String>(1) == t.table)
            .map_or((None, None), |r| (r.get(2), r.get(3)));
        let desired = definitions.of_table(t);
        let defined = rowfilter.is_some() || published_columns.is_some();
        let changed =
            policies.changed(&t.config_name) && (defined || desired != Definition::default());
        let differs = filter_difference(t, &desired, rowfilter, published_columns.as_deref());
        match differs {
            // A filter's text cannot be compared with the server's: a changed policy
            // sets it again (PostgreSQL keeps a definition that is the same).
            _ if pg.create && changed => reconcile
                .push(differs.unwrap_or_else(|| format!("{}'s policy changed", t.quoted()))),
            Some(what) if pg.create && desired != Definition::default() => reconcile.push(what),
            Some(what) => filtered.push(what),
            None => {}
        }
    }
    let published = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&pg.publication],
        )
        .await
        .map_err(|e| query_error("reading pg_publication_tables", e))?;
    if filtered.is_empty() && !reconcile.is_empty() {
        let set = format!(
            "ALTER PUBLICATION {} SET TABLE {table_list}",
            quote_ident(&pg.publication)
        );
        client.batch_execute(&set).await.map_err(|e| {
            query_error(
                &format!("setting the tables of publication {}", pg.publication),
                e,
            )
        })?;
        tracing::info!(publication = %pg.publication, was = %reconcile.join("; "),
            "the publication's column lists and row filters set to the job's policies");
        return Ok(());
    }
    if !filtered.is_empty() {
        return Err(Error::new(
            Code::SourcePublicationFiltered,
            format!(
                "publication {} does not publish what sluice captures: {}",
                pg.publication,
                filtered.join("; ")
            ),
        )
        .hint(format!(
            "the stream would be a subset of the baseline. Run ALTER PUBLICATION {} SET TABLE {table_list}; \
             ({}) as the tables' owner, or give the job its own publication; \
             if this job already ran with the filter, re-baseline its tables: what was decoded under it is a subset",
            quote_ident(&pg.publication),
            if definitions.any() {
                "each table as the job's policy publishes it"
            } else {
                "no WHERE, no column list"
            }
        )));
    }
    let missing: Vec<String> = tables
        .iter()
        .filter(|t| {
            !published
                .iter()
                .any(|r| r.get::<_, String>(0) == t.schema && r.get::<_, String>(1) == t.table)
        })
        .map(CapturedTable::quoted)
        .collect();
    let extra: Vec<String> = published
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .filter(|(schema, table)| {
            !tables
                .iter()
                .any(|t| &t.schema == schema && &t.table == table)
        })
        .map(|(schema, table)| format!("{}.{}", quote_ident(&schema), quote_ident(&table)))
        .collect();
    if !extra.is_empty() {
        if pg.create {
            // A table removed from source.tables leaves the publication sluice manages;
            // its changes still in the backlog are skipped by the stream.
            let drop = format!(
                "ALTER PUBLICATION {} DROP TABLE {}",
                quote_ident(&pg.publication),
                extra.join(", ")
            );
            client.batch_execute(&drop).await.map_err(|e| {
                query_error(
                    &format!(
                        "removing {} from publication {}",
                        extra.join(", "),
                        pg.publication
                    ),
                    e,
                )
            })?;
            tracing::info!(publication = %pg.publication, tables = %extra.join(", "), "tables not in source.tables removed from the publication");
        } else {
            tracing::warn!(publication = %pg.publication, tables = %extra.join(", "),
                "the publication also publishes tables not in source.tables: the server decodes and sends their changes, which the stream skips; ALTER PUBLICATION … DROP TABLE them if no one else reads them");
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if pg.create {
        // sluice manages this publication: a table added to source.tables joins it. The
        // table's baseline reads only after this (the job room orders it so), and every
        // change committed after it is in the stream.
        let clauses: Vec<String> = tables
            .iter()
            .filter(|t| missing.contains(&t.quoted()))
            .map(|t| definitions.clause(t))
            .collect();
        let add = format!(
            "ALTER PUBLICATION {} ADD TABLE {}",
            quote_ident(&pg.publication),
            clauses.join(", ")
        );
        client.batch_execute(&add).await.map_err(|e| {
            query_error(
                &format!(
                    "adding {} to publication {}",
                    missing.join(", "),
                    pg.publication
                ),
                e,
            )
        })?;
        tracing::info!(publication = %pg.publication, tables = %missing.join(", "), "tables added to the publication");
        return Ok(());
    }
    Err(Error::new(
        Code::SourcePrerequisite,
        format!("publication {} does not include {}", pg.publication, missing.join(", ")),
    )
    .hint(format!(
        "ALTER PUBLICATION {} ADD TABLE {}; as the tables' owner (or set source.postgres.create: true and sluice adds them); with initial: snapshot the next run then baselines the added table(s)",
        quote_ident(&pg.publication),
        missing.join(", ")
    )))
}

/// `server_version_num` of the first release whose pgoutput publishes generated columns
/// (`publish_generated_columns = stored`).
pub const GENERATED_COLUMNS: i32 = 180_000;

/// The `WITH (…)` of the publication sluice creates on a server of `version_num`:
/// `publish_via_partition_root` when a captured table is partitioned, and from PostgreSQL
/// 18 on `publish_generated_columns = stored`, so the stream carries the stored generated
/// columns the baseline copies ([`super::catalog::PUBLISHED`]).
pub fn publication_options(version_num: i32, partitioned: bool) -> String {
    let mut options = Vec::new();
    if partitioned {
        options.push("publish_via_partition_root = true");
    }
    if version_num >= GENERATED_COLUMNS {
        options.push("publish_generated_columns = stored");
    }
    if options.is_empty() {
        String::new()
    } else {
        format!(" WITH ({})", options.join(", "))
    }
}

/// On PostgreSQL 18, a publication without `publish_generated_columns = stored`: sluice's
/// own (`create`) is altered to publish them — a table whose changes were decoded without
/// them then re-baselines itself when the column first appears in its stream (a column
/// with a default, see `docs/postgresql.md#generated-columns`); a pre-created one is
/// refused when a captured table has a stored generated column (the stream would lack a
/// column the baseline copies), with the statement for its owner.
async fn publish_generated_columns(
    client: &Client,
    pg: &PostgresConfig,
    tables: &[CapturedTable],
) -> Result<()> {
    let alter = format!(
        "ALTER PUBLICATION {} SET (publish_generated_columns = stored)",
        quote_ident(&pg.publication)
    );
    if pg.create {
        client.batch_execute(&alter).await.map_err(|e| {
            query_error(
                &format!(
                    "setting publish_generated_columns on publication {}",
                    pg.publication
                ),
                e,
            )
        })?;
        tracing::info!(publication = %pg.publication, "publication now publishes stored generated columns (publish_generated_columns = stored)");
        return Ok(());
    }
    let oids: Vec<i64> = tables.iter().filter_map(|t| t.oid).map(i64::from).collect();
    let rows = client
        .query(
            "SELECT a.attrelid::regclass::text || '.' || a.attname::text FROM pg_attribute a \
             WHERE a.attrelid = ANY($1::int8[]::oid[]) AND a.attnum > 0 AND NOT a.attisdropped \
               AND a.attgenerated = 's' ORDER BY 1",
            &[&oids],
        )
        .await
        .map_err(|e| query_error("reading the captured tables' generated columns", e))?;
    if rows.is_empty() {
        return Ok(());
    }
    let columns: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    Err(Error::new(
        Code::SourcePublicationFiltered,
        format!(
            "publication {} does not publish generated columns, and sluice captures {} on PostgreSQL 18",
            pg.publication,
            columns.join(", ")
        ),
    )
    .hint(format!(
        "the stream would lack columns the baseline copies. Run {alter}; as the publication's owner (or set \
         source.postgres.create: true and sluice does); a table whose changes were already decoded without them \
         re-baselines itself when they first appear in its stream"
    )))
}

/// How a publication's definition of table `t` differs from `desired` (what the job's
/// policy publishes) — a row filter (`rowfilter`) where none is wanted or none where one
/// is (two filters are taken as the same: the server's text of one is not the policy's),
/// or a column list (`columns`, `None` when there is none) that is not exactly the wanted
/// columns — or `None`.
pub fn filter_difference(
    t: &CapturedTable,
    desired: &Definition,
    rowfilter: Option<String>,
    columns: Option<&[String]>,
) -> Option<String> {
    match (rowfilter, &desired.filter) {
        (Some(filter), None) => {
            return Some(format!("{} has the row filter WHERE {filter}", t.quoted()));
        }
        (None, Some(_)) => {
            return Some(format!("{} has no row filter", t.quoted()));
        }
        _ => {}
    }
    let all: Vec<String>;
    let columns = match (columns, &desired.columns) {
        (None, None) => return None,
        (Some(c), _) => c,
        (None, Some(_)) => {
            all = t.shape.columns.iter().map(|c| c.name.clone()).collect();
            &all
        }
    };
    let captured: Vec<&str> = match &desired.columns {
        Some(wanted) => wanted.iter().map(String::as_str).collect(),
        None => t.shape.columns.iter().map(|c| c.name.as_str()).collect(),
    };
    let missing: Vec<&str> = captured
        .iter()
        .copied()
        .filter(|c| !columns.iter().any(|p| p == c))
        .collect();
    let extra: Vec<&str> = columns
        .iter()
        .map(String::as_str)
        .filter(|p| !captured.contains(p))
        .collect();
    if missing.is_empty() && extra.is_empty() {
        return None;
    }
    let mut what = format!("{} has a column list", t.quoted());
    if !missing.is_empty() {
        what.push_str(&format!(" without {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        what.push_str(&format!(" with {} (not captured)", extra.join(", ")));
    }
    Some(what)
}

/// The refusal of a `FOR ALL TABLES` publication: it streams every table of the database,
/// and a change of a table the job does not capture would fail the run.
fn all_tables(publication: &str, table_list: &str) -> Error {
    Error::new(
        Code::SourcePublicationAllTables,
        format!("publication {publication} is FOR ALL TABLES; a job's publication must name exactly its tables"),
    )
    .hint(format!(
        "give the job a publication of its own: set source.postgres.publication to a new name (sluice creates it \
         with source.postgres.create: true), or have the tables' owner run CREATE PUBLICATION <name> FOR TABLE {table_list}; \
         a FOR ALL TABLES publication cannot be narrowed by ALTER PUBLICATION"
    ))
}

/// Moves the slot forward to `upto` (never backward).
pub async fn advance(client: &Client, slot: &str, upto: PgLsn) -> Result<()> {
    client
        .query_one(
            "SELECT end_lsn::text FROM pg_replication_slot_advance($1, $2::text::pg_lsn)",
            &[&slot, &upto.to_string()],
        )
        .await
        .map_err(|e| query_error(&format!("advancing replication slot {slot}"), e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_slot_is_taken_only_when_recorded_as_ours_or_adopted() {
        check_adoption("s", true, false).unwrap();
        check_adoption("s", false, true).unwrap();
        let err = check_adoption("s", false, false).unwrap_err();
        assert_eq!(err.code(), Code::SourceSlotNotOurs);
        let hint = err.hint_text().unwrap();
        assert!(
            hint.contains("adopt_slot: true") && hint.contains("source.postgres.slot"),
            "{hint}"
        );
    }

    fn slot(at: u64) -> SlotInfo {
        SlotInfo {
            plugin: Some("pgoutput".into()),
            database: Some("app".into()),
            confirmed_flush: Some(PgLsn(at)),
            wal_status: Some("reserved".into()),
            active_pid: None,
            failover: false,
            synced: false,
            invalidation_reason: None,
        }
    }

    #[test]
    fn start_decisions() {
        use StartDecision::*;
        assert_eq!(decide_start("s", None, None, "app").unwrap(), CreateSlot);
        assert_eq!(
            decide_start("s", Some(&slot(5)), None, "app").unwrap(),
            AtSlot(PgLsn(5))
        );
        assert_eq!(
            decide_start("s", Some(&slot(5)), Some(PgLsn(5)), "app").unwrap(),
            AtSlot(PgLsn(5))
        );
        assert_eq!(
            decide_start("s", Some(&slot(5)), Some(PgLsn(9)), "app").unwrap(),
            CatchUp(PgLsn(9))
        );
    }

    #[test]
    fn refusals() {
        let gap = |r: Result<StartDecision>| r.unwrap_err().code();
        assert_eq!(
            gap(decide_start("s", None, Some(PgLsn(1)), "app")),
            Code::SourceLogGap
        );
        assert_eq!(
            gap(decide_start("s", Some(&slot(9)), Some(PgLsn(5)), "app")),
            Code::SourceLogGap
        );
        let lost = SlotInfo {
            wal_status: Some("lost".into()),
            ..slot(5)
        };
        assert_eq!(
            gap(decide_start("s", Some(&lost), Some(PgLsn(5)), "app")),
            Code::SourceLogGap
        );
        for (reason, says) in [
            ("idle_timeout", "idle_replication_slot_timeout"),
            ("rows_removed", "hot_standby_feedback"),
            ("wal_removed", "max_slot_wal_keep_size"),
            ("wal_level_insufficient", "wal_level"),
            ("something_new", "invalidation_reason"),
        ] {
            let invalidated = SlotInfo {
                invalidation_reason: Some(reason.into()),
                ..slot(5)
            };
            let err = decide_start("s", Some(&invalidated), Some(PgLsn(5)), "app").unwrap_err();
            assert_eq!(err.code(), Code::SourceLogGap);
            assert!(err.to_string().contains(reason), "{err}");
            let hint = err.hint_text().unwrap();
            assert!(hint.contains(says), "{reason}: {hint}");
            assert!(hint.contains("pg_drop_replication_slot('s')"), "{hint}");
            // Also without a checkpoint: an invalidated slot is no place to start.
            let first = decide_start("s", Some(&invalidated), None, "app").unwrap_err();
            assert_eq!(first.code(), Code::SourceLogGap);
        }
        let hint = decide_start("s", None, Some(PgLsn(1)), "app").unwrap_err();
        assert!(
            hint.hint_text()
                .unwrap()
                .contains("`sluice state clear --config FILE`"),
            "the hint names the command that exists"
        );
        let other = SlotInfo {
            plugin: Some("test_decoding".into()),
            ..slot(5)
        };
        assert_eq!(
            gap(decide_start("s", Some(&other), None, "app")),
            Code::SourcePrerequisite
        );
        assert_eq!(
            gap(decide_start("s", Some(&slot(5)), None, "other")),
            Code::SourcePrerequisite
        );
    }

    #[test]
    fn the_publication_publishes_stored_generated_columns_from_postgresql_18_on() {
        assert_eq!(publication_options(170_005, false), "");
        assert_eq!(
            publication_options(170_005, true),
            " WITH (publish_via_partition_root = true)"
        );
        assert_eq!(
            publication_options(180_000, false),
            " WITH (publish_generated_columns = stored)"
        );
        assert_eq!(
            publication_options(180_001, true),
            " WITH (publish_via_partition_root = true, publish_generated_columns = stored)"
        );
    }

    #[test]
    fn the_slot_is_created_with_failover_from_postgresql_17_on() {
        for (v, standby) in [
            (140_011, false),
            (150_008, false),
            (160_004, false),
            (169_999, false),
            (170_002, true),
        ] {
            assert_eq!(
                create_slot_sql(v, standby),
                "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')"
            );
        }
        for v in [170_000, 170_002, 180_000] {
            assert_eq!(
                create_slot_sql(v, false),
                "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
            );
        }
    }
}
