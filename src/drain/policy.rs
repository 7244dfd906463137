//! A change of a table's column policy or row filter, found at the start of a drain: the
//! table's parts since its baseline hold the old policy's values, so the table alone is
//! re-baselined under the new one (the other tables go on), or — where one table cannot be
//! re-baselined (SQL Server) — the run is refused with the fix.
//!
//! Guarantees: what a table was last written under is the policy recorded by the newest
//! of its manifests — the last clean run's `_manifest.json`, the last checkpointed run's
//! `_manifests/<run_id>.json`, and its baseline's `snapshot/_manifest.json` (by
//! `written_at`); a table with none of them has nothing written and no change. A change is
//! a different fingerprint ([`crate::policy::record`]): a new key, output form, column
//! list, mask or filter. The tables found are set in `policy.changed` before the stream
//! opens, so a source that publishes the policy (PostgreSQL's publication) is set to the
//! new one in the same run; the re-baseline is asked before any change is read.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::{Config, Engine};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::parts::MANIFEST_FILE;
use crate::policy::Policies;
use crate::policy::record::{self, PolicyRecord};
use crate::state::Checkpoint;

/// What a manifest says of its policy (the rest of it is not read).
#[derive(Deserialize)]
struct Recorded {
    written_at: String,
    #[serde(default)]
    policy: Option<PolicyRecord>,
}

/// A table whose policy changed: what it was written under, and what it is now.
#[derive(Debug, Clone)]
pub struct Changed {
    pub was: Option<PolicyRecord>,
    pub now: Option<PolicyRecord>,
}

impl Changed {
    /// Why the table is re-baselined, for its record and the run summary.
    pub fn reason(&self) -> String {
        let print = |r: &Option<PolicyRecord>| {
            r.as_ref()
                .map_or_else(|| "none".to_owned(), |r| r.fingerprint.clone())
        };
        format!(
            "its column policy or row filter changed (policy {} → {}): the parts since its baseline hold the old policy's values",
            print(&self.was),
            print(&self.now)
        )
    }
}

/// The tables of `config` whose policy differs from the one their newest manifest
/// records.
pub async fn changed(
    config: &Config,
    policies: &Policies,
    destination: &dyn Destination,
    stored: Option<&Checkpoint>,
) -> Result<BTreeMap<String, Changed>> {
    let mut changed = BTreeMap::new();
    for table in &config.source.tables {
        let mut keys = vec![
            format!("{table}/{MANIFEST_FILE}"),
            format!("{table}/snapshot/{MANIFEST_FILE}"),
        ];
        if let Some(checkpoint) = stored {
            keys.push(super::manifests::run_manifest_key(
                table,
                &checkpoint.run_id,
            ));
        }
        let mut newest: Option<Recorded> = None;
        for key in keys {
            let Some(body) = destination.get(&key).await? else {
                continue;
            };
            match serde_json::from_slice::<Recorded>(&body) {
                Ok(recorded) => {
                    if newest
                        .as_ref()
                        .is_none_or(|n| recorded.written_at > n.written_at)
                    {
                        newest = Some(recorded);
                    }
                }
                Err(e) => {
                    tracing::warn!(%key, error = %e, "ignoring an unreadable manifest");
                }
            }
        }
        let Some(newest) = newest else {
            continue;
        };
        let now = record::of(config, policies, table);
        if record::fingerprint(now.as_ref()) != record::fingerprint(newest.policy.as_ref()) {
            changed.insert(
                table.clone(),
                Changed {
                    was: newest.policy,
                    now,
                },
            );
        }
    }
    Ok(changed)
}

/// Refuses a change of policy a per-table re-baseline cannot carry: SQL Server's stream
/// has no per-table re-baseline.
pub fn check_carriable(config: &Config, changed: &BTreeMap<String, Changed>) -> Result<()> {
    let Some((table, change)) = changed.iter().next() else {
        return Ok(());
    };
    if crate::config::engine_for_url(&config.source_url()?)? == Engine::SqlServer {
        return Err(Error::new(
            Code::SourcePolicyChange,
            format!("{table}: {}", change.reason()),
        )
        .hint("a SQL Server job cannot re-baseline one table: put the policy back as it was, or start the job over under the new one (`sluice state clear --config FILE`, a new destination prefix, then a baseline)"));
    }
    Ok(())
}
