//! The pure decisions behind the lease and checkpoint writes, shared by every store so
//! the local file and DynamoDB answer the same question the same way.
//!
//! * [`lease`]: who may take a job's lease now. A free or expired lease is granted; a
//!   lease whose stored owner is the asking owner is *already ours* — an owner string is
//!   unique to one process and run (`state::holder`), so only a retried write of ours can
//!   have stored it (its first answer was lost); a holder that is provably gone (same host,
//!   pid dead) is taken over at once instead of after its expiry. Anything else is held.
//! * [`is_own_checkpoint`]: a checkpoint write refused by its condition is still a success
//!   when the stored checkpoint is exactly the one the same writer wrote (same lease, same
//!   version, position, source and run) — the retry of a write whose answer was lost.
//!
//! Neither decision weakens fencing: a takeover always grants a new, higher token, and an
//! own write is recognised only under the writer's own, still current, token.

use super::Checkpoint;
use super::holder::Liveness;

/// What [`lease`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseDecision {
    /// Nobody holds an unexpired lease: grant one with a new token.
    Free,
    /// The stored holder is the asking owner: the lease is already ours, with the
    /// stored token (a retried grant whose first answer was lost).
    Ours,
    /// The holder is provably gone: take the lease over (new token) from `holder`.
    TakeOver { holder: String },
    /// Someone else holds an unexpired lease.
    Held { holder: String, expires_at_ms: i64 },
}

/// Decides a lease request by `owner` at `now_ms`, given the stored holder and expiry;
/// `liveness` tells whether a holder is provably gone (`state::holder::liveness`).
pub fn lease(
    holder: Option<&str>,
    expires_at_ms: Option<i64>,
    owner: &str,
    now_ms: i64,
    liveness: impl Fn(&str) -> Liveness,
) -> LeaseDecision {
    let (Some(holder), Some(expires_at_ms)) = (holder, expires_at_ms) else {
        return LeaseDecision::Free;
    };
    if expires_at_ms <= now_ms {
        return LeaseDecision::Free;
    }
    if holder == owner {
        return LeaseDecision::Ours;
    }
    if liveness(holder) == Liveness::Dead {
        return LeaseDecision::TakeOver {
            holder: holder.to_owned(),
        };
    }
    LeaseDecision::Held {
        holder: holder.to_owned(),
        expires_at_ms,
    }
}

/// True when `stored` is the checkpoint `written` describes (the write happened), so a
/// refused retry of that write is a success. The caller checks that the lease is still
/// the writer's; `updated_at_ms` is not compared (each attempt stamps its own).
pub fn is_own_checkpoint(stored: Option<&Checkpoint>, written: &Checkpoint) -> bool {
    stored.is_some_and(|s| {
        s.version == written.version
            && s.position == written.position
            && s.source_identity == written.source_identity
            && s.run_id == written.run_id
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn alive(_: &str) -> Liveness {
        Liveness::Alive
    }

    fn dead(_: &str) -> Liveness {
        Liveness::Dead
    }

    fn unknown(_: &str) -> Liveness {
        Liveness::Unknown
    }

    #[test]
    fn a_free_or_expired_lease_is_granted() {
        assert_eq!(lease(None, None, "me", NOW, alive), LeaseDecision::Free);
        assert_eq!(
            lease(Some("other"), Some(NOW), "me", NOW, alive),
            LeaseDecision::Free
        );
    }

    #[test]
    fn our_own_stored_lease_is_ours_even_unexpired() {
        assert_eq!(
            lease(Some("me"), Some(NOW + 60_000), "me", NOW, alive),
            LeaseDecision::Ours
        );
    }

    #[test]
    fn only_a_provably_dead_holder_is_taken_over() {
        let later = Some(NOW + 60_000);
        assert_eq!(
            lease(Some("gone"), later, "me", NOW, dead),
            LeaseDecision::TakeOver {
                holder: "gone".into()
            }
        );
        for liveness in [alive, unknown] {
            assert_eq!(
                lease(Some("other"), later, "me", NOW, liveness),
                LeaseDecision::Held {
                    holder: "other".into(),
                    expires_at_ms: NOW + 60_000
                }
            );
        }
    }

    fn checkpoint(version: u64, position: &str, run_id: &str) -> Checkpoint {
        Checkpoint {
            position: position.into(),
            source_identity: "pg:id".into(),
            version,
            run_id: run_id.into(),
            updated_at_ms: NOW,
        }
    }

    #[test]
    fn a_checkpoint_is_our_own_write_only_when_everything_matches() {
        let written = checkpoint(3, "pg:00000000/00000010", "run-a");
        let stamped_later = Checkpoint {
            updated_at_ms: NOW + 5,
            ..written.clone()
        };
        assert!(is_own_checkpoint(Some(&stamped_later), &written));
        assert!(!is_own_checkpoint(None, &written));
        for other in [
            checkpoint(2, "pg:00000000/00000010", "run-a"),
            checkpoint(4, "pg:00000000/00000010", "run-a"),
            checkpoint(3, "pg:00000000/00000020", "run-a"),
            checkpoint(3, "pg:00000000/00000010", "run-b"),
            Checkpoint {
                source_identity: "pg:other".into(),
                ..written.clone()
            },
        ] {
            assert!(!is_own_checkpoint(Some(&other), &written), "{other:?}");
        }
    }
}
