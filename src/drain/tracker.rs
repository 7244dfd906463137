//! A drain's progress between "stream open" and the summary: the position reached, the
//! changes read, their rate and the parts written, at most once per [`EVERY`].
//!
//! Guarantees: silent unless the process turned progress on ([`crate::progress`]: a bar
//! on a terminal, log lines with `SLUICE_PROGRESS=always`) — never in the Lambda face;
//! costs one counter increment per change otherwise; the bar is finished when the
//! tracker is dropped, so the summary starts on a line of its own.

use std::time::{Duration, Instant};

use crate::position::Position;
use crate::progress::{clock, grouped};

/// How often progress is shown.
pub const EVERY: Duration = Duration::from_secs(1);

/// Changes between two looks at the clock inside one transaction.
const CHANGES_PER_LOOK: u64 = 1024;

/// Where a drain stands.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainProgress {
    /// The last commit position read (tagged text), if any.
    pub at: Option<String>,
    pub rows: u64,
    pub parts: u64,
    pub elapsed: Duration,
}

impl DrainProgress {
    /// Changes per second so far (0 before the first millisecond).
    pub fn rows_per_second(&self) -> u64 {
        let secs = self.elapsed.as_secs_f64();
        if secs < 1e-3 {
            0
        } else {
            (self.rows as f64 / secs) as u64
        }
    }

    /// `drain at pg:00000000/016B3F28  123,456 rows  45,678 rows/s  3 parts  12s`.
    pub fn render(&self) -> String {
        format!(
            "drain at {}  {} {}  {} rows/s  {} {}  {}",
            self.at.as_deref().unwrap_or("(start)"),
            grouped(self.rows),
            if self.rows == 1 { "row" } else { "rows" },
            grouped(self.rows_per_second()),
            grouped(self.parts),
            if self.parts == 1 { "part" } else { "parts" },
            clock(self.elapsed),
        )
    }
}

/// Counts a drain's changes and shows its progress when due.
pub struct Tracker {
    mode: crate::progress::Mode,
    started: Instant,
    shown: Instant,
    rows: u64,
    at: Option<Position>,
}

impl Tracker {
    /// A tracker for a drain starting now, showing progress the way the process asked.
    pub fn start() -> Tracker {
        let mode = if crate::progress::enabled() {
            crate::progress::Mode::Bar
        } else if crate::progress::lines() {
            crate::progress::Mode::Lines
        } else {
            crate::progress::Mode::Off
        };
        let now = Instant::now();
        Tracker {
            mode,
            started: now,
            shown: now,
            rows: 0,
            at: None,
        }
    }

    /// One change read; looks at the clock now and then (a long transaction shows too).
    pub fn change(&mut self, parts: impl FnOnce() -> u64) {
        self.rows += 1;
        if self.rows.is_multiple_of(CHANGES_PER_LOOK) {
            self.show_if_due(parts);
        }
    }

    /// A transaction read up to `at`.
    pub fn commit(&mut self, at: Position, parts: impl FnOnce() -> u64) {
        self.at = Some(at);
        self.show_if_due(parts);
    }

    fn show_if_due(&mut self, parts: impl FnOnce() -> u64) {
        if self.mode == crate::progress::Mode::Off || self.shown.elapsed() < EVERY {
            return;
        }
        self.shown = Instant::now();
        let progress = DrainProgress {
            at: self.at.as_ref().map(|p| p.to_string()),
            rows: self.rows,
            parts: parts(),
            elapsed: self.started.elapsed(),
        };
        match self.mode {
            crate::progress::Mode::Bar => crate::progress::show(progress.render()),
            _ => tracing::info!(
                at = progress.at.as_deref().unwrap_or(""),
                rows = progress.rows,
                rows_per_s = progress.rows_per_second(),
                parts = progress.parts,
                "drain progress"
            ),
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if self.mode == crate::progress::Mode::Bar {
            crate::progress::finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pos: Option<&str>, rows: u64, parts: u64, millis: u64) -> DrainProgress {
        DrainProgress {
            at: pos.map(str::to_owned),
            rows,
            parts,
            elapsed: Duration::from_millis(millis),
        }
    }

    #[test]
    fn the_line_shows_position_rows_rate_parts_and_time() {
        assert_eq!(
            at(Some("pg:00000000/016B3F28"), 123_456, 3, 12_500).render(),
            "drain at pg:00000000/016B3F28  123,456 rows  9,876 rows/s  3 parts  12s"
        );
        assert_eq!(
            at(Some("mysql:binlog.000042:4711"), 1, 1, 83_000).render(),
            "drain at mysql:binlog.000042:4711  1 row  0 rows/s  1 part  1m23s"
        );
        assert_eq!(
            at(None, 0, 0, 0).render(),
            "drain at (start)  0 rows  0 rows/s  0 parts  0s"
        );
    }

    #[test]
    fn an_idle_process_shows_nothing_and_counts_changes() {
        let mut tracker = Tracker {
            mode: crate::progress::Mode::Off,
            started: Instant::now() - EVERY * 2,
            shown: Instant::now() - EVERY * 2,
            rows: 0,
            at: None,
        };
        for _ in 0..CHANGES_PER_LOOK {
            tracker.change(|| panic!("parts are not asked when nothing is shown"));
        }
        assert_eq!(tracker.rows, CHANGES_PER_LOOK);
    }
}
