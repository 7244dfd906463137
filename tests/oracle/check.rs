//! The oracle's checks over everything a job wrote for one table:
//!
//! * **identity of duplicates** — every `(__pos, __seq)` holds one row content only: a
//!   re-delivered change is byte-identical (cell-identical, metadata included);
//! * **order** — within one run, `(__pos, __seq)` strictly increases; per key, a change
//!   written after a later change of that key must be a re-delivery of one already written;
//! * **completeness** — the distinct changes are exactly as many as the workload made;
//! * **state** — the documented replay (latest `(__pos, __seq)` per key, deletes dropped,
//!   a `truncate` row dropping every earlier row,
//!   an `__unlogged` column keeps the key's previous value, or in the insert half of a key
//!   change the value of the row its delete half removed) equals the source's `SELECT *`,
//!   cell by cell;
//! * **logged** — a source that logs every value (`unlogged_allowed` false: PostgreSQL
//!   under `REPLICA IDENTITY FULL`, MySQL's FULL row image) never lists a column in
//!   `__unlogged`.

use std::collections::{BTreeMap, HashMap};

use super::canon::Cell;
use super::parts::{PartRow, is_meta};

/// A row of the source: column → canonical cell (key column included).
pub type SourceRow = BTreeMap<String, Cell>;

/// What one check found.
#[derive(Debug, Default)]
pub struct Findings {
    pub rows_compared: u64,
    /// Unlogged cells of key-change inserts completed from the deleted old row.
    pub carried_by_key_change: u64,
    pub mismatches: Vec<String>,
}

impl Findings {
    pub fn fail(&mut self, message: String) {
        self.mismatches.push(message);
    }
}

type Position = (String, i64);

/// Runs every check. `source` is keyed by the key column's canonical cell.
pub fn check_table(
    rows: &[PartRow],
    key: &str,
    source: &BTreeMap<String, SourceRow>,
    expected_changes: Option<u64>,
    dropped: &std::collections::BTreeSet<String>,
    unlogged_allowed: bool,
) -> Findings {
    let mut f = Findings::default();
    let key_of = |r: &PartRow| r.cell(key).cloned().flatten();

    // Identity of duplicates, and the distinct changes in position order.
    let mut distinct: BTreeMap<Position, &PartRow> = BTreeMap::new();
    let mut snapshot = Vec::new();
    // Epoch markers of re-baselines (in a plan folder): not rows of the table.
    let mut markers = Vec::new();
    for row in rows {
        if row.run == "snapshot" {
            if row.op == "rebaseline" {
                markers.push(row);
            } else {
                snapshot.push(row);
            }
            continue;
        }
        let at = (row.pos.clone(), row.seq);
        // A `truncate` / `rebaseline` row carries no data (every table column NULL); its
        // column list is the table's shape where it was written, which two runs of an
        // at-least-once copy may see differently: copies agree on the op.
        let marker = matches!(row.op.as_str(), "truncate" | "rebaseline");
        match distinct.get(&at) {
            Some(first) if marker && first.op != row.op => f.fail(format!(
                "duplicate at {at:?} ({} and {}) is {} and {}",
                first.file, row.file, first.op, row.op
            )),
            Some(_) if marker => {}
            Some(first) if first.all != row.all => {
                let diff: Vec<String> = first
                    .all
                    .iter()
                    .filter(|(c, v)| row.all.get(*c) != Some(v))
                    .map(|(c, v)| {
                        format!(
                            "{c}: {} vs {}",
                            short(v),
                            row.all.get(c).map(short).unwrap_or_default()
                        )
                    })
                    .collect();
                f.fail(format!(
                    "duplicate at {at:?} ({} and {}) differs from its original: {}",
                    first.file,
                    row.file,
                    diff.join("; ")
                ))
            }
            Some(_) => {}
            None => {
                distinct.insert(at, row);
            }
        }
    }

    // Order within each run, and per key across runs.
    let mut last_in_run: HashMap<&str, (Position, &str)> = HashMap::new();
    let mut last_for_key: HashMap<Option<String>, Position> = HashMap::new();
    let mut written: std::collections::HashSet<Position> = Default::default();
    for row in rows.iter().filter(|r| r.run != "snapshot") {
        let at = (row.pos.clone(), row.seq);
        if let Some((prev, file)) = last_in_run.get(row.run.as_str())
            && *prev >= at
        {
            f.fail(format!(
                "run {}: {at:?} ({}) does not follow {prev:?} ({file})",
                row.run, row.file
            ));
        }
        last_in_run.insert(&row.run, (at.clone(), &row.file));
        let k = key_of(row);
        if let Some(prev) = last_for_key.get(&k)
            && at < *prev
            && !written.contains(&at)
        {
            f.fail(format!(
                "key {k:?}: change {at:?} ({}) was written after the later change {prev:?} and never before",
                row.file
            ));
        }
        let newest = last_for_key.entry(k).or_insert_with(|| at.clone());
        if at > *newest {
            *newest = at.clone();
        }
        written.insert(at);
    }

    // Each baseline (one plan folder, `snapshot/<plan>/`; a reader that keeps older
    // baselines — an Iceberg table — has several): one row per key, all at its anchor
    // (`__seq` 0), which sorts before every change of the stream after it (overlap is
    // replayed on top, never under).
    let plan_of = |r: &PartRow| {
        r.file
            .rsplit_once('/')
            .map_or("", |(plan, _)| plan)
            .to_owned()
    };
    let mut plans: HashMap<String, (&PartRow, std::collections::HashSet<Cell>)> = HashMap::new();
    for row in &snapshot {
        let (first, keys) = plans
            .entry(plan_of(row))
            .or_insert_with(|| (*row, Default::default()));
        if row.op != "snapshot" || row.seq != 0 || row.pos != first.pos {
            f.fail(format!(
                "{}: snapshot row ({}, {}, {}) is not at the anchor ({}, 0, snapshot)",
                row.file, row.op, row.pos, row.seq, first.pos
            ));
        }
        if !keys.insert(key_of(row)) {
            f.fail(format!(
                "{}: key {:?} appears twice in the baseline",
                row.file,
                key_of(row)
            ));
        }
    }
    // Changes before a re-baseline's marker are superseded by it; every change after it
    // sorts after the (new) baseline's anchor.
    let marked = markers.iter().map(|m| (m.pos.clone(), m.seq)).max();
    let first_after = distinct
        .iter()
        .find(|(at, _)| marked.as_ref().is_none_or(|m| *at > m));
    let newest_anchor = snapshot.iter().max_by(|a, b| a.pos.cmp(&b.pos));
    if let (Some(anchor), Some(((first, _), row))) = (newest_anchor, first_after)
        && *first <= anchor.pos
    {
        f.fail(format!(
            "change at {first} ({}) does not sort after the baseline's anchor {}",
            row.file, anchor.pos
        ));
    }

    if let Some(expected_changes) = expected_changes
        && distinct.len() as u64 != expected_changes
    {
        f.fail(format!(
            "the parts hold {} distinct changes, the workload made {expected_changes}",
            distinct.len()
        ));
    }

    // Replay: snapshot rows are the base, changes merge on top in position order.
    let mut state: BTreeMap<String, BTreeMap<String, Cell>> = BTreeMap::new();
    let data = |r: &PartRow| -> BTreeMap<String, Cell> {
        r.all
            .iter()
            .filter(|(c, _)| !is_meta(c))
            .map(|(c, v)| (c.clone(), v.clone()))
            .collect()
    };
    // The row the latest delete removed, at its position: the insert half of a key change
    // (the next change at the same `__pos`) takes its unlogged values from it.
    let mut deleted: Option<(Position, BTreeMap<String, Cell>)> = None;
    // The documented rule (docs/output.md, Truncate and re-baseline): every row in
    // (`__pos`, `__seq`) order — the snapshot's rows share one position and keep their
    // order — and a `truncate` or `rebaseline` row drops every earlier row of the table.
    let mut ordered: Vec<&PartRow> = snapshot
        .into_iter()
        .chain(markers)
        .chain(distinct.values().copied())
        .collect();
    ordered.sort_by(|a, b| (&a.pos, a.seq).cmp(&(&b.pos, b.seq)));
    for row in ordered {
        if row.op == "truncate" || row.op == "rebaseline" {
            state.clear();
            deleted = None;
            continue;
        }
        let Some(k) = key_of(row) else {
            f.fail(format!(
                "{}: a row at ({}, {}) has a NULL key",
                row.file, row.pos, row.seq
            ));
            continue;
        };
        if !row.unlogged.is_empty() && !unlogged_allowed {
            f.fail(format!(
                "key {k}: {:?} unlogged at ({}, {}) ({}, {}), but this source logs every value",
                row.unlogged, row.pos, row.seq, row.op, row.file
            ));
        }
        if row.op == "delete" {
            deleted = state
                .remove(&k)
                .map(|old| ((row.pos.clone(), row.seq), old));
            continue;
        }
        let mut image = data(row);
        let key_change_half = match &deleted {
            Some(((pos, seq), old)) if *pos == row.pos && seq + 1 == row.seq => Some(old),
            _ => None,
        };
        for column in &row.unlogged {
            let earlier = match state.get(&k) {
                Some(previous) => Some(previous),
                None => {
                    f.carried_by_key_change += u64::from(key_change_half.is_some());
                    key_change_half
                }
            };
            match earlier.and_then(|prev| prev.get(column)) {
                Some(previous) => {
                    image.insert(column.clone(), previous.clone());
                }
                // A baseline reads after its anchor: a row changed after the anchor and
                // deleted before the read is in the stream, not in the snapshot, so its
                // unlogged value is unknown — harmless exactly when a later delete or
                // truncate removes the row again; a value that survives into the final
                // state is compared (and fails) as this marker.
                None => {
                    image.insert(
                        column.clone(),
                        Some(format!(
                            "<unlogged at ({}, {}), no earlier row holds it: {}>",
                            row.pos, row.seq, row.file
                        )),
                    );
                }
            }
        }
        state.insert(k, image);
    }

    // The replay's shape is the newest one: columns dropped since are not in it, and a
    // column added since is NULL in a row last written before it (added without a
    // default: one with a default re-baselines the table).
    let columns: std::collections::BTreeSet<String> = rows
        .iter()
        .flat_map(|r| r.all.keys())
        .filter(|c| !is_meta(c) && !dropped.contains(*c))
        .cloned()
        .collect();
    for row in state.values_mut() {
        row.retain(|c, _| !dropped.contains(c));
        for column in &columns {
            row.entry(column.clone()).or_insert(None);
        }
    }
    compare_state(&state, source, &mut f);
    f
}

/// The state against the source, cell by cell: every source row is in `state` with equal
/// cells (`rows_compared` counts them), and `state` holds no other key. Both are keyed by
/// the key column's canonical cell.
pub fn compare_state(
    state: &BTreeMap<String, BTreeMap<String, Cell>>,
    source: &BTreeMap<String, SourceRow>,
    f: &mut Findings,
) {
    for (k, want) in source {
        f.rows_compared += 1;
        let Some(got) = state.get(k) else {
            f.fail(format!(
                "key {k}: in the source, missing from the replayed parts"
            ));
            continue;
        };
        for (column, want_cell) in want {
            match got.get(column) {
                None => f.fail(format!(
                    "key {k}: column {column} is missing from the parts"
                )),
                Some(got_cell) if got_cell != want_cell => f.fail(format!(
                    "key {k}: column {column}: parts {}, source {}",
                    short(got_cell),
                    short(want_cell)
                )),
                Some(_) => {}
            }
        }
        for column in got.keys().filter(|c| !want.contains_key(*c)) {
            f.fail(format!(
                "key {k}: the parts have a column {column} the source has not"
            ));
        }
    }
    for k in state.keys().filter(|k| !source.contains_key(*k)) {
        f.fail(format!(
            "key {k}: in the replayed parts, not in the source (invented or a lost delete)"
        ));
    }
}

/// A cell for a message: long values are cut.
fn short(cell: &Cell) -> String {
    match cell {
        None => "NULL".into(),
        Some(text) if text.chars().count() > 80 => {
            format!(
                "{:?}… ({} chars)",
                text.chars().take(60).collect::<String>(),
                text.chars().count()
            )
        }
        Some(text) => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`check_table`] keyed by `id`, with the count checked and no column dropped.
    fn check(
        rows: &[PartRow],
        source: &BTreeMap<String, SourceRow>,
        expected: u64,
        unlogged: bool,
    ) -> Findings {
        check_table(
            rows,
            "id",
            source,
            Some(expected),
            &Default::default(),
            unlogged,
        )
    }

    fn row(run: &str, op: &str, pos: &str, seq: i64, id: &str, v: Option<&str>) -> PartRow {
        let mut all = BTreeMap::new();
        all.insert("__op".to_owned(), Some(op.to_owned()));
        all.insert("__pos".to_owned(), Some(pos.to_owned()));
        all.insert("__seq".to_owned(), Some(seq.to_string()));
        all.insert("id".to_owned(), Some(id.to_owned()));
        all.insert("v".to_owned(), v.map(str::to_owned));
        PartRow {
            file: format!("cdc-{run}-000001.parquet"),
            run: run.to_owned(),
            op: op.to_owned(),
            pos: pos.to_owned(),
            seq,
            unlogged: vec![],
            all,
        }
    }

    fn source(rows: &[(&str, Option<&str>)]) -> BTreeMap<String, SourceRow> {
        rows.iter()
            .map(|(id, v)| {
                let mut r = SourceRow::new();
                r.insert("id".into(), Some((*id).into()));
                r.insert("v".into(), v.map(str::to_owned));
                ((*id).to_owned(), r)
            })
            .collect()
    }

    #[test]
    fn a_clean_history_with_identical_redelivery_passes() {
        let rows = [
            row("r1", "insert", "A", 0, "1", Some("a")),
            row("r1", "insert", "A", 1, "2", Some("b")),
            // r2 re-read from the checkpoint before B: A again, identical.
            row("r2", "insert", "A", 0, "1", Some("a")),
            row("r2", "insert", "A", 1, "2", Some("b")),
            row("r2", "update", "B", 0, "1", Some("a2")),
            row("r2", "delete", "C", 0, "2", None),
        ];
        let f = check(&rows, &source(&[("1", Some("a2"))]), 4, false);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
        assert_eq!(f.rows_compared, 1);
    }

    #[test]
    fn every_kind_of_wrong_history_is_reported() {
        let base = || {
            vec![
                row("r1", "insert", "A", 0, "1", Some("a")),
                row("r1", "update", "B", 0, "1", Some("b")),
            ]
        };
        let want = source(&[("1", Some("b"))]);
        let found = |rows: &[PartRow], expected: u64, needle: &str| {
            let f = check(rows, &want, expected, false);
            assert!(
                f.mismatches.iter().any(|m| m.contains(needle)),
                "{needle:?} not in {:?}",
                f.mismatches
            );
        };
        // A lost change.
        found(&base()[..1], 2, "distinct changes");
        found(&base()[..1], 2, "column v");
        // A duplicate with another value at the same position.
        let mut dup = base();
        dup.push(row("r2", "update", "B", 0, "1", Some("other")));
        found(&dup, 2, "differs from its original");
        // Out of order within a run.
        let mut swapped = base();
        swapped.swap(0, 1);
        found(&swapped, 2, "does not follow");
        // A change that appears only after a later change of its key (another run).
        let late = vec![
            row("r1", "update", "B", 0, "1", Some("b")),
            row("r2", "insert", "A", 0, "1", Some("a")),
        ];
        found(&late, 2, "never before");
        // An invented row and a missing one.
        let mut invented = base();
        invented.push(row("r1", "insert", "C", 0, "9", Some("x")));
        found(&invented, 3, "not in the source");
        let f = check(&base(), &source(&[]), 2, false);
        assert!(f.mismatches.iter().any(|m| m.contains("not in the source")));
        let f = check(&[], &want, 0, false);
        assert!(
            f.mismatches
                .iter()
                .any(|m| m.contains("missing from the replayed parts"))
        );
    }

    #[test]
    fn unlogged_columns_keep_the_previous_value() {
        let mut update = row("r1", "update", "B", 0, "1", None);
        update.unlogged = vec!["v".into()];
        let rows = [row("r1", "insert", "A", 0, "1", Some("big")), update];
        let f = check(&rows, &source(&[("1", Some("big"))]), 2, true);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
        // A source that logs every value must not leave one out.
        let f = check(&rows, &source(&[("1", Some("big"))]), 2, false);
        assert!(
            f.mismatches.iter().any(|m| m.contains("logs every value")),
            "{:?}",
            f.mismatches
        );
    }

    #[test]
    fn a_key_change_carries_unlogged_values_from_its_delete_half() {
        let unlogged = |mut r: PartRow| {
            r.unlogged = vec!["v".into()];
            r
        };
        let rows = [
            row("r1", "insert", "A", 0, "1", Some("big")),
            unlogged(row("r1", "delete", "B", 0, "1", None)),
            unlogged(row("r1", "insert", "B", 1, "2", None)),
        ];
        let want = source(&[("2", Some("big"))]);
        let f = check(&rows, &want, 3, true);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
        assert_eq!(f.carried_by_key_change, 1);
        // Not right after the delete (another position, or another change between): the
        // value has no source, and fails the comparison as long as the row survives.
        for (pos, seq) in [("C", 0), ("B", 2)] {
            let rows = [
                rows[0].clone(),
                rows[1].clone(),
                unlogged(row("r1", "insert", pos, seq, "2", None)),
            ];
            let f = check(&rows, &want, 3, true);
            assert!(
                f.mismatches.iter().any(|m| m.contains("no earlier row")),
                "{pos} {seq}: {:?}",
                f.mismatches
            );
            // Deleted again later: the unknown value never reaches the state.
            let mut gone = rows.to_vec();
            gone.push(row("r1", "delete", "D", 0, "2", None));
            let f = check(&gone, &source(&[]), 4, true);
            assert!(f.mismatches.is_empty(), "{pos} {seq}: {:?}", f.mismatches);
        }
    }

    #[test]
    fn a_rebaseline_marker_or_a_truncate_drops_every_earlier_row() {
        let snap = |id: &str, v: &str, pos: &str| row("snapshot", "snapshot", pos, 0, id, Some(v));
        // Changes (A, B), then a re-baseline's epoch marker (C, in the new plan folder)
        // before its snapshot rows (D) and a later change (E): key 1 vanished without a
        // logged delete, so only the marker removes it.
        let mut marker = row("snapshot", "rebaseline", "C", 0, "", None);
        marker.all.insert("id".into(), None);
        let rows = [
            row("r1", "insert", "A", 0, "1", Some("a")),
            row("r1", "insert", "B", 0, "2", Some("b")),
            marker.clone(),
            snap("2", "b2", "D"),
            row("r2", "insert", "E", 0, "3", Some("c")),
        ];
        let want = source(&[("2", Some("b2")), ("3", Some("c"))]);
        let f = check(&rows, &want, 3, false);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
        // Without the rule key 1 would survive.
        let without: Vec<PartRow> = rows
            .iter()
            .filter(|r| r.op != "rebaseline")
            .cloned()
            .collect();
        let f = check(&without, &want, 3, false);
        assert!(!f.mismatches.is_empty());
        // A truncate in the stream does the same.
        let rows = [
            row("r1", "insert", "A", 0, "1", Some("a")),
            {
                let mut t = row("r1", "truncate", "B", 0, "", None);
                t.all.insert("id".into(), None);
                t
            },
            row("r1", "insert", "B", 1, "2", Some("b")),
        ];
        let f = check(&rows, &source(&[("2", Some("b"))]), 3, false);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
    }

    #[test]
    fn a_truncate_row_empties_the_table() {
        let mut truncate = row("r1", "truncate", "B", 0, "", None);
        truncate.all.insert("id".into(), None);
        let rows = [
            row("r1", "insert", "A", 0, "1", Some("a")),
            row("r1", "insert", "A", 1, "2", Some("b")),
            truncate,
            row("r1", "insert", "C", 0, "2", Some("b2")),
        ];
        let f = check(&rows, &source(&[("2", Some("b2"))]), 4, false);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
    }

    #[test]
    fn a_baseline_is_the_base_once_per_key_and_before_every_change() {
        let snap = |id: &str, v: &str, pos: &str| row("snapshot", "snapshot", pos, 0, id, Some(v));
        let rows = [
            snap("1", "a", "A"),
            snap("2", "b", "A"),
            row("r1", "update", "B", 0, "1", Some("a2")),
        ];
        let want = source(&[("1", Some("a2")), ("2", Some("b"))]);
        let f = check(&rows, &want, 1, false);
        assert!(f.mismatches.is_empty(), "{:?}", f.mismatches);
        let found = |rows: &[PartRow], needle: &str| {
            let f = check(rows, &want, 1, false);
            assert!(
                f.mismatches.iter().any(|m| m.contains(needle)),
                "{needle:?} not in {:?}",
                f.mismatches
            );
        };
        // A chunk read twice.
        let mut twice = rows.to_vec();
        twice.push(snap("2", "b", "A"));
        found(&twice, "appears twice in the baseline");
        // A snapshot row away from the anchor.
        let mut moved = rows.to_vec();
        moved[1] = snap("2", "b", "A2");
        found(&moved, "is not at the anchor");
        // A change that sorts before the anchor (a gap between baseline and stream).
        let mut early = rows.to_vec();
        early[2] = row("r1", "update", "0", 0, "1", Some("a2"));
        found(&early, "does not sort after the baseline's anchor");
    }
}
