//! Named fault points on the durable path (part → checkpoint → ack, baseline chunks,
//! destination uploads, compaction steps), for crash tests. The points sit in
//! `crate::commit`, in the destinations, after an Iceberg commit (`crate::iceberg`),
//! before a baseline chunk's read (`crate::baseline::tasks`) and between the steps of a
//! compaction (`crate::compaction`) or a forget (`crate::forget`); nothing else arms or
//! passes them.
//!
//! `SLUICE_FAULT=<point>[@<n>][:<action>]` arms one point: at its `n`-th hit (default 1)
//! the process either aborts on the spot (`crash`, the default: no destructor, no lease
//! release — as a killed Lambda), sleeps (`pause=<ms>`, to let a lease expire), or returns
//! `SLUICE_FAULT_INJECTED` (`error`). Unset, every point is a no-op. The variable is meant
//! for tests only; the drain logs a warning when it is set.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::error::{Code, Error, Result};

/// Environment variable that arms a fault point.
pub const FAULT_ENV: &str = "SLUICE_FAULT";

/// The points between the steps of the durable order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// A part was uploaded and is durable; the checkpoint has not moved.
    PartDurable,
    /// The checkpoint moved; the source has not been acknowledged.
    CheckpointWritten,
    /// The source was acknowledged.
    SourceAcked,
    /// Just before the checkpoint write (used to let a lease expire first).
    BeforeCheckpoint,
    /// A baseline chunk's source is open and the table's shape checked; nothing read yet.
    ChunkOpened,
    /// A baseline chunk's part is durable and the chunk is recorded done.
    ChunkDone,
    /// Inside a destination's upload: bytes written, the part not yet published.
    MidUpload,
    /// A table's parts are committed to its Iceberg table; the checkpoint has not moved.
    IcebergCommitted,
    /// A current-state version's files are written; the pointer does not name it yet.
    MaterializeBeforePointer,
    /// The pointer names the new current-state version; older versions are not removed.
    MaterializeAfterPointer,
    /// A compacted part is uploaded and durable; no compaction manifest names it yet.
    CompactPartDurable,
    /// A compaction manifest is written; none of the parts it replaces is removed yet.
    CompactManifestWritten,
    /// One part a compaction replaced was removed (the `n`-th hit: the `n`-th removal).
    CompactPartRemoved,
    /// Every part a compaction step replaced is removed; the table's record is not yet
    /// written.
    CompactStepDone,
    /// A history fold's plan part is uploaded (complete for readers of the rule);
    /// `snapshot/_manifest.json` does not name it yet.
    RetentionPlanWritten,
    /// A forget step's rewrite is uploaded and durable; no manifest names it yet.
    ForgetPartDurable,
    /// A forget step's manifest is written; the file it rewrote is not removed yet.
    ForgetManifestWritten,
    /// The file a forget step rewrote was removed (the `n`-th hit: the `n`-th removal).
    ForgetPartRemoved,
    /// The current-state pointer names the version without the keys; the files holding
    /// them are not removed yet.
    ForgetStateWritten,
    /// A compaction step's `replace` snapshot is committed to the Iceberg table; its
    /// manifest does not record it yet.
    CompactIcebergCommitted,
    /// An Iceberg expiry's metadata is committed; no file it unreferenced is deleted yet.
    IcebergExpired,
    /// A verify repair's part is uploaded and durable; no run manifest names it yet.
    RepairPartWritten,
}

impl FaultPoint {
    fn name(self) -> &'static str {
        match self {
            FaultPoint::PartDurable => "part_durable",
            FaultPoint::CheckpointWritten => "checkpoint_written",
            FaultPoint::SourceAcked => "source_acked",
            FaultPoint::BeforeCheckpoint => "before_checkpoint",
            FaultPoint::ChunkOpened => "chunk_opened",
            FaultPoint::ChunkDone => "chunk_done",
            FaultPoint::MidUpload => "mid_upload",
            FaultPoint::IcebergCommitted => "iceberg_committed",
            FaultPoint::MaterializeBeforePointer => "materialize_before_pointer",
            FaultPoint::MaterializeAfterPointer => "materialize_after_pointer",
            FaultPoint::CompactPartDurable => "compact_part_durable",
            FaultPoint::CompactManifestWritten => "compact_manifest_written",
            FaultPoint::CompactPartRemoved => "compact_part_removed",
            FaultPoint::CompactStepDone => "compact_step_done",
            FaultPoint::RetentionPlanWritten => "retention_plan_written",
            FaultPoint::ForgetPartDurable => "forget_part_durable",
            FaultPoint::ForgetManifestWritten => "forget_manifest_written",
            FaultPoint::ForgetPartRemoved => "forget_part_removed",
            FaultPoint::ForgetStateWritten => "forget_state_written",
            FaultPoint::CompactIcebergCommitted => "compact_iceberg_committed",
            FaultPoint::IcebergExpired => "iceberg_expired",
            FaultPoint::RepairPartWritten => "repair_part_written",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Action {
    Crash,
    Pause(Duration),
    Error,
}

#[derive(Debug, PartialEq)]
struct Armed {
    point: String,
    nth: u32,
    action: Action,
}

fn parse(spec: &str) -> Option<Armed> {
    let (target, action) = match spec.split_once(':') {
        Some((t, a)) => (t, a),
        None => (spec, "crash"),
    };
    let (point, nth) = match target.split_once('@') {
        Some((p, n)) => (p, n.parse().ok()?),
        None => (target, 1),
    };
    let action = match action {
        "crash" => Action::Crash,
        "error" => Action::Error,
        other => Action::Pause(Duration::from_millis(
            other.strip_prefix("pause=")?.parse().ok()?,
        )),
    };
    Some(Armed {
        point: point.to_owned(),
        nth,
        action,
    })
}

static HITS: AtomicU32 = AtomicU32::new(0);

/// True when a fault is armed (the drain warns about it).
pub fn armed() -> bool {
    std::env::var_os(FAULT_ENV).is_some()
}

/// Passes the named point: a no-op unless `SLUICE_FAULT` arms it.
pub async fn hit(point: FaultPoint) -> Result<()> {
    let Ok(spec) = std::env::var(FAULT_ENV) else {
        return Ok(());
    };
    let Some(armed) = parse(&spec) else {
        return Err(Error::new(
            Code::ConfigInvalid,
            format!("{FAULT_ENV}={spec:?} is not a fault spec"),
        )
        .hint("use <point>[@<n>][:crash|error|pause=<ms>], or unset it"));
    };
    if armed.point != point.name() || HITS.fetch_add(1, Ordering::SeqCst) + 1 != armed.nth {
        return Ok(());
    }
    match armed.action {
        Action::Crash => {
            eprintln!("sluice: fault injected at {}: crashing", point.name());
            std::process::abort();
        }
        Action::Pause(d) => {
            tracing::warn!(
                point = point.name(),
                ms = d.as_millis() as u64,
                "fault injected: pausing"
            );
            tokio::time::sleep(d).await;
            Ok(())
        }
        Action::Error => Err(Error::new(
            Code::FaultInjected,
            format!("fault injected at {}", point.name()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(
            parse("part_durable"),
            Some(Armed {
                point: "part_durable".into(),
                nth: 1,
                action: Action::Crash
            })
        );
        assert_eq!(
            parse("checkpoint_written@3:error"),
            Some(Armed {
                point: "checkpoint_written".into(),
                nth: 3,
                action: Action::Error
            })
        );
        assert_eq!(
            parse("before_checkpoint:pause=1500").unwrap().action,
            Action::Pause(Duration::from_millis(1500))
        );
        assert_eq!(parse("x@y"), None);
        assert_eq!(parse("x:explode"), None);
    }
}
