//! Independent readers of what sluice writes: pyarrow and DuckDB in the venv
//! `infra/local/readers.sh` provides (`SLUICE_TEST_READERS_PYTHON`). Under CI a missing
//! venv fails the test; otherwise it is skipped loudly.

use std::path::Path;
use std::process::Command;

/// The readers' interpreter, or `None` (skipped loudly) outside CI when it is not set up.
pub fn python() -> Option<String> {
    super::service_url("SLUICE_TEST_READERS_PYTHON")
}

/// Runs `script` under `python` with `args`; panics with its stderr when it fails and
/// returns its stdout, trimmed.
pub fn run(python: &str, script: &str, args: &[&Path]) -> String {
    let output = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run the readers' python");
    assert!(
        output.status.success(),
        "reader script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}
