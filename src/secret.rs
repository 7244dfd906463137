//! Source credentials from AWS Secrets Manager (`source.url_secret_arn`).
//!
//! Guarantees:
//! * A secret is read only when a face asks ([`resolve`], [`read_url`]); nothing is cached
//!   here. The face keeps the URL it read in the [`Config`] it passes down (the Lambda
//!   face for the container's lifetime, reading it again after `SLUICE_SOURCE_AUTH`, so a
//!   rotated password works without a redeploy).
//! * The secret holds either a URL (`postgres://…`, `mysql://…`, `sqlserver://…`) or the
//!   JSON object the RDS rotation functions maintain (`engine`, `host`, `port`,
//!   `username`, `password`, `dbname`). [`url_from_secret`] turns the JSON form into a URL,
//!   percent-encoding the user name, password and database, so no character in them can
//!   change the URL's structure.
//! * The value never reaches a log, an error message or a summary: errors name the ARN
//!   and the field, never the content.
//! * The client's region is the ARN's; the endpoint is the SDK's standard override
//!   (`AWS_ENDPOINT_URL_SECRETS_MANAGER`, else `AWS_ENDPOINT_URL`).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::aws::{self, Failure};
use crate::config::{Config, Engine};
use crate::error::{Code, Error, Result};

/// `config` carrying the URL its `source.url_secret_arn` holds; `config` as it is when
/// it names no secret.
/// The hash key of `policy.hash_key.secret_arn` is read too ([`resolve_hash_key`]).
pub async fn resolve(config: &Config) -> Result<Config> {
    let config = match &config.source.url_secret_arn {
        None => config.clone(),
        Some(arn) => {
            let url = read_url(arn, config.engine_block()).await?;
            config.clone().with_secret_url(url)
        }
    };
    resolve_hash_key(config).await
}

/// `config` carrying the column policies' hash key that `policy.hash_key.secret_arn`
/// holds (the secret's string, whole); `config` as it is when the key comes from an
/// environment variable or is already read. Like the URL, it is never logged.
pub async fn resolve_hash_key(mut config: Config) -> Result<Config> {
    let Some(arn) = config
        .policy
        .hash_key
        .as_ref()
        .and_then(|k| k.secret_arn.clone())
    else {
        return Ok(config);
    };
    if config.policy.key.is_none() {
        let key = fetch(&arn).await?;
        config.policy = config
            .policy
            .with_key(crate::config::HashKey::new(key.into_bytes()));
    }
    Ok(config)
}

/// Reads `arn` and returns the source URL it holds. `engine` is the config's engine
/// block, used when the JSON form has no `engine` field.
pub async fn read_url(arn: &str, engine: Option<Engine>) -> Result<String> {
    let text = fetch(arn).await?;
    url_from_secret(arn, &text, engine)
}

/// The region field of a Secrets Manager ARN
/// (`arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME`).
pub fn region_of(arn: &str) -> Result<&str> {
    crate::arn::region(arn, "secretsmanager", "secret").ok_or_else(|| {
        Error::new(
            Code::ConfigSecret,
            format!("source.url_secret_arn {arn:?} is not a Secrets Manager secret ARN"),
        )
        .hint("write the full ARN: arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME")
    })
}

async fn fetch(arn: &str) -> Result<String> {
    let region = region_of(arn)?;
    let sdk = aws::shared_config(None, Some(region)).await?;
    let client = aws_sdk_secretsmanager::Client::new(&sdk);
    let output = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| {
            let detail = aws::describe_failure(&e);
            match aws::classify(&e) {
                Failure::Denied => Error::new(
                    Code::SourceSecretDenied,
                    format!("reading secret {arn} was denied: {detail}"),
                )
                .hint("allow secretsmanager:GetSecretValue on the secret (and kms:Decrypt on its key if it uses a customer-managed key)"),
                Failure::Missing => Error::new(
                    Code::ConfigSecret,
                    format!("secret {arn} does not exist: {detail}"),
                )
                .hint("check source.url_secret_arn and the region in it"),
                Failure::Unavailable => Error::new(
                    Code::SourceSecretUnavailable,
                    format!("Secrets Manager is unreachable reading {arn}: {detail}"),
                )
                .hint("a later run retries; from a VPC, the function needs a route or a secretsmanager VPC endpoint"),
                Failure::Other => Error::new(
                    Code::ConfigSecret,
                    format!("secret {arn} cannot be read: {detail}"),
                )
                .hint("the secret must have a current version with a SecretString"),
            }
        })?;
    output.secret_string().map(str::to_owned).ok_or_else(|| {
        Error::new(
            Code::ConfigSecret,
            format!("secret {arn} holds binary data, not a string"),
        )
        .hint("store the source URL, or a JSON object with host, port, username, password, dbname, as the secret string")
    })
}

/// Bytes kept literally in a URL's user, password and path segment; everything else is
/// percent-encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The source URL a secret's text stands for: the text itself when it is a URL, else
/// the URL built from its JSON fields.
pub fn url_from_secret(arn: &str, text: &str, engine: Option<Engine>) -> Result<String> {
    let text = text.trim();
    if !text.starts_with('{') {
        if text.contains("://") {
            return Ok(text.to_owned());
        }
        return Err(bad_secret(arn, "is neither a URL nor a JSON object"));
    }
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|_| bad_secret(arn, "is not valid JSON"))?;
    let field = |name: &str| -> Option<String> {
        match json.get(name)? {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let engine = match field("engine") {
        Some(name) => engine_named(&name).ok_or_else(|| {
            bad_secret(
                arn,
                &format!("names engine {name:?}, which is not postgres, mysql, mariadb or sqlserver"),
            )
        })?,
        None => engine.ok_or_else(|| {
            bad_secret(arn, "has no `engine` field and the config has no engine block")
                .hint("add \"engine\": \"postgres\" (or mysql, mariadb, sqlserver) to the secret, or a postgres:/mysql:/sqlserver: block to source")
        })?,
    };
    let required =
        |name: &str| field(name).ok_or_else(|| bad_secret(arn, &format!("has no `{name}` field")));
    let host = required("host")?;
    let user = required("username")?;
    let (scheme, default_port) = match engine {
        Engine::Postgres => ("postgres", 5432),
        Engine::MySql => ("mysql", 3306),
        Engine::SqlServer => ("sqlserver", 1433),
    };
    let port = match field("port") {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| bad_secret(arn, "has a `port` that is not a port number"))?,
        None => default_port,
    };
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let mut url = format!("{scheme}://{}", utf8_percent_encode(&user, COMPONENT));
    if let Some(password) = field("password") {
        url.push(':');
        url.extend(utf8_percent_encode(&password, COMPONENT));
    }
    url.push_str(&format!("@{host}:{port}"));
    if let Some(db) = field("dbname").or_else(|| field("database")) {
        url.push('/');
        url.extend(utf8_percent_encode(&db, COMPONENT));
    }
    Ok(url)
}

/// RDS's `engine` values: `postgres`, `aurora-postgresql`, `mysql`, `mariadb`,
/// `aurora-mysql`, `sqlserver-ee|se|ex|web`.
fn engine_named(name: &str) -> Option<Engine> {
    let name = name.to_ascii_lowercase();
    if name.contains("postgres") {
        Some(Engine::Postgres)
    } else if name.contains("mysql") || name.contains("mariadb") {
        Some(Engine::MySql)
    } else if name.starts_with("sqlserver") {
        Some(Engine::SqlServer)
    } else {
        None
    }
}

fn bad_secret(arn: &str, what: &str) -> Error {
    Error::new(Code::ConfigSecret, format!("secret {arn} {what}")).hint(
        "the secret string must be a source URL or a JSON object with host, port, username, password, dbname (and engine)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf";

    #[test]
    fn region_comes_from_the_arn() {
        assert_eq!(region_of(ARN).unwrap(), "eu-west-1");
        for bad in [
            "db-secret",
            "arn:aws:s3:::bucket",
            "arn:aws:secretsmanager::123:secret:x",
            "arn:aws:secretsmanager:eu-west-1:123:secret:",
        ] {
            assert_eq!(
                region_of(bad).unwrap_err().code(),
                Code::ConfigSecret,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_url_secret_is_used_as_it_is() {
        let url = "postgres://u:p%40ss@db.internal:5432/app";
        assert_eq!(
            url_from_secret(ARN, &format!(" {url}\n"), None).unwrap(),
            url
        );
        assert!(url_from_secret(ARN, "hunter2", None).is_err());
    }

    #[test]
    fn json_parts_become_a_url_with_every_special_character_encoded() {
        let password = "p@ss/w:rd?#%& é";
        let text = serde_json::json!({
            "engine": "postgres", "host": "db.internal", "port": 6432,
            "username": "app user", "password": password, "dbname": "my db",
        })
        .to_string();
        let url = url_from_secret(ARN, &text, None).unwrap();
        let parsed = url::Url::parse(&url).unwrap();
        assert_eq!(parsed.scheme(), "postgres");
        assert_eq!(parsed.host_str(), Some("db.internal"));
        assert_eq!(parsed.port(), Some(6432));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .unwrap()
                .into_owned()
        };
        assert_eq!(decode(parsed.username()), "app user");
        assert_eq!(decode(parsed.password().unwrap()), password);
        assert_eq!(decode(parsed.path().trim_start_matches('/')), "my db");
    }

    #[test]
    fn engine_comes_from_the_secret_or_else_the_config() {
        let rds = |engine: &str| {
            serde_json::json!({"engine": engine, "host": "h", "username": "u", "password": "p"})
                .to_string()
        };
        for (engine, scheme) in [
            ("mariadb", "mysql://u:p@h:3306"),
            ("aurora-mysql", "mysql://u:p@h:3306"),
            ("aurora-postgresql", "postgres://u:p@h:5432"),
            ("sqlserver-ex", "sqlserver://u:p@h:1433"),
        ] {
            assert_eq!(url_from_secret(ARN, &rds(engine), None).unwrap(), scheme);
        }
        let bare = r#"{"host": "h", "username": "u", "port": "3307"}"#;
        assert_eq!(
            url_from_secret(ARN, bare, Some(Engine::MySql)).unwrap(),
            "mysql://u@h:3307"
        );
        let err = url_from_secret(ARN, bare, None).unwrap_err();
        assert_eq!(err.code(), Code::ConfigSecret);
        assert!(err.message().contains("engine"), "{}", err.message());
        assert!(url_from_secret(ARN, &rds("oracle-ee"), None).is_err());
    }

    #[test]
    fn errors_name_the_field_never_the_value() {
        let text = r#"{"engine": "postgres", "username": "u", "password": "s3cr3t-value"}"#;
        let err = url_from_secret(ARN, text, None).unwrap_err();
        assert!(err.message().contains("`host`"), "{}", err.message());
        assert!(!err.chain().contains("s3cr3t-value"));
        let err = url_from_secret(ARN, r#"{"password": "s3cr3t-value""#, None).unwrap_err();
        assert!(!err.chain().contains("s3cr3t-value"));
        let text = r#"{"engine":"mysql","host":"h","username":"u","port":"x"}"#;
        assert!(url_from_secret(ARN, text, None).is_err());
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        let text = r#"{"engine":"postgres","host":"::1","username":"u"}"#;
        assert_eq!(
            url_from_secret(ARN, text, None).unwrap(),
            "postgres://u@[::1]:5432"
        );
    }
}
