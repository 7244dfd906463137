//! A drain's progress lines, forced on (`SLUICE_PROGRESS=always`) where no terminal is:
//! the position reached rises from line to line while a backlog drains; without the
//! setting a non-terminal stderr stays free of them.

use std::process::Command;

use crate::support::pipe::python;
use crate::support::{Job, TestDb};

/// A reader that takes its input in small bites with a pause between them, so each
/// batch the drain emits is read slowly and the drain takes a few seconds.
const SLOW_READER: &str = "import os, time\n\
while True:\n    b = os.read(0, 256)\n    if not b:\n        break\n    time.sleep(0.02)\n\
print('[]')\n";

/// The `at=` positions of the progress lines in `stderr`, in order.
fn progress_positions(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("drain progress"))
        .map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("at="))
                .unwrap_or_else(|| panic!("no position in {l:?}"))
                .trim_matches('"')
                .to_owned()
        })
        .collect()
}

#[test]
fn drain_progress_forced_on_shows_a_rising_position_on_stderr() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "progress_pg");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "output: { rollover_rows: 20 }");
    assert_eq!(job.run(&["drain"], &[]).code, 0);
    for i in 0..12 {
        db.sql(&format!(
            "INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series({}, {}) g",
            i * 20 + 1,
            i * 20 + 20
        ));
    }
    let mut reader = Command::new(python());
    reader.args(["-c", SLOW_READER]);
    let run = job.piped(
        &["drain", "--stdout"],
        &[("SLUICE_PROGRESS", "always")],
        reader,
    );
    assert_eq!(run.sluice.code, 0, "{}", run.sluice.stderr);
    assert_eq!(run.summary()["rows"], 240);
    let positions = progress_positions(&run.sluice.stderr);
    assert!(
        positions.len() >= 2,
        "a progress line about every second: {}",
        run.sluice.stderr
    );
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "the position rises: {positions:?}"
    );
    assert!(
        positions.iter().all(|p| p.starts_with("pg:")),
        "{positions:?}"
    );
    for line in run
        .sluice
        .stderr
        .lines()
        .filter(|l| l.contains("drain progress"))
    {
        for field in ["rows=", "rows_per_s=", "parts="] {
            assert!(line.contains(field), "{line}");
        }
    }

    // Without the setting, a stderr that is no terminal gets no progress lines.
    for i in 12..15 {
        db.sql(&format!(
            "INSERT INTO t SELECT g, 'y' FROM generate_series({}, {}) g",
            i * 20 + 1,
            i * 20 + 20
        ));
    }
    let mut reader = Command::new(python());
    reader.args(["-c", SLOW_READER]);
    let quiet = job.piped(&["drain", "--stdout"], &[], reader);
    assert_eq!(quiet.sluice.code, 0, "{}", quiet.sluice.stderr);
    assert!(
        !quiet.sluice.stderr.contains("drain progress"),
        "{}",
        quiet.sluice.stderr
    );
}

#[test]
fn drain_on_a_terminal_draws_a_progress_bar_beneath_the_log() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "progress_pg_tty");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let job = Job::postgres(&db, &["t"], "output: { rollover_rows: 20 }");
    assert_eq!(job.run(&["drain"], &[]).code, 0);
    for i in 0..12 {
        db.sql(&format!(
            "INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series({}, {}) g",
            i * 20 + 1,
            i * 20 + 20
        ));
    }
    // `script` runs the pipeline on a pseudo-terminal: sluice's stderr is the terminal,
    // its stdout the pipe into the slow reader.
    let line = format!(
        "{} drain --stdout --config {} | {} -c \"$SLOW_READER\"",
        env!("CARGO_BIN_EXE_sluice"),
        job.config.display(),
        python()
    );
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env(&job.url_env.0, &job.url_env.1)
        .env("SLOW_READER", SLOW_READER)
        .env("SLUICE_LOG", "info")
        .env_remove("SLUICE_PROGRESS")
        .env_remove("SLUICE_FAULT")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(tty.contains("drain at pg:"), "{tty}");
    assert!(tty.contains(" rows/s  "), "{tty}");
    assert!(
        tty.contains("\r\x1b[2K"),
        "the bar is redrawn in place: {tty:?}"
    );
    assert!(
        !tty.contains("drain progress"),
        "a bar, not log lines: {tty}"
    );
}
