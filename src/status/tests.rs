use super::render::{age, bytes, count, table};
use super::*;
use serde_json::json;

const NOW: i64 = 1_796_000_000_000; // 2026-11-30T…

fn run(run_id: &str, summary: serde_json::Value) -> RunRecord {
    RunRecord {
        run_id: run_id.to_owned(),
        summary,
        expires_at_s: 0,
    }
}

fn id_at(ms: i64) -> String {
    format!(
        "{}Z-abcdef",
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y%m%dT%H%M%S%3f")
    )
}

fn shown(runs: &[RunRecord]) -> serde_json::Value {
    let runs: serde_json::Map<_, _> = runs
        .iter()
        .map(|r| {
            (
                r.run_id.clone(),
                json!({"run_id": r.run_id, "summary": r.summary}),
            )
        })
        .collect();
    json!({
        "lease_owner": "r9@host",
        "lease_expires_at_ms": NOW + 30_500,
        "checkpoint": {"position": "pg:0/16B3748", "updated_at_ms": NOW - 125_000},
        "snapshots": {
            "a": {"table": "a", "status": "done"},
            "b": {"table": "b", "status": "running"},
            "c": {"table": "c", "status": "wanted"},
        },
        "chunks": {
            "a#000000": {"table": "a"},
            "b#000000": {"table": "b"},
            "b#000001": {"table": "b"},
        },
        "runs": runs,
    })
}

#[test]
fn a_job_row_reads_lease_checkpoint_runs_and_baseline() {
    let old = run(
        &id_at(NOW - 3_600_000),
        json!({"run_id": id_at(NOW - 3_600_000), "status": "drained", "rows": 10, "bytes": 1000, "lag_seconds": 2.5, "to": "pg:0/1"}),
    );
    let failed1 = run(
        &id_at(NOW - 600_000),
        json!({"run_id": id_at(NOW - 600_000), "status": "failed", "code": "SLUICE_SOURCE_UNREACHABLE"}),
    );
    let failed2 = run(
        &id_at(NOW - 60_000),
        json!({"run_id": id_at(NOW - 60_000), "status": "failed", "code": "SLUICE_SOURCE_UNREACHABLE"}),
    );
    let runs = [old, failed1, failed2];
    let s = job_status("orders", &shown(&runs), &runs, None, NOW);
    assert_eq!(
        s.lease,
        LeaseView::Held {
            owner: "r9@host".into(),
            expires_in_s: 31
        }
    );
    assert_eq!(s.position.as_deref(), Some("pg:0/16B3748"));
    assert_eq!(s.checkpoint_age_s, Some(125));
    let last = s.last_run.clone().unwrap();
    assert_eq!(last.status, "failed");
    assert_eq!(last.age_s, Some(60));
    assert_eq!(last.code.as_deref(), Some("SLUICE_SOURCE_UNREACHABLE"));
    assert_eq!(s.failing_runs, 2);
    assert_eq!(s.lag_s, Some(2.5), "the lag is the newest successful run's");
    assert_eq!(
        s.day,
        Day {
            runs: 3,
            failed: 2,
            rows: 10,
            bytes: 1000,
            complete: true
        }
    );
    assert_eq!(
        s.baseline,
        Baseline {
            tables: 3,
            done: 1,
            running: 1,
            anchored: 0,
            wanted: 1,
            chunks_read: 2
        }
    );
    let text = table(&[s]);
    let line = text.lines().nth(1).unwrap();
    for want in [
        "orders",
        "held 31s left",
        "2m ago",
        "failed 1m ago SLUICE_SOURCE_UNREACHABLE (2 in a row)",
        "3 (2 failed)",
        "1000 B",
        "1/3 done, 1 running, 1 wanted (2 chunks read)",
    ] {
        assert!(line.contains(want), "{want:?} missing from {line:?}");
    }
}

#[test]
fn an_expired_or_free_lease_and_a_truncated_day_are_said() {
    let mut doc = shown(&[]);
    doc["lease_expires_at_ms"] = json!(NOW - 90_000);
    let runs: Vec<_> = (0..50)
        .map(|i| {
            let id = id_at(NOW - 1000 * (50 - i));
            run(&id, json!({"run_id": id, "status": "drained", "rows": 1}))
        })
        .collect();
    let s = job_status("j", &doc, &runs, Some(50), NOW);
    assert_eq!(
        s.lease,
        LeaseView::Expired {
            owner: "r9@host".into(),
            expired_s: 90
        }
    );
    assert!(!s.day.complete, "50 kept records all inside the day");
    assert!(table(&[s]).contains("≥50"));
    doc["lease_owner"] = serde_json::Value::Null;
    let s = job_status("j", &doc, &runs[..49], Some(50), NOW);
    assert_eq!(s.lease, LeaseView::Free);
    assert!(s.day.complete);
}

#[test]
fn an_unreadable_job_keeps_its_row() {
    let e = crate::error::Error::new(crate::error::Code::StateCorrupt, "bad file");
    let text = table(&[unreadable("broken", &e)]);
    assert!(text.contains("broken"), "{text}");
    assert!(text.contains("unreadable: SLUICE_STATE_CORRUPT"), "{text}");
    assert!(table(&[]).contains("no jobs"));
}

#[test]
fn units_are_short() {
    assert_eq!(age(45), "45s");
    assert_eq!(age(12 * 60 + 5), "12m");
    assert_eq!(age(3 * 3600), "3h");
    assert_eq!(age(2 * 86400 + 1), "2d");
    assert_eq!(count(950), "950");
    assert_eq!(count(12_345), "12.3k");
    assert_eq!(count(4_000_000), "4.0M");
    assert_eq!(bytes(512), "512 B");
    assert_eq!(bytes(4_300_000), "4.1 MiB");
}

#[test]
fn run_id_prefixes_sort_with_run_ids() {
    let id = id_at(NOW);
    assert!(run_id_prefix(NOW - 1) <= id);
    assert!(run_id_prefix(NOW + 1000) > id);
    assert_eq!(run_started_ms(&id), Some(NOW));
}
