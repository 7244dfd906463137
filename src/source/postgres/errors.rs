//! Classifying PostgreSQL failures: a connection that could not be established, and a
//! statement that failed on an open one.
//!
//! Guarantees: a rejected certificate or a server declining TLS is `SLUICE_SOURCE_TLS`, a
//! wrong password a refusal (`SLUICE_SOURCE_AUTH`), a missing grant
//! `SLUICE_SOURCE_PREREQUISITE`, a busy slot `SLUICE_SOURCE_SLOT_BUSY`, anything on the
//! network transient; the URL in every message is redacted and the driver's error is kept
//! as the source.

use tokio_postgres::config::Host;

use crate::error::{Code, Error};
use crate::redact::redact_url;
use crate::tls::{handshake_hint, rustls_cause};

/// Classifies a connection failure.
pub fn connect_error(
    url: &str,
    config: &tokio_postgres::Config,
    e: tokio_postgres::Error,
) -> Error {
    let target = redact_url(url);
    if let Some(cause) = rustls_cause(&e) {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(name)) => name.clone(),
            _ => "the server".to_owned(),
        };
        return Error::new(
            Code::SourceTls,
            format!("TLS handshake with {target} failed: {cause}"),
        )
        .hint(handshake_hint(cause, &host))
        .source(e);
    }
    let mut declined = false;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        declined |= c.to_string().contains("server does not support TLS");
        cause = c.source();
    }
    if declined {
        return Error::new(
            Code::SourceTls,
            format!("{target} does not accept TLS connections"),
        )
        .hint("enable ssl on the server, or (loopback only) set source.tls.mode to disable")
        .source(e);
    }
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
            if state == "57014" {
                err = err.hint("the statement ran longer than the session's statement_timeout (on a control connection the larger of source.timeouts.page_seconds and read_seconds): a lock held by another session, a long transaction, or a busy server; nothing was read, and the next run tries again");
            } else if let Some(detail) = db.detail() {
                err = err.hint(detail.to_owned());
            } else if state == "42501" && db.message().contains("replication") {
                err = err.hint("the source user needs the REPLICATION attribute: ALTER ROLE <user> WITH REPLICATION (see infra/sql/postgres/grants.sql)");
            } else if state == "42501" {
                err = err.hint("grant the source user SELECT on every captured table and the rest of infra/sql/postgres/grants.sql");
            }
            err
        }
        None => Error::new(Code::SourceQuery, format!("{what}: connection lost"))
            .hint("the server closed the connection or the network failed; the next run resumes from the checkpoint")
            .source(e),
    }
}
