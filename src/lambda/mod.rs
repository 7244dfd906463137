//! The Lambda face: the same drain as the CLI, driven by the Lambda Runtime API.
//!
//! `main` runs this when `AWS_LAMBDA_RUNTIME_API` is set. The config comes from
//! `SLUICE_CONFIG` (the same schema as the config file) and is parsed once per container;
//! state and destination clients are built once per container, on first use, and reused.
//! The source URL's Secrets Manager secret (`source.url_secret_arn`) is read on the first
//! invocation and kept by the container; after `SLUICE_SOURCE_AUTH` it is read again and,
//! when it has been rotated, the run is retried once with the new value.
//! Each invocation's deadline is Lambda's `Context::deadline` minus
//! `deadline.safety_margin_seconds`. Besides drains and the baseline tasks it runs
//! `{"action": "compact"}` ([`crate::compaction`]; `compact.plan` lists the tables for the
//! compaction machine, [`crate::compaction::fan_out`]) and `{"action": "forget", "table": …,
//! "keys": [...]}` ([`crate::forget`]), which never read the source's secret, and
//! `{"action": "verify"}` ([`crate::verify`]: every table, or `"table": …`; one EMF
//! line per table, the reports as the response, also when rows differ — the metric and
//! its alarm say so), and the verify walker's `verify.plan` / `verify.chunk` /
//! `verify.finish` ([`crate::verify::walk`]; the finish prints the EMF line).
//! Logs are JSON lines on stderr; each invocation also prints one CloudWatch EMF line on
//! stdout (see [`crate::metrics`]; a compaction one per table) and returns the run
//! summary as its response. Errors become [`diagnostic`] responses.
//!
//! Stopping: the function registers an internal extension so that Lambda sends it
//! SIGTERM before ending its environment, and stops the in-flight invocation at a
//! transaction boundary then — see [`shutdown`] for what is guaranteed.
//!
//! Panic strategy: the release profile aborts on panic. A panic is a bug; aborting ends
//! the container, its lease expires, and the next invocation resumes from the last
//! checkpoint — nothing half-done is reused.

pub mod deadline;
pub mod diagnostic;
pub mod event;
pub mod shutdown;

use std::sync::Arc;
use std::time::Instant;

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::backends::Backends;
use crate::config::Config;
use crate::drain::DrainOptions;
use crate::error::{Code, Error};
use diagnostic::HandlerError;
use event::Action;
use shutdown::Shutdown;

/// Environment variable whose presence selects the Lambda face.
pub const RUNTIME_API_ENV: &str = "AWS_LAMBDA_RUNTIME_API";

/// True when running inside Lambda (or a Runtime API emulator).
pub fn is_lambda() -> bool {
    std::env::var_os(RUNTIME_API_ENV).is_some()
}

/// What a container keeps between invocations.
struct Container {
    config: std::result::Result<Config, Error>,
    backends: OnceCell<Backends>,
    /// The URL `source.url_secret_arn` held when last read (none before the first read).
    secret_url: tokio::sync::Mutex<Option<String>>,
    /// The process's stop request and in-flight flag (it owns SIGTERM and SIGINT).
    shutdown: Arc<Shutdown>,
}

/// Runs the Lambda runtime loop until the process is stopped; returns the exit code.
pub fn main() -> i32 {
    init_logging();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return 3;
        }
    };
    runtime.block_on(async {
        let shutdown = Arc::new(Shutdown::default());
        if let Err(e) = shutdown.on_signals() {
            tracing::warn!(error = %e, "cannot catch SIGTERM/SIGINT; a signal kills the function where it is");
        }
        // Before the runtime's first `invocation/next`, which ends the Init phase.
        match shutdown::register_extension().await {
            Ok(id) => tracing::debug!(extension = %id, "internal extension registered: Lambda sends SIGTERM before it ends this environment"),
            Err(e) => tracing::warn!(error = %e, "could not register the internal extension: Lambda will end this environment without SIGTERM, so a run cut off then is not stopped at a boundary (its lease expires on its own)"),
        }
        let config = crate::job::config::load(None).and_then(refuse_stdout);
        if let Err(e) = &config {
            tracing::error!(error = %e.chain(), "invalid SLUICE_CONFIG; every invocation will fail until it is fixed");
        }
        let container = Arc::new(Container {
            config,
            backends: OnceCell::new(),
            secret_url: tokio::sync::Mutex::new(None),
            shutdown: shutdown.clone(),
        });
        let handler = service_fn(move |event: LambdaEvent<Value>| {
            let container = container.clone();
            async move { handle(&container, event).await }
        });
        // The in-flight layer is the outermost: an invocation is in flight until its
        // answer is posted.
        let runtime = lambda_runtime::Runtime::new(handler)
            .layer(lambda_runtime::layers::TracingLayer::new())
            .layer(shutdown.layer());
        match runtime.run().await {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!(error = %e, "lambda runtime stopped");
                3
            }
        }
    })
}

/// One invocation, under the process's stop request: refused once a stop was asked;
/// otherwise answered by [`shutdown::GRACE`] + [`shutdown::RELEASE_ALLOWANCE`] after a
/// stop is asked, whatever the work is doing then.
async fn handle(
    container: &Container,
    event: LambdaEvent<Value>,
) -> std::result::Result<Value, HandlerError> {
    let stop = container.shutdown.stop();
    if stop.asked() {
        return Err(HandlerError(shutting_down(stop.signal())));
    }
    let answer = tokio::select! {
        answer = run_invocation(container, event) => answer,
        () = async {
            stop.abandoned().await;
            tokio::time::sleep(shutdown::RELEASE_ALLOWANCE).await;
        } => Err(HandlerError(crate::job::interrupted(stop.signal()))),
    };
    answer.map_err(|HandlerError(e)| HandlerError(with_lambda_hint(e)))
}

/// The answer to an invocation that arrives after a stop was asked: nothing ran.
fn shutting_down(signal: Option<i32>) -> Error {
    let by = signal.map_or_else(|| "a stop request".to_owned(), |s| format!("signal {s}"));
    Error::new(
        Code::RunInterrupted,
        format!("the execution environment is shutting down ({by}); this invocation ran nothing"),
    )
    .hint("nothing was read or leased: the next invocation runs normally")
}

/// `SLUICE_RUN_INTERRUPTED` with the hint that holds on Lambda (where the time between
/// SIGTERM and SIGKILL is Lambda's, not the operator's); any other error as it is.
fn with_lambda_hint(e: Error) -> Error {
    if e.code() != Code::RunInterrupted {
        return e;
    }
    e.hint("Lambda ended the execution environment (a timeout or a spin-down) and allows 500 ms after SIGTERM; the run was abandoned where it was: nothing was half-written, the lease was released, and the next invocation resumes from the last checkpoint. Runs cut off by the function's timeout: raise the timeout or deadline.safety_margin_seconds")
}

async fn run_invocation(
    container: &Container,
    event: LambdaEvent<Value>,
) -> std::result::Result<Value, HandlerError> {
    let now = Instant::now();
    let config = container
        .config
        .as_ref()
        .map_err(|e| Error::new(e.code(), e.message()).hint(e.hint_text().unwrap_or_default()))?;
    let action = event::action_of(&event.payload)?;
    let backends = container
        .backends
        .get_or_try_init(|| Backends::open(config))
        .await?;
    // A compaction reads and writes the destination and the state store only: it never
    // reads the source's secret (its function needs no access to it).
    if action == Action::Compact {
        let deadline = deadline::instant_of(
            event.context.deadline,
            chrono::Utc::now().timestamp_millis(),
            now,
        );
        return Ok(run_compaction(config, backends, &event.payload, deadline).await?);
    }
    if action == Action::CompactPlan {
        let input = event.payload.get("input");
        let plan = crate::compaction::fan_out::plan(config, input)?;
        return Ok(serde_json::to_value(plan).unwrap_or_default());
    }
    if action == Action::Forget {
        let config = crate::secret::resolve_hash_key(config.clone()).await?;
        return Ok(run_forget(&config, backends, &event.payload).await?);
    }
    let config = &with_secret(container, config, false).await?;
    match action {
        Action::Drain => {
            let deadline = deadline::instant_of(
                event.context.deadline,
                chrono::Utc::now().timestamp_millis(),
                now,
            );
            let options = DrainOptions::with_deadline(Some(deadline), config.deadline.margin())
                .stopped_by(container.shutdown.stop().clone());
            let result = with_rotated_secret(container, config, async |config: &Config| {
                crate::job::run_with(config, backends, options.clone()).await
            })
            .await;
            let summary = result.as_ref().ok();
            let emf = crate::metrics::emf_document(
                &config.job,
                summary,
                chrono::Utc::now().timestamp_millis(),
            );
            println!("{emf}");
            let summary = result?;
            tracing::info!(summary = %summary.to_line(), "run finished");
            Ok(serde_json::to_value(&summary).unwrap_or_default())
        }
        Action::Verify => {
            let (tables, sample, repair) = verify_options(config, &event.payload)?;
            let mut reports = Vec::with_capacity(tables.len());
            for table in tables {
                let options = crate::verify::VerifyOptions {
                    table,
                    sample,
                    repair,
                };
                let report = with_rotated_secret(container, config, async |config: &Config| {
                    crate::verify::run(config, backends, &options).await
                })
                .await?;
                report_verify(&config.job, &report);
                reports.push(serde_json::to_value(&report).unwrap_or_default());
            }
            Ok(serde_json::json!({ "job": config.job, "tables": reports }))
        }
        Action::VerifyPlan => {
            let input = event
                .payload
                .get("input")
                .cloned()
                .unwrap_or_else(|| event.payload.clone());
            let plan = with_rotated_secret(container, config, async |config: &Config| {
                crate::verify::walk::plan(config, backends, &input).await
            })
            .await?;
            Ok(serde_json::to_value(plan).unwrap_or_default())
        }
        Action::VerifyChunk => {
            let result = with_rotated_secret(container, config, async |config: &Config| {
                crate::verify::walk::chunk(config, backends, &event.payload).await
            })
            .await?;
            Ok(serde_json::to_value(result).unwrap_or_default())
        }
        Action::VerifyFinish => {
            let (output, reports) =
                with_rotated_secret(container, config, async |config: &Config| {
                    crate::verify::walk::finish(config, backends, &event.payload).await
                })
                .await?;
            for report in &reports {
                report_verify(&config.job, report);
            }
            Ok(serde_json::to_value(output).unwrap_or_default())
        }
        Action::Materialize => {
            let tables: Vec<String> = event
                .payload
                .get("tables")
                .and_then(Value::as_array)
                .map(|t| {
                    t.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Ok(crate::materialize::run_with(config, backends, &tables).await?)
        }
        baseline => Ok(
            with_rotated_secret(container, config, async |config: &Config| {
                run_baseline_task(config, backends, &baseline, &event.payload).await
            })
            .await?,
        ),
    }
}

/// One table's verify on the function's outputs: its EMF line on stdout, its summary in
/// the log.
fn report_verify(job: &str, report: &crate::verify::VerifyReport) {
    println!(
        "{}",
        crate::metrics::verify_emf_document(
            job,
            &report.metrics(),
            chrono::Utc::now().timestamp_millis()
        )
    );
    tracing::info!(summary = %report.to_line(), "verify finished");
}

/// `{"action": "verify", "table": T, "sample": PCT, "repair": bool}` as the tables to
/// verify (every captured table without `table`), the sample and the repair flag.
fn verify_options(
    config: &Config,
    payload: &Value,
) -> crate::error::Result<(Vec<String>, Option<f64>, bool)> {
    let usage = "send {\"action\": \"verify\"} (every table) or {\"action\": \"verify\", \"table\": \"public.orders\"}, optionally with \"sample\": 1 (about 1% of the chunks) and \"repair\": true";
    let tables = match payload.get("table") {
        None | Some(Value::Null) => config.source.tables.clone(),
        Some(Value::String(table)) => vec![table.clone()],
        Some(other) => {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!("verify: table must be a table name, got {other}"),
            )
            .hint(usage));
        }
    };
    let sample = match payload.get("sample") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_f64().ok_or_else(|| {
            Error::new(
                Code::ConfigInvalid,
                format!("verify: sample must be a number (percent), got {v}"),
            )
            .hint(usage)
        })?),
    };
    let repair = payload
        .get("repair")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok((tables, sample, repair))
}

/// `config` carrying its secret's URL: the one the container read before, or — on the
/// first invocation, or when `reread` — the secret's current value (kept for the next
/// invocations). `config` as it is when it names no secret.
async fn with_secret(
    container: &Container,
    config: &Config,
    reread: bool,
) -> crate::error::Result<Config> {
    let Some(arn) = &config.source.url_secret_arn else {
        return crate::secret::resolve_hash_key(config.clone()).await;
    };
    let mut kept = container.secret_url.lock().await;
    let url = match kept.as_ref() {
        Some(url) if !reread => url.clone(),
        _ => {
            let url = crate::secret::read_url(arn, config.engine_block()).await?;
            *kept = Some(url.clone());
            url
        }
    };
    crate::secret::resolve_hash_key(config.clone().with_secret_url(url)).await
}

/// Runs `attempt`; when it fails with `SLUICE_SOURCE_AUTH` and the source URL comes from
/// Secrets Manager, reads the secret again and, if it changed (it was rotated), runs
/// `attempt` once more with the new URL. Any other outcome is returned as it is.
async fn with_rotated_secret<T>(
    container: &Container,
    config: &Config,
    mut attempt: impl AsyncFnMut(&Config) -> crate::error::Result<T>,
) -> crate::error::Result<T> {
    match attempt(config).await {
        Err(e) if e.code() == Code::SourceAuth && config.source.url_secret_arn.is_some() => {
            match with_secret(container, config, true).await {
                Ok(fresh) if fresh.source_url().ok() != config.source_url().ok() => {
                    tracing::info!(
                        "source secret changed since it was read; retrying with the new value"
                    );
                    attempt(&fresh).await
                }
                Ok(_) => Err(e),
                Err(refresh) => {
                    tracing::warn!(error = %refresh.chain(), "could not read the source secret again");
                    Err(e)
                }
            }
        }
        other => other,
    }
}

/// One forget (`{"action": "forget", "table": "public.users", "keys": ["id=42"]}`): the
/// summary as the response.
async fn run_forget(
    config: &Config,
    backends: &Backends,
    payload: &Value,
) -> crate::error::Result<Value> {
    let invalid = |what: String| {
        Error::new(Code::ConfigInvalid, what).hint(
            "send {\"action\": \"forget\", \"table\": \"public.users\", \"keys\": [\"id=42\"]}",
        )
    };
    let table = payload
        .get("table")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("forget: table must be a table name".into()))?;
    let keys: Vec<String> = payload
        .get("keys")
        .and_then(|k| serde_json::from_value(k.clone()).ok())
        .ok_or_else(|| invalid("forget: keys must be a list of col=value texts".into()))?;
    let options = crate::forget::ForgetOptions {
        table: table.to_owned(),
        keys: keys
            .iter()
            .map(|k| crate::forget::keys::Key::parse(k))
            .collect::<crate::error::Result<_>>()?,
    };
    let summary = crate::forget::run(config, backends, &options).await?;
    tracing::info!(summary = %summary.to_line(), "forget finished");
    Ok(serde_json::to_value(&summary).unwrap_or_default())
}

/// One compaction (`{"action": "compact", "tables": [...]}`, every table without
/// `tables`): one EMF line per table on stdout, the summary as the response; a table's
/// failure fails the invocation with that error (the summary is logged).
async fn run_compaction(
    config: &Config,
    backends: &Backends,
    payload: &Value,
    deadline: Instant,
) -> crate::error::Result<Value> {
    let tables = match payload.get("tables") {
        None | Some(Value::Null) => Vec::new(),
        Some(tables) => serde_json::from_value(tables.clone()).map_err(|e| {
            Error::new(Code::ConfigInvalid, format!("compact: tables must be a list of table names, got {tables}"))
                .hint("send {\"action\": \"compact\"} or {\"action\": \"compact\", \"tables\": [\"public.orders\"]}")
                .source(e)
        })?,
    };
    let options = crate::compaction::CompactOptions {
        tables,
        deadline: Some(deadline),
    };
    let summary = crate::compaction::run(config, backends, &options).await?;
    let now = chrono::Utc::now().timestamp_millis();
    for metrics in summary.metrics() {
        println!(
            "{}",
            crate::metrics::compaction_emf_document(&config.job, &metrics, now)
        );
    }
    tracing::info!(summary = %summary.to_line(), "compaction finished");
    if let Some(e) = summary.tables.values().find_map(|t| t.error.as_ref()) {
        let code = Code::ALL
            .iter()
            .find(|c| Some(c.as_str()) == e["code"].as_str())
            .copied()
            .unwrap_or(Code::Internal);
        // The JSON form's message is the error's chain, which starts with its code.
        let chain = e["message"].as_str().unwrap_or_default();
        let message = chain
            .strip_prefix(code.as_str())
            .and_then(|m| m.strip_prefix(": "))
            .unwrap_or(chain);
        return Err(Error::new(code, message).hint(e["hint"].as_str().unwrap_or_default()));
    }
    Ok(serde_json::to_value(&summary).unwrap_or_default())
}

/// Runs one Step Functions baseline task; its input and output are the typed payloads
/// of [`crate::baseline::tasks`].
async fn run_baseline_task(
    config: &Config,
    backends: &Backends,
    action: &Action,
    payload: &Value,
) -> crate::error::Result<Value> {
    use crate::baseline::tasks;
    let to_json = |v: std::result::Result<Value, serde_json::Error>| {
        v.map_err(|e| Error::new(Code::Internal, "encoding a task result").source(e))
    };
    match action {
        Action::BaselineAnchor => {
            // `{"table": T}` in the payload, or in the execution input the state machine
            // passes on as `input`, asks for a re-baseline of T first.
            let table = payload
                .get("table")
                .or_else(|| payload.get("input").and_then(|i| i.get("table")))
                .filter(|t| !t.is_null());
            if let Some(table) = table {
                let table = table.as_str().ok_or_else(|| {
                    Error::new(Code::ConfigInvalid, format!("baseline.anchor: table must be a string, got {table}"))
                        .hint("send {\"action\": \"baseline.anchor\", \"table\": \"<name as source.tables lists it>\"}")
                })?;
                crate::baseline::request_table(config, backends, table).await?;
            }
            to_json(serde_json::to_value(tasks::anchor(config, backends).await?))
        }
        Action::BaselinePlan => to_json(serde_json::to_value(tasks::plan(config, backends).await?)),
        Action::BaselineChunk => {
            let input: tasks::ChunkInput = serde_json::from_value(payload.clone()).map_err(|e| {
                Error::new(Code::ConfigInvalid, format!("baseline.chunk payload is not a chunk task: {e}"))
                    .hint("the Map's ItemSelector must pass {\"action\": \"baseline.chunk\", \"chunk\": <item>}")
            })?;
            to_json(serde_json::to_value(
                tasks::chunk(config, backends, &input.chunk).await?,
            ))
        }
        Action::BaselineFinish => {
            to_json(serde_json::to_value(tasks::finish(config, backends).await?))
        }
        Action::Drain
        | Action::Materialize
        | Action::Compact
        | Action::CompactPlan
        | Action::Forget
        | Action::Verify
        | Action::VerifyPlan
        | Action::VerifyChunk
        | Action::VerifyFinish => Err(Error::new(
            Code::Internal,
            format!("{} is not a baseline task", action.name()),
        )),
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .json()
        .init();
}

/// The Lambda face has no stdout a reader could consume: its output goes to CloudWatch Logs.
fn refuse_stdout(config: crate::config::Config) -> Result<crate::config::Config, Error> {
    if crate::destination::stdout::is_stdout(&config) {
        return Err(Error::new(
            crate::error::Code::ConfigInvalid,
            "destination.type stdout is for the CLI; a Lambda function's stdout is its log",
        )
        .hint("give the function a destination of type s3"));
    }
    Ok(config)
}

#[cfg(test)]
mod stdout_tests {
    use super::*;

    #[test]
    fn the_lambda_face_refuses_a_stdout_destination() {
        let text = crate::config::tests::MINIMAL
            .replace("{ type: local, path: ./out }", "{ type: stdout }");
        let config = crate::job::config::parse(&text, "t").unwrap();
        let e = refuse_stdout(config).unwrap_err();
        assert_eq!(e.code(), Code::ConfigInvalid);
        assert!(e.hint_text().unwrap().contains("s3"), "{e}");
        let local = crate::job::config::parse(crate::config::tests::MINIMAL, "t").unwrap();
        assert!(refuse_stdout(local).is_ok());
    }
}

#[cfg(test)]
mod stop_tests {
    use super::*;

    #[test]
    fn interrupted_runs_carry_the_lambda_hint_and_other_errors_stay_as_they_are() {
        let interrupted = with_lambda_hint(crate::job::interrupted(Some(15)));
        assert_eq!(interrupted.code(), Code::RunInterrupted);
        assert!(interrupted.message().contains("signal 15"), "{interrupted}");
        assert!(
            interrupted.hint_text().unwrap().contains("500 ms"),
            "{interrupted:?}"
        );
        let other = with_lambda_hint(Error::new(Code::SourceConnect, "gone").hint("retry"));
        assert_eq!(other.hint_text(), Some("retry"));

        let refused = shutting_down(Some(15));
        assert_eq!(refused.code(), Code::RunInterrupted);
        assert_eq!(refused.class(), crate::error::Class::Transient);
        assert!(refused.message().contains("ran nothing"), "{refused}");
    }
}
