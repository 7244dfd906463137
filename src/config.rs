//! The job configuration: parsed once (YAML or JSON, from a file or `SLUICE_CONFIG`) into
//! validated types.
//!
//! Guarantees: unknown keys are rejected (a typo never silently falls back to a
//! default); every value is range-checked before anything connects; a source URL with a
//! password is accepted in the config text only for a loopback host — anywhere else the
//! URL must come from the environment (`url_env`) or a secret.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Code, Error, Result};
use crate::redact::redact_url;

/// Name of the environment variable that may carry the whole config document.
pub const CONFIG_ENV: &str = "SLUICE_CONFIG";

/// A complete, validated job configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Stream identity: keys the state. Letters, digits, `_`, `-`, `.`.
    pub job: String,
    pub source: SourceConfig,
    pub destination: DestinationConfig,
    pub state: StateConfig,
    #[serde(default)]
    pub output: OutputConfig,
    #[serde(default)]
    pub lease: LeaseConfig,
}

/// Where the changes come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The URL itself; allowed only for a loopback host.
    pub url: Option<String>,
    /// Name of the environment variable holding the URL.
    pub url_env: Option<String>,
    /// Captured tables, `schema.table` (PostgreSQL: a bare name means `public`). Each is
    /// written under a directory named exactly as written here.
    pub tables: Vec<String>,
    pub postgres: Option<PostgresConfig>,
}

/// PostgreSQL stream resources.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// Logical replication slot owned by this stream (one consumer per slot).
    pub slot: String,
    /// Publication listing the captured tables.
    pub publication: String,
    /// Create the slot / publication when missing (requires the grants documented in
    /// the README). When false, a missing resource is a prerequisite error naming the
    /// statement to run.
    #[serde(default = "yes")]
    pub create: bool,
    /// Changes per `pg_logical_slot_peek_binary_changes` call. Every page ends with a
    /// flush + checkpoint + slot advance, so the next page decodes only new WAL.
    #[serde(default = "default_page_changes")]
    pub page_changes: u64,
}

/// Where the parts go.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DestinationConfig {
    /// A local directory (CLI use, tests).
    Local { path: PathBuf },
}

/// Where the lease, checkpoint and run records live.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StateConfig {
    /// A local directory holding one state file per job.
    Local { path: PathBuf },
}

/// Part layout and rollover.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Close a part at the first commit after it holds this many rows.
    pub rollover_rows: u64,
    /// Close a part at the first commit after it reaches this many bytes.
    pub rollover_bytes: u64,
    /// Rows per Parquet row group; bounds the writer's memory.
    pub row_group_rows: usize,
    /// Directory for parts under construction (`/tmp` on Lambda). Default: the system
    /// temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// zstd level for Parquet pages.
    pub zstd_level: i32,
}

/// Single-writer lease.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaseConfig {
    /// How long a lease lives without renewal. Renewed at every checkpoint and when half
    /// of it has passed.
    pub ttl_seconds: u64,
}

fn yes() -> bool {
    true
}

fn default_page_changes() -> u64 {
    500_000
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            rollover_rows: 1_000_000,
            rollover_bytes: 128 * 1024 * 1024,
            row_group_rows: 65_536,
            spill_dir: None,
            zstd_level: 3,
        }
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig { ttl_seconds: 900 }
    }
}

impl LeaseConfig {
    /// The lease lifetime.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_seconds)
    }
}

impl Config {
    /// Loads the config from `path`, or from `SLUICE_CONFIG` when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::new(
                        Code::ConfigInvalid,
                        format!("cannot read config file {}", path.display()),
                    )
                    .hint("pass an existing YAML or JSON file with --config")
                    .source(e)
                })?;
                Config::parse(&text, &path.display().to_string())
            }
            None => {
                match std::env::var(CONFIG_ENV) {
                    Ok(text) => Config::parse(&text, CONFIG_ENV),
                    Err(_) => Err(Error::new(Code::ConfigInvalid, "no config given").hint(
                        format!("pass --config FILE or set {CONFIG_ENV} to the config document"),
                    )),
                }
            }
        }
    }

    /// Parses and validates a YAML or JSON document; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let config: Config = serde_yaml::from_str(text).map_err(|e| {
            Error::new(Code::ConfigInvalid, format!("{origin}: {e}"))
                .hint("see the README's config reference; unknown keys are rejected")
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<()> {
        if self.job.is_empty()
            || self.job.len() > 128
            || !self
                .job
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Err(
                invalid(format!("job {:?} is not a valid job name", self.job))
                    .hint("use 1-128 letters, digits, '_', '-' or '.'"),
            );
        }
        if self.source.tables.is_empty() {
            return Err(invalid("source.tables is empty")
                .hint("list at least one table, e.g. `tables: [public.orders]`"));
        }
        let mut seen = std::collections::HashSet::new();
        for table in &self.source.tables {
            if table.is_empty()
                || table.contains('/')
                || table.starts_with('.')
                || table.split('.').count() > 2
            {
                return Err(invalid(format!(
                    "source.tables entry {table:?} is not `table` or `schema.table`"
                )));
            }
            if !seen.insert(table) {
                return Err(invalid(format!("source.tables lists {table:?} twice")));
            }
        }
        match (&self.source.url, &self.source.url_env) {
            (Some(_), Some(_)) => {
                return Err(
                    invalid("source.url and source.url_env are both set").hint("keep exactly one")
                );
            }
            (None, None) => {
                return Err(invalid("source has no URL").hint(
                    "set source.url_env to the name of an environment variable holding the URL",
                ));
            }
            (Some(url), None) => check_inline_url(url)?,
            (None, Some(_)) => {}
        }
        if let Some(pg) = &self.source.postgres {
            for (what, name) in [("slot", &pg.slot), ("publication", &pg.publication)] {
                if name.is_empty()
                    || name.len() > 63
                    || !name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                {
                    return Err(invalid(format!(
                        "source.postgres.{what} {name:?} is not a valid name"
                    ))
                    .hint("use 1-63 lower-case letters, digits or '_'"));
                }
            }
            if pg.page_changes == 0 {
                return Err(invalid("source.postgres.page_changes must be at least 1"));
            }
        }
        let out = &self.output;
        if out.rollover_rows == 0 || out.rollover_bytes == 0 || out.row_group_rows == 0 {
            return Err(invalid(
                "output.rollover_rows, rollover_bytes and row_group_rows must be positive",
            ));
        }
        if !(1..=22).contains(&out.zstd_level) {
            return Err(invalid("output.zstd_level must be between 1 and 22"));
        }
        if self.lease.ttl_seconds < 2 {
            return Err(invalid("lease.ttl_seconds must be at least 2"));
        }
        Ok(())
    }

    /// The source URL, resolved from the config or the environment.
    pub fn source_url(&self) -> Result<String> {
        if let Some(url) = &self.source.url {
            return Ok(url.clone());
        }
        let var = self.source.url_env.as_deref().unwrap_or_default();
        std::env::var(var).map_err(|_| {
            Error::new(
                Code::ConfigSecret,
                format!("environment variable {var} is not set"),
            )
            .hint(format!(
                "export {var}=postgres://user:password@host:5432/db (source.url_env names it)"
            ))
        })
    }

    /// The spill directory for parts under construction.
    pub fn spill_dir(&self) -> PathBuf {
        self.output
            .spill_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Code::ConfigInvalid, message)
}

/// A URL written in the config text must point at loopback if it carries a password.
fn check_inline_url(url: &str) -> Result<()> {
    let parsed = url::Url::parse(url)
        .map_err(|e| invalid(format!("source.url {} is not a URL", redact_url(url))).source(e))?;
    let loopback = crate::redact::is_loopback_host(parsed.host_str().unwrap_or(""));
    if parsed.password().is_some() && !loopback {
        return Err(Error::new(
            Code::ConfigSecret,
            format!(
                "source.url {} carries a password in the config file",
                redact_url(url)
            ),
        )
        .hint("move the URL into an environment variable and name it with source.url_env"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
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
        assert_eq!(c.lease.ttl_seconds, 900);
        assert!(c.source.postgres.as_ref().unwrap().create);
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
                MINIMAL.replace("slot: sluice_orders", "slot: Bad-Slot"),
                "slot",
            ),
            (
                MINIMAL.replace("type: local, path: ./out", "type: ftp, path: ./out"),
                "unknown variant",
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
}
