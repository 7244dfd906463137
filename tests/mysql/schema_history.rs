//! The schema history on MariaDB (docs/output.md#schema-history): a nullable column added
//! and an integer widened mid-backlog continue the stream, and each shape is recorded
//! with the position of the first change written in it.

use crate::support::{self, Job, TestMysqlDb, column_types};

#[test]
fn mysql_schema_history_records_an_added_column_and_a_widening_from_their_first_changes() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "sh_my_history");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(20)) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["t"], "", "");
    job.drain();
    db.sql("INSERT INTO t VALUES (1, 'one')");
    db.sql("ALTER TABLE t ADD COLUMN d int NULL");
    db.sql("INSERT INTO t VALUES (2, 'two', 2)");
    db.sql("ALTER TABLE t MODIFY d bigint NULL");
    db.sql("INSERT INTO t VALUES (3, 'three', 3)");
    let summary = job.drain();
    assert!(summary.get("rebaselined").is_none(), "{summary}");
    assert_eq!(summary["tables"]["t"]["rows"], 3, "{summary}");

    let history: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.out().join("t/_schema_history.json")).unwrap())
            .unwrap();
    let shapes = history["shapes"].as_array().unwrap();
    let rows = support::baseline_and_changes(&job.out().join("t"));
    let pos_of = |id: &str| {
        rows.iter()
            .find(|r| r["id"].as_deref() == Some(id))
            .and_then(|r| r["__pos"].clone())
            .unwrap()
    };
    let got: Vec<(String, Vec<String>, serde_json::Value)> = shapes
        .iter()
        .map(|s| {
            (
                s["since"].as_str().unwrap().to_owned(),
                column_types(&s["columns"]),
                s["changes"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                pos_of("1"),
                vec!["id:int32".into(), "v:utf8".into()],
                serde_json::json!([])
            ),
            (
                pos_of("2"),
                vec!["id:int32".into(), "v:utf8".into(), "d:int32".into()],
                serde_json::json!([{"kind": "add", "column": "d"}])
            ),
            (
                pos_of("3"),
                vec!["id:int32".into(), "v:utf8".into(), "d:int64".into()],
                serde_json::json!([{"kind": "widen", "column": "d", "from": "int32", "to": "int64"}])
            ),
        ],
        "{history:#}"
    );
}
