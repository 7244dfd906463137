//! PostgreSQL failover: what a timeline change — a promoted standby, or a point-in-time
//! restore — means for a checkpoint, given the job's slot (a failover slot from
//! PostgreSQL 17 on, [`super::slot::create_slot_sql`]).
//!
//! Guarantees:
//! * [`check_timeline`] (pure) lets a checkpoint written on timeline `n` continue on
//!   timeline `m ≠ n` only when the server is ≥ 17 and the job's slot is there as a
//!   failover slot synchronized from the old primary (`failover` and `synced` both true:
//!   a standby promoted with its synced copy). Anything else — PostgreSQL < 17 (a
//!   standby has no copy of a logical slot), a slot without `failover`, a slot that was
//!   not synced (restored with a backup) — is `SLUICE_SOURCE_FOREIGN_CHECKPOINT` with the
//!   re-baseline steps; the drain and `doctor` decide by this one function;
//! * [`follow_check`] (pure) says, for `doctor`, whether the job can follow a failover.

use super::slot::{FAILOVER_SLOTS, SlotInfo};
use crate::error::{Code, Error, Result};

/// `server_version_num` of the server.
pub async fn server_version_num(client: &tokio_postgres::Client) -> Result<i32> {
    client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map(|row| row.get(0))
        .map_err(|e| super::connect::query_error("reading server_version_num", e))
}

/// The facts for `slot` on a server of `version_num`.
pub fn facts(version_num: i32, slot: Option<&SlotInfo>) -> FailoverFacts {
    FailoverFacts {
        version_num,
        slot_exists: slot.is_some(),
        slot_failover: slot.is_some_and(|s| s.failover),
        slot_synced: slot.is_some_and(|s| s.synced),
    }
}

/// What the server says about failover for the job's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FailoverFacts {
    /// `server_version_num`.
    pub version_num: i32,
    /// The slot exists.
    pub slot_exists: bool,
    /// `pg_replication_slots.failover` (false before 17).
    pub slot_failover: bool,
    /// `pg_replication_slots.synced` (false before 17): the slot was synchronized from a
    /// primary — on a promoted standby, the copy of the old primary's slot.
    pub slot_synced: bool,
}

/// Allows a checkpoint of timeline `was` to continue on timeline `now` of the same
/// cluster. Pure.
pub fn check_timeline(slot: &str, was: &str, now: &str, facts: &FailoverFacts) -> Result<()> {
    if was == now {
        return Ok(());
    }
    let head = format!(
        "the checkpoint was written on timeline {was} of this cluster, but the server is now on timeline {now} (a promotion or a point-in-time restore; the WAL after the fork is another history)"
    );
    let steps = format!(
        "re-baseline from the server as it is now: `sluice state clear --config FILE`, drop the slot if it is there \
         (SELECT pg_drop_replication_slot('{slot}')), then run again (the first run creates the slot and baselines); keep or \
         move aside the old output as your recovery requires"
    );
    let why = if facts.version_num < FAILOVER_SLOTS {
        "PostgreSQL before 17 does not copy logical slots to a standby, so the changes after the checkpoint cannot be read here"
            .to_owned()
    } else if !facts.slot_exists {
        format!(
            "replication slot {slot} is not on this server: it was not a failover slot synchronized to this standby"
        )
    } else if !facts.slot_failover || !facts.slot_synced {
        format!(
            "replication slot {slot} is here, but not as a failover slot synchronized from the old primary (failover = {}, synced = {}): it may be a restored copy whose history differs",
            facts.slot_failover, facts.slot_synced
        )
    } else {
        tracing::warn!(
            slot,
            was,
            now,
            "the server changed timeline and the job's failover slot was synchronized to it: following the failover"
        );
        return Ok(());
    };
    Err(Error::new(Code::SourceForeignCheckpoint, format!("{head}: {why}")).hint(steps))
}

/// Whether a job on this server can follow a failover, for `doctor`: `Ok(detail)` or
/// `Err((detail, fix))`. `standby_slots`: the server's `synchronized_standby_slots`
/// (`None`: unknown). Pure.
pub fn follow_check(
    facts: &FailoverFacts,
    standby_slots: Option<&str>,
) -> std::result::Result<String, (String, String)> {
    let version = facts.version_num / 10_000;
    if facts.version_num < FAILOVER_SLOTS {
        return Err((
            format!(
                "PostgreSQL {version} has no failover slots: after a failover to a standby the job must re-baseline"
            ),
            "PostgreSQL 17 or later keeps the slot on a standby (failover slots); until then see docs/postgresql.md#failover".to_owned(),
        ));
    }
    if !facts.slot_exists {
        return Ok(format!(
            "PostgreSQL {version}: the first run creates the slot with failover = true; a standby needs sync_replication_slots = on (docs/postgresql.md#failover)"
        ));
    }
    if !facts.slot_failover {
        return Err((
            "the slot was created without failover = true: a standby does not keep a copy of it".to_owned(),
            "while the job is not running, turn it on over a replication connection: psql \"dbname=<db> replication=database\" -c 'ALTER_REPLICATION_SLOT <slot> (FAILOVER true)'".to_owned(),
        ));
    }
    if standby_slots.is_some_and(|s| s.trim().is_empty()) {
        return Err((
            format!(
                "PostgreSQL {version}, failover slot, but synchronized_standby_slots is empty: the job may read changes a standby has not received, and after a failover to it the job's output would hold changes the new primary lacks"
            ),
            "set synchronized_standby_slots = '<the standby's physical slot>' on this server (docs/postgresql.md#failover)".to_owned(),
        ));
    }
    Ok(format!(
        "PostgreSQL {version}, failover slot: a standby with sync_replication_slots = on keeps a copy (docs/postgresql.md#failover)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(version_num: i32, exists: bool, failover: bool, synced: bool) -> FailoverFacts {
        FailoverFacts {
            version_num,
            slot_exists: exists,
            slot_failover: failover,
            slot_synced: synced,
        }
    }

    #[test]
    fn a_timeline_change_is_followed_only_with_a_synced_failover_slot() {
        check_timeline("s", "1", "1", &facts(150_000, true, false, false)).unwrap();
        check_timeline("s", "1", "2", &facts(170_002, true, true, true)).unwrap();
        for (f, says) in [
            (facts(160_004, true, false, false), "before 17"),
            (facts(170_002, false, false, false), "is not on this server"),
            (facts(170_002, true, false, false), "failover = false"),
            (facts(170_002, true, true, false), "synced = false"),
        ] {
            let err = check_timeline("s", "1", "2", &f).unwrap_err();
            assert_eq!(err.code(), Code::SourceForeignCheckpoint);
            let text = err.to_string();
            assert!(
                text.contains("timeline 1") && text.contains("timeline 2"),
                "{text}"
            );
            assert!(text.contains(says), "{f:?}: {text}");
            let hint = err.hint_text().unwrap();
            assert!(
                hint.contains("`sluice state clear --config FILE`")
                    && hint.contains("pg_drop_replication_slot('s')"),
                "{hint}"
            );
        }
    }

    #[test]
    fn doctor_says_whether_a_failover_can_be_followed() {
        let old = follow_check(&facts(150_008, true, false, false), None).unwrap_err();
        assert!(
            old.0.contains("PostgreSQL 15 has no failover slots"),
            "{old:?}"
        );
        assert!(
            follow_check(&facts(170_000, false, false, false), Some("sb1"))
                .unwrap()
                .contains("creates the slot with failover = true")
        );
        let plain = follow_check(&facts(170_000, true, false, false), Some("sb1")).unwrap_err();
        assert!(plain.0.contains("without failover = true"), "{plain:?}");
        assert!(plain.1.contains("ALTER_REPLICATION_SLOT"), "{plain:?}");
        assert!(
            follow_check(&facts(170_000, true, true, false), Some("sb1"))
                .unwrap()
                .contains("failover slot")
        );
        let unguarded = follow_check(&facts(170_000, true, true, false), Some("")).unwrap_err();
        assert!(
            unguarded.1.contains("synchronized_standby_slots"),
            "{unguarded:?}"
        );
    }
}
