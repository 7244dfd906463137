//! The replay rule as shipped code, checked against the source: `sluice sql --dialect
//! duckdb` for the trial's table, run by DuckDB (the readers' venv) over every part the
//! trial wrote, its result copied to a Parquet file and read back into canonical cells
//! ([`super::parts::read_cells`]), then compared with the source's `SELECT *` cell by cell
//! ([`super::check::compare_state`]). The Athena and Spark texts of the same table are
//! transpiled to DuckDB by sqlglot (so they must parse in their own dialect) and checked
//! the same way: the three texts are one rule. `sluice materialize` builds the table's
//! current state from the same parts with the rule executed in process, and its files are
//! checked against the source the same way.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::canon::Cell;
use super::check::{Findings, SourceRow, compare_state};

/// Runs the three texts with DuckDB over the table folder `argv[1]`: the DuckDB text
/// (`argv[2]`) as it is; the Athena (`argv[3]`, rendered with `--source sluice_rows`) and
/// Spark (`argv[4]`) texts transpiled to DuckDB by sqlglot, their rows' source (the catalog
/// table, the temporary view) and file-path column pointed at a DuckDB view of the same
/// files. Each result goes to `<argv[5]>/<dialect>.parquet`.
const RUN: &str = r#"
import re, sys, duckdb, sqlglot
folder, duck, athena, spark, out = sys.argv[1:6]
con = duckdb.connect()
con.execute(f"CREATE VIEW sluice_rows AS SELECT *, filename AS __file_path FROM read_parquet('{folder}/**/*.parquet', union_by_name = true, filename = true, hive_partitioning = false)")
athena_text = open(athena).read().replace('"$path"', '__file_path')
spark_text = open(spark).read().split(';\n\n', 1)[1]
spark_text = re.sub(r'`sluice_rows_[a-z0-9_]+`', 'sluice_rows', spark_text).replace('input_file_name()', '__file_path')
queries = {
    'duckdb': open(duck).read(),
    'athena': sqlglot.transpile(athena_text, read='trino', write='duckdb')[0],
    'spark': sqlglot.transpile(spark_text, read='spark', write='duckdb')[0],
}
for name, query in queries.items():
    query = query.strip().rstrip(';')
    con.execute(f"COPY ({query}) TO '{out}/{name}.parquet' (FORMAT parquet, COMPRESSION zstd)")
print('ok')
"#;

/// `sluice sql` for `table` in `dialect`, written to `<dir>/<dialect>.sql`.
fn render(
    config: &Path,
    dir: &Path,
    table: &str,
    dialect: &str,
    extra: &[&str],
) -> Result<String, String> {
    let bin =
        std::env::var("SLUICE_ORACLE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").into());
    let out = Command::new(bin)
        .args(["sql", "--config"])
        .arg(config)
        .args(["--dialect", dialect, "--table", table])
        .args(extra)
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

/// The current state `sluice materialize` builds for `table`: the rows of the files its
/// pointer names.
fn materialized(
    config: &Path,
    out: &Path,
    table: &str,
) -> Result<Vec<BTreeMap<String, Cell>>, String> {
    let bin =
        std::env::var("SLUICE_ORACLE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").into());
    let run = Command::new(bin)
        .args(["materialize", "--config"])
        .arg(config)
        .args(["--table", table])
        .output()
        .map_err(|e| format!("sluice materialize: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "sluice materialize failed: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    let pointer_path = out.join(table).join("_current_state/_version.json");
    let pointer: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&pointer_path).map_err(|e| format!("{}: {e}", pointer_path.display()))?,
    )
    .map_err(|e| format!("{}: {e}", pointer_path.display()))?;
    let mut rows = Vec::new();
    for file in pointer["files"].as_array().into_iter().flatten() {
        let file = file.as_str().ok_or("a pointer file that is not text")?;
        rows.extend(super::parts::read_cells(&out.join(file))?);
    }
    Ok(rows)
}

/// `sluice materialize --table` as a schedule runs it between drains, crashed at `fault`
/// when given; true when it crashed there.
pub fn materialize_step(
    config: &Path,
    env: &[(String, String)],
    fault: Option<&str>,
) -> Result<bool, String> {
    let bin =
        std::env::var("SLUICE_ORACLE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").into());
    let mut cmd = Command::new(bin);
    cmd.args(["materialize", "--config"])
        .arg(config)
        .env_remove("SLUICE_FAULT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(point) = fault {
        cmd.env("SLUICE_FAULT", point);
    }
    let run = cmd
        .output()
        .map_err(|e| format!("sluice materialize: {e}"))?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    if fault.is_some() && stderr.contains("fault injected") {
        return Ok(true);
    }
    // A table nothing was written for yet has no shape: not a failure of the build. Nor is
    // a transient exit (3: files a compaction beside it kept removing, a lease): it built
    // nothing, as a scheduler's next tick builds again; the check at the end builds anew.
    let stdout = String::from_utf8_lossy(&run.stdout);
    if run.status.success()
        || run.status.code() == Some(3)
        || stderr.contains("SLUICE_REPLAY_NO_SCHEMA")
    {
        return Ok(false);
    }
    Err(format!("sluice materialize failed: {stdout}{stderr}"))
}

/// What the trial's schema changes left: columns dropped (not compared), and added
/// columns the source holds only NULLs in (compared only where the view has them).
#[derive(Clone, Copy)]
pub struct SchemaChanges<'a> {
    pub dropped: &'a std::collections::BTreeSet<String>,
    pub optional: &'a std::collections::BTreeSet<String>,
}

/// Checks `sluice sql`'s DuckDB query against the source; `key` is the key column.
pub fn check(
    python: &str,
    config: &Path,
    dir: &Path,
    table: &str,
    key: &str,
    source: &BTreeMap<String, SourceRow>,
    columns: SchemaChanges<'_>,
) -> Result<Findings, String> {
    let SchemaChanges { dropped, optional } = columns;
    let sql_dir = dir.join("sql");
    std::fs::create_dir_all(&sql_dir).unwrap();
    let duck = render(config, &sql_dir, table, "duckdb", &[])?;
    let athena = render(
        config,
        &sql_dir,
        table,
        "athena",
        &["--source", "sluice_rows"],
    )?;
    let spark = render(config, &sql_dir, table, "spark", &[])?;
    let folder = dir.join("out").join(table);
    let out = Command::new(python)
        .arg("-c")
        .arg(RUN)
        .arg(&folder)
        .args([duck.as_str(), &athena, &spark])
        .arg(&sql_dir)
        .output()
        .map_err(|e| format!("the readers' python: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "running sluice sql's texts ({}) failed: {}",
            sql_dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut results: Vec<(&str, Vec<BTreeMap<String, Cell>>)> = Vec::new();
    for dialect in ["duckdb", "athena", "spark"] {
        let rows = super::parts::read_cells(&sql_dir.join(format!("{dialect}.parquet")))?;
        results.push((dialect, rows));
    }
    results.push((
        "sluice materialize",
        materialized(config, &dir.join("out"), table)?,
    ));
    let mut findings = Findings::default();
    for (dialect, rows) in results {
        let mut state: BTreeMap<String, BTreeMap<String, Cell>> = BTreeMap::new();
        for row in rows {
            let Some(k) = row.get(key).cloned().flatten() else {
                return Err(format!("{dialect}: a row with a NULL key: {row:?}"));
            };
            // A column dropped after the newest change of the table is still in the
            // newest shape data has (the view shows its last values); not compared.
            let row = row
                .into_iter()
                .filter(|(c, _)| !dropped.contains(c))
                .collect();
            if state.insert(k.clone(), row).is_some() {
                return Err(format!("{dialect}: key {k} twice"));
            }
        }
        // An optional column the view does not have is not compared.
        let shown: std::collections::BTreeSet<&String> =
            state.values().flat_map(|r| r.keys()).collect();
        let source: BTreeMap<String, SourceRow> = source
            .iter()
            .map(|(k, row)| {
                let row = row
                    .iter()
                    .filter(|(c, _)| shown.contains(c) || !optional.contains(*c))
                    .map(|(c, v)| (c.clone(), v.clone()))
                    .collect();
                (k.clone(), row)
            })
            .collect();
        let mut found = Findings::default();
        compare_state(&state, &source, &mut found);
        findings.rows_compared += found.rows_compared;
        findings.mismatches.extend(
            found
                .mismatches
                .into_iter()
                .map(|m| format!("{dialect}: {m}")),
        );
    }
    Ok(findings)
}
