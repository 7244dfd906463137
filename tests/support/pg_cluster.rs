//! A private PostgreSQL cluster of one test (initdb into a temporary directory, its own
//! port), made with the stack's PostgreSQL 18 binaries (`SLUICE_TEST_PG18_BIN`), for what
//! the shared servers must not see: a promotion, a server-wide setting. As root (CI) the
//! server runs as user `postgres`. Stopped and removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// One server: its data directory, port and binaries.
pub struct Cluster {
    bin: PathBuf,
    /// Holds the data directory; removed on drop.
    home: tempfile::TempDir,
    pub port: u16,
}

/// A port nothing listens on now (the kernel's choice).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A command running a server binary, as `postgres` when we are root (PostgreSQL refuses
/// root).
fn command(bin: &Path, program: &str) -> Command {
    let path = bin.join(program);
    let mut cmd = if root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&path);
        c
    } else {
        Command::new(&path)
    };
    cmd.current_dir("/");
    cmd
}

/// Runs a server binary to its end; panics with its output when it fails.
fn run(bin: &Path, program: &str, args: &[&str]) -> Output {
    let out = command(bin, program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Cluster {
    /// A home directory the server's user owns.
    fn home() -> tempfile::TempDir {
        let home = tempfile::Builder::new()
            .prefix("sluice-pg-cluster-")
            .tempdir()
            .unwrap();
        if root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(home.path())
                .status()
                .unwrap();
            assert!(status.success());
        }
        home
    }

    fn data(&self) -> PathBuf {
        self.home.path().join("data")
    }

    /// A new primary (initdb, trust auth incl. replication from 127.0.0.1) with the
    /// stack's settings plus `settings` (postgresql.conf lines), started.
    pub fn primary(bin: &Path, settings: &str) -> Cluster {
        let cluster = Cluster {
            bin: bin.to_owned(),
            home: Cluster::home(),
            port: free_port(),
        };
        let data = cluster.data();
        run(
            bin,
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
        );
        cluster.configure(settings);
        cluster.start();
        cluster
    }

    /// A physical standby of `primary` (pg_basebackup -R through the physical slot
    /// `slot`, created here), streaming, with `settings`; started.
    pub fn standby_of(primary: &Cluster, slot: &str, settings: &str) -> Cluster {
        primary.sql(
            "postgres",
            &format!("SELECT pg_create_physical_replication_slot('{slot}', true)"),
        );
        let cluster = Cluster {
            bin: primary.bin.clone(),
            home: Cluster::home(),
            port: free_port(),
        };
        let data = cluster.data();
        run(
            &primary.bin,
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                "postgres",
                "-D",
                data.to_str().unwrap(),
                "-R",
                "-X",
                "stream",
                "-S",
                slot,
                "-c",
                "fast",
            ],
        );
        // -R's primary_conninfo has no dbname, which slot synchronization needs.
        let auto = data.join("postgresql.auto.conf");
        std::fs::write(&auto, "").unwrap();
        cluster.configure(&format!(
            "primary_conninfo = 'host=127.0.0.1 port={port} user=postgres dbname=postgres application_name={slot}'\n\
             primary_slot_name = '{slot}'\nhot_standby = on\nhot_standby_feedback = on\n{settings}",
            port = primary.port
        ));
        cluster.start();
        cluster
    }

    /// Appends the stack's settings (those of `infra/local/postgres.sh`) and `settings`
    /// to postgresql.conf, and a trust pg_hba.conf.
    fn configure(&self, settings: &str) {
        let data = self.data();
        let socket = self.home.path();
        let conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{socket}'\n\
             wal_level = logical\nmax_replication_slots = 16\nmax_wal_senders = 8\n\
             track_commit_timestamp = on\nfsync = off\nfull_page_writes = off\n{settings}\n",
            port = self.port,
            socket = socket.display(),
        );
        let mut old = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        old.push_str(&conf);
        std::fs::write(data.join("postgresql.conf"), old).unwrap();
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhost all all 127.0.0.1/32 trust\n\
             local replication all trust\nhost replication all 127.0.0.1/32 trust\n",
        )
        .unwrap();
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data();
        let log = self.home.path().join("postgres.log");
        let mut all = vec!["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap()];
        all.extend_from_slice(args);
        run(&self.bin, "pg_ctl", &all);
    }

    pub fn start(&self) {
        self.pg_ctl(&["-w", "-t", "60", "start"]);
    }

    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "-w", "stop"]);
    }

    /// Promotes a standby and waits until it accepts writes.
    pub fn promote(&self) {
        self.pg_ctl(&["-w", "promote"]);
        self.wait_for("postgres", "SELECT NOT pg_is_in_recovery()", "t");
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs SQL in database `db` (psql; panics on failure).
    pub fn sql(&self, db: &str, sql: &str) -> String {
        super::psql(&self.url(db), sql)
    }

    /// Waits (60 s at most) until `sql` in `db` answers `want`.
    pub fn wait_for(&self, db: &str, sql: &str, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = super::psql_output(&self.url(db), sql);
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{sql} never answered {want:?} on port {} (last: {:?})",
                self.port,
                String::from_utf8_lossy(&out.stdout)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = command(&self.bin, "pg_ctl")
            .args([
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
    }
}

/// The PostgreSQL 18 binaries (`SLUICE_TEST_PG18_BIN`), or `None` (skipped; under CI a
/// failure).
pub fn pg18_bin() -> Option<PathBuf> {
    super::service_url("SLUICE_TEST_PG18_BIN").map(PathBuf::from)
}
