//! `sluice sql` as an operator meets it: a table with nothing written yet and an unknown
//! table are coded errors; a table with only a baseline has a shape and a state; the same
//! query reads change parts moved under `dt=…/hr=…/` folders (the dated layout's shape)
//! and skips everything under `_` names. Each test owns its database and slot
//! (`sqlcli_*` names).

use crate::support::{Job, TestDb, readers};

/// `sluice sql --dialect duckdb` for `table`, run with DuckDB: `id=v,…` in id-text order.
fn duckdb_state(job: &Job, table: &str) -> Option<String> {
    let python = readers::python()?;
    let run = job.run(&["sql", "--dialect", "duckdb", "--table", table], &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let script = format!(
        "import duckdb\nrows = duckdb.connect().execute('''{}''').fetchall()\n\
         print(','.join(f\"{{r[0]}}={{'NULL' if r[1] is None else r[1]}}\" for r in sorted(rows, key=lambda r: str(r[0]))))",
        run.stdout
    );
    Some(readers::run(&python, &script, &[]))
}

#[test]
fn sql_refuses_an_unknown_table_and_one_nothing_was_written_for() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "sqlcli_none");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "");
    let run = job.run(&["sql", "--dialect", "duckdb", "--table", "t"], &[]);
    assert_eq!(run.code, 5, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.summary()["error"]["code"], "SLUICE_REPLAY_NO_SCHEMA");
    assert!(run.stderr.contains("sluice drain"), "{}", run.stderr);
    let run = job.run(&["sql", "--dialect", "athena", "--table", "public.t"], &[]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.summary()["error"]["code"], "SLUICE_CONFIG_INVALID");
    let run = job.run(&["sql", "--dialect", "mysql", "--table", "t"], &[]);
    assert_eq!(run.code, 2, "clap's usage error: {}", run.stderr);
}

#[test]
fn sql_reads_a_baseline_alone_and_change_parts_in_dated_folders() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "sqlcli_dated");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("INSERT INTO t SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    // Only the baseline: no change part, no run manifest of changes yet.
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(!job.out().join("t/_manifests").exists());
    if let Some(state) = duckdb_state(&job, "t") {
        assert_eq!(state, db.id_v_text(), "baseline only");
    }
    // Changes, a truncate among them; then the change parts moved under dt=/hr= folders
    // and a stray copy under a `_` folder, which must be skipped.
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'five' WHERE id = 5; DELETE FROM t WHERE id = 1");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("TRUNCATE t; INSERT INTO t VALUES (7, 'seven'), (8, 'eight')");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'eight!' WHERE id = 8");
    assert_eq!(job.drain()["status"], "drained");
    let folder = job.out().join("t");
    let mut moved = 0;
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("cdc-") {
            let dated = folder.join(format!("dt=2026-12-0{}/hr=0{moved}", 1 + moved % 2));
            std::fs::create_dir_all(&dated).unwrap();
            let stray = folder.join("_superseded/x");
            std::fs::create_dir_all(&stray).unwrap();
            std::fs::copy(&path, stray.join(&name)).unwrap();
            std::fs::rename(&path, dated.join(&name)).unwrap();
            moved += 1;
        }
    }
    assert!(moved >= 2, "{moved} change parts");
    if let Some(state) = duckdb_state(&job, "t") {
        assert_eq!(state, db.id_v_text(), "dated folders");
        assert_eq!(state, "7=seven,8=eight!");
    }
}
