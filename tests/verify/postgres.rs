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

/// The lake holds policy-applied rows (a column excluded, one masked, a row filter): verify
/// compares them with the source through the same policy — equal, also after a row left
/// the filter — and still finds a changed masked cell by key.
#[test]
fn postgres_a_table_under_a_policy_verifies_against_the_policy_applied_source() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_pg");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int, secret text); ALTER TABLE t REPLICA IDENTITY FULL");
    let job = Job::postgres(
        &db,
        &["t"],
        &format!(
            "{}\npolicy:\n  tables:\n    t: {{ exclude: [secret], mask: {{ v: {{ keep_last: 2 }} }}, filter: \"n > 10\" }}\n",
            super::CONFIG
        ),
    );
    job.drain();
    db.sql(
        "INSERT INTO t SELECT g, 'value-' || g, g, 'secret-' || g FROM generate_series(1, 200) g",
    );
    job.drain();
    db.sql("UPDATE t SET n = 5 WHERE id = 50; UPDATE t SET v = 'changed' WHERE id = 60");
    let v = super::verify(&job, "t", &[]);
    assert_eq!(v.code, 0, "{}\n{}\n{}", v.line, v.report, v.stderr);
    assert_eq!(
        v.report["rows_read"], 189,
        "the filter applies to the source: {}",
        v.report
    );
    let parts = super::change_parts(&job, "t");
    super::edit_part(&super::part_with(&parts, 100), |b| {
        super::with_v(b, 100, "***xx")
    });
    let v = super::verify(&job, "t", &[]);
    assert_eq!(v.code, 5, "{}\n{}", v.report, v.stderr);
    assert_eq!(
        v.differences(),
        vec![(
            "id=100".to_owned(),
            "different".to_owned(),
            vec!["v".to_owned()]
        )]
    );
    assert!(!v.report.to_string().contains("secret-"), "{}", v.report);
}

#[test]
fn postgres_a_row_missing_from_the_baseline_is_found_and_repaired() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "verify_pg");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)");
    let job = Job::postgres(
        &db,
        &["public.t"],
        &format!("initial: snapshot\n{}", super::CONFIG),
    );
    super::snapshot_row_missing_found_and_repaired(&job, "public.t", &|s: &str| {
        db.sql(s);
    });
}
