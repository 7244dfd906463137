//! The local stack's MariaDB replica (infra/local/mariadb-replica.sh,
//! `SLUICE_TEST_MYSQL_REPLICA_URL`), held by one test or oracle trial at a time through a
//! cross-process lock, made a fresh clone of the shared MariaDB when taken and again when
//! released (a holder may have promoted it). Its holder also holds the primary's binlog
//! lock shared from before the clone until after the reset at release: a test that
//! rewrites the primary's binlog (RESET MASTER, PURGE) would otherwise break the
//! replication the holder's failover relies on, unnoticed — `MASTER_GTID_WAIT` on a
//! position the renumbered primary reports returns at once.

use std::os::fd::AsRawFd;
use std::path::PathBuf;

use super::{BinlogLock, mysql_cli};

/// The replica, held exclusively; reset when taken and when dropped.
pub struct MariaReplica {
    pub admin_url: String,
    _lock: std::fs::File,
    _binlog: BinlogLock,
}

impl MariaReplica {
    /// Waits for the replica and takes it.
    pub fn take(url: String) -> MariaReplica {
        MariaReplica::lock(url, libc::LOCK_EX).expect("the replica lock")
    }

    /// Takes the replica if nobody holds it.
    pub fn try_take(url: String) -> Option<MariaReplica> {
        MariaReplica::lock(url, libc::LOCK_EX | libc::LOCK_NB)
    }

    fn lock(url: String, mode: libc::c_int) -> Option<MariaReplica> {
        let path = std::env::temp_dir().join("sluice-test-mariadb-replica.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap();
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), mode) } != 0 {
            return None;
        }
        let replica = MariaReplica {
            admin_url: url,
            _lock: file,
            _binlog: BinlogLock::shared(),
        };
        replica.reset();
        Some(replica)
    }

    /// `mariadb-replica.sh reset`: a fresh clone replicating from the shared MariaDB.
    pub fn reset(&self) {
        if let Err(e) = self.try_reset() {
            panic!("{e}");
        }
    }

    fn try_reset(&self) -> Result<(), String> {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("infra/local/mariadb-replica.sh");
        let out = std::process::Command::new(script)
            .arg("reset")
            .output()
            .map_err(|e| format!("mariadb-replica.sh: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "mariadb-replica.sh reset: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    pub fn sql(&self, sql: &str) -> String {
        mysql_cli(&self.admin_url, sql)
    }

    /// Waits until the replica has applied everything the primary has written.
    pub fn catch_up(&self, primary_admin: &str) {
        let pos = mysql_cli(primary_admin, "SELECT @@gtid_binlog_pos");
        let waited = self.sql(&format!("SELECT MASTER_GTID_WAIT('{pos}', 60)"));
        assert_eq!(
            waited,
            "0",
            "the replica did not reach {pos}: {}",
            self.sql("SHOW SLAVE STATUS")
        );
    }

    /// Promotes it: replication stops, it takes the writes (after catching up).
    pub fn promote(&self, primary_admin: &str) {
        self.catch_up(primary_admin);
        self.sql("STOP SLAVE");
    }

    /// `url` (one of the primary's) with the replica's host and port.
    pub fn url_for(&self, url: &str) -> String {
        let replica = url::Url::parse(&self.admin_url).unwrap();
        let mut url = url::Url::parse(url).unwrap();
        url.set_port(replica.port()).unwrap();
        url.to_string()
    }
}

impl Drop for MariaReplica {
    /// Leaves the replica following the primary again (the next holder resets it too).
    fn drop(&mut self) {
        if let Err(e) = self.try_reset() {
            eprintln!("{e}");
        }
    }
}

/// `text` (a state document) with every MySQL checkpoint's GTID position (`;g=…`)
/// removed: a checkpoint as written before sluice recorded GTIDs.
pub fn without_gtid(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(at) = out.find(";g=") {
        let end = out[at + 1..]
            .find([';', '"'])
            .map_or(out.len(), |e| at + 1 + e);
        out.replace_range(at..end, "");
    }
    out
}
