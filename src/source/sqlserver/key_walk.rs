//! The keyset walk that plans baseline chunks of a key without an integer range, as a
//! state machine free of I/O: each step asks the server for the key `chunk_rows` rows
//! past the previous split (one short statement, `queries::key_walk`), and the walk
//! ends when a step finds no such key.
//!
//! Guarantees: the splits are the keys the server returned, in the order it returned
//! them, so the chunks built from them ([`chunks_from_splits`]) partition the key space
//! with no gap and no overlap whatever the key's type or collation; a step that returns
//! a split already taken (which a correct server never does) ends the walk with
//! `SLUICE_SOURCE_PROTOCOL` instead of looping.

use std::collections::HashSet;

use crate::error::{Code, Error, Result};
use crate::source::baseline_read::{ChunkBounds, chunks_from_splits};

/// The splits found so far.
#[derive(Debug, Default)]
pub struct KeyWalk {
    splits: Vec<Vec<String>>,
    seen: HashSet<Vec<String>>,
}

impl KeyWalk {
    pub fn new() -> KeyWalk {
        KeyWalk::default()
    }

    /// The key the next step starts after; `None` for the table's start.
    pub fn after(&self) -> Option<&[String]> {
        self.splits.last().map(Vec::as_slice)
    }

    /// Takes a step's answer: the next split, or `None` when fewer than `chunk_rows`
    /// rows follow [`after`](Self::after). Returns whether to step again.
    pub fn record(&mut self, found: Option<Vec<String>>) -> Result<bool> {
        let Some(key) = found else {
            return Ok(false);
        };
        if !self.seen.insert(key.clone()) {
            return Err(Error::new(
                Code::SourceProtocol,
                format!("planning baseline chunks: the key walk returned the split {key:?} twice"),
            )
            .hint("report this with the key's column types and collation; `baseline.chunk_rows` larger than the table reads it as one chunk"));
        }
        self.splits.push(key);
        Ok(true)
    }

    /// The chunks: up to the first split, between consecutive splits, after the last.
    pub fn finish(self) -> Vec<ChunkBounds> {
        chunks_from_splits(self.splits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The server's answer to one walk step over `table` (sorted keys): the key
    /// `chunk_rows` rows past `after`, as `… WHERE key > after ORDER BY key OFFSET
    /// chunk_rows - 1 ROWS FETCH NEXT 1 ROWS ONLY` gives it.
    fn step(
        table: &[(i64, String)],
        after: Option<&[String]>,
        chunk_rows: usize,
    ) -> Option<Vec<String>> {
        let after = after.map(decode);
        table
            .iter()
            .filter(|k| after.as_ref().is_none_or(|a| *k > a))
            .nth(chunk_rows - 1)
            .map(encode)
    }

    fn encode(key: &(i64, String)) -> Vec<String> {
        vec![key.0.to_string(), key.1.clone()]
    }

    fn decode(text: &[String]) -> (i64, String) {
        (text[0].parse().unwrap(), text[1].clone())
    }

    fn inside(bounds: &ChunkBounds, key: &(i64, String)) -> bool {
        bounds.lower.as_deref().is_none_or(|l| *key > decode(l))
            && bounds.upper.as_deref().is_none_or(|u| *key <= decode(u))
    }

    fn walk(table: &[(i64, String)], chunk_rows: usize) -> Vec<ChunkBounds> {
        let mut walk = KeyWalk::new();
        while walk.record(step(table, walk.after(), chunk_rows)).unwrap() {}
        walk.finish()
    }

    #[test]
    fn a_walk_splits_every_chunk_rows_keys() {
        let table: Vec<(i64, String)> = (0..25).map(|i| (i / 10, format!("k{i:02}"))).collect();
        let chunks = walk(&table, 10);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0].upper, Some(vec!["0".into(), "k09".into()]));
        assert_eq!(chunks[1].upper, Some(vec!["1".into(), "k19".into()]));
        assert_eq!(chunks[2].upper, None);
        let sizes: Vec<usize> = chunks
            .iter()
            .map(|c| table.iter().filter(|k| inside(c, k)).count())
            .collect();
        assert_eq!(sizes, [10, 10, 5]);
        // An exact multiple leaves an empty last chunk, and an empty table one chunk.
        assert_eq!(walk(&table[..20], 10).len(), 3);
        assert_eq!(walk(&[], 10), chunks_from_splits(vec![]));
    }

    #[test]
    fn a_repeated_split_ends_the_walk_with_an_error() {
        let mut walk = KeyWalk::new();
        assert!(walk.record(Some(vec!["a".into()])).unwrap());
        assert_eq!(walk.after(), Some(&["a".to_owned()][..]));
        assert!(walk.record(Some(vec!["b".into()])).unwrap());
        let err = walk.record(Some(vec!["a".into()])).unwrap_err();
        assert_eq!(err.code(), Code::SourceProtocol);
    }

    proptest! {
        #[test]
        fn walked_chunks_hold_every_row_exactly_once_even_after_writes(
            keys in proptest::collection::btree_set((-50i64..50, "[a-c]{0,2}"), 0..200),
            later in proptest::collection::btree_set((-60i64..60, "[a-d]{0,2}"), 0..100),
            chunk_rows in 1usize..40,
        ) {
            let table: Vec<(i64, String)> = keys.into_iter().collect();
            let chunks = walk(&table, chunk_rows);
            prop_assert!(chunks.len() <= table.len() / chunk_rows + 1);
            // The plan partitions the key space: rows written after planning still fall
            // into exactly one chunk.
            for key in table.iter().chain(later.iter()) {
                prop_assert_eq!(chunks.iter().filter(|c| inside(c, key)).count(), 1, "{:?}", key);
            }
            for c in &chunks[..chunks.len() - 1] {
                prop_assert_eq!(table.iter().filter(|k| inside(c, k)).count(), chunk_rows);
            }
        }
    }
}
