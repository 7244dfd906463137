//! The verify walker: `sluice verify` of a table too big for one invocation, as three
//! Lambda tasks a Step Functions machine runs (infra/stepfunctions/verify.asl.json) —
//! `verify.plan`, one `verify.chunk` per chunk (an inline Map, or a Distributed Map over a
//! list in S3), `verify.finish` (docs/verify.md, "Walked by Step Functions").
//!
//! Guarantees:
//! * **the same answer as one invocation**: pass 1 compares each chunk with the lake's
//!   share of its key range ([`super::range`]); every chunk with a key that differs there
//!   is read again by `verify.finish` inside one pinned read at an exact source position P
//!   and compared with the lake folded at P over those chunks' ranges — so every reported
//!   difference is one at P, and concurrent writes cause none (the argument of
//!   [`super`]). A chunk pass 1 found equal is reported equal;
//! * **bounded invocations**: a chunk task holds its chunk's source rows and its range's
//!   share of the lake, never the table, and reads only the lake objects whose key span
//!   (from their footers, read once by the plan) meets its range; `verify.finish` holds
//!   the chunks with differences;
//! * a table whose key sluice cannot split by the source's order (no key, or a key column
//!   that is not an integer: [`super::range::walkable`]) is verified whole by
//!   `verify.finish` (`mode: whole`, the reason in the plan), never by guessed ranges;
//! * the plan is one document (`_verify/<run>/plan.json`) every task reads, so a retried
//!   task reads the chunk it was given; a chunk's result is written when it is complete,
//!   and `verify.finish` refuses a walk with a chunk that has none
//!   (`SLUICE_VERIFY_WALK_INCOMPLETE`) rather than report it equal; a table's report is
//!   written before its chunk results are removed, and a retried finish keeps a report
//!   an earlier attempt wrote;
//! * nothing is written to the lake without `repair`, and `verify.finish` runs under the
//!   table's verify lease (`verify#<table>`); the walk's documents stay under `_verify/`,
//!   and its chunk results are removed once the report is written (a walk run in one
//!   process, [`walk_here`], removes its plan and report too); a removal that fails is
//!   logged, never the walk's answer.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::compare::{self, Finding, Prints};
use super::range::{self, KeyRanges, ObjectSpan};
use super::{ChunkReport, VerifyOptions, VerifyReport, read_chunk};
use crate::backends::Backends;
use crate::config::Config;
use crate::destination::{Destination, S3Object};
use crate::error::{Code, Error, Result};
use crate::fold;
use crate::position::Position;
use crate::source::baseline_read::ChunkBounds;

/// The folder (under the destination's prefix) of the walks' documents; the state
/// machine's role may read exactly this folder.
pub const WALK_FOLDER: &str = "_verify/";

/// The number of chunks a walk runs at once when the execution input names none.
pub const DEFAULT_PARALLEL: u32 = 8;

fn plan_key(run: &str) -> String {
    format!("{WALK_FOLDER}{run}/plan.json")
}

fn items_key(run: &str) -> String {
    format!("{WALK_FOLDER}{run}/items.json")
}

fn chunk_key(run: &str, table: usize, chunk: usize) -> String {
    format!("{WALK_FOLDER}{run}/chunk-{table:04}-{chunk:06}.json")
}

/// Where the report of the walk `run` of its table number `table` (from 1) is written.
pub fn report_key(run: &str, table: usize) -> String {
    format!("{WALK_FOLDER}{run}/report-{table:04}.json")
}

/// One chunk of a walk: its number in the source's plan (from 1) and its bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedChunk {
    pub chunk: usize,
    pub lower: Option<Vec<String>>,
    pub upper: Option<Vec<String>>,
}

impl PlannedChunk {
    fn bounds(&self) -> ChunkBounds {
        ChunkBounds {
            lower: self.lower.clone(),
            upper: self.upper.clone(),
        }
    }
}

/// The walk's plan (`_verify/<run>/plan.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WalkPlan {
    pub job: String,
    pub run: String,
    pub sample: Option<f64>,
    pub repair: bool,
    /// The tables, in the order walked (numbered from 1).
    pub tables: Vec<TablePlan>,
}

/// One table of a walk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TablePlan {
    pub table: String,
    /// Why the table is verified whole by `verify.finish` (`None`: walked by chunks).
    pub whole: Option<String>,
    pub chunks_planned: usize,
    /// The chunks read (all of them, or the sample's).
    pub chunks: Vec<PlannedChunk>,
    /// The first key column's span in each lake object when the walk was planned (read
    /// from the objects' footers): a chunk task skips the objects that cannot hold a row of
    /// its range. Objects written since are read.
    #[serde(default)]
    pub spans: Vec<ObjectSpan>,
}

/// One `verify.chunk` task, as the Map passes it: chunk `chunk` of the walk's table
/// number `table_number` (`table` names it, for the reader of an execution's history).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkItem {
    pub action: String,
    pub run: String,
    pub table: String,
    pub table_number: usize,
    pub chunk: usize,
}

/// What `verify.plan` hands the state machine.
#[derive(Debug, Clone, Serialize)]
pub struct PlanOutput {
    pub run: String,
    pub tables: Vec<String>,
    /// `inline` (the items in `chunks`), `s3` (the items in the object `items`), or
    /// `whole` (no chunk tasks: `verify.finish` verifies every table in one invocation).
    pub mode: String,
    pub chunks: Vec<ChunkItem>,
    pub items: Option<S3Object>,
    pub chunk_count: usize,
    pub parallel: u32,
}

/// A chunk task's result (`_verify/<run>/chunk-<n>.json`, and its output).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkResult {
    pub table: String,
    pub chunk: usize,
    /// Source rows read.
    pub rows: u64,
    /// Keys of the lake's share of the range.
    pub lake_rows: u64,
    /// Keys that differ in pass 1 (re-checked by `verify.finish`).
    pub suspects: u64,
}

/// What `verify.finish` returns: `equal` when every table is, and per table its summary
/// (the whole report is at `report`).
#[derive(Debug, Clone, Serialize)]
pub struct FinishOutput {
    /// `equal` or `differs`.
    pub status: String,
    pub mismatched_rows: u64,
    pub tables: Vec<TableOutcome>,
}

/// One table's outcome in [`FinishOutput`].
#[derive(Debug, Clone, Serialize)]
pub struct TableOutcome {
    pub table: String,
    /// `equal` or `differs`.
    pub status: String,
    pub mismatched_rows: u64,
    pub chunks: usize,
    pub rechecked: usize,
    pub report: String,
    pub summary: String,
}

fn text_field(input: &Value, name: &str, usage: &str) -> Result<Option<String>> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Error::new(
            Code::ConfigInvalid,
            format!("{name} must be text, got {other}"),
        )
        .hint(usage.to_owned())),
    }
}

/// The tables a walk verifies: the input's `table`, or every table of the job.
fn tables_of(config: &Config, input: &Value) -> Result<Vec<String>> {
    let usage = "start the verify machine with {} (every table) or {\"table\": \"public.orders\"}, optionally with \"sample\": 1, \"repair\": true, \"parallel\": 8";
    Ok(match text_field(input, "table", usage)? {
        Some(table) => vec![table],
        None => config.source.tables.clone(),
    })
}

/// `verify.plan`: plans the walk of the job's tables (`input`: `table` for one of them,
/// `sample`, `repair`, `parallel`), drains the job once (so the chunks compare with a
/// recent lake), stores the plan and hands over the chunk tasks.
pub async fn plan(config: &Config, backends: &Backends, input: &Value) -> Result<PlanOutput> {
    let names = tables_of(config, input)?;
    let sample = match input.get("sample") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_f64().ok_or_else(|| {
            Error::new(
                Code::ConfigInvalid,
                format!("sample must be a number (percent), got {v}"),
            )
            .hint("e.g. \"sample\": 1 reads about 1% of the chunks")
        })?),
    };
    let repair = input
        .get("repair")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let parallel = match input.get("parallel") {
        None | Some(Value::Null) => DEFAULT_PARALLEL,
        Some(v) => v
            .as_u64()
            .filter(|p| (1..=1000).contains(p))
            .map(|p| p as u32)
            .ok_or_else(|| {
                Error::new(
                    Code::ConfigInvalid,
                    format!("parallel must be a whole number from 1 to 1000, got {v}"),
                )
                .hint("parallel is how many chunks the walk reads at once, e.g. 8")
            })?,
    };
    for table in &names {
        super::check_options(
            config,
            &VerifyOptions {
                table: table.clone(),
                sample,
                repair,
            },
        )?;
    }
    let destination = backends.destination.as_ref();
    let run = crate::run_id::new_run_id();
    let mut plan = WalkPlan {
        job: config.job.clone(),
        run: run.clone(),
        sample,
        repair,
        tables: Vec::with_capacity(names.len()),
    };
    let mut reader = None;
    for table in &names {
        let columns = crate::lake::shape::read(destination, table).await?;
        let mut planned = TablePlan {
            table: table.clone(),
            whole: range::walkable(&columns).err(),
            chunks_planned: 0,
            chunks: Vec::new(),
            spans: Vec::new(),
        };
        if planned.whole.is_none() {
            let reader = match &mut reader {
                Some(r) => r,
                None => reader.insert(crate::source::open_baseline_reader(config).await?),
            };
            let bounds = reader.plan(table, config.baseline.chunk_rows).await?;
            planned.chunks_planned = bounds.len();
            planned.chunks = super::sample(bounds.len(), sample)
                .into_iter()
                .map(|c| PlannedChunk {
                    chunk: c + 1,
                    lower: bounds[c].lower.clone(),
                    upper: bounds[c].upper.clone(),
                })
                .collect();
            // Every bound parses as its key column's value, or the walk is refused now.
            ranges_of(&columns, &planned.chunks)?;
            planned.spans = spans_of(destination, table, &columns).await?;
        }
        plan.tables.push(planned);
    }
    drop(reader);
    let run_id = run.as_str();
    let items: Vec<ChunkItem> = plan
        .tables
        .iter()
        .enumerate()
        .flat_map(|(t, planned)| {
            planned.chunks.iter().map(move |c| ChunkItem {
                action: "verify.chunk".to_owned(),
                run: run_id.to_owned(),
                table: planned.table.clone(),
                table_number: t + 1,
                chunk: c.chunk,
            })
        })
        .collect();
    if !items.is_empty() {
        super::drain(config, backends).await?;
    }
    write_json(destination, &plan_key(&run), &plan).await?;
    let chunk_count = items.len();
    let mut output = PlanOutput {
        run: run.clone(),
        tables: names,
        mode: if items.is_empty() { "whole" } else { "inline" }.to_owned(),
        chunks: Vec::new(),
        items: None,
        chunk_count,
        parallel,
    };
    if items.is_empty() {
        return Ok(output);
    }
    let object = destination.s3_object(&items_key(&run))?;
    let body = serde_json::to_vec(&items)
        .map_err(|e| Error::new(Code::Internal, "encoding the chunk list").source(e))?;
    let mode = crate::baseline::delivery::mode_for(
        body.len(),
        config.baseline.inline_plan_max_bytes,
        object.is_some(),
    );
    match (mode, object) {
        (crate::baseline::tasks::PlanMode::S3, Some(object)) => {
            destination.put_marker(&items_key(&run), &body).await?;
            output.mode = "s3".to_owned();
            output.items = Some(object);
        }
        _ => output.chunks = items,
    }
    Ok(output)
}

/// The walk of one table run in this process, task after task (`sluice verify
/// --by-chunks`): the same plan, chunk and finish tasks as on Step Functions, so memory
/// follows one chunk; the table's report.
pub async fn walk_here(
    config: &Config,
    backends: &Backends,
    options: &VerifyOptions,
) -> Result<VerifyReport> {
    let input = serde_json::json!({
        "table": options.table,
        "sample": options.sample,
        "repair": options.repair,
    });
    let planned = plan(config, backends, &input).await?;
    let items = match &planned.items {
        Some(_) => read_json(backends.destination.as_ref(), &items_key(&planned.run))
            .await?
            .unwrap_or_default(),
        None => planned.chunks.clone(),
    };
    for item in &items {
        let task = serde_json::to_value(item)
            .map_err(|e| Error::new(Code::Internal, "encoding a chunk task").source(e))?;
        chunk(config, backends, &task).await?;
    }
    let (output, mut reports) =
        finish(config, backends, &serde_json::json!({"run": planned.run})).await?;
    // The report goes to the caller: nothing of the walk stays in the destination.
    let destination = backends.destination.as_ref();
    for table in &output.tables {
        remove(destination, &table.report).await;
    }
    remove(destination, &plan_key(&planned.run)).await;
    Ok(reports.remove(0))
}

/// The span of every data file of `table` now, from the files' footers.
async fn spans_of(
    destination: &dyn Destination,
    table: &str,
    columns: &[crate::lake::shape::ShapeColumn],
) -> Result<Vec<ObjectSpan>> {
    let listing = crate::lake::files::list(destination, table).await?;
    let plan = crate::lake::files::current_plan_id(destination, &listing).await?;
    let mut spans = Vec::new();
    for key in crate::lake::files::all_files(&listing, plan.as_deref()) {
        if let Some(metadata) = crate::lake::files::read_footer(destination, &key).await? {
            spans.push(range::object_span(columns, &key, &metadata));
        }
    }
    Ok(spans)
}

/// Removes a walk document; a failure is logged, never an error (the document is small
/// and names no value; the walk's answer stands).
async fn remove(destination: &dyn Destination, key: &str) {
    if let Err(e) = destination.delete(key).await {
        tracing::warn!(key, error = %e, "a verify walk document was left in the destination");
    }
}

fn ranges_of(
    columns: &[crate::lake::shape::ShapeColumn],
    chunks: &[PlannedChunk],
) -> Result<KeyRanges> {
    let bounds: Vec<(usize, ChunkBounds)> = chunks.iter().map(|c| (c.chunk, c.bounds())).collect();
    KeyRanges::new(columns, &bounds)
}

async fn write_json<T: Serialize>(
    destination: &dyn Destination,
    key: &str,
    value: &T,
) -> Result<()> {
    let body = serde_json::to_vec_pretty(value)
        .map_err(|e| Error::new(Code::Internal, format!("encoding {key}")).source(e))?;
    destination.put_marker(key, &body).await
}

async fn read_json<T: serde::de::DeserializeOwned>(
    destination: &dyn Destination,
    key: &str,
) -> Result<Option<T>> {
    let Some(body) = destination.get(key).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!(
                "{} {key} is not a verify walk document",
                destination.describe()
            ),
        )
        .hint("start the verify machine again (a new walk plans anew)")
        .source(e)
    })
}

/// The run id a task input names (`run`), refused unless it is one path segment.
fn run_of(input: &Value) -> Result<String> {
    let usage = "verify.chunk and verify.finish take the run verify.plan returned";
    let run = text_field(input, "run", usage)?
        .ok_or_else(|| Error::new(Code::ConfigInvalid, "the task names no run").hint(usage))?;
    if run.is_empty() || run.contains('/') || run == "." || run == ".." {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("run {run:?} is not a walk's run id"),
        )
        .hint(usage));
    }
    Ok(run)
}

async fn load_plan(destination: &dyn Destination, run: &str) -> Result<WalkPlan> {
    read_json(destination, &plan_key(run))
        .await?
        .ok_or_else(|| {
            Error::new(
                Code::ConfigInvalid,
                format!("verify walk {run} has no plan under {WALK_FOLDER}{run}/"),
            )
            .hint("start the verify machine again: its first task plans the walk")
        })
}

/// `verify.chunk`: compares one chunk of the walk with the lake's share of its range and
/// records the result.
pub async fn chunk(config: &Config, backends: &Backends, input: &Value) -> Result<ChunkResult> {
    let run = run_of(input)?;
    let n = input.get("chunk").and_then(Value::as_u64).ok_or_else(|| {
        Error::new(Code::ConfigInvalid, "verify.chunk names no chunk number")
            .hint("the Map passes each item verify.plan returned as it is")
    })? as usize;
    let t = input
        .get("table_number")
        .and_then(Value::as_u64)
        .unwrap_or(1) as usize;
    let destination = backends.destination.as_ref();
    let plan = load_plan(destination, &run).await?;
    let Some(planned) = t
        .checked_sub(1)
        .and_then(|i| plan.tables.get(i))
        .and_then(|p| p.chunks.iter().find(|c| c.chunk == n).map(|c| (p, c)))
    else {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("verify walk {run} has no chunk {n} of table number {t}"),
        )
        .hint("the Map passes each item verify.plan returned as it is"));
    };
    let (table, spans, planned) = (
        planned.0.table.as_str(),
        planned.0.spans.as_slice(),
        planned.1,
    );
    let columns = crate::lake::shape::read(destination, table).await?;
    let ranges = ranges_of(&columns, std::slice::from_ref(planned))?;
    let mut reader = crate::source::open_baseline_reader(config).await?;
    let schema = reader.schema(table)?;
    let source = read_chunk(reader.as_mut(), &schema, table, &planned.bounds()).await?;
    drop(reader);
    let (lake, shape) =
        range::lake_rows_in(destination, table, &columns, &ranges, spans, None).await?;
    let state = ranges.retain(&fold::fold(&lake, &shape)?)?;
    drop(lake);
    let names: Vec<String> = shape.fields.iter().map(|f| f.name().clone()).collect();
    let (mut ours, mut theirs) = (Prints::new(), Prints::new());
    for batch in &source {
        compare::prints(batch, &shape, &mut ours)?;
    }
    compare::prints(&state, &shape, &mut theirs)?;
    let suspects = compare::findings(ours.keys().chain(theirs.keys()), &ours, &theirs, &names);
    let result = ChunkResult {
        table: table.to_owned(),
        chunk: n,
        rows: ours.len() as u64,
        lake_rows: theirs.len() as u64,
        suspects: suspects.len() as u64,
    };
    write_json(destination, &chunk_key(&run, t, n), &result).await?;
    Ok(result)
}

/// `verify.finish`: per table of the walk, re-checks every chunk with a difference at one
/// exact position (or verifies a `whole` table in one invocation), repairs when the walk
/// asks, and writes the table's report — under the table's verify lease.
pub async fn finish(
    config: &Config,
    backends: &Backends,
    input: &Value,
) -> Result<(FinishOutput, Vec<VerifyReport>)> {
    let run = run_of(input)?;
    let destination = backends.destination.as_ref();
    let plan = load_plan(destination, &run).await?;
    let mut reports = Vec::with_capacity(plan.tables.len());
    let mut outcomes = Vec::with_capacity(plan.tables.len());
    for (i, table) in plan.tables.iter().enumerate() {
        let key = report_key(&run, i + 1);
        // A retried finish keeps the report an earlier attempt wrote (its chunk results
        // are gone with it).
        let written: Option<VerifyReport> = read_json(destination, &key).await?;
        let report = match written {
            Some(report) => report,
            None => {
                super::leased(config, backends, &table.table, async || {
                    if table.whole.is_some() {
                        super::verify_and_repair(
                            config,
                            backends,
                            &VerifyOptions {
                                table: table.table.clone(),
                                sample: plan.sample,
                                repair: plan.repair,
                            },
                        )
                        .await
                    } else {
                        finish_walk(config, backends, &plan, i + 1).await
                    }
                })
                .await?
            }
        };
        write_json(destination, &key, &report).await?;
        for c in &table.chunks {
            remove(destination, &chunk_key(&run, i + 1, c.chunk)).await;
        }
        outcomes.push(TableOutcome {
            table: table.table.clone(),
            status: if report.clean() { "equal" } else { "differs" }.to_owned(),
            mismatched_rows: report.metrics().mismatched_rows,
            chunks: report.chunks_read,
            rechecked: report.rechecked,
            report: key,
            summary: report.to_line(),
        });
        reports.push(report);
    }
    if destination.get(&items_key(&run)).await?.is_some() {
        remove(destination, &items_key(&run)).await;
    }
    let mismatched_rows = outcomes.iter().map(|o| o.mismatched_rows).sum();
    let output = FinishOutput {
        status: if mismatched_rows == 0 {
            "equal"
        } else {
            "differs"
        }
        .to_owned(),
        mismatched_rows,
        tables: outcomes,
    };
    Ok((output, reports))
}

/// The walk of the plan's table number `t` (from 1), finished.
async fn finish_walk(
    config: &Config,
    backends: &Backends,
    walk: &WalkPlan,
    t: usize,
) -> Result<VerifyReport> {
    let plan = &walk.tables[t - 1];
    let started = Instant::now();
    let destination = backends.destination.as_ref();
    let mut results = Vec::with_capacity(plan.chunks.len());
    for c in &plan.chunks {
        let result: ChunkResult = read_json(destination, &chunk_key(&walk.run, t, c.chunk))
            .await?
            .ok_or_else(|| {
                Error::new(
                    Code::VerifyWalkIncomplete,
                    format!(
                        "verify walk {} of {}: chunk {} has no result",
                        walk.run, plan.table, c.chunk
                    ),
                )
                .hint("a chunk task did not finish: start the verify machine again")
            })?;
        results.push(result);
    }
    let mut report = VerifyReport {
        job: config.job.clone(),
        table: plan.table.clone(),
        mode: if walk.sample.is_some() {
            "sample"
        } else {
            "full"
        }
        .to_owned(),
        chunks_planned: plan.chunks_planned,
        chunks_read: plan.chunks.len(),
        rows_read: results.iter().map(|r| r.rows).sum(),
        rechecked: results.iter().map(|r| r.suspects as usize).sum(),
        position: None,
        mismatched_rows: 0,
        chunks: Vec::new(),
        multiset: None,
        repair: None,
        duration_ms: 0,
    };
    let suspect: Vec<PlannedChunk> = plan
        .chunks
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.suspects > 0)
        .map(|(c, _)| c.clone())
        .collect();
    let mut found = BTreeMap::new();
    if !suspect.is_empty() {
        let (point, findings) =
            recheck(config, backends, &plan.table, &plan.spans, &suspect).await?;
        report.position = point.as_ref().map(ToString::to_string);
        found = findings;
    }
    for (c, r) in plan.chunks.iter().zip(&results) {
        let (keys, differences): (Vec<Vec<u8>>, Vec<Finding>) = found
            .remove(&c.chunk)
            .unwrap_or_default()
            .into_iter()
            .unzip();
        report.mismatched_rows += differences.len() as u64;
        report.chunks.push(ChunkReport {
            chunk: c.chunk,
            lower: c.lower.clone(),
            upper: c.upper.clone(),
            rows: r.rows,
            equal: differences.is_empty(),
            differences,
            keys,
        });
    }
    if walk.repair && report.mismatched_rows > 0 {
        let differing: Vec<PlannedChunk> = plan
            .chunks
            .iter()
            .zip(&report.chunks)
            .filter(|(_, r)| !r.equal)
            .map(|(c, _)| c.clone())
            .collect();
        let columns = crate::lake::shape::read(destination, &plan.table).await?;
        let ranges = ranges_of(&columns, &differing)?;
        let written =
            super::repair::repair(config, backends, &plan.table, &report, Some(&ranges)).await?;
        let (_, after) = recheck(config, backends, &plan.table, &plan.spans, &differing).await?;
        let after: Vec<ChunkReport> = differing
            .iter()
            .filter_map(|c| {
                let findings = after.get(&c.chunk)?;
                (!findings.is_empty()).then(|| ChunkReport {
                    chunk: c.chunk,
                    lower: c.lower.clone(),
                    upper: c.upper.clone(),
                    rows: 0,
                    equal: false,
                    differences: findings.iter().map(|(_, f)| f.clone()).collect(),
                    keys: findings.iter().map(|(k, _)| k.clone()).collect(),
                })
            })
            .collect();
        report.repair = Some(super::repair::RepairReport {
            rows_written: written.rows_written,
            position: written.position,
            part: written.part,
            after_mismatched_rows: after.iter().map(|c| c.differences.len() as u64).sum(),
            after,
        });
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// The findings, per chunk number, of `chunks` read inside one pinned read at P and
/// compared with the lake folded at P over their ranges; and P (`None` where the engine
/// cannot pin a read: the lake after a drain that follows the read, as in one invocation).
async fn recheck(
    config: &Config,
    backends: &Backends,
    table: &str,
    spans: &[ObjectSpan],
    chunks: &[PlannedChunk],
) -> Result<(Option<Position>, BTreeMap<usize, Vec<(Vec<u8>, Finding)>>)> {
    let destination = backends.destination.as_ref();
    let columns = crate::lake::shape::read(destination, table).await?;
    let ranges = ranges_of(&columns, chunks)?;
    let mut reader = crate::source::open_baseline_reader(config).await?;
    let schema = reader.schema(table)?;
    let floor = super::checkpoint(config, backends).await?;
    let point = reader.pin_read(table, &floor).await?;
    let bounds: Vec<ChunkBounds> = chunks.iter().map(PlannedChunk::bounds).collect();
    let bounds: Vec<&ChunkBounds> = bounds.iter().collect();
    let read = super::read_pinned(reader.as_mut(), &schema, table, &bounds).await?;
    drop(reader);
    super::drain(config, backends).await?;
    let (lake, shape) =
        range::lake_rows_in(destination, table, &columns, &ranges, spans, point.as_ref()).await?;
    let state = ranges.retain(&fold::fold(&lake, &shape)?)?;
    drop(lake);
    let names: Vec<String> = shape.fields.iter().map(|f| f.name().clone()).collect();
    // The lake's keys, by the chunk whose range holds them.
    let keys = ranges.keys(&state)?;
    let mut lake_by_chunk: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for i in 0..state.num_rows() {
        if let Some(n) = ranges.which(keys.row(i)) {
            lake_by_chunk.entry(n).or_default().push(i as u32);
        }
    }
    let mut findings = BTreeMap::new();
    for (c, batches) in chunks.iter().zip(&read) {
        let mut ours = Prints::new();
        for batch in batches {
            compare::prints(batch, &shape, &mut ours)?;
        }
        let rows = lake_by_chunk.remove(&c.chunk).unwrap_or_default();
        let share =
            arrow_select::take::take_record_batch(&state, &arrow_array::UInt32Array::from(rows))
                .map_err(|e| Error::new(Code::Internal, "splitting the lake by chunk").source(e))?;
        let mut theirs = Prints::new();
        compare::prints(&share, &shape, &mut theirs)?;
        findings.insert(
            c.chunk,
            compare::findings(ours.keys().chain(theirs.keys()), &ours, &theirs, &names),
        );
    }
    Ok((point, findings))
}
