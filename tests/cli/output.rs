//! The CLI's output contract when the reader goes away: `sluice … | head` closes the pipe,
//! and the command must still end with its own exit code, not a panic (101) or an abort.

use std::process::{Command, Stdio};

const VALID: &str = r#"{"job": "pipes", "source": {"url_env": "X", "tables": ["public.t"], "postgres": {"slot": "s_pipes", "publication": "p_pipes"}}, "destination": {"type": "local", "path": "/tmp/x"}, "state": {"type": "local", "path": "/tmp/y"}}"#;

/// Runs `sluice args` with stdout and stderr writing into pipes whose read ends are
/// already closed, so every write fails with EPIPE; returns the exit code.
fn exit_code_with_closed_pipes(args: &[&str]) -> Option<i32> {
    let (out_reader, out_writer) = std::io::pipe().unwrap();
    let (err_reader, err_writer) = std::io::pipe().unwrap();
    drop(out_reader);
    drop(err_reader);
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(out_writer)
        .stderr(err_writer)
        .status()
        .unwrap();
    status.code()
}

#[test]
fn a_closed_stdout_keeps_the_success_exit_code() {
    assert_eq!(
        exit_code_with_closed_pipes(&["validate", "--config-json", VALID]),
        Some(0)
    );
}

#[test]
fn a_closed_stdout_keeps_the_failure_exit_code() {
    let invalid = VALID.replace("\"job\"", "\"jobb\"");
    assert_eq!(
        exit_code_with_closed_pipes(&["validate", "--config-json", &invalid]),
        Some(1)
    );
}
