//! The documents the baseline tasks take and return: what the Step Functions state
//! machine passes from `baseline.anchor` through `baseline.plan` and each
//! `baseline.chunk` to `baseline.finish`.
//!
//! Guarantees: each is plain JSON (serde), the same whichever face runs the task (the
//! CLI, or a Lambda invocation of the state machine); `baseline.plan`'s output has every
//! field in both of its modes (`items` is null inline), so the machine's `ResultSelector`
//! paths resolve in both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::destination::S3Object;
use crate::source::baseline_read::ChunkBounds;

/// Output of `baseline.anchor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorOutput {
    /// The stream position the baseline is anchored at (tagged): the first table's
    /// recorded anchor (a table anchored earlier keeps its own).
    pub anchor: String,
    pub tables: Vec<String>,
}

/// One chunk to read: the item of the Step Functions Map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkTask {
    pub table: String,
    /// 1-based chunk number; also the snapshot part number.
    pub chunk: u32,
    pub bounds: ChunkBounds,
    /// The table's snapshot anchor (tagged); its text is the rows' `__pos`.
    pub anchor: String,
}

/// Where `baseline.plan` put the chunk list: the state machine's Choice on `mode`
/// selects the Map that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanMode {
    /// In `chunks`, for the INLINE Map.
    Inline,
    /// In the S3 object `items` (a JSON array of [`ChunkTask`]), for the DISTRIBUTED Map.
    S3,
}

/// Output of `baseline.plan`. Every field is always present (`items` is null inline), so
/// the state machine's `ResultSelector` paths resolve in both modes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOutput {
    pub mode: PlanMode,
    /// Every chunk to read (`mode: inline`); empty for `mode: s3`.
    pub chunks: Vec<ChunkTask>,
    /// `mode: s3`: the object holding every chunk to read; null for `mode: inline`.
    pub items: Option<S3Object>,
    /// How many chunks there are, in either mode.
    pub chunk_count: usize,
    /// Chunks to read at once (`baseline.parallel`; the Map's MaxConcurrency).
    pub parallel: usize,
}

/// Input of `baseline.chunk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkInput {
    pub chunk: ChunkTask,
}

/// Output of `baseline.chunk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkOutput {
    pub table: String,
    pub chunk: u32,
    pub rows: u64,
    pub part_key: String,
    /// True when the table's shape changed since its plan: nothing was read, and the
    /// table's baseline starts over at a new anchor (the `baseline.chunk` task).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abandoned: bool,
}

/// Per-table result of `baseline.finish`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableBaseline {
    pub chunks: u32,
    pub rows: u64,
}

/// Output of `baseline.finish`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishOutput {
    pub tables: BTreeMap<String, TableBaseline>,
    /// Tables whose shape is no longer their plan's: their baseline was given up and is
    /// wanted anew (the next drain anchors it again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarted: Vec<String>,
}
