//! What only MariaDB baselines show: composite and text keys (collations, latin1) chunked
//! without gaps, snapshot rows typed exactly like the change stream's, a keyless table
//! baselined by a declared non-unique key. The baseline cases every
//! engine shares are in `conformance::source::baseline`.

use crate::support::{self, Job, Row, TestMysqlDb, read_batches, read_rows};

/// The replayed state as `k1|k2=v` text in key-text order, for comparison with the source.
fn replayed(job: &Job, table: &str, key: &[&str]) -> String {
    support::replayed_text(&job.out().join(table), key)
}

/// The same text from the source (`key` as SQL expressions of the key columns).
fn source_state(db: &TestMysqlDb, table: &str, key: &[&str]) -> String {
    let k = key
        .iter()
        .map(|c| format!("CAST({c} AS CHAR)"))
        .collect::<Vec<_>>()
        .join(", '|', ");
    let order = key
        .iter()
        .map(|c| format!("CAST({c} AS BINARY)"))
        .collect::<Vec<_>>()
        .join(", ");
    db.sql(&format!(
        "SET SESSION group_concat_max_len = 1 << 30; \
         SELECT COALESCE(GROUP_CONCAT(CONCAT({k}, '=', COALESCE(v, 'NULL')) ORDER BY {order} SEPARATOR ','), '') FROM {table}"
    ))
}

#[test]
fn composite_and_text_keys_are_chunked_without_gaps_or_overlap() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "baseline_keys");
    // An integer-led composite key (range split + seek) and a text key (key walk, with a
    // case-insensitive collation and a latin1 column).
    db.sql(
        "CREATE TABLE c (a int NOT NULL, b varchar(10) NOT NULL, v varchar(20), PRIMARY KEY (a, b)) ENGINE=InnoDB; \
         CREATE TABLE s (k varchar(20) CHARACTER SET latin1 NOT NULL PRIMARY KEY, v varchar(20)) ENGINE=InnoDB; \
         INSERT INTO c SELECT seq DIV 4, CONCAT('b', seq % 4), CONCAT('v', seq) FROM seq_1_to_3000; \
         INSERT INTO s SELECT CONCAT(CHAR(65 + seq % 26), 'é', LPAD(seq, 5, '0')), CONCAT('v', seq) FROM seq_1_to_3000; \
         ANALYZE TABLE c, s",
    );
    let job = Job::mysql(&db, &["c", "s"], "", "baseline: { chunk_rows: 250 }");
    let baseline = job.run(&["baseline"], &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    let summary = baseline.summary();
    for table in ["c", "s"] {
        let parts = support::part_files(&support::snapshot_dir(&job.out().join(table)), "part-");
        assert!(parts.len() >= 8, "{table}: {summary}");
        assert_eq!(summary["tables"][table]["rows"], 3000, "{summary}");
    }
    db.sql("UPDATE c SET v = 'x' WHERE a = 7; DELETE FROM s WHERE k LIKE 'B%'; INSERT INTO s VALUES ('zz', 'new')");
    job.drain();
    assert_eq!(
        replayed(&job, "c", &["a", "b"]),
        source_state(&db, "c", &["a", "b"])
    );
    // The replay orders text keys by their UTF-8 bytes; the source's binary order of the
    // latin1 column differs for 'é', so compare as sets.
    let mut got: Vec<String> = replayed(&job, "s", &["k"])
        .split(',')
        .map(str::to_owned)
        .collect();
    let mut want: Vec<String> = db
        .sql("SET SESSION group_concat_max_len = 1 << 30; SELECT GROUP_CONCAT(CONCAT(k, '=', v) SEPARATOR ',') FROM s")
        .split(',')
        .map(str::to_owned)
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got.len(), 3000 - 116 + 1, "116 keys start with B");
    assert_eq!(got, want);
}

const TYPES: &str = "CREATE TABLE t (id int PRIMARY KEY, ti tinyint, tu tinyint unsigned, si smallint, su smallint unsigned, \
     mi mediumint, mu mediumint unsigned, i int, iu int unsigned, bi bigint, bu bigint unsigned, \
     d decimal(20,4), dw decimal(50,10), f float, db double, dt date, dtm datetime(6), dt0 datetime, \
     ts timestamp(3) NULL, tm time(6), y year, c char(3), vc varchar(10), tx text, \
     l1 varchar(10) CHARACTER SET latin1, bn binary(4), vb varbinary(10), bl blob, j json, \
     e enum('small','large'), st set('a','b','c'), bt bit(10))";

const TYPED_ROWS: &str = "SET time_zone = '+02:00'; INSERT INTO t VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, \
     -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, -1234567890123456.7891, \
     1234567890123456789012345678901234567890.0123456789, 1.5, -2.25e100, '1969-07-20', \
     '2000-02-29 12:34:56.789012', '2024-01-02 03:04:05', '2026-12-01 10:00:00.123', '23:59:59.999999', 2024, \
     'ab', 'short', 'unicode ✓ ünï', 'café €', 0x00ff10, 0xdeadbeef, 0x0001, '{\"k\": [1, 2]}', 'large', \
     'a,c', b'1000000001'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
     NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', '', '', '', NULL, '', '', NULL, NULL, '', NULL), \
     (3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '2024-02-29', '1970-01-01 00:00:00', '9999-12-31 23:59:59', \
     '2038-01-19 05:14:07', '00:00:00', 0, 'x', 'é', '', 'ÿ', 0x00, '', '', '[]', 'small', '', b'0')";

#[test]
fn snapshot_rows_have_the_change_parts_types_and_values() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "baseline_types");
    db.sql(TYPES);
    // The same rows through the change stream (job `changes`) and through a baseline.
    let changes = Job::mysql(&db, &["t"], "", "");
    changes.drain();
    db.sql(TYPED_ROWS);
    changes.drain();
    let baseline = Job::mysql(&db, &["t"], "", "");
    let run = baseline.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let strip = |rows: Vec<Row>| -> Vec<Row> {
        rows.into_iter()
            .map(|mut r| {
                for meta in ["__op", "__pos", "__seq", "__ts"] {
                    r.remove(meta);
                }
                r
            })
            .collect()
    };
    let from_changes = strip(changes.rows("t"));
    let from_snapshot = strip(read_rows(
        &support::snapshot_dir(&baseline.out().join("t")),
        "part-",
    ));
    assert_eq!(from_changes.len(), 3);
    assert_eq!(from_snapshot, from_changes);
    // The same Arrow types, column by column.
    let schema_of = |dir: std::path::PathBuf, prefix: &str| {
        let part = support::part_files(&dir, prefix).remove(0);
        read_batches(&part)[0].schema()
    };
    let snap = schema_of(support::snapshot_dir(&baseline.out().join("t")), "part-");
    let cdc = schema_of(changes.out().join("t"), "cdc-");
    for field in cdc.fields().iter().filter(|f| !f.name().starts_with("__")) {
        let other = snap.field_with_name(field.name()).unwrap();
        assert_eq!(other.data_type(), field.data_type(), "{}", field.name());
        assert_eq!(other.metadata(), field.metadata(), "{}", field.name());
    }
    let names = |s: &arrow_schema::Schema| -> Vec<String> {
        s.fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| !n.starts_with("__"))
            .collect()
    };
    assert_eq!(names(&snap), names(&cdc));
}

/// A table without a key (and no declared key) is one consistent read: its snapshot
/// part is a `rebaseline` marker at the read's binlog position with the highest `__seq`,
/// then the rows at that position numbered from 0 (identical rows stay two rows).
#[test]
fn a_table_without_a_key_is_one_read_after_its_marker() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "baseline_nokey");
    db.sql("CREATE TABLE t (v int) ENGINE=InnoDB; INSERT INTO t VALUES (1), (1), (2)");
    let job = Job::mysql(&db, &["t"], "", "baseline: { chunk_rows: 1 }");
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["chunks"], 1, "{}", run.stdout);
    let rows = read_rows(&support::snapshot_dir(&job.out().join("t")), "part-");
    let ops: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r["__op"].clone().unwrap(), r["__seq"].clone().unwrap()))
        .collect();
    assert_eq!(ops.len(), 4, "{rows:?}");
    assert!(
        ops.contains(&("rebaseline".into(), i64::MAX.to_string())),
        "{ops:?}"
    );
    for seq in ["0", "1", "2"] {
        assert!(ops.contains(&("snapshot".into(), seq.into())), "{ops:?}");
    }
    let positions: std::collections::BTreeSet<_> =
        rows.iter().map(|r| r["__pos"].clone()).collect();
    assert_eq!(
        positions.len(),
        1,
        "marker and rows share the read's position: {rows:?}"
    );
}

/// A table without a key may declare NOT NULL columns in `baseline.keys` to chunk its
/// baseline by (without them it is one consistent read: `mysql::keyless`); a declared
/// key need not be unique (equal keys share a chunk): every row is read once and the
/// replay is exact.
#[test]
fn a_table_without_a_key_is_baselined_by_a_declared_non_unique_key() {
    let admin = mysql_or_skip!();
    let other = TestMysqlDb::new(&admin, "declared_key2");
    other.sql("CREATE TABLE t (id int NOT NULL, grp int NOT NULL, v varchar(20))");
    other.sql("INSERT INTO t SELECT seq, seq DIV 10, CONCAT('v', seq) FROM seq_1_to_3000; ANALYZE TABLE t");
    let job = Job::mysql(
        &other,
        &["t"],
        "",
        "baseline: { chunk_rows: 500, keys: { t: [grp] } }",
    );
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["rows"], 3000, "{summary}");
    assert!(summary["chunks"].as_u64().unwrap() >= 4, "{summary}");
    other.sql("UPDATE t SET v = 'changed' WHERE id <= 10; DELETE FROM t WHERE id > 2990; INSERT INTO t VALUES (5000, 500, 'new')");
    job.drain();
    assert_eq!(
        replayed(&job, "t", &["id"]),
        source_state(&other, "t", &["id"])
    );
}

/// MariaDB's re-baseline epoch (marker at the checkpoint + 1, snapshot rows at + 2), live:
/// `sluice baseline --table t` on a running job whose output of `t` went stale, then a
/// narrowing retype that re-baselines `t` by itself — `u` untouched throughout, both
/// replaying (the documented rule) to the source.
#[test]
fn rb_mysql_one_table_is_rebaselined_by_hand_and_after_a_narrowing() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "rb_mysql");
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v varchar(20), n bigint) ENGINE=InnoDB; \
         CREATE TABLE u (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB; \
         INSERT INTO t SELECT seq, CONCAT('s', seq), seq FROM seq_1_to_5; \
         INSERT INTO u SELECT seq, CONCAT('s', seq) FROM seq_1_to_5",
    );
    let job = Job::mysql(&db, &["t", "u"], "", "initial: snapshot");
    job.drain();
    db.sql("UPDATE t SET v = 'x' WHERE id <= 3; DELETE FROM t WHERE id = 5; INSERT INTO u VALUES (6, 'six')");
    job.drain();
    // t's output goes stale: this run's parts are lost.
    let lost = job.out().join("t/_lost");
    std::fs::create_dir_all(&lost).unwrap();
    let mut lost_rows = Vec::new();
    for part in support::part_files(&job.out().join("t"), "cdc-") {
        lost_rows.extend(read_batches(&part).iter().flat_map(support::render));
        std::fs::rename(&part, lost.join(part.file_name().unwrap())).unwrap();
    }
    assert_ne!(
        replayed(&job, "t", &["id"]),
        source_state(&db, "t", &["id"])
    );
    let u_record = job.local_state()["snapshots"]["u"].clone();
    let run = job.run(&["baseline", "--table", "t"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = read_rows(&support::snapshot_dir(&job.out().join("t")), "part-");
    let marker: &Row = &rows[0];
    assert_eq!(marker["__op"].as_deref(), Some("rebaseline"), "{rows:?}");
    assert!(
        rows[1..]
            .iter()
            .all(|r| r["__op"].as_deref() == Some("snapshot") && r["__pos"] > marker["__pos"])
    );
    // Every change checkpointed before sorts before the marker (the last one at the
    // checkpoint itself).
    assert!(!lost_rows.is_empty());
    assert!(
        lost_rows.iter().all(|r| r["__pos"] < marker["__pos"]),
        "{lost_rows:?} {marker:?}"
    );
    db.sql("UPDATE t SET v = 'after' WHERE id = 1; INSERT INTO t VALUES (7, 'seven', 7)");
    let summary = job.drain();
    assert_eq!(summary["tables"]["t"]["rows"], 2, "{summary}");
    for table in ["t", "u"] {
        assert_eq!(
            replayed(&job, table, &["id"]),
            source_state(&db, table, &["id"]),
            "{table}"
        );
    }
    assert_eq!(job.local_state()["snapshots"]["u"], u_record);

    // A narrowing retype mid-backlog re-baselines t alone; u's changes are in the same run.
    db.sql("INSERT INTO t VALUES (8, 'eight', 8); INSERT INTO u VALUES (7, 'seven')");
    db.sql("ALTER TABLE t MODIFY n int");
    db.sql("INSERT INTO t VALUES (9, 'nine', 9); UPDATE u SET v = 'one' WHERE id = 1");
    let summary = job.drain();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    for table in ["t", "u"] {
        assert_eq!(
            replayed(&job, table, &["id"]),
            source_state(&db, table, &["id"]),
            "{table}"
        );
    }
    assert_eq!(job.local_state()["snapshots"]["u"], u_record);
}

/// `ALTER TABLE … TRUNCATE / DROP PARTITION` removes rows without row events: the table is
/// re-baselined (the rows are gone from the replay), the other table goes on in the same run.
#[test]
fn rb_mysql_partition_truncate_and_drop_rebaseline_that_table() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "rb_mysql_part");
    db.sql(
        "CREATE TABLE p (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB \
           PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), \
                                    PARTITION p2 VALUES LESS THAN (100)); \
         CREATE TABLE u (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB; \
         INSERT INTO p SELECT seq, CONCAT('s', seq) FROM seq_1_to_25; \
         INSERT INTO u SELECT seq, CONCAT('s', seq) FROM seq_1_to_3",
    );
    let job = Job::mysql(&db, &["p", "u"], "", "initial: snapshot");
    job.drain();
    for ddl in [
        "ALTER TABLE p TRUNCATE PARTITION p0",
        "ALTER TABLE p DROP PARTITION p1",
    ] {
        db.sql("UPDATE p SET v = 'x' WHERE id IN (5, 15, 25)");
        db.sql(ddl);
        db.sql("INSERT INTO p VALUES (30, 'thirty') ON DUPLICATE KEY UPDATE v = 'again'; UPDATE u SET v = CONCAT(v, '+') WHERE id = 1");
        let summary = job.drain();
        assert_eq!(
            summary["rebaselined"]["p"]["baseline"], "done",
            "{ddl}: {summary}"
        );
        assert!(summary["rebaselined"].get("u").is_none(), "{summary}");
        assert_eq!(summary["tables"]["u"]["rows"], 1, "{ddl}: {summary}");
        for table in ["p", "u"] {
            assert_eq!(
                replayed(&job, table, &["id"]),
                source_state(&db, table, &["id"]),
                "{ddl}: {table}"
            );
        }
    }
}

/// Tables `t` and `u` (`id int PRIMARY KEY, v varchar(20)`), five rows each (`s<i>`).
fn two_seeded_tables(db: &TestMysqlDb) {
    db.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB; \
         CREATE TABLE u (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB; \
         INSERT INTO t SELECT seq, CONCAT('s', seq) FROM seq_1_to_5; \
         INSERT INTO u SELECT seq, CONCAT('s', seq) FROM seq_1_to_5",
    );
}

/// A table added to a running MariaDB job's `source.tables` is baselined from the job's
/// checkpoint (epoch marker first) and streamed from then on; the other table's changes
/// flow in the same runs.
#[test]
fn rb_mysql_a_table_added_to_a_running_job_is_baselined_and_streamed() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "rb_my_added");
    two_seeded_tables(&db);
    let job = Job::mysql(&db, &["t"], "", "initial: snapshot");
    job.drain();
    db.sql("UPDATE u SET v = 'one' WHERE id = 1; DELETE FROM u WHERE id = 2; INSERT INTO t VALUES (6, 'six')");
    let yaml = std::fs::read_to_string(&job.config).unwrap();
    std::fs::write(
        &job.config,
        yaml.replacen("tables: [t]", "tables: [t, u]", 1),
    )
    .unwrap();
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 1, "{summary}");
    let u = job.local_state()["snapshots"]["u"].clone();
    assert_eq!(u["status"], "done", "{u}");
    assert_eq!(u["reason"], "added to source.tables", "{u}");
    let rows = read_rows(&support::snapshot_dir(&job.out().join("u")), "part-");
    assert_eq!(rows[0]["__op"].as_deref(), Some("rebaseline"), "{rows:?}");
    db.sql("UPDATE u SET v = 'three' WHERE id = 3; INSERT INTO u VALUES (7, 'seven'); INSERT INTO t VALUES (7, 'seven')");
    let summary = job.drain();
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    for table in ["t", "u"] {
        assert_eq!(
            replayed(&job, table, &["id"]),
            source_state(&db, table, &["id"]),
            "{table}"
        );
    }
}

/// MariaDB `TRUNCATE` forms: of the captured table (qualified or not) a `truncate` row;
/// of a same-named table in another database nothing — replaying to the source, the
/// other table untouched. (Another letter case fails on Linux servers, whose table names
/// are case-sensitive, so it is never logged here.)
#[test]
fn mysql_truncate_of_the_table_is_a_truncate_row_and_of_another_databases_nothing() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "my_trunc");
    let other = TestMysqlDb::new(&admin, "my_trunc_other");
    other.sql("CREATE TABLE t (id int PRIMARY KEY) ENGINE=InnoDB; INSERT INTO t VALUES (1)");
    two_seeded_tables(&db);
    let job = Job::mysql(&db, &["t", "u"], "", "initial: snapshot");
    job.drain();
    // Unqualified, then qualified with backquotes; between them writes to both tables.
    db.sql("UPDATE t SET v = 'x' WHERE id = 1; TRUNCATE TABLE t; INSERT INTO t VALUES (6, 'six'); UPDATE u SET v = 'one' WHERE id = 1");
    db.sql(&format!(
        "TRUNCATE `{}`.`t`; INSERT INTO t VALUES (7, 'seven'), (8, 'eight')",
        db.name
    ));
    // The other database's t, from our database's session: not ours.
    db.sql(&format!("TRUNCATE TABLE {}.t", other.name));
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    let ops: Vec<String> = job
        .rows("t")
        .iter()
        .filter(|r| r["__op"].as_deref() != Some("snapshot"))
        .map(|r| r["__op"].clone().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "update", "truncate", "insert", "truncate", "insert", "insert"
        ]
    );
    for table in ["t", "u"] {
        assert_eq!(
            replayed(&job, table, &["id"]),
            source_state(&db, table, &["id"]),
            "{table}"
        );
    }
}

/// MariaDB fills existing rows for a column added with a default (or `NOT NULL`) without
/// logging them: the table is re-baselined at the ALTER, so untouched rows replay with
/// the value; a nullable column added without one just continues. The other table goes
/// on in the same run.
#[test]
fn rb_mysql_add_column_with_a_default_rebaselines_and_a_plain_one_continues() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "rb_my_default");
    two_seeded_tables(&db);
    let job = Job::mysql(&db, &["t", "u"], "", "initial: snapshot");
    job.drain();
    let replays_to_source = || {
        for table in ["t", "u"] {
            assert_eq!(
                replayed(&job, table, &["id"]),
                source_state(&db, table, &["id"]),
                "{table}"
            );
        }
        // t's column d, replayed by the rule, against the source.
        let rows = support::baseline_and_changes(&job.out().join("t"));
        let state = support::replay(&rows, &["id"]);
        let replayed_d: Vec<String> = state
            .values()
            .filter(|r| r.contains_key("d"))
            .map(|r| {
                let id = r["id"].clone().unwrap();
                format!("{id}={}", r["d"].as_deref().unwrap_or("NULL"))
            })
            .collect();
        let source_d = db.sql(
            "SELECT COALESCE(GROUP_CONCAT(CONCAT(id, '=', COALESCE(d, 'NULL')) ORDER BY CAST(id AS CHAR) SEPARATOR ','), '') FROM t",
        );
        assert_eq!(replayed_d.join(","), source_d, "t.d");
    };
    db.sql("ALTER TABLE t ADD COLUMN n int NULL");
    db.sql("INSERT INTO t VALUES (6, 'six', 6); UPDATE u SET v = 'one' WHERE id = 1");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    db.sql("UPDATE t SET v = 'x' WHERE id = 1; INSERT INTO u VALUES (6, 'six')");
    db.sql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 7");
    db.sql("INSERT INTO t VALUES (7, 'seven', 7, 8); UPDATE u SET v = 'two' WHERE id = 2");
    let summary = job.drain();
    assert_eq!(summary["rebaselined"]["t"]["baseline"], "done", "{summary}");
    assert_eq!(summary["tables"]["u"]["rows"], 2, "{summary}");
    replays_to_source();
    // Every row has d: the untouched ones the default, from the new snapshot.
    let d: Vec<Option<String>> = {
        let mut rows = support::baseline_and_changes(&job.out().join("t"));
        rows.retain(|r| r["__op"].as_deref() == Some("snapshot"));
        rows.iter().map(|r| r["d"].clone()).collect()
    };
    assert!(d.len() >= 6 && d.iter().all(Option::is_some), "{d:?}");
    db.sql("UPDATE t SET d = 70 WHERE id = 2");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    replays_to_source();
}

/// A captured MariaDB table dropped mid-backlog: its changes up to the drop are written
/// from the binlog's own TABLE_MAP (key from its FULL metadata, so the table's manifest
/// still names its key), the run warns `SLUICE_SOURCE_TABLE_GONE`, and the other table
/// goes on in the same and later runs.
#[test]
fn rb_mysql_a_table_dropped_mid_backlog_keeps_its_last_changes() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "rb_my_dropped");
    two_seeded_tables(&db);
    let job = Job::mysql(&db, &["t", "u"], "", "initial: snapshot");
    job.drain();
    db.sql("UPDATE t SET v = 'last' WHERE id = 1; DELETE FROM t WHERE id = 2; INSERT INTO u VALUES (6, 'six')");
    let t_at_drop = source_state(&db, "t", &["id"]);
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
        replayed(&job, "t", &["id"]),
        t_at_drop,
        "t as it was at the drop"
    );
    assert_eq!(
        replayed(&job, "u", &["id"]),
        source_state(&db, "u", &["id"])
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.out().join("t/_manifest.json")).unwrap())
            .unwrap();
    let keys: Vec<&str> = manifest["schema"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["key"] == true)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["id"], "{manifest}");
    db.sql("INSERT INTO u VALUES (7, 'seven')");
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.summary()["tables"]["u"]["rows"], 1);
    assert_eq!(
        replayed(&job, "u", &["id"]),
        source_state(&db, "u", &["id"])
    );
}
