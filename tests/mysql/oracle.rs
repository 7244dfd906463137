//! The correctness oracle's MariaDB engine (the local stack's, `SLUICE_TEST_MYSQL_URL`):
//! the same generator, crashes, replay and cell-by-cell comparison as PostgreSQL's, over
//! a table of the supported MySQL types (run as `conformance::source::mysql::oracle`; see
//! `tests/oracle/mod.rs` for the knobs; `make soak` runs 500 trials per engine).
//!
//! Engine specifics: MariaDB does not log an UPDATE that leaves a row unchanged, so
//! `apply` reports the server's changed-row counts (a key change is two events); the FULL
//! row image logs every value, so no row may list a column in `__unlogged`; literals are
//! written in a `+05:45` session to prove the binlog's TIMESTAMP is UTC; the source is
//! read back over the binary protocol, so floats compare by their exact bits.
//!
//! Failovers: when the stack's replica (`SLUICE_TEST_MYSQL_REPLICA_URL`) is free, a third
//! of the trials hold it, and the trial promotes it before one of its steps: the writes,
//! the job's URL and the final comparison move to it, and the drains must follow by GTID.

use crate::oracle;

use std::collections::BTreeMap;

use crate::support::TestMysqlDb;
use crate::support::replica::MariaReplica;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value as MyValue};
use oracle::canon;
use oracle::check::SourceRow;
use oracle::events::{CommitTime, Observed};
use oracle::rng::Rng;
use oracle::trial::{Ddl, Engine, Source};
use oracle::workload::{Kind, Stmt, TableSpec, Txn, Val};

const TABLE: &str = "items";
/// The writing session's time zone: TIMESTAMP literals are local wall time at this offset.
const SESSION_OFFSET_MIN: i64 = 5 * 60 + 45;
const DAY_US: i64 = 86_400_000_000;

/// Columns: name, MariaDB type, value kind.
fn columns() -> Vec<(&'static str, &'static str, Kind)> {
    let day = |y, m, d| canon::days_from_civil(y, m, d);
    vec![
        (
            "ti",
            "tinyint",
            Kind::Int {
                min: -128,
                max: 127,
            },
        ),
        (
            "si",
            "smallint",
            Kind::Int {
                min: i16::MIN.into(),
                max: i16::MAX.into(),
            },
        ),
        (
            "mi",
            "mediumint",
            Kind::Int {
                min: -8_388_608,
                max: 8_388_607,
            },
        ),
        (
            "i4",
            "int",
            Kind::Int {
                min: i32::MIN.into(),
                max: i32::MAX.into(),
            },
        ),
        (
            "i8",
            "bigint",
            Kind::Int {
                min: i64::MIN,
                max: i64::MAX,
            },
        ),
        (
            "u4",
            "int unsigned",
            Kind::Int {
                min: 0,
                max: u32::MAX.into(),
            },
        ),
        (
            "n",
            "decimal(20,4)",
            Kind::Decimal {
                precision: 20,
                scale: 4,
            },
        ),
        (
            "big",
            "decimal(50,10)",
            Kind::Decimal {
                precision: 50,
                scale: 10,
            },
        ),
        (
            "max",
            "decimal(65,30)",
            Kind::Decimal {
                precision: 65,
                scale: 30,
            },
        ),
        ("r", "float", Kind::FiniteFloat32),
        ("d", "double", Kind::FiniteFloat64),
        ("flag", "boolean", Kind::Bool),
        ("t", "text", Kind::Text { max_chars: 200 }),
        ("vc", "varchar(16)", Kind::Text { max_chars: 16 }),
        ("c", "char(4)", Kind::FixedText { chars: 4 }),
        ("raw", "varbinary(64)", Kind::Bytes { max_len: 64 }),
        ("bn", "binary(8)", Kind::Bytes { max_len: 8 }),
        ("bl", "blob", Kind::Bytes { max_len: 64 }),
        (
            "day",
            "date",
            Kind::Date {
                min: day(1000, 1, 1),
                max: day(9999, 12, 31),
            },
        ),
        ("tm", "time(6)", Kind::Time { max: DAY_US - 1 }),
        (
            "ts",
            "datetime(6)",
            Kind::Timestamp {
                min: day(1000, 1, 1) * DAY_US,
                max: (day(9999, 12, 31) + 1) * DAY_US - 1,
            },
        ),
        (
            "tstz",
            "timestamp(6) NULL DEFAULT NULL",
            Kind::TimestampTz {
                min: 1_000_000,
                max: 2_147_483_647_999_999,
            },
        ),
        (
            "y",
            "year",
            Kind::Int {
                min: 1901,
                max: 2155,
            },
        ),
        ("j", "json", Kind::Json),
        ("Mixed Case", "int", Kind::Int { min: -5, max: 5 }),
        // Types written as the server's text or labels (docs/mysql.md#types).
        (
            "mood",
            "enum('sad','ok','happy','')",
            Kind::Literal(&["sad", "ok", "happy", ""]),
        ),
        (
            "tags",
            "set('a','b','c')",
            Kind::Literal(&["", "a", "c,a", "a,b,c"]),
        ),
        (
            "ip6",
            "inet6",
            Kind::Literal(&["::1", "2001:db8::1", "::ffff:1.2.3.4", "::"]),
        ),
        (
            "uid",
            "uuid",
            Kind::Literal(&[
                "6ccd780c-baba-1026-9564-5b8c656024db",
                "00000000-0000-0000-0000-000000000000",
                "ffffffff-ffff-ffff-ffff-ffffffffffff",
            ]),
        ),
        (
            "dur",
            "time(2)",
            Kind::Literal(&["-838:59:59.99", "34:00:00.5", "-00:00:00.01", "00:00:00"]),
        ),
        ("doc", "mediumtext", Kind::LargeText),
    ]
}

pub struct Maria {
    admin: String,
    spec: TableSpec,
    types: Vec<&'static str>,
}

impl Maria {
    pub fn new(admin: String) -> Self {
        let (spec, types) = TableSpec::from_typed(TABLE, columns());
        Maria { admin, spec, types }
    }
}

impl Engine for Maria {
    fn name(&self) -> &'static str {
        "mysql"
    }

    fn truncates_alone(&self) -> bool {
        true
    }

    fn spec(&self) -> &TableSpec {
        &self.spec
    }

    /// Decimals wider than 38 digits are Decimal256 parts, which Iceberg has no type for.
    fn iceberg_refuses(&self, column: &oracle::workload::Column) -> bool {
        matches!(column.kind, Kind::Decimal { precision, .. } if precision > 38)
    }

    fn fault_points(&self) -> &'static [&'static str] {
        &[
            "part_durable",
            "checkpoint_written",
            "source_acked",
            "before_checkpoint",
            "mid_upload",
        ]
    }

    fn open(
        &self,
        id: &str,
        rng: &mut Rng,
        facts: &mut Vec<String>,
        spec: &TableSpec,
    ) -> Result<Box<dyn Source>, String> {
        let types = self.spec.types_of(&self.types, spec);
        // Taken before the database exists, so the replica's clone and binlog have it.
        let replica = match std::env::var("SLUICE_TEST_MYSQL_REPLICA_URL") {
            Ok(url) if !url.is_empty() && rng.chance(33) => MariaReplica::try_take(url),
            _ => None,
        };
        if replica.is_some() {
            facts.push("holds the replica: fails over once".into());
        }
        let db = TestMysqlDb::new(&self.admin, &format!("oracle_{}", &id[..10]));
        let cols: Vec<String> = spec
            .columns
            .iter()
            .zip(&types)
            .map(|(c, t)| format!("{} {t}", ident(&c.name)))
            .collect();
        db.sql(&format!(
            "CREATE TABLE {TABLE} (id bigint PRIMARY KEY, {}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
            cols.join(", ")
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let conn = runtime.block_on(session(&db.url, &db.name))?;
        Ok(Box::new(MariaSource {
            spec: spec.clone(),
            runtime,
            conn: Some(conn),
            url: db.url.clone(),
            db,
            replica,
            added: Vec::new(),
        }))
    }
}

/// A writing session on `url` (`SET NAMES`, the session time zone).
async fn session(url: &str, name: &str) -> Result<Conn, String> {
    let opts = mysql_async::Opts::from_url(url).map_err(|e| e.to_string())?;
    let mut conn = Conn::new(opts)
        .await
        .map_err(|e| format!("connecting to {name}: {e}"))?;
    for set in [
        "SET NAMES utf8mb4".to_owned(),
        format!(
            "SET time_zone = '+{:02}:{:02}'",
            SESSION_OFFSET_MIN / 60,
            SESSION_OFFSET_MIN % 60
        ),
    ] {
        conn.query_drop(set).await.map_err(|e| e.to_string())?;
    }
    Ok::<_, String>(conn)
}

struct MariaSource {
    spec: TableSpec,
    runtime: tokio::runtime::Runtime,
    /// `Some` except while a query runs.
    conn: Option<Conn>,
    /// The current primary's URL (the replica's after a failover).
    url: String,
    db: TestMysqlDb,
    /// Held by a trial that fails over (reset when dropped, after the database).
    replica: Option<MariaReplica>,
    /// Integer columns a schema change added (and did not drop since).
    added: Vec<String>,
}

fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A string literal (backslash is an escape character in the default SQL mode).
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

fn wall_text(micros: i64) -> String {
    canon::timestamp(i128::from(micros), false).replace('T', " ")
}

/// A SQL literal of `val`.
fn literal(val: &Val) -> String {
    match val {
        Val::Null => "NULL".into(),
        Val::Int(v) => v.to_string(),
        Val::Dec(s) => s.clone(),
        // Exponent form is an approximate-value (double) literal; an f32 converts to its
        // double exactly and back to the same float.
        Val::F32(v) => format!("{:e}", f64::from(*v)),
        Val::F64(v) => format!("{v:e}"),
        Val::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        Val::Text(s) | Val::Json(s) => quote(s),
        Val::Literal(s) => quote(s),
        Val::Bytes(b) => format!("x'{}'", canon::hex(b)),
        Val::Date(d) => format!("DATE'{}'", canon::date(*d)),
        Val::Time(t) => quote(&canon::time(*t)),
        Val::Ts(t) => quote(&wall_text(*t)),
        Val::TsTz { micros, .. } => quote(&wall_text(micros + SESSION_OFFSET_MIN * 60_000_000)),
        Val::Uuid(_) | Val::List(_) => panic!("MariaDB has no column of {val:?}"),
    }
}

/// One statement to run and the change events each row it affects makes (a statement
/// that makes one event whatever it affects — `TRUNCATE` — says so in `events`).
struct Sql {
    text: String,
    events_per_row: u64,
    events: u64,
}

impl MariaSource {
    fn stmt_sql(&self, stmt: &Stmt, out: &mut Vec<Sql>, savepoints: &mut u32, counted: bool) {
        let col = |c: usize| ident(&self.spec.columns[c].name);
        let ids = |ids: &[i64]| {
            ids.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let set = |set: &[(usize, Val)]| {
            set.iter()
                .map(|(c, v)| format!("{} = {}", col(*c), literal(v)))
                .collect::<Vec<_>>()
        };
        let mut push = |text: String, per_row: u64| {
            out.push(Sql {
                text,
                events_per_row: if counted { per_row } else { 0 },
                events: 0,
            })
        };
        match stmt {
            Stmt::Insert { id, values } => {
                let names: Vec<String> = (0..values.len()).map(col).collect();
                let lits: Vec<String> = values.iter().map(literal).collect();
                push(
                    format!(
                        "INSERT INTO {TABLE} (id, {}) VALUES ({id}, {})",
                        names.join(", "),
                        lits.join(", ")
                    ),
                    1,
                );
            }
            Stmt::Update { ids: which, set: s } => push(
                format!(
                    "UPDATE {TABLE} SET {} WHERE id IN ({})",
                    set(s).join(", "),
                    ids(which)
                ),
                1,
            ),
            Stmt::KeyChange { from, to, set: s } => {
                let mut assignments = vec![format!("id = {to}")];
                assignments.extend(set(s));
                push(
                    format!(
                        "UPDATE {TABLE} SET {} WHERE id = {from}",
                        assignments.join(", ")
                    ),
                    2,
                );
            }
            Stmt::Delete { ids: which } => push(
                format!("DELETE FROM {TABLE} WHERE id IN ({})", ids(which)),
                1,
            ),
            Stmt::BulkInsert { first, count } => push(
                format!(
                    "INSERT INTO {TABLE} (id, si, i4, n, t, tstz, doc) \
                     SELECT seq, seq % 30000, seq * 7919 % 2000000000, seq / 7, CONCAT('bulk ', seq), \
                     TIMESTAMP'2026-01-01 00:00:00.000001' + INTERVAL seq MICROSECOND, \
                     CASE WHEN seq % 97 = 0 THEN REPEAT(MD5(seq), 100) END \
                     FROM seq_{first}_to_{}",
                    first + count - 1
                ),
                1,
            ),
            Stmt::UpdateAll { column, value } => push(
                format!("UPDATE {TABLE} SET {} = {}", col(*column), literal(value)),
                1,
            ),
            // Its own transaction (the workload makes it alone: it commits implicitly).
            Stmt::Truncate => out.push(Sql {
                text: format!("TRUNCATE TABLE {TABLE}"),
                events_per_row: 0,
                events: u64::from(counted),
            }),
            Stmt::RolledBack(stmts) => {
                *savepoints += 1;
                let name = format!("sp{savepoints}");
                push(format!("SAVEPOINT {name}"), 0);
                for s in stmts {
                    self.stmt_sql(s, out, savepoints, false);
                }
                out.push(Sql {
                    text: format!("ROLLBACK TO SAVEPOINT {name}"),
                    events_per_row: 0,
                    events: 0,
                });
            }
        }
    }

    /// The `SELECT` expression of a column of `kind`.
    fn select_expr(kind: &Kind, e: &str) -> String {
        match kind {
            // Seconds since the epoch (6 decimals), whatever the session's time zone.
            Kind::TimestampTz { .. } => format!("UNIX_TIMESTAMP({e})"),
            // The server's own text: labels, addresses, a TIME beyond a day.
            Kind::Literal(_) => format!("CAST({e} AS CHAR)"),
            _ => e.to_owned(),
        }
    }

    /// The canonical cell of a binary-protocol value of `kind`.
    fn canonical(kind: &Kind, value: MyValue) -> Result<Option<String>, String> {
        let bytes_text = |b: Vec<u8>| String::from_utf8(b).map_err(|e| e.to_string());
        Ok(Some(match (kind, value) {
            (_, MyValue::NULL) => return Ok(None),
            (_, MyValue::Int(v)) => v.to_string(),
            (_, MyValue::UInt(v)) => v.to_string(),
            (_, MyValue::Float(v)) => canon::float32(v),
            (_, MyValue::Double(v)) => canon::float64(v),
            (Kind::Decimal { .. }, MyValue::Bytes(b)) => {
                let text = bytes_text(b)?;
                // Arrow decimals have no negative zero.
                match text.strip_prefix('-') {
                    Some(rest) if rest.bytes().all(|c| c == b'0' || c == b'.') => rest.to_owned(),
                    _ => text,
                }
            }
            (Kind::TimestampTz { .. }, MyValue::Bytes(b)) => {
                let text = bytes_text(b)?;
                let (secs, frac) = text.split_once('.').unwrap_or((&text, ""));
                let secs: i64 = secs.parse().map_err(|_| format!("UNIX_TIMESTAMP {text}"))?;
                let micros: i64 = format!("{frac:0<6}")[..6]
                    .parse()
                    .map_err(|_| format!("UNIX_TIMESTAMP {text}"))?;
                canon::timestamp(i128::from(secs * 1_000_000 + micros), true)
            }
            (Kind::Bytes { .. }, MyValue::Bytes(b)) => canon::hex(&b),
            (_, MyValue::Bytes(b)) => bytes_text(b)?,
            (Kind::Date { .. }, MyValue::Date(y, m, d, ..)) => {
                canon::date(canon::days_from_civil(y.into(), m.into(), d.into()))
            }
            (_, MyValue::Date(y, m, d, h, i, s, us)) => {
                let days = canon::days_from_civil(y.into(), m.into(), d.into());
                let micros = days * DAY_US
                    + ((i64::from(h) * 60 + i64::from(i)) * 60 + i64::from(s)) * 1_000_000
                    + i64::from(us);
                canon::timestamp(i128::from(micros), false)
            }
            (_, MyValue::Time(negative, days, h, m, s, us)) => {
                if negative || days > 0 {
                    return Err(format!("TIME outside a day: {days} d {h}:{m}:{s}"));
                }
                canon::time(
                    ((i64::from(h) * 60 + i64::from(m)) * 60 + i64::from(s)) * 1_000_000
                        + i64::from(us),
                )
            }
        }))
    }

    /// `SELECT` of every row, each column in the form [`Self::source_rows`] reads.
    fn select_sql(&self) -> String {
        let exprs: Vec<String> = self
            .spec
            .columns
            .iter()
            .map(|c| Self::select_expr(&c.kind, &ident(&c.name)))
            .chain(self.added.iter().map(|c| ident(c)))
            .collect();
        format!("SELECT id, {} FROM {TABLE}", exprs.join(", "))
    }

    /// The rows of [`Self::select_sql`] (binary protocol) as canonical cells, by key.
    fn source_rows(
        &self,
        rows: Vec<mysql_async::Row>,
    ) -> Result<BTreeMap<String, SourceRow>, String> {
        let mut out = BTreeMap::new();
        for row in rows {
            let mut values = row.unwrap().into_iter();
            let id = match values.next() {
                Some(MyValue::Int(v)) => v.to_string(),
                other => return Err(format!("id is {other:?}")),
            };
            let mut cells = SourceRow::new();
            cells.insert("id".into(), Some(id.clone()));
            for c in &self.spec.columns {
                let value = values.next().ok_or("a short row")?;
                let cell = Self::canonical(&c.kind, value)
                    .map_err(|e| format!("key {id}: column {}: {e}", c.name))?;
                cells.insert(c.name.clone(), cell);
            }
            for c in &self.added {
                let cell = match values.next() {
                    Some(MyValue::Int(v)) => Some(v.to_string()),
                    Some(MyValue::NULL) => None,
                    other => return Err(format!("key {id}: column {c} is {other:?}")),
                };
                cells.insert(c.clone(), cell);
            }
            out.insert(id, cells);
        }
        Ok(out)
    }

    fn run<T>(
        &mut self,
        f: impl AsyncFnOnce(&mut Conn) -> Result<T, mysql_async::Error>,
    ) -> Result<T, mysql_async::Error> {
        let mut conn = self.conn.take().expect("the connection is back");
        let out = self.runtime.block_on(f(&mut conn));
        self.conn = Some(conn);
        out
    }
}

impl Source for MariaSource {
    fn apply(&mut self, txn: &Txn) -> Result<Option<u64>, String> {
        let mut sql = Vec::new();
        let mut savepoints = 0;
        for stmt in &txn.stmts {
            self.stmt_sql(stmt, &mut sql, &mut savepoints, true);
        }
        let commit = txn.commit;
        let texts: Vec<String> = sql.iter().map(|s| s.text.clone()).collect();
        let result = self.run(async |conn: &mut Conn| {
            conn.query_drop("START TRANSACTION").await?;
            let mut events = 0u64;
            for s in &sql {
                conn.query_drop(&s.text).await?;
                events += conn.affected_rows() * s.events_per_row + s.events;
            }
            conn.query_drop(if commit { "COMMIT" } else { "ROLLBACK" })
                .await?;
            Ok(events)
        });
        match result {
            // MariaDB logs only the rows a statement changed: the server's counts hold.
            Ok(events) => Ok(Some(if commit { events } else { 0 })),
            Err(e) => {
                let _ = self.run(async |conn: &mut Conn| conn.query_drop("ROLLBACK").await);
                Err(format!(
                    "applying a transaction failed: {e}\n{}",
                    texts.join(";\n")
                ))
            }
        }
    }

    fn select_all(&mut self) -> Result<BTreeMap<String, SourceRow>, String> {
        let sql = self.select_sql();
        // `exec` uses the binary protocol: exact floats, typed dates and times.
        let rows: Vec<mysql_async::Row> = self
            .run(async |conn: &mut Conn| conn.exec(&sql, ()).await)
            .map_err(|e| format!("{sql}: {e}"))?;
        self.source_rows(rows)
    }

    fn apply_observed(&mut self, txn: &Txn) -> Result<(Option<u64>, Option<Observed>), String> {
        if !txn.commit {
            return Ok((self.apply(txn)?, None));
        }
        let mut stmts: Vec<Vec<Sql>> = Vec::new();
        let mut savepoints = 0;
        for stmt in &txn.stmts {
            let mut sql = Vec::new();
            self.stmt_sql(stmt, &mut sql, &mut savepoints, true);
            stmts.push(sql);
        }
        let select = self.select_sql();
        let now = "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)";
        let result = self.run(async |conn: &mut Conn| {
            let earliest: Option<i64> = conn.query_first(now).await?;
            conn.query_drop("START TRANSACTION").await?;
            let mut tables = vec![conn.exec(&select, ()).await?];
            let mut events = 0u64;
            for sql in &stmts {
                for s in sql {
                    conn.query_drop(&s.text).await?;
                    events += conn.affected_rows() * s.events_per_row + s.events;
                }
                tables.push(conn.exec(&select, ()).await?);
            }
            conn.query_drop("COMMIT").await?;
            let latest: Option<i64> = conn.query_first(now).await?;
            Ok((events, tables, earliest, latest))
        });
        let (events, tables, earliest, latest) = match result {
            Ok(done) => done,
            Err(e) => {
                let _ = self.run(async |conn: &mut Conn| conn.query_drop("ROLLBACK").await);
                let texts: Vec<&str> = stmts.iter().flatten().map(|s| s.text.as_str()).collect();
                return Err(format!(
                    "applying a transaction failed: {e}\n{}",
                    texts.join(";\n")
                ));
            }
        };
        let tables = tables
            .into_iter()
            .map(|rows| self.source_rows(rows))
            .collect::<Result<_, _>>()?;
        // The binlog's event time has whole seconds: the commit is no earlier than the
        // second the transaction started in, and no later than the clock after COMMIT.
        let earliest = earliest.ok_or("no clock before the transaction")?;
        let commit = CommitTime {
            earliest: earliest - earliest.rem_euclid(1_000_000),
            latest: latest.ok_or("no clock after the commit")?,
            exact: None,
        };
        // MariaDB logs only the rows a statement changed: the server's counts hold.
        Ok((Some(events), Some(Observed { tables, commit })))
    }

    fn logs_unchanged_updates(&self) -> bool {
        false
    }

    fn source_yaml(&self, _job: &str, rng: &mut Rng) -> String {
        // Small caps make large transactions spill to output.spill_dir.
        let memory = rng.pick(&[1024u64, 16_384, 262_144, 32 << 20]);
        format!(
            "source:\n  url_env: SLUICE_ORACLE_SOURCE_URL\n  tables: [{TABLE}]\n  \
             mysql: {{ transaction_memory_bytes: {memory} }}\n"
        )
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![("SLUICE_ORACLE_SOURCE_URL".into(), self.url.clone())]
    }

    fn can_fail_over(&self) -> bool {
        self.replica.is_some()
    }

    fn fail_over(&mut self) -> Result<(), String> {
        let replica = self.replica.as_ref().ok_or("no replica held")?;
        replica.promote(&self.db.admin_url);
        let url = replica.url_for(&self.db.url);
        let conn = self.runtime.block_on(session(&url, &self.db.name))?;
        if let Some(old) = self.conn.replace(conn) {
            let _ = self.runtime.block_on(old.disconnect());
        }
        self.url = url;
        Ok(())
    }

    fn table(&self) -> String {
        TABLE.into()
    }

    fn logs_every_value(&self) -> bool {
        true
    }

    fn can_alter(&self) -> bool {
        true
    }

    fn alter(&mut self, ddl: &Ddl) -> Result<(), String> {
        let sql = oracle::trial::ddl_sql(TABLE, ddl, true);
        self.run(async |conn: &mut Conn| conn.query_drop(&sql).await)
            .map_err(|e| format!("{sql}: {e}"))?;
        ddl.apply(&mut self.added);
        Ok(())
    }
}
