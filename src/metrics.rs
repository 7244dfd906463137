//! Run metrics as CloudWatch Embedded Metric Format (EMF) lines.
//!
//! Guarantees: metric names are the constants below (dashboards and alarms depend on
//! them, changing one is a breaking change); one EMF document per run, derived from the
//! same [`RunSummary`] that is printed and returned, so logs and metrics cannot disagree;
//! a compaction emits one document per table ([`compaction_emf_document`]), from the
//! same per-table figures its summary prints, with the dimensions `job` and `job, table`;
//! a verify emits one document for its table ([`verify_emf_document`]) from its report.

use serde_json::{Map, Value, json};

use crate::summary::{RunStatus, RunSummary};

/// CloudWatch namespace of every sluice metric.
pub const NAMESPACE: &str = "sluice";
/// The dimension every metric carries.
pub const DIMENSION_JOB: &str = "job";

pub const ROWS: &str = "rows";
pub const BYTES: &str = "bytes";
pub const PARTS: &str = "parts";
pub const DURATION_MS: &str = "duration_ms";
/// Seconds between the newest commit read and the end of the run.
pub const LAG_SECONDS: &str = "lag_seconds";
/// Bytes of log the source still retains for the stream (PostgreSQL: WAL held by the slot).
pub const RETAINED_BYTES: &str = "source_retained_bytes";
/// 1 when the run ended with the named status, else 0 (sum over time for alarms).
pub const RUN_DRAINED: &str = "run_drained";
pub const RUN_PARTIAL: &str = "run_partial";
pub const RUN_SKIPPED: &str = "run_skipped";
pub const RUN_FAILED: &str = "run_failed";

/// The dimension naming a table (compaction metrics).
pub const DIMENSION_TABLE: &str = "table";
/// Data files of the table folder before and after a compaction.
pub const COMPACTION_FILES_BEFORE: &str = "compaction_files_before";
pub const COMPACTION_FILES_AFTER: &str = "compaction_files_after";
/// Bytes of the parts a compaction replaced, and of the parts it wrote.
pub const COMPACTION_BYTES_READ: &str = "compaction_bytes_read";
pub const COMPACTION_BYTES_WRITTEN: &str = "compaction_bytes_written";
pub const COMPACTION_DURATION_MS: &str = "compaction_duration_ms";
/// 1 when the table's compaction failed (a corrupt part, an outage), else 0.
pub const COMPACTION_FAILED: &str = "compaction_failed";

/// Chunks a verify compared, and keys (keyless: row copies) that still differ after its
/// re-check (after its repair, with `--repair`).
pub const VERIFY_CHUNKS: &str = "verify_chunks";
pub const VERIFY_MISMATCHED_ROWS: &str = "verify_mismatched_rows";
pub const VERIFY_DURATION_MS: &str = "verify_duration_ms";

/// One table's verify, as its metrics carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyMetrics<'a> {
    pub table: &'a str,
    pub chunks: u64,
    /// Keys still different after the re-check (after the repair, with one).
    pub mismatched_rows: u64,
    pub duration_ms: u64,
}

/// The EMF document of one table's verify.
pub fn verify_emf_document(job: &str, m: &VerifyMetrics<'_>, now_ms: i64) -> Value {
    let metrics: [(&str, &str, Value); 3] = [
        (VERIFY_CHUNKS, "Count", json!(m.chunks)),
        (VERIFY_MISMATCHED_ROWS, "Count", json!(m.mismatched_rows)),
        (VERIFY_DURATION_MS, "Milliseconds", json!(m.duration_ms)),
    ];
    table_emf_document(job, m.table, &metrics, now_ms)
}

/// One table's compaction, as its metrics carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionMetrics<'a> {
    pub table: &'a str,
    pub files_before: u64,
    pub files_after: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub duration_ms: u64,
    pub failed: bool,
}

/// The EMF document of one table's compaction.
pub fn compaction_emf_document(job: &str, m: &CompactionMetrics<'_>, now_ms: i64) -> Value {
    let metrics: [(&str, &str, Value); 6] = [
        (COMPACTION_FILES_BEFORE, "Count", json!(m.files_before)),
        (COMPACTION_FILES_AFTER, "Count", json!(m.files_after)),
        (COMPACTION_BYTES_READ, "Bytes", json!(m.bytes_read)),
        (COMPACTION_BYTES_WRITTEN, "Bytes", json!(m.bytes_written)),
        (COMPACTION_DURATION_MS, "Milliseconds", json!(m.duration_ms)),
        (COMPACTION_FAILED, "Count", json!(u8::from(m.failed))),
    ];
    table_emf_document(job, m.table, &metrics, now_ms)
}

/// One table's EMF document: `metrics` as `(name, unit, value)`, with the dimensions
/// `job` and `job, table`.
fn table_emf_document(
    job: &str,
    table: &str,
    metrics: &[(&str, &str, Value)],
    now_ms: i64,
) -> Value {
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [[DIMENSION_JOB], [DIMENSION_JOB, DIMENSION_TABLE]],
                "Metrics": metrics.iter().map(|(n, u, _)| json!({"Name": n, "Unit": u})).collect::<Vec<_>>(),
            }],
        }),
    );
    doc.insert(DIMENSION_JOB.into(), json!(job));
    doc.insert(DIMENSION_TABLE.into(), json!(table));
    for (name, _, value) in metrics {
        doc.insert((*name).into(), value.clone());
    }
    Value::Object(doc)
}

/// The EMF document for a finished run (`None` summary = the run failed).
pub fn emf_document(job: &str, summary: Option<&RunSummary>, now_ms: i64) -> Value {
    let mut metrics: Vec<(&str, &str, Value)> = Vec::new();
    let status = summary.map(|s| s.status);
    let flag = |want: RunStatus| json!(u8::from(status == Some(want)));
    metrics.push((RUN_DRAINED, "Count", flag(RunStatus::Drained)));
    metrics.push((RUN_PARTIAL, "Count", flag(RunStatus::Partial)));
    metrics.push((RUN_SKIPPED, "Count", flag(RunStatus::Skipped)));
    metrics.push((RUN_FAILED, "Count", json!(u8::from(status.is_none()))));
    if let Some(s) = summary {
        metrics.push((ROWS, "Count", json!(s.rows)));
        metrics.push((BYTES, "Bytes", json!(s.bytes)));
        metrics.push((PARTS, "Count", json!(s.parts)));
        metrics.push((DURATION_MS, "Milliseconds", json!(s.duration_ms)));
        if let Some(lag) = s.lag_seconds {
            metrics.push((LAG_SECONDS, "Seconds", json!(lag)));
        }
        if let Some(retained) = s.source_retained_bytes {
            metrics.push((RETAINED_BYTES, "Bytes", json!(retained)));
        }
    }
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [[DIMENSION_JOB]],
                "Metrics": metrics.iter().map(|(n, u, _)| json!({"Name": n, "Unit": u})).collect::<Vec<_>>(),
            }],
        }),
    );
    doc.insert(DIMENSION_JOB.into(), json!(job));
    for (name, _, value) in metrics {
        doc.insert(name.into(), value);
    }
    if let Some(s) = summary {
        doc.insert("run_id".into(), json!(s.run_id));
    }
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn summary(status: RunStatus) -> RunSummary {
        RunSummary {
            status,
            job: "j".into(),
            run_id: "r".into(),
            rows: 7,
            parts: 1,
            bytes: 99,
            from: None,
            to: None,
            duration_ms: 12,
            lag_seconds: Some(1.5),
            source_retained_bytes: Some(4096),
            tables: BTreeMap::new(),
            rebaselined: Default::default(),
            lease_holder: None,
            lease_expires_at_ms: None,
            catalog: Default::default(),
        }
    }

    #[test]
    fn every_declared_metric_has_a_value() {
        let doc = emf_document("j", Some(&summary(RunStatus::Partial)), 1);
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap();
        for metric in declared {
            let name = metric["Name"].as_str().unwrap();
            assert!(doc.get(name).is_some(), "{name} declared without a value");
        }
        assert_eq!(doc[RUN_PARTIAL], 1);
        assert_eq!(doc[RUN_DRAINED], 0);
        assert_eq!(doc[ROWS], 7);
        assert_eq!(doc[RETAINED_BYTES], 4096);
        assert_eq!(doc[DIMENSION_JOB], "j");
    }

    #[test]
    fn a_compaction_document_declares_every_metric_per_job_and_table() {
        let m = CompactionMetrics {
            table: "public.orders",
            files_before: 3008,
            files_after: 2,
            bytes_read: 10,
            bytes_written: 9,
            duration_ms: 5,
            failed: false,
        };
        let doc = compaction_emf_document("j", &m, 1);
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap();
        assert_eq!(declared.len(), 6);
        for metric in declared {
            let name = metric["Name"].as_str().unwrap();
            assert!(doc.get(name).is_some(), "{name} declared without a value");
        }
        assert_eq!(doc[COMPACTION_FILES_BEFORE], 3008);
        assert_eq!(doc[DIMENSION_TABLE], "public.orders");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][1],
            serde_json::json!(["job", "table"])
        );
    }

    #[test]
    fn a_failed_run_counts_as_failed_only() {
        let doc = emf_document("j", None, 1);
        assert_eq!(doc[RUN_FAILED], 1);
        assert_eq!(doc[RUN_DRAINED], 0);
        assert!(doc.get(ROWS).is_none());
    }
}
