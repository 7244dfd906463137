//! The replay rule as shipped code, checked against the source: `sluice sql --dialect
//! duckdb` for the trial's table, run by DuckDB (the readers' venv) over every part the
//! trial wrote, its result copied to a Parquet file and read back into canonical cells
//! ([`super::parts::read_cells`]), then compared with the source's `SELECT *` cell by cell
//! ([`super::check::compare_state`]). The Athena and Spark texts of the same table must
//! parse with sqlglot (their rule is the same text; `src/replay` unit-tests that).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::canon::Cell;
use super::check::{Findings, SourceRow, compare_state};

/// Runs DuckDB's query from stdin-less argv: `argv[1]` the SQL file, `argv[2]` the output
/// Parquet file; then parses `argv[3]` (Athena) and `argv[4]` (Spark) with sqlglot.
const RUN: &str = r#"
import sys, duckdb, sqlglot
query = open(sys.argv[1]).read().strip().rstrip(';')
duckdb.sql(f"COPY ({query}) TO '{sys.argv[2]}' (FORMAT parquet, COMPRESSION zstd)")
for path, read in [(sys.argv[3], 'trino'), (sys.argv[4], 'spark')]:
    statements = [s for s in sqlglot.parse(open(path).read(), read=read) if s is not None]
    assert statements, f'{path}: no statement'
print('ok')
"#;

/// `sluice sql` for `table` in `dialect`, written to `<dir>/<dialect>.sql`.
fn render(config: &Path, dir: &Path, table: &str, dialect: &str) -> Result<String, String> {
    let bin =
        std::env::var("SLUICE_ORACLE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").into());
    let out = Command::new(bin)
        .args(["sql", "--config"])
        .arg(config)
        .args(["--dialect", dialect, "--table", table])
        .output()
        .map_err(|e| format!("sluice sql: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sluice sql --dialect {dialect} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let path = dir.join(format!("{dialect}.sql"));
    std::fs::write(&path, &out.stdout).unwrap();
    Ok(path.display().to_string())
}

/// Checks `sluice sql`'s DuckDB query against the source; `key` is the key column.
pub fn check(
    python: &str,
    config: &Path,
    dir: &Path,
    table: &str,
    key: &str,
    source: &BTreeMap<String, SourceRow>,
) -> Result<Findings, String> {
    let sql_dir = dir.join("sql");
    std::fs::create_dir_all(&sql_dir).unwrap();
    let duck = render(config, &sql_dir, table, "duckdb")?;
    let athena = render(config, &sql_dir, table, "athena")?;
    let spark = render(config, &sql_dir, table, "spark")?;
    let state_file = sql_dir.join("state.parquet");
    let out = Command::new(python)
        .arg("-c")
        .arg(RUN)
        .args([
            duck.as_str(),
            &state_file.display().to_string(),
            &athena,
            &spark,
        ])
        .output()
        .map_err(|e| format!("the readers' python: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "running sluice sql's query ({duck}) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut state: BTreeMap<String, BTreeMap<String, Cell>> = BTreeMap::new();
    for row in super::parts::read_cells(&state_file)? {
        let Some(k) = row.get(key).cloned().flatten() else {
            return Err(format!(
                "sluice sql returned a row with a NULL key: {row:?}"
            ));
        };
        if state.insert(k.clone(), row).is_some() {
            return Err(format!("sluice sql returned key {k} twice"));
        }
    }
    // DuckDB reads a decimal wider than 38 digits as a DOUBLE (it has no wider decimal):
    // such columns cannot compare exactly, and are left out here (the parts' own replay
    // checks them).
    let wide = wide_decimals(&dir.join("out").join(table))?;
    let narrow = |row: &BTreeMap<String, Cell>| -> BTreeMap<String, Cell> {
        row.iter()
            .filter(|(c, _)| !wide.contains(*c))
            .map(|(c, v)| (c.clone(), v.clone()))
            .collect()
    };
    let state = state.iter().map(|(k, r)| (k.clone(), narrow(r))).collect();
    let source = source.iter().map(|(k, r)| (k.clone(), narrow(r))).collect();
    let mut findings = Findings::default();
    compare_state(&state, &source, &mut findings);
    Ok(findings)
}

/// The columns of the table's newest manifest whose type holds a decimal of more than 38
/// digits (`decimal(p,s)` or a list of them).
fn wide_decimals(table_dir: &Path) -> Result<Vec<String>, String> {
    let mut wide = Vec::new();
    for doc in ["_manifest.json", "snapshot/_manifest.json"] {
        let Ok(text) = std::fs::read_to_string(table_dir.join(doc)) else {
            continue;
        };
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        for column in json["schema"].as_array().into_iter().flatten() {
            let ty = column["type"].as_str().unwrap_or_default();
            let precision = ty
                .split("decimal(")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|p| p.parse::<u32>().ok());
            if precision.is_some_and(|p| p > 38) {
                wide.push(column["name"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    Ok(wide)
}
