//! Converts Lambda's invocation deadline (epoch milliseconds) into a local instant.
//!
//! Guarantee: the instant is computed from the wall clock once, at the start of the
//! invocation, so the drain's stop decision uses the monotonic clock afterwards; a
//! deadline already in the past gives "now" (stop at the first transaction boundary).

use std::time::{Duration, Instant};

/// The local instant of `deadline_ms` (ms since the Unix epoch), given the wall clock
/// `now_ms` read at `now`.
pub fn instant_of(deadline_ms: u64, now_ms: i64, now: Instant) -> Instant {
    let remaining = i128::from(deadline_ms) - i128::from(now_ms);
    let remaining = u64::try_from(remaining.max(0)).unwrap_or(u64::MAX);
    now + Duration::from_millis(remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn future_and_past_deadlines() {
        let now = Instant::now();
        assert_eq!(
            instant_of(10_500, 10_000, now),
            now + Duration::from_millis(500)
        );
        assert_eq!(instant_of(9_000, 10_000, now), now);
    }
}
