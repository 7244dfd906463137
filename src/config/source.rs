//! The `source` block: where the changes come from (URL, env var or secret), the captured
//! tables, each engine's settings, and TLS. Data only: each engine checks its own block
//! (`crate::source::check_config`); here only the shape every source shares is checked.

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};

use super::source_tls::TlsConfig;

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
    pub tls: TlsConfig,
    /// How long the source may keep the run waiting.
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    /// The URL `url_secret_arn` holds, once a face has read it; never parsed, printed or
    /// serialized.
    #[serde(skip)]
    pub secret_url: Option<SecretUrl>,
    /// The columns, per table, captured in their text form because a value did not fit
    /// their typed form; read from the tables' baseline records at the start of a run
    /// (`crate::state::text_form`), never from the file.
    #[serde(skip)]
    pub text_columns: TextColumns,
}

/// Columns captured in their text form because a value did not fit, by table name.
pub type TextColumns = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

impl SourceConfig {
    /// True when `table`'s `column` is captured in its text form because a value did not
    /// fit its typed form.
    pub fn in_text_form(&self, table: &str, column: &str) -> bool {
        self.text_columns
            .get(table)
            .is_some_and(|columns| columns.contains(column))
    }
}

/// `source.timeouts`: bounds on how long a silent source can hold a run. A network that
/// drops packets without a reset would otherwise hang the run until the scheduler kills it.
#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsConfig {
    /// Establishing a connection, all of it: resolving the host, the TCP connect, TLS, the
    /// protocol's startup and login, and the statements that set the session up (each host
    /// of a multi-host PostgreSQL URL in turn). Longer is a transient
    /// `SLUICE_SOURCE_CONNECT` naming the phase that stalled.
    pub connect_seconds: u64,
    /// Waiting for the next piece of the change stream once it flows (a binlog event, a
    /// page of PostgreSQL changes); a source silent for longer is a transient
    /// `SLUICE_SOURCE_CONNECT` and the next run resumes from the checkpoint.
    pub read_seconds: u64,
    /// PostgreSQL: waiting for a page's first row, while the server decodes the page (as
    /// long as the page's transactions are large). Longer is a transient
    /// `SLUICE_SOURCE_CONNECT`; it also bounds a path that keeps TCP alive but forwards
    /// nothing, which TCP keepalive cannot see.
    pub page_seconds: u64,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        TimeoutsConfig {
            connect_seconds: 10,
            read_seconds: 120,
            page_seconds: 300,
        }
    }
}

impl TimeoutsConfig {
    pub fn connect(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.connect_seconds)
    }

    pub fn read(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.read_seconds)
    }

    pub fn page(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.page_seconds)
    }

    /// The longest one statement of a control connection may run (catalog reads, slot and
    /// publication changes, a PostgreSQL slot advance — which decodes WAL as a page does —
    /// MySQL's binlog coordinates): the larger of `page_seconds` and `read_seconds`.
    pub fn statement(&self) -> std::time::Duration {
        self.page().max(self.read())
    }
}

/// A source URL read from a secret: its `Debug` form is redacted, so it cannot reach a
/// log through a `{:?}` of the config.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(url: String) -> SecretUrl {
        SecretUrl(url)
    }

    /// The URL itself, for the connection.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretUrl(***)")
    }
}

/// The engine a source URL names, by its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Postgres,
    /// MySQL and MariaDB (`mysql://`).
    MySql,
    /// SQL Server CDC change tables (`sqlserver://`).
    SqlServer,
}

/// Chooses the engine from the URL's scheme.
pub fn engine_for_url(url: &str) -> Result<Engine> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("postgres" | "postgresql") => Ok(Engine::Postgres),
        Some("mysql") => Ok(Engine::MySql),
        Some("sqlserver") => Ok(Engine::SqlServer),
        _ => Err(Error::new(
            Code::ConfigUnsupportedSource,
            format!(
                "source URL {} names no supported engine",
                crate::redact::redact_url(url)
            ),
        )
        .hint("use postgres:// (or postgresql://) for PostgreSQL, mysql:// for MySQL and MariaDB, sqlserver:// for SQL Server")),
    }
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
    /// Default in-memory part of a transaction, 24 MiB: with the part writers' batches
    /// and the process itself, a drain of one transaction larger than it peaks under
    /// 64 MiB (bench one_big_txn: 55.3 MiB; 64.6 MiB at 32).
    pub const DEFAULT_TRANSACTION_MEMORY: u64 = 24 * 1024 * 1024;
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
    /// docs/postgresql.md). When false, a missing resource is a prerequisite error naming the
    /// statement to run.
    #[serde(default = "yes")]
    pub create: bool,
    /// Let a job without a checkpoint start from a slot that exists already although this
    /// job's state does not record creating it (a slot the operator created for it, or a
    /// job whose state was moved). Off: such a slot is refused (`SLUICE_SOURCE_SLOT_NOT_OURS`).
    #[serde(default)]
    pub adopt_slot: bool,
    /// Changes per `pg_logical_slot_peek_binary_changes` call short of the bound. Every
    /// page ends with a flush + checkpoint + slot advance, so the next page decodes only new
    /// WAL. Unset: 2,000,000, grown with the slot's restart lag (docs/postgresql.md);
    /// set (this or `page_wal_bytes`): a fixed bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_changes: Option<u64>,
    /// WAL bytes one page reads at most, from the slot's position — or the rest of the
    /// backlog, when that is within twice this (a window in which no transaction commits
    /// is widened): bounds what the server materializes per page when rows are wide.
    /// Unset: 128 MiB, grown to four times the slot's restart lag when that is larger;
    /// set (this or `page_changes`): a fixed bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_wal_bytes: Option<u64>,
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
    #[serde(default = "default_window_changes")]
    pub window_changes: u64,
}

fn yes() -> bool {
    true
}

fn default_window_changes() -> u64 {
    500_000
}
