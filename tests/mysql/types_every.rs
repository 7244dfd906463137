//! Every MariaDB column type is captured — none refused, none a stop — and the change
//! stream and the baseline write the same values, equal to the source's own rendering:
//! one table per type group (temporal, numeric, text in many character sets, spatial),
//! with NULLs, edge values (negative and > 24 h TIMEs, zero and partial-zero dates,
//! unsigned maxima, 65-digit decimals, MariaDB's inet6 / inet4 / uuid) and an update of every
//! column. pyarrow and DuckDB
//! read the parts back with the declared types.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{
    Array, Date32Array, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};

use crate::support::{self, Job, Row, TestMysqlDb, readers};

/// Zero dates, zero-in-date and invalid dates are allowed in the session that writes them.
const MODE: &str = "SET NAMES utf8mb4; SET SESSION sql_mode = 'ALLOW_INVALID_DATES'; \
     SET SESSION time_zone = '+00:00';";

/// One type group: its table, and each column with the SQL that renders it on the source
/// as sluice must hold it, and how the part's value is compared.
struct Group {
    table: &'static str,
    create: &'static str,
    rows: &'static str,
    update: &'static str,
    columns: &'static [(&'static str, &'static str, Kind)],
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// The displayed value equals the source text.
    Text,
    /// The displayed (hex) bytes equal the source hex, case-insensitively.
    Hex,
    /// A Date32: its day number is the source date's, non-calendar dates encoded.
    Days,
    /// A timestamp: its microsecond is the source's, non-calendar dates encoded.
    Micros,
}

const TEMPORAL: Group = Group {
    table: "tm",
    create: "CREATE TABLE tm (id int PRIMARY KEY, d date, dt datetime(6), ts timestamp(3) NULL, \
         t time(6), t0 time, y year)",
    rows: "(1, '1969-07-20', '2000-02-29 12:34:56.789012', '2024-03-01 00:00:01.5', \
         '-838:59:59.000000', '838:59:59', 2024), \
         (2, NULL, NULL, NULL, NULL, NULL, NULL), \
         (3, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '-00:00:01.5', '25:00:00', 0), \
         (4, '2024-00-10', '2024-02-30 23:59:59.999999', '1970-01-01 00:00:01', '00:00:00', \
         '-01:00:00', 1901)",
    update: "UPDATE tm SET d = '2024-02-00', dt = '0000-00-00 01:02:03', ts = '2038-01-19 03:14:07', \
         t = '123:45:06.7', t0 = '-25:00:00', y = 2155 WHERE id = 1",
    columns: &[
        ("d", "CAST(d AS CHAR)", Kind::Days),
        ("dt", "CAST(dt AS CHAR)", Kind::Micros),
        ("ts", "CAST(ts AS CHAR)", Kind::Micros),
        ("t", "CAST(t AS CHAR)", Kind::Text),
        ("t0", "CAST(t0 AS CHAR)", Kind::Text),
        ("y", "CAST(y + 0 AS CHAR)", Kind::Text),
    ],
};

const NUMERIC: Group = Group {
    table: "nm",
    create: "CREATE TABLE nm (id int PRIMARY KEY, u8 tinyint unsigned, i8 tinyint, \
         u16 smallint unsigned, m24 mediumint, u24 mediumint unsigned, u32 int unsigned, \
         u64 bigint unsigned, i64 bigint, d65 decimal(65,30), d38 decimal(38,10), \
         d5 decimal(5,2) unsigned, b1 bit(1), b64 bit(64), f double)",
    rows: "(1, 255, -128, 65535, -8388608, 16777215, 4294967295, 18446744073709551615, \
         -9223372036854775808, 12345678901234567890123456789012345.123456789012345678901234567890, \
         -1234567890123456789012345678.0123456789, 999.99, 1, 18446744073709551615, -2.25), \
         (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), \
         (3, 0, 127, 0, 8388607, 0, 0, 9223372036854775808, 9223372036854775807, \
         -0.000000000000000000000000000001, 0, 0, 0, 0, 0.5)",
    update: "UPDATE nm SET u8 = 1, i8 = -1, u16 = 1, m24 = -1, u24 = 1, u32 = 1, \
         u64 = 18446744073709551614, i64 = -1, d65 = -99999999999999999999999999999999999.999999999999999999999999999999, \
         d38 = 0.0000000001, d5 = 0.01, b1 = 0, b64 = 9223372036854775808, f = 1e300 WHERE id = 1",
    columns: &[
        ("u8", "CAST(u8 AS CHAR)", Kind::Text),
        ("i8", "CAST(i8 AS CHAR)", Kind::Text),
        ("u16", "CAST(u16 AS CHAR)", Kind::Text),
        ("m24", "CAST(m24 AS CHAR)", Kind::Text),
        ("u24", "CAST(u24 AS CHAR)", Kind::Text),
        ("u32", "CAST(u32 AS CHAR)", Kind::Text),
        ("u64", "CAST(u64 AS CHAR)", Kind::Text),
        ("i64", "CAST(i64 AS CHAR)", Kind::Text),
        ("d65", "CAST(d65 AS CHAR)", Kind::Text),
        ("d38", "CAST(d38 AS CHAR)", Kind::Text),
        ("d5", "CAST(d5 AS CHAR)", Kind::Text),
        ("b1", "CAST(b1 + 0 AS CHAR)", Kind::Text),
        ("b64", "CAST(b64 + 0 AS CHAR)", Kind::Text),
        ("f", "CAST(f AS CHAR)", Kind::Text),
    ],
};

const TEXT: Group = Group {
    table: "tx",
    create: "CREATE TABLE tx (id int PRIMARY KEY, l1 varchar(20) CHARACTER SET latin1, \
         w1250 varchar(20) CHARACTER SET cp1250, l2 varchar(20) CHARACTER SET latin2, \
         w1251 varchar(20) CHARACTER SET cp1251, u2 varchar(20) CHARACTER SET ucs2, \
         u16 varchar(20) CHARACTER SET utf16, u16le varchar(20) CHARACTER SET utf16le, \
         u32 varchar(20) CHARACTER SET utf32, sj varchar(20) CHARACTER SET sjis, \
         gb varchar(20) CHARACTER SET gbk, c2 char(6) CHARACTER SET ucs2, \
         lb varchar(20) CHARACTER SET latin1 COLLATE latin1_bin, \
         kb varchar(20) CHARACTER SET keybcs2, bn binary(4), vb varbinary(10), \
         e enum('small', 'large', 'ünï'), s set('a', 'b', 'c'), j json, \
         e2 enum('ščř', 'x') CHARACTER SET cp1250, s2 set('Ä', 'ö') CHARACTER SET latin1) \
         DEFAULT CHARSET = utf8mb4",
    rows: "(1, 'café €', 'Příliš žluťoučký', 'Łódź', 'Привет', 'Ωmega ✓', '😀 astral', 'ʎ le', \
         '😀𝄞', 'あいう', '你好', 'ab', 'Ärger', 'Čau', x'0001', x'ff00', 'ünï', 'a,c', \
         '{\"k\": [1, 2.5, \"ü\"], \"a\": null}', 'ščř', 'Ä,ö'), \
         (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL, NULL, NULL, NULL), \
         (3, '', '', '', '', '', '', '', '', '', '', '', '', '', '', '', 'small', '', '[]', 'x', '')",
    update: "UPDATE tx SET l1 = 'Œuvre ‰', w1250 = 'Šťastný', l2 = 'ő ű', w1251 = 'Ёж', \
         u2 = 'ŝ', u16 = '𝄞', u16le = 'z', u32 = 'ü', sj = 'カタカナ', gb = '中文', c2 = 'x y', \
         lb = 'ß', kb = 'Řeř', bn = x'ffffffff', vb = x'', e = 'large', s = 'b,c', \
         j = '\"text\"', e2 = 'x', s2 = 'ö' WHERE id = 1",
    columns: &[
        ("l1", "HEX(CONVERT(l1 USING utf8mb4))", Kind::Hex),
        ("w1250", "HEX(CONVERT(w1250 USING utf8mb4))", Kind::Hex),
        ("l2", "HEX(CONVERT(l2 USING utf8mb4))", Kind::Hex),
        ("w1251", "HEX(CONVERT(w1251 USING utf8mb4))", Kind::Hex),
        ("u2", "HEX(CONVERT(u2 USING utf8mb4))", Kind::Hex),
        ("u16", "HEX(CONVERT(u16 USING utf8mb4))", Kind::Hex),
        ("u16le", "HEX(CONVERT(u16le USING utf8mb4))", Kind::Hex),
        ("u32", "HEX(CONVERT(u32 USING utf8mb4))", Kind::Hex),
        ("sj", "HEX(CONVERT(sj USING utf8mb4))", Kind::Hex),
        ("gb", "HEX(CONVERT(gb USING utf8mb4))", Kind::Hex),
        ("c2", "HEX(CONVERT(c2 USING utf8mb4))", Kind::Hex),
        ("lb", "HEX(CONVERT(lb USING utf8mb4))", Kind::Hex),
        // No decoding table: the column's own bytes.
        ("kb", "HEX(CAST(kb AS BINARY))", Kind::Hex),
        ("bn", "HEX(bn)", Kind::Hex),
        ("vb", "HEX(vb)", Kind::Hex),
        ("e", "HEX(CONVERT(e USING utf8mb4))", Kind::Hex),
        ("s", "HEX(CONVERT(s USING utf8mb4))", Kind::Hex),
        ("j", "HEX(CONVERT(j USING utf8mb4))", Kind::Hex),
        ("e2", "HEX(CONVERT(e2 USING utf8mb4))", Kind::Hex),
        ("s2", "HEX(CONVERT(s2 USING utf8mb4))", Kind::Hex),
    ],
};

const SPATIAL: Group = Group {
    table: "gs",
    create: "CREATE TABLE gs (id int PRIMARY KEY, p point, g geometry, pg polygon)",
    rows: "(1, ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('LINESTRING(0 0, 1 1)', 4326), \
         ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))')), (2, NULL, NULL, NULL)",
    update: "UPDATE gs SET p = ST_GeomFromText('POINT(-1.5 1e300)', 3857), \
         g = ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1))'), \
         pg = ST_GeomFromText('POLYGON((0 0, 2 0, 2 2, 0 0))', 4326) WHERE id = 1",
    // MySQL's internal form (SRID, WKB): the test derives WKB / EWKB from it.
    columns: &[
        ("p", "HEX(p)", Kind::Hex),
        ("g", "HEX(g)", Kind::Hex),
        ("pg", "HEX(pg)", Kind::Hex),
    ],
};

const NETWORK: Group = Group {
    table: "ip",
    create: "CREATE TABLE ip (id int PRIMARY KEY, a inet6, b inet4, u uuid)",
    rows: "(1, '::', '0.0.0.0', '6ccd780c-baba-1026-9564-5b8c656024db'), (2, NULL, NULL, NULL), \
         (3, '::1', '255.255.255.255', '00000000-0000-0000-0000-000000000000'), \
         (4, '::ffff:1.2.3.4', '10.0.0.1', 'ffffffff-ffff-ffff-ffff-ffffffffffff'), \
         (5, '::1.2.3.4', '127.0.0.1', '123e4567-e89b-42d3-a456-426614174000'), \
         (6, '1:0:2:3:4:5:6:7', '1.2.3.4', '123e4567-e89b-62d3-a456-426614174000'), \
         (7, '1:0:0:2:0:0:3:4', '1.0.0.0', '123e4567-e89b-42d3-7456-426614174000'), \
         (8, 'fe80::abcd:ef01', '0.0.0.1', '01234567-89ab-5def-8123-456789abcdef'), \
         (9, '2001:db8:0:0:1::', '9.9.9.9', '00000000-0000-1000-8000-000000000000')",
    update: "UPDATE ip SET a = '1::', b = '192.168.0.1', u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' \
         WHERE id = 1",
    columns: &[
        ("a", "CAST(a AS CHAR)", Kind::Text),
        ("b", "CAST(b AS CHAR)", Kind::Text),
        ("u", "CAST(u AS CHAR)", Kind::Text),
    ],
};

const GROUPS: [&Group; 5] = [&TEMPORAL, &NUMERIC, &TEXT, &SPATIAL, &NETWORK];

type State = BTreeMap<String, BTreeMap<String, Option<String>>>;

/// The source's own rendering of every row of `group`: id → column → text, in the form
/// sluice holds it (see [`expected`]).
fn source_state(db: &TestMysqlDb, group: &Group) -> State {
    let select = group
        .columns
        .iter()
        .map(|(c, expr, _)| format!("IFNULL({expr}, '<NULL>') AS {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let out = db.sql(&format!(
        "{MODE} SELECT id, {select} FROM {} ORDER BY id",
        group.table
    ));
    out.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let cells = group
                .columns
                .iter()
                .zip(&fields[1..])
                .map(|((c, _, kind), text)| {
                    let value = (*text != "<NULL>").then(|| expected(*kind, c, text));
                    (c.to_string(), value)
                })
                .collect();
            (fields[0].to_owned(), cells)
        })
        .collect()
}

/// The value sluice must hold for a source text of `kind` in column `column`.
fn expected(kind: Kind, column: &str, text: &str) -> String {
    match kind {
        Kind::Text => text.to_owned(),
        Kind::Hex if ["p", "g", "pg"].contains(&column) => wkb_of_internal(text),
        Kind::Hex => text.to_ascii_lowercase(),
        Kind::Days => days(text).to_string(),
        Kind::Micros => micros(text).to_string(),
    }
}

/// The sluice encoding, recomputed independently: a calendar date's day number, else
/// `-1000000000 - yyyymmdd`.
fn days(text: &str) -> i64 {
    let (y, m, d) = ymd(text);
    match chrono::NaiveDate::from_ymd_opt(y, m, d) {
        Some(date) => (date - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days(),
        None => -1_000_000_000 - i64::from(y * 10_000 + m as i32 * 100 + d as i32),
    }
}

/// A datetime's microsecond, else `-1e17 - (yyyymmdd * 86400e6 + µs of the day)`.
fn micros(text: &str) -> i64 {
    let (date, time) = text.split_once(' ').unwrap();
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let parts: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    let frac: i64 = format!("{frac:0<6}").parse().unwrap();
    let of_day = (parts[0] * 3600 + parts[1] * 60 + parts[2]) * 1_000_000 + frac;
    let (y, m, d) = ymd(date);
    match chrono::NaiveDate::from_ymd_opt(y, m, d) {
        Some(_) => days(date) * 86_400_000_000 + of_day,
        None => {
            -100_000_000_000_000_000
                - (i64::from(y * 10_000 + m as i32 * 100 + d as i32) * 86_400_000_000 + of_day)
        }
    }
}

fn ymd(text: &str) -> (i32, u32, u32) {
    let f: Vec<&str> = text.split('-').collect();
    (
        f[0].parse().unwrap(),
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
    )
}

/// MySQL's internal spatial hex (SRID LE, then WKB) → the WKB (SRID 0) or EWKB hex.
fn wkb_of_internal(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let srid = &bytes[..4];
    let wkb = &bytes[4..];
    let out: Vec<u8> = if srid == [0, 0, 0, 0] {
        wkb.to_vec()
    } else {
        assert_eq!(wkb[0], 1, "MariaDB writes little-endian WKB");
        let mut t = wkb[1..5].to_vec();
        t[3] |= 0x20;
        [&wkb[..1], &t, srid, &wkb[5..]].concat()
    };
    out.iter().map(|b| format!("{b:02x}")).collect()
}

/// Rows of the parts in `dir` with `prefix`, displayed, with Date32 and timestamp
/// columns as their raw day / microsecond numbers, binary as hex, and the strings of
/// `group`'s hex-compared columns as the hex of their UTF-8 bytes.
fn part_rows(dir: &Path, prefix: &str, group: &Group) -> Vec<Row> {
    let hex: Vec<&str> = group
        .columns
        .iter()
        .filter(|(_, _, kind)| *kind == Kind::Hex)
        .map(|(c, _, _)| *c)
        .collect();
    let mut rows = Vec::new();
    for path in support::part_files(dir, prefix) {
        for batch in support::read_batches(&path) {
            let mut shown = support::render(&strip_temporal(&batch));
            for (i, row) in shown.iter_mut().enumerate() {
                for (c, field) in batch.schema().fields().iter().enumerate() {
                    let col = batch.column(c);
                    if col.is_null(i) {
                        continue;
                    }
                    if let Some(a) = col.as_any().downcast_ref::<StringArray>()
                        && hex.contains(&field.name().as_str())
                    {
                        let bytes = a.value(i).bytes();
                        let text = bytes.map(|b| format!("{b:02x}")).collect();
                        row.insert(field.name().clone(), Some(text));
                    } else if let Some(a) = col.as_any().downcast_ref::<Date32Array>() {
                        row.insert(field.name().clone(), Some(a.value(i).to_string()));
                    } else if let Some(a) = col.as_any().downcast_ref::<TimestampMicrosecondArray>()
                    {
                        row.insert(field.name().clone(), Some(a.value(i).to_string()));
                    }
                }
            }
            rows.extend(shown);
        }
    }
    rows
}

/// The batch with its Date32 / timestamp columns replaced by Int32 zeros (their values
/// are read raw; arrow's display cannot show the far-BC encodings).
fn strip_temporal(batch: &RecordBatch) -> RecordBatch {
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;
    let mut fields = Vec::new();
    let mut columns: Vec<Arc<dyn Array>> = Vec::new();
    for (c, field) in batch.schema().fields().iter().enumerate() {
        match field.data_type() {
            DataType::Date32 | DataType::Timestamp(..) => {
                fields.push(Field::new(field.name(), DataType::Int32, true));
                let col = batch.column(c);
                let zeros: Vec<Option<i32>> = (0..batch.num_rows())
                    .map(|i| (!col.is_null(i)).then_some(0))
                    .collect();
                columns.push(Arc::new(Int32Array::from(zeros)));
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(batch.column(c).clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

fn latest(rows: &[Row]) -> BTreeMap<String, Row> {
    rows.iter()
        .map(|r| (r["id"].clone().unwrap(), r.clone()))
        .collect()
}

fn assert_matches(path: &str, rows: &BTreeMap<String, Row>, want: &State) {
    assert_eq!(
        rows.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{path}"
    );
    for (id, cells) in want {
        for (column, text) in cells {
            let got = rows[id][column].as_ref().map(|v| v.to_ascii_lowercase());
            let want = text.as_ref().map(|v| v.to_ascii_lowercase());
            assert_eq!(got, want, "{path}: row {id}, column {column}");
        }
    }
}

/// Prints, for the parts in argv[1..], each column's pyarrow type and DuckDB type, and
/// DuckDB's view of the edge values.
const READ_TYPES: &str = r#"
import sys, duckdb, pyarrow.parquet as pq
for path in sys.argv[1:]:
    schema = pq.read_schema(path)
    for f in schema:
        print(f"pyarrow {f.name} {f.type}")
    con = duckdb.connect()
    for name, ty, *_ in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall():
        print(f"duckdb {name} {ty}")
    cols = [f.name for f in schema if not f.name.startswith('__')]
    for row in con.execute(f"SELECT {', '.join(f'CAST({c} AS VARCHAR)' for c in cols)} FROM read_parquet('{path}') ORDER BY id").fetchall():
        print("row " + "|".join('NULL' if v is None else v for v in row))
"#;

#[test]
fn every_mariadb_type_is_captured_and_stream_and_baseline_write_the_source_rendering() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "mytypes_every");
    for group in GROUPS {
        db.sql(group.create);
    }
    let tables: Vec<&str> = GROUPS.iter().map(|g| g.table).collect();
    let job = Job::mysql(&db, &tables, "", "");
    job.drain();

    let mut inserted = BTreeMap::new();
    for group in GROUPS {
        db.sql(&format!(
            "{MODE} INSERT INTO {} VALUES {}",
            group.table, group.rows
        ));
        inserted.insert(group.table, source_state(&db, group));
        db.sql(&format!("{MODE} {}", group.update));
    }
    let summary = job.drain();
    assert_eq!(summary["status"], "drained", "{summary}");

    for group in GROUPS {
        let dir = job.out().join(group.table);
        let rows = part_rows(&dir, "cdc-", group);
        let inserts: Vec<Row> = rows
            .iter()
            .filter(|r| r["__op"].as_deref() == Some("insert"))
            .cloned()
            .collect();
        let what = format!("{} stream inserts", group.table);
        assert_matches(&what, &latest(&inserts), &inserted[group.table]);
        let updated = source_state(&db, group);
        assert_matches(&format!("{} stream", group.table), &latest(&rows), &updated);
        assert!(
            rows.iter().any(|r| r["__op"].as_deref() == Some("update")),
            "{}: the update is captured",
            group.table
        );
    }

    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for group in GROUPS {
        let snapshot = support::snapshot_dir(&job.out().join(group.table));
        let baseline = part_rows(&snapshot, "part-", group);
        assert_matches(
            &format!("{} baseline", group.table),
            &latest(&baseline),
            &source_state(&db, group),
        );
    }

    // The declared forms are in the field metadata of both paths' parts.
    for (table, column, key, value) in [
        ("tm", "t", "sluice.form", "text"),
        (
            "tm",
            "d",
            "sluice.zero_dates",
            "days = -1000000000 - yyyymmdd",
        ),
        ("gs", "p", "sluice.form", "wkb"),
        ("tx", "kb", "sluice.charset", "keybcs2"),
        ("ip", "a", "sluice.form", "text"),
    ] {
        for (dir, prefix) in [
            (job.out().join(table), "cdc-"),
            (support::snapshot_dir(&job.out().join(table)), "part-"),
        ] {
            let path = &support::part_files(&dir, prefix)[0];
            let batch = &support::read_batches(path)[0];
            let schema = batch.schema();
            let field = schema.field_with_name(column).unwrap();
            assert_eq!(
                field.metadata().get(key).map(String::as_str),
                Some(value),
                "{table}.{column} in {prefix}"
            );
        }
    }
    assert!(
        support::read_batches(&support::part_files(&job.out().join("tm"), "cdc-")[0])[0]
            .schema()
            .field_with_name("ts")
            .unwrap()
            .metadata()
            .get("sluice.zero_dates")
            .is_some_and(|r| r.starts_with("microseconds = -100000000000000000")),
    );

    // pyarrow and DuckDB read the baseline parts with the declared types.
    let Some(python) = readers::python() else {
        return;
    };
    let parts: Vec<_> = ["tm", "nm", "tx", "gs"]
        .iter()
        .map(|t| {
            support::part_files(&support::snapshot_dir(&job.out().join(t)), "part-")[0].clone()
        })
        .collect();
    let args: Vec<&Path> = parts.iter().map(|p| p.as_path()).collect();
    let out = readers::run(&python, READ_TYPES, &args);
    for line in [
        "pyarrow d date32[day]",
        "pyarrow dt timestamp[us]",
        "pyarrow ts timestamp[us, tz=UTC]",
        "pyarrow t string",
        "pyarrow y int16",
        "pyarrow u64 uint64",
        "pyarrow d65 string",
        "pyarrow d38 decimal128(38, 10)",
        "pyarrow b64 uint64",
        "pyarrow u2 string",
        "pyarrow kb binary",
        "pyarrow p binary",
        "duckdb d DATE",
        "duckdb t VARCHAR",
        "duckdb u64 UBIGINT",
        "duckdb u32 UINTEGER",
        "duckdb p BLOB",
        "duckdb u16 VARCHAR",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} not in:\n{out}");
    }
    // DuckDB's values: the unsigned maximum is not wrapped, the zero date is far BC, the
    // TIME beyond a day is its text, text in other character sets is Unicode.
    for needle in [
        "|18446744073709551614|",
        "|123:45:06.700000|",
        "|25:00:00|",
        "2735939-12-29 (BC)",
        "|ő ű|",
        "|Šťastný|",
        "|𝄞|",
    ] {
        assert!(out.contains(needle), "{needle} not in:\n{out}");
    }

    // Spark reads every part, baseline and change stream, whole and exactly (Spark refuses
    // a whole file holding a decimal above 38 digits or a TIME column).
    let Some(spark) = readers::spark_python() else {
        return;
    };
    let mut every: Vec<_> = parts.clone();
    for t in ["tm", "nm", "tx", "gs"] {
        every.extend(support::part_files(&job.out().join(t), "cdc-"));
    }
    let types = readers::spark_reads_exactly(&spark, &every);
    for (column, want) in [
        ("d65", "string"),
        ("d38", "decimal(38,10)"),
        ("u64", "decimal(20,0)"),
        ("t", "string"),
    ] {
        assert_eq!(
            types.get(column).map(String::as_str),
            Some(want),
            "{column}: {types:?}"
        );
    }
}
