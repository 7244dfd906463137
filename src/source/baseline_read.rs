//! The baseline read contract every engine implements: plan keyset chunks of a table and
//! read one chunk as rows of the table's schema; the rules every engine shares (which key
//! a table is chunked by, the chunk bounds, a keyless table's pinned read). The contract
//! knows no engine: [`crate::source::open_baseline_reader`] opens the one a config names.
//!
//! Contract: a chunk is `lower < key <= upper` in the primary key's order (`None` = open
//! end), so the chunks of one plan partition the table with no gap and no overlap
//! whatever rows are inserted or deleted meanwhile; each chunk is read by its own short
//! statement (no long transaction on the source); cells are decoded by the same type
//! mapping as the change stream, so snapshot and change parts share their Arrow types.
//!
//! A table without a key (and without declared `baseline.keys`) is one chunk, read by
//! one consistent read whose exact position [`BaselineReader::snapshot_point`] names: its
//! rows are replayed as a multiset, where an overlap with the stream would count a row
//! twice, so the read must say exactly which changes it already holds. Chunks read at
//! different times cannot say that (a change's row could lie in either), so such a table
//! is not split.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::change::{Column, TableSchema, Value};
use crate::error::{Code, Error, Result};
use crate::position::Position;

/// One keyset chunk: `lower < key <= upper`, key values as the engine's exact text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkBounds {
    pub lower: Option<Vec<String>>,
    pub upper: Option<Vec<String>>,
}

/// Receives the rows of a chunk, in key order.
pub type RowSink<'a> = dyn FnMut(Vec<Value>) -> Result<()> + Send + 'a;

/// What a table's policy lets a chunk's read skip at the source: columns read as NULL in
/// place of their values (excluded ones: their values never leave the server), and a
/// row filter in the source's SQL (every row the policy captures, perhaps more — the rows
/// are filtered again where the source's evaluation is not sluice's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadScope {
    pub nulled: std::collections::BTreeSet<String>,
    pub filter: Option<String>,
}

/// A baseline reader on one connection.
#[async_trait]
pub trait BaselineReader: Send {
    /// The table's current schema (also the snapshot parts' schema).
    fn schema(&self, table: &str) -> Result<Arc<TableSchema>>;

    /// The table's shape as the source's catalog describes it now, read again. Asked
    /// after a chunk's read: a chunk whose table had its plan's shape both before (at
    /// [`open`]) and after its read was read under that shape, since a DDL waits for the
    /// read's lock. A source whose captured shape cannot change (SQL Server's capture
    /// instance) keeps the default, [`schema`](Self::schema).
    async fn current_schema(&mut self, table: &str) -> Result<Arc<TableSchema>> {
        self.schema(table)
    }

    /// Narrows every later read of `table` to `scope` (an engine that cannot reads
    /// everything: the policy applied to its rows still decides what is written).
    fn restrict(&mut self, table: &str, scope: ReadScope) -> Result<()> {
        let _ = (table, scope);
        Ok(())
    }

    /// Chunk boundaries of roughly `chunk_rows` rows each, in key order.
    async fn plan(&mut self, table: &str, chunk_rows: u64) -> Result<Vec<ChunkBounds>>;

    /// For a table without a key: starts the one consistent read of the whole table that
    /// the next [`read_chunk`](Self::read_chunk) streams, and returns its snapshot point —
    /// every change of the table at or before it (as `__pos` text compares) is in those
    /// rows, none after it. `anchor` is the baseline's anchor (the point is never before
    /// it). `None` for a table with a key: its chunks overlap the stream, which the
    /// per-key replay makes harmless.
    async fn snapshot_point(
        &mut self,
        _table: &str,
        _anchor: &Position,
    ) -> Result<Option<Position>> {
        Ok(None)
    }

    /// Starts one consistent read of `table` (keyed or not) at an exact position and
    /// returns it: every change of the table at or before it (as `__pos` text compares)
    /// is in what the following [`read_chunk`](Self::read_chunk)s of `table` return, none
    /// after it, until [`end_pinned_read`](Self::end_pinned_read). `floor` is a position
    /// the point is never before (the job's checkpoint: it carries the binlog generation).
    /// `None` where the engine cannot pin a read (`sluice verify` then reports no
    /// re-checked difference as exact).
    async fn pin_read(&mut self, _table: &str, _floor: &Position) -> Result<Option<Position>> {
        Ok(None)
    }

    /// Ends the read [`pin_read`](Self::pin_read) started (nothing when none is open).
    async fn end_pinned_read(&mut self) -> Result<()> {
        Ok(())
    }

    /// Streams the rows of one chunk to `rows`; returns how many there were.
    async fn read_chunk(
        &mut self,
        table: &str,
        bounds: &ChunkBounds,
        rows: &mut RowSink<'_>,
    ) -> Result<u64>;
}

/// The key a baseline chunks `table` by: its own key, or — for a table without one — the
/// columns `baseline.keys` declares, resolved against `columns` (an exact name first, else
/// the one column equal ignoring ASCII case). A declared key need not be unique (a chunk
/// is a range of key values, so equal keys share a chunk), but every column must be NOT
/// NULL: a row whose key is NULL would fall in no chunk. A table with its own key and a
/// declared one is a config error, so the key used is never ambiguous.
pub fn baseline_key(
    declared: &std::collections::BTreeMap<String, Vec<String>>,
    table: &str,
    own_key: &[String],
    columns: &[Column],
) -> Result<Vec<String>> {
    let Some(names) = declared.get(table) else {
        return Ok(own_key.to_vec());
    };
    if !own_key.is_empty() {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!(
                "baseline.keys.{table} is declared, but {table} has its own key ({})",
                own_key.join(", ")
            ),
        )
        .hint(format!(
            "remove baseline.keys.{table}: a table with a key is chunked by it"
        )));
    }
    names
        .iter()
        .map(|name| {
            let column = columns
                .iter()
                .find(|c| c.name == *name)
                .or_else(|| {
                    let mut folded = columns.iter().filter(|c| c.name.eq_ignore_ascii_case(name));
                    folded.next().filter(|_| folded.next().is_none())
                })
                .ok_or_else(|| {
                    Error::new(
                        Code::ConfigInvalid,
                        format!("baseline.keys.{table}: {table} has no column {name:?}"),
                    )
                    .hint(format!("list columns of {table} as the source names them"))
                })?;
            if column.nullable {
                return Err(Error::new(
                    Code::SourcePrerequisite,
                    format!(
                        "baseline.keys.{table}: column {} is nullable; a row whose key is NULL would be in no chunk",
                        column.name
                    ),
                )
                .hint(format!(
                    "declare NOT NULL columns, or make {}.{} NOT NULL",
                    table, column.name
                )));
            }
            Ok(column.name.clone())
        })
        .collect()
}

/// The key columns a baseline of `table` chunks by ([`baseline_key`]), refused by the
/// rule of [`keyed_table`] when there are none. What `sluice doctor` reports.
pub fn chunk_key(
    declared: &std::collections::BTreeMap<String, Vec<String>>,
    table: &str,
    own_key: &[String],
    columns: &[Column],
    key_names: &str,
) -> Result<Vec<String>> {
    let key = baseline_key(declared, table, own_key, columns)?;
    keyed_table(&[table], table, |t| t, |_| !key.is_empty(), key_names)?;
    Ok(key)
}

/// The captured table `name` of `tables`, refused when it has no key to chunk by
/// (`key_names` says what counts as one on the engine). One rule for every engine.
pub fn keyed_table<'a, T>(
    tables: &'a [T],
    name: &str,
    config_name: impl Fn(&T) -> &str,
    has_key: impl Fn(&T) -> bool,
    key_names: &str,
) -> Result<&'a T> {
    let table = tables
        .iter()
        .find(|t| config_name(t) == name)
        .ok_or_else(|| {
            Error::new(
                Code::Internal,
                format!("table {name} is not part of this job"),
            )
        })?;
    if !has_key(table) {
        return Err(Error::new(
            Code::SourcePrerequisite,
            format!("{name} has no {key_names} to baseline by"),
        )
        .hint(format!(
            "add a primary key to {name}, or declare NOT NULL columns to chunk it by in baseline.keys ({{ {name}: [col, …] }})"
        )));
    }
    Ok(table)
}

/// The captured table `name` of `tables`, with or without a key.
pub fn captured_table<'a, T>(
    tables: &'a [T],
    name: &str,
    config_name: impl Fn(&T) -> &str,
) -> Result<&'a T> {
    tables
        .iter()
        .find(|t| config_name(t) == name)
        .ok_or_else(|| {
            Error::new(
                Code::Internal,
                format!("table {name} is not part of this job"),
            )
        })
}

/// The snapshot point of a read pinned at `point` for a baseline anchored at `anchor`:
/// `point`, or `anchor` when `point` sorts before it. The latter happens only for a
/// re-baseline (whose anchor lies just after the job's checkpoint C —
/// [`crate::baseline::epoch`]) read before anything was committed after C: no change lies
/// between `point` (at or after C) and `anchor`, so both say the same, and the snapshot's
/// marker then sorts after the re-baseline's epoch marker, as it must.
pub fn at_or_after_anchor(point: Position, anchor: &Position) -> Position {
    if point.partial_cmp(anchor) == Some(std::cmp::Ordering::Less) {
        anchor.clone()
    } else {
        point
    }
}

/// Refuses a keyless table's chunk read without [`BaselineReader::snapshot_point`]
/// first, or a chunk with bounds (a plan made while `baseline.keys` declared a key the
/// config no longer does): a keyless read is always the whole table, so bounded chunks
/// would read it more than once.
pub fn check_pinned(table: &str, pinned: Option<&str>, bounds: &ChunkBounds) -> Result<()> {
    if bounds.lower.is_some() || bounds.upper.is_some() {
        return Err(Error::new(
            Code::StateCorrupt,
            format!("table {table} has no key, but its stored baseline plan has keyset chunks (planned with baseline.keys)"),
        )
        .hint(format!("declare baseline.keys.{table} again to finish this baseline, or start it over: `sluice baseline --reset`")));
    }
    if pinned != Some(table) {
        return Err(Error::new(
            Code::Internal,
            format!(
                "table {table} has no key: its baseline is read only after its snapshot point is pinned"
            ),
        ));
    }
    Ok(())
}

/// Evenly spaced split points of the integer range `[min, max]` into `chunks` chunks:
/// returns the `chunks - 1` inclusive upper bounds of all chunks but the last.
pub fn split_integer_range(min: i128, max: i128, chunks: u64) -> Vec<i128> {
    if chunks <= 1 || max <= min {
        return vec![];
    }
    let span = max - min;
    let chunks = i128::from(chunks).min(span + 1);
    let mut bounds: Vec<i128> = (1..chunks).map(|i| min + span * i / chunks).collect();
    bounds.dedup();
    bounds
}

/// Turns sorted split points into chunk bounds covering everything.
pub fn chunks_from_splits(splits: Vec<Vec<String>>) -> Vec<ChunkBounds> {
    let mut chunks = Vec::with_capacity(splits.len() + 1);
    let mut lower = None;
    for split in splits {
        chunks.push(ChunkBounds {
            lower: lower.take(),
            upper: Some(split.clone()),
        });
        lower = Some(split);
    }
    chunks.push(ChunkBounds { lower, upper: None });
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn column(name: &str, nullable: bool) -> Column {
        Column {
            name: name.into(),
            ty: crate::change::ColumnType::Int64,
            nullable,
            key: false,
            source_type: "bigint".into(),
            field_metadata: Default::default(),
        }
    }

    #[test]
    fn a_declared_key_is_used_only_for_a_table_without_one() {
        let columns = vec![
            column("Created", false),
            column("seq", false),
            column("note", true),
        ];
        let declared: std::collections::BTreeMap<String, Vec<String>> = [(
            "log".to_owned(),
            vec!["created".to_owned(), "seq".to_owned()],
        )]
        .into();
        assert_eq!(
            baseline_key(&declared, "log", &[], &columns).unwrap(),
            vec!["Created".to_owned(), "seq".to_owned()],
            "names resolve as the source spells them"
        );
        assert_eq!(
            baseline_key(&declared, "other", &["id".into()], &columns).unwrap(),
            vec!["id".to_owned()]
        );
        assert!(
            baseline_key(&declared, "other", &[], &columns)
                .unwrap()
                .is_empty()
        );
        let both = baseline_key(&declared, "log", &["id".into()], &columns).unwrap_err();
        assert_eq!(both.code(), Code::ConfigInvalid);
        let nullable: std::collections::BTreeMap<String, Vec<String>> =
            [("log".to_owned(), vec!["note".to_owned()])].into();
        let err = baseline_key(&nullable, "log", &[], &columns).unwrap_err();
        assert_eq!(err.code(), Code::SourcePrerequisite);
        assert!(err.to_string().contains("nullable"), "{err}");
        let missing: std::collections::BTreeMap<String, Vec<String>> =
            [("log".to_owned(), vec!["nope".to_owned()])].into();
        assert_eq!(
            baseline_key(&missing, "log", &[], &columns)
                .unwrap_err()
                .code(),
            Code::ConfigInvalid
        );
    }

    #[test]
    fn an_ambiguous_case_folded_name_is_refused() {
        let columns = vec![
            column("A", false),
            column("a2", false),
            column("Ab", false),
            column("aB", false),
        ];
        let declared: std::collections::BTreeMap<String, Vec<String>> =
            [("t".to_owned(), vec!["ab".to_owned()])].into();
        assert!(baseline_key(&declared, "t", &[], &columns).is_err());
        let exact: std::collections::BTreeMap<String, Vec<String>> =
            [("t".to_owned(), vec!["aB".to_owned()])].into();
        assert_eq!(
            baseline_key(&exact, "t", &[], &columns).unwrap(),
            vec!["aB".to_owned()]
        );
    }

    #[test]
    fn a_snapshot_point_before_the_anchor_is_the_anchor() {
        use crate::position::{BinlogPosition, PgLsn};
        let pg = |n| Position::Postgres(PgLsn(n));
        assert_eq!(at_or_after_anchor(pg(9), &pg(5)), pg(9));
        assert_eq!(at_or_after_anchor(pg(5), &pg(5)), pg(5));
        assert_eq!(at_or_after_anchor(pg(4), &pg(5)), pg(5));
        let my = |offset| {
            Position::MySql(Box::new(
                BinlogPosition::new("mariadb-bin.000003", offset).unwrap(),
            ))
        };
        assert_eq!(at_or_after_anchor(my(1000), &my(1002)), my(1002));
        assert_eq!(at_or_after_anchor(my(2000), &my(1002)), my(2000));
    }

    #[test]
    fn a_keyless_read_is_pinned_and_whole() {
        let whole = ChunkBounds {
            lower: None,
            upper: None,
        };
        assert!(check_pinned("t", Some("t"), &whole).is_ok());
        assert_eq!(
            check_pinned("t", None, &whole).unwrap_err().code(),
            Code::Internal
        );
        let bounded = ChunkBounds {
            lower: None,
            upper: Some(vec!["5".into()]),
        };
        assert_eq!(
            check_pinned("t", Some("t"), &bounded).unwrap_err().code(),
            Code::StateCorrupt
        );
    }

    #[test]
    fn chunks_cover_the_whole_key_space() {
        let chunks = chunks_from_splits(vec![vec!["10".into()], vec!["20".into()]]);
        assert_eq!(chunks.len(), 3);
        assert_eq!(
            chunks[0],
            ChunkBounds {
                lower: None,
                upper: Some(vec!["10".into()])
            }
        );
        assert_eq!(chunks[1].lower, Some(vec!["10".into()]));
        assert_eq!(
            chunks[2],
            ChunkBounds {
                lower: Some(vec!["20".into()]),
                upper: None
            }
        );
        assert_eq!(
            chunks_from_splits(vec![]),
            vec![ChunkBounds {
                lower: None,
                upper: None
            }]
        );
    }

    proptest! {
        #[test]
        fn integer_splits_are_increasing_and_inside_the_range(min in -1_000_000i128..1_000_000, span in 0i128..1_000_000, n in 0u64..50) {
            let max = min + span;
            let splits = split_integer_range(min, max, n);
            prop_assert!(splits.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(splits.iter().all(|s| *s >= min && *s < max));
            prop_assert!(splits.len() as u64 <= n.saturating_sub(1));
        }
    }
}
