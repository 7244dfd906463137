//! How large a transaction the spill volume can hold. The configured limit
//! (`source.mysql.max_transaction_bytes`) is lowered at the start of a run to a share of
//! the spill directory's free space, so a transaction that cannot fit fails as a refusal
//! that names the volume and the fix — never as a full disk retried for ever.
//!
//! Guarantees: the limit is never above the configured one; when the free space is
//! unknown (no `statvfs`) the configured limit stands.

use std::path::Path;

/// The share of the spill volume's free space one transaction may take: the rest is for
/// the parts the transaction is written into (compressed, a fraction of its size) and the
/// other tables' open parts.
const SPILL_SHARE_NUM: u64 = 2;
const SPILL_SHARE_DEN: u64 = 3;

/// The largest transaction a run accepts, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionLimit {
    /// Decoded bytes of one transaction.
    pub bytes: u64,
    /// The configured limit.
    pub configured: u64,
    /// The spill directory's free bytes at the start of the run, when known.
    pub free: Option<u64>,
}

impl TransactionLimit {
    /// The limit for `configured` with `free` bytes free on the spill volume.
    pub fn new(configured: u64, free: Option<u64>) -> Self {
        let bytes = match free {
            Some(free) => configured.min(free / SPILL_SHARE_DEN * SPILL_SHARE_NUM),
            None => configured,
        };
        TransactionLimit {
            bytes,
            configured,
            free,
        }
    }

    /// The limit for `configured` on the volume of `spill_dir` (or, while it does not
    /// exist yet, of its nearest existing ancestor — nothing is created).
    pub fn for_dir(configured: u64, spill_dir: &Path) -> Self {
        let free = spill_dir.ancestors().find_map(free_bytes);
        Self::new(configured, free)
    }

    /// True when the spill volume, not the configuration, sets the limit.
    pub fn lowered(&self) -> bool {
        self.bytes < self.configured
    }

    /// The fix for a transaction past the limit.
    pub fn hint(&self) -> String {
        if self.lowered() {
            format!(
                "the spill volume (output.spill_dir; /tmp on Lambda) had {} free, so a transaction may take at most {} (two thirds) instead of source.mysql.max_transaction_bytes = {}: raise the Lambda function's ephemeral storage (up to 10 GiB), point output.spill_dir at a larger volume, or run this backlog once with the CLI on a machine with more disk; splitting the transaction at the source avoids it in future",
                human_bytes(self.free.unwrap_or_default()),
                human_bytes(self.bytes),
                human_bytes(self.configured)
            )
        } else {
            "raise source.mysql.max_transaction_bytes (the spill volume must hold it: output.spill_dir, Lambda ephemeral storage), or split the transaction at the source".to_owned()
        }
    }
}

/// Free bytes for an unprivileged writer on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid NUL-terminated string and `stat` a writable statvfs.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// Bytes as a short human figure (`1.5 GiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    #[test]
    fn a_small_volume_lowers_the_limit_to_two_thirds_of_its_free_space() {
        let lambda = TransactionLimit::new(4 * GIB, Some(512 * 1024 * 1024));
        assert!(lambda.lowered());
        assert_eq!(lambda.bytes, 512 * 1024 * 1024 / 3 * 2);
        assert!(
            lambda.hint().contains("512.0 MiB free"),
            "{}",
            lambda.hint()
        );
        assert!(lambda.hint().contains("ephemeral storage"));
    }

    #[test]
    fn a_large_or_unknown_volume_keeps_the_configured_limit() {
        let big = TransactionLimit::new(4 * GIB, Some(100 * GIB));
        assert_eq!((big.bytes, big.lowered()), (4 * GIB, false));
        assert!(big.hint().contains("max_transaction_bytes"));
        let unknown = TransactionLimit::new(4 * GIB, None);
        assert_eq!(unknown.bytes, 4 * GIB);
    }

    #[test]
    fn free_space_is_read_from_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        assert!(free_bytes(dir.path()).is_some_and(|b| b > 0));
        assert_eq!(free_bytes(&dir.path().join("missing")), None);
        let below = TransactionLimit::for_dir(u64::MAX, &dir.path().join("missing/spill"));
        assert!(
            below.free.is_some(),
            "measured on the nearest existing ancestor"
        );
        assert!(!dir.path().join("missing").exists(), "nothing is created");
    }
}
