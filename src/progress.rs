//! A one-line progress bar on an interactive stderr, kept beneath the log lines — or,
//! when forced on elsewhere (`SLUICE_PROGRESS=always`), plain progress log lines.
//!
//! Guarantees: nothing is drawn unless [`enable`] was called (the CLI does so only when
//! stderr is a terminal and logs are text, never in the Lambda face); progress lines
//! ([`lines`]) only after [`enable_lines`] (the CLI: `SLUICE_PROGRESS=always` on a
//! stderr that is no terminal, or with JSON logs); every log line
//! written through [`Stderr`] first erases the bar and then redraws it below, so a log
//! line is never cut by or mixed with the bar; [`finish`] leaves the last bar on its own
//! line. A closed stderr drops the bar, like any other log output.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Erases the terminal line the cursor is on and returns to its start.
const ERASE_LINE: &[u8] = b"\r\x1b[2K";

struct Bar {
    enabled: bool,
    /// Progress is wanted as log lines (no bar can be drawn).
    lines: bool,
    line: Option<String>,
}

static BAR: Mutex<Bar> = Mutex::new(Bar {
    enabled: false,
    lines: false,
    line: None,
});

/// The environment variable that says when progress is shown: `auto` (default: a bar when
/// stderr is a terminal and logs are text), `always` (also as log lines elsewhere),
/// `never`.
pub const PROGRESS_ENV: &str = "SLUICE_PROGRESS";

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Not at all.
    Off,
    /// A bar beneath the log ([`show`]).
    Bar,
    /// Progress log lines ([`lines`]).
    Lines,
}

/// The mode for `SLUICE_PROGRESS` = `setting` (unset: `auto`) on a stderr that is
/// (`terminal`) or is not a terminal, with text or JSON logs; an unknown value is `auto`.
pub fn mode_for(setting: Option<&str>, terminal: bool, text_logs: bool) -> Mode {
    let bar_possible = terminal && text_logs;
    match setting.map(str::trim) {
        Some("never") => Mode::Off,
        Some("always") if bar_possible => Mode::Bar,
        Some("always") => Mode::Lines,
        _ if bar_possible => Mode::Bar,
        _ => Mode::Off,
    }
}

/// Turns progress log lines on for this process.
pub fn enable_lines() {
    bar().lines = true;
}

/// True when progress is wanted as log lines.
pub fn lines() -> bool {
    bar().lines
}

fn bar() -> std::sync::MutexGuard<'static, Bar> {
    BAR.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Turns the bar on for this process.
pub fn enable() {
    bar().enabled = true;
}

/// True when [`show`] draws (otherwise callers log progress as plain lines).
pub fn enabled() -> bool {
    bar().enabled
}

/// Replaces the bar with `line`; a no-op unless enabled.
pub fn show(line: String) {
    let mut bar = bar();
    if !bar.enabled {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(ERASE_LINE);
    let _ = err.write_all(line.as_bytes());
    let _ = err.flush();
    bar.line = Some(line);
}

/// Ends the bar: the last one stays on screen, later output starts on a new line.
pub fn finish() {
    let mut bar = bar();
    if bar.line.take().is_some() {
        let _ = std::io::stderr().lock().write_all(b"\n");
    }
}

/// Calls [`finish`] when dropped, so an early return or error leaves no half line.
pub struct FinishOnDrop;

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        finish();
    }
}

/// The log writer: stderr, with the bar erased before and redrawn after each write.
pub struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Stderr {
        Stderr
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bar = bar();
        let mut err = std::io::stderr().lock();
        match &bar.line {
            Some(line) => {
                err.write_all(ERASE_LINE)?;
                err.write_all(buf)?;
                err.write_all(line.as_bytes())?;
            }
            None => err.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}

/// Where a baseline stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaselineProgress {
    pub chunks_done: usize,
    pub chunks: usize,
    pub rows: u64,
    pub elapsed: Duration,
}

impl BaselineProgress {
    /// Rows per second so far (0 before the first millisecond).
    pub fn rows_per_second(&self) -> u64 {
        let secs = self.elapsed.as_secs_f64();
        if secs < 1e-3 {
            0
        } else {
            (self.rows as f64 / secs) as u64
        }
    }

    /// Time left at the pace so far; `None` before the first chunk is done.
    pub fn eta(&self) -> Option<Duration> {
        if self.chunks_done == 0 {
            return None;
        }
        let left = self.chunks.saturating_sub(self.chunks_done) as f64;
        Some(self.elapsed.mul_f64(left / self.chunks_done as f64))
    }

    /// The bar: `baseline [#####-----]  12/40 chunks  1,234,567 rows  45,678 rows/s  ETA 1m23s`.
    pub fn render(&self) -> String {
        const WIDTH: usize = 24;
        let filled = (WIDTH * self.chunks_done)
            .checked_div(self.chunks)
            .unwrap_or(WIDTH)
            .min(WIDTH);
        let eta = match self.eta() {
            Some(eta) => format!("ETA {}", clock(eta)),
            None => "ETA --".to_owned(),
        };
        format!(
            "baseline [{}{}] {}/{} chunks  {} rows  {} rows/s  {eta}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            self.chunks_done,
            self.chunks,
            grouped(self.rows),
            grouped(self.rows_per_second()),
        )
    }
}

/// `1234567` → `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `83 s` → `1m23s`; `3723 s` → `1h02m03s`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(chunks_done: usize, chunks: usize, rows: u64, secs: u64) -> BaselineProgress {
        BaselineProgress {
            chunks_done,
            chunks,
            rows,
            elapsed: Duration::from_secs(secs),
        }
    }

    #[test]
    fn the_bar_shows_chunks_rows_rate_and_eta() {
        assert_eq!(
            at(10, 40, 1_234_567, 30).render(),
            "baseline [######------------------] 10/40 chunks  1,234,567 rows  41,152 rows/s  ETA 1m30s"
        );
        assert_eq!(
            at(0, 3, 0, 0).render(),
            "baseline [------------------------] 0/3 chunks  0 rows  0 rows/s  ETA --"
        );
        assert_eq!(
            at(3, 3, 999, 2).render(),
            "baseline [########################] 3/3 chunks  999 rows  499 rows/s  ETA 0s"
        );
    }

    #[test]
    fn an_empty_plan_renders_full_not_a_division_by_zero() {
        assert!(
            at(0, 0, 0, 1)
                .render()
                .contains("[########################] 0/0")
        );
    }

    #[test]
    fn numbers_and_durations_read_naturally() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(12_345_678), "12,345,678");
        assert_eq!(clock(Duration::from_secs(59)), "59s");
        assert_eq!(clock(Duration::from_secs(83)), "1m23s");
        assert_eq!(clock(Duration::from_secs(3723)), "1h02m03s");
    }

    #[test]
    fn progress_is_a_bar_on_terminals_lines_only_when_forced() {
        use Mode::*;
        assert_eq!(mode_for(None, true, true), Bar);
        assert_eq!(mode_for(Some("auto"), true, true), Bar);
        assert_eq!(
            mode_for(None, false, true),
            Off,
            "pipes and Lambda logs stay clean"
        );
        assert_eq!(mode_for(None, true, false), Off, "no bar in JSON logs");
        assert_eq!(mode_for(Some("always"), false, true), Lines);
        assert_eq!(mode_for(Some("always"), true, false), Lines);
        assert_eq!(mode_for(Some("always"), true, true), Bar);
        assert_eq!(mode_for(Some("never"), true, true), Off);
    }

    #[test]
    fn a_disabled_bar_draws_nothing() {
        // Tests never enable the bar: `show` must keep no line, so log writes stay plain.
        show("x".to_owned());
        assert!(bar().line.is_none());
    }
}
