//! Removes files that crashed runs left in the spill directory.
//!
//! A run that is killed (a Lambda timeout, SIGKILL, an abort) leaves its part under
//! construction as `sluice-<pid>-<n>-<table>.parquet.partial`, a MySQL run its
//! transaction buffer as `sluice-txn-<pid>-<n>.spill`, an Iceberg commit to S3 Tables the
//! part it was copying into a warehouse as `sluice-copy-<pid>-<n>.parquet`
//! ([`super::files`] makes and names them). Lambda keeps `/tmp`
//! between invocations of a warm sandbox, so without a sweep a few crashed runs fill it
//! and every later run fails with `SLUICE_SPILL_FULL`. [`sweep`] runs at the start of a
//! drain and removes only files no live process can own. A live process holds an
//! exclusive lock ([`super::files::hold`]) on each of its spill files for as long as the file is in use
//! (a finished part until it is uploaded and removed), so a locked file is never removed
//! — also when another container sharing the volume runs under the same pid (each
//! container's first process is pid 1). An unlocked file is removed when it is named
//! with this process's own pid (a previous process with our pid is gone — on Lambda the
//! runtime reuses the same pid) or, where `/proc` exists, with a pid that is not running.
//! Every file not named like a spill file is left alone.

use std::fs::File;
use std::path::Path;

use fs4::fs_std::FileExt;

use super::files::spill_pid;

/// Removes the dead runs' spill files in `dir`; returns how many were removed.
pub fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let own = std::process::id();
    let proc_fs = Path::new("/proc/self").exists();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(spill_pid) else {
            continue;
        };
        let dead = pid == own || (proc_fs && !Path::new("/proc").join(pid.to_string()).exists());
        if dead && !in_use(&entry.path()) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(dir = %dir.display(), files = removed, "removed spill files left by crashed runs");
    }
    removed
}

/// True when a live process holds the file's lock.
fn in_use(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| matches!(FileExt::try_lock_exclusive(&f), Ok(false)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::files::{Created, SpillKind, create, hold};

    #[test]
    fn removes_only_files_no_live_process_owns() {
        let dir = tempfile::tempdir().unwrap();
        let own = std::process::id();
        // Above Linux's largest pid_max: never a running process.
        let dead = 4_194_305 + 17;
        let names = [
            format!("sluice-{own}-000001-public.t.parquet.partial"),
            format!("sluice-{dead}-000000-t.parquet.partial"),
            "sluice-1-000003-t.parquet.partial".to_owned(),
            "sluice-x-000003-t.parquet.partial".to_owned(),
            format!("sluice-{dead}-000000-t.parquet"),
            "unrelated.txt".to_owned(),
            format!("sluice-txn-{dead}-000002.spill"),
            "sluice-txn-1-000000.spill".to_owned(),
        ];
        for name in &names {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let expected = if Path::new("/proc/self").exists() {
            3
        } else {
            1
        };
        assert_eq!(sweep(dir.path()), expected);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert!(!left.contains(&names[0]), "{left:?}");
        assert!(left.contains(&names[2]), "pid 1 is alive: {left:?}");
        assert!(left.contains(&names[3]) && left.contains(&names[4]) && left.contains(&names[5]));
        assert!(left.contains(&names[7]), "pid 1 is alive: {left:?}");
        assert_eq!(sweep(Path::new("/nonexistent/dir")), 0);
    }

    #[test]
    fn a_copy_is_removed_once_its_process_is_gone_and_kept_while_held() {
        let dir = tempfile::tempdir().unwrap();
        let Created {
            path: held, hold, ..
        } = create(dir.path(), SpillKind::Copy).unwrap();
        let name = held.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(spill_pid(&name), Some(std::process::id()), "{name}");
        let dead = dir.path().join("sluice-copy-4194322-000007.parquet");
        std::fs::write(&dead, b"x").unwrap();
        let odd = dir.path().join("sluice-copy-4194322-x.parquet");
        std::fs::write(&odd, b"x").unwrap();
        let removed = sweep(dir.path());
        assert!(held.exists(), "in use by this process");
        assert!(odd.exists(), "not named like a copy");
        if Path::new("/proc/self").exists() {
            assert_eq!(removed, 1);
            assert!(!dead.exists());
        }
        if hold.is_some() {
            drop(hold);
            assert_eq!(sweep(dir.path()), 1, "released under this pid: a leftover");
            assert!(!held.exists());
        }
        let next = create(dir.path(), SpillKind::Copy).unwrap();
        assert_ne!(next.path, held);
    }

    #[test]
    fn a_held_file_is_never_removed_even_under_this_process_pid() {
        let dir = tempfile::tempdir().unwrap();
        let own = std::process::id();
        // As another container's live process with the same pid would leave it.
        let live = dir
            .path()
            .join(format!("sluice-{own}-000001-t.parquet.partial"));
        let crashed = dir
            .path()
            .join(format!("sluice-{own}-000002-t.parquet.partial"));
        std::fs::write(&crashed, b"x").unwrap();
        let handle = File::create(&live).unwrap();
        let held = hold(&handle).expect("the test file system has locks");
        drop(handle);
        assert_eq!(sweep(dir.path()), 1);
        assert!(live.exists() && !crashed.exists());
        drop(held);
        assert_eq!(sweep(dir.path()), 1);
        assert!(!live.exists(), "released, the file is a leftover");
    }
}
