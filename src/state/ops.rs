//! Leases and records of the lake operations that run beside the drain (compaction): one
//! per job and operation key (`compact#<table>`), kept apart from the job's own lease, so
//! a drain never waits for one and one never waits for a drain (DESIGN, "After the
//! drain", rule 4).
//!
//! Guarantees, for every store (the state conformance suite runs them against each):
//! * an operation's lease is granted only when there is none, it has expired, or its
//!   holder is provably gone (the rules of the job's lease, [`super::decide::lease`]),
//!   always with a fencing token strictly greater than every token granted before for
//!   the same job and operation; of concurrent requesters exactly one wins;
//! * a renewal, a release and a record write succeed only while the caller's token and
//!   owner are the operation's current ones (`SLUICE_STATE_FENCED` otherwise; a release
//!   of a lease taken over is a no-op);
//! * the record ([`OpRecord::last`], what the last run of the operation did) is written
//!   only under the lease, and the job's lease, checkpoint and records are never touched.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::StateStore;
use crate::error::{Code, Error, Result};

/// The operation key of compacting `table` (`compact#<table>`).
pub fn compaction_op(table: &str) -> String {
    format!("compact#{table}")
}

/// A granted operation lease. Whoever holds the highest token is the operation's only
/// writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpLease {
    pub job: String,
    /// The operation key (`compact#<table>`).
    pub op: String,
    pub owner: String,
    pub token: u64,
    /// Wall-clock expiry, ms since the Unix epoch.
    pub expires_at_ms: i64,
}

/// The answer to an operation lease request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpLeaseOutcome {
    Acquired(OpLease),
    /// Another run of the operation holds an unexpired lease.
    Held {
        owner: String,
        expires_at_ms: i64,
    },
}

/// One operation's stored state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpRecord {
    /// The operation key (`compact#<table>`).
    pub op: String,
    /// Highest fencing token ever granted for the operation; never decreases.
    pub lease_token: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at_ms: Option<i64>,
    /// What the operation's last run recorded (a compaction's outcome), `None` before the
    /// first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<serde_json::Value>,
}

/// The `SLUICE_STATE_FENCED` error of an operation lease that is no longer current.
pub fn fenced(lease: &OpLease, current_token: u64, holder: Option<&str>) -> Error {
    Error::new(
        Code::StateFenced,
        format!(
            "job {} operation {}: lease token {} is no longer current (current token {current_token}, holder {})",
            lease.job,
            lease.op,
            lease.token,
            holder.unwrap_or("none")
        ),
    )
    .hint("another run of the operation took over after this one's lease expired; this run stopped before removing anything it had not recorded, and the next run finishes or redoes the work")
}

/// What [`with_op_lease`] did.
#[derive(Debug)]
pub enum OpLeased<T> {
    Ran(T),
    Held { owner: String, expires_at_ms: i64 },
}

/// Takes the operation lease `op` of `job` for `owner`, runs `work` under it, and gives
/// the lease back whatever `work` returned (a failed release is logged: the lease then
/// expires on its own).
pub async fn with_op_lease<T, F, Fut>(
    store: &dyn StateStore,
    job: &str,
    op: &str,
    owner: &str,
    ttl: Duration,
    work: F,
) -> Result<OpLeased<T>>
where
    F: FnOnce(OpLease) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let lease = match store.acquire_op_lease(job, op, owner, ttl).await? {
        OpLeaseOutcome::Acquired(lease) => lease,
        OpLeaseOutcome::Held {
            owner,
            expires_at_ms,
        } => {
            return Ok(OpLeased::Held {
                owner,
                expires_at_ms,
            });
        }
    };
    tracing::info!(
        job,
        op,
        owner,
        token = lease.token,
        "operation lease acquired"
    );
    let result = work(lease.clone()).await;
    if let Err(e) = store.release_op_lease(&lease).await {
        tracing::warn!(error = %e, op, "could not release the operation lease; it expires on its own");
    }
    result.map(OpLeased::Ran)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_records_have_the_documented_shape() {
        assert_eq!(compaction_op("public.orders"), "compact#public.orders");
        let record = OpRecord {
            op: "compact#t".into(),
            lease_token: 3,
            ..OpRecord::default()
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"op": "compact#t", "lease_token": 3})
        );
        let lease = OpLease {
            job: "j".into(),
            op: "compact#t".into(),
            owner: "o".into(),
            token: 2,
            expires_at_ms: 0,
        };
        let e = fenced(&lease, 3, Some("p"));
        assert_eq!(e.code(), Code::StateFenced);
        assert!(e.message().contains("compact#t"), "{e}");
    }
}
