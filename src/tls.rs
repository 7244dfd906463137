//! TLS to a source, engine-neutral: the `source.tls` setting, the gate that refuses a
//! plain connection to a non-loopback host, and the rustls client configuration for each
//! mode (ring crypto, no OpenSSL).
//!
//! Guarantees: the gate is a pure decision taken before any connection is attempted; a
//! non-loopback host is never reached without TLS; `verify-full` checks the chain and the
//! host name, `verify-ca` the chain only, `require` encrypts without authenticating the
//! server (handshake signatures are still checked) and logs a warning saying so. Without
//! `ca_file` / `ca_pem_env` the chain is checked against the Web PKI roots.

use std::sync::Arc;

pub use crate::config::{TlsConfig, TlsMode};
use crate::error::{Code, Error, Result};
use crate::redact::is_loopback_host;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The gate's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Allow,
    Refuse,
}

/// Whether a connection to `host` with `mode` may be attempted at all: plain text only
/// to loopback (or a Unix socket, which the caller passes as `localhost`).
pub fn gate(host: &str, mode: TlsMode) -> Gate {
    if mode == TlsMode::Disable && !is_loopback_host(host) {
        Gate::Refuse
    } else {
        Gate::Allow
    }
}

/// The mode in force for `host`, after checking the setting and the gate: an error means
/// no connection to `host` may be attempted (pure, no I/O).
pub fn checked_mode(tls: &TlsConfig, host: &str) -> Result<TlsMode> {
    tls.validate()?;
    let mode = tls.mode_for(host);
    if gate(host, mode) == Gate::Refuse {
        return Err(Error::new(
            Code::ConfigTlsRequired,
            format!("source.tls.mode is disable but host {host} is not loopback"),
        )
        .hint("set source.tls.mode to verify-full (the default) and source.tls.ca_file to the server's CA bundle; only loopback hosts may connect without TLS"));
    }
    Ok(mode)
}

/// The warning every `require` connection logs: encrypted, not authenticated.
pub fn warn_unauthenticated(host: &str) {
    tracing::warn!(
        host,
        "source.tls.mode is require: the connection is encrypted but the server is NOT authenticated; use verify-full with source.tls.ca_file"
    );
}

/// The client configuration for `host`: `Ok(None)` means connect without TLS (allowed by
/// the gate); an error means the connection must not be attempted.
pub fn client_config(tls: &TlsConfig, host: &str) -> Result<Option<Arc<rustls::ClientConfig>>> {
    let mode = checked_mode(tls, host)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(Code::Internal, "TLS protocol versions").source(e))?;
    let config = match mode {
        TlsMode::Disable => return Ok(None),
        TlsMode::VerifyFull => builder
            .with_root_certificates(roots(tls)?)
            .with_no_client_auth(),
        TlsMode::VerifyCa => {
            let inner =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots(tls)?), provider)
                    .build()
                    .map_err(|e| {
                        Error::new(Code::ConfigInvalid, "source.tls: no usable CA certificate")
                            .hint("set source.tls.ca_file to a PEM file with the server's CA")
                            .source(e)
                    })?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly { inner }))
                .with_no_client_auth()
        }
        TlsMode::Require => {
            warn_unauthenticated(host);
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert {
                    algorithms: provider.signature_verification_algorithms,
                }))
                .with_no_client_auth()
        }
    };
    Ok(Some(Arc::new(config)))
}

/// The configured trust anchors as DER certificates: `ca_file` or `ca_pem_env`, each
/// checked to hold at least one usable certificate; `None` when neither is set (the Web
/// PKI roots apply).
pub fn ca_certificates(tls: &TlsConfig) -> Result<Option<Vec<CertificateDer<'static>>>> {
    if tls.ca_file.is_none() && tls.ca_pem_env.is_none() {
        return Ok(None);
    }
    let (pem, what) = ca_pem(tls)?;
    let mut certs = Vec::new();
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| {
            Error::new(Code::ConfigInvalid, format!("{what} is not valid PEM"))
                .hint("use PEM certificates (-----BEGIN CERTIFICATE-----)")
                .source(e)
        })?;
        store.add(cert.clone()).map_err(|e| {
            Error::new(
                Code::ConfigInvalid,
                format!("{what} holds an unusable CA certificate"),
            )
            .source(e)
        })?;
        certs.push(cert);
    }
    if certs.is_empty() {
        return Err(
            Error::new(Code::ConfigInvalid, format!("{what} holds no certificate"))
                .hint("use a PEM file with -----BEGIN CERTIFICATE----- blocks"),
        );
    }
    Ok(Some(certs))
}

/// The trust anchors: `ca_file`, `ca_pem_env`, or the Web PKI roots.
fn roots(tls: &TlsConfig) -> Result<RootCertStore> {
    match ca_certificates(tls)? {
        None => Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        }),
        Some(certs) => {
            // Every certificate was already added once by `ca_certificates`.
            let mut store = RootCertStore::empty();
            store.add_parsable_certificates(certs);
            Ok(store)
        }
    }
}

/// The PEM text of `ca_file` / `ca_pem_env` (one is set) and how to name it in errors.
fn ca_pem(tls: &TlsConfig) -> Result<(Vec<u8>, String)> {
    if let Some(path) = &tls.ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            Error::new(
                Code::ConfigInvalid,
                format!("source.tls.ca_file {} cannot be read", path.display()),
            )
            .hint("point source.tls.ca_file at a readable PEM file")
            .source(e)
        })?;
        return Ok((pem, format!("source.tls.ca_file {}", path.display())));
    }
    let var = tls.ca_pem_env.as_deref().unwrap_or_default();
    let pem = std::env::var(var).map_err(|_| {
        Error::new(
            Code::ConfigInvalid,
            format!("environment variable {var} (source.tls.ca_pem_env) is not set"),
        )
        .hint(format!("export {var} with the CA certificates as PEM text"))
    })?;
    Ok((pem.into_bytes(), format!("source.tls.ca_pem_env {var}")))
}

/// True when `cause` (or anything in its chain, including `io::Error` payloads) is a
/// rustls certificate rejection; returns the rustls error.
pub fn rustls_cause<'a>(cause: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(cause);
    while let Some(err) = next {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(r) = inner.downcast_ref::<rustls::Error>()
        {
            return Some(r);
        }
        next = err.source();
    }
    None
}

/// The operator hint for a TLS handshake failure.
pub fn handshake_hint(e: &rustls::Error, host: &str) -> String {
    match e {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "the server certificate does not name {host}: connect with a host name listed in the certificate, or set source.tls.mode to verify-ca"
        ),
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature) => {
            "the server certificate is not signed by a trusted CA: set source.tls.ca_file to the server's CA bundle (RDS: https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem)".to_owned()
        }
        rustls::Error::InvalidCertificate(_) => {
            "the server certificate was rejected (expired or malformed); check it, and source.tls.ca_file".to_owned()
        }
        _ => "the TLS handshake failed; check source.tls and the server's TLS settings".to_owned(),
    }
}

/// `verify-ca`: the WebPKI chain check, with a host-name mismatch (checked only after the
/// chain has verified) accepted.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `require`: any certificate is accepted; handshake signatures are still verified, so
/// the session key is bound to the presented certificate.
#[derive(Debug)]
struct AnyCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_refuses_plain_text_off_loopback() {
        use TlsMode::*;
        let cases = [
            ("127.0.0.1", Disable, Gate::Allow),
            ("localhost", Disable, Gate::Allow),
            ("::1", Disable, Gate::Allow),
            ("db.example.com", Disable, Gate::Refuse),
            ("10.0.0.5", Disable, Gate::Refuse),
            ("localhost.evil.com", Disable, Gate::Refuse),
            ("db.example.com", Require, Gate::Allow),
            ("db.example.com", VerifyCa, Gate::Allow),
            ("db.example.com", VerifyFull, Gate::Allow),
        ];
        for (host, mode, want) in cases {
            assert_eq!(gate(host, mode), want, "{host} {mode:?}");
        }
    }

    #[test]
    fn default_mode_is_verify_full_except_loopback() {
        let tls = TlsConfig::default();
        assert_eq!(tls.mode_for("db.example.com"), TlsMode::VerifyFull);
        assert_eq!(tls.mode_for("127.0.0.1"), TlsMode::Disable);
        let explicit = TlsConfig {
            mode: Some(TlsMode::VerifyFull),
            ..TlsConfig::default()
        };
        assert_eq!(explicit.mode_for("127.0.0.1"), TlsMode::VerifyFull);
        let with_ca = TlsConfig {
            ca_file: Some("ca.pem".into()),
            ..TlsConfig::default()
        };
        assert_eq!(with_ca.mode_for("localhost"), TlsMode::VerifyFull);
    }

    #[test]
    fn refusal_names_the_setting_and_builds_nothing() {
        let tls = TlsConfig {
            mode: Some(TlsMode::Disable),
            ..TlsConfig::default()
        };
        let err = client_config(&tls, "db.example.com").unwrap_err();
        assert_eq!(err.code(), Code::ConfigTlsRequired);
        assert!(err.to_string().contains("source.tls.mode"), "{err}");
        assert!(client_config(&tls, "127.0.0.1").unwrap().is_none());
    }

    #[test]
    fn every_verifying_mode_builds_a_config() {
        for mode in [TlsMode::Require, TlsMode::VerifyCa, TlsMode::VerifyFull] {
            let tls = TlsConfig {
                mode: Some(mode),
                ..TlsConfig::default()
            };
            assert!(
                client_config(&tls, "db.example.com").unwrap().is_some(),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn bad_ca_sources_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificates here\n").unwrap();
        for ca_file in [dir.path().join("missing.pem"), empty] {
            let tls = TlsConfig {
                mode: Some(TlsMode::VerifyFull),
                ca_file: Some(ca_file),
                ca_pem_env: None,
            };
            let err = client_config(&tls, "db.example.com").unwrap_err();
            assert_eq!(err.code(), Code::ConfigInvalid, "{err}");
            assert!(err.to_string().contains("source.tls.ca_file"), "{err}");
        }
    }
}
