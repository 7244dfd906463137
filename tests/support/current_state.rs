//! Reading a job's current state as an operator would: `sluice materialize`'s report, the
//! pointer, and DuckDB over the files the pointer names (of table `t (id, v)`, in the form
//! of `TestDb::id_v_text`).

use super::{Job, readers};

/// The pointer of table `t`.
pub fn pointer(job: &Job) -> serde_json::Value {
    let path = job.out().join("t/_current_state/_version.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// `sluice materialize`'s report for table `t`.
pub fn materialize(job: &Job, env: &[(&str, &str)]) -> (i32, serde_json::Value, String) {
    let run = job.run(&["materialize", "--table", "t"], env);
    let report = serde_json::from_str(run.stdout.trim()).unwrap_or(serde_json::Value::Null);
    (run.code, report["tables"][0].clone(), run.stderr)
}

/// DuckDB over the files the pointer names: `id=v,…` in id-text order.
pub fn state_text(job: &Job) -> Option<String> {
    let python = readers::python()?;
    let out = job.out();
    let files: Vec<String> = pointer(job)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("'{}'", out.join(f.as_str().unwrap()).display()))
        .collect();
    let script = format!(
        "import duckdb\nrows = duckdb.connect().execute(\"SELECT id, v FROM read_parquet([{}])\").fetchall()\n\
         print(','.join(f\"{{r[0]}}={{'NULL' if r[1] is None else r[1]}}\" for r in sorted(rows, key=lambda r: str(r[0]))))",
        files.join(", ")
    );
    Some(readers::run(&python, &script, &[]))
}

/// DuckDB running the text `sluice sql --dialect duckdb --current-state` printed for `t`,
/// in the form of [`state_text`]; `None` without the readers.
pub fn state_text_by_sql(job: &Job) -> Option<String> {
    let python = readers::python()?;
    let out = job.run(
        &[
            "sql",
            "--dialect",
            "duckdb",
            "--table",
            "t",
            "--current-state",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "sluice sql --current-state: {}", out.stderr);
    let path = job.dir.path().join("current-state.sql");
    std::fs::write(&path, &out.stdout).unwrap();
    let script = "import sys, duckdb\nrows = duckdb.connect().execute(open(sys.argv[1]).read()).fetchall()\n\
         print(','.join(f\"{r[0]}={'NULL' if r[1] is None else r[1]}\" for r in sorted(rows, key=lambda r: str(r[0]))))";
    Some(readers::run(&python, script, &[&path]))
}
