//! The per-event check: every change the parts hold is compared with the workload's own
//! log — what the source showed inside each committed transaction, statement by
//! statement — not only the final state. A swapped op, a wrong intermediate image, a
//! change written under another transaction's position or with another commit time
//! fails here even when the last image of every key is right.
//!
//! The log is engine-neutral: the engine reads the table inside the transaction before
//! and after each statement ([`Observed`]); a key that appears is an `insert` of its new
//! image, one that disappears a `delete` of its old image (the before-image), one whose
//! image changed an `update` of its new image, and one a statement targeted without a
//! change an `update` that an engine which skips unchanged rows may leave out. `TRUNCATE`
//! is a table event, checked by the state check, not here.
//!
//! Matching is per key, in `(__pos, __seq)` order against commit order: exactly (every
//! logged change once, nothing else) when the table was never re-baselined, and as a
//! subsequence when a re-baseline superseded some changes. Every change of one `__pos`
//! must match one transaction, distinct positions distinct transactions in commit order,
//! and each change's `__ts` the commit time the source reports for its transaction.

use std::collections::{BTreeMap, BTreeSet};

use super::canon::{self, Cell};
use super::check::{Findings, SourceRow};
use super::parts::{PartRow, is_meta};
use super::workload::Stmt;

/// When a transaction committed, as the source reports it (µs since the epoch, UTC).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitTime {
    /// No change of the transaction may carry an earlier `__ts`.
    pub earliest: i64,
    /// Nor a later one.
    pub latest: i64,
    /// The source's own record of the commit time, when it keeps one (PostgreSQL with
    /// `track_commit_timestamp`): `__ts` must equal it.
    pub exact: Option<i64>,
}

/// What the source showed while applying one committed transaction: the table read
/// inside the transaction before its first statement and after each (`tables.len() ==
/// stmts.len() + 1`), keyed by the key column's canonical cell, and its commit time.
#[derive(Debug, Clone)]
pub struct Observed {
    pub tables: Vec<BTreeMap<String, SourceRow>>,
    pub commit: CommitTime,
}

/// One change the source must report.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub op: &'static str,
    pub key: String,
    /// The new image (`insert`, `update`), the old one (`delete`).
    pub image: SourceRow,
    /// An `update` that changed nothing: an engine that does not log those may skip it.
    pub optional: bool,
    /// Index of its transaction in the log.
    pub txn: usize,
}

/// The workload's log: committed transactions in commit order.
#[derive(Debug, Default)]
pub struct Log {
    pub commits: Vec<CommitTime>,
    pub changes: Vec<Expected>,
}

impl Log {
    /// Adds one committed transaction of `stmts`, as `observed`. `unchanged_optional`:
    /// the engine does not log an UPDATE that leaves a row as it was.
    pub fn push(
        &mut self,
        stmts: &[Stmt],
        observed: &Observed,
        unchanged_optional: bool,
    ) -> Result<(), String> {
        if observed.tables.len() != stmts.len() + 1 {
            return Err(format!(
                "observed {} tables for {} statements",
                observed.tables.len(),
                stmts.len()
            ));
        }
        let txn = self.commits.len();
        self.commits.push(observed.commit);
        for (i, stmt) in stmts.iter().enumerate() {
            let (before, after) = (&observed.tables[i], &observed.tables[i + 1]);
            if matches!(stmt, Stmt::Truncate) {
                continue;
            }
            let targeted: BTreeSet<String> = match stmt {
                Stmt::Update { ids, .. } => ids.iter().map(i64::to_string).collect(),
                Stmt::UpdateAll { .. } => before.keys().cloned().collect(),
                _ => BTreeSet::new(),
            };
            let mut change = |op, key: &String, image: &SourceRow, optional| {
                self.changes.push(Expected {
                    op,
                    key: key.clone(),
                    image: image.clone(),
                    optional,
                    txn,
                })
            };
            for (key, old) in before {
                match after.get(key) {
                    None => change("delete", key, old, false),
                    Some(new) if new != old => change("update", key, new, false),
                    Some(new) if targeted.contains(key) => {
                        change("update", key, new, unchanged_optional)
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in after.iter().filter(|(k, _)| !before.contains_key(*k)) {
                change("insert", key, new, false);
            }
        }
        Ok(())
    }
}

/// Checks every distinct data change of `rows` (not baseline rows, not `truncate` /
/// `rebaseline` markers) against `log`. `subsequence`: a re-baseline superseded some
/// logged changes, so the parts may lack them. `logs_every_value`: deletes carry the
/// whole old row (else only the key is compared); columns a row lists in `__unlogged`
/// are never compared.
pub fn check_events(
    rows: &[PartRow],
    key: &str,
    log: &Log,
    subsequence: bool,
    logs_every_value: bool,
) -> Findings {
    let mut f = Findings::default();
    let mut distinct: BTreeMap<(String, i64), &PartRow> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.run != "snapshot") {
        if matches!(row.op.as_str(), "insert" | "update" | "delete") {
            distinct.entry((row.pos.clone(), row.seq)).or_insert(row);
        }
    }
    let mut by_key: BTreeMap<String, Vec<&Expected>> = BTreeMap::new();
    for e in &log.changes {
        by_key.entry(e.key.clone()).or_default().push(e);
    }
    let mut next: BTreeMap<String, usize> = BTreeMap::new();
    // The transaction each position's changes matched.
    let mut txn_of: BTreeMap<String, usize> = BTreeMap::new();
    // Keys already found off their log: later changes of theirs would only repeat it.
    let mut derailed: BTreeSet<String> = BTreeSet::new();
    // The position matched last and its transaction.
    let mut current: Option<(String, usize)> = None;
    for ((pos, seq), row) in &distinct {
        let Some(k) = row.cell(key).cloned().flatten() else {
            f.fail(format!(
                "{}: a change at ({pos}, {seq}) has a NULL key",
                row.file
            ));
            continue;
        };
        if derailed.contains(&k) {
            continue;
        }
        let want = by_key.get(&k).map(Vec::as_slice).unwrap_or_default();
        let at = next.entry(k.clone()).or_insert(0);
        // After a re-baseline a change may match a later logged one with the same image:
        // there the match must also fit the position's transaction and commit time.
        let fits = |e: &Expected| {
            !subsequence
                || (ts_fits(row, &log.commits[e.txn])
                    && match &current {
                        Some((p, t)) if p == pos => e.txn == *t,
                        Some((_, t)) => e.txn > *t,
                        None => true,
                    })
        };
        let found = loop {
            let Some(e) = want.get(*at) else { break None };
            if same_change(row, e, logs_every_value) && fits(e) {
                *at += 1;
                break Some(*e);
            }
            if subsequence || e.optional {
                *at += 1;
                continue;
            }
            break None;
        };
        let Some(e) = found else {
            let wanted = want
                .get(*at)
                .map(|e| format!("{} {}", e.op, brief(&e.image)))
                .unwrap_or_else(|| "no further change".into());
            f.fail(format!(
                "key {k}: change ({pos}, {seq}) {} {} ({}) is not the source's next change of that key: {wanted}",
                row.op,
                brief(&data(row)),
                row.file
            ));
            derailed.insert(k);
            continue;
        };
        f.rows_compared += 1;
        current = Some((pos.clone(), e.txn));
        match txn_of.get(pos) {
            Some(&t) if t != e.txn => f.fail(format!(
                "position {pos} holds changes of two transactions (#{t} and #{})",
                e.txn
            )),
            Some(_) => {}
            None => {
                txn_of.insert(pos.clone(), e.txn);
            }
        }
        check_ts(row, &log.commits[e.txn], &mut f);
    }
    // Positions in commit order: a later position never holds an earlier transaction.
    let mut last: Option<(&String, usize)> = None;
    for (pos, &t) in &txn_of {
        if let Some((prev, pt)) = last
            && pt >= t
        {
            f.fail(format!(
                "position {pos} holds transaction #{t}, but the earlier position {prev} holds #{pt}"
            ));
        }
        last = Some((pos, t));
    }
    if !subsequence {
        for (k, want) in by_key.iter().filter(|(k, _)| !derailed.contains(*k)) {
            let at = next.get(k).copied().unwrap_or(0);
            for e in want.iter().skip(at).filter(|e| !e.optional) {
                f.fail(format!(
                    "key {k}: the source's {} {} (transaction #{}) is in no part",
                    e.op,
                    brief(&e.image),
                    e.txn
                ));
            }
        }
    }
    f
}

fn data(row: &PartRow) -> SourceRow {
    row.all
        .iter()
        .filter(|(c, _)| !is_meta(c))
        .map(|(c, v)| (c.clone(), v.clone()))
        .collect()
}

/// Same op and, on the columns both sides have and the row logged, the same image.
fn same_change(row: &PartRow, e: &Expected, logs_every_value: bool) -> bool {
    if row.op != e.op {
        return false;
    }
    if e.op == "delete" && !logs_every_value {
        return true; // the key matched; the old row is not logged
    }
    e.image.iter().all(|(column, want)| {
        row.unlogged.iter().any(|u| u == column)
            || match row.all.get(column) {
                Some(got) => got == want,
                None => true, // the part's shape predates or follows this column
            }
    })
}

fn ts_fits(row: &PartRow, commit: &CommitTime) -> bool {
    let mut f = Findings::default();
    check_ts(row, commit, &mut f);
    f.mismatches.is_empty()
}

fn check_ts(row: &PartRow, commit: &CommitTime, f: &mut Findings) {
    let got = row.cell("__ts").cloned().flatten().unwrap_or_default();
    let text = |us: i64| canon::timestamp(i128::from(us), true);
    match commit.exact {
        Some(us) if got != text(us) => f.fail(format!(
            "({}, {}): __ts {got}, the source committed at {}",
            row.pos,
            row.seq,
            text(us)
        )),
        Some(_) => {}
        None if got < text(commit.earliest) || got > text(commit.latest) => f.fail(format!(
            "({}, {}): __ts {got} is outside the commit's [{}, {}]",
            row.pos,
            row.seq,
            text(commit.earliest),
            text(commit.latest)
        )),
        None => {}
    }
}

fn brief(image: &SourceRow) -> String {
    let cells: Vec<String> = image
        .iter()
        .take(4)
        .map(|(c, v): (&String, &Cell)| {
            let v = v.as_deref().unwrap_or("NULL");
            let v: String = v.chars().take(24).collect();
            format!("{c}={v}")
        })
        .collect();
    format!(
        "{{{}{}}}",
        cells.join(", "),
        if image.len() > 4 { ", …" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[(i64, &str)]) -> BTreeMap<String, SourceRow> {
        rows.iter()
            .map(|(id, v)| {
                let mut r = SourceRow::new();
                r.insert("id".into(), Some(id.to_string()));
                r.insert("v".into(), Some((*v).into()));
                (id.to_string(), r)
            })
            .collect()
    }

    const T0: i64 = 1_780_000_000_000_000;

    fn commit(at: i64) -> CommitTime {
        CommitTime {
            earliest: at,
            latest: at + 10,
            exact: None,
        }
    }

    fn part(op: &str, pos: &str, seq: i64, id: i64, v: Option<&str>, ts: i64) -> PartRow {
        let mut all = BTreeMap::new();
        all.insert("__op".to_owned(), Some(op.to_owned()));
        all.insert("__pos".to_owned(), Some(pos.to_owned()));
        all.insert("__seq".to_owned(), Some(seq.to_string()));
        all.insert("__ts".to_owned(), Some(canon::timestamp(ts.into(), true)));
        all.insert("id".to_owned(), Some(id.to_string()));
        all.insert("v".to_owned(), v.map(str::to_owned));
        PartRow {
            file: "cdc-r-000001.parquet".into(),
            run: "r".into(),
            op: op.into(),
            pos: pos.into(),
            seq,
            unlogged: vec![],
            all,
        }
    }

    /// Transaction 0 inserts 1=a and 2=b, then updates 1 to c; transaction 1 deletes 2
    /// and sets 1 to c again (no change).
    fn log(unchanged_optional: bool) -> Log {
        let mut log = Log::default();
        let t = |rows: &[(i64, &str)]| table(rows);
        log.push(
            &[
                Stmt::BulkInsert { first: 1, count: 2 },
                Stmt::Update {
                    ids: vec![1],
                    set: vec![],
                },
            ],
            &Observed {
                tables: vec![t(&[]), t(&[(1, "a"), (2, "b")]), t(&[(1, "c"), (2, "b")])],
                commit: commit(T0),
            },
            unchanged_optional,
        )
        .unwrap();
        log.push(
            &[
                Stmt::Delete { ids: vec![2] },
                Stmt::Update {
                    ids: vec![1],
                    set: vec![],
                },
            ],
            &Observed {
                tables: vec![t(&[(1, "c"), (2, "b")]), t(&[(1, "c")]), t(&[(1, "c")])],
                commit: commit(T0 + 100),
            },
            unchanged_optional,
        )
        .unwrap();
        log
    }

    fn right() -> Vec<PartRow> {
        vec![
            part("insert", "A", 0, 1, Some("a"), T0 + 5),
            part("insert", "A", 1, 2, Some("b"), T0 + 5),
            part("update", "A", 2, 1, Some("c"), T0 + 5),
            part("delete", "B", 0, 2, Some("b"), T0 + 105),
            part("update", "B", 1, 1, Some("c"), T0 + 105),
        ]
    }

    fn mismatches(rows: &[PartRow], log: &Log, subsequence: bool) -> Vec<String> {
        check_events(rows, "id", log, subsequence, true).mismatches
    }

    #[test]
    fn the_logged_history_passes_and_an_unchanged_update_may_be_skipped_only_where_allowed() {
        assert_eq!(
            mismatches(&right(), &log(false), false),
            Vec::<String>::new()
        );
        let mut skipped = right();
        skipped.pop();
        assert_eq!(
            mismatches(&skipped, &log(true), false),
            Vec::<String>::new()
        );
        let found = mismatches(&skipped, &log(false), false);
        assert!(
            found.iter().any(|m| m.contains("is in no part")),
            "{found:?}"
        );
    }

    #[test]
    fn a_swapped_op_a_wrong_intermediate_image_and_a_wrong_time_are_each_found() {
        type Spoil = Box<dyn Fn(&mut Vec<PartRow>)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (
                Box::new(|r| {
                    r[2].op = "insert".into();
                }),
                "not the source's next change",
            ),
            (
                Box::new(|r| {
                    r[0].all.insert("v".into(), Some("z".into()));
                }),
                "not the source's next change",
            ),
            (
                Box::new(|r| {
                    r[3].all.insert("v".into(), Some("z".into()));
                }),
                "not the source's next change",
            ),
            (
                Box::new(|r| {
                    r[1].all.insert(
                        "__ts".into(),
                        Some(canon::timestamp((T0 + 50).into(), true)),
                    );
                }),
                "outside the commit",
            ),
            (
                Box::new(|r| {
                    // The second transaction's delete written under the first's position.
                    r[3].pos = "A".into();
                    r[3].seq = 9;
                }),
                "two transactions",
            ),
            (
                Box::new(|r| {
                    r.remove(1);
                }),
                "not the source's next change",
            ),
            (
                Box::new(|r| {
                    r.remove(4);
                }),
                "is in no part",
            ),
        ];
        for (spoil, needle) in cases {
            let mut rows = right();
            spoil(&mut rows);
            let found = mismatches(&rows, &log(false), false);
            assert!(
                found.iter().any(|m| m.contains(needle)),
                "{needle:?} not in {found:?}"
            );
        }
    }

    #[test]
    fn after_a_rebaseline_missing_changes_are_allowed_but_wrong_ones_are_not() {
        let mut rows = right();
        rows.remove(2); // superseded
        assert_eq!(mismatches(&rows, &log(false), true), Vec::<String>::new());
        rows[0].all.insert("v".into(), Some("z".into()));
        assert!(!mismatches(&rows, &log(false), true).is_empty());
    }

    #[test]
    fn an_exact_commit_time_is_compared_exactly() {
        let mut log = log(false);
        log.commits[0].exact = Some(T0 + 5);
        assert_eq!(mismatches(&right(), &log, false), Vec::<String>::new());
        log.commits[0].exact = Some(T0 + 6);
        let found = mismatches(&right(), &log, false);
        assert!(
            found.iter().any(|m| m.contains("the source committed at")),
            "{found:?}"
        );
    }
}
