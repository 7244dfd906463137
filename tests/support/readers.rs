//! Independent readers of what sluice writes: pyarrow and DuckDB in the venv
//! `infra/local/readers.sh` provides (`SLUICE_TEST_READERS_PYTHON`). Under CI a missing
//! venv fails the test; otherwise it is skipped loudly.

use std::path::Path;
use std::process::Command;

/// The readers' interpreter, or `None` (skipped loudly) outside CI when it is not set up.
pub fn python() -> Option<String> {
    super::service_url("SLUICE_TEST_READERS_PYTHON")
}

/// Runs `script` under `python` with `args`; panics with its stderr when it fails and
/// returns its stdout, trimmed.
pub fn run(python: &str, script: &str, args: &[&Path]) -> String {
    let output = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run the readers' python");
    assert!(
        output.status.success(),
        "reader script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The Spark venv's interpreter (`infra/local/spark.sh`, `SLUICE_TEST_SPARK_PYTHON`), or
/// `None` (skipped loudly) outside CI when it is not set up.
pub fn spark_python() -> Option<String> {
    super::service_url("SLUICE_TEST_SPARK_PYTHON")
}

/// Spark reads every part in `parts` — the whole file, every value equal to what pyarrow
/// reads (tests/support/spark_check.py) — and answers `column → Spark type` for the
/// columns of those parts. Panics naming the part and the first differing row otherwise.
pub fn spark_reads_exactly(
    python: &str,
    parts: &[std::path::PathBuf],
) -> std::collections::BTreeMap<String, String> {
    let output = Command::new(python)
        .arg("-c")
        .arg(include_str!("spark_check.py"))
        .args(parts)
        .output()
        .expect("run the Spark venv's python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "Spark did not read the parts exactly:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("spark ok "))
            .count(),
        parts.len(),
        "{stdout}"
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spark "))
        .filter(|l| !l.starts_with("ok "))
        .filter_map(|l| l.split_once(' '))
        .map(|(c, t)| (c.to_owned(), t.to_owned()))
        .collect()
}

/// `sluice sql --dialect duckdb --table <table>` for `job`, run by DuckDB: the replayed
/// rows as `<key><sep><column>` texts (NULL as `NULL`), in key order, joined by `,`;
/// `None` (skipped loudly) without the readers' venv.
pub fn sluice_sql_replayed(
    job: &super::Job,
    table: &str,
    key: &str,
    column: &str,
    sep: &str,
) -> Option<String> {
    let python = python()?;
    let out = job
        .command(&["sql", "--dialect", "duckdb", "--table", table], &[])
        .output()
        .expect("run sluice sql");
    assert!(
        out.status.success(),
        "sluice sql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let query = String::from_utf8(out.stdout).expect("sluice sql prints UTF-8");
    let script = format!(
        "import duckdb\ncur = duckdb.connect().execute('''{query}''')\n\
         names = [d[0] for d in cur.description]\n\
         k, c = names.index('{key}'), names.index('{column}')\n\
         rows = sorted(cur.fetchall(), key=lambda r: r[k])\n\
         print(','.join(f\"{{r[k]}}{sep}{{'NULL' if r[c] is None else r[c]}}\" for r in rows))"
    );
    Some(run(&python, &script, &[]))
}
