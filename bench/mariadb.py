"""MariaDB / MySQL scenarios: a backlog in the binlog, drained by sluice and read by the
server's own binlog client.

Each scenario gets its own database `bench_<scenario>` (dropped before and after); the
captured table is `t`. The range is fixed before seeding: a first drain on an empty
backlog anchors the job's checkpoint at the end of the binlog, and the job's state and
destination directories are kept as they are then. The backlog is seeded, and per repeat:

* sluice: the anchored directories are restored, and `sluice drain` reads from the anchor
  to the binlog end it fixes at open (its summary's `to`);
* floor ("decode"): `mariadb-binlog --read-from-remote-server -v` over the same range
  (the anchor to the first measured drain's `to`), output to /dev/null — the server's
  dump plus the client's row decoding;
* floor ("transfer"): the same with `--raw` (the dump alone, written to a scratch file).
  Raw mode ignores --stop-position, so it reads on to the end of the range's last binlog
  file: at most the few events other clients appended after the range.

The binlog is shared with the test suite, so this module follows its lock protocol
(tests/support `BinlogLock`, the same lock file): seeding and measuring hold the lock
shared, so no test purges or resets the binlog under them; the purge at the end (the
binlog files the scenarios wrote, `finish`) holds it exclusively and is skipped if the
lock stays busy (`keep_binlog` skips it always). Seeding sets
`innodb_flush_log_at_trx_commit = 0` globally for its duration and restores the value it
found: the local stack syncs every commit, which would make a million commits take hours
on a shared disk. The setting changes no binlog content and no test's outcome (only
durability across a server crash), so it needs only a bench-private lock (two bench runs
must not restore each other's value), not the exclusive binlog lock.
"""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from urllib.parse import unquote, urlparse

import measure

LOCK_PATH = os.path.join(os.environ.get("TMPDIR") or "/tmp", "sluice-test-mariadb-binlog.lock")
FLUSH_LOCK_PATH = os.path.join(os.environ.get("TMPDIR") or "/tmp", "sluice-bench-mariadb-flush.lock")
LOCK_TIMEOUT_S = 1800
PURGE_LOCK_TIMEOUT_S = 120
# The oldest binlog file a scenario of this run started in (what `finish` may purge).
_first_file = None

SIX = ("CREATE TABLE t (id bigint PRIMARY KEY, n int, amount decimal(12,2), label varchar(64), "
       "at timestamp(6) NULL, flag boolean) ENGINE=InnoDB")
WIDE = ("CREATE TABLE t (id bigint PRIMARY KEY, "
        + ", ".join(f"c{i} {('text', 'int', 'decimal(18,4)', 'timestamp(6) NULL')[i % 4]}" for i in range(1, 40))
        + ") ENGINE=InnoDB")
TABLES = {"single_row_txns": SIX, "one_big_txn": SIX, "wide_rows": WIDE,
          "idle": "CREATE TABLE t (id bigint PRIMARY KEY, v text) ENGINE=InnoDB"}
SIX_VALUES = ("i, i % 1000, (i % 100000) / 100, CONCAT('label-', i), "
              "TIMESTAMP'2026-01-01 00:00:00' - INTERVAL i SECOND, i % 2 = 0")
WIDE_VALUES = ", ".join(("REPEAT(MD5(i), 8)", "i", "i / 7", "NOW(6)")[c % 4] for c in range(1, 40))
WIDE_TXN_ROWS = 1000
# Single-row transactions are written by this many sessions at once.
WRITERS = 4


class Client:
    """The `mariadb` command-line client on one server (URL: mysql://user:pw@host:port/)."""

    def __init__(self, url):
        u = urlparse(url)
        self.url = url
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 3306
        self.user = unquote(u.username or "root")
        self.env = dict(os.environ)
        if u.password:
            self.env["MYSQL_PWD"] = unquote(u.password)

    def conn_args(self):
        return ["--no-defaults", "--protocol=TCP", f"--host={self.host}", f"--port={self.port}",
                f"--user={self.user}"]

    def url_for(self, db):
        u = urlparse(self.url)
        return u._replace(path=f"/{db}").geturl()

    def _cmd(self, db):
        return ["mariadb", *self.conn_args(), "--batch", "--skip-column-names", "--raw",
                *([f"--database={db}"] if db else [])]

    def sql(self, sql, db=None):
        out = subprocess.run([*self._cmd(db), "-e", sql], capture_output=True, text=True, env=self.env)
        if out.returncode != 0:
            raise RuntimeError(f"mariadb failed: {sql[:200]}\n{out.stderr}")
        return out.stdout.strip()

    def compound(self, body, db=None):
        """Starts one `BEGIN NOT ATOMIC … END` block (loops need it); returns the process."""
        script = f"DELIMITER //\nBEGIN NOT ATOMIC {body} END//\n"
        proc = subprocess.Popen(self._cmd(db), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=self.env, text=True)
        proc.stdin.write(script)
        proc.stdin.close()
        return proc


@contextlib.contextmanager
def replica_paused():
    """The local stack's replica (`SLUICE_TEST_MYSQL_REPLICA_URL`, infra/local/services.sh)
    applies every write of the bench beside the drains it measures: its replication is
    stopped for the run and started again after, whatever happens."""
    url = os.environ.get("SLUICE_TEST_MYSQL_REPLICA_URL")
    if not url:
        yield
        return
    replica = Client(url)
    try:
        replica.sql("STOP SLAVE")
    except RuntimeError as e:
        print(f"bench: the replica's replication could not be stopped; measuring beside it ({e})", flush=True)
        yield
        return
    print("bench: the replica's replication is stopped for the run", flush=True)
    try:
        yield
    finally:
        replica.sql("START SLAVE")


def wait_all(procs):
    errors = [p.stderr.read() for p in procs if p.wait() != 0]
    if errors:
        raise RuntimeError(f"mariadb seeding failed: {errors[0]}")


@contextlib.contextmanager
def file_lock(exclusive, path=LOCK_PATH, timeout_s=LOCK_TIMEOUT_S):
    """An flock on path (default: the test suite's binlog lock), shared or exclusive; raises
    TimeoutError if it stays busy for timeout_s."""
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with open(path, "a") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the lock {path} stayed busy for {timeout_s} s") from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def version(url):
    return Client(url).sql("SELECT VERSION()")


@contextlib.contextmanager
def unsynced_commits(client):
    """`innodb_flush_log_at_trx_commit = 0` for the duration, then the value found."""
    with file_lock(exclusive=True, path=FLUSH_LOCK_PATH):
        before = int(client.sql("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit"))
        client.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 0")
        try:
            yield
        finally:
            client.sql(f"SET GLOBAL innodb_flush_log_at_trx_commit = {before}")


def seed(client, db, scenario, rows):
    with unsynced_commits(client):
        _seed(client, db, scenario, rows)


def _seed(client, db, scenario, rows):
    if scenario == "single_row_txns":
        step = -(-rows // WRITERS)
        wait_all([client.compound(
            f"DECLARE i BIGINT DEFAULT {lo}; WHILE i <= {min(lo + step - 1, rows)} DO "
            f"INSERT INTO t SELECT {SIX_VALUES}; SET i = i + 1; END WHILE;", db)
            for lo in range(1, rows + 1, step)])
    elif scenario == "one_big_txn":
        client.sql(f"INSERT INTO t SELECT {SIX_VALUES} FROM (SELECT seq AS i FROM seq_1_to_{rows}) s", db)
    elif scenario == "wide_rows":
        wait_all([client.compound(
            f"DECLARE k BIGINT DEFAULT 0; WHILE k * {WIDE_TXN_ROWS} < {rows} DO "
            f"INSERT INTO t SELECT i, {WIDE_VALUES} FROM (SELECT k * {WIDE_TXN_ROWS} + seq AS i "
            f"FROM seq_1_to_{WIDE_TXN_ROWS}) s WHERE i <= {rows}; SET k = k + 1; END WHILE;", db)])
    elif scenario == "idle":
        client.sql("CREATE TABLE noise (id int PRIMARY KEY, v text) ENGINE=InnoDB", db)
        client.sql(f"INSERT INTO noise SELECT seq, 'x' FROM seq_1_to_{rows}", db)


def parse_position(text):
    """`mysql:<file>:<offset>;f=…;e=…` (a checkpoint) → (file, offset)."""
    body = text.removeprefix("mysql:").split(";")[0]
    file, _, offset = body.rpartition(":")
    return file, int(offset)


def binlog_files(client, first, last):
    names = [line.split("\t")[0] for line in client.sql("SHOW BINARY LOGS").splitlines()]
    if first not in names or last not in names:
        raise RuntimeError(f"binlog {first}..{last} is no longer on the server (purged under the bench?)")
    return names[names.index(first):names.index(last) + 1]


def run_scenario(binary, admin_url, scenario, rows, repeat, workdir, count_instructions=False):
    global _first_file
    client = Client(admin_url)
    db = f"bench_{scenario}"
    client.sql(f"DROP DATABASE IF EXISTS {db}")
    client.sql(f"CREATE DATABASE {db}")
    try:
        with file_lock(exclusive=False):
            client.sql(TABLES[scenario], db)
            job_dir = os.path.join(workdir, f"mariadb_{scenario}")
            os.makedirs(job_dir)
            config = measure.job_config(job_dir, db, ["t"])
            env = dict(os.environ, BENCH_URL=client.url_for(db), SLUICE_LOG="warn")
            anchor = measure.drain(binary, config, env)
            start = parse_position(anchor["to"])
            _first_file = min(_first_file or start[0], start[0])
            anchored = os.path.join(workdir, f"mariadb_{scenario}.anchor")
            for sub in ("out", "state"):
                shutil.copytree(os.path.join(job_dir, sub), os.path.join(anchored, sub))
            seed_start = time.monotonic()
            seed(client, db, scenario, rows)
            seed_s = time.monotonic() - seed_start
            return _measure(binary, client, db, config, env, job_dir, anchored, scenario, rows, repeat, start, seed_s,
                            count_instructions)
    finally:
        client.sql(f"DROP DATABASE IF EXISTS {db}")


def _measure(binary, client, db, config, env, job_dir, anchored, scenario, rows, repeat, start, seed_s,
             count_instructions):
    drains, decode, transfer = [], [], []
    stop = None
    binlog_bytes = None

    def from_anchor():
        for sub in ("out", "state"):
            shutil.rmtree(os.path.join(job_dir, sub))
            shutil.copytree(os.path.join(anchored, sub), os.path.join(job_dir, sub))

    for _ in range(repeat):
        from_anchor()
        drains.append(measure.drain(binary, config, env))
        if stop is None:
            stop = parse_position(drains[0]["to"])
            files = binlog_files(client, start[0], stop[0])
            sizes = dict(line.split("\t")[:2] for line in client.sql("SHOW BINARY LOGS").splitlines())
            binlog_bytes = sum(int(sizes[f]) for f in files[:-1]) + stop[1] - start[1]
        common = ["mariadb-binlog", *client.conn_args(), "--read-from-remote-server",
                  f"--start-position={start[1]}"]
        decode_cmd = [*common, "-v", f"--stop-position={stop[1]}", *files]
        decode.append(measure.floor(decode_cmd, client.env))
        with tempfile.TemporaryDirectory(dir=job_dir) as raw_dir:
            transfer.append(measure.floor([*common, "--raw", f"--result-file={raw_dir}/", *files], client.env))
    instructions = None
    if count_instructions:
        from_anchor()
        instructions = measure.instructions(binary, config, env)
    return measure.result("mariadb", scenario, rows, seed_s, drains, {"decode": decode, "transfer": transfer},
                          {"binlog_bytes": binlog_bytes, "binlog_range": f"{start[0]}:{start[1]}..{stop[0]}:{stop[1]}",
                           "floor_rows_decoded": floor_rows(decode_cmd, client.env, db)}, instructions)


def floor_rows(cmd, env, db):
    """Rows of `db`.`t` the decode floor printed (one unmeasured run): proves its range
    holds the backlog."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            errors="replace")
    marker = f"### INSERT INTO `{db}`.`t`"
    count = sum(1 for line in proc.stdout if line.startswith(marker))
    if proc.wait() != 0:
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}")
    return count


def finish(admin_url, keep_binlog=False):
    """Rotates the binlog and purges the files before the new one, when the oldest file on
    the server is the one this run's first scenario started in (so nothing older is
    removed). Best effort: skipped, with a note, when the exclusive lock stays busy."""
    if keep_binlog or _first_file is None:
        return
    client = Client(admin_url)
    try:
        with file_lock(exclusive=True, timeout_s=PURGE_LOCK_TIMEOUT_S):
            names = [line.split("\t")[0] for line in client.sql("SHOW BINARY LOGS").splitlines()]
            if not names or names[0] != _first_file:
                print(f"bench: binlog not purged (the oldest file is {names[:1]}, not {_first_file})", file=sys.stderr)
                return
            client.sql("FLUSH BINARY LOGS")
            newest = client.sql("SHOW MASTER STATUS").split("\t")[0]
            client.sql(f"PURGE BINARY LOGS TO '{newest}'")
    except TimeoutError as e:
        print(f"bench: binlog not purged: {e}", file=sys.stderr)
