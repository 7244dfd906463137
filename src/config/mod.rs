//! The job configuration as data: parsed once (YAML or JSON, from a file or
//! `SLUICE_CONFIG`) into typed blocks, with the shape every job shares checked here.
//!
//! Guarantees: unknown keys are rejected (a typo never silently falls back to a
//! default); the job-level values (job name, tables, the one URL source, output, lease,
//! deadline, doctor thresholds) are range-checked at parse; a source URL with a password
//! is accepted in the config text only for a loopback host — anywhere else the URL must
//! come from the environment (`url_env`) or a secret. No I/O happens behind a `Config`:
//! a secret's URL is read by a face (`crate::secret::resolve`) and carried in the value.
//!
//! Each room checks its own block (the engine its `source.<engine>`, the destination its
//! endpoint and encryption, the state store its endpoint, the baseline its chunking);
//! `crate::job::config` runs [`Config::parse`] and then every room's check, and is what
//! the faces call. This module imports only core types.

mod catalog;
mod compaction;
mod iceberg;
mod policy;
mod run;
mod source;
mod source_tls;
mod storage;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};
use crate::redact::redact_url;

pub use catalog::CatalogConfig;
pub use compaction::CompactionConfig;
pub use iceberg::{IcebergCatalogConfig, IcebergConfig, TableFormat};
pub use policy::{HashKey, HashKeySource, HashOutput, MaskConfig, PolicyConfig, TablePolicyConfig};
pub use run::{
    BaselineConfig, DeadlineConfig, DoctorConfig, Initial, Layout, LeaseConfig, OutputConfig,
};
pub use source::{
    Engine, MysqlConfig, PostgresConfig, SecretUrl, SourceConfig, SqlServerConfig, TextColumns,
    TimeoutsConfig, engine_for_url,
};
pub use source_tls::{TlsConfig, TlsMode};
pub use storage::{DestinationConfig, Encryption, SseMode, StateConfig};

/// Name of the environment variable that may carry the whole config document.
pub const CONFIG_ENV: &str = "SLUICE_CONFIG";

/// A job configuration: its shape checked at parse, each block checked by its room.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
    #[serde(default)]
    pub deadline: DeadlineConfig,
    /// What a stream without an anchor starts from: `none` (changes from now on) or
    /// `snapshot` (a baseline of the tables first, then changes).
    #[serde(default)]
    pub initial: Initial,
    #[serde(default)]
    pub baseline: BaselineConfig,
    /// Thresholds of `sluice doctor`.
    #[serde(default)]
    pub doctor: DoctorConfig,
    /// Where each table's parts are registered as a catalog table (Glue); none by default.
    #[serde(default)]
    pub catalog: Option<CatalogConfig>,
    /// `iceberg`: each run's parts are also committed to an Iceberg table per captured
    /// table (through the `iceberg` block's catalog); `parquet` (default): parts only.
    #[serde(default)]
    pub table_format: TableFormat,
    /// The Iceberg catalog and namespace, with `table_format: iceberg`.
    #[serde(default)]
    pub iceberg: Option<IcebergConfig>,
    /// How `sluice compact` rewrites small change parts (docs/compaction.md).
    #[serde(default)]
    pub compaction: CompactionConfig,
    /// Per table: columns left out, hashed, masked or nulled, and the rows captured
    /// (docs/privacy.md); none by default.
    #[serde(default, skip_serializing_if = "PolicyConfig::is_empty")]
    pub policy: PolicyConfig,
}

impl Config {
    /// Loads the config from `path`, or from `SLUICE_CONFIG` when `path` is `None`. The
    /// relative paths of a config file are relative to the file's directory (as in
    /// docker-compose and Terraform), so a run from another working directory (cron runs
    /// in `$HOME`) finds the same state and output; those of `SLUICE_CONFIG` stay
    /// relative to the working directory.
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
                let mut config = Config::parse(&text, &path.display().to_string())?;
                config.resolve_paths(path.parent().unwrap_or(Path::new("")));
                Ok(config)
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

    /// Makes every relative path key (`destination.path`, `state.path`,
    /// `output.spill_dir`, `source.tls.ca_file`, the SQLite file of `iceberg.catalog.uri`) relative to `base` instead. Pure path
    /// arithmetic: nothing is read or created.
    pub fn resolve_paths(&mut self, base: &Path) {
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        };
        if let DestinationConfig::Local { path } = &mut self.destination {
            resolve(path);
        }
        if let StateConfig::Local { path } = &mut self.state {
            resolve(path);
        }
        if let Some(path) = &mut self.output.spill_dir {
            resolve(path);
        }
        if let Some(path) = &mut self.source.tls.ca_file {
            resolve(path);
        }
        if let Some(iceberg) = &mut self.iceberg
            && let IcebergCatalogConfig::Sql { uri, .. } = &mut iceberg.catalog
            && let Some(rest) = uri.strip_prefix("sqlite:///")
            && !rest.is_empty()
            && !rest.starts_with('/')
        {
            *uri = format!("sqlite:///{}", base.join(rest).display());
        }
    }

    /// Parses a YAML or JSON document and checks its shape; `origin` names it in errors.
    /// The rooms' own checks are added by `crate::job::config::parse`, which the faces use.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let config: Config = serde_yaml::from_str(text).map_err(|e| {
            let message = e.to_string();
            let hint = match did_you_mean(&message) {
                Some(close) => format!("did you mean `{close}`? (unknown keys are rejected)"),
                None => {
                    "see docs/configuration.md for every key; unknown keys are rejected".to_owned()
                }
            };
            Error::new(Code::ConfigInvalid, format!("{origin}: {message}")).hint(hint)
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
        if self.source.url_secret_arn.is_some()
            && (self.source.url.is_some() || self.source.url_env.is_some())
        {
            return Err(invalid(
                "source.url_secret_arn is set together with source.url or source.url_env",
            )
            .hint("keep exactly one of url, url_env, url_secret_arn"));
        }
        if let Some(arn) = &self.source.url_secret_arn
            && crate::arn::region(arn, "secretsmanager", "secret").is_none()
        {
            return Err(Error::new(
                Code::ConfigSecret,
                format!("source.url_secret_arn {arn:?} is not a Secrets Manager secret ARN"),
            )
            .hint("write the full ARN: arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME"));
        }
        match (&self.source.url, &self.source.url_env) {
            (None, None) if self.source.url_secret_arn.is_some() => {}
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
        self.source.tls.validate()?;
        let timeouts = &self.source.timeouts;
        if !(1..=3600).contains(&timeouts.connect_seconds)
            || !(1..=3600).contains(&timeouts.read_seconds)
            || !(1..=3600).contains(&timeouts.page_seconds)
        {
            return Err(invalid(format!(
                "source.timeouts.connect_seconds ({}), read_seconds ({}) and page_seconds ({}) must be between 1 and 3600",
                timeouts.connect_seconds, timeouts.read_seconds, timeouts.page_seconds
            ))
            .hint("the defaults are connect_seconds: 10, read_seconds: 120, page_seconds: 300"));
        }
        if self.source.mysql.is_some() && self.source.postgres.is_some() {
            return Err(invalid("source.postgres and source.mysql are both set")
                .hint("keep the one matching the URL's scheme"));
        }
        let out = &self.output;
        if out.rollover_rows == 0 || out.rollover_bytes == 0 || out.row_group_rows == 0 {
            return Err(invalid(
                "output.rollover_rows, rollover_bytes and row_group_rows must be positive",
            ));
        }
        if out.current_state_bucket_rows == 0 {
            return Err(invalid("output.current_state_bucket_rows must be positive")
                .hint("the rows one current-state file holds at most; the default is 65536"));
        }
        if let Err(message) = out.history_retention() {
            return Err(invalid(&message)
                .hint("write a whole number and a unit: 30d, 12h, 90m or 45s (0s folds every change a checkpoint covers)"));
        }
        if let Some(budget) = out.memory_budget_bytes {
            const MIN_BUDGET: u64 = OutputConfig::MIN_MEMORY_BUDGET;
            const MAX_BUDGET: u64 = OutputConfig::MAX_MEMORY_BUDGET;
            if !(MIN_BUDGET..=MAX_BUDGET).contains(&budget) {
                return Err(invalid(format!(
                    "output.memory_budget_bytes ({budget}) must be between {MIN_BUDGET} (8 MiB) and {MAX_BUDGET} (1 TiB)"
                ))
                .hint("leave it unset for the default (half the Lambda function's memory, 512 MiB on the CLI)"));
            }
        }
        if !(1..=22).contains(&out.zstd_level) {
            return Err(invalid("output.zstd_level must be between 1 and 22"));
        }
        if !(0.0..=600.0).contains(&self.deadline.safety_margin_seconds) {
            return Err(invalid(
                "deadline.safety_margin_seconds must be between 0 and 600",
            ));
        }
        if self.lease.ttl_seconds < 2 {
            return Err(invalid("lease.ttl_seconds must be at least 2"));
        }
        self.compaction.check()?;
        if self.doctor.retained_wal_warn_bytes > self.doctor.retained_wal_fail_bytes {
            return Err(invalid(
                "doctor.retained_wal_warn_bytes is above doctor.retained_wal_fail_bytes",
            )
            .hint("the warn threshold must not exceed the fail threshold"));
        }
        if self.doctor.schedule_interval_seconds == 0 {
            return Err(
                invalid("doctor.schedule_interval_seconds must be at least 1")
                    .hint("set it to the job's schedule interval, e.g. 300 for rate(5 minutes)"),
            );
        }
        Ok(())
    }

    /// The config as parsed, defaults filled in, secrets redacted (`sluice validate`).
    pub fn normalized(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(url) = value.pointer_mut("/source/url").filter(|v| v.is_string()) {
            *url = serde_json::Value::String(redact_url(url.as_str().unwrap_or_default()));
        }
        value
    }

    /// The source URL: written in the config, read from the environment variable
    /// `source.url_env` names, or read from `source.url_secret_arn` by a face
    /// ([`Config::with_secret_url`]).
    pub fn source_url(&self) -> Result<String> {
        if let Some(url) = &self.source.url {
            return Ok(url.clone());
        }
        if let Some(arn) = &self.source.url_secret_arn {
            return match &self.source.secret_url {
                Some(url) => Ok(url.expose().to_owned()),
                None => Err(Error::new(
                    Code::Internal,
                    format!("source.url_secret_arn {arn} was used before it was read"),
                )),
            };
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

    /// The same config carrying `url`, the source URL its secret holds.
    pub fn with_secret_url(mut self, url: String) -> Config {
        self.source.secret_url = Some(SecretUrl::new(url));
        self
    }

    /// The engine the config's `postgres` / `mysql` / `sqlserver` block implies.
    pub fn engine_block(&self) -> Option<Engine> {
        if self.source.postgres.is_some() {
            Some(Engine::Postgres)
        } else if self.source.mysql.is_some() {
            Some(Engine::MySql)
        } else if self.source.sqlserver.is_some() {
            Some(Engine::SqlServer)
        } else {
            None
        }
    }

    /// The spill directory for parts under construction.
    pub fn spill_dir(&self) -> PathBuf {
        self.output
            .spill_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
    }
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant"),
/// the expected name closest to `x`, when it is close enough to be a typo.
fn did_you_mean(message: &str) -> Option<String> {
    let rest = message
        .split_once("unknown field `")
        .or_else(|| message.split_once("unknown variant `"))?
        .1;
    let (unknown, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected")?.1;
    let expected = expected.split(" at line ").next().unwrap_or(expected);
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| (edit_distance(unknown, name), name))
        .filter(|(d, name)| *d <= (name.len().max(unknown.len()) / 3).max(1))
        .min()
        .map(|(_, name)| name.to_owned())
}

/// Levenshtein distance over bytes (config keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// A `SLUICE_CONFIG_INVALID` error; the rooms build their config errors with it too.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::new(Code::ConfigInvalid, message)
}

/// An AWS endpoint override must be a plain http(s) URL without credentials (the
/// destination and the state store check theirs with it).
pub fn check_endpoint(key: &str, url: &str) -> Result<()> {
    let parsed = url::Url::parse(url)
        .map_err(|e| invalid(format!("{key} {} is not a URL", redact_url(url))).source(e))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(
            invalid(format!("{key} {} is not an http(s) URL", redact_url(url)))
                .hint("write it as http://127.0.0.1:4566 or https://s3.example.com"),
        );
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Error::new(
            Code::ConfigSecret,
            format!("{key} {} carries credentials", redact_url(url)),
        )
        .hint("AWS credentials come from the provider chain (AWS_* variables, profile, IAM role), never the URL"));
    }
    Ok(())
}

/// A URL written in the config text must point at loopback if it carries a password.
fn check_inline_url(url: &str) -> Result<()> {
    let parsed = url::Url::parse(url)
        .map_err(|e| invalid(format!("source.url {} is not a URL", redact_url(url))).source(e))?;
    // libpq connects to `hostaddr` when one is given: the URL stays on the machine only
    // when its host and every hostaddr are loopback.
    let loopback = crate::redact::is_loopback_host(parsed.host_str().unwrap_or(""))
        && parsed
            .query_pairs()
            .filter(|(k, _)| k == "hostaddr")
            .all(|(_, v)| v.split(',').all(crate::redact::is_loopback_host));
    let password = parsed.password().is_some()
        || parsed
            .query_pairs()
            .any(|(k, _)| crate::redact::is_secret_param(&k));
    let tls_off = parsed
        .query_pairs()
        .any(|(k, v)| k == "sslmode" && (v == "disable" || v == "allow" || v == "prefer"));
    if tls_off && !loopback {
        return Err(Error::new(
            Code::ConfigTlsRequired,
            format!("source.url {} turns TLS off for a non-loopback host", redact_url(url)),
        )
        .hint("remove sslmode from the URL (or use sslmode=require / verify-full): sluice reaches a non-loopback host only over verified TLS"));
    }
    if password && !loopback {
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
pub(crate) mod tests;
