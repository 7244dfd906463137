//! The run summary: exactly one JSON object per drain, on its own line on stdout (and the
//! Lambda response). Its fields are a public contract (docs/operations.md, Run summary).

use std::collections::BTreeMap;

use serde::Serialize;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Everything up to the read bound is durable and checkpointed.
    Drained,
    /// Stopped early (deadline) at a transaction boundary; more is pending.
    Partial,
    /// Another run holds the lease; nothing was done.
    Skipped,
}

/// Per-table counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableCounts {
    pub rows: u64,
    pub parts: u64,
}

/// A table whose re-baseline the run asked for (instead of carrying its change in place)
/// or carried on (an earlier run's, not done yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rebaselined {
    /// Why (e.g. `column v changed type from utf8 (text) to int32 (integer)`).
    pub reason: String,
    /// The position (tagged) of the change that asked for it; the table's changes from
    /// there on were not written (the new snapshot supersedes them). For an earlier run's
    /// re-baseline already anchored, the anchor.
    pub at: String,
    /// What became of the re-baseline after the run: `done` (read inline), `started`
    /// (the state machine's execution), or `pending` (the next run retries).
    pub baseline: String,
}

/// The one-line result of a drain.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub status: RunStatus,
    pub job: String,
    pub run_id: String,
    pub rows: u64,
    pub parts: u64,
    pub bytes: u64,
    /// Position the run started from (tagged text), `null` when skipped.
    pub from: Option<String>,
    /// Position the checkpoint reached (tagged text).
    pub to: Option<String>,
    pub duration_ms: u64,
    /// Seconds between the newest commit read and the end of the run; 0 when drained
    /// with nothing to read.
    pub lag_seconds: Option<f64>,
    /// Bytes of log the source still retains for this stream after the run
    /// (PostgreSQL: `pg_current_wal_lsn() - restart_lsn` of the slot), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_retained_bytes: Option<u64>,
    pub tables: BTreeMap<String, TableCounts>,
    /// Tables this run asked to re-baseline or whose pending re-baseline it carried on
    /// (absent when none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rebaselined: BTreeMap<String, Rebaselined>,
    /// Tables the run registered in the catalog (`catalog` block): `created`, `updated`,
    /// `unchanged` or `failed: <code>`; absent when Glue was not called.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub catalog: BTreeMap<String, String>,
    /// For `skipped`: who holds the lease, and until when (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_holder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at_ms: Option<i64>,
}

impl RunSummary {
    /// The single stdout line.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}
