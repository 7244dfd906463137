//! Connecting to SQL Server: URL parsing, the TLS gate, and error classification.
//!
//! URL: `sqlserver://user:password@host[:1433]/database[?encrypt=true|false&ca_file=PATH&trust_server_certificate=true]`.
//!
//! Guarantees: a host that is not loopback is only ever reached with TDS encryption
//! required (rustls, server certificate verified against the Web PKI roots plus an
//! optional `ca_file`, e.g. the AWS RDS bundle), decided before any packet is sent —
//! `encrypt=false` or `trust_server_certificate=true` for such a host is refused. A
//! loopback host is reached without TLS unless `encrypt=true`. The same gate applies to
//! the address an Azure SQL gateway redirects to. The URL in every message is redacted;
//! login failures are refusals, network failures transient.

use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use crate::error::{Code, Error, Result};
use crate::redact::{is_loopback_host, redact_url};

/// An open connection.
pub type SqlClient = Client<Compat<TcpStream>>;

/// The connection settings a URL asks for, before the TLS gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: String,
    /// `encrypt=` as given.
    pub encrypt: Option<bool>,
    /// `ca_file=`: an extra CA bundle (PEM or DER) to trust.
    pub ca_file: Option<String>,
    /// `trust_server_certificate=true`: skip verification (loopback only).
    pub trust_server_certificate: bool,
}

/// How the connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// No TLS at all (loopback only).
    Plain,
    /// TLS required, certificate verified.
    Verified,
    /// TLS required, certificate not verified (loopback only, on request).
    Unverified,
}

/// Parses a `sqlserver://` URL.
pub fn parse_url(url: &str) -> Result<Target> {
    let bad = |what: &str| {
        Error::new(
            Code::ConfigInvalid,
            format!(
                "source URL {} is not a SQL Server URL: {what}",
                redact_url(url)
            ),
        )
        .hint(
            "use sqlserver://user:password@host:1433/database (percent-encode special characters)",
        )
    };
    let parsed = url::Url::parse(url).map_err(|e| bad("unparsable").source(e))?;
    if parsed.scheme() != "sqlserver" {
        return Err(bad("the scheme is not sqlserver"));
    }
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let database = decode(parsed.path().trim_start_matches('/'));
    if database.is_empty() || database.contains('/') {
        return Err(bad("the path must name exactly one database"));
    }
    let user = decode(parsed.username());
    if user.is_empty() {
        return Err(bad("no user"));
    }
    let mut target = Target {
        host,
        port: parsed.port().unwrap_or(1433),
        database,
        user,
        password: parsed.password().map(decode).unwrap_or_default(),
        encrypt: None,
        ca_file: None,
        trust_server_certificate: false,
    };
    for (key, value) in parsed.query_pairs() {
        let flag = || match value.as_ref() {
            "true" | "yes" | "1" => Ok(true),
            "false" | "no" | "0" => Ok(false),
            _ => Err(bad(&format!("{key} must be true or false"))),
        };
        match key.as_ref() {
            "encrypt" => target.encrypt = Some(flag()?),
            "trust_server_certificate" => target.trust_server_certificate = flag()?,
            "ca_file" => target.ca_file = Some(value.into_owned()),
            other => return Err(bad(&format!("unknown parameter {other:?}"))),
        }
    }
    Ok(target)
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The TLS gate: plain only for loopback (unless asked for TLS), verified TLS otherwise.
pub fn transport_for(target: &Target) -> Result<Transport> {
    let loopback = is_loopback_host(&target.host);
    if !loopback && target.encrypt == Some(false) {
        return Err(Error::new(
            Code::ConfigTlsRequired,
            format!(
                "SQL Server host {} is not loopback, and the URL sets encrypt=false",
                target.host
            ),
        )
        .hint(
            "remove encrypt=false: sluice reaches a non-loopback server only over verified TLS",
        ));
    }
    if !loopback && target.trust_server_certificate {
        return Err(Error::new(
            Code::ConfigTlsRequired,
            format!(
                "SQL Server host {} is not loopback, and the URL sets trust_server_certificate=true",
                target.host
            ),
        )
        .hint("remove trust_server_certificate and pass the server's CA with ca_file=/path/to/bundle.pem (RDS: the region's certificate bundle)"));
    }
    Ok(match (loopback, target.encrypt) {
        (true, None | Some(false)) => Transport::Plain,
        (true, Some(true)) if target.trust_server_certificate => Transport::Unverified,
        _ => Transport::Verified,
    })
}

/// The tiberius configuration for a target that passed the gate.
pub fn tiberius_config(target: &Target, transport: Transport) -> Config {
    let mut config = Config::new();
    config.host(&target.host);
    config.port(target.port);
    config.database(&target.database);
    config.application_name("sluice");
    config.authentication(AuthMethod::sql_server(&target.user, &target.password));
    match transport {
        Transport::Plain => config.encryption(EncryptionLevel::NotSupported),
        Transport::Unverified => {
            config.encryption(EncryptionLevel::Required);
            config.trust_cert();
        }
        Transport::Verified => {
            config.encryption(EncryptionLevel::Required);
            config.trust_webpki_roots();
            if let Some(ca) = &target.ca_file {
                config.trust_cert_ca(ca);
            }
        }
    }
    config
}

/// Opens one connection (following one gateway redirect, through the same gate).
pub async fn connect(url: &str) -> Result<SqlClient> {
    let mut target = parse_url(url)?;
    for _ in 0..2 {
        let transport = transport_for(&target)?;
        let config = tiberius_config(&target, transport);
        let tcp = TcpStream::connect(config.get_addr()).await.map_err(|e| {
            Error::new(
                Code::SourceConnect,
                format!("connecting to {} failed", redact_url(url)),
            )
            .hint("check the host, port and network path (security groups, VPC, firewall) to the server")
            .source(e)
        })?;
        let _ = tcp.set_nodelay(true);
        match Client::connect(config, tcp.compat_write()).await {
            Ok(client) => return Ok(client),
            Err(tiberius::error::Error::Routing { host, port }) => {
                tracing::info!(%host, port, "SQL Server gateway redirected the connection");
                target.host = host;
                target.port = port;
            }
            Err(e) => return Err(connect_error(url, e)),
        }
    }
    Err(Error::new(
        Code::SourceConnect,
        format!(
            "connecting to {}: redirected more than once",
            redact_url(url)
        ),
    )
    .hint("connect to the server the gateway names directly"))
}

/// Classifies a login failure.
fn connect_error(url: &str, e: tiberius::error::Error) -> Error {
    let target = redact_url(url);
    let (code, hint) = match &e {
        tiberius::error::Error::Server(token) => match token.code() {
            18456 => (
                Code::SourceAuth,
                "check the user and password in the source URL (SQL Server authentication must be enabled)",
            ),
            4060 => (
                Code::SourcePrerequisite,
                "the database in the source URL does not exist or the login has no user in it",
            ),
            _ => (
                Code::SourceConnect,
                "check that the server is up and accepts the login",
            ),
        },
        tiberius::error::Error::Tls(_) => (
            Code::SourceConnect,
            "the TLS handshake failed: the server certificate must chain to a Web PKI root or to ca_file=… in the URL, and name the host",
        ),
        _ => (
            Code::SourceConnect,
            "check that the server is up and reachable",
        ),
    };
    Error::new(code, format!("connecting to {target} failed"))
        .hint(hint)
        .source(e)
}

/// Classifies a failure of a statement on an open connection.
pub fn query_error(what: &str, e: tiberius::error::Error) -> Error {
    let Some(code) = e.code() else {
        return Error::new(Code::SourceQuery, format!("{what}: connection failed"))
            .hint("the server closed the connection or the network failed; the next run resumes from the checkpoint")
            .source(e);
    };
    let (kind, hint) = match code {
        229 | 230 | 262 | 297 | 300 => (
            Code::SourcePrerequisite,
            "grant the source user SELECT ON SCHEMA::cdc, SELECT on the table, and membership in the capture instance's gating role (README: SQL Server prerequisites)",
        ),
        // "An insufficient number of arguments were supplied …": the LSN range is outside
        // the capture instance's valid range (the cleanup job passed it).
        313 => (
            Code::SourceLogGap,
            "the capture instance no longer holds the changes the run was reading: re-baseline the table and raise the cleanup retention",
        ),
        208 => (
            Code::SourcePrerequisite,
            "an object is missing: CDC may have been disabled for the table or database; see the README's SQL Server prerequisites",
        ),
        _ => (
            Code::SourceQuery,
            "retry later; the next run resumes from the checkpoint",
        ),
    };
    Error::new(kind, format!("{what}: SQL Server error {code}"))
        .hint(hint)
        .source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_decoding_and_defaults() {
        let t = parse_url("sqlserver://sluice:p%40ss@db.internal/app%20db?ca_file=/etc/rds.pem")
            .unwrap();
        assert_eq!(t.host, "db.internal");
        assert_eq!(t.port, 1433);
        assert_eq!(t.database, "app db");
        assert_eq!((t.user.as_str(), t.password.as_str()), ("sluice", "p@ss"));
        assert_eq!(t.ca_file.as_deref(), Some("/etc/rds.pem"));
        let t =
            parse_url("sqlserver://sa@[::1]:14330/x?encrypt=true&trust_server_certificate=true")
                .unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.encrypt),
            ("::1", 14330, Some(true))
        );
        for bad in [
            "postgres://u@h/db",
            "sqlserver://u@h",
            "sqlserver://u@h/a/b",
            "sqlserver://h/db",
            "sqlserver://u@h/db?colour=blue",
            "sqlserver://u@h/db?encrypt=maybe",
        ] {
            let err = parse_url(bad).unwrap_err();
            assert_eq!(err.code(), Code::ConfigInvalid, "{bad}");
        }
        let err = parse_url("sqlserver://u:secret@h/a/b").unwrap_err();
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn only_loopback_goes_plain_or_unverified() {
        let gate = |url: &str| transport_for(&parse_url(url).unwrap());
        assert_eq!(
            gate("sqlserver://u@127.0.0.1/db").unwrap(),
            Transport::Plain
        );
        assert_eq!(
            gate("sqlserver://u@localhost/db?encrypt=false").unwrap(),
            Transport::Plain
        );
        assert_eq!(
            gate("sqlserver://u@localhost/db?encrypt=true").unwrap(),
            Transport::Verified
        );
        assert_eq!(
            gate("sqlserver://u@localhost/db?encrypt=true&trust_server_certificate=true").unwrap(),
            Transport::Unverified
        );
        assert_eq!(
            gate("sqlserver://u@db.example.com/db").unwrap(),
            Transport::Verified
        );
        assert_eq!(
            gate("sqlserver://u@10.0.0.5/db?encrypt=true").unwrap(),
            Transport::Verified
        );
        for refused in [
            "sqlserver://u@db.example.com/db?encrypt=false",
            "sqlserver://u@10.0.0.5/db?trust_server_certificate=true",
        ] {
            assert_eq!(
                gate(refused).unwrap_err().code(),
                Code::ConfigTlsRequired,
                "{refused}"
            );
        }
    }
}
