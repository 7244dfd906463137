//! PostgreSQL: the verify cases of [`super`] on a local job. Objects: database
//! `t_verify_pg_*`.

use std::sync::Arc;

use crate::support::{self, Job, TestDb};

#[test]
fn postgres_a_clean_table_verifies_equal_under_concurrent_writes() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_pg");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let job = Job::postgres(&db, &["public.t"], super::CONFIG);
    let url = db.url.clone();
    super::clean_under_writes(
        &job,
        "public.t",
        Arc::new(move |s: &str| {
            support::psql(&url, s);
        }),
    );
}

#[test]
fn postgres_injected_differences_are_found_by_key_and_repaired() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_pg");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let job = Job::postgres(&db, &["public.t"], super::CONFIG);
    super::injected_differences_found_and_repaired(
        &job,
        "public.t",
        &|s: &str| {
            db.sql(s);
        },
        &|| db.id_v_text(),
    );
}

#[test]
fn postgres_a_keyless_table_verifies_as_a_multiset() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_pg");
    db.sql("CREATE TABLE k (a int, b text); ALTER TABLE k REPLICA IDENTITY FULL");
    let job = Job::postgres(&db, &["public.k"], super::CONFIG);
    super::keyless_multiset(&job, "public.k", &|s: &str| {
        db.sql(s);
    });
}
