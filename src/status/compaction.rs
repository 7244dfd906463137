//! Each table's last compaction, as `sluice status` shows it: read from the operation
//! records the state store keeps (`compact#<table>`, [`crate::state::ops`]), so the
//! command still reads the store only.
//!
//! Guarantees: a table appears once it was compacted (or a compaction of it failed); a
//! record this version cannot read shows its status as `unknown`, never hides the job.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::state::ops::OpRecord;

/// One table's last compaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionView {
    /// `compacted`, `nothing`, `partial`, `failed`.
    pub status: String,
    /// Data files in the table folder after it.
    pub files_after: Option<u64>,
    pub files_before: Option<u64>,
    /// Seconds since it ended.
    pub age_s: Option<i64>,
    pub compaction_id: Option<String>,
    /// The error code of a failed compaction.
    pub code: Option<String>,
    /// True while a compaction of the table holds its lease.
    pub running: bool,
}

/// The views of the job's compaction records (operation keys `compact#<table>`), by table.
pub fn views(records: &[OpRecord], now_ms: i64) -> BTreeMap<String, CompactionView> {
    records
        .iter()
        .filter_map(|r| Some((r.op.strip_prefix("compact#")?.to_owned(), r)))
        .map(|(table, r)| {
            let last = r.last.clone().unwrap_or_default();
            let at = last["at"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_millis());
            let view = CompactionView {
                status: last["status"].as_str().unwrap_or("unknown").to_owned(),
                files_after: last["files_after"].as_u64(),
                files_before: last["files_before"].as_u64(),
                age_s: at.map(|at| (now_ms - at) / 1000),
                compaction_id: last["compaction_id"].as_str().map(str::to_owned),
                code: last["error"]["code"].as_str().map(str::to_owned),
                running: r.lease_owner.is_some()
                    && r.lease_expires_at_ms.is_some_and(|e| e > now_ms),
            };
            (table, view)
        })
        .filter(|(_, v)| v.status != "unknown" || v.running)
        .collect()
}

/// The COMPACTED cell: files after the last compactions (summed over the tables) and
/// how long ago the oldest of them ran, or the failure; `-` before any.
pub fn cell(views: &BTreeMap<String, CompactionView>, age: fn(i64) -> String) -> String {
    if views.is_empty() {
        return "-".to_owned();
    }
    let failed: Vec<&CompactionView> = views.values().filter(|v| v.status == "failed").collect();
    let oldest = views.values().filter_map(|v| v.age_s).max();
    let when = oldest.map_or(String::new(), |a| format!(" {} ago", age(a)));
    let mut text = match failed.first() {
        Some(f) => format!(
            "failed{} {}",
            f.age_s
                .map_or(String::new(), |a| format!(" {} ago", age(a))),
            f.code.as_deref().unwrap_or("")
        ),
        None => {
            let files: u64 = views.values().filter_map(|v| v.files_after).sum();
            let noun = if files == 1 { "file" } else { "files" };
            format!("{files} {noun}{when}")
        }
    };
    if views.values().any(|v| v.running) {
        text.push_str(" (running)");
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(op: &str, last: Option<serde_json::Value>, owner: Option<&str>) -> OpRecord {
        OpRecord {
            op: op.into(),
            lease_token: 1,
            lease_owner: owner.map(str::to_owned),
            lease_expires_at_ms: owner.map(|_| 10_000),
            last,
        }
    }

    fn age(s: i64) -> String {
        format!("{s}s")
    }

    #[test]
    fn each_compacted_table_is_shown_with_its_files_and_age() {
        let records = [
            record(
                "compact#a",
                Some(
                    json!({"status": "compacted", "files_after": 2, "files_before": 300, "at": "1970-01-01T00:00:05.000Z", "compaction_id": "c"}),
                ),
                None,
            ),
            record(
                "compact#b",
                Some(
                    json!({"status": "nothing", "files_after": 1, "at": "1970-01-01T00:00:08.000Z"}),
                ),
                None,
            ),
            record("compact#c", None, None),
            record("other#x", Some(json!({})), None),
        ];
        let v = views(&records, 9_000);
        assert_eq!(v.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(v["a"].files_after, Some(2));
        assert_eq!(v["a"].age_s, Some(4));
        assert_eq!(cell(&v, age), "3 files 4s ago");
        assert_eq!(cell(&BTreeMap::new(), age), "-");
    }

    #[test]
    fn a_failure_and_a_running_compaction_are_said() {
        let records = [record(
            "compact#a",
            Some(
                json!({"status": "failed", "at": "1970-01-01T00:00:05.000Z", "error": {"code": "SLUICE_COMPACTION_PART_CORRUPT"}}),
            ),
            Some("o"),
        )];
        let v = views(&records, 9_000);
        assert!(v["a"].running);
        assert_eq!(
            cell(&v, age),
            "failed 4s ago SLUICE_COMPACTION_PART_CORRUPT (running)"
        );
    }
}
