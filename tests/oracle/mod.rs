//! The correctness oracle, engine-neutral: seeded random workloads applied to a source
//! while drains run (and crash) in between, then a replay of every part compared with the
//! source cell by cell, and every change compared with what the source showed inside its
//! transaction ([`events`]). An engine plugs in through [`trial::Engine`] / [`trial::Source`]:
//! create a table of the [`workload::TableSpec`], apply [`workload::Txn`]s as SQL, and
//! render `SELECT *` into the [`canon`] forms.
//!
//! Engines: `tests/postgres/oracle.rs` (PostgreSQL, replica identity FULL or DEFAULT per
//! trial) and `tests/mysql/oracle.rs` (MariaDB), run as the `oracle` case of the source
//! conformance suite (`conformance::source::<engine>::oracle`). Adding one: an
//! `oracle.rs` in the engine's test module with an `Engine` (a fresh database per trial,
//! the table of the engine's types as [`workload::Kind`]s with the engine's value bounds,
//! its `SLUICE_FAULT` points) and a `Source` (SQL literals for each [`workload::Val`], a
//! `SELECT` whose cells are rendered with [`canon`], the config's `source:` section,
//! whether every value is logged), returned by the engine's
//! `conformance::source::Engine::oracle`. An engine that does not log an UPDATE that
//! leaves a row unchanged returns its changed-row count from `Source::apply`.
//!
//! Environment: `SLUICE_ORACLE_SEED` replays one trial; `SLUICE_ORACLE_TRIALS` caps the
//! trials (default: unlimited within the budget); `SLUICE_ORACLE_BUDGET_SECS` stops
//! starting new trials after that long (default: the engine's, 30 s — 12 s for the second
//! PostgreSQL major, `conformance::source::postgres18::oracle`; `0` = no limit);
//! `SLUICE_ORACLE_JOBS` trials run in parallel (default 2); `SLUICE_ORACLE_BASE_SEED`
//! fixes the seed the trial seeds derive from (default: the clock); `SLUICE_ORACLE_BIN`
//! runs another `sluice` binary (a soak pins a copy so rebuilds do not change it);
//! `SLUICE_ORACLE_ICEBERG=1` makes every trial an Iceberg one (`=0` none; default a
//! quarter): `table_format: iceberg` on a SQL catalog, the table then also read through
//! pyiceberg and checked like the folder ([`iceberg`]).
//! `SLUICE_ORACLE_VERIFY=1` ends every trial that can with `sluice verify` (`=0` none;
//! default a third).
//!
//! Compaction: a third of a trial's steps (not in S3 Tables trials, which `sluice compact`
//! refuses) run `sluice compact` after the step's drain or beside it, crashed at one of
//! its fault points or killed a third of the time; half the trials end with a clean one,
//! every Iceberg trial on the SQL catalog does (with `iceberg.snapshot_retention` `1ms`
//! in half of them, so each compaction expires snapshots too), and its current snapshot's
//! files must then be the live parts.
//! Every check then reads each compacted part as the drain parts it holds
//! ([`parts::read_table`]),
//! and the reader that follows manifests takes the live parts the run and compaction
//! manifests name ([`parts::listed_in_run_manifests`]); the summary line counts them
//! (`compactions=`, `compaction_crashes=`, `parts_compacted=`: parts the finished ones replaced).
//! Two in five of the trials that compact keep no history (`output.history_retention: 0s`):
//! every compaction folds the changes a checkpoint covers into a new baseline plan
//! (crashed at `retention_plan_written` among the other points); the checks read every
//! plan folder left, and the summary counts them (`retention_trials=`, `history_folds=`).
//! A third of the trials that are not Iceberg ones end with `sluice verify` of the table,
//! which must agree with the oracle's own comparison ([`verify`]; `verifies=`); half of
//! those also walk it by chunks of 20 to 500 rows (`--by-chunks`; `walks=`;
//! `SLUICE_ORACLE_WALK=1` every one, `=0` none). Half of the keyed verifying trials whose
//! lake is equal then lose their newest change part and run `sluice verify --repair`,
//! after which the folder's replay must equal the source — half of those repairs crash
//! first at `repair_part_written`, and the folder must replay to the source right then
//! (`repairs=`, `repair_crashes=`; `SLUICE_ORACLE_REPAIR=1` every one, `=0` none).

#![allow(dead_code)]

pub mod canon;
pub mod check;
pub mod drain;
pub mod events;
pub mod iceberg;
pub mod parts;
pub mod rng;
pub mod sql;
pub mod trial;
pub mod verify;
pub mod workload;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use trial::{Engine, Report};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// Totals over trials, printed as the summary line.
#[derive(Debug, Default)]
pub struct Totals {
    pub trials: u64,
    pub drains: u64,
    pub crashes: u64,
    pub skipped: u64,
    pub transient: u64,
    pub changes: u64,
    pub rows_compared: u64,
    pub events_compared: u64,
    pub carried_by_key_change: u64,
    pub spill_leftovers: u64,
    /// Failovers the trials' drains followed.
    pub failovers: u64,
    /// Trials that also committed to an Iceberg table, checked through pyiceberg.
    pub iceberg: u64,
    /// Iceberg current-state tables checked against their pointer.
    pub iceberg_current: u64,
    /// Trials that left a column out by a column policy.
    pub policies: u64,
    /// Trials that started from a baseline, and the baseline rows compared in them.
    pub baselines: u64,
    pub snapshot_rows: u64,
    pub truncates: u64,
    pub ddls: u64,
    pub rebaselines: u64,
    pub materializes: u64,
    pub compactions: u64,
    pub compaction_crashes: u64,
    pub parts_compacted: u64,
    pub retention_trials: u64,
    pub history_folds: u64,
    pub verifies: u64,
    pub walks: u64,
    pub repairs: u64,
    pub repair_crashes: u64,
    pub mismatches: u64,
    pub failed: Vec<String>,
}

impl Totals {
    fn add(&mut self, test: &str, r: Report) {
        self.trials += 1;
        self.drains += r.drains;
        self.crashes += r.crashes;
        self.skipped += r.skipped;
        self.transient += r.transient;
        self.changes += r.changes;
        self.rows_compared += r.rows_compared;
        self.events_compared += r.events_compared;
        self.carried_by_key_change += r.carried_by_key_change;
        self.spill_leftovers += r.spill_leftovers;
        self.failovers += r.failovers;
        self.iceberg += u64::from(r.iceberg);
        self.iceberg_current += r.iceberg_current_checks;
        self.policies += u64::from(r.policy);
        self.baselines += u64::from(r.snapshot_rows.is_some());
        self.snapshot_rows += r.snapshot_rows.unwrap_or(0);
        self.truncates += r.truncates;
        self.ddls += r.ddls;
        self.rebaselines += r.rebaselines;
        self.materializes += r.materializes;
        self.compactions += r.compactions;
        self.compaction_crashes += r.compaction_crashes;
        self.parts_compacted += r.parts_compacted;
        self.retention_trials += u64::from(r.retention);
        self.history_folds += r.history_folds;
        self.verifies += u64::from(r.verified);
        self.walks += u64::from(r.walked);
        self.repairs += u64::from(r.repaired);
        self.repair_crashes += u64::from(r.repair_crashed);
        self.mismatches += r.mismatches.len() as u64;
        if !r.mismatches.is_empty() {
            let shown: Vec<&String> = r.mismatches.iter().take(15).collect();
            self.failed.push(format!(
                "trial seed {seed}: {n} mismatch(es)\n  replay: SLUICE_ORACLE_SEED={seed} cargo test --test integration -- --exact {test} --nocapture\n  kept: {kept:?}\n  {facts}\n  mismatches:\n  - {list}",
                seed = r.seed,
                n = r.mismatches.len(),
                kept = r.kept,
                facts = r.facts.join("\n  "),
                list = shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  - "),
            ));
        }
    }
}

/// Runs the oracle for `engine` as the environment says; panics on any mismatch. `test`
/// is the running test's path, for the replay command printed with a failed trial;
/// `default_budget_secs` is the engine's budget when `SLUICE_ORACLE_BUDGET_SECS` is unset.
pub fn run(engine: &dyn Engine, test: &str, default_budget_secs: u64) {
    let started = Instant::now();
    let seeds: Box<dyn Fn(u64) -> Option<u64> + Sync> = match env_u64("SLUICE_ORACLE_SEED") {
        Some(seed) => Box::new(move |i| (i == 0).then_some(seed)),
        None => {
            let base = env_u64("SLUICE_ORACLE_BASE_SEED").unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
            eprintln!(
                "oracle {}: base seed {base} (SLUICE_ORACLE_BASE_SEED)",
                engine.name()
            );
            let cap = env_u64("SLUICE_ORACLE_TRIALS").unwrap_or(u64::MAX);
            Box::new(move |i| {
                (i < cap).then(|| {
                    let mut r = rng::Rng::new(base ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    r.next_u64()
                })
            })
        }
    };
    let budget = match env_u64("SLUICE_ORACLE_BUDGET_SECS").unwrap_or(default_budget_secs) {
        0 => None,
        s => Some(Duration::from_secs(s)),
    };
    let jobs = env_u64("SLUICE_ORACLE_JOBS").unwrap_or(2).max(1);
    let next = AtomicU64::new(0);
    let totals = Mutex::new(Totals::default());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    if budget.is_some_and(|b| started.elapsed() >= b) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(seed) = seeds(i) else { break };
                    // A panic in a trial (its setup, a harness bug) fails that trial only,
                    // so the summary line is still printed.
                    let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        trial::run(engine, seed)
                    }))
                    .unwrap_or_else(|panic| Report {
                        seed,
                        mismatches: vec![format!(
                            "the trial panicked: {}",
                            panic
                                .downcast_ref::<String>()
                                .map(String::as_str)
                                .or_else(|| panic.downcast_ref::<&str>().copied())
                                .unwrap_or("(no message)")
                        )],
                        ..Report::default()
                    });
                    let failed = !report.mismatches.is_empty();
                    let mut t = totals.lock().unwrap();
                    t.add(test, report);
                    if failed {
                        eprintln!("{}", t.failed.last().unwrap());
                    }
                    if t.trials % 25 == 0 {
                        eprintln!(
                            "oracle {}: {} trials so far, {} mismatches",
                            engine.name(),
                            t.trials,
                            t.mismatches
                        );
                    }
                }
            });
        }
    });
    let t = totals.into_inner().unwrap();
    println!(
        "oracle {}: trials={} crashes={} rows_compared={} events_compared={} mismatches={} (drains={} skipped={} transient={} changes={} key_change_carries={} spill_leftovers={} baselines={} snapshot_rows={} truncates={} ddls={} rebaselines_by_hand={} materializes={} compactions={} compaction_crashes={} parts_compacted={} retention_trials={} history_folds={} verifies={} walks={} repairs={} repair_crashes={} failovers={} iceberg={} iceberg_current={} policies={} seconds={})",
        engine.name(),
        t.trials,
        t.crashes,
        t.rows_compared,
        t.events_compared,
        t.mismatches,
        t.drains,
        t.skipped,
        t.transient,
        t.changes,
        t.carried_by_key_change,
        t.spill_leftovers,
        t.baselines,
        t.snapshot_rows,
        t.truncates,
        t.ddls,
        t.rebaselines,
        t.materializes,
        t.compactions,
        t.compaction_crashes,
        t.parts_compacted,
        t.retention_trials,
        t.history_folds,
        t.verifies,
        t.walks,
        t.repairs,
        t.repair_crashes,
        t.failovers,
        t.iceberg,
        t.iceberg_current,
        t.policies,
        started.elapsed().as_secs()
    );
    assert!(t.trials > 0, "the oracle ran no trial");
    assert!(
        t.failed.is_empty(),
        "oracle {}: {} trial(s) failed:\n{}",
        engine.name(),
        t.failed.len(),
        t.failed.join("\n\n")
    );
}
