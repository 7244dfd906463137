//! When a drain must stop: a deadline (with a margin kept for the final flush), a stop
//! request (SIGTERM / SIGINT), and how often a run with a deadline flushes.
//!
//! Guarantees: a run stops at the first transaction boundary after its stop time or a
//! stop request; only past its abort time (a quarter of the margin before the deadline)
//! does it stop inside a transaction, keeping nothing past its last checkpoint; every
//! instant is at or after the moment the options were made.

use std::time::{Duration, Instant};

use super::stop::StopRequest;

/// When the run must stop.
#[derive(Debug, Clone, Default)]
pub struct DrainOptions {
    /// Stop at the first transaction boundary after this instant (the deadline minus the
    /// configured safety margin).
    pub stop_at: Option<Instant>,
    /// Past this instant (the deadline minus a quarter of the margin) a run still inside
    /// a transaction stops there: its open parts are dropped unwritten and nothing past
    /// the last checkpoint is kept, so the lease is released and the run reports before
    /// the deadline instead of being killed.
    pub abort_at: Option<Instant>,
    /// With a deadline, completed transactions are flushed at least this often, so a
    /// stop inside a long transaction loses little work.
    pub flush_every: Option<Duration>,
    /// Stop at the first transaction boundary once this is asked (SIGTERM / SIGINT).
    pub stop: Option<StopRequest>,
}

impl DrainOptions {
    /// Options for a run that must be over by `deadline`, keeping `margin` in reserve
    /// for the final flush, checkpoint and ack.
    pub fn with_deadline(deadline: Option<Instant>, margin: Duration) -> Self {
        let now = Instant::now();
        let before = |d: Instant, by: Duration| d.checked_sub(by).unwrap_or(d).max(now);
        let stop_at = deadline.map(|d| before(d, margin));
        DrainOptions {
            stop_at,
            abort_at: deadline.map(|d| before(d, margin / 4)),
            flush_every: stop_at.map(|s| (s - now) / 4),
            stop: None,
        }
    }

    /// The same options, also stopping when `stop` is asked.
    pub fn stopped_by(mut self, stop: StopRequest) -> Self {
        self.stop = Some(stop);
        self
    }

    pub(super) fn deadline_reached(&self) -> bool {
        self.stop_at.is_some_and(|t| Instant::now() >= t)
    }

    pub(super) fn abort_reached(&self) -> bool {
        self.abort_at.is_some_and(|t| Instant::now() >= t)
    }

    pub(super) fn flush_due(&self, last_flush: Instant) -> bool {
        self.flush_every
            .is_some_and(|every| last_flush.elapsed() >= every)
    }

    pub(super) fn stop_asked(&self) -> bool {
        self.stop.as_ref().is_some_and(StopRequest::asked)
    }
}
