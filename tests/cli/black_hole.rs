//! A source that accepts the TCP connection and never answers (the black hole: a half-open
//! firewall, a proxy whose backend is gone, a frozen host): every command that connects
//! — `drain`, `baseline`, `doctor` — ends within `source.timeouts.connect_seconds` with a
//! transient `SLUICE_SOURCE_CONNECT` (exit 3; `doctor` reports the failed check) whose
//! message names the phase that stalled, for PostgreSQL, MySQL / MariaDB and SQL Server.
//! `validate` never connects.
//!
//! Before the bound, each of these runs hung until it was killed: tokio-postgres bounded
//! only the TCP connect, the MySQL claims and `doctor` connected with no bound at all,
//! and tiberius had none either — a black hole completes the TCP connect at once.

use std::thread;
use std::time::{Duration, Instant};

use crate::support::Job;
use crate::support::black_hole::{BlackHole, Unanswered};

/// One engine as a job names it: the URL (the black hole fills in host and port), the
/// engine's block under `source:`, a table, and the message a stall at the black hole
/// carries with `connect_seconds: 2`.
struct Engine {
    name: &'static str,
    url: &'static str,
    block: &'static str,
    table: &'static str,
    stalled: &'static str,
}

const POSTGRES: Engine = Engine {
    name: "postgres",
    url: "postgres://sluice:secret@127.0.0.1:1/app",
    block: "postgres: { slot: s_black_hole, publication: p_black_hole }",
    table: "public.t",
    stalled: "no startup response after 2 s",
};

/// mysql_async's handshake is opaque: the phase is what the kernel says of its socket
/// (connected), so the message is the handshake's.
const MYSQL: Engine = Engine {
    name: "mysql",
    url: "mysql://sluice:secret@127.0.0.1:1/app",
    block: "mysql: {}",
    table: "app.t",
    stalled: "the handshake (server greeting, TLS, login) did not complete within 2 s",
};

const SQLSERVER: Engine = Engine {
    name: "sqlserver",
    url: "sqlserver://sluice:secret@127.0.0.1:1/app",
    block: "sqlserver: { capture_instance: dbo_t }",
    table: "dbo.t",
    stalled: "no prelogin response after 2 s",
};

/// A local job of `engine` whose source is `hole`, with `timeouts` (YAML, may be empty)
/// under `source:`.
fn job(engine: &Engine, hole: &BlackHole, timeouts: &str) -> Job {
    job_at(engine, &hole.url(engine.url), timeouts)
}

/// A local job of `engine` whose source URL is `url`.
fn job_at(engine: &Engine, url: &str, timeouts: &str) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let timeouts = if timeouts.is_empty() {
        String::new()
    } else {
        format!("  timeouts: {timeouts}\n")
    };
    let yaml = format!(
        "job: black_hole_{name}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [{table}]\n  {block}\n{timeouts}\
         destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n",
        name = engine.name,
        table = engine.table,
        block = engine.block,
        out = dir.path().join("out").display(),
        state = dir.path().join("state").display(),
    );
    let config = dir.path().join("sluice.yaml");
    std::fs::write(&config, yaml).unwrap();
    Job {
        dir,
        config,
        url_env: ("SLUICE_TEST_SOURCE_URL".into(), url.to_owned()),
    }
}

/// Runs `sluice <args>` of `engine`'s job against a fresh black hole, killing it past
/// `limit`: the run and how long it took.
fn against_black_hole(
    engine: &Engine,
    args: &[&str],
    timeouts: &str,
    limit: Duration,
) -> (crate::support::Run, Duration) {
    let hole = BlackHole::start();
    let job = job(engine, &hole, timeouts);
    let started = Instant::now();
    let run = job.run_within(args, &[], limit);
    let took = started.elapsed();
    let run = run.unwrap_or_else(|| {
        panic!(
            "{}: `sluice {}` against a silent source was still running after {limit:?}",
            engine.name,
            args.join(" ")
        )
    });
    assert!(
        hole.accepted() > 0,
        "{}: the black hole was never reached",
        engine.name
    );
    (run, took)
}

/// The run failed with a transient `SLUICE_SOURCE_CONNECT` naming `engine`'s phase.
fn assert_stalled(engine: &Engine, run: &crate::support::Run, took: Duration, bound: Duration) {
    assert_eq!(run.code, 3, "{}: {}", engine.name, run.stdout);
    assert_eq!(
        run.error_code(),
        "SLUICE_SOURCE_CONNECT",
        "{}: {}",
        engine.name,
        run.stdout
    );
    let error = &run.summary()["error"];
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(engine.stalled),
        "{}: the message names the phase: {message}",
        engine.name
    );
    let hint = error["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("source.timeouts.connect_seconds"),
        "{}: {hint}",
        engine.name
    );
    assert!(!run.stdout.contains("secret"), "{}", run.stdout);
    assert!(took < bound, "{}: took {took:?}", engine.name);
}

#[test]
fn a_drain_against_a_silent_source_ends_within_connect_seconds_naming_the_phase() {
    let runs: Vec<_> = [POSTGRES, MYSQL, SQLSERVER]
        .into_iter()
        .map(|engine| {
            thread::spawn(move || {
                let limit = Duration::from_secs(60);
                let (run, took) =
                    against_black_hole(&engine, &["drain"], "{ connect_seconds: 2 }", limit);
                (engine, run, took)
            })
        })
        .collect();
    for run in runs {
        let (engine, run, took) = run.join().unwrap();
        assert_stalled(&engine, &run, took, Duration::from_secs(10));
    }
}

/// The "done when": with default settings (10 s) a drain and `doctor` against a
/// silent PostgreSQL or MySQL source end within 30 s, with a coded transient error (the
/// drain) or the failed check (doctor, which does not connect again for the claims).
#[test]
fn with_default_settings_a_drain_and_doctor_against_a_silent_source_end_within_30_s() {
    let runs: Vec<_> = [
        (POSTGRES, "drain"),
        (MYSQL, "drain"),
        (POSTGRES, "doctor"),
        (MYSQL, "doctor"),
    ]
    .into_iter()
    .map(|(engine, command)| {
        thread::spawn(move || {
            let limit = Duration::from_secs(120);
            let (run, took) = against_black_hole(&engine, &[command], "", limit);
            (engine, command, run, took)
        })
    })
    .collect();
    for run in runs {
        let (engine, command, run, took) = run.join().unwrap();
        let what = format!("{} {command}", engine.name);
        match command {
            "drain" => {
                assert_eq!(run.code, 3, "{what}: {}", run.stdout);
                assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT", "{}", run.stdout);
            }
            _ => {
                assert_eq!(run.code, 5, "{what}: {}", run.stdout);
                assert!(
                    run.stdout.contains("SLUICE_SOURCE_CONNECT"),
                    "{}",
                    run.stdout
                );
            }
        }
        assert!(
            run.stdout.contains("after 10 s") || run.stdout.contains("within 10 s"),
            "{what}: {}",
            run.stdout
        );
        assert!(took < Duration::from_secs(30), "{what}: took {took:?}");
    }
}

#[test]
fn a_baseline_against_a_silent_source_ends_within_connect_seconds() {
    let runs: Vec<_> = [POSTGRES, MYSQL, SQLSERVER]
        .into_iter()
        .map(|engine| {
            thread::spawn(move || {
                let limit = Duration::from_secs(60);
                let (run, took) =
                    against_black_hole(&engine, &["baseline"], "{ connect_seconds: 2 }", limit);
                (engine, run, took)
            })
        })
        .collect();
    for run in runs {
        let (engine, run, took) = run.join().unwrap();
        assert_stalled(&engine, &run, took, Duration::from_secs(10));
    }
}

#[test]
fn doctor_reports_a_silent_source_within_connect_seconds() {
    let runs: Vec<_> = [POSTGRES, MYSQL, SQLSERVER]
        .into_iter()
        .map(|engine| {
            thread::spawn(move || {
                let limit = Duration::from_secs(60);
                let (run, took) = against_black_hole(
                    &engine,
                    &["doctor", "--json"],
                    "{ connect_seconds: 2 }",
                    limit,
                );
                (engine, run, took)
            })
        })
        .collect();
    for run in runs {
        let (engine, run, took) = run.join().unwrap();
        assert_eq!(run.code, 5, "{}: {}", engine.name, run.stdout);
        let report = run.summary();
        let connect = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "source connect")
            .unwrap_or_else(|| panic!("{}: no source connect check: {report}", engine.name))
            .clone();
        assert_eq!(connect["status"], "fail", "{}: {connect}", engine.name);
        assert_eq!(connect["code"], "SLUICE_SOURCE_CONNECT", "{connect}");
        let detail = connect["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(engine.stalled), "{}: {detail}", engine.name);
        assert!(
            took < Duration::from_secs(10),
            "{}: took {took:?}",
            engine.name
        );
    }
}

/// `validate` checks the config and the TLS gate without connecting: the black hole sees
/// no connection and the command ends at once.
#[test]
fn validate_never_connects() {
    for engine in [POSTGRES, MYSQL, SQLSERVER] {
        let hole = BlackHole::start();
        let job = job(&engine, &hole, "");
        let run = job
            .run_within(&["validate"], &[], Duration::from_secs(30))
            .expect("validate ended");
        assert_eq!(run.code, 0, "{}: {}", engine.name, run.stdout);
        assert_eq!(hole.accepted(), 0, "{}: validate connected", engine.name);
    }
}

/// A TCP connect that is never answered (a firewall dropping packets) is named as such,
/// for every engine — mysql_async's included, whose phase the kernel reports.
#[test]
#[cfg(target_os = "linux")]
fn an_unanswered_tcp_connect_is_named() {
    let port = Unanswered::start();
    for engine in [POSTGRES, MYSQL, SQLSERVER] {
        let job = job_at(&engine, &port.url(engine.url), "{ connect_seconds: 2 }");
        let started = Instant::now();
        let run = job
            .run_within(&["drain"], &[], Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{}: the drain hung", engine.name));
        let took = started.elapsed();
        assert_eq!(run.code, 3, "{}: {}", engine.name, run.stdout);
        assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT", "{}", run.stdout);
        let message = run.summary()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("TCP connect to 127.0.0.1:")
                && message.contains("did not complete within 2 s"),
            "{}: {message}",
            engine.name
        );
        assert!(
            took < Duration::from_secs(10),
            "{}: took {took:?}",
            engine.name
        );
    }
}

/// `init` (PostgreSQL; it has no config, so `connect_seconds` is its default 10 s) against
/// a silent source ends within the bound.
#[test]
fn init_against_a_silent_source_ends_within_the_default_bound() {
    let hole = BlackHole::start();
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["init", "--source-env", "INIT_SOURCE_URL", "--out"])
        .arg(out.path())
        .env("INIT_SOURCE_URL", hole.url(POSTGRES.url))
        .env("SLUICE_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let id = child.id();
    thread::spawn(move || tx.send(child.wait_with_output()));
    let output = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            let _ = std::process::Command::new("kill")
                .arg(id.to_string())
                .status();
            panic!("init against a silent source was still running after 60 s")
        })
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("no startup response after 10 s"),
        "{stdout}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}
