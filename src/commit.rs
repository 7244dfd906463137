//! The durable order, written once: **part durable → fenced checkpoint → ack**.
//!
//! This module is the only place that makes a part durable — a part of the change stream
//! or of a baseline chunk, uploaded to the destination — and the only caller of
//! [`StateStore::advance_checkpoint`]. Named fault points ([`crate::faults`]) sit between
//! the steps. (An Iceberg commit to an S3 Tables warehouse, [`crate::iceberg`], copies
//! parts already durable here into the warehouse before it commits; a copy is not a new
//! part.)
//!
//! * The change stream goes through a [`Committer`], which owns the run's lease, the
//!   checkpoint version and the stream's acknowledgement. Parts are uploaded
//!   ([`Committer::make_durable`]) before any checkpoint that covers them; the checkpoint
//!   write is conditional on the lease token and the previous version (a lost lease stops
//!   the run with `SLUICE_STATE_FENCED` before anything is acked); the source is acked
//!   only up to a position the checkpoint already holds; checkpoints only move forward.
//! * A baseline chunk goes through [`commit_chunk`]: its part is uploaded (or the part an
//!   earlier attempt of the same chunk left is adopted — parts are never overwritten),
//!   then the chunk is recorded done (the first record wins). Chunks are not fenced by
//!   the lease: they run in parallel with each other and with drains, and a chunk's part
//!   is keyed by its plan (the anchoring it belongs to) and chunk number, so two attempts
//!   can only agree. A part is adopted only when the identity in its metadata
//!   (`sluice.identity`) is the chunk's own: an earlier baseline's output is never taken
//!   for this one's (`SLUICE_DESTINATION_EXISTS` names the key to move instead).

use std::time::{Duration, Instant};

use crate::backends::Backends;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::faults::{FaultPoint, hit};
use crate::parts::FinishedPart;
use crate::position::Position;
use crate::source::ChangeStream;
use crate::state::{Checkpoint, CheckpointWrite, ChunkRecord, Lease, StateStore, now_ms};

/// Where a run's checkpoint stands when it starts.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// Version of the stored checkpoint (0 = none yet).
    pub version: u64,
    /// The stored checkpoint position, if any.
    pub position: Option<Position>,
    /// The source identity the stored checkpoint was written with (after a failover, the
    /// former primary's until this stream's first checkpoint).
    pub identity: Option<String>,
}

impl Start {
    /// The start a stored checkpoint describes (none: a new stream).
    pub fn of(stored: Option<&Checkpoint>) -> Result<Start> {
        Ok(match stored {
            None => Start::default(),
            Some(cp) => Start {
                version: cp.version,
                position: Some(Position::parse_tagged(&cp.position)?),
                identity: Some(cp.source_identity.clone()),
            },
        })
    }
}

/// The durable-order state of one run of the stream.
pub struct Committer<'a> {
    state: &'a dyn StateStore,
    destination: &'a dyn Destination,
    lease: Lease,
    ttl: Duration,
    run_id: String,
    source_identity: String,
    /// Version of the stored checkpoint (0 = none yet).
    version: u64,
    /// The stored checkpoint position, if any.
    checkpoint: Option<Position>,
    /// The source identity the stored checkpoint was written with, if any.
    checkpoint_identity: Option<String>,
    /// The position the source has been acked to.
    acked: Option<Position>,
    lease_renewed: Instant,
}

impl<'a> Committer<'a> {
    /// A committer for a run of the stream of `source_identity` holding `lease` (renewed
    /// for `ttl` at every checkpoint), starting from `start`.
    pub fn new(
        backends: &'a Backends,
        lease: Lease,
        ttl: Duration,
        run_id: String,
        source_identity: String,
        start: Start,
    ) -> Self {
        Committer {
            state: backends.state.as_ref(),
            destination: backends.destination.as_ref(),
            lease,
            ttl,
            run_id,
            source_identity,
            version: start.version,
            acked: start.position.clone(),
            checkpoint: start.position,
            checkpoint_identity: start.identity,
            lease_renewed: Instant::now(),
        }
    }

    /// The run's id (in part keys, checkpoints and run records).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The source identity the run's checkpoints are written with.
    pub fn source_identity(&self) -> &str {
        &self.source_identity
    }

    /// The stored checkpoint position, if any.
    pub fn checkpoint(&self) -> Option<Position> {
        self.checkpoint.clone()
    }

    /// The source identity the stored checkpoint was written with, if any.
    pub fn checkpoint_identity(&self) -> Option<&str> {
        self.checkpoint_identity.as_deref()
    }

    /// Step 1: uploads a finished part of the stream; durable on return. The local file
    /// is removed afterwards whether or not the upload succeeded (a retry rebuilds it from
    /// the log). A key that already exists is `SLUICE_DESTINATION_EXISTS`.
    pub async fn make_durable(&self, part: FinishedPart) -> Result<()> {
        upload(self.destination, part).await?;
        hit(FaultPoint::PartDurable).await
    }

    /// Writes a new stream's first checkpoint at `position` without acking the source:
    /// the baseline's anchor, taken before anything is read (so no part can be missing
    /// from it, and no fault point is needed between steps that do not exist yet).
    pub async fn first_checkpoint(&mut self, position: Position) -> Result<()> {
        if self.ahead(&position)? {
            self.advance(position).await?;
        }
        Ok(())
    }

    /// A new stream's first checkpoint, at its start, written before anything is read
    /// (`before_checkpoint` is the fault point ahead of it): a first run that dies later
    /// resumes from there.
    pub async fn start_checkpoint(&mut self, position: Position) -> Result<()> {
        if self.ahead(&position)? {
            hit(FaultPoint::BeforeCheckpoint).await?;
            self.advance(position).await?;
        }
        Ok(())
    }

    /// Steps 2 and 3: moves the checkpoint to `position` (all parts covering it must
    /// already be durable), then acks the source up to it. A position at or behind the
    /// stored checkpoint only re-acks.
    pub async fn checkpoint_and_ack(
        &mut self,
        position: Position,
        stream: &mut dyn ChangeStream,
    ) -> Result<()> {
        if self.ahead(&position)? {
            hit(FaultPoint::BeforeCheckpoint).await?;
            self.advance(position).await?;
            hit(FaultPoint::CheckpointWritten).await?;
        }
        let needs_ack = match (&self.acked, &self.checkpoint) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(acked), Some(cp)) => acked < cp,
        };
        if needs_ack && let Some(cp) = self.checkpoint.clone() {
            stream.ack(&cp).await?;
            self.acked = Some(cp);
            hit(FaultPoint::SourceAcked).await?;
        }
        Ok(())
    }

    /// True when `position` is past the stored checkpoint (checkpoints only move forward).
    fn ahead(&self, position: &Position) -> Result<bool> {
        match &self.checkpoint {
            None => Ok(true),
            Some(current) => match position.partial_cmp(current) {
                Some(order) => Ok(order == std::cmp::Ordering::Greater),
                None => Err(Error::new(
                    Code::Internal,
                    format!("position {position} cannot be compared with checkpoint {current}"),
                )),
            },
        }
    }

    /// The fenced checkpoint write: the one call of [`StateStore::advance_checkpoint`].
    async fn advance(&mut self, position: Position) -> Result<()> {
        let write = CheckpointWrite {
            lease: &self.lease,
            ttl: self.ttl,
            expected_version: self.version,
            position: &position,
            source_identity: &self.source_identity,
            run_id: &self.run_id,
        };
        let (stored, lease) = self.state.advance_checkpoint(&write).await?;
        self.version = stored.version;
        self.lease = lease;
        self.lease_renewed = Instant::now();
        self.checkpoint = Some(position);
        self.checkpoint_identity = Some(self.source_identity.clone());
        Ok(())
    }

    /// Renews the lease now: `SLUICE_STATE_FENCED` when a newer run took it over. Called
    /// right before a step outside the state store that must not be taken by a fenced run
    /// (an Iceberg commit, which may drop snapshots past the checkpoint this run knows).
    pub async fn confirm_lease(&mut self) -> Result<()> {
        self.lease = self.state.renew_lease(&self.lease, self.ttl).await?;
        self.lease_renewed = Instant::now();
        Ok(())
    }

    /// Renews the lease when a third of its lifetime has passed since the last renewal.
    pub async fn keep_lease(&mut self) -> Result<()> {
        if self.lease_renewed.elapsed() >= self.ttl / 3 {
            self.lease = self.state.renew_lease(&self.lease, self.ttl).await?;
            self.lease_renewed = Instant::now();
        }
        Ok(())
    }
}

/// The baseline chunk being committed: which table and chunk number, and the identity
/// (`plan:<plan id>`) its part is stamped with.
#[derive(Debug, Clone, Copy)]
pub struct ChunkId<'a> {
    pub job: &'a str,
    pub table: &'a str,
    pub chunk: u32,
    pub identity: &'a str,
}

/// Makes a baseline chunk durable and records it done: uploads its part (`None`: the
/// chunk had no rows), adopting the part an earlier attempt of the same chunk left — only
/// when that part carries the chunk's identity; any other part under its key is refused
/// with `SLUICE_DESTINATION_EXISTS` — then records the chunk (the first record wins) and
/// returns the stored record.
pub async fn commit_chunk(
    backends: &Backends,
    id: ChunkId<'_>,
    part: Option<FinishedPart>,
) -> Result<ChunkRecord> {
    let mut record = ChunkRecord {
        table: id.table.to_owned(),
        chunk: id.chunk,
        rows: 0,
        part_key: String::new(),
        bytes: 0,
        checksum: String::new(),
        updated_at_ms: now_ms(),
    };
    if let Some(part) = part {
        record.rows = part.rows;
        record.part_key = part.key.clone();
        record.bytes = part.bytes;
        record.checksum = part.checksum.clone();
        match upload(backends.destination.as_ref(), part).await {
            Ok(()) => {}
            Err(e) if e.code() == Code::DestinationExists => {
                let bytes = backends
                    .destination
                    .get(&record.part_key)
                    .await?
                    .unwrap_or_default();
                record.bytes = bytes.len() as u64;
                let existing = part_facts(bytes)?;
                if existing.identity.as_deref() != Some(id.identity) {
                    return Err(Error::new(
                        Code::DestinationExists,
                        format!(
                            "{} in {} was written under {}, not under this baseline's {}",
                            record.part_key,
                            backends.destination.describe(),
                            existing.identity.as_deref().unwrap_or("no recorded identity"),
                            id.identity
                        ),
                    )
                    .hint(format!("parts are never overwritten or adopted from another baseline: move {} aside, then run the baseline again", record.part_key)));
                }
                record.rows = existing.rows;
                record.checksum = String::new();
                tracing::info!(key = %record.part_key, identity = %id.identity, "adopting the part an earlier attempt of this chunk wrote");
            }
            Err(e) => return Err(e),
        }
    }
    let stored = backends.state.put_chunk(id.job, &record).await?;
    tracing::info!(table = %id.table, chunk = id.chunk, rows = stored.rows, "baseline chunk done");
    hit(FaultPoint::ChunkDone).await?;
    Ok(stored)
}

/// Uploads `part` and removes its local file, whether or not the upload succeeded.
async fn upload(destination: &dyn Destination, part: FinishedPart) -> Result<()> {
    let uploaded = destination.put_part(&part.key, &part.local_path).await;
    if let Err(e) = part.discard() {
        tracing::warn!(error = %e, "could not remove a spilled part file");
    }
    uploaded
}

/// What [`commit_chunk`] reads from an existing part before adopting it.
struct PartFacts {
    rows: u64,
    /// The `sluice.identity` metadata (none in parts written by earlier versions).
    identity: Option<String>,
}

fn part_facts(bytes: Vec<u8>) -> Result<PartFacts> {
    use parquet::file::reader::FileReader;
    let reader =
        parquet::file::serialized_reader::SerializedFileReader::new(bytes::Bytes::from(bytes))
            .map_err(|e| {
                Error::new(Code::OutputWrite, "reading an existing snapshot part").source(e)
            })?;
    let meta = reader.metadata().file_metadata();
    let identity = meta
        .key_value_metadata()
        .into_iter()
        .flatten()
        .find(|kv| kv.key == crate::parts::part::IDENTITY_METADATA_KEY)
        .and_then(|kv| kv.value.clone());
    Ok(PartFacts {
        rows: meta.num_rows().max(0) as u64,
        identity,
    })
}
