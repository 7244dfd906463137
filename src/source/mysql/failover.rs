//! GTIDs of a MariaDB server, and the decision to follow a failover by them (MySQL's GTID
//! sets: [`super::mysql_gtid`]).
//!
//! Guarantees:
//! * [`check_follow`] (pure) lets a stream continue on another server only when that
//!   server's binlog holds every transaction up to the checkpoint's GTID position — for
//!   each domain, the checkpoint's last GTID `d-s-n` needs `d-s-m` with `m ≥ n` in the
//!   server's `@@gtid_binlog_state` — and the server keeps GTID order (`gtid_strict_mode`),
//!   so "everything after the checkpoint" is well defined. Anything else is
//!   `SLUICE_SOURCE_FAILOVER_GAP`, naming the missing GTIDs; a stream never re-anchors;
//! * [`gtid_at`] asks the server for the GTID position at a binlog position
//!   (`BINLOG_GTID_POS`), which a checkpoint written without one gets on its next write;
//! * [`follow_verdict`] (pure) says from a server's settings whether a job reading it can
//!   follow a failover (doctor): MariaDB needs `gtid_strict_mode` (and, on a replica,
//!   `log_slave_updates`); MySQL needs `gtid_mode = ON` and `enforce_gtid_consistency =
//!   ON` (and, on a replica, `log_replica_updates`) — MySQL's own follow decision is
//!   [`super::mysql_gtid::check_follow`].

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::connect::query_error;
use super::prerequisites::Flavor;
use crate::error::{Code, Error, Result};
use crate::position::{BinlogPosition, Gtid, GtidPos};

/// The GTID facts of a MariaDB server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerGtids {
    /// `@@gtid_binlog_state`: the last GTID of every (domain, server) in its binlog.
    pub state: Vec<Gtid>,
    /// `@@gtid_strict_mode`.
    pub strict: bool,
}

/// Reads `@@gtid_binlog_state` and `@@gtid_strict_mode`.
pub async fn server_gtids(conn: &mut Conn) -> Result<ServerGtids> {
    let row: Option<(String, u8)> = conn
        .query_first("SELECT @@GLOBAL.gtid_binlog_state, @@GLOBAL.gtid_strict_mode")
        .await
        .map_err(|e| query_error("reading the server's GTID state (@@gtid_binlog_state)", e))?;
    let (state, strict) = row.unwrap_or_default();
    let state = parse_state(&state).ok_or_else(|| {
        Error::new(
            Code::SourceProtocol,
            format!("@@gtid_binlog_state {state:?} is not a GTID list"),
        )
    })?;
    Ok(ServerGtids {
        state,
        strict: strict != 0,
    })
}

/// Parses a `gtid_binlog_state` list (several servers per domain allowed).
pub fn parse_state(text: &str) -> Option<Vec<Gtid>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Gtid::parse)
        .collect()
}

/// The GTID position at `at` on this server (`BINLOG_GTID_POS`), when it can be told.
pub async fn gtid_at(conn: &mut Conn, at: &BinlogPosition) -> Result<Option<GtidPos>> {
    let text: Option<Option<String>> = conn
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (at.file(), at.offset()))
        .await
        .map_err(|e| query_error(&format!("reading the GTID position at {at}"), e))?;
    let text = text.flatten();
    let pos = text.as_deref().and_then(GtidPos::parse);
    if pos.is_none() {
        tracing::warn!(at = %at, gtid = ?text, "the server reports no GTID position here; the checkpoint keeps only file:offset (a failover cannot be followed from it)");
    }
    Ok(pos)
}

/// Allows continuing at `checkpoint` on a server with `server`'s GTIDs. Pure.
pub fn check_follow(checkpoint: &GtidPos, server: &ServerGtids) -> Result<()> {
    if !server.strict {
        return Err(gap(
            "this server runs with gtid_strict_mode = OFF: its GTIDs are not in sequence order, so the transactions after the checkpoint cannot be told apart from the ones before".to_owned(),
        )
        .hint(
            "SET GLOBAL gtid_strict_mode = ON (and in the server's configuration) on the new primary, then run again; \
             or re-baseline: clear the job's state with `sluice state clear --config FILE` and run a new baseline",
        ));
    }
    let missing: Vec<String> = checkpoint
        .iter()
        .filter_map(|want| {
            let have = server
                .state
                .iter()
                .filter(|g| g.domain == want.domain && g.server == want.server)
                .map(|g| g.seq)
                .max()
                .unwrap_or(0);
            (have < want.seq).then(|| {
                let first = Gtid {
                    seq: have + 1,
                    ..*want
                };
                if first.seq == want.seq {
                    want.to_string()
                } else {
                    format!("{first}..{want}")
                }
            })
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(gap(format!(
        "this server's binlog lacks transactions the checkpoint already read (a lossy failover): GTIDs {} are missing (the checkpoint is at {checkpoint})",
        missing.join(", ")
    )))
}

/// `SLUICE_SOURCE_FAILOVER_GAP` with the re-baseline steps.
pub fn gap(message: String) -> Error {
    Error::new(Code::SourceFailoverGap, message).hint(
        "the changes the job already wrote are not on this server, so continuing here would mix two histories: point \
         source.url at a server that has them (the old primary, or a replica that received them), or re-baseline — clear \
         the job's state with `sluice state clear --config FILE` and run a new baseline",
    )
}

/// What doctor says about following a failover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowVerdict {
    /// A failover to a server like this one can be followed by GTID.
    Yes,
    /// It cannot; why, and the setting that would change it.
    No(String),
}

/// Whether a job reading a server with these global settings (lower-case names) can
/// follow a failover; `replica`: the server replicates from another. Pure.
pub fn follow_verdict(
    flavor: Flavor,
    settings: &std::collections::HashMap<String, String>,
    replica: bool,
) -> FollowVerdict {
    let on = |name: &str| {
        settings
            .get(name)
            .is_some_and(|v| matches!(v.to_ascii_uppercase().as_str(), "ON" | "1"))
    };
    match flavor {
        Flavor::MariaDb => {
            if !on("gtid_strict_mode") {
                FollowVerdict::No("gtid_strict_mode is OFF: SET GLOBAL gtid_strict_mode = ON on this server and every replica that may be promoted (and persist it)".to_owned())
            } else if replica && !on("log_slave_updates") {
                FollowVerdict::No("this replica runs with log_slave_updates = OFF: its binlog lacks the replicated changes; set log_slave_updates = ON (a restart)".to_owned())
            } else {
                FollowVerdict::Yes
            }
        }
        Flavor::MySql => {
            let mode = settings
                .get("gtid_mode")
                .map(|v| v.to_ascii_uppercase())
                .unwrap_or_default();
            if mode != "ON" {
                FollowVerdict::No(format!(
                    "gtid_mode is {}: set gtid_mode = ON (through OFF_PERMISSIVE and ON_PERMISSIVE) and enforce_gtid_consistency = ON",
                    if mode.is_empty() { "unknown" } else { &mode }
                ))
            } else if !on("enforce_gtid_consistency") {
                FollowVerdict::No(
                    "enforce_gtid_consistency is not ON: SET GLOBAL enforce_gtid_consistency = ON"
                        .to_owned(),
                )
            } else if replica && !on("log_replica_updates") && !on("log_slave_updates") {
                FollowVerdict::No("this replica runs with log_replica_updates = OFF: its binlog lacks the replicated changes".to_owned())
            } else {
                FollowVerdict::Yes
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(state: &str, strict: bool) -> ServerGtids {
        ServerGtids {
            state: parse_state(state).unwrap(),
            strict,
        }
    }

    fn cp(text: &str) -> GtidPos {
        GtidPos::parse(text).unwrap()
    }

    #[test]
    fn a_server_with_everything_up_to_the_checkpoint_is_followed() {
        let promoted = server("0-1-100,0-2-105,7-3-4", true);
        check_follow(&cp("0-1-100"), &promoted).unwrap();
        check_follow(&cp("0-1-90,7-3-4"), &promoted).unwrap();
        check_follow(&cp(""), &promoted).unwrap();
    }

    #[test]
    fn a_lossy_failover_names_the_missing_gtids() {
        let behind = server("0-1-97,0-2-98", true);
        let err = check_follow(&cp("0-1-100,5-1-3"), &behind).unwrap_err();
        assert_eq!(err.code(), Code::SourceFailoverGap);
        let text = err.to_string();
        assert!(text.contains("0-1-98..0-1-100"), "{text}");
        assert!(text.contains("5-1-1..5-1-3"), "{text}");
        assert!(
            err.hint_text()
                .unwrap()
                .contains("`sluice state clear --config FILE`")
        );
        let one = check_follow(&cp("0-1-98"), &behind).unwrap_err();
        assert!(
            one.to_string().contains("GTIDs 0-1-98 are missing"),
            "{one}"
        );
    }

    #[test]
    fn a_server_without_strict_mode_cannot_order_its_gtids() {
        let err = check_follow(&cp("0-1-1"), &server("0-1-100", false)).unwrap_err();
        assert_eq!(err.code(), Code::SourceFailoverGap);
        assert!(err.hint_text().unwrap().contains("gtid_strict_mode = ON"));
    }

    fn settings(list: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn doctor_says_whether_a_failover_can_be_followed() {
        let strict = settings(&[("gtid_strict_mode", "ON"), ("log_slave_updates", "OFF")]);
        assert_eq!(
            follow_verdict(Flavor::MariaDb, &strict, false),
            FollowVerdict::Yes
        );
        assert!(matches!(
            follow_verdict(Flavor::MariaDb, &strict, true),
            FollowVerdict::No(why) if why.contains("log_slave_updates")
        ));
        assert!(matches!(
            follow_verdict(Flavor::MariaDb, &settings(&[("gtid_strict_mode", "OFF")]), false),
            FollowVerdict::No(why) if why.contains("gtid_strict_mode")
        ));
        let mysql_off = settings(&[("gtid_mode", "OFF_PERMISSIVE")]);
        assert!(matches!(
            follow_verdict(Flavor::MySql, &mysql_off, false),
            FollowVerdict::No(why) if why.contains("gtid_mode is OFF_PERMISSIVE")
        ));
        let no_enforce = settings(&[("gtid_mode", "ON"), ("enforce_gtid_consistency", "WARN")]);
        assert!(matches!(
            follow_verdict(Flavor::MySql, &no_enforce, false),
            FollowVerdict::No(why) if why.contains("enforce_gtid_consistency")
        ));
        let mysql_on = settings(&[("gtid_mode", "ON"), ("enforce_gtid_consistency", "ON")]);
        assert!(matches!(
            follow_verdict(Flavor::MySql, &mysql_on, true),
            FollowVerdict::No(why) if why.contains("log_replica_updates")
        ));
        // MySQL 8 as `SHOW GLOBAL VARIABLES` prints it.
        assert_eq!(
            follow_verdict(Flavor::MySql, &mysql_on, false),
            FollowVerdict::Yes
        );
        let replica_on = settings(&[
            ("gtid_mode", "ON"),
            ("enforce_gtid_consistency", "ON"),
            ("log_replica_updates", "ON"),
        ]);
        assert_eq!(
            follow_verdict(Flavor::MySql, &replica_on, true),
            FollowVerdict::Yes
        );
        let lower = settings(&[("gtid_mode", "on"), ("enforce_gtid_consistency", "1")]);
        assert_eq!(
            follow_verdict(Flavor::MySql, &lower, false),
            FollowVerdict::Yes
        );
        for mode in ["OFF", "ON_PERMISSIVE"] {
            let partial = settings(&[("gtid_mode", mode), ("enforce_gtid_consistency", "ON")]);
            assert!(matches!(
                follow_verdict(Flavor::MySql, &partial, false),
                FollowVerdict::No(why) if why.contains(&format!("gtid_mode is {mode}"))
            ));
        }
    }
}
