//! One oracle trial: a fresh source table, a seeded sequence of workload steps with a
//! (possibly crashed) drain in each, one clean final drain, then every check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::check::{self, SourceRow};
use super::drain::{self, Crash, Outcome};
use super::events::{self, Observed};
use super::rng::Rng;
use super::workload::{TableSpec, Txn, Workload};

/// A source prepared for one trial.
pub trait Source {
    /// Applies one transaction (ROLLBACK when `txn.commit` is false). Returns the change
    /// events the engine logs for it when that differs from the model's `txn.changes`
    /// (an engine that skips rows an UPDATE left unchanged reports its changed-row count),
    /// `None` to trust the model.
    fn apply(&mut self, txn: &Txn) -> Result<Option<u64>, String>;
    /// [`Source::apply`], and for a committed transaction what the source showed while
    /// applying it — the table read inside the transaction before and after each
    /// statement, and the commit time it reports — for the per-event check
    /// ([`super::events`]); `None` when the engine cannot observe it.
    fn apply_observed(&mut self, txn: &Txn) -> Result<(Option<u64>, Option<Observed>), String> {
        Ok((self.apply(txn)?, None))
    }
    /// True when the engine logs an UPDATE that leaves a row as it was.
    fn logs_unchanged_updates(&self) -> bool {
        true
    }
    /// Every row of the captured table, canonical cells keyed by column name, by key.
    fn select_all(&mut self) -> Result<BTreeMap<String, SourceRow>, String>;
    /// The config's `source:` section (engine knobs chosen from `rng`), indented YAML.
    fn source_yaml(&self, job: &str, rng: &mut Rng) -> String;
    /// Environment the drain needs (the URL variable).
    fn env(&self) -> Vec<(String, String)>;
    /// The table as the config names it (its output directory).
    fn table(&self) -> String;
    /// True when the source logs every value of every image (PostgreSQL under `REPLICA
    /// IDENTITY FULL`, MySQL's FULL row image): no row may list a column in `__unlogged`.
    fn logs_every_value(&self) -> bool;
    /// True when this source can fail over mid-trial ([`Source::fail_over`]).
    fn can_fail_over(&self) -> bool {
        false
    }
    /// Fails over: the primary is gone, a replica that has everything is promoted, and
    /// from now on `apply`, `select_all` and `env` (the job's URL) use the new primary.
    fn fail_over(&mut self) -> Result<(), String> {
        Err("this source cannot fail over".into())
    }
    /// True when this source makes the schema changes of [`Ddl`] ([`Source::alter`]).
    fn can_alter(&self) -> bool {
        false
    }
    /// Applies a schema change to the captured table; from then on `select_all` reads
    /// the columns it added (integers, canonical decimal text) and not those it dropped.
    fn alter(&mut self, ddl: &Ddl) -> Result<(), String> {
        Err(format!("this source cannot {ddl:?}"))
    }
}

/// A schema change an oracle trial makes between steps, on columns of its own (`x<n>`,
/// integers) so the workload's statements, which name their columns, are unaffected.
#[derive(Debug, Clone, PartialEq)]
pub enum Ddl {
    /// `ADD COLUMN x int` (nullable, no default): the stream just continues.
    AddNullable(String),
    /// `ADD COLUMN x int NOT NULL DEFAULT n`: existing rows get `n` without a logged
    /// change, so the table is re-baselined.
    AddWithDefault(String, i64),
    /// `DROP COLUMN x` of an added column: later images lack it; the replay's shape is
    /// the newest one.
    Drop(String),
    /// `RENAME COLUMN from TO to` of an added column: rows written before carry the old
    /// name, so the table is re-baselined.
    Rename { from: String, to: String },
    /// An added column widened from `int` to `bigint`: the stream just continues.
    Widen(String),
}

/// The SQL of `ddl` on `table`; `mysql` for MySQL / MariaDB's retype syntax.
pub fn ddl_sql(table: &str, ddl: &Ddl, mysql: bool) -> String {
    match ddl {
        Ddl::AddNullable(c) => format!("ALTER TABLE {table} ADD COLUMN {c} int"),
        Ddl::AddWithDefault(c, n) => {
            format!("ALTER TABLE {table} ADD COLUMN {c} int NOT NULL DEFAULT {n}")
        }
        Ddl::Drop(c) => format!("ALTER TABLE {table} DROP COLUMN {c}"),
        Ddl::Rename { from, to } => format!("ALTER TABLE {table} RENAME COLUMN {from} TO {to}"),
        Ddl::Widen(c) if mysql => format!("ALTER TABLE {table} MODIFY {c} bigint"),
        Ddl::Widen(c) => format!("ALTER TABLE {table} ALTER COLUMN {c} TYPE bigint"),
    }
}

impl Ddl {
    /// The added columns after `self`, from those before.
    pub fn apply(&self, added: &mut Vec<String>) {
        match self {
            Ddl::AddNullable(c) | Ddl::AddWithDefault(c, _) => added.push(c.clone()),
            Ddl::Drop(c) => added.retain(|a| a != c),
            Ddl::Rename { from, to } => {
                for a in added.iter_mut().filter(|a| *a == from) {
                    a.clone_from(to);
                }
            }
            Ddl::Widen(_) => {}
        }
    }
}

/// A source engine under test.
pub trait Engine: Sync {
    /// Short name for the summary line (`pg`).
    fn name(&self) -> &'static str;
    /// The captured table.
    fn spec(&self) -> &TableSpec;
    /// The fault points of this engine's drain (`SLUICE_FAULT` names).
    fn fault_points(&self) -> &'static [&'static str];
    /// Creates the source (database, table of `spec`'s columns — [`Engine::spec`]'s or a
    /// subset) for trial `id`; table knobs (e.g. the replica identity) are chosen from
    /// `rng` and reported in `facts`.
    fn open(
        &self,
        id: &str,
        rng: &mut Rng,
        facts: &mut Vec<String>,
        spec: &TableSpec,
    ) -> Result<Box<dyn Source>, String>;
    /// True for a column whose type has no Iceberg type in this engine's parts
    /// (`SLUICE_ICEBERG_TYPE`): an Iceberg trial's table leaves it out.
    fn iceberg_refuses(&self, _column: &super::workload::Column) -> bool {
        false
    }
    /// Largest bulk insert of one transaction.
    fn max_bulk(&self) -> i64 {
        2000
    }
    /// True when the engine carries `TRUNCATE` as a change (a `truncate` row): the
    /// workload then truncates the table now and then.
    fn truncates(&self) -> bool {
        false
    }
    /// True when the engine carries `TRUNCATE` only as a transaction of its own: the
    /// workload then makes it so now and then.
    fn truncates_alone(&self) -> bool {
        false
    }
}

/// What one trial did and found.
#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub drains: u64,
    pub crashes: u64,
    pub skipped: u64,
    pub transient: u64,
    pub changes: u64,
    pub rows_compared: u64,
    /// Changes compared one by one with the workload's log ([`super::events`]).
    pub events_compared: u64,
    /// Unlogged cells of key-change inserts the replay completed from the deleted row.
    pub carried_by_key_change: u64,
    /// Files left in the spill directory after the final clean drain (crashed runs').
    pub spill_leftovers: u64,
    /// Failovers to a promoted replica the drains followed.
    pub failovers: u64,
    /// The trial also committed to an Iceberg table (checked through pyiceberg).
    pub iceberg: bool,
    /// Checks of the Iceberg current-state table against the pointer.
    pub iceberg_current_checks: u64,
    /// The trial left a column out by a column policy (`policy … exclude`).
    pub policy: bool,
    /// Baseline trials: the snapshot rows the final replay started from.
    pub snapshot_rows: Option<u64>,
    /// Distinct `truncate` rows the parts hold.
    pub truncates: u64,
    /// Schema changes made ([`Ddl`]) and operator re-baselines (`sluice baseline
    /// --table`) run between steps.
    pub ddls: u64,
    pub rebaselines: u64,
    /// `sluice materialize` runs between drains (each an incremental build, some crashed).
    pub materializes: u64,
    /// `sluice compact` runs between (or beside) the drains, and how many were crashed.
    pub compactions: u64,
    pub compaction_crashes: u64,
    /// Parts the compactions that finished replaced.
    pub parts_compacted: u64,
    /// The trial keeps no history (`output.history_retention: 0s`).
    pub retention: bool,
    /// Tables whose history a finished compaction folded into a new baseline plan.
    pub history_folds: u64,
    /// The trial ended with `sluice verify` ([`super::verify`]).
    pub verified: bool,
    /// The verify was also walked by chunks (`--by-chunks`).
    pub walked: bool,
    /// A change part was taken out and `sluice verify --repair` run.
    pub repaired: bool,
    /// That repair first crashed after writing its part.
    pub repair_crashed: bool,
    pub mismatches: Vec<String>,
    /// What to know to replay it: knobs and the drain schedule.
    pub facts: Vec<String>,
    /// Kept on failure: config, logs, output.
    pub kept: Option<PathBuf>,
}

const LEASE_TTL_S: u64 = 2;

/// The fault points of a compaction (`SLUICE_FAULT` names), engine-neutral.
const COMPACTION_FAULTS: &[&str] = &[
    "mid_upload",
    "compact_part_durable",
    "compact_manifest_written",
    "compact_part_removed",
    "compact_step_done",
];

/// The fault points of a compaction of an Iceberg change log (its steps remove nothing;
/// it commits a `replace` snapshot per step and expires snapshots).
const ICEBERG_COMPACTION_FAULTS: &[&str] = &[
    "mid_upload",
    "compact_part_durable",
    "compact_manifest_written",
    "compact_iceberg_committed",
    "compact_step_done",
    "iceberg_expired",
];

/// Runs the trial of `seed`.
pub fn run(engine: &dyn Engine, seed: u64) -> Report {
    let mut report = Report {
        seed,
        ..Report::default()
    };
    let dir = tempfile::Builder::new()
        .prefix(&format!("oracle-{}-", engine.name()))
        .tempdir()
        .unwrap();
    let result = run_in(engine, seed, dir.path(), &mut report);
    if let Err(e) = result {
        report.mismatches.push(e);
    }
    if !report.mismatches.is_empty() {
        report.kept = Some(dir.keep());
    }
    report
}

fn run_in(engine: &dyn Engine, seed: u64, dir: &Path, report: &mut Report) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let id = format!("{:016x}", seed);
    let job = format!("oracle_{}_{}", engine.name(), &id[..12]);
    // A quarter of the trials (where pyiceberg can read them; `SLUICE_ORACLE_ICEBERG=1`
    // all, `=0` none) also commit to an Iceberg
    // change-log table; decided by a stream of its own, so the other choices of a seed
    // stay what they were.
    let iceberg = crate::support::readers::python().is_some()
        && match std::env::var("SLUICE_ORACLE_ICEBERG").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => Rng::new(!seed).chance(25),
        };
    // Half of those (where moto runs; `SLUICE_ORACLE_ICEBERG_CATALOG=sql|s3tables` forces
    // one) commit to an S3 Tables bucket on moto instead of the SQL catalog.
    let moto = std::env::var("SLUICE_TEST_AWS_ENDPOINT")
        .ok()
        .filter(|u| !u.is_empty());
    let catalog = match (iceberg, moto) {
        (false, _) => None,
        (true, Some(endpoint))
            if match std::env::var("SLUICE_ORACLE_ICEBERG_CATALOG").as_deref() {
                Ok("s3tables") => true,
                Ok("sql") => false,
                _ => Rng::new(!seed ^ 0x5_3ab1e5).chance(50),
            } =>
        {
            let arn = crate::support::aws::table_bucket(&endpoint);
            Some(super::iceberg::Catalog::S3Tables { endpoint, arn })
        }
        (true, _) => Some(super::iceberg::Catalog::Sql(dir.join("catalog.db"))),
    };
    let spec = if let Some(catalog) = &catalog {
        report.iceberg = true;
        report.facts.push(match catalog {
            super::iceberg::Catalog::Sql(_) => "table_format: iceberg (SQL catalog)".into(),
            super::iceberg::Catalog::S3Tables { .. } => {
                "table_format: iceberg (S3 Tables on moto)".into()
            }
        });
        engine.spec().only(|c| !engine.iceberg_refuses(c))
    } else {
        engine.spec().clone()
    };
    let spec = &spec;
    let mut source = engine.open(&id, &mut rng, &mut report.facts, spec)?;
    let source_yaml = source.source_yaml(&job, &mut rng);
    // A fifth of the trials leave one non-key column out by a column policy
    // (docs/privacy.md; dropped by sluice, or left out of a PostgreSQL publication's
    // column list below): the parts never hold it and replay to the source without it. Decided by a
    // stream of its own, so the other choices of a seed stay what they were.
    let excluded = {
        let mut own = Rng::new(seed ^ 0x0e8c_10de);
        let columns: Vec<&str> = spec
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .filter(|c| *c != spec.key)
            .collect();
        (own.chance(20) && !columns.is_empty())
            .then(|| columns[own.below(columns.len())].to_owned())
    };
    report.policy = excluded.is_some();
    // Half of those ask for a PostgreSQL publication column list (`policy.column_lists`):
    // PostgreSQL then refuses to drop or retype a listed column, so those trials make no
    // such change (docs/privacy.md: the migration must change the publication first).
    let column_lists = excluded.is_some() && Rng::new(seed ^ 0x0c01_1157).chance(50);
    // Two in five of the trials that compact keep no history: every compaction folds the
    // changes a checkpoint covers into a new baseline plan (decided by a stream of its
    // own, so the other choices of a seed stay what they were).
    let retention = catalog.is_none() && Rng::new(seed ^ 0x7e7e_0001).chance(40);
    report.retention = retention;
    let rollover_rows = *rng.pick(&[1u64, 2, 3, 5, 8, 20, 100, 100_000]);
    let rollover_bytes = *rng.pick(&[2048u64, 65_536, 128 << 20]);
    let row_group_rows = *rng.pick(&[1usize, 2, 4, 16, 1000]);
    // Compactions rewrite every covered part at once (no minimum age), into targets from
    // a few parts to all of them.
    let compaction_target = *rng.pick(&[65_536u64, 1 << 20, 16 << 20]);
    // Current states of a few rows per bucket (key ranges and new buckets in every build)
    // as well as the default; drawn apart so the other choices stay as they were.
    let bucket_rows = *Rng::new(seed ^ 0xb0c7_0001).pick(&[2u64, 5, 13, 65_536]);
    // A third of the trials start from a baseline of rows written before the stream.
    let baseline = rng.chance(33).then(|| {
        format!(
            "initial: snapshot\nbaseline: {{ chunk_rows: {}, parallel: {} }}\n",
            rng.pick(&[1u64, 3, 7, 40, 100_000]),
            rng.range(1, 4)
        )
    });
    let spill = dir.join("spill");
    std::fs::create_dir_all(&spill).unwrap();
    let yaml = format!(
        "job: {job}\n{source_yaml}destination: {{ type: local, path: {out} }}\n\
         state: {{ type: local, path: {state} }}\n\
         output: {{ rollover_rows: {rollover_rows}, rollover_bytes: {rollover_bytes}, row_group_rows: {row_group_rows}, current_state_bucket_rows: {bucket_rows}, spill_dir: {spill}{history} }}\n\
         lease: {{ ttl_seconds: {LEASE_TTL_S} }}\n\
         compaction: {{ min_age_seconds: 0, target_bytes: {compaction_target}, lease_ttl_seconds: {LEASE_TTL_S} }}\n{baseline}{iceberg}{policy}",
        baseline = baseline.as_deref().unwrap_or(""),
        history = if retention {
            ", history_retention: 0s"
        } else {
            ""
        },
        policy = match &excluded {
            Some(column) => format!(
                "policy:\n{}  tables:\n    {}: {{ exclude: [{column}] }}\n",
                if column_lists {
                    "  column_lists: true\n"
                } else {
                    ""
                },
                source.table()
            ),
            None => String::new(),
        },
        iceberg = match &catalog {
            Some(catalog) => format!(
                "table_format: iceberg\niceberg: {{ catalog: {}, namespace: {ns}, snapshot_retention: {retention} }}\n",
                catalog.yaml(),
                ns = super::iceberg::NAMESPACE,
                // Half the Iceberg trials expire every snapshot they can at each
                // compaction; decided by a stream of its own.
                retention = if Rng::new(seed ^ 0x1ce_be79).chance(50) {
                    "1ms"
                } else {
                    "7d"
                },
            ),
            None => String::new(),
        },
        out = dir.join("out").display(),
        state = dir.join("state").display(),
        spill = spill.display(),
    );
    let config = dir.join("sluice.yaml");
    std::fs::write(&config, &yaml).unwrap();
    report.facts.push(format!("config:\n{yaml}"));
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    // The job's URL changes when the source fails over.
    let env = std::cell::RefCell::new(source.env());
    let mut n = 0usize;
    let mut drain_once = |crash: Crash, report: &mut Report| {
        n += 1;
        report.drains += 1;
        (n, drain::start(&config, &env.borrow(), crash, &logs, n))
    };
    // `sluice compact` (not for an S3 Tables change log, which it refuses), logged as
    // `<logs>/drain-<2000+c>.*`.
    let sql_iceberg = matches!(catalog, Some(super::iceberg::Catalog::Sql(_)));
    let compacts = catalog.is_none() || sql_iceberg;
    let compaction_faults = if sql_iceberg {
        ICEBERG_COMPACTION_FAULTS
    } else {
        COMPACTION_FAULTS
    };
    let mut c = 0usize;
    let mut compact_once = |crash: Crash| {
        c += 1;
        let k = 2000 + c;
        (
            k,
            crash.clone(),
            drain::start_command(&["compact"], &config, &env.borrow(), crash, &logs, k),
        )
    };

    let mut workload = Workload::new(spec, engine.max_bulk());
    workload.truncates = engine.truncates();
    workload.truncates_alone = engine.truncates_alone();
    if baseline.is_some() {
        // Rows that predate the stream: only the baseline can deliver them. The first
        // drain anchors and reads them, and may be crashed anywhere in the baseline (a
        // chunk recorded done, an upload, a SIGKILL); the clean drain after it resumes.
        let before: Vec<Txn> = (0..rng.range(1, 5))
            .map(|_| workload.next_txn(&mut rng))
            .collect();
        for txn in &before {
            source.apply(txn)?;
        }
        let crash = match rng.below(100) {
            0..=24 => Crash::None,
            25..=59 => Crash::Fault(format!("chunk_done@{}", rng.range(1, 6))),
            60..=74 => Crash::Fault(format!("mid_upload@{}", rng.range(1, 4))),
            _ => Crash::Kill(Duration::from_millis(rng.range(0, 400) as u64)),
        };
        let (k, running) = drain_once(crash.clone(), report);
        let outcome = running.wait();
        report.facts.push(format!(
            "baseline: {} txns before the stream, drain #{k} {crash:?} -> {}",
            before.len(),
            brief(&outcome)
        ));
        match outcome {
            Outcome::Crashed => report.crashes += 1,
            Outcome::Failed { exit, stderr } => {
                return Err(format!(
                    "baseline drain #{k} ({crash:?}) failed: {exit}\n{stderr}"
                ));
            }
            _ => {}
        }
    }
    // The first clean run creates the slot/anchor (and finishes a baseline); only what
    // follows is captured as changes.
    drain_clean(&mut drain_once, report, "first")?;

    let mut expected_changes = 0u64;
    // The workload's own log of every committed transaction, while every one of them
    // was observed (`None` once one was not: the per-event check is then skipped).
    let mut log = Some(events::Log::default());
    let mut apply = |source: &mut Box<dyn Source>, txn: &Txn| -> Result<(), String> {
        let (logged, observed) = source.apply_observed(txn)?;
        expected_changes += if txn.commit {
            logged.unwrap_or(txn.changes)
        } else {
            0
        };
        if txn.commit {
            match (observed, log.as_mut()) {
                (Some(observed), Some(l)) => {
                    l.push(&txn.stmts, &observed, !source.logs_unchanged_updates())?
                }
                _ => log = None,
            }
        }
        Ok(())
    };
    let steps = rng.range(3, 9);
    // Schema changes: the columns added and not dropped, those dropped, whether the
    // table was re-baselined (its changes from the asking point up to the new anchor are
    // superseded, so the parts hold fewer distinct changes than the workload made).
    let mut added: Vec<String> = Vec::new();
    let mut dropped = std::collections::BTreeSet::new();
    let mut rebaselined = false;
    let mut n_extra = 0usize;
    // A source that can fail over does so once, before a random step's writes: the
    // drains after it must follow the promoted replica without losing anything.
    let failover_step = source.can_fail_over().then(|| rng.range(0, steps - 1));
    for step in 0..steps {
        if failover_step == Some(step) {
            source.fail_over()?;
            *env.borrow_mut() = source.env();
            report.failovers += 1;
            report
                .facts
                .push(format!("step {step}: failed over to the promoted replica"));
        }
        // Now and then a schema change or an operator's re-baseline of the table, between
        // two steps (a crashed run's backlog may still be ahead of it).
        if source.can_alter() && rng.chance(25) {
            let fresh = format!("x{}", report.ddls + 1);
            let some_added = (!added.is_empty()).then(|| added[rng.below(added.len())].clone());
            let ddl = match (rng.below(6), some_added) {
                (0, _) => None,
                (1, Some(c)) => Some(Ddl::Drop(c)),
                (2, Some(from)) => Some(Ddl::Rename {
                    from,
                    to: format!("r{}", report.ddls + 1),
                }),
                (3, Some(c)) => Some(Ddl::Widen(c)),
                (4, _) => Some(Ddl::AddWithDefault(fresh, rng.range(-5, 5))),
                _ => Some(Ddl::AddNullable(fresh)),
            };
            let ddl = ddl.filter(|d| !(column_lists && matches!(d, Ddl::Drop(_) | Ddl::Widen(_))));
            match &ddl {
                Some(ddl) => {
                    source.alter(ddl)?;
                    report.ddls += 1;
                    ddl.apply(&mut added);
                    // A renamed column's old name is gone from the table like a dropped one.
                    match ddl {
                        Ddl::Drop(column) | Ddl::Rename { from: column, .. } => {
                            dropped.insert(column.clone());
                        }
                        _ => {}
                    }
                    rebaselined |= matches!(ddl, Ddl::AddWithDefault(..) | Ddl::Rename { .. });
                    report.facts.push(format!("step {step}: {ddl:?}"));
                }
                None => {
                    rebaseline_by_hand(
                        &config,
                        &env.borrow(),
                        &logs,
                        &mut n_extra,
                        &source.table(),
                        report,
                    )?;
                    rebaselined = true;
                    report
                        .facts
                        .push(format!("step {step}: sluice baseline --table"));
                }
            }
        }
        let crash = match rng.below(100) {
            0..=29 => Crash::None,
            30..=64 => Crash::Fault(format!(
                "{}@{}",
                rng.pick(engine.fault_points()),
                rng.range(1, 4)
            )),
            _ => Crash::Kill(Duration::from_millis(rng.range(0, 400) as u64)),
        };
        let concurrent = rng.chance(50);
        let txns: Vec<Txn> = (0..rng.range(0, 6))
            .map(|_| workload.next_txn(&mut rng))
            .collect();
        // A compaction now and then: after the step's drain, or beside it; crashed at one
        // of its fault points or killed like a drain.
        let compaction = compacts
            .then(|| rng.below(100))
            .filter(|r| *r >= 65)
            .map(|r| {
                let crash = match rng.below(100) {
                    0..=39 => Crash::None,
                    40..=79 => Crash::Fault(format!(
                        "{}@{}",
                        match rng.below(compaction_faults.len() + 1) {
                            i if i < compaction_faults.len() => compaction_faults[i],
                            _ if retention => "retention_plan_written",
                            _ => compaction_faults[0],
                        },
                        rng.range(1, 4)
                    )),
                    _ => Crash::Kill(Duration::from_millis(rng.range(0, 300) as u64)),
                };
                (r >= 85, crash)
            });
        let mut compacting = None;
        let (k, outcome) = if concurrent {
            let (k, running) = drain_once(crash.clone(), report);
            if let Some((true, crash)) = &compaction {
                compacting = Some(compact_once(crash.clone()));
            }
            for txn in &txns {
                apply(&mut source, txn)?;
            }
            (k, running.wait())
        } else {
            for txn in &txns {
                apply(&mut source, txn)?;
            }
            let (k, running) = drain_once(crash.clone(), report);
            if let Some((true, crash)) = &compaction {
                compacting = Some(compact_once(crash.clone()));
            }
            (k, running.wait())
        };
        report.facts.push(format!(
            "step {step}: {} txns, drain #{k} {crash:?}{} -> {}",
            txns.len(),
            if concurrent {
                " (concurrent with the writes)"
            } else {
                ""
            },
            brief(&outcome)
        ));
        match outcome {
            Outcome::Done { .. } => {}
            Outcome::Crashed => report.crashes += 1,
            Outcome::Skipped { expires_at_ms } => {
                report.skipped += 1;
                if rng.chance(50) {
                    wait_until_ms(expires_at_ms);
                }
            }
            Outcome::Transient { .. } => report.transient += 1,
            Outcome::Failed { exit, stderr } => {
                return Err(format!("drain #{k} ({crash:?}) failed: {exit}\n{stderr}"));
            }
        }
        // Now and then the current state is brought up to date (sometimes crashing between
        // its steps); the check at the end builds it once more and compares it.
        if rng.chance(35) {
            let fault = rng.chance(30).then(|| {
                rng.pick(&["materialize_before_pointer", "materialize_after_pointer"])
                    .to_string()
            });
            let crashed = super::sql::materialize_step(&config, &env.borrow(), fault.as_deref())?;
            report.materializes += 1;
            report.facts.push(format!(
                "step {step}: sluice materialize{}",
                if crashed { " (crashed)" } else { "" }
            ));
        }
        if let Some((false, crash)) = &compaction {
            compacting = Some(compact_once(crash.clone()));
        }
        if let Some((k, crash, running)) = compacting {
            let outcome = running.wait();
            report.facts.push(format!(
                "step {step}: compaction #{k} {crash:?}{} -> {}",
                if compaction.as_ref().is_some_and(|(beside, _)| *beside) {
                    " (beside the drain)"
                } else {
                    ""
                },
                brief(&outcome)
            ));
            compaction_outcome(outcome, k, &crash, report)?;
            report.parts_compacted += parts_replaced(&logs, k);
            report.history_folds += history_folds(&logs, k);
        }
    }

    // One clean final drain (waiting out a crashed run's lease, retrying transients).
    drain_clean(&mut drain_once, report, "final")?;
    // Half the trials end with a clean compaction (the others as the steps left them, a
    // crashed compaction included); it must leave no spill file either. Every Iceberg
    // trial does: a step a crashed compaction left pending is the Iceberg table's only
    // once the next compaction commits it (until then the table holds the parts it
    // replaced — exact too, but other files than the manifests' live parts).
    if compacts && (sql_iceberg || rng.chance(50)) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (k, crash, running) = compact_once(Crash::None);
            let outcome = running.wait();
            report
                .facts
                .push(format!("final compaction #{k} -> {}", brief(&outcome)));
            match outcome {
                Outcome::Transient { .. } if Instant::now() < deadline => {
                    report.transient += 1;
                    std::thread::sleep(Duration::from_millis(300));
                }
                other => {
                    compaction_outcome(other, k, &crash, report)?;
                    report.parts_compacted += parts_replaced(&logs, k);
                    report.history_folds += history_folds(&logs, k);
                    break;
                }
            }
        }
    }

    // The final run sweeps what crashed runs left in the spill directory, then cleans up
    // after itself: nothing may remain.
    report.spill_leftovers = std::fs::read_dir(&spill).map_or(0, |d| d.count() as u64);
    if report.spill_leftovers > 0 {
        report.mismatches.push(format!(
            "{} file(s) left in the spill directory after the final clean drain",
            report.spill_leftovers
        ));
    }
    let rows = super::parts::read_table(&dir.join("out"), &source.table())?;
    if baseline.is_some() {
        report.snapshot_rows = Some(rows.iter().filter(|r| r.run == "snapshot").count() as u64);
    }
    report.truncates = rows
        .iter()
        .filter(|r| r.op == "truncate")
        .map(|r| (&r.pos, r.seq))
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    let mut source_rows = source.select_all()?;
    // An excluded column: in no part, and not compared.
    if let Some(column) = &excluded {
        if rows.iter().any(|r| r.all.contains_key(column)) {
            report
                .mismatches
                .push(format!("a part holds {column}, which the policy excludes"));
        }
        for row in source_rows.values_mut() {
            row.remove(column);
        }
    }
    // A column added without a default reaches the parts with the first change after it:
    // until then no part (nor manifest) has it, and every source row holds NULL there.
    let in_parts: std::collections::BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.all.keys().map(String::as_str))
        .collect();
    let unseen: Vec<String> = added
        .iter()
        .filter(|c| !in_parts.contains(c.as_str()))
        .filter(|c| {
            source_rows
                .values()
                .all(|r| r.get(*c).is_none_or(Option::is_none))
        })
        .cloned()
        .collect();
    // The rows as the source holds them, added columns included: a repair writes the
    // source's rows whole, so its rows carry an added column (NULL) no change brought yet.
    let with_unseen = source_rows.clone();
    for row in source_rows.values_mut() {
        for column in &unseen {
            row.remove(column);
        }
    }
    // Added columns the source holds only NULLs in: a view whose newest data shape lacks
    // them (nothing changed since they were added) may leave them out.
    let optional: std::collections::BTreeSet<String> = added
        .iter()
        .filter(|c| {
            source_rows
                .values()
                .all(|r| r.get(*c).is_none_or(Option::is_none))
        })
        .cloned()
        .collect();
    // A drain may re-baseline the table by itself too (a drop and an add between two runs
    // read as a rename: a re-baseline too many, never one too few).
    rebaselined |= rows.iter().any(|r| r.op == "rebaseline");
    let expected = (!rebaselined).then_some(expected_changes);
    // The folder also holds a crashed run's part its checkpoint never covered; the next
    // run writes those changes again — after a followed failover at the promoted
    // server's positions, so the folder's distinct positions count them twice there.
    // The folder's replay is still exact (the later copy wins); the count is checked
    // on the parts the run manifests list.
    let expected_in_folder = expected.filter(|_| report.failovers == 0);
    let findings = check::check_table(
        &rows,
        &spec.key,
        &source_rows,
        expected_in_folder,
        &dropped,
        !source.logs_every_value(),
    );
    // A reader that follows the run manifests instead of listing the folder must find
    // every change too: each listed part exists and is listed once, and the listed parts
    // (with the baseline's) replay to the source.
    let listed = super::parts::listed_in_run_manifests(&dir.join("out"), &source.table())?;
    for (file, times) in &listed {
        if !dir.join("out").join(source.table()).join(file).exists() {
            report
                .mismatches
                .push(format!("a run manifest lists {file}, which does not exist"));
        }
        if *times > 1 {
            report
                .mismatches
                .push(format!("{file} is listed by {times} run manifests"));
        }
    }
    let followed: Vec<_> = rows
        .iter()
        .filter(|r| r.run == "snapshot")
        .cloned()
        .chain(super::parts::read_live(
            &dir.join("out"),
            &source.table(),
            &listed,
        )?)
        .collect();
    // Every change against the workload's own log (op, images, transaction, commit time),
    // in the parts a reader following the run manifests takes: a crashed run's part the
    // checkpoint never covered is written again by the next run — after a failover at
    // other positions — so only the listed copy is data.
    if let Some(log) = &log {
        let by_event = events::check_events(
            &followed,
            &spec.key,
            log,
            rebaselined,
            source.logs_every_value(),
        );
        report.events_compared = by_event.rows_compared;
        report.mismatches.extend(
            by_event
                .mismatches
                .into_iter()
                .map(|m| format!("per event: {m}")),
        );
    }
    let by_manifests = check::check_table(
        &followed,
        &spec.key,
        &source_rows,
        expected,
        &dropped,
        !source.logs_every_value(),
    );
    report.mismatches.extend(
        by_manifests
            .mismatches
            .into_iter()
            .map(|m| format!("following the run manifests: {m}")),
    );
    // Through Iceberg: the current snapshot's files are data the run manifests list (or
    // baseline parts), every listed change part is in it, pyiceberg's scan returns their
    // rows, and those rows replay to the source and match the workload's log.
    if let Some(catalog) = &catalog
        && let Some(python) = crate::support::readers::python()
    {
        let out = dir.join("out");
        let seen = super::iceberg::seen(&python, catalog, &out, &source.table())?;
        let files: std::collections::BTreeSet<&str> =
            seen.files.iter().map(String::as_str).collect();
        for file in &files {
            if !listed.contains_key(*file) && !file.starts_with("snapshot/") {
                report.mismatches.push(format!(
                    "Iceberg commits {file}, which no run manifest lists"
                ));
            }
        }
        for file in listed.keys() {
            if !files.contains(file.as_str()) {
                report
                    .mismatches
                    .push(format!("Iceberg lacks {file}, which a run manifest lists"));
            }
        }
        // In the folder reader's order (baseline parts, then change parts by run and
        // number: the order they were written; a compacted part as the parts it holds,
        // in their places), not the scan plan's.
        let (baseline_files, change_files): (Vec<String>, Vec<String>) = seen
            .files
            .iter()
            .cloned()
            .partition(|f| f.starts_with("snapshot/"));
        let mut baseline_files = baseline_files;
        baseline_files.sort();
        let changes: BTreeMap<String, usize> = change_files.into_iter().map(|f| (f, 1)).collect();
        let mut through = super::parts::read_files(&out, &source.table(), &baseline_files)?;
        through.extend(super::parts::read_live(&out, &source.table(), &changes)?);
        if through.len() as u64 != seen.rows {
            report.mismatches.push(format!(
                "pyiceberg scans {} rows; the files it plans hold {}",
                seen.rows,
                through.len()
            ));
        }
        let by_iceberg = check::check_table(
            &through,
            &spec.key,
            &source_rows,
            expected,
            &dropped,
            !source.logs_every_value(),
        );
        report.mismatches.extend(
            by_iceberg
                .mismatches
                .into_iter()
                .map(|m| format!("through Iceberg: {m}")),
        );
        if let Some(log) = &log {
            let by_event = events::check_events(
                &through,
                &spec.key,
                log,
                rebaselined,
                source.logs_every_value(),
            );
            report.mismatches.extend(
                by_event
                    .mismatches
                    .into_iter()
                    .map(|m| format!("through Iceberg, per event: {m}")),
            );
        }
    }
    // sluice verify agrees with the oracle's replay of the folder.
    let verifies = match std::env::var("SLUICE_ORACLE_VERIFY").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => rng.chance(33),
    };
    if catalog.is_none() && verifies {
        let oracle_equal = findings.mismatches.is_empty();
        // Half of them also walk the table by chunks of a few rows (a stream of its own).
        let mut own = Rng::new(seed ^ 0x0ba1_c4a2);
        let walks = match std::env::var("SLUICE_ORACLE_WALK").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => own.chance(50),
        };
        let walk = walks.then(|| *own.pick(&[20u64, 100, 500]));
        report.verified = true;
        report.walked = walk.is_some();
        for walk in std::iter::once(None).chain(walk.map(Some)) {
            let how = super::verify::How {
                walk,
                ..Default::default()
            };
            let verdict = super::verify::run(&config, &env.borrow(), &source.table(), dir, how)?;
            let how = match walk {
                None => "verify".to_owned(),
                Some(rows) => format!("verify --by-chunks (chunks of {rows})"),
            };
            report
                .facts
                .push(format!("{how} equal={} ({})", verdict.equal, verdict.said));
            if oracle_equal && !verdict.equal {
                report.mismatches.push(format!(
                    "sluice {how} reports differences where the replay equals the source: {}",
                    verdict.said
                ));
            }
            if !oracle_equal && verdict.equal {
                report.mismatches.push(format!(
                    "sluice {how} reports the table equal where the replay differs: {}",
                    verdict.said
                ));
            }
        }
    }
    report.changes = expected_changes;
    report.rows_compared = findings.rows_compared;
    report.carried_by_key_change = findings.carried_by_key_change;
    report.mismatches.extend(findings.mismatches);
    // The replay rule as shipped (`sluice sql`, each dialect), run by DuckDB over the parts.
    if let Some(python) = crate::support::readers::python() {
        let by_sql = super::sql::check(
            &python,
            &config,
            dir,
            &source.table(),
            &spec.key,
            &source_rows,
            super::sql::SchemaChanges {
                dropped: &dropped,
                optional: &optional,
            },
        )?;
        report.mismatches.extend(
            by_sql
                .mismatches
                .into_iter()
                .map(|m| format!("sluice sql, {m}")),
        );
        // The Iceberg current-state table (SQL catalog) names the files of the pointer the
        // build above wrote, and pyiceberg reads their rows.
        if let Some(catalog @ super::iceberg::Catalog::Sql(_)) = &catalog {
            let out = dir.join("out");
            let table = source.table();
            let seen = super::iceberg::seen_current(&python, catalog, &out, &table)?;
            let pointer_path = out.join(&table).join("_current_state/_version.json");
            let pointer: serde_json::Value = serde_json::from_slice(
                &std::fs::read(&pointer_path)
                    .map_err(|e| format!("{}: {e}", pointer_path.display()))?,
            )
            .map_err(|e| format!("{}: {e}", pointer_path.display()))?;
            let prefix = format!("{table}/");
            // An empty state's one file of no rows is not an Iceberg data file.
            let empty = pointer["rows"].as_u64() == Some(0);
            let mut named: Vec<String> = pointer["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str()?.strip_prefix(&prefix).map(str::to_owned))
                .filter(|_| !empty)
                .collect();
            named.sort();
            let mut files = seen.files.clone();
            files.sort();
            if files != named {
                report.mismatches.push(format!(
                    "the Iceberg current-state table holds {files:?}, the pointer names {named:?}"
                ));
            }
            if Some(seen.rows) != pointer["rows"].as_u64() {
                report.mismatches.push(format!(
                    "pyiceberg reads {} rows of the Iceberg current-state table, the pointer says {}",
                    seen.rows, pointer["rows"]
                ));
            }
            report.iceberg_current_checks += 1;
        }
    }
    // sluice verify --repair, held to the replay (after every other check: it takes a
    // part out of the folder).
    let repairs = match std::env::var("SLUICE_ORACLE_REPAIR").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => Rng::new(seed ^ 0x4e9a_1400).chance(50),
    };
    if catalog.is_none()
        && verifies
        && repairs
        && !spec.key.is_empty()
        && report.mismatches.is_empty()
    {
        let check = |rows: &[super::parts::PartRow]| {
            // An added column reaches the parts with a repair's rows too.
            let held: std::collections::BTreeSet<&str> = rows
                .iter()
                .flat_map(|r| r.all.keys().map(String::as_str))
                .collect();
            let mut expected = with_unseen.clone();
            for row in expected.values_mut() {
                for column in unseen.iter().filter(|c| !held.contains(c.as_str())) {
                    row.remove(column);
                }
            }
            check::check_table(
                rows,
                &spec.key,
                &expected,
                None,
                &dropped,
                !source.logs_every_value(),
            )
        };
        let table_dir = dir.join("out").join(source.table());
        let mut newest: Vec<std::path::PathBuf> = std::fs::read_dir(&table_dir)
            .map_err(|e| format!("{}: {e}", table_dir.display()))?
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with("cdc-") && name.ends_with(".parquet")
            })
            .collect();
        newest.sort();
        if let Some(lost) = newest.pop() {
            std::fs::remove_file(&lost).map_err(|e| format!("{}: {e}", lost.display()))?;
            report.repaired = true;
            let without = check(&super::parts::read_table(
                &dir.join("out"),
                &source.table(),
            )?);
            let how = super::verify::How::default();
            let verdict = super::verify::run(&config, &env.borrow(), &source.table(), dir, how)?;
            let lost = lost.file_name().unwrap().to_string_lossy().into_owned();
            report.facts.push(format!(
                "{lost} taken out: oracle equal={}, verify equal={} ({})",
                without.mismatches.is_empty(),
                verdict.equal,
                verdict.said
            ));
            if verdict.equal != without.mismatches.is_empty() {
                report.mismatches.push(format!(
                    "with {lost} taken out, sluice verify says equal={} where the replay says equal={}: {}",
                    verdict.equal,
                    without.mismatches.is_empty(),
                    verdict.said
                ));
            }
            // Half of the repairs first crash after their part is written (before the run
            // manifest names it): the folder must already replay to the source.
            if Rng::new(seed ^ 0x4e9a_1401).chance(50) {
                let how = super::verify::How {
                    repair: true,
                    crash: Some("repair_part_written"),
                    ..Default::default()
                };
                let crashed =
                    super::verify::run(&config, &env.borrow(), &source.table(), dir, how)?;
                report.repair_crashed = crashed.crashed;
                if crashed.crashed {
                    let between = check(&super::parts::read_table(
                        &dir.join("out"),
                        &source.table(),
                    )?);
                    report.mismatches.extend(between.mismatches.into_iter().map(|m| {
                        format!("a repair crashed between its part and its manifest ({lost} taken out): {m}")
                    }));
                }
            }
            let how = super::verify::How {
                repair: true,
                ..Default::default()
            };
            let repaired = super::verify::run(&config, &env.borrow(), &source.table(), dir, how)?;
            if !repaired.equal {
                report.mismatches.push(format!(
                    "sluice verify --repair left differences: {}",
                    repaired.said
                ));
            }
            let after = check(&super::parts::read_table(
                &dir.join("out"),
                &source.table(),
            )?);
            report.mismatches.extend(
                after
                    .mismatches
                    .into_iter()
                    .map(|m| format!("after sluice verify --repair ({lost} taken out): {m}")),
            );
        }
    }
    Ok(())
}

/// The parts compaction `k` replaced, from its summary line (0 when it printed none).
fn parts_replaced(logs: &Path, k: usize) -> u64 {
    let out = std::fs::read_to_string(logs.join(format!("drain-{k}.out"))).unwrap_or_default();
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|s| {
            s["tables"].as_object().map(|t| {
                t.values()
                    .filter_map(|t| t["parts_replaced"].as_u64())
                    .sum::<u64>()
            })
        })
        .sum()
}

/// The tables compaction `k` folded history of, from its summary line.
fn history_folds(logs: &Path, k: usize) -> u64 {
    let out = std::fs::read_to_string(logs.join(format!("drain-{k}.out"))).unwrap_or_default();
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|s| {
            s["tables"].as_object().map(|t| {
                t.values()
                    .filter(|t| t["history_folded_through"].is_string())
                    .count() as u64
            })
        })
        .sum()
}

/// Counts a compaction's outcome; a failure (anything but done, crashed as asked, or
/// transient) is the trial's error.
fn compaction_outcome(
    outcome: Outcome,
    k: usize,
    crash: &Crash,
    report: &mut Report,
) -> Result<(), String> {
    match outcome {
        Outcome::Done { .. } => report.compactions += 1,
        Outcome::Crashed => {
            report.compactions += 1;
            report.compaction_crashes += 1;
        }
        Outcome::Transient { .. } => report.transient += 1,
        other => return Err(format!("compaction #{k} ({crash:?}): {other:?}")),
    }
    Ok(())
}

/// `sluice baseline --table <table>` as an operator runs it, retried while a crashed
/// run's lease or slot is still held; logs as `<logs>/drain-<1000+k>.*`.
fn rebaseline_by_hand(
    config: &Path,
    env: &[(String, String)],
    logs: &Path,
    k: &mut usize,
    table: &str,
    report: &mut Report,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        *k += 1;
        let n = 1000 + *k;
        let args = ["baseline", "--table", table];
        match drain::start_command(&args, config, env, Crash::None, logs, n).wait() {
            Outcome::Done { .. } => {
                report.rebaselines += 1;
                return Ok(());
            }
            Outcome::Transient { code } => {
                report.transient += 1;
                report
                    .facts
                    .push(format!("baseline --table #{n}: transient {code}, retrying"));
                std::thread::sleep(Duration::from_millis(300));
            }
            other => return Err(format!("baseline --table #{n}: {other:?}")),
        }
        if Instant::now() > deadline {
            return Err("sluice baseline --table never completed within 120 s".into());
        }
    }
}

/// Drains without a crash until a run reports `drained`: a crashed run's lease is waited
/// out, a transient failure (a slot still held by a killed run's backend) retried.
fn drain_clean(
    drain_once: &mut dyn FnMut(Crash, &mut Report) -> (usize, drain::Running),
    report: &mut Report,
    what: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (k, running) = drain_once(Crash::None, report);
        match running.wait() {
            Outcome::Done { status } if status == "drained" => return Ok(()),
            Outcome::Skipped { expires_at_ms } => wait_until_ms(expires_at_ms),
            Outcome::Transient { code } => {
                report.transient += 1;
                report
                    .facts
                    .push(format!("{what} drain #{k}: transient {code}, retrying"));
                std::thread::sleep(Duration::from_millis(200));
            }
            other => return Err(format!("{what} drain #{k}: {other:?}")),
        }
        if Instant::now() > deadline {
            return Err(format!("the {what} drain never completed within 120 s"));
        }
    }
}

fn brief(o: &Outcome) -> String {
    match o {
        Outcome::Done { status } => status.clone(),
        Outcome::Skipped { .. } => "skipped".into(),
        Outcome::Crashed => "crashed".into(),
        Outcome::Transient { code } => format!("transient {code}"),
        Outcome::Failed { exit, .. } => format!("FAILED {exit}"),
    }
}

/// Waits until the wall clock passes `ms` (a lease expiry) plus a little.
fn wait_until_ms(ms: i64) {
    let now = chrono::Utc::now().timestamp_millis();
    let wait = (ms - now + 50).clamp(0, (LEASE_TTL_S * 1000 + 500) as i64);
    std::thread::sleep(Duration::from_millis(wait as u64));
}
