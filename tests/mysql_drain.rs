//! MySQL / MariaDB → local parts, end to end through the real binary and a real server
//! (the local stack's MariaDB 10.11). Each test owns a database and a job; every test
//! holds the binlog lock shared, the ones that rewrite the binlog hold it exclusively.

mod support;

use support::{Job, TestMysqlDb, ops, replay};

const ORDERS: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note varchar(20), amount decimal(12,2)) ENGINE=InnoDB";

#[test]
fn insert_update_delete_are_captured_in_commit_order() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "iud");
    db.sql(ORDERS);
    let job = Job::mysql(&db, &["orders"], "", "");
    let first = job.drain();
    assert_eq!(first["status"], "drained");
    assert_eq!(first["rows"], 0);
    db.sql("INSERT INTO orders VALUES (1, 'a', 10.50), (2, 'b', 20.00)");
    db.sql("UPDATE orders SET note = 'a2', amount = 11.25 WHERE id = 1");
    db.sql("DELETE FROM orders WHERE id = 2");
    let second = job.drain();
    assert_eq!(second["status"], "drained", "{second}");
    assert_eq!(second["rows"], 4);
    assert_eq!(second["from"], first["to"]);
    let rows = job.rows("orders");
    assert_eq!(
        ops(&rows, "note"),
        [
            ("insert".into(), Some("a".into())),
            ("insert".into(), Some("b".into())),
            ("update".into(), Some("a2".into())),
            ("delete".into(), Some("b".into())),
        ]
    );
    assert_eq!(rows[2]["amount"].as_deref(), Some("11.25"));
    assert_eq!(rows[3]["id"].as_deref(), Some("2"));
    assert_eq!(rows[0]["__pos"], rows[1]["__pos"]);
    assert_eq!(
        (rows[0]["__seq"].as_deref(), rows[1]["__seq"].as_deref()),
        (Some("0"), Some("1"))
    );
    assert!(rows[1]["__pos"] < rows[2]["__pos"] && rows[2]["__pos"] < rows[3]["__pos"]);
    let pos = rows[0]["__pos"].as_deref().unwrap();
    assert!(
        pos.starts_with("mariadb-bin.") && pos.len() == "mariadb-bin.".len() + 21,
        "{pos}"
    );
    assert!(rows.iter().all(|r| r["__ts"].is_some()));
    assert_eq!(replay(&rows, &["id"]).len(), 1);
    assert!(job.out().join("orders/_SUCCESS").exists());
    let to = second["to"].as_str().unwrap();
    assert!(
        to.starts_with("mysql:mariadb-bin.") && to.contains(";f=") && to.contains(";e="),
        "{to}"
    );
}
