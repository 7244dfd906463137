//! Connecting to MySQL / MariaDB: URL parsing, the TLS gate, and error classification.
//!
//! Guarantees: a host that is not loopback is only ever reached over TLS (rustls with
//! ring, the server certificate verified against the Web PKI roots, the host name
//! checked), decided before any packet is sent, whatever the URL's own TLS parameters
//! say; the connection never silently switches to a Unix socket; the URL in every
//! message is redacted; a wrong password is a refusal, a network failure is transient.

use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};

use crate::error::{Code, Error, Result};
use crate::redact::{is_loopback_host, redact_url};

/// MySQL server error numbers sluice reacts to.
pub mod errno {
    /// `ER_DBACCESS_DENIED_ERROR`.
    pub const DB_ACCESS_DENIED: u16 = 1044;
    /// `ER_ACCESS_DENIED_ERROR`: wrong user or password.
    pub const ACCESS_DENIED: u16 = 1045;
    /// `ER_BAD_DB_ERROR`.
    pub const BAD_DB: u16 = 1049;
    /// `ER_UNKNOWN_COM_ERROR`: the peer does not implement the command (a proxy).
    pub const UNKNOWN_COMMAND: u16 = 1047;
    /// `ER_TOO_MANY_CONNECTIONS`.
    pub const TOO_MANY_CONNECTIONS: u16 = 1040;
    /// `ER_TABLEACCESS_DENIED_ERROR`.
    pub const TABLE_ACCESS_DENIED: u16 = 1142;
    /// `ER_SPECIFIC_ACCESS_DENIED_ERROR`: a missing global privilege.
    pub const SPECIFIC_ACCESS_DENIED: u16 = 1227;
    /// `ER_MASTER_FATAL_ERROR_READING_BINLOG`.
    pub const FATAL_READING_BINLOG: u16 = 1236;
    /// `ER_NOT_SUPPORTED_YET` / `ER_PARSE_ERROR`: a statement this server does not know.
    pub const PARSE_ERROR: u16 = 1064;
}

/// Whether the connection must use TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Plain,
    Tls,
}

/// The TLS decision: plain only for a loopback host.
pub fn transport_for(host: &str) -> Transport {
    if is_loopback_host(host) {
        Transport::Plain
    } else {
        Transport::Tls
    }
}

/// Parses the URL into connection options with the TLS gate applied.
pub fn options(url: &str) -> Result<Opts> {
    let opts = Opts::from_url(url).map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} is not a MySQL URL", redact_url(url)),
        )
        .hint("use mysql://user:password@host:3306/database (also for MariaDB)")
        .source(e)
    })?;
    let ssl = match transport_for(opts.ip_or_hostname()) {
        Transport::Plain => None,
        Transport::Tls => {
            // mysql_async builds its rustls config with the process-default provider;
            // installing ring is a no-op when one is already installed.
            let _ = rustls::crypto::ring::default_provider().install_default();
            Some(SslOpts::default())
        }
    };
    Ok(OptsBuilder::from_opts(opts)
        .ssl_opts(ssl)
        .prefer_socket(false)
        .stmt_cache_size(0)
        .into())
}

/// Opens one connection.
pub async fn connect(url: &str) -> Result<Conn> {
    let opts = options(url)?;
    Conn::new(opts).await.map_err(|e| connect_error(url, e))
}

/// Classifies a connection failure.
fn connect_error(url: &str, e: mysql_async::Error) -> Error {
    let target = redact_url(url);
    if let mysql_async::Error::Server(server) = &e {
        let (code, hint) = match server.code {
            errno::ACCESS_DENIED => (
                Code::SourceAuth,
                "check the user and password in the source URL (and the user's host part)",
            ),
            errno::BAD_DB | errno::DB_ACCESS_DENIED => (
                Code::SourcePrerequisite,
                "the database in the source URL does not exist or the user may not use it",
            ),
            errno::TOO_MANY_CONNECTIONS => (
                Code::SourceConnect,
                "the server has no free connections; retry later or raise max_connections",
            ),
            _ => (
                Code::SourceConnect,
                "check that the server is up and reachable",
            ),
        };
        return Error::new(code, format!("connecting to {target}: {}", server.message))
            .hint(hint)
            .source(e);
    }
    Error::new(
        Code::SourceConnect,
        format!("connecting to {target} failed"),
    )
    .hint("check the host, port, TLS and network path (security groups, VPC) to the server")
    .source(e)
}

/// The server error number of `e`, if the server answered with one.
pub fn server_errno(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(server) => Some(server.code),
        _ => None,
    }
}

/// Classifies a failure of a statement on an open connection.
pub fn query_error(what: &str, e: mysql_async::Error) -> Error {
    match &e {
        mysql_async::Error::Server(server) => {
            let message = format!("{what}: {} (error {})", server.message, server.code);
            match server.code {
                errno::SPECIFIC_ACCESS_DENIED | errno::TABLE_ACCESS_DENIED | errno::DB_ACCESS_DENIED => {
                    Error::new(Code::SourcePrerequisite, message)
                        .hint("grant the source user the privileges listed in the README's MySQL section: GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '<user>'@'<host>' (MariaDB ≥ 10.5: REPLICATION SLAVE, BINLOG MONITOR)")
                }
                _ => Error::new(Code::SourceQuery, message).hint(
                    "the statement failed on the server; the next run resumes from the checkpoint",
                ),
            }
            .source(e)
        }
        _ => Error::new(Code::SourceQuery, format!("{what}: connection lost"))
            .hint("the server closed the connection or the network failed; the next run resumes from the checkpoint")
            .source(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_goes_plain() {
        for (host, want) in [
            ("127.0.0.1", Transport::Plain),
            ("localhost", Transport::Plain),
            ("::1", Transport::Plain),
            ("db.internal", Transport::Tls),
            ("10.0.0.5", Transport::Tls),
        ] {
            assert_eq!(transport_for(host), want, "{host}");
        }
    }

    #[test]
    fn remote_urls_always_get_tls_whatever_they_ask_for() {
        let opts = options("mysql://u:p@db.example.com:3306/app?require_ssl=false").unwrap();
        assert!(opts.ssl_opts().is_some());
        assert!(!opts.prefer_socket());
        let local = options("mysql://root@127.0.0.1:33069/").unwrap();
        assert!(local.ssl_opts().is_none());
    }

    #[test]
    fn a_bad_url_is_a_config_error_without_the_password() {
        let err = options("mysql://u:secret@[bad/db").unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(!err.chain().contains("secret"));
    }
}
