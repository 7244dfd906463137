//! Destination checks: the destination opens, accepts a probe object, returns it, and
//! deletes it again; then encryption at rest ([`super::encryption`]) and the table
//! folders' layout ([`super::layout`]).

use super::{Check, Report};
use crate::config::Config;

/// Where the probe object goes: beside the table directories, never inside one.
const PROBE_PREFIX: &str = "_sluice_doctor";

pub async fn checks(config: &Config, report: &mut Report) {
    if crate::destination::stdout::is_stdout(config) {
        report.push(Check::ok(
            "destination writable",
            "stdout (NDJSON): nothing is stored, nothing to probe",
        ));
        return;
    }
    let destination = match crate::destination::open(config).await {
        Ok(d) => d,
        Err(e) => {
            report.push(Check::from_error("destination writable", &e));
            return;
        }
    };
    let key = format!("{PROBE_PREFIX}/probe-{}", crate::run_id::new_run_id());
    let body = b"sluice doctor probe; safe to delete";
    let probe = async {
        destination.put_marker(&key, body).await?;
        let back = destination.get(&key).await?;
        Ok::<_, crate::error::Error>(back.as_deref() == Some(&body[..]))
    }
    .await;
    match probe {
        Ok(true) => match delete(config, destination.as_ref(), &key).await {
            Ok(()) => report.push(Check::ok(
                "destination writable",
                format!(
                    "{}: probe object written, read back and deleted",
                    destination.describe()
                ),
            )),
            Err(e) => report.push(Check::warn(
                "destination writable",
                format!(
                    "{}: probe written, but deleting {key} failed: {}",
                    destination.describe(),
                    e.chain()
                ),
                format!(
                    "delete {key} by hand; {}",
                    e.hint_text().unwrap_or("check the delete permission")
                ),
            )),
        },
        Ok(false) => report.push(Check::fail(
            "destination writable",
            format!(
                "{}: the probe object {key} read back different bytes",
                destination.describe()
            ),
            "check that nothing else rewrites objects under destination.path",
        )),
        Err(e) => report.push(Check::from_error("destination writable", &e)),
    }
    report.push(super::encryption::check(config).await);
    super::layout::checks(config, destination.as_ref(), report).await;
}

/// Deletes the probe: through the destination, or — for S3, whose destination writes
/// but does not delete — through doctor's own client ([`super::s3::delete`]).
async fn delete(
    config: &Config,
    destination: &dyn crate::destination::Destination,
    key: &str,
) -> crate::error::Result<()> {
    match destination.delete(key).await {
        Ok(()) => Ok(()),
        Err(e) => match &config.destination {
            crate::config::DestinationConfig::S3 { .. } => super::s3::delete(config, key).await,
            crate::config::DestinationConfig::Local { .. }
            | crate::config::DestinationConfig::Stdout {} => Err(e),
        },
    }
}
