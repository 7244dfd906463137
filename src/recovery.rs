//! Recovery commands: `sluice state clear`, `sluice lease release`, `sluice claims
//! list | release` (docs/operations.md, Recovery).
//!
//! Guarantees: each command either does what it says and returns a JSON account of what
//! it did, or refuses (`SLUICE_RECOVERY_REFUSED`, `SLUICE_DESTINATION_EXISTS`) having
//! changed nothing. A lease is taken from its holder only when that holder is provably
//! gone ([`crate::state::holder`]: a dead pid on this host), when it has expired, or with
//! `--force` (and a warning). `state clear` clears the job's records under the job's own
//! lease (so no run can start meanwhile) and refuses while the tables' `snapshot/`
//! output exists: a re-baseline must not meet the old baseline's parts.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends::Backends;
use crate::config::{Config, Initial};
use crate::error::{Code, Error, Result};
use crate::state::holder::{self, Liveness};
use crate::state::{LeaseOutcome, StateStore, now_ms};

/// How long `state clear` holds the job's lease while it clears (released at the end).
const CLEAR_LEASE: Duration = Duration::from_secs(60);

/// Why a held lease may be taken from its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Expired,
    DeadProcess,
    Forced,
}

impl Reason {
    fn text(self) -> &'static str {
        match self {
            Reason::Expired => "the lease had expired",
            Reason::DeadProcess => "held by a dead process on this host",
            Reason::Forced => "--force: the holder was not provably gone",
        }
    }
}

/// The lease as `state show` prints it: `(owner, expires_at_ms)` when one is recorded.
async fn current_lease(store: &dyn StateStore, job: &str) -> Result<Option<(String, i64)>> {
    let shown = store.show(job).await?;
    Ok(
        match (
            shown["lease_owner"].as_str(),
            shown["lease_expires_at_ms"].as_i64(),
        ) {
            (Some(owner), Some(expires)) => Some((owner.to_owned(), expires)),
            _ => None,
        },
    )
}

/// Decides whether a recorded lease may be taken; the refusal names holder and expiry.
fn may_take(
    job: &str,
    owner: &str,
    expires_at_ms: i64,
    now: i64,
    force: bool,
    command: &str,
) -> Result<Reason> {
    if expires_at_ms <= now {
        return Ok(Reason::Expired);
    }
    let liveness = holder::liveness(owner);
    match liveness {
        Liveness::Dead => Ok(Reason::DeadProcess),
        _ if force => Ok(Reason::Forced),
        _ => {
            let why = if liveness == Liveness::Alive {
                "its process is alive on this host (a run is in progress)"
            } else {
                "it runs on another host (or does not record where), so it is not provably gone"
            };
            Err(Error::new(
                Code::RecoveryRefused,
                format!(
                    "job {job}: the lease is held by {owner} until {} ({}s from now); {why}",
                    rfc3339(expires_at_ms),
                    (expires_at_ms - now) / 1000
                ),
            )
            .hint(format!(
                "wait for that run to end or its lease to expire, then run `{command}` again; only if you know the holder is gone, add --force"
            )))
        }
    }
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// `sluice lease release`: removes the job's lease when its holder is provably gone,
/// expired, or with `force`.
pub async fn release_lease(config: &Config, store: &dyn StateStore, force: bool) -> Result<Value> {
    let job = &config.job;
    let Some((owner, expires)) = current_lease(store, job).await? else {
        return Ok(json!({ "status": "free", "job": job, "state": store.describe() }));
    };
    let reason = may_take(
        job,
        &owner,
        expires,
        now_ms(),
        force,
        "sluice lease release --config FILE",
    )?;
    if reason == Reason::Forced {
        tracing::warn!(job = %job, holder = %owner, "releasing a lease whose holder is not provably gone (--force); if it still runs, it is fenced at its next checkpoint write");
    }
    if !store.break_lease(job, &owner).await? {
        return Err(Error::new(
            Code::RecoveryRefused,
            format!("job {job}: the lease changed hands while it was being released (it was held by {owner})"),
        )
        .hint("another run took the lease meanwhile; look with `sluice doctor --config FILE` and try again if needed"));
    }
    Ok(json!({
        "status": "released",
        "job": job,
        "state": store.describe(),
        "holder": owner,
        "expires_at_ms": expires,
        "reason": reason.text(),
        "forced": reason == Reason::Forced,
    }))
}

/// `sluice state clear`: refuses while snapshot output exists or a live lease is held;
/// otherwise clears checkpoint, lease, baseline and chunk records and says what to do next.
pub async fn clear_state(config: &Config, backends: &Backends, force: bool) -> Result<Value> {
    let job = &config.job;
    let store = backends.state.as_ref();
    refuse_old_snapshots(config, backends).await?;
    let mut taken = Value::Null;
    if let Some((owner, expires)) = current_lease(store, job).await? {
        let reason = may_take(
            job,
            &owner,
            expires,
            now_ms(),
            force,
            "sluice state clear --config FILE",
        )?;
        if reason == Reason::Forced {
            tracing::warn!(job = %job, holder = %owner, "clearing state under a lease whose holder is not provably gone (--force)");
        }
        if reason != Reason::Expired {
            store.break_lease(job, &owner).await?;
        }
        taken = json!({ "holder": owner, "expires_at_ms": expires, "reason": reason.text() });
    }
    let run_id = crate::run_id::new_run_id();
    let owner = holder::owner(&run_id, Some("state-clear"));
    let lease = match store.acquire_lease(job, &owner, CLEAR_LEASE).await? {
        LeaseOutcome::Acquired(lease) => lease,
        LeaseOutcome::Held {
            owner,
            expires_at_ms,
        } => {
            return Err(Error::new(
                Code::RecoveryRefused,
                format!(
                    "job {job}: a run took the lease ({owner}, until {}) while the state was being cleared; nothing was cleared",
                    rfc3339(expires_at_ms)
                ),
            )
            .hint("stop the job's schedule first, then run `sluice state clear --config FILE` again"));
        }
    };
    let cleared = store.clear_job(&lease).await?;
    tracing::info!(job = %job, checkpoint = ?cleared.checkpoint.as_ref().map(|c| &c.position),
        snapshots = cleared.snapshots.len(), chunks = cleared.chunks, "job state cleared");
    Ok(json!({
        "status": "cleared",
        "job": job,
        "state": store.describe(),
        "cleared": cleared,
        "lease_taken_from": taken,
        "kept": "the fencing token, the run records, and the resource claims (`sluice claims list`)",
        "next": next_steps(config),
    }))
}

/// Refuses while any table's `snapshot/` prefix holds objects, naming each and how to
/// move it aside (parts are never overwritten, and a new baseline must not adopt them).
async fn refuse_old_snapshots(config: &Config, backends: &Backends) -> Result<()> {
    let mut found = Vec::new();
    for table in &config.source.tables {
        let prefix = format!("{table}/snapshot/");
        let objects = backends.destination.list(&prefix).await?;
        if !objects.is_empty() {
            found.push((prefix, objects.len()));
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let listed = found
        .iter()
        .map(|(prefix, n)| format!("{prefix} ({n} objects)"))
        .collect::<Vec<_>>()
        .join(", ");
    let moves = found
        .iter()
        .map(|(prefix, _)| {
            let table = prefix.trim_end_matches("/snapshot/");
            format!("{prefix} → {table}/_superseded/{stamp}/snapshot/")
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(Error::new(
        Code::DestinationExists,
        format!(
            "job {}: the earlier baseline's output exists in {}: {listed}; nothing was cleared",
            config.job,
            backends.destination.describe()
        ),
    )
    .hint(format!(
        "a new baseline must not meet the old baseline's parts: move each prefix aside first ({moves}; locally `mv`, on S3 `aws s3 mv --recursive`), then run `sluice state clear --config FILE` again"
    )))
}

/// What the operator does after a clear, for the source and the output.
fn next_steps(config: &Config) -> Value {
    let source = if let Some(pg) = &config.source.postgres {
        format!(
            "drop the replication slot so the next run creates it at a new anchor: SELECT pg_drop_replication_slot('{}'); (when it is active, stop whatever reads it first)",
            pg.slot
        )
    } else if config.source.sqlserver.is_some() {
        "nothing to drop: the next run starts from the capture instances' current maximum LSN"
            .to_owned()
    } else {
        "nothing to drop: the next run starts at the binlog's current end (its replica server_id stays claimed by this job)".to_owned()
    };
    let rebaseline = if config.initial == Initial::Snapshot {
        "the next `sluice drain` (or `sluice baseline`) anchors anew and reads every table again"
    } else {
        "initial is not `snapshot`: the next run starts at the log's current end and changes in between are not captured — set `initial: snapshot` (or run `sluice baseline`) to re-read the tables"
    };
    json!({
        "source": source,
        "baseline": rebaseline,
        "output": "earlier change parts stay where they are (they belong to the old stream); the new baseline writes a fresh snapshot/ prefix",
    })
}

/// `sluice claims list`: every claim in the store.
pub async fn list_claims(store: &dyn StateStore) -> Result<Value> {
    let claims = store.list_claims().await?;
    Ok(json!({ "state": store.describe(), "claims": claims }))
}

/// `sluice claims release <resource>`: removes this job's claim, or with `force` another
/// job's.
pub async fn release_claim(
    config: &Config,
    store: &dyn StateStore,
    resource: &str,
    force: bool,
) -> Result<Value> {
    let job = &config.job;
    let claims = store.list_claims().await?;
    let Some(claim) = claims.iter().find(|c| c.resource == resource) else {
        return Err(Error::new(
            Code::RecoveryRefused,
            format!("no claim on {resource} in {}", store.describe()),
        )
        .hint(
            "`sluice claims list --config FILE` prints every claim with its exact resource name",
        ));
    };
    if claim.job != *job && !force {
        return Err(Error::new(
            Code::RecoveryRefused,
            format!(
                "{resource} is claimed by job {:?}, not by job {job:?}",
                claim.job
            ),
        )
        .hint(format!(
            "release it with job {}'s own config, or, if that job is gone for good, add --force",
            claim.job
        )));
    }
    if claim.job != *job {
        tracing::warn!(%resource, holder = %claim.job, "releasing another job's claim (--force); if that job still runs, two jobs may now read one resource");
    }
    if !store.release_claim(resource, &claim.job).await? {
        return Err(Error::new(
            Code::RecoveryRefused,
            format!(
                "the claim on {resource} changed while it was being released (it was job {:?}'s)",
                claim.job
            ),
        )
        .hint("`sluice claims list --config FILE` shows the claim as it is now"));
    }
    Ok(json!({
        "status": "released",
        "resource": resource,
        "job": claim.job,
        "claimed_at_ms": claim.claimed_at_ms,
        "forced": claim.job != *job,
        "state": store.describe(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_lease_is_taken_only_when_provably_gone_or_forced() {
        let now = 1_000_000;
        let me = holder::owner("r", None);
        let err = may_take("j", &me, now + 5_000, now, false, "c").unwrap_err();
        assert_eq!(err.code(), Code::RecoveryRefused);
        assert!(
            err.message().contains(&me) && err.message().contains("5s from now"),
            "{err}"
        );
        assert_eq!(
            may_take("j", &me, now + 5_000, now, true, "c").unwrap(),
            Reason::Forced
        );
        assert_eq!(
            may_take("j", &me, now - 1, now, false, "c").unwrap(),
            Reason::Expired
        );
        let elsewhere = "r/some-other-host/pid-1";
        assert!(may_take("j", elsewhere, now + 5_000, now, false, "c").is_err());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let dead = format!("r/{}/pid-{pid}", holder::this_host());
        assert_eq!(
            may_take("j", &dead, now + 5_000, now, false, "c").unwrap(),
            Reason::DeadProcess
        );
    }
}
