//! Typed Parquet part writing: from framed [`ChangeEvent`](crate::change::ChangeEvent)s
//! to checked, run-stamped Parquet files in a local spill directory.
//!
//! Guarantees (docs/state.md, Guarantees):
//!
//! * every source type maps to one real Arrow/Parquet type ([`arrow_schema`]); a value
//!   that does not fit its column fails with `SLUICE_VALUE_UNREPRESENTABLE` naming table,
//!   column and position — never a NULL, never a panic ([`batch`]);
//! * before a batch reaches the Parquet writer, a checksum (`mix64`) of the cells as they
//!   were appended is compared with one read back out of the built Arrow columns
//!   ([`checksum`]); the part carries the running sum, which anyone can recompute from
//!   the file;
//! * memory is bounded by configuration: at most one batch of `row_group_rows` rows (or
//!   `row_group_bytes` bytes) being built, one being encoded (on a second thread where
//!   there is a second CPU) and its encoded row group; everything else is on
//!   local disk ([`part`]); the run's writers share one budget
//!   ([`crate::spill::memory_budget`]) that lowers each table's batch size;
//! * a schema change (a widened column type included) rolls to a new part, any other
//!   column type change is a refusal (`SLUICE_SOURCE_SCHEMA_CHANGE`); the manifest ([`manifest`]) lists every part with
//!   its rows, bytes, checksum and position range.

pub mod arrow_schema;
pub mod batch;
pub mod checksum;
pub mod columns;
pub mod manifest;
pub mod part;
pub mod partition;
pub mod schema_history;

pub use self::arrow_schema::{arrow_field, arrow_type, change_schema};
pub use self::batch::{FinishedBatch, RowBatchBuilder};
pub use self::checksum::{
    Algorithm, CellHasher, checksum_text, hash_batch, hash_batch_from, verify_batches,
};
pub use self::columns::ManifestColumn;
pub use self::manifest::{
    LEGACY_MANIFEST_FILE, MANIFEST_FILE, Manifest, ManifestPart, ManifestRun, ManifestStatus,
    PendingParts,
};
pub use self::part::{FinishedPart, PartSettings, PartWriter};
