//! PostgreSQL: a table after many one-transaction runs (inserts, updates, deletes, key
//! changes, NULLs), compacted into one part whose rows are the parts' rows byte for byte;
//! more runs, compacted again (the compacted part is an input in turn); a compaction with
//! nothing to do; the record `sluice status` shows. Objects: database `t_compact_pg_*`.

use super::{
    assert_reads, change_files, changes, compact, compaction_manifests, config_block, data_files,
    live_files, replayed, rows_of,
};
use crate::support::{Job, TestDb, readers};

/// One small transaction per run, then a drain: `runs` runs from `from`.
pub fn small_runs(job: &Job, db: &TestDb, from: i64, runs: i64) {
    for i in from..from + runs {
        let mut sql = format!("INSERT INTO t VALUES ({i}, 'v{i}');");
        if i % 3 == 0 {
            sql += &format!("UPDATE t SET v = v || '+' WHERE id = {};", i / 2);
        }
        if i % 5 == 0 {
            sql += &format!("DELETE FROM t WHERE id = {};", i - 4);
        }
        if i % 7 == 0 {
            sql += &format!(
                "UPDATE t SET id = id + 1000, v = NULL WHERE id = {};",
                i - 1
            );
        }
        db.sql(&format!("BEGIN;{sql}COMMIT;"));
        assert_eq!(job.drain()["status"], "drained");
    }
}

pub fn source_text(db: &TestDb) -> String {
    db.sql(
        "SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ',' ORDER BY id), '') FROM t",
    )
}

#[test]
fn postgres_many_small_runs_compact_into_one_part_with_the_same_rows() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "compact_pg");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["public.t"], &config_block(1 << 20));
    job.drain();
    small_runs(&job, &db, 1, 30);
    let dir = job.out().join("public.t");
    let before = change_files(&dir);
    assert_eq!(before.len(), 30, "{before:?}");
    let expected = changes(&rows_of(&dir, &before));
    assert_eq!(replayed(&rows_of(&dir, &before)), source_text(&db));

    let summary = compact(&job, &[]);
    let table = &summary["tables"]["public.t"];
    assert_eq!(summary["status"], "compacted", "{summary}");
    assert_eq!(table["status"], "compacted", "{summary}");
    assert_eq!(
        (
            table["files_before"].as_u64(),
            table["files_after"].as_u64()
        ),
        (Some(30), Some(1))
    );
    assert_eq!(
        (
            table["parts_replaced"].as_u64(),
            table["parts_written"].as_u64()
        ),
        (Some(30), Some(1))
    );
    assert_eq!(table["rows"].as_u64(), Some(expected.len() as u64));
    let after = change_files(&dir);
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after[0].starts_with("compacted-"), "{after:?}");
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(rows.len(), expected.len(), "no copy left in the folder");
    assert_eq!(replayed(&rows), source_text(&db));
    if let Some(text) = readers::sluice_sql_replayed(&job, "public.t", "id", "v", "=") {
        assert_eq!(text, source_text(&db));
    }
    // The manifest names what it replaced and what it wrote.
    let manifests = compaction_manifests(&job.out(), "public.t");
    assert_eq!(manifests.len(), 1);
    let replaced: Vec<&str> = manifests[0]["replaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap().trim_start_matches("public.t/"))
        .collect();
    assert_eq!(replaced, before, "replaced in stream order");
    assert_eq!(
        manifests[0]["parts"][0]["key"],
        format!("public.t/{}", after[0])
    );
    assert_eq!(manifests[0]["rows"].as_u64(), Some(expected.len() as u64));

    // Nothing left to do.
    let idle = compact(&job, &[]);
    assert_eq!(idle["tables"]["public.t"]["status"], "nothing", "{idle}");

    // More runs, compacted again: the compacted part is an input like any other.
    small_runs(&job, &db, 31, 10);
    let expected = changes(&rows_of(&dir, &change_files(&dir)));
    let again = compact(&job, &[]);
    assert_eq!(
        again["tables"]["public.t"]["parts_replaced"].as_u64(),
        Some(11),
        "{again}"
    );
    let files = change_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let rows = assert_reads(&job.out(), "public.t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    assert_eq!(
        live_files(&job.out(), "public.t")
            .into_iter()
            .collect::<Vec<_>>(),
        files
    );
    if let Some(text) = readers::sluice_sql_replayed(&job, "public.t", "id", "v", "=") {
        assert_eq!(text, source_text(&db));
    }
    // A drain after it goes on as before.
    small_runs(&job, &db, 41, 2);
    let rows = rows_of(&dir, &change_files(&dir));
    assert_eq!(replayed(&rows), source_text(&db));

    // The state store records the table's compaction; `sluice status` shows it.
    let ops: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            job.dir
                .path()
                .join("state")
                .join("ops")
                .join(format!("{}.json", db.name)),
        )
        .unwrap(),
    )
    .unwrap();
    let record = &ops["ops"]["compact#public.t"];
    assert_eq!(record["last"]["status"], "compacted", "{ops}");
    assert_eq!(record["last"]["files_after"], 1, "{ops}");
    assert!(record["lease_owner"].is_null(), "released: {ops}");
    let status = job.run(&["status", "--json"], &[]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let jobs = status.summary()["jobs"].clone();
    let compaction = &jobs[0]["compaction"]["public.t"];
    assert_eq!(compaction["status"], "compacted", "{jobs}");
    assert_eq!(compaction["files_after"], 1, "{jobs}");
    let table = job.run(&["status"], &[]);
    assert!(table.stdout.contains("COMPACTED"), "{}", table.stdout);
}

/// Parts a re-baseline superseded (every change before its epoch marker) are dropped in a
/// step of their own; the parts after the marker are compacted; the replay is unchanged.
#[test]
fn postgres_parts_a_rebaseline_superseded_are_dropped() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "compact_pg_sup");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["public.t"], &config_block(1 << 20));
    job.drain();
    small_runs(&job, &db, 1, 8);
    let run = job.run(&["baseline", "--table", "public.t"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["status"], "done", "{}", run.stdout);
    small_runs(&job, &db, 9, 4);
    let dir = job.out().join("public.t");
    assert_eq!(change_files(&dir).len(), 12);
    let everything = |dir: &std::path::Path| replayed(&rows_of(dir, &data_files(dir)));
    assert_eq!(everything(&dir), source_text(&db));

    let summary = compact(&job, &[]);
    let table = &summary["tables"]["public.t"];
    assert_eq!(table["superseded_dropped"], 8, "{summary}");
    assert_eq!(table["parts_written"], 1, "{summary}");
    let files = change_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        everything(&dir),
        source_text(&db),
        "the whole folder replays the same"
    );
    if let Some(text) = readers::sluice_sql_replayed(&job, "public.t", "id", "v", "=") {
        assert_eq!(text, source_text(&db));
    }
    let manifests = compaction_manifests(&job.out(), "public.t");
    let dropped = &manifests[0];
    assert_eq!(dropped["parts"], serde_json::json!([]), "{dropped}");
    assert_eq!(dropped["replaced"].as_array().unwrap().len(), 8);
    let marker = dropped["superseded_by"].as_str().unwrap();
    for part in dropped["replaced"].as_array().unwrap() {
        assert!(part["last_pos"].as_str().unwrap() < marker, "{part}");
    }
    // The live parts: the compacted one (the re-baseline's own parts are the baseline's).
    assert_eq!(
        live_files(&job.out(), "public.t")
            .into_iter()
            .collect::<Vec<_>>(),
        files
    );
}
