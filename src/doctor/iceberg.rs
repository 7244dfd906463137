//! The `iceberg` row: with `table_format: iceberg`, the SQL catalog's directory exists, and
//! each captured table is either not there yet (the first commit creates it) or one
//! sluice can append to (its metadata readable through the destination, format version 2,
//! unpartitioned) — a fail carries the code a run's commit would fail with. Read-only: the
//! catalog is opened read-only and nothing is created.

use super::{Check, Report};
use crate::config::Config;

pub async fn checks(config: &Config, report: &mut Report) {
    if config.iceberg.is_none() {
        return;
    }
    let destination = match crate::destination::open(config).await {
        Ok(d) => d,
        Err(e) => {
            report.push(Check::from_error("iceberg", &e));
            return;
        }
    };
    let log = match crate::iceberg::ChangeLog::of(config, destination.as_ref()) {
        Ok(Some(log)) => log,
        Ok(None) => return,
        Err(e) => {
            report.push(Check::from_error("iceberg", &e));
            return;
        }
    };
    let mut found = Vec::new();
    for table in &config.source.tables {
        match log.inspect(table).await {
            Ok(Some((name, snapshots))) => found.push(format!("{name} ({snapshots} snapshots)")),
            Ok(None) => found.push(format!("{table} (created by its first commit)")),
            Err(e) => {
                report.push(Check::from_error("iceberg", &e));
                return;
            }
        }
    }
    report.push(Check::ok(
        "iceberg",
        format!("each run commits to: {}", found.join(", ")),
    ));
}
