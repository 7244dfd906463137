//! The one place that hides secrets in text meant for people: URLs lose their password
//! before they reach a log line, an error, a summary or `state show`.

/// Query parameters that carry a secret in connection URLs (libpq's `password`, and the
/// same name in MySQL and SQL Server URLs).
pub const SECRET_PARAMS: &[&str] = &["password", "sslpassword", "pwd"];

/// Returns `url` with any password — in the user-info or in a query parameter
/// ([`SECRET_PARAMS`]) — replaced by `***`. Text that does not parse as a URL is masked
/// after the scheme, so a malformed secret is never echoed either.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) if parsed.cannot_be_a_base() => format!("{}:***", parsed.scheme()),
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            if parsed.query_pairs().any(|(k, _)| is_secret_param(&k)) {
                let pairs: Vec<(String, String)> = parsed
                    .query_pairs()
                    .map(|(k, v)| {
                        let v = if is_secret_param(&k) {
                            "***".into()
                        } else {
                            v.into_owned()
                        };
                        (k.into_owned(), v)
                    })
                    .collect();
                parsed.query_pairs_mut().clear().extend_pairs(pairs);
            }
            parsed.to_string()
        }
        Err(_) => match url.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://***"),
            None => "***".to_owned(),
        },
    }
}

/// True for a query parameter name that carries a secret.
pub fn is_secret_param(name: &str) -> bool {
    SECRET_PARAMS.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// True for host names and addresses that never leave the machine.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .map(|ip| ip.is_loopback())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_url("postgres://u:p%40ss@db:5432/app"),
            "postgres://u:***@db:5432/app"
        );
        assert_eq!(redact_url("postgres://u@db/app"), "postgres://u@db/app");
        assert_eq!(redact_url("postgres://u:pa ss@[bad"), "postgres://***");
        assert_eq!(redact_url("u:secret"), "u:***");
        assert_eq!(redact_url("not a url"), "***");
        assert_eq!(
            redact_url("postgres://u@db/app?password=hunter2&sslmode=require"),
            "postgres://u@db/app?password=***&sslmode=require"
        );
        assert!(!redact_url("mysql://u@db/app?PASSWORD=hunter2").contains("hunter2"));
    }

    #[test]
    fn loopback_detection() {
        for host in ["127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["10.0.0.1", "db.example.com", "", "localhost.evil.com"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
