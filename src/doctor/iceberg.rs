//! The `iceberg` row: with `table_format: iceberg`, the SQL catalog's directory exists
//! (the Glue catalog answers for the namespace's database — missing is fine, the first
//! commit creates it),
//! each captured table is either not there yet (the first commit creates it) or one
//! sluice can append to (its metadata readable through the destination, format version 2,
//! unpartitioned), and the source's current columns fit it (every type has an Iceberg
//! type, every retyping is a promotion) — a fail carries the code a run's commit would
//! fail with. Read-only: the catalog is opened read-only and nothing is created.

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
    let note = match log.check_catalog().await {
        Ok(note) => note,
        Err(e) => {
            report.push(Check::from_error("iceberg", &e));
            return;
        }
    };
    // The source's current table schemas, to check that their parts can be committed
    // (types Iceberg has, promotions it allows); a source that cannot be read is the
    // source rows' finding, and the schemas are then not compared.
    let source = match crate::secret::resolve(config).await {
        Ok(resolved) => crate::source::open_baseline_reader(&resolved).await.ok(),
        Err(_) => None,
    };
    let mut found = Vec::new();
    for table in &config.source.tables {
        let existing = match log.inspect(table).await {
            Ok(existing) => existing,
            Err(e) => {
                report.push(Check::from_error("iceberg", &e));
                return;
            }
        };
        if let Some(schema) = source.as_ref().and_then(|s| s.schema(table).ok())
            && let Err(e) = log.check_schema(table, &schema, existing.as_ref())
        {
            report.push(Check::from_error("iceberg", &e));
            return;
        }
        found.push(match existing {
            Some(e) => format!("{} ({} snapshots)", e.name, e.snapshots),
            None => format!("{table} (created by its first commit)"),
        });
    }
    let compared = if source.is_some() {
        "; the source's columns fit each table"
    } else {
        "; the source's columns were not compared (the source could not be read)"
    };
    let note = if note.is_empty() {
        note
    } else {
        format!(" ({note})")
    };
    report.push(Check::ok(
        "iceberg",
        format!("each run commits to: {}{compared}{note}", found.join(", ")),
    ));
}
