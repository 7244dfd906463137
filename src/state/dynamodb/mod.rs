//! The DynamoDB state store: one table shared by any number of jobs.
//!
//! # Item layout (a public contract; docs/state.md, Layout)
//!
//! Partition key `pk` (S) = the job name; sort key `sk` (S):
//!
//! | `sk` | attributes |
//! | --- | --- |
//! | `job` | `format_version` N (1); `lease_token` N — highest fencing token ever granted, never decreases, survives release; `lease_owner` S and `lease_expires_at_ms` N — present while a lease is held; `checkpoint` M `{position S, source_identity S, version N, run_id S, updated_at_ms N}` — present after the first advance |
//! | `snapshot#<table>` | `table` S, `status` S (`anchored`/`running`/`done`), `anchor` S, `run_id` S, `updated_at_ms` N |
//! | `chunk#<table>#<n>` (n zero-padded to 6) | `table` S, `chunk` N, `rows` N, `part_key` S, `updated_at_ms` N |
//! | `run#<run_id>` | `run_id` S, `summary` S (the run summary JSON), `expires_at` N — the table's TTL attribute, s since the epoch |
//! | `op#<operation>` (`op#compact#<table>`) | `op` S; `lease_token` N, `lease_owner` S, `lease_expires_at_ms` N — the operation's own lease ([`super::ops`]); `last` S — the JSON record of its last run |
//!
//! The field names and meanings are those of the local store (`state/local.rs`); `state
//! show` prints the same document shape for both.
//!
//! # Guarantees
//! * Lease grant: one `UpdateItem` on the `job` item conditioned on "no holder, or the
//!   holder's expiry has passed", which also `ADD`s 1 to `lease_token` — so every grant
//!   carries a token above every earlier one, and of concurrent requesters exactly one
//!   wins. When the condition fails, the item is read and decided (`state::decide`): a
//!   stored lease of our own owner is ours (a retried grant whose answer was lost); a
//!   holder that is provably gone is taken over by the same update conditioned on that
//!   holder **and** its token (so a new token again; of concurrent takers one wins).
//! * A checkpoint advance refused by its condition is read back: when the stored
//!   checkpoint is exactly ours under our still current token, the write had happened
//!   (its answer was lost) and counts as done.
//! * Checkpoint advance: one `UpdateItem` on the same item conditioned on our token and
//!   owner **and** the stored checkpoint version being the one we read (or no checkpoint
//!   for version 0) — fenced and monotonic in one atomic write; it also extends the lease.
//!   `ConditionalCheckFailed` is `SLUICE_STATE_FENCED`.
//! * Baseline records are single conditional `PutItem`s, not fenced by the lease (baseline
//!   chunks run in parallel with each other and with drains): a `snapshot#` record only
//!   moves forward (`anchored → running → done`), a `chunk#` record is written only when
//!   absent (`attribute_not_exists`), so the first record wins.
//! * An operation lease (`op#…` item) is granted, renewed and released by the same
//!   conditional `UpdateItem`s as the job's lease, on its own item: a compaction never
//!   writes the `job` item, and a drain never writes an `op#` item.
//! * Every read is strongly consistent.

mod condition;
mod item;
mod table;

use crate::state::{BaselineStatus, Claim, ClaimOutcome};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use serde_json::json;

use super::decide::{self, LeaseDecision};
use super::holder;
use super::ops::{self, OpLease, OpLeaseOutcome, OpRecord};
use super::{
    BaselineRecord, Checkpoint, CheckpointWrite, ChunkRecord, Cleared, Lease, LeaseOutcome,
    RunRecord, StateStore, now_ms,
};
use crate::aws::{self, Failure};
use crate::error::{Code, Error, Result};
use condition::{condition_failed, written};
use item::{
    Fields, Item, JobItem, baseline_item, baseline_sk, checkpoint_value, chunk_item, chunk_sk, key,
    number, op_sk, parse_baseline, parse_chunk, parse_op, parse_run, run_item, sk_of,
};
pub use item::{JOB_SK, TTL_ATTRIBUTE};

/// Run records `state show` prints (the newest).
const RUNS_SHOWN: i32 = 50;
/// How long one DynamoDB attempt may take before it counts as failed (then retried).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// A DynamoDB table of job states.
#[derive(Debug, Clone)]
pub struct DynamoStateStore {
    client: Client,
    table: String,
}

impl DynamoStateStore {
    /// A store on `table` through a client built from `sdk`.
    pub fn new(sdk: &SdkConfig, table: &str) -> Result<Self> {
        if table.len() < 3
            || table.len() > 255
            || !table
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!("state.table {table:?} is not a DynamoDB table name"),
            )
            .hint("use 3-255 letters, digits, '_', '-' or '.'"));
        }
        let config = aws_sdk_dynamodb::config::Builder::from(sdk)
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(aws::CONNECT_TIMEOUT)
                    .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                    .build(),
            )
            .build();
        Ok(DynamoStateStore {
            client: Client::from_conf(config),
            table: table.to_owned(),
        })
    }

    /// Maps an SDK failure of `action` to a sluice error naming the item.
    fn error<E>(&self, err: SdkError<E, HttpResponse>, action: &str, what: &str) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let failure = aws::describe_failure(&err);
        let error = match aws::classify(&err) {
            Failure::Unavailable => Error::new(
                Code::StateUnavailable,
                format!("DynamoDB {action} on table {} ({what}): {failure}", self.table),
            )
            .hint("DynamoDB could not be reached or refused the request for now; nothing was acknowledged, the next run retries (check state.endpoint_url / network if it persists)"),
            Failure::Other => Error::new(
                Code::StateRejected,
                format!("DynamoDB {action} on table {} ({what}): {failure}", self.table),
            )
            .hint("DynamoDB refused the request as wrong for this table, so retrying gives the same answer: state.table must be a sluice state table (string keys pk and sk, as `sluice state init --config FILE` or the Terraform state module create it) in state.region; nothing was acknowledged"),
            Failure::Denied => Error::new(
                Code::StateDenied,
                format!("DynamoDB {action} on table {} ({what}): {failure}", self.table),
            )
            .hint(format!(
                "allow {action} on arn:aws:dynamodb:<region>:<account>:table/{} for the credentials in use (IAM role or AWS_* environment); see the IAM section of docs/aws.md",
                self.table
            )),
            Failure::Missing => Error::new(
                Code::ConfigInvalid,
                format!("DynamoDB table {} does not exist ({failure})", self.table),
            )
            .hint("create it with `sluice state init --config FILE` (local use) or the Terraform state module, or fix state.table / state.region"),
        };
        error.source(err)
    }

    async fn get_item(&self, job: &str, sk: &str) -> Result<Option<Item>> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(job, sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error(e, "dynamodb:GetItem", &format!("{job}/{sk}")))?;
        Ok(output.item)
    }

    /// Every item of `job` whose sort key starts with `prefix`, in sort-key order
    /// (descending and at most `limit` when a limit is given).
    async fn query(&self, job: &str, prefix: &str, limit: Option<i32>) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", AttributeValue::S(job.to_owned()))
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
                .consistent_read(true)
                .scan_index_forward(limit.is_none())
                .set_limit(limit)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.error(e, "dynamodb:Query", &format!("{job}/{prefix}*")))?;
            items.extend(output.items.unwrap_or_default());
            match output.last_evaluated_key {
                Some(key) if limit.is_none() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    async fn job_state(&self, job: &str) -> Result<JobItem> {
        match self.get_item(job, JOB_SK).await? {
            Some(item) => JobItem::parse(&self.table, job, &item),
            None => Ok(JobItem::default()),
        }
    }

    /// Maps a failed write of the `job` item. DynamoDB rejects an update whose operands
    /// have the wrong type (`ValidationException`) — that is a corrupt item, reported as
    /// such when the item does not parse.
    async fn job_write_error<E>(
        &self,
        err: SdkError<E, HttpResponse>,
        job: &str,
        what: &str,
    ) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if aws::service_code(&err) == Some("ValidationException")
            && let Err(corrupt) = self.job_state(job).await
        {
            return corrupt.source(err);
        }
        self.error(err, "dynamodb:UpdateItem", &format!("{job}/job {what}"))
    }

    /// The `SLUICE_STATE_FENCED` error for `lease`, naming the current holder.
    async fn fenced(&self, lease: &Lease, expected_version: Option<u64>) -> Error {
        let detail = match self.job_state(&lease.job).await {
            Ok(current) => {
                let version = current.checkpoint.as_ref().map_or(0, |c| c.version);
                match expected_version {
                    Some(expected)
                        if version != expected
                            && current.lease_token == lease.token
                            && current.lease_owner.as_deref() == Some(&lease.owner) =>
                    {
                        format!("checkpoint version is {version}, expected {expected}")
                    }
                    _ => format!(
                        "lease token {} is no longer current (current token {}, holder {})",
                        lease.token,
                        current.lease_token,
                        current.lease_owner.as_deref().unwrap_or("none")
                    ),
                }
            }
            Err(e) => format!(
                "lease token {} is no longer current (holder unknown: {e})",
                lease.token
            ),
        };
        Error::new(Code::StateFenced, format!("job {}: {detail}", lease.job))
            .hint("another invocation took over this job after our lease expired; this run stopped before acknowledging anything, the next run resumes from the stored checkpoint")
    }
}

#[async_trait]
impl StateStore for DynamoStateStore {
    fn describe(&self) -> String {
        format!("dynamodb://{}", self.table)
    }

    async fn init(&self) -> Result<serde_json::Value> {
        let created = self.create_table().await?;
        Ok(json!({
            "state": self.describe(),
            "table": self.table,
            "created": created,
            "ttl_attribute": TTL_ATTRIBUTE,
        }))
    }

    async fn acquire_lease(&self, job: &str, owner: &str, ttl: Duration) -> Result<LeaseOutcome> {
        // A lease that changes hands between a failed condition and our read is retried.
        let mut takeover: Option<(String, u64)> = None;
        for _ in 0..5 {
            let now = now_ms();
            let expires = now + ttl.as_millis() as i64;
            let request = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job, JOB_SK)))
                .update_expression(
                    "SET lease_owner = :owner, lease_expires_at_ms = :expires, \
                     format_version = if_not_exists(format_version, :fv) ADD lease_token :one",
                )
                .expression_attribute_values(":owner", AttributeValue::S(owner.to_owned()))
                .expression_attribute_values(":expires", number(expires))
                .expression_attribute_values(":fv", number(1))
                .expression_attribute_values(":one", number(1))
                .return_values(ReturnValue::AllNew);
            let request = match &takeover {
                // Taken over only from the very holder and token found dead: a holder that
                // changed meanwhile fails the condition and is decided again.
                Some((holder, token)) => request
                    .condition_expression("lease_owner = :holder AND lease_token = :token")
                    .expression_attribute_values(":holder", AttributeValue::S(holder.clone()))
                    .expression_attribute_values(":token", number(token)),
                None => request
                    .condition_expression(
                        "attribute_not_exists(lease_owner) OR attribute_not_exists(lease_expires_at_ms) \
                         OR lease_expires_at_ms <= :now",
                    )
                    .expression_attribute_values(":now", number(now)),
            };
            match request.send().await {
                Ok(output) => {
                    if let Some((holder, _)) = &takeover {
                        super::log_takeover(job, holder, owner);
                    }
                    let item = output.attributes.unwrap_or_default();
                    let parsed = JobItem::parse(&self.table, job, &item)?;
                    return Ok(LeaseOutcome::Acquired(Lease {
                        job: job.to_owned(),
                        owner: owner.to_owned(),
                        token: parsed.lease_token,
                        expires_at_ms: expires,
                    }));
                }
                Err(e) if condition_failed(&e) => {
                    let current = self.job_state(job).await?;
                    let decision = decide::lease(
                        current.lease_owner.as_deref(),
                        current.lease_expires_at_ms,
                        owner,
                        now_ms(),
                        holder::liveness,
                    );
                    takeover = None;
                    match decision {
                        LeaseDecision::Free => {}
                        // Our grant was stored, but its answer was lost and the SDK sent it
                        // again: the stored lease is ours.
                        LeaseDecision::Ours => {
                            tracing::info!(
                                job,
                                owner,
                                "lease grant retried after a lost answer; the stored lease is ours"
                            );
                            return Ok(LeaseOutcome::Acquired(Lease {
                                job: job.to_owned(),
                                owner: owner.to_owned(),
                                token: current.lease_token,
                                expires_at_ms: current.lease_expires_at_ms.unwrap_or(expires),
                            }));
                        }
                        LeaseDecision::TakeOver { holder } => {
                            takeover = Some((holder, current.lease_token));
                        }
                        LeaseDecision::Held {
                            holder,
                            expires_at_ms,
                        } => {
                            return Ok(LeaseOutcome::Held {
                                owner: holder,
                                expires_at_ms,
                            });
                        }
                    }
                }
                Err(e) => {
                    return Err(self.job_write_error(e, job, "lease").await);
                }
            }
        }
        Err(Error::new(
            Code::StateUnavailable,
            format!("job {job}: the lease changed hands repeatedly while acquiring it"),
        )
        .hint("several runs of this job are starting at once; the next run retries"))
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let expires = now_ms() + ttl.as_millis() as i64;
        let renewed = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(&lease.job, JOB_SK)))
            .update_expression("SET lease_expires_at_ms = :expires")
            .condition_expression("lease_token = :token AND lease_owner = :owner")
            .expression_attribute_values(":expires", number(expires))
            .expression_attribute_values(":token", number(lease.token))
            .expression_attribute_values(":owner", AttributeValue::S(lease.owner.clone()))
            .send()
            .await;
        match renewed {
            Ok(_) => Ok(Lease {
                expires_at_ms: expires,
                ..lease.clone()
            }),
            Err(e) if condition_failed(&e) => Err(self.fenced(lease, None).await.source(e)),
            Err(e) => Err(self.job_write_error(e, &lease.job, "lease").await),
        }
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let released = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(&lease.job, JOB_SK)))
            .update_expression("REMOVE lease_owner, lease_expires_at_ms")
            .condition_expression("lease_token = :token AND lease_owner = :owner")
            .expression_attribute_values(":token", number(lease.token))
            .expression_attribute_values(":owner", AttributeValue::S(lease.owner.clone()))
            .send()
            .await;
        // Taken over meanwhile (not written): the new holder's lease is left alone.
        match written(released) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.job_write_error(e, &lease.job, "lease").await),
        }
    }

    async fn load_checkpoint(&self, job: &str) -> Result<Option<Checkpoint>> {
        Ok(self.job_state(job).await?.checkpoint)
    }

    async fn advance_checkpoint(&self, write: &CheckpointWrite<'_>) -> Result<(Checkpoint, Lease)> {
        let CheckpointWrite {
            lease,
            ttl,
            expected_version,
            ..
        } = *write;
        let now = now_ms();
        let checkpoint = write.record(now);
        let expires = now + ttl.as_millis() as i64;
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(&lease.job, JOB_SK)))
            .update_expression("SET #cp = :cp, lease_expires_at_ms = :expires")
            .expression_attribute_names("#cp", "checkpoint")
            .expression_attribute_values(":cp", checkpoint_value(&checkpoint))
            .expression_attribute_values(":expires", number(expires))
            .expression_attribute_values(":token", number(lease.token))
            .expression_attribute_values(":owner", AttributeValue::S(lease.owner.clone()));
        request = if expected_version == 0 {
            request.condition_expression(
                "lease_token = :token AND lease_owner = :owner AND attribute_not_exists(#cp)",
            )
        } else {
            request
                .condition_expression(
                    "lease_token = :token AND lease_owner = :owner AND #cp.#version = :expected",
                )
                .expression_attribute_names("#version", "version")
                .expression_attribute_values(":expected", number(expected_version))
        };
        match request.send().await {
            Ok(_) => Ok((
                checkpoint,
                Lease {
                    expires_at_ms: expires,
                    ..lease.clone()
                },
            )),
            Err(e) if condition_failed(&e) => {
                // Refused: unless the stored checkpoint is this very write (its first
                // answer was lost and the SDK sent it again), we are fenced.
                if let Ok(current) = self.job_state(&lease.job).await
                    && current.lease_token == lease.token
                    && current.lease_owner.as_deref() == Some(&lease.owner)
                    && decide::is_own_checkpoint(current.checkpoint.as_ref(), &checkpoint)
                {
                    tracing::info!(job = %lease.job, version = checkpoint.version, "checkpoint write retried after a lost answer; the stored checkpoint is ours");
                    let stored = current.checkpoint.unwrap_or(checkpoint);
                    return Ok((
                        stored,
                        Lease {
                            expires_at_ms: current.lease_expires_at_ms.unwrap_or(expires),
                            ..lease.clone()
                        },
                    ));
                }
                Err(self.fenced(lease, Some(expected_version)).await.source(e))
            }
            Err(e) => Err(self.job_write_error(e, &lease.job, "checkpoint").await),
        }
    }

    async fn load_baseline(&self, job: &str, table: &str) -> Result<Option<BaselineRecord>> {
        let sk = baseline_sk(table);
        match self.get_item(job, &sk).await? {
            None => Ok(None),
            Some(item) => parse_baseline(&Fields::new(&item, &self.table, job, &sk)).map(Some),
        }
    }

    async fn put_baseline(&self, job: &str, record: &BaselineRecord) -> Result<()> {
        // Records only move forward: overwrite only a missing or an earlier status.
        let earlier: &[&str] = match record.status {
            BaselineStatus::Anchored => &["anchored"],
            BaselineStatus::Running => &["anchored", "running"],
            BaselineStatus::Done => &["anchored", "running", "done"],
            BaselineStatus::Wanted => &["anchored", "running", "done", "wanted"],
        };
        let mut request = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(baseline_item(job, record)))
            .condition_expression(format!(
                "attribute_not_exists(pk) OR #status IN ({})",
                (0..earlier.len())
                    .map(|i| format!(":s{i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .expression_attribute_names("#status", "status");
        for (i, status) in earlier.iter().enumerate() {
            request = request.expression_attribute_values(
                format!(":s{i}"),
                AttributeValue::S((*status).to_owned()),
            );
        }
        // A record at a later status is kept (not written).
        match written(request.send().await) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.error(
                e,
                "dynamodb:PutItem",
                &format!("{job}/{}", baseline_sk(&record.table)),
            )),
        }
    }

    async fn clear_baseline(&self, job: &str, table: &str) -> Result<()> {
        let mut keys = vec![baseline_sk(table)];
        for item in self.query(job, &format!("chunk#{table}#"), None).await? {
            keys.push(sk_of(&item));
        }
        for sk in keys {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key(job, &sk)))
                .send()
                .await
                .map_err(|e| self.error(e, "dynamodb:DeleteItem", &format!("{job}/{sk}")))?;
        }
        Ok(())
    }

    async fn replace_snapshot(&self, job: &str, record: &BaselineRecord) -> Result<()> {
        let table = &record.table;
        for item in self.query(job, &format!("chunk#{table}#"), None).await? {
            let sk = sk_of(&item);
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(key(job, &sk)))
                .send()
                .await
                .map_err(|e| self.error(e, "dynamodb:DeleteItem", &format!("{job}/{sk}")))?;
        }
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(baseline_item(job, record)))
            .send()
            .await
            .map_err(|e| {
                self.error(
                    e,
                    "dynamodb:PutItem",
                    &format!("{job}/{}", baseline_sk(table)),
                )
            })?;
        Ok(())
    }

    async fn load_chunk(&self, job: &str, table: &str, chunk: u32) -> Result<Option<ChunkRecord>> {
        let sk = chunk_sk(table, chunk);
        match self.get_item(job, &sk).await? {
            None => Ok(None),
            Some(item) => parse_chunk(&Fields::new(&item, &self.table, job, &sk)).map(Some),
        }
    }

    async fn put_chunk(&self, job: &str, record: &ChunkRecord) -> Result<ChunkRecord> {
        let sk = chunk_sk(&record.table, record.chunk);
        let sent = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(chunk_item(job, record)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match sent {
            Ok(_) => Ok(record.clone()),
            Err(e) if condition_failed(&e) => {
                let item = self.get_item(job, &sk).await?.ok_or_else(|| {
                    Error::new(
                        Code::StateUnavailable,
                        format!("chunk record {job}/{sk} vanished while being written"),
                    )
                    .hint("retry the chunk")
                })?;
                parse_chunk(&Fields::new(&item, &self.table, job, &sk))
            }
            Err(e) => Err(self.error(e, "dynamodb:PutItem", &format!("{job}/{sk}"))),
        }
    }

    async fn claim(&self, resource: &str, job: &str) -> Result<ClaimOutcome> {
        let pk = format!("claim#{resource}");
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(pk.clone()))
            .key("sk", AttributeValue::S("claim".to_owned()))
            .update_expression("SET job = :job, claimed_at_ms = if_not_exists(claimed_at_ms, :now)")
            .condition_expression("attribute_not_exists(pk) OR job = :job")
            .expression_attribute_values(":job", AttributeValue::S(job.to_owned()))
            .expression_attribute_values(":now", number(now_ms()))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(ClaimOutcome::Ours),
            Err(e) if condition_failed(&e) => {
                let holder = self
                    .get_item(&pk, "claim")
                    .await?
                    .and_then(|item| item.get("job").and_then(|v| v.as_s().ok()).cloned())
                    .unwrap_or_else(|| "another job".to_owned());
                Ok(ClaimOutcome::HeldBy(holder))
            }
            Err(e) => Err(self.error(e, "dynamodb:UpdateItem", &pk)),
        }
    }

    async fn list_claims(&self) -> Result<Vec<Claim>> {
        let items = self
            .scan_all(
                "begins_with(pk, :p) AND sk = :s",
                &[(":p", "claim#"), (":s", "claim")],
                None,
                "claim#*",
            )
            .await?;
        let mut claims: Vec<Claim> = items
            .iter()
            .map(|item| {
                let text = |k: &str| {
                    item.get(k)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default()
                };
                let claimed_at_ms = item
                    .get("claimed_at_ms")
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                Claim {
                    resource: text("pk").trim_start_matches("claim#").to_owned(),
                    job: text("job"),
                    claimed_at_ms,
                }
            })
            .collect();
        claims.sort_by(|a, b| a.resource.cmp(&b.resource));
        Ok(claims)
    }

    async fn release_claim(&self, resource: &str, job: &str) -> Result<bool> {
        let pk = format!("claim#{resource}");
        let sent = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(&pk, "claim")))
            .condition_expression("job = :job")
            .expression_attribute_values(":job", AttributeValue::S(job.to_owned()))
            .send()
            .await;
        written(sent).map_err(|e| self.error(e, "dynamodb:DeleteItem", &pk))
    }

    async fn break_lease(&self, job: &str, owner: &str) -> Result<bool> {
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(job, JOB_SK)))
            .update_expression("REMOVE lease_owner, lease_expires_at_ms")
            .condition_expression("lease_owner = :owner")
            .expression_attribute_values(":owner", AttributeValue::S(owner.to_owned()))
            .send()
            .await;
        match written(sent) {
            Ok(broken) => Ok(broken),
            Err(e) => Err(self.job_write_error(e, job, "lease").await),
        }
    }

    async fn clear_job(&self, lease: &Lease) -> Result<Cleared> {
        let job = &lease.job;
        // Fenced before anything is deleted: a lease that is no longer current clears
        // nothing (the final write is fenced again).
        let ttl = Duration::from_millis((lease.expires_at_ms - now_ms()).max(1000) as u64);
        self.renew_lease(lease, ttl).await?;
        let mut cleared = Cleared::default();
        for item in self.query(job, "snapshot#", None).await? {
            let sk = sk_of(&item);
            cleared
                .snapshots
                .push(sk.trim_start_matches("snapshot#").to_owned());
            self.delete(job, &sk).await?;
        }
        for item in self.query(job, "chunk#", None).await? {
            self.delete(job, &sk_of(&item)).await?;
            cleared.chunks += 1;
        }
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(job, JOB_SK)))
            .update_expression("REMOVE lease_owner, lease_expires_at_ms, #cp")
            .expression_attribute_names("#cp", "checkpoint")
            .condition_expression("lease_token = :token AND lease_owner = :owner")
            .expression_attribute_values(":token", number(lease.token))
            .expression_attribute_values(":owner", AttributeValue::S(lease.owner.clone()))
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        match sent {
            Ok(output) => {
                let old = output.attributes.unwrap_or_default();
                cleared.checkpoint = JobItem::parse(&self.table, job, &old)?.checkpoint;
                Ok(cleared)
            }
            Err(e) if condition_failed(&e) => Err(self.fenced(lease, None).await.source(e)),
            Err(e) => Err(self.job_write_error(e, job, "clear").await),
        }
    }

    async fn put_run(&self, job: &str, record: &RunRecord) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(run_item(job, record)))
            .send()
            .await
            .map_err(|e| {
                self.error(
                    e,
                    "dynamodb:PutItem",
                    &format!("{job}/run#{}", record.run_id),
                )
            })?;
        Ok(())
    }

    async fn list_jobs(&self) -> Result<Vec<String>> {
        let items = self
            .scan_all(
                "sk = :s OR begins_with(sk, :run)",
                &[(":s", JOB_SK), (":run", "run#")],
                Some("pk"),
                "*/job",
            )
            .await?;
        let mut jobs: Vec<String> = items
            .iter()
            .filter_map(|item| item.get("pk")?.as_s().ok().cloned())
            .collect();
        jobs.sort();
        jobs.dedup();
        Ok(jobs)
    }

    async fn runs_since(&self, job: &str, since: &str) -> Result<Vec<RunRecord>> {
        let mut runs = Vec::new();
        let mut start = None;
        loop {
            // `$` sorts right after `#`: the range holds every `run#…` key from `since` on.
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", AttributeValue::S(job.to_owned()))
                .expression_attribute_values(":from", AttributeValue::S(format!("run#{since}")))
                .expression_attribute_values(":to", AttributeValue::S("run$".to_owned()))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.error(e, "dynamodb:Query", &format!("{job}/run#{since}…")))?;
            for item in output.items.unwrap_or_default() {
                let sk = sk_of(&item);
                runs.push(parse_run(&Fields::new(&item, &self.table, job, &sk))?);
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(runs)
    }

    async fn acquire_op_lease(
        &self,
        job: &str,
        op: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<OpLeaseOutcome> {
        let sk = op_sk(op);
        // A lease that changes hands between a failed condition and our read is retried.
        let mut takeover: Option<(String, u64)> = None;
        for _ in 0..5 {
            let now = now_ms();
            let expires = now + ttl.as_millis() as i64;
            let request = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(job, &sk)))
                .update_expression(
                    "SET lease_owner = :owner, lease_expires_at_ms = :expires, #op = :op ADD lease_token :one",
                )
                .expression_attribute_names("#op", "op")
                .expression_attribute_values(":owner", AttributeValue::S(owner.to_owned()))
                .expression_attribute_values(":expires", number(expires))
                .expression_attribute_values(":op", AttributeValue::S(op.to_owned()))
                .expression_attribute_values(":one", number(1))
                .return_values(ReturnValue::AllNew);
            let request = match &takeover {
                Some((holder, token)) => request
                    .condition_expression("lease_owner = :holder AND lease_token = :token")
                    .expression_attribute_values(":holder", AttributeValue::S(holder.clone()))
                    .expression_attribute_values(":token", number(token)),
                None => request
                    .condition_expression(
                        "attribute_not_exists(lease_owner) OR attribute_not_exists(lease_expires_at_ms) \
                         OR lease_expires_at_ms <= :now",
                    )
                    .expression_attribute_values(":now", number(now)),
            };
            match request.send().await {
                Ok(output) => {
                    if let Some((holder, _)) = &takeover {
                        super::log_takeover(&format!("{job} {op}"), holder, owner);
                    }
                    let item = output.attributes.unwrap_or_default();
                    let parsed = parse_op(&Fields::new(&item, &self.table, job, &sk))?;
                    return Ok(OpLeaseOutcome::Acquired(OpLease {
                        job: job.to_owned(),
                        op: op.to_owned(),
                        owner: owner.to_owned(),
                        token: parsed.lease_token,
                        expires_at_ms: expires,
                    }));
                }
                Err(e) if condition_failed(&e) => {
                    let current = self.op_record(job, op).await?;
                    takeover = None;
                    match decide::lease(
                        current.lease_owner.as_deref(),
                        current.lease_expires_at_ms,
                        owner,
                        now_ms(),
                        holder::liveness,
                    ) {
                        LeaseDecision::Free => {}
                        LeaseDecision::Ours => {
                            return Ok(OpLeaseOutcome::Acquired(OpLease {
                                job: job.to_owned(),
                                op: op.to_owned(),
                                owner: owner.to_owned(),
                                token: current.lease_token,
                                expires_at_ms: current.lease_expires_at_ms.unwrap_or(expires),
                            }));
                        }
                        LeaseDecision::TakeOver { holder } => {
                            takeover = Some((holder, current.lease_token));
                        }
                        LeaseDecision::Held {
                            holder,
                            expires_at_ms,
                        } => {
                            return Ok(OpLeaseOutcome::Held {
                                owner: holder,
                                expires_at_ms,
                            });
                        }
                    }
                }
                Err(e) => {
                    return Err(self.error(e, "dynamodb:UpdateItem", &format!("{job}/{sk}")));
                }
            }
        }
        Err(Error::new(
            Code::StateUnavailable,
            format!(
                "job {job} operation {op}: the lease changed hands repeatedly while acquiring it"
            ),
        )
        .hint("several runs of the operation are starting at once; the next run retries"))
    }

    async fn renew_op_lease(&self, lease: &OpLease, ttl: Duration) -> Result<OpLease> {
        let expires = now_ms() + ttl.as_millis() as i64;
        self.fenced_op_update(
            lease,
            "SET lease_expires_at_ms = :expires",
            &[],
            vec![(":expires", number(expires))],
        )
        .await?;
        Ok(OpLease {
            expires_at_ms: expires,
            ..lease.clone()
        })
    }

    async fn release_op_lease(&self, lease: &OpLease) -> Result<()> {
        match self
            .fenced_op_update(
                lease,
                "REMOVE lease_owner, lease_expires_at_ms",
                &[],
                vec![],
            )
            .await
        {
            // Taken over meanwhile: the new holder's lease is left alone.
            Err(e) if e.code() == Code::StateFenced => Ok(()),
            other => other,
        }
    }

    async fn record_op(&self, lease: &OpLease, last: &serde_json::Value) -> Result<()> {
        self.fenced_op_update(
            lease,
            "SET #last = :last",
            &[("#last", "last")],
            vec![(":last", AttributeValue::S(last.to_string()))],
        )
        .await
    }

    async fn list_ops(&self, job: &str) -> Result<Vec<OpRecord>> {
        let mut records = Vec::new();
        for item in self.query(job, "op#", None).await? {
            let sk = sk_of(&item);
            records.push(parse_op(&Fields::new(&item, &self.table, job, &sk))?);
        }
        Ok(records)
    }

    async fn show(&self, job: &str) -> Result<serde_json::Value> {
        let state = self.job_state(job).await?;
        let mut snapshots = serde_json::Map::new();
        for item in self.query(job, "snapshot#", None).await? {
            let sk = sk_of(&item);
            let record = parse_baseline(&Fields::new(&item, &self.table, job, &sk))?;
            snapshots.insert(record.table.clone(), json!(record));
        }
        let mut chunks = serde_json::Map::new();
        for item in self.query(job, "chunk#", None).await? {
            let sk = sk_of(&item);
            let record = parse_chunk(&Fields::new(&item, &self.table, job, &sk))?;
            let key = sk.strip_prefix("chunk#").unwrap_or(&sk).to_owned();
            chunks.insert(key, json!(record));
        }
        let mut runs = serde_json::Map::new();
        let mut newest = self.query(job, "run#", Some(RUNS_SHOWN)).await?;
        newest.reverse();
        for item in newest {
            let sk = sk_of(&item);
            let record = parse_run(&Fields::new(&item, &self.table, job, &sk))?;
            runs.insert(record.run_id.clone(), json!(record));
        }
        Ok(json!({
            "format_version": state.format_version.max(1),
            "lease_token": state.lease_token,
            "lease_owner": state.lease_owner,
            "lease_expires_at_ms": state.lease_expires_at_ms,
            "checkpoint": state.checkpoint,
            "snapshots": snapshots,
            "chunks": chunks,
            "runs": runs,
        }))
    }
}

impl DynamoStateStore {
    /// The stored record of operation `op` of `job` (a default one when absent).
    async fn op_record(&self, job: &str, op: &str) -> Result<OpRecord> {
        let sk = op_sk(op);
        match self.get_item(job, &sk).await? {
            None => Ok(OpRecord {
                op: op.to_owned(),
                ..OpRecord::default()
            }),
            Some(item) => parse_op(&Fields::new(&item, &self.table, job, &sk)),
        }
    }

    /// One update of `lease`'s `op#` item conditioned on its token and owner;
    /// `SLUICE_STATE_FENCED` when they are no longer current.
    async fn fenced_op_update(
        &self,
        lease: &OpLease,
        update: &str,
        names: &[(&str, &str)],
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<()> {
        let sk = op_sk(&lease.op);
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(&lease.job, &sk)))
            .update_expression(update)
            .condition_expression("lease_token = :token AND lease_owner = :owner")
            .expression_attribute_values(":token", number(lease.token))
            .expression_attribute_values(":owner", AttributeValue::S(lease.owner.clone()));
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        for (alias, name) in names {
            request = request.expression_attribute_names(*alias, *name);
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => {
                let current = self.op_record(&lease.job, &lease.op).await?;
                Err(
                    ops::fenced(lease, current.lease_token, current.lease_owner.as_deref())
                        .source(e),
                )
            }
            Err(e) => Err(self.error(e, "dynamodb:UpdateItem", &format!("{}/{sk}", lease.job))),
        }
    }

    /// Every item the whole-table scan with `filter` (string `values`) returns, page by
    /// page, strongly consistent; `projection` limits the attributes read.
    async fn scan_all(
        &self,
        filter: &str,
        values: &[(&str, &str)],
        projection: Option<&str>,
        what: &str,
    ) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let mut scan = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(filter)
                .set_projection_expression(projection.map(str::to_owned))
                .consistent_read(true)
                .set_exclusive_start_key(start.take());
            for (name, value) in values {
                scan =
                    scan.expression_attribute_values(*name, AttributeValue::S((*value).to_owned()));
            }
            let output = scan
                .send()
                .await
                .map_err(|e| self.error(e, "dynamodb:Scan", what))?;
            items.extend(output.items.unwrap_or_default());
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// Deletes item `sk` of `job` (absent is fine).
    async fn delete(&self, job: &str, sk: &str) -> Result<()> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(job, sk)))
            .send()
            .await
            .map_err(|e| self.error(e, "dynamodb:DeleteItem", &format!("{job}/{sk}")))?;
        Ok(())
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
    use aws_sdk_s3::primitives::SdkBody;

    fn answer(code: &str, status: u16) -> SdkError<UpdateItemError, HttpResponse> {
        let err = UpdateItemError::generic(ErrorMetadata::builder().code(code).build());
        SdkError::service_error(
            err,
            HttpResponse::new(status.try_into().unwrap(), SdkBody::empty()),
        )
    }

    #[test]
    fn dynamodb_answers_map_to_stable_codes_with_hints() {
        let sdk = SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("eu-west-1"))
            .build();
        let store = DynamoStateStore::new(&sdk, "sluice-state").unwrap();
        let denied = store.error(
            answer("AccessDeniedException", 400),
            "dynamodb:UpdateItem",
            "j/job",
        );
        assert_eq!(denied.code(), Code::StateDenied);
        assert_eq!(denied.class().exit_code(), 5);
        let hint = denied.hint_text().unwrap();
        assert!(
            hint.contains("dynamodb:UpdateItem") && hint.contains("table/sluice-state"),
            "{hint}"
        );
        let throttled = store.error(
            answer("ProvisionedThroughputExceededException", 400),
            "dynamodb:UpdateItem",
            "j/job",
        );
        assert_eq!(throttled.code(), Code::StateUnavailable);
        let wrong_table = store.error(
            answer("ValidationException", 400),
            "dynamodb:GetItem",
            "j/job",
        );
        assert_eq!(wrong_table.code(), Code::StateRejected);
        assert_eq!(wrong_table.class().exit_code(), 5);
        assert!(wrong_table.hint_text().unwrap().contains("pk and sk"));
        let missing = store.error(
            answer("ResourceNotFoundException", 400),
            "dynamodb:GetItem",
            "j/job",
        );
        assert_eq!(missing.code(), Code::ConfigInvalid);
        assert!(missing.hint_text().unwrap().contains("sluice state init"));
        assert!(DynamoStateStore::new(&sdk, "a/b").is_err());
    }
}
