//! Durable stream state: the single-writer lease, the checkpoint, baseline flags and run
//! records, behind one trait with interchangeable backends.
//!
//! Contract for every backend (one conformance suite in `tests/` runs against each):
//! * the lease is granted only when there is none, it has expired, or its holder is
//!   provably gone (`holder`: same host, pid dead), and every grant carries a fencing
//!   token strictly greater than any token granted before for the job;
//! * writes are idempotent under retry: a grant or a checkpoint advance whose answer was
//!   lost and that is sent again recognises its own stored result (`decide`);
//! * a checkpoint advance succeeds only while the caller's token is still the job's
//!   current token **and** the stored checkpoint version is the one the caller read —
//!   otherwise `SLUICE_STATE_FENCED` and nothing is written;
//! * the lease and the checkpoint live in one record, so both conditions are checked in
//!   one atomic write, and a successful advance also extends the lease;
//! * lake operations (compaction) have leases and records of their own per job and
//!   operation ([`ops`]), apart from the job's: neither ever waits for the other.

pub mod decide;
pub mod dynamodb;
pub mod holder;
pub mod local;
pub mod ops;
pub mod rebaseline;
pub mod text_form;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::config::{Config, StateConfig};
use crate::error::{Error, Result};
use crate::position::Position;
use crate::summary::RunSummary;

/// A granted lease. Whoever holds the highest token is the only writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub job: String,
    pub owner: String,
    pub token: u64,
    /// Wall-clock expiry, ms since the Unix epoch.
    pub expires_at_ms: i64,
}

/// The answer to a lease request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseOutcome {
    Acquired(Lease),
    /// Someone else holds an unexpired lease.
    Held {
        owner: String,
        expires_at_ms: i64,
    },
}

/// The stored checkpoint: where the next run resumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Tagged position text (`pg:00000001/6A2B3C40`).
    pub position: String,
    /// Identity of the source the position belongs to.
    pub source_identity: String,
    /// Incremented by every advance; advances are conditional on it.
    pub version: u64,
    pub run_id: String,
    pub updated_at_ms: i64,
}

/// One fenced checkpoint advance: what the conditional write checks and what it stores.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointWrite<'a> {
    /// The writer's lease; the write succeeds only while its token is the job's current one.
    pub lease: &'a Lease,
    /// How long a successful write extends the lease.
    pub ttl: Duration,
    /// The stored checkpoint version the writer read (0 = none yet).
    pub expected_version: u64,
    /// Where the checkpoint moves.
    pub position: &'a Position,
    /// Identity of the source `position` belongs to.
    pub source_identity: &'a str,
    pub run_id: &'a str,
}

impl CheckpointWrite<'_> {
    /// The record a successful write stores, written at `now_ms`.
    pub fn record(&self, now_ms: i64) -> Checkpoint {
        Checkpoint {
            position: self.position.to_string(),
            source_identity: self.source_identity.to_owned(),
            version: self.expected_version + 1,
            run_id: self.run_id.to_owned(),
            updated_at_ms: now_ms,
        }
    }
}

/// Baseline progress of one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineStatus {
    // Declared in lifecycle order: `Ord` is the forward direction.
    Anchored,
    Running,
    Done,
    /// A re-baseline of the table was asked for (by `sluice baseline --table`, or by a
    /// drain that met a change it cannot carry in place): drains skip the table's changes
    /// until a new anchoring replaces the record ([`StateStore::replace_snapshot`]).
    /// Declared last, so a late write of an earlier anchoring's `running`/`done` never
    /// overwrites it.
    Wanted,
}

/// The `snapshot#<table>` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineRecord {
    pub table: String,
    pub status: BaselineStatus,
    /// Tagged anchor position.
    pub anchor: String,
    pub run_id: String,
    pub updated_at_ms: i64,
    /// Why the table is (being) re-baselined; `None` for a first baseline. `wanted`
    /// records carry the position of the change that asked for it in `anchor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The table's columns captured in their text form because a value did not fit their
    /// typed form. Every later record of the table keeps them ([`BaselineRecord::next`]):
    /// the stream and every baseline read these columns as text from then on.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub text_columns: std::collections::BTreeSet<String>,
}

impl BaselineRecord {
    /// A new record of `table`, keeping what `previous` (the table's record it replaces)
    /// says must outlive a re-baseline: its text-form columns.
    pub fn next(
        table: &str,
        status: BaselineStatus,
        anchor: String,
        run_id: String,
        reason: Option<String>,
        previous: Option<&BaselineRecord>,
    ) -> BaselineRecord {
        BaselineRecord {
            table: table.to_owned(),
            status,
            anchor,
            run_id,
            updated_at_ms: now_ms(),
            reason,
            text_columns: previous.map(|p| p.text_columns.clone()).unwrap_or_default(),
        }
    }
}

/// The `chunk#<table>#<n>` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRecord {
    pub table: String,
    pub chunk: u32,
    pub rows: u64,
    /// The chunk's part (empty when the chunk had no rows).
    pub part_key: String,
    #[serde(default)]
    pub bytes: u64,
    /// The part's cell checksum (`mix64:…`, `fnv1a64:…` from earlier versions), empty
    /// when unknown.
    #[serde(default)]
    pub checksum: String,
    pub updated_at_ms: i64,
}

/// The `run#<run_id>` record (kept for a limited time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    /// The run summary as printed on stdout.
    pub summary: serde_json::Value,
    /// When the record may be dropped, s since the Unix epoch (DynamoDB TTL).
    pub expires_at_s: i64,
}

/// How long run records are kept (DynamoDB TTL).
pub const RUN_RECORD_TTL_S: i64 = 14 * 24 * 3600;

impl RunRecord {
    /// The record of a run that ended with `summary` (what it printed), kept for
    /// [`RUN_RECORD_TTL_S`] from now.
    pub fn of(summary: &RunSummary) -> RunRecord {
        RunRecord {
            run_id: summary.run_id.clone(),
            summary: serde_json::to_value(summary).unwrap_or_default(),
            expires_at_s: Self::expiry(),
        }
    }

    /// The record of run `run_id` of `job` that failed with `error` after `duration_ms`:
    /// its status `failed`, the error's code and message.
    pub fn failed(job: &str, run_id: &str, error: &Error, duration_ms: u64) -> RunRecord {
        RunRecord {
            run_id: run_id.to_owned(),
            summary: serde_json::json!({
                "status": "failed",
                "job": job,
                "run_id": run_id,
                "code": error.code().as_str(),
                "error": error.to_string(),
                "duration_ms": duration_ms,
            }),
            expires_at_s: Self::expiry(),
        }
    }

    fn expiry() -> i64 {
        chrono::Utc::now().timestamp() + RUN_RECORD_TTL_S
    }
}

/// The answer to a resource claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The resource is now (or already was) claimed by the asking job.
    Ours,
    /// Another job holds the claim.
    HeldBy(String),
    /// This store cannot record claims; the caller proceeds unprotected.
    Unsupported,
}

/// One stored claim: `resource` (`pg:<host>:<port>/<db>/slot/<name>`) belongs to `job`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub resource: String,
    pub job: String,
    pub claimed_at_ms: i64,
}

/// What [`StateStore::clear_job`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Cleared {
    /// The checkpoint that was stored.
    pub checkpoint: Option<Checkpoint>,
    /// Tables whose baseline record was removed.
    pub snapshots: Vec<String>,
    /// How many chunk records were removed.
    pub chunks: usize,
}

/// Lease, checkpoint and progress records of jobs.
#[async_trait]
pub trait StateStore: Send + Sync {
    /// A human-readable, secret-free description of the store.
    fn describe(&self) -> String;

    /// Creates the store's backing resources when missing (`sluice state init`);
    /// idempotent. Returns a JSON description of what exists now.
    async fn init(&self) -> Result<serde_json::Value> {
        Ok(serde_json::json!({ "state": self.describe(), "created": false }))
    }

    /// Grants the lease when it is free or expired, or its holder is provably gone (same
    /// host, pid dead: taken over in one write conditioned on that holder), always with a
    /// new, higher fencing token. A lease the store already holds for `owner` (a retried
    /// grant whose answer was lost) is returned as acquired with its stored token.
    async fn acquire_lease(&self, job: &str, owner: &str, ttl: Duration) -> Result<LeaseOutcome>;

    /// Extends our lease; `SLUICE_STATE_FENCED` when it is no longer ours.
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease>;

    /// Gives the lease up if it is still ours; a lease already taken over is left alone.
    async fn release_lease(&self, lease: &Lease) -> Result<()>;

    /// The job's checkpoint, `None` before the first advance.
    async fn load_checkpoint(&self, job: &str) -> Result<Option<Checkpoint>>;

    /// Moves the checkpoint to `write.position`, conditional on `write.lease` still
    /// holding the current token and on the stored version being `write.expected_version`
    /// (0 = none yet). Extends the lease by `write.ttl`. Returns the stored checkpoint and
    /// the renewed lease. A write refused by its condition because it had already been
    /// stored (a retry whose first answer was lost: same lease, version, position, source
    /// and run) is a success. Only `crate::commit` calls it.
    async fn advance_checkpoint(&self, write: &CheckpointWrite<'_>) -> Result<(Checkpoint, Lease)>;

    async fn load_baseline(&self, job: &str, table: &str) -> Result<Option<BaselineRecord>>;

    /// Writes a baseline record. Not fenced by the lease: baseline workers run in
    /// parallel with each other and with drains; the record only moves forward
    /// (`anchored → running → done`), an attempt to move it back is ignored.
    async fn put_baseline(&self, job: &str, record: &BaselineRecord) -> Result<()>;

    /// Removes a table's baseline record and all its chunk records (`baseline --reset`).
    async fn clear_baseline(&self, job: &str, table: &str) -> Result<()>;

    /// Starts a table's baseline over: removes its chunk records, then writes `record`
    /// whatever the stored one says (the last write, so a crash in between leaves the
    /// previous record, and a retry does the same again). Used to ask for a re-baseline
    /// (`wanted`) and to anchor it anew.
    async fn replace_snapshot(&self, job: &str, record: &BaselineRecord) -> Result<()>;

    async fn load_chunk(&self, job: &str, table: &str, chunk: u32) -> Result<Option<ChunkRecord>>;

    /// Records a finished baseline chunk unless it is already recorded (the first
    /// record wins); returns the stored record.
    async fn put_chunk(&self, job: &str, record: &ChunkRecord) -> Result<ChunkRecord>;

    /// Stores a run record.
    async fn put_run(&self, job: &str, record: &RunRecord) -> Result<()>;

    /// Everything stored for the job, as JSON, for `sluice state show`.
    async fn show(&self, job: &str) -> Result<serde_json::Value>;

    /// Every job with a record in the store (it ever took a lease, or a run of it
    /// recorded itself — a run that failed before its lease does), sorted by name;
    /// claims are not jobs.
    async fn list_jobs(&self) -> Result<Vec<String>>;

    /// The job's run records whose run id sorts at or after `since` (run ids sort by
    /// start time, so `since` may be a bare `YYYYMMDDTHHMMSS` prefix), oldest first.
    /// Only the records the store still keeps (local: the newest 50; DynamoDB: 14 days).
    async fn runs_since(&self, job: &str, since: &str) -> Result<Vec<RunRecord>>;

    /// How many run records per job the store keeps (the newest), `None` when it keeps
    /// them by age instead (DynamoDB: 14 days by TTL).
    fn runs_kept(&self) -> Option<usize> {
        None
    }

    /// Claims a source resource for `job`, store-wide (not per job): created when
    /// absent, `Ours` when already ours, `HeldBy(other)` when another job holds it. One
    /// conditional write; claims are never taken over silently.
    async fn claim(&self, resource: &str, job: &str) -> Result<ClaimOutcome> {
        let _ = (resource, job);
        Ok(ClaimOutcome::Unsupported)
    }

    /// Every claim in the store, sorted by resource.
    async fn list_claims(&self) -> Result<Vec<Claim>> {
        Ok(Vec::new())
    }

    /// Removes the claim on `resource` when `job` holds it (one conditional write);
    /// `false` when it is absent or held by another job, which is left alone.
    async fn release_claim(&self, resource: &str, job: &str) -> Result<bool>;

    /// Removes `job`'s lease when `owner` holds it, expired or not, for an operator who
    /// knows that holder is gone (`sluice lease release`); the fencing token is kept, so
    /// the old holder stays fenced. `false` when `owner` no longer holds it (left alone).
    async fn break_lease(&self, job: &str, owner: &str) -> Result<bool>;

    /// Clears the job's stream state under `lease` (`sluice state clear`): every baseline
    /// and chunk record, then the checkpoint and the lease itself, the last in one write
    /// fenced by `lease` (`SLUICE_STATE_FENCED` when it is no longer current). The
    /// fencing token and the run records are kept; claims are not touched.
    async fn clear_job(&self, lease: &Lease) -> Result<Cleared>;

    /// Grants the lease of operation `op` (`compact#<table>`) of `job` when it is free,
    /// expired, or its holder is provably gone, with a token above every earlier one of
    /// that operation; separate from the job's lease ([`ops`]).
    async fn acquire_op_lease(
        &self,
        job: &str,
        op: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<ops::OpLeaseOutcome>;

    /// Extends an operation lease; `SLUICE_STATE_FENCED` when it is no longer ours.
    async fn renew_op_lease(&self, lease: &ops::OpLease, ttl: Duration) -> Result<ops::OpLease>;

    /// Gives an operation lease up if it is still ours; one taken over is left alone.
    async fn release_op_lease(&self, lease: &ops::OpLease) -> Result<()>;

    /// Stores what the operation's run did as its record's `last`, fenced by `lease`
    /// (`SLUICE_STATE_FENCED` when it is no longer current).
    async fn record_op(&self, lease: &ops::OpLease, last: &serde_json::Value) -> Result<()>;

    /// Every operation record of `job`, sorted by operation key.
    async fn list_ops(&self, job: &str) -> Result<Vec<ops::OpRecord>>;
}

/// What [`with_lease`] did.
#[derive(Debug)]
pub enum Leased<T> {
    /// The lease was ours: the work ran, and the lease was given back.
    Ran(T),
    /// Another run holds an unexpired lease; nothing ran.
    Held { owner: String, expires_at_ms: i64 },
}

/// Takes `job`'s lease for `owner`, runs `work` under it, and gives the lease back
/// whatever `work` returned. A release that fails is logged, not returned: the lease
/// then expires on its own. A process that dies inside `work` releases nothing: the next
/// run on the same host takes its lease over at once (its pid is dead), elsewhere it
/// expires; fencing keeps the dead run from ever writing. The one lease path of drains
/// and baselines.
pub async fn with_lease<T, F, Fut>(
    store: &dyn StateStore,
    job: &str,
    owner: &str,
    ttl: Duration,
    work: F,
) -> Result<Leased<T>>
where
    F: FnOnce(Lease) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let lease = match store.acquire_lease(job, owner, ttl).await? {
        LeaseOutcome::Acquired(lease) => lease,
        LeaseOutcome::Held {
            owner,
            expires_at_ms,
        } => {
            return Ok(Leased::Held {
                owner,
                expires_at_ms,
            });
        }
    };
    tracing::info!(job, owner, token = lease.token, "lease acquired");
    // The release needs only the lease's token and owner, which renewals keep.
    let result = work(lease.clone()).await;
    if let Err(e) = store.release_lease(&lease).await {
        tracing::warn!(error = %e, "could not release the lease; it expires on its own");
    }
    result.map(Leased::Ran)
}

/// Logs the takeover of `job`'s lease from a provably gone `holder` (the same line for
/// every store).
fn log_takeover(job: &str, holder: &str, owner: &str) {
    tracing::warn!(
        job,
        holder,
        owner,
        "lease holder is provably gone (its pid is dead on this host); taking the lease over with a new fencing token"
    );
}

/// Milliseconds since the Unix epoch, from the wall clock (leases are wall-clock based
/// because they are shared between machines).
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Checks the `state` block: a DynamoDB endpoint override.
pub fn check_config(config: &Config) -> Result<()> {
    if let StateConfig::Dynamodb {
        endpoint_url: Some(url),
        ..
    } = &config.state
    {
        crate::config::check_endpoint("state.endpoint_url", url)?;
    }
    Ok(())
}

/// Builds the state store the config names.
pub async fn open(config: &Config) -> Result<Box<dyn StateStore>> {
    open_store(&config.state).await
}

/// Builds the state store a `state` block names.
pub async fn open_store(state: &StateConfig) -> Result<Box<dyn StateStore>> {
    match state {
        StateConfig::Local { path } => Ok(Box::new(local::LocalStateStore::new(path)?)),
        StateConfig::Dynamodb {
            table,
            endpoint_url,
            region,
        } => {
            let sdk = crate::aws::shared_config(endpoint_url.as_deref(), region.as_deref()).await?;
            Ok(Box::new(dynamodb::DynamoStateStore::new(&sdk, table)?))
        }
    }
}
