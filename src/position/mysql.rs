//! MySQL / MariaDB binlog coordinates, and the fingerprint a checkpoint keeps to prove it
//! is resumed against the same binlog.
//!
//! A binlog file is named `<base>.<suffix>` (`mariadb-bin.000042`, `mysql-bin-changelog.000123`);
//! [`BinlogPosition`] splits the name into base, numeric suffix and the suffix's printed
//! width, so it prints back exactly (`Display`: `mariadb-bin.000042:1234`, the form
//! `SHOW MASTER STATUS` and `CHANGE MASTER TO` use) and orders by number, not by text.
//!
//! Sortable text (the `__pos` column): `<base>.<suffix, 10 digits>:<offset, 10 digits>`,
//! e.g. `mariadb-bin.0000000042:0000001234`. Suffix and offset are 32-bit on the server
//! (the event header's `log_pos` is 4 bytes), so fixed 10-digit padding makes string order
//! equal position order for every position of one server.
//!
//! Generations: a stream that follows a failover to another server (by GTID) continues in
//! that server's binlog, whose coordinates may sort before the old server's. Every server
//! change increments the position's *generation*, which orders first; generation 0 prints
//! as above, generation `n ≥ 1` prefixes `~<n, 5 digits>~`
//! (`~00001~mariadb-bin.0000000003:0000000385`). `~` sorts after every character a base
//! name can start with (a base name may not start with `~`), so string order stays commit
//! order across failovers.
//!
//! Checkpoint text adds the [`BinlogMark`] when known:
//! `mariadb-bin.000042:1234;f=1733000000;e=16.31.1733000123;g=0-1-5241;n=1` — `f` is the
//! header timestamp of the file's FORMAT_DESCRIPTION event (when the file was created),
//! `e` the type, size and timestamp of the event that ends at the offset, `g` the MariaDB
//! GTID position there (the last GTID of each domain, [`GtidPos`]), `s` the MySQL GTID
//! set executed up to there ([`GtidSet`], canonical text: `s=<uuid>:1-5:7,<uuid>:1-3`),
//! `n` the generation (omitted when 0). The set can be long (one entry per server that
//! ever wrote); it lives in the checkpoint only — `__pos` stays the sortable coordinates. A binlog reset (`RESET MASTER`) or a file restored from elsewhere has
//! another creation time or another event there; the GTID position is what a stream
//! follows to another server after a failover.
//!
//! Equality and order consider the coordinates only (generation, base, suffix, offset);
//! the mark and the printed width are carried along, not compared.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use std::sync::Arc;

use super::gtid::GtidPos;
use super::gtid_set::GtidSet;

/// Longest binlog base name kept inline (the type stays `Copy`).
pub const MAX_BASE_LEN: usize = 62;

/// The fingerprint recorded with a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct BinlogMark {
    /// Header timestamp of the file's FORMAT_DESCRIPTION event.
    pub file_created: Option<u32>,
    /// The event ending at the offset: `(type, size in bytes, header timestamp)`.
    pub event: Option<(u8, u32, u32)>,
    /// The MariaDB GTID position at the offset (`None`: not known).
    pub gtid: Option<GtidPos>,
    /// The MySQL GTID set executed up to the offset (`None`: not known). Shared, not
    /// copied, between the positions of one stream.
    pub gtid_set: Option<Arc<GtidSet>>,
}

/// A position in a server's binlog: the byte offset just after an event.
#[derive(Clone)]
pub struct BinlogPosition {
    base: [u8; MAX_BASE_LEN],
    base_len: u8,
    suffix: u32,
    width: u8,
    offset: u32,
    /// Incremented by every server change (a followed failover); orders first.
    generation: u16,
    /// Proof of identity for a checkpoint; not part of equality or order.
    pub mark: BinlogMark,
}

/// The text was not a binlog file name or position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a binlog position: {reason}")]
pub struct ParseBinlogError {
    pub text: String,
    pub reason: &'static str,
}

impl BinlogPosition {
    /// The position `offset` in file `file` (`mariadb-bin.000042`).
    pub fn new(file: &str, offset: u32) -> Result<Self, ParseBinlogError> {
        let fail = |reason| ParseBinlogError {
            text: file.to_owned(),
            reason,
        };
        let (base, digits) = file
            .rsplit_once('.')
            .ok_or_else(|| fail("no `.<number>` suffix"))?;
        if base.is_empty() || base.len() > MAX_BASE_LEN {
            return Err(fail("the base name is empty or longer than 62 bytes"));
        }
        if base.starts_with('~') {
            return Err(fail("the base name starts with '~'"));
        }
        if base
            .bytes()
            .any(|b| b == b':' || b == b';' || b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(fail(
                "the base name contains ':', ';', whitespace or a control character",
            ));
        }
        if digits.is_empty() || digits.len() > 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail("the suffix is not 1-10 decimal digits"));
        }
        let suffix: u32 = digits
            .parse()
            .map_err(|_| fail("the suffix exceeds 32 bits"))?;
        let mut inline = [0u8; MAX_BASE_LEN];
        inline[..base.len()].copy_from_slice(base.as_bytes());
        Ok(BinlogPosition {
            base: inline,
            base_len: base.len() as u8,
            suffix,
            width: digits.len() as u8,
            offset,
            generation: 0,
            mark: BinlogMark::default(),
        })
    }

    /// The same file at another offset, without a mark.
    pub fn at(&self, offset: u32) -> Self {
        BinlogPosition {
            offset,
            mark: BinlogMark::default(),
            ..*self
        }
    }

    /// The same coordinates with `mark`.
    pub fn with_mark(self, mark: BinlogMark) -> Self {
        BinlogPosition { mark, ..self }
    }

    /// The same coordinates and mark in `generation`.
    pub fn with_generation(self, generation: u16) -> Self {
        BinlogPosition { generation, ..self }
    }

    /// How many server changes (followed failovers) the stream has been through.
    pub fn generation(&self) -> u16 {
        self.generation
    }

    /// The GTID position recorded at this position, if any.
    pub fn gtid(&self) -> Option<GtidPos> {
        self.mark.gtid
    }

    /// The base name's bytes: they order as the text does (compared on every event, so
    /// without re-validating the UTF-8).
    fn base_bytes(&self) -> &[u8] {
        &self.base[..self.base_len as usize]
    }

    /// The base name (`mariadb-bin`).
    pub fn base(&self) -> &str {
        // Only ever filled from a `&str` in `new`.
        std::str::from_utf8(self.base_bytes()).unwrap_or_default()
    }

    /// The numeric suffix of the file (42 for `mariadb-bin.000042`).
    pub fn suffix(&self) -> u32 {
        self.suffix
    }

    /// The byte offset in the file.
    pub fn offset(&self) -> u32 {
        self.offset
    }

    /// The file name exactly as the server prints it.
    pub fn file(&self) -> String {
        format!(
            "{}.{:0width$}",
            self.base(),
            self.suffix,
            width = self.width as usize
        )
    }

    /// True when `other` is in the same file.
    pub fn same_file(&self, other: &BinlogPosition) -> bool {
        self.base_bytes() == other.base_bytes() && self.suffix == other.suffix
    }

    /// The `__pos` text; string order equals position order.
    ///
    /// Written digit by digit: this text is every transaction's `__pos`, and `format!` with
    /// padded integers costs several times as many instructions.
    pub fn sortable_text(&self) -> String {
        let mut text = String::with_capacity(self.base_len as usize + 30);
        if self.generation > 0 {
            text.push('~');
            push_padded(&mut text, u32::from(self.generation), 5);
            text.push('~');
        }
        text.push_str(self.base());
        text.push('.');
        push_padded(&mut text, self.suffix, 10);
        text.push(':');
        push_padded(&mut text, self.offset, 10);
        text
    }

    /// The checkpoint text: `Display` plus the mark.
    pub fn checkpoint_text(&self) -> String {
        let mut text = self.to_string();
        if let Some(created) = self.mark.file_created {
            text.push_str(&format!(";f={created}"));
        }
        if let Some((ty, len, ts)) = self.mark.event {
            text.push_str(&format!(";e={ty}.{len}.{ts}"));
        }
        if let Some(gtid) = self.mark.gtid {
            text.push_str(&format!(";g={gtid}"));
        }
        if let Some(set) = &self.mark.gtid_set {
            text.push_str(&format!(";s={set}"));
        }
        if self.generation > 0 {
            text.push_str(&format!(";n={}", self.generation));
        }
        text
    }

    /// Parses [`BinlogPosition::checkpoint_text`] (a bare `file:offset` too).
    pub fn parse_checkpoint(text: &str) -> Result<Self, ParseBinlogError> {
        let fail = |reason| ParseBinlogError {
            text: text.to_owned(),
            reason,
        };
        let mut parts = text.split(';');
        let mut position: BinlogPosition = parts.next().unwrap_or_default().parse()?;
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| fail("a mark is not key=value"))?;
            match key {
                "f" if position.mark.file_created.is_none() => {
                    position.mark.file_created =
                        Some(value.parse().map_err(|_| fail("bad file mark"))?);
                }
                "e" if position.mark.event.is_none() => {
                    let mut fields = value.split('.');
                    let mut next = || fields.next().ok_or_else(|| fail("bad event mark"));
                    let ty = next()?.parse().map_err(|_| fail("bad event type"))?;
                    let len = next()?.parse().map_err(|_| fail("bad event size"))?;
                    let ts = next()?.parse().map_err(|_| fail("bad event time"))?;
                    if fields.next().is_some() {
                        return Err(fail("bad event mark"));
                    }
                    position.mark.event = Some((ty, len, ts));
                }
                "g" if position.mark.gtid.is_none() => {
                    position.mark.gtid =
                        Some(GtidPos::parse(value).ok_or_else(|| fail("bad GTID position"))?);
                }
                "s" if position.mark.gtid_set.is_none() => {
                    let set = GtidSet::parse(value).map_err(|_| fail("bad GTID set"))?;
                    position.mark.gtid_set = Some(Arc::new(set));
                }
                "n" if position.generation == 0 => {
                    position.generation = match value.parse() {
                        Ok(n) if n > 0 && !value.starts_with('0') => n,
                        _ => return Err(fail("bad generation")),
                    };
                }
                _ => return Err(fail("unknown or repeated mark")),
            }
        }
        Ok(position)
    }
}

/// Appends `n` in decimal, left-padded with zeros to `width` digits (`width` ≤ 10).
fn push_padded(text: &mut String, mut n: u32, width: usize) {
    let mut digits = [b'0'; 10];
    let mut at = digits.len();
    while n > 0 {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let start = at.min(digits.len() - width);
    // Only ASCII digits were written.
    text.push_str(std::str::from_utf8(&digits[start..]).unwrap_or_default());
}

impl fmt::Debug for BinlogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BinlogPosition({})", self.checkpoint_text())
    }
}

impl fmt::Display for BinlogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file(), self.offset)
    }
}

impl FromStr for BinlogPosition {
    type Err = ParseBinlogError;

    /// Parses `file:offset` (`mariadb-bin.000042:1234`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason| ParseBinlogError {
            text: text.to_owned(),
            reason,
        };
        let (file, offset) = text.rsplit_once(':').ok_or_else(|| fail("no `:offset`"))?;
        if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail("the offset is not a decimal number"));
        }
        let offset: u32 = offset
            .parse()
            .map_err(|_| fail("the offset exceeds 32 bits"))?;
        BinlogPosition::new(file, offset).map_err(|e| ParseBinlogError {
            text: text.to_owned(),
            reason: e.reason,
        })
    }
}

impl PartialEq for BinlogPosition {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for BinlogPosition {}

impl Hash for BinlogPosition {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.generation.hash(state);
        self.base().hash(state);
        self.suffix.hash(state);
        self.offset.hash(state);
    }
}

impl PartialOrd for BinlogPosition {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BinlogPosition {
    /// Generation first, then base name (so the order equals the sortable text's), then
    /// file number, then offset. One server has one base name.
    fn cmp(&self, other: &Self) -> Ordering {
        self.generation
            .cmp(&other.generation)
            .then_with(|| self.base_bytes().cmp(other.base_bytes()))
            .then(self.suffix.cmp(&other.suffix))
            .then(self.offset.cmp(&other.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prints_back_exactly_and_pads_for_sorting() {
        let p: BinlogPosition = "mariadb-bin.000042:1234".parse().unwrap();
        assert_eq!(p.file(), "mariadb-bin.000042");
        assert_eq!(p.to_string(), "mariadb-bin.000042:1234");
        assert_eq!(p.sortable_text(), "mariadb-bin.0000000042:0000001234");
        let wide: BinlogPosition = "mysql-bin-changelog.1000000:4".parse().unwrap();
        assert_eq!(wide.file(), "mysql-bin-changelog.1000000");
        assert!(p.at(4) < p && p < p.at(1235));
    }

    #[test]
    fn numeric_order_beats_text_order() {
        let a: BinlogPosition = "b.999999:9000".parse().unwrap();
        let b: BinlogPosition = "b.1000000:4".parse().unwrap();
        assert!(a < b);
        assert!(a.sortable_text() < b.sortable_text());
        assert!(
            a.to_string() > b.to_string(),
            "the plain form would sort wrongly"
        );
    }

    #[test]
    fn marks_round_trip_and_do_not_affect_equality() {
        let p: BinlogPosition = "mariadb-bin.000003:385".parse().unwrap();
        let marked = p.clone().with_mark(BinlogMark {
            file_created: Some(1_733_000_000),
            event: Some((16, 31, 1_733_000_123)),
            gtid: None,
            gtid_set: None,
        });
        let text = marked.checkpoint_text();
        assert_eq!(
            text,
            "mariadb-bin.000003:385;f=1733000000;e=16.31.1733000123"
        );
        let back = BinlogPosition::parse_checkpoint(&text).unwrap();
        assert_eq!(back.mark, marked.mark);
        assert_eq!(back, p);
        let only_file = BinlogPosition::parse_checkpoint("x.1:4;f=7").unwrap();
        assert_eq!(only_file.mark.file_created, Some(7));
        assert_eq!(only_file.mark.event, None);
    }

    #[test]
    fn garbage_is_refused() {
        for text in [
            "",
            "mariadb-bin.000001",
            "mariadb-bin:4",
            ".000001:4",
            "x.00a1:4",
            "x.1:-4",
            "x.1:4294967296",
            "x.12345678901:4",
            "a b.1:4",
            "x.1:4;f=",
            "x.1:4;e=1.2",
            "x.1:4;e=1.2.3.4",
            "x.1:4;f=1;f=2",
            "x.1:4;z=1",
            "x.1:4;g=0-1",
            "x.1:4;g=0-1-2;g=0-1-3",
            "x.1:4;n=0",
            "x.1:4;s=nonsense",
            "x.1:4;s=3e11fa47-71ca-11e1-9e33-c80aa9429562:0",
            "x.1:4;s=;s=",
            "x.1:4;n=01",
            "x.1:4;n=65536",
            "~x.1:4",
        ] {
            assert!(BinlogPosition::parse_checkpoint(text).is_err(), "{text:?}");
        }
    }

    fn arb_position() -> impl Strategy<Value = BinlogPosition> {
        (
            "[a-z][a-z0-9_-]{0,20}",
            any::<u32>(),
            0usize..4,
            any::<u32>(),
            proptest::option::of(any::<u32>()),
            proptest::option::of((any::<u8>(), any::<u32>(), any::<u32>())),
            proptest::option::of(proptest::collection::vec(
                (0u32..4, any::<u32>(), any::<u64>()),
                0..4,
            )),
            any::<u16>(),
            proptest::option::of(proptest::collection::vec((0u8..3, 1u64..100), 0..6)),
        )
            .prop_map(
                |(base, suffix, extra_width, offset, created, event, gtids, generation, set)| {
                    let set = set.map(|list| {
                        let mut set = GtidSet::default();
                        for (source, gno) in list {
                            set.insert(crate::position::SourceUuid([source; 16]), gno);
                        }
                        set
                    });
                    let width = (format!("{suffix:06}").len() + extra_width).min(10);
                    let file = format!("{base}.{suffix:0width$}");
                    BinlogPosition::new(&file, offset)
                        .unwrap()
                        .with_mark(BinlogMark {
                            file_created: created,
                            event,
                            gtid: gtids.map(|list| {
                                let mut pos = GtidPos::default();
                                for (domain, server, seq) in list {
                                    pos.record(crate::position::Gtid {
                                        domain,
                                        server,
                                        seq,
                                    })
                                    .unwrap();
                                }
                                pos
                            }),
                            gtid_set: set.map(Arc::new),
                        })
                        .with_generation(generation)
                },
            )
    }

    proptest! {
        #[test]
        fn checkpoint_text_round_trips(p in arb_position()) {
            let back = BinlogPosition::parse_checkpoint(&p.checkpoint_text()).unwrap();
            prop_assert_eq!(&back, &p);
            prop_assert_eq!(&back.mark, &p.mark);
            prop_assert_eq!(back.file(), p.file());
            prop_assert_eq!(back.to_string().parse::<BinlogPosition>().unwrap().file(), p.file());
        }

        #[test]
        fn sortable_text_orders_like_the_position(
            suffix_a in any::<u32>(), off_a in any::<u32>(),
            suffix_b in any::<u32>(), off_b in any::<u32>(),
        ) {
            let a = BinlogPosition::new(&format!("bin.{suffix_a:06}"), off_a).unwrap();
            let b = BinlogPosition::new(&format!("bin.{suffix_b:06}"), off_b).unwrap();
            prop_assert_eq!(a.sortable_text().cmp(&b.sortable_text()), a.cmp(&b));
            prop_assert_eq!(a.cmp(&b), (suffix_a, off_a).cmp(&(suffix_b, off_b)));
        }

        /// The digit-by-digit text is the padded decimal text, byte for byte.
        #[test]
        fn sortable_text_is_the_zero_padded_coordinates(a in arb_position()) {
            let coordinates = format!("{}.{:010}:{:010}", a.base(), a.suffix(), a.offset());
            let expected = match a.generation() {
                0 => coordinates,
                n => format!("~{n:05}~{coordinates}"),
            };
            prop_assert_eq!(a.sortable_text(), expected);
        }

        /// A later generation sorts after every position of an earlier one, whatever the
        /// base names and coordinates (a failover to a server with a shorter binlog).
        #[test]
        fn later_generations_sort_after_earlier_ones(
            a in arb_position(), b in arb_position(),
        ) {
            if a.generation() < b.generation() {
                prop_assert!(a.sortable_text() < b.sortable_text());
                prop_assert!(a < b);
            }
        }
    }

    /// A MySQL checkpoint carries its GTID set; `__pos` does not.
    #[test]
    fn a_mysql_gtid_set_rides_in_the_checkpoint_not_in_pos() {
        let text = "binlog.000007:1234;f=1733000000;e=16.31.1733000123;s=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,8a94f357-aab4-11df-86ab-c80aa9429562:1-3;n=2";
        let p = BinlogPosition::parse_checkpoint(text).unwrap();
        assert_eq!(p.checkpoint_text(), text);
        assert_eq!(p.sortable_text(), "~00002~binlog.0000000007:0000001234");
        let set = p.mark.gtid_set.as_deref().unwrap();
        assert!(set.contains(
            &crate::position::SourceUuid::parse("3e11fa47-71ca-11e1-9e33-c80aa9429562").unwrap(),
            7
        ));
        // Not canonical on input (as @@gtid_executed may print): canonical on output.
        let loose = BinlogPosition::parse_checkpoint(
            "binlog.000007:4;s=3E11FA47-71CA-11E1-9E33-C80AA9429562:7:1-5",
        )
        .unwrap();
        assert_eq!(
            loose.checkpoint_text(),
            "binlog.000007:4;s=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7"
        );
        let empty = BinlogPosition::parse_checkpoint("b.1:4;s=").unwrap();
        assert!(empty.mark.gtid_set.unwrap().is_empty());
    }

    #[test]
    fn gtid_and_generation_round_trip_and_order() {
        let old = BinlogPosition::parse_checkpoint("mariadb-bin.000042:1234;g=0-1-5241").unwrap();
        assert_eq!(old.gtid().unwrap().to_string(), "0-1-5241");
        assert_eq!(old.generation(), 0);
        let new = BinlogPosition::parse_checkpoint("mariadb-bin.000001:385;g=0-1-5241,7-2-3;n=1")
            .unwrap();
        assert_eq!(new.generation(), 1);
        assert_eq!(
            new.sortable_text(),
            "~00001~mariadb-bin.0000000001:0000000385"
        );
        assert!(old < new && old.sortable_text() < new.sortable_text());
        assert_eq!(
            new.checkpoint_text(),
            "mariadb-bin.000001:385;g=0-1-5241,7-2-3;n=1"
        );
        let empty = BinlogPosition::parse_checkpoint("b.1:4;g=").unwrap();
        assert!(empty.gtid().unwrap().is_empty());
        assert_eq!(empty.checkpoint_text(), "b.1:4;g=");
        assert!(
            BinlogPosition::parse_checkpoint("b.1:4")
                .unwrap()
                .gtid()
                .is_none()
        );
    }
}
