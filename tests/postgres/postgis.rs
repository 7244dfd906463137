//! PostGIS `geometry` and `geography` columns are binary columns holding the server's
//! binary send output — EWKB, SRID kept — declared `sluice.form = ewkb`: the stream and
//! the baseline write, value for value, the bytes of the server's own `ST_AsEWKB(col)`,
//! and DuckDB reads the column as a BLOB. Under CI a server without PostGIS fails the
//! test (the local stack installs `postgresql-15-postgis-3`).

use std::collections::BTreeMap;

use crate::support::{self, Job, Row, TestDb, readers};

const SCHEMA: &str = "CREATE EXTENSION postgis; \
     CREATE TABLE pgis_t (id int PRIMARY KEY, g geometry, g4326 geometry(Point, 4326), \
       geo geography)";

const ROWS: &str = "(1, 'POINT(1 2)', 'SRID=4326;POINT(13.4 52.5)', 'POINT(-71.06 42.36)'), \
     (2, 'POLYGON((0 0, 4 0, 4 4, 0 4, 0 0), (1 1, 2 1, 2 2, 1 1))', NULL, \
       'SRID=4326;POLYGON((0 0, 1 0, 1 1, 0 0))'), \
     (3, 'SRID=4326;POINT Z (1 2 3)', 'SRID=4326;POINT(0 0)', NULL), \
     (4, NULL, NULL, NULL)";

const COLUMNS: [&str; 3] = ["g", "g4326", "geo"];

/// The source's own EWKB of every row, as lowercase hex: id → column → hex.
fn source_ewkb(db: &TestDb) -> BTreeMap<String, BTreeMap<String, Option<String>>> {
    let json = db.sql(
        "SELECT json_object_agg(id, json_build_object( \
           'g', encode(ST_AsEWKB(g), 'hex'), 'g4326', encode(ST_AsEWKB(g4326), 'hex'), \
           'geo', encode(ST_AsEWKB(geo::geometry), 'hex'))) FROM pgis_t",
    );
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, row)| {
            let cells = COLUMNS
                .iter()
                .map(|c| (c.to_string(), row[c].as_str().map(str::to_owned)))
                .collect();
            (id.clone(), cells)
        })
        .collect()
}

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
        for (column, hex) in cells {
            assert_eq!(&rows[id][column], hex, "{path}: row {id}, column {column}");
        }
    }
}

fn form(path: &std::path::Path) -> BTreeMap<String, Option<String>> {
    let batch = &support::read_batches(path)[0];
    let schema = batch.schema();
    COLUMNS
        .iter()
        .map(|c| {
            let field = schema.field_with_name(c).unwrap();
            assert_eq!(
                field.data_type(),
                &arrow_schema::DataType::Binary,
                "{c} is a binary column"
            );
            (c.to_string(), field.metadata().get("sluice.form").cloned())
        })
        .collect()
}

const READ: &str = r#"
import sys, duckdb
con = duckdb.connect()
path = sys.argv[1]
for name, ty, *_ in con.execute(f"DESCRIBE SELECT g, g4326, geo FROM read_parquet('{path}')").fetchall():
    print(f"duckdb {name} {ty}")
for row in con.execute(f"SELECT id, hex(g), hex(g4326), hex(geo) FROM read_parquet('{path}') ORDER BY id").fetchall():
    print("row " + "|".join('NULL' if v is None else str(v).lower() for v in row))
"#;

#[test]
fn postgis_geometry_and_geography_are_ewkb_in_stream_and_baseline() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "pgis_ewkb");
    let available = db.sql("SELECT count(*) FROM pg_available_extensions WHERE name = 'postgis'");
    if available.trim() != "1" {
        let why = "PostGIS is not installed on the test server \
                   (infra/local/postgres.sh install adds postgresql-15-postgis-3)";
        assert!(!support::in_ci(), "{why}");
        support::skipped(why);
        return;
    }
    db.sql(SCHEMA);
    let job = Job::postgres(&db, &["pgis_t"], "");
    job.drain();

    db.sql(&format!("INSERT INTO pgis_t VALUES {ROWS}"));
    let inserted = source_ewkb(&db);
    db.sql(
        "UPDATE pgis_t SET g = 'SRID=3857;LINESTRING(0 0, 1 1)', \
           geo = 'MULTIPOINT((1 1), (2 2))' WHERE id = 1",
    );
    let updated = source_ewkb(&db);
    // The SRIDs reach the bytes: 4326 (e6100000) after the EWKB SRID flag.
    assert!(
        inserted["1"]["g4326"]
            .as_deref()
            .unwrap()
            .starts_with("0101000020e6100000")
    );
    assert_eq!(
        inserted["1"]["g"].as_deref(),
        Some("0101000000000000000000f03f0000000000000040")
    );
    let summary = job.drain();
    assert_eq!(summary["rows"], 5, "{summary}");

    // The stream: the inserts carry the inserted values, the update the updated ones.
    let rows = job.rows("pgis_t");
    let inserts: Vec<Row> = rows
        .iter()
        .filter(|r| r["__op"].as_deref() == Some("insert"))
        .cloned()
        .collect();
    assert_matches("stream inserts", &latest(&inserts), &inserted);
    assert_matches("stream", &latest(&rows), &updated);
    let cdc = job.out().join("pgis_t");
    let cdc_part = support::part_files(&cdc, "cdc-")[0].clone();
    let ewkb = Some("ewkb".to_owned());
    assert!(
        form(&cdc_part).values().all(|f| f == &ewkb),
        "{:?}",
        form(&cdc_part)
    );

    // The baseline writes the same bytes.
    let run = job.run(&["baseline"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let snapshot = support::snapshot_dir(&cdc);
    let baseline = support::read_rows(&snapshot, "part-");
    assert_matches("baseline", &latest(&baseline), &updated);
    let part = support::part_files(&snapshot, "part-")[0].clone();
    assert!(
        form(&part).values().all(|f| f == &ewkb),
        "{:?}",
        form(&part)
    );

    // DuckDB reads the columns as BLOBs holding the same bytes.
    let Some(python) = readers::python() else {
        return;
    };
    let out = readers::run(&python, READ, &[part.as_path()]);
    for line in ["duckdb g BLOB", "duckdb g4326 BLOB", "duckdb geo BLOB"] {
        assert!(out.lines().any(|l| l == line), "{line} not in:\n{out}");
    }
    for (id, cells) in &updated {
        let hex = |c: &str| cells[c].clone().unwrap_or_else(|| "NULL".to_owned());
        let line = format!("row {id}|{}|{}|{}", hex("g"), hex("g4326"), hex("geo"));
        assert!(out.lines().any(|l| l == line), "{line} not in:\n{out}");
    }
}
