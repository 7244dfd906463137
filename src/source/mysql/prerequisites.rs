//! The checks a server must pass before sluice reads its binlog, each a small named pure
//! function over what the server reported, so `doctor` and the drain refuse by the same
//! rule, and the MySQL 8 paths are covered by unit tests even where no MySQL 8 runs.
//!
//! Every refusal is `SLUICE_SOURCE_PREREQUISITE` with the exact statement or setting that
//! fixes it. Required: `log_bin=ON`, `binlog_format=ROW`, `binlog_row_image=FULL`,
//! `binlog_row_metadata=FULL` (MariaDB ≥ 10.5, MySQL ≥ 8.0.1 — older servers cannot log
//! column names, and rows are never mapped by column position), no binlog compression that
//! the reader cannot decode or that would hold a whole transaction in memory
//! (`log_bin_compress` on MariaDB, `binlog_transaction_compression` on MySQL), no partial
//! JSON updates, and the grants REPLICATION SLAVE + REPLICATION CLIENT (MariaDB ≥ 10.5
//! calls the latter BINLOG MONITOR).

use std::collections::HashMap;

use crate::error::{Code, Error, Result};

/// Which server family answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    MySql,
    MariaDb,
}

/// The server's family and version, from `SELECT VERSION()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    pub flavor: Flavor,
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

impl ServerVersion {
    /// Parses `8.0.36`, `8.4.0-commercial`, `10.11.19-MariaDB-0+deb12u1-log`,
    /// `5.5.5-10.6.12-MariaDB` (the replication-compatible prefix some proxies and old
    /// clients see).
    pub fn parse(text: &str) -> Option<ServerVersion> {
        let flavor = if text.to_ascii_lowercase().contains("mariadb") {
            Flavor::MariaDb
        } else {
            Flavor::MySql
        };
        let text = text.strip_prefix("5.5.5-").unwrap_or(text);
        let numeric: String = text
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut parts = numeric.split('.').map(|p| p.parse::<u16>().ok());
        let major = parts.next().flatten()?;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(ServerVersion {
            flavor,
            major,
            minor,
            patch,
        })
    }

    fn at_least(&self, major: u16, minor: u16, patch: u16) -> bool {
        (self.major, self.minor, self.patch) >= (major, minor, patch)
    }

    /// The statement that reports the current binlog coordinates: MySQL 8.2 deprecated
    /// `SHOW MASTER STATUS` (removed in 8.4) for `SHOW BINARY LOG STATUS`; MariaDB keeps
    /// `SHOW MASTER STATUS` (its `SHOW BINLOG STATUS` alias exists only from 10.5.2).
    pub fn status_statement(&self) -> &'static str {
        match self.flavor {
            Flavor::MySql if self.at_least(8, 2, 0) => "SHOW BINARY LOG STATUS",
            _ => "SHOW MASTER STATUS",
        }
    }

    /// The statement that lists the binlog files (`SHOW BINARY LOGS` on every version).
    pub fn logs_statement(&self) -> &'static str {
        "SHOW BINARY LOGS"
    }

    /// True when the server can log column names in TABLE_MAP events.
    pub fn has_row_metadata(&self) -> bool {
        match self.flavor {
            Flavor::MySql => self.at_least(8, 0, 1),
            Flavor::MariaDb => self.at_least(10, 5, 0),
        }
    }

    /// The name of the grant that allows reading binlog coordinates.
    pub fn client_grant(&self) -> &'static str {
        match self.flavor {
            Flavor::MariaDb if self.at_least(10, 5, 2) => "BINLOG MONITOR",
            _ => "REPLICATION CLIENT",
        }
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.flavor {
            Flavor::MySql => "MySQL",
            Flavor::MariaDb => "MariaDB",
        };
        write!(f, "{name} {}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The global variables the checks read (`SHOW GLOBAL VARIABLES`), by lower-case name.
pub type Settings = HashMap<String, String>;

/// The variables [`check_settings`] reads.
pub const SETTING_NAMES: &[&str] = &[
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "log_bin_compress",
    "binlog_transaction_compression",
    "binlog_row_value_options",
    // Read for the replica and failover checks (source::mysql::failover), not refused here.
    "log_slave_updates",
    "log_replica_updates",
    "gtid_strict_mode",
    "gtid_mode",
    "enforce_gtid_consistency",
];

fn setting<'a>(settings: &'a Settings, name: &str) -> Option<&'a str> {
    settings.get(name).map(String::as_str)
}

fn refuse(message: String, hint: String) -> Error {
    Error::new(Code::SourcePrerequisite, message).hint(hint)
}

/// The restart-persistent way to set a variable on this server family.
pub fn set_persist(version: &ServerVersion, name: &str, value: &str) -> String {
    match version.flavor {
        Flavor::MySql => format!(
            "SET PERSIST {name} = '{value}' (RDS/Aurora: set {name} = {value} in the DB parameter group)"
        ),
        Flavor::MariaDb => format!(
            "SET GLOBAL {name} = '{value}' and add `{name} = {value}` under [mariadb] in the server's config file (RDS: the DB parameter group)"
        ),
    }
}

/// `log_bin` must be ON.
pub fn ensure_log_bin(version: &ServerVersion, settings: &Settings) -> Result<()> {
    match setting(settings, "log_bin") {
        Some(v) if v.eq_ignore_ascii_case("ON") || v == "1" => Ok(()),
        other => Err(refuse(
            format!("the binary log is off on {version} (log_bin = {})", other.unwrap_or("unset")),
            "start the server with --log-bin (MySQL 8 enables it by default; RDS: enable automated backups, which turns the binlog on) and restart it".to_owned(),
        )),
    }
}

/// `binlog_format` must be ROW.
pub fn ensure_row_format(version: &ServerVersion, settings: &Settings) -> Result<()> {
    match setting(settings, "binlog_format") {
        Some(v) if v.eq_ignore_ascii_case("ROW") => Ok(()),
        other => Err(refuse(
            format!(
                "binlog_format is {} on {version}, not ROW",
                other.unwrap_or("unset")
            ),
            format!(
                "{}; sessions already open keep their format until they reconnect",
                set_persist(version, "binlog_format", "ROW")
            ),
        )),
    }
}

/// `binlog_row_image` must be FULL: updates and deletes need every column's old value.
pub fn ensure_full_row_image(version: &ServerVersion, settings: &Settings) -> Result<()> {
    match setting(settings, "binlog_row_image") {
        Some(v) if v.eq_ignore_ascii_case("FULL") => Ok(()),
        other => Err(refuse(
            format!(
                "binlog_row_image is {} on {version}, not FULL",
                other.unwrap_or("unset")
            ),
            set_persist(version, "binlog_row_image", "FULL"),
        )),
    }
}

/// `binlog_row_metadata` must be FULL, so TABLE_MAP events name their columns.
pub fn ensure_full_row_metadata(version: &ServerVersion, settings: &Settings) -> Result<()> {
    if !version.has_row_metadata() {
        return Err(refuse(
            format!("{version} cannot log column names in the binlog (binlog_row_metadata)"),
            "upgrade to MySQL ≥ 8.0.1 or MariaDB ≥ 10.5; sluice never maps binlog rows by column position".to_owned(),
        ));
    }
    match setting(settings, "binlog_row_metadata") {
        Some(v) if v.eq_ignore_ascii_case("FULL") => Ok(()),
        other => Err(refuse(
            format!(
                "binlog_row_metadata is {} on {version}, not FULL",
                other.unwrap_or("unset")
            ),
            format!(
                "{}; events written before the change carry no column names and are refused when read",
                set_persist(version, "binlog_row_metadata", "FULL")
            ),
        )),
    }
}

/// Compressed binlog events are refused: MariaDB's (`log_bin_compress`, event types
/// 166/167) cannot be decoded, MySQL's (`binlog_transaction_compression`) decompress a
/// whole transaction into memory.
pub fn ensure_no_compression(version: &ServerVersion, settings: &Settings) -> Result<()> {
    for name in ["log_bin_compress", "binlog_transaction_compression"] {
        if let Some(v) = setting(settings, name)
            && (v.eq_ignore_ascii_case("ON") || v == "1")
        {
            return Err(refuse(
                format!(
                    "{name} is ON on {version}: compressed binlog events cannot be streamed within sluice's memory bound"
                ),
                set_persist(version, name, "OFF"),
            ));
        }
    }
    Ok(())
}

/// Partial JSON updates log a diff, not the new value.
pub fn ensure_full_json_values(version: &ServerVersion, settings: &Settings) -> Result<()> {
    match setting(settings, "binlog_row_value_options") {
        Some(v) if v.to_ascii_uppercase().contains("PARTIAL_JSON") => Err(refuse(
            format!(
                "binlog_row_value_options is {v} on {version}: JSON updates are logged as diffs"
            ),
            set_persist(version, "binlog_row_value_options", ""),
        )),
        _ => Ok(()),
    }
}

/// One setting rule.
pub type SettingCheck = fn(&ServerVersion, &Settings) -> Result<()>;

/// Every setting rule with the name `doctor` shows it under, in the order an operator
/// would fix them; [`check_settings`] applies exactly these.
pub const SETTING_CHECKS: &[(&str, SettingCheck)] = &[
    ("log_bin", ensure_log_bin),
    ("binlog_format", ensure_row_format),
    ("binlog_row_image", ensure_full_row_image),
    ("binlog_row_metadata", ensure_full_row_metadata),
    ("binlog compression", ensure_no_compression),
    ("binlog_row_value_options", ensure_full_json_values),
];

/// Every setting check, in the order an operator would fix them.
pub fn check_settings(version: &ServerVersion, settings: &Settings) -> Result<()> {
    for (_, check) in SETTING_CHECKS {
        check(version, settings)?;
    }
    Ok(())
}

/// Checks the `SHOW GRANTS` lines for REPLICATION SLAVE and REPLICATION CLIENT (or
/// BINLOG MONITOR) on `*.*`. Grants through a role cannot be seen this way; when a role
/// is granted the check defers to the server (a missing privilege then fails the status
/// or dump statement with the same hint).
pub fn check_grants(version: &ServerVersion, grants: &[String]) -> Result<()> {
    let mut global = Vec::new();
    let mut has_role = false;
    for line in grants {
        let upper = line.to_ascii_uppercase();
        let Some(rest) = upper.strip_prefix("GRANT ") else {
            continue;
        };
        match rest.split_once(" ON ") {
            Some((privileges, target)) if target.trim_start().starts_with("*.*") => {
                global.extend(privileges.split(',').map(|p| p.trim().to_owned()));
            }
            Some(_) => {}
            None => has_role = true,
        }
    }
    let has = |names: &[&str]| {
        global
            .iter()
            .any(|p| p == "ALL PRIVILEGES" || p == "ALL" || names.contains(&p.as_str()))
    };
    let mut missing = Vec::new();
    if !has(&["REPLICATION SLAVE", "REPLICATION REPLICA"]) {
        missing.push("REPLICATION SLAVE");
    }
    if !has(&["REPLICATION CLIENT", "BINLOG MONITOR"]) {
        missing.push(version.client_grant());
    }
    if missing.is_empty() || has_role {
        return Ok(());
    }
    Err(refuse(
        format!(
            "the source user lacks {} on {version}",
            missing.join(" and ")
        ),
        format!(
            "GRANT SELECT, REPLICATION SLAVE, {} ON *.* TO '<user>'@'<host>'; (the binlog is read as a replica)",
            version.client_grant()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> ServerVersion {
        ServerVersion::parse(text).unwrap()
    }

    fn good() -> Settings {
        [
            ("log_bin", "ON"),
            ("binlog_format", "ROW"),
            ("binlog_row_image", "FULL"),
            ("binlog_row_metadata", "FULL"),
            ("log_bin_compress", "OFF"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn with(name: &str, value: &str) -> Settings {
        let mut s = good();
        s.insert(name.to_owned(), value.to_owned());
        s
    }

    #[test]
    fn versions_parse_for_both_families() {
        let maria = v("10.11.19-MariaDB-0+deb12u1-log");
        assert_eq!(
            (maria.flavor, maria.major, maria.minor, maria.patch),
            (Flavor::MariaDb, 10, 11, 19)
        );
        let old_prefix = v("5.5.5-10.6.12-MariaDB");
        assert_eq!(
            (old_prefix.flavor, old_prefix.major, old_prefix.minor),
            (Flavor::MariaDb, 10, 6)
        );
        let mysql = v("8.0.36");
        assert_eq!(
            (mysql.flavor, mysql.major, mysql.minor, mysql.patch),
            (Flavor::MySql, 8, 0, 36)
        );
        assert_eq!(v("8.4.0-commercial").minor, 4);
        assert!(ServerVersion::parse("garbage").is_none());
    }

    #[test]
    fn the_status_statement_follows_the_version() {
        assert_eq!(v("8.0.36").status_statement(), "SHOW MASTER STATUS");
        assert_eq!(v("8.1.0").status_statement(), "SHOW MASTER STATUS");
        assert_eq!(v("8.2.0").status_statement(), "SHOW BINARY LOG STATUS");
        assert_eq!(v("8.4.3").status_statement(), "SHOW BINARY LOG STATUS");
        assert_eq!(v("9.1.0").status_statement(), "SHOW BINARY LOG STATUS");
        assert_eq!(
            v("10.11.19-MariaDB").status_statement(),
            "SHOW MASTER STATUS"
        );
        assert_eq!(v("11.4.2-MariaDB").status_statement(), "SHOW MASTER STATUS");
    }

    #[test]
    fn a_good_server_passes() {
        check_settings(&v("10.11.19-MariaDB"), &good()).unwrap();
        check_settings(&v("8.0.36"), &good()).unwrap();
    }

    #[test]
    fn each_bad_setting_is_refused_with_its_fix() {
        let maria = v("10.11.19-MariaDB");
        let mysql = v("8.0.36");
        let cases = [
            (maria, with("log_bin", "OFF"), "--log-bin"),
            (
                maria,
                with("binlog_format", "MIXED"),
                "binlog_format = 'ROW'",
            ),
            (
                mysql,
                with("binlog_format", "STATEMENT"),
                "SET PERSIST binlog_format = 'ROW'",
            ),
            (
                maria,
                with("binlog_row_image", "MINIMAL"),
                "binlog_row_image = 'FULL'",
            ),
            (
                maria,
                with("binlog_row_metadata", "NO_LOG"),
                "binlog_row_metadata = 'FULL'",
            ),
            (
                mysql,
                with("binlog_row_metadata", "MINIMAL"),
                "SET PERSIST binlog_row_metadata = 'FULL'",
            ),
            (
                maria,
                with("log_bin_compress", "ON"),
                "log_bin_compress = 'OFF'",
            ),
            (
                mysql,
                with("binlog_transaction_compression", "ON"),
                "binlog_transaction_compression = 'OFF'",
            ),
            (
                mysql,
                with("binlog_row_value_options", "PARTIAL_JSON"),
                "binlog_row_value_options",
            ),
        ];
        for (version, settings, fix) in cases {
            let err = check_settings(&version, &settings).unwrap_err();
            assert_eq!(err.code(), Code::SourcePrerequisite);
            let hint = err.hint_text().unwrap();
            assert!(hint.contains(fix), "{hint} lacks {fix}");
        }
        let missing_metadata: Settings = good()
            .into_iter()
            .filter(|(k, _)| k != "binlog_row_metadata")
            .collect();
        assert!(check_settings(&maria, &missing_metadata).is_err());
    }

    #[test]
    fn servers_without_row_metadata_are_refused() {
        for old in ["10.4.30-MariaDB", "5.7.44", "8.0.0"] {
            let err = ensure_full_row_metadata(&v(old), &good()).unwrap_err();
            assert!(err.hint_text().unwrap().contains("upgrade"), "{old}");
        }
    }

    #[test]
    fn grants() {
        let maria = v("10.11.19-MariaDB");
        let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        check_grants(
            &maria,
            &lines(&["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"]),
        )
        .unwrap();
        check_grants(
            &maria,
            &lines(&["GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `s`@`%`"]),
        )
        .unwrap();
        check_grants(
            &v("8.0.36"),
            &lines(&["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `s`@`%`"]),
        )
        .unwrap();
        let err = check_grants(
            &maria,
            &lines(&[
                "GRANT SELECT ON *.* TO `s`@`%`",
                "GRANT ALL PRIVILEGES ON `app`.* TO `s`@`%`",
            ]),
        )
        .unwrap_err();
        assert!(
            err.message()
                .contains("REPLICATION SLAVE and BINLOG MONITOR"),
            "{err}"
        );
        assert!(
            err.hint_text()
                .unwrap()
                .contains("GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*")
        );
        let err = check_grants(
            &v("8.0.36"),
            &lines(&["GRANT REPLICATION SLAVE ON *.* TO `s`@`%`"]),
        )
        .unwrap_err();
        assert!(err.message().contains("REPLICATION CLIENT"), "{err}");
        // A role may carry the privileges: the server decides.
        check_grants(
            &v("8.0.36"),
            &lines(&[
                "GRANT USAGE ON *.* TO `s`@`%`",
                "GRANT `cdc`@`%` TO `s`@`%`",
            ]),
        )
        .unwrap();
    }
}
