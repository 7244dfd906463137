//! What the source's TLS gate refuses is refused before any claim or lease is taken, so a
//! misconfigured job never holds the lease of a run that could not have connected.

use std::process::Command;

/// Runs `sluice <args>` on a local job whose URL (from the environment) is `url`, with
/// `tls` as its `source.tls` block; returns (exit code, stdout, the state directory).
fn run(args: &[&str], url: &str, tls: &str) -> (i32, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.yaml");
    std::fs::write(
        &config,
        format!(
            "job: preflight\nsource:\n  url_env: PREFLIGHT_URL\n  tables: [public.t]\n  postgres: {{ slot: s, publication: p }}\n  tls: {tls}\n\
             destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n",
            out = dir.path().join("out").display(),
            state = dir.path().join("state").display(),
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .arg("--config")
        .arg(&config)
        .env("PREFLIGHT_URL", url)
        .env("SLUICE_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap(), stdout, dir)
}

/// The highest lease token ever granted to the job (0: no lease was ever taken). The local
/// state keeps it across releases, so a lease taken and given back still shows.
fn leases_granted(dir: &tempfile::TempDir) -> u64 {
    let state = dir.path().join("state");
    let Some(file) = std::fs::read_dir(&state).ok().and_then(|mut entries| {
        entries.find_map(|e| {
            let p = e.ok()?.path();
            p.extension().is_some_and(|x| x == "json").then_some(p)
        })
    }) else {
        return 0;
    };
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    doc["lease_token"].as_u64().unwrap_or(0)
}

#[test]
fn a_drain_the_tls_gate_refuses_takes_no_lease() {
    let cases = [
        (
            "postgres://u@db.example.invalid:5432/app",
            "{ mode: disable }",
            "is not loopback",
        ),
        (
            "postgres://u@localhost:5432/app?hostaddr=10.0.0.5",
            "{}",
            "hostaddr 10.0.0.5 is not",
        ),
    ];
    for (url, tls, needle) in cases {
        let (code, stdout, dir) = run(&["drain"], url, tls);
        assert_eq!(code, 1, "{url}: a config refusal, exit 1: {stdout}");
        assert!(
            stdout.contains("SLUICE_CONFIG_TLS_REQUIRED"),
            "{url}: {stdout}"
        );
        assert!(stdout.contains(needle), "{url}: {stdout} lacks {needle:?}");
        assert_eq!(leases_granted(&dir), 0, "{url}: a lease was taken");
    }
}

#[test]
fn a_password_in_the_url_query_is_never_printed() {
    // tokio-postgres refuses the unknown option, and the refusal names the URL.
    let (code, stdout, _dir) = run(
        &["drain"],
        "postgres://u@db.example.invalid:5432/app?password=hunter2&colour=blue",
        "{}",
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("is not a PostgreSQL URL"), "{stdout}");
    assert!(!stdout.contains("hunter2"), "{stdout}");
    assert!(stdout.contains("password=***"), "{stdout}");
}
