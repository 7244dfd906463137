//! `sluice validate --config-json`: checks a config document given as text (what
//! Terraform renders into `SLUICE_CONFIG`) and prints it back normalized.
//!
//! Guarantees: the document is checked exactly as the drain's config is
//! (`crate::job::config::parse`: the parser, then every room's check of its block); the
//! echo is the document as written (keys sorted, defaults not filled in) with
//! `source.url` redacted, so no password reaches stdout.

use serde_json::{Value, json};

use crate::error::{Code, Error, Result};
use crate::redact::redact_url;

/// Origin named in errors about the document.
const ORIGIN: &str = "--config-json";

/// Validates `text` and returns `{valid, job, tables, config}`.
pub fn document(text: &str) -> Result<Value> {
    let config = crate::job::config::parse(text, ORIGIN)?;
    let mut echo: Value = serde_yaml::from_str(text).map_err(|e| {
        Error::new(Code::ConfigInvalid, format!("{ORIGIN}: {e}"))
            .hint("pass the config document as JSON or YAML")
    })?;
    if let Some(url) = echo.pointer_mut("/source/url")
        && let Some(text) = url.as_str()
    {
        *url = Value::String(redact_url(text));
    }
    Ok(json!({
        "valid": true,
        "job": config.job,
        "tables": config.source.tables,
        "config": sorted(echo),
    }))
}

/// The value with every object's keys in order (serde_json's map keeps insertion order
/// only with the `preserve_order` feature; sorting makes the output stable either way).
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_the_document_with_the_url_redacted() {
        let text = r#"{"job":"j","source":{"url":"postgres://u:hunter2@127.0.0.1/db","tables":["t"],
            "postgres":{"slot":"s","publication":"p"}},
            "state":{"type":"local","path":"s"},"destination":{"type":"local","path":"o"}}"#;
        let out = document(text).unwrap();
        assert_eq!(out["valid"], true);
        assert_eq!(out["config"]["destination"]["path"], "o");
        assert!(!out.to_string().contains("hunter2"), "{out}");
        let keys: Vec<_> = out["config"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["destination", "job", "source", "state"]);
    }

    #[test]
    fn rejects_unknown_keys() {
        let text = r#"{"job":"j","colour":"blue"}"#;
        let e = document(text).unwrap_err();
        assert_eq!(e.code(), Code::ConfigInvalid);
        assert!(e.to_string().contains("--config-json"), "{e}");
    }
}
