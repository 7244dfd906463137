//! The command line: `sluice drain | baseline | compact | verify | state show | state init | state
//! clear | lease release | claims list | claims release | validate [--config-json] | doctor
//! | sql | init`.
//!
//! Guarantees: stdout carries exactly one JSON document per command (the run summary for
//! `drain`, also on failure as `status: "failed"` with the error's code and hint) —
//! except `doctor` without `--json`, which prints its table there, `sql`, which
//! prints its SQL text, and a drain to stdout (`--stdout`, `destination: stdout`), whose
//! stdout carries only the NDJSON changes and whose summary goes to stderr; logs and human
//! messages go to stderr; the exit code is the error class's (0 done or skipped, 1
//! config, 3 transient, 5 refusal; 2 is clap's usage error; `doctor`: 5 when a check
//! fails), also when stdout or stderr has been closed by the reader.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::backends::Backends;
use crate::drain::DrainOptions;
use crate::drain::stop::StopRequest;

/// Time an abandoned drain gets to release its lease before the process gives up on it.
const RELEASE_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(3);
use crate::error::{Code, Error, Result};
use crate::job;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Drain a database change log into typed Parquet parts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drain the change log from the checkpoint up to its end as of now.
    Drain {
        /// Config file (YAML or JSON); default: the SLUICE_CONFIG environment variable.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Stop at the first transaction boundary after this long (e.g. `10m`, `90s`).
        #[arg(long, value_parser = humantime::parse_duration)]
        max_duration: Option<Duration>,
        /// Write the changes as NDJSON on stdout instead of the configured destination
        /// (the run summary and logs then go to stderr).
        #[arg(long)]
        stdout: bool,
    },
    /// Read the tables' current state into snapshot parts (anchor first, resumable).
    Baseline {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Chunks read at once (default: baseline.parallel).
        #[arg(long)]
        parallel: Option<usize>,
        /// Clear the baseline records instead, so the next baseline starts over.
        #[arg(long)]
        reset: bool,
        /// Re-baseline this one table (as source.tables names it) while drains go on:
        /// anchored at the job's checkpoint, into a new plan folder, with an epoch marker.
        #[arg(long, conflicts_with = "reset")]
        table: Option<String>,
    },
    /// Compare one table in the lake with the source by key-range chunks, naming every key
    /// that differs (docs/verify.md); exit 5 when a difference remains.
    Verify {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The table, as source.tables names it.
        #[arg(long)]
        table: String,
        /// Read only about this percent of the chunks (e.g. `1` or `1%`).
        #[arg(long, value_parser = parse_percent)]
        sample: Option<f64>,
        /// Write the full JSON report to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the source's rows of the keys that differ into the lake, then verify again.
        #[arg(long)]
        repair: bool,
        /// Walk the table chunk by chunk, as the verify state machine does: each chunk
        /// folds only its key range's share of the lake, so memory follows a chunk, not
        /// the table (integer keys; other tables are verified whole).
        #[arg(long)]
        by_chunks: bool,
    },
    /// Rewrite each table's small change parts that a checkpoint covers into few large
    /// ones (docs/compaction.md); beside drains, never blocking them.
    Compact {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Compact only this table (as source.tables names it); may be repeated.
        #[arg(long)]
        table: Vec<String>,
        /// Stop between parts after this long (e.g. `10m`), keeping what is committed.
        #[arg(long, value_parser = humantime::parse_duration)]
        max_duration: Option<Duration>,
    },
    /// Erase every row of the given keys from one table's parts, baselines and current
    /// state, once the source deleted them and a drain ran (docs/privacy.md, "The erasure
    /// procedure").
    Forget {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The table (as source.tables names it).
        #[arg(long)]
        table: String,
        /// A key: `col=value[,col2=value2]` naming every key column (values in the
        /// source's text form; `\,` for a comma in a value); may be repeated.
        #[arg(long)]
        key: Vec<String>,
        /// A file of keys, one `col=value[,col2=value2]` a line (`#` comments, blank
        /// lines skipped).
        #[arg(long)]
        keys_file: Option<PathBuf>,
    },
    /// Inspect, create or clear the job's stored state.
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Release the job's lease when its holder is gone.
    Lease {
        #[command(subcommand)]
        command: LeaseCommand,
    },
    /// List or release the resource claims in the state store.
    Claims {
        #[command(subcommand)]
        command: ClaimsCommand,
    },
    /// Parse and check a config without connecting anywhere.
    Validate {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The config document itself (JSON or YAML), e.g. a Terraform-rendered
        /// SLUICE_CONFIG; prints it back normalized (sorted keys, URL redacted).
        #[arg(long, conflicts_with = "config")]
        config_json: Option<String>,
    },
    /// Check every prerequisite of the job (source, state, destination) and print the fixes.
    Doctor {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the report as one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Build each table's current-state table (one row per key) from its parts, as plain
    /// Parquet under `<table>/_current_state/` (docs/current-state.md).
    Materialize {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Only this table (repeatable); default every captured table.
        #[arg(long)]
        table: Vec<String>,
    },
    /// Print the query (or view) that reads a table's current state from its parts.
    Sql {
        #[arg(long)]
        config: Option<PathBuf>,
        /// `duckdb`, `athena` (Trino) or `spark`.
        #[arg(long)]
        dialect: crate::replay::Dialect,
        /// The table, as `source.tables` names it.
        #[arg(long)]
        table: String,
        /// Where the rows are: the table folder (path or s3:// URI; DuckDB, Spark; default:
        /// the destination's), or the catalog table over it (Athena; default: the table
        /// name with `_` for `.`).
        #[arg(long)]
        source: Option<String>,
        /// Print `CREATE OR REPLACE VIEW <name> AS …` instead of the bare query.
        #[arg(long, conflicts_with = "merge")]
        view: Option<String>,
        /// Print the read of the table's current state as `sluice materialize` keeps it
        /// (`duckdb`; docs/current-state.md) instead of the replay of its changes.
        #[arg(long, conflicts_with_all = ["merge", "view"])]
        current_state: bool,
        /// Print the MERGE that brings the table's current-state table up to date from its
        /// Iceberg change log (`duckdb`, `athena`; docs/iceberg.md). `--source` then names
        /// the change log: Athena `db.table`, DuckDB its metadata file.
        #[arg(long)]
        merge: bool,
        /// With --merge: the current-state table (default `<change log>_current`).
        #[arg(long, requires = "merge")]
        target: Option<String>,
        /// With --merge: print the statement that creates the (empty) current-state table
        /// instead of the MERGE.
        #[arg(long, requires = "merge")]
        create: bool,
        /// With --merge --create for Athena: the new Iceberg table's S3 location (default
        /// `<table folder>/_current/` of an S3 destination).
        #[arg(long, requires = "create")]
        location: Option<String>,
    },
    /// One line per job in a state store: lease, checkpoint, last run, lag, the last
    /// day's runs/rows/bytes and baseline progress (reads the store only).
    Status {
        /// A job config whose `state` block names the store (default: SLUICE_CONFIG,
        /// unless --state-dir or --dynamodb-table is given).
        #[arg(long, conflicts_with_all = ["state_dir", "dynamodb_table"])]
        config: Option<PathBuf>,
        /// A local state directory.
        #[arg(long, conflicts_with = "dynamodb_table")]
        state_dir: Option<PathBuf>,
        /// A DynamoDB state table.
        #[arg(long)]
        dynamodb_table: Option<String>,
        /// With --dynamodb-table: a custom endpoint (default: AWS_ENDPOINT_URL, else AWS's).
        #[arg(long, requires = "dynamodb_table")]
        endpoint_url: Option<String>,
        /// With --dynamodb-table: the region (default: the AWS provider chain's).
        #[arg(long, requires = "dynamodb_table")]
        region: Option<String>,
        /// Print one JSON document (`{"jobs": [...]}`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Connect read-only, list the tables, and write ready configs plus Terraform calls.
    Init {
        /// Environment variable holding the source URL (it is named, never copied, in the configs).
        #[arg(long)]
        source_env: String,
        /// Tables to capture (`schema.table`); default: every table the user can see.
        #[arg(long, num_args = 1.., value_delimiter = ',')]
        tables: Vec<String>,
        /// One stream (slot) per table instead of one stream for all the tables.
        #[arg(long)]
        per_table: bool,
        /// Directory the configs are written to.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum StateCommand {
    /// Print the job's lease, checkpoint and records as JSON.
    Show {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Create the state store when missing (the DynamoDB table, the local directory); idempotent.
    Init {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Clear the job's checkpoint, lease, baseline and chunk records (a re-baseline
    /// follows); refuses while a live lease is held or old snapshot output exists.
    Clear {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Take the lease even when its holder is not provably gone.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
enum LeaseCommand {
    /// Release the lease when its holder is provably gone (a dead pid on this host) or
    /// expired; refuses otherwise, unless --force.
    Release {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Release it even when its holder is not provably gone.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ClaimsCommand {
    /// Print every claim in the job's state store.
    List {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Remove this job's claim on a resource (another job's only with --force).
    Release {
        /// The resource as `claims list` prints it (`pg:host:5432/db/slot/name`).
        resource: String,
        #[arg(long)]
        config: Option<PathBuf>,
        /// Release another job's claim.
        #[arg(long)]
        force: bool,
    },
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    if crate::lambda::is_lambda() {
        return crate::lambda::main();
    }
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            stderr_line(format!("error: cannot start the async runtime: {e}"));
            return 3;
        }
    };
    let code = runtime.block_on(run(cli.command));
    // A blocking writer (NDJSON into a pipe nobody reads) must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

async fn run(command: Command) -> i32 {
    match command {
        Command::Drain {
            config,
            max_duration,
            stdout,
        } => {
            // With NDJSON on stdout, the summary (or the failure) goes to stderr.
            let mut out = if stdout { Out::Stderr } else { Out::Stdout };
            let mut config = match job::config::load(config.as_deref()) {
                Ok(c) => c,
                Err(e) => return fail_to(out, None, &e),
            };
            if stdout {
                config.destination = crate::config::DestinationConfig::Stdout {};
            }
            if crate::destination::stdout::is_stdout(&config) {
                out = Out::Stderr;
            }
            let config = match crate::secret::resolve(&config).await {
                Ok(c) => c,
                Err(e) => return fail_to(out, Some(&config.job), &e),
            };
            let deadline = max_duration.map(|d| std::time::Instant::now() + d);
            let stop = StopRequest::default();
            if let Err(e) = stop.on_signals() {
                tracing::warn!(error = %e, "cannot catch SIGTERM/SIGINT; a signal kills the run");
            }
            let options = DrainOptions::with_deadline(deadline, config.deadline.margin())
                .stopped_by(stop.clone());
            let result = tokio::select! {
                result = job::run(&config, options) => result,
                // Outside the lease (claims, an inline baseline), or a release that hangs.
                () = async {
                    stop.abandoned().await;
                    tokio::time::sleep(RELEASE_ALLOWANCE).await;
                } => Err(job::interrupted(stop.signal())),
            };
            let code = match result {
                Ok(summary) => {
                    out.line(summary.to_line());
                    0
                }
                Err(e) => fail_to(out, Some(&config.job), &e),
            };
            // A run stopped by a signal exits as the shell expects: 128 + the signal.
            stop.signal().map_or(code, |signal| 128 + signal)
        }
        Command::Baseline {
            config,
            parallel,
            reset,
            table,
        } => report(baseline(config, parallel, reset, table).await),
        Command::Compact {
            config,
            table,
            max_duration,
        } => compact(config, table, max_duration).await,
        Command::Forget {
            config,
            table,
            key,
            keys_file,
        } => forget(config, table, key, keys_file).await,
        Command::Verify {
            config,
            table,
            sample,
            json,
            repair,
            by_chunks,
        } => verify(config, table, sample, json, repair, by_chunks).await,
        Command::State {
            command: StateCommand::Show { config },
        } => report(show_state(config).await),
        Command::State {
            command: StateCommand::Init { config },
        } => report(init_state(config).await),
        Command::State {
            command: StateCommand::Clear { config, force },
        } => report(clear_state(config, force).await),
        Command::Lease {
            command: LeaseCommand::Release { config, force },
        } => report(release_lease(config, force).await),
        Command::Claims {
            command: ClaimsCommand::List { config },
        } => report(list_claims(config).await),
        Command::Claims {
            command:
                ClaimsCommand::Release {
                    resource,
                    config,
                    force,
                },
        } => report(release_claim(config, &resource, force).await),
        Command::Validate {
            config_json: Some(text),
            ..
        } => report(crate::validate::document(&text)),
        Command::Validate { config, .. } => report(job::config::load(config.as_deref()).map(
            |c| serde_json::json!({ "valid": true, "job": c.job, "tables": c.source.tables, "config": c.normalized() }),
        )),
        Command::Doctor { config, json } => doctor(config, json).await,
        Command::Materialize { config, table } => report(materialize(config, &table).await),
        Command::Sql {
            config,
            dialect,
            table,
            source,
            view,
            current_state,
            merge,
            target,
            create,
            location,
        } => {
            if current_state {
                return sql_current(config, dialect, &table, source.as_deref()).await;
            }
            let merge = merge.then_some(MergeArgs {
                target: target.as_deref(),
                create,
                location: location.as_deref(),
            });
            sql(config, dialect, &table, source.as_deref(), view.as_deref(), merge).await
        }
        Command::Status {
            config,
            state_dir,
            dynamodb_table,
            endpoint_url,
            region,
            json,
        } => {
            let store = match (state_dir, dynamodb_table) {
                (Some(path), _) => crate::config::StateConfig::Local { path },
                (None, Some(table)) => crate::config::StateConfig::Dynamodb {
                    table,
                    endpoint_url,
                    region,
                },
                (None, None) => match job::config::load(config.as_deref()) {
                    Ok(c) => c.state,
                    Err(e) => return fail(None, &e),
                },
            };
            status(&store, json).await
        }
        Command::Init {
            source_env,
            tables,
            per_table,
            out,
        } => report(crate::init::run(&source_env, &tables, per_table, &out).await),
    }
}

/// Prints the doctor report (table on stdout, or JSON); exit 0 unless a check failed (5).
async fn doctor(config: Option<PathBuf>, json: bool) -> i32 {
    let config = match job::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    let report = crate::doctor::run(&config).await;
    if json {
        stdout_line(report.to_json());
    } else {
        stdout_text(&report.to_table());
    }
    report.exit_code()
}

/// Prints every job of the store (table on stdout, or JSON); exit 0, or the error's code.
async fn status(store: &crate::config::StateConfig, json: bool) -> i32 {
    if let crate::config::StateConfig::Dynamodb {
        endpoint_url: Some(url),
        ..
    } = store
        && let Err(e) = crate::config::check_endpoint("--endpoint-url", url)
    {
        return fail(None, &e);
    }
    let rows = match crate::state::open_store(store).await {
        Ok(store) => crate::status::collect(store.as_ref(), crate::state::now_ms()).await,
        Err(e) => Err(e),
    };
    match rows {
        Ok(rows) if json => {
            stdout_line(serde_json::json!({ "jobs": rows }));
            0
        }
        Ok(rows) => {
            stdout_text(&crate::status::render::table(&rows));
            0
        }
        Err(e) => fail(None, &e),
    }
}

/// Compacts the job's tables; prints the summary line, exit 0 unless a table failed (its
/// error's class code).
async fn compact(
    config: Option<PathBuf>,
    tables: Vec<String>,
    max_duration: Option<Duration>,
) -> i32 {
    let deadline = max_duration.map(|d| std::time::Instant::now() + d);
    let config = match job::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    let options = crate::compaction::CompactOptions { tables, deadline };
    let result = match Backends::open(&config).await {
        Ok(backends) => crate::compaction::run(&config, &backends, &options).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(summary) => {
            stdout_line(summary.to_line());
            summary.exit_code
        }
        Err(e) => fail(Some(&config.job), &e),
    }
}

/// Forgets keys in one table; prints the summary line, exit 0 or the error's code.
async fn forget(
    config: Option<PathBuf>,
    table: String,
    key: Vec<String>,
    keys_file: Option<PathBuf>,
) -> i32 {
    let config = match job::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    let keys = (|| {
        let mut keys = key
            .iter()
            .map(|k| crate::forget::keys::Key::parse(k))
            .collect::<crate::error::Result<Vec<_>>>()?;
        if let Some(path) = &keys_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                crate::error::Error::new(
                    crate::error::Code::ConfigInvalid,
                    format!("cannot read the keys file {}", path.display()),
                )
                .hint("give --keys-file a readable file, one col=value[,col2=value2] key a line")
                .source(e)
            })?;
            keys.extend(crate::forget::keys::Key::parse_file(&text)?);
        }
        Ok::<_, crate::error::Error>(keys)
    })();
    let keys = match keys {
        Ok(k) => k,
        Err(e) => return fail(Some(&config.job), &e),
    };
    let config = match crate::secret::resolve_hash_key(config).await {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    let options = crate::forget::ForgetOptions { table, keys };
    let result = match Backends::open(&config).await {
        Ok(backends) => crate::forget::run(&config, &backends, &options).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(summary) => {
            stdout_line(summary.to_line());
            0
        }
        Err(e) => fail(Some(&config.job), &e),
    }
}

/// `--sample`'s percentage: `1`, `1%`, `0.5`.
fn parse_percent(text: &str) -> std::result::Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(format!(
            "{text:?} is not a percentage above 0 and at most 100"
        )),
    }
}

/// Verifies one table; prints the summary line (and writes the JSON report with `--json`),
/// exit 0 when equal, the `SLUICE_VERIFY_DIFFERS` class code when a difference remains.
async fn verify(
    config: Option<PathBuf>,
    table: String,
    sample: Option<f64>,
    json: Option<PathBuf>,
    repair: bool,
    by_chunks: bool,
) -> i32 {
    let config = match job::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    let options = crate::verify::VerifyOptions {
        table,
        sample,
        repair,
    };
    let result = match Backends::open(&config).await {
        Ok(backends) if by_chunks => {
            crate::verify::walk::walk_here(&config, &backends, &options).await
        }
        Ok(backends) => crate::verify::run(&config, &backends, &options).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(report) => {
            if let Some(path) = json {
                let body = serde_json::to_vec_pretty(&report).unwrap_or_default();
                if let Err(e) = std::fs::write(&path, body) {
                    let error = Error::new(
                        Code::ConfigInvalid,
                        format!("cannot write the verify report to {}", path.display()),
                    )
                    .hint("pass --json a path in a folder that exists and is writable")
                    .source(e);
                    return fail(Some(&config.job), &error);
                }
            }
            stdout_line(report.to_line());
            report.exit_code()
        }
        Err(e) => fail(Some(&config.job), &e),
    }
}

/// `sluice sql --merge`'s options.
struct MergeArgs<'a> {
    target: Option<&'a str>,
    create: bool,
    location: Option<&'a str>,
}

/// Prints the replay query (or with `merge` the current-state table's MERGE) as text on
/// stdout; exit 0, or the error's code.
async fn sql(
    config: Option<PathBuf>,
    dialect: crate::replay::Dialect,
    table: &str,
    source: Option<&str>,
    view: Option<&str>,
    merge: Option<MergeArgs<'_>>,
) -> i32 {
    let config = match job::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    let rendered = match merge {
        Some(m) => {
            crate::replay::render_merge(
                &config, dialect, table, source, m.target, m.create, m.location,
            )
            .await
        }
        None => crate::replay::render(&config, dialect, table, source, view).await,
    };
    match rendered {
        Ok(text) => {
            stdout_text(&text);
            0
        }
        Err(e) => fail(Some(&config.job), &e),
    }
}

async fn sql_current(
    config: Option<PathBuf>,
    dialect: crate::replay::Dialect,
    table: &str,
    source: Option<&str>,
) -> i32 {
    let config = match job::config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(None, &e),
    };
    match crate::replay::render_current(&config, dialect, table, source).await {
        Ok(text) => {
            stdout_text(&text);
            0
        }
        Err(e) => fail(Some(&config.job), &e),
    }
}

async fn materialize(config: Option<PathBuf>, tables: &[String]) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    crate::materialize::run(&config, tables).await
}

async fn baseline(
    config: Option<PathBuf>,
    parallel: Option<usize>,
    reset: bool,
    table: Option<String>,
) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    let backends = Backends::open(&config).await?;
    if reset {
        return crate::baseline::reset(&config, &backends).await;
    }
    crate::destination::stdout::refuse_baseline(&config, "sluice baseline")?;
    let config = crate::secret::resolve(&config).await?;
    if let Some(table) = &table {
        crate::baseline::request_table(&config, &backends, table).await?;
    }
    let parallel = parallel.unwrap_or(config.baseline.parallel);
    let summary = crate::baseline::run_inline_to_end(&config, &backends, parallel).await?;
    Ok(serde_json::to_value(summary).unwrap_or_default())
}

async fn show_state(config: Option<PathBuf>) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    let store = crate::state::open(&config).await?;
    store.show(&config.job).await
}

async fn init_state(config: Option<PathBuf>) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    crate::state::open(&config).await?.init().await
}

async fn clear_state(config: Option<PathBuf>, force: bool) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    let backends = Backends::open(&config).await?;
    crate::recovery::clear_state(&config, &backends, force).await
}

async fn release_lease(config: Option<PathBuf>, force: bool) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    let store = crate::state::open(&config).await?;
    crate::recovery::release_lease(&config, store.as_ref(), force).await
}

async fn list_claims(config: Option<PathBuf>) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    let store = crate::state::open(&config).await?;
    crate::recovery::list_claims(store.as_ref()).await
}

async fn release_claim(
    config: Option<PathBuf>,
    resource: &str,
    force: bool,
) -> Result<serde_json::Value> {
    let config = job::config::load(config.as_deref())?;
    let store = crate::state::open(&config).await?;
    crate::recovery::release_claim(&config, store.as_ref(), resource, force).await
}

fn report(result: Result<serde_json::Value>) -> i32 {
    match result {
        Ok(value) => {
            stdout_line(value);
            0
        }
        Err(e) => fail(None, &e),
    }
}

/// Where a command's one JSON document goes: stdout, or stderr when stdout carries NDJSON.
#[derive(Debug, Clone, Copy)]
enum Out {
    Stdout,
    Stderr,
}

impl Out {
    fn line(self, text: impl std::fmt::Display) {
        match self {
            Out::Stdout => stdout_line(text),
            Out::Stderr => stderr_line(text),
        }
    }
}

/// Prints the error (stderr for people, stdout as the one JSON line) and returns its exit code.
fn fail(job: Option<&str>, e: &Error) -> i32 {
    fail_to(Out::Stdout, job, e)
}

/// [`fail`], with the JSON line going to `out`.
fn fail_to(out: Out, job: Option<&str>, e: &Error) -> i32 {
    stderr_line(format!("error: {}", e.chain()));
    if let Some(hint) = e.hint_text() {
        stderr_line(format!("hint: {hint}"));
    }
    let line = serde_json::json!({ "status": "failed", "job": job, "error": e.to_json() });
    out.line(line);
    if e.code() == Code::Internal {
        stderr_line("this is a bug in sluice; please report it with the log above");
    }
    e.class().exit_code()
}

/// Writes one line to stdout. A closed stdout (`sluice state show | head -c 10`) drops
/// the write instead of panicking, so the exit code is still the command's own.
fn stdout_line(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// [`stdout_line`] for text that carries its own line ends.
fn stdout_text(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Writes one line to stderr; a closed stderr drops it.
fn stderr_line(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Logs to stderr: human-readable text, or JSON lines with `SLUICE_LOG_FORMAT=json`.
/// The level filter comes from `SLUICE_LOG` (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::progress::Stderr);
    let json = std::env::var("SLUICE_LOG_FORMAT").is_ok_and(|f| f == "json");
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let setting = std::env::var(crate::progress::PROGRESS_ENV).ok();
    match crate::progress::mode_for(setting.as_deref(), terminal, !json) {
        crate::progress::Mode::Bar => crate::progress::enable(),
        crate::progress::Mode::Lines => crate::progress::enable_lines(),
        crate::progress::Mode::Off => {}
    }
    if json {
        builder.json().init();
    } else {
        builder.with_ansi(terminal).init();
    }
}
