//! `verify-ca` for MySQL / MariaDB: finds a name the server certificate is valid for, so
//! the real connection can verify chain *and* that name.
//!
//! mysql_async 0.37's own "skip domain validation" does not work with rustls 0.23 (it
//! matches the error's text, which no longer carries the variant name), so `verify-ca`
//! is built from parts that do: this probe opens one TCP connection, asks for TLS
//! (MySQL `SSLRequest`), completes the handshake with [`crate::tls`]'s chain-only
//! verifier and reads the certificate's DNS names, then closes without authenticating.
//! The caller connects with that name as mysql_async's TLS host-name override, so the
//! session that carries the password is verified in full against the configured CA.
//!
//! Guarantees: nothing but the handshake packet and `SSLRequest` is sent before TLS is
//! up and no credential is ever sent on the probe; a certificate whose chain does not
//! verify fails the probe with `SLUICE_SOURCE_TLS`; a server that does not offer TLS is
//! refused (`SLUICE_SOURCE_TLS`); the probe runs under the connection's establishment
//! deadline (`source.timeouts.connect_seconds`), each of its steps — TCP connect,
//! greeting, TLS handshake — named when it stalls.

use std::net::SocketAddr;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Code, Error, Result};
use crate::source::establish::{Deadline, Phase, stalled, tcp_connect};
use crate::tls::{TlsConfig, client_config, handshake_hint, rustls_cause};

/// `CLIENT_SSL` in the server greeting's capability flags.
const CLIENT_SSL: u32 = 0x0800;

/// A name the certificate of the server at `addrs` (the addresses of `host`) is valid
/// for, its chain verified against `tls`; `None` when the certificate already names
/// `host` (no override needed) or names no DNS host. `target` is the redacted URL, for
/// messages; `deadline` bounds every step.
pub async fn certificate_name(
    addrs: &[SocketAddr],
    host: &str,
    tls: &TlsConfig,
    target: &str,
    deadline: &Deadline,
) -> Result<Option<String>> {
    let config = client_config(tls, host)?.ok_or_else(|| {
        Error::new(
            Code::Internal,
            "the verify-ca probe was asked for a plain connection",
        )
    })?;
    let server_name = ServerName::try_from(host.to_owned()).map_err(|e| {
        Error::new(
            Code::ConfigInvalid,
            format!("{target}: {host} is not a valid TLS server name"),
        )
        .source(e)
    })?;
    let mut tcp = tcp_connect(addrs, target, deadline).await?;
    let at = tcp
        .peer_addr()
        .map_or_else(|_| host.to_owned(), |a| a.to_string());
    let late = |phase: Phase| stalled(target, &phase, deadline.limit());
    let greeting = deadline
        .run(read_packet(&mut tcp, target))
        .await
        .ok_or_else(|| {
            late(Phase::NoAnswer {
                at: at.clone(),
                awaited: "greeting",
            })
        })??;
    if server_capabilities(&greeting, target)? & CLIENT_SSL == 0 {
        return Err(Error::new(
            Code::SourceTls,
            format!("{target} does not accept TLS connections"),
        )
        .hint("enable TLS on the server (ssl_cert/ssl_key), or (loopback only) set source.tls.mode to disable"));
    }
    let handshake = async {
        tcp.write_all(&ssl_request())
            .await
            .map_err(|e| lost(target, e))?;
        tokio_rustls::TlsConnector::from(config)
            .connect(server_name, tcp)
            .await
            .map_err(|e| match rustls_cause(&e) {
                Some(cause) => Error::new(
                    Code::SourceTls,
                    format!("TLS handshake with {target} failed: {cause}"),
                )
                .hint(handshake_hint(cause, host))
                .source(e),
                None => lost(target, e),
            })
    };
    let stream = deadline
        .run(handshake)
        .await
        .ok_or_else(|| late(Phase::TlsHandshake { at: at.clone() }))??;
    let (_, session) = stream.get_ref();
    let leaf = session
        .peer_certificates()
        .and_then(|certs| certs.first())
        .ok_or_else(|| {
            Error::new(
                Code::SourceTls,
                format!("{target} presented no certificate"),
            )
        })?;
    let cert = webpki::EndEntityCert::try_from(leaf).map_err(|e| {
        Error::new(
            Code::SourceTls,
            format!("{target} presented an unparsable certificate: {e}"),
        )
    })?;
    let names: Vec<String> = cert.valid_dns_names().map(str::to_owned).collect();
    Ok(pick_name(host, &names))
}

/// The override for `host` among the certificate's DNS `names`: none when a name already
/// matches `host`; else the first plain name; else the first wildcard with its `*`
/// label filled in. Pure.
pub fn pick_name(host: &str, names: &[String]) -> Option<String> {
    let matches = |name: &str| {
        name.eq_ignore_ascii_case(host)
            || name.strip_prefix("*.").is_some_and(|rest| {
                host.split_once('.')
                    .is_some_and(|(_, parent)| parent.eq_ignore_ascii_case(rest))
            })
    };
    if names.iter().any(|n| matches(n)) {
        return None;
    }
    names
        .iter()
        .find(|n| !n.starts_with("*."))
        .cloned()
        .or_else(|| {
            names
                .iter()
                .find_map(|n| n.strip_prefix("*.").map(|rest| format!("sluice.{rest}")))
        })
}

/// Reads one MySQL packet's payload.
async fn read_packet(tcp: &mut TcpStream, target: &str) -> Result<Vec<u8>> {
    let mut header = [0u8; 4];
    tcp.read_exact(&mut header)
        .await
        .map_err(|e| lost(target, e))?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut payload = vec![0u8; len];
    tcp.read_exact(&mut payload)
        .await
        .map_err(|e| lost(target, e))?;
    Ok(payload)
}

/// The capability flags of a HandshakeV10 greeting; an ERR packet becomes its error.
pub fn server_capabilities(greeting: &[u8], target: &str) -> Result<u32> {
    match greeting.first() {
        Some(0xff) => {
            let errno = greeting
                .get(1..3)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .unwrap_or(0);
            let message = String::from_utf8_lossy(greeting.get(3..).unwrap_or_default());
            Err(Error::new(
                Code::SourceConnect,
                format!(
                    "connecting to {target}: {} (error {errno})",
                    message.trim_start_matches('#')
                ),
            )
            .hint("check that the server is up and accepts connections from this host"))
        }
        Some(10) => {
            let version_end = greeting
                .iter()
                .skip(1)
                .position(|&b| b == 0)
                .map(|p| p + 1)
                .ok_or_else(|| protocol(target))?;
            // NUL, connection id (4), auth data part 1 (8), filler (1), capabilities low (2).
            let at = version_end + 1 + 4 + 8 + 1;
            let low = greeting.get(at..at + 2).ok_or_else(|| protocol(target))?;
            let mut caps = u32::from(u16::from_le_bytes([low[0], low[1]]));
            // charset (1), status (2), capabilities high (2).
            if let Some(high) = greeting.get(at + 5..at + 7) {
                caps |= u32::from(u16::from_le_bytes([high[0], high[1]])) << 16;
            }
            Ok(caps)
        }
        _ => Err(protocol(target)),
    }
}

/// `SSLRequest` (sequence 1): protocol 4.1, TLS, 16 MiB packets, utf8mb4.
fn ssl_request() -> [u8; 36] {
    const CLIENT_LONG_PASSWORD: u32 = 0x0001;
    const CLIENT_PROTOCOL_41: u32 = 0x0200;
    const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
    let mut packet = [0u8; 36];
    packet[..4].copy_from_slice(&[32, 0, 0, 1]);
    let caps = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION;
    packet[4..8].copy_from_slice(&caps.to_le_bytes());
    packet[8..12].copy_from_slice(&(16u32 << 20).to_le_bytes());
    packet[12] = 45; // utf8mb4_general_ci
    packet
}

fn lost(target: &str, e: std::io::Error) -> Error {
    Error::new(
        Code::SourceConnect,
        format!("connecting to {target}: the connection failed during the TLS probe"),
    )
    .hint("check that the host and port are a MySQL / MariaDB server reachable from here")
    .source(e)
}

fn protocol(target: &str) -> Error {
    Error::new(
        Code::SourceProtocol,
        format!("{target} did not answer with a MySQL handshake"),
    )
    .hint(
        "check that the host and port are a MySQL / MariaDB server, not a proxy or another service",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_override_is_a_name_the_certificate_holds() {
        let cert = names(&["db.internal", "*.rds.example.com"]);
        assert_eq!(pick_name("db.internal", &cert), None);
        assert_eq!(pick_name("DB.internal", &cert), None);
        assert_eq!(pick_name("a.rds.example.com", &cert), None);
        assert_eq!(pick_name("10.0.0.5", &cert).as_deref(), Some("db.internal"));
        let wildcard = names(&["*.rds.example.com"]);
        assert_eq!(
            pick_name("127.0.0.1", &wildcard).as_deref(),
            Some("sluice.rds.example.com")
        );
        assert_eq!(pick_name("127.0.0.1", &[]), None);
    }

    #[test]
    fn greeting_capabilities_and_errors() {
        // protocol 10, "10.11.9\0", id, 8 bytes auth, filler, caps low 0x0800|0x0200, charset,
        // status, caps high 0x0001.
        let mut greeting = vec![10];
        greeting.extend_from_slice(b"10.11.9\0");
        greeting.extend_from_slice(&[1, 0, 0, 0]);
        greeting.extend_from_slice(&[0; 8]);
        greeting.push(0);
        greeting.extend_from_slice(&0x0a00u16.to_le_bytes());
        greeting.push(45);
        greeting.extend_from_slice(&[2, 0]);
        greeting.extend_from_slice(&1u16.to_le_bytes());
        let caps = server_capabilities(&greeting, "t").unwrap();
        assert_eq!(caps & CLIENT_SSL, CLIENT_SSL);
        assert_eq!(caps >> 16, 1);

        let mut err = vec![0xff];
        err.extend_from_slice(&1040u16.to_le_bytes());
        err.extend_from_slice(b"Too many connections");
        let e = server_capabilities(&err, "t").unwrap_err();
        assert_eq!(e.code(), Code::SourceConnect);
        assert!(e.to_string().contains("Too many connections"), "{e}");

        assert_eq!(
            server_capabilities(b"HTTP/1.1 400", "t")
                .unwrap_err()
                .code(),
            Code::SourceProtocol
        );
        assert_eq!(
            server_capabilities(&[10, b'x'], "t").unwrap_err().code(),
            Code::SourceProtocol
        );
    }

    #[test]
    fn ssl_request_is_a_well_formed_packet() {
        let p = ssl_request();
        assert_eq!(&p[..4], &[32, 0, 0, 1]);
        let caps = u32::from_le_bytes([p[4], p[5], p[6], p[7]]);
        assert_eq!(caps & CLIENT_SSL, CLIENT_SSL);
        assert!(p[13..].iter().all(|&b| b == 0));
    }
}
