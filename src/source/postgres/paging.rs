//! How much the next slot page reads: its `upto_lsn` and its change limit.
//!
//! Every page is one peek call, and the server decodes it from the slot's **restart
//! point**, not from its confirmed position: the WAL between the two (the restart lag) is
//! decoded again by every page and by every advance that acks one. PostgreSQL moves the
//! restart point only to a running-transactions record it has passed, at most one past
//! the previous confirmed position per advance, so after a large ack the lag is most of
//! the page just acked (a 1 GiB advance over a busy backlog left 734 MB behind).
//!
//! Guarantees:
//! * a page never reads past the run's bound, and the page that reaches the bound (the
//!   bound within two windows of the slot's position) has no change limit;
//! * a window in which nothing committed is read again [`WIDEN`] times as wide;
//! * with the default sizes (`page_wal_bytes` / `page_changes` not set), a page's window
//!   is at least [`RESTART_LAG_MULTIPLE`] times the restart lag, and its change limit grows
//!   by the same factor (at most [`MAX_GROWTH`] times the defaults), so the WAL decoded
//!   again stays under a quarter of what each page reads and a large backlog is read in few
//!   pages;
//! * a size the job sets is a bound: the window and the limit are never widened for the
//!   lag (only a window without a commit is, as above).

use crate::position::PgLsn;

/// How much wider the next page's window is after a window in which nothing committed.
/// Each failed window is decoded again by the wider one (a transaction is read whole from
/// its start), so the waste is the sum of the failed windows: at most a seventh of the
/// window that succeeds when each is eight times the last (doubling wastes up to all of
/// it — a 1.6 GB transaction paid 896 MB of failed windows). A wider window is still
/// bounded by the change limit and by the bound.
pub const WIDEN: u64 = 8;

/// A page with the default sizes reads at least this many times the WAL the server decodes
/// again before it (the slot's restart lag).
pub const RESTART_LAG_MULTIPLE: u64 = 4;

/// The most the default sizes grow for the restart lag: a page of 2 GiB of WAL, which the
/// server decodes well within the default `source.timeouts.page_seconds` (about 30 s on the
/// bench machine). Parts rolling over mid-page are acked as they are durable, which keeps
/// the lag of a large page to about a part, so the cap is seldom reached.
pub const MAX_GROWTH: u64 = 16;

/// Default WAL window of one page.
pub const DEFAULT_WAL_BYTES: u64 = 128 * 1024 * 1024;

/// Default change limit of a page short of the bound.
pub const DEFAULT_CHANGES: u64 = 2_000_000;

/// The sizes a stream's pages are cut to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paging {
    window: u64,
    changes: u64,
    /// The job set the window or the limit: neither grows with the restart lag.
    fixed: bool,
    /// [`WIDEN`] to the power of the windows in a row in which nothing committed.
    widened: u64,
}

/// One page: what the peek call is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagePlan {
    /// The `upto_lsn`: short of the bound, or the bound.
    pub upto: PgLsn,
    /// The `upto_nchanges`: none for the page that reads to the bound.
    pub limit: Option<u64>,
}

impl Paging {
    /// Pages of `wal_bytes` of WAL and `changes` changes; `None` for a size the job left
    /// to its default (both defaults: the sizes grow with the restart lag).
    pub fn new(wal_bytes: Option<u64>, changes: Option<u64>) -> Self {
        Paging {
            window: wal_bytes.unwrap_or(DEFAULT_WAL_BYTES).max(1),
            changes: changes.unwrap_or(DEFAULT_CHANGES).max(1),
            fixed: wal_bytes.is_some() || changes.is_some(),
            widened: 1,
        }
    }

    /// True when the sizes follow the restart lag (so the stream must ask for it).
    pub fn follows_restart_lag(&self) -> bool {
        !self.fixed
    }

    /// The next page from the slot's position `slot_at`, with `restart_lag` bytes of WAL
    /// between the slot's restart point and that position.
    pub fn plan(&self, slot_at: PgLsn, bound: PgLsn, restart_lag: u64) -> PagePlan {
        let grown = if self.fixed {
            1
        } else {
            restart_lag
                .saturating_mul(RESTART_LAG_MULTIPLE)
                .div_ceil(self.window)
                .clamp(1, MAX_GROWTH)
        };
        let window = self
            .window
            .saturating_mul(grown)
            .saturating_mul(self.widened);
        if bound.0.saturating_sub(slot_at.0) <= window.saturating_mul(2) {
            return PagePlan {
                upto: bound,
                limit: None,
            };
        }
        PagePlan {
            upto: PgLsn(slot_at.0.saturating_add(window)),
            limit: Some(self.changes.saturating_mul(grown)),
        }
    }

    /// A page short of the bound read no commit: the next window is [`WIDEN`] times wider.
    pub fn widen(&mut self) {
        self.widened = self.widened.saturating_mul(WIDEN);
    }

    /// A page committed: the next window is back to its size.
    pub fn committed(&mut self) {
        self.widened = 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_backlog_within_two_windows_is_one_page_without_a_change_limit() {
        let paging = Paging::new(None, None);
        let plan = paging.plan(PgLsn(1000), PgLsn(1000 + 256 * MIB), 0);
        assert_eq!(
            plan,
            PagePlan {
                upto: PgLsn(1000 + 256 * MIB),
                limit: None
            }
        );
    }

    #[test]
    fn a_longer_backlog_is_cut_at_the_window_with_the_change_limit() {
        let paging = Paging::new(None, None);
        let plan = paging.plan(PgLsn(0), PgLsn(10_000 * MIB), 10 * MIB);
        assert_eq!(plan.upto, PgLsn(128 * MIB));
        assert_eq!(plan.limit, Some(DEFAULT_CHANGES));
    }

    #[test]
    fn default_pages_grow_to_four_times_the_restart_lag_with_their_change_limit() {
        let paging = Paging::new(None, None);
        // 300 MiB of lag: windows of 128 MiB times ceil(1200 / 128) = 10.
        let plan = paging.plan(PgLsn(0), PgLsn(100_000 * MIB), 300 * MIB);
        assert_eq!(plan.upto, PgLsn(10 * 128 * MIB));
        assert_eq!(plan.limit, Some(10 * DEFAULT_CHANGES));
        assert!(plan.upto.0 >= RESTART_LAG_MULTIPLE * 300 * MIB);
        // The growth is capped.
        let capped = paging.plan(PgLsn(0), PgLsn(100_000 * MIB), 100_000 * MIB);
        assert_eq!(capped.upto, PgLsn(MAX_GROWTH * 128 * MIB));
        assert_eq!(capped.limit, Some(MAX_GROWTH * DEFAULT_CHANGES));
        // And such a window reaches a bound within two of it.
        let near = paging.plan(PgLsn(0), PgLsn(2560 * MIB), 300 * MIB);
        assert_eq!(near.limit, None);
    }

    #[test]
    fn sizes_the_job_sets_are_bounds_whatever_the_lag() {
        for paging in [
            Paging::new(Some(4096), None),
            Paging::new(None, Some(100)),
            Paging::new(Some(4096), Some(100)),
        ] {
            assert!(!paging.follows_restart_lag());
            let plan = paging.plan(PgLsn(0), PgLsn(100_000 * MIB), 700 * MIB);
            assert!(plan.upto.0 <= 128 * MIB, "{plan:?}");
            assert!(plan.limit.unwrap() <= DEFAULT_CHANGES, "{plan:?}");
        }
        let plan = Paging::new(Some(4096), Some(100)).plan(PgLsn(0), PgLsn(1 << 40), 1 << 30);
        assert_eq!(
            plan,
            PagePlan {
                upto: PgLsn(4096),
                limit: Some(100)
            }
        );
    }

    #[test]
    fn a_window_without_a_commit_widens_eight_times_until_one_commits() {
        let mut paging = Paging::new(Some(4096), Some(100));
        let far = PgLsn(1 << 40);
        paging.widen();
        assert_eq!(paging.plan(PgLsn(0), far, 0).upto, PgLsn(8 * 4096));
        paging.widen();
        assert_eq!(paging.plan(PgLsn(0), far, 0).upto, PgLsn(64 * 4096));
        // The change limit is not widened: a window without a commit cannot end at it.
        assert_eq!(paging.plan(PgLsn(0), far, 0).limit, Some(100));
        paging.committed();
        assert_eq!(paging.plan(PgLsn(0), far, 0).upto, PgLsn(4096));
    }

    #[test]
    fn no_size_overflows_and_no_page_passes_the_bound() {
        let mut paging = Paging::new(None, None);
        for _ in 0..40 {
            paging.widen();
        }
        let bound = PgLsn(u64::MAX - 1);
        for (at, lag) in [(0, u64::MAX), (u64::MAX - 10, 0), (5, 5)] {
            let plan = paging.plan(PgLsn(at), bound, lag);
            assert!(plan.upto <= bound, "{plan:?}");
        }
        let plan = Paging::new(Some(1), Some(1)).plan(PgLsn(u64::MAX - 1), bound, 0);
        assert_eq!(plan.upto, bound);
    }
}
