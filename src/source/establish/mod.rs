//! The one bound on establishing a source connection, shared by every engine.
//!
//! Guarantee: from the first DNS query to the last setup statement, establishing a source
//! connection takes at most `source.timeouts.connect_seconds` ([`Deadline`]; each host of
//! a multi-host PostgreSQL URL has its own, as libpq's `connect_timeout`) — resolving
//! the host, the TCP connect, the TLS handshake, the protocol's startup and
//! authentication, and the statements that set the session up. Past it the attempt is
//! dropped (its socket closed) and the caller gets a transient `SLUICE_SOURCE_CONNECT`
//! ([`stalled`]) whose message names the phase that stalled ([`Phase`]) and whose hint
//! says what to check and that `source.timeouts.connect_seconds` sets the bound.
//!
//! The engines build on three parts: [`resolve`] and [`tcp_connect`] (the network steps
//! sluice performs itself), [`watched`] (a stream that counts the bytes a server sent, so
//! a protocol driver's silence can be told from a login in progress) and [`kernel`] (the
//! state the kernel reports for the socket of a driver that opens its own).

pub mod kernel;
pub mod watched;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::error::{Code, Error, Result};

/// The end of one connection's establishment: `source.timeouts.connect_seconds` after it
/// began.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    limit: Duration,
    at: Instant,
}

impl Deadline {
    /// A deadline `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline {
            limit,
            at: Instant::now() + limit,
        }
    }

    /// The whole bound (`source.timeouts.connect_seconds`).
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// True once the deadline has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Runs `step` until the deadline: `None` when the deadline passed first (the step
    /// is dropped).
    pub async fn run<F: std::future::Future>(&self, step: F) -> Option<F::Output> {
        tokio::time::timeout_at(self.at, step).await.ok()
    }

    /// [`Deadline::run`], calling `at_expiry` when the deadline passes *before* the step
    /// is dropped (while its socket is still open, for [`kernel`] to look at).
    pub async fn run_watching<F, T>(
        &self,
        step: F,
        at_expiry: impl FnOnce() -> T,
    ) -> std::result::Result<F::Output, T>
    where
        F: std::future::Future,
    {
        let step = std::pin::pin!(step);
        tokio::select! {
            biased;
            out = step => Ok(out),
            () = tokio::time::sleep_until(self.at) => Err(at_expiry()),
        }
    }
}

/// The phase of an establishment that did not finish in time, as the error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The DNS lookup of the host.
    Resolving { host: String },
    /// The TCP connect: no SYN-ACK came back.
    TcpConnect { addr: SocketAddr },
    /// Connected; the server never answered the request to start TLS.
    TlsRequest { at: String },
    /// Connected; the TLS handshake began and did not finish.
    TlsHandshake { at: String },
    /// Connected (and TLS up where asked): the server sent nothing back to the startup
    /// (PostgreSQL's startup message, SQL Server's prelogin), or — MySQL, where the
    /// server speaks first — no greeting came.
    NoAnswer {
        at: String,
        /// What the server did not answer: "startup response", "greeting", …
        awaited: &'static str,
    },
    /// The server answered but the startup / authentication exchange did not finish.
    Login { at: String },
    /// The TCP connection is up; the driver's handshake (greeting, TLS, login) did not
    /// finish, and the driver does not say which step it was in.
    Handshake { at: String },
    /// Logged in; the statements that set the session up did not finish.
    Setup { what: String },
    /// Nothing more is known (the driver is opaque and the kernel could not be asked).
    Unknown,
}

impl Phase {
    /// The message: what stalled, for `target` (the redacted URL), within `limit`.
    fn message(&self, target: &str, limit: Duration) -> String {
        let s = limit.as_secs();
        match self {
            Phase::Resolving { host } => {
                format!("resolving host {host} of {target} did not complete within {s} s")
            }
            Phase::TcpConnect { addr } => {
                format!("TCP connect to {addr} ({target}) did not complete within {s} s")
            }
            Phase::TlsRequest { at } => format!(
                "connected to {target} ({at}), no answer to the request for TLS after {s} s"
            ),
            Phase::TlsHandshake { at } => format!(
                "connected to {target} ({at}), the TLS handshake did not complete within {s} s"
            ),
            Phase::NoAnswer { at, awaited } => {
                format!("connected to {target} ({at}), no {awaited} after {s} s")
            }
            Phase::Login { at } => format!(
                "connected to {target} ({at}), the server answered but the login did not complete within {s} s"
            ),
            Phase::Handshake { at } => format!(
                "connected to {target} ({at}), the handshake (server greeting, TLS, login) did not complete within {s} s"
            ),
            Phase::Setup { what } => {
                format!("logged in to {target}, {what} did not complete within {s} s")
            }
            Phase::Unknown => format!("connecting to {target} did not complete within {s} s"),
        }
    }

    /// What to check for this phase.
    fn advice(&self) -> &'static str {
        match self {
            Phase::Resolving { .. } => {
                "check the host name in the source URL and the DNS resolver this runs under (the VPC's DNS settings)"
            }
            Phase::TcpConnect { .. } => {
                "nothing answered the TCP connect: check the host and port, the security groups, firewall rules and routes to the server (a firewall that drops packets looks like this)"
            }
            Phase::TlsRequest { .. } | Phase::NoAnswer { .. } | Phase::Handshake { .. } => {
                "something accepted the TCP connection but never answered as the database does: a proxy or load balancer whose backend is gone, a frozen or overloaded server, or a port that belongs to another service; check that host:port is the database server itself and that it is up"
            }
            Phase::TlsHandshake { .. } => {
                "the TLS handshake stalled: check that the port speaks TLS as the database does (no TLS-terminating proxy in the path) and that the server is not overloaded"
            }
            Phase::Login { .. } => {
                "the server began the login and did not finish it: an overloaded server, or an authentication backend (LDAP, RADIUS, Kerberos, IAM) that does not answer"
            }
            Phase::Setup { .. } => {
                "the server accepted the login and did not answer the session's first statements: an overloaded server, or a lock on the catalog"
            }
            Phase::Unknown => {
                "check the host, port and network path to the server and that the server is up and not overloaded"
            }
        }
    }
}

/// The transient error of an establishment that did not finish within `limit`, naming
/// the phase that stalled.
pub fn stalled(target: &str, phase: &Phase, limit: Duration) -> Error {
    Error::new(Code::SourceConnect, phase.message(target, limit)).hint(format!(
        "{}; nothing was read, and the next run tries again — source.timeouts.connect_seconds ({} s) bounds the whole connection (DNS, TCP, TLS, login, session setup)",
        phase.advice(),
        limit.as_secs()
    ))
}

/// The addresses of `host:port`, from the DNS lookup (an IP literal is taken as is),
/// within `deadline`.
pub async fn resolve(
    host: &str,
    port: u16,
    target: &str,
    deadline: &Deadline,
) -> Result<Vec<SocketAddr>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let phase = Phase::Resolving {
        host: host.to_owned(),
    };
    let found = deadline
        .run(tokio::net::lookup_host((bare, port)))
        .await
        .ok_or_else(|| stalled(target, &phase, deadline.limit()))?
        .map_err(|e| {
            Error::new(
                Code::SourceConnect,
                format!("resolving host {host} of {target} failed"),
            )
            .hint("check the host name in the source URL and the DNS resolver this runs under (the VPC's DNS settings)")
            .source(e)
        })?
        .collect::<Vec<_>>();
    if found.is_empty() {
        return Err(Error::new(
            Code::SourceConnect,
            format!("host {host} of {target} resolves to no address"),
        )
        .hint("check the host name in the source URL"));
    }
    Ok(found)
}

/// A TCP connection to the first of `addrs` that accepts, within `deadline`, with
/// `TCP_NODELAY` set. A refused or unreachable address is skipped; the deadline is
/// shared by all of them.
pub async fn tcp_connect(
    addrs: &[SocketAddr],
    target: &str,
    deadline: &Deadline,
) -> Result<TcpStream> {
    let mut last = None;
    for addr in addrs {
        match deadline.run(TcpStream::connect(addr)).await {
            None => {
                return Err(stalled(
                    target,
                    &Phase::TcpConnect { addr: *addr },
                    deadline.limit(),
                ));
            }
            Some(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Some(Err(e)) => last = Some((*addr, e)),
        }
    }
    let (addr, e) = last.ok_or_else(|| {
        Error::new(
            Code::SourceConnect,
            format!("{target} names no address to connect to"),
        )
    })?;
    Err(Error::new(
        Code::SourceConnect,
        format!("TCP connect to {addr} ({target}) failed"),
    )
    .hint("check the host, port and network path (security groups, VPC, firewall) to the server, and that it is up")
    .source(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_deadline_bounds_every_step_together() {
        rt().block_on(async {
            let deadline = Deadline::after(Duration::from_millis(300));
            assert_eq!(deadline.run(async { 7 }).await, Some(7));
            tokio::time::sleep(Duration::from_millis(200)).await;
            // A tenth of a second is left, whatever the next step would take on its own.
            let started = std::time::Instant::now();
            let slow = tokio::time::sleep(Duration::from_secs(5));
            assert_eq!(deadline.run(slow).await, None);
            assert!(started.elapsed() < Duration::from_secs(1));
        });
    }

    #[test]
    fn each_phase_is_named_with_the_setting() {
        let addr: SocketAddr = "10.0.0.5:5432".parse().unwrap();
        let at = || addr.to_string();
        let limit = Duration::from_secs(10);
        let cases = [
            (
                Phase::Resolving {
                    host: "db.internal".into(),
                },
                "resolving host db.internal",
            ),
            (Phase::TcpConnect { addr }, "TCP connect to 10.0.0.5:5432"),
            (
                Phase::NoAnswer {
                    at: at(),
                    awaited: "startup response",
                },
                "no startup response after 10 s",
            ),
            (
                Phase::TlsRequest { at: at() },
                "no answer to the request for TLS",
            ),
            (
                Phase::TlsHandshake { at: at() },
                "TLS handshake did not complete",
            ),
            (Phase::Login { at: at() }, "login did not complete"),
            (
                Phase::Handshake { at: at() },
                "handshake (server greeting, TLS, login)",
            ),
            (
                Phase::Setup {
                    what: "the session's setup".into(),
                },
                "the session's setup did not complete",
            ),
            (Phase::Unknown, "did not complete within 10 s"),
        ];
        for (phase, want) in cases {
            let e = stalled("postgres://u:***@db.internal/app", &phase, limit);
            assert_eq!(e.code(), Code::SourceConnect);
            assert_eq!(e.code().class(), crate::error::Class::Transient);
            assert!(e.to_string().contains(want), "{phase:?}: {e}");
            let hint = e.hint_text().unwrap();
            assert!(
                hint.contains("source.timeouts.connect_seconds (10 s)"),
                "{hint}"
            );
        }
    }

    #[test]
    fn an_ip_literal_is_not_looked_up() {
        rt().block_on(async {
            let deadline = Deadline::after(Duration::from_secs(1));
            let addrs = resolve("[::1]", 5432, "t", &deadline).await.unwrap();
            assert_eq!(addrs, vec!["[::1]:5432".parse().unwrap()]);
            let addrs = resolve("127.0.0.1", 1, "t", &deadline).await.unwrap();
            assert_eq!(addrs, vec!["127.0.0.1:1".parse().unwrap()]);
        });
    }

    #[test]
    fn a_refused_connect_is_an_error_not_a_stall() {
        // A port nothing listens on: bind one, learn it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        rt().block_on(async {
            let deadline = Deadline::after(Duration::from_secs(5));
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let e = tcp_connect(&[addr], "t", &deadline).await.unwrap_err();
            assert_eq!(e.code(), Code::SourceConnect);
            assert!(e.to_string().contains("failed"), "{e}");
        });
    }
}
