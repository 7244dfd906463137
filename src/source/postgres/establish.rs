//! Establishing one PostgreSQL session within `source.timeouts.connect_seconds`, each
//! network step done or watched by sluice so a stall is named by its phase.
//!
//! Steps, each host of the URL under its own [`Deadline`] of `connect_seconds` (as libpq
//! applies `connect_timeout` to each host, so a multi-host URL still reaches its second
//! host when the first is silent; a URL of one host — the usual — is bounded by
//! `connect_seconds` in all): for each host in the URL's order (shuffled under
//! `load_balance_hosts=random`), its `hostaddr` or the DNS lookup of its name
//! ([`resolve`]); for each address, the TCP connect ([`tcp_connect`]) with TCP keepalive
//! and `TCP_USER_TIMEOUT` set on the socket; then `tokio_postgres::Config::connect_raw`
//! on that socket through a byte-counting [`Watched`] stream — the TLS request and
//! handshake (under the TLS decision of `connect`, verified against the URL's host name,
//! never the `hostaddr`), the startup message and the authentication exchange; then
//! `target_session_attrs` when the URL asks for it, and the session's setup statements.
//! A host or address that fails is followed by the next one, as libpq does; a host's
//! addresses share its deadline, and once it has passed that host's attempt ends with the
//! phase it was in.
//!
//! Not kept from tokio-postgres's own `connect`: the client's socket record, which only
//! query cancellation (`Client::cancel_token`) reads — sluice never cancels a query.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::config::{Host, LoadBalanceHosts, SslMode, TargetSessionAttrs};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use super::errors::{connect_error, query_error};
use crate::error::{Code, Error, Result};
use crate::source::establish::watched::{Progress, Stage, Watched};
use crate::source::establish::{Deadline, Phase, resolve, stalled, tcp_connect};

/// TCP keepalive: a peer that vanished without a reset is found within about
/// idle + interval × retries (60 s) even while the server is busy decoding a page — the
/// probes are answered by the server's kernel, so a long decode is never mistaken for a
/// dead network.
pub(super) const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 3;

/// What one establishment needs besides the parsed URL.
pub(super) struct Plan<'a> {
    /// The URL, for classifying failures (never printed unredacted).
    pub url: &'a str,
    /// The redacted URL, for messages.
    pub target: &'a str,
    /// `None`: plain; otherwise TLS with this configuration (see `transport_for`).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `TCP_USER_TIMEOUT`: how long sent data may stay unacknowledged
    /// (`source.timeouts.read_seconds`).
    pub user_timeout: Duration,
    /// The statements that set the session up, and what they do (for messages).
    pub setup: (&'a str, &'a str),
    /// `source.timeouts.connect_seconds`: each host's deadline.
    pub limit: Duration,
}

/// One place to connect to: the address source (a host name, an IP, a socket
/// directory), the name TLS verifies, and the port.
struct Candidate {
    connect_to: Host,
    tls_name: Option<String>,
    port: u16,
}

/// The URL's hosts in the order libpq tries them: host *i* with `hostaddr` *i* (the
/// address connected to) and port *i* (or the one port).
fn candidates(config: &tokio_postgres::Config) -> Vec<Candidate> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let ports = config.get_ports();
    let count = hosts.len().max(addrs.len());
    let mut out: Vec<Candidate> = (0..count)
        .map(|i| {
            let host = hosts.get(i);
            let tls_name = match host {
                Some(Host::Tcp(name)) => Some(name.clone()),
                _ => None,
            };
            let connect_to = match (addrs.get(i), host) {
                (Some(ip), _) => Host::Tcp(ip.to_string()),
                (None, Some(host)) => host.clone(),
                (None, None) => Host::Tcp("localhost".to_owned()),
            };
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            Candidate {
                connect_to,
                tls_name,
                port,
            }
        })
        .collect();
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        use rand::seq::SliceRandom;
        out.shuffle(&mut rand::rng());
    }
    out
}

/// Opens one session as the module doc describes; the connection task runs on the
/// current runtime.
pub(super) async fn establish(config: &tokio_postgres::Config, plan: &Plan<'_>) -> Result<Client> {
    let candidates = candidates(config);
    let mut last = None;
    for candidate in &candidates {
        let deadline = Deadline::after(plan.limit);
        match candidate_session(config, plan, candidate, &deadline).await {
            Ok(client) => return Ok(client),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::new(
            Code::ConfigInvalid,
            format!("source URL {} names no host", plan.target),
        )
        .hint("use postgres://user:password@host:5432/dbname")
    }))
}

/// A session with one host: each of its addresses in turn.
async fn candidate_session(
    config: &tokio_postgres::Config,
    plan: &Plan<'_>,
    candidate: &Candidate,
    deadline: &Deadline,
) -> Result<Client> {
    let name = match &candidate.connect_to {
        Host::Tcp(name) => name,
        #[cfg(unix)]
        Host::Unix(dir) => {
            let path = dir.join(format!(".s.PGSQL.{}", candidate.port));
            let at = path.display().to_string();
            let stream = deadline
                .run(tokio::net::UnixStream::connect(&path))
                .await
                .ok_or_else(|| {
                    stalled(
                        plan.target,
                        &Phase::Unknown,
                        deadline.limit(),
                    )
                })?
                .map_err(|e| {
                    Error::new(
                        Code::SourceConnect,
                        format!("connecting to {} through socket {at} failed", plan.target),
                    )
                    .hint("check that the server is up and that the socket directory in the URL is the server's")
                    .source(e)
                })?;
            // The TLS decision stands (a socket counts as loopback, see `transport_for`):
            // a server asked for TLS here declines, and that is refused as anywhere.
            let tls = plan.tls.clone();
            return session(stream, &at, Some("localhost"), config, plan, tls, deadline).await;
        }
    };
    let mut addrs = resolve(name, candidate.port, plan.target, deadline).await?;
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        use rand::seq::SliceRandom;
        addrs.shuffle(&mut rand::rng());
    }
    let mut last = None;
    for addr in addrs {
        let attempt = async {
            let stream = tcp_connect(&[addr], plan.target, deadline).await?;
            tune_socket(&stream, plan.user_timeout);
            session(
                stream,
                &addr.to_string(),
                candidate.tls_name.as_deref(),
                config,
                plan,
                plan.tls.clone(),
                deadline,
            )
            .await
        };
        match attempt.await {
            Ok(client) => return Ok(client),
            // The host's bound is spent: its other addresses would stall at once.
            Err(e) if deadline.passed() => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

/// TCP keepalive and `TCP_USER_TIMEOUT` on a connected socket; a platform that refuses
/// an option only loses that early detection of a dead peer.
fn tune_socket(stream: &tokio::net::TcpStream, user_timeout: Duration) {
    let socket = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new().with_time(KEEPALIVE_IDLE);
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    let keepalive = keepalive
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    if let Err(e) = socket.set_tcp_keepalive(&keepalive) {
        tracing::debug!(error = %e, "TCP keepalive not set on the source connection");
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = socket.set_tcp_user_timeout(Some(user_timeout)) {
        tracing::debug!(error = %e, "TCP_USER_TIMEOUT not set on the source connection");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = user_timeout;
}

/// The PostgreSQL session on a connected `stream` to `at`: TLS (with `tls`, verifying
/// `tls_name`), startup and authentication, `target_session_attrs`, then the setup.
async fn session<S>(
    stream: S,
    at: &str,
    tls_name: Option<&str>,
    config: &tokio_postgres::Config,
    plan: &Plan<'_>,
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: &Deadline,
) -> Result<Client>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let progress = Progress::starting_at(if tls.is_some() {
        Stage::TlsRequest
    } else {
        Stage::Login
    });
    let stream = Watched::new(stream, progress.clone());
    let config_attrs = config.get_target_session_attrs();
    let mut config = config.clone();
    let handshake = async {
        let connected = match tls {
            None => {
                config.ssl_mode(SslMode::Disable);
                config
                    .connect_raw(stream, NoTls)
                    .await
                    .map(|(client, connection)| {
                        tokio::spawn(drive(connection));
                        client
                    })
            }
            Some(client_tls) => {
                // Require, never Prefer: a server that declines TLS must not get a plain session.
                config.ssl_mode(SslMode::Require);
                let mut make = tokio_postgres_rustls::MakeRustlsConnect::new((*client_tls).clone());
                let name = tls_name.unwrap_or_default();
                let connector = MakeTlsConnect::<Watched<S>>::make_tls_connect(&mut make, name)
                    .map_err(|e| {
                        Error::new(
                            Code::ConfigInvalid,
                            format!("{}: {name:?} is not a valid TLS server name", plan.target),
                        )
                        .hint("write the server's own name (the one its certificate carries) as the URL's host")
                        .source(e)
                    })?;
                let tracked = Tracked {
                    inner: connector,
                    progress: progress.clone(),
                };
                config
                    .connect_raw(stream, tracked)
                    .await
                    .map(|(client, connection)| {
                        tokio::spawn(drive(connection));
                        client
                    })
            }
        };
        connected.map_err(|e| connect_error(plan.url, &config, e))
    };
    let client = match deadline.run(handshake).await {
        None => {
            return Err(stalled(
                plan.target,
                &phase(&progress, at),
                deadline.limit(),
            ));
        }
        Some(connected) => connected?,
    };
    progress.enter(Stage::Setup);
    let attrs = config_attrs;
    let (what, setup) = plan.setup;
    let ready = async {
        check_session_attrs(&client, attrs, plan.target).await?;
        client
            .batch_execute(setup)
            .await
            .map_err(|e| query_error(what, e))
    };
    match deadline.run(ready).await {
        None => Err(stalled(
            plan.target,
            &Phase::Setup {
                what: what.to_owned(),
            },
            deadline.limit(),
        )),
        Some(Err(e)) => Err(e),
        Some(Ok(())) => Ok(client),
    }
}

/// Runs a connection until it closes.
async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    if let Err(e) = connection.await {
        tracing::debug!(error = %e, "postgres connection closed");
    }
}

/// The phase a session on `at` stalled in, from what the stream and the TLS wrapper saw.
fn phase(progress: &Progress, at: &str) -> Phase {
    let at = at.to_owned();
    match progress.now() {
        (Stage::TlsRequest, _) => Phase::TlsRequest { at },
        (Stage::TlsHandshake, _) => Phase::TlsHandshake { at },
        (Stage::Login, false) => Phase::NoAnswer {
            at,
            awaited: "startup response",
        },
        (Stage::Login, true) => Phase::Login { at },
        (Stage::Setup, _) => Phase::Setup {
            what: "the session's setup".to_owned(),
        },
    }
}

/// libpq's `target_session_attrs`: a server whose `transaction_read_only` is not what the
/// URL asks for is refused, and the next host is tried.
async fn check_session_attrs(
    client: &Client,
    attrs: TargetSessionAttrs,
    target: &str,
) -> Result<()> {
    let want_read_only = match attrs {
        TargetSessionAttrs::ReadWrite => false,
        TargetSessionAttrs::ReadOnly => true,
        _ => return Ok(()),
    };
    let messages = client
        .simple_query("SHOW transaction_read_only")
        .await
        .map_err(|e| query_error("reading transaction_read_only", e))?;
    let read_only = messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => row.get(0).map(|v| v == "on"),
        _ => None,
    });
    if read_only == Some(want_read_only) {
        return Ok(());
    }
    Err(Error::new(
        Code::SourceConnect,
        format!(
            "{target}: the server is {}, and the URL asks for target_session_attrs={}",
            if want_read_only { "not read-only" } else { "read-only" },
            if want_read_only { "read-only" } else { "read-write" },
        ),
    )
    .hint("list the server the URL's target_session_attrs wants among its hosts (a primary for read-write)"))
}

/// A TLS connector that marks the start and the end of the handshake.
struct Tracked<T> {
    inner: T,
    progress: Arc<Progress>,
}

impl<S, T> TlsConnect<S> for Tracked<T>
where
    T: TlsConnect<S>,
    T::Future: Send + 'static,
{
    type Stream = T::Stream;
    type Error = T::Error;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<T::Stream, T::Error>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        self.progress.enter(Stage::TlsHandshake);
        let progress = self.progress;
        let handshake = self.inner.connect(stream);
        Box::pin(async move {
            let done = handshake.await;
            if done.is_ok() {
                progress.enter(Stage::Login);
            }
            done
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_tried_in_order_with_their_hostaddr_and_port() {
        let config: tokio_postgres::Config =
            "host=db1.example.com,db2.example.com hostaddr=10.0.0.1,10.0.0.2 port=5433,5434 user=u"
                .parse()
                .unwrap();
        let list = candidates(&config);
        let seen: Vec<(String, Option<String>, u16)> = list
            .iter()
            .map(|c| match &c.connect_to {
                Host::Tcp(h) => (h.clone(), c.tls_name.clone(), c.port),
                #[cfg(unix)]
                Host::Unix(_) => unreachable!(),
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("10.0.0.1".into(), Some("db1.example.com".into()), 5433),
                ("10.0.0.2".into(), Some("db2.example.com".into()), 5434),
            ]
        );
        // One port for every host; in a URL, each host its own (5432 when omitted).
        let one_port: tokio_postgres::Config =
            "host=a.example,b.example port=6000 user=u".parse().unwrap();
        let ports: Vec<u16> = candidates(&one_port).iter().map(|c| c.port).collect();
        assert_eq!(ports, [6000, 6000]);
        let url: tokio_postgres::Config =
            "postgres://u@a.example,b.example:6000/db".parse().unwrap();
        let ports: Vec<u16> = candidates(&url).iter().map(|c| c.port).collect();
        assert_eq!(ports, [5432, 6000]);
    }

    #[test]
    fn the_phase_follows_what_the_server_sent() {
        let progress = Progress::starting_at(Stage::TlsRequest);
        assert!(matches!(phase(&progress, "a"), Phase::TlsRequest { .. }));
        progress.enter(Stage::Login);
        assert_eq!(
            phase(&progress, "a"),
            Phase::NoAnswer {
                at: "a".into(),
                awaited: "startup response"
            }
        );
    }
}
