//! The `policy` block: per table, which columns are left out, hashed, masked or nulled,
//! and which rows are captured at all (docs/privacy.md). Data only: the policy room
//! (`crate::policy::check_config`) checks it, and against the source's columns where a
//! stream or a baseline opens.
//!
//! Guarantees: the hash key is never part of the document — it is named (an environment
//! variable or a Secrets Manager secret) and read by a face into [`PolicyConfig::key`],
//! which is never parsed, printed or serialized.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `policy`: the hash key's source, the hash's output form, and each table's policy.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Where the key of `hash` comes from; required when any table hashes a column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_key: Option<HashKeySource>,
    /// How a hashed value is written: `hex` (64 lower-case hex digits, Utf8) or
    /// `binary` (the 32 bytes).
    #[serde(default)]
    pub hash_output: HashOutput,
    /// PostgreSQL 15+: leave excluded columns out of the publication (a column list), so
    /// their values never leave the server. Off (the default), they are published and
    /// dropped by sluice before anything is written — PostgreSQL refuses `DROP COLUMN` and
    /// `ALTER COLUMN … TYPE` of every column a column list names, so a list would make the
    /// application's migrations fail (docs/privacy.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub column_lists: bool,
    /// Each table's policy, by its name as `source.tables` lists it.
    #[serde(default)]
    pub tables: BTreeMap<String, TablePolicyConfig>,
    /// The key `hash_key.secret_arn` holds, once a face has read it.
    #[serde(skip)]
    pub key: Option<HashKey>,
    /// The tables whose policy differs from the one their current baseline was written
    /// under (read from `<table>/_policy.json` at the start of a drain, never from the
    /// file): they are re-baselined, and the source may be changed to the new policy.
    #[serde(skip)]
    pub changed: std::collections::BTreeSet<String>,
}

impl PolicyConfig {
    /// True when no table has a policy.
    pub fn is_empty(&self) -> bool {
        self.tables.values().all(TablePolicyConfig::is_empty)
    }

    /// The same block carrying `key`, the key its secret holds.
    pub fn with_key(mut self, key: HashKey) -> PolicyConfig {
        self.key = Some(key);
        self
    }
}

/// `policy.hash_key`: exactly one of an environment variable or a Secrets Manager secret.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HashKeySource {
    /// The environment variable holding the key (at least 32 bytes of text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The Secrets Manager secret whose string is the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_arn: Option<String>,
}

/// How a hashed value is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HashOutput {
    /// 64 lower-case hex digits (Utf8).
    #[default]
    Hex,
    /// The 32 bytes of the HMAC (Binary).
    Binary,
}

/// One table's policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TablePolicyConfig {
    /// Columns never read where the source can avoid it, and never written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// The only columns captured (the opposite of `exclude`; the key must be listed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Columns written as the keyed HMAC-SHA-256 of their value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hash: Vec<String>,
    /// Columns written masked, by column.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mask: BTreeMap<String, MaskConfig>,
    /// Columns kept with their type, every value NULL.
    #[serde(default, rename = "null", skip_serializing_if = "Vec::is_empty")]
    pub nulled: Vec<String>,
    /// The rows captured: a predicate over the table's columns (docs/privacy.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

impl TablePolicyConfig {
    /// True when the policy changes nothing.
    pub fn is_empty(&self) -> bool {
        self.exclude.is_empty()
            && self.include.is_none()
            && self.hash.is_empty()
            && self.mask.is_empty()
            && self.nulled.is_empty()
            && self.filter.is_none()
    }
}

/// `mask: { <column>: … }`: keep the last characters, or write a fixed value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MaskConfig {
    /// Keep this many trailing characters after `fill`; a value no longer than this keeps
    /// none of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u32>,
    /// What stands for the characters not kept (default `****`, whatever their number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<String>,
    /// Write this text for every value that is not NULL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The key of `hash`, read from its source: its `Debug` form is redacted, so it cannot
/// reach a log through a `{:?}` of the config.
#[derive(Clone, PartialEq, Eq)]
pub struct HashKey(Vec<u8>);

impl HashKey {
    pub fn new(bytes: Vec<u8>) -> HashKey {
        HashKey(bytes)
    }

    /// The key itself, for the HMAC.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(***)")
    }
}
