//! Connecting to PostgreSQL: URL parsing, the TLS gate and what a session is for
//! ([`Session`]); failures are classified in [`super::errors`].
//!
//! Guarantees: [`connect`] is the only way to open a session, and its whole
//! establishment — DNS, TCP, TLS, startup, authentication and the session's setup — ends
//! within `source.timeouts.connect_seconds` (for each host of a multi-host URL:
//! [`super::establish`]), past which it is a transient `SLUICE_SOURCE_CONNECT` naming
//! the phase that stalled; every session runs
//! under a deliberate `statement_timeout` ([`Session::control`]: the larger of
//! `page_seconds` and `read_seconds`; [`Session::bulk`]: none); a host that is not
//! loopback is only ever reached over TLS (rustls, server certificate verified against the
//! Web PKI roots), decided before any packet is sent; the URL in every message is
//! redacted; authentication failures are refusals (retrying will not fix a wrong
//! password), network failures are transient.

use std::time::Duration;

use tokio_postgres::Client;
use tokio_postgres::config::Host;

pub use super::errors::query_error;
use super::establish::{Plan, establish};
use crate::config::TimeoutsConfig;
use crate::error::{Code, Error, Result};
use crate::redact::redact_url;
use crate::tls::{TlsConfig, client_config};

/// The TLS decision for a set of hosts, taken before any packet is sent: `None` (plain)
/// only when every host may go plain; a refusal when a host may not be reached at all.
/// A Unix socket counts as loopback.
pub fn transport_for(
    config: &tokio_postgres::Config,
    tls: &TlsConfig,
) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>> {
    check_hostaddrs(config)?;
    let mut chosen = None;
    for host in config.get_hosts() {
        let name = match host {
            Host::Tcp(name) => name.as_str(),
            #[cfg(unix)]
            Host::Unix(_) => "localhost",
        };
        if let Some(c) = client_config(tls, name)? {
            chosen.get_or_insert(c);
        }
    }
    Ok(chosen)
}

/// The TLS gate for `url` without connecting or reading any file: refuses exactly what
/// [`connect`] would refuse before sending a packet (a URL that is not PostgreSQL's,
/// `disable` for a host that is not loopback, a loopback host whose `hostaddr` leaves
/// the machine). `sluice validate` and the job room run it before any lease is taken.
pub fn check_transport(url: &str, tls: &TlsConfig) -> Result<()> {
    let config = parse(url)?;
    check_hostaddrs(&config)?;
    for host in config.get_hosts() {
        if let Host::Tcp(name) = host {
            crate::tls::checked_mode(tls, name)?;
        }
    }
    Ok(())
}

/// libpq connects to `hostaddr` when it is given, and names `host` only for TLS: a
/// loopback (or socket) host paired with an address off the machine would pass the
/// loopback rules while the connection leaves it, so that pairing is refused.
fn check_hostaddrs(config: &tokio_postgres::Config) -> Result<()> {
    let hosts = config.get_hosts();
    for (i, addr) in config.get_hostaddrs().iter().enumerate() {
        let host_is_local = match hosts.get(i) {
            Some(Host::Tcp(name)) => crate::redact::is_loopback_host(name),
            #[cfg(unix)]
            Some(Host::Unix(_)) => true,
            None => true,
        };
        if host_is_local && !addr.is_loopback() {
            return Err(Error::new(
                Code::ConfigTlsRequired,
                format!("the source URL's host is loopback but its hostaddr {addr} is not: the connection would leave the machine"),
            )
            .hint("write the server's own name (the one its certificate carries) as the URL's host; keep hostaddr only to skip the DNS lookup of that name"));
        }
    }
    Ok(())
}

fn parse(url: &str) -> Result<tokio_postgres::Config> {
    url.parse().map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} is not a PostgreSQL URL", redact_url(url)),
        )
        .hint("use postgres://user:password@host:5432/dbname (percent-encode @ / : ? # % in the password)")
        .source(e)
    })
}

/// What a session is for: its `application_name`, the `statement_timeout` its statements
/// run under, and the statements that set it up (run as the last step of the bounded
/// establishment, so a server that stalls there is given up like one that stalls in the
/// login).
#[derive(Debug, Clone)]
pub struct Session<'a> {
    application_name: &'a str,
    /// Zero: none (`statement_timeout = 0`, whatever the role's or database's default).
    statement_timeout: Duration,
    setup: (&'a str, &'a str),
}

impl<'a> Session<'a> {
    /// A session of short statements — catalog reads, publication and slot changes, slot
    /// advances (which decode WAL like a page), cell rendering: the server cancels any
    /// statement that runs longer than `timeouts.statement()` (the larger of
    /// `page_seconds` and `read_seconds`), a transient `SLUICE_SOURCE_QUERY`.
    pub fn control(timeouts: &TimeoutsConfig) -> Session<'a> {
        Session {
            application_name: "sluice",
            statement_timeout: timeouts.statement(),
            setup: ("setting the session up", ""),
        }
    }

    /// A session whose statements stream for as long as the reader consumes them (the
    /// stream's page COPY, a baseline's chunk COPYs and its planning scans): no
    /// `statement_timeout`; the reader bounds its own waits (`page_seconds`,
    /// `read_seconds`) and TCP keepalive finds a dead peer.
    pub fn bulk() -> Session<'a> {
        Session {
            application_name: "sluice",
            statement_timeout: Duration::ZERO,
            setup: ("setting the session up", ""),
        }
    }

    /// The same session under `application_name` (a job's stream connections carry
    /// `sluice/<job>`, see `orphan`).
    pub fn named(mut self, application_name: &'a str) -> Session<'a> {
        self.application_name = application_name;
        self
    }

    /// The same session set up by `statements` (`what` names them in messages).
    pub fn setup(mut self, what: &'a str, statements: &'a str) -> Session<'a> {
        self.setup = (what, statements);
        self
    }

    /// The setup statements the server runs: the statement timeout, then the session's own.
    fn statements(&self) -> String {
        format!(
            "SET statement_timeout = {}; {}",
            self.statement_timeout.as_millis(),
            self.setup.1
        )
    }
}

/// Opens one session, the whole establishment (DNS, TCP, TLS, startup, authentication,
/// the session's setup) bounded by `timeouts.connect_seconds` — per host of a multi-host
/// URL, as libpq's `connect_timeout` — past it, a transient `SLUICE_SOURCE_CONNECT`
/// naming the phase that stalled (see [`establish`]). The URL's
/// own `sslmode` is overridden by `source.tls`; the connection task runs on the current
/// runtime.
pub async fn connect(
    url: &str,
    tls: &TlsConfig,
    timeouts: &TimeoutsConfig,
    session: &Session<'_>,
) -> Result<Client> {
    let mut config = parse(url)?;
    config.application_name(session.application_name);
    let target = redact_url(url);
    let statements = session.statements();
    let plan = Plan {
        url,
        target: &target,
        tls: transport_for(&config, tls)?,
        user_timeout: timeouts.read(),
        setup: (session.setup.0, &statements),
        limit: timeouts.connect(),
    };
    establish(&config, &plan).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sessions_carry_a_statement_timeout_and_bulk_ones_none() {
        let timeouts = TimeoutsConfig {
            connect_seconds: 7,
            read_seconds: 45,
            page_seconds: 300,
        };
        let control = Session::control(&timeouts).setup("x", "SET a = 1");
        assert_eq!(
            control.statements(),
            "SET statement_timeout = 300000; SET a = 1"
        );
        let longer_read = TimeoutsConfig {
            read_seconds: 600,
            ..timeouts
        };
        assert!(
            Session::control(&longer_read)
                .statements()
                .starts_with("SET statement_timeout = 600000;")
        );
        assert_eq!(
            Session::bulk().named("sluice/j").statements(),
            "SET statement_timeout = 0; "
        );
        assert_eq!(
            Session::bulk().named("sluice/j").application_name,
            "sluice/j"
        );
    }

    #[test]
    fn a_loopback_host_with_a_remote_hostaddr_is_refused_before_connecting() {
        let tls = TlsConfig::default();
        let e =
            check_transport("postgres://u@localhost:5432/app?hostaddr=10.0.0.5", &tls).unwrap_err();
        assert_eq!(e.code(), Code::ConfigTlsRequired, "{e}");
        // A remote host with its address given (no DNS lookup) is ordinary: TLS to the host.
        check_transport("postgres://u@db.example.com/app?hostaddr=10.0.0.5", &tls).unwrap();
        check_transport("postgres://u@localhost/app?hostaddr=127.0.0.1", &tls).unwrap();
        let disable = TlsConfig {
            mode: Some(crate::config::TlsMode::Disable),
            ..TlsConfig::default()
        };
        let e = check_transport("postgres://u@db.example.com/app", &disable).unwrap_err();
        assert_eq!(e.code(), Code::ConfigTlsRequired, "{e}");
    }

    #[test]
    fn only_loopback_goes_plain_by_default() {
        let tls = TlsConfig::default();
        let cases = [
            ("postgres://u@127.0.0.1/db", false),
            ("postgres://u@localhost:5433/db", false),
            ("postgres://u@[::1]/db", false),
            ("postgres://u@db.internal/db", true),
            ("postgres://u@10.0.0.5/db", true),
            ("host=127.0.0.1,db.example.com user=u", true),
        ];
        for (url, want_tls) in cases {
            let config: tokio_postgres::Config = url.parse().unwrap();
            let chosen = transport_for(&config, &tls).unwrap();
            assert_eq!(chosen.is_some(), want_tls, "{url}");
        }
    }

    #[test]
    fn disable_off_loopback_is_refused_before_connecting() {
        let tls = TlsConfig {
            mode: Some(crate::tls::TlsMode::Disable),
            ..TlsConfig::default()
        };
        let config: tokio_postgres::Config =
            "host=127.0.0.1,db.example.com user=u".parse().unwrap();
        let err = transport_for(&config, &tls).unwrap_err();
        assert_eq!(err.code(), Code::ConfigTlsRequired);
    }
}
