//! A tiny tmpfs for "volume full" fault tests (spill directories), and what such a run
//! must report. Mounting needs root; without it the test fails under CI and is
//! skipped (saying so) otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Run;

/// A run that filled the spill volume at `spill_dir`: a transient failure
/// (`SLUICE_SPILL_FULL`) whose hint names `output.spill_dir`, with nothing left behind.
pub fn assert_spill_full(run: &Run, spill_dir: &Path) {
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.error_code(), "SLUICE_SPILL_FULL", "{}", run.stdout);
    assert!(
        run.stdout.contains("output.spill_dir"),
        "the hint names the setting: {}",
        run.stdout
    );
    let left: Vec<_> = std::fs::read_dir(spill_dir).unwrap().collect();
    assert!(left.is_empty(), "spill files left behind: {left:?}");
}

/// A tmpfs of `size` mounted at `dir`, unmounted on drop.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(Tmpfs(dir.to_path_buf()));
        }
        assert!(
            !super::in_ci(),
            "cannot mount a tmpfs at {} (the test needs root / CAP_SYS_ADMIN)",
            dir.display()
        );
        super::skipped("cannot mount a tmpfs (needs root)");
        None
    }

    /// Makes the volume read-only (writes fail with `EROFS`, also for root).
    pub fn read_only(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn resize(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
