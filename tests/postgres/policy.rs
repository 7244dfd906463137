//! Column policies and row filters where PostgreSQL applies them itself: the publication's
//! column list with `policy.column_lists` (an excluded column is never decoded; without
//! it the application may still drop and retype published columns, and the excluded
//! values are dropped before anything is written) and row filter (with the baseline's
//! `WHERE`), set when the policy changes; a filter PostgreSQL would make the application's
//! UPDATEs fail on is refused first; a publication sluice does not manage is refused with
//! the statement that fixes it. Each test owns its database, slot and publication
//! (`policy_*` names).

use crate::support::{Job, TestDb, baseline_and_changes, replay};

/// `pg_publication_tables`' columns and row filter of `table`: `a,b | filter`.
fn published(db: &TestDb, table: &str) -> String {
    db.sql(&format!(
        "SELECT array_to_string(attnames, ',') || ' | ' || coalesce(rowfilter, '') \
         FROM pg_publication_tables WHERE pubname = 'p_{}' AND tablename = '{table}'",
        db.name
    ))
}

/// `t (id, v)` replayed from the job's output as `id=v,…` in id order.
fn replayed(job: &Job, table: &str) -> String {
    let mut rows: Vec<(i64, String)> =
        replay(&baseline_and_changes(&job.out().join(table)), &["id"])
            .values()
            .map(|r| {
                assert!(!r.contains_key("secret"), "{r:?}");
                (
                    r["id"].as_deref().unwrap().parse().unwrap(),
                    r["v"].clone().unwrap_or_else(|| "NULL".into()),
                )
            })
            .collect();
    rows.sort();
    rows.iter()
        .map(|(id, v)| format!("{id}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn policy_publication_lists_the_columns_and_filters_the_rows_and_follows_a_change() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "policy_pub");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, secret text)");
    db.sql("INSERT INTO t SELECT i, 'v' || i, 'SECRET-' || i FROM generate_series(1, 30) i");
    let policy = |filter: &str| {
        format!(
            "initial: snapshot\npolicy:\n  column_lists: true\n  tables:\n    t: {{ exclude: [secret], filter: \"{filter}\" }}\n"
        )
    };
    let job = Job::postgres(&db, &["t"], &policy("id > 10"));
    assert_eq!(job.drain()["status"], "drained");
    // The excluded column is not published; the filter is the server's.
    let definition = published(&db, "t");
    assert!(definition.starts_with("id,v | "), "{definition}");
    assert!(definition.contains("10"), "{definition}");
    db.sql("UPDATE t SET v = 'moved' WHERE id = 5; UPDATE t SET id = 40 WHERE id = 5"); // into the filter
    db.sql("UPDATE t SET id = -12 WHERE id = 12"); // out of it
    db.sql("UPDATE t SET v = 'low' WHERE id = 2; INSERT INTO t VALUES (31, 'high', 'SECRET-31')");
    assert_eq!(job.drain()["status"], "drained");
    let source = |above: i32| {
        db.sql(&format!(
            "SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM t WHERE id > {above}"
        ))
    };
    assert_eq!(replayed(&job, "t"), source(10));

    // A new filter: the publication is set to it and the table re-baselined under it.
    std::fs::write(
        &job.config,
        std::fs::read_to_string(&job.config)
            .unwrap()
            .replace("id > 10", "id > 20"),
    )
    .unwrap();
    let summary = job.drain();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    assert!(
        published(&db, "t").contains("20"),
        "{}",
        published(&db, "t")
    );
    db.sql("UPDATE t SET v = 'late' WHERE id = 25; UPDATE t SET v = 'hidden' WHERE id = 15");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t"), source(20));
    for part in crate::support::part_files(&job.out().join("t"), "cdc-") {
        let bytes = std::fs::read(&part).unwrap();
        assert!(
            !bytes.windows(7).any(|w| w == b"SECRET-"),
            "{}",
            part.display()
        );
    }
}

#[test]
fn policy_filter_outside_the_replica_identity_is_refused_before_the_publication() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "policy_ident");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, tenant int)");
    db.sql("INSERT INTO u VALUES (1, 1), (2, 2)");
    let job = Job::postgres(
        &db,
        &["u"],
        "policy:\n  tables:\n    u: { filter: \"tenant = 1\" }\n",
    );
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("REPLICA IDENTITY FULL"),
        "{}",
        run.stderr
    );
    assert_eq!(
        db.sql("SELECT count(*) FROM pg_publication"),
        "0",
        "nothing was published"
    );
    // The application's own writes still work; the hint's fix makes the filter work.
    db.sql("UPDATE u SET tenant = 3 WHERE id = 2; DELETE FROM u WHERE id = 2");
    db.sql("ALTER TABLE u REPLICA IDENTITY FULL");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO u VALUES (4, 1), (5, 2); UPDATE u SET tenant = 1 WHERE id = 5");
    assert_eq!(job.drain()["status"], "drained");
    let rows = crate::support::read_rows(&job.out().join("u"), "cdc-");
    let ids: Vec<_> = rows.iter().map(|r| r["id"].clone().unwrap()).collect();
    assert_eq!(
        ids,
        ["4", "5"],
        "the row moved into the filter is an insert"
    );
    assert_eq!(rows[1]["__op"].as_deref(), Some("insert"));
}

#[test]
fn policy_on_a_publication_sluice_does_not_manage_is_refused_with_the_statement() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "policy_nocreate");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, secret text)");
    db.sql(&format!("CREATE PUBLICATION p_{} FOR TABLE t", db.name));
    let job = Job::postgres(
        &db,
        &["t"],
        "policy:\n  column_lists: true\n  tables:\n    t: { exclude: [secret], filter: \"id > 1\" }\n",
    );
    let yaml = std::fs::read_to_string(&job.config)
        .unwrap()
        .replace("publication: p_", "create: false, publication: p_");
    std::fs::write(&job.config, yaml).unwrap();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PUBLICATION_FILTERED");
    assert!(
        run.stderr
            .contains("SET TABLE \"public\".\"t\" (\"id\", \"v\") WHERE ((\"id\" > 1))"),
        "{}",
        run.stderr
    );
}

#[test]
fn policy_without_column_lists_the_application_may_drop_and_retype_published_columns() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "policy_ddl");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, secret text, n int)");
    db.sql("INSERT INTO t SELECT i, 'v' || i, 'SECRET-' || i, i FROM generate_series(1, 5) i");
    let exclude = "policy:\n  tables:\n    t: { exclude: [secret] }\n";
    let job = Job::postgres(&db, &["t"], &format!("initial: snapshot\n{exclude}"));
    assert_eq!(job.drain()["status"], "drained");
    // No column list: every column is published, the application's migrations run.
    assert_eq!(published(&db, "t"), "id,v,secret,n |");
    db.sql("INSERT INTO t VALUES (6, 'v6', 'SECRET-6', 6); UPDATE t SET secret = 'SECRET-x' WHERE id = 1");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("ALTER TABLE t ALTER COLUMN n TYPE bigint");
    db.sql("ALTER TABLE t DROP COLUMN n");
    db.sql("UPDATE t SET v = 'after' WHERE id = 2; INSERT INTO t VALUES (7, 'v7', 'SECRET-7')");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(
        replayed(&job, "t"),
        db.sql("SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM t")
    );
    // No byte of an excluded value anywhere under the job's folder (parts, baseline,
    // manifests, state, spill).
    fn every_file(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                every_file(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    every_file(job.dir.path(), &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().contains("snapshot"))
    );
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes.windows(7).any(|w| w == b"SECRET-"),
            "{}",
            file.display()
        );
    }

    // With column lists the excluded column is not published, and PostgreSQL refuses to
    // drop a listed one (what docs/privacy.md warns of).
    let yaml = std::fs::read_to_string(&job.config)
        .unwrap()
        .replace("policy:\n", "policy:\n  column_lists: true\n");
    std::fs::write(&job.config, yaml).unwrap();
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(published(&db, "t"), "id,v |");
    let refused = db.sql_err("ALTER TABLE t DROP COLUMN v");
    assert!(refused.contains("depend"), "{refused}");
}
