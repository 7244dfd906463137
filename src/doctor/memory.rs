//! The "memory budget" row: the budget the drain's part writers share and each table's
//! batch cap, computed by the drain's own [`MemoryBudget`], so doctor and the run agree;
//! a warning when so many tables share the budget that the per-table floor exceeds it.

use super::Check;
use crate::config::Config;
use crate::sink::PartSettings;
use crate::sink::memory_budget::MemoryBudget;

pub fn check(config: &Config) -> Check {
    let budget = MemoryBudget::from_env(config.output.memory_budget_bytes);
    let row_group_bytes = PartSettings::new(config.spill_dir()).row_group_bytes;
    let tables = config.source.tables.len();
    let detail = budget.describe(tables, row_group_bytes);
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
        let fits = check(&config(20, 64 << 20));
        assert_eq!(fits.status, Status::Ok, "{fits:?}");
        assert!(fits.detail.contains("1.1 MiB per row group"), "{fits:?}");
        let over = check(&config(20, 8 << 20));
        assert_eq!(over.status, Status::Warn, "{over:?}");
        assert!(over.detail.contains("1.0 MiB per row group"), "{over:?}");
        assert!(over.fix.unwrap().contains("output.memory_budget_bytes"));
    }
}
