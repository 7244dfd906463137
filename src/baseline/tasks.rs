//! The four baseline tasks — anchor, plan, chunk, finish — with typed payloads. The CLI
//! runs them in one process; the Step Functions machine runs each as a Lambda
//! invocation (`action: baseline.<task>`) with exactly these payload shapes.
//!
//! Guarantees: the anchor is created and recorded before any row is read, so every
//! change after it is in the stream (overlap, never a gap); the plan is stored once
//! (`<table>/snapshot/<plan id>/_plan.json`, one folder per anchoring) and reused by every retry, so chunks never shift and
//! every retry of `baseline.plan` hands over the same chunk list (inline or through S3,
//! see [`super::delivery`]); a chunk is recorded done only after its part is durable, a
//! retried chunk adopts an existing part instead of writing a second one, and the first
//! chunk record wins (both in [`crate::commit::commit_chunk`]); the snapshot's `_manifest.json` and `_SUCCESS` are written only
//! when every chunk is done.

use std::collections::BTreeMap;

use crate::backends::Backends;
use crate::change::{ChangeEvent, Op};
use crate::commit::{ChunkId, Committer, Start, commit_chunk};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::parts::{
    MANIFEST_FILE, Manifest, ManifestPart, ManifestRun, ManifestStatus, PartSettings, PartWriter,
};
use crate::position::Position;
use crate::source::baseline_read::ChunkBounds;
use crate::source::open_baseline_reader;
use crate::state::text_form::with_text_columns;
use crate::state::{
    BaselineRecord, BaselineStatus, ChunkRecord, Lease, Leased, now_ms, with_lease,
};

use super::plan::Plan;

/// What the tasks take and return, the documents the state machine passes between them.
pub use super::messages::{
    AnchorOutput, ChunkInput, ChunkOutput, ChunkTask, FinishOutput, PlanMode, PlanOutput,
    TableBaseline,
};

/// The id of one anchoring of a table's baseline: the anchoring run's id (so folders
/// sort in the order the baselines were anchored) and the anchor, as one path segment.
/// A baseline anchored again — after `--reset`, or after the job's state was removed —
/// gets a new id even where the log repeats a position, so its plan and parts never meet
/// an earlier baseline's.
pub fn plan_id(record: &BaselineRecord) -> String {
    plan_id_of(&record.run_id, &record.anchor)
}

/// The plan id of a baseline anchored by run `run_id` at the tagged position `anchor`:
/// plan ids sort by the anchoring run.
pub fn plan_id_of(run_id: &str, anchor: &str) -> String {
    let anchor: String = anchor
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{run_id}_{anchor}")
}

/// The folder of one anchoring's plan and parts: `<table>/snapshot/<plan id>/`.
pub fn plan_folder(table: &str, plan_id: &str) -> String {
    format!("{table}/snapshot/{plan_id}/")
}

/// The identity stamped into a snapshot part's metadata
/// ([`crate::parts::part::IDENTITY_METADATA_KEY`]).
fn part_identity(plan_id: &str) -> String {
    format!("plan:{plan_id}")
}

fn plan_key(table: &str, plan_id: &str) -> String {
    format!("{}_plan.json", plan_folder(table, plan_id))
}

/// Where earlier versions kept the plan: one per table, whatever the anchor. Read only
/// for a baseline that already has chunk records (it was started by that version); a
/// table without any is planned afresh, so a stale plan is never reused.
fn legacy_plan_key(table: &str) -> String {
    format!("{table}/snapshot/_plan.json")
}

/// The stored plan of `record`'s anchoring, if any (the legacy one under the rule of
/// [`legacy_plan_key`]).
async fn stored_plan(
    config: &Config,
    backends: &Backends,
    record: &BaselineRecord,
) -> Result<Option<Plan>> {
    let table = &record.table;
    if let Some(plan) = own_plan(backends, record).await? {
        return Ok(Some(plan));
    }
    let legacy = legacy_plan_key(table);
    let Some(bytes) = backends.destination.get(&legacy).await? else {
        return Ok(None);
    };
    let plan = Plan::parse(&legacy, &bytes)?;
    for n in 1..=plan.chunks.len() as u32 {
        if backends
            .state
            .load_chunk(&config.job, table, n)
            .await?
            .is_some()
        {
            tracing::info!(table = %table, plan = %legacy, "resuming a baseline planned by an earlier sluice");
            return Ok(Some(plan));
        }
    }
    tracing::warn!(table = %table, plan = %legacy,
        "ignoring a chunk plan no chunk record of this baseline refers to (an earlier baseline's); planning afresh");
    Ok(None)
}

/// The plan stored in `record`'s own plan folder, if any.
async fn own_plan(backends: &Backends, record: &BaselineRecord) -> Result<Option<Plan>> {
    let key = plan_key(&record.table, &plan_id(record));
    match backends.destination.get(&key).await? {
        Some(bytes) => Plan::parse(&key, &bytes).map(Some),
        None => Ok(None),
    }
}

/// Why a baseline is given up.
enum GiveUp<'a> {
    /// The table no longer has the shape its plan was made under.
    Reshaped(&'a str),
    /// A value read does not fit its column's typed form: the column moves to its text
    /// form, a shape the plan was not made under.
    Unfit(&'a crate::change::UnfitValue),
}

/// Gives up `record`'s baseline (`why`): the table's re-baseline is wanted anew, so it
/// starts over at a new anchor with a new plan id, and the rows read so far (of the old
/// shape) are never in a manifest. Until it is anchored, drains skip the table's changes.
async fn abandon(
    config: &Config,
    backends: &Backends,
    record: &BaselineRecord,
    why: GiveUp<'_>,
) -> Result<()> {
    let (reason, text_column) = match why {
        GiveUp::Reshaped(change) => (
            format!("the table's shape changed while its baseline was read: {change}"),
            None,
        ),
        GiveUp::Unfit(unfit) => (
            format!("{unfit}; the column moves to its text form"),
            Some(unfit.column.as_str()),
        ),
    };
    tracing::warn!(code = Code::SourceTableRebaselined.as_str(), table = %record.table,
        plan = %plan_id(record), reason = %reason,
        "the baseline starts over at a new anchor (the chunks read so far have the old shape)");
    crate::state::rebaseline::request(
        backends.state.as_ref(),
        &config.job,
        &config.source.tables,
        crate::state::rebaseline::Ask {
            table: &record.table,
            at: &record.anchor,
            reason: &reason,
            asker: crate::state::rebaseline::Asker::Drain,
            text_column,
        },
    )
    .await?;
    Ok(())
}

/// Step ①: creates (or adopts) the stream's anchor and records it for every table that
/// has no baseline record yet.
pub async fn anchor(config: &Config, backends: &Backends) -> Result<AnchorOutput> {
    let run_id = crate::run_id::new_run_id();
    let owner = crate::state::holder::owner(&run_id, Some("baseline-anchor"));
    let leased = with_lease(
        backends.state.as_ref(),
        &config.job,
        &owner,
        config.lease.ttl(),
        |lease| anchor_under_lease(config, backends, lease, &run_id),
    )
    .await?;
    match leased {
        Leased::Ran(output) => Ok(output),
        Leased::Held { owner, .. } => Err(Error::new(
            Code::StateLeaseHeld,
            format!(
                "job {}: the lease is held by {owner}; the anchor needs it briefly",
                config.job
            ),
        )
        .hint("retry when the running drain ends (Step Functions retries this automatically)")),
    }
}

async fn anchor_under_lease(
    config: &Config,
    backends: &Backends,
    lease: Lease,
    run_id: &str,
) -> Result<AnchorOutput> {
    let state = backends.state.as_ref();
    let position = match state.load_checkpoint(&config.job).await? {
        Some(cp) => Position::parse_tagged(&cp.position)?,
        None => {
            crate::claims::guard_first_start(config, state).await?;
            let stream = crate::source::open(config, None).await?;
            let info = stream.info().clone();
            let mut committer = Committer::new(
                backends,
                lease,
                config.lease.ttl(),
                run_id.to_owned(),
                info.source_identity.clone(),
                Start::default(),
            );
            committer.first_checkpoint(info.start.clone()).await?;
            info.start
        }
    };
    let wanted =
        crate::state::rebaseline::wanted(state, &config.job, &config.source.tables).await?;
    if !wanted.is_empty() {
        return reanchor(config, backends, &wanted, position, run_id).await;
    }
    // A re-baseline anchored and not done is resumed; tables without a record stay so.
    let pending =
        crate::state::rebaseline::pending(state, &config.job, &config.source.tables).await?;
    if let Some(first) = pending.first() {
        return Ok(AnchorOutput {
            anchor: first.anchor.clone(),
            tables: pending.iter().map(|r| r.table.clone()).collect(),
        });
    }
    let fresh = position.just_before().to_string();
    let mut anchor = None;
    for table in &config.source.tables {
        if let Some(existing) = state.load_baseline(&config.job, table).await? {
            anchor.get_or_insert(existing.anchor);
        } else {
            anchor.get_or_insert_with(|| fresh.clone());
            let record = BaselineRecord::next(
                table,
                BaselineStatus::Anchored,
                fresh.clone(),
                run_id.to_owned(),
                None,
                None,
            );
            state.put_baseline(&config.job, &record).await?;
            tracing::info!(table = %table, anchor = %fresh, "baseline anchored");
        }
    }
    Ok(AnchorOutput {
        anchor: anchor.unwrap_or(fresh),
        tables: config.source.tables.clone(),
    })
}

/// Anchors every table whose re-baseline is wanted anew at the job's checkpoint
/// `checkpoint` (read under the lease, so no drain moves it meanwhile): its record is
/// replaced by an `anchored` one at the [`epoch`](super::epoch) of the checkpoint, with a
/// new plan id, and its earlier chunk records are dropped. Every other table's record is
/// left as it is.
async fn reanchor(
    config: &Config,
    backends: &Backends,
    wanted: &[BaselineRecord],
    checkpoint: Position,
    run_id: &str,
) -> Result<AnchorOutput> {
    let epoch = super::epoch::at_checkpoint(checkpoint.clone())?;
    let anchor = epoch.anchor.to_string();
    for record in wanted {
        let anchored = BaselineRecord::next(
            &record.table,
            BaselineStatus::Anchored,
            anchor.clone(),
            run_id.to_owned(),
            Some(
                record
                    .reason
                    .clone()
                    .unwrap_or_else(|| "re-baseline asked".to_owned()),
            ),
            Some(record),
        );
        backends
            .state
            .replace_snapshot(&config.job, &anchored)
            .await?;
        tracing::info!(table = %record.table, %anchor, %checkpoint, reason = ?anchored.reason,
            "re-baseline anchored at the job's checkpoint");
    }
    Ok(AnchorOutput {
        anchor,
        tables: wanted.iter().map(|r| r.table.clone()).collect(),
    })
}

/// The records of the baseline in progress: every table with a record that is not
/// `wanted` (a table without one is not part of it — it is anchored by a baseline of all
/// tables; a wanted one waits for its anchor). Refuses when no table has a record (the
/// anchor step has not run).
async fn current_records(config: &Config, backends: &Backends) -> Result<Vec<BaselineRecord>> {
    let mut records = Vec::new();
    let mut wanted = false;
    for table in &config.source.tables {
        if let Some(record) = backends.state.load_baseline(&config.job, table).await? {
            if record.status == BaselineStatus::Wanted {
                wanted = true;
            } else {
                records.push(record);
            }
        }
    }
    if records.is_empty() && !wanted {
        let first = config.source.tables.first().map_or("", String::as_str);
        return Err(not_anchored(first));
    }
    Ok(records)
}

/// Writes a re-baseline's epoch marker — one `__op = 'rebaseline'` row at the
/// [`epoch`](super::epoch)'s marker position, every table column NULL — as
/// `part-000000.parquet` of the plan folder and records it as chunk 0 (once: a retry
/// adopts the part an earlier attempt wrote). Finish writes it, after every chunk.
async fn write_marker(
    config: &Config,
    backends: &Backends,
    record: &BaselineRecord,
    schema: std::sync::Arc<crate::change::TableSchema>,
) -> Result<()> {
    let table = &record.table;
    if backends
        .state
        .load_chunk(&config.job, table, MARKER_CHUNK)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let plan = plan_id(record);
    let marker = super::epoch::marker_of(Position::parse_tagged(&record.anchor)?)?;
    let settings = PartSettings::of(config);
    let mut writer = PartWriter::new(
        table,
        format!("{}part-", plan_folder(table, &plan)),
        MARKER_CHUNK,
        settings,
    )?
    .with_identity(part_identity(&plan));
    let columns = schema.columns.len();
    writer.append(&ChangeEvent {
        table: schema,
        op: Op::Rebaseline,
        pos: marker.sortable_text().into(),
        seq: 0,
        commit_ts: None,
        image: vec![crate::change::Value::Null; columns],
        unlogged: vec![],
    })?;
    let id = ChunkId {
        job: &config.job,
        table,
        chunk: MARKER_CHUNK,
        identity: &part_identity(&plan),
    };
    commit_chunk(backends, id, writer.finish()?).await?;
    tracing::info!(table = %table, marker = %marker, "re-baseline epoch marker written");
    Ok(())
}

/// The `__seq` of a keyless baseline's marker: the highest, so the marker sorts after
/// every change at its position (all of them are in the snapshot).
pub const KEYLESS_MARKER_SEQ: u64 = i64::MAX as u64;

/// The chunk number of a re-baseline's epoch marker (real chunks count from 1).
const MARKER_CHUNK: u32 = 0;

/// The `baseline.plan` task: [`plan_chunks`], handed to the state machine inline or
/// through S3 ([`super::delivery::deliver`]).
pub async fn plan(config: &Config, backends: &Backends) -> Result<PlanOutput> {
    let chunks = plan_chunks(config, backends).await?;
    super::delivery::deliver(config, backends.destination.as_ref(), chunks).await
}

/// Step ②a: the chunk list of every table not yet done (planned once, then reused).
pub async fn plan_chunks(config: &Config, backends: &Backends) -> Result<Vec<ChunkTask>> {
    let state = backends.state.as_ref();
    let config = &*with_text_columns(config, state).await?;
    let mut source = None;
    let mut chunks = Vec::new();
    for record in current_records(config, backends).await? {
        let name = record.table.clone();
        let table = &name;
        if record.status == BaselineStatus::Done {
            continue;
        }
        let bounds: Vec<ChunkBounds> = match stored_plan(config, backends, &record).await? {
            Some(plan) => plan.chunks,
            None => {
                if source.is_none() {
                    source = Some(open_baseline_reader(config).await?);
                }
                let source = source.as_mut().expect("opened above");
                let planned = Plan::new(
                    source.plan(table, config.baseline.chunk_rows).await?,
                    &*source.schema(table)?,
                );
                backends
                    .destination
                    .put_marker(&plan_key(table, &plan_id(&record)), &planned.to_json()?)
                    .await?;
                planned.chunks
            }
        };
        state
            .put_baseline(
                &config.job,
                &BaselineRecord {
                    status: BaselineStatus::Running,
                    updated_at_ms: now_ms(),
                    ..record.clone()
                },
            )
            .await?;
        for (i, bounds) in bounds.into_iter().enumerate() {
            chunks.push(ChunkTask {
                table: table.clone(),
                chunk: i as u32 + 1,
                bounds,
                anchor: record.anchor.clone(),
            });
        }
    }
    Ok(chunks)
}

fn not_anchored(table: &str) -> Error {
    Error::new(
        Code::BaselineNotAnchored,
        format!("table {table} has no baseline anchor"),
    )
    .hint("run the anchor step first (`sluice baseline` does all steps in order)")
}

/// Step ②b: reads one chunk into its snapshot part and records it done — only while the
/// table has the shape its plan was made under, checked before the read and again after
/// it (a DDL waits for a running read, so both checks passing means the whole chunk was
/// read under that shape). A table whose shape changed has its baseline given up
/// ([`abandon`]): the chunk reports `abandoned` and writes nothing, as does every other
/// chunk of that plan.
pub async fn chunk(config: &Config, backends: &Backends, task: &ChunkTask) -> Result<ChunkOutput> {
    let state = backends.state.as_ref();
    let config = &*with_text_columns(config, state).await?;
    if let Some(done) = state
        .load_chunk(&config.job, &task.table, task.chunk)
        .await?
    {
        return Ok(output_of(&done));
    }
    let record = state
        .load_baseline(&config.job, &task.table)
        .await?
        .ok_or_else(|| not_anchored(&task.table))?;
    let planned = own_plan(backends, &record).await?;
    let bounds_planned = planned.as_ref().is_none_or(|p| {
        (task.chunk as usize)
            .checked_sub(1)
            .and_then(|i| p.chunks.get(i))
            == Some(&task.bounds)
    });
    if record.anchor != task.anchor || !bounds_planned {
        return Err(Error::new(
            Code::BaselineNotAnchored,
            format!(
                "table {}: chunk {} (anchor {}) is not a chunk of the table's current baseline (plan {}, anchored at {})",
                task.table, task.chunk, task.anchor, plan_id(&record), record.anchor
            ),
        )
        .hint("this task belongs to an earlier baseline (an old Step Functions execution or chunk list): stop it; the current baseline's own execution reads its chunks"));
    }
    if record.status == BaselineStatus::Wanted {
        return Ok(abandoned(task));
    }
    let plan = plan_id(&record);
    let changed =
        |schema: &crate::change::TableSchema| planned.as_ref().and_then(|p| p.changed(schema));
    let mut source = open_baseline_reader(config).await?;
    let schema = source.schema(&task.table)?;
    if let Some(change) = changed(&schema) {
        abandon(config, backends, &record, GiveUp::Reshaped(&change)).await?;
        return Ok(abandoned(task));
    }
    crate::faults::hit(crate::faults::FaultPoint::ChunkOpened).await?;
    let settings = PartSettings {
        rollover_rows: u64::MAX,
        rollover_bytes: u64::MAX,
        ..PartSettings::of(config)
    };
    let mut writer = PartWriter::new(
        &task.table,
        format!("{}part-", plan_folder(&task.table, &plan)),
        task.chunk,
        settings,
    )?
    .with_identity(part_identity(&plan));
    let anchor = Position::parse_tagged(&task.anchor)?;
    // A table without a key is one consistent read at an exact point: its part starts
    // with a `rebaseline` marker there (every change at or before it is in the rows) and
    // numbers its rows, so identical rows stay distinct rows.
    let point = source.snapshot_point(&task.table, &anchor).await?;
    let pos: std::sync::Arc<str> = point.as_ref().unwrap_or(&anchor).sortable_text().into();
    if point.is_some() {
        writer.append(&ChangeEvent {
            table: schema.clone(),
            op: Op::Rebaseline,
            pos: pos.clone(),
            seq: KEYLESS_MARKER_SEQ,
            commit_ts: None,
            image: vec![crate::change::Value::Null; schema.columns.len()],
            unlogged: vec![],
        })?;
    }
    let numbered = point.is_some();
    let mut ordinal = 0u64;
    let mut sink = |image| {
        let event = ChangeEvent {
            table: schema.clone(),
            op: Op::Snapshot,
            pos: pos.clone(),
            seq: if numbered { ordinal } else { 0 },
            commit_ts: None,
            image,
            unlogged: vec![],
        };
        ordinal += 1;
        match writer.append(&event)? {
            None => Ok(()),
            Some(_) => Err(Error::new(
                Code::Internal,
                "a snapshot chunk changed schema mid-read",
            )),
        }
    };
    let read = source
        .read_chunk(&task.table, &task.bounds, &mut sink)
        .await;
    // After the read (and after a failed one, which a DDL may have caused: a column
    // renamed or dropped under the SELECT), the shape is read again.
    let after = source.current_schema(&task.table).await;
    if let Ok(after) = &after
        && let Some(change) = changed(after)
    {
        abandon(config, backends, &record, GiveUp::Reshaped(&change)).await?;
        return Ok(abandoned(task));
    }
    if let Err(e) = &read
        && let Some(unfit) = crate::change::UnfitValue::of(e)
    {
        abandon(config, backends, &record, GiveUp::Unfit(unfit)).await?;
        return Ok(abandoned(task));
    }
    read?;
    after?;
    let id = ChunkId {
        job: &config.job,
        table: &task.table,
        chunk: task.chunk,
        identity: &part_identity(&plan),
    };
    let stored = commit_chunk(backends, id, writer.finish()?).await?;
    Ok(output_of(&stored))
}

/// The output of a chunk of a baseline given up: nothing read, nothing written.
fn abandoned(task: &ChunkTask) -> ChunkOutput {
    ChunkOutput {
        table: task.table.clone(),
        chunk: task.chunk,
        rows: 0,
        part_key: String::new(),
        abandoned: true,
    }
}

fn output_of(record: &ChunkRecord) -> ChunkOutput {
    ChunkOutput {
        table: record.table.clone(),
        chunk: record.chunk,
        rows: record.rows,
        part_key: record.part_key.clone(),
        abandoned: false,
    }
}

/// Step ③: once every chunk is done, commits each table's snapshot parts to its Iceberg
/// table (with `table_format: iceberg`), writes its snapshot manifest and `_SUCCESS` and
/// marks its baseline done.
pub async fn finish(config: &Config, backends: &Backends) -> Result<FinishOutput> {
    let state = backends.state.as_ref();
    let config = &*with_text_columns(config, state).await?;
    let mut tables = BTreeMap::new();
    let mut restarted = Vec::new();
    // Opened once, for the first table that needs its shape.
    let mut source = None;
    for record in current_records(config, backends).await? {
        let name = record.table.clone();
        let table = &name;
        let Some(plan) = stored_plan(config, backends, &record).await? else {
            return Err(Error::new(
                Code::BaselineIncomplete,
                format!("table {table} has no chunk plan yet"),
            )
            .hint("run the plan step first (`sluice baseline` does all steps in order)"));
        };
        let mut parts = Vec::new();
        let mut missing = Vec::new();
        let mut rows = 0;
        for n in 1..=plan.chunks.len() as u32 {
            match state.load_chunk(&config.job, table, n).await? {
                Some(chunk) => {
                    rows += chunk.rows;
                    if !chunk.part_key.is_empty() {
                        parts.push(ManifestPart {
                            key: chunk.part_key.clone(),
                            rows: chunk.rows,
                            bytes: chunk.bytes,
                            checksum: chunk.checksum.clone(),
                            first_pos: record_pos(&record.anchor)?,
                            last_pos: record_pos(&record.anchor)?,
                            partition: None,
                            shape: None,
                        });
                    }
                }
                None => missing.push(n),
            }
        }
        // Every chunk read: the manifest names the table's shape now, which must be the
        // plan's — the shape every chunk was read under — or the baseline starts over.
        let schema = if missing.is_empty() && record.status != BaselineStatus::Done {
            if source.is_none() {
                source = Some(open_baseline_reader(config).await?);
            }
            let schema = source.as_ref().expect("opened above").schema(table)?;
            if let Some(change) = plan.changed(&schema) {
                abandon(config, backends, &record, GiveUp::Reshaped(&change)).await?;
                restarted.push(table.clone());
                continue;
            }
            Some(schema)
        } else {
            None
        };
        // The epoch marker is written last, once every chunk is: until then a reader of
        // the folder sees the table's earlier rows with the new snapshot's rows read so
        // far on top of them (each at least as new), never a partial table.
        if let Some(schema) = &schema
            && record.reason.is_some()
        {
            write_marker(config, backends, &record, schema.clone()).await?;
        }
        if record.reason.is_some() {
            let marker = state
                .load_chunk(&config.job, table, MARKER_CHUNK)
                .await?
                .filter(|m| !m.part_key.is_empty());
            match marker {
                Some(m) => {
                    let pos = super::epoch::marker_of(Position::parse_tagged(&record.anchor)?)?
                        .sortable_text();
                    parts.insert(
                        0,
                        ManifestPart {
                            key: m.part_key.clone(),
                            rows: m.rows,
                            bytes: m.bytes,
                            checksum: m.checksum.clone(),
                            first_pos: pos.clone(),
                            last_pos: pos,
                            partition: None,
                            shape: None,
                        },
                    );
                }
                None => missing.push(MARKER_CHUNK),
            }
        }
        if !missing.is_empty() {
            return Err(Error::new(
                Code::BaselineIncomplete,
                format!("table {table}: chunks {missing:?} of {} are not done", plan.chunks.len()),
            )
            .hint("run the missing chunks (re-run `sluice baseline`, or redrive the Step Functions execution)"));
        }
        if let Some(schema) = schema {
            let run = ManifestRun {
                job: config.job.clone(),
                table: table.clone(),
                run_id: record.run_id.clone(),
                status: ManifestStatus::Drained,
                from: record.anchor.clone(),
                to: record.anchor.clone(),
            };
            let dest = backends.destination.as_ref();
            // Before the baseline is marked done: a failed commit leaves it running, and
            // the next finish commits again (once per plan: crate::iceberg).
            if let Some(log) = crate::iceberg::ChangeLog::of(config, dest)? {
                let schemas = [schema.clone()];
                log.baseline(table, &plan_id(&record), &parts, &schemas)
                    .await?;
            }
            let policies = crate::policy::Policies::of(config)?;
            let manifest = Manifest::new(run, parts, &schema, chrono::Utc::now())
                .with_policy(crate::policy::record::of(config, &policies, table));
            dest.put_marker(
                &format!("{table}/snapshot/{MANIFEST_FILE}"),
                &manifest.to_json_bytes()?,
            )
            .await?;
            let success = serde_json::json!({ "anchor": record.anchor, "plan": plan_id(&record), "rows": rows });
            dest.put_marker(
                &format!("{table}/snapshot/_SUCCESS"),
                success.to_string().as_bytes(),
            )
            .await?;
            let done = BaselineRecord {
                status: BaselineStatus::Done,
                updated_at_ms: now_ms(),
                ..record
            };
            state.put_baseline(&config.job, &done).await?;
            tracing::info!(table = %table, rows, chunks = plan.chunks.len(), "baseline done");
        }
        tables.insert(
            table.clone(),
            TableBaseline {
                chunks: plan.chunks.len() as u32,
                rows,
            },
        );
    }
    Ok(FinishOutput { tables, restarted })
}

fn record_pos(anchor: &str) -> Result<String> {
    Ok(Position::parse_tagged(anchor)?.sortable_text())
}
