//! `sluice doctor`: every prerequisite of a job checked at once, as a table of
//! `ok` / `warn` / `fail` rows with the exact fix, or as JSON.
//!
//! Guarantees: a check that mirrors a refusal of the drain calls the drain's own
//! decision function (the source's start decision, identity rule, publication rule,
//! claim rule), so doctor and the run cannot disagree; doctor never creates, advances or
//! claims anything — its only write is a probe object in the destination, deleted again;
//! a silent source cannot hold it: the connection is bounded by
//! `source.timeouts.connect_seconds`, the source's checks together by that plus the
//! larger of `page_seconds` and `read_seconds`. Engines plug in as one module each exposing `checks(config, &mut Report)`; the
//! engine-independent state, destination and memory budget checks run for every job, the
//! catalog check for a job with a `catalog` block.

pub mod destination;
pub mod encryption;
pub mod iceberg;
pub mod layout;
pub mod memory;
pub mod mysql;
pub mod policy;
pub mod postgres;
pub mod registration;
pub mod s3;
pub mod sqlserver;
pub mod state;

use serde::Serialize;

use crate::config::Config;
use crate::error::{Code, Error};
use crate::source::Engine;

/// The "baseline key" row of a PostgreSQL or MySQL table: its own key or the one
/// `baseline.keys` declares, judged by the baselines' [`crate::source::baseline_read::baseline_key`];
/// a table with neither is read whole, by one consistent read.
pub fn baseline_key_check(
    config: &Config,
    table: &str,
    own_key: &[String],
    columns: &[crate::change::Column],
) -> Check {
    let judged =
        crate::source::baseline_read::baseline_key(&config.baseline.keys, table, own_key, columns);
    if matches!(&judged, Ok(key) if key.is_empty()) {
        return Check::ok(
            format!("table {table} baseline key"),
            "no key: one consistent read, replayed as a multiset",
        );
    }
    baseline_key_row(table, judged, config.initial)
}

/// The "baseline key" row of a table, from the baselines' own decision (`judged`: the
/// key columns, or the refusal): a table a baseline would refuse fails with
/// `initial: snapshot` and warns otherwise (a later re-baseline would need the fix).
pub fn baseline_key_row(
    table: &str,
    judged: crate::error::Result<Vec<String>>,
    initial: crate::config::Initial,
) -> Check {
    let name = format!("table {table} baseline key");
    match judged {
        Ok(key) => Check::ok(name, format!("keyset chunks by ({})", key.join(", "))),
        Err(e) if initial == crate::config::Initial::Snapshot => Check::from_error(name, &e),
        Err(e) => Check::from_error(name, &e).as_warning(),
    }
}

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// The exact fix (setting, grant, statement); `None` for `ok`.
    pub fix: Option<String>,
    /// The `SLUICE_…` code the drain would refuse with, for a failed check.
    pub code: Option<String>,
}

impl Check {
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
            code: None,
        }
    }

    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
            code: None,
        }
    }

    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
            code: None,
        }
    }

    /// A failed check carrying the error the drain would stop with.
    pub fn from_error(name: impl Into<String>, e: &Error) -> Check {
        Check {
            name: name.into(),
            status: Status::Fail,
            detail: e.chain(),
            fix: e.hint_text().map(str::to_owned),
            code: Some(e.code().as_str().to_owned()),
        }
    }

    /// `ok` with `detail`, or the error as a failure.
    pub fn result(name: impl Into<String>, r: Result<String, Error>) -> Check {
        match r {
            Ok(detail) => Check::ok(name, detail),
            Err(e) => Check::from_error(name, &e),
        }
    }

    /// The same check downgraded to a warning (a condition the run tolerates).
    pub fn as_warning(mut self) -> Check {
        if self.status == Status::Fail {
            self.status = Status::Warn;
        }
        self
    }
}

/// The checks of one doctor run, in order.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub job: String,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    /// True when the source connection failed: checks that would connect again are not
    /// run (a silent source would cost another `connect_seconds` each).
    pub fn source_unreachable(&self) -> bool {
        self.checks
            .iter()
            .any(|c| c.name == "source connect" && c.status == Status::Fail)
    }

    /// The worst status (`ok` for an empty report).
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// 0 when nothing failed, 5 (the refusal class) otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.worst() == Status::Fail { 5 } else { 0 }
    }

    /// The report as one JSON document.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "job": self.job,
            "status": self.worst(),
            "checks": self.checks,
        })
    }

    /// The report as a plain-text table (status, check, detail, then the fix indented).
    pub fn to_table(&self) -> String {
        let width = self
            .checks
            .iter()
            .map(|c| c.name.chars().count())
            .max()
            .unwrap_or(5)
            .clamp(5, 40);
        let mut out = format!("{:<4}  {:<width$}  detail\n", "", "check");
        for c in &self.checks {
            out.push_str(&format!(
                "{:<4}  {:<width$}  {}\n",
                c.status.label(),
                c.name,
                c.detail
            ));
            if let Some(fix) = &c.fix {
                out.push_str(&format!("{:<4}  {:<width$}  fix: {fix}\n", "", ""));
            }
        }
        let counts = |s: Status| self.checks.iter().filter(|c| c.status == s).count();
        out.push_str(&format!(
            "\n{} ok, {} warn, {} fail\n",
            counts(Status::Ok),
            counts(Status::Warn),
            counts(Status::Fail)
        ));
        out
    }
}

/// Runs every check the job's config calls for.
pub async fn run(config: &Config) -> Report {
    let mut report = Report {
        job: config.job.clone(),
        checks: Vec::new(),
    };
    // Engine checks: one arm per source engine, chosen by the URL as the drain does. The
    // URL may come from a secret; one that cannot be read is itself the finding.
    let engine = crate::secret::resolve(config).await.and_then(|c| {
        let engine = crate::source::engine_for_url(&c.source_url()?)?;
        Ok((c, engine))
    });
    let mysql = matches!(engine, Ok((_, Engine::MySql)));
    match engine {
        Ok((c, engine)) => {
            // The connection is bounded by connect_seconds; the checks after it together by
            // one statement's bound more, so a source that stops answering mid-way cannot
            // hold the report (the checks done so far stay in it).
            let timeouts = &c.source.timeouts;
            let limit = timeouts.connect() + timeouts.statement();
            let checks = async {
                match engine {
                    Engine::Postgres => postgres::checks(&c, &mut report).await,
                    Engine::MySql => mysql::checks(&c, &mut report).await,
                    Engine::SqlServer => sqlserver::checks(&c, &mut report).await,
                }
            };
            if tokio::time::timeout(limit, checks).await.is_err() {
                report.push(Check::from_error("source checks", &stalled_checks(limit)));
            }
        }
        Err(e) => report.push(Check::from_error("source connect", &e)),
    }
    state::checks(config, &mut report).await;
    destination::checks(config, &mut report).await;
    report.push(memory::check(config, mysql));
    registration::checks(config, &mut report).await;
    iceberg::checks(config, &mut report).await;
    report
}

/// The finding of source checks that did not finish within `limit`.
fn stalled_checks(limit: std::time::Duration) -> Error {
    Error::new(
        Code::SourceQuery,
        format!(
            "the source stopped answering: its checks did not finish within {} s",
            limit.as_secs()
        ),
    )
    .hint("a frozen or overloaded server, or a network path dropping packets; the checks above finished — run doctor again (source.timeouts.connect_seconds plus the larger of page_seconds and read_seconds bound the source's checks)")
}

pub use crate::spill::disk_budget::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_status_decides_the_exit_code() {
        let mut r = Report::default();
        assert_eq!(r.exit_code(), 0);
        r.push(Check::ok("a", "fine"));
        r.push(Check::warn("b", "meh", "do x"));
        assert_eq!(r.exit_code(), 0);
        r.push(Check::fail("c", "bad", "do y"));
        assert_eq!(r.exit_code(), 5);
        let table = r.to_table();
        assert!(table.contains("fail  c      bad"), "{table}");
        assert!(table.contains("fix: do y"), "{table}");
        assert_eq!(r.to_json()["status"], "fail");
    }

    #[test]
    fn bytes_read_well() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
    }
}
