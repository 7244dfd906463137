//! MariaDB GTID positions: the last transaction of each replication domain
//! (`domain-server-seq` lists, the form of `@@gtid_binlog_pos`, `BINLOG_GTID_POS()` and
//! `@slave_connect_state`).
//!
//! Guarantees: [`GtidPos`] holds at most one GTID per domain, kept in domain order, so its
//! text (`0-1-5241,7-2-12`; empty for a server that has written no GTID yet) is canonical
//! and round-trips exactly through `Display` ↔ [`GtidPos::parse`]. It holds up to
//! [`MAX_DOMAINS`] domains inline, so it stays `Copy` like the position that carries it;
//! a server with more domains has no recordable GTID position ([`GtidPos::record`] says
//! so) and its checkpoints keep only `file:offset`.

use std::fmt;

/// Most domains a position records (a server rarely uses more than a handful).
pub const MAX_DOMAINS: usize = 8;

/// One MariaDB GTID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

impl Gtid {
    /// Parses `domain-server-seq`.
    pub fn parse(text: &str) -> Option<Gtid> {
        let mut parts = text.trim().split('-');
        let gtid = Gtid {
            domain: digits(parts.next()?)?,
            server: digits(parts.next()?)?,
            seq: digits(parts.next()?)?,
        };
        parts.next().is_none().then_some(gtid)
    }
}

fn digits<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The last GTID of each domain, in domain order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GtidPos {
    len: u8,
    entries: [Gtid; MAX_DOMAINS],
}

/// A position would need more than [`MAX_DOMAINS`] domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than {MAX_DOMAINS} GTID domains")]
pub struct TooManyDomains;

impl GtidPos {
    /// The GTIDs, in domain order.
    pub fn iter(&self) -> impl Iterator<Item = &Gtid> {
        self.entries[..self.len as usize].iter()
    }

    /// True when no domain has a GTID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last GTID of `domain`.
    pub fn get(&self, domain: u32) -> Option<Gtid> {
        self.iter().find(|g| g.domain == domain).copied()
    }

    /// Records `gtid` as its domain's last transaction.
    pub fn record(&mut self, gtid: Gtid) -> Result<(), TooManyDomains> {
        let len = self.len as usize;
        match self.entries[..len].binary_search_by_key(&gtid.domain, |g| g.domain) {
            Ok(i) => self.entries[i] = gtid,
            Err(i) => {
                if len == MAX_DOMAINS {
                    return Err(TooManyDomains);
                }
                self.entries.copy_within(i..len, i + 1);
                self.entries[i] = gtid;
                self.len += 1;
            }
        }
        Ok(())
    }

    /// Parses a comma-separated list (`0-1-5241,7-2-12`; whitespace and an empty text
    /// allowed). `None` when malformed, a domain repeats, or there are too many domains.
    pub fn parse(text: &str) -> Option<GtidPos> {
        let mut pos = GtidPos::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let gtid = Gtid::parse(item)?;
            if pos.get(gtid.domain).is_some() {
                return None;
            }
            pos.record(gtid).ok()?;
        }
        Some(pos)
    }
}

impl fmt::Display for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GtidPos({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_server_lists_and_prints_them_in_domain_order() {
        let pos = GtidPos::parse("7-2-12, 0-1-5241").unwrap();
        assert_eq!(pos.to_string(), "0-1-5241,7-2-12");
        assert_eq!(pos.get(7).unwrap().seq, 12);
        assert!(GtidPos::parse("").unwrap().is_empty());
        for bad in ["0-1", "0-1-2-3", "a-1-2", "0-1-2,0-2-3", "0--2", "-1-2-3"] {
            assert!(GtidPos::parse(bad).is_none(), "{bad}");
        }
        let many = (0..=MAX_DOMAINS)
            .map(|d| format!("{d}-1-1"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(GtidPos::parse(&many).is_none());
    }

    #[test]
    fn record_replaces_the_domains_last_transaction() {
        let mut pos = GtidPos::parse("0-1-10").unwrap();
        pos.record(Gtid {
            domain: 0,
            server: 2,
            seq: 11,
        })
        .unwrap();
        pos.record(Gtid {
            domain: 3,
            server: 2,
            seq: 1,
        })
        .unwrap();
        assert_eq!(pos.to_string(), "0-2-11,3-2-1");
    }

    proptest! {
        #[test]
        fn text_round_trips(list in proptest::collection::btree_map(any::<u32>(), (any::<u32>(), any::<u64>()), 0..=MAX_DOMAINS)) {
            let mut pos = GtidPos::default();
            for (domain, (server, seq)) in &list {
                pos.record(Gtid { domain: *domain, server: *server, seq: *seq }).unwrap();
            }
            prop_assert_eq!(GtidPos::parse(&pos.to_string()), Some(pos));
        }
    }
}
