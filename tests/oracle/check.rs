//! The oracle's checks over everything a job wrote for one table:
//!
//! * **identity of duplicates** — every `(__pos, __seq)` holds one row content only: a
//!   re-delivered change is byte-identical (cell-identical, metadata included);
//! * **order** — within one run, `(__pos, __seq)` strictly increases; per key, a change
//!   written after a later change of that key must be a re-delivery of one already written;
//! * **completeness** — the distinct changes are exactly as many as the workload made;
//! * **state** — the documented replay (latest `(__pos, __seq)` per key, deletes dropped,
//!   `__unlogged` columns keep the previous value) equals the source's `SELECT *`, cell by
//!   cell.

use std::collections::{BTreeMap, HashMap};

use super::canon::Cell;
use super::parts::{PartRow, is_meta};

/// A row of the source: column → canonical cell (key column included).
pub type SourceRow = BTreeMap<String, Cell>;

/// What one check found.
#[derive(Debug, Default)]
pub struct Findings {
    pub rows_compared: u64,
    pub mismatches: Vec<String>,
}

impl Findings {
    fn fail(&mut self, message: String) {
        self.mismatches.push(message);
    }
}

type Position = (String, i64);

/// Runs every check. `source` is keyed by the key column's canonical cell.
pub fn check_table(
    rows: &[PartRow],
    key: &str,
    source: &BTreeMap<String, SourceRow>,
    expected_changes: u64,
) -> Findings {
    let mut f = Findings::default();
    let key_of = |r: &PartRow| r.cell(key).cloned().flatten();

    // Identity of duplicates, and the distinct changes in position order.
    let mut distinct: BTreeMap<Position, &PartRow> = BTreeMap::new();
    let mut snapshot = Vec::new();
    for row in rows {
        if row.run == "snapshot" {
            snapshot.push(row);
            continue;
        }
        let at = (row.pos.clone(), row.seq);
        match distinct.get(&at) {
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

    if distinct.len() as u64 != expected_changes {
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
    for row in snapshot.into_iter().chain(distinct.values().copied()) {
        let Some(k) = key_of(row) else {
            f.fail(format!(
                "{}: a row at ({}, {}) has a NULL key",
                row.file, row.pos, row.seq
            ));
            continue;
        };
        if row.op == "delete" {
            state.remove(&k);
            continue;
        }
        let mut image = data(row);
        for column in &row.unlogged {
            match state.get(&k).and_then(|prev| prev.get(column)) {
                Some(previous) => {
                    image.insert(column.clone(), previous.clone());
                }
                None => f.fail(format!(
                    "key {k}: column {column} is unlogged at ({}, {}) ({}, {}) but no earlier row of this key holds its value",
                    row.pos, row.seq, row.op, row.file
                )),
            }
        }
        state.insert(k, image);
    }

    // State against the source, cell by cell.
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
    f
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
