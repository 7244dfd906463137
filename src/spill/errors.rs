//! What a failed file operation in the spill directory means for the operator.
//!
//! Guarantees: a full volume is `SLUICE_SPILL_FULL` and a directory sluice may not write
//! to is `SLUICE_SPILL_DENIED`, each with the hint that fixes it (a retry changes
//! neither); any other failure is `SLUICE_OUTPUT_WRITE`. The I/O error is kept as the
//! source.

use std::io;
use std::path::Path;

use crate::error::{Code, Error};

/// A failure `err` of `what`, a file operation in `spill_dir`.
pub fn io_error(err: io::Error, what: String, spill_dir: &Path) -> Error {
    match volume_error(&err, &what, spill_dir) {
        Some(refusal) => refusal.source(err),
        None => Error::new(Code::OutputWrite, what).source(err),
    }
}

/// The refusal for `err` when the spill volume is full or not writable; `None` for any
/// other failure (the caller attaches the source).
pub fn volume_error(err: &io::Error, what: &str, spill_dir: &Path) -> Option<Error> {
    if err.kind() == io::ErrorKind::StorageFull {
        return Some(spill_full(what, spill_dir));
    }
    if matches!(
        err.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
    ) {
        return Some(spill_denied(what, spill_dir));
    }
    None
}

fn spill_denied(what: &str, spill_dir: &Path) -> Error {
    Error::new(
        Code::SpillDenied,
        format!(
            "{what}: the spill directory {} is not writable",
            spill_dir.display()
        ),
    )
    .hint("point output.spill_dir at a writable directory (or make it writable for the user sluice runs as)")
}

fn spill_full(what: &str, spill_dir: &Path) -> Error {
    Error::new(
        Code::SpillFull,
        format!("{what}: the spill directory {} is full", spill_dir.display()),
    )
    .hint("point output.spill_dir at a larger volume, raise the Lambda function's ephemeral storage (up to 10240 MB; /tmp), or lower output.rollover_bytes so parts are uploaded sooner")
}
