//! The binlog as a replica sees it: current coordinates, the list of files, the start
//! decision for a checkpoint, and the non-blocking dump connection.
//!
//! Guarantees:
//! * the read bound is the server's coordinates at open (`SHOW MASTER STATUS` /
//!   `SHOW BINARY LOG STATUS`, by version), a transaction boundary;
//! * a new stream starts at a [`consistent_position`]: every transaction before it is
//!   visible to later reads, so a baseline anchored there has no gap; with GTIDs on, the
//!   anchor carries the set executed up to it, read with the coordinates in one step
//!   ([`anchor_with_set`]);
//! * a checkpoint is never re-anchored ([`decide_start`], pure): its file purged while
//!   newer files exist is `SLUICE_SOURCE_LOG_GAP`; its file missing with only
//!   lower-numbered files present, or shorter than the checkpoint offset, means the binlog
//!   was reset or belongs to another server: `SLUICE_SOURCE_FOREIGN_CHECKPOINT`;
//! * the dump registers with the stream's own `server_id` (two connections with one id
//!   make the server drop the older one), asks MariaDB for its GTID events
//!   (`@mariadb_slave_capability = 4`) and uses `BINLOG_DUMP_NON_BLOCK`, so the server
//!   ends the stream at the end of its log instead of waiting for new events;
//! * ERROR 1236 while dumping is classified ([`classify_dump_error`]); a peer that does not
//!   implement the dump (a proxy) is reported as such.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Row};

use super::connect::{errno, query_error, server_errno};
use super::prerequisites::{Flavor, ServerVersion};
use super::refusals::{foreign, log_gap};
use super::schema::quote_ident;
use crate::error::{Code, Error, Result};
use crate::position::{BinlogMark, BinlogPosition, GtidPos, GtidSet};

/// One `SHOW BINARY LOGS` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub name: String,
    pub size: u64,
}

/// The current end of the binlog.
pub async fn current_position(conn: &mut Conn, version: &ServerVersion) -> Result<BinlogPosition> {
    let statement = version.status_statement();
    let row: Option<Row> = conn
        .query_first(statement)
        .await
        .map_err(|e| query_error(&format!("reading the binlog coordinates ({statement})"), e))?;
    let row = row.ok_or_else(|| {
        Error::new(
            Code::SourcePrerequisite,
            format!("{statement} returned nothing: the binary log is off"),
        )
        .hint("start the server with --log-bin and restart it")
    })?;
    let file: String = row.get(0).unwrap_or_default();
    let offset: u64 = row.get(1).unwrap_or_default();
    position(&file, offset)
}

/// A binlog position that no committed-but-not-yet-visible transaction precedes: every
/// transaction written to the binlog before it is visible to any later read, and every
/// transaction after it is in the binlog after it. The anchor of a baseline.
///
/// MariaDB: `START TRANSACTION WITH CONSISTENT SNAPSHOT` records the binlog position of
/// its snapshot (`binlog_snapshot_file` / `binlog_snapshot_position`), taken in commit
/// order; the transaction is committed at once. MySQL has no such status, so the captured
/// tables are locked for reading (`LOCK TABLES … READ`, which waits until every writer of
/// them has fully committed and holds off new ones) while the coordinates are read.
pub async fn consistent_position(
    conn: &mut Conn,
    version: &ServerVersion,
    tables: &[(String, String)],
) -> Result<BinlogPosition> {
    match version.flavor {
        Flavor::MariaDb => {
            conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .await
                .map_err(|e| query_error("starting a consistent snapshot for the anchor", e))?;
            let rows: std::result::Result<Vec<(String, String)>, _> =
                conn.query("SHOW STATUS LIKE 'binlog_snapshot_%'").await;
            let committed = conn.query_drop("COMMIT").await;
            let rows = rows.map_err(|e| query_error("reading binlog_snapshot_file/position", e))?;
            committed.map_err(|e| query_error("ending the anchor's snapshot", e))?;
            let get = |name: &str| {
                rows.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.clone())
            };
            let (Some(file), Some(offset)) =
                (get("binlog_snapshot_file"), get("binlog_snapshot_position"))
            else {
                return Err(Error::new(
                    Code::SourcePrerequisite,
                    "the server reports no binlog_snapshot_file / binlog_snapshot_position",
                )
                .hint("the binary log must be on (--log-bin) for a baseline anchor"));
            };
            if file.is_empty() {
                return Err(Error::new(
                    Code::SourcePrerequisite,
                    "binlog_snapshot_file is empty: the binary log is off",
                )
                .hint("start the server with --log-bin and restart it"));
            }
            let offset: u64 = offset.parse().map_err(|_| {
                Error::new(
                    Code::SourceProtocol,
                    format!("binlog_snapshot_position {offset:?} is not a number"),
                )
            })?;
            position(&file, offset)
        }
        Flavor::MySql => {
            let [bound_wait, lock] = anchor_lock_statements(tables, ANCHOR_LOCK_WAIT_SECONDS);
            conn.query_drop(bound_wait).await.map_err(|e| {
                query_error("bounding the anchor's lock wait (lock_wait_timeout)", e)
            })?;
            conn.query_drop(lock)
                .await
                .map_err(|e| {
                    let waited = super::connect::server_errno(&e) == Some(ER_LOCK_WAIT_TIMEOUT);
                    let lock = query_error("locking the captured tables for the anchor (LOCK TABLES … READ)", e);
                    if waited {
                        Error::new(
                            Code::SourceQuery,
                            format!("the baseline anchor waited {ANCHOR_LOCK_WAIT_SECONDS} s for a read lock on the captured tables and gave up, so their writers are not held up behind it"),
                        )
                        .hint("a long transaction or DDL holds the tables; the next run tries again (find it in performance_schema.metadata_locks)")
                        .source(lock)
                    } else if lock.code() == Code::SourcePrerequisite {
                        lock.hint("the baseline anchor locks the captured tables for a moment: GRANT LOCK TABLES ON `<database>`.* TO '<user>'@'<host>'")
                    } else {
                        lock
                    }
                })?;
            // With GTIDs on, the anchor also carries the set executed up to it, read with
            // the coordinates in one consistent step (performance_schema.log_status, which
            // needs BACKUP_ADMIN); otherwise the stream learns it at the next rotation.
            let result = match anchor_with_set(conn).await {
                Some(anchor) => Ok(anchor),
                None => current_position(conn, version).await,
            };
            let unlocked = conn.query_drop("UNLOCK TABLES").await;
            let result = result?;
            unlocked.map_err(|e| query_error("unlocking the captured tables", e))?;
            Ok(result)
        }
    }
}

/// How long MySQL's anchor waits for its read lock. While `LOCK TABLES … READ` waits
/// behind a writer, every later writer of those tables queues behind *it*, so the wait is
/// kept short and a refused anchor is retried by the next run instead.
pub const ANCHOR_LOCK_WAIT_SECONDS: u32 = 10;

/// `ER_LOCK_WAIT_TIMEOUT`.
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;

/// MySQL's anchor lock: the session's lock wait bound, then the read lock of every table.
fn anchor_lock_statements(tables: &[(String, String)], wait_seconds: u32) -> [String; 2] {
    let list = tables
        .iter()
        .map(|(db, t)| format!("{}.{} READ", quote_ident(db), quote_ident(t)))
        .collect::<Vec<_>>()
        .join(", ");
    [
        format!("SET SESSION lock_wait_timeout = {wait_seconds}"),
        format!("LOCK TABLES {list}"),
    ]
}

/// The server's binlog files, oldest first.
pub async fn log_files(conn: &mut Conn, version: &ServerVersion) -> Result<Vec<LogFile>> {
    let statement = version.logs_statement();
    let rows: Vec<Row> = conn
        .query(statement)
        .await
        .map_err(|e| query_error(&format!("listing the binlog files ({statement})"), e))?;
    Ok(rows
        .into_iter()
        .map(|row| LogFile {
            name: row.get(0).unwrap_or_default(),
            size: row.get(1).unwrap_or_default(),
        })
        .collect())
}

/// A server-reported `(file, offset)` as a typed position.
pub fn position(file: &str, offset: u64) -> Result<BinlogPosition> {
    let offset = u32::try_from(offset).map_err(|_| {
        Error::new(
            Code::SourceProtocol,
            format!("binlog offset {offset} in {file} exceeds 32 bits"),
        )
    })?;
    BinlogPosition::new(file, offset).map_err(|e| {
        Error::new(
            Code::SourcePrerequisite,
            format!("binlog file name {file:?} cannot be tracked: {e}"),
        )
        .hint(
            "use a binlog base name of at most 62 characters without ':' or ';' (log_bin_basename)",
        )
    })
}

/// The binlog's end and the GTID set executed up to it, read consistently from
/// `performance_schema.log_status` (MySQL ≥ 8.0.14; the server holds its logs still while
/// it fills the row). `None` when it cannot be read (no BACKUP_ADMIN, GTIDs off, MariaDB)
/// — then the stream learns the set at its first binlog rotation.
pub async fn anchor_with_set(conn: &mut mysql_async::Conn) -> Option<BinlogPosition> {
    use mysql_async::prelude::Queryable;
    let local: Option<String> = match conn
        .query_first("SELECT CAST(LOCAL AS CHAR) FROM performance_schema.log_status")
        .await
    {
        Ok(row) => row,
        Err(e) => {
            tracing::info!(error = %e, "performance_schema.log_status is not readable (BACKUP_ADMIN): the first checkpoints carry no GTID set until the next binlog rotation");
            None
        }
    };
    let parsed = local.as_deref().and_then(parse_log_status);
    if local.is_some() && parsed.is_none() {
        tracing::info!(local = ?local, "performance_schema.log_status names no binlog position with a GTID set");
    }
    parsed
}

/// The anchor in a `log_status` LOCAL document:
/// `{"gtid_executed": "<set>", "binary_log_file": "<file>", "binary_log_position": <n>}`.
/// `None` when a field is missing or malformed, or GTIDs are off (an empty set on a
/// server that has written transactions cannot be told from "off": both are kept). Pure.
pub fn parse_log_status(local: &str) -> Option<BinlogPosition> {
    let doc: serde_json::Value = serde_json::from_str(local).ok()?;
    let file = doc.get("binary_log_file")?.as_str()?;
    let offset = doc.get("binary_log_position")?.as_u64()?;
    let set = GtidSet::parse(doc.get("gtid_executed")?.as_str()?).ok()?;
    let position = position(file, offset).ok()?;
    let mark = BinlogMark {
        gtid_set: Some(Arc::new(set)),
        ..BinlogMark::default()
    };
    Some(position.with_mark(mark))
}

/// Checks that the binlog still holds the checkpoint's file as it was. Pure.
pub fn decide_start(logs: &[LogFile], checkpoint: &BinlogPosition) -> Result<()> {
    let file = checkpoint.file();
    if let Some(log) = logs.iter().find(|l| l.name == file) {
        if log.size < u64::from(checkpoint.offset()) {
            return Err(foreign(format!(
                "binlog file {file} is {} bytes, shorter than the checkpoint {checkpoint}: it is not the file the checkpoint was taken in",
                log.size
            )));
        }
        return Ok(());
    }
    let newest = logs
        .iter()
        .filter_map(|l| BinlogPosition::new(&l.name, 0).ok())
        .filter(|p| p.base() == checkpoint.base())
        .map(|p| p.suffix())
        .max();
    match newest {
        Some(n) if n > checkpoint.suffix() => Err(log_gap(format!(
            "binlog file {file} of the checkpoint {checkpoint} was purged (the server's binlogs now start at a later file)"
        ))),
        _ => Err(foreign(format!(
            "the server has no binlog file {file} and none after it: the binlog was reset (RESET MASTER) or this is another server"
        ))),
    }
}

/// Refuses a checkpoint past the server's current end of the binlog. Pure.
pub fn check_not_past(checkpoint: &BinlogPosition, bound: &BinlogPosition) -> Result<()> {
    if checkpoint > bound {
        return Err(foreign(format!(
            "the checkpoint {checkpoint} is past the server's current binlog position {bound}: the binlog was reset or this is another server"
        )));
    }
    Ok(())
}

/// Where a dump starts.
#[derive(Debug, Clone, Copy)]
pub enum DumpFrom<'a> {
    /// At a binlog position of this server.
    Position(&'a BinlogPosition),
    /// MariaDB: after a GTID position (`@slave_connect_state`); the position is for errors.
    MariaGtid(&'a BinlogPosition, &'a GtidPos),
    /// MySQL: everything not in a GTID set (COM_BINLOG_DUMP_GTID); the position is for errors.
    MySqlGtidSet(&'a BinlogPosition, &'a GtidSet),
}

/// Opens the non-blocking dump `from` on its own connection.
pub async fn open_dump(
    mut conn: Conn,
    version: &ServerVersion,
    server_id: u32,
    from: DumpFrom<'_>,
) -> Result<BinlogStream> {
    let (from, connect_state, gtid_set) = match from {
        DumpFrom::Position(at) => (at, None, None),
        DumpFrom::MariaGtid(at, gtid) => (at, Some(gtid), None),
        DumpFrom::MySqlGtidSet(at, set) => (at, None, Some(set)),
    };
    if version.flavor == Flavor::MariaDb {
        conn.query_drop("SET @mariadb_slave_capability = 4")
            .await
            .map_err(|e| query_error("announcing the replica's capabilities", e))?;
    }
    let file = from.file();
    let request = BinlogStreamRequest::new(server_id).with_non_blocking();
    let request = match (connect_state, gtid_set) {
        // The same request as `mysql_gtid::dump_request` (whose bytes are tested): no
        // file name, position 4, the set's SIDs; the server sends what the set lacks.
        (_, Some(set)) => request
            .with_gtid()
            .with_pos(4)
            .with_gtid_set(super::mysql_gtid::sids(set)),
        (Some(gtid), None) => {
            // MariaDB starts a dump at `@slave_connect_state` when it is set (the file
            // and offset of the request are then ignored); strict: a GTID missing from
            // the binlog is an error, never a silent skip.
            conn.query_drop(format!(
                "SET @slave_connect_state = '{gtid}', @slave_gtid_strict_mode = 1, @slave_gtid_ignore_duplicates = 0"
            ))
            .await
            .map_err(|e| query_error("setting the GTID position to dump from", e))?;
            request
        }
        (None, None) => request
            .with_filename(file.as_bytes())
            .with_pos(u64::from(from.offset())),
    };
    conn.get_binlog_stream(request)
        .await
        .map_err(|e| classify_dump_error(e, from, server_id))
}

/// Classifies a failure of the binlog dump.
pub fn classify_dump_error(e: mysql_async::Error, at: &BinlogPosition, server_id: u32) -> Error {
    let message = match &e {
        mysql_async::Error::Server(s) => s.message.clone(),
        other => other.to_string(),
    };
    match server_errno(&e) {
        Some(errno::FATAL_READING_BINLOG) => {
            let lower = message.to_ascii_lowercase();
            if lower.contains("gtid") && !lower.contains("purged") {
                super::failover::gap(format!("the server cannot stream from the GTID position of {at}: {message}")).source(e)
            } else if lower.contains("could not find first log file") || lower.contains("purged") {
                log_gap(format!("the binlog at {at} is no longer on the server: {message}")).source(e)
            } else {
                foreign(format!("the server cannot stream from {at}: {message} (the binlog differs from the one the checkpoint was taken in)")).source(e)
            }
        }
        Some(errno::SPECIFIC_ACCESS_DENIED) => Error::new(
            Code::SourcePrerequisite,
            format!("reading the binlog as a replica was denied: {message}"),
        )
        .hint("GRANT REPLICATION SLAVE ON *.* TO '<user>'@'<host>';")
        .source(e),
        Some(errno::UNKNOWN_COMMAND | errno::PARSE_ERROR) => proxy(message).source(e),
        Some(_) => Error::new(Code::SourceQuery, format!("binlog dump from {at} failed: {message}"))
            .hint(format!(
                "if the server dropped the connection because another replica registered with server_id {server_id}, give this job its own source.mysql.server_id"
            ))
            .source(e),
        None => match e {
            mysql_async::Error::Driver(mysql_async::DriverError::UnexpectedPacket { .. }) => proxy(message).source(e),
            other => Error::new(Code::SourceQuery, format!("binlog dump from {at}: connection lost"))
                .hint(format!(
                    "the server closed the binlog connection (another reader with server_id {server_id}, a restart, or a proxy that cannot carry the binlog dump); the next run resumes from the checkpoint"
                ))
                .source(other),
        },
    }
}

fn proxy(message: String) -> Error {
    Error::new(
        Code::SourcePrerequisite,
        format!("the connection does not carry the binlog dump (replication) protocol: {message}"),
    )
    .hint("a proxy (RDS Proxy, ProxySQL, MaxScale without its binlog router …) sits between sluice and the server; point source.url at the server's own endpoint (RDS: the instance or cluster writer endpoint, not the proxy)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_anchor_lock_waits_a_bounded_time() {
        let tables = [("app".to_owned(), "or`ders".to_owned())];
        let [wait, lock] = anchor_lock_statements(&tables, ANCHOR_LOCK_WAIT_SECONDS);
        assert_eq!(wait, "SET SESSION lock_wait_timeout = 10");
        assert_eq!(lock, "LOCK TABLES `app`.`or``ders` READ");
    }

    fn logs(list: &[(&str, u64)]) -> Vec<LogFile> {
        list.iter()
            .map(|(n, s)| LogFile {
                name: n.to_string(),
                size: *s,
            })
            .collect()
    }

    fn cp(text: &str) -> BinlogPosition {
        text.parse().unwrap()
    }

    #[test]
    fn a_present_file_long_enough_is_resumed() {
        let l = logs(&[("b.000007", 900), ("b.000008", 4000)]);
        decide_start(&l, &cp("b.000008:1234")).unwrap();
        decide_start(&l, &cp("b.000007:900")).unwrap();
    }

    #[test]
    fn a_purged_file_is_a_log_gap() {
        let l = logs(&[("b.000009", 900), ("b.000010", 4000)]);
        let err = decide_start(&l, &cp("b.000008:1234")).unwrap_err();
        assert_eq!(err.code(), Code::SourceLogGap);
        assert!(err.hint_text().unwrap().contains("re-baseline"));
        assert!(
            err.hint_text()
                .unwrap()
                .contains("`sluice state clear --config FILE`")
        );
    }

    #[test]
    fn a_reset_or_foreign_binlog_is_refused() {
        let reset = logs(&[("b.000001", 900)]);
        assert_eq!(
            decide_start(&reset, &cp("b.000008:1234"))
                .unwrap_err()
                .code(),
            Code::SourceForeignCheckpoint
        );
        let short = logs(&[("b.000008", 1000)]);
        assert_eq!(
            decide_start(&short, &cp("b.000008:1234"))
                .unwrap_err()
                .code(),
            Code::SourceForeignCheckpoint
        );
        let other_base = logs(&[("mysql-bin.000020", 1000)]);
        assert_eq!(
            decide_start(&other_base, &cp("b.000008:1234"))
                .unwrap_err()
                .code(),
            Code::SourceForeignCheckpoint
        );
        assert_eq!(
            decide_start(&[], &cp("b.000008:1234")).unwrap_err().code(),
            Code::SourceForeignCheckpoint
        );
    }

    #[test]
    fn dump_errors_are_classified() {
        let at = cp("b.000008:1234");
        let server = |code, message: &str| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: message.into(),
                state: "HY000".into(),
            })
        };
        let gap = classify_dump_error(
            server(
                1236,
                "Could not find first log file name in binary log index file",
            ),
            &at,
            7,
        );
        assert_eq!(gap.code(), Code::SourceLogGap);
        let impossible = classify_dump_error(
            server(
                1236,
                "Client requested master to start replication from impossible position",
            ),
            &at,
            7,
        );
        assert_eq!(impossible.code(), Code::SourceForeignCheckpoint);
        let denied = classify_dump_error(
            server(
                1227,
                "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s)",
            ),
            &at,
            7,
        );
        assert_eq!(denied.code(), Code::SourcePrerequisite);
        assert!(denied.hint_text().unwrap().contains("REPLICATION SLAVE"));
        // MariaDB's answers to a GTID start (`@slave_connect_state`) it cannot serve.
        let missing = classify_dump_error(
            server(
                1236,
                "Error: connecting slave requested to start from GTID 0-1-100, which is not in the master's binlog",
            ),
            &at,
            7,
        );
        assert_eq!(missing.code(), Code::SourceFailoverGap);
        let hole = classify_dump_error(
            server(
                1236,
                "The binlog on the master is missing the GTID 0-1-99 requested by the slave (even though a subsequent sequence number does exist), and GTID strict mode is enabled",
            ),
            &at,
            7,
        );
        assert_eq!(hole.code(), Code::SourceFailoverGap);
        let purged = classify_dump_error(
            server(
                1236,
                "Could not find GTID state requested by slave in any binlog files. Probably the slave state is too old and required binlog files have been purged.",
            ),
            &at,
            7,
        );
        assert_eq!(purged.code(), Code::SourceLogGap);
        let proxied = classify_dump_error(server(1047, "Unknown command"), &at, 7);
        assert_eq!(proxied.code(), Code::SourcePrerequisite);
        assert!(proxied.hint_text().unwrap().contains("proxy"));
        let other = classify_dump_error(server(1105, "boom"), &at, 7);
        assert!(other.hint_text().unwrap().contains("server_id 7"));
    }

    /// `performance_schema.log_status`'s LOCAL column as MySQL 8.0 documents it
    /// ("The log_status Table"), with the newline `gtid_executed` puts after a comma.
    #[test]
    fn the_anchor_carries_the_set_log_status_reports_with_it() {
        const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        const B: &str = "8a94f357-aab4-11df-86ab-c80aa9429562";
        let local = format!(
            r#"{{"gtid_executed": "{B}:1-3,\n{A}:1-5", "binary_log_file": "binlog.000002", "binary_log_position": 1234}}"#
        );
        let anchor = parse_log_status(&local).unwrap();
        assert_eq!(anchor.to_string(), "binlog.000002:1234");
        assert_eq!(
            anchor.checkpoint_text(),
            format!("binlog.000002:1234;s={A}:1-5,{B}:1-3")
        );
        for bad in [
            "not json".to_owned(),
            r#"{"binary_log_file": "binlog.000002", "binary_log_position": 4}"#.to_owned(),
            format!(r#"{{"gtid_executed": "{A}:1-5", "binary_log_position": 4}}"#),
            format!(
                r#"{{"gtid_executed": "{A}:0", "binary_log_file": "binlog.000002", "binary_log_position": 4}}"#
            ),
            format!(
                r#"{{"gtid_executed": "{A}:1", "binary_log_file": "nodot", "binary_log_position": 4}}"#
            ),
        ] {
            assert!(parse_log_status(&bad).is_none(), "{bad}");
        }
    }
}
