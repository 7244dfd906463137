//! Loading a job's config for a face: the parser's shape checks ([`Config::parse`]), then
//! each room's check of its own block. Every face loads its config through here, so the
//! CLI, the Lambda face, `sluice validate` and `doctor` accept exactly the same documents.

use std::path::Path;

use crate::config::Config;
use crate::error::Result;

/// Loads the config from `path`, or from `SLUICE_CONFIG` when `path` is `None`, and
/// checks every block.
pub fn load(path: Option<&Path>) -> Result<Config> {
    let config = Config::load(path)?;
    check(&config)?;
    Ok(config)
}

/// Parses a YAML or JSON document (`origin` names it in errors) and checks every block.
pub fn parse(text: &str, origin: &str) -> Result<Config> {
    let config = Config::parse(text, origin)?;
    check(&config)?;
    Ok(config)
}

/// Each room's check of its own block: the engines (`source.<engine>`), the destination
/// (endpoint, encryption), the state store (endpoint) and the baseline (chunking, keys,
/// state machine ARN).
pub fn check(config: &Config) -> Result<()> {
    crate::source::check_config(config)?;
    crate::destination::check_config(config)?;
    crate::state::check_config(config)?;
    crate::baseline::check_config(config)?;
    crate::registration::check_config(config)?;
    crate::iceberg::check_config(config)?;
    crate::policy::check_config(config)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::MINIMAL;
    use crate::error::Code;

    #[test]
    fn each_room_checks_its_block() {
        let cases = [
            (
                MINIMAL.replace("slot: sluice_orders", "slot: Bad-Slot"),
                "slot",
            ),
            (
                MINIMAL.replace(
                    "postgres: { slot: sluice_orders, publication: sluice_orders }",
                    "mysql: { server_id: 0 }",
                ),
                "server_id must not be 0",
            ),
            (
                MINIMAL.replace(
                    "postgres: { slot: sluice_orders, publication: sluice_orders }",
                    "mysql: { transaction_memory_bytes: 10, max_transaction_bytes: 5 }",
                ),
                "transaction_memory_bytes",
            ),
            (
                format!("{MINIMAL}baseline: {{ inline_plan_max_bytes: 196609 }}\n"),
                "baseline.inline_plan_max_bytes 196609 is above 196608",
            ),
            (
                format!("{MINIMAL}baseline: {{ keys: {{ other: [id] }} }}\n"),
                "baseline.keys names \"other\", which is not in source.tables",
            ),
            (
                format!("{MINIMAL}baseline: {{ keys: {{ public.orders: [] }} }}\n"),
                "baseline.keys.public.orders must list one or more distinct columns",
            ),
            (
                format!("{MINIMAL}baseline: {{ keys: {{ public.orders: [a, a] }} }}\n"),
                "distinct columns",
            ),
            (
                format!("{MINIMAL}baseline: {{ parallel: 0 }}\n"),
                "baseline.parallel (0)",
            ),
            (
                format!("{MINIMAL}baseline: {{ chunk_rows: 0 }}\n"),
                "baseline.chunk_rows (0) must be at least 1",
            ),
        ];
        for (text, needle) in cases {
            assert!(
                Config::parse(&text, "t").is_ok(),
                "the parser checks shape only"
            );
            let e = parse(&text, "t").unwrap_err();
            assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
            assert_eq!(e.code(), Code::ConfigInvalid, "{e}");
            assert!(!e.to_string().contains("secret"), "{e} leaks the password");
        }
        assert!(parse(MINIMAL, "t").is_ok());
    }

    #[test]
    fn an_endpoint_with_credentials_is_refused_without_echoing_them() {
        let text = MINIMAL.replace(
            "{ type: local, path: ./.sluice }",
            "{ type: dynamodb, table: sluice-state, endpoint_url: 'http://k:s@127.0.0.1:4566' }",
        );
        let e = parse(&text, "t").unwrap_err();
        assert_eq!(e.code(), Code::ConfigSecret);
        assert!(!e.to_string().contains(":s@"), "{e}");
        let text = MINIMAL.replace(
            "{ type: local, path: ./out }",
            "{ type: s3, bucket: b, endpoint_url: 'http://k:s@127.0.0.1:4566' }",
        );
        let e = parse(&text, "t").unwrap_err();
        assert_eq!(e.code(), Code::ConfigSecret);
        assert!(!e.to_string().contains(":s@"), "{e}");
    }
}
