//! `sluice validate` against a corpus of malformed configs: each is rejected (exit 1)
//! with the expected, distinct message, no secret is echoed, and a valid config prints
//! its normalized form with the password redacted.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Command;

fn validate(path: &Path) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "--config"])
        .arg(path)
        .env("SLUICE_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{stdout}: {e}"));
    (out.status.code().unwrap(), doc)
}

#[test]
fn every_malformed_config_is_rejected_with_its_own_message() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invalid_configs");
    let expected: BTreeMap<String, String> = std::fs::read_to_string(dir.join("expected.tsv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (file, needle) = l.split_once('\t').unwrap();
            (file.to_owned(), needle.to_owned())
        })
        .collect();
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        files.len() >= 30,
        "only {} configs in the corpus",
        files.len()
    );
    let mut seen = HashSet::new();
    for file in &files {
        let needle = expected
            .get(file)
            .unwrap_or_else(|| panic!("{file}.yaml has no line in expected.tsv"));
        let (code, doc) = validate(&dir.join(format!("{file}.yaml")));
        assert_eq!(code, 1, "{file}: {doc}");
        let error = &doc["error"];
        let text = format!(
            "{} {}",
            error["message"].as_str().unwrap(),
            error["hint"].as_str().unwrap_or("")
        );
        assert!(
            text.contains(needle.as_str()),
            "{file}: {text:?} lacks {needle:?}"
        );
        assert!(
            !text.contains("hunter2"),
            "{file} echoes the password: {text}"
        );
        let message = error["message"]
            .as_str()
            .unwrap()
            .replace(&format!("{file}.yaml"), "");
        assert!(
            seen.insert(message.clone()),
            "{file}: message not distinct: {message}"
        );
    }
    assert_eq!(
        files.len(),
        expected.len(),
        "expected.tsv lists files that do not exist"
    );
}

#[test]
fn a_valid_config_prints_its_normalized_form_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.yaml");
    std::fs::write(
        &path,
        "job: j\nsource:\n  url: postgres://u:hunter2@127.0.0.1:5432/app\n  tables: [orders]\n  postgres: { slot: s, publication: p }\n\
         destination: { type: local, path: ./out }\nstate: { type: local, path: ./st }\n",
    )
    .unwrap();
    let (code, doc) = validate(&path);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["valid"], true);
    assert_eq!(
        doc["config"]["source"]["url"],
        "postgres://u:***@127.0.0.1:5432/app"
    );
    assert_eq!(doc["config"]["output"]["rollover_rows"], 1_000_000);
    assert_eq!(
        doc["config"]["doctor"]["retained_wal_fail_bytes"],
        10u64 << 30
    );
    assert!(!doc.to_string().contains("hunter2"));
}
