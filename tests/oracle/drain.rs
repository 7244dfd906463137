//! Runs one `sluice drain` child, optionally crashing it: an armed fault point
//! (`SLUICE_FAULT=<point>@<n>`, which aborts the process there) or a SIGKILL after a
//! delay. The child runs on a supervising thread so the workload can write to the source
//! while it drains.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a drain is crashed.
#[derive(Debug, Clone, PartialEq)]
pub enum Crash {
    None,
    /// `SLUICE_FAULT` spec, e.g. `part_durable@2`.
    Fault(String),
    /// SIGKILL this long after the spawn.
    Kill(Duration),
}

/// What happened to a drain.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Exit 0 with `status` `drained` or `partial` (a baseline: `done`; a compaction:
    /// `compacted`).
    Done { status: String },
    /// Exit 0, another run holds the lease until `expires_at_ms`.
    Skipped { expires_at_ms: i64 },
    /// The armed fault fired or the SIGKILL landed.
    Crashed,
    /// Exit 3: a transient failure, nothing moved (e.g. the slot is still busy).
    Transient { code: String },
    /// Anything else: config error, refusal, an unexpected signal.
    Failed { exit: String, stderr: String },
}

/// A drain in flight.
pub struct Running {
    handle: JoinHandle<Outcome>,
}

impl Running {
    pub fn wait(self) -> Outcome {
        self.handle.join().expect("drain supervisor")
    }
}

/// Starts `sluice drain --config <config>`, logs in `<logs>/drain-<n>.{out,err}`.
pub fn start(
    config: &Path,
    env: &[(String, String)],
    crash: Crash,
    logs: &Path,
    n: usize,
) -> Running {
    start_command(&["drain"], config, env, crash, logs, n)
}

/// Starts `sluice <args> --config <config>` (a drain, or `baseline --table T`), logs in
/// `<logs>/drain-<n>.{out,err}`.
pub fn start_command(
    args: &[&str],
    config: &Path,
    env: &[(String, String)],
    crash: Crash,
    logs: &Path,
    n: usize,
) -> Running {
    let out_path = logs.join(format!("drain-{n}.out"));
    let err_path = logs.join(format!("drain-{n}.err"));
    let bin =
        std::env::var("SLUICE_ORACLE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").into());
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env_remove("SLUICE_FAULT")
        .env("SLUICE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Crash::Fault(spec) = &crash {
        cmd.env("SLUICE_FAULT", spec);
    }
    let handle = std::thread::spawn(move || supervise(cmd, crash, out_path, err_path));
    Running { handle }
}

fn supervise(mut cmd: Command, crash: Crash, out: PathBuf, err: PathBuf) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let mut child = cmd.spawn().expect("sluice starts");
    let mut killed = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if let Crash::Kill(after) = crash
            && !killed
            && started.elapsed() >= after
        {
            // The child is not reaped yet, so its pid cannot have been reused.
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    if status.signal() == Some(9) && killed {
        return Outcome::Crashed;
    }
    if status.signal().is_some() && stderr.contains("fault injected") {
        return Outcome::Crashed;
    }
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    let tail = || {
        stderr
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    };
    match (status.code(), summary) {
        (Some(0), Some(s)) => match s["status"].as_str() {
            Some("skipped") => Outcome::Skipped {
                expires_at_ms: s["lease_expires_at_ms"].as_i64().unwrap_or(0),
            },
            Some(st @ ("drained" | "partial" | "done" | "compacted")) => Outcome::Done {
                status: st.to_owned(),
            },
            _ => Outcome::Failed {
                exit: format!("0 with summary {s}"),
                stderr: tail(),
            },
        },
        (Some(3), Some(s)) => Outcome::Transient {
            code: s["error"]["code"].as_str().unwrap_or("?").to_owned(),
        },
        (code, summary) => Outcome::Failed {
            exit: format!(
                "exit {code:?} signal {:?} summary {}",
                status.signal(),
                summary.map(|s| s.to_string()).unwrap_or_default()
            ),
            stderr: tail(),
        },
    }
}
