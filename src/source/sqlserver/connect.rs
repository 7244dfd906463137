//! Connecting to SQL Server: URL parsing, `source.tls` mapped onto tiberius, and error
//! classification.
//!
//! URL: `sqlserver://user:password@host[:1433]/database`; TLS comes from `source.tls`
//! like every engine. The legacy URL parameters `encrypt=true|false`, `ca_file=PATH`
//! and `trust_server_certificate=true` are still understood, but only without
//! `source.tls` settings (both at once is a config error), and they never relax the
//! gate: `encrypt=false` or `trust_server_certificate=true` for a non-loopback host is
//! refused.
//!
//! `source.tls` on tiberius: `disable` → no TDS encryption (loopback only, the gate);
//! `require` → encryption required, certificate not checked (`trust_cert`; tiberius
//! skips the handshake-signature check too), with a warning; `verify-full` → encryption
//! required, chain checked against the Web PKI roots plus `ca_file` / `ca_pem_env`
//! (tiberius adds a CA to its base roots, it cannot replace them), host name checked;
//! `verify-ca` is refused (`SLUICE_CONFIG_INVALID`): tiberius always checks the host
//! name.
//!
//! Guarantees: [`connect`] is the only way to open a connection, and its whole
//! establishment (DNS, TCP, prelogin, TLS, login, a gateway's redirect) ends within
//! `source.timeouts.connect_seconds`, past which it is a transient
//! `SLUICE_SOURCE_CONNECT` naming the phase that stalled; the TLS decision is taken
//! before any packet is sent, and re-taken for the address an Azure SQL gateway
//! redirects to; the URL in every message is redacted;
//! login failures are refusals, a rejected certificate is `SLUICE_SOURCE_TLS`, network
//! failures are transient.

use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use rustls::pki_types::CertificateDer;

use crate::config::TimeoutsConfig;
use crate::error::{Code, Error, Result};
use crate::redact::{is_loopback_host, redact_url};
use crate::source::establish::watched::{Progress, Stage, Watched};
use crate::source::establish::{Deadline, Phase, resolve, stalled, tcp_connect};
use crate::tls::{TlsConfig, TlsMode, checked_mode};

/// An open connection.
pub type SqlClient = Client<Compat<Watched<TcpStream>>>;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// No TLS at all (loopback only).
    Plain,
    /// TLS required, chain and host name verified against the Web PKI roots plus these
    /// CA certificates (`source.tls`) and the URL's `ca_file`.
    Verified(Vec<CertificateDer<'static>>),
    /// TLS required, certificate not verified.
    Unverified,
}

impl Target {
    /// Whether the URL carries any of the legacy TLS parameters.
    fn has_url_tls(&self) -> bool {
        self.encrypt.is_some() || self.ca_file.is_some() || self.trust_server_certificate
    }
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

/// The TLS gate for `url` without connecting or reading any file: refuses exactly what
/// [`connect`] would refuse before sending a packet. `sluice validate` and the job room
/// run it before any lease is taken.
pub fn check_transport(url: &str, tls: &TlsConfig) -> Result<()> {
    let target = parse_url(url)?;
    let without_ca = TlsConfig {
        ca_file: None,
        ca_pem_env: None,
        ..tls.clone()
    };
    if target.has_url_tls() && (tls.ca_file.is_some() || tls.ca_pem_env.is_some()) {
        // The conflict transport_for reports; reported here without reading the CA.
        return transport_for(&target, tls).map(|_| ());
    }
    match checked_mode(tls, &target.host)? {
        TlsMode::VerifyFull | TlsMode::Require | TlsMode::Disable => {
            transport_for(&target, &without_ca).map(|_| ())
        }
        TlsMode::VerifyCa => transport_for(&target, tls).map(|_| ()),
    }
}

/// The TLS decision for `target` under `source.tls` (pure apart from reading the CA).
pub fn transport_for(target: &Target, tls: &TlsConfig) -> Result<Transport> {
    let tls_set = tls.mode.is_some() || tls.ca_file.is_some() || tls.ca_pem_env.is_some();
    if target.has_url_tls() && tls_set {
        return Err(Error::new(
            Code::ConfigInvalid,
            "the SQL Server URL sets encrypt / ca_file / trust_server_certificate and source.tls is set too",
        )
        .hint("keep TLS settings in source.tls only (mode, ca_file) and remove them from the URL"));
    }
    if target.has_url_tls() {
        return url_transport(target);
    }
    match checked_mode(tls, &target.host)? {
        TlsMode::Disable => Ok(Transport::Plain),
        TlsMode::Require => Ok(Transport::Unverified),
        TlsMode::VerifyFull => Ok(Transport::Verified(
            crate::tls::ca_certificates(tls)?.unwrap_or_default(),
        )),
        TlsMode::VerifyCa => Err(Error::new(
            Code::ConfigInvalid,
            "source.tls.mode verify-ca is not supported for SQL Server",
        )
        .hint("use verify-full (the certificate must name the host in the URL), or require")),
    }
}

/// The legacy URL parameters: plain only for loopback (unless asked for TLS), verified
/// TLS otherwise.
fn url_transport(target: &Target) -> Result<Transport> {
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
            "remove encrypt=false: sluice reaches a non-loopback server only over TLS (source.tls)",
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
        .hint("remove trust_server_certificate and set source.tls.ca_file to the server's CA bundle (RDS: the region's certificate bundle)"));
    }
    Ok(match (loopback, target.encrypt) {
        (true, None | Some(false)) => Transport::Plain,
        (true, Some(true)) if target.trust_server_certificate => Transport::Unverified,
        _ => Transport::Verified(Vec::new()),
    })
}

/// The tiberius configuration for a target that passed the gate.
pub fn tiberius_config(target: &Target, transport: &Transport) -> Config {
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
        Transport::Verified(cas) => {
            config.encryption(EncryptionLevel::Required);
            config.trust_webpki_roots();
            if let Some(ca) = &target.ca_file {
                config.trust_cert_ca(ca);
            }
            for ca in cas {
                config.trust_cert_ca_bundle(ca.as_ref().to_vec());
            }
        }
    }
    config
}

/// Opens one connection (following one gateway redirect, through the same gate), the
/// whole establishment — DNS, TCP, prelogin, TLS and login, the redirect's too — bounded
/// by `timeouts.connect_seconds`; past it, a transient `SLUICE_SOURCE_CONNECT` naming the
/// phase that stalled (no answer to the prelogin, or the TLS / login exchange unfinished).
pub async fn connect(url: &str, tls: &TlsConfig, timeouts: &TimeoutsConfig) -> Result<SqlClient> {
    let deadline = Deadline::after(timeouts.connect());
    let redacted = redact_url(url);
    let mut target = parse_url(url)?;
    for _ in 0..2 {
        let transport = transport_for(&target, tls)?;
        if transport == Transport::Unverified {
            crate::tls::warn_unauthenticated(&target.host);
        }
        let config = tiberius_config(&target, &transport);
        let addrs = resolve(&target.host, target.port, &redacted, &deadline).await?;
        let tcp = tcp_connect(&addrs, &redacted, &deadline).await?;
        let at = tcp
            .peer_addr()
            .map_or_else(|_| target.host.clone(), |a| a.to_string());
        let progress = Progress::starting_at(Stage::Login);
        let stream = Watched::new(tcp, progress.clone());
        let login = deadline.run(Client::connect(config, stream.compat_write()));
        match login.await {
            None => {
                let phase = match progress.now() {
                    (_, false) => Phase::NoAnswer {
                        at,
                        awaited: "prelogin response",
                    },
                    (_, true) => Phase::Login { at },
                };
                return Err(stalled(&redacted, &phase, deadline.limit()));
            }
            Some(Ok(client)) => return Ok(client),
            Some(Err(tiberius::error::Error::Routing { host, port })) => {
                tracing::info!(%host, port, "SQL Server gateway redirected the connection");
                target.host = host;
                target.port = port;
            }
            Some(Err(e)) => return Err(connect_error(url, e)),
        }
    }
    Err(Error::new(
        Code::SourceConnect,
        format!("connecting to {redacted}: redirected more than once"),
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
            Code::SourceTls,
            "the TLS handshake failed: the server certificate must chain to a Web PKI root or to source.tls.ca_file, and name the host in the URL",
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
            "grant the source user SELECT ON SCHEMA::cdc, SELECT on the table, and membership in the capture instance's gating role (docs/sqlserver.md: SQL Server prerequisites)",
        ),
        // "An insufficient number of arguments were supplied …": the LSN range is outside
        // the capture instance's valid range (the cleanup job passed it).
        313 => (
            Code::SourceLogGap,
            "the capture instance no longer holds the changes the run was reading: re-baseline the table and raise the cleanup retention",
        ),
        208 => (
            Code::SourcePrerequisite,
            "an object is missing: CDC may have been disabled for the table or database; see the prerequisites in docs/sqlserver.md",
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
        let gate = |url: &str| transport_for(&parse_url(url).unwrap(), &TlsConfig::default());
        let verified = Transport::Verified(Vec::new());
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
            verified
        );
        assert_eq!(
            gate("sqlserver://u@localhost/db?encrypt=true&trust_server_certificate=true").unwrap(),
            Transport::Unverified
        );
        assert_eq!(gate("sqlserver://u@db.example.com/db").unwrap(), verified);
        assert_eq!(
            gate("sqlserver://u@10.0.0.5/db?encrypt=true").unwrap(),
            verified
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

    fn tls(mode: TlsMode) -> TlsConfig {
        TlsConfig {
            mode: Some(mode),
            ..TlsConfig::default()
        }
    }

    #[test]
    fn source_tls_modes_map_onto_tiberius() {
        let remote = parse_url("sqlserver://u:secret@db.example.com/app").unwrap();
        let local = parse_url("sqlserver://u@127.0.0.1/app").unwrap();
        let err = transport_for(&remote, &tls(TlsMode::Disable)).unwrap_err();
        assert_eq!(err.code(), Code::ConfigTlsRequired);
        assert!(err.to_string().contains("source.tls.mode"), "{err}");
        assert_eq!(
            transport_for(&local, &tls(TlsMode::Disable)).unwrap(),
            Transport::Plain
        );
        assert_eq!(
            transport_for(&remote, &tls(TlsMode::Require)).unwrap(),
            Transport::Unverified
        );
        assert_eq!(
            transport_for(&remote, &tls(TlsMode::VerifyFull)).unwrap(),
            Transport::Verified(Vec::new())
        );
        // Loopback with verify-full is TLS too (the default for loopback is plain).
        assert_eq!(
            transport_for(&local, &tls(TlsMode::VerifyFull)).unwrap(),
            Transport::Verified(Vec::new())
        );
        let err = transport_for(&remote, &tls(TlsMode::VerifyCa)).unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(err.to_string().contains("verify-ca"), "{err}");
    }

    #[test]
    fn the_configured_ca_is_loaded_through_source_tls() {
        let dir = tempfile::tempdir().unwrap();
        let remote = parse_url("sqlserver://u@db.example.com/app").unwrap();
        let missing = TlsConfig {
            ca_file: Some(dir.path().join("missing.pem")),
            ..TlsConfig::default()
        };
        let err = transport_for(&remote, &missing).unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(err.to_string().contains("source.tls.ca_file"), "{err}");
        // A real certificate (the local test CA when the stack is up) is carried through.
        if let Ok(ca) = std::env::var("SLUICE_TEST_TLS_CA_FILE") {
            let with_ca = TlsConfig {
                ca_file: Some(ca.into()),
                ..TlsConfig::default()
            };
            match transport_for(&remote, &with_ca).unwrap() {
                Transport::Verified(cas) => assert_eq!(cas.len(), 1),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn url_tls_parameters_and_source_tls_do_not_mix() {
        let target = parse_url("sqlserver://u@db.example.com/app?encrypt=true").unwrap();
        let err = transport_for(&target, &tls(TlsMode::Require)).unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(err.hint_text().unwrap().contains("source.tls"), "{err:?}");
    }

    #[test]
    fn tiberius_gets_the_encryption_and_trust_of_each_transport() {
        let target = parse_url("sqlserver://u@db.example.com/app").unwrap();
        // tiberius keeps its trust settings private; its Debug output shows them.
        for transport in [
            Transport::Plain,
            Transport::Unverified,
            Transport::Verified(vec![CertificateDer::from(vec![0u8; 4])]),
        ] {
            let config = tiberius_config(&target, &transport);
            let debug = format!("{config:?}");
            let want: &[&str] = match transport {
                Transport::Plain => &["NotSupported", "bypass: false"],
                Transport::Unverified => &["Required", "bypass: true"],
                Transport::Verified(_) => &["Required", "WebpkiRoots", "Bundle", "bypass: false"],
            };
            for want in want {
                assert!(debug.contains(want), "{transport:?} lacks {want}: {debug}");
            }
        }
    }
}
