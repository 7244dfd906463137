//! The text table `sluice status` prints: one line per job, columns aligned, every value
//! short enough that twenty jobs fit a terminal. The JSON form carries the same fields
//! unabridged.

use super::{Baseline, JobStatus, LastRun, LeaseView};

const HEADER: [&str; 10] = [
    "JOB",
    "LEASE",
    "CHECKPOINT",
    "LAST RUN",
    "LAG",
    "RUNS 24H",
    "ROWS 24H",
    "BYTES 24H",
    "BASELINE",
    "COMPACTED",
];

/// The table, header first, each line ending in a newline.
pub fn table(rows: &[JobStatus]) -> String {
    let mut cells: Vec<[String; 10]> = vec![HEADER.map(str::to_owned)];
    cells.extend(rows.iter().map(row));
    let mut widths = [0usize; 10];
    for line in &cells {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &cells {
        let mut text = String::new();
        for (i, (cell, w)) in line.iter().zip(widths).enumerate() {
            if i + 1 == line.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    if rows.is_empty() {
        out.push_str("(no jobs in this state store)\n");
    }
    out
}

fn row(s: &JobStatus) -> [String; 10] {
    if let Some(error) = &s.error {
        let dash = || "-".to_owned();
        return [
            s.job.clone(),
            dash(),
            dash(),
            format!("unreadable: {error}"),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
        ];
    }
    let day: fn(String) -> String = if s.day.complete {
        |n: String| n
    } else {
        |n: String| format!("≥{n}")
    };
    [
        s.job.clone(),
        lease(&s.lease),
        s.checkpoint_age_s
            .map_or("none".to_owned(), |a| format!("{} ago", age(a))),
        last_run(s.last_run.as_ref(), s.failing_runs),
        s.lag_s.map_or("-".to_owned(), |l| age(l.round() as i64)),
        day(if s.day.failed > 0 {
            format!("{} ({} failed)", s.day.runs, s.day.failed)
        } else {
            s.day.runs.to_string()
        }),
        day(count(s.day.rows)),
        day(bytes(s.day.bytes)),
        baseline(&s.baseline),
        super::compaction::cell(&s.compaction, age),
    ]
}

fn lease(l: &LeaseView) -> String {
    match l {
        LeaseView::Free => "free".to_owned(),
        LeaseView::Held { expires_in_s, .. } => format!("held {} left", age(*expires_in_s)),
        LeaseView::Expired { expired_s, .. } => format!("expired {} ago", age(*expired_s)),
    }
}

fn last_run(run: Option<&LastRun>, failing: u64) -> String {
    let Some(run) = run else {
        return "never".to_owned();
    };
    let when = run
        .age_s
        .map_or(String::new(), |a| format!(" {} ago", age(a)));
    match (run.status.as_str(), &run.code) {
        ("failed", Some(code)) if failing > 1 => {
            format!("failed{when} {code} ({failing} in a row)")
        }
        ("failed", Some(code)) => format!("failed{when} {code}"),
        (status, _) => format!("{status}{when} +{}", count(run.rows)),
    }
}

fn baseline(b: &Baseline) -> String {
    if b.tables == 0 {
        return "-".to_owned();
    }
    let mut text = format!("{}/{} done", b.done, b.tables);
    for (n, what) in [
        (b.running, "running"),
        (b.anchored, "anchored"),
        (b.wanted, "wanted"),
    ] {
        if n > 0 {
            text.push_str(&format!(", {n} {what}"));
        }
    }
    if b.chunks_read > 0 {
        text.push_str(&format!(" ({} chunks read)", b.chunks_read));
    }
    text
}

/// `45s`, `12m`, `3h`, `2d`.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// `950`, `12.3k`, `4.0M`.
pub fn count(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

/// `512 B`, `3.2 KiB`, `4.1 MiB`, `1.0 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
