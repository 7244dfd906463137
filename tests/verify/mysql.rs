//! MariaDB: the verify cases of [`super`] on a local job. Objects: database
//! `t_verify_my_*`.

use std::sync::Arc;

use crate::support::{self, Job, TestMysqlDb};

fn source_text(db: &TestMysqlDb) -> String {
    db.sql("SELECT coalesce(group_concat(concat(id, '=', coalesce(v, 'NULL')) ORDER BY cast(id AS char) SEPARATOR ','), '') FROM t")
}

#[test]
fn mariadb_a_clean_table_verifies_equal_under_concurrent_writes() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "verify_my");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(200), n int) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["t"], "", super::CONFIG);
    let url = db.url.clone();
    super::clean_under_writes(
        &job,
        "t",
        Arc::new(move |s: &str| {
            support::mysql_cli(&url, s);
        }),
    );
}

#[test]
fn mariadb_injected_differences_are_found_by_key_and_repaired() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "verify_my");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(200), n int) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["t"], "", super::CONFIG);
    super::injected_differences_found_and_repaired(
        &job,
        "t",
        &|s: &str| {
            db.sql(s);
        },
        &|| source_text(&db),
    );
}

#[test]
fn mariadb_a_keyless_table_verifies_as_a_multiset() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "verify_my");
    db.sql("CREATE TABLE k (a int, b varchar(20)) ENGINE=InnoDB");
    let job = Job::mysql(&db, &["k"], "", super::CONFIG);
    super::keyless_multiset(&job, "k", &|s: &str| {
        db.sql(s);
    });
}

#[test]
fn mariadb_a_row_missing_from_the_baseline_is_found_and_repaired() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "verify_my");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(200), n int) ENGINE=InnoDB");
    let job = Job::mysql(
        &db,
        &["t"],
        "",
        &format!("initial: snapshot\n{}", super::CONFIG),
    );
    super::snapshot_row_missing_found_and_repaired(&job, "t", &|s: &str| {
        db.sql(s);
    });
}
