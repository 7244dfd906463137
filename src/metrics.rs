//! Run metrics as CloudWatch Embedded Metric Format (EMF) lines.
//!
//! Guarantees: metric names are the constants below (dashboards and alarms depend on
//! them, changing one is a breaking change); one EMF document per run, derived from the
//! same [`RunSummary`] that is printed and returned, so logs and metrics cannot disagree.

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
    fn a_failed_run_counts_as_failed_only() {
        let doc = emf_document("j", None, 1);
        assert_eq!(doc[RUN_FAILED], 1);
        assert_eq!(doc[RUN_DRAINED], 0);
        assert!(doc.get(ROWS).is_none());
    }
}
