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
//! Checkpoint text adds the [`BinlogMark`] when known:
//! `mariadb-bin.000042:1234;f=1733000000;e=16.31.1733000123` — `f` is the header timestamp
//! of the file's FORMAT_DESCRIPTION event (when the file was created), `e` the type, size
//! and timestamp of the event that ends at the offset. A binlog reset (`RESET MASTER`)
//! or a file restored from elsewhere has another creation time or another event there.
//!
//! Equality and order consider the coordinates only (base, suffix, offset); the mark and
//! the printed width are carried along, not compared.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// Longest binlog base name kept inline (the type stays `Copy`).
pub const MAX_BASE_LEN: usize = 62;

/// The fingerprint recorded with a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BinlogMark {
    /// Header timestamp of the file's FORMAT_DESCRIPTION event.
    pub file_created: Option<u32>,
    /// The event ending at the offset: `(type, size in bytes, header timestamp)`.
    pub event: Option<(u8, u32, u32)>,
}

/// A position in a server's binlog: the byte offset just after an event.
#[derive(Clone, Copy)]
pub struct BinlogPosition {
    base: [u8; MAX_BASE_LEN],
    base_len: u8,
    suffix: u32,
    width: u8,
    offset: u32,
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

    /// The base name (`mariadb-bin`).
    pub fn base(&self) -> &str {
        // Only ever filled from a `&str` in `new`.
        std::str::from_utf8(&self.base[..self.base_len as usize]).unwrap_or_default()
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
        self.base() == other.base() && self.suffix == other.suffix
    }

    /// The `__pos` text; string order equals position order.
    pub fn sortable_text(&self) -> String {
        format!("{}.{:010}:{:010}", self.base(), self.suffix, self.offset)
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
                _ => return Err(fail("unknown or repeated mark")),
            }
        }
        Ok(position)
    }
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
    /// Base name first (so the order equals the sortable text's), then file number, then
    /// offset. One server has one base name.
    fn cmp(&self, other: &Self) -> Ordering {
        self.base()
            .cmp(other.base())
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
        let marked = p.with_mark(BinlogMark {
            file_created: Some(1_733_000_000),
            event: Some((16, 31, 1_733_000_123)),
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
        )
            .prop_map(|(base, suffix, extra_width, offset, created, event)| {
                let width = (format!("{suffix:06}").len() + extra_width).min(10);
                let file = format!("{base}.{suffix:0width$}");
                BinlogPosition::new(&file, offset)
                    .unwrap()
                    .with_mark(BinlogMark {
                        file_created: created,
                        event,
                    })
            })
    }

    proptest! {
        #[test]
        fn checkpoint_text_round_trips(p in arb_position()) {
            let back = BinlogPosition::parse_checkpoint(&p.checkpoint_text()).unwrap();
            prop_assert_eq!(back, p);
            prop_assert_eq!(back.mark, p.mark);
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
    }
}
