//! MySQL (not MariaDB) GTIDs on the wire, and the decision to follow a MySQL failover.
//!
//! Guarantees:
//! * [`gtid_of`] turns a decoded GTID_LOG_EVENT into the transaction `uuid:gno` it
//!   starts; a tagged GTID (MySQL 8.4 `uuid:tag:gno`) is refused, never recorded untagged;
//! * [`SetTracker`] keeps the set a stream has read up to from those two events;
//! * [`previous_set`] turns a PREVIOUS_GTIDS_LOG_EVENT into the [`GtidSet`] executed
//!   before its file (the wire's interval ends are exclusive, the set's inclusive);
//! * [`dump_request`] builds the COM_BINLOG_DUMP_GTID request for a set: the server sends
//!   every transaction not in it, and only those, from its first binlog on;
//! * [`check_follow`] (pure) lets a stream continue on another MySQL server only when
//!   that server's `@@gtid_executed` contains every transaction of the checkpoint's set
//!   (else `SLUICE_SOURCE_FAILOVER_GAP`, naming the missing GTIDs) and it still has in its
//!   binlog every transaction the job has not read (`@@gtid_purged` ∩ needed = ∅; else
//!   `SLUICE_SOURCE_LOG_GAP`, naming the purged GTIDs).

use std::sync::Arc;

use mysql_common::binlog::events::{GtidEvent, PreviousGtidsEvent};
use mysql_common::packets::binlog_request::BinlogRequest;
use mysql_common::packets::{BinlogDumpFlags, GnoInterval, Sid};

use super::failover::gap;
use super::refusals::log_gap;
use crate::error::{Code, Error, Result};
use crate::position::{GtidSet, SourceUuid};

/// The transaction a GTID_LOG_EVENT starts (`at`: where, for the error).
pub fn gtid_of(event: &GtidEvent, at: &dyn std::fmt::Display) -> Result<(SourceUuid, u64)> {
    if event.tag().is_some() {
        return Err(tagged(at));
    }
    Ok((SourceUuid(event.sid()), event.gno()))
}

/// The set a PREVIOUS_GTIDS_LOG_EVENT says was executed before its file.
pub fn previous_set(event: &PreviousGtidsEvent<'_>, at: &dyn std::fmt::Display) -> Result<GtidSet> {
    let mut set = GtidSet::default();
    for sid in event.sids() {
        if sid.tag().is_some() {
            return Err(tagged(at));
        }
        for interval in sid.intervals() {
            // On the wire an interval is [start, end): MySQL's Gtid_set::encode.
            if interval.start() == 0 || interval.end() <= interval.start() {
                return Err(Error::new(
                    Code::SourceProtocol,
                    format!(
                        "the PREVIOUS_GTIDS event at {at} holds an empty or zero interval {}-{}",
                        interval.start(),
                        interval.end()
                    ),
                ));
            }
            set.insert_interval(SourceUuid(sid.uuid()), interval.start(), interval.end() - 1);
        }
    }
    Ok(set)
}

fn tagged(at: &dyn std::fmt::Display) -> Error {
    Error::new(
        Code::SourcePrerequisite,
        format!("a tagged GTID (MySQL 8.4 `uuid:tag:n`) at {at}: sluice records untagged GTIDs only"),
    )
    .hint("do not use SET gtid_next = 'AUTOMATIC:<tag>' on the source, or re-baseline after the tagged transactions")
}

/// The GTID set a MySQL stream has read up to, fed with the stream's GTID events.
///
/// Guarantees: once known, the set grows by every GTID_LOG_EVENT's transaction and every
/// PREVIOUS_GTIDS set (the transactions before a file, all behind the stream); unknown at
/// the start, it becomes known at the next PREVIOUS_GTIDS; a tagged or malformed GTID makes
/// it unknown for the rest of the stream (checkpoints then keep only `file:offset`). The
/// set is shared (`Arc`) with the positions already handed out and copied on write.
#[derive(Debug, Clone, Default)]
pub struct SetTracker {
    set: Option<Arc<GtidSet>>,
}

impl SetTracker {
    /// Starts at `set` (`None`: not known yet).
    pub fn new(set: Option<Arc<GtidSet>>) -> Self {
        SetTracker { set }
    }

    /// The set now, for a position's mark.
    pub fn current(&self) -> Option<Arc<GtidSet>> {
        self.set.clone()
    }

    /// A GTID_LOG_EVENT at `at`.
    pub fn gtid(&mut self, event: &GtidEvent, at: &dyn std::fmt::Display) {
        let Some(set) = self.set.as_mut() else {
            return;
        };
        match gtid_of(event, at) {
            Ok((uuid, gno)) => Arc::make_mut(set).insert(uuid, gno),
            Err(e) => self.give_up(e),
        }
    }

    /// A PREVIOUS_GTIDS_LOG_EVENT at `at`.
    pub fn previous(&mut self, event: &PreviousGtidsEvent<'_>, at: &dyn std::fmt::Display) {
        match previous_set(event, at) {
            Ok(previous) => match self.set.as_mut() {
                Some(set) => Arc::make_mut(set).union_with(&previous),
                None => self.set = Some(Arc::new(previous)),
            },
            Err(e) => self.give_up(e),
        }
    }

    fn give_up(&mut self, e: Error) {
        if self.set.is_some() {
            tracing::warn!(error = %e, "checkpoints keep only file:offset from here (a MySQL failover cannot be followed from them)");
        }
        self.set = None;
    }
}

/// The SID block of a COM_BINLOG_DUMP_GTID for `set` (interval ends exclusive).
pub fn sids(set: &GtidSet) -> Vec<Sid<'static>> {
    set.iter()
        .map(|(uuid, list)| {
            Sid::new(uuid.0).with_intervals(
                list.iter()
                    .map(|&(first, last)| GnoInterval::new(first, last + 1))
                    .collect(),
            )
        })
        .collect()
}

/// The non-blocking COM_BINLOG_DUMP_GTID request for `set`, as replica `server_id`: no
/// file name (the server starts at its first binlog and skips what `set` holds).
pub fn dump_request(server_id: u32, set: &GtidSet) -> BinlogRequest<'static> {
    BinlogRequest::new(server_id)
        .with_use_gtid(true)
        .with_flags(BinlogDumpFlags::BINLOG_DUMP_NON_BLOCK)
        .with_pos(4u64)
        .with_sids(sids(set))
}

/// The GTID facts of a MySQL server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerGtidSets {
    /// `@@GLOBAL.gtid_executed`.
    pub executed: GtidSet,
    /// `@@GLOBAL.gtid_purged`: executed but no longer in the binlog.
    pub purged: GtidSet,
}

/// Reads `@@GLOBAL.gtid_executed` and `@@GLOBAL.gtid_purged`.
pub async fn server_sets(conn: &mut mysql_async::Conn) -> Result<ServerGtidSets> {
    use mysql_async::prelude::Queryable;
    let row: Option<(String, String)> = conn
        .query_first("SELECT @@GLOBAL.gtid_executed, @@GLOBAL.gtid_purged")
        .await
        .map_err(|e| {
            super::connect::query_error("reading the server's GTID sets (@@gtid_executed)", e)
        })?;
    let (executed, purged) = row.unwrap_or_default();
    let parse = |text: &str| {
        GtidSet::parse(text).map_err(|e| Error::new(Code::SourceProtocol, e.to_string()))
    };
    Ok(ServerGtidSets {
        executed: parse(&executed)?,
        purged: parse(&purged)?,
    })
}

/// Allows continuing at `checkpoint` on a MySQL server with `server`'s GTIDs. Pure.
pub fn check_follow(checkpoint: &GtidSet, server: &ServerGtidSets) -> Result<()> {
    let missing = checkpoint.difference(&server.executed);
    if !missing.is_empty() {
        return Err(gap(format!(
            "this server's binlog lacks transactions the checkpoint already read (a lossy failover): GTIDs {missing} are missing (the checkpoint is at {checkpoint})"
        )));
    }
    let needed = server.executed.difference(checkpoint);
    let purged = needed.intersection(&server.purged);
    if !purged.is_empty() {
        return Err(log_gap(format!(
            "this server has purged from its binlog transactions the job has not read yet: GTIDs {purged} (the checkpoint is at {checkpoint}, @@gtid_purged is {})",
            server.purged
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::binlog::EventStreamReader;
    use mysql_common::binlog::consts::BinlogVersion;
    use mysql_common::binlog::events::EventData;
    use mysql_common::proto::MySerialize;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "8a94f357-aab4-11df-86ab-c80aa9429562";
    const A_BYTES: [u8; 16] = [
        0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1, 0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95,
        0x62,
    ];
    const B_BYTES: [u8; 16] = [
        0x8a, 0x94, 0xf3, 0x57, 0xaa, 0xb4, 0x11, 0xdf, 0x86, 0xab, 0xc8, 0x0a, 0xa9, 0x42, 0x95,
        0x62,
    ];

    fn set(text: &str) -> GtidSet {
        GtidSet::parse(text).unwrap()
    }

    /// COM_BINLOG_DUMP_GTID as the MySQL client/server protocol documents it
    /// (dev.mysql.com "COM_BINLOG_DUMP_GTID"; sql/rpl_source.cc `com_binlog_dump_gtid`):
    /// `0x1e`, flags u16, server_id u32, binlog-filename-len u32, binlog-filename,
    /// binlog-pos u64, and — flag BINLOG_THROUGH_GTID (0x04) — data-size u32 and the SID
    /// block as `Gtid_set::encode` writes it (sql/rpl_gtid_set.cc): n_sids u64, then per
    /// SID its 16 UUID bytes, n_intervals u64 and each interval as start u64, end u64
    /// (exclusive). All integers little-endian.
    #[test]
    fn the_gtid_dump_request_has_the_documented_bytes() {
        let request = dump_request(7, &set(&format!("{B}:1-3,{A}:1-5:7")));
        let mysql_common::misc::raw::Either::Right(cmd) = request.as_cmd() else {
            panic!("not a GTID dump")
        };
        let mut bytes = Vec::new();
        cmd.serialize(&mut bytes);

        let mut want = vec![0x1e];
        want.extend(0x0005u16.to_le_bytes()); // NON_BLOCK | THROUGH_GTID
        want.extend(7u32.to_le_bytes()); // server_id
        want.extend(0u32.to_le_bytes()); // no file name
        want.extend(4u64.to_le_bytes()); // position
        let data_size = 8 + (16 + 8 + 2 * 16) + (16 + 8 + 16);
        want.extend((data_size as u32).to_le_bytes());
        want.extend(2u64.to_le_bytes()); // two SIDs, in UUID order
        want.extend(A_BYTES);
        want.extend(2u64.to_le_bytes());
        for (start, end) in [(1u64, 6u64), (7, 8)] {
            want.extend(start.to_le_bytes());
            want.extend(end.to_le_bytes());
        }
        want.extend(B_BYTES);
        want.extend(1u64.to_le_bytes());
        want.extend(1u64.to_le_bytes());
        want.extend(4u64.to_le_bytes());
        assert_eq!(bytes, want);
    }

    /// A v4 event: the 19-byte common header (timestamp u32, type u8, server_id u32,
    /// event_size u32, log_pos u32, flags u16; sql/log_event.h) and `body`, without a
    /// checksum (the reader's default format description has none).
    fn event(ty: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend(1_733_000_000u32.to_le_bytes());
        bytes.push(ty);
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(((19 + body.len()) as u32).to_le_bytes());
        bytes.extend(1234u32.to_le_bytes());
        bytes.extend(0u16.to_le_bytes());
        bytes.extend(body);
        bytes
    }

    /// GTID_LOG_EVENT (type 33) body per libbinlogevents/include/control_events.h
    /// (`Gtid_event`): flags u8, SID 16 bytes, GNO u64, then the logical clock
    /// (typecode 2, last_committed u64, sequence_number u64), immediate_commit_timestamp
    /// 7 bytes, transaction_length (net varlen), immediate_server_version u32.
    fn gtid_event_bytes(sid: [u8; 16], gno: u64) -> Vec<u8> {
        let mut body = vec![0x01];
        body.extend(sid);
        body.extend(gno.to_le_bytes());
        body.push(2);
        body.extend(41u64.to_le_bytes());
        body.extend(42u64.to_le_bytes());
        body.extend(&1_733_000_000_000_000u64.to_le_bytes()[..7]);
        body.push(200); // transaction_length, one varlen byte
        body.extend(80_036u32.to_le_bytes());
        event(33, &body)
    }

    fn read_gtid(bytes: &[u8]) -> GtidEvent {
        let mut reader = EventStreamReader::new(BinlogVersion::Version4);
        let read = reader.read(bytes).unwrap().unwrap();
        match read.read_data().unwrap() {
            Some(EventData::GtidEvent(gtid)) => gtid,
            other => panic!("not a GTID event: {other:?}"),
        }
    }

    /// PREVIOUS_GTIDS_LOG_EVENT (type 35) body: the set encoded as `Gtid_set::encode`
    /// writes it (sql/rpl_gtid_set.cc), interval ends exclusive.
    /// A SID and its `[start, end)` intervals.
    type EncodedSid<'a> = ([u8; 16], &'a [(u64, u64)]);

    fn previous_bytes(sids: &[EncodedSid<'_>]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend((sids.len() as u64).to_le_bytes());
        for (sid, intervals) in sids {
            body.extend(sid);
            body.extend((intervals.len() as u64).to_le_bytes());
            for (start, end) in *intervals {
                body.extend(start.to_le_bytes());
                body.extend(end.to_le_bytes());
            }
        }
        event(35, &body)
    }

    fn read_previous(bytes: &[u8]) -> PreviousGtidsEvent<'static> {
        let mut reader = EventStreamReader::new(BinlogVersion::Version4);
        let read = reader.read(bytes).unwrap().unwrap();
        match read.read_data().unwrap() {
            Some(EventData::PreviousGtidsEvent(previous)) => previous.into_owned(),
            other => panic!("not PREVIOUS_GTIDS: {other:?}"),
        }
    }

    #[test]
    fn a_gtid_log_event_names_its_transaction() {
        let bytes = gtid_event_bytes(A_BYTES, 42);
        let mut reader = EventStreamReader::new(BinlogVersion::Version4);
        let read = reader.read(&bytes[..]).unwrap().unwrap();
        let Some(EventData::GtidEvent(gtid)) = read.read_data().unwrap() else {
            panic!("not a GTID event: {:?}", read.read_data())
        };
        let (uuid, gno) = gtid_of(&gtid, &"bin.000001:1234").unwrap();
        assert_eq!((uuid.to_string(), gno), (A.to_owned(), 42));
        let mut executed = set(&format!("{A}:1-41"));
        executed.insert(uuid, gno);
        assert_eq!(executed.to_string(), format!("{A}:1-42"));
    }

    #[test]
    fn a_stream_tracks_its_set_from_the_events_it_reads() {
        // Unknown at the start: GTIDs alone do not make a set.
        let mut tracker = SetTracker::new(None);
        tracker.gtid(&read_gtid(&gtid_event_bytes(A_BYTES, 5)), &"b.1:100");
        assert!(tracker.current().is_none());
        // The next file's PREVIOUS_GTIDS makes it known; its GTIDs then add up.
        tracker.previous(
            &read_previous(&previous_bytes(&[(A_BYTES, &[(1, 6)])])),
            &"b.2:155",
        );
        tracker.gtid(&read_gtid(&gtid_event_bytes(A_BYTES, 6)), &"b.2:300");
        tracker.gtid(&read_gtid(&gtid_event_bytes(B_BYTES, 1)), &"b.2:500");
        let handed_out = tracker.current().unwrap();
        assert_eq!(handed_out.to_string(), format!("{A}:1-6,{B}:1"));
        // Copy on write: a position handed out keeps its set.
        tracker.gtid(&read_gtid(&gtid_event_bytes(A_BYTES, 7)), &"b.2:700");
        assert_eq!(handed_out.to_string(), format!("{A}:1-6,{B}:1"));
        assert_eq!(
            tracker.current().unwrap().to_string(),
            format!("{A}:1-7,{B}:1")
        );
        // A later file's PREVIOUS_GTIDS (behind the stream) never shrinks it.
        tracker.previous(
            &read_previous(&previous_bytes(&[(A_BYTES, &[(1, 3)])])),
            &"b.3:155",
        );
        assert_eq!(
            tracker.current().unwrap().to_string(),
            format!("{A}:1-7,{B}:1")
        );
        // A malformed PREVIOUS_GTIDS (an empty interval) makes it unknown again.
        tracker.previous(
            &read_previous(&previous_bytes(&[(A_BYTES, &[(5, 5)])])),
            &"b.4:155",
        );
        assert!(tracker.current().is_none());
        // A tagged GTID (MySQL 8.4) is never recorded untagged: the set becomes unknown.
        let mut tagged = SetTracker::new(Some(Arc::new(set(&format!("{A}:1-9")))));
        let tag = mysql_common::packets::Tag::new("batch").unwrap();
        tagged.gtid(&GtidEvent::new_tagged(A_BYTES, tag, 10), &"b.4:300");
        assert!(tagged.current().is_none());
        // A checkpoint's set continues as it was.
        let mut resumed = SetTracker::new(Some(Arc::new(set(&format!("{A}:1-9")))));
        resumed.gtid(&read_gtid(&gtid_event_bytes(A_BYTES, 10)), &"b.5:100");
        assert_eq!(resumed.current().unwrap().to_string(), format!("{A}:1-10"));
    }

    #[test]
    fn a_previous_gtids_event_gives_the_set_before_its_file() {
        let mut body = Vec::new();
        body.extend(2u64.to_le_bytes());
        body.extend(B_BYTES);
        body.extend(1u64.to_le_bytes());
        body.extend(1u64.to_le_bytes());
        body.extend(4u64.to_le_bytes());
        body.extend(A_BYTES);
        body.extend(2u64.to_le_bytes());
        for (start, end) in [(1u64, 6u64), (7, 8)] {
            body.extend(start.to_le_bytes());
            body.extend(end.to_le_bytes());
        }
        let bytes = event(35, &body);
        let mut reader = EventStreamReader::new(BinlogVersion::Version4);
        let read = reader.read(&bytes[..]).unwrap().unwrap();
        let Some(EventData::PreviousGtidsEvent(previous)) = read.read_data().unwrap() else {
            panic!("not PREVIOUS_GTIDS: {:?}", read.read_data())
        };
        let got = previous_set(&previous, &"bin.000001:1234").unwrap();
        assert_eq!(got.to_string(), format!("{A}:1-5:7,{B}:1-3"));
        // The request for it carries the same intervals back (round trip through the wire).
        let request = dump_request(9, &got);
        let sids = request.sids();
        assert_eq!(sids.len(), 2);
        assert_eq!(sids[0].uuid(), A_BYTES);
        assert_eq!(
            sids[0]
                .intervals()
                .iter()
                .map(|i| (i.start(), i.end()))
                .collect::<Vec<_>>(),
            [(1, 6), (7, 8)]
        );
    }

    fn server(executed: &str, purged: &str) -> ServerGtidSets {
        ServerGtidSets {
            executed: set(executed),
            purged: set(purged),
        }
    }

    #[test]
    fn a_promoted_replica_with_everything_is_followed() {
        let promoted = server(&format!("{A}:1-100,{B}:1-7"), &format!("{A}:1-50"));
        check_follow(&set(&format!("{A}:1-100")), &promoted).unwrap();
        check_follow(&set(&format!("{A}:1-60,{B}:1-2")), &promoted).unwrap();
        check_follow(&GtidSet::default(), &server(&format!("{A}:1-3"), "")).unwrap();
    }

    #[test]
    fn a_lossy_failover_names_the_missing_gtids() {
        let behind = server(&format!("{A}:1-97,{B}:1-7"), "");
        let err = check_follow(&set(&format!("{A}:1-100,{B}:1-3")), &behind).unwrap_err();
        assert_eq!(err.code(), Code::SourceFailoverGap);
        assert!(
            err.to_string()
                .contains(&format!("GTIDs {A}:98-100 are missing")),
            "{err}"
        );
        assert!(
            err.hint_text()
                .unwrap()
                .contains("`sluice state clear --config FILE`")
        );
    }

    #[test]
    fn purged_transactions_the_job_needs_are_a_log_gap() {
        // The job read A:1-60; the new server purged A:1-70: A:61-70 are gone.
        let purged = server(&format!("{A}:1-100"), &format!("{A}:1-70"));
        let err = check_follow(&set(&format!("{A}:1-60")), &purged).unwrap_err();
        assert_eq!(err.code(), Code::SourceLogGap);
        assert!(
            err.to_string().contains(&format!("GTIDs {A}:61-70")),
            "{err}"
        );
        // A transaction of another source the job never saw, purged: also needed.
        let other = server(&format!("{A}:1-100,{B}:1-5"), &format!("{B}:1-2"));
        let err = check_follow(&set(&format!("{A}:1-100")), &other).unwrap_err();
        assert_eq!(err.code(), Code::SourceLogGap);
        assert!(err.to_string().contains(&format!("GTIDs {B}:1-2")), "{err}");
    }
}
