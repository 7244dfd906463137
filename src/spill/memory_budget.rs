//! One memory budget for a run's part writers (`output.memory_budget_bytes`), split among
//! its tables.
//!
//! Guarantees: each table's writer batches at most [`MemoryBudget::table_cap`] bytes of
//! cells before it writes them out as one row group (and the Parquet writer closes that
//! row group at once, so its encoded copy is bounded by the same cap): with the batch being
//! built, the batch being encoded (on the encoder thread, [`crate::parts::part`]) and its
//! encoded row group counted — [`COPIES_PER_WRITER`] caps — the writers of all tables together stay within the
//! budget — except that no cap goes below [`MIN_TABLE_CAP`] (a job with very many tables
//! and a tiny budget is bounded by that floor) or above `output.row_group_bytes`.
//! The default is sized from the Lambda function's memory when there is one. A MySQL /
//! MariaDB source's in-memory transaction buffer comes out of the same budget
//! ([`MemoryBudget::transaction_memory`], [`MemoryBudget::less`]): the writers share what
//! is left.

use super::disk_budget::human_bytes;

const MIB: u64 = 1024 * 1024;

/// The smallest batch cap of one table: smaller row groups cost more than they save.
pub const MIN_TABLE_CAP: u64 = MIB;

/// The smallest budget (also the least a config may set).
pub const MIN_BUDGET: u64 = crate::config::OutputConfig::MIN_MEMORY_BUDGET;

/// Caps each writer may hold at once: the batch being built, the batch being encoded and
/// its encoded row group.
pub const COPIES_PER_WRITER: u64 = 3;

/// The most one MySQL / MariaDB transaction holds in memory by default.
pub const DEFAULT_TRANSACTION_MEMORY: u64 = crate::config::MysqlConfig::DEFAULT_TRANSACTION_MEMORY;

/// The CLI's default budget.
pub const CLI_DEFAULT: u64 = 512 * MIB;

/// The Lambda function memory variable.
pub const LAMBDA_MEMORY_ENV: &str = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE";

/// Where a budget came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetOrigin {
    /// `output.memory_budget_bytes`.
    Configured,
    /// Half of the Lambda function's memory (MiB).
    Lambda(u64),
    /// The CLI default.
    Cli,
}

/// The memory the run's part writers may hold together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    pub bytes: u64,
    pub origin: BudgetOrigin,
}

impl MemoryBudget {
    /// The budget from the config (`configured`) or, unset, from the Lambda function's
    /// memory in MiB (`lambda_mib`: half of it) or the CLI default.
    pub fn resolve(configured: Option<u64>, lambda_mib: Option<u64>) -> Self {
        match (configured, lambda_mib.filter(|m| *m > 0)) {
            (Some(bytes), _) => MemoryBudget {
                bytes,
                origin: BudgetOrigin::Configured,
            },
            (None, Some(mib)) => MemoryBudget {
                bytes: (mib * MIB / 2).max(MIN_BUDGET),
                origin: BudgetOrigin::Lambda(mib),
            },
            (None, None) => MemoryBudget {
                bytes: CLI_DEFAULT,
                origin: BudgetOrigin::Cli,
            },
        }
    }

    /// The budget of this process: `configured`, or sized from `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`.
    pub fn from_env(configured: Option<u64>) -> Self {
        let lambda = std::env::var(LAMBDA_MEMORY_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok());
        Self::resolve(configured, lambda)
    }

    /// What one MySQL / MariaDB transaction may hold in memory before it spills to disk:
    /// `configured` (`source.mysql.transaction_memory_bytes`), or a quarter of the budget,
    /// at most [`DEFAULT_TRANSACTION_MEMORY`].
    pub fn transaction_memory(&self, configured: Option<u64>) -> u64 {
        configured.unwrap_or((self.bytes / 4).min(DEFAULT_TRANSACTION_MEMORY))
    }

    /// The run's budget (`output.memory_budget_bytes` or the environment's default) split
    /// for `config`'s source: a MySQL / MariaDB source (`mysql`) first sets aside its
    /// in-memory transaction, and the part writers share the rest. Returns the writers'
    /// budget and, for MySQL, the transaction buffer. The drain, the MySQL stream and
    /// doctor all size memory through this.
    pub fn for_run(config: &crate::config::Config, mysql: bool) -> (MemoryBudget, Option<u64>) {
        let whole = Self::from_env(config.output.memory_budget_bytes);
        if !mysql {
            return (whole, None);
        }
        let configured = config
            .source
            .mysql
            .as_ref()
            .and_then(|m| m.transaction_memory_bytes);
        let buffer = whole.transaction_memory(configured);
        (whole.less(buffer), Some(buffer))
    }

    /// The budget left to the part writers once `reserved` bytes (a MySQL / MariaDB
    /// source's in-memory transaction, [`MemoryBudget::transaction_memory`]) are set
    /// aside — never below [`MIN_BUDGET`] / 2.
    pub fn less(self, reserved: u64) -> MemoryBudget {
        MemoryBudget {
            bytes: self.bytes.saturating_sub(reserved).max(MIN_BUDGET / 2),
            origin: self.origin,
        }
    }

    /// The batch cap of each of `tables` writers whose row groups are at most
    /// `row_group_bytes`: `budget / (3 × tables)`, at least [`MIN_TABLE_CAP`], at most
    /// `row_group_bytes`.
    pub fn table_cap(&self, tables: usize, row_group_bytes: usize) -> usize {
        let share = self.bytes / (COPIES_PER_WRITER * tables.max(1) as u64);
        let cap = share.max(MIN_TABLE_CAP).min(row_group_bytes as u64);
        usize::try_from(cap).unwrap_or(row_group_bytes)
    }

    /// True when the floor, not the budget, sets the cap of `tables` writers: together
    /// they may then hold more than the budget.
    pub fn overcommitted(&self, tables: usize, row_group_bytes: usize) -> bool {
        COPIES_PER_WRITER * tables as u64 * self.table_cap(tables, row_group_bytes) as u64
            > self.bytes
    }

    /// One line for logs and `doctor`: the budget, where it came from, and the cap of
    /// each of `tables` writers.
    pub fn describe(&self, tables: usize, row_group_bytes: usize) -> String {
        let origin = match self.origin {
            BudgetOrigin::Configured => "output.memory_budget_bytes".to_owned(),
            BudgetOrigin::Lambda(mib) => format!("half of the Lambda function's {mib} MiB"),
            BudgetOrigin::Cli => "the CLI default".to_owned(),
        };
        format!(
            "{} ({origin}) for {tables} table writer(s): each batches at most {} per row group",
            human_bytes(self.bytes),
            human_bytes(self.table_cap(tables, row_group_bytes) as u64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW_GROUP: usize = 64 * 1024 * 1024;

    #[test]
    fn the_budget_is_split_among_the_tables_within_floor_and_row_group() {
        let b = MemoryBudget::resolve(Some(64 * MIB), None);
        // 20 tables: 64 MiB / 60 ≈ 1.07 MiB each; the three copies of all fit in 64 MiB.
        let cap = b.table_cap(20, ROW_GROUP) as u64;
        assert_eq!(cap, 64 * MIB / 60);
        assert!(COPIES_PER_WRITER * 20 * cap <= b.bytes);
        // One table: capped by the row group size, not the budget.
        assert_eq!(
            MemoryBudget::resolve(Some(1024 * MIB), None).table_cap(1, ROW_GROUP),
            ROW_GROUP
        );
        assert!(!b.overcommitted(20, ROW_GROUP));
        // Many tables: never below the floor, which then overcommits the budget.
        assert_eq!(b.table_cap(1000, ROW_GROUP) as u64, MIN_TABLE_CAP);
        assert!(b.overcommitted(1000, ROW_GROUP));
        // Zero tables is treated as one.
        assert_eq!(b.table_cap(0, ROW_GROUP) as u64, 64 * MIB / 3);
        // A row group smaller than the floor stays as configured.
        assert_eq!(b.table_cap(1000, 4096), 4096);
    }

    #[test]
    fn a_mysql_transaction_buffer_comes_out_of_the_same_budget() {
        let b = MemoryBudget::resolve(Some(64 * MIB), None);
        assert_eq!(b.transaction_memory(None), 16 * MIB);
        assert_eq!(b.transaction_memory(Some(5 * MIB)), 5 * MIB);
        let big = MemoryBudget::resolve(Some(1024 * MIB), None);
        assert_eq!(big.transaction_memory(None), DEFAULT_TRANSACTION_MEMORY);
        let writers = b.less(b.transaction_memory(None));
        assert_eq!(writers.bytes, 48 * MIB);
        assert_eq!(writers.origin, b.origin);
        // Writers and the transaction buffer together stay within the budget.
        let cap = writers.table_cap(10, ROW_GROUP) as u64;
        assert!(COPIES_PER_WRITER * 10 * cap + b.transaction_memory(None) <= b.bytes);
        assert_eq!(b.less(u64::MAX).bytes, MIN_BUDGET / 2);
    }

    #[test]
    fn the_default_is_half_the_lambda_memory_or_the_cli_default() {
        let lambda = MemoryBudget::resolve(None, Some(1024));
        assert_eq!(lambda.bytes, 512 * MIB);
        assert_eq!(lambda.origin, BudgetOrigin::Lambda(1024));
        assert_eq!(
            MemoryBudget::resolve(None, Some(128)).table_cap(20, ROW_GROUP) as u64,
            MIN_TABLE_CAP.max(64 * MIB / 60)
        );
        let cli = MemoryBudget::resolve(None, None);
        assert_eq!((cli.bytes, cli.origin), (CLI_DEFAULT, BudgetOrigin::Cli));
        assert_eq!(
            MemoryBudget::resolve(None, Some(0)).origin,
            BudgetOrigin::Cli
        );
        let set = MemoryBudget::resolve(Some(64 * MIB), Some(4096));
        assert_eq!(
            (set.bytes, set.origin),
            (64 * MIB, BudgetOrigin::Configured)
        );
        let line = set.describe(20, ROW_GROUP);
        assert!(
            line.contains("64.0 MiB (output.memory_budget_bytes) for 20"),
            "{line}"
        );
        assert!(line.contains("1.1 MiB per row group"), "{line}");
    }
}
