//! The "memory budget" row: the budget the drain's part writers share and each table's
//! batch cap, computed by the drain's own [`MemoryBudget`], so doctor and the run agree;
//! a warning when so many tables share the budget that the per-table floor exceeds it. For
//! a MySQL / MariaDB source the row also names the transaction buffer taken out of the
//! budget first, as the drain does.

use super::Check;
use crate::config::Config;
use crate::parts::PartSettings;
use crate::spill::disk_budget::human_bytes;
use crate::spill::memory_budget::MemoryBudget;

pub fn check(config: &Config, mysql: bool) -> Check {
    let (budget, buffer) = MemoryBudget::for_run(config, mysql);
    let row_group_bytes = PartSettings::new(config.spill_dir()).row_group_bytes;
    let tables = config.source.tables.len();
    let mut detail = budget.describe(tables, row_group_bytes);
    if let Some(buffer) = buffer {
        detail.push_str(&format!(
            ", after {} for the source's in-memory transaction out of {}",
            human_bytes(buffer),
            human_bytes(MemoryBudget::from_env(config.output.memory_budget_bytes).bytes)
        ));
    }
    if budget.overcommitted(tables, row_group_bytes) {
        Check::warn(
            "memory budget",
            format!("{detail}; the 1 MiB floor puts the writers above the budget"),
            "raise output.memory_budget_bytes (or the Lambda function's memory), or split the tables over more jobs",
        )
    } else {
        Check::ok("memory budget", detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    fn config(tables: usize, budget: u64) -> Config {
        let names: Vec<String> = (0..tables).map(|i| format!("public.t{i}")).collect();
        let text = crate::config::tests::MINIMAL.replace(
            "tables: [public.orders]",
            &format!("tables: [{}]", names.join(", ")),
        ) + &format!("output: {{ memory_budget_bytes: {budget} }}\n");
        Config::parse(&text, "t").unwrap()
    }

    #[test]
    fn the_row_reports_the_cap_and_warns_when_the_floor_overcommits() {
        let fits = check(&config(20, 64 << 20), false);
        assert_eq!(fits.status, Status::Ok, "{fits:?}");
        assert!(fits.detail.contains("1.1 MiB per row group"), "{fits:?}");
        let over = check(&config(20, 8 << 20), false);
        assert_eq!(over.status, Status::Warn, "{over:?}");
        assert!(over.detail.contains("1.0 MiB per row group"), "{over:?}");
        assert!(over.fix.unwrap().contains("output.memory_budget_bytes"));
        // MySQL: a quarter (16 MiB) is the transaction buffer, the writers share 48 MiB.
        let mysql = check(&config(20, 64 << 20), true);
        assert!(mysql.detail.contains("48.0 MiB"), "{mysql:?}");
        assert!(
            mysql
                .detail
                .contains("after 16.0 MiB for the source's in-memory transaction out of 64.0 MiB"),
            "{mysql:?}"
        );
    }
}
