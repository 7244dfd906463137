//! Stopping a run from outside (SIGTERM / SIGINT): the first request asks the drain to
//! stop at its next transaction boundary — a clean `partial` run, as at a deadline. A run
//! that cannot get there within the request's grace ([`GRACE`] on the CLI; Lambda's is
//! shorter) — a source that went silent, one long transaction — or that gets a second
//! request, is *abandoned*: its work is dropped at the await it is in, which is what a
//! crash at that point would do — the durable order (part → fenced checkpoint → ack)
//! makes every such point safe, and nothing is half-written (a part is an atomic put, a
//! checkpoint one conditional write). Either way the job room then releases the lease, so
//! the next run starts at once.
//!
//! One owner of the signals per process: the CLI installs [`StopRequest::on_signals`];
//! the Lambda face never does — `crate::lambda::shutdown` owns them there and asks the
//! same kind of request.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long a requested stop may take before the run is abandoned. Below `docker stop`'s
/// 10 s (and Kubernetes' 30 s) before SIGKILL, so the lease is released in time.
pub const GRACE: Duration = Duration::from_secs(5);

/// A shared stop request: how many times a stop was asked for, and by which signal.
#[derive(Debug, Clone)]
pub struct StopRequest {
    asked: Arc<watch::Sender<(u32, i32)>>,
    grace: Duration,
}

impl Default for StopRequest {
    fn default() -> Self {
        StopRequest::new(GRACE)
    }
}

impl StopRequest {
    /// A request nobody made yet, abandoning the run `grace` after the first ask.
    pub fn new(grace: Duration) -> Self {
        StopRequest {
            asked: Arc::new(watch::Sender::new((0, 0))),
            grace,
        }
    }

    /// Asks for a stop (`signal`: the signal number that asked, for the exit code).
    pub fn ask(&self, signal: i32) {
        self.asked.send_modify(|(count, first)| {
            if *count == 0 {
                *first = signal;
            }
            *count += 1;
        });
    }

    /// True once a stop was asked for.
    pub fn asked(&self) -> bool {
        self.asked.borrow().0 > 0
    }

    /// The signal of the first ask, if any.
    pub fn signal(&self) -> Option<i32> {
        let (count, signal) = *self.asked.borrow();
        (count > 0).then_some(signal)
    }

    /// Resolves when the run must be abandoned: its grace after the first ask, or at the
    /// second ask. Never resolves while nobody asks.
    pub async fn abandoned(&self) {
        let mut seen = self.asked.subscribe();
        if seen.wait_for(|(count, _)| *count >= 1).await.is_err() {
            return std::future::pending().await;
        }
        tokio::select! {
            _ = tokio::time::sleep(self.grace) => {}
            _ = seen.wait_for(|(count, _)| *count >= 2) => {}
        }
    }

    /// Asks for a stop on every SIGTERM and SIGINT this process receives (from now on;
    /// the default disposition — die at once — is replaced). The CLI's; the Lambda face
    /// handles its signals itself and never calls this.
    pub fn on_signals(&self) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        for kind in [SignalKind::terminate(), SignalKind::interrupt()] {
            let mut stream = signal(kind)?;
            let request = self.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    tracing::warn!(
                        signal = kind.as_raw_value(),
                        "stop requested; stopping at the next transaction boundary (a second signal abandons the run at once)"
                    );
                    request.ask(kind.as_raw_value());
                }
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abandoned_after_the_grace_or_at_the_second_ask() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let grace = Duration::from_millis(300);
            let stop = StopRequest::new(grace);
            assert!(!stop.asked());
            let never = tokio::time::timeout(grace * 2, stop.abandoned()).await;
            assert!(never.is_err(), "nobody asked");
            stop.ask(15);
            assert_eq!(stop.signal(), Some(15));
            let started = std::time::Instant::now();
            stop.abandoned().await;
            assert!(started.elapsed() >= grace);

            let stop = StopRequest::new(Duration::from_secs(60));
            stop.ask(2);
            stop.ask(15);
            assert_eq!(stop.signal(), Some(2), "the first signal counts");
            let started = std::time::Instant::now();
            stop.abandoned().await;
            assert!(started.elapsed() < Duration::from_secs(5));
        });
    }
}
