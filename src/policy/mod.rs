//! Column policies and row filters (docs/privacy.md): per table, columns left out
//! (`exclude`, `include`), written as a keyed hash (`hash`), masked (`mask`) or nulled
//! (`null`), and the rows captured (`filter`). A core room: the engines apply it where
//! rows are decoded, before anything reaches a spill file or a part.
//!
//! Guarantees: one [`Policies`] value, built from the config ([`Policies::of`]), decides
//! every output — the same [`apply::Plan`] for the change stream and the baseline of every
//! engine; a key column may be hashed (keys stay unique and stable, key changes and
//! deletes still replay) but never excluded, masked or nulled; a policy naming a column the
//! source does not have is refused where a stream or a baseline opens ([`Policies::check`])
//! and by `validate`/`doctor`, never silently ignored — while a column dropped from the
//! source *after* the open just stops being there. The hash key is read from its source
//! and never written: what is recorded is its id. [`record::PolicyRecord`] is what
//! manifests and `_policy.json` say of a table's policy, with a fingerprint that changes
//! whenever the output would.

pub mod apply;
pub mod filter;
pub mod hash;
pub mod record;
pub mod seal;
pub mod text;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::change::{RowChange, TableSchema};
use crate::config::{Config, Engine, TablePolicyConfig};
use crate::error::{Code, Error, Result};
use apply::{Mask, Plan, Transform};
use filter::{Compiled, Expr};
use hash::Hasher;

/// One table's policy, parsed.
#[derive(Debug, Clone)]
struct TableRules {
    exclude: BTreeSet<String>,
    include: Option<BTreeSet<String>>,
    transforms: BTreeMap<String, Transform>,
    /// The filter's text and its parse.
    filter: Option<(String, Expr)>,
}

impl TableRules {
    fn parse(table: &str, config: &TablePolicyConfig) -> Result<TableRules> {
        let mut transforms = BTreeMap::new();
        for name in &config.hash {
            transforms.insert(name.clone(), Transform::Hash);
        }
        for name in &config.nulled {
            transforms.insert(name.clone(), Transform::Null);
        }
        for (name, mask) in &config.mask {
            let mask = match (mask.keep_last, &mask.value) {
                (Some(keep), None) => Mask::KeepLast {
                    keep: keep as usize,
                    fill: mask.fill.clone().unwrap_or_else(|| "****".to_owned()),
                },
                (None, Some(value)) if mask.fill.is_none() => Mask::Value(value.clone()),
                _ => {
                    return Err(policy_invalid(
                        table,
                        format!(
                            "mask.{name} needs exactly one of keep_last (with an optional fill) or value"
                        ),
                    ));
                }
            };
            transforms.insert(name.clone(), Transform::Mask(mask));
        }
        let filter = match &config.filter {
            Some(text) => Some((text.clone(), filter::parse(text)?)),
            None => None,
        };
        Ok(TableRules {
            exclude: config.exclude.iter().cloned().collect(),
            include: config.include.as_ref().map(|i| i.iter().cloned().collect()),
            transforms,
            filter,
        })
    }

    fn excluded(&self, column: &str) -> bool {
        self.exclude.contains(column) || self.include.as_ref().is_some_and(|i| !i.contains(column))
    }

    /// Every column the policy names, with the list that names it.
    fn named(&self) -> Vec<(&str, &'static str)> {
        let mut named: Vec<(&str, &'static str)> = self
            .exclude
            .iter()
            .map(|c| (c.as_str(), "exclude"))
            .collect();
        named.extend(
            self.include
                .iter()
                .flatten()
                .map(|c| (c.as_str(), "include")),
        );
        named.extend(self.transforms.iter().map(|(c, t)| {
            let list = match t {
                Transform::Hash => "hash",
                Transform::Mask(_) => "mask",
                Transform::Null => "null",
                Transform::Keep => "keep",
            };
            (c.as_str(), list)
        }));
        named
    }
}

fn policy_invalid(table: &str, why: impl std::fmt::Display) -> Error {
    Error::new(Code::ConfigPolicy, format!("policy.tables.{table}: {why}"))
        .hint("see docs/privacy.md for the policy keys")
}

/// The policies of a job's tables, with the hash key when any table hashes.
#[derive(Debug, Default)]
pub struct Policies {
    tables: BTreeMap<String, TableRules>,
    hasher: Option<Arc<Hasher>>,
    /// The source evaluates the row filters (PostgreSQL's publication and the baseline's
    /// `WHERE`): sluice does not evaluate them again.
    filters_at_source: bool,
    /// `policy.column_lists`: a PostgreSQL publication leaves excluded columns out.
    column_lists: bool,
    changed: BTreeSet<String>,
}

impl Policies {
    /// No policy: every column, every row, as the source has it.
    pub fn none() -> Policies {
        Policies::default()
    }

    /// The policies `config` declares, with the hash key read from its source when a
    /// table hashes a column.
    pub fn of(config: &Config) -> Result<Policies> {
        let mut tables = BTreeMap::new();
        for (name, table) in &config.policy.tables {
            if !table.is_empty() {
                tables.insert(name.clone(), TableRules::parse(name, table)?);
            }
        }
        let hashes = tables
            .values()
            .any(|t| t.transforms.values().any(|x| *x == Transform::Hash));
        let hasher = if hashes {
            Some(Arc::new(Hasher::of(config)?.ok_or_else(no_key)?))
        } else {
            None
        };
        let filters_at_source = config
            .source_url()
            .ok()
            .and_then(|url| crate::config::engine_for_url(&url).ok())
            .is_some_and(|e| e == Engine::Postgres);
        Ok(Policies {
            tables,
            hasher,
            filters_at_source,
            column_lists: config.policy.column_lists,
            changed: config.policy.changed.clone(),
        })
    }

    /// True when no table has a policy.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// True when a PostgreSQL publication may leave excluded columns out
    /// (`policy.column_lists`).
    pub fn column_lists(&self) -> bool {
        self.column_lists
    }

    /// True when `table` has a policy (its output differs from the source's).
    pub fn touches(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    /// The hash key's id, when a table hashes a column.
    pub fn key_id(&self) -> Option<&str> {
        self.hasher.as_deref().map(Hasher::key_id)
    }

    /// The hasher, when a table hashes a column.
    pub fn hasher(&self) -> Option<&Hasher> {
        self.hasher.as_deref()
    }

    /// The columns of `schema` the policy leaves out: a source reads none of them where
    /// it can (a publication's column list, a baseline `SELECT` that reads NULL in their
    /// place).
    pub fn excluded<'a>(&self, schema: &'a TableSchema) -> Vec<&'a str> {
        let Some(rules) = self.tables.get(&schema.name) else {
            return Vec::new();
        };
        schema
            .columns
            .iter()
            .filter(|c| rules.excluded(&c.name))
            .map(|c| c.name.as_str())
            .collect()
    }

    /// `table`'s row filter checked against `schema`, `None` when it has none.
    pub fn filter(&self, schema: &TableSchema) -> Result<Option<Compiled>> {
        match self
            .tables
            .get(&schema.name)
            .and_then(|r| r.filter.as_ref())
        {
            Some((text, expr)) => filter::compile(expr, text, schema).map(Some),
            None => Ok(None),
        }
    }

    /// The columns `table`'s row filter names.
    pub fn filter_columns(&self, table: &str) -> Vec<String> {
        self.tables
            .get(table)
            .and_then(|r| r.filter.as_ref())
            .map(|(_, e)| e.columns().into_iter().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// True when `table`'s policy differs from the one its current baseline was written
    /// under (`policy.changed`, set at the start of a drain): the source may then be
    /// changed to publish the new one, as the table is re-baselined.
    pub fn changed(&self, table: &str) -> bool {
        self.changed.contains(table)
    }

    /// True when sluice evaluates the row filters on rows (every engine but PostgreSQL,
    /// whose publication and baseline `WHERE` filter at the source).
    pub fn filters_on_rows(&self) -> bool {
        !self.filters_at_source
    }

    /// Refuses a policy that does not fit `schema` (the table's shape in the source's
    /// catalog): a column it names that the table does not have, a key column excluded,
    /// masked or nulled, a list hashed or masked, a filter that does not check.
    pub fn check(&self, schema: &TableSchema) -> Result<()> {
        let Some(rules) = self.tables.get(&schema.name) else {
            return Ok(());
        };
        let table = &schema.name;
        for (name, list) in rules.named() {
            if schema.index_of(name).is_none() {
                return Err(Error::new(
                    Code::ConfigPolicy,
                    format!(
                        "policy.tables.{table}.{list} names {name:?}, which {table} does not have"
                    ),
                )
                .hint(format!(
                    "name {table}'s columns as the source names them: {}",
                    schema
                        .columns
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        self.check_columns(rules, schema)?;
        if let Some((text, expr)) = &rules.filter {
            filter::compile(expr, text, schema)?;
        }
        Ok(())
    }

    /// The refusals that hold for any shape of the table, also mid-stream.
    fn check_columns(&self, rules: &TableRules, schema: &TableSchema) -> Result<()> {
        let table = &schema.name;
        for column in &schema.columns {
            let what = if rules.excluded(&column.name) {
                Some("excluded")
            } else {
                match rules.transforms.get(&column.name) {
                    Some(Transform::Mask(_)) => Some("masked"),
                    Some(Transform::Null) => Some("nulled"),
                    _ => None,
                }
            };
            if column.key
                && let Some(what) = what
            {
                return Err(Error::new(
                    Code::ConfigPolicy,
                    format!("policy.tables.{table}: key column {} would be {what}", column.name),
                )
                .hint(format!(
                    "a key column identifies each row in every replay: hash it instead (policy.tables.{table}.hash: [{}]) — hashed keys stay unique and stable",
                    column.name
                )));
            }
            let transformed = matches!(
                rules.transforms.get(&column.name),
                Some(Transform::Hash | Transform::Mask(_))
            );
            if transformed && matches!(column.ty, crate::change::ColumnType::List(_)) {
                return Err(policy_invalid(
                    table,
                    format!(
                        "{} is an array column: exclude or null it; hash and mask take single values",
                        column.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The plan of a shape of a table met in the stream or a baseline. Columns the policy
    /// names that the shape lacks are passed over (dropped since the open); a key column
    /// excluded, masked or nulled, or a filter that no longer checks, is refused.
    pub fn plan(&self, schema: &Arc<TableSchema>) -> Result<Plan> {
        let Some(rules) = self.tables.get(&schema.name) else {
            return Ok(Plan::new(schema, |_| false, &BTreeMap::new(), None, None));
        };
        self.check_columns(rules, schema)?;
        let filter = match (&rules.filter, self.filters_at_source) {
            (Some((text, expr)), false) => Some(filter::compile(expr, text, schema)?),
            _ => None,
        };
        Ok(Plan::new(
            schema,
            |c| rules.excluded(&c.name),
            &rules.transforms,
            filter,
            self.hasher.clone(),
        ))
    }
}

fn no_key() -> Error {
    Error::new(
        Code::ConfigPolicy,
        "a table hashes a column, but policy.hash_key is not set",
    )
    .hint("set policy.hash_key: { env: NAME } (an environment variable holding at least 32 bytes) or { secret_arn: arn:aws:secretsmanager:… }")
}

/// Applies the policies to the changes of a stream or the rows of a baseline, keeping
/// the plan of each table's last shape.
#[derive(Debug)]
pub struct Applier {
    policies: Arc<Policies>,
    /// Looked up on every change of a policed table (foldhash: the keys are the
    /// config's table names).
    plans: HashMap<String, (Arc<TableSchema>, Arc<Plan>), foldhash::fast::RandomState>,
}

impl Applier {
    pub fn new(policies: Arc<Policies>) -> Applier {
        Applier {
            policies,
            plans: HashMap::default(),
        }
    }

    /// The policies applied.
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// True when `table`'s output differs from the source's.
    pub fn touches(&self, table: &str) -> bool {
        self.policies.touches(table)
    }

    /// The plan of `schema` (a shape of a table as the source decodes it).
    pub fn plan(&mut self, schema: &Arc<TableSchema>) -> Result<Arc<Plan>> {
        if let Some((known, plan)) = self.plans.get_mut(&schema.name) {
            if Arc::ptr_eq(known, schema) {
                return Ok(plan.clone());
            }
            if **known == **schema {
                // The same shape in another allocation: remembered, so the next change
                // of it costs a pointer comparison.
                *known = schema.clone();
                return Ok(plan.clone());
            }
        }
        let plan = Arc::new(self.policies.plan(schema)?);
        self.plans
            .insert(schema.name.clone(), (schema.clone(), plan.clone()));
        Ok(plan)
    }

    /// The shape written for `schema`.
    pub fn schema(&mut self, schema: &Arc<TableSchema>) -> Result<Arc<TableSchema>> {
        if !self.touches(&schema.name) {
            return Ok(schema.clone());
        }
        Ok(self.plan(schema)?.output.clone())
    }

    /// `change` as written, `None` when the row filter leaves it out.
    pub fn change(&mut self, change: RowChange) -> Result<Option<RowChange>> {
        if !self.touches(&change.table.name) {
            return Ok(Some(change));
        }
        let plan = self.plan(&change.table)?;
        Ok(plan.change(change))
    }
}

/// Checks the `policy` block: every table it names is captured, each column in one list
/// at most, `include` with the key and without `exclude`, each mask well formed, every
/// filter parses, a hash key source (exactly one of `env`, `secret_arn`) when a column is
/// hashed. Checks against the source's columns happen where it is read
/// ([`Policies::check`]).
pub fn check_config(config: &Config) -> Result<()> {
    let policy = &config.policy;
    if let Some(source) = &policy.hash_key {
        match (&source.env, &source.secret_arn) {
            (Some(_), None) => {}
            (None, Some(arn)) => {
                if crate::arn::region(arn, "secretsmanager", "secret").is_none() {
                    return Err(Error::new(
                        Code::ConfigSecret,
                        format!(
                            "policy.hash_key.secret_arn {arn:?} is not a Secrets Manager secret ARN"
                        ),
                    )
                    .hint(
                        "write the full ARN: arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME",
                    ));
                }
            }
            _ => {
                return Err(Error::new(
                    Code::ConfigSecret,
                    "policy.hash_key needs exactly one of env and secret_arn",
                )
                .hint("the key is never written in the config: name the environment variable (env) or the Secrets Manager secret (secret_arn) holding it"));
            }
        }
    }
    for (table, rules) in &policy.tables {
        if !config.source.tables.contains(table) {
            return Err(policy_invalid(table, "the table is not in source.tables")
                .hint("key a table's policy by its name exactly as source.tables lists it"));
        }
        if rules.include.is_some() && !rules.exclude.is_empty() {
            return Err(policy_invalid(table, "include and exclude are both set")
                .hint("keep one: include lists the columns captured, exclude the ones left out"));
        }
        if rules.include.as_ref().is_some_and(Vec::is_empty) {
            return Err(policy_invalid(table, "include is empty"));
        }
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        let lists = rules
            .exclude
            .iter()
            .map(|c| (c, "exclude"))
            .chain(rules.hash.iter().map(|c| (c, "hash")))
            .chain(rules.mask.keys().map(|c| (c, "mask")))
            .chain(rules.nulled.iter().map(|c| (c, "null")));
        for (column, list) in lists {
            if let Some(first) = seen.insert(column, list) {
                return Err(policy_invalid(
                    table,
                    format!("column {column:?} is in both {first} and {list}"),
                )
                .hint("give each column one policy"));
            }
        }
        if let Some(include) = &rules.include {
            for (column, list) in &seen {
                if !include.contains(&(*column).to_owned()) {
                    return Err(policy_invalid(
                        table,
                        format!("{list} names {column:?}, which include leaves out"),
                    ));
                }
            }
        }
        let parsed = TableRules::parse(table, rules)?;
        // The columns a keyless table is chunked and told apart by are its key.
        for key in config.baseline.keys.get(table).into_iter().flatten() {
            let what = if parsed.excluded(key) {
                Some("excluded")
            } else {
                match parsed.transforms.get(key) {
                    Some(Transform::Mask(_)) => Some("masked"),
                    Some(Transform::Null) => Some("nulled"),
                    _ => None,
                }
            };
            if let Some(what) = what {
                return Err(Error::new(
                    Code::ConfigPolicy,
                    format!("policy.tables.{table}: {key}, a column of baseline.keys.{table}, would be {what}"),
                )
                .hint(format!("hash it instead (policy.tables.{table}.hash): hashed key columns stay unique and stable")));
            }
        }
        if !rules.hash.is_empty() && policy.hash_key.is_none() {
            return Err(no_key());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
