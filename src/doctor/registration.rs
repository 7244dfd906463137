//! The `catalog` row: with a Glue catalog, the database exists (ok), does not exist yet
//! (warn: the first run creates it, which needs `glue:CreateDatabase`), or cannot be read
//! (fail, with the code a run's registration would warn with). Read-only: nothing is
//! created.

use super::{Check, Report};
use crate::config::{CatalogConfig, Config};
use crate::registration::glue::Glue;

pub async fn checks(config: &Config, report: &mut Report) {
    let Some(CatalogConfig::Glue {
        database,
        endpoint_url,
        region,
        ..
    }) = &config.catalog
    else {
        return;
    };
    let glue = match Glue::open(endpoint_url.as_deref(), region.as_deref()).await {
        Ok(glue) => glue,
        Err(e) => {
            report.push(Check::from_error("catalog", &e));
            return;
        }
    };
    report.push(match glue.database_exists(database).await {
        Ok(true) => Check::ok(
            "catalog",
            format!("Glue database {database} exists; each run registers its tables there"),
        ),
        Ok(false) => Check::warn(
            "catalog",
            format!("Glue database {database} does not exist yet"),
            format!(
                "the first run creates it, which needs glue:CreateDatabase; or create it now: `aws glue create-database --database-input Name={database}` (Terraform: `sluice_stack`'s `glue_database_name`)"
            ),
        ),
        Err(e) => Check::from_error("catalog", &e),
    });
}
