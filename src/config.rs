//! The job configuration: parsed once (YAML or JSON, from a file or `SLUICE_CONFIG`) into
//! validated types.
//!
//! Guarantees: unknown keys are rejected (a typo never silently falls back to a
//! default); every value is range-checked before anything connects; a source URL with a
//! password is accepted in the config text only for a loopback host — anywhere else the
//! URL must come from the environment (`url_env`) or a secret.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};
use crate::redact::redact_url;

/// Name of the environment variable that may carry the whole config document.
pub const CONFIG_ENV: &str = "SLUICE_CONFIG";

/// A complete, validated job configuration.
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
}

/// Thresholds of `sluice doctor`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DoctorConfig {
    /// WAL retained by a slot (ours, or any inactive one) above this warns.
    pub retained_wal_warn_bytes: u64,
    /// WAL retained by a slot above this fails.
    pub retained_wal_fail_bytes: u64,
    /// How often the job runs (the scheduler's interval; the Terraform module's
    /// `schedule_expression`). A change log (MySQL binlog) kept for less than this fails.
    pub schedule_interval_seconds: u64,
    /// Outage the change log should outlast beyond one interval: kept for less than
    /// interval + margin warns.
    pub log_retention_margin_seconds: u64,
}

impl Default for DoctorConfig {
    fn default() -> Self {
        DoctorConfig {
            retained_wal_warn_bytes: 1 << 30,
            retained_wal_fail_bytes: 10 << 30,
            schedule_interval_seconds: 300,
            log_retention_margin_seconds: 86_400,
        }
    }
}

/// The start of a new stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Initial {
    /// Capture changes from the first run on; no baseline.
    #[default]
    None,
    /// Baseline every table (anchor first, chunked, resumable), then drain on top.
    Snapshot,
}

/// Chunking and fan-out of baselines.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaselineConfig {
    /// Target rows per chunk (one snapshot part per chunk).
    pub chunk_rows: u64,
    /// Chunks read at once by `sluice baseline` / an inline baseline.
    pub parallel: usize,
    /// When set, a drain that finds no anchor creates it and starts this Step Functions
    /// state machine for the chunks instead of reading them inline.
    pub state_machine_arn: Option<String>,
    /// `baseline.plan`: an encoded chunk list longer than this many bytes is written to
    /// the S3 destination for the state machine's Distributed Map to read, instead of
    /// being returned inline (at most [`BaselineConfig::MAX_INLINE_PLAN_BYTES`]).
    pub inline_plan_max_bytes: u64,
    /// Declared baseline keys of tables without a primary key: table (as in
    /// `source.tables`) → NOT NULL columns to chunk by, in order. Need not be unique.
    pub keys: std::collections::BTreeMap<String, Vec<String>>,
}

impl BaselineConfig {
    /// Step Functions passes at most 256 KiB between states; an inline chunk list shares
    /// that with the rest of the execution's state, so it may take at most 192 KiB.
    pub const MAX_INLINE_PLAN_BYTES: u64 = 192 * 1024;
}

impl Default for BaselineConfig {
    fn default() -> Self {
        BaselineConfig {
            chunk_rows: 100_000,
            parallel: 1,
            state_machine_arn: None,
            inline_plan_max_bytes: 128 * 1024,
            keys: std::collections::BTreeMap::new(),
        }
    }
}

/// Where the changes come from.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The URL itself; allowed only for a loopback host.
    pub url: Option<String>,
    /// Name of the environment variable holding the URL.
    pub url_env: Option<String>,
    /// Secrets Manager secret holding the URL (or a JSON object with host, port,
    /// username, password, dbname), fetched once per container.
    pub url_secret_arn: Option<String>,
    /// Captured tables, `schema.table` (PostgreSQL: a bare name means `public`). Each is
    /// written under a directory named exactly as written here.
    pub tables: Vec<String>,
    pub postgres: Option<PostgresConfig>,
    pub sqlserver: Option<SqlServerConfig>,
    /// MySQL / MariaDB stream settings (a `mysql://` URL); all optional.
    pub mysql: Option<MysqlConfig>,
    /// TLS to the source; default `verify-full` (loopback: no TLS unless a mode is set).
    #[serde(default)]
    pub tls: crate::tls::TlsConfig,
}

/// MySQL / MariaDB stream settings.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MysqlConfig {
    /// The replica server id the binlog dump registers with. It must be unique among the
    /// server's replicas and binlog readers: a second connection with the same id makes
    /// the server drop the first. Default: derived from the job name
    /// ([`MysqlConfig::server_id_for`]), so distinct jobs get distinct ids.
    pub server_id: Option<u32>,
    /// Decoded bytes of one transaction held in memory; beyond that the transaction
    /// spills to `output.spill_dir` (`/tmp` on Lambda).
    pub transaction_memory_bytes: Option<u64>,
    /// A transaction larger than this (decoded bytes) fails the run before it can fill
    /// the spill volume.
    pub max_transaction_bytes: Option<u64>,
}

impl MysqlConfig {
    /// Default in-memory part of a transaction.
    pub const DEFAULT_TRANSACTION_MEMORY: u64 = 32 * 1024 * 1024;
    /// Default hard limit of one transaction.
    pub const DEFAULT_MAX_TRANSACTION: u64 = 4 * 1024 * 1024 * 1024;

    /// The server id for `job`: the configured one, or one derived from the job name
    /// (FNV-1a into 1_000_000_000..=4_294_967_295, away from the small ids people give
    /// their servers).
    pub fn server_id_for(&self, job: &str) -> u32 {
        self.server_id.unwrap_or_else(|| {
            let mut hash: u32 = 0x811c_9dc5;
            for b in job.bytes() {
                hash ^= u32::from(b);
                hash = hash.wrapping_mul(0x0100_0193);
            }
            1_000_000_000 + hash % (u32::MAX - 1_000_000_000)
        })
    }

    /// The in-memory cap of one transaction.
    pub fn transaction_memory(&self) -> u64 {
        self.transaction_memory_bytes
            .unwrap_or(Self::DEFAULT_TRANSACTION_MEMORY)
    }

    /// The hard size limit of one transaction.
    pub fn max_transaction(&self) -> u64 {
        self.max_transaction_bytes
            .unwrap_or(Self::DEFAULT_MAX_TRANSACTION)
    }
}

/// PostgreSQL stream resources.
#[derive(Debug, Clone, Deserialize, Serialize)]
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

/// SQL Server CDC stream settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SqlServerConfig {
    /// The table's CDC capture instance (`sys.sp_cdc_enable_table @capture_instance`;
    /// SQL Server's default is `<schema>_<table>`).
    pub capture_instance: String,
    /// Change rows per LSN window: one `cdc.fn_cdc_get_all_changes_…` call reads at
    /// most this many rows plus the rest of the window's last transaction.
    #[serde(default = "default_page_changes")]
    pub window_changes: u64,
}

/// Where the parts go.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DestinationConfig {
    /// A local directory (CLI use, tests).
    Local { path: PathBuf },
    /// An S3 bucket; objects go to `<prefix>/<table>/…`. Credentials and (unless given)
    /// the region come from the standard AWS provider chain.
    S3 {
        bucket: String,
        #[serde(default)]
        prefix: String,
        /// A custom endpoint (moto, MinIO); default: `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
        region: Option<String>,
        /// Server-side encryption requested on every object; default SSE-S3.
        #[serde(default)]
        encryption: crate::destination::s3::Encryption,
    },
}

/// Where the lease, checkpoint and run records live.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StateConfig {
    /// A local directory holding one state file per job.
    Local { path: PathBuf },
    /// A DynamoDB table (`pk`/`sk` strings), shared by any number of jobs.
    Dynamodb {
        table: String,
        /// A custom endpoint (moto, DynamoDB Local); default: `AWS_ENDPOINT_URL`, else AWS's.
        endpoint_url: Option<String>,
        region: Option<String>,
    },
}

/// Part layout and rollover.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaseConfig {
    /// How long a lease lives without renewal. Renewed at every checkpoint and when half
    /// of it has passed.
    pub ttl_seconds: u64,
}

/// How close to an invocation deadline (Lambda's, or `--max-duration`) a run stops.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadlineConfig {
    /// Time kept in reserve before the deadline for the final flush, checkpoint and ack.
    pub safety_margin_seconds: f64,
}

impl Default for DeadlineConfig {
    fn default() -> Self {
        DeadlineConfig {
            safety_margin_seconds: 20.0,
        }
    }
}

impl DeadlineConfig {
    /// The reserve as a duration.
    pub fn margin(&self) -> Duration {
        Duration::from_secs_f64(self.safety_margin_seconds)
    }
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
            let message = e.to_string();
            let hint = match did_you_mean(&message) {
                Some(close) => format!("did you mean `{close}`? (unknown keys are rejected)"),
                None => "see the README's config reference; unknown keys are rejected".to_owned(),
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
        if let Some(arn) = &self.source.url_secret_arn {
            crate::secret::region_of(arn)?;
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
        if let Some(ms) = &self.source.sqlserver {
            crate::source::sqlserver::validate_config(ms, &self.source.tables)?;
        }
        if let Some(my) = &self.source.mysql {
            if self.source.postgres.is_some() {
                return Err(invalid("source.postgres and source.mysql are both set")
                    .hint("keep the one matching the URL's scheme"));
            }
            if my.server_id == Some(0) {
                return Err(invalid("source.mysql.server_id must not be 0").hint(
                    "choose an id unique among the server's replicas (1..=4294967295), or omit it to derive one from the job name",
                ));
            }
            if my.transaction_memory() == 0 || my.max_transaction() < my.transaction_memory() {
                return Err(invalid(
                    "source.mysql.transaction_memory_bytes must be positive and at most max_transaction_bytes",
                ));
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
        if !(0.0..=600.0).contains(&self.deadline.safety_margin_seconds) {
            return Err(invalid(
                "deadline.safety_margin_seconds must be between 0 and 600",
            ));
        }
        if self.lease.ttl_seconds < 2 {
            return Err(invalid("lease.ttl_seconds must be at least 2"));
        }
        if let DestinationConfig::S3 {
            endpoint_url,
            encryption,
            ..
        } = &self.destination
        {
            if let Some(url) = endpoint_url {
                check_endpoint("destination.endpoint_url", url)?;
            }
            encryption.validate()?;
        }
        if let StateConfig::Dynamodb {
            endpoint_url: Some(url),
            ..
        } = &self.state
        {
            check_endpoint("state.endpoint_url", url)?;
        }
        if let Some(url) = &self.source.url
            && (url.starts_with("postgres://") || url.starts_with("postgresql://"))
            && self.source.postgres.is_none()
        {
            return Err(
                invalid("source.url is a PostgreSQL URL but source.postgres is missing")
                    .hint("add `postgres: { slot: <name>, publication: <name> }` under source"),
            );
        }
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
        if let Some(arn) = &self.baseline.state_machine_arn {
            crate::baseline::start::region_from_arn(arn)?;
        }
        for (table, columns) in &self.baseline.keys {
            if !self.source.tables.contains(table) {
                return Err(invalid(format!(
                    "baseline.keys names {table:?}, which is not in source.tables"
                ))
                .hint("key a table by its name exactly as source.tables lists it"));
            }
            let mut seen = std::collections::BTreeSet::new();
            if columns.is_empty() || !columns.iter().all(|c| seen.insert(c)) {
                return Err(invalid(format!(
                    "baseline.keys.{table} must list one or more distinct columns"
                )));
            }
        }
        if self.baseline.parallel == 0 || self.baseline.chunk_rows == 0 {
            return Err(invalid(format!(
                "baseline.parallel ({}) and baseline.chunk_rows ({}) must be at least 1",
                self.baseline.parallel, self.baseline.chunk_rows
            ))
            .hint("parallel is how many chunks are read at once (Step Functions reads a MaxConcurrency of 0 as unlimited); chunk_rows sizes each chunk"));
        }
        if self.baseline.inline_plan_max_bytes > BaselineConfig::MAX_INLINE_PLAN_BYTES {
            return Err(invalid(format!(
                "baseline.inline_plan_max_bytes {} is above {} (192 KiB)",
                self.baseline.inline_plan_max_bytes,
                BaselineConfig::MAX_INLINE_PLAN_BYTES
            ))
            .hint("Step Functions passes at most 256 KiB between states; larger chunk lists go through S3 (0 sends every plan of an S3 destination through S3)"));
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

    /// The source URL, resolved from the config, the environment, or the Secrets Manager
    /// secret [`Config::load_source_secret`] has read.
    pub fn source_url(&self) -> Result<String> {
        if let Some(url) = &self.source.url {
            return Ok(url.clone());
        }
        if let Some(arn) = &self.source.url_secret_arn {
            return crate::secret::cached(arn).ok_or_else(|| {
                Error::new(
                    Code::Internal,
                    format!("source.url_secret_arn {arn} was used before it was read"),
                )
            });
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

    /// Reads `source.url_secret_arn` (once per process; a no-op without one), so
    /// [`Config::source_url`] can answer.
    pub async fn load_source_secret(&self) -> Result<()> {
        match &self.source.url_secret_arn {
            Some(arn) => crate::secret::load(arn, self.engine_block()).await,
            None => Ok(()),
        }
    }

    /// Reads `source.url_secret_arn` again; true when its URL changed (a rotation).
    pub async fn refresh_source_secret(&self) -> Result<bool> {
        match &self.source.url_secret_arn {
            Some(arn) => crate::secret::refresh(arn, self.engine_block()).await,
            None => Ok(false),
        }
    }

    /// The engine the config's `postgres` / `mysql` / `sqlserver` block implies.
    fn engine_block(&self) -> Option<crate::source::Engine> {
        use crate::source::Engine;
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

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Code::ConfigInvalid, message)
}

/// An AWS endpoint override must be a plain http(s) URL without credentials.
fn check_endpoint(key: &str, url: &str) -> Result<()> {
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
    let loopback = crate::redact::is_loopback_host(parsed.host_str().unwrap_or(""));
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
        assert_eq!(v["lease"]["ttl_seconds"], 900);
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
        assert!(
            matches!(c.destination, DestinationConfig::S3 { ref prefix, .. } if prefix == "cdc/")
        );
        assert!(
            matches!(c.state, StateConfig::Dynamodb { ref table, .. } if table == "sluice-state")
        );
        let bad = text.replace("http://127.0.0.1:4566", "http://k:s@127.0.0.1:4566");
        let e = Config::parse(&bad, "t").unwrap_err();
        assert_eq!(e.code(), Code::ConfigSecret);
        assert!(!e.to_string().contains(":s@"), "{e}");
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
                MINIMAL.replace("slot: sluice_orders", "slot: Bad-Slot"),
                "slot",
            ),
            (
                MINIMAL.replace("type: local, path: ./out", "type: ftp, path: ./out"),
                "unknown variant",
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
