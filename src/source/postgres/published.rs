//! What the job's publication publishes of each captured table under its policy
//! (docs/privacy.md): a column list without the excluded columns, and the row filter, both
//! PostgreSQL 15 features.
//!
//! Guarantees: a row filter is published only on PostgreSQL ≥ 15, and only when it names
//! columns of the table's replica identity or the table is `REPLICA IDENTITY FULL` —
//! otherwise PostgreSQL would refuse the application's own UPDATEs and DELETEs of the
//! table, so sluice refuses first (`SLUICE_SOURCE_PREREQUISITE`, naming the fix). A column
//! list leaves out the excluded columns only when the job asks for it
//! (`policy.column_lists`: PostgreSQL then refuses to drop or retype any listed column) and
//! PostgreSQL accepts one for a table whose updates are published (15+, and not
//! `REPLICA IDENTITY FULL`, whose identity is every column); elsewhere the excluded values
//! are decoded and dropped by sluice before anything is written.

use std::collections::BTreeMap;

use super::catalog::{CapturedTable, quote_ident};
use crate::error::{Code, Error, Result};
use crate::policy::Policies;

/// One table's publication clause beyond its name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Definition {
    /// The published columns, when not all of them.
    pub columns: Option<Vec<String>>,
    /// The row filter, as PostgreSQL SQL.
    pub filter: Option<String>,
}

/// The definitions of the job's tables, by configured name.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    by_table: BTreeMap<String, Definition>,
}

/// The first PostgreSQL version with publication row filters and column lists.
pub const FILTERS_SINCE: i32 = 150_000;

impl Definitions {
    /// No column list and no row filter for any table.
    pub fn none() -> Definitions {
        Definitions::default()
    }

    /// The definitions `policies` give `tables` on a server of `version_num`.
    pub fn of(
        policies: &Policies,
        tables: &[CapturedTable],
        version_num: i32,
    ) -> Result<Definitions> {
        let mut by_table = BTreeMap::new();
        for t in tables {
            if !policies.touches(&t.config_name) || t.shape.columns.is_empty() {
                continue;
            }
            let mut definition = Definition::default();
            if let Some(filter) = policies.filter(&t.shape)? {
                if version_num < FILTERS_SINCE {
                    return Err(Error::new(
                        Code::SourcePrerequisite,
                        format!("policy.tables.{}.filter needs PostgreSQL 15 or later (publication row filters)", t.config_name),
                    )
                    .hint("upgrade the server, or remove the filter (exclude and hash still work: sluice drops and hashes the values before writing)"));
                }
                let expr_columns = policies.filter_columns(&t.config_name);
                let outside: Vec<&str> = expr_columns
                    .iter()
                    .filter(|c| !t.identity_full && !t.key.iter().any(|k| k == *c))
                    .map(String::as_str)
                    .collect();
                if !outside.is_empty() {
                    return Err(Error::new(
                        Code::SourcePrerequisite,
                        format!(
                            "policy.tables.{}.filter uses {}, which {} (its replica identity: {}) does not log for an UPDATE or DELETE",
                            t.config_name,
                            outside.join(", "),
                            t.config_name,
                            if t.key.is_empty() { "none".to_owned() } else { t.key.join(", ") }
                        ),
                    )
                    .hint(format!(
                        "PostgreSQL refuses UPDATE and DELETE on a table whose publication's row filter reads columns outside its replica identity, so sluice does not publish it: \
                         ALTER TABLE {} REPLICA IDENTITY FULL (the old row is then logged whole), or filter on key columns only",
                        t.quoted()
                    )));
                }
                definition.filter = Some(filter.postgres());
            }
            let excluded = policies.excluded(&t.shape);
            if !excluded.is_empty()
                && policies.column_lists()
                && version_num >= FILTERS_SINCE
                && !t.identity_full
            {
                definition.columns = Some(
                    t.shape
                        .columns
                        .iter()
                        .filter(|c| !excluded.contains(&c.name.as_str()))
                        .map(|c| c.name.clone())
                        .collect(),
                );
            } else if !excluded.is_empty() {
                tracing::info!(table = %t.config_name, columns = %excluded.join(", "),
                    "the excluded columns are published (a column list needs policy.column_lists, PostgreSQL 15 and a replica identity other than FULL); sluice drops their values before anything is written");
            }
            if definition != Definition::default() {
                by_table.insert(t.config_name.clone(), definition);
            }
        }
        Ok(Definitions { by_table })
    }

    /// `t`'s definition (the default: every column, every row).
    pub fn of_table(&self, t: &CapturedTable) -> Definition {
        self.by_table
            .get(&t.config_name)
            .cloned()
            .unwrap_or_default()
    }

    /// `t`'s clause in `CREATE PUBLICATION … FOR TABLE` / `SET TABLE`:
    /// `"s"."t" ("a", "b") WHERE (…)`.
    pub fn clause(&self, t: &CapturedTable) -> String {
        let definition = self.of_table(t);
        let mut clause = t.quoted();
        if let Some(columns) = &definition.columns {
            let list: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
            clause.push_str(&format!(" ({})", list.join(", ")));
        }
        if let Some(filter) = &definition.filter {
            clause.push_str(&format!(" WHERE ({filter})"));
        }
        clause
    }

    /// True when some table has a column list or a row filter.
    pub fn any(&self) -> bool {
        !self.by_table.is_empty()
    }
}
