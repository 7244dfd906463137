//! What is written about a table's policy: the record in its run and baseline manifests
//! and in `<table>/_policy.json` (the policy the table's current baseline epoch was written
//! under), with a fingerprint that changes whenever the output would.
//!
//! Guarantees: the record names the policy — columns per kind, the mask kinds, the filter,
//! the hash format, output form and the key's id — never the key itself nor a value; the
//! fingerprint is the SHA-256 of the record's canonical JSON (lists sorted), so two configs
//! that write the same output have the same fingerprint, and a new key, output form,
//! column list, mask or filter gives another one. A table without a policy has no record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Policies;
use crate::config::{Config, HashOutput, MaskConfig};

/// A table's policy as manifests and `_policy.json` record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// `sha256:` and 32 hex digits: the first half of the SHA-256 of the canonical
    /// record (this field empty).
    pub fingerprint: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hash: Vec<String>,
    /// `hash-hmac-sha256:v1` when a column is hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_output: Option<HashOutput>,
    /// The hash key's id (never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Per masked column: `keep_last=N` or `value`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mask: BTreeMap<String, String>,
    #[serde(default, rename = "null", skip_serializing_if = "Vec::is_empty")]
    pub nulled: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// What the fingerprint covers beyond the record: a mask's fill and fixed value (which
/// the record does not print) — both change the output.
#[derive(Serialize)]
struct Canonical<'a> {
    record: &'a PolicyRecord,
    masks: BTreeMap<&'a str, &'a MaskConfig>,
}

/// The record of `table`'s policy in `config`, `None` when it has none. `policies` gives
/// the hash key's id (from the key itself).
pub fn of(config: &Config, policies: &Policies, table: &str) -> Option<PolicyRecord> {
    let rules = config.policy.tables.get(table).filter(|t| !t.is_empty())?;
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v.dedup();
        v
    };
    let hashes = !rules.hash.is_empty();
    let mut record = PolicyRecord {
        fingerprint: String::new(),
        exclude: sorted(&rules.exclude),
        include: rules.include.as_deref().map(sorted),
        hash: sorted(&rules.hash),
        hash_format: hashes.then(|| super::hash::FORMAT.to_owned()),
        hash_output: hashes.then_some(config.policy.hash_output),
        key_id: if hashes {
            policies.key_id().map(str::to_owned)
        } else {
            None
        },
        mask: rules
            .mask
            .iter()
            .map(|(c, m)| {
                let kind = match m.keep_last {
                    Some(n) => format!("keep_last={n}"),
                    None => "value".to_owned(),
                };
                (c.clone(), kind)
            })
            .collect(),
        nulled: sorted(&rules.nulled),
        filter: rules.filter.clone(),
    };
    let canonical = Canonical {
        record: &record,
        masks: rules.mask.iter().map(|(c, m)| (c.as_str(), m)).collect(),
    };
    let json = serde_json::to_vec(&canonical).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &json);
    record.fingerprint = format!("sha256:{}", super::text::hex(&digest.as_ref()[..16]));
    Some(record)
}

/// The fingerprint of a record, `None` for a table without a policy: what a change of
/// policy is detected by.
pub fn fingerprint(record: Option<&PolicyRecord>) -> Option<&str> {
    record.map(|r| r.fingerprint.as_str())
}
