//! `sluice compact`: per table, the small change parts a checkpoint already covers are
//! rewritten into few parts of about `compaction.target_bytes`, so a folder that a
//! minutely job fills with 1,440 parts a day reads as a handful of files
//! (docs/compaction.md).
//!
//! Guarantees (DESIGN, "After the drain: the lake over time"):
//!
//! * **only covered, settled parts**: a compaction rewrites the parts run manifests list
//!   as data (`parts`, never `pending`: every checkpoint covers them) and parts earlier
//!   compactions wrote, each listed by a manifest written at least
//!   `compaction.min_age_seconds` ago ([`plan`]); it never writes a run manifest,
//!   `_manifest.json`, a checkpoint or the job's lease, so a drain never waits for it and
//!   loses nothing beside it;
//! * **the same rows**: a compacted part holds its inputs' rows byte for byte, in stream
//!   order, one schema per part, one partition folder per part; every input is verified
//!   against the checksum its manifest recorded and every output read back and verified
//!   before upload ([`rewrite`]) — a corrupt or missing input stops that table with
//!   `SLUICE_COMPACTION_PART_CORRUPT` naming it, removing nothing, and the other tables
//!   go on;
//! * **no gap, no double count**: parts durable → compaction manifest → removals, with
//!   fault points between ([`step`]); a reader listing the folder meanwhile meets only
//!   byte-identical copies, which the replay rule counts once; a reader following the
//!   manifests takes the live parts ([`ledger::Ledger::live`]);
//! * **one compaction per table, crash-safe**: each table is compacted under its own
//!   fenced lease in the state store (`compact#<table>`, apart from the drain's), renewed
//!   before every removal; the next compaction finishes an interrupted one's removals and
//!   removes the compacted parts it left unnamed, then redoes the rest;
//! * **superseded parts**: with `compaction.drop_superseded` (default), the parts whose
//!   every change sorts before the table's current re-baseline marker — rows the replay
//!   rule drops anyway — are removed in a step of their own ([`superseded`]);
//! * **bounded**: memory is one input batch and one output row group; a part is never
//!   held whole; a deadline (`--max-duration`, Lambda's) stops it between inputs, with
//!   everything committed so far kept (status `partial`).
//!
//! * **Iceberg** (`table_format: iceberg`, SQL and Glue catalogs): each step also
//!   commits a `replace` snapshot, removes nothing, and the table's snapshot expiry and
//!   orphan removal follow the steps ([`iceberg`]); with S3 Tables (which maintains its
//!   own tables) compaction is refused (`SLUICE_COMPACTION_UNSUPPORTED`).

pub mod fan_out;
pub mod fence;
pub mod iceberg;
pub mod ledger;
pub mod plan;
pub mod retention;
pub mod rewrite;
pub mod step;
pub mod superseded;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::backends::Backends;
use crate::config::{Config, DestinationConfig, IcebergCatalogConfig, TableFormat};
use crate::error::{Code, Error, Result};
use crate::metrics::CompactionMetrics;
use crate::parts::PartSettings;
use crate::state::holder;
use crate::state::ops::{OpLeased, compaction_op, with_op_lease};
use ledger::Ledger;
use plan::Limits;
use rewrite::Rewriter;
use step::Fence;

/// What to compact, and until when.
#[derive(Debug, Clone, Default)]
pub struct CompactOptions {
    /// The tables (as `source.tables` names them); empty: every table of the job.
    pub tables: Vec<String>,
    /// Stop (between inputs) this close to the deadline, keeping what is committed.
    pub deadline: Option<Instant>,
}

/// One table's compaction, as the summary prints it and the state store records it
/// (`sluice status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableCompaction {
    /// `compacted` (steps committed), `nothing` (nothing to rewrite), `partial` (stopped
    /// at the deadline), `held` (another compaction of the table runs), `failed`.
    pub status: String,
    pub compaction_id: String,
    /// When it ended (RFC 3339, UTC).
    pub at: String,
    /// Data files in the table folder (what a folder reader opens) before and after.
    pub files_before: u64,
    pub files_after: u64,
    /// Steps committed (one compaction manifest each).
    pub steps: u32,
    pub parts_replaced: u64,
    pub parts_written: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub rows: u64,
    /// Parts an interrupted earlier compaction had replaced, removed now.
    pub finished_earlier: u64,
    /// Compacted parts no manifest named, removed now.
    pub orphans_removed: u64,
    /// Parts a re-baseline superseded, dropped (`compaction.drop_superseded`).
    #[serde(default)]
    pub superseded_dropped: u64,
    /// With `output.history_retention`: the run whose checkpoint the history was folded at
    /// by this compaction (a new baseline plan of the table's state there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_folded_through: Option<String>,
    /// Files of baseline plans older than the current one, removed.
    #[serde(default)]
    pub plan_files_removed: u64,
    /// Iceberg: snapshots expired (`iceberg.snapshot_retention`).
    #[serde(default)]
    pub snapshots_expired: u64,
    /// Iceberg: replaced parts and metadata files no retained snapshot references,
    /// removed.
    #[serde(default)]
    pub files_removed: u64,
    /// Iceberg: steps an interrupted compaction left uncommitted, committed now.
    #[serde(default)]
    pub steps_finished: u64,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
    /// With `held`: the lease's holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// What `sluice compact` prints: one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionSummary {
    /// `compacted`, `partial` (a table stopped at the deadline) or `failed` (a table
    /// failed; `error` is the first failure).
    pub status: String,
    pub job: String,
    pub compaction_id: String,
    pub duration_ms: u64,
    /// Steps committed over every table: with `partial`, 0 means the invocation stopped
    /// before it could commit anything (the compaction machine stops going on then).
    #[serde(default)]
    pub steps: u32,
    pub tables: BTreeMap<String, TableCompaction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
    /// The class exit code of the first failure (not printed).
    #[serde(skip)]
    pub exit_code: i32,
}

impl CompactionSummary {
    /// The summary as one JSON line.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The metrics of each table's compaction.
    pub fn metrics(&self) -> Vec<CompactionMetrics<'_>> {
        self.tables
            .iter()
            .filter(|(_, t)| t.status != "held")
            .map(|(table, t)| CompactionMetrics {
                table,
                files_before: t.files_before,
                files_after: t.files_after,
                bytes_read: t.bytes_read,
                bytes_written: t.bytes_written,
                duration_ms: t.duration_ms,
                failed: t.status == "failed",
            })
            .collect()
    }
}

/// Refuses a config whose output compaction does not rewrite yet.
pub fn check_supported(config: &Config) -> Result<()> {
    if config.table_format == TableFormat::Iceberg
        && config
            .iceberg
            .as_ref()
            .is_some_and(|i| matches!(i.catalog, IcebergCatalogConfig::S3Tables { .. }))
    {
        return Err(Error::new(
            Code::CompactionUnsupported,
            "sluice compact does not maintain S3 Tables tables (iceberg.catalog type s3tables): S3 Tables compacts and expires its tables itself, and the parts in the destination are not the table's files",
        )
        .hint("leave compaction to S3 Tables (its maintenance is on by default; `aws s3tables put-table-maintenance-configuration` tunes it); to compact the destination's parts, run sluice compact with a copy of the config without the table_format and iceberg keys"));
    }
    if matches!(config.destination, DestinationConfig::Stdout {}) {
        return Err(Error::new(
            Code::CompactionUnsupported,
            "a stdout destination keeps no parts to compact",
        )
        .hint("run sluice compact with the job's local or S3 destination"));
    }
    Ok(())
}

/// Compacts the job's tables (or `options.tables`), one after the other, each under its
/// own lease; a table that fails is reported and the others go on.
pub async fn run(
    config: &Config,
    backends: &Backends,
    options: &CompactOptions,
) -> Result<CompactionSummary> {
    check_supported(config)?;
    for table in &options.tables {
        if !config.source.tables.contains(table) {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!("table {table} is not in source.tables"),
            )
            .hint(format!(
                "name a table as source.tables lists it: {}",
                config.source.tables.join(", ")
            )));
        }
    }
    let started = Instant::now();
    let compaction_id = crate::run_id::new_run_id();
    let tables: Vec<&String> = if options.tables.is_empty() {
        config.source.tables.iter().collect()
    } else {
        options.tables.iter().collect()
    };
    let mut summary = CompactionSummary {
        status: "compacted".into(),
        job: config.job.clone(),
        compaction_id: compaction_id.clone(),
        duration_ms: 0,
        steps: 0,
        tables: BTreeMap::new(),
        error: None,
        exit_code: 0,
    };
    for table in tables {
        let done = compact_table(config, backends, options, &compaction_id, table).await;
        match done.status.as_str() {
            "failed" if summary.error.is_none() => {
                summary.status = "failed".into();
                summary.error = done.error.clone();
            }
            "partial" if summary.status == "compacted" => summary.status = "partial".into(),
            _ => {}
        }
        summary.steps += done.steps;
        summary.tables.insert(table.clone(), done);
    }
    summary.exit_code = summary
        .tables
        .values()
        .find_map(|t| t.error.as_ref())
        .and_then(|e| e["class"].as_str())
        .map_or(0, |class| match class {
            "config" => 1,
            "transient" => 3,
            _ => 5,
        });
    summary.duration_ms = started.elapsed().as_millis() as u64;
    Ok(summary)
}

/// One table under its lease: the outcome, failures included.
async fn compact_table(
    config: &Config,
    backends: &Backends,
    options: &CompactOptions,
    compaction_id: &str,
    table: &str,
) -> TableCompaction {
    let started = Instant::now();
    let owner = holder::owner(compaction_id, Some("compact"));
    let store = backends.state.as_ref();
    let ttl = config.compaction.lease_ttl();
    let leased = with_op_lease(
        store,
        &config.job,
        &compaction_op(table),
        &owner,
        ttl,
        |lease| async move {
            let mut fence = Fence::new(store, lease, ttl);
            let mut done = TableCompaction {
                compaction_id: compaction_id.to_owned(),
                ..TableCompaction::default()
            };
            let result = compact_leased(config, backends, options, table, &mut fence, &mut done).await;
            done.duration_ms = started.elapsed().as_millis() as u64;
            done.at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
            if let Err(e) = &result {
                done.status = "failed".into();
                done.error = Some(e.to_json());
            }
            // The record is fenced: a compaction that lost its lease records nothing.
            if let Ok(value) = serde_json::to_value(&done)
                && let Err(e) = store.record_op(&fence.lease, &value).await
            {
                tracing::warn!(table, error = %e.chain(), "could not record the compaction in the state store");
            }
            Ok(done)
        },
    )
    .await;
    match leased {
        Ok(OpLeased::Ran(done)) => {
            if let Some(e) = &done.error {
                tracing::error!(table, error = %e, "table compaction failed");
            }
            done
        }
        Ok(OpLeased::Held { owner, .. }) => {
            tracing::info!(table, holder = %owner, "another compaction of the table holds its lease; skipping it");
            TableCompaction {
                status: "held".into(),
                compaction_id: compaction_id.to_owned(),
                holder: Some(owner),
                ..TableCompaction::default()
            }
        }
        Err(e) => TableCompaction {
            status: "failed".into(),
            compaction_id: compaction_id.to_owned(),
            error: Some(e.to_json()),
            duration_ms: started.elapsed().as_millis() as u64,
            ..TableCompaction::default()
        },
    }
}

async fn compact_leased(
    config: &Config,
    backends: &Backends,
    options: &CompactOptions,
    table: &str,
    fence: &mut Fence<'_>,
    done: &mut TableCompaction,
) -> Result<()> {
    let destination = backends.destination.as_ref();
    let compaction_id = done.compaction_id.clone();
    let retention = config
        .iceberg
        .as_ref()
        .and_then(|i| i.retention())
        .unwrap_or(Duration::from_secs(7 * 24 * 3600));
    let iceberg =
        crate::iceberg::ChangeLog::of(config, destination)?.map(|log| iceberg::IcebergTable {
            log,
            table,
            retention,
        });
    let mut ledger = Ledger::read(destination, table).await?;
    done.files_before = ledger.data_files(table) as u64;
    if step::withdraw_void(destination, fence, &ledger).await? > 0 {
        ledger = Ledger::read(destination, table).await?;
    }
    if let Some(iceberg) = &iceberg {
        done.steps_finished = iceberg.finish_pending(destination, fence, &ledger).await?;
    }
    done.finished_earlier = step::finish_earlier(destination, fence, &ledger).await?;
    // (The ledger is read once: what an earlier compaction finished is no longer live.)
    done.orphans_removed =
        step::sweep_orphans(destination, fence, &ledger, table, &compaction_id).await?;
    let min_age = config.compaction.min_age();
    let limits = Limits {
        target_bytes: config.compaction.target_bytes,
        listed_before_ms: Utc::now().timestamp_millis() - min_age.as_millis() as i64,
    };
    let history = config
        .output
        .history_retention()
        .map_err(|m| Error::new(Code::ConfigInvalid, m))?;
    if let Some(history) = history {
        match retention::fold(config, backends, table, history, fence).await? {
            Ok(folded) => done.history_folded_through = Some(folded.cut_run),
            Err(why) => tracing::info!(table, why, "no history to fold"),
        }
    }
    // In an Iceberg table the superseded changes are rows of the table: dropping them
    // would be a delete, not a replace.
    let drop_superseded =
        (config.compaction.drop_superseded || history.is_some()) && iceberg.is_none();
    if drop_superseded
        && let Some(marker) = superseded::marker(destination, table, &config.spill_dir()).await?
    {
        let dropped = superseded::parts_before(&ledger, table, &marker, limits.listed_before_ms);
        if !dropped.is_empty() {
            done.steps += 1;
            ledger
                .replaced
                .extend(dropped.iter().map(|p| p.key.clone()));
            let step = step::commit(
                destination,
                fence,
                (&config.job, table),
                (&compaction_id, done.steps),
                Vec::new(),
                dropped,
                Some(&marker),
                None,
            )
            .await?;
            done.superseded_dropped = step.replaced;
            done.parts_replaced += step.replaced;
            done.bytes_read += step.bytes_read;
        }
    }
    // An Iceberg change log's snapshots reference its plan parts: they stay.
    if drop_superseded {
        done.plan_files_removed =
            retention::remove_earlier_plans(destination, table, &config.spill_dir(), fence).await?;
    }
    if let Some(iceberg) = &iceberg {
        iceberg.restrict(&mut ledger).await?;
    }
    let groups = plan::plan(&ledger, table, limits);
    let settings = PartSettings::of(config);
    let margin = config.deadline.margin();
    let stop = || near(options.deadline, margin);
    let mut rewriter = Rewriter {
        destination,
        table,
        compaction_id: &compaction_id,
        settings: &settings,
        next_number: 1,
        keep: None,
    };
    done.status = "nothing".into();
    for group in groups {
        if stop() {
            done.status = "partial".into();
            break;
        }
        fence.keep().await?;
        let Some(outputs) = rewriter.rewrite(&group, &stop).await? else {
            done.status = "partial".into();
            break;
        };
        done.steps += 1;
        let step = step::commit(
            destination,
            fence,
            (&config.job, table),
            (&compaction_id, done.steps),
            outputs,
            group.parts,
            None,
            iceberg.as_ref(),
        )
        .await?;
        done.parts_replaced += step.replaced;
        done.parts_written += step.written;
        done.bytes_read += step.bytes_read;
        done.bytes_written += step.bytes_written;
        done.rows += step.rows;
        done.status = "compacted".into();
    }
    if let Some(iceberg) = &iceberg
        && done.status != "partial"
    {
        let maintained = iceberg.maintain(destination, fence).await?;
        done.snapshots_expired = maintained.snapshots_expired;
        done.files_removed = maintained.files_removed;
        done.orphans_removed += maintained.orphans_removed;
    }
    if done.status == "nothing"
        && (done.finished_earlier
            + done.orphans_removed
            + done.superseded_dropped
            + done.plan_files_removed
            + done.steps_finished
            + done.snapshots_expired
            + done.files_removed
            > 0
            || done.history_folded_through.is_some())
    {
        done.status = "compacted".into();
    }
    let after = Ledger::files(destination, table).await?;
    done.files_after = after;
    tracing::info!(
        table,
        status = %done.status,
        files_before = done.files_before,
        files_after = done.files_after,
        replaced = done.parts_replaced,
        written = done.parts_written,
        "table compacted"
    );
    Ok(())
}

/// True when `deadline` is within `margin`.
fn near(deadline: Option<Instant>, margin: Duration) -> bool {
    deadline.is_some_and(|d| Instant::now() + margin >= d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = "job: j\nsource:\n  url: postgres://postgres@127.0.0.1:5432/app\n  tables: [public.t]\n  postgres: { slot: s, publication: p }\nstate: { type: local, path: ./s }\n";

    #[test]
    fn an_s3_tables_change_log_and_stdout_are_refused_as_config() {
        let local = Config::parse(
            &format!("{JOB}destination: {{ type: local, path: ./o }}\n"),
            "t",
        )
        .unwrap();
        assert!(check_supported(&local).is_ok());
        let stdout =
            Config::parse(&format!("{JOB}destination: {{ type: stdout }}\n"), "t").unwrap();
        let e = check_supported(&stdout).unwrap_err();
        assert_eq!(
            (e.code(), e.class().exit_code()),
            (Code::CompactionUnsupported, 1)
        );
        let iceberg = Config::parse(
            &format!("{JOB}destination: {{ type: local, path: ./o }}\ntable_format: iceberg\niceberg: {{ catalog: {{ type: sql, uri: \"sqlite:///c.db\" }} }}\n"),
            "t",
        )
        .unwrap();
        assert!(
            check_supported(&iceberg).is_ok(),
            "the SQL catalog's tables are compacted"
        );
        let s3tables = Config::parse(
            &format!("{JOB}destination: {{ type: local, path: ./o }}\ntable_format: iceberg\niceberg: {{ catalog: {{ type: s3tables, table_bucket_arn: \"arn:aws:s3tables:eu-west-1:123456789012:bucket/b\" }} }}\n"),
            "t",
        )
        .unwrap();
        let e = check_supported(&s3tables).unwrap_err();
        assert_eq!(e.code(), Code::CompactionUnsupported);
        assert!(e.message().contains("S3 Tables"), "{e}");
    }

    #[test]
    fn the_summary_carries_each_tables_metrics_but_not_a_held_one() {
        let mut summary = CompactionSummary {
            status: "compacted".into(),
            job: "j".into(),
            compaction_id: "c".into(),
            duration_ms: 1,
            steps: 0,
            tables: BTreeMap::new(),
            error: None,
            exit_code: 0,
        };
        summary.tables.insert(
            "a".into(),
            TableCompaction {
                status: "compacted".into(),
                files_before: 300,
                files_after: 2,
                ..TableCompaction::default()
            },
        );
        summary.tables.insert(
            "b".into(),
            TableCompaction {
                status: "held".into(),
                ..TableCompaction::default()
            },
        );
        let metrics = summary.metrics();
        assert_eq!(metrics.len(), 1);
        assert_eq!(
            (metrics[0].table, metrics[0].files_before, metrics[0].failed),
            ("a", 300, false)
        );
        let line: serde_json::Value = serde_json::from_str(&summary.to_line()).unwrap();
        assert!(line.get("exit_code").is_none());
        assert_eq!(line["tables"]["a"]["files_after"], 2);
    }
}
