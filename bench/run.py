#!/usr/bin/env python3
"""sluice benchmarks: drain throughput and memory against the source's own decode floor.

Run by `make bench` (1M-row scenarios) and `make bench-quick` (small sizes, also the CI
smoke run). For each scenario the backlog is seeded once, then measured side by side in
the same run:

* floor: PostgreSQL's own decode of the same backlog,
  `SELECT count(*), sum(length(data)) FROM pg_logical_slot_peek_binary_changes(...)`
  (peek does not consume, so the drain afterwards reads the same changes);
* sluice: `sluice drain` (release build) wall time, user+sys CPU and peak RSS of the
  process (wait4), parts and bytes written.

Each measurement is the median of --repeat runs (the backlog is re-read each time: the
drain runs against a copy of the slot made with pg_copy_logical_replication_slot, and the
checkpoint is reset). Results: bench/results/latest.json and latest.md, plus one line per
scenario on stdout. Ratios, not absolute times, are the comparable numbers on a noisy
machine.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def psql(url, sql):
    out = subprocess.run(["psql", url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {sql[:200]}\n{out.stderr}")
    return out.stdout.strip()


def with_db(url, db):
    base, _, _ = url.rpartition("/")
    return f"{base}/{db}"


def timed_child(cmd, env):
    """Runs cmd; returns (wall_s, cpu_s, peak_rss_kib, stdout)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    stdout = proc.stdout.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{cmd} exited {code}: {stdout}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, stdout


SCENARIOS = {
    "single_row_txns": "CREATE TABLE t (id bigint PRIMARY KEY, n int, amount numeric(12,2), "
                       "label text, at timestamptz, flag boolean)",
    "one_big_txn": "CREATE TABLE t (id bigint PRIMARY KEY, n int, amount numeric(12,2), "
                   "label text, at timestamptz, flag boolean)",
    "wide_rows": "CREATE TABLE t (id bigint PRIMARY KEY, "
                 + ", ".join(f"c{i} {'text' if i % 4 == 0 else 'int' if i % 4 == 1 else 'numeric(18,4)' if i % 4 == 2 else 'timestamptz'}"
                             for i in range(1, 40)) + ")",
    "idle": "CREATE TABLE t (id bigint PRIMARY KEY, v text)",
}


def seed(url, scenario, rows):
    six = "i, i % 1000, (i % 100000) / 100.0, 'label-' || i, now() - (i || ' s')::interval, i % 2 = 0"
    if scenario == "single_row_txns":
        psql(url, f"DO $$ BEGIN FOR i IN 1..{rows} LOOP INSERT INTO t SELECT {six}; COMMIT; END LOOP; END $$")
    elif scenario == "one_big_txn":
        psql(url, f"INSERT INTO t SELECT {six} FROM generate_series(1, {rows}) i")
    elif scenario == "wide_rows":
        cols = ", ".join(
            "repeat(md5(i::text), 8)" if c % 4 == 0 else "i" if c % 4 == 1 else "i / 7.0" if c % 4 == 2 else "now()"
            for c in range(1, 40))
        psql(url, f"INSERT INTO t SELECT i, {cols} FROM generate_series(1, {rows}) i")
    elif scenario == "idle":
        psql(url, "CREATE TABLE noise (id serial PRIMARY KEY, v text)")
        psql(url, f"INSERT INTO noise (v) SELECT 'x' FROM generate_series(1, {rows}) i")


def run_scenario(binary, admin_url, scenario, rows, repeat, workdir):
    db = f"bench_{scenario}"
    psql(admin_url, f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}'")
    psql(admin_url, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    psql(admin_url, f"CREATE DATABASE {db}")
    url = with_db(admin_url, db)
    psql(url, SCENARIOS[scenario])
    psql(url, f"CREATE PUBLICATION p_{db} FOR TABLE t")
    slot = f"s_{db}"
    start_lsn = psql(url, f"SELECT lsn FROM pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    seed_start = time.monotonic()
    seed(url, scenario, rows)
    seed_s = time.monotonic() - seed_start
    floor_sql = (f"SELECT count(*), coalesce(sum(length(data)), 0) FROM pg_logical_slot_peek_binary_changes("
                 f"'{slot}', NULL, NULL, 'proto_version', '1', 'publication_names', 'p_{db}', 'binary', 'true')")
    floors, drains = [], []
    changes = 0
    for attempt in range(repeat):
        t0 = time.monotonic()
        changes = int(psql(url, floor_sql).split("|")[0])
        floors.append(time.monotonic() - t0)
        copy = f"{slot}_r{attempt}"
        psql(url, f"SELECT pg_copy_logical_replication_slot('{slot}', '{copy}')")
        job_dir = os.path.join(workdir, f"{scenario}_{attempt}")
        os.makedirs(job_dir)
        config = os.path.join(job_dir, "sluice.yaml")
        with open(config, "w") as f:
            f.write(f"job: {db}_{attempt}\nsource:\n  url_env: BENCH_URL\n  tables: [t]\n"
                    f"  postgres: {{ slot: {copy}, publication: p_{db}, create: false }}\n"
                    f"destination: {{ type: local, path: {job_dir}/out }}\nstate: {{ type: local, path: {job_dir}/state }}\n"
                    f"output: {{ spill_dir: {job_dir} }}\n")
        env = dict(os.environ, BENCH_URL=url, SLUICE_LOG="warn")
        wall, cpu, rss, out = timed_child([binary, "drain", "--config", config], env)
        summary = json.loads(out.strip().splitlines()[-1])
        drains.append({"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss / 1024, "rows": summary["rows"],
                       "parts": summary["parts"], "bytes": summary["bytes"]})
        psql(url, f"SELECT pg_drop_replication_slot('{copy}')")
        shutil.rmtree(job_dir)
    wall = statistics.median(d["wall_s"] for d in drains)
    floor = statistics.median(floors)
    peak = statistics.median(d["peak_rss_mib"] for d in drains)
    result = {
        "scenario": scenario, "engine": "postgres", "rows": rows, "changes_decoded": changes,
        "seed_s": round(seed_s, 2), "floor_s": round(floor, 3), "drain_s": round(wall, 3),
        "ratio_vs_floor": round(wall / floor, 2) if floor > 0 else None,
        "rows_per_s": round(drains[0]["rows"] / wall) if wall > 0 else None,
        "cpu_s": round(statistics.median(d["cpu_s"] for d in drains), 3),
        "peak_rss_mib": round(peak, 1), "parts": drains[0]["parts"], "bytes": drains[0]["bytes"],
        "rows_written": drains[0]["rows"], "gb_s": round(peak / 1024 * wall, 4), "runs": repeat,
    }
    psql(admin_url, f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}'")
    psql(admin_url, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    return result


def cold_start(binary):
    """Process start to the first Runtime API `next` request, median of 5, in ms."""
    import http.server
    import threading

    times = []
    for _ in range(5):
        hit = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                hit.set()
                time.sleep(0.2)
                self.send_response(500)
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        env = dict(os.environ, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{server.server_port}",
                   AWS_LAMBDA_FUNCTION_NAME="bench", AWS_LAMBDA_FUNCTION_MEMORY_SIZE="512",
                   AWS_LAMBDA_FUNCTION_VERSION="1", SLUICE_CONFIG="{}", SLUICE_LOG="off")
        start = time.monotonic()
        proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hit.wait(10)
        times.append((time.monotonic() - start) * 1000)
        proc.kill()
        proc.wait()
        server.shutdown()
    return round(statistics.median(times), 1)


def machine():
    mem_kib = int(open("/proc/meminfo").read().split()[1])
    pg = subprocess.run(["psql", os.environ["SLUICE_TEST_PG_URL"], "-tAc", "SHOW server_version"],
                        capture_output=True, text=True).stdout.strip()
    return {"cores": os.cpu_count(), "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(), "postgres": pg, "python": platform.python_version()}


def markdown(report):
    lines = [f"# sluice benchmarks — {report['date']}", "",
             f"Machine: {report['machine']}", "",
             "| scenario | rows | floor s | sluice s | sluice/floor | rows/s | CPU s | peak RSS MiB | parts | GB-s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["scenarios"]:
        lines.append(f"| {r['engine']} {r['scenario']} | {r['rows']} | {r['floor_s']} | {r['drain_s']} | "
                     f"{r['ratio_vs_floor']} | {r['rows_per_s']} | {r['cpu_s']} | {r['peak_rss_mib']} | "
                     f"{r['parts']} | {r['gb_s']} |")
    lines += ["", f"Release binary: {report['binary_bytes']} bytes; Lambda cold start (process start → first "
              f"`next`): {report['cold_start_ms']} ms (median of 5)."]
    if report.get("zip_bytes"):
        lines.append(f"Lambda zip: {report['zip_bytes']} bytes.")
    idle = [r for r in report["scenarios"] if r["scenario"] == "idle"]
    busy = [r for r in report["scenarios"] if r["scenario"] == "single_row_txns"]
    if idle:
        lines.append(f"Cost: idle run {idle[0]['gb_s']} GB-s.")
    if busy and busy[0]["rows_written"]:
        per_million = busy[0]["gb_s"] / busy[0]["rows_written"] * 1e6
        lines.append(f"Cost: {per_million:.3f} GB-s per million single-row-transaction changes.")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--wide-rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--binary", default=None)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    parser.add_argument("--zip", default=None)
    args = parser.parse_args()
    admin = os.environ["SLUICE_TEST_PG_URL"]
    binary = args.binary or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                                         "release", "sluice")
    sizes = {"single_row_txns": args.rows, "one_big_txn": args.rows, "wide_rows": args.wide_rows, "idle": 10000}
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for scenario, rows in sizes.items():
            r = run_scenario(binary, admin, scenario, rows, args.repeat, workdir)
            results.append(r)
            print(f"bench {r['engine']} {scenario}: rows={rows} drain={r['drain_s']}s floor={r['floor_s']}s "
                  f"ratio={r['ratio_vs_floor']} rss={r['peak_rss_mib']}MiB rows/s={r['rows_per_s']}", flush=True)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "scenarios": results, "binary_bytes": os.path.getsize(binary),
        "cold_start_ms": cold_start(binary),
        "zip_bytes": os.path.getsize(args.zip) if args.zip and os.path.exists(args.zip) else None,
    }
    print(f"bench cold start: {report['cold_start_ms']} ms; binary {report['binary_bytes']} bytes")
    os.makedirs(args.out, exist_ok=True)
    latest = os.path.join(args.out, "latest.json")
    if os.path.exists(latest):
        history_dir = os.path.join(args.out, "history")
        os.makedirs(history_dir, exist_ok=True)
        previous = json.load(open(latest))
        shutil.copy(latest, os.path.join(history_dir, previous["date"].replace(":", "") + ".json"))
    with open(latest, "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(args.out, "latest.md"), "w") as f:
        f.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
