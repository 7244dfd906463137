//! Connecting to MySQL / MariaDB: URL parsing, `source.tls` mapped onto mysql_async's
//! rustls options, the bounded establishment, and error classification.
//!
//! Guarantees: [`connect`] is the only way to open a connection, and its whole
//! establishment (DNS, the `verify-ca` probe, TCP, greeting, TLS, login, the session's
//! setup) ends within `source.timeouts.connect_seconds`, past which it is a transient
//! `SLUICE_SOURCE_CONNECT` naming the phase that stalled; a control connection's
//! statements are each bounded client-side ([`bounded`]); the TLS decision is taken from
//! `source.tls` (never from the URL's own TLS parameters) before any packet is sent, and a non-loopback host is only ever reached
//! over TLS ([`crate::tls::checked_mode`]); the CA material is loaded by [`crate::tls`];
//! `verify-full` checks chain and host name, `verify-ca` the chain (see [`probe`] for how
//! the name check is lifted), `require` encrypts without authenticating and logs so; a
//! server that does not offer TLS is refused, never downgraded; the connection never
//! silently switches to a Unix socket; the URL in every message is redacted; a wrong
//! password is a refusal, a network failure is transient, a rejected certificate is
//! `SLUICE_SOURCE_TLS`.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};

use super::probe;
use crate::config::TimeoutsConfig;
use crate::error::{Code, Error, Result};
use crate::redact::redact_url;
use crate::source::establish::{Deadline, Phase, kernel, resolve, stalled};
use crate::tls::{TlsConfig, TlsMode, checked_mode, handshake_hint, rustls_cause};

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
    /// `ER_SECURE_TRANSPORT_REQUIRED` (MySQL 8): the server refuses plain-text sessions.
    pub const SECURE_TRANSPORT_REQUIRED: u16 = 3159;
}

/// mysql_async's TLS options for `mode` with the CA certificates `ca` (`None`: the Web
/// PKI roots); `None` means plain text. Pure.
pub fn ssl_opts(
    mode: TlsMode,
    ca: Option<Vec<rustls::pki_types::CertificateDer<'static>>>,
) -> Option<SslOpts> {
    let base = match ca {
        None => SslOpts::default(),
        // Only the configured CA: mysql_async adds its built-in roots unless told not to.
        Some(certs) => SslOpts::default()
            .with_root_certs(
                certs
                    .into_iter()
                    .map(|c| c.as_ref().to_vec().into())
                    .collect(),
            )
            .with_disable_built_in_roots(true),
    };
    match mode {
        TlsMode::Disable => None,
        TlsMode::Require => Some(base.with_danger_accept_invalid_certs(true)),
        // verify-ca is verify-full against a name the certificate holds (see `probe`).
        TlsMode::VerifyCa | TlsMode::VerifyFull => Some(base),
    }
}

/// The TLS gate for `url` without connecting or reading any file: refuses exactly what
/// [`connect`] would refuse before sending a packet. `sluice validate` and the job room
/// run it before any lease is taken.
pub fn check_transport(url: &str, tls: &TlsConfig) -> Result<()> {
    let opts = parse(url)?;
    checked_mode(tls, opts.ip_or_hostname()).map(|_| ())
}

fn parse(url: &str) -> Result<Opts> {
    Opts::from_url(url).map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} is not a MySQL URL", redact_url(url)),
        )
        .hint("use mysql://user:password@host:3306/database (also for MariaDB; percent-encode @ / : ? # % in the password)")
        .source(e)
    })
}

/// Parses the URL into connection options with `source.tls` applied (for `verify-ca`
/// without the certificate name, which [`connect`] adds). No I/O beyond reading the CA.
pub fn options(url: &str, tls: &TlsConfig) -> Result<Opts> {
    Ok(prepare(url, tls)?.0)
}

/// The options and the mode in force for the URL's host.
fn prepare(url: &str, tls: &TlsConfig) -> Result<(Opts, TlsMode)> {
    let opts = parse(url)?;
    let mode = checked_mode(tls, opts.ip_or_hostname())?;
    let ca = match mode {
        TlsMode::Disable | TlsMode::Require => None,
        TlsMode::VerifyCa | TlsMode::VerifyFull => crate::tls::ca_certificates(tls)?,
    };
    if mode != TlsMode::Disable {
        // mysql_async builds its rustls config with the process-default provider;
        // installing ring is a no-op when one is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let opts = OptsBuilder::from_opts(opts)
        .ssl_opts(ssl_opts(mode, ca))
        // Keepalive probes find a peer that vanished while the connection sat idle.
        .tcp_keepalive(Some(KEEPALIVE))
        .prefer_socket(false)
        .stmt_cache_size(0)
        .into();
    Ok((opts, mode))
}

/// TCP keepalive idle time of every source connection.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);

/// The statements that set a session up, run as the last step of its bounded
/// establishment (`what` names them in messages).
#[derive(Debug, Clone, Copy, Default)]
pub struct Session<'a> {
    setup: Option<(&'a str, &'a str)>,
}

impl<'a> Session<'a> {
    /// A session used as the server left it.
    pub fn plain() -> Session<'a> {
        Session::default()
    }

    /// A session set up by `statements`.
    pub fn setup(what: &'a str, statements: &'a str) -> Session<'a> {
        Session {
            setup: Some((what, statements)),
        }
    }
}

/// Opens one connection, the whole establishment — the DNS lookup, the `verify-ca`
/// probe, mysql_async's TCP connect, greeting, TLS and login, and the session's setup —
/// bounded by `timeouts.connect_seconds`; past it, a transient `SLUICE_SOURCE_CONNECT`
/// naming the phase that stalled. The lookup and the probe are sluice's own steps;
/// inside mysql_async's `Conn::new` the phase is what the kernel reports for its socket
/// ([`kernel`]): no answer to the TCP connect, or connected and the handshake unfinished.
/// No other connection is opened to find out (the server counts aborted connections
/// against `max_connect_errors`).
pub async fn connect(
    url: &str,
    tls: &TlsConfig,
    timeouts: &TimeoutsConfig,
    session: &Session<'_>,
) -> Result<Conn> {
    let deadline = Deadline::after(timeouts.connect());
    let (opts, mode) = prepare(url, tls)?;
    let target = redact_url(url);
    let host = opts.ip_or_hostname().to_owned();
    let addrs = resolve(&host, opts.tcp_port(), &target, &deadline).await?;
    let ips: Vec<std::net::IpAddr> = addrs.iter().map(|a| a.ip()).collect();
    let mut opts: Opts = OptsBuilder::from_opts(opts).resolved_ips(Some(ips)).into();
    match mode {
        TlsMode::Require => crate::tls::warn_unauthenticated(&host),
        TlsMode::VerifyCa => {
            let name = probe::certificate_name(&addrs, &host, tls, &target, &deadline).await?;
            if let Some(name) = name {
                let ssl = opts
                    .ssl_opts()
                    .cloned()
                    .map(|s| s.with_danger_tls_hostname_override(Some(name)));
                opts = OptsBuilder::from_opts(opts).ssl_opts(ssl).into();
            }
        }
        TlsMode::Disable | TlsMode::VerifyFull => {}
    }
    let mark = kernel::Mark::now();
    let handshake = deadline.run_watching(Conn::new(opts), || match mark.new_socket_to(&addrs) {
        Some(kernel::TcpState::Connecting(addr)) => Phase::TcpConnect { addr },
        Some(kernel::TcpState::Connected(addr)) => Phase::Handshake {
            at: addr.to_string(),
        },
        None => Phase::Unknown,
    });
    let mut conn = match handshake.await {
        Ok(connected) => connected.map_err(|e| connect_error(url, &host, e))?,
        Err(phase) => return Err(stalled(&target, &phase, deadline.limit())),
    };
    if let Some((what, statements)) = session.setup {
        match deadline.run(conn.query_drop(statements)).await {
            None => {
                let phase = Phase::Setup {
                    what: what.to_owned(),
                };
                return Err(stalled(&target, &phase, deadline.limit()));
            }
            Some(done) => done.map_err(|e| query_error(what, e))?,
        }
    }
    Ok(conn)
}

/// One statement of a control connection, given up after `limit`
/// (`TimeoutsConfig::statement`) with a transient `SLUICE_SOURCE_QUERY` naming `what`:
/// mysql_async has no read timeout of its own, and a server or path that went silent
/// would otherwise hold the run until TCP keepalive gives up.
pub async fn bounded<T>(
    limit: std::time::Duration,
    what: &str,
    statement: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(limit, statement).await {
        Ok(done) => done,
        Err(_) => Err(Error::new(
            Code::SourceQuery,
            format!("{what}: no answer within {} s", limit.as_secs()),
        )
        .hint("the server or the network path stalled (a frozen or overloaded server, a path dropping packets); nothing was read, and the next run resumes from the checkpoint — each statement of the control connection is bounded by the larger of source.timeouts.page_seconds and read_seconds")),
    }
}

/// Classifies a connection failure.
fn connect_error(url: &str, host: &str, e: mysql_async::Error) -> Error {
    let target = redact_url(url);
    if let Some(cause) = rustls_cause(&e) {
        return Error::new(
            Code::SourceTls,
            format!("TLS handshake with {target} failed: {cause}"),
        )
        .hint(handshake_hint(cause, host))
        .source(e);
    }
    if matches!(
        &e,
        mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer)
    ) {
        return Error::new(
            Code::SourceTls,
            format!("{target} does not accept TLS connections"),
        )
        .hint("enable TLS on the server (ssl_cert/ssl_key), or (loopback only) set source.tls.mode to disable")
        .source(e);
    }
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
            errno::SECURE_TRANSPORT_REQUIRED => (
                Code::SourceTls,
                "the server requires TLS: set source.tls.mode to verify-full (the default off loopback) with source.tls.ca_file",
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
                        .hint("grant the source user the privileges listed in docs/mysql.md (Prerequisites): GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '<user>'@'<host>' (MariaDB ≥ 10.5: REPLICATION SLAVE, BINLOG MONITOR)")
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

    fn mode(mode: TlsMode) -> TlsConfig {
        TlsConfig {
            mode: Some(mode),
            ..TlsConfig::default()
        }
    }

    #[test]
    fn only_loopback_goes_plain_by_default() {
        let tls = TlsConfig::default();
        for (url, want_tls) in [
            ("mysql://u@127.0.0.1/", false),
            ("mysql://u@localhost:3306/", false),
            ("mysql://u@[::1]/", false),
            ("mysql://u@db.internal/", true),
            ("mysql://u@10.0.0.5/", true),
        ] {
            assert_eq!(
                options(url, &tls).unwrap().ssl_opts().is_some(),
                want_tls,
                "{url}"
            );
        }
    }

    #[test]
    fn remote_urls_always_get_tls_whatever_they_ask_for() {
        let opts = options(
            "mysql://u:p@db.example.com:3306/app?require_ssl=false",
            &TlsConfig::default(),
        )
        .unwrap();
        let ssl = opts.ssl_opts().expect("TLS");
        assert!(!ssl.accept_invalid_certs() && !ssl.skip_domain_validation());
        assert!(!opts.prefer_socket());
    }

    #[test]
    fn disable_off_loopback_is_refused_before_connecting() {
        let err = options(
            "mysql://u:secret@db.example.com/app",
            &mode(TlsMode::Disable),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::ConfigTlsRequired);
        assert!(err.to_string().contains("source.tls.mode"), "{err}");
        assert!(!err.chain().contains("secret"));
        let local = options("mysql://root@127.0.0.1:33069/", &mode(TlsMode::Disable)).unwrap();
        assert!(local.ssl_opts().is_none());
    }

    #[test]
    fn each_mode_maps_onto_ssl_opts() {
        let ca = vec![rustls::pki_types::CertificateDer::from(vec![1u8, 2, 3])];
        assert!(ssl_opts(TlsMode::Disable, Some(ca.clone())).is_none());
        let require = ssl_opts(TlsMode::Require, None).unwrap();
        assert!(require.accept_invalid_certs());
        for m in [TlsMode::VerifyCa, TlsMode::VerifyFull] {
            let web = ssl_opts(m, None).unwrap();
            assert!(!web.accept_invalid_certs() && !web.skip_domain_validation());
            assert!(!web.disable_built_in_roots() && web.root_certs().is_empty());
            let own = ssl_opts(m, Some(ca.clone())).unwrap();
            assert!(
                own.disable_built_in_roots(),
                "only the configured CA is trusted"
            );
            assert_eq!(own.root_certs().len(), 1);
            assert!(!own.accept_invalid_certs() && !own.skip_domain_validation());
        }
    }

    #[test]
    fn a_loopback_host_with_a_ca_defaults_to_verify_full() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TlsConfig {
            ca_file: Some(dir.path().join("missing.pem")),
            ..TlsConfig::default()
        };
        let err = options("mysql://u@127.0.0.1/", &missing).unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(err.to_string().contains("source.tls.ca_file"), "{err}");
    }

    #[test]
    fn a_bad_url_is_a_config_error_without_the_password() {
        let err = options("mysql://u:secret@[bad/db", &TlsConfig::default()).unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
        assert!(!err.chain().contains("secret"));
    }
}
