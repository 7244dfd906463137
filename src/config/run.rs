//! The run-level blocks of a job's config: output (parts), lease, deadline, the initial
//! baseline switch and its chunking, and doctor's thresholds. Plain data with defaults;
//! range checks on these blocks are in [`super::Config::parse`], the rooms that read them
//! add nothing.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Thresholds of `sluice doctor`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DoctorConfig {
    /// WAL retained by a slot (ours, or any inactive one) above this warns.
    pub retained_wal_warn_bytes: u64,
    /// WAL retained by a slot above this fails.
    pub retained_wal_fail_bytes: u64,
    /// How often the job runs (the scheduler's interval; the Terraform module's
    /// `schedule_expression`). A change log (MySQL binlog) kept for less than this fails.
    pub schedule_interval_seconds: u64,
    /// Outage the change log should outlast beyond one interval: kept for less than
    /// interval + margin warns.
    pub log_retention_margin_seconds: u64,
}

impl Default for DoctorConfig {
    fn default() -> Self {
        DoctorConfig {
            retained_wal_warn_bytes: 1 << 30,
            retained_wal_fail_bytes: 10 << 30,
            schedule_interval_seconds: 300,
            log_retention_margin_seconds: 86_400,
        }
    }
}

/// The start of a new stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Initial {
    /// Capture changes from the first run on; no baseline.
    #[default]
    None,
    /// Baseline every table (anchor first, chunked, resumable), then drain on top.
    Snapshot,
}

/// Chunking and fan-out of baselines.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaselineConfig {
    /// Target rows per chunk (one snapshot part per chunk).
    pub chunk_rows: u64,
    /// Chunks read at once by `sluice baseline` / an inline baseline.
    pub parallel: usize,
    /// When set, a drain that finds no anchor creates it and starts this Step Functions
    /// state machine for the chunks instead of reading them inline.
    pub state_machine_arn: Option<String>,
    /// `baseline.plan`: an encoded chunk list longer than this many bytes is written to
    /// the S3 destination for the state machine's Distributed Map to read, instead of
    /// being returned inline (at most [`BaselineConfig::MAX_INLINE_PLAN_BYTES`]).
    pub inline_plan_max_bytes: u64,
    /// Declared baseline keys of tables without a primary key: table (as in
    /// `source.tables`) → NOT NULL columns to chunk by, in order. Need not be unique.
    pub keys: std::collections::BTreeMap<String, Vec<String>>,
}

impl BaselineConfig {
    /// Step Functions passes at most 256 KiB between states; an inline chunk list shares
    /// that with the rest of the execution's state, so it may take at most 192 KiB.
    pub const MAX_INLINE_PLAN_BYTES: u64 = 192 * 1024;
}

impl Default for BaselineConfig {
    fn default() -> Self {
        BaselineConfig {
            chunk_rows: 100_000,
            parallel: 1,
            state_machine_arn: None,
            inline_plan_max_bytes: 128 * 1024,
            keys: std::collections::BTreeMap::new(),
        }
    }
}

/// Part layout and rollover.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Close a part at the first commit after it holds this many rows.
    pub rollover_rows: u64,
    /// Close a part at the first commit after it reaches this many bytes.
    pub rollover_bytes: u64,
    /// Rows per Parquet row group; bounds the writer's memory.
    pub row_group_rows: usize,
    /// Directory for parts under construction (`/tmp` on Lambda). Default: the system
    /// temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// zstd level for Parquet pages.
    pub zstd_level: i32,
    /// Memory the run's part writers share (each table's batch is capped at a share of
    /// it). Default: half the Lambda function's memory, 512 MiB on the CLI.
    pub memory_budget_bytes: Option<u64>,
    /// Where change parts go below the table folder: `flat` (in it) or Hive-style
    /// partition folders by commit time (`dated`, `dated-hourly`).
    pub layout: Layout,
    /// Bring each table's current-state table up to date after every run that committed
    /// changes (`sluice materialize`'s build, docs/current-state.md).
    pub current_state: bool,
    /// Rows one current-state file holds at most when a full build splits the state into
    /// buckets; an incremental build rewrites only the buckets its changes touch.
    pub current_state_bucket_rows: u64,
    /// How much change history a table folder keeps (`30d`, `12h`, `90m`, `45s`): `sluice
    /// compact` folds the changes older than that into a baseline of the table's state
    /// and drops the parts that only held them (docs/compaction.md, history retention).
    /// Absent: every change is kept.
    pub history_retention: Option<String>,
}

impl OutputConfig {
    /// [`Self::history_retention`] as a duration; `Err` names what is wrong with the text.
    pub fn history_retention(&self) -> std::result::Result<Option<std::time::Duration>, String> {
        let Some(text) = &self.history_retention else {
            return Ok(None);
        };
        let text = text.trim();
        let (number, unit) = text.split_at(
            text.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .len(),
        );
        let seconds_per: u64 = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            _ => {
                return Err(format!(
                    "output.history_retention {text:?} has no unit s, m, h or d"
                ));
            }
        };
        let number: u64 = number.parse().map_err(|_| {
            format!("output.history_retention {text:?} is not a whole number and a unit")
        })?;
        number
            .checked_mul(seconds_per)
            .map(|s| Some(std::time::Duration::from_secs(s)))
            .ok_or_else(|| format!("output.history_retention {text:?} is too long"))
    }
}

/// The folders change parts are written to below `<table>/` (docs/output.md, Layout).
/// Baseline parts always go to `<table>/snapshot/`, whatever the layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// `<table>/cdc-<run_id>-<nnnnnn>.parquet`.
    #[default]
    Flat,
    /// `<table>/dt=YYYY-MM-DD/cdc-…`: the UTC date of the change's commit time (`__ts`).
    Dated,
    /// `<table>/dt=YYYY-MM-DD/hr=HH/cdc-…`: the UTC date and hour of the commit time.
    DatedHourly,
}

impl Layout {
    /// The Hive partition keys of the layout, outermost first.
    pub fn partition_keys(self) -> &'static [&'static str] {
        match self {
            Layout::Flat => &[],
            Layout::Dated => &["dt"],
            Layout::DatedHourly => &["dt", "hr"],
        }
    }
}

/// Single-writer lease.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaseConfig {
    /// How long a lease lives without renewal. Renewed at every checkpoint and when a third
    /// of it has passed.
    pub ttl_seconds: u64,
}

/// How close to an invocation deadline (Lambda's, or `--max-duration`) a run stops.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadlineConfig {
    /// Time kept in reserve before the deadline for the final flush, checkpoint and ack.
    pub safety_margin_seconds: f64,
}

impl Default for DeadlineConfig {
    fn default() -> Self {
        DeadlineConfig {
            safety_margin_seconds: 20.0,
        }
    }
}

impl DeadlineConfig {
    /// The reserve as a duration.
    pub fn margin(&self) -> Duration {
        Duration::from_secs_f64(self.safety_margin_seconds)
    }
}

impl OutputConfig {
    /// The smallest `memory_budget_bytes` (8 MiB).
    pub const MIN_MEMORY_BUDGET: u64 = 8 * 1024 * 1024;
    /// The largest `memory_budget_bytes` (1 TiB).
    pub const MAX_MEMORY_BUDGET: u64 = 1024 * 1024 * 1024 * 1024;
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            rollover_rows: 1_000_000,
            rollover_bytes: 128 * 1024 * 1024,
            row_group_rows: 65_536,
            spill_dir: None,
            zstd_level: 3,
            memory_budget_bytes: None,
            layout: Layout::Flat,
            current_state: false,
            current_state_bucket_rows: 65_536,
            history_retention: None,
        }
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig { ttl_seconds: 120 }
    }
}

impl LeaseConfig {
    /// The lease lifetime.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_seconds)
    }
}
