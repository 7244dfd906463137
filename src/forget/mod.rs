//! `sluice forget`: every row of the given keys is erased from one table's folder — change
//! parts, parts compactions wrote, baseline parts (the current plan's and earlier plans'),
//! parts moved aside under `_superseded/`, and the current-state files — so no row of a
//! key remains under the destination (docs/privacy.md, "The erasure procedure").
//!
//! Guarantees (DESIGN, "After the drain: the lake over time"):
//!
//! * **the epoch comes first, from the source**: a key is forgotten only once the replay
//!   of the table no longer holds it — its newest row (by `(__pos, __seq)`) in the parts a
//!   reader reads is a `delete` (the source's own delete, drained: a checkpoint covers
//!   it), or a `truncate`/`rebaseline` marker sorts after it. Otherwise nothing is
//!   touched and the key is refused (`SLUICE_FORGET_KEY_PRESENT`): forgetting it would
//!   make the lake disagree with the source. That delete row *is* the marker DESIGN
//!   rule 3 asks for: it already sorts after every row of the key in the lake (it is the
//!   newest) and before every later change a drain writes (those come after the
//!   checkpoint that covers it), and the replay rule understands it;
//! * **no reader sees a wrong state**: the files holding a key are rewritten one per step,
//!   in the order of their newest row of a key, so the file holding a key's newest row
//!   (its delete) goes last. Every step keeps the key's newest row until the last: the
//!   latest row of the key stays that delete, and the state stays "absent" at every
//!   instant, for a reader following manifests (a step's manifest swaps the part for its
//!   rewrite at once) and for one listing the folder (the rewrite holds a subset of the
//!   old file's rows byte-identical, so while both are there the duplicates count once);
//!   when the last step removes the delete, no row of the key is left at all;
//! * **crash-safe, idempotent**: a step goes rewrite durable → manifest
//!   (`_compactions/<forget id>-<step>.json`, `kind: forget`) → removal (fault points
//!   `forget_part_durable`, `forget_manifest_written`, `forget_part_removed`), with the
//!   compaction's fenced lease `compact#<table>` (forget and compaction of a table never
//!   run at once); the ledger's live parts ([`crate::compaction::ledger`]) follow it as
//!   they follow a compaction. A killed forget leaves a table that replays to the state
//!   without the keys (the epoch held before it started); running it again finishes the
//!   removals an earlier step recorded, removes the rewrites no manifest names, and
//!   redoes the rest (a key already gone matches nothing);
//! * **verified before anything is removed**: every file is read whole and checked
//!   against the rows and checksum its manifest recorded before the first step, and again
//!   as each is rewritten, each rewrite read back ([`crate::compaction::rewrite`]); a
//!   corrupt or missing part is `SLUICE_FORGET_PART_CORRUPT` naming it, and nothing is
//!   removed;
//! * **the current state**: its files holding a key ([`state`]) are rewritten into a new
//!   version the pointer then names (fault point `forget_state_written`), under the
//!   materialization lease; the files no pointer names that hold a key are removed;
//! * **recorded, never revealed**: `<table>/_forgets/<forget id>.json` records each key's
//!   digest ([`keys::digest`]), the time, the files rewritten and the rows removed.
//!
//! Refused: a table without a key, an Iceberg change log and a stdout destination
//! (`SLUICE_FORGET_UNSUPPORTED`).

pub mod keys;
pub mod state;

use std::collections::BTreeSet;
use std::time::Instant;

use arrow_array::cast::AsArray;
use chrono::{SecondsFormat, Utc};
use serde::Serialize;

use crate::backends::Backends;
use crate::compaction::ledger::{COMPACTIONS_DIR, CompactionManifest, Ledger, RewrittenFile};
use crate::compaction::plan::Group;
use crate::compaction::rewrite::{Keep, Output, Rewriter};
use crate::compaction::step::{self, Fence};
use crate::config::{Config, DestinationConfig, TableFormat};
use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::faults::{FaultPoint, hit};
use crate::parts::arrow_schema::{OP, POS, SEQ};
use crate::parts::checksum::Algorithm;
use crate::parts::{MANIFEST_FILE, Manifest, ManifestPart, PartSettings};
use crate::policy::hash::Hasher;
use crate::state::holder;
use crate::state::ops::{OpLeased, compaction_op, with_op_lease};
use keys::{Key, Matcher};

/// The folder of a table's forget records, below the table folder.
pub const FORGETS_DIR: &str = "_forgets";

/// The name prefix of a rewritten baseline file: `part-forget-<forget id>-<nnnnnn>.parquet`
/// in the plan folder of the file it replaces (readers of a plan take its `part-` files).
pub const SNAPSHOT_PREFIX: &str = "part-forget-";

/// What to forget.
#[derive(Debug, Clone)]
pub struct ForgetOptions {
    /// The table, as `source.tables` names it.
    pub table: String,
    pub keys: Vec<Key>,
}

/// One rewritten (or removed) file, as the summary and the record list it.
#[derive(Debug, Clone, Serialize)]
pub struct FileForgotten {
    pub key: String,
    /// The file holding its other rows; absent when none was left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    pub rows_removed: u64,
}

/// What `sluice forget` prints (one JSON object) and records in
/// `<table>/_forgets/<forget id>.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ForgetSummary {
    pub format_version: u32,
    /// `forgotten` (rows were removed), `nothing` (no file held a key).
    pub status: String,
    pub job: String,
    pub table: String,
    pub forget_id: String,
    /// RFC 3339, UTC.
    pub at: String,
    /// Each key's digest (`hmac-sha256:` under the job's hash key, else `sha256:`).
    pub keys: Vec<String>,
    pub key_columns: Vec<String>,
    /// Data files read.
    pub files_scanned: u64,
    pub files: Vec<FileForgotten>,
    /// Current-state files rewritten or removed.
    pub state_files: Vec<FileForgotten>,
    pub rows_removed: u64,
    /// Removals an interrupted earlier forget (or compaction) had recorded, done now.
    pub finished_earlier: u64,
    /// Change parts written but not yet listed by a run manifest (a drain in flight):
    /// not read; a later forget reads them.
    pub unlisted_skipped: u64,
    pub duration_ms: u64,
    /// The record's key (absent when nothing was forgotten).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

impl ForgetSummary {
    /// The summary as one JSON line.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Refuses a config whose output `forget` does not rewrite.
pub fn check_supported(config: &Config) -> Result<()> {
    if config.table_format == TableFormat::Iceberg {
        return Err(Error::new(
            Code::ForgetUnsupported,
            "sluice forget does not rewrite an Iceberg change log yet (table_format: iceberg): its snapshots reference the parts",
        )
        .hint("delete the key's rows with the Iceberg engine you query the table with (a DELETE then expire_snapshots), not with sluice forget"));
    }
    if matches!(config.destination, DestinationConfig::Stdout {}) {
        return Err(Error::new(
            Code::ForgetUnsupported,
            "a stdout destination keeps no parts to forget rows in",
        )
        .hint("run sluice forget with the job's local or S3 destination"));
    }
    Ok(())
}

/// Forgets `options.keys` in `options.table` under the table's compaction lease.
pub async fn run(
    config: &Config,
    backends: &Backends,
    options: &ForgetOptions,
) -> Result<ForgetSummary> {
    check_supported(config)?;
    let table = options.table.as_str();
    if !config.source.tables.iter().any(|t| t == table) {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("table {table} is not in source.tables"),
        )
        .hint(format!(
            "name a table as source.tables lists it: {}",
            config.source.tables.join(", ")
        )));
    }
    if options.keys.is_empty() {
        return Err(Error::new(Code::ConfigInvalid, "no key to forget")
            .hint("give --key col=value (repeatable) or --keys-file FILE"));
    }
    let destination = backends.destination.as_ref();
    let columns = crate::lake::shape::read(destination, table).await?;
    let key_columns: Vec<String> = columns
        .iter()
        .filter(|c| c.key)
        .map(|c| c.name.clone())
        .collect();
    if key_columns.is_empty() {
        return Err(Error::new(
            Code::ForgetUnsupported,
            format!("table {table} has no key: its rows cannot be told apart by one"),
        )
        .hint("sluice forget erases a key's rows; for a table without a key, delete the rows in the source, let a drain run, then re-baseline the table (`sluice baseline --table`) and remove the earlier plan folders and change parts by hand (docs/privacy.md)"));
    }
    for key in &options.keys {
        key.check(table, &key_columns)?;
    }
    let hasher = Hasher::of(config)?;
    let hashed: BTreeSet<String> = config
        .policy
        .tables
        .get(table)
        .map(|p| p.hash.iter().cloned().collect())
        .unwrap_or_default();
    let matcher = Matcher::new(&options.keys, &hashed, hasher.as_ref());
    let started = Instant::now();
    let forget_id = crate::run_id::new_run_id();
    let mut summary = ForgetSummary {
        format_version: 1,
        status: "nothing".into(),
        job: config.job.clone(),
        table: table.to_owned(),
        forget_id: forget_id.clone(),
        at: String::new(),
        keys: options
            .keys
            .iter()
            .map(|k| keys::digest(k, hasher.as_ref()))
            .collect(),
        key_columns,
        files_scanned: 0,
        files: Vec::new(),
        state_files: Vec::new(),
        rows_removed: 0,
        finished_earlier: 0,
        unlisted_skipped: 0,
        duration_ms: 0,
        record: None,
    };
    let owner = holder::owner(&forget_id, Some("forget"));
    let store = backends.state.as_ref();
    let ttl = config.compaction.lease_ttl();
    let summary_ref = &mut summary;
    let matcher_ref = &matcher;
    let leased = with_op_lease(
        store,
        &config.job,
        &compaction_op(table),
        &owner,
        ttl,
        |lease| async move {
            let mut fence = Fence::new(store, lease, ttl);
            forget_leased(
                config,
                backends,
                table,
                matcher_ref,
                &mut fence,
                summary_ref,
            )
            .await
        },
    )
    .await?;
    if let OpLeased::Held {
        owner,
        expires_at_ms,
    } = leased
    {
        return Err(Error::new(
            Code::StateLeaseHeld,
            format!("a compaction or forget of {table} holds its lease ({owner})"),
        )
        .hint(format!(
            "run sluice forget again once it is done (the lease expires at {expires_at_ms} ms since the epoch at the latest)"
        )));
    }
    state::forget(config, backends, table, &matcher, &mut summary).await?;
    summary.rows_removed = summary
        .files
        .iter()
        .chain(&summary.state_files)
        .map(|f| f.rows_removed)
        .sum();
    summary.at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    summary.duration_ms = started.elapsed().as_millis() as u64;
    if !summary.files.is_empty() || !summary.state_files.is_empty() {
        summary.status = "forgotten".into();
        let key = format!("{table}/{FORGETS_DIR}/{forget_id}.json");
        summary.record = Some(key.clone());
        let body = serde_json::to_vec_pretty(&summary)
            .map_err(|e| Error::new(Code::Internal, "serializing a forget record").source(e))?;
        destination.put_marker(&key, &body).await?;
    }
    tracing::info!(table, status = %summary.status, files = summary.files.len(), state_files = summary.state_files.len(), rows = summary.rows_removed, "forget done");
    Ok(summary)
}

/// A file that may hold a key's rows.
#[derive(Debug, Clone)]
struct Candidate {
    part: ManifestPart,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A live part of the ledger (run or compaction manifests).
    Listed,
    /// A part of the current baseline (`snapshot/_manifest.json`).
    Baseline,
    /// A file no reader takes (an earlier plan's part, one under `_superseded/`).
    Unread,
}

/// A `(__pos, __seq)` with the row's `__op`.
type Row = (String, i64, String);

/// What a scan found in one candidate.
#[derive(Debug, Default)]
struct Found {
    rows: u64,
    /// Each row of a key: the key's number and the row's `(__pos, __seq)`.
    keyed: Vec<(usize, String, i64)>,
}

async fn forget_leased(
    config: &Config,
    backends: &Backends,
    table: &str,
    matcher: &Matcher,
    fence: &mut Fence<'_>,
    summary: &mut ForgetSummary,
) -> Result<()> {
    let destination = backends.destination.as_ref();
    let forget_id = summary.forget_id.clone();
    // What an interrupted forget (or compaction) left, finished first.
    let mut ledger = Ledger::read(destination, table).await?;
    if step::withdraw_void(destination, fence, &ledger).await? > 0 {
        ledger = Ledger::read(destination, table).await?;
    }
    summary.finished_earlier = step::finish_earlier(destination, fence, &ledger)
        .await
        .map_err(rehint)?;
    summary.finished_earlier += finish_files(destination, fence, &ledger, table).await?;
    step::sweep_orphans(destination, fence, &ledger, table, &forget_id).await?;
    sweep_snapshot_orphans(destination, &ledger, table, &forget_id).await?;
    let ledger = Ledger::read(destination, table).await?;

    let candidates = candidates(destination, &ledger, table, summary).await?;
    summary.files_scanned = candidates.len() as u64;
    // Per key: its newest row in what readers read; and the newest marker.
    let mut newest: Vec<Option<Row>> = vec![None; matcher.len()];
    let mut marker: Option<Row> = None;
    let mut found: Vec<(Candidate, Found)> = Vec::new();
    for candidate in candidates {
        fence.keep().await?;
        let batches = crate::lake::files::read_file(destination, &candidate.part.key)
            .await
            .map_err(|e| corrupt(&candidate.part, &e.to_string()))?;
        verify(&candidate.part, &batches)?;
        let mut here = Found::default();
        for batch in &batches {
            let per_key = matcher.per_key(batch)?;
            let (ops, positions, seqs) = metadata(batch);
            for i in 0..batch.num_rows() {
                let row = || -> Row {
                    (
                        positions.map_or(String::new(), |p| p.value(i).to_owned()),
                        seqs.map_or(0, |s| s.value(i)),
                        ops.map_or(String::new(), |o| o.value(i).to_owned()),
                    )
                };
                if candidate.kind != Kind::Unread
                    && ops.is_some_and(|o| matches!(o.value(i), "truncate" | "rebaseline"))
                {
                    newer(&mut marker, row());
                }
                let mut any = false;
                for (k, mask) in per_key.iter().enumerate() {
                    if mask.value(i) {
                        any = true;
                        let (pos, seq, _) = row();
                        here.keyed.push((k, pos, seq));
                        if candidate.kind != Kind::Unread {
                            newer(&mut newest[k], row());
                        }
                    }
                }
                if any {
                    here.rows += 1;
                }
            }
        }
        if here.rows > 0 {
            found.push((candidate, here));
        }
    }
    let present: Vec<usize> = newest
        .iter()
        .enumerate()
        .filter(|(_, row)| row.as_ref().is_some_and(|r| !absent(r, marker.as_ref())))
        .map(|(k, _)| k + 1)
        .collect();
    if !present.is_empty() {
        return Err(Error::new(
            Code::ForgetKeyPresent,
            format!(
                "the replay of {table} still holds key{} number {} of the {} given: its newest row there is not a delete",
                if present.len() > 1 { "s" } else { "" },
                present.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                matcher.len()
            ),
        )
        .hint("delete the rows in the source first, let a drain run (its checkpoint covers the delete), then run sluice forget again; nothing was changed"));
    }
    // Phase 1: every row of a key but its newest (and every row of a file no reader
    // takes) goes; each key's newest row — its delete — stays, so the state holds.
    // Phase 2: the files still holding a newest row lose it; no other row of its key is
    // left anywhere, so the state holds again.
    found.sort_by(|(a, _), (b, _)| {
        (a.kind != Kind::Unread, &a.part.key).cmp(&(b.kind != Kind::Unread, &b.part.key))
    });
    let newest_at: Vec<Option<(String, i64)>> = newest
        .iter()
        .map(|r| r.as_ref().map(|r| (r.0.clone(), r.1)))
        .collect();
    let is_newest = |k: usize, pos: &str, seq: i64| {
        newest_at[k]
            .as_ref()
            .is_some_and(|(p, s)| p == pos && *s == seq)
    };
    let keep_newest = |batch: &arrow_array::RecordBatch| -> Result<arrow_array::BooleanArray> {
        let per_key = matcher.per_key(batch)?;
        let (_, positions, seqs) = metadata(batch);
        Ok((0..batch.num_rows())
            .map(|i| {
                let pos = positions.map_or("", |p| p.value(i));
                let seq = seqs.map_or(0, |s| s.value(i));
                let mut matched = false;
                let mut newest = false;
                for (k, mask) in per_key.iter().enumerate() {
                    if mask.value(i) {
                        matched = true;
                        newest |= is_newest(k, pos, seq);
                    }
                }
                Some(!matched || newest)
            })
            .collect())
    };
    let keep_none = |batch: &arrow_array::RecordBatch| matcher.keep(batch);
    let settings = PartSettings::of(config);
    let mut steps = Steps {
        destination,
        table,
        job: &config.job,
        forget_id: &forget_id,
        settings: &settings,
        number: 0,
        next_part: 1,
    };
    let mut last = Vec::new();
    for (candidate, here) in found {
        let held_newest = if candidate.kind == Kind::Unread {
            0
        } else {
            here.keyed
                .iter()
                .filter(|(k, pos, seq)| is_newest(*k, pos, *seq))
                .count() as u64
        };
        let older = here.rows - held_newest;
        if older == 0 {
            last.push((candidate, held_newest));
            continue;
        }
        let keep: &Keep<'_> = if candidate.kind == Kind::Unread {
            &keep_none
        } else {
            &keep_newest
        };
        let by = steps.step(fence, &candidate, keep, older).await?;
        summary.files.push(FileForgotten {
            key: candidate.part.key.clone(),
            by: by.as_ref().map(|b| b.key.clone()),
            rows_removed: older,
        });
        if let Some(by) = by.filter(|_| held_newest > 0) {
            last.push((
                Candidate {
                    part: by,
                    kind: candidate.kind,
                },
                held_newest,
            ));
        }
    }
    for (candidate, rows) in last {
        let by = steps.step(fence, &candidate, &keep_none, rows).await?;
        summary.files.push(FileForgotten {
            key: candidate.part.key.clone(),
            by: by.map(|b| b.key),
            rows_removed: rows,
        });
    }
    Ok(())
}

/// The steps of one forget.
struct Steps<'a> {
    destination: &'a dyn Destination,
    table: &'a str,
    job: &'a str,
    forget_id: &'a str,
    settings: &'a PartSettings,
    /// The last step's number.
    number: u32,
    /// The next rewritten part's number.
    next_part: u32,
}

impl Steps<'_> {
    /// Rewrites `candidate` keeping the rows `keep` says (it holds `rows_removed` others),
    /// then commits the step; the rewrite's entry, when a row was left.
    async fn step(
        &mut self,
        fence: &mut Fence<'_>,
        candidate: &Candidate,
        keep: &Keep<'_>,
        rows_removed: u64,
    ) -> Result<Option<ManifestPart>> {
        fence.keep().await?;
        let mut rewriter = Rewriter {
            destination: self.destination,
            table: self.table,
            compaction_id: self.forget_id,
            settings: self.settings,
            next_number: self.next_part,
            keep: Some(keep),
        };
        let group = Group {
            partition: match candidate.kind {
                Kind::Listed => candidate.part.partition.clone(),
                _ => None,
            },
            parts: vec![candidate.part.clone()],
        };
        let never = || false;
        let outputs = rewriter
            .rewrite(&group, &never)
            .await
            .map_err(rehint)?
            .unwrap_or_default();
        self.next_part = rewriter.next_number;
        let mut output = None;
        for mut out in outputs {
            if out.entry.rows == 0 || output.is_some() {
                out.discard();
                continue;
            }
            if candidate.kind != Kind::Listed {
                out.entry.key =
                    snapshot_key(&candidate.part.key, self.forget_id, self.next_part - 1);
                out.entry.partition = None;
            }
            output = Some(out);
        }
        self.number += 1;
        commit(
            self.destination,
            fence,
            (self.job, self.table),
            (self.forget_id, self.number),
            candidate,
            output,
            rows_removed,
        )
        .await
    }
}

/// The live parts, the current baseline's parts and the files no reader takes.
async fn candidates(
    destination: &dyn Destination,
    ledger: &Ledger,
    table: &str,
    summary: &mut ForgetSummary,
) -> Result<Vec<Candidate>> {
    let snapshot_prefix = format!("{table}/snapshot/");
    let mut out: Vec<Candidate> = ledger
        .live()
        .filter(|p| !p.part.key.starts_with(&snapshot_prefix))
        .map(|p| Candidate {
            part: p.part.clone(),
            kind: Kind::Listed,
        })
        .collect();
    let mut known: BTreeSet<String> = ledger.listed.keys().cloned().collect();
    known.extend(ledger.replaced.iter().cloned());
    // The current plan's folder; a plan folder sorting after it is a baseline still being
    // written (or given up): its chunks' records name its parts, so it is left alone.
    let mut current_plan: Option<String> = None;
    if let Some(manifest) = baseline_manifest(destination, table).await? {
        current_plan = manifest.parts.first().and_then(|p| {
            under(table, &p.key)
                .strip_prefix(&snapshot_prefix)
                .and_then(|rest| rest.split_once('/'))
                .map(|(plan, _)| plan.to_owned())
        });
        for mut part in manifest.parts {
            part.key = under(table, &part.key);
            known.insert(part.key.clone());
            out.push(Candidate {
                part,
                kind: Kind::Baseline,
            });
        }
    }
    let state = format!("{table}/{}/", crate::materialize::version::FOLDER);
    for key in &ledger.objects {
        if !key.ends_with(".parquet") || known.contains(key) || key.starts_with(&state) {
            continue;
        }
        let name = key.rsplit('/').next().unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        let plan = key
            .strip_prefix(&snapshot_prefix)
            .and_then(|rest| rest.split_once('/'))
            .map(|(plan, _)| plan);
        let settled_plan = plan.is_some_and(|p| current_plan.as_deref().is_some_and(|c| p <= c));
        let unread = settled_plan || key.starts_with(&format!("{table}/_superseded/"));
        if !unread {
            // A drain's part its run manifest does not list yet (or lists as pending), or
            // a part of a baseline still being written: no checkpoint or finished plan
            // covers it, so a lake operation leaves it alone.
            summary.unlisted_skipped += 1;
            continue;
        }
        out.push(Candidate {
            part: ManifestPart {
                key: key.clone(),
                rows: 0,
                bytes: 0,
                checksum: String::new(),
                first_pos: String::new(),
                last_pos: String::new(),
                partition: None,
                shape: None,
            },
            kind: Kind::Unread,
        });
    }
    Ok(out)
}

/// One step: the rewrite durable, the manifest, then the old file removed.
async fn commit(
    destination: &dyn Destination,
    fence: &mut Fence<'_>,
    (job, table): (&str, &str),
    (forget_id, step): (&str, u32),
    candidate: &Candidate,
    output: Option<Output>,
    rows_removed: u64,
) -> Result<Option<ManifestPart>> {
    let entry = match output {
        Some(output) => {
            let uploaded = destination.put_part(&output.entry.key, &output.local).await;
            let entry = output.entry.clone();
            output.discard();
            uploaded?;
            hit(FaultPoint::ForgetPartDurable).await?;
            Some(entry)
        }
        None => None,
    };
    fence.renew().await?;
    let listed = candidate.kind == Kind::Listed;
    let mut manifest = CompactionManifest::new(
        (job, table),
        (forget_id, step),
        if listed {
            entry.iter().cloned().collect()
        } else {
            Vec::new()
        },
        if listed {
            vec![candidate.part.clone()]
        } else {
            Vec::new()
        },
        Utc::now(),
    );
    manifest.kind = Some("forget".into());
    manifest.rows_removed = Some(rows_removed);
    if !listed {
        manifest.files = vec![RewrittenFile {
            key: candidate.part.key.clone(),
            by: entry.clone(),
        }];
    }
    destination
        .put_marker(&manifest.key(), &manifest.to_json_bytes()?)
        .await?;
    hit(FaultPoint::ForgetManifestWritten).await?;
    fence.renew().await?;
    if let Some(entry) = &entry
        && destination.get_range(&entry.key, 0, 1).await?.is_none()
    {
        destination.delete(&manifest.key()).await?;
        return Err(Error::new(
            Code::StateFenced,
            format!(
                "forget step {} lost its part {} to a compaction that took the lease over; its manifest is withdrawn",
                manifest.key(),
                entry.key
            ),
        )
        .hint("nothing was removed; run sluice forget again"));
    }
    if candidate.kind == Kind::Baseline {
        swap_in_baseline(destination, table, &candidate.part.key, entry.as_ref()).await?;
    }
    destination.delete(&candidate.part.key).await?;
    hit(FaultPoint::ForgetPartRemoved).await?;
    Ok(entry)
}

/// Finishes the `files` of earlier forget manifests: the baseline manifest names the
/// rewrite, and the old file is removed. Returns how many it removed.
async fn finish_files(
    destination: &dyn Destination,
    fence: &mut Fence<'_>,
    ledger: &Ledger,
    table: &str,
) -> Result<u64> {
    let mut removed = 0;
    for manifest in ledger.compactions.values() {
        for file in &manifest.files {
            if !ledger.objects.contains(&file.key) {
                continue;
            }
            if let Some(by) = &file.by
                && !ledger.objects.contains(&by.key)
            {
                return Err(corrupt(
                    by,
                    &format!("is named by forget manifest {} but is gone", manifest.key()),
                ));
            }
            fence.renew().await?;
            swap_in_baseline(destination, table, &file.key, file.by.as_ref()).await?;
            destination.delete(&file.key).await?;
            removed += 1;
            hit(FaultPoint::ForgetPartRemoved).await?;
        }
    }
    Ok(removed)
}

/// Removes rewritten baseline files no forget manifest names (a forget killed before its
/// manifest), except `ours`'.
async fn sweep_snapshot_orphans(
    destination: &dyn Destination,
    ledger: &Ledger,
    table: &str,
    ours: &str,
) -> Result<()> {
    let named: BTreeSet<&str> = ledger
        .compactions
        .values()
        .flat_map(|m| m.files.iter().filter_map(|f| f.by.as_ref()))
        .map(|p| p.key.as_str())
        .collect();
    let manifests: BTreeSet<String> = destination
        .list(&format!("{table}/{COMPACTIONS_DIR}/"))
        .await?
        .into_iter()
        .collect();
    for key in &ledger.objects {
        let name = key.rsplit('/').next().unwrap_or_default();
        let Some(rest) = name
            .strip_prefix(SNAPSHOT_PREFIX)
            .and_then(|r| r.strip_suffix(".parquet"))
        else {
            continue;
        };
        let Some((id, _)) = rest.rsplit_once('-') else {
            continue;
        };
        let prefix = format!("{table}/{COMPACTIONS_DIR}/{id}-");
        let named_since = manifests
            .iter()
            .any(|m| m.starts_with(&prefix) && !ledger.compactions.contains_key(m));
        if id == ours || named_since || named.contains(key.as_str()) {
            continue;
        }
        tracing::info!(part = %key, "removing a rewritten baseline file no manifest names (a forget stopped before its manifest)");
        destination.delete(key).await?;
    }
    Ok(())
}

/// Replaces `old` by `by` (or drops it) in the table's `snapshot/_manifest.json`, when it
/// lists it.
async fn swap_in_baseline(
    destination: &dyn Destination,
    table: &str,
    old: &str,
    by: Option<&ManifestPart>,
) -> Result<()> {
    let Some(mut manifest) = baseline_manifest(destination, table).await? else {
        return Ok(());
    };
    let Some(at) = manifest
        .parts
        .iter()
        .position(|p| under(table, &p.key) == old)
    else {
        return Ok(());
    };
    match by {
        Some(by) => {
            let mut by = by.clone();
            // The manifest's keys keep their own form (relative or not).
            if !manifest.parts[at].key.starts_with(&format!("{table}/")) {
                by.key = by
                    .key
                    .strip_prefix(&format!("{table}/"))
                    .unwrap_or(&by.key)
                    .to_owned();
            }
            manifest.parts[at] = by;
        }
        None => {
            manifest.parts.remove(at);
        }
    }
    manifest.rows = manifest.parts.iter().map(|p| p.rows).sum();
    manifest.bytes = manifest.parts.iter().map(|p| p.bytes).sum();
    let body = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| Error::new(Code::Internal, "serializing a baseline manifest").source(e))?;
    destination
        .put_marker(&format!("{table}/snapshot/{MANIFEST_FILE}"), &body)
        .await
}

async fn baseline_manifest(destination: &dyn Destination, table: &str) -> Result<Option<Manifest>> {
    let key = format!("{table}/snapshot/{MANIFEST_FILE}");
    let Some(body) = destination.get(&key).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        Error::new(
            Code::StateCorrupt,
            format!("{key} is not a sluice manifest"),
        )
        .hint(
            "restore the document from a version; sluice forget reads the baseline's parts from it",
        )
        .source(e)
    })
}

/// `key` below the table folder.
fn under(table: &str, key: &str) -> String {
    if key.starts_with(&format!("{table}/")) {
        key.to_owned()
    } else {
        format!("{table}/{key}")
    }
}

/// The key of a rewritten baseline (or unread) file, in the folder of `old`.
fn snapshot_key(old: &str, forget_id: &str, number: u32) -> String {
    let folder = old.rsplit_once('/').map_or("", |(f, _)| f);
    format!("{folder}/{SNAPSHOT_PREFIX}{forget_id}-{number:06}.parquet")
}

/// The batch's `__op`, `__pos` and `__seq` columns.
fn metadata(
    batch: &arrow_array::RecordBatch,
) -> (
    Option<&arrow_array::StringArray>,
    Option<&arrow_array::StringArray>,
    Option<&arrow_array::Int64Array>,
) {
    (
        batch
            .column_by_name(OP)
            .and_then(|c| c.as_string_opt::<i32>()),
        batch
            .column_by_name(POS)
            .and_then(|c| c.as_string_opt::<i32>()),
        batch
            .column_by_name(SEQ)
            .and_then(|c| c.as_primitive_opt::<arrow_array::types::Int64Type>()),
    )
}

fn newer(slot: &mut Option<Row>, row: Row) {
    if slot
        .as_ref()
        .is_none_or(|s| (row.0.as_str(), row.1) > (s.0.as_str(), s.1))
    {
        *slot = Some(row);
    }
}

/// True when a key whose newest row is `row` is not in the replay: that row is a delete,
/// or `marker` (the newest `truncate`/`rebaseline`) drops it.
fn absent(row: &Row, marker: Option<&Row>) -> bool {
    if row.2 == "delete" {
        return true;
    }
    marker.is_some_and(|m| {
        let dropped = (row.0.as_str(), row.1) <= (m.0.as_str(), m.1);
        let base = m.2 == "rebaseline" && row.2 == "snapshot" && row.0 == m.0;
        dropped && !base
    })
}

/// Checks `batches` (all of `part`) against the rows and checksum its manifest recorded
/// (a file no manifest records has none), before anything is removed.
fn verify(part: &ManifestPart, batches: &[arrow_array::RecordBatch]) -> Result<()> {
    if part.checksum.is_empty() {
        return Ok(());
    }
    let Some((algorithm, want)) = Algorithm::parse(&part.checksum) else {
        return Err(corrupt(
            part,
            &format!(
                "has no checksum this sluice can verify ({:?})",
                part.checksum
            ),
        ));
    };
    let mut sum = algorithm.empty_sum();
    let mut rows = 0u64;
    for batch in batches {
        sum = algorithm.hash_batch_from(sum, batch)?;
        rows += batch.num_rows() as u64;
    }
    if sum != want || rows != part.rows {
        return Err(corrupt(
            part,
            &format!(
                "holds {rows} rows summing to {}{sum:016x}; its manifest recorded {} rows summing to {}",
                algorithm.prefix(),
                part.rows,
                part.checksum
            ),
        ));
    }
    Ok(())
}

/// `SLUICE_FORGET_PART_CORRUPT` for `part`.
fn corrupt(part: &ManifestPart, what: &str) -> Error {
    Error::new(
        Code::ForgetPartCorrupt,
        format!("part {}: {what}", part.key),
    )
    .hint(format!(
        "sluice forget stopped before removing anything more: restore {} from a version or a backup, then run sluice forget again (it finishes what is recorded and redoes the rest)",
        part.key
    ))
}

/// A compaction's corrupt-part error as forget's.
fn rehint(e: Error) -> Error {
    if e.code() == Code::CompactionPartCorrupt {
        Error::new(Code::ForgetPartCorrupt, e.message().to_owned()).hint(
            "sluice forget removed nothing of that part: restore it from a version or a backup (its manifest records its rows and checksum), then run sluice forget again",
        )
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pos: &str, seq: i64, op: &str) -> Row {
        (pos.into(), seq, op.into())
    }

    #[test]
    fn a_key_is_absent_after_its_delete_or_a_marker() {
        assert!(absent(&row("b", 1, "delete"), None));
        assert!(!absent(&row("b", 1, "insert"), None));
        assert!(absent(
            &row("b", 1, "insert"),
            Some(&row("c", 0, "truncate"))
        ));
        assert!(!absent(
            &row("d", 1, "insert"),
            Some(&row("c", 0, "truncate"))
        ));
        // A re-baseline's snapshot rows at its marker's position are the base.
        assert!(!absent(
            &row("c", 3, "snapshot"),
            Some(&row("c", i64::MAX, "rebaseline"))
        ));
        assert!(absent(
            &row("b", 3, "snapshot"),
            Some(&row("c", i64::MAX, "rebaseline"))
        ));
    }

    #[test]
    fn rows_sort_by_position_then_sequence() {
        let mut slot = None;
        newer(&mut slot, row("b", 5, "insert"));
        newer(&mut slot, row("b", 7, "delete"));
        newer(&mut slot, row("a", 9, "insert"));
        assert_eq!(slot, Some(row("b", 7, "delete")));
    }

    #[test]
    fn an_iceberg_change_log_and_stdout_are_refused_as_config() {
        const JOB: &str = "job: j\nsource:\n  url: postgres://postgres@127.0.0.1:5432/app\n  tables: [public.t]\n  postgres: { slot: s, publication: p }\nstate: { type: local, path: ./s }\n";
        let local = Config::parse(
            &format!("{JOB}destination: {{ type: local, path: ./o }}\n"),
            "t",
        )
        .unwrap();
        assert!(check_supported(&local).is_ok());
        let stdout =
            Config::parse(&format!("{JOB}destination: {{ type: stdout }}\n"), "t").unwrap();
        let e = check_supported(&stdout).unwrap_err();
        assert_eq!(
            (e.code(), e.class().exit_code()),
            (Code::ForgetUnsupported, 1)
        );
        let iceberg = Config::parse(
            &format!("{JOB}destination: {{ type: local, path: ./o }}\ntable_format: iceberg\niceberg: {{ catalog: {{ type: sql, uri: \"sqlite:///c.db\" }} }}\n"),
            "t",
        )
        .unwrap();
        let e = check_supported(&iceberg).unwrap_err();
        assert_eq!(e.code(), Code::ForgetUnsupported);
        assert!(e.message().contains("Iceberg"), "{e}");
    }

    #[test]
    fn rewritten_baseline_files_stay_in_their_folder() {
        assert_eq!(
            snapshot_key("t/snapshot/p1/part-000003.parquet", "f", 2),
            "t/snapshot/p1/part-forget-f-000002.parquet"
        );
        assert_eq!(under("t", "snapshot/p/x.parquet"), "t/snapshot/p/x.parquet");
        assert_eq!(under("t", "t/x.parquet"), "t/x.parquet");
    }
}
