//! Shared test support: service discovery (fail under CI when a service is missing,
//! skip loudly otherwise), one private database per test, running the real `sluice`
//! binary, and reading its parts back.

#![allow(dead_code)]

pub mod asl;
#[macro_use]
pub mod aws;
pub mod black_hole;
pub mod current_state;
pub mod dated;
pub mod lambda_api;
pub mod pg_cluster;
pub mod pipe;
pub mod proxy;
pub mod readers;
pub mod replica;
pub mod tmpfs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub mod pg_proxy;

/// True when running under CI (`CI` is `true`, `TRUE` or `1`): a missing service or tool
/// is then a failure, never a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| matches!(v.as_str(), "true" | "TRUE" | "1"))
}

/// Says on the terminal that the running test skipped its work and why. Written straight
/// to the stderr handle: libtest captures `eprintln!`, and a skip must show in the output
/// of a plain `cargo test`, not only with `--nocapture`.
pub fn skipped(why: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
}

/// The URL of a required service from `var`, or `None` (with a loud note) when it is not
/// configured outside CI. Under CI a missing service fails the test.
pub fn service_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if in_ci() => {
            panic!(
                "{var} is not set but CI is set: the service this test needs is missing (run `make test`)"
            )
        }
        _ => {
            skipped(&format!(
                "{var} is not set; run `make test` to start the local stack"
            ));
            None
        }
    }
}

/// Returns the PostgreSQL admin URL or skips the test.
#[macro_export]
macro_rules! pg_or_skip {
    () => {
        match $crate::support::service_url("SLUICE_TEST_PG_URL") {
            Some(url) => url,
            None => return,
        }
    };
}

/// Returns the PostgreSQL 18 admin URL or skips the test.
#[macro_export]
macro_rules! pg18_or_skip {
    () => {
        match $crate::support::service_url("SLUICE_TEST_PG18_URL") {
            Some(url) => url,
            None => return,
        }
    };
}

/// One `#[test]` per PostgreSQL major of the stack for each case `fn case(admin: &str)`
/// of the calling module: `<module>::pg15::<case>` (`SLUICE_TEST_PG_URL`) and
/// `<module>::pg18::<case>` (`SLUICE_TEST_PG18_URL`). A case that differs by major asks
/// the server ([`pg_major`]).
#[macro_export]
macro_rules! on_each_pg_major {
    ($($case:ident),* $(,)?) => {
        /// The cases against PostgreSQL 15.
        mod pg15 {
            $(#[test] fn $case() { super::$case(&pg_or_skip!()); })*
        }
        /// The cases against PostgreSQL 18.
        mod pg18 {
            $(#[test] fn $case() { super::$case(&pg18_or_skip!()); })*
        }
    };
}

/// The server's major version (`server_version_num / 10000`).
pub fn pg_major(url: &str) -> u32 {
    psql(
        url,
        "SELECT current_setting('server_version_num')::int / 10000",
    )
    .parse()
    .expect("a version number")
}

/// A fresh database for one test, dropped (with its slots) at the end.
pub struct TestDb {
    pub admin_url: String,
    pub name: String,
    pub url: String,
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}_{}_{nanos:x}", std::process::id())
}

impl TestDb {
    /// `t (id, v)` as `id=v,…` in id-text order (`NULL` for a null `v`), the form of
    /// [`replayed_text`] with key `id`.
    pub fn id_v_text(&self) -> String {
        self.sql("SELECT coalesce(string_agg(id || '=' || coalesce(v, 'NULL'), ',' ORDER BY id::text), '') FROM t")
    }

    pub fn new(admin_url: &str, test: &str) -> TestDb {
        let name = unique(&format!("t_{test}"));
        psql(admin_url, &format!("CREATE DATABASE {name}"));
        let url = with_database(admin_url, &name);
        TestDb {
            admin_url: admin_url.to_owned(),
            name,
            url,
        }
    }

    /// Runs SQL in the test database; panics with psql's message on failure.
    pub fn sql(&self, sql: &str) -> String {
        psql(&self.url, sql)
    }

    /// Runs SQL that is expected to fail; returns stderr.
    pub fn sql_err(&self, sql: &str) -> String {
        let out = psql_output(&self.url, sql);
        assert!(!out.status.success(), "expected failure: {sql}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = psql_output(
            &self.admin_url,
            &format!(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{}'",
                self.name
            ),
        );
        let _ = psql_output(
            &self.admin_url,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// `postgres://…/old` → `postgres://…/<db>`.
pub fn with_database(url: &str, db: &str) -> String {
    let mut parsed = url::Url::parse(url).expect("service URL");
    parsed.set_path(&format!("/{db}"));
    parsed.to_string()
}

pub fn psql_output(url: &str, sql: &str) -> Output {
    Command::new("psql")
        .args([
            url,
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .expect("psql runs")
}

pub fn psql(url: &str, sql: &str) -> String {
    let out = psql_output(url, sql);
    assert!(
        out.status.success(),
        "psql failed: {sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A job directory: config file, output and state, removed at the end.
pub struct Job {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub url_env: (String, String),
}

impl Job {
    /// A PostgreSQL job on `db` capturing `tables`, with `extra` YAML appended.
    pub fn postgres(db: &TestDb, tables: &[&str], extra: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let slot = format!("s_{}", db.name);
        let yaml = format!(
            "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [{tables}]\n  postgres: {{ slot: {slot}, publication: p_{job} }}\n\
             destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n{extra}\n",
            job = db.name,
            tables = tables.join(", "),
            out = dir.path().join("out").display(),
            state = dir.path().join("state").display(),
        );
        let config = dir.path().join("sluice.yaml");
        std::fs::write(&config, yaml).unwrap();
        Job {
            dir,
            config,
            url_env: ("SLUICE_TEST_SOURCE_URL".into(), db.url.clone()),
        }
    }

    pub fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Runs `sluice <args> --config <file>` with extra environment.
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(args, env);
        let out = cmd.output().expect("sluice runs");
        Run::from(out)
    }

    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(args)
            .arg("--config")
            .arg(&self.config)
            .env(&self.url_env.0, &self.url_env.1)
            .env_remove("SLUICE_FAULT")
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs drains until one is not `skipped` (a crashed or cut-off run keeps its lease
    /// until it expires) and returns that run's summary; every run must exit 0.
    pub fn drain_when_free(&self) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let run = self.run(&["drain"], &[]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let summary = run.summary();
            if summary["status"] != "skipped" {
                return summary;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the lease was never freed"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Runs `sluice <args>`, killing it if it has not ended within `limit`: the run, or
    /// `None` when it had to be killed (it hung).
    pub fn run_within(&self, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Option<Run> {
        let child = self
            .command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_within(child, std::time::Instant::now() + limit)
    }

    /// [`Job::run_interrupted`], killing the process if it has not ended within `limit`
    /// of its start: the run, or `None` when it had to be killed (it hung).
    pub fn run_interrupted_within(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        needle: &str,
        meanwhile: impl FnOnce(),
        limit: Duration,
    ) -> Option<Run> {
        let deadline = std::time::Instant::now() + limit;
        let mut child = self
            .command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_line(child.stderr.take().unwrap(), needle);
        meanwhile();
        wait_within(child, deadline)
    }

    /// Adds `line` (YAML, e.g. `timeouts: { read_seconds: 2 }`) to the config's `source:`
    /// block, whose last key is written just before `destination:`.
    pub fn add_source_setting(&self, line: &str) {
        let yaml = std::fs::read_to_string(&self.config).unwrap();
        assert!(yaml.contains("\ndestination:"), "{yaml}");
        let yaml = yaml.replacen("\ndestination:", &format!("\n  {line}\ndestination:"), 1);
        std::fs::write(&self.config, yaml).unwrap();
    }

    /// The job's local state file (`state: { type: local }`): `<state>/<job>.json`.
    pub fn local_state_file(&self) -> PathBuf {
        let dir = self.dir.path().join("state");
        let files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        assert_eq!(files.len(), 1, "one job's state in {dir:?}: {files:?}");
        files.into_iter().next().unwrap()
    }

    /// The job's local state document.
    pub fn local_state(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.local_state_file()).unwrap()).unwrap()
    }

    /// Replaces the job's local state document (to simulate what a test cannot cause).
    pub fn write_local_state(&self, state: &serde_json::Value) {
        std::fs::write(self.local_state_file(), state.to_string()).unwrap();
    }

    /// Runs `sluice <args>`; as soon as its log shows a line containing `needle`, runs
    /// `meanwhile` (cut a connection, …) while the process goes on, then waits for it.
    pub fn run_interrupted(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        needle: &str,
        meanwhile: impl FnOnce(),
    ) -> Run {
        let mut child = self
            .command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_line(child.stderr.take().unwrap(), needle);
        meanwhile();
        Run::from(child.wait_with_output().unwrap())
    }

    /// A drain that must succeed; returns its summary.
    pub fn drain(&self) -> serde_json::Value {
        let run = self.run(&["drain"], &[]);
        assert_eq!(run.code, 0, "drain failed:\n{}", run.stderr);
        run.summary()
    }

    /// Every change row of `table` across all parts, in (`__pos`, `__seq`) order.
    pub fn rows(&self, table: &str) -> Vec<Row> {
        read_rows(&self.out().join(table), "cdc-")
    }
}

/// The result of one `sluice` process.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// The one JSON line on stdout.
    pub fn summary(&self) -> serde_json::Value {
        let lines: Vec<&str> = self
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected exactly one stdout line, got: {}",
            self.stdout
        );
        serde_json::from_str(lines[0]).expect("summary is JSON")
    }

    /// The error code of a failed run.
    pub fn error_code(&self) -> String {
        self.summary()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// Waits for `child` until `deadline`, killing it past that: its run, or `None` when it
/// had to be killed.
fn wait_within(mut child: std::process::Child, deadline: std::time::Instant) -> Option<Run> {
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(Run::from(child.wait_with_output().unwrap()));
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One output row: column name → rendered cell (`None` for NULL).
pub type Row = BTreeMap<String, Option<String>>;

/// A manifest's (or schema history shape's) column list as `name:type` strings.
pub fn column_types(columns: &serde_json::Value) -> Vec<String> {
    columns
        .as_array()
        .expect("a column list")
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap()
            )
        })
        .collect()
}

/// The folder of a table's current baseline parts (`<table>/snapshot/<plan id>/`), given
/// the table's output directory: the folder the snapshot's `_manifest.json` names once the
/// baseline is done, before that the newest plan folder (plan ids start with the
/// anchoring run's id, so they sort by time). `snapshot/` itself when there is none.
pub fn snapshot_dir(table_dir: &Path) -> PathBuf {
    let snapshot = table_dir.join("snapshot");
    if let Ok(bytes) = std::fs::read(snapshot.join("_manifest.json")) {
        let manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        if let Some(key) = manifest["parts"][0]["key"].as_str() {
            let folder = table_dir.parent().unwrap().join(key);
            return folder.parent().unwrap().to_owned();
        }
    }
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&snapshot)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    folders.sort();
    folders.pop().unwrap_or(snapshot)
}

/// Every row of a table's output directory `dir` — the current baseline
/// ([`snapshot_dir`]`/part-*`) and the changes (`cdc-*`) — in replay order: by `__pos`,
/// then `__seq` as a number (the snapshot's `__pos` sorts before every change of the
/// stream).
pub fn baseline_and_changes(dir: &Path) -> Vec<Row> {
    let mut rows = read_rows(&snapshot_dir(dir), "part-");
    rows.extend(read_rows(dir, "cdc-"));
    rows.sort_by_key(|r| {
        (
            r["__pos"].clone(),
            r["__seq"].as_deref().map(|s| s.parse::<i64>().unwrap()),
        )
    });
    rows
}

/// The replayed state of a table's output directory `dir` (baseline + changes) as
/// `k1|k2=v,…` in key-text order, `v` the column `v` (`NULL` when null): the text the
/// baseline suites compare with the source's own rendering.
pub fn replayed_text(dir: &Path, key: &[&str]) -> String {
    replay(&baseline_and_changes(dir), key)
        .values()
        .map(|r| {
            let k: Vec<&str> = key.iter().map(|c| r[*c].as_deref().unwrap()).collect();
            format!("{}={}", k.join("|"), r["v"].as_deref().unwrap_or("NULL"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads every `<prefix>*.parquet` in `dir`, sorted by (`__pos`, `__seq`).
pub fn read_rows(dir: &Path, prefix: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for path in part_files(dir, prefix) {
        for batch in read_batches(&path) {
            rows.extend(render(&batch));
        }
    }
    rows.sort_by(|a, b| {
        let key = |r: &Row| {
            (
                r["__pos"].clone(),
                r["__seq"].as_deref().map(|s| s.parse::<i64>().unwrap()),
            )
        };
        key(a).cmp(&key(b))
    });
    rows
}

pub fn part_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with(prefix) && name.ends_with(".parquet")
            })
            .collect(),
        Err(_) => vec![],
    };
    files.sort();
    files
}

pub fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    reader.map(|b| b.unwrap()).collect()
}

pub fn render(batch: &RecordBatch) -> Vec<Row> {
    let options = arrow_cast::display::FormatOptions::default();
    let formatters: Vec<_> = batch
        .columns()
        .iter()
        .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
        .collect();
    let schema = batch.schema();
    (0..batch.num_rows())
        .map(|i| {
            schema
                .fields()
                .iter()
                .enumerate()
                .map(|(c, field)| {
                    let value = if batch.column(c).is_null(i) {
                        None
                    } else {
                        Some(formatters[c].value(i).to_string())
                    };
                    (field.name().clone(), value)
                })
                .collect()
        })
        .collect()
}

/// Asserts that every duplicate (same `__pos`, `__seq`) is identical to its original —
/// at-least-once, never a different value at one position — and returns how many
/// distinct changes `rows` hold.
pub fn distinct_changes(rows: &[Row]) -> usize {
    let mut by_position = BTreeMap::new();
    for row in rows {
        let key = (row["__pos"].clone(), row["__seq"].clone());
        if let Some(previous) = by_position.insert(key.clone(), row) {
            assert_eq!(
                previous, row,
                "a duplicate at {key:?} differs from its original"
            );
        }
    }
    by_position.len()
}

/// Latest state per key (docs/output.md's latest-state query): the row with the highest
/// (`__pos`, `__seq`) per key, deletes removed, and nothing from before the last
/// `truncate` or `rebaseline` row (neither is a row of the table). `rows` must be sorted.
pub fn replay(rows: &[Row], key: &[&str]) -> BTreeMap<Vec<Option<String>>, Row> {
    let mut state = BTreeMap::new();
    for row in rows {
        let k: Vec<Option<String>> = key.iter().map(|c| row[*c].clone()).collect();
        if epoch(row) {
            state.clear();
        } else if row["__op"].as_deref() == Some("delete") {
            state.remove(&k);
        } else {
            state.insert(k, row.clone());
        }
    }
    state
}

/// True for a row that drops every earlier row of its table: a `truncate` or a
/// re-baseline's epoch marker (`rebaseline`) — docs/output.md, Truncate and re-baseline.
pub fn epoch(row: &Row) -> bool {
    matches!(row["__op"].as_deref(), Some("truncate" | "rebaseline"))
}

/// The full replay rule (docs/output.md, "Unlogged values"; `rows` sorted): like [`replay`],
/// and a column listed in a row's `__unlogged` keeps the value the key held before; the
/// insert half of a key change (no row for its key yet) takes it from the row the delete
/// half — the change just before it at the same `__pos` — removed; a `truncate` or
/// `rebaseline` row drops every earlier row. Panics when neither
/// holds the value.
pub fn replay_carrying_unlogged(rows: &[Row], key: &[&str]) -> BTreeMap<Vec<Option<String>>, Row> {
    let mut state: BTreeMap<Vec<Option<String>>, Row> = BTreeMap::new();
    let mut deleted: Option<(Option<String>, i64, Row)> = None;
    let seq = |r: &Row| r["__seq"].as_deref().unwrap().parse::<i64>().unwrap();
    for row in rows {
        let k: Vec<Option<String>> = key.iter().map(|c| row[*c].clone()).collect();
        if epoch(row) {
            state.clear();
            deleted = None;
            continue;
        }
        if row["__op"].as_deref() == Some("delete") {
            deleted = state
                .remove(&k)
                .map(|old| (row["__pos"].clone(), seq(row), old));
            continue;
        }
        let mut image = row.clone();
        let listed = row["__unlogged"].as_deref().unwrap_or("[]");
        let listed = listed.trim_start_matches('[').trim_end_matches(']');
        for column in listed.split(", ").filter(|c| !c.is_empty()) {
            let earlier = match state.get(&k) {
                Some(previous) => previous,
                None => match &deleted {
                    Some((pos, s, old)) if *pos == row["__pos"] && s + 1 == seq(row) => old,
                    _ => panic!("{column} of {k:?} is unlogged and no earlier row holds it"),
                },
            };
            image.insert(column.to_owned(), earlier[column].clone());
        }
        state.insert(k, image);
    }
    state
}

/// `(op, value of column)` for each row, a compact form for assertions.
pub fn ops(rows: &[Row], column: &str) -> Vec<(String, Option<String>)> {
    rows.iter()
        .map(|r| (r["__op"].clone().unwrap(), r.get(column).cloned().flatten()))
        .collect()
}

/// Reads `stream` line by line until a line contains `needle` (panics after 60 s), then
/// keeps draining it in the background so the child never blocks on a full pipe.
pub fn wait_for_line(stream: impl std::io::Read + Send + 'static, needle: &str) {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = needle.to_owned();
    std::thread::spawn(move || {
        let mut seen = false;
        for line in std::io::BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if !seen && line.contains(&wanted) {
                seen = true;
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("never saw a line containing {needle:?}"));
}

/// Measures a child's own peak RSS. Spawned straight from this test process, a child's
/// `ru_maxrss` would include the test process's resident memory (Linux keeps the peak of
/// the memory a process had before its exec), and the one test binary runs memory-hungry
/// tests side by side. So the command runs under a small python3 parent that forks and
/// execs it, and reports the child's peak from wait4(2).
pub struct PeakRss {
    /// The wrapped command: set its stdio, then spawn it and pass the child to [`wait`].
    ///
    /// [`wait`]: PeakRss::wait
    pub command: Command,
    report: tempfile::TempPath,
}

/// The measuring parent the benchmarks use too: it forks and execs the command, and writes
/// the child's wall seconds, CPU seconds and peak RSS (KiB).
const CHILD_USAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/child_usage.py");

impl PeakRss {
    /// `cmd` (program, arguments, environment, directory) under the measuring parent.
    pub fn wrap(cmd: &Command) -> PeakRss {
        let report = tempfile::NamedTempFile::new().unwrap().into_temp_path();
        let mut command = Command::new("python3");
        command
            .arg("-S")
            .arg(CHILD_USAGE)
            .arg(&report)
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .stdin(Stdio::null());
        for (key, value) in cmd.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some(dir) = cmd.get_current_dir() {
            command.current_dir(dir);
        }
        PeakRss { command, report }
    }

    /// Waits for `child` (spawned from [`PeakRss::command`]) and returns its exit status
    /// and the measured command's own peak RSS in KiB.
    pub fn wait(self, mut child: std::process::Child) -> (std::process::ExitStatus, i64) {
        let status = child.wait().unwrap();
        let usage = std::fs::read_to_string(&self.report).unwrap_or_default();
        let peak = usage
            .split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .parse()
            .unwrap_or_else(|_| panic!("no peak RSS reported ({status}): {usage:?}"));
        (status, peak)
    }
}

/// Returns the MySQL/MariaDB admin URL or skips the test.
#[macro_export]
macro_rules! mysql_or_skip {
    () => {
        match $crate::support::service_url("SLUICE_TEST_MYSQL_URL") {
            Some(url) => url,
            None => return,
        }
    };
}

/// A cross-process lock on the shared MariaDB's binlog: every MySQL test holds it shared;
/// a test that rewrites the binlog (PURGE, RESET MASTER, a global setting) holds it
/// exclusively, so it never pulls the binlog from under another test (in this or any
/// other test process on the machine).
pub struct BinlogLock(std::fs::File);

impl BinlogLock {
    pub fn shared() -> BinlogLock {
        BinlogLock::take(libc::LOCK_SH)
    }

    pub fn exclusive() -> BinlogLock {
        BinlogLock::take(libc::LOCK_EX)
    }

    fn take(mode: libc::c_int) -> BinlogLock {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join("sluice-test-mariadb-binlog.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("lock file");
        // SAFETY: flock on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), mode) };
        assert_eq!(rc, 0, "flock failed");
        BinlogLock(file)
    }
}

/// A fresh MySQL/MariaDB database for one test and a least-privilege source user for it
/// (exactly the grants of infra/sql/mysql/grants.sql), both dropped at the end.
pub struct TestMysqlDb {
    pub admin_url: String,
    pub name: String,
    /// The admin's URL with the test database (for setup SQL).
    pub url: String,
    /// The least-privilege user's URL with the test database: what jobs drain with.
    pub source_url: String,
    user: String,
    _lock: Option<BinlogLock>,
}

impl TestMysqlDb {
    /// A database for `test`, holding the binlog lock shared.
    pub fn new(admin_url: &str, test: &str) -> TestMysqlDb {
        TestMysqlDb::with_lock(admin_url, test, BinlogLock::shared())
    }

    /// A database for a test that rewrites the binlog (holds the lock exclusively).
    pub fn exclusive(admin_url: &str, test: &str) -> TestMysqlDb {
        TestMysqlDb::with_lock(admin_url, test, BinlogLock::exclusive())
    }

    fn with_lock(admin_url: &str, test: &str, lock: BinlogLock) -> TestMysqlDb {
        let name = unique(&format!("t_{test}"));
        let user = unique("lp");
        let password = format!("pw-{user}");
        let host = url::Url::parse(admin_url)
            .expect("mysql URL")
            .host_str()
            .unwrap_or("127.0.0.1")
            .to_owned();
        mysql_cli(
            admin_url,
            &format!(
                "CREATE DATABASE {name};
                 CREATE USER '{user}'@'{host}' IDENTIFIED BY '{password}';
                 GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'{host}';
                 GRANT BINLOG MONITOR ON *.* TO '{user}'@'{host}';
                 GRANT SELECT ON {name}.* TO '{user}'@'{host}';"
            ),
        );
        let mut source = url::Url::parse(&with_database(admin_url, &name)).unwrap();
        source.set_username(&user).unwrap();
        source.set_password(Some(&password)).unwrap();
        TestMysqlDb {
            admin_url: admin_url.to_owned(),
            url: with_database(admin_url, &name),
            source_url: source.to_string(),
            user: format!("'{user}'@'{host}'"),
            name,
            _lock: Some(lock),
        }
    }

    /// Runs SQL in the test database; panics with the client's message on failure.
    pub fn sql(&self, sql: &str) -> String {
        mysql_cli(&self.url, sql)
    }

    /// Runs SQL as the admin, without a default database.
    pub fn admin(&self, sql: &str) -> String {
        mysql_cli(&self.admin_url, sql)
    }
}

impl Drop for TestMysqlDb {
    fn drop(&mut self) {
        let _ = mysql_cli_output(
            &self.admin_url,
            &format!(
                "DROP DATABASE IF EXISTS {}; DROP USER IF EXISTS {}",
                self.name, self.user
            ),
        );
    }
}

/// The `mariadb` command-line client (installed by infra/local/mariadb.sh).
pub fn mysql_cli_output(url: &str, sql: &str) -> Output {
    let parsed = url::Url::parse(url).expect("mysql URL");
    let mut cmd = Command::new("mariadb");
    cmd.arg("--no-defaults")
        .arg("--protocol=TCP")
        .arg(format!(
            "--host={}",
            parsed.host_str().unwrap_or("127.0.0.1")
        ))
        .arg(format!("--port={}", parsed.port().unwrap_or(3306)))
        .arg(format!("--user={}", parsed.username()))
        .args(["--batch", "--skip-column-names", "--raw"]);
    if let Some(password) = parsed.password() {
        cmd.env("MYSQL_PWD", password);
    }
    let db = parsed.path().trim_start_matches('/');
    if !db.is_empty() {
        cmd.arg(format!("--database={db}"));
    }
    cmd.arg("-e")
        .arg(sql)
        .output()
        .expect("the mariadb client runs")
}

pub fn mysql_cli(url: &str, sql: &str) -> String {
    let out = mysql_cli_output(url, sql);
    assert!(
        out.status.success(),
        "mariadb failed: {sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A global server variable set for one (exclusive) test, restored on drop even when the
/// test fails.
pub struct GlobalSetting<'a> {
    db: &'a TestMysqlDb,
    name: &'static str,
    old: String,
}

impl<'a> GlobalSetting<'a> {
    pub fn set(db: &'a TestMysqlDb, name: &'static str, value: &str) -> Self {
        // SHOW prints booleans as ON/OFF, which SET accepts back (SELECT gives 0/1).
        let shown = db.admin(&format!("SHOW GLOBAL VARIABLES LIKE '{name}'"));
        let old = shown
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        db.admin(&format!("SET GLOBAL {name} = {}", literal(value)));
        GlobalSetting { db, name, old }
    }
}

impl Drop for GlobalSetting<'_> {
    fn drop(&mut self) {
        self.db.admin(&format!(
            "SET GLOBAL {} = {}",
            self.name,
            literal(&self.old)
        ));
    }
}

/// A SET value: numbers bare, words quoted.
pub fn literal(value: &str) -> String {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        value.to_owned()
    } else {
        format!("'{value}'")
    }
}

/// The binlog file the server writes now.
pub fn current_binlog_file(db: &TestMysqlDb) -> String {
    db.admin("SHOW MASTER STATUS")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

impl Job {
    /// A MySQL/MariaDB job on `db` capturing `tables`; `mysql` is the body of
    /// `source.mysql` (empty: none), `extra` YAML is appended.
    pub fn mysql(db: &TestMysqlDb, tables: &[&str], mysql: &str, extra: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let mysql = if mysql.is_empty() {
            String::new()
        } else {
            format!("  mysql: {mysql}\n")
        };
        let yaml = format!(
            "job: {job}\nsource:\n  url_env: SLUICE_TEST_SOURCE_URL\n  tables: [{tables}]\n{mysql}\
             destination: {{ type: local, path: {out} }}\nstate: {{ type: local, path: {state} }}\n{extra}\n",
            job = db.name,
            tables = tables.join(", "),
            out = dir.path().join("out").display(),
            state = dir.path().join("state").display(),
        );
        let config = dir.path().join("sluice.yaml");
        std::fs::write(&config, yaml).unwrap();
        Job {
            dir,
            config,
            url_env: ("SLUICE_TEST_SOURCE_URL".into(), db.source_url.clone()),
        }
    }

    /// The job's state file (one JSON document per job).
    pub fn state_file(&self) -> PathBuf {
        let dir = self.dir.path().join("state");
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .expect("a state file")
    }
}

/// A TCP proxy in front of a MySQL server that forwards everything except the
/// replication commands (COM_REGISTER_SLAVE, COM_BINLOG_DUMP), which it answers with
/// `ERROR 1047 Unknown command` — what a query proxy (ProxySQL …) does. Returns its port.
pub fn refusing_replication_proxy(upstream: &str) -> u16 {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = upstream.to_owned();
    std::thread::spawn(move || {
        for client in listener.incoming().take(16) {
            let Ok(mut client) = client else { break };
            let Ok(server) = TcpStream::connect(&upstream) else {
                break;
            };
            let (mut s_read, mut c_write) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
            });
            let mut server = server;
            std::thread::spawn(move || {
                loop {
                    let mut header = [0u8; 4];
                    if client.read_exact(&mut header).is_err() {
                        break;
                    }
                    let len = usize::from(header[0])
                        | usize::from(header[1]) << 8
                        | usize::from(header[2]) << 16;
                    let mut payload = vec![0u8; len];
                    if client.read_exact(&mut payload).is_err() {
                        break;
                    }
                    if header[3] == 0 && matches!(payload.first(), Some(0x12 | 0x15)) {
                        let mut err = vec![0xff, 0x17, 0x04, b'#'];
                        err.extend_from_slice(b"08S01Unknown command");
                        let mut packet = vec![err.len() as u8, 0, 0, 1];
                        packet.extend_from_slice(&err);
                        let _ = client.write_all(&packet);
                        let _ = client.shutdown(Shutdown::Both);
                        let _ = server.shutdown(Shutdown::Both);
                        break;
                    }
                    if server.write_all(&header).is_err() || server.write_all(&payload).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// Runs `sluice baseline` of `table` crashed by `fault` after `done` chunks, runs `between` (writes
/// to the source while the baseline is incomplete), then resumes it; asserts the resumed
/// run reads only the chunks not done and leaves one part per chunk. Returns the resumed
/// run's summary.
pub fn baseline_crash_then_resume(
    job: &Job,
    table: &str,
    fault: &str,
    done: u64,
    between: impl FnOnce(),
) -> serde_json::Value {
    let crashed = job.run(&["baseline"], &[("SLUICE_FAULT", fault)]);
    assert_ne!(crashed.code, 0, "{}", crashed.stderr);
    assert!(
        crashed.stderr.contains("fault injected"),
        "{}",
        crashed.stderr
    );
    let snapshot = job.out().join(table).join("snapshot");
    assert!(!snapshot.join("_SUCCESS").exists());
    between();
    let resumed = job.run(&["baseline"], &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let summary = resumed.summary();
    let chunks = summary["chunks"].as_u64().unwrap();
    assert!(chunks >= 5, "{summary}");
    assert_eq!(
        summary["chunks_read"].as_u64().unwrap(),
        chunks - done,
        "only the chunks not done are read"
    );
    assert_eq!(
        part_files(&snapshot_dir(&job.out().join(table)), "part-").len() as u64,
        chunks
    );
    summary
}

/// The local state's lease holder (`null` when free).
pub fn lease_owner(job: &Job) -> serde_json::Value {
    job.local_state()["lease_owner"].clone()
}

/// The local state's checkpoint.
pub fn checkpoint(job: &Job) -> serde_json::Value {
    job.local_state()["checkpoint"].clone()
}

/// Every change once (duplicates identical) and exactly `n` distinct changes.
pub fn assert_exact(rows: &[Row], n: usize) {
    let mut seen = std::collections::BTreeMap::new();
    for row in rows {
        let at = (row["__pos"].clone(), row["__seq"].clone());
        if let Some(previous) = seen.insert(at.clone(), row.clone()) {
            assert_eq!(previous, *row, "duplicate at {at:?} differs");
        }
    }
    assert_eq!(seen.len(), n, "distinct changes");
}

/// The next drain after a stopped run: drained without taking a lease over, and table
/// `t` then holds exactly `n` distinct changes.
pub fn next_drain_is_exact(job: &Job, n: usize) {
    let next = job.run(&["drain"], &[]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.summary()["status"], "drained");
    assert!(
        !next.stderr.contains("provably gone"),
        "no takeover was needed"
    );
    assert_exact(&job.rows("t"), n);
}
