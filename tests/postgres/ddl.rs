//! PostgreSQL definitions sluice refuses before harm, and DDL the stream carries through
//! (issue 20): each refusal happens before any publication or slot exists and its hint's
//! fix is then applied and shown to work; each DDL is applied mid-backlog between writes,
//! and the output replays (the documented rule) to the source's state. Every test owns
//! its database, slot and publication (`ddl_*` names).

use crate::support::{
    self, Job, TestDb, baseline_and_changes, column_types, part_files, readers, replay,
};

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

fn ddl_deferrable_primary_key_is_refused_before_publishing_and_full_identity_fixes_it(admin: &str) {
    let db = TestDb::new(admin, "ddl_deferrable");
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

fn ddl_row_filtered_or_column_listed_publication_is_refused_and_set_table_fixes_it(admin: &str) {
    let db = TestDb::new(admin, "ddl_pubfilter");
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

fn ddl_for_all_tables_publication_is_refused_and_an_own_publication_fixes_it(admin: &str) {
    let db = TestDb::new(admin, "ddl_puball");
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

fn ddl_truncate_is_an_event_and_the_stream_goes_on(admin: &str) {
    let db = TestDb::new(admin, "ddl_truncate");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE u (id int PRIMARY KEY, v text)");
    db.sql("CREATE TABLE other (id int PRIMARY KEY)");
    db.sql("INSERT INTO t SELECT i, 'seed' || i FROM generate_series(1, 5) i");
    db.sql("INSERT INTO u SELECT i, 'seed' || i FROM generate_series(1, 3) i");
    let job = Job::postgres(&db, &["t", "u"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    // Mid-backlog: writes, a TRUNCATE of both tables (and one not captured), a TRUNCATE in
    // the same transaction as data, more writes.
    db.sql("INSERT INTO t VALUES (6, 'six'); UPDATE u SET v = 'u1' WHERE id = 1");
    db.sql("TRUNCATE t, u, other");
    db.sql("INSERT INTO t VALUES (1, 'again'), (2, 'two'); INSERT INTO u VALUES (9, 'nine')");
    db.sql("BEGIN; INSERT INTO t VALUES (3, 'lost'); TRUNCATE t; INSERT INTO t VALUES (4, 'kept'); COMMIT");
    db.sql("UPDATE t SET v = 'kept2' WHERE id = 4; INSERT INTO u VALUES (10, 'ten')");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    let rows = job.rows("t");
    let truncates: Vec<_> = rows
        .iter()
        .filter(|r| r["__op"].as_deref() == Some("truncate"))
        .collect();
    assert_eq!(truncates.len(), 2, "one row per TRUNCATE naming t");
    assert!(
        truncates
            .iter()
            .all(|r| r["id"].is_none() && r["v"].is_none())
    );
    // In the same transaction: insert, truncate, insert at consecutive ordinals.
    let in_txn: Vec<_> = rows
        .iter()
        .filter(|r| r["__pos"] == truncates[1]["__pos"])
        .map(|r| (r["__op"].clone().unwrap(), r["__seq"].clone().unwrap()))
        .collect();
    assert_eq!(
        in_txn,
        [
            ("insert".to_owned(), "0".to_owned()),
            ("truncate".to_owned(), "1".to_owned()),
            ("insert".to_owned(), "2".to_owned())
        ]
    );
    for table in ["t", "u"] {
        assert_eq!(replayed(&job, table), source(&db, table), "{table}");
    }
    assert_eq!(source(&db, "t"), "4=kept2");
    assert_eq!(source(&db, "u"), "9=nine,10=ten");
    // `sluice sql`'s query (DuckDB) gives the same state.
    for table in ["t", "u"] {
        if let Some(text) = readers::sluice_sql_replayed(&job, table, "id", "v", "=") {
            assert_eq!(text, source(&db, table), "DuckDB, {table}");
        }
    }
    // The stream goes on.
    db.sql("INSERT INTO t VALUES (5, 'five')");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t"), source(&db, "t"));
}

fn ddl_generated_columns_are_captured_from_18_on_and_left_out_before_in_baseline_and_stream_alike(
    admin: &str,
) {
    // PostgreSQL 18's pgoutput publishes stored generated columns (the publication is made
    // with publish_generated_columns = stored), so the baseline copies them too; before 18
    // neither does. Virtual generated columns (18) are never published, never copied.
    let captured = support::pg_major(admin) >= 18;
    let db = TestDb::new(admin, "ddl_generated");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int, g int GENERATED ALWAYS AS (n * 2) STORED)");
    if captured {
        db.sql("ALTER TABLE t ADD COLUMN virt int GENERATED ALWAYS AS (n + 1) VIRTUAL");
    }
    db.sql("INSERT INTO t (id, v, n) VALUES (1, 'a', 1), (2, 'b', 2)");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    if captured {
        let published = db.sql(&format!(
            "SELECT pubgencols FROM pg_publication WHERE pubname = 'p_{}'",
            db.name
        ));
        assert_eq!(published, "s", "publish_generated_columns = stored");
    }
    db.sql("INSERT INTO t (id, v, n) VALUES (3, 'c', 3); UPDATE t SET n = 20 WHERE id = 2");
    // A generated column added mid-stream fills the existing rows by a rewrite the stream
    // never sees: on 18 the table re-baselines itself (a column that appears with a
    // default); before 18 it is simply not captured.
    db.sql("ALTER TABLE t ADD COLUMN h text GENERATED ALWAYS AS (v || '!') STORED");
    db.sql("INSERT INTO t (id, v, n) VALUES (4, 'd', 4); UPDATE t SET v = 'a2' WHERE id = 1");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained");
    let folder = job.out().join("t");
    let all = baseline_and_changes(&folder);
    assert!(all.len() >= 4);
    let columns = ["id", "v", "n", "g", "h"];
    if captured {
        assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
        assert!(
            all.iter().all(|row| !row.contains_key("virt")),
            "virtual column written"
        );
        assert_eq!(
            replayed_columns(&job, "t", &columns),
            source_columns(&db, "t", &columns)
        );
        // The stream carries them: a change after the re-baseline, both paths.
        db.sql("UPDATE t SET n = 30, v = 'c3' WHERE id = 3");
        assert_eq!(job.drain()["status"], "drained");
        let last = job.rows("t").pop().unwrap();
        assert_eq!(last["g"].as_deref(), Some("60"), "{last:?}");
        assert_eq!(last["h"].as_deref(), Some("c3!"), "{last:?}");
        assert_eq!(
            replayed_columns(&job, "t", &columns),
            source_columns(&db, "t", &columns)
        );
    } else {
        for row in &all {
            assert!(
                !row.contains_key("g") && !row.contains_key("h"),
                "a generated column was written: {row:?}"
            );
        }
        assert_eq!(replayed(&job, "t"), source(&db, "t"));
    }
    // Every part and both manifests agree: the captured columns, nothing else.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("_manifest.json")).unwrap()).unwrap();
    let names: Vec<&str> = manifest["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    if captured {
        assert_eq!(names, columns);
        let snapshot = support::snapshot_dir(&folder);
        let baseline: serde_json::Value = serde_json::from_slice(
            &std::fs::read(folder.join("snapshot").join("_manifest.json")).unwrap(),
        )
        .unwrap();
        let baseline_names: Vec<&str> = baseline["schema"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(baseline_names, columns, "{snapshot:?}");
    } else {
        assert_eq!(names, ["id", "v", "n"]);
    }
}

/// `table`'s `columns` replayed from the job's output as `c1|c2|…` rows joined by `;` in
/// `id` order (`NULL` for a null cell) — the form of [`source_columns`].
fn replayed_columns(job: &Job, table: &str, columns: &[&str]) -> String {
    let mut state: Vec<(i64, String)> =
        replay(&baseline_and_changes(&job.out().join(table)), &["id"])
            .values()
            .map(|r| {
                let cells: Vec<String> = columns
                    .iter()
                    .map(|c| {
                        r.get(*c)
                            .cloned()
                            .flatten()
                            .unwrap_or_else(|| "NULL".into())
                    })
                    .collect();
                (
                    r["id"].as_deref().unwrap().parse().unwrap(),
                    cells.join("|"),
                )
            })
            .collect();
    state.sort();
    state
        .into_iter()
        .map(|(_, row)| row)
        .collect::<Vec<_>>()
        .join(";")
}

/// `table`'s `columns` of the source as `c1|c2|…` rows joined by `;` in `id` order.
fn source_columns(db: &TestDb, table: &str, columns: &[&str]) -> String {
    let cells: Vec<String> = columns
        .iter()
        .map(|c| format!("coalesce({c}::text, 'NULL')"))
        .collect();
    db.sql(&format!(
        "SELECT coalesce(string_agg({}, ';' ORDER BY id), '') FROM {table}",
        cells.join(" || '|' || ")
    ))
}

fn ddl_widening_retypes_continue_with_the_wider_type(admin: &str) {
    let db = TestDb::new(admin, "ddl_widen");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a int, v varchar(5), m numeric(6,2), f real, s smallint)");
    db.sql("INSERT INTO t VALUES (1, 1, 'one', 1.25, 1.5, 1), (2, 2, 'two', 2.5, 2.5, 2)");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    let columns = ["id", "a", "v", "m", "f", "s"];
    db.sql("INSERT INTO t VALUES (3, 3, 'three', 3.75, 3.5, 3)");
    db.sql("ALTER TABLE t ALTER COLUMN a TYPE bigint, ALTER COLUMN v TYPE varchar(40)");
    db.sql("INSERT INTO t VALUES (4, 5000000000, 'a longer text', 4.5, 4.5, 4); UPDATE t SET a = 6000000000 WHERE id = 1");
    // In the same transaction as data.
    db.sql(
        "BEGIN; UPDATE t SET m = 9999.99 WHERE id = 2; \
         ALTER TABLE t ALTER COLUMN m TYPE numeric(12,2), ALTER COLUMN f TYPE double precision, \
         ALTER COLUMN s TYPE int; \
         INSERT INTO t VALUES (5, 5, 'five', 1234567890.12, 0.1, 100000); COMMIT",
    );
    db.sql("DELETE FROM t WHERE id = 3; UPDATE t SET f = 2.25 WHERE id = 2");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(
        replayed_columns(&job, "t", &columns),
        source_columns(&db, "t", &columns)
    );
    // A part never mixes shapes: each part's schema holds one type per column, and the
    // last manifest names the wider types.
    let folder = job.out().join("t");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("_manifest.json")).unwrap()).unwrap();
    let types = column_types(&manifest["schema"]);
    assert_eq!(
        types,
        [
            "id:int32",
            "a:int64",
            "v:utf8",
            "m:decimal(12,2)",
            "f:float64",
            "s:int32"
        ]
    );
    assert!(summary["parts"].as_u64().unwrap() >= 3, "{summary}");
    // Each part names the type its column had there, source type included.
    let mut shapes = std::collections::BTreeSet::new();
    for part in part_files(&folder, "cdc-") {
        let file = std::fs::File::open(&part).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let schema = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .unwrap()
            .iter()
            .find(|kv| kv.key == "sluice.schema")
            .and_then(|kv| kv.value.clone())
            .unwrap();
        let schema: serde_json::Value = serde_json::from_str(&schema).unwrap();
        let a = schema["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "a")
            .unwrap()
            .clone();
        shapes.insert(format!(
            "{}:{}",
            a["type"].as_str().unwrap(),
            a["source_type"].as_str().unwrap()
        ));
    }
    assert_eq!(
        shapes.into_iter().collect::<Vec<_>>(),
        ["int32:integer", "int64:bigint"]
    );
    // `sluice sql`'s query unifies the int32 and int64 parts (DuckDB, union_by_name).
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "a", "=") {
        assert_eq!(
            text,
            db.sql("SELECT string_agg(id || '=' || a, ',' ORDER BY id) FROM t"),
            "DuckDB, id=a"
        );
    }
    // The stream goes on.
    db.sql("INSERT INTO t VALUES (6, 7000000000, 'six', 6.5, 6.5, 6)");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(
        replayed_columns(&job, "t", &columns),
        source_columns(&db, "t", &columns)
    );
}

fn ddl_partitioned_table_is_captured_and_baselined_as_its_parent(admin: &str) {
    let db = TestDb::new(admin, "ddl_partitioned");
    db.sql(
        "CREATE TABLE m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id); \
         CREATE TABLE m_low PARTITION OF m FOR VALUES FROM (0) TO (100); \
         CREATE TABLE m_high PARTITION OF m FOR VALUES FROM (100) TO (200)",
    );
    db.sql("INSERT INTO m SELECT i, 'seed' || i FROM generate_series(1, 150, 7) i");
    let job = Job::postgres(&db, &["m"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(
        replayed(&job, "m"),
        source(&db, "m"),
        "the baseline read the parent"
    );
    db.sql("INSERT INTO m VALUES (2, 'low'), (102, 'high'); UPDATE m SET v = 'u' WHERE id = 8");
    // A row moving to another partition, a partition created mid-backlog and written to.
    db.sql("UPDATE m SET id = 115 WHERE id = 15");
    db.sql("CREATE TABLE m_top PARTITION OF m FOR VALUES FROM (200) TO (300)");
    db.sql("INSERT INTO m VALUES (250, 'top'); DELETE FROM m WHERE id = 1; UPDATE m SET v = 'top2' WHERE id = 250");
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(replayed(&job, "m"), source(&db, "m"));
    let folders: Vec<String> = std::fs::read_dir(job.out())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('_'))
        .collect();
    assert_eq!(folders, ["m"], "every partition's changes are the parent's");
    // A TRUNCATE of the parent is a truncate row of the parent.
    db.sql("INSERT INTO m VALUES (3, 'three'); TRUNCATE m; INSERT INTO m VALUES (4, 'four'), (104, 'x')");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "m"), source(&db, "m"));
    assert_eq!(source(&db, "m"), "4=four,104=x");
}

fn ddl_partitioned_table_under_a_publication_naming_partitions_is_refused_with_a_fix(admin: &str) {
    let db = TestDb::new(admin, "ddl_partpub");
    db.sql(
        "CREATE TABLE m (id int PRIMARY KEY, v text) PARTITION BY LIST (id); \
         CREATE TABLE m_a PARTITION OF m FOR VALUES IN (1, 2); \
         CREATE TABLE m_b PARTITION OF m FOR VALUES IN (3, 4)",
    );
    let publication = format!("p_{}", db.name);
    db.sql(&format!("CREATE PUBLICATION {publication} FOR TABLE m"));
    let job = Job::postgres(&db, &["m"], "");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("publish_via_partition_root = true"),
        "{}",
        run.stderr
    );
    assert_eq!(resources(&db), "0/1", "no slot was created");
    db.sql(&format!(
        "ALTER PUBLICATION {publication} SET (publish_via_partition_root = true)"
    ));
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO m VALUES (1, 'a'), (3, 'c'); UPDATE m SET v = 'b' WHERE id = 1");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "m"), source(&db, "m"));
    assert_eq!(source(&db, "m"), "1=b,3=c");
}

fn ddl_a_key_with_a_generated_column_is_refused_before_18_and_captured_from_18_on(admin: &str) {
    let db = TestDb::new(admin, "ddl_genkey");
    db.sql("CREATE TABLE t (id int, v text, g int GENERATED ALWAYS AS (id * 2) STORED, PRIMARY KEY (id, g))");
    db.sql("INSERT INTO t (id, v) VALUES (1, 'a')");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    if support::pg_major(admin) >= 18 {
        // PostgreSQL 18 publishes the stored generated column: the key is whole.
        assert_eq!(job.drain()["status"], "drained");
        db.sql("INSERT INTO t (id, v) VALUES (2, 'b'); UPDATE t SET v = 'a2' WHERE id = 1; DELETE FROM t WHERE id = 2");
        assert_eq!(job.drain()["status"], "drained");
        let columns = ["id", "v", "g"];
        assert_eq!(
            replayed_columns(&job, "t", &columns),
            source_columns(&db, "t", &columns)
        );
        return;
    }
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PREREQUISITE");
    assert!(
        run.stderr.contains("generated column(s) g"),
        "{}",
        run.stderr
    );
    assert_eq!(resources(&db), "0/0", "nothing was created");
    // The hint's fix: a key of stored, non-generated columns.
    db.sql("ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (id)");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t (id, v) VALUES (2, 'b'); UPDATE t SET v = 'a2' WHERE id = 1");
    assert_eq!(job.drain()["status"], "drained");
    assert_eq!(replayed(&job, "t"), source(&db, "t"));
}

on_each_pg_major!(
    ddl_deferrable_primary_key_is_refused_before_publishing_and_full_identity_fixes_it,
    ddl_row_filtered_or_column_listed_publication_is_refused_and_set_table_fixes_it,
    ddl_for_all_tables_publication_is_refused_and_an_own_publication_fixes_it,
    ddl_truncate_is_an_event_and_the_stream_goes_on,
    ddl_generated_columns_are_captured_from_18_on_and_left_out_before_in_baseline_and_stream_alike,
    ddl_widening_retypes_continue_with_the_wider_type,
    ddl_partitioned_table_is_captured_and_baselined_as_its_parent,
    ddl_partitioned_table_under_a_publication_naming_partitions_is_refused_with_a_fix,
    ddl_a_key_with_a_generated_column_is_refused_before_18_and_captured_from_18_on,
);

/// PostgreSQL 18, a publication made without `publish_generated_columns = stored` (by its
/// owner, or by sluice before the server was upgraded from 17) and a captured table that
/// gains a stored generated column: the run is refused, naming the column and the fix;
/// after the fix the table re-baselines itself and then streams the column.
#[test]
fn ddl_a_publication_without_generated_columns_on_18_is_refused_and_its_fix_rebaselines() {
    let admin = pg18_or_skip!();
    let db = TestDb::new(&admin, "ddl_pubgen");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let publication = format!("p_{}", db.name);
    db.sql(&format!("CREATE PUBLICATION {publication} FOR TABLE t"));
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')");
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    // The owner made the publication and the slot; the job creates nothing.
    db.sql(&format!(
        "SELECT pg_create_logical_replication_slot('s_{}', 'pgoutput')",
        db.name
    ));
    let yaml = std::fs::read_to_string(&job.config).unwrap().replace(
        &format!("publication: {publication} }}"),
        &format!("publication: {publication}, create: false, adopt_slot: true }}"),
    );
    std::fs::write(&job.config, yaml).unwrap();
    assert_eq!(job.drain()["status"], "drained");
    db.sql("INSERT INTO t VALUES (3, 'c')");
    db.sql("ALTER TABLE t ADD COLUMN g text GENERATED ALWAYS AS (v || '!') STORED");
    db.sql("UPDATE t SET v = 'a2' WHERE id = 1");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_PUBLICATION_FILTERED");
    assert!(run.stderr.contains("t.g"), "{}", run.stderr);
    assert!(
        run.stderr.contains("publish_generated_columns = stored"),
        "{}",
        run.stderr
    );
    db.sql(&format!(
        "ALTER PUBLICATION {publication} SET (publish_generated_columns = stored)"
    ));
    db.sql("INSERT INTO t VALUES (4, 'd')");
    let summary = job.drain();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    db.sql("UPDATE t SET v = 'b2' WHERE id = 2");
    assert_eq!(job.drain()["status"], "drained");
    let columns = ["id", "v", "g"];
    assert_eq!(
        replayed_columns(&job, "t", &columns),
        source_columns(&db, "t", &columns)
    );
    assert_eq!(job.rows("t").pop().unwrap()["g"].as_deref(), Some("b2!"));
}
