//! MariaDB: many small runs compacted into one part, replaying the source; the dated
//! layout over two dates (the session clock sets the binlog's commit times, as in
//! `mysql::dated`): one compacted part per `dt=` folder, each row still in its commit
//! time's partition for pyarrow and DuckDB. Objects: database `t_compact_my_*`.

use super::{assert_reads, change_files, changes, compact, config_block, replayed, rows_of};
use crate::support::{Job, TestMysqlDb, readers};

fn source_text(db: &TestMysqlDb) -> String {
    db.sql("SELECT coalesce(group_concat(concat(id, '=', coalesce(v, 'NULL')) ORDER BY id SEPARATOR ','), '') FROM t")
}

#[test]
fn mariadb_many_small_runs_compact_into_one_part_with_the_same_rows() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "compact_my");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(40)) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["t"], "", &config_block(1 << 20));
    job.drain();
    for i in 1..=25 {
        let mut sql = format!("INSERT INTO t VALUES ({i}, 'v{i}');");
        if i % 3 == 0 {
            sql += &format!("UPDATE t SET v = concat(v, '+') WHERE id = {};", i / 2);
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
        db.sql(&format!("START TRANSACTION;{sql}COMMIT;"));
        assert_eq!(job.drain()["status"], "drained");
    }
    let dir = job.out().join("t");
    let before = change_files(&dir);
    assert_eq!(before.len(), 25);
    let expected = changes(&rows_of(&dir, &before));
    let summary = compact(&job, &[]);
    assert_eq!(summary["tables"]["t"]["status"], "compacted", "{summary}");
    assert_eq!(summary["tables"]["t"]["files_after"], 1, "{summary}");
    let rows = assert_reads(&job.out(), "t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        assert_eq!(text, source_text(&db));
    }
}

/// 2026-01-15T23:59:00Z, as Unix seconds.
const JAN_15_LATE: i64 = 1_768_521_540;

#[test]
fn mariadb_dated_layout_compacts_each_partition_into_its_own_folder() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "compact_my_dt");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(40)) ENGINE=InnoDB");
    let job = Job::mysql(
        &db,
        &["t"],
        "",
        &format!("output: {{ layout: dated }}\n{}", config_block(1 << 20)),
    );
    job.drain();
    // Six runs a minute apart across midnight, then two today.
    for i in 0..8i64 {
        let clock = if i < 6 {
            format!("SET TIMESTAMP = {};", JAN_15_LATE + i * 20)
        } else {
            String::new()
        };
        db.sql(&format!(
            "{clock}INSERT INTO t VALUES ({i}, 'v{i}'); UPDATE t SET v = 'w{i}' WHERE id = {}",
            i / 2
        ));
        assert_eq!(job.drain()["status"], "drained");
    }
    let dir = job.out().join("t");
    let before = change_files(&dir);
    let expected = changes(&rows_of(&dir, &before));
    let summary = compact(&job, &[]);
    assert_eq!(summary["tables"]["t"]["status"], "compacted", "{summary}");
    let after = change_files(&dir);
    let today = chrono::Utc::now().format("dt=%Y-%m-%d").to_string();
    let folders: Vec<&str> = after.iter().map(|f| f.split('/').next().unwrap()).collect();
    assert_eq!(
        folders,
        ["dt=2026-01-15", "dt=2026-01-16", today.as_str()],
        "one compacted part per partition: {after:?}"
    );
    for file in &after {
        assert!(
            file.split('/').nth(1).unwrap().starts_with("compacted-"),
            "{after:?}"
        );
    }
    let rows = assert_reads(&job.out(), "t", &expected);
    assert_eq!(replayed(&rows), source_text(&db));
    // Each row stays in its commit time's partition, for pyarrow and DuckDB alike.
    if let Some(read) = readers::hive_partitions(&dir, false) {
        for reader in ["pyarrow", "duckdb"] {
            assert_eq!(read[reader]["rows"], expected.len(), "{reader}: {read}");
            assert_eq!(read[reader]["misplaced"], 0, "{reader}: {read}");
        }
    }
    // The compaction manifest lists each part with its partition.
    for manifest in super::compaction_manifests(&job.out(), "t") {
        for part in manifest["parts"].as_array().unwrap() {
            let partition = part["partition"].as_str().unwrap();
            assert!(
                part["key"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("t/{partition}/compacted-")),
                "{manifest}"
            );
        }
    }
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        assert_eq!(text, source_text(&db));
    }
}
