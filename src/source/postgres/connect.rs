//! Connecting to PostgreSQL: URL parsing, the TLS gate, and error classification.
//!
//! Guarantees: a host that is not loopback is only ever reached over TLS (rustls, server
//! certificate verified against the Web PKI roots), decided before any packet is sent;
//! the URL in every message is redacted; authentication failures are refusals (retrying
//! will not fix a wrong password), network failures are transient.

use std::sync::Arc;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, NoTls};

use crate::error::{Code, Error, Result};
use crate::redact::{is_loopback_host, redact_url};

/// Whether the connection must use TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Plain,
    Tls,
}

/// The TLS decision for a set of hosts: plain only when every host is loopback or a
/// Unix socket.
pub fn transport_for(config: &tokio_postgres::Config) -> Transport {
    let all_local = config.get_hosts().iter().all(|h| match h {
        Host::Tcp(name) => is_loopback_host(name),
        #[cfg(unix)]
        Host::Unix(_) => true,
    });
    if all_local {
        Transport::Plain
    } else {
        Transport::Tls
    }
}

/// Opens one connection; the connection task runs on the current runtime.
pub async fn connect(url: &str) -> Result<Client> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} is not a PostgreSQL URL", redact_url(url)),
        )
        .hint("use postgres://user:password@host:5432/dbname")
        .source(e)
    })?;
    config.application_name("sluice");
    let connected = match transport_for(&config) {
        Transport::Plain => config.connect(NoTls).await.map(|(client, conn)| {
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "postgres connection closed");
                }
            });
            client
        }),
        Transport::Tls => {
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls_config()?);
            config.connect(tls).await.map(|(client, conn)| {
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "postgres connection closed");
                    }
                });
                client
            })
        }
    };
    connected.map_err(|e| connect_error(url, e))
}

fn tls_config() -> Result<rustls::ClientConfig> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(Code::Internal, "TLS configuration").source(e))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Classifies a connection failure.
fn connect_error(url: &str, e: tokio_postgres::Error) -> Error {
    let target = redact_url(url);
    if let Some(db) = e.as_db_error() {
        let state = db.code().code();
        let (code, hint) = match state {
            "28P01" | "28000" => (
                Code::SourceAuth,
                "check the user and password in the source URL and pg_hba.conf",
            ),
            "3D000" => (
                Code::SourcePrerequisite,
                "the database in the source URL does not exist",
            ),
            "53300" => (
                Code::SourceConnect,
                "the server has no free connection slots; retry later or raise max_connections",
            ),
            _ => (
                Code::SourceConnect,
                "check that the server is up and reachable",
            ),
        };
        return Error::new(
            code,
            format!(
                "connecting to {target}: {} (SQLSTATE {state})",
                db.message()
            ),
        )
        .hint(hint);
    }
    Error::new(
        Code::SourceConnect,
        format!("connecting to {target} failed"),
    )
    .hint("check the host, port and network path (security groups, VPC) to the server")
    .source(e)
}

/// Classifies a failure of a statement on an open connection.
pub fn query_error(what: &str, e: tokio_postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) => {
            let state = db.code().code();
            let code = match state {
                "42501" => Code::SourcePrerequisite,
                "55006" => Code::SourceSlotBusy,
                s if s.starts_with("08") || s.starts_with("57") || s.starts_with("53") => Code::SourceQuery,
                _ => Code::SourceQuery,
            };
            let mut err = Error::new(code, format!("{what}: {} (SQLSTATE {state})", db.message()));
            if let Some(detail) = db.detail() {
                err = err.hint(detail.to_owned());
            } else if state == "42501" {
                err = err.hint("grant the privileges listed in the README's PostgreSQL section to the source user");
            }
            err
        }
        None => Error::new(Code::SourceQuery, format!("{what}: connection lost"))
            .hint("the server closed the connection or the network failed; the next run resumes from the checkpoint")
            .source(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_goes_plain() {
        let cases = [
            ("postgres://u@127.0.0.1/db", Transport::Plain),
            ("postgres://u@localhost:5433/db", Transport::Plain),
            ("postgres://u@[::1]/db", Transport::Plain),
            ("postgres://u@db.internal/db", Transport::Tls),
            ("postgres://u@10.0.0.5/db", Transport::Tls),
            ("host=127.0.0.1,db.example.com user=u", Transport::Tls),
        ];
        for (url, want) in cases {
            let config: tokio_postgres::Config = url.parse().unwrap();
            assert_eq!(transport_for(&config), want, "{url}");
        }
    }
}
