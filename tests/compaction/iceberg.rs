//! `sluice compact` on an Iceberg change log (`table_format: iceberg`, the SQL catalog on
//! SQLite, PostgreSQL source): many small runs, then compactions, each checked the ways a
//! reader reads the table — pyiceberg through the catalog and DuckDB's `iceberg_scan`
//! (the same changes before and after, fewer data files in the current snapshot, one
//! `replace` snapshot per step), the folder and its manifests as for plain compaction —
//! then a drain after the compaction, snapshot expiry, orphan removal, and a kill at
//! each fault point of the Iceberg steps. Objects: databases `t_compact_ice*`.

use std::path::Path;

use serde_json::Value;

use super::postgres::small_runs;
use super::{assert_reads, change_files, changes, compact, compaction_manifests, rows_of};
use crate::support::{Job, TestDb, readers};

/// The job's config beyond the source: small targets, every part old enough, the SQL
/// catalog in the output folder, `retention` as the snapshot retention.
fn yaml(retention: &str) -> String {
    format!(
        "{}\ntable_format: iceberg\niceberg:\n  catalog: {{ type: sql, uri: \"sqlite:///out/catalog.db\" }}\n  namespace: cdc\n  snapshot_retention: {retention}\n",
        super::config_block(1 << 20)
    )
}

const READ: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", "public_t"))
data = table.scan().to_arrow()
rows = sorted(zip(data["__pos"].to_pylist(), data["__seq"].to_pylist(), data["__op"].to_pylist(),
                  [str(i) for i in data["id"].to_pylist()], data["v"].to_pylist()),
              key=lambda r: (r[0], r[1]))
print(json.dumps({
    "rows": rows,
    "files": len(list(table.scan().plan_files())),
    "ops": [s.summary.operation.value for s in table.snapshots()],
    "metadata": table.metadata_location,
}))
"#;

const DUCKDB_READ: &str = r#"
import glob, json, os, sys, duckdb, duckdb_ext
base = os.path.join(list(duckdb_ext.__path__)[0], "extensions", "v" + duckdb.__version__)
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
for name in ("avro", "iceberg"):
    con.sql("LOAD '%s'" % glob.glob(os.path.join(base, "*", name + ".duckdb_extension"))[0])
scan = "iceberg_scan('%s')" % sys.argv[1]
rows = con.sql(f"SELECT __pos, __seq, __op, CAST(id AS VARCHAR), v FROM {scan} ORDER BY __pos, __seq").fetchall()
print(json.dumps([list(r) for r in rows]))
"#;

/// What pyiceberg reads of `public.t` (`None`: no readers' venv, skipped loudly).
fn pyiceberg(job: &Job) -> Option<Value> {
    let python = readers::python()?;
    let uri = format!("sqlite:///{}", job.out().join("catalog.db").display());
    let out = readers::run(&python, READ, &[Path::new(&uri)]);
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
}

/// The rows DuckDB's `iceberg_scan` reads from the table's current metadata file, as
/// pyiceberg's `rows`; `None` without DuckDB's Iceberg venv.
fn duckdb(read: &Value) -> Option<Value> {
    let duckdb = crate::support::service_url("SLUICE_TEST_DUCKDB_ICEBERG_PYTHON")?;
    let metadata = read["metadata"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://");
    let out = readers::run(&duckdb, DUCKDB_READ, &[Path::new(metadata)]);
    Some(serde_json::from_str(&out).unwrap())
}

fn count(ops: &Value, op: &str) -> usize {
    ops.as_array().unwrap().iter().filter(|o| *o == op).count()
}

/// A job on a new database with `runs` small runs committed to the Iceberg table.
fn job_with_runs(name: &str, runs: i64, retention: &str) -> Option<(TestDb, Job)> {
    let admin = crate::support::service_url("SLUICE_TEST_PG_URL")?;
    let db = TestDb::new(&admin, name);
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["public.t"], &yaml(retention));
    job.drain();
    small_runs(&job, &db, 1, runs);
    Some((db, job))
}

#[test]
fn iceberg_compaction_replaces_small_parts_and_readers_read_the_same_rows() {
    let Some((db, job)) = job_with_runs("compact_ice", 12, "7d") else {
        return;
    };
    let dir = job.out().join("public.t");
    let before_files = change_files(&dir);
    assert_eq!(before_files.len(), 12);
    let expected = changes(&rows_of(&dir, &before_files));
    let Some(before) = pyiceberg(&job) else {
        return;
    };
    assert_eq!(before["files"], 12, "{before}");
    assert_eq!(before["rows"].as_array().unwrap().len(), expected.len());

    let summary = compact(&job, &[]);
    let table = &summary["tables"]["public.t"];
    assert_eq!(table["status"], "compacted", "{summary}");
    assert_eq!(
        (
            table["parts_replaced"].as_u64(),
            table["parts_written"].as_u64()
        ),
        (Some(12), Some(1)),
        "{summary}"
    );
    let after = pyiceberg(&job).unwrap();
    assert_eq!(
        after["rows"], before["rows"],
        "pyiceberg reads the same changes"
    );
    assert_eq!(
        after["files"], 1,
        "one data file in the current snapshot: {after}"
    );
    assert_eq!(after["ops"].as_array().unwrap().last().unwrap(), "replace");
    if let Some(duck) = duckdb(&after) {
        assert_eq!(duck, after["rows"], "DuckDB reads the same changes");
    }
    // The folder keeps the replaced parts (retained snapshots reference them): copies,
    // counted once; the manifests' live parts hold each change once.
    assert_eq!(change_files(&dir).len(), 13);
    assert_reads(&job.out(), "public.t", &expected);
    let manifests = compaction_manifests(&job.out(), "public.t");
    assert_eq!(
        manifests[0]["iceberg"]["status"], "committed",
        "{}",
        manifests[0]
    );
    assert!(manifests[0]["iceberg"]["snapshot_id"].is_i64());
    if let Some(text) = readers::sluice_sql_replayed(&job, "public.t", "id", "v", "=") {
        assert_eq!(text, super::postgres::source_text(&db));
    }
    // Nothing more to do: no second replace.
    let idle = compact(&job, &[]);
    assert_eq!(idle["tables"]["public.t"]["status"], "nothing", "{idle}");
    assert_eq!(count(&pyiceberg(&job).unwrap()["ops"], "replace"), 1);

    // A drain after the compaction commits as before, then both are compacted again.
    small_runs(&job, &db, 13, 2);
    let drained = pyiceberg(&job).unwrap();
    assert_eq!(drained["files"], 3, "{drained}");
    let again = compact(&job, &[]);
    assert_eq!(again["tables"]["public.t"]["parts_replaced"], 3, "{again}");
    let compacted = pyiceberg(&job).unwrap();
    assert_eq!(compacted["rows"], drained["rows"]);
    assert_eq!(compacted["files"], 1);

    // Expiry: with a short retention every snapshot but the current one and back to the
    // newest drain snapshot goes, and the parts only expired snapshots referenced.
    let text = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(
        &job.config,
        text.replace("snapshot_retention: 7d", "snapshot_retention: 1ms"),
    )
    .unwrap();
    let metadata_dir = dir.join("_iceberg").join("metadata");
    let metadata_before = std::fs::read_dir(&metadata_dir).unwrap().count();
    let expired = compact(&job, &[]);
    let t = &expired["tables"]["public.t"];
    assert!(t["snapshots_expired"].as_u64().unwrap() >= 14, "{expired}");
    assert!(t["files_removed"].as_u64().unwrap() >= 12, "{expired}");
    let kept = pyiceberg(&job).unwrap();
    assert_eq!(kept["rows"], drained["rows"], "the table reads the same");
    assert!(kept["ops"].as_array().unwrap().len() <= 3, "{kept}");
    if let Some(duck) = duckdb(&kept) {
        assert_eq!(duck, kept["rows"]);
    }
    let left = change_files(&dir);
    assert!(
        left.iter().all(|f| !before_files.contains(f)),
        "the first step's parts are gone: {left:?}"
    );
    assert!(std::fs::read_dir(&metadata_dir).unwrap().count() < metadata_before);
    let expected = changes(&rows_of(&dir, &left));
    assert_reads(&job.out(), "public.t", &expected);
    if let Some(text) = readers::sluice_sql_replayed(&job, "public.t", "id", "v", "=") {
        assert_eq!(text, super::postgres::source_text(&db));
    }

    // Orphans: an old data file and an old metadata file nothing names are removed; a
    // recent one of each is kept.
    let a_part = dir.join(&left[0]);
    let old_part = dir.join("cdc-20200101T000000000Z-abcdef-000001.parquet");
    let new_part = dir.join(format!(
        "cdc-{}-abcdef-000001.parquet",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ")
    ));
    let old_avro = metadata_dir.join("00000000-0000-4000-8000-000000000000-m0.avro");
    let new_avro = metadata_dir.join("00000000-0000-4000-8000-000000000001-m0.avro");
    for file in [&old_part, &new_part] {
        std::fs::copy(&a_part, file).unwrap();
    }
    for file in [&old_avro, &new_avro] {
        std::fs::write(file, b"Obj\x01").unwrap();
    }
    for file in [&old_part, &old_avro] {
        let touched = std::process::Command::new("touch")
            .args(["-d", "2020-01-01T00:00:00Z"])
            .arg(file)
            .status()
            .unwrap();
        assert!(touched.success());
    }
    let swept = compact(&job, &[]);
    assert_eq!(swept["tables"]["public.t"]["orphans_removed"], 2, "{swept}");
    assert!(!old_part.exists() && !old_avro.exists());
    assert!(
        new_part.exists() && new_avro.exists(),
        "recent files are kept"
    );
    assert_eq!(pyiceberg(&job).unwrap()["rows"], drained["rows"]);
}

/// A kill at each fault point of an Iceberg compaction, then the next compaction: the
/// table reads the same changes at every instant and after, with one `replace` per step.
#[test]
fn iceberg_compaction_killed_at_each_fault_point_is_finished_once() {
    for (i, point) in [
        "compact_part_durable",
        "compact_manifest_written",
        "compact_iceberg_committed",
        "compact_step_done",
        "iceberg_expired",
    ]
    .into_iter()
    .enumerate()
    {
        let retention = if point == "iceberg_expired" {
            "1ms"
        } else {
            "7d"
        };
        let Some((db, job)) = job_with_runs(&format!("compact_ice_k{i}"), 6, retention) else {
            return;
        };
        let dir = job.out().join("public.t");
        let expected = changes(&rows_of(&dir, &change_files(&dir)));
        let Some(before) = pyiceberg(&job) else {
            return;
        };
        let run = job.run(&["compact"], &[("SLUICE_FAULT", point)]);
        assert_ne!(run.code, 0, "{point}: the fault kills the compaction");
        let crashed = pyiceberg(&job).unwrap();
        assert_eq!(
            crashed["rows"], before["rows"],
            "{point}: exact after the kill"
        );
        assert_reads(&job.out(), "public.t", &expected);
        // The lease of the killed compaction is held by a dead pid: taken over at once.
        let summary = compact(&job, &[]);
        assert_ne!(
            summary["tables"]["public.t"]["status"], "failed",
            "{point}: {summary}"
        );
        let after = pyiceberg(&job).unwrap();
        assert_eq!(after["rows"], before["rows"], "{point}: the same changes");
        assert_eq!(after["files"], 1, "{point}: {after}");
        if point != "iceberg_expired" {
            assert_eq!(
                count(&after["ops"], "replace"),
                1,
                "{point}: committed once: {after}"
            );
        }
        if let Some(duck) = duckdb(&after) {
            assert_eq!(duck, after["rows"], "{point}");
        }
        let expected = changes(&rows_of(&dir, &change_files(&dir)));
        assert_reads(&job.out(), "public.t", &expected);
        for m in compaction_manifests(&job.out(), "public.t") {
            assert_eq!(m["iceberg"]["status"], "committed", "{point}: {m}");
        }
        // A drain after it still commits.
        small_runs(&job, &db, 7, 1);
        assert_eq!(pyiceberg(&job).unwrap()["files"], 2, "{point}");
    }
}

/// A drain that dies between its Iceberg commit and its checkpoint, then a compaction
/// with expiry: the crashed snapshot stays reachable, and the next drain still drops it —
/// every change once.
#[test]
fn iceberg_a_crashed_drain_snapshot_is_dropped_after_a_compaction_and_expiry() {
    let Some((db, job)) = job_with_runs("compact_ice_crash", 6, "1ms") else {
        return;
    };
    db.sql("INSERT INTO t VALUES (500, 'crashed'); UPDATE t SET v = 'again' WHERE id = 2");
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed")]);
    assert_ne!(run.code, 0, "the fault kills the drain");
    let Some(crashed) = pyiceberg(&job) else {
        return;
    };
    let summary = compact(&job, &[]);
    assert_eq!(
        summary["tables"]["public.t"]["status"], "compacted",
        "{summary}"
    );
    let compacted = pyiceberg(&job).unwrap();
    assert_eq!(compacted["rows"], crashed["rows"], "the same changes");
    assert_eq!(
        compacted["files"], 2,
        "the compacted part and the crashed run's: {compacted}"
    );
    let drained = job.drain_when_free();
    assert_eq!(drained["status"], "drained", "{drained}");
    let after = pyiceberg(&job).unwrap();
    let rows = after["rows"].as_array().unwrap();
    let distinct: std::collections::BTreeSet<String> =
        rows.iter().map(|r| format!("{}/{}", r[0], r[1])).collect();
    assert_eq!(distinct.len(), rows.len(), "every change once: {after}");
    assert_eq!(rows.len(), crashed["rows"].as_array().unwrap().len());
    let dir = job.out().join("public.t");
    let live: Vec<String> = super::live_files(&job.out(), "public.t")
        .into_iter()
        .collect();
    assert_eq!(
        rows_of(&dir, &live).len(),
        rows.len(),
        "the manifests' live parts agree"
    );
}

/// A drain beside a compaction paused before its Iceberg commit: the drain's snapshot
/// is committed first and kept; the compaction commits on top of it.
#[test]
fn iceberg_a_drain_beside_a_compaction_keeps_its_snapshot() {
    let Some((db, job)) = job_with_runs("compact_ice_beside", 6, "7d") else {
        return;
    };
    let Some(before) = pyiceberg(&job) else {
        return;
    };
    let compaction = job
        .command(
            &["compact"],
            &[("SLUICE_FAULT", "compact_manifest_written:pause=4000")],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    small_runs(&job, &db, 7, 1);
    let out = compaction.wait_with_output().unwrap();
    assert!(out.status.success());
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["tables"]["public.t"]["parts_replaced"], 6,
        "{summary}"
    );
    let after = pyiceberg(&job).unwrap();
    assert_eq!(
        after["files"], 2,
        "the compacted part and the drain's: {after}"
    );
    let dir = job.out().join("public.t");
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    assert_eq!(
        after["rows"].as_array().unwrap().len(),
        expected.len(),
        "{after}"
    );
    assert!(after["rows"].as_array().unwrap().len() > before["rows"].as_array().unwrap().len());
    let ops = after["ops"].as_array().unwrap();
    assert_eq!(ops[ops.len() - 2], "append", "{after}");
    assert_eq!(ops[ops.len() - 1], "replace", "{after}");
}
