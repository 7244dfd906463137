//! The local state store: one JSON file per job in a directory, for the CLI and tests.
//!
//! Every operation takes an exclusive `flock` on `<job>.lock`, reads `<job>.json`,
//! applies its conditions, and writes the new document to a temporary file that is
//! fsynced and renamed over the old one (then the directory is fsynced). Readers
//! therefore see either the old or the new document, never a torn one, and the
//! lease / fencing conditions hold across processes exactly as in DynamoDB.
//!
//! Resource claims are store-wide: `claims/claims.json` under its own lock
//! (`claims/claims.lock`). A job name cannot contain `/`, so no job document collides
//! with it. Two jobs see each other's claims only when they share the state directory.
//! The leases and records of a job's lake operations ([`super::ops`]) are a document of
//! their own, `ops/<job>.json` (lock `ops/<job>.lock`): an operation never takes the job
//! document's lock, and a sluice that predates them reads the job document unchanged.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use fs4::fs_std::FileExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::decide::{self, LeaseDecision};
use super::holder;
use super::ops::{self, OpLease, OpLeaseOutcome, OpRecord};
use super::{
    BaselineRecord, Checkpoint, CheckpointWrite, ChunkRecord, Claim, ClaimOutcome, Cleared, Lease,
    LeaseOutcome, RunRecord, StateStore, now_ms,
};
use crate::error::{Code, Error, Result};

/// Run records kept per job (the oldest are dropped; DynamoDB uses a TTL instead).
const RUNS_KEPT: usize = 50;

/// The whole stored state of one job.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobDocument {
    format_version: u32,
    /// Highest fencing token ever granted; never decreases, survives release.
    lease_token: u64,
    lease_owner: Option<String>,
    lease_expires_at_ms: Option<i64>,
    checkpoint: Option<Checkpoint>,
    #[serde(default)]
    snapshots: BTreeMap<String, BaselineRecord>,
    #[serde(default)]
    chunks: BTreeMap<String, ChunkRecord>,
    #[serde(default)]
    runs: BTreeMap<String, RunRecord>,
}

impl JobDocument {
    /// Fails with `SLUICE_STATE_FENCED` unless `lease` is the current lease.
    fn check_fence(&self, lease: &Lease) -> Result<()> {
        let ours =
            self.lease_token == lease.token && self.lease_owner.as_deref() == Some(&lease.owner);
        if ours {
            return Ok(());
        }
        Err(Error::new(
            Code::StateFenced,
            format!(
                "job {}: lease token {} is no longer current (current token {}, holder {})",
                lease.job,
                lease.token,
                self.lease_token,
                self.lease_owner.as_deref().unwrap_or("none")
            ),
        )
        .hint("another invocation took over this job after our lease expired; this run stopped before acknowledging anything, the next run resumes from the stored checkpoint"))
    }

    fn extend(&mut self, lease: &Lease, ttl: Duration) -> Lease {
        let expires = now_ms() + ttl.as_millis() as i64;
        self.lease_expires_at_ms = Some(expires);
        Lease {
            expires_at_ms: expires,
            ..lease.clone()
        }
    }
}

/// A directory of per-job state files.
#[derive(Debug)]
pub struct LocalStateStore {
    dir: PathBuf,
}

impl LocalStateStore {
    /// A store in `dir` (created when missing).
    pub fn new(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        Ok(LocalStateStore {
            dir: dir.to_path_buf(),
        })
    }

    /// Runs `f` on the job's document under the job's exclusive lock; writes the
    /// document back when `f` returns `Ok((true, _))`.
    fn with_doc<T>(
        &self,
        job: &str,
        f: impl FnOnce(&mut JobDocument) -> Result<(bool, T)>,
    ) -> Result<T> {
        let file = DocumentFile {
            dir: &self.dir,
            name: job,
            what: "state",
            if_corrupt: "restore the file from a backup; to start the stream over, move it away and re-baseline",
        };
        file.update(f)
    }
}

/// The store-wide claims document: resource → claim.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimsDocument {
    format_version: u32,
    claims: BTreeMap<String, Claim>,
}

impl LocalStateStore {
    /// Runs `f` on the claims document under the claims lock; writes it back when `f`
    /// returns `Ok((true, _))`.
    fn with_claims<T>(
        &self,
        f: impl FnOnce(&mut ClaimsDocument) -> Result<(bool, T)>,
    ) -> Result<T> {
        let dir = self.dir.join("claims");
        fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let file = DocumentFile {
            dir: &dir,
            name: "claims",
            what: "claims",
            if_corrupt: "restore the file from a backup, or move it away: every job re-claims its resources at its next run",
        };
        file.update(f)
    }
}

/// The lake operations of one job: operation key → its lease and record.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpsDocument {
    format_version: u32,
    ops: BTreeMap<String, OpRecord>,
}

impl LocalStateStore {
    /// Runs `f` on the job's operations document under its own lock; writes it back when
    /// `f` returns `Ok((true, _))`.
    fn with_ops<T>(
        &self,
        job: &str,
        f: impl FnOnce(&mut OpsDocument) -> Result<(bool, T)>,
    ) -> Result<T> {
        let dir = self.dir.join("ops");
        fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let file = DocumentFile {
            dir: &dir,
            name: job,
            what: "operations",
            if_corrupt: "move the file away: the next compaction starts with a new lease and record (the output is unaffected)",
        };
        file.update(f)
    }

    /// Runs `f` on operation `op`'s record (created when missing) after checking that
    /// `lease` is still its current lease.
    fn with_fenced_op<T>(&self, lease: &OpLease, f: impl FnOnce(&mut OpRecord) -> T) -> Result<T> {
        self.with_ops(&lease.job, |doc| {
            let record = doc.ops.entry(lease.op.clone()).or_default();
            let ours = record.lease_token == lease.token
                && record.lease_owner.as_deref() == Some(&lease.owner);
            if !ours {
                return Err(ops::fenced(
                    lease,
                    record.lease_token,
                    record.lease_owner.as_deref(),
                ));
            }
            Ok((true, f(record)))
        })
    }
}

/// A document of the store: JSON with a `format_version`, 1 in a new one.
trait Document: Default + Serialize + DeserializeOwned {
    /// The document of a store that has none yet.
    fn fresh() -> Self;
}

impl Document for JobDocument {
    fn fresh() -> Self {
        JobDocument {
            format_version: 1,
            ..JobDocument::default()
        }
    }
}

impl Document for OpsDocument {
    fn fresh() -> Self {
        OpsDocument {
            format_version: 1,
            ..OpsDocument::default()
        }
    }
}

impl Document for ClaimsDocument {
    fn fresh() -> Self {
        ClaimsDocument {
            format_version: 1,
            ..ClaimsDocument::default()
        }
    }
}

/// One JSON document of the store, `<dir>/<name>.json`, changed only under the exclusive
/// `flock` of `<dir>/<name>.lock` and only by replacing it whole: a reader sees the old
/// document or the new one, never a torn one.
struct DocumentFile<'a> {
    dir: &'a Path,
    name: &'a str,
    /// What the document holds (`state`, `claims`), for its errors.
    what: &'a str,
    /// The fix for a document that does not parse.
    if_corrupt: &'a str,
}

impl DocumentFile<'_> {
    /// Runs `f` on the document ([`Document::fresh`] when there is none; one that does
    /// not parse is `SLUICE_STATE_CORRUPT`) under the lock; writes it back
    /// ([`Self::replace`]) when `f` returns `Ok((true, _))`.
    fn update<D: Document, T>(&self, f: impl FnOnce(&mut D) -> Result<(bool, T)>) -> Result<T> {
        let lock_path = self.dir.join(format!("{}.lock", self.name));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io_error(&lock_path, e))?;
        lock.lock_exclusive().map_err(|e| io_error(&lock_path, e))?;
        let result = (|| {
            let path = self.dir.join(format!("{}.json", self.name));
            let mut doc = match fs::read(&path) {
                Ok(bytes) => serde_json::from_slice::<D>(&bytes).map_err(|e| {
                    let what = self.what;
                    let message = format!(
                        "{what} file {} is not a valid sluice {what} document",
                        path.display()
                    );
                    Error::new(Code::StateCorrupt, message)
                        .hint(self.if_corrupt)
                        .source(e)
                })?,
                Err(e) if e.kind() == ErrorKind::NotFound => D::fresh(),
                Err(e) => return Err(io_error(&path, e)),
            };
            let (write, value) = f(&mut doc)?;
            if write {
                self.replace(&path, &doc)?;
            }
            Ok(value)
        })();
        let _ = FileExt::unlock(&lock);
        result
    }

    /// Replaces the document at `path` with `doc`: written to a temporary file that is
    /// fsynced and renamed over it, then the directory is fsynced. On failure the
    /// temporary file is removed and the old document stands.
    fn replace(&self, path: &Path, doc: &impl Serialize) -> Result<()> {
        let tmp = self
            .dir
            .join(format!(".{}.json.tmp-{}", self.name, std::process::id()));
        let bytes = serde_json::to_vec_pretty(doc)
            .map_err(|e| Error::new(Code::Internal, format!("encoding {}", self.what)).source(e))?;
        File::create(&tmp)
            .and_then(|mut file| {
                file.write_all(&bytes)?;
                file.sync_all()
            })
            .and_then(|_| fs::rename(&tmp, path))
            .and_then(|_| File::open(self.dir)?.sync_all())
            .map_err(|e| {
                let _ = fs::remove_file(&tmp);
                io_error(path, e)
            })
    }
}

/// A failed file operation: not writable is a refusal (a retry changes nothing), anything
/// else transient.
fn io_error(path: &Path, e: std::io::Error) -> Error {
    let code = match e.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => Code::StateDenied,
        _ => Code::StateUnavailable,
    };
    Error::new(code, format!("local state {}", path.display()))
        .hint("check that state.path exists and is writable by the user sluice runs as")
        .source(e)
}

#[async_trait]
impl StateStore for LocalStateStore {
    fn describe(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    async fn acquire_lease(&self, job: &str, owner: &str, ttl: Duration) -> Result<LeaseOutcome> {
        self.with_doc(job, |doc| {
            let decision = decide::lease(
                doc.lease_owner.as_deref(),
                doc.lease_expires_at_ms,
                owner,
                now_ms(),
                holder::liveness,
            );
            match decision {
                LeaseDecision::Held {
                    holder,
                    expires_at_ms,
                } => {
                    return Ok((
                        false,
                        LeaseOutcome::Held {
                            owner: holder,
                            expires_at_ms,
                        },
                    ));
                }
                LeaseDecision::Ours => {
                    let lease = Lease {
                        job: job.to_owned(),
                        owner: owner.to_owned(),
                        token: doc.lease_token,
                        expires_at_ms: 0,
                    };
                    return Ok((true, LeaseOutcome::Acquired(doc.extend(&lease, ttl))));
                }
                LeaseDecision::TakeOver { holder } => {
                    super::log_takeover(job, &holder, owner);
                }
                LeaseDecision::Free => {}
            }
            doc.lease_token += 1;
            doc.lease_owner = Some(owner.to_owned());
            let lease = Lease {
                job: job.to_owned(),
                owner: owner.to_owned(),
                token: doc.lease_token,
                expires_at_ms: 0,
            };
            let lease = doc.extend(&lease, ttl);
            Ok((true, LeaseOutcome::Acquired(lease)))
        })
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        self.with_doc(&lease.job, |doc| {
            doc.check_fence(lease)?;
            Ok((true, doc.extend(lease, ttl)))
        })
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        self.with_doc(&lease.job, |doc| {
            if doc.check_fence(lease).is_err() {
                return Ok((false, ()));
            }
            doc.lease_owner = None;
            doc.lease_expires_at_ms = None;
            Ok((true, ()))
        })
    }

    async fn load_checkpoint(&self, job: &str) -> Result<Option<Checkpoint>> {
        self.with_doc(job, |doc| Ok((false, doc.checkpoint.clone())))
    }

    async fn advance_checkpoint(&self, write: &CheckpointWrite<'_>) -> Result<(Checkpoint, Lease)> {
        let CheckpointWrite {
            lease,
            ttl,
            expected_version,
            ..
        } = *write;
        self.with_doc(&lease.job, |doc| {
            doc.check_fence(lease)?;
            let stored = doc.checkpoint.as_ref().map_or(0, |c| c.version);
            let written = write.record(now_ms());
            if decide::is_own_checkpoint(doc.checkpoint.as_ref(), &written) {
                // Our own write, retried: it is stored already.
                let lease = doc.extend(lease, ttl);
                return Ok((true, (doc.checkpoint.clone().unwrap_or(written), lease)));
            }
            if stored != expected_version {
                return Err(Error::new(
                    Code::StateFenced,
                    format!("job {}: checkpoint version is {stored}, expected {expected_version}", lease.job),
                )
                .hint("the checkpoint was moved by another writer; this run stopped before acknowledging anything"));
            }
            let checkpoint = written;
            doc.checkpoint = Some(checkpoint.clone());
            let lease = doc.extend(lease, ttl);
            Ok((true, (checkpoint, lease)))
        })
    }

    async fn load_baseline(&self, job: &str, table: &str) -> Result<Option<BaselineRecord>> {
        self.with_doc(job, |doc| Ok((false, doc.snapshots.get(table).cloned())))
    }

    async fn put_baseline(&self, job: &str, record: &BaselineRecord) -> Result<()> {
        self.with_doc(job, |doc| {
            let behind = doc
                .snapshots
                .get(&record.table)
                .is_some_and(|s| s.status > record.status);
            if behind {
                return Ok((false, ()));
            }
            doc.snapshots.insert(record.table.clone(), record.clone());
            Ok((true, ()))
        })
    }

    async fn clear_baseline(&self, job: &str, table: &str) -> Result<()> {
        self.with_doc(job, |doc| {
            doc.snapshots.remove(table);
            let prefix = format!("{table}#");
            doc.chunks.retain(|k, _| !k.starts_with(&prefix));
            Ok((true, ()))
        })
    }

    async fn replace_snapshot(&self, job: &str, record: &BaselineRecord) -> Result<()> {
        self.with_doc(job, |doc| {
            let prefix = format!("{}#", record.table);
            doc.chunks.retain(|k, _| !k.starts_with(&prefix));
            doc.snapshots.insert(record.table.clone(), record.clone());
            Ok((true, ()))
        })
    }

    async fn load_chunk(&self, job: &str, table: &str, chunk: u32) -> Result<Option<ChunkRecord>> {
        self.with_doc(job, |doc| {
            Ok((false, doc.chunks.get(&chunk_key(table, chunk)).cloned()))
        })
    }

    async fn put_chunk(&self, job: &str, record: &ChunkRecord) -> Result<ChunkRecord> {
        self.with_doc(job, |doc| {
            let key = chunk_key(&record.table, record.chunk);
            if let Some(existing) = doc.chunks.get(&key) {
                return Ok((false, existing.clone()));
            }
            doc.chunks.insert(key, record.clone());
            Ok((true, record.clone()))
        })
    }

    async fn put_run(&self, job: &str, record: &RunRecord) -> Result<()> {
        self.with_doc(job, |doc| {
            doc.runs.insert(record.run_id.clone(), record.clone());
            while doc.runs.len() > RUNS_KEPT {
                doc.runs.pop_first();
            }
            Ok((true, ()))
        })
    }

    async fn claim(&self, resource: &str, job: &str) -> Result<ClaimOutcome> {
        self.with_claims(|doc| match doc.claims.get(resource) {
            Some(claim) if claim.job == job => Ok((false, ClaimOutcome::Ours)),
            Some(claim) => Ok((false, ClaimOutcome::HeldBy(claim.job.clone()))),
            None => {
                let claim = Claim {
                    resource: resource.to_owned(),
                    job: job.to_owned(),
                    claimed_at_ms: now_ms(),
                };
                doc.claims.insert(resource.to_owned(), claim);
                Ok((true, ClaimOutcome::Ours))
            }
        })
    }

    async fn list_claims(&self) -> Result<Vec<Claim>> {
        self.with_claims(|doc| Ok((false, doc.claims.values().cloned().collect())))
    }

    async fn release_claim(&self, resource: &str, job: &str) -> Result<bool> {
        self.with_claims(|doc| match doc.claims.get(resource) {
            Some(claim) if claim.job == job => {
                doc.claims.remove(resource);
                Ok((true, true))
            }
            _ => Ok((false, false)),
        })
    }

    async fn break_lease(&self, job: &str, owner: &str) -> Result<bool> {
        self.with_doc(job, |doc| {
            if doc.lease_owner.as_deref() != Some(owner) {
                return Ok((false, false));
            }
            doc.lease_owner = None;
            doc.lease_expires_at_ms = None;
            Ok((true, true))
        })
    }

    async fn clear_job(&self, lease: &Lease) -> Result<Cleared> {
        self.with_doc(&lease.job, |doc| {
            doc.check_fence(lease)?;
            let cleared = Cleared {
                checkpoint: doc.checkpoint.take(),
                snapshots: std::mem::take(&mut doc.snapshots).into_keys().collect(),
                chunks: std::mem::take(&mut doc.chunks).len(),
            };
            doc.lease_owner = None;
            doc.lease_expires_at_ms = None;
            Ok((true, cleared))
        })
    }

    fn runs_kept(&self) -> Option<usize> {
        Some(RUNS_KEPT)
    }

    async fn acquire_op_lease(
        &self,
        job: &str,
        op: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<OpLeaseOutcome> {
        self.with_ops(job, |doc| {
            let record = doc.ops.entry(op.to_owned()).or_insert_with(|| OpRecord {
                op: op.to_owned(),
                ..OpRecord::default()
            });
            let decision = decide::lease(
                record.lease_owner.as_deref(),
                record.lease_expires_at_ms,
                owner,
                now_ms(),
                holder::liveness,
            );
            match decision {
                LeaseDecision::Held {
                    holder,
                    expires_at_ms,
                } => {
                    return Ok((
                        false,
                        OpLeaseOutcome::Held {
                            owner: holder,
                            expires_at_ms,
                        },
                    ));
                }
                LeaseDecision::Ours => {}
                LeaseDecision::TakeOver { holder } => {
                    super::log_takeover(&format!("{job} {op}"), &holder, owner);
                    record.lease_token += 1;
                }
                LeaseDecision::Free => record.lease_token += 1,
            }
            let expires = now_ms() + ttl.as_millis() as i64;
            record.lease_owner = Some(owner.to_owned());
            record.lease_expires_at_ms = Some(expires);
            Ok((
                true,
                OpLeaseOutcome::Acquired(OpLease {
                    job: job.to_owned(),
                    op: op.to_owned(),
                    owner: owner.to_owned(),
                    token: record.lease_token,
                    expires_at_ms: expires,
                }),
            ))
        })
    }

    async fn renew_op_lease(&self, lease: &OpLease, ttl: Duration) -> Result<OpLease> {
        self.with_fenced_op(lease, |record| {
            let expires = now_ms() + ttl.as_millis() as i64;
            record.lease_expires_at_ms = Some(expires);
            OpLease {
                expires_at_ms: expires,
                ..lease.clone()
            }
        })
    }

    async fn release_op_lease(&self, lease: &OpLease) -> Result<()> {
        match self.with_fenced_op(lease, |record| {
            record.lease_owner = None;
            record.lease_expires_at_ms = None;
        }) {
            Err(e) if e.code() == Code::StateFenced => Ok(()),
            other => other,
        }
    }

    async fn record_op(&self, lease: &OpLease, last: &serde_json::Value) -> Result<()> {
        self.with_fenced_op(lease, |record| record.last = Some(last.clone()))
    }

    async fn list_ops(&self, job: &str) -> Result<Vec<OpRecord>> {
        if !self.dir.join("ops").join(format!("{job}.json")).exists() {
            return Ok(Vec::new());
        }
        self.with_ops(job, |doc| Ok((false, doc.ops.values().cloned().collect())))
    }

    async fn list_jobs(&self) -> Result<Vec<String>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.dir, e)),
        };
        let mut jobs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, e))?;
            let name = entry.file_name();
            let Some(job) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            // Temporary files of an interrupted write start with a dot.
            if !job.is_empty() && !job.starts_with('.') && entry.path().is_file() {
                jobs.push(job.to_owned());
            }
        }
        jobs.sort();
        Ok(jobs)
    }

    async fn runs_since(&self, job: &str, since: &str) -> Result<Vec<RunRecord>> {
        self.with_doc(job, |doc| {
            let runs = doc.runs.range(since.to_owned()..).map(|(_, r)| r.clone());
            Ok((false, runs.collect()))
        })
    }

    async fn show(&self, job: &str) -> Result<serde_json::Value> {
        self.with_doc(job, |doc| {
            let value = serde_json::to_value(&*doc)
                .map_err(|e| Error::new(Code::Internal, "encoding state").source(e))?;
            Ok((false, value))
        })
    }
}

fn chunk_key(table: &str, chunk: u32) -> String {
    format!("{table}#{chunk:06}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("j.json"), b"{not json").unwrap();
        let store = LocalStateStore::new(dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let err = rt.block_on(store.load_checkpoint("j")).unwrap_err();
        assert_eq!(err.code(), Code::StateCorrupt);
    }

    #[test]
    fn claims_are_store_wide_and_first_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = LocalStateStore::new(dir.path()).unwrap();
        let b = LocalStateStore::new(dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(
                a.claim("pg:h:5432/db/slot/s", "one").await.unwrap(),
                ClaimOutcome::Ours
            );
            assert_eq!(
                a.claim("pg:h:5432/db/slot/s", "one").await.unwrap(),
                ClaimOutcome::Ours
            );
            assert_eq!(
                b.claim("pg:h:5432/db/slot/s", "two").await.unwrap(),
                ClaimOutcome::HeldBy("one".into())
            );
            assert_eq!(
                b.claim("pg:h:5432/db/slot/t", "two").await.unwrap(),
                ClaimOutcome::Ours
            );
            let claims = b.list_claims().await.unwrap();
            let jobs: Vec<_> = claims.iter().map(|c| c.job.as_str()).collect();
            assert_eq!(jobs, ["one", "two"]);
        });
    }
}
