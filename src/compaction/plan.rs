//! Which live parts of a table a compaction rewrites together.
//!
//! Guarantees: a group holds only live change parts ([`super::ledger::Ledger::live`]) of
//! one partition folder and one schema shape (the `shape` its manifest recorded), each
//! listed by a manifest written at least `min_age` ago and smaller than three quarters of
//! the target; the parts of a group are consecutive in stream order (by first position)
//! among the partition's live parts — a part left out (too large, too new, another shape)
//! ends the group — and together hold at most `target_bytes` (a single part is never a
//! group: rewriting it alone gains nothing). Baseline parts are never planned.

use std::collections::BTreeMap;

use super::ledger::{Ledger, LivePart};
use crate::parts::ManifestPart;

/// Parts rewritten into one or more compacted parts of the same partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub partition: Option<String>,
    /// In stream order.
    pub parts: Vec<ManifestPart>,
}

impl Group {
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }
}

/// What a planner needs besides the ledger.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub target_bytes: u64,
    /// Parts listed after this instant (ms since the epoch) are left alone.
    pub listed_before_ms: i64,
}

impl Limits {
    /// A part of at least this many bytes is large enough as it is.
    fn large(&self) -> u64 {
        self.target_bytes / 4 * 3
    }

    fn eligible(&self, live: &LivePart) -> bool {
        live.part.bytes < self.large()
            && live
                .listed_at_ms
                .is_some_and(|at| at <= self.listed_before_ms)
    }
}

/// The groups of `table`'s live parts, partitions in folder order, each in stream order.
pub fn plan(ledger: &Ledger, table: &str, limits: Limits) -> Vec<Group> {
    let prefix = format!("{table}/");
    let snapshot = format!("{table}/snapshot/");
    let mut by_partition: BTreeMap<Option<String>, Vec<&LivePart>> = BTreeMap::new();
    for live in ledger.live() {
        let key = &live.part.key;
        if key.starts_with(&prefix) && !key.starts_with(&snapshot) {
            by_partition
                .entry(live.part.partition.clone())
                .or_default()
                .push(live);
        }
    }
    let mut groups = Vec::new();
    for (partition, mut parts) in by_partition {
        parts.sort_by(|a, b| {
            (&a.part.first_pos, &a.part.last_pos, &a.part.key).cmp(&(
                &b.part.first_pos,
                &b.part.last_pos,
                &b.part.key,
            ))
        });
        let mut current: Vec<ManifestPart> = Vec::new();
        let mut bytes = 0u64;
        let mut close = |current: &mut Vec<ManifestPart>, bytes: &mut u64| {
            if current.len() > 1 {
                groups.push(Group {
                    partition: partition.clone(),
                    parts: std::mem::take(current),
                });
            }
            current.clear();
            *bytes = 0;
        };
        for live in parts {
            if !limits.eligible(live) {
                close(&mut current, &mut bytes);
                continue;
            }
            let part = &live.part;
            let other_shape = current.last().is_some_and(|last| last.shape != part.shape);
            if other_shape || (!current.is_empty() && bytes + part.bytes > limits.target_bytes) {
                close(&mut current, &mut bytes);
            }
            bytes += part.bytes;
            current.push(part.clone());
        }
        close(&mut current, &mut bytes);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(key: &str, pos: &str, bytes: u64, shape: u32, at: i64) -> LivePart {
        LivePart {
            part: ManifestPart {
                key: format!("t/{key}"),
                rows: 1,
                bytes,
                checksum: String::new(),
                first_pos: pos.into(),
                last_pos: pos.into(),
                partition: None,
                shape: Some(shape),
            },
            listed_at_ms: Some(at),
        }
    }

    fn ledger(parts: Vec<LivePart>) -> Ledger {
        let mut ledger = Ledger::default();
        for p in parts {
            ledger.listed.insert(p.part.key.clone(), p);
        }
        ledger
    }

    fn keys(groups: &[Group]) -> Vec<Vec<String>> {
        groups
            .iter()
            .map(|g| {
                g.parts
                    .iter()
                    .map(|p| p.key.trim_start_matches("t/").to_owned())
                    .collect()
            })
            .collect()
    }

    const LIMITS: Limits = Limits {
        target_bytes: 100,
        listed_before_ms: 1000,
    };

    #[test]
    fn small_old_parts_of_one_shape_are_grouped_up_to_the_target_in_stream_order() {
        let l = ledger(vec![
            live("c", "03", 30, 1, 0),
            live("a", "01", 30, 1, 0),
            live("b", "02", 30, 1, 0),
            live("d", "04", 30, 1, 0),
            live("e", "05", 30, 1, 0),
        ]);
        assert_eq!(
            keys(&plan(&l, "t", LIMITS)),
            [vec!["a", "b", "c"], vec!["d", "e"]]
        );
    }

    #[test]
    fn large_new_and_other_shape_parts_end_a_group_and_singles_stay() {
        let l = ledger(vec![
            live("a", "01", 10, 1, 0),
            live("b", "02", 10, 1, 0),
            live("big", "03", 80, 1, 0),
            live("c", "04", 10, 1, 0),
            live("d", "05", 10, 2, 0),
            live("e", "06", 10, 2, 0),
            live("new", "07", 10, 2, 2000),
            live("f", "08", 10, 2, 0),
        ]);
        assert_eq!(
            keys(&plan(&l, "t", LIMITS)),
            [vec!["a", "b"], vec!["d", "e"]]
        );
    }

    #[test]
    fn replaced_and_baseline_parts_are_not_planned_and_partitions_stay_apart() {
        let mut parts = vec![
            live("a", "01", 10, 1, 0),
            live("b", "02", 10, 1, 0),
            live("snapshot/p/part-000001.parquet", "00", 10, 1, 0),
            live("snapshot/p/part-000002.parquet", "00", 10, 1, 0),
        ];
        let mut other = live("c", "03", 10, 1, 0);
        other.part.partition = Some("dt=2026-12-02".into());
        parts.push(other);
        let mut l = ledger(parts);
        assert_eq!(keys(&plan(&l, "t", LIMITS)), [vec!["a", "b"]]);
        l.replaced.insert("t/b".into());
        assert!(plan(&l, "t", LIMITS).is_empty());
    }
}
