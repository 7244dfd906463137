//! Per-table re-baselines on PostgreSQL (issue 20): a change the stream cannot carry in
//! place (a narrowing retype, `ADD COLUMN … DEFAULT`, `RENAME COLUMN`) re-baselines that
//! table alone while the other table's changes are written in the same run, and `sluice
//! baseline --table` re-snapshots one table of a running job under concurrent writes.
//! Every check replays the output by the documented rule — over *every* part of the table
//! folder, old plan folders included: a `rebaseline` (or `truncate`) row drops every
//! earlier row. Every test owns its database, slot and publication (`rb_*` names).

use std::path::{Path, PathBuf};

use crate::support::{Job, Row, TestDb, column_types, epoch, read_batches, readers, render};

/// Every `.parquet` file under `dir` (recursively; `_`-prefixed folders skipped, as
/// readers do), rendered, in replay order (`__pos`, then `__seq` as a number).
pub(super) fn every_row(dir: &Path) -> Vec<Row> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() && !name.starts_with('_') {
                walk(&path, out);
            } else if name.ends_with(".parquet") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    let mut rows: Vec<Row> = files
        .iter()
        .flat_map(|f| read_batches(f))
        .flat_map(|b| render(&b))
        .collect();
    rows.sort_by_key(|r| {
        (
            r["__pos"].clone(),
            r["__seq"].as_deref().map(|s| s.parse::<i64>().unwrap()),
        )
    });
    rows
}

/// The table replayed by the documented rule over every part of its folder, as
/// `id:c1:c2…` lines in id order (`NULL` for null or absent).
pub(super) fn replayed(job: &Job, table: &str, columns: &[&str]) -> String {
    let mut state: std::collections::BTreeMap<i64, Row> = Default::default();
    for row in every_row(&job.out().join(table)) {
        if epoch(&row) {
            state.clear();
            continue;
        }
        let id: i64 = row["id"].as_deref().unwrap().parse().unwrap();
        if row["__op"].as_deref() == Some("delete") {
            state.remove(&id);
        } else {
            state.insert(id, row);
        }
    }
    state
        .iter()
        .map(|(id, row)| {
            let cells: Vec<String> = columns
                .iter()
                .map(|c| {
                    row.get(*c)
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect();
            format!("{id}:{}", cells.join(":"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The source's rows in the form of [`replayed`].
pub(super) fn source(db: &TestDb, table: &str, columns: &[&str]) -> String {
    let cells: Vec<String> = columns
        .iter()
        .map(|c| format!("coalesce({c}::text, 'NULL')"))
        .collect();
    db.sql(&format!(
        "SELECT coalesce(string_agg(id || ':' || {}, ',' ORDER BY id), '') FROM {table}",
        cells.join(" || ':' || ")
    ))
}

/// The `snapshot#<table>` record of the job's local state.
pub(super) fn record(job: &Job, table: &str) -> serde_json::Value {
    job.local_state()["snapshots"][table].clone()
}

/// Two tables `t` and `u` (`id int PRIMARY KEY, v text`), seeded and baselined; the
/// stream started.
fn two_tables(admin: &str, name: &str, t_values: &str) -> (TestDb, Job) {
    let db = TestDb::new(admin, name);
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql(&format!(
        "INSERT INTO t SELECT i, {t_values} FROM generate_series(1, 5) i"
    ));
    db.sql("INSERT INTO u SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t", "u"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    (db, job)
}

/// Applies `ddl` to `t` mid-backlog between writes to both tables, drains once, and checks
/// that `t` alone was re-baselined in that run, `u`'s changes are all there, and both
/// replay to the source (`t_after`: t's columns after the DDL).
fn ddl_rebaselines_t_alone(db: &TestDb, job: &Job, ddl: &str, t_write: &str, t_after: &[&str]) {
    let u_before = record(job, "u");
    let t_before = record(job, "t");
    db.sql("INSERT INTO t (id, v) VALUES (10, '10'); UPDATE t SET v = '11' WHERE id = 1");
    db.sql("INSERT INTO u VALUES (10, 'ten'); UPDATE u SET v = 'one' WHERE id = 1");
    db.sql(ddl);
    db.sql(t_write);
    db.sql("DELETE FROM t WHERE id = 2; DELETE FROM u WHERE id = 2");
    db.sql("INSERT INTO u VALUES (20, 'twenty'); UPDATE u SET v = 'three' WHERE id = 3");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert!(
        run.stderr.contains("SLUICE_SOURCE_TABLE_REBASELINED"),
        "{}",
        run.stderr
    );
    let rebaselined = &summary["rebaselined"];
    assert_eq!(rebaselined["t"]["baseline"], "done", "{summary}");
    let stored = &job.local_state()["runs"][summary["run_id"].as_str().unwrap()]["summary"];
    assert_eq!(
        stored["rebaselined"], *rebaselined,
        "the run record says the same"
    );
    assert!(rebaselined["t"]["at"].as_str().unwrap().starts_with("pg:"));
    assert!(rebaselined.get("u").is_none(), "{summary}");
    // u's five changes, all in this run.
    assert_eq!(summary["tables"]["u"]["rows"], 5, "{summary}");
    // t's record was anchored anew (a new plan); u's is untouched.
    assert_eq!(record(job, "u"), u_before);
    let t_now = record(job, "t");
    assert_eq!(t_now["status"], "done", "{t_now}");
    assert_ne!(t_now["run_id"], t_before["run_id"]);
    assert!(t_now["reason"].as_str().is_some(), "{t_now}");
    let markers: Vec<Row> = every_row(&job.out().join("t"))
        .into_iter()
        .filter(|r| r["__op"].as_deref() == Some("rebaseline"))
        .collect();
    assert_eq!(markers.len(), 1, "one epoch marker");
    assert_eq!(replayed(job, "t", t_after), source(db, "t", t_after));
    assert_eq!(replayed(job, "u", &["v"]), source(db, "u", &["v"]));
    // The stream goes on for both; t's changes are written again.
    db.sql("INSERT INTO t (id) VALUES (30); UPDATE t SET id = 31 WHERE id = 3");
    db.sql("INSERT INTO u VALUES (30, 'thirty')");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 3, "{summary}");
    assert_eq!(replayed(job, "t", t_after), source(db, "t", t_after));
    assert_eq!(replayed(job, "u", &["v"]), source(db, "u", &["v"]));
}

#[test]
fn rb_incompatible_retype_rebaselines_that_table_and_the_other_goes_on() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_retype", "i::text");
    ddl_rebaselines_t_alone(
        &db,
        &job,
        "ALTER TABLE t ALTER COLUMN v TYPE int USING v::int",
        "INSERT INTO t VALUES (20, 20); UPDATE t SET v = 44 WHERE id = 4",
        &["v"],
    );
    let t: Vec<String> = every_row(&job.out().join("t"))
        .into_iter()
        .filter_map(|r| r["v"].clone())
        .collect();
    assert!(t.contains(&"44".to_owned()), "{t:?}");
    if let Some(text) = readers::sluice_sql_replayed(&job, "u", "id", "v", ":") {
        assert_eq!(text, source(&db, "u", &["v"]), "DuckDB, u");
    }
}

#[test]
fn rb_add_column_with_a_default_rebaselines_so_untouched_rows_have_it() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_default", "'s' || i");
    ddl_rebaselines_t_alone(
        &db,
        &job,
        "ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7",
        "INSERT INTO t VALUES (20, 'twenty', 8); UPDATE t SET v = 'four' WHERE id = 4",
        &["v", "d"],
    );
    // Rows the application never touched after the ALTER replay with the default.
    assert!(source(&db, "t", &["v", "d"]).contains("5:s5:7"));
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "d", ":") {
        assert_eq!(text, source(&db, "t", &["d"]), "DuckDB, t");
    }
}

#[test]
fn rb_rename_column_rebaselines_so_every_row_has_the_new_name() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_rename", "'s' || i");
    ddl_rebaselines_t_alone(
        &db,
        &job,
        "ALTER TABLE t RENAME COLUMN v TO w",
        "INSERT INTO t VALUES (20, 'twenty'); UPDATE t SET w = 'four' WHERE id = 4",
        &["w"],
    );
    assert!(source(&db, "t", &["w"]).contains("5:s5"));
}

#[test]
fn rb_nullable_column_added_without_a_default_just_continues() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_nullable", "'s' || i");
    db.sql("INSERT INTO t VALUES (10, 'ten')");
    db.sql("ALTER TABLE t ADD COLUMN d int");
    db.sql("INSERT INTO t VALUES (20, 'twenty', 8); UPDATE t SET v = 'one' WHERE id = 1");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 3, "{summary}");
    assert_eq!(
        replayed(&job, "t", &["v", "d"]),
        source(&db, "t", &["v", "d"])
    );
}

#[test]
fn rb_baseline_table_resnapshots_one_table_under_concurrent_writes() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_table", "'s' || i");
    db.sql(
        "UPDATE t SET v = 'x' || id; DELETE FROM t WHERE id = 5; INSERT INTO t VALUES (6, 'six')",
    );
    db.sql("INSERT INTO u VALUES (6, 'six')");
    job.drain();
    // Make t's lake state stale: this run's changes of t are lost (moved aside).
    let lost = job.out().join("t/_lost");
    std::fs::create_dir_all(&lost).unwrap();
    for part in crate::support::part_files(&job.out().join("t"), "cdc-") {
        std::fs::rename(&part, lost.join(part.file_name().unwrap())).unwrap();
    }
    assert_ne!(replayed(&job, "t", &["v"]), source(&db, "t", &["v"]));
    let u_before = record(&job, "u");
    let t_before = record(&job, "t");
    // Writes before, during and after the re-baseline, to both tables.
    let url = db.url.clone();
    let writer = std::thread::spawn(move || {
        for i in 0..60 {
            crate::support::psql(
                &url,
                &format!(
                    "INSERT INTO t VALUES ({n}, 'w{i}') ON CONFLICT (id) DO UPDATE SET v = excluded.v; \
                     UPDATE t SET v = 'u{i}' WHERE id = {m}; DELETE FROM t WHERE id = {d}; \
                     INSERT INTO u VALUES ({n}, 'w{i}') ON CONFLICT (id) DO UPDATE SET v = excluded.v",
                    n = 100 + i % 7,
                    m = 1 + i % 4,
                    d = 100 + (i + 3) % 7
                ),
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    let drained = job.run(&["drain"], &[]);
    assert_eq!(drained.code, 0, "{}", drained.stderr);
    let run = job.run(&["baseline", "--table", "t"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let baseline = run.summary();
    assert_eq!(baseline["status"], "done", "{baseline}");
    assert!(baseline["tables"].get("t").is_some(), "{baseline}");
    writer.join().unwrap();
    job.drain();
    assert_eq!(replayed(&job, "t", &["v"]), source(&db, "t", &["v"]));
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", ":") {
        assert_eq!(text, source(&db, "t", &["v"]), "DuckDB, t");
    }
    // u's record untouched; t's anchored anew, into a new plan folder.
    assert_eq!(record(&job, "u"), u_before);
    let t_now = record(&job, "t");
    assert_eq!(t_now["status"], "done");
    assert_ne!(t_now["run_id"], t_before["run_id"]);
    let folders = std::fs::read_dir(job.out().join("t/snapshot"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(
        folders, 2,
        "the first baseline's folder and the re-baseline's"
    );
    // An unknown table is a config error naming it.
    let unknown = job.run(&["baseline", "--table", "nope"], &[]);
    assert_eq!(unknown.code, 1, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("nope"), "{}", unknown.stderr);
}

#[test]
fn rb_a_rebaseline_that_cannot_run_after_the_run_is_pending_and_the_next_run_finishes_it() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_pending", "i::text");
    db.sql("INSERT INTO t VALUES (10, '10'); INSERT INTO u VALUES (10, 'ten')");
    db.sql("ALTER TABLE t ALTER COLUMN v TYPE int USING v::int");
    db.sql("INSERT INTO t VALUES (20, 20); UPDATE u SET v = 'one' WHERE id = 1");
    // The re-baseline after the run fails (transient) at its first chunk record.
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "chunk_done:error")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(
        summary["rebaselined"]["t"]["baseline"], "pending",
        "{summary}"
    );
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    assert_ne!(record(&job, "t")["status"], "done");
    // The next run writes t's changes after the new anchor and finishes the re-baseline.
    db.sql("UPDATE t SET v = 21 WHERE id = 20; DELETE FROM t WHERE id = 1; INSERT INTO u VALUES (11, 'x')");
    let summary = job.drain();
    assert_eq!(summary["tables"]["t"]["rows"], 2, "{summary}");
    assert_eq!(record(&job, "t")["status"], "done");
    assert_eq!(replayed(&job, "t", &["v"]), source(&db, "t", &["v"]));
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
}

/// The DDL between two runs, with no change of `t` between the earlier run and it: the
/// shape the earlier run saw last (`t/_stream_shape.json`) is what the next run compares.
#[test]
fn rb_a_default_column_or_a_rename_between_runs_rebaselines_too() {
    let admin = pg_or_skip!();
    for (name, ddl, write, columns) in [
        (
            "rb_between_default",
            "ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7",
            "INSERT INTO t VALUES (20, 'twenty', 8)",
            &["v", "d"][..],
        ),
        (
            "rb_between_rename",
            "ALTER TABLE t RENAME COLUMN v TO w",
            "INSERT INTO t VALUES (20, 'twenty')",
            &["w"][..],
        ),
    ] {
        let (db, job) = two_tables(&admin, name, "'s' || i");
        db.sql("UPDATE t SET v = 'one' WHERE id = 1; INSERT INTO u VALUES (10, 'ten')");
        assert!(job.drain().get("rebaselined").is_none());
        db.sql(ddl);
        db.sql(write);
        db.sql("INSERT INTO u VALUES (11, 'eleven')");
        let summary = job.drain();
        assert_eq!(
            summary["rebaselined"]["t"]["baseline"], "done",
            "{name}: {summary}"
        );
        assert_eq!(summary["tables"]["u"]["rows"], 1, "{summary}");
        assert_eq!(
            replayed(&job, "t", columns),
            source(&db, "t", columns),
            "{name}"
        );
        assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
        // The shape is known again after the re-baseline: the next runs just continue.
        db.sql(write.replace("20", "21").as_str());
        let summary = job.drain();
        assert!(summary.get("rebaselined").is_none(), "{name}: {summary}");
        db.sql(write.replace("20", "22").as_str());
        let summary = job.drain();
        assert!(summary.get("rebaselined").is_none(), "{name}: {summary}");
        assert_eq!(
            replayed(&job, "t", columns),
            source(&db, "t", columns),
            "{name}"
        );
    }
}

/// Adds `table` to the job's `source.tables` (as an operator edits the config).
fn add_table(job: &Job, table: &str) {
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    let before = yaml.clone();
    let yaml = yaml.replacen("tables: [t]", &format!("tables: [t, {table}]"), 1);
    assert_ne!(yaml, before, "{before}");
    std::fs::write(&job.config, yaml).unwrap();
}

/// A table added to a running job's `source.tables`: sluice adds it to its publication,
/// baselines it from the job's checkpoint (an epoch marker first) and streams it from
/// then on — its writes while it was not captured are in the snapshot, its later changes
/// in the stream — while the other table's changes keep flowing in the same runs.
#[test]
fn rb_a_table_added_to_a_running_job_is_published_baselined_and_streamed() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "rb_added");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 's' || i FROM generate_series(1, 5) i");
    db.sql("INSERT INTO u SELECT i, 's' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'one' WHERE id = 1; UPDATE u SET v = 'one' WHERE id = 1");
    assert_eq!(job.drain()["tables"]["t"]["rows"], 1);
    // u changes while only t is captured, then joins the job.
    db.sql("DELETE FROM u WHERE id = 2; INSERT INTO u VALUES (6, 'six'); INSERT INTO t VALUES (6, 'six')");
    add_table(&job, "u");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 1, "{summary}");
    let published = db.sql(&format!(
        "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_publication_tables WHERE pubname = 'p_{}'",
        db.name
    ));
    assert_eq!(published, "t,u");
    let u = record(&job, "u");
    assert_eq!(u["status"], "done", "{u}");
    assert_eq!(u["reason"], "added to source.tables", "{u}");
    let markers = every_row(&job.out().join("u"))
        .into_iter()
        .filter(|r| r["__op"].as_deref() == Some("rebaseline"))
        .count();
    assert_eq!(
        markers, 1,
        "the added table's snapshot starts with an epoch marker"
    );
    for table in ["t", "u"] {
        assert_eq!(
            replayed(&job, table, &["v"]),
            source(&db, table, &["v"]),
            "{table}"
        );
    }
    // Both stream from here on.
    db.sql("UPDATE u SET v = 'three' WHERE id = 3; DELETE FROM u WHERE id = 4; INSERT INTO t VALUES (7, 'seven')");
    let summary = job.drain();
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 1, "{summary}");
    for table in ["t", "u"] {
        assert_eq!(
            replayed(&job, table, &["v"]),
            source(&db, table, &["v"]),
            "{table}"
        );
    }
    if let Some(text) = readers::sluice_sql_replayed(&job, "u", "id", "v", ":") {
        assert_eq!(text, source(&db, "u", &["v"]), "sluice sql");
    }
}

/// A table removed from a running job's `source.tables` leaves sluice's publication; its
/// changes still in the backlog are skipped, and the other table goes on. A captured
/// table renamed while the config keeps the old name: its changes up to the rename are
/// written, later ones are not captured, and every run says so (`SLUICE_SOURCE_TABLE_GONE`).
#[test]
fn rb_a_table_removed_from_a_running_job_is_unpublished_and_the_rest_goes_on() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_removed", "'s' || i");
    db.sql("UPDATE u SET v = 'one' WHERE id = 1; UPDATE t SET v = 'one' WHERE id = 1");
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(
        &job.config,
        yaml.replacen("tables: [t, u]", "tables: [t]", 1),
    )
    .unwrap();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["tables"]["t"]["rows"], 1, "{summary}");
    assert!(summary["tables"].get("u").is_none(), "{summary}");
    assert!(
        run.stderr.contains("not in source.tables"),
        "{}",
        run.stderr
    );
    let published = db.sql(&format!(
        "SELECT string_agg(tablename, ',') FROM pg_publication_tables WHERE pubname = 'p_{}'",
        db.name
    ));
    assert_eq!(published, "t");
    db.sql("UPDATE u SET v = 'two' WHERE id = 2; UPDATE t SET v = 'two' WHERE id = 2");
    assert_eq!(job.drain()["tables"]["t"]["rows"], 1);
    assert_eq!(replayed(&job, "t", &["v"]), source(&db, "t", &["v"]));

    db.sql("UPDATE t SET v = 'last' WHERE id = 4");
    let at_rename = source(&db, "t", &["v"]);
    db.sql("ALTER TABLE t RENAME TO t2; UPDATE t2 SET v = 'three' WHERE id = 3");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("SLUICE_SOURCE_TABLE_GONE"),
        "{}",
        run.stderr
    );
    assert_eq!(run.summary()["tables"]["t"]["rows"], 1);
    assert_eq!(replayed(&job, "t", &["v"]), at_rename);
}

/// A captured table dropped mid-backlog: its changes up to the drop are written, the run
/// warns `SLUICE_SOURCE_TABLE_GONE`, and the other table goes on in the same and later
/// runs.
#[test]
fn rb_a_table_dropped_mid_backlog_keeps_its_last_changes_and_the_rest_goes_on() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_dropped", "'s' || i");
    db.sql("UPDATE t SET v = 'last' WHERE id = 1; DELETE FROM t WHERE id = 2; INSERT INTO u VALUES (6, 'six')");
    let t_before_drop = source(&db, "t", &["v"]);
    db.sql("DROP TABLE t");
    db.sql("UPDATE u SET v = 'one' WHERE id = 1");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("SLUICE_SOURCE_TABLE_GONE"),
        "{}",
        run.stderr
    );
    let summary = run.summary();
    assert_eq!(summary["tables"]["t"]["rows"], 2, "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    assert_eq!(
        replayed(&job, "t", &["v"]),
        t_before_drop,
        "t as it was at the drop"
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
    db.sql("INSERT INTO u VALUES (7, 'seven')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["tables"]["u"]["rows"], 1);
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
}

/// A captured table renamed mid-backlog, the config following it: the new name is an
/// added table (re-baselined from the checkpoint), the backlog's changes under the old
/// name are written to it, and both tables replay to the source.
#[test]
fn rb_a_renamed_table_followed_by_the_config_replays_under_its_new_name() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "rb_renamed");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY, v text)",
    );
    db.sql("INSERT INTO t SELECT i, 's' || i FROM generate_series(1, 5) i");
    db.sql("INSERT INTO u SELECT i, 's' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t", "u"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'one' WHERE id = 1; UPDATE u SET v = 'one' WHERE id = 1");
    db.sql("ALTER TABLE t RENAME TO t2");
    db.sql("UPDATE t2 SET v = 'two' WHERE id = 2; INSERT INTO u VALUES (6, 'six')");
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(
        &job.config,
        yaml.replacen("tables: [t, u]", "tables: [t2, u]", 1),
    )
    .unwrap();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(record(&job, "t2")["reason"], "added to source.tables");
    for table in ["t2", "u"] {
        assert_eq!(
            replayed(&job, table, &["v"]),
            source(&db, table, &["v"]),
            "{table}"
        );
    }
    db.sql("UPDATE t2 SET v = 'three' WHERE id = 3");
    assert_eq!(job.drain()["tables"]["t2"]["rows"], 1);
    assert_eq!(replayed(&job, "t2", &["v"]), source(&db, "t2", &["v"]));
}

/// `t` (`id int PRIMARY KEY, v text`) with 60 rows, baselined in chunks of 10 rows.
fn sixty_rows_baselined(admin: &str, name: &str) -> (TestDb, Job) {
    let db = TestDb::new(admin, name);
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 's' || i FROM generate_series(1, 60) i; ANALYZE t");
    let job = Job::postgres(
        &db,
        &["t"],
        "initial: snapshot\nbaseline: { chunk_rows: 10 }",
    );
    assert_eq!(job.drain()["status"], "drained");
    (db, job)
}

/// `sluice baseline --table t`, crashed after its second chunk: the re-baseline is left
/// `running`.
fn stop_a_rebaseline_after_two_chunks(job: &Job) {
    let run = job.run(
        &["baseline", "--table", "t"],
        &[("SLUICE_FAULT", "chunk_done@2")],
    );
    assert_ne!(run.code, 0, "the fault stops it: {}", run.stderr);
    assert_eq!(record(job, "t")["status"], "running");
}

/// A re-baseline stopped half-way (crashed after its second chunk) leaves the table's
/// folder replaying to a whole table — the earlier rows with the chunks read so far on
/// top — never a partial one: the epoch marker is written only once every chunk is. The
/// resumed re-baseline then finishes exactly.
#[test]
fn rb_a_rebaseline_stopped_half_way_shows_no_partial_table() {
    let admin = pg_or_skip!();
    let (db, job) = sixty_rows_baselined(&admin, "rb_halfway");
    db.sql("UPDATE t SET v = 'x' || id WHERE id <= 30");
    let whole = source(&db, "t", &["v"]);
    stop_a_rebaseline_after_two_chunks(&job);
    // The changes not drained yet are in the stream; the replay is the whole table as of
    // the last drain with the chunks read so far on top.
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t", &["v"]), whole, "mid re-baseline");
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", ":") {
        assert_eq!(text, whole, "sluice sql, mid re-baseline");
    }
    let run = job.run(&["baseline", "--table", "t"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(record(&job, "t")["status"], "done");
    assert_eq!(replayed(&job, "t", &["v"]), source(&db, "t", &["v"]));
}

/// A re-baseline stopped half-way, then a column added before the next run: the next
/// drain gives up the chunks of the old shape, anchors the table anew and reads it again
/// in the same run — no run is left skipping the table's changes (the delete here) with
/// its re-baseline still wanted — and its summary says so.
#[test]
fn rb_a_rebaseline_stopped_half_way_then_reshaped_is_read_again_by_the_next_drain() {
    let admin = pg_or_skip!();
    let (db, job) = sixty_rows_baselined(&admin, "rb_halfway_reshaped");
    stop_a_rebaseline_after_two_chunks(&job);
    db.sql("ALTER TABLE t ADD COLUMN w int");
    db.sql("UPDATE t SET w = id WHERE id <= 5; DELETE FROM t WHERE id BETWEEN 40 AND 45");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(
        summary["rebaselined"]["t"]["baseline"], "done",
        "the re-baseline this run carried on is in its summary: {summary}"
    );
    assert_eq!(record(&job, "t")["status"], "done");
    assert_eq!(
        replayed(&job, "t", &["v", "w"]),
        source(&db, "t", &["v", "w"])
    );
}

/// `ADD COLUMN … DEFAULT` with no later change of the table: PostgreSQL logs no DDL, so
/// no change shows the new shape — the run compares the catalog with the names the last
/// run saw and re-baselines the table now, so every row replays with the default.
#[test]
fn rb_a_default_column_with_no_change_after_it_rebaselines_at_the_next_run() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_default_idle", "'s' || i");
    db.sql("UPDATE t SET v = 'one' WHERE id = 1");
    assert!(job.drain().get("rebaselined").is_none());
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    db.sql("INSERT INTO u VALUES (10, 'ten')");
    let summary = job.drain();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 1, "{summary}");
    assert_eq!(
        replayed(&job, "t", &["v", "d"]),
        source(&db, "t", &["v", "d"])
    );
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
}

/// The schema history (`t/_schema_history.json`, docs/output.md#schema-history): each
/// shape the stream met is a version whose `since` is the `__pos` of the first change
/// written in it, with what changed; every run-manifest part names its version. The run
/// that met the two changes dies right after its checkpoint (before its end writes the
/// history), so the history comes from its run manifest, settled by the next run.
#[test]
fn rb_schema_history_records_each_shape_from_its_first_change_also_after_a_crash() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_history", "'s' || i");
    db.sql("INSERT INTO t VALUES (10, 'ten')");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("ALTER TABLE t ADD COLUMN d int");
    db.sql("INSERT INTO t VALUES (20, 'twenty', 8)");
    db.sql("ALTER TABLE t ALTER COLUMN d TYPE bigint");
    db.sql("INSERT INTO t VALUES (30, 'thirty', 9); INSERT INTO u VALUES (30, 'u')");
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", "checkpoint_written@1")]);
    assert_ne!(
        crashed.code, 0,
        "the fault stops the run: {}",
        crashed.stderr
    );
    let history_file = job.out().join("t/_schema_history.json");
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&history_file).unwrap()).unwrap();
    assert_eq!(
        stored["shapes"].as_array().unwrap().len(),
        1,
        "the crashed run never reached its end: {stored}"
    );
    let next = job.drain_when_free();
    assert_eq!(
        next["tables"]["t"]["rows"].as_u64().unwrap_or(0),
        0,
        "the crashed run's checkpoint covered its parts: {next}"
    );

    let history: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&history_file).unwrap()).unwrap();
    let shapes = history["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 3, "{history:#}");
    let pos_of = |id: &str| {
        every_row(&job.out().join("t"))
            .into_iter()
            .find(|r| r["id"].as_deref() == Some(id) && r["__op"].as_deref() == Some("insert"))
            .and_then(|r| r["__pos"].clone())
            .unwrap()
    };
    let names = |s: &serde_json::Value| column_types(&s["columns"]);
    assert_eq!(shapes[0]["version"], 1);
    assert_eq!(shapes[0]["since"], pos_of("10"));
    assert_eq!(names(&shapes[0]), ["id:int32", "v:utf8"]);
    assert_eq!(shapes[1]["since"], pos_of("20"));
    assert_eq!(names(&shapes[1]), ["id:int32", "v:utf8", "d:int32"]);
    assert_eq!(
        shapes[1]["changes"],
        serde_json::json!([{"kind": "add", "column": "d"}])
    );
    assert_eq!(shapes[2]["since"], pos_of("30"));
    assert_eq!(
        shapes[2]["changes"],
        serde_json::json!([{"kind": "widen", "column": "d", "from": "int32", "to": "int64"}])
    );
    // Every listed part names the version whose columns its own schema has.
    let mut seen = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(job.out().join("t/_manifests")).unwrap() {
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        for part in manifest["parts"].as_array().unwrap() {
            let version = part["shape"]
                .as_u64()
                .expect("a change part names its shape");
            let key = part["key"].as_str().unwrap();
            let batches = read_batches(&job.out().join(key));
            let fields: Vec<String> = batches[0]
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .filter(|n| !n.starts_with("__"))
                .collect();
            let want: Vec<String> = names(&shapes[version as usize - 1])
                .into_iter()
                .map(|n| n.split(':').next().unwrap().to_owned())
                .collect();
            assert_eq!(fields, want, "{key} is version {version}");
            seen.insert(version);
        }
    }
    assert_eq!(seen, [1, 2, 3].into());
    // The other table's history has its one shape.
    let u: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(job.out().join("u/_schema_history.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(u["shapes"].as_array().unwrap().len(), 1, "{u}");
}

/// DDL in the same transaction as data, on both sides of it and on the other table too
/// (PostgreSQL runs DDL inside transactions; pgoutput then sends the new Relation in the
/// middle of one commit): a change the stream carries in place continues, one it cannot
/// re-baselines `t` alone; either way both tables replay to the source, and the stream
/// goes on after it.
#[test]
fn rb_ddl_inside_a_transaction_with_data_continues_or_rebaselines_that_table_alone() {
    let admin = pg_or_skip!();
    // (DDL, t's write after it in the same transaction, t's columns after, re-baselined)
    let cases: [(&str, &str, &[&str], bool); 5] = [
        (
            "ALTER TABLE t ADD COLUMN d int",
            "INSERT INTO t VALUES (20, 'twenty', 8); UPDATE t SET d = 4 WHERE id = 4",
            &["v", "d"],
            false,
        ),
        (
            "ALTER TABLE t DROP COLUMN v",
            "INSERT INTO t VALUES (20); DELETE FROM t WHERE id = 4",
            &["id"],
            false,
        ),
        (
            "ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7",
            "INSERT INTO t VALUES (20, 'twenty', 8); UPDATE t SET v = 'four' WHERE id = 4",
            &["v", "d"],
            true,
        ),
        (
            "ALTER TABLE t RENAME COLUMN v TO w",
            "INSERT INTO t VALUES (20, 'twenty'); UPDATE t SET w = 'four' WHERE id = 4",
            &["w"],
            true,
        ),
        (
            "ALTER TABLE t ALTER COLUMN v TYPE int USING v::int",
            "INSERT INTO t VALUES (20, 20); UPDATE t SET v = 44 WHERE id = 4",
            &["v"],
            true,
        ),
    ];
    for (n, (ddl, t_write, t_after, rebaselines)) in cases.into_iter().enumerate() {
        let (db, job) = two_tables(&admin, &format!("rb_intxn{n}"), "i::text");
        db.sql(&format!(
            "BEGIN; \
             INSERT INTO t (id, v) VALUES (10, '10'); UPDATE t SET v = '11' WHERE id = 1; \
             INSERT INTO u VALUES (10, 'ten'); \
             {ddl}; {t_write}; \
             UPDATE u SET v = 'one' WHERE id = 1; \
             COMMIT"
        ));
        db.sql("INSERT INTO u VALUES (20, 'twenty'); DELETE FROM t WHERE id = 2");
        let summary = job.drain();
        assert_eq!(summary["status"], "drained", "{ddl}: {summary}");
        assert_eq!(
            summary["rebaselined"].get("t").is_some(),
            rebaselines,
            "{ddl}: {summary}"
        );
        assert!(
            summary["rebaselined"].get("u").is_none(),
            "{ddl}: {summary}"
        );
        assert_eq!(summary["tables"]["u"]["rows"], 3, "{ddl}: {summary}");
        assert_eq!(
            replayed(&job, "t", t_after),
            source(&db, "t", t_after),
            "{ddl}: t"
        );
        assert_eq!(
            replayed(&job, "u", &["v"]),
            source(&db, "u", &["v"]),
            "{ddl}: u"
        );
        db.sql("INSERT INTO t (id) VALUES (30); UPDATE t SET id = 31 WHERE id = 3");
        let summary = job.drain();
        assert!(summary.get("rebaselined").is_none(), "{ddl}: {summary}");
        assert_eq!(
            replayed(&job, "t", t_after),
            source(&db, "t", t_after),
            "{ddl}: t after"
        );
    }
}

/// Found by the oracle: the first run after a baseline compares the stream with the
/// baseline's own columns (no run has stored any yet) — a rename right after the initial
/// snapshot, then a column added with a default right after the re-baseline that rename
/// caused (seen at a change, and seen at no change at all), each re-baseline `t` again.
#[test]
fn rb_a_rename_or_default_right_after_a_baseline_rebaselines_again() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_after_rb", "'s' || i");
    db.sql("ALTER TABLE t RENAME COLUMN v TO w; INSERT INTO t VALUES (10, 'ten')");
    let summary = job.drain();
    assert!(summary["rebaselined"].get("t").is_some(), "{summary}");
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    db.sql("INSERT INTO t VALUES (20, 'twenty', 8)");
    let summary = job.drain();
    assert!(summary["rebaselined"].get("t").is_some(), "{summary}");
    assert_eq!(
        replayed(&job, "t", &["w", "d"]),
        source(&db, "t", &["w", "d"])
    );
    db.sql("ALTER TABLE t ADD COLUMN e text DEFAULT 'x'");
    db.sql("INSERT INTO u VALUES (30, 'thirty')");
    let summary = job.drain();
    assert!(summary["rebaselined"].get("t").is_some(), "{summary}");
    assert_eq!(
        replayed(&job, "t", &["w", "d", "e"]),
        source(&db, "t", &["w", "d", "e"])
    );
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
}

/// Found by the oracle (seed 13760382418993927310): a column added with a default after
/// the last change a run reads of the table — the catalog at the open is compared with that
/// change's shape at the end of the run, so the table is re-baselined in the same run, not
/// left drained without the values the source holds.
#[test]
fn rb_a_default_added_after_the_runs_last_change_of_the_table_rebaselines_it() {
    let admin = pg_or_skip!();
    let (db, job) = two_tables(&admin, "rb_after_last", "'s' || i");
    db.sql("INSERT INTO t VALUES (10, 'ten'); UPDATE t SET v = 'one' WHERE id = 1");
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    db.sql("INSERT INTO u VALUES (10, 'ten')");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert!(summary["rebaselined"].get("t").is_some(), "{summary}");
    assert!(summary["rebaselined"].get("u").is_none(), "{summary}");
    assert_eq!(
        replayed(&job, "t", &["v", "d"]),
        source(&db, "t", &["v", "d"])
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
}

/// A run asks for `t`'s re-baseline (a column added with a default mid-backlog) and dies
/// before its checkpoint: the next run drains past the same change again and re-baselines
/// `t` once, after its drain — not once before it (anchored at the old checkpoint) and
/// again when it meets the change.
#[test]
fn rb_a_run_that_asked_for_a_rebaseline_and_died_before_its_checkpoint_reads_the_table_once() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "rb_died");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 's' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(
        &db,
        &["t", "u"],
        "initial: snapshot\nlease: { ttl_seconds: 2 }",
    );
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (10, 'ten'); INSERT INTO u VALUES (1, 'one')");
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    db.sql("INSERT INTO t VALUES (11, 'eleven', 8); INSERT INTO u VALUES (2, 'two')");
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "before_checkpoint")]);
    assert_ne!(run.code, 0, "the fault crashes the run: {}", run.stderr);
    assert_eq!(record(&job, "t")["status"], "wanted");

    let summary = job.drain_when_free();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    assert_eq!(record(&job, "t")["status"], "done");
    let markers = every_row(&job.out().join("t"))
        .into_iter()
        .filter(|r| r["__op"].as_deref() == Some("rebaseline"))
        .count();
    assert_eq!(markers, 1, "t is re-baselined once");
    assert_eq!(
        replayed(&job, "t", &["v", "d"]),
        source(&db, "t", &["v", "d"])
    );
    assert_eq!(replayed(&job, "u", &["v"]), source(&db, "u", &["v"]));
}

/// A job without a baseline whose only run that met the table died after its checkpoint:
/// no run stored the names it saw, no snapshot manifest lists any. A column added with a
/// default after that checkpoint is still caught at the next run's first change — the
/// crashed run stored the names its checkpoint passed, before that checkpoint.
#[test]
fn rb_a_default_column_after_a_crashed_first_run_still_rebaselines() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "rb_crashed_first");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "initial: none");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t SELECT i, 's' || i FROM generate_series(1, 5) i");
    let crashed = job.run(&["drain"], &[("SLUICE_FAULT", "checkpoint_written@1")]);
    assert_ne!(
        crashed.code, 0,
        "the fault stops the run: {}",
        crashed.stderr
    );
    db.sql("ALTER TABLE t ADD COLUMN d int DEFAULT 7");
    db.sql("INSERT INTO t VALUES (6, 's6', 8)");
    let summary = job.drain_when_free();
    assert_eq!(
        summary["rebaselined"]["t"]["baseline"], "done",
        "rows 1-5 hold d = 7 without a logged change: {summary}"
    );
    assert_eq!(
        replayed(&job, "t", &["v", "d"]),
        source(&db, "t", &["v", "d"])
    );
    db.sql("INSERT INTO t VALUES (7, 's7', 9)");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    assert_eq!(
        replayed(&job, "t", &["v", "d"]),
        source(&db, "t", &["v", "d"])
    );
}
