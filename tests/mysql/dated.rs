//! The dated layout (`output.layout: dated`) on MariaDB, over two dates: MariaDB's binlog
//! records a transaction's time from the session's clock, which `SET TIMESTAMP` sets (as
//! `mysqlbinlog` replays do), so the source itself commits transactions one microsecond
//! of a day apart. sluice reads those times as `__ts`; the test checks that one drain
//! splits the table's output at UTC midnight, each part in its date's `dt=` folder, that
//! pyarrow and DuckDB read the partition back equal to `__ts`, and that `sluice sql`'s
//! DuckDB query replays the folder to the source's state. Objects: database `t_dated_my_*`.

use crate::support::{Job, TestMysqlDb, dated, readers};

/// 2026-01-15T23:59:59Z, as Unix seconds.
const LAST_SECOND_OF_JAN_15: i64 = 1_768_521_599;

#[test]
fn mariadb_dated_layout_splits_a_drain_at_utc_midnight_and_readers_read_it() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "dated_my");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["t"], "", "output: { layout: dated }");
    assert_eq!(job.drain()["status"], "drained");
    db.sql(&format!(
        "SET TIMESTAMP = {LAST_SECOND_OF_JAN_15}; \
         INSERT INTO t VALUES (1, 'a'), (2, 'b'); UPDATE t SET v = 'bb' WHERE id = 2"
    ));
    db.sql(&format!(
        "SET TIMESTAMP = {}; INSERT INTO t VALUES (3, 'c'); DELETE FROM t WHERE id = 1",
        LAST_SECOND_OF_JAN_15 + 1
    ));
    db.sql("INSERT INTO t VALUES (4, 'today')");
    let summary = job.drain();
    assert_eq!(summary["rows"], 6, "{summary}");

    let partitions = dated::check(&job.out(), "t", false, 6, 0);
    assert!(
        partitions.starts_with(&["dt=2026-01-15".to_owned(), "dt=2026-01-16".to_owned()]),
        "{partitions:?}"
    );
    let today = chrono::Utc::now().format("dt=%Y-%m-%d").to_string();
    assert!(partitions.contains(&today), "{partitions:?}");
    if let Some(text) = readers::sluice_sql_replayed(&job, "t", "id", "v", "=") {
        let source = db.sql("SELECT group_concat(concat(id, '=', v) ORDER BY id) FROM t");
        assert_eq!(text, source);
        assert_eq!(text, "2=bb,3=c,4=today");
    }
}
