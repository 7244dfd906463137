//! The spill files: what each is named, how a new one is made, and the mark that keeps
//! it from the sweep while it is in use.
//!
//! Guarantees: every spill file's name carries the pid of the process that made it
//! ([`SpillKind`] lists the three forms), so [`super::sweep`] can tell a dead process's
//! file from a live one's; a new file never takes an existing name (`create_new`: a
//! leftover a crashed process with this pid left is skipped, never written into); a file
//! is marked in use ([`hold`]) from its creation until its hold is dropped, and a sweep
//! never removes a file so marked.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a spill file holds; its name says which.
#[derive(Debug, Clone, Copy)]
pub enum SpillKind<'a> {
    /// A part under construction: `sluice-<pid>-<n>-<table>.parquet.partial`, the table
    /// name with every character but ASCII letters, digits, `.`, `_` and `-` made `_`.
    Part { table: &'a str },
    /// A MySQL / MariaDB transaction past its memory cap: `sluice-txn-<pid>-<n>.spill`.
    Transaction,
    /// A copy of a part on its way elsewhere (an Iceberg warehouse):
    /// `sluice-copy-<pid>-<n>.parquet`.
    Copy,
}

/// Names skipped at most this many times in a row (each a leftover of a crashed process
/// with this pid) before creating the file fails.
const MAX_SKIPPED: u32 = 1000;

/// Numbers of each kind's names in this process.
static COUNTERS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

impl SpillKind<'_> {
    fn counter(&self) -> &'static AtomicU64 {
        match self {
            SpillKind::Part { .. } => &COUNTERS[0],
            SpillKind::Transaction => &COUNTERS[1],
            SpillKind::Copy => &COUNTERS[2],
        }
    }

    /// The file name of number `n` of this process.
    fn name(&self, n: u64) -> String {
        let pid = std::process::id();
        match self {
            SpillKind::Part { table } => {
                let safe: String = table
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                format!("sluice-{pid}-{n:06}-{safe}.parquet.partial")
            }
            SpillKind::Transaction => format!("sluice-txn-{pid}-{n:06}.spill"),
            SpillKind::Copy => format!("sluice-copy-{pid}-{n:06}.parquet"),
        }
    }
}

/// The number the next name of `kind` made by this process gets (tests place leftovers
/// there).
#[cfg(test)]
pub(crate) fn next_number(kind: SpillKind<'_>) -> u64 {
    kind.counter().load(Ordering::Relaxed)
}

/// A new spill file, open for reading and writing.
#[derive(Debug)]
pub struct Created {
    pub path: PathBuf,
    pub file: File,
    /// The in-use mark ([`hold`]): keep it as long as the file is in use.
    pub hold: Option<File>,
}

/// Why a spill file could not be created: the name last tried and the failure.
#[derive(Debug)]
pub struct NotCreated {
    pub path: PathBuf,
    pub source: io::Error,
}

/// Creates a new spill file of `kind` in `dir` (which must exist), under a name no file
/// has, marked in use.
pub fn create(dir: &Path, kind: SpillKind<'_>) -> Result<Created, NotCreated> {
    let mut skipped = 0;
    loop {
        let n = kind.counter().fetch_add(1, Ordering::Relaxed);
        let path = dir.join(kind.name(n));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => {
                let hold = hold(&file);
                return Ok(Created { path, file, hold });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && skipped < MAX_SKIPPED => {
                skipped += 1;
            }
            Err(source) => return Err(NotCreated { path, source }),
        }
    }
}

/// Marks a new spill file (through its open handle) as in use by this process until the
/// returned handle is dropped. `None` when the file system has no locks; the pid rule
/// alone then protects the file.
pub fn hold(file: &File) -> Option<File> {
    use fs4::fs_std::FileExt;
    let held = file.try_clone().ok()?;
    FileExt::try_lock_exclusive(&held)
        .ok()
        .filter(|locked| *locked)?;
    Some(held)
}

/// The pid in a spill file name ([`SpillKind`]); `None` for any other name.
pub fn spill_pid(name: &str) -> Option<u32> {
    let pid_and_n = |rest: &str| {
        let (pid, n) = rest.split_once('-')?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        pid.parse().ok()
    };
    if let Some(rest) = name.strip_prefix("sluice-txn-") {
        return pid_and_n(rest.strip_suffix(".spill")?);
    }
    if let Some(rest) = name.strip_prefix("sluice-copy-") {
        return pid_and_n(rest.strip_suffix(".parquet")?);
    }
    let rest = name.strip_prefix("sluice-")?;
    if !name.ends_with(".parquet.partial") {
        return None;
    }
    let (pid, rest) = rest.split_once('-')?;
    let (n, _) = rest.split_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spill_names() {
        assert_eq!(
            spill_pid("sluice-42-000007-shop.items.parquet.partial"),
            Some(42)
        );
        assert_eq!(spill_pid("sluice-42-000007-shop.items.parquet"), None);
        assert_eq!(spill_pid("sluice-42-x-t.parquet.partial"), None);
        assert_eq!(spill_pid("other-42-000007-t.parquet.partial"), None);
        assert_eq!(spill_pid("sluice-txn-42-000003.spill"), Some(42));
        assert_eq!(spill_pid("sluice-txn-42-.spill"), None);
        assert_eq!(spill_pid("sluice-txn-42-000003.spill.tmp"), None);
    }

    #[test]
    fn every_name_made_is_read_back_with_this_pid() {
        let dir = tempfile::tempdir().unwrap();
        for kind in [
            SpillKind::Part {
                table: "shop.items/ä",
            },
            SpillKind::Transaction,
            SpillKind::Copy,
        ] {
            let created = create(dir.path(), kind).unwrap();
            let name = created.path.file_name().unwrap().to_str().unwrap();
            assert_eq!(spill_pid(name), Some(std::process::id()), "{name}");
        }
    }
}
