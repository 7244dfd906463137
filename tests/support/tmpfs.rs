//! A tiny tmpfs for "volume full" fault tests (spill directories). Mounting needs root;
//! without it the test fails under `CI=true` and is skipped (saying so) otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

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
            std::env::var("CI").as_deref() != Ok("true"),
            "cannot mount a tmpfs at {} (the test needs root / CAP_SYS_ADMIN)",
            dir.display()
        );
        eprintln!("SKIPPED: cannot mount a tmpfs (needs root)");
        None
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
