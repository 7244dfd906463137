//! Resource claims across separately deployed jobs: two jobs reading one replication slot
//! (or one MySQL `server_id`) silently corrupt each other, so every job claims its source
//! resources in the state store before it takes its lease.
//!
//! Guarantees: a resource is named without secrets and, for PostgreSQL, by the server's
//! own identity ([`claim_names`]: `pg:system=<system identifier>/db=<name>/oid=<oid>/slot/<name>`,
//! asked of the server, so `localhost` and `127.0.0.1` name one claim; a claim under the
//! earlier host-based name `pg:<host>:<port>/<db>/slot/<name>` is still honoured);
//! MySQL `mysql:server_uuid=<uuid>/server_id/<n>` (MariaDB: `@@hostname`, `@@port` and
//! `@@server_id` in place of the UUID) with the replica id the dump registers with —
//! configured or derived from the job name —, the earlier `mysql:<host>:<port>/…` also
//! honoured; a claim is one conditional write in
//! the store (first job wins, forever, until an operator removes it); a second job is
//! refused at start with `SLUICE_CONFIG_RESOURCE_CLAIMED` naming the job that holds it.
//! Claims protect only jobs that share one state store (directory or table).
//!
//! A PostgreSQL job also records, before its first run creates the slot, that it created
//! it (`…/slot/<name>/created-by`); a run without a checkpoint takes an existing slot only
//! with that record or `source.postgres.adopt_slot` ([`guard_first_start`]).

use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::redact::redact_url;
use crate::state::{ClaimOutcome, StateStore};

/// The source resources this job's config uses, as claim names.
pub fn resources(config: &Config) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(pg) = &config.source.postgres {
        let url = config.source_url()?;
        out.push(format!("{}/slot/{}", pg_server(&url)?, pg.slot));
    } else if config.source.sqlserver.is_none() {
        let url = config.source_url()?;
        if crate::source::engine_for_url(&url)? == crate::source::Engine::MySql {
            let server_id = config
                .source
                .mysql
                .clone()
                .unwrap_or_default()
                .server_id_for(&config.job);
            out.push(format!("{}/server_id/{server_id}", mysql_server(&url)?));
        }
    }
    Ok(out)
}

/// One resource claim: its name, keyed on the server's own identity where sluice can ask
/// the server for it, and the name earlier versions used (the host as written), still
/// honoured: a claim under it counts as a claim under `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimName {
    pub name: String,
    pub legacy: Option<String>,
}

/// The claims of this job's source resources, asking the server who it is: PostgreSQL
/// `pg:system=<system identifier>/db=<name>/oid=<oid>/slot/<slot>`, so two spellings of
/// one server (`localhost`, `127.0.0.1`, a DNS alias) name one claim; MySQL
/// `mysql:server_uuid=<uuid>/server_id/<replica id>`, MariaDB (no server UUID)
/// `mysql:mariadb/hostname=<@@hostname>/port=<@@port>/server_id=<@@server_id>/server_id/<replica id>`.
pub async fn claim_names(config: &Config) -> Result<Vec<ClaimName>> {
    let mut out = Vec::new();
    for legacy in resources(config)? {
        match &config.source.postgres {
            Some(pg) => out.push(ClaimName {
                name: format!(
                    "{}/slot/{}",
                    crate::source::postgres::server_name(config).await?,
                    pg.slot
                ),
                legacy: Some(legacy),
            }),
            None => {
                let (_, resource) = legacy.split_once("/server_id/").ok_or_else(|| {
                    Error::new(Code::Internal, format!("unexpected claim name {legacy}"))
                })?;
                out.push(ClaimName {
                    name: format!(
                        "{}/server_id/{resource}",
                        crate::source::mysql::server_name(config).await?
                    ),
                    legacy: Some(legacy),
                })
            }
        }
    }
    Ok(out)
}

/// `mysql:<host>:<port>` of a MySQL URL (port 3306 by default). Replica server ids are
/// per server, not per database, so the database is not part of the name.
pub fn mysql_server(url: &str) -> Result<String> {
    let opts = mysql_async::Opts::from_url(url).map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} is not a MySQL URL", redact_url(url)),
        )
        .hint("use mysql://user:password@host:3306/database (also for MariaDB)")
        .source(e)
    })?;
    Ok(format!(
        "mysql:{}:{}",
        opts.ip_or_hostname().to_ascii_lowercase(),
        opts.tcp_port()
    ))
}

/// `pg:<host>:<port>/<db>` of a PostgreSQL URL (first host; port 5432 and database =
/// user name by default, as libpq does).
pub fn pg_server(url: &str) -> Result<String> {
    let parsed: tokio_postgres::Config = url.parse().map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} is not a PostgreSQL URL", redact_url(url)),
        )
        .hint("use postgres://user:password@host:5432/dbname")
        .source(e)
    })?;
    let host = match parsed.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.to_ascii_lowercase(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = parsed.get_ports().first().copied().unwrap_or(5432);
    let db = parsed
        .get_dbname()
        .or(parsed.get_user())
        .unwrap_or("postgres");
    Ok(format!("pg:{host}:{port}/{db}"))
}

/// The refusal for a resource another job holds (the drain and `doctor` both use it).
pub fn refusal(resource: &str, job: &str, holder: &str) -> Error {
    Error::new(
        Code::ConfigResourceClaimed,
        format!("{resource} is claimed by job {holder:?}, so job {job:?} may not use it"),
    )
    .hint(format!(
        "{}; if job {holder} is gone for good, remove its claim: `sluice claims release '{resource}' --config FILE --force`",
        if resource.contains("/server_id/") {
            format!("give job {job} its own source.mysql.server_id, unique among the server's replicas and jobs (two binlog readers with one id make the server drop one)")
        } else {
            format!("give job {job} its own source.postgres.slot")
        }
    ))
}

/// The job holding `claim` in `claims`, under its name or its legacy name.
pub fn holder<'a>(claims: &'a [crate::state::Claim], claim: &ClaimName) -> Option<&'a str> {
    claims
        .iter()
        .find(|c| c.resource == claim.name)
        .or_else(|| {
            claim
                .legacy
                .as_ref()
                .and_then(|legacy| claims.iter().find(|c| &c.resource == legacy))
        })
        .map(|c| c.job.as_str())
}

/// Claims every resource of the job (under the server's identity); refuses when another
/// job holds one, under its name or its legacy host-based name.
pub async fn claim_all(config: &Config, store: &dyn StateStore) -> Result<()> {
    let names = claim_names(config).await?;
    if names.iter().any(|c| c.legacy.is_some()) {
        let claims = store.list_claims().await?;
        for claim in &names {
            if let Some(legacy) = &claim.legacy
                && let Some(holder) = claims.iter().find(|c| &c.resource == legacy)
                && holder.job != config.job
            {
                return Err(refusal(legacy, &config.job, &holder.job));
            }
        }
    }
    for resource in names.into_iter().map(|c| c.name) {
        match store.claim(&resource, &config.job).await? {
            ClaimOutcome::Ours => {}
            ClaimOutcome::HeldBy(holder) => return Err(refusal(&resource, &config.job, &holder)),
            ClaimOutcome::Unsupported => {
                tracing::warn!(store = %store.describe(), %resource, "this state store cannot record resource claims; two jobs on one resource are not detected");
            }
        }
    }
    Ok(())
}

/// The record that `config`'s job created (or was about to create) its slot: a claim
/// named after the slot's claim, held by the job.
async fn slot_creator(config: &Config) -> Result<Option<String>> {
    let Some(pg) = &config.source.postgres else {
        return Ok(None);
    };
    Ok(Some(format!(
        "{}/slot/{}/created-by",
        crate::source::postgres::server_name(config).await?,
        pg.slot
    )))
}

/// Before a run without a checkpoint opens the source (PostgreSQL): a slot that exists
/// already is taken only when this job's state records creating it, or with
/// `source.postgres.adopt_slot` (`SLUICE_SOURCE_SLOT_NOT_OURS` otherwise); a slot that
/// does not exist yet is recorded as this job's *before* the stream creates it, so a first
/// run that dies after creating it still resumes. MySQL and SQL Server have no such
/// object: the `server_id` claim protects a MySQL stream.
pub async fn guard_first_start(config: &Config, store: &dyn StateStore) -> Result<()> {
    let (Some(pg), Some(creator)) = (&config.source.postgres, slot_creator(config).await?) else {
        return Ok(());
    };
    if crate::source::postgres::slot_exists(config).await? {
        let recorded = store
            .list_claims()
            .await?
            .iter()
            .any(|c| c.resource == creator && c.job == config.job);
        crate::source::postgres::slot::check_adoption(&pg.slot, recorded, pg.adopt_slot)?;
        if !recorded {
            tracing::warn!(slot = %pg.slot, "adopting an existing slot (source.postgres.adopt_slot)");
        }
        return Ok(());
    }
    match store.claim(&creator, &config.job).await? {
        ClaimOutcome::Ours => Ok(()),
        ClaimOutcome::HeldBy(holder) => Err(refusal(&creator, &config.job, &holder)),
        ClaimOutcome::Unsupported => {
            tracing::warn!(store = %store.describe(), "this state store cannot record that the job created its slot; a crashed first run will need source.postgres.adopt_slot");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_carry_no_secret() {
        assert_eq!(
            pg_server("postgres://u:secret@DB.example.com:6432/app").unwrap(),
            "pg:db.example.com:6432/app"
        );
        assert_eq!(
            pg_server("postgres://u@10.0.0.1").unwrap(),
            "pg:10.0.0.1:5432/u"
        );
        assert_eq!(
            pg_server("host=h port=5433 dbname=d user=u password=p").unwrap(),
            "pg:h:5433/d"
        );
        assert_eq!(
            mysql_server("mysql://u:secret@DB.example.com:3307/app").unwrap(),
            "mysql:db.example.com:3307"
        );
        assert_eq!(
            mysql_server("mysql://u@10.0.0.1/app").unwrap(),
            "mysql:10.0.0.1:3306"
        );
        let err = mysql_server("mysql://u:secret@[bad/db").unwrap_err();
        assert!(!err.chain().contains("secret"), "{err}");
    }

    #[test]
    fn a_mysql_job_claims_its_replica_server_id() {
        let config = |job: &str, mysql: &str| {
            Config::parse(
                &format!(
                    "job: {job}\nsource:\n  url: mysql://root@127.0.0.1:33069/app\n  tables: [t]\n{mysql}\
                     destination: {{ type: local, path: o }}\nstate: {{ type: local, path: s }}\n"
                ),
                "t",
            )
            .unwrap()
        };
        assert_eq!(
            resources(&config("a", "  mysql: { server_id: 4242 }\n")).unwrap(),
            ["mysql:127.0.0.1:33069/server_id/4242"]
        );
        let derived = crate::config::MysqlConfig::default().server_id_for("a");
        assert_eq!(
            resources(&config("a", "")).unwrap(),
            [format!("mysql:127.0.0.1:33069/server_id/{derived}")]
        );
        assert_ne!(
            resources(&config("a", "")).unwrap(),
            resources(&config("b", "")).unwrap()
        );
    }
}
