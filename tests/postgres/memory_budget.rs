//! One memory budget for the run's part writers (`output.memory_budget_bytes`): a
//! 20-table job with wide rows stays within it (measured peak RSS above an idle drain's),
//! each run logs the budget and the per-table cap, and `sluice doctor` reports both.

use crate::support::{self, Job, TestDb};

const TABLES: usize = 20;
const ROWS: usize = 192;

#[test]
fn a_twenty_table_job_stays_within_its_memory_budget() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "membudget20");
    let names: Vec<String> = (0..TABLES).map(|i| format!("mb_t{i:02}")).collect();
    for name in &names {
        db.sql(&format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, pad text)"
        ));
    }
    let tables: Vec<&str> = names.iter().map(String::as_str).collect();
    let job = Job::postgres(&db, &tables, "output: { memory_budget_bytes: 67108864 }");
    // The process alone: a drain with nothing to write.
    let idle_kib = peak_rss(&job);
    // Every table: 192 rows of 32 KiB, 6 MiB of cells; 120 MiB over the job, all
    // batched in open parts (no rollover, no deadline) — without the budget each table
    // may batch 64 MiB.
    let inserts: String = names
        .iter()
        .map(|name| {
            format!(
                "INSERT INTO {name} SELECT i, repeat(md5(i::text || '{name}'), 1024) FROM generate_series(1, {ROWS}) i;"
            )
        })
        .collect();
    db.sql(&format!("BEGIN; {inserts} COMMIT;"));

    let peak_kib = peak_rss(&job);
    eprintln!(
        "peak RSS of a 20-table drain (120 MiB of wide rows) under a 64 MiB budget: {} MiB; of an idle drain: {} MiB",
        peak_kib / 1024,
        idle_kib / 1024
    );
    for name in &names {
        assert_eq!(job.rows(name).len(), ROWS, "{name}");
    }
    // The writers' share: what the loaded drain holds beyond the idle one.
    assert!(
        peak_kib - idle_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB is more than the 64 MiB budget above an idle drain's {idle_kib} KiB"
    );

    // Each run logs the budget and the per-table cap at open.
    let again = job.run(&["drain"], &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("memory budget") && again.stderr.contains("1.1 MiB per row group"),
        "{}",
        again.stderr
    );

    let doctor = job.run(&["doctor", "--json"], &[]);
    let doc: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
    let row = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "memory budget")
        .unwrap_or_else(|| panic!("no memory budget row: {doc}"));
    assert_eq!(row["status"], "ok", "{row}");
    let detail = row["detail"].as_str().unwrap();
    assert!(
        detail.contains("64.0 MiB (output.memory_budget_bytes) for 20 table writer(s)")
            && detail.contains("1.1 MiB per row group"),
        "{detail}"
    );

    // Unset, the budget is half the Lambda function's memory.
    let lambda = Job::postgres(&db, &tables, "");
    let doctor = lambda.run(
        &["doctor", "--json"],
        &[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")],
    );
    assert!(
        doctor
            .stdout
            .contains("512.0 MiB (half of the Lambda function's 1024 MiB) for 20 table writer(s)"),
        "{}",
        doctor.stdout
    );
}

/// Runs one drain and returns its peak RSS in KiB.
fn peak_rss(job: &Job) -> i64 {
    let mut drain = support::PeakRss::wrap(&job.command(&["drain"], &[]));
    let child = drain
        .command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (status, peak_kib) = drain.wait(child);
    assert!(status.success());
    peak_kib
}
