//! The `policy` rows of `sluice doctor`: the hash key readable from its source, and each
//! table's policy checked against the columns the source's catalog has — by the same
//! [`Policies::check`] the stream and the baseline refuse with.

use super::Check;
use crate::change::TableSchema;
use crate::config::Config;
use crate::policy::Policies;

/// The job's policies, and the "policy" row: the hash key read (its id), or why it cannot
/// be (the policies are then empty, so the other checks still run). No row for a job
/// without a policy.
pub fn key_check(config: &Config) -> (Policies, Option<Check>) {
    if config.policy.is_empty() {
        return (Policies::none(), None);
    }
    match Policies::of(config) {
        Ok(policies) => {
            let detail = match policies.key_id() {
                Some(id) => format!("hash key {id} read from its source"),
                None => "no column is hashed".to_owned(),
            };
            (policies, Some(Check::ok("policy", detail)))
        }
        Err(e) => (Policies::none(), Some(Check::from_error("policy", &e))),
    }
}

/// The "table T policy" row: what the policy does to the table, or why it does not fit
/// the table's columns. `None` for a table without a policy.
pub fn table_check(config: &Config, policies: &Policies, schema: &TableSchema) -> Option<Check> {
    let record = crate::policy::record::of(config, policies, &schema.name)?;
    let name = format!("table {} policy", schema.name);
    if let Err(e) = policies.check(schema) {
        return Some(Check::from_error(name, &e));
    }
    let mut parts = Vec::new();
    if !record.exclude.is_empty() {
        parts.push(format!("excludes {}", record.exclude.join(", ")));
    }
    if let Some(include) = &record.include {
        parts.push(format!("includes only {}", include.join(", ")));
    }
    if !record.hash.is_empty() {
        parts.push(format!("hashes {}", record.hash.join(", ")));
    }
    if !record.mask.is_empty() {
        let masks: Vec<String> = record.mask.keys().cloned().collect();
        parts.push(format!("masks {}", masks.join(", ")));
    }
    if !record.nulled.is_empty() {
        parts.push(format!("nulls {}", record.nulled.join(", ")));
    }
    if let Some(filter) = &record.filter {
        parts.push(format!("captures rows where {filter}"));
    }
    Some(Check::ok(name, parts.join("; ")))
}
