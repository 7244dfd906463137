//! The `source.tls` block: the mode and where the CA certificates come from, and the
//! mode in force for a host. Data only; the connections that honour it are in `crate::tls`.

use std::path::PathBuf;

use serde::Deserialize;

use crate::error::{Code, Error, Result};
use crate::redact::is_loopback_host;

/// How the connection to the source is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// No TLS; allowed only for loopback hosts.
    Disable,
    /// TLS without authenticating the server.
    Require,
    /// TLS; the chain is verified against the CA, the host name is not checked.
    VerifyCa,
    /// TLS; chain and host name verified.
    VerifyFull,
}

impl TlsMode {
    /// The setting's text, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

/// `source.tls`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// When unset: `verify-full`, except that a loopback host with no CA configured
    /// connects without TLS.
    pub mode: Option<TlsMode>,
    /// PEM file with the CA certificates that sign the server's certificate (for RDS:
    /// the global bundle from https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem).
    pub ca_file: Option<PathBuf>,
    /// Name of an environment variable holding the CA certificates as PEM text.
    pub ca_pem_env: Option<String>,
}

impl TlsConfig {
    /// The mode in force for `host`.
    pub fn mode_for(&self, host: &str) -> TlsMode {
        match self.mode {
            Some(mode) => mode,
            None if is_loopback_host(host)
                && self.ca_file.is_none()
                && self.ca_pem_env.is_none() =>
            {
                TlsMode::Disable
            }
            None => TlsMode::VerifyFull,
        }
    }

    /// Checks the setting itself (no I/O).
    pub fn validate(&self) -> Result<()> {
        if self.ca_file.is_some() && self.ca_pem_env.is_some() {
            return Err(Error::new(
                Code::ConfigInvalid,
                "source.tls.ca_file and source.tls.ca_pem_env are both set",
            )
            .hint("keep exactly one"));
        }
        Ok(())
    }
}
