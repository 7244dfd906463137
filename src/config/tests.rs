//! Shape checks of the config, at parse.

use super::*;

/// The smallest valid PostgreSQL job (the rooms' tests edit it too).
pub(crate) const MINIMAL: &str = r#"
job: orders
source:
  url: postgres://postgres@127.0.0.1:5432/app
  tables: [public.orders]
  postgres: { slot: sluice_orders, publication: sluice_orders }
destination: { type: local, path: ./out }
state: { type: local, path: ./.sluice }
"#;

#[test]
fn minimal_config_gets_defaults() {
    let c = Config::parse(MINIMAL, "test").unwrap();
    assert_eq!(c.output.rollover_rows, 1_000_000);
    assert_eq!(c.lease.ttl_seconds, 120);
    assert!(c.source.postgres.as_ref().unwrap().create);
    assert_eq!(c.baseline.inline_plan_max_bytes, 128 * 1024);
    for bytes in [0, BaselineConfig::MAX_INLINE_PLAN_BYTES] {
        let text = format!("{MINIMAL}baseline: {{ inline_plan_max_bytes: {bytes} }}\n");
        let c = Config::parse(&text, "test").unwrap();
        assert_eq!(c.baseline.inline_plan_max_bytes, bytes);
    }
}

#[test]
fn mysql_server_id_defaults_to_a_stable_per_job_value() {
    let my = MysqlConfig::default();
    let a = my.server_id_for("orders");
    assert_eq!(a, my.server_id_for("orders"));
    assert_ne!(a, my.server_id_for("orders2"));
    assert!(a >= 1_000_000_000);
    let fixed = MysqlConfig {
        server_id: Some(42),
        ..MysqlConfig::default()
    };
    assert_eq!(fixed.server_id_for("orders"), 42);
}

#[test]
fn typos_get_a_suggestion() {
    let e = Config::parse(&MINIMAL.replace("tables:", "tabels:"), "t").unwrap_err();
    assert_eq!(
        e.hint_text(),
        Some("did you mean `tables`? (unknown keys are rejected)")
    );
    let e = Config::parse(&format!("{MINIMAL}colour: blue\n"), "t").unwrap_err();
    assert!(!e.hint_text().unwrap().contains("did you mean"), "{e:?}");
    assert_eq!(edit_distance("kitten", "sitting"), 3);
}

#[test]
fn normalized_redacts_and_fills_defaults() {
    let c = Config::parse(
        &MINIMAL.replace("postgres@127.0.0.1", "postgres:hunter2@127.0.0.1"),
        "t",
    )
    .unwrap();
    let v = c.normalized();
    assert_eq!(
        v["source"]["url"],
        "postgres://postgres:***@127.0.0.1:5432/app"
    );
    assert_eq!(v["lease"]["ttl_seconds"], 120);
    assert!(!v.to_string().contains("hunter2"));
}

#[test]
fn json_is_accepted() {
    let json = r#"{"job":"j","source":{"url_env":"X","tables":["t"]},
        "destination":{"type":"local","path":"o"},"state":{"type":"local","path":"s"}}"#;
    assert_eq!(Config::parse(json, "json").unwrap().job, "j");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 1024, ..Default::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC*") {
        let _ = Config::parse(&text, "prop");
    }

    #[test]
    fn arbitrary_edits_of_a_valid_config_never_panic(
        at in proptest::prelude::any::<proptest::sample::Index>(),
        insert in "[\\PC\n:{}\\[\\], '\"-]{0,12}",
        cut in 0usize..8,
    ) {
        let start = at.index(MINIMAL.len());
        let start = (0..=start).rev().find(|i| MINIMAL.is_char_boundary(*i)).unwrap_or(0);
        let end = (start + cut..=MINIMAL.len()).find(|i| MINIMAL.is_char_boundary(*i)).unwrap_or(MINIMAL.len());
        let text = format!("{}{insert}{}", &MINIMAL[..start], &MINIMAL[end..]);
        if let Err(e) = Config::parse(&text, "prop") {
            // Whatever the edit, the error is a config-class error (exit 1).
            proptest::prop_assert_eq!(e.class(), crate::error::Class::Config, "{}", e);
        }
    }
}

#[test]
fn a_stdout_destination_parses_and_takes_no_keys() {
    let text = MINIMAL.replace("{ type: local, path: ./out }", "{ type: stdout }");
    let c = Config::parse(&text, "t").unwrap();
    assert!(matches!(c.destination, DestinationConfig::Stdout {}));
    let text = MINIMAL.replace(
        "{ type: local, path: ./out }",
        "{ type: stdout, path: ./out }",
    );
    let e = Config::parse(&text, "t").unwrap_err();
    assert!(e.to_string().contains("path"), "{e}");
}

#[test]
fn aws_backends_parse() {
    let text = MINIMAL
        .replace(
            "{ type: local, path: ./out }",
            "{ type: s3, bucket: b, prefix: cdc/, region: eu-west-1 }",
        )
        .replace(
            "{ type: local, path: ./.sluice }",
            "{ type: dynamodb, table: sluice-state, endpoint_url: 'http://127.0.0.1:4566' }",
        );
    let c = Config::parse(&text, "t").unwrap();
    assert!(matches!(c.destination, DestinationConfig::S3 { ref prefix, .. } if prefix == "cdc/"));
    assert!(matches!(c.state, StateConfig::Dynamodb { ref table, .. } if table == "sluice-state"));
}

#[test]
fn a_secret_arn_alone_is_a_url_source() {
    let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf";
    let text = MINIMAL.replace(
        "url: postgres://postgres@127.0.0.1:5432/app",
        &format!("url_secret_arn: {arn}"),
    );
    assert!(Config::parse(&text, "t").is_ok());
    let not_an_arn = text.replace(arn, "db-credentials");
    let e = Config::parse(&not_an_arn, "t").unwrap_err();
    assert_eq!(e.code(), Code::ConfigSecret);
    assert!(
        e.hint_text()
            .unwrap_or_default()
            .contains("arn:aws:secretsmanager"),
        "{e}"
    );
    let both = text.replace("url_secret_arn", "url_env: X\n  url_secret_arn");
    let e = Config::parse(&both, "t").unwrap_err();
    assert!(
        e.to_string().contains("exactly one")
            || e.hint_text().unwrap_or_default().contains("exactly one"),
        "{e}"
    );
}

#[test]
fn rejections_name_the_problem() {
    let cases = [
        (
            MINIMAL.replace("job: orders", "job: 'a b'"),
            "not a valid job name",
        ),
        (
            MINIMAL.replace("[public.orders]", "[]"),
            "source.tables is empty",
        ),
        (MINIMAL.replace("[public.orders]", "[a, a]"), "twice"),
        (MINIMAL.replace("rollover", "x"), ""),
        (
            MINIMAL.replace("type: local, path: ./out", "type: ftp, path: ./out"),
            "unknown variant",
        ),
        (
            MINIMAL.replace("\ndestination", "\n  mysql: { server_id: 7 }\ndestination"),
            "both set",
        ),
        (
            format!("{MINIMAL}\ncolour: blue\n"),
            "unknown field `colour`",
        ),
        (
            MINIMAL.replace("postgres@127.0.0.1", "u:secret@db.example.com"),
            "carries a password",
        ),
    ];
    for (text, needle) in cases {
        match Config::parse(&text, "t") {
            Ok(_) if needle.is_empty() => {}
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => {
                assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
                assert!(!e.to_string().contains("secret"), "{e} leaks the password");
            }
        }
    }
}

#[test]
fn a_config_files_relative_paths_are_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = "job: j\nsource:\n  url: postgres://u@127.0.0.1/db\n  tables: [public.t]\n  tls: { mode: verify-full, ca_file: certs/ca.pem }\n\
                destination: { type: local, path: out }\nstate: { type: local, path: ./state }\n\
                output: { spill_dir: /var/tmp/spill }\n";
    let file = dir.path().join("sluice.yaml");
    std::fs::write(&file, text).unwrap();
    let c = Config::load(Some(&file)).unwrap();
    let DestinationConfig::Local { path } = &c.destination else {
        panic!("local")
    };
    assert_eq!(path, &dir.path().join("out"));
    let StateConfig::Local { path } = &c.state else {
        panic!("local")
    };
    assert_eq!(path, &dir.path().join("./state"));
    assert_eq!(
        c.source.tls.ca_file.as_deref(),
        Some(dir.path().join("certs/ca.pem").as_path())
    );
    assert_eq!(
        c.output.spill_dir.as_deref(),
        Some(std::path::Path::new("/var/tmp/spill")),
        "absolute paths are kept"
    );
    // The same document as text (SLUICE_CONFIG) keeps them relative to the cwd.
    let c = Config::parse(text, "SLUICE_CONFIG").unwrap();
    let DestinationConfig::Local { path } = &c.destination else {
        panic!("local")
    };
    assert_eq!(path, std::path::Path::new("out"));
}

#[test]
fn the_memory_budget_is_optional_and_bounded() {
    assert_eq!(
        Config::parse(MINIMAL, "t")
            .unwrap()
            .output
            .memory_budget_bytes,
        None
    );
    let with = |bytes: u64| {
        Config::parse(
            &format!("{MINIMAL}output: {{ memory_budget_bytes: {bytes} }}\n"),
            "t",
        )
    };
    assert_eq!(
        with(64 << 20).unwrap().output.memory_budget_bytes,
        Some(64 << 20)
    );
    for bad in [0, (8 << 20) - 1, (1 << 40) + 1] {
        let e = with(bad).unwrap_err();
        assert!(e.to_string().contains("output.memory_budget_bytes"), "{e}");
        assert_eq!(e.code(), Code::ConfigInvalid);
    }
}

#[test]
fn the_compaction_block_has_defaults_and_ranges() {
    let c = Config::parse(MINIMAL, "test").unwrap();
    assert_eq!(c.compaction.target_bytes, 128 * 1024 * 1024);
    assert_eq!(c.compaction.min_age_seconds, 3600);
    assert_eq!(c.compaction.lease_ttl_seconds, 900);
    let text = format!("{MINIMAL}compaction: {{ target_bytes: 4096, min_age_seconds: 0 }}\n");
    let c = Config::parse(&text, "test").unwrap();
    assert_eq!(
        (c.compaction.target_bytes, c.compaction.min_age_seconds),
        (4096, 0)
    );
    for bad in [
        "target_bytes: 1023",
        "lease_ttl_seconds: 1",
        "target_byte: 4096",
    ] {
        let text = format!("{MINIMAL}compaction: {{ {bad} }}\n");
        let e = Config::parse(&text, "test").unwrap_err();
        assert_eq!(e.code(), Code::ConfigInvalid, "{bad}");
    }
}
