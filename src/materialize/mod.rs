//! Current-state tables kept by sluice (`sluice materialize`): each captured table's
//! current state — one row per key, the table's columns only, the replay rule applied by
//! [`crate::fold`] — as plain Parquet files under `<table>/_current_state/`, named by the
//! pointer `<table>/_current_state/_version.json` (docs/current-state.md).
//!
//! Guarantees (the lake rules of DESIGN.md):
//! * a build folds exactly the files `sluice sql` reads, so both give one state; it only
//!   reads what runs already made durable, and no drain waits for it;
//! * the state is split into buckets — by key range when the key is one integer column, by
//!   a hash of the key otherwise (about `output.current_state_bucket_rows` rows each when a
//!   full build counts them; [`buckets`]); an **incremental** build reads
//!   the parts committed since the previous version (the run manifests), keeps their
//!   changes after its watermark, and rewrites only the buckets those touch — its cost
//!   follows the buckets its changes touch; a **full** build (the first, a new baseline
//!   plan, a new shape, a state or one bucket grown past eight times its size) folds every
//!   file;
//! * a build writes its files, then replaces the pointer, then removes the files neither
//!   the new nor the previous pointer names — a reader never sees a half-written version,
//!   a crash anywhere leaves the previous version readable, and the next build starts over
//!   from the pointer;
//! * a table that cannot be built (no shape yet, a file that is not a part) fails alone:
//!   the other tables are built and the report names it.
//!
//! * builds of one job take turns under its materialization lease ([`lease_name`]),
//!   separate from the drain's.
//! * with `table_format: iceberg` (SQL and Glue catalogs), every version is also committed
//!   to the Iceberg table `<name>_current` ([`crate::iceberg::current`]) after its pointer
//!   moved, and a build first commits the stored version when the table lags (a crash
//!   between pointer and commit): the files a build removes are never the ones the
//!   table's current snapshot names;
//!
//! Not yet: a full build holds the whole table in memory.

pub mod buckets;
pub mod version;

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::cast::AsArray;
use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::Field;
use arrow_select::filter::filter_record_batch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::config::Config;
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::fold::{self, Shape};
use crate::lake::files as inputs;
use crate::lake::shape::ShapeColumn;
use crate::parts::arrow_schema::{POS, SEQ};
use version::{Pointer, Watermark};

pub use buckets::MAX_BUCKETS;

/// The bucket count a full build gives a state of `rows` rows with `per_bucket` rows per
/// bucket at most (`output.current_state_bucket_rows`).
pub fn bucket_count(rows: u64, per_bucket: u64) -> u32 {
    rows.div_ceil(per_bucket.max(1))
        .clamp(1, u64::from(MAX_BUCKETS)) as u32
}

/// The state-store name of the materialization lease of `job`: a job name never holds a
/// `#`, so it is never a job's own item.
pub fn lease_name(job: &str) -> String {
    format!("{job}#materialize")
}

/// Builds the current state of `tables` (every captured table when empty) under the job's
/// materialization lease (separate from the drain's: a drain never waits for a build); one
/// JSON object per table in the report, failed tables included. A lease held by another
/// build is `SLUICE_STATE_LEASE_HELD`, and nothing is built.
pub async fn run(config: &Config, tables: &[String]) -> Result<serde_json::Value> {
    let backends = crate::backends::Backends::open(config).await?;
    run_with(config, &backends, tables).await
}

/// [`run`] with already-open backends (the Lambda face's).
pub async fn run_with(
    config: &Config,
    backends: &crate::backends::Backends,
    tables: &[String],
) -> Result<serde_json::Value> {
    let chosen: Vec<String> = if tables.is_empty() {
        config.source.tables.clone()
    } else {
        tables.to_vec()
    };
    let report = match under_lease(config, backends, &chosen).await? {
        crate::state::Leased::Ran(report) => report,
        crate::state::Leased::Held {
            owner,
            expires_at_ms,
        } => {
            return Err(Error::new(
                Code::StateLeaseHeld,
                format!("another build of job {}'s current state holds its lease ({owner})", config.job),
            )
            .hint(format!(
                "wait for it to finish (the lease expires at {expires_at_ms} ms since the epoch at the latest), then run again"
            )));
        }
    };
    if report.len() == 1 && report[0].1.is_err() {
        let (_, only) = report.into_iter().next().expect("one table");
        return Err(only.expect_err("checked above"));
    }
    Ok(serde_json::json!({
        "job": config.job,
        "tables": report.iter().map(|(table, r)| table_report(table, r)).collect::<Vec<_>>(),
    }))
}

/// With `output.current_state`: after a run, every table's current state is brought up to
/// date under the materialization lease. The run's changes are durable already: a build
/// that fails, or a lease another build holds, is a warning and the next run (or `sluice
/// materialize`) builds again.
pub async fn after_run(config: &Config, backends: &crate::backends::Backends) {
    match under_lease(config, backends, &config.source.tables).await {
        Ok(crate::state::Leased::Ran(report)) => {
            for (table, built) in &report {
                if let Ok(Built {
                    pointer: Some(p), ..
                }) = built
                {
                    tracing::info!(table = %table, version = p.version, build = %p.build, rows = p.rows, "current state built");
                }
            }
        }
        Ok(crate::state::Leased::Held { owner, .. }) => {
            tracing::warn!(holder = %owner, "another build holds the current-state lease; the next run builds again");
        }
        Err(e) => tracing::warn!(error = %e, "current state not built; the next run builds again"),
    }
}

/// What one table's build came to.
#[derive(Debug)]
pub struct Built {
    /// The version written; `None` when no change was committed since the previous one.
    pub pointer: Option<Pointer>,
    /// The Iceberg table holding the state (`namespace.name`), with `table_format:
    /// iceberg`; `None` otherwise.
    pub iceberg: Option<String>,
}

/// Builds `tables` under the job's materialization lease, or says who holds it.
async fn under_lease(
    config: &Config,
    backends: &crate::backends::Backends,
    tables: &[String],
) -> Result<crate::state::Leased<Vec<(String, Result<Built>)>>> {
    let run_id = crate::run_id::new_run_id();
    let owner = crate::state::holder::owner(&run_id, Some("materialize"));
    let destination = backends.destination.as_ref();
    let iceberg = crate::iceberg::ChangeLog::of(config, destination)?;
    let job = Job {
        name: &config.job,
        destination,
        iceberg: iceberg.as_ref(),
        per_bucket: config.output.current_state_bucket_rows,
    };
    crate::state::with_lease(
        backends.state.as_ref(),
        &lease_name(&config.job),
        &owner,
        config.lease.ttl(),
        |_lease| build_tables(&job, tables),
    )
    .await
}

/// What every table's build of one job shares.
struct Job<'a> {
    name: &'a str,
    destination: &'a dyn Destination,
    iceberg: Option<&'a crate::iceberg::ChangeLog<'a>>,
    per_bucket: u64,
}

/// Builds of one table, at most, while files it listed keep disappearing under it.
const BUILD_ATTEMPTS: usize = 4;

/// Builds each table in turn; a table that fails does not stop the others.
async fn build_tables(job: &Job<'_>, tables: &[String]) -> Result<Vec<(String, Result<Built>)>> {
    let mut report = Vec::with_capacity(tables.len());
    for table in tables {
        let built = build_table(job, table).await;
        if let Err(e) = &built {
            tracing::warn!(table = %table, error = %e, "current state not built, or its Iceberg table not committed");
        }
        report.push((table.clone(), built));
    }
    Ok(report)
}

/// One table: its Iceberg table brought to the stored version first (a build removes the
/// files of the version before the previous one, which it may still name after a crash),
/// then the next version built, then committed to the Iceberg table.
async fn build_table(job: &Job<'_>, table: &str) -> Result<Built> {
    let destination = job.destination;
    let mut iceberg = None;
    let mut log = job.iceberg;
    // A table of that name another writer keeps never names the state's files: the state
    // is built, the refusal reported.
    let mut refused = None;
    if let Some(to) = log
        && let Some(stored) = version::read(destination, table).await?
    {
        match commit_to_iceberg(to, job.name, &stored).await {
            Ok(name) => iceberg = name,
            Err(e) if e.code() == Code::IcebergCatalogRejected => {
                log = None;
                refused = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    let mut built = build(destination, table, job.per_bucket).await;
    // A compaction or forget beside the build removed a file it had listed: the build
    // wrote nothing the pointer names, so it starts over from a new listing.
    for _ in 1..BUILD_ATTEMPTS {
        match &built {
            Err(e) if e.code() == Code::LakeFileGone => {
                tracing::info!(table = %table, error = %e, "a listed file is gone; building again");
                built = build(destination, table, job.per_bucket).await;
            }
            _ => break,
        }
    }
    let pointer = built?;
    if let Some(e) = refused {
        return Err(e);
    }
    if let (Some(log), Some(p)) = (log, &pointer) {
        iceberg = commit_to_iceberg(log, job.name, p).await.inspect_err(|_| {
            tracing::warn!(table = %table, version = p.version, "the current state is built; its Iceberg table was not committed (the next build commits it)");
        })?;
    }
    Ok(Built { pointer, iceberg })
}

/// Commits the version `pointer` names to the table's Iceberg current-state table (a
/// version it holds already is not committed again); its name, `None` when the catalog
/// keeps none (S3 Tables).
async fn commit_to_iceberg(
    log: &crate::iceberg::ChangeLog<'_>,
    job: &str,
    pointer: &Pointer,
) -> Result<Option<String>> {
    use crate::iceberg::current::StateVersion;
    let files = pointer
        .buckets
        .iter()
        .enumerate()
        .filter_map(|(b, file)| {
            let size = pointer.bucket_bytes.get(b).copied().unwrap_or(0);
            file.clone().map(|key| (key, size))
        })
        .collect();
    let state = StateVersion {
        job,
        version: pointer.version,
        files,
        watermark: pointer.watermark.as_ref().map(|w| (w.pos.clone(), w.seq)),
    };
    let Some((name, outcome)) = log
        .commit_state(&pointer.table, version::FOLDER, &state)
        .await?
    else {
        return Ok(None);
    };
    if let crate::iceberg::table_commit::Outcome::Committed { snapshot_id } = outcome {
        tracing::info!(table = %pointer.table, iceberg = %name, version = pointer.version, snapshot_id, "current state committed to Iceberg");
    }
    Ok(Some(name))
}

/// One table's entry in the report.
fn table_report(table: &str, built: &Result<Built>) -> serde_json::Value {
    let mut entry = match built {
        Ok(Built {
            pointer: Some(p), ..
        }) => serde_json::json!({
            "table": table, "version": p.version, "build": p.build, "rows": p.rows,
            "files": p.files.len(), "parts_read": p.parts_read, "watermark": p.watermark,
        }),
        Ok(Built { pointer: None, .. }) => {
            serde_json::json!({ "table": table, "build": "up to date" })
        }
        Err(e) => serde_json::json!({
            "table": table, "error": e.code().as_str(), "message": e.to_string(),
        }),
    };
    if let Ok(Built {
        iceberg: Some(name),
        ..
    }) = built
    {
        entry["iceberg_table"] = serde_json::json!(name);
    }
    entry
}

/// Builds one table's next current-state version and points readers at it; `None` when
/// no change was committed since the previous version.
pub async fn build(
    destination: &dyn Destination,
    table: &str,
    per_bucket: u64,
) -> Result<Option<Pointer>> {
    let columns = crate::lake::shape::read(destination, table).await?;
    let previous = version::read(destination, table).await?;
    let named = previous.as_ref().map_or(0, |p| p.version);
    // A crashed build's folder was never named: clear it before writing there again.
    version::remove_files(destination, table, |v, _| v <= named).await?;
    let listing = inputs::list(destination, table).await?;
    let plans_seen: BTreeMap<String, usize> = listing
        .plans
        .iter()
        .map(|(plan, parts)| (plan.clone(), parts.len()))
        .collect();
    let plan = match previous.as_ref() {
        Some(p) if p.plans_seen == plans_seen => p.plan.clone(),
        _ => inputs::current_plan_id(destination, &listing).await?,
    };
    let build = Build {
        destination,
        table,
        per_bucket,
        columns: &columns,
        plan,
        plans_seen,
        version: named + 1,
    };
    if let Some(prev) = previous.as_ref().filter(|p| build.continues(p)) {
        match build.incremental(prev).await? {
            Incremental::Written(pointer) => return Ok(Some(*pointer)),
            Incremental::NothingNew => return Ok(None),
            Incremental::NewShape => {}
        }
    }
    build.full(&listing, previous.as_ref()).await.map(Some)
}

/// What an incremental build came to.
enum Incremental {
    Written(Box<Pointer>),
    NothingNew,
    /// The table's columns changed: the next version is a full build.
    NewShape,
}

/// One build of one table.
struct Build<'a> {
    destination: &'a dyn Destination,
    table: &'a str,
    per_bucket: u64,
    columns: &'a [ShapeColumn],
    plan: Option<String>,
    plans_seen: BTreeMap<String, usize>,
    version: u64,
}

impl Build<'_> {
    /// True when `prev` is a version this build can add to.
    fn continues(&self, prev: &Pointer) -> bool {
        prev.format_version == Pointer::FORMAT_VERSION
            && prev.plan == self.plan
            && !prev.buckets.is_empty()
            && prev.rows <= 8 * self.per_bucket * prev.buckets.len() as u64
            && prev.bucket_rows.iter().all(|&n| n <= 8 * self.per_bucket)
            && prev.watermark.is_some()
    }

    async fn incremental(&self, prev: &Pointer) -> Result<Incremental> {
        let watermark = prev.watermark.as_ref().expect("continues() checked it");
        let (keys, newest_run) = inputs::parts_since(
            self.destination,
            self.table,
            prev.runs_through.as_deref(),
            &watermark.pos,
        )
        .await?;
        let changes = after(
            &inputs::read_files(self.destination, &keys).await?,
            watermark,
        )?;
        // The stored columns' types, from one file's footer (its rows are not needed).
        let mut typed = match prev.files.first() {
            Some(key) => vec![inputs::read_columns(self.destination, key).await?],
            None => Vec::new(),
        };
        typed.extend(changes.iter().cloned());
        let shape = shape_of(self.columns, &typed);
        if column_names(&shape) != prev.columns {
            return Ok(Incremental::NewShape);
        }
        if changes.iter().all(|b| b.num_rows() == 0) {
            return Ok(Incremental::NothingNew);
        }
        let count = prev.buckets.len() as u32;
        let touched = buckets::touched(&changes, &shape, prev.bucketing, count)?;
        let mut batches = Vec::new();
        let mut replaced = 0;
        for &b in &touched {
            if let Some(Some(key)) = prev.buckets.get(b as usize) {
                for stored in inputs::read_file(self.destination, key).await? {
                    replaced += stored.num_rows() as u64;
                    batches.push(buckets::as_base(&stored)?);
                }
            }
        }
        let watermark = newest_change(&changes).or_else(|| prev.watermark.clone());
        batches.extend(changes);
        let state = fold::fold(&batches, &shape)?;
        drop(batches);
        let written = Written {
            state: &state,
            rows: prev.rows - replaced + state.num_rows() as u64,
            buckets: count,
            bucketing: prev.bucketing,
            shape: &shape,
            touched: Some(&touched),
            watermark,
            runs_through: newest_run.or_else(|| prev.runs_through.clone()),
            parts_read: keys.len(),
            kind: "incremental",
        };
        self.write(written, Some(prev))
            .await
            .map(|p| Incremental::Written(Box::new(p)))
    }

    async fn full(&self, listing: &inputs::Listing, prev: Option<&Pointer>) -> Result<Pointer> {
        let newest_run = inputs::run_manifests(self.destination, self.table)
            .await?
            .pop()
            .map(|(run, _)| run);
        let keys = inputs::all_files(listing, self.plan.as_deref());
        let batches = inputs::read_files(self.destination, &keys).await?;
        let shape = shape_of(self.columns, &batches);
        let watermark = newest_change(&batches);
        let state = fold::fold(&batches, &shape)?;
        drop(batches);
        let count = bucket_count(state.num_rows() as u64, self.per_bucket);
        let bucketing = buckets::Bucketing::choose(&state, &shape, count, self.per_bucket)?;
        let written = Written {
            state: &state,
            rows: state.num_rows() as u64,
            buckets: count,
            bucketing,
            shape: &shape,
            // Every bucket the split yields: the count's, and any a range puts rows in
            // beyond them (a key span wider than an `i64` holds no range of `count` buckets).
            touched: None,
            watermark,
            runs_through: newest_run,
            parts_read: keys.len(),
            kind: "full",
        };
        self.write(written, prev).await
    }

    /// Writes the touched buckets' files, then the pointer, then removes what neither the
    /// new nor the previous pointer names.
    async fn write(&self, w: Written<'_>, prev: Option<&Pointer>) -> Result<Pointer> {
        let folder = version::folder_key(self.table, self.version);
        let (mut files, mut counts, mut sizes): (Vec<Option<String>>, Vec<u64>, Vec<u64>) =
            match prev {
                Some(p) if w.kind == "incremental" => (
                    p.buckets.clone(),
                    p.bucket_rows.clone(),
                    p.bucket_bytes.clone(),
                ),
                _ => (vec![None; w.buckets as usize], Vec::new(), Vec::new()),
            };
        let split = buckets::split(w.state, w.shape, w.bucketing, w.buckets)?;
        // A range bucket beyond the previous ones (new keys) is added; a count the previous
        // pointer did not keep is unknown, which the size check reads as small.
        files.resize(files.len().max(split.len()), None);
        counts.resize(files.len(), 0);
        sizes.resize(files.len(), 0);
        let empty = split.first().map(|rows| rows.slice(0, 0));
        for (b, rows) in split.into_iter().enumerate() {
            if w.touched.is_some_and(|t| !t.contains(&(b as u32))) {
                continue;
            }
            counts[b] = rows.num_rows() as u64;
            sizes[b] = 0;
            files[b] = if rows.num_rows() == 0 {
                None
            } else {
                let key = format!("{folder}/bucket-{b:04}.parquet");
                let body = encode(&rows)?;
                sizes[b] = body.len() as u64;
                self.destination.put_marker(&key, &body).await?;
                Some(key)
            };
        }
        // An empty state is one file of no rows: a reader of the pointer's files gets the
        // columns (DuckDB refuses an empty file list).
        if let (true, Some(empty)) = (files.iter().all(Option::is_none), empty) {
            let key = format!("{folder}/bucket-0000.parquet");
            let body = encode(&empty)?;
            sizes[0] = body.len() as u64;
            self.destination.put_marker(&key, &body).await?;
            files[0] = Some(key);
        }
        crate::faults::hit(crate::faults::FaultPoint::MaterializeBeforePointer).await?;
        let pointer = Pointer {
            format_version: Pointer::FORMAT_VERSION,
            table: self.table.to_owned(),
            version: self.version,
            files: files.iter().flatten().cloned().collect(),
            buckets: files,
            bucketing: w.bucketing,
            bucket_rows: counts,
            bucket_bytes: sizes,
            rows: w.rows,
            watermark: w.watermark,
            runs_through: w.runs_through,
            plan: self.plan.clone(),
            plans_seen: self.plans_seen.clone(),
            columns: column_names(w.shape),
            previous_files: prev.map(|p| p.files.clone()).unwrap_or_default(),
            build: w.kind.to_owned(),
            parts_read: w.parts_read,
            written_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        version::write(self.destination, &pointer).await?;
        crate::faults::hit(crate::faults::FaultPoint::MaterializeAfterPointer).await?;
        let named: BTreeSet<&String> = pointer
            .files
            .iter()
            .chain(&pointer.previous_files)
            .collect();
        version::remove_files(self.destination, self.table, |_, key| {
            named.contains(&key.to_owned())
        })
        .await?;
        Ok(pointer)
    }
}

/// What one build writes.
struct Written<'a> {
    state: &'a RecordBatch,
    /// The rows of the whole new version (the state's, plus the untouched buckets').
    rows: u64,
    /// The state's bucket count.
    buckets: u32,
    bucketing: buckets::Bucketing,
    shape: &'a Shape,
    /// The buckets to write (`None`: every one, a full build).
    touched: Option<&'a BTreeSet<u32>>,
    watermark: Option<Watermark>,
    runs_through: Option<String>,
    parts_read: usize,
    kind: &'static str,
}

/// The rows of `batches` after `watermark` (`(__pos, __seq)` greater).
fn after(batches: &[RecordBatch], watermark: &Watermark) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|batch| {
            let positions = batch
                .column_by_name(POS)
                .and_then(|c| c.as_string_opt::<i32>());
            let seqs = batch
                .column_by_name(SEQ)
                .and_then(|c| c.as_primitive_opt::<arrow_array::types::Int64Type>());
            let (Some(positions), Some(seqs)) = (positions, seqs) else {
                return Err(Error::new(
                    Code::FoldInput,
                    "a part without __pos and __seq".to_owned(),
                ));
            };
            let keep: BooleanArray = (0..batch.num_rows())
                .map(|i| {
                    let pos = positions.value(i);
                    Some(
                        pos > watermark.pos.as_str()
                            || (pos == watermark.pos && seqs.value(i) > watermark.seq),
                    )
                })
                .collect();
            filter_record_batch(batch, &keep).map_err(|e| {
                Error::new(Code::Internal, "keeping a part's new rows".to_owned()).source(e)
            })
        })
        .collect()
}

/// The newest `(__pos, __seq)` of the batches.
fn newest_change(batches: &[RecordBatch]) -> Option<Watermark> {
    let mut newest: Option<Watermark> = None;
    for batch in batches {
        let (Some(positions), Some(seqs)) = (
            batch
                .column_by_name(POS)
                .and_then(|c| c.as_string_opt::<i32>()),
            batch
                .column_by_name(SEQ)
                .and_then(|c| c.as_primitive_opt::<arrow_array::types::Int64Type>()),
        ) else {
            continue;
        };
        for i in 0..batch.num_rows() {
            let (pos, seq) = (positions.value(i), seqs.value(i));
            let newer = newest
                .as_ref()
                .is_none_or(|n| (pos, seq) > (n.pos.as_str(), n.seq));
            if newer {
                newest = Some(Watermark {
                    pos: pos.to_owned(),
                    seq,
                });
            }
        }
    }
    newest
}

/// The fold's shape: the newest manifest's columns, each with the type and field metadata
/// of the newest batch that has it.
pub(crate) fn shape_of(columns: &[ShapeColumn], batches: &[RecordBatch]) -> Shape {
    let mut fields = Vec::with_capacity(columns.len());
    for column in columns {
        let field = batches
            .iter()
            .rev()
            .find_map(|b| b.schema().field_with_name(&column.name).ok().cloned())
            .map(|f| {
                Field::new(f.name(), f.data_type().clone(), true)
                    .with_metadata(f.metadata().clone())
            })
            // No part read holds it (a baseline of an empty table, a column added and not
            // written since): NULL in every row; the next build that sees its type starts
            // over (the shape's columns differ).
            .unwrap_or_else(|| Field::new(&column.name, arrow_schema::DataType::Utf8, true));
        fields.push(field);
    }
    Shape {
        key: (0..columns.len()).filter(|&i| columns[i].key).collect(),
        fillable: columns
            .iter()
            .map(|c| fold::may_be_unlogged(&c.ty))
            .collect(),
        fields,
    }
}

/// `name type` of each column of the shape, as the pointer records them.
fn column_names(shape: &Shape) -> Vec<String> {
    shape
        .fields
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect()
}

/// One current-state file: Parquet, zstd, the batch's schema.
pub(crate) fn encode(batch: &RecordBatch) -> Result<Vec<u8>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut out = Vec::new();
    let failed = |e: parquet::errors::ParquetError| {
        Error::new(Code::Internal, "encoding a current-state file".to_owned()).source(e)
    };
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).map_err(failed)?;
    writer.write(batch).map_err(failed)?;
    writer.close().map_err(failed)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::bucket_count;

    #[test]
    fn a_full_build_counts_buckets_from_the_rows() {
        assert_eq!(bucket_count(0, 100), 1);
        assert_eq!(bucket_count(100, 100), 1);
        assert_eq!(bucket_count(101, 100), 2);
        assert_eq!(bucket_count(u64::MAX / 2, 1), super::MAX_BUCKETS);
    }
}
