//! PostgreSQL definitions sluice refuses before harm, and DDL the stream carries through
//! (issue 20): each refusal happens before any publication or slot exists and its hint's
//! fix is then applied and shown to work; each DDL is applied mid-backlog between writes,
//! and the output replays (the documented rule) to the source's state. Every test owns
//! its database, slot and publication (`ddl_*` names).

use crate::support::{Job, TestDb, baseline_and_changes, replay};

/// Slots and publications in the test database: what a refused run must not have made.
fn resources(db: &TestDb) -> String {
    db.sql(&format!(
        "SELECT (SELECT count(*) FROM pg_replication_slots WHERE database = '{}') || '/' || \
                (SELECT count(*) FROM pg_publication)",
        db.name
    ))
}

/// `t (id, v)` replayed from the job's output (baseline and changes) as `id=v,…` in id
/// order — the form of `TestDb::id_v_text`.
fn replayed(job: &Job, table: &str) -> String {
    let mut state: Vec<(i64, String)> =
        replay(&baseline_and_changes(&job.out().join(table)), &["id"])
            .values()
            .map(|r| {
                (
                    r["id"].as_deref().unwrap().parse().unwrap(),
                    r["v"].clone().unwrap_or_else(|| "NULL".into()),
                )
            })
            .collect();
    state.sort();
    state
        .iter()
        .map(|(id, v)| format!("{id}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `t (id, v)` of the source as `id=v,…` in id order.
fn source(db: &TestDb, table: &str) -> String {
    db.sql(&format!(
        "SELECT coalesce(string_agg(id || '=' || coalesce(v::text, 'NULL'), ',' ORDER BY id), '') FROM {table}"
    ))
}

#[test]
fn ddl_deferrable_primary_key_is_refused_before_publishing_and_full_identity_fixes_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ddl_deferrable");
    db.sql("CREATE TABLE t (id int PRIMARY KEY DEFERRABLE INITIALLY IMMEDIATE, v text)");
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_KEY_DEFERRABLE");
    assert!(run.stderr.contains("t_pkey"), "{}", run.stderr);
    assert_eq!(resources(&db), "0/0", "nothing was created");
    // The application's own writes still work: the table was not published.
    db.sql("UPDATE t SET v = 'b2' WHERE id = 2; DELETE FROM t WHERE id = 1");
    // The hint's fix.
    db.sql("ALTER TABLE t REPLICA IDENTITY FULL");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (3, 'c'); UPDATE t SET v = 'c2' WHERE id = 3; DELETE FROM t WHERE id = 2");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t"), source(&db, "t"));
    assert_eq!(source(&db, "t"), "3=c2");
}

#[test]
fn ddl_row_filtered_or_column_listed_publication_is_refused_and_set_table_fixes_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ddl_pubfilter");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, w int)");
    db.sql("INSERT INTO t VALUES (1, 'a', 1), (20, 'b', 2)");
    let publication = format!("p_{}", db.name);
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    for (definition, names) in [
        ("t WHERE (id > 10)", "WHERE (id > 10)"),
        ("t (id, v)", "without w"),
    ] {
        db.sql(&format!("DROP PUBLICATION IF EXISTS {publication}"));
        db.sql(&format!(
            "CREATE PUBLICATION {publication} FOR TABLE {definition}"
        ));
        let run = job.run(&["drain"], &[]);
        assert_eq!(run.code, 5, "{definition}: {}", run.stderr);
        assert_eq!(run.error_code(), "SLUICE_SOURCE_PUBLICATION_FILTERED");
        assert!(run.stderr.contains(names), "{definition}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "ALTER PUBLICATION \"{publication}\" SET TABLE \"public\".\"t\""
            )),
            "{}",
            run.stderr
        );
        assert_eq!(resources(&db), "0/1", "no slot was created");
    }
    // A column list naming exactly the captured columns is what sluice captures.
    db.sql(&format!(
        "ALTER PUBLICATION {publication} SET TABLE t (id, v, w)"
    ));
    assert_eq!(job.drain()["status"], "drained");
    // The hint's fix: the table without filter or column list.
    db.sql(&format!(
        "ALTER PUBLICATION {publication} SET TABLE \"public\".\"t\""
    ));
    assert_eq!(job.drain()["status"], "drained");
    db.sql(
        "INSERT INTO t VALUES (2, 'low', 3), (30, 'high', 4); UPDATE t SET v = 'a2' WHERE id = 1",
    );
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t"), source(&db, "t"));
    assert_eq!(source(&db, "t"), "1=a2,2=low,20=b,30=high");
}

#[test]
fn ddl_for_all_tables_publication_is_refused_and_an_own_publication_fixes_it() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ddl_puball");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE other (id int PRIMARY KEY)");
    let publication = format!("p_{}", db.name);
    db.sql(&format!("CREATE PUBLICATION {publication} FOR ALL TABLES"));
    let job = Job::postgres(&db, &["t"], "");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PUBLICATION_ALL_TABLES");
    assert!(
        run.stderr.contains("source.postgres.publication"),
        "{}",
        run.stderr
    );
    assert_eq!(resources(&db), "0/1", "no slot was created");
    // The hint's fix: a publication of the job's own.
    let config = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(
        &job.config,
        config.replace(&publication, &format!("{publication}_own")),
    )
    .unwrap();
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (1, 'a'); INSERT INTO other VALUES (1); UPDATE t SET v = 'b'");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t"), source(&db, "t"));
    assert_eq!(source(&db, "t"), "1=b");
}
