//! SQL Server source: CDC change tables read through `cdc.fn_cdc_get_all_changes_<instance>`
//! (tiberius over rustls).
//!
//! SQL Server has no change log a client can stream: the SQL Server Agent's capture job
//! copies committed changes from the transaction log into `cdc.<instance>_CT`, and the
//! cleanup job deletes them after the retention period. A run polls that table:
//!
//! * **Bound.** `sys.fn_cdc_get_max_lsn()` at open: the newest commit LSN the capture job
//!   has written. Changes the job has not copied yet have higher LSNs and are read by a
//!   later run — never skipped.
//! * **Windows.** `[from, end]` LSN ranges, each ending at the commit LSN of the
//!   `window_changes`-th change row, so a window always holds whole transactions
//!   ([`stream`]).
//! * **Order and framing.** Rows sort by `__$start_lsn` (the commit LSN: `__pos`), then
//!   `__$seqval`, then `__$operation`; operations 1/2 are delete/insert, 3+4 the old and
//!   new image of one update ([`changes`]). A key change becomes delete + insert in the
//!   shared framer.
//! * **Resume.** The checkpoint is the last written commit LSN; the next run starts at its
//!   successor. A checkpoint below `sys.fn_cdc_get_min_lsn(instance)` (cleanup passed it)
//!   is a log gap; one from another database (`family_guid`) or written before a restore
//!   (`recovery_fork_guid`) is foreign ([`prerequisites`]). A first run anchors at the
//!   bound and captures what commits after it.
//!
//! Prerequisites: CDC enabled for the database (`sys.sp_cdc_enable_db`) and the table
//! (`sys.sp_cdc_enable_table`, capturing every column), SQL Server Agent running, and a
//! source user with `SELECT ON SCHEMA::cdc`, `SELECT` on the table, and membership in the
//! instance's gating role if it has one.
//!
//! This module only wires the parts: [`connect`] (URL, TLS gate), [`catalog`] (state and
//! columns at open), [`prerequisites`] (refusals), [`queries`] (SQL text), [`values`]
//! (types and cells), [`changes`] (rows → events), [`stream`] (windows), [`baseline_read`]
//! (baseline chunks), [`keys`] (baseline key bounds), [`key_walk`] (chunk planning).

pub mod baseline_read;
pub mod catalog;
pub mod changes;
pub mod connect;
pub mod key_walk;
pub mod keys;
pub mod prerequisites;
pub mod queries;
pub mod stream;
pub mod values;

use crate::config::{Config, SqlServerConfig};
use crate::error::{Code, Error, Result};
use crate::position::Position;
use crate::source::{ChangeStream, Resume, StreamInfo};
use prerequisites::StartDecision;

/// Checks the `source.sqlserver` settings (called by config validation).
pub fn validate_config(ms: &SqlServerConfig, tables: &[String]) -> Result<()> {
    let name = &ms.capture_instance;
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("source.sqlserver.capture_instance {name:?} is not a capture instance name"),
        )
        .hint("use the instance's name as sys.sp_cdc_help_change_data_capture lists it (1-100 characters; default <schema>_<table>)"));
    }
    if ms.window_changes == 0 {
        return Err(Error::new(
            Code::ConfigInvalid,
            "source.sqlserver.window_changes must be at least 1",
        ));
    }
    if tables.len() != 1 {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!(
                "source.tables lists {} tables, but a SQL Server stream reads one capture instance",
                tables.len()
            ),
        )
        .hint("configure one job per table (each with its capture_instance)"));
    }
    Ok(())
}

/// The `source.sqlserver` section, required for a `sqlserver://` URL.
pub(crate) fn settings(config: &Config) -> Result<SqlServerConfig> {
    config.source.sqlserver.clone().ok_or_else(|| {
        Error::new(Code::ConfigInvalid, "source.sqlserver is missing")
            .hint("add `sqlserver: { capture_instance: <schema>_<table> }` under source")
    })
}

/// Opens the SQL Server stream at `resume` (or anchors a first run), fixing the bound.
pub async fn open(config: &Config, resume: Option<&Resume>) -> Result<Box<dyn ChangeStream>> {
    let ms = settings(config)?;
    let url = config.source_url()?;
    let mut client = connect::connect(&url, &config.source.tls, &config.source.timeouts).await?;
    let captured =
        catalog::load(&mut client, &config.source.tables[0], &ms.capture_instance).await?;
    let checkpoint = match resume {
        Some(resume) => {
            prerequisites::check_identity(&resume.source_identity, &captured.identity)?;
            Some(prerequisites::checkpoint_lsn(&resume.position)?)
        }
        None => None,
    };
    let max = catalog::max_lsn(&mut client).await?;
    let min = captured.instance.min_lsn;
    let (start, from) = match prerequisites::decide_start(
        &ms.capture_instance,
        checkpoint,
        min,
        max,
    )? {
        StartDecision::Anchor(at) => {
            tracing::info!(instance = %ms.capture_instance, at = %at, "first run: anchoring at the newest captured LSN");
            (at, at.increment())
        }
        StartDecision::Resume { checkpoint, from } => {
            if checkpoint > max {
                tracing::info!(%checkpoint, %max, "the capture job has not reached the checkpoint yet; nothing to read");
            }
            (checkpoint, Some(from))
        }
    };
    // The bound never lies below the start, so the checkpoint never moves backwards.
    let bound = max.max(start);
    let info = StreamInfo {
        source_identity: captured.identity.to_string(),
        start: Position::SqlServer(start),
        bound: Position::SqlServer(bound),
        tables: vec![captured.shape.clone()],
    };
    // `from` is None only past the largest LSN: nothing can follow.
    let from = from.unwrap_or(bound.increment().unwrap_or(bound));
    Ok(Box::new(stream::SqlServerStream::start(
        info,
        client,
        &captured,
        from,
        bound,
        ms.window_changes,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
job: orders
source:
  url_env: SLUICE_SOURCE_URL
  tables: [dbo.orders]
  sqlserver: { capture_instance: dbo_orders }
destination: { type: local, path: ./out }
state: { type: local, path: ./.sluice }
"#;

    #[test]
    fn config_section_parses_with_defaults() {
        let config = Config::parse(BASE, "t").unwrap();
        let ms = settings(&config).unwrap();
        assert_eq!(ms.capture_instance, "dbo_orders");
        assert_eq!(ms.window_changes, 500_000);
    }

    #[test]
    fn config_section_rejections() {
        let cases = [
            (
                BASE.replace("capture_instance: dbo_orders", "capture_instance: ''"),
                "capture instance name",
            ),
            (
                BASE.replace("dbo_orders }", "dbo_orders, window_changes: 0 }"),
                "window_changes",
            ),
            (
                BASE.replace("[dbo.orders]", "[dbo.orders, dbo.items]"),
                "one capture instance",
            ),
            (
                BASE.replace("dbo_orders }", "dbo_orders, slot: x }"),
                "unknown field",
            ),
        ];
        for (text, needle) in cases {
            // The parser checks the shape, the engine its own block.
            let err = Config::parse(&text, "t")
                .and_then(|c| crate::source::check_config(&c))
                .unwrap_err();
            assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
        }
        let mut config = Config::parse(BASE, "t").unwrap();
        config.source.sqlserver = None;
        assert_eq!(settings(&config).unwrap_err().code(), Code::ConfigInvalid);
    }
}
