//! Where a re-baseline sorts: its anchor (the `__pos` of its snapshot rows) and its epoch
//! marker (the `__op = 'rebaseline'` row), both derived from the job's checkpoint at the
//! moment the table is anchored anew.
//!
//! Guarantees, for a checkpoint `C` (proved per engine by the tests below):
//!
//! * every change already checkpointed — of any table — sorts before the marker;
//! * the marker sorts before every snapshot row of the new baseline (`(marker, 0) <
//!   (anchor, 0)`), and every snapshot row before every change committed after `C`.
//!
//! So the replay rule "a `truncate` or `rebaseline` row drops every earlier row of the
//! table" drops exactly the table's rows the new snapshot supersedes.
//!
//! PostgreSQL: a change's `__pos` is its commit record's start (`commit_lsn`) and a
//! checkpoint is a commit record's end (`end_lsn`), the read bound, or the slot's start —
//! never inside a commit record (a record straddling the bound is read whole and
//! checkpointed at its end). A commit record is far longer than two bytes, so a
//! checkpointed change has `commit_lsn <= C - 3`; a later one `commit_lsn >= C`. Anchor
//! `C - 1`, marker `C - 2`.
//!
//! MySQL / MariaDB: a change's `__pos` is the end of its commit event and a checkpoint the
//! end of the last event read: a checkpointed change has `__pos <= C`, a later one
//! `__pos >= C + 19` (an event header alone is 19 bytes), in the same file or a later one.
//! Marker `C + 1`, anchor `C + 2`.
//!
//! SQL Server: adjacent commits may have adjacent LSNs, so no position lies strictly
//! between the last checkpointed change and the next one: a per-table re-baseline is
//! refused there (`SLUICE_BASELINE_REBASELINE_UNSUPPORTED`).

use crate::error::{Code, Error, Result};
use crate::position::{PgLsn, Position};

/// A re-baseline's two positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Epoch {
    /// The recorded anchor: the snapshot rows' `__pos`.
    pub anchor: Position,
    /// The epoch marker's `__pos` (its `__seq` is 0).
    pub marker: Position,
}

/// The epoch of a re-baseline anchored at the job's checkpoint `checkpoint`.
pub fn at_checkpoint(checkpoint: Position) -> Result<Epoch> {
    match checkpoint {
        Position::Postgres(c) if c.0 >= 3 => Ok(Epoch {
            anchor: Position::Postgres(PgLsn(c.0 - 1)),
            marker: Position::Postgres(PgLsn(c.0 - 2)),
        }),
        Position::MySql(c) => {
            let at = |by: u32| {
                c.offset()
                    .checked_add(by)
                    .map(|offset| Position::MySql(Box::new(c.at(offset).with_mark(c.mark.clone()))))
                    .ok_or_else(|| {
                        Error::new(
                            Code::Internal,
                            format!(
                                "binlog offset {} leaves no room for a re-baseline",
                                c.offset()
                            ),
                        )
                    })
            };
            Ok(Epoch {
                anchor: at(2)?,
                marker: at(1)?,
            })
        }
        other => Err(unsupported(&other)),
    }
}

/// The marker position of a re-baseline recorded at `anchor` (the inverse of
/// [`at_checkpoint`]'s anchor step).
pub fn marker_of(anchor: Position) -> Result<Position> {
    match anchor {
        Position::Postgres(a) if a.0 >= 1 => Ok(Position::Postgres(PgLsn(a.0 - 1))),
        Position::MySql(a) if a.offset() >= 1 => Ok(Position::MySql(Box::new(
            a.at(a.offset() - 1).with_mark(a.mark),
        ))),
        other => Err(unsupported(&other)),
    }
}

fn unsupported(position: &Position) -> Error {
    Error::new(
        Code::BaselineRebaselineUnsupported,
        format!(
            "a per-table re-baseline cannot be placed at {position} ({} has no position between two adjacent commits)",
            position.engine()
        ),
    )
    .hint("re-baseline the whole job instead: `sluice baseline --reset` after moving the snapshot folders aside (docs/baselines.md)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::BinlogPosition;
    use proptest::prelude::*;

    fn text(p: Position) -> String {
        p.sortable_text()
    }

    proptest! {
        /// PostgreSQL: for a checkpoint C, every checkpointed change (commit record
        /// [commit_lsn, end_lsn) with end_lsn <= C, a record longer than 2 bytes) sorts
        /// before the marker, the marker before the snapshot rows, and those before every
        /// later change (commit_lsn >= C).
        #[test]
        fn postgres_epoch_sorts_between_the_checkpointed_and_the_later_changes(
            c in 64u64..u64::MAX / 2, before in 3u64..1 << 20, after in 0u64..1 << 20,
        ) {
            let epoch = at_checkpoint(Position::Postgres(PgLsn(c))).unwrap();
            let checkpointed = c.saturating_sub(before);
            prop_assume!(checkpointed + 3 <= c);
            let old = (text(Position::Postgres(PgLsn(checkpointed))), 5u64);
            let marker = (text(epoch.marker.clone()), 0u64);
            let snapshot = (text(epoch.anchor.clone()), 0u64);
            let later = (text(Position::Postgres(PgLsn(c + after))), 0u64);
            prop_assert!(old < marker);
            prop_assert!(marker < snapshot);
            prop_assert!(snapshot < later);
            prop_assert_eq!(marker_of(epoch.anchor).unwrap(), epoch.marker);
        }

        /// MySQL / MariaDB: a checkpointed change's `__pos` is at most C (the last one is
        /// C itself, at any `__seq`); a later one at least C + 19, or in a later file.
        #[test]
        fn mysql_epoch_sorts_between_the_checkpointed_and_the_later_changes(
            file in 1u32..999_999, c in 4u32..u32::MAX - (1 << 21), before in 0u32..1 << 20,
            after in 19u32..1 << 20, seq in any::<u32>(), rotated in any::<bool>(),
        ) {
            let at = |file: u32, offset: u32| {
                Position::MySql(Box::new(BinlogPosition::new(&format!("mariadb-bin.{file:06}"), offset).unwrap()))
            };
            let epoch = at_checkpoint(at(file, c)).unwrap();
            let old = (text(at(file, c.saturating_sub(before))), u64::from(seq));
            let marker = (text(epoch.marker.clone()), 0u64);
            let snapshot = (text(epoch.anchor.clone()), 0u64);
            let later = if rotated { at(file + 1, 4 + after) } else { at(file, c + after) };
            let later = (text(later), 0u64);
            prop_assert!(old < marker, "{old:?} {marker:?}");
            prop_assert!(marker < snapshot);
            prop_assert!(snapshot < later, "{snapshot:?} {later:?}");
            prop_assert_eq!(marker_of(epoch.anchor).unwrap(), epoch.marker);
        }
    }

    #[test]
    fn the_anchor_round_trips_tagged_and_sql_server_is_refused() {
        let c: Position = "mysql:mariadb-bin.000042:1234;f=1733000000;e=16.31.1733000123"
            .parse()
            .unwrap();
        let epoch = at_checkpoint(c).unwrap();
        assert_eq!(
            epoch.anchor.to_string(),
            "mysql:mariadb-bin.000042:1236;f=1733000000;e=16.31.1733000123"
        );
        assert_eq!(
            Position::parse_tagged(&epoch.anchor.to_string()).unwrap(),
            epoch.anchor
        );
        let sql_server: Position = "mssql:0000002A:000001F4:0003".parse().unwrap();
        assert_eq!(
            at_checkpoint(sql_server).unwrap_err().code(),
            Code::BaselineRebaselineUnsupported
        );
    }
}
