//! A slot held by a backend of this job's previous run: when a run dies mid-peek (SIGKILL,
//! a Lambda timeout, a network that went silent), the server goes on decoding for it and
//! keeps the slot `active` until it notices the client is gone — seconds for a killed
//! process, up to the TCP keepalive for a silent network — and every run meanwhile would
//! fail `SLUICE_SOURCE_SLOT_BUSY`.
//!
//! A job's stream connections carry `application_name = sluice/<job>`
//! ([`application_name`]). [`release`] is called by a run that holds the job's lease,
//! before it touches the slot: a backend holding the slot under this job's name that is
//! not one of our own sessions belongs to an earlier run of this job, which no longer holds
//! the lease — it is fenced and can never checkpoint or ack again, so its decoding is
//! useless — and it is ended with `pg_terminate_backend`; we then wait for the slot to be
//! released. A backend under any other name (another consumer, a `pg_recvlogical`, a name
//! truncated past the job) is never touched: the run fails `SLUICE_SOURCE_SLOT_BUSY` with a
//! hint that names it.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::connect::query_error;
use super::slot::{self, SlotInfo};
use crate::error::Result;

/// The longest `application_name` the server keeps (`NAMEDATALEN - 1` bytes).
const MAX_NAME: usize = 63;

/// How long we wait for a terminated backend to let go of the slot.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// The `application_name` of `job`'s stream connections.
pub fn application_name(job: &str) -> String {
    format!("sluice/{job}")
}

/// True when a backend named `name` is one of `job`'s stream connections: exactly its
/// name, which the server kept whole (a longer one is truncated and proves nothing).
pub fn is_jobs(name: &str, job: &str) -> bool {
    let ours = application_name(job);
    ours.len() <= MAX_NAME && name == ours
}

/// Ends the backend of an earlier run of `job` that holds `slot` (see the module doc) and
/// returns the slot's fresh state; any other holder is left alone (the caller refuses a
/// busy slot). The caller must hold the job's lease.
pub async fn release(
    client: &Client,
    job: &str,
    slot_name: &str,
    info: Option<SlotInfo>,
) -> Result<Option<SlotInfo>> {
    let Some(pid) = info.as_ref().and_then(|i| i.active_pid) else {
        return Ok(info);
    };
    let row = client
        .query_opt(
            "SELECT application_name, pid = pg_backend_pid() FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .map_err(|e| query_error("reading pg_stat_activity", e))?;
    let Some(row) = row else {
        return slot::slot_info(client, slot_name).await;
    };
    let name: Option<String> = row.get(0);
    let own_session: bool = row.get(1);
    if own_session || !name.as_deref().is_some_and(|n| is_jobs(n, job)) {
        return Ok(info);
    }
    tracing::warn!(
        slot = slot_name,
        pid,
        "the slot is held by a backend of an earlier run of this job (that run is gone or fenced); terminating it"
    );
    client
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .map_err(|e| query_error("terminating the earlier run's backend", e))?;
    let deadline = Instant::now() + RELEASE_WAIT;
    loop {
        let now = slot::slot_info(client, slot_name).await?;
        let still = now.as_ref().and_then(|i| i.active_pid) == Some(pid);
        if !still || Instant::now() >= deadline {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_jobs_whole_name_is_the_jobs() {
        assert_eq!(application_name("orders"), "sluice/orders");
        assert!(is_jobs("sluice/orders", "orders"));
        assert!(!is_jobs("sluice", "orders"), "a tool session of sluice");
        assert!(!is_jobs("sluice/orders2", "orders"));
        assert!(!is_jobs("pg_recvlogical", "orders"));
        let long = "j".repeat(60);
        let truncated: String = application_name(&long).chars().take(MAX_NAME).collect();
        assert!(
            !is_jobs(&truncated, &long),
            "a truncated name proves nothing"
        );
    }
}
