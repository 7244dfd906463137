//! `sluice verify`: compares one table in the lake with the same table in the source, by
//! the baseline's key-range chunks, and names every key that differs (docs/verify.md).
//!
//! Guarantees:
//! * **the policy-applied source**: source rows are read through the job's column policies
//!   and row filters (the baseline reader's), so they are compared in the form the lake
//!   holds them; a row's column hashes are of its cells cast to the lake's types
//!   ([`compare`]);
//! * **no false difference under concurrent writes**: pass 1 reads each chunk (one short
//!   statement each, at no known position), drains the job so the lake holds every change
//!   committed before those reads, folds the lake and compares. A key can differ there only
//!   because it is wrong in the lake or because it changed in the source after its chunk
//!   was read. Every key that differs is **re-checked**: its chunk is read again inside one
//!   pinned read at an exact source position P ([`BaselineReader::pin_read`] — the keyless
//!   baseline's snapshot point: every change at or before P is in it, none after), the job
//!   is drained again (so the lake holds every change at or before P), and the lake is
//!   folded from its rows at or before P only. Source and lake then describe the same
//!   instant, so a key that still differs is a real difference — concurrent writes cannot
//!   cause it. A key pass 1 found equal is reported equal (it could only be wrong if a
//!   concurrent write made a wrong lake row right for the moment of the read: the next
//!   verify sees it);
//! * **never values**: a finding names its key and the columns that differ, and a keyless
//!   row its hash;
//! * **a table without a key** is one pinned read of the whole table at P against the lake
//!   folded at P, compared as a multiset of whole rows (counts per row hash);
//! * **sampling** (`--sample PCT`): evenly spread chunks, about PCT % of the plan; keys the
//!   lake holds outside the chunks read are not looked at (a full verify finds them); a
//!   table with an integer key is sampled by the walker's tasks ([`walk::walk_here`]), so
//!   only the sampled chunks' share of the lake is read;
//! * it writes nothing to the lake without `--repair` ([`repair`]), and runs under its own
//!   operation lease (`verify#<table>`), apart from the drain's.
//!
//! One invocation folds the lake's side whole in memory (the table's state, like a full
//! current-state build); a table too big for that is walked by chunks on Step Functions
//! ([`walk`]), each task folding only its key range's share of the lake ([`range`]).

pub mod compare;
pub mod range;
pub mod repair;
pub mod walk;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::DataType;
use arrow_select::filter::filter_record_batch;
use serde::{Deserialize, Serialize};

use crate::backends::Backends;
use crate::change::{ChangeEvent, Op, TableSchema, Value};
use crate::config::{Config, DestinationConfig, TableFormat};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::fold::{self, Shape};
use crate::lake::files as inputs;
use crate::parts::arrow_schema::POS;
use crate::position::Position;
use crate::source::baseline_read::{BaselineReader, ChunkBounds};
use compare::{CountFinding, Finding, Prints};

/// What `sluice verify` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    pub table: String,
    /// Percent of the chunks to read (`None`: all of them).
    pub sample: Option<f64>,
    /// Write the source's rows of the keys that differ into the lake, then verify again.
    pub repair: bool,
}

/// One chunk's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkReport {
    /// The chunk's number in the plan, from 1.
    pub chunk: usize,
    pub lower: Option<Vec<String>>,
    pub upper: Option<Vec<String>>,
    /// Source rows read in pass 1.
    pub rows: u64,
    pub equal: bool,
    pub differences: Vec<Finding>,
    /// The differing keys in arrow's binary row form (what a repair looks rows up by).
    #[serde(skip)]
    pub keys: Vec<Vec<u8>>,
}

/// The report of one verify of one table (the JSON report, `--json FILE`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyReport {
    pub job: String,
    pub table: String,
    /// `full` or `sample`.
    pub mode: String,
    pub chunks_planned: usize,
    pub chunks_read: usize,
    pub rows_read: u64,
    /// Keys pass 1 found different, re-checked at `position`.
    pub rechecked: usize,
    /// The exact source position of the re-check (or of a keyless table's read).
    pub position: Option<String>,
    /// Keys (keyless: row copies) that differ after the re-check.
    pub mismatched_rows: u64,
    pub chunks: Vec<ChunkReport>,
    /// A table without a key: the rows whose counts differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiset: Option<Vec<CountFinding>>,
    /// With `--repair`: the rows written, and the verify after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<repair::RepairReport>,
    pub duration_ms: u64,
}

impl VerifyReport {
    /// True when no difference remains (after a repair, the verify after it decides).
    pub fn clean(&self) -> bool {
        match &self.repair {
            Some(r) => r.after_mismatched_rows == 0,
            None => self.mismatched_rows == 0,
        }
    }

    /// The one-line summary: `verify job=… table=… status=equal|differs …`.
    pub fn to_line(&self) -> String {
        let status = if self.clean() { "equal" } else { "differs" };
        let mut line = format!(
            "verify job={} table={} status={status} mode={} chunks={} rows={} mismatched={} rechecked={} duration_ms={}",
            self.job,
            self.table,
            self.mode,
            self.chunks_read,
            self.rows_read,
            self.mismatched_rows,
            self.rechecked,
            self.duration_ms
        );
        if let Some(r) = &self.repair {
            line.push_str(&format!(
                " repaired={} after_mismatched={}",
                r.rows_written, r.after_mismatched_rows
            ));
        }
        line
    }

    /// The figures its metrics carry.
    pub fn metrics(&self) -> crate::metrics::VerifyMetrics<'_> {
        crate::metrics::VerifyMetrics {
            table: &self.table,
            chunks: self.chunks_read as u64,
            mismatched_rows: self
                .repair
                .as_ref()
                .map_or(self.mismatched_rows, |r| r.after_mismatched_rows),
            duration_ms: self.duration_ms,
        }
    }

    /// The process exit code: 0 when equal, `SLUICE_VERIFY_DIFFERS`'s otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.clean() {
            0
        } else {
            Code::VerifyDiffers.class().exit_code()
        }
    }
}

/// The operation key of verifying `table` (`verify#<table>`).
pub fn verify_op(table: &str) -> String {
    format!("verify#{table}")
}

/// Refuses an output verify cannot read back.
pub fn check_supported(config: &Config) -> Result<()> {
    if config.table_format == TableFormat::Iceberg {
        return Err(Error::new(
            Code::VerifyUnsupported,
            "sluice verify does not read an Iceberg change log yet (table_format: iceberg)",
        )
        .hint("verify a job whose table_format is parquet; compare an Iceberg table with its engine's own tools meanwhile"));
    }
    if matches!(config.destination, DestinationConfig::Stdout {}) {
        return Err(Error::new(
            Code::VerifyUnsupported,
            "a stdout destination keeps no lake to verify",
        )
        .hint("run sluice verify with the job's local or S3 destination"));
    }
    Ok(())
}

/// Verifies one table under its operation lease (`verify#<table>`); with `repair`, repairs
/// what differs and verifies again.
pub async fn run(
    config: &Config,
    backends: &Backends,
    options: &VerifyOptions,
) -> Result<VerifyReport> {
    check_options(config, options)?;
    // A sample of a table split by integer keys is walked: only the sampled chunks' key
    // ranges of the lake are read and folded, not the whole table.
    if options.sample.is_some() {
        let columns = crate::lake::shape::read(backends.destination.as_ref(), &options.table).await;
        if columns.is_ok_and(|c| range::walkable(&c).is_ok()) {
            return walk::walk_here(config, backends, options).await;
        }
    }
    leased(config, backends, &options.table, async || {
        verify_and_repair(config, backends, options).await
    })
    .await
}

/// Refuses a verify `options` cannot ask of `config`'s job.
pub fn check_options(config: &Config, options: &VerifyOptions) -> Result<()> {
    check_supported(config)?;
    if !config.source.tables.contains(&options.table) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("{} is not one of source.tables", options.table),
        )
        .hint("name the table as source.tables lists it"));
    }
    if let Some(pct) = options.sample
        && !(pct > 0.0 && pct <= 100.0)
    {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("--sample {pct}: a percentage above 0 and at most 100"),
        )
        .hint("e.g. --sample 1 reads about 1% of the chunks"));
    }
    Ok(())
}

/// Runs `work` under the verify lease of `table` (`verify#<table>`).
pub(crate) async fn leased<T>(
    config: &Config,
    backends: &Backends,
    table: &str,
    work: impl AsyncFnOnce() -> Result<T>,
) -> Result<T> {
    let run_id = crate::run_id::new_run_id();
    let owner = crate::state::holder::owner(&run_id, Some("verify"));
    let leased = crate::state::ops::with_op_lease(
        backends.state.as_ref(),
        &config.job,
        &verify_op(table),
        &owner,
        config.lease.ttl(),
        |_lease| work(),
    )
    .await?;
    match leased {
        crate::state::ops::OpLeased::Ran(report) => Ok(report),
        crate::state::ops::OpLeased::Held {
            owner,
            expires_at_ms,
        } => Err(Error::new(
            Code::StateLeaseHeld,
            format!("another verify of {table} holds its lease ({owner})"),
        )
        .hint(format!(
            "wait for it to finish (the lease expires at {expires_at_ms} ms since the epoch at the latest), then run again"
        ))),
    }
}

async fn verify_and_repair(
    config: &Config,
    backends: &Backends,
    options: &VerifyOptions,
) -> Result<VerifyReport> {
    let started = Instant::now();
    let mut report = verify(config, backends, options).await?;
    if options.repair && report.mismatched_rows > 0 {
        let written = repair::repair(config, backends, &options.table, &report, None).await?;
        let again = verify(
            config,
            backends,
            &VerifyOptions {
                repair: false,
                ..options.clone()
            },
        )
        .await?;
        report.repair = Some(repair::RepairReport {
            rows_written: written.rows_written,
            position: written.position,
            part: written.part,
            after_mismatched_rows: again.mismatched_rows,
            after: again.chunks.into_iter().filter(|c| !c.equal).collect(),
        });
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// One verify of one table, without repair.
pub async fn verify(
    config: &Config,
    backends: &Backends,
    options: &VerifyOptions,
) -> Result<VerifyReport> {
    let started = Instant::now();
    let table = options.table.as_str();
    let mut reader = crate::source::open_baseline_reader(config).await?;
    let schema = reader.schema(table)?;
    let destination = backends.destination.as_ref();
    let columns = crate::lake::shape::read(destination, table).await?;
    let mut report = VerifyReport {
        job: config.job.clone(),
        table: table.to_owned(),
        mode: if options.sample.is_some() {
            "sample"
        } else {
            "full"
        }
        .to_owned(),
        chunks_planned: 0,
        chunks_read: 0,
        rows_read: 0,
        rechecked: 0,
        position: None,
        mismatched_rows: 0,
        chunks: Vec::new(),
        multiset: None,
        repair: None,
        duration_ms: 0,
    };
    if !columns.iter().any(|c| c.key) {
        keyless(
            config,
            backends,
            reader.as_mut(),
            &schema,
            &columns,
            &mut report,
        )
        .await?;
    } else {
        keyed(
            config,
            backends,
            reader.as_mut(),
            &schema,
            &columns,
            options,
            &mut report,
        )
        .await?;
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// A keyed table: pass 1 by chunks, then the re-check at one exact position.
async fn keyed(
    config: &Config,
    backends: &Backends,
    reader: &mut dyn BaselineReader,
    schema: &Arc<TableSchema>,
    columns: &[crate::lake::shape::ShapeColumn],
    options: &VerifyOptions,
    report: &mut VerifyReport,
) -> Result<()> {
    let table = options.table.as_str();
    let destination = backends.destination.as_ref();
    let plan = reader.plan(table, config.baseline.chunk_rows).await?;
    report.chunks_planned = plan.len();
    let chosen = sample(plan.len(), options.sample);
    report.chunks_read = chosen.len();

    // Pass 1: every chosen chunk, each read by its own statement.
    let mut read: Vec<Vec<RecordBatch>> = Vec::with_capacity(chosen.len());
    for &c in &chosen {
        let batches = read_chunk(reader, schema, table, &plan[c]).await?;
        report.rows_read += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        read.push(batches);
    }
    drain(config, backends).await?;
    let (lake_batches, shape) = lake_rows(destination, table, columns, None).await?;
    let state = fold::fold(&lake_batches, &shape)?;
    drop(lake_batches);
    let names: Vec<String> = shape.fields.iter().map(|f| f.name().clone()).collect();
    let mut lake = Prints::new();
    compare::prints(&state, &shape, &mut lake)?;
    drop(state);

    let mut per_chunk: Vec<Prints> = Vec::with_capacity(read.len());
    for batches in &read {
        let mut prints = Prints::new();
        for batch in batches {
            compare::prints(batch, &shape, &mut prints)?;
        }
        per_chunk.push(prints);
    }
    drop(read);
    // Suspects: per chunk, the keys pass 1 found different.
    let mut suspects: Vec<Vec<Vec<u8>>> = per_chunk
        .iter()
        .map(|prints| {
            compare::findings(prints.keys(), prints, &lake, &names)
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        })
        .collect();
    // Keys only the lake holds (a full verify): attributed to the chunk whose keys they
    // sort among (arrow's row order; the re-check reads every chunk, so the attribution
    // decides only where the report lists them).
    let mut extra = 0usize;
    if options.sample.is_none() {
        let seen: HashSet<&Vec<u8>> = per_chunk.iter().flat_map(|p| p.keys()).collect();
        let highest: Vec<Option<&Vec<u8>>> = per_chunk.iter().map(|p| p.keys().max()).collect();
        for key in lake.keys().filter(|k| !seen.contains(k)) {
            let at = highest
                .iter()
                .position(|h| h.is_some_and(|h| key <= h))
                .unwrap_or(per_chunk.len().saturating_sub(1));
            if let Some(list) = suspects.get_mut(at) {
                list.push(key.clone());
                extra += 1;
            }
        }
    }
    report.rechecked = suspects.iter().map(Vec::len).sum();

    let mut confirmed: Vec<Vec<(Vec<u8>, Finding)>> = vec![Vec::new(); chosen.len()];
    if report.rechecked > 0 {
        // The re-check: the chunks with suspects (all of them when the lake holds keys no
        // chunk returned) inside one pinned read at P, against the lake folded at P.
        let floor = checkpoint(config, backends).await?;
        let point = reader.pin_read(table, &floor).await?;
        let mut pinned = Prints::new();
        let reread: Vec<&ChunkBounds> = (0..chosen.len())
            .filter(|&i| extra > 0 || !suspects[i].is_empty())
            .map(|i| &plan[chosen[i]])
            .collect();
        for batches in read_pinned(reader, schema, table, &reread).await? {
            for batch in &batches {
                compare::prints(batch, &shape, &mut pinned)?;
            }
        }
        let lake_at = match &point {
            Some(p) => {
                drain(config, backends).await?;
                let (batches, _) = lake_rows(destination, table, columns, Some(p)).await?;
                let state = fold::fold(&batches, &shape)?;
                let mut prints = Prints::new();
                compare::prints(&state, &shape, &mut prints)?;
                prints
            }
            // No pinned read on this engine: the re-read is compared with the lake after a
            // drain that follows it; only keys that differ both times are reported.
            None => {
                drain(config, backends).await?;
                let (batches, _) = lake_rows(destination, table, columns, None).await?;
                let state = fold::fold(&batches, &shape)?;
                let mut prints = Prints::new();
                compare::prints(&state, &shape, &mut prints)?;
                prints
            }
        };
        report.position = point.as_ref().map(ToString::to_string);
        for (i, keys) in suspects.iter().enumerate() {
            confirmed[i] = compare::findings(keys, &pinned, &lake_at, &names);
        }
    }
    for (i, &c) in chosen.iter().enumerate() {
        let (keys, differences): (Vec<Vec<u8>>, Vec<Finding>) =
            std::mem::take(&mut confirmed[i]).into_iter().unzip();
        report.mismatched_rows += differences.len() as u64;
        report.chunks.push(ChunkReport {
            chunk: c + 1,
            lower: plan[c].lower.clone(),
            upper: plan[c].upper.clone(),
            rows: per_chunk[i].len() as u64,
            equal: differences.is_empty(),
            differences,
            keys,
        });
    }
    Ok(())
}

/// A table without a key: one pinned read of the whole table at P against the lake folded
/// at P, as multisets.
async fn keyless(
    config: &Config,
    backends: &Backends,
    reader: &mut dyn BaselineReader,
    schema: &Arc<TableSchema>,
    columns: &[crate::lake::shape::ShapeColumn],
    report: &mut VerifyReport,
) -> Result<()> {
    let table = report.table.clone();
    let floor = checkpoint(config, backends).await?;
    let Some(point) = reader.pin_read(&table, &floor).await? else {
        return Err(Error::new(
            Code::VerifyUnsupported,
            format!("{table} has no key, and the source cannot read it at a known position"),
        )
        .hint(format!("a table without a key is verified by one read at an exact position, which MySQL does not report: add a primary key to {table}, or verify it on MariaDB or PostgreSQL")));
    };
    let whole = ChunkBounds {
        lower: None,
        upper: None,
    };
    let read = read_chunk(reader, schema, &table, &whole).await;
    reader.end_pinned_read().await?;
    let read = read?;
    drain(config, backends).await?;
    let (batches, shape) =
        lake_rows(backends.destination.as_ref(), &table, columns, Some(&point)).await?;
    let state = fold::fold(&batches, &shape)?;
    drop(batches);
    let (mut source, mut lake) = (BTreeMap::new(), BTreeMap::new());
    for batch in &read {
        compare::multiset(batch, &shape, &mut source)?;
    }
    compare::multiset(&state, &shape, &mut lake)?;
    let findings = compare::multiset_findings(&source, &lake);
    report.chunks_planned = 1;
    report.chunks_read = 1;
    report.rows_read = read.iter().map(|b| b.num_rows() as u64).sum();
    report.position = Some(point.to_string());
    report.mismatched_rows = findings
        .iter()
        .map(|f| (f.source - f.lake).unsigned_abs())
        .sum();
    report.chunks.push(ChunkReport {
        chunk: 1,
        lower: None,
        upper: None,
        rows: report.rows_read,
        equal: findings.is_empty(),
        differences: Vec::new(),
        keys: Vec::new(),
    });
    report.multiset = Some(findings);
    Ok(())
}

/// Evenly spread chunk indexes: every one without `pct`, else about `pct` % of `n` (at
/// least one).
pub fn sample(n: usize, pct: Option<f64>) -> Vec<usize> {
    let Some(pct) = pct else {
        return (0..n).collect();
    };
    if n == 0 {
        return Vec::new();
    }
    let k = ((n as f64 * pct / 100.0).ceil() as usize).clamp(1, n);
    let mut picked: Vec<usize> = (0..k).map(|i| i * n / k).collect();
    picked.dedup();
    picked
}

/// One chunk's rows (policy applied by the reader) as Arrow batches of the source schema.
pub(crate) async fn read_chunk(
    reader: &mut dyn BaselineReader,
    schema: &Arc<TableSchema>,
    table: &str,
    bounds: &ChunkBounds,
) -> Result<Vec<RecordBatch>> {
    const ROWS_PER_BATCH: usize = 8192;
    let mut builder = crate::parts::batch::RowBatchBuilder::new(schema.clone())?;
    let mut batches = Vec::new();
    let pos: Arc<str> = Arc::from("");
    let mut seq = 0u64;
    let mut sink = |image: Vec<Value>| -> Result<()> {
        builder.append(&ChangeEvent {
            table: schema.clone(),
            op: Op::Snapshot,
            pos: pos.clone(),
            seq,
            commit_ts: None,
            image,
            unlogged: vec![],
        })?;
        seq += 1;
        if builder.len() >= ROWS_PER_BATCH {
            batches.push(builder.finish()?.batch);
        }
        Ok(())
    };
    reader.read_chunk(table, bounds, &mut sink).await?;
    if !builder.is_empty() {
        batches.push(builder.finish()?.batch);
    }
    Ok(batches)
}

/// The rows of each of `chunks`, read inside the pinned read the caller started; the
/// pinned read is ended whatever the reads returned.
pub(crate) async fn read_pinned(
    reader: &mut dyn BaselineReader,
    schema: &Arc<TableSchema>,
    table: &str,
    chunks: &[&ChunkBounds],
) -> Result<Vec<Vec<RecordBatch>>> {
    let mut read = Vec::with_capacity(chunks.len());
    let mut failed = None;
    for bounds in chunks {
        match read_chunk(reader, schema, table, bounds).await {
            Ok(batches) => read.push(batches),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    reader.end_pinned_read().await?;
    match failed {
        Some(e) => Err(e),
        None => Ok(read),
    }
}

/// The job's checkpoint position (a floor for a pinned read's position).
pub(crate) async fn checkpoint(config: &Config, backends: &Backends) -> Result<Position> {
    match backends.state.load_checkpoint(&config.job).await? {
        Some(c) => Position::parse_tagged(&c.position),
        None => Err(Error::new(
            Code::VerifyLakeBehind,
            format!(
                "job {} has no checkpoint yet: nothing was drained",
                config.job
            ),
        )
        .hint("run sluice drain (and sluice baseline) first, then verify")),
    }
}

/// Drains the job once, so the lake holds every change committed before now.
pub(crate) async fn drain(config: &Config, backends: &Backends) -> Result<()> {
    let summary = crate::job::drain_now(config, backends).await?;
    match summary.status {
        crate::summary::RunStatus::Drained => Ok(()),
        status => Err(Error::new(
            Code::VerifyLakeBehind,
            format!(
                "the drain verify runs to bring the lake past its source read ended {status:?}"
            ),
        )
        .hint("another run holds the job's lease (or stopped early): run sluice verify again once it is done")),
    }
}

/// The lake's rows of `table` (the files a current-state build folds), only those at or
/// before `upto` when given, and the fold's shape.
pub(crate) async fn lake_rows(
    destination: &dyn Destination,
    table: &str,
    columns: &[crate::lake::shape::ShapeColumn],
    upto: Option<&Position>,
) -> Result<(Vec<RecordBatch>, Shape)> {
    let listing = inputs::list(destination, table).await?;
    let plan = inputs::current_plan_id(destination, &listing).await?;
    let keys = inputs::all_files(&listing, plan.as_deref());
    let mut batches = inputs::read_files(destination, &keys).await?;
    if let Some(p) = upto {
        let cut = p.sortable_text();
        batches = batches
            .iter()
            .map(|b| at_or_before(b, &cut))
            .collect::<Result<_>>()?;
    }
    let shape = crate::materialize::shape_of(columns, &batches);
    Ok((batches, shape))
}

/// The rows of `batch` whose `__pos` is at or before `cut`.
fn at_or_before(batch: &RecordBatch, cut: &str) -> Result<RecordBatch> {
    let Some(positions) = batch.column_by_name(POS) else {
        return Err(Error::new(
            Code::FoldInput,
            "a part without __pos".to_owned(),
        ));
    };
    let positions = match positions.data_type() {
        DataType::Utf8 => positions.as_string::<i32>(),
        _ => {
            return Err(Error::new(
                Code::FoldInput,
                "a part whose __pos is not text".to_owned(),
            ));
        }
    };
    let keep: arrow_array::BooleanArray = positions
        .iter()
        .map(|p| Some(p.is_some_and(|p| p <= cut)))
        .collect();
    filter_record_batch(batch, &keep).map_err(|e| {
        Error::new(Code::Internal, "cutting the lake at a position".to_owned()).source(e)
    })
}

#[cfg(test)]
mod tests {
    use super::{at_or_before, sample};
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    #[test]
    fn the_lake_is_cut_at_a_position_inclusively() {
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("__pos", DataType::Utf8, false),
                Field::new("id", DataType::Int64, true),
            ])),
            vec![
                Arc::new(StringArray::from(vec!["pg-1", "pg-2", "pg-3"])),
                Arc::new(Int64Array::from(vec![1, 2, 3])),
            ],
        )
        .unwrap();
        assert_eq!(at_or_before(&batch, "pg-2").unwrap().num_rows(), 2);
        assert_eq!(at_or_before(&batch, "pg-0").unwrap().num_rows(), 0);
    }

    #[test]
    fn a_sample_spreads_over_the_plan() {
        assert_eq!(sample(4, None), vec![0, 1, 2, 3]);
        assert_eq!(sample(100, Some(1.0)), vec![0]);
        assert_eq!(sample(100, Some(5.0)), vec![0, 20, 40, 60, 80]);
        assert_eq!(sample(3, Some(100.0)), vec![0, 1, 2]);
        assert_eq!(sample(0, Some(50.0)), Vec::<usize>::new());
    }
}
