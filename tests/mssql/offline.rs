//! The SQL Server source's refusals that need no server, through the real binary: the
//! TLS gate decides before any packet is sent, and an unreachable server is a transient
//! failure with exit code 3 — for drains and for baselines, whose reader is opened like
//! the other engines' (no longer refused as unsupported).

use crate::support::Job;

fn job(url: &str, extra_source: &str) -> Job {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "job: offline\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [dbo.orders]\n  sqlserver: {{ capture_instance: dbo_orders{extra_source} }}\n\
         destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n",
        out = dir.path().join("out").display(),
        state = dir.path().join("state").display(),
    );
    let config = dir.path().join("sluice.yaml");
    std::fs::write(&config, yaml).unwrap();
    Job {
        dir,
        config,
        url_env: ("SLUICE_TEST_SOURCE_URL".into(), url.into()),
    }
}

#[test]
fn non_loopback_host_without_tls_is_refused_before_connecting() {
    for url in [
        "sqlserver://sluice:secret@db.example.invalid/app?encrypt=false",
        "sqlserver://sluice:secret@10.255.255.1/app?trust_server_certificate=true",
    ] {
        let run = job(url, "").run(&["drain"], &[]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(run.error_code(), "SLUICE_CONFIG_TLS_REQUIRED");
        assert!(!run.stdout.contains("secret") && !run.stderr.contains("secret"));
    }
}

#[test]
fn unreachable_server_is_transient() {
    // A loopback port nothing listens on: refused at once, no TLS needed for loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let run = job(&format!("sqlserver://sa:secret@127.0.0.1:{port}/app"), "").run(&["drain"], &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT");
    assert!(!run.stdout.contains("secret"));
}

#[test]
fn config_refuses_several_tables_for_one_capture_instance() {
    let j = job("sqlserver://sa@127.0.0.1/app", "");
    let text = std::fs::read_to_string(&j.config)
        .unwrap()
        .replace("[dbo.orders]", "[dbo.orders, dbo.items]");
    std::fs::write(&j.config, text).unwrap();
    let run = j.run(&["validate"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("one capture instance") || run.stderr.contains("one capture instance"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[test]
fn baseline_reader_opens_a_sql_server_connection() {
    let j = job(
        &format!("sqlserver://sa:secret@127.0.0.1:{}/app", closed_port()),
        "",
    );
    let mut config = sluice::config::Config::load(Some(&j.config)).unwrap();
    config.source.url_env = None;
    config.source.url = Some(j.url_env.1.clone());
    let err = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(sluice::source::open_baseline_reader(&config))
        .err()
        .expect("nothing listens there");
    assert_eq!(
        err.code().as_str(),
        "SLUICE_SOURCE_CONNECT",
        "{}",
        err.chain()
    );
}

#[test]
fn baseline_against_an_unreachable_server_is_transient() {
    let j = job(
        &format!("sqlserver://sa:secret@127.0.0.1:{}/app", closed_port()),
        "",
    );
    let text = std::fs::read_to_string(&j.config).unwrap() + "initial: snapshot\n";
    std::fs::write(&j.config, text).unwrap();
    let run = j.run(&["baseline"], &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SOURCE_CONNECT");
    assert!(!run.stdout.contains("secret") && !run.stderr.contains("secret"));
}
