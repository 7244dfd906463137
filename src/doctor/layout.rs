//! Layout check: every captured table's folder reads as data only. Warns about what an
//! earlier sluice or an earlier baseline left among the parts — a `manifest.json` (now
//! `_manifest.json`), and `snapshot/` plan folders other than the current one — naming
//! each object and the command that moves it out of readers' way. Read-only.

use super::{Check, Report};
use crate::config::Config;
use crate::destination::Destination;
use crate::parts::{LEGACY_MANIFEST_FILE, MANIFEST_FILE};

pub async fn checks(config: &Config, destination: &dyn Destination, report: &mut Report) {
    let mut found = Vec::new();
    for table in &config.source.tables {
        match stray_objects(destination, table).await {
            Ok(mut stray) => found.append(&mut stray),
            Err(e) => {
                report.push(Check::from_error("table folders read as data", &e));
                return;
            }
        }
    }
    if found.is_empty() {
        report.push(Check::ok(
            "table folders read as data",
            "no legacy manifest.json and no earlier baseline folder among the parts",
        ));
        return;
    }
    let root = destination.describe();
    report.push(Check::warn(
        "table folders read as data",
        format!(
            "{root}: {} — readers of the table folder (pyarrow.dataset, a DuckDB `**` glob, Spark, Athena) would read them as data",
            found.join("; ")
        ),
        format!(
            "remove each legacy manifest.json (`{MANIFEST_FILE}` replaces it), and move each earlier plan folder aside to <table>/_superseded/<utc-timestamp>/snapshot/<plan id>/ (locally `mv`, on S3 `aws s3 mv --recursive`); readers skip names starting with `_`"
        ),
    ));
}

/// The stray objects of one table folder, described.
async fn stray_objects(
    destination: &dyn Destination,
    table: &str,
) -> crate::error::Result<Vec<String>> {
    let mut stray = Vec::new();
    for key in [
        format!("{table}/{LEGACY_MANIFEST_FILE}"),
        format!("{table}/snapshot/{LEGACY_MANIFEST_FILE}"),
    ] {
        if destination.get(&key).await?.is_some() {
            stray.push(format!("legacy {key}"));
        }
    }
    let snapshot = format!("{table}/snapshot/");
    let keys = destination.list(&snapshot).await?;
    let mut folders: Vec<&str> = keys
        .iter()
        .filter_map(|k| k.strip_prefix(&snapshot)?.split_once('/').map(|(f, _)| f))
        .collect();
    folders.dedup();
    // Before a baseline finishes, its folder is the newest (plan ids sort by time).
    let current = match current_plan(destination, table).await? {
        Some(plan) => Some(plan),
        None => folders.last().map(|f| (*f).to_owned()),
    };
    for folder in folders {
        if current.as_deref() != Some(folder) {
            stray.push(format!("earlier baseline folder {snapshot}{folder}/"));
        }
    }
    Ok(stray)
}

/// The plan folder the snapshot's manifest names; `None` while no baseline finished.
async fn current_plan(
    destination: &dyn Destination,
    table: &str,
) -> crate::error::Result<Option<String>> {
    let Some(body) = destination
        .get(&format!("{table}/snapshot/{MANIFEST_FILE}"))
        .await?
    else {
        return Ok(None);
    };
    let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let prefix = format!("{table}/snapshot/");
    Ok(manifest["parts"][0]["key"]
        .as_str()
        .and_then(|k| k.strip_prefix(&prefix)?.split_once('/'))
        .map(|(folder, _)| folder.to_owned()))
}
