//! `sluice verify` at the end of a trial, held to the oracle's own verdict: when the
//! oracle's replay of the folder equals the source, verify must report the table equal
//! (no false difference, whatever the trial did: crashes, compactions, folds, failovers,
//! schema changes, policies); when the oracle finds the table differs, verify must find a
//! difference too.
//!
//! A trial runs it a third of the time, never on an Iceberg trial (verify reads change
//! logs of plain Parquet only: `SLUICE_VERIFY_UNSUPPORTED`); half of those also walk the
//! table by chunks (`--by-chunks`, the verify machine's tasks, with chunks of 20 to 500 rows so
//! every range rule is met), which must agree too. Half of the keyed trials whose lake is
//! equal then lose their newest change part (as a lifecycle rule or a hand would lose it):
//! verify must agree with the oracle about the folder without it, and `--repair` must make
//! the folder's replay equal the source again — half of those repairs first crashed after
//! their part is written, when the folder must already replay to the source
//! ([`super::trial`]; `repairs=`, `repair_crashes=`).

use std::path::Path;
use std::process::Command;

/// What one verify run said.
#[derive(Debug)]
pub struct Verdict {
    /// Exit 0 (`equal`) or 5 (`SLUICE_VERIFY_DIFFERS`).
    pub equal: bool,
    /// It crashed at the fault point it was given.
    pub crashed: bool,
    /// Its summary line and the first differences of its JSON report.
    pub said: String,
}

/// How a verify is run: walked by chunks of `walk` rows, with `--repair`, crashed at the
/// fault point `crash`.
#[derive(Debug, Default, Clone, Copy)]
pub struct How<'a> {
    pub walk: Option<u64>,
    pub repair: bool,
    pub crash: Option<&'a str>,
}

/// Runs `sluice verify --table <table> --json` under the trial's config and environment
/// as `how` says (with `repair` the verdict is the verify after the repair), waiting out a
/// crashed verify's lease.
pub fn run(
    config: &Path,
    env: &[(String, String)],
    table: &str,
    dir: &Path,
    how: How<'_>,
) -> Result<Verdict, String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        match once(config, env, table, dir, how)? {
            Some(verdict) => return Ok(verdict),
            None if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            None => return Err("a crashed verify's lease was never released".to_owned()),
        }
    }
}

/// One run; `None` when another (crashed) verify's lease is still held.
fn once(
    config: &Path,
    env: &[(String, String)],
    table: &str,
    dir: &Path,
    how: How<'_>,
) -> Result<Option<Verdict>, String> {
    let (walk, repair) = (how.walk, how.repair);
    let bin =
        std::env::var("SLUICE_ORACLE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").into());
    let report = dir.join("verify.json");
    let _ = std::fs::remove_file(&report);
    let config = match walk {
        None => config.to_path_buf(),
        Some(rows) => with_chunk_rows(config, rows, dir)?,
    };
    let mut cmd = Command::new(bin);
    cmd.args(["verify", "--config"])
        .arg(&config)
        .args(["--table", table, "--json"])
        .arg(&report)
        .env_remove("SLUICE_FAULT");
    if walk.is_some() {
        cmd.arg("--by-chunks");
    }
    if repair {
        cmd.arg("--repair");
    }
    if let Some(point) = how.crash {
        cmd.env("SLUICE_FAULT", point);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().map_err(|e| format!("sluice verify: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if how.crash.is_some() && out.status.code().is_none() && stderr.contains("fault injected") {
        return Ok(Some(Verdict {
            equal: false,
            crashed: true,
            said: format!("crashed at {}", how.crash.unwrap_or_default()),
        }));
    }
    let equal = match out.status.code() {
        Some(0) => true,
        Some(5) if stderr.contains("SLUICE_VERIFY_DIFFERS") || stdout.contains("differs") => false,
        Some(3) if stderr.contains("SLUICE_STATE_LEASE_HELD") => return Ok(None),
        _ => {
            return Err(format!(
                "sluice verify failed ({:?}): {stdout}\n{stderr}",
                out.status.code()
            ));
        }
    };
    let differences: Vec<String> = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .map(|r| {
            r["chunks"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["differences"].as_array().cloned().unwrap_or_default())
                .take(5)
                .map(|d| d.to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(Verdict {
        equal,
        crashed: false,
        said: format!("{stdout} {}", differences.join(" ")),
    }))
}

/// A copy of the trial's config whose baseline chunks are `rows` rows.
fn with_chunk_rows(config: &Path, rows: u64, dir: &Path) -> Result<std::path::PathBuf, String> {
    let yaml = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    const KEY: &str = "chunk_rows: ";
    let yaml = match yaml.find(KEY) {
        Some(at) => {
            let start = at + KEY.len();
            let digits = yaml[start..]
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(yaml.len() - start);
            format!("{}{rows}{}", &yaml[..start], &yaml[start + digits..])
        }
        None => format!("{yaml}baseline: {{ chunk_rows: {rows} }}\n"),
    };
    let path = dir.join("verify-walk.yaml");
    std::fs::write(&path, yaml).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}
