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

/// Reads a table folder of the dated layout (`output.layout: dated` or `dated-hourly`)
/// the way its users do — pyarrow's dataset with `partitioning="hive"` over the whole
/// folder, and DuckDB's `read_parquet(…, hive_partitioning = true)` over `dt=*/` — and
/// answers, per reader, how many change rows it read (`rows`), how many of them lie in a
/// partition other than their commit time's UTC date (and hour) (`misplaced`), the
/// partitions it saw (`dt`, sorted, with `/hr=HH` when hourly), and for pyarrow how many
/// snapshot rows it read and how many of those carry a partition value (`snapshot`,
/// `snapshot_partitioned`). `None` (skipped loudly) without the readers' venv.
pub fn hive_partitions(table_dir: &Path, hourly: bool) -> Option<serde_json::Value> {
    let python = python()?;
    let script = r#"
import json, sys
import duckdb, pyarrow.compute as pc, pyarrow.dataset as ds
root, hourly = sys.argv[1], sys.argv[2] == "hourly"
t = ds.dataset(root, format="parquet", partitioning="hive").to_table()
dt = pc.cast(t["dt"], "string")
hr = pc.cast(t["hr"], "int64") if hourly else None
snap = pc.equal(t["__op"], "snapshot")
changes = pc.invert(snap)
day = pc.strftime(t["__ts"], format="%Y-%m-%d")
bad = pc.not_equal(day, dt)
if hourly:
    bad = pc.or_(bad, pc.not_equal(pc.hour(t["__ts"]), hr))
seen = sorted({f"dt={d}" + (f"/hr={h:02d}" if hourly else "") for d, h, c in zip(
    dt.to_pylist(), (hr.to_pylist() if hourly else [0] * len(t)), changes.to_pylist()) if c})
out = {"pyarrow": {
    "rows": pc.sum(changes).as_py() or 0,
    "misplaced": pc.sum(pc.and_(changes, pc.fill_null(bad, True))).as_py() or 0,
    "snapshot": pc.sum(snap).as_py() or 0,
    "snapshot_partitioned": pc.sum(pc.and_(snap, pc.is_valid(t["dt"]))).as_py() or 0,
    "dt": seen}}
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
hour = " OR hour(__ts) <> CAST(hr AS BIGINT)" if hourly else ""
label = "'dt=' || CAST(dt AS VARCHAR)" + (" || '/hr=' || lpad(CAST(hr AS VARCHAR), 2, '0')" if hourly else "")
rows, misplaced, seen = con.execute(f"""
  SELECT count(*),
         count(*) FILTER (WHERE strftime(__ts, '%Y-%m-%d') <> CAST(dt AS VARCHAR){hour}),
         list_sort(list(DISTINCT {label}))
  FROM read_parquet('{root}/dt=*/**/*.parquet', hive_partitioning = true, union_by_name = true)
""").fetchone()
out["duckdb"] = {"rows": rows, "misplaced": misplaced, "dt": seen or []}
print(json.dumps(out))
"#;
    let mode = if hourly { "hourly" } else { "daily" };
    let text = run(&python, script, &[table_dir, Path::new(mode)]);
    Some(serde_json::from_str(&text).expect("the reader script prints JSON"))
}

/// Spark reads the dated partitions of a table folder the way docs/output.md says —
/// `spark.read.option("basePath", folder).parquet(folder + "/dt=*")` — and answers
/// `(rows, misplaced)`: the change rows it read and how many lie in a partition other
/// than their commit time's UTC date (and hour). `None` (skipped loudly) without the
/// Spark venv.
pub fn spark_hive_partitions(table_dir: &Path, hourly: bool) -> Option<(u64, u64)> {
    let python = spark_python()?;
    let script = r#"
import sys
from pyspark.sql import SparkSession, functions as F
root, hourly = sys.argv[1], sys.argv[2] == "hourly"
spark = SparkSession.builder.master("local[1]").config("spark.sql.session.timeZone", "UTC").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.option("basePath", root).parquet(root + "/dt=*")
bad = F.date_format("__ts", "yyyy-MM-dd") != F.col("dt").cast("string")
if hourly:
    bad = bad | (F.hour("__ts") != F.col("hr").cast("int"))
print(df.count(), df.filter(bad).count())
"#;
    let mode = if hourly { "hourly" } else { "daily" };
    let text = run(&python, script, &[table_dir, Path::new(mode)]);
    let last = text.lines().last().unwrap_or_default();
    let (rows, misplaced) = last.split_once(' ').expect("two numbers");
    Some((rows.parse().unwrap(), misplaced.parse().unwrap()))
}

/// `sluice sql --table <table>` for `job` in every dialect, run by DuckDB — the DuckDB
/// text as it is, the Athena (`--source sluice_rows`) and Spark texts transpiled to DuckDB
/// by sqlglot over a view of the same files, as the oracle runs them — each must give the
/// same rows; those rows as their cells' texts joined by `|` (NULL as `NULL`), sorted,
/// duplicates kept (a table without a key replays as a multiset). `None` (skipped loudly)
/// without the readers' venv.
pub fn sluice_sql_multiset(job: &super::Job, table: &str) -> Option<Vec<String>> {
    let python = python()?;
    let dir = job.dir.path().join("sql");
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (dialect, extra) in [
        ("duckdb", &[][..]),
        ("athena", &["--source", "sluice_rows"][..]),
        ("spark", &[][..]),
    ] {
        let mut args = vec!["sql", "--dialect", dialect, "--table", table];
        args.extend_from_slice(extra);
        let out = job.command(&args, &[]).output().expect("run sluice sql");
        assert!(
            out.status.success(),
            "sluice sql --dialect {dialect}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = dir.join(format!("{dialect}.sql"));
        std::fs::write(&path, &out.stdout).unwrap();
        files.push(path);
    }
    let script = r#"
import re, sys, duckdb, sqlglot
folder, duck, athena, spark = sys.argv[1:5]
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
results = {}
for name, query in queries.items():
    rows = con.execute(query.strip().rstrip(';')).fetchall()
    results[name] = sorted('|'.join('NULL' if v is None else str(v) for v in r) for r in rows)
assert results['athena'] == results['duckdb'], ('athena', len(results['athena']), len(results['duckdb']))
assert results['spark'] == results['duckdb'], ('spark', len(results['spark']), len(results['duckdb']))
print('\n'.join(results['duckdb']))
"#;
    let folder = job.out().join(table);
    let args: Vec<&Path> = std::iter::once(folder.as_path())
        .chain(files.iter().map(|p| p.as_path()))
        .collect();
    let text = run(&python, script, &args);
    Some(
        text.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// Python source defining `replay(rows)`: the replay rule by `id` over a change log's rows
/// (dicts with `__pos`, `__seq`, `__op`, `id`, `v`) — each key's latest change by
/// `(__pos, __seq)`, deleted keys removed — as `{id: v}`. Prepend it with `concat!`.
#[macro_export]
macro_rules! py_replay_by_id {
    () => {
        r#"
def replay(rows):
    state = {}
    for r in sorted(rows, key=lambda r: (r["__pos"], r["__seq"])):
        if r["__op"] == "delete":
            state.pop(r["id"], None)
        else:
            state[r["id"]] = r["v"]
    return state
"#
    };
}
