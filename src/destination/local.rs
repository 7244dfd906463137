//! A local directory as the destination (CLI, tests, mounted volumes).
//!
//! Durability: a part is copied to a hidden temporary name in its final directory
//! (`.tmp-<pid>-<n>-<name>.partial`: no `*.parquet` glob matches it), fsynced, then
//! published with `link(2)`, which fails if the key exists — so a part is never
//! overwritten and a crash leaves at most a `.partial` file that no reader takes for a
//! part; such leftovers older than an hour are removed by the next marker write in their
//! directory. Markers are replaced atomically with `rename(2)`. Every directory created
//! is fsynced into its parent, and a directory is fsynced after each publish.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::Destination;
use crate::error::{Code, Error, Result};

/// A directory on a local file system.
#[derive(Debug)]
pub struct LocalDestination {
    root: PathBuf,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl LocalDestination {
    /// A destination rooted at `root` (created when missing).
    pub fn new(root: &Path) -> Result<Self> {
        fs::create_dir_all(root).map_err(|e| unavailable(root, e))?;
        Ok(LocalDestination {
            root: root.to_path_buf(),
        })
    }

    fn path_of(&self, key: &str) -> Result<PathBuf> {
        super::check_key(key)?;
        Ok(self.root.join(key))
    }

    fn tmp_path(dest: &Path) -> PathBuf {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("part");
        dest.with_file_name(format!(
            ".tmp-{}-{n}-{name}{TMP_SUFFIX}",
            std::process::id()
        ))
    }

    /// Creates `dir` and the missing directories above it, each fsynced into its parent,
    /// so a published part's directory survives a power loss with the part.
    fn create_dirs(&self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.exists()) {
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        fs::create_dir_all(dir).map_err(|e| unavailable(dir, e))?;
        for created in missing.iter().rev() {
            if let Some(parent) = created.parent() {
                sync_dir(parent)?;
            }
        }
        Ok(())
    }
}

/// The suffix of an upload in progress.
const TMP_SUFFIX: &str = ".partial";
/// How old a leftover upload must be before a marker write in its directory removes it
/// (an upload in progress is never that old).
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes uploads a killed process left in `dir` more than [`STALE_TMP`] ago.
fn sweep_stale_uploads(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(".tmp-") && name.ends_with(TMP_SUFFIX)) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_TMP);
        if stale && fs::remove_file(entry.path()).is_ok() {
            tracing::info!(file = %entry.path().display(), "removed an upload a killed run left");
        }
    }
}

fn unavailable(path: &Path, e: std::io::Error) -> Error {
    let code = match e.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => Code::DestinationDenied,
        _ => Code::DestinationUnavailable,
    };
    Error::new(code, format!("local destination {}", path.display()))
        .hint("check that destination.path exists, is writable and has free space")
        .source(e)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| unavailable(dir, e))
}

fn write_synced(path: &Path, fill: impl FnOnce(&mut File) -> std::io::Result<()>) -> Result<()> {
    let mut file = File::create(path).map_err(|e| unavailable(path, e))?;
    fill(&mut file).and_then(|_| file.sync_all()).map_err(|e| {
        let _ = fs::remove_file(path);
        unavailable(path, e)
    })
}

#[async_trait]
impl Destination for LocalDestination {
    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }

    fn root_uri(&self) -> Option<String> {
        let root = std::path::absolute(&self.root).unwrap_or_else(|_| self.root.clone());
        let root = root.to_string_lossy();
        Some(format!("file://{}/", root.trim_end_matches('/')))
    }

    async fn put_part(&self, key: &str, local: &Path) -> Result<()> {
        let dest = self.path_of(key)?;
        let dir = dest.parent().unwrap_or(&self.root).to_path_buf();
        self.create_dirs(&dir)?;
        if dest.exists() {
            return Err(exists(key));
        }
        let tmp = Self::tmp_path(&dest);
        write_synced(&tmp, |f| {
            let mut src = File::open(local)?;
            std::io::copy(&mut src, f).map(|_| ())
        })?;
        if let Err(e) = crate::faults::hit(crate::faults::FaultPoint::MidUpload).await {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        let linked = fs::hard_link(&tmp, &dest);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => sync_dir(&dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(exists(key)),
            Err(e) => Err(unavailable(&dest, e)),
        }
    }

    async fn put_marker(&self, key: &str, body: &[u8]) -> Result<()> {
        let dest = self.path_of(key)?;
        let dir = dest.parent().unwrap_or(&self.root).to_path_buf();
        self.create_dirs(&dir)?;
        sweep_stale_uploads(&dir);
        let tmp = Self::tmp_path(&dest);
        write_synced(&tmp, |f| f.write_all(body))?;
        fs::rename(&tmp, &dest).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            unavailable(&dest, e)
        })?;
        sync_dir(&dir)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(key)?;
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(unavailable(&path, e)),
        }
    }

    async fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Option<Vec<u8>>> {
        use std::io::{Read, Seek, SeekFrom};
        let path = self.path_of(key)?;
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unavailable(&path, e)),
        };
        let mut out = Vec::new();
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.take(len).read_to_end(&mut out))
            .map_err(|e| unavailable(&path, e))?;
        Ok(Some(out))
    }

    async fn download(&self, key: &str, local: &Path) -> Result<bool> {
        let path = self.path_of(key)?;
        match fs::copy(&path, local) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound && !path.exists() => Ok(false),
            Err(e) => Err(unavailable(&path, e)),
        }
    }

    async fn list_modified(&self, prefix: &str) -> Result<Vec<(String, Option<i64>)>> {
        let keys = self.list(prefix).await?;
        Ok(keys
            .into_iter()
            .map(|key| {
                let modified = self
                    .path_of(&key)
                    .ok()
                    .and_then(|p| fs::metadata(p).ok())
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as i64);
                (key, modified)
            })
            .collect())
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(path.parent().unwrap_or(&self.root)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(unavailable(&path, e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(unavailable(&dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| unavailable(&dir, e))?;
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if let Ok(rel) = path.strip_prefix(&self.root) {
                    let key = rel.to_string_lossy().replace('\\', "/");
                    let hidden = key
                        .rsplit('/')
                        .next()
                        .is_some_and(|n| n.starts_with(".tmp-"));
                    if key.starts_with(prefix) && !hidden {
                        keys.push(key);
                    }
                }
            }
        }
        keys.sort();
        Ok(keys)
    }
}

fn exists(key: &str) -> Error {
    Error::new(Code::DestinationExists, format!("part {key} already exists; parts are never overwritten"))
        .hint("two writers are producing the same run id — check that only one job uses this destination prefix")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_in_progress_match_no_part_glob_and_stale_ones_are_swept() {
        let tmp = LocalDestination::tmp_path(Path::new("/out/t/cdc-r-00001.parquet"));
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(".tmp-") && name.ends_with(".partial"),
            "{name}"
        );
        assert!(!name.ends_with(".parquet"), "{name}");
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(".tmp-1-0-cdc-x.parquet.partial");
        let fresh = dir.path().join(".tmp-1-1-cdc-y.parquet.partial");
        let part = dir.path().join("cdc-z.parquet");
        for p in [&old, &fresh, &part] {
            std::fs::write(p, b"x").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for p in [&old, &part] {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(two_hours_ago)
                .unwrap();
        }
        sweep_stale_uploads(dir.path());
        assert!(!old.exists(), "a stale upload stays");
        assert!(fresh.exists(), "an upload in progress was removed");
        assert!(part.exists(), "a part was removed");
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn parts_are_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let dest = LocalDestination::new(&dir.path().join("out")).unwrap();
        let src = dir.path().join("src");
        fs::write(&src, b"one").unwrap();
        rt().block_on(async {
            dest.put_part("t/a.parquet", &src).await.unwrap();
            fs::write(&src, b"two").unwrap();
            let err = dest.put_part("t/a.parquet", &src).await.unwrap_err();
            assert_eq!(err.code(), Code::DestinationExists);
            assert_eq!(dest.get("t/a.parquet").await.unwrap().unwrap(), b"one");
            assert_eq!(
                dest.list("t/").await.unwrap(),
                vec!["t/a.parquet".to_string()]
            );
        });
    }

    #[test]
    fn markers_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let dest = LocalDestination::new(dir.path()).unwrap();
        rt().block_on(async {
            dest.put_marker("t/_SUCCESS", b"1").await.unwrap();
            dest.put_marker("t/_SUCCESS", b"2").await.unwrap();
            assert_eq!(dest.get("t/_SUCCESS").await.unwrap().unwrap(), b"2");
            assert_eq!(dest.get("t/missing").await.unwrap(), None);
        });
    }

    #[test]
    fn a_local_directory_has_no_s3_object() {
        let dir = tempfile::tempdir().unwrap();
        let dest = LocalDestination::new(dir.path()).unwrap();
        assert_eq!(dest.s3_object("_baseline/chunks-j.json").unwrap(), None);
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let dest = LocalDestination::new(dir.path()).unwrap();
        for key in ["../x", "a//b", "", "a/./b"] {
            assert!(dest.path_of(key).is_err(), "{key}");
        }
    }
}
