//! MySQL GTID sets: the transactions a server has executed, as `server_uuid:interval` lists
//! (`3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9,…`, the form of `@@gtid_executed`,
//! `@@gtid_purged` and `Executed_Gtid_Set`).
//!
//! Guarantees: a [`GtidSet`] keeps, per source UUID, sorted, disjoint and non-adjacent
//! closed intervals of transaction numbers (`1..=2^63-1`, MySQL's `GNO_END`), so its text
//! (`Display`: UUIDs in byte order, lower-case, intervals merged, a single transaction
//! printed as `7`, sets separated by `,` without spaces, empty set as ``) is canonical:
//! two equal sets print the same, and the text round-trips exactly through
//! [`GtidSet::parse`]. Parsing accepts what MySQL prints (upper case, a newline after each
//! comma, repeated UUIDs, unsorted or overlapping intervals) and refuses tagged GTIDs
//! (`uuid:tag:1-5`, MySQL 8.4), which sluice does not follow.
//! [`GtidSet::is_subset`], [`GtidSet::difference`], [`GtidSet::intersection`] and
//! [`GtidSet::union_with`] are exact set operations.

use std::collections::BTreeMap;
use std::fmt;

/// The largest transaction number MySQL assigns (`GNO_END - 1` = `i64::MAX`).
pub const MAX_GNO: u64 = i64::MAX as u64;

/// A source UUID (`server_uuid` of the server a transaction originated on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceUuid(pub [u8; 16]);

impl SourceUuid {
    /// Parses `8-4-4-4-12` hex digits (either case).
    pub fn parse(text: &str) -> Option<SourceUuid> {
        let groups: Vec<&str> = text.split('-').collect();
        let lengths = [8, 4, 4, 4, 12];
        if groups.len() != 5 || groups.iter().zip(lengths).any(|(g, n)| g.len() != n) {
            return None;
        }
        let hex: String = groups.concat();
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        hex.bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then_some(SourceUuid(bytes))
    }
}

impl fmt::Display for SourceUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A set of MySQL GTIDs: per source UUID, closed intervals `[first, last]`.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct GtidSet {
    sets: BTreeMap<SourceUuid, Vec<(u64, u64)>>,
}

/// Why a text is not a GTID set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a MySQL GTID set: {reason}")]
pub struct ParseGtidSetError {
    pub text: String,
    pub reason: &'static str,
}

impl GtidSet {
    /// True when the set holds no transaction.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The intervals of each source UUID, in UUID order.
    pub fn iter(&self) -> impl Iterator<Item = (&SourceUuid, &[(u64, u64)])> {
        self.sets.iter().map(|(uuid, list)| (uuid, list.as_slice()))
    }

    /// True when `uuid:gno` is in the set.
    pub fn contains(&self, uuid: &SourceUuid, gno: u64) -> bool {
        self.sets
            .get(uuid)
            .is_some_and(|list| list.iter().any(|&(a, b)| a <= gno && gno <= b))
    }

    /// Adds the transactions `uuid:first-last` (nothing when `first > last` or `first == 0`).
    pub fn insert_interval(&mut self, uuid: SourceUuid, first: u64, last: u64) {
        if first == 0 || first > last {
            return;
        }
        let list = self.sets.entry(uuid).or_default();
        list.push((first, last));
        normalize(list);
    }

    /// Adds one transaction `uuid:gno`.
    pub fn insert(&mut self, uuid: SourceUuid, gno: u64) {
        self.insert_interval(uuid, gno, gno);
    }

    /// Adds every transaction of `other`.
    pub fn union_with(&mut self, other: &GtidSet) {
        for (uuid, list) in &other.sets {
            let mine = self.sets.entry(*uuid).or_default();
            mine.extend_from_slice(list);
            normalize(mine);
        }
    }

    /// True when every transaction of `self` is in `other`.
    pub fn is_subset(&self, other: &GtidSet) -> bool {
        self.difference(other).is_empty()
    }

    /// The transactions of `self` that are not in `other`.
    pub fn difference(&self, other: &GtidSet) -> GtidSet {
        let mut out = GtidSet::default();
        for (uuid, mine) in &self.sets {
            let theirs = other.sets.get(uuid).map(Vec::as_slice).unwrap_or(&[]);
            let mut left = Vec::new();
            for &(a, b) in mine {
                let mut start = a;
                for &(c, d) in theirs {
                    if d < start || c > b {
                        continue;
                    }
                    if c > start {
                        left.push((start, c - 1));
                    }
                    if d >= b {
                        start = b + 1;
                        break;
                    }
                    start = d + 1;
                }
                if start <= b {
                    left.push((start, b));
                }
            }
            if !left.is_empty() {
                out.sets.insert(*uuid, left);
            }
        }
        out
    }

    /// The transactions in both sets.
    pub fn intersection(&self, other: &GtidSet) -> GtidSet {
        self.difference(&self.difference(other))
    }

    /// Parses a set as MySQL prints it (see the module documentation).
    pub fn parse(text: &str) -> Result<GtidSet, ParseGtidSetError> {
        let fail = |reason| ParseGtidSetError {
            text: text.to_owned(),
            reason,
        };
        let mut set = GtidSet::default();
        for item in text.split(',').map(str::trim) {
            if item.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(fail("an empty item between commas"));
            }
            let mut parts = item.split(':').map(str::trim);
            let uuid = SourceUuid::parse(parts.next().unwrap_or_default())
                .ok_or_else(|| fail("a source is not a UUID"))?;
            let mut any = false;
            for interval in parts {
                any = true;
                let (first, last) = match interval.split_once('-') {
                    Some((a, b)) => (gno(a), gno(b)),
                    None => (gno(interval), gno(interval)),
                };
                let (Some(first), Some(last)) = (first, last) else {
                    return Err(fail(
                        "an interval is not `N` or `N-M` with 1 ≤ N ≤ M ≤ 2^63-1 (a tagged GTID `uuid:tag:N` is not supported)",
                    ));
                };
                if first > last {
                    return Err(fail("an interval ends before it starts"));
                }
                set.insert_interval(uuid, first, last);
            }
            if !any {
                return Err(fail("a UUID without intervals"));
            }
        }
        Ok(set)
    }
}

/// A transaction number: decimal digits, `1..=MAX_GNO`.
fn gno(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|n| (1..=MAX_GNO).contains(n))
}

/// Sorts and merges overlapping or adjacent intervals.
fn normalize(list: &mut Vec<(u64, u64)>) {
    list.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(list.len());
    for &(a, b) in list.iter() {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    *list = out;
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (uuid, list)) in self.sets.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{uuid}")?;
            for &(a, b) in list {
                match a == b {
                    true => write!(f, ":{a}")?,
                    false => write!(f, ":{a}-{b}")?,
                }
            }
        }
        Ok(())
    }
}

impl fmt::Debug for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GtidSet({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "8a94f357-aab4-11df-86ab-c80aa9429562";

    fn set(text: &str) -> GtidSet {
        GtidSet::parse(text).unwrap()
    }

    #[test]
    fn parses_what_mysql_prints_and_prints_it_canonically() {
        // `@@gtid_executed` puts a newline after each comma; upper case is accepted.
        let s = set(&format!(
            "{},\n{A}:1-5:7-9:6:20",
            B.to_ascii_uppercase() + ":1-3"
        ));
        assert_eq!(s.to_string(), format!("{A}:1-9:20,{B}:1-3"));
        assert_eq!(
            set(&format!("{A}:3,{A}:1-2")).to_string(),
            format!("{A}:1-3")
        );
        assert!(set("").is_empty() && set(" \n").is_empty());
        assert_eq!(set("").to_string(), "");
        assert_eq!(
            set(&format!("{A}:{MAX_GNO}")).to_string(),
            format!("{A}:{MAX_GNO}")
        );
        for bad in [
            "x:1".to_owned(),
            A.to_owned(),
            format!("{A}:0"),
            format!("{A}:5-3"),
            format!("{A}:1-"),
            format!("{A}:{}", MAX_GNO + 1),
            format!("{A}:tag:1-5"),
            format!("{A}:1,,{B}:1"),
            format!("{A}:+1"),
            "3e11fa4771ca-11e1-9e33-c80aa9429562:1".to_owned(),
            "3e11fa47-71ca-11e1-9e33-c80aa942956g:1".to_owned(),
        ] {
            assert!(GtidSet::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn containment_and_difference_name_the_missing_transactions() {
        let checkpoint = set(&format!("{A}:1-100,{B}:1-3"));
        let promoted = set(&format!("{A}:1-97:99,{B}:1-5"));
        assert!(!checkpoint.is_subset(&promoted));
        assert_eq!(
            checkpoint.difference(&promoted).to_string(),
            format!("{A}:98:100")
        );
        assert!(set(&format!("{A}:1-97")).is_subset(&promoted));
        assert_eq!(
            promoted
                .intersection(&set(&format!("{A}:50-99,{B}:4-9")))
                .to_string(),
            format!("{A}:50-97:99,{B}:4-5")
        );
        assert!(GtidSet::default().is_subset(&GtidSet::default()));
    }

    /// A small model: a set of `(uuid index, gno)` pairs.
    type Model = BTreeSet<(u8, u64)>;

    fn uuid(i: u8) -> SourceUuid {
        SourceUuid([i.wrapping_mul(37); 16])
    }

    fn arb_model() -> impl Strategy<Value = Model> {
        proptest::collection::btree_set((0u8..3, 1u64..40), 0..40)
    }

    fn build(model: &Model) -> GtidSet {
        let mut s = GtidSet::default();
        for &(u, g) in model {
            s.insert(uuid(u), g);
        }
        s
    }

    proptest! {
        #[test]
        fn text_round_trips_canonically(model in arb_model()) {
            let s = build(&model);
            let text = s.to_string();
            let back = GtidSet::parse(&text).unwrap();
            prop_assert_eq!(&back, &s);
            prop_assert_eq!(back.to_string(), text);
            for (_, list) in s.iter() {
                for pair in list.windows(2) {
                    prop_assert!(pair[0].1 + 1 < pair[1].0, "merged and sorted");
                }
            }
        }

        #[test]
        fn set_operations_match_the_model(a in arb_model(), b in arb_model()) {
            let (sa, sb) = (build(&a), build(&b));
            prop_assert_eq!(sa.is_subset(&sb), a.is_subset(&b));
            let diff: Model = a.difference(&b).copied().collect();
            prop_assert_eq!(sa.difference(&sb), build(&diff));
            let both: Model = a.intersection(&b).copied().collect();
            prop_assert_eq!(sa.intersection(&sb), build(&both));
            let either: Model = a.union(&b).copied().collect();
            let mut union = sa.clone();
            union.union_with(&sb);
            prop_assert_eq!(union, build(&either));
            for &(u, g) in &a {
                prop_assert!(sa.contains(&uuid(u), g));
            }
        }

        #[test]
        fn any_text_parses_back_or_is_refused(text in "[0-9a-fA-F:, \n-]{0,60}") {
            if let Ok(s) = GtidSet::parse(&text) {
                prop_assert_eq!(GtidSet::parse(&s.to_string()).unwrap(), s);
            }
        }
    }
}
