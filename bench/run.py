#!/usr/bin/env python3
"""sluice benchmarks: drain throughput and memory against the source's own decode floor.

Run by `make bench` (full sizes, release build) and `make bench-quick` (small sizes,
debug build; the CI smoke run). For every engine (PostgreSQL: bench/postgres.py,
MariaDB: bench/mariadb.py) and scenario — single-row transactions and one big
transaction at each of --rows, wide rows (40 columns, long text) at --wide-rows, an idle
run, and (PostgreSQL) twenty captured tables at the smallest --rows, reported beside one
table's peak RSS — the backlog is seeded once, then the drain and the floor are measured side by side,
--repeat times (medians). Ratios, not absolute times, are the comparable numbers on a
noisy machine.

Output: <out>/latest.json, <out>/latest.md (the table, growth between sizes, the issue's
targets), one line appended per scenario to <out>/history.md, and one line per scenario
on stdout. The benchmarks are reported, never asserted.
"""

import argparse
import contextlib
import datetime
import http.server
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mariadb  # noqa: E402
import postgres  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES = {"postgres": ("SLUICE_TEST_PG_URL", postgres), "mariadb": ("SLUICE_TEST_MYSQL_URL", mariadb)}
# Issue #22's targets (notes, not assertions). PostgreSQL is held to its copy-out
# ("transfer") floor, MariaDB to `mariadb-binlog -v` (its "decode" floor).
TARGET_PG_VS_COPY_OUT = 1.3
# Issue #49: PostgreSQL backlogs of a million rows and more against the copy-out floor.
TARGET_PG_AT_SCALE_VS_COPY_OUT, SCALE_ROWS = 1.2, 1_000_000
TARGET_MARIADB_VS_DECODE = {"one_big_txn": 1.5, "wide_rows": 1.2, "single_row_txns": 1.5}
TARGET_IR_PER_ROW, TARGET_RSS_MIB, TARGET_GROWTH_PER_WORK = 4_800, 64, 1.1
TARGET_ZIP_MB, TARGET_COLD_MS, TARGET_IDLE_MS = 15, 30, 150


def zipped_bytes(binary):
    """The binary zipped as a Lambda `bootstrap` (deflate, level 9), in bytes: the upload a
    custom runtime of this build weighs — the host's architecture, unlike `make lambda`'s."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.write(binary, "bootstrap")
    return buf.getbuffer().nbytes


def cold_start(binary):
    """Process start to the first Runtime API `next` request, median of 5, in ms."""
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


def machine(engines):
    mem_kib = int(open("/proc/meminfo").read().split()[1])
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    desc = {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "loadavg_at_start": round(os.getloadavg()[0], 1)}
    for name, (var, module) in engines.items():
        desc[name] = module.version(os.environ[var])
    return desc


def git_commit():
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None


def fmt(value):
    return "–" if value is None else value


def growth(report):
    """Each pair of consecutive sizes of one scenario: time and memory growth."""
    lines = []
    for engine in sorted({r["engine"] for r in report["scenarios"]}):
        for scenario in ("single_row_txns", "one_big_txn"):
            runs = sorted((r for r in report["scenarios"] if (r["engine"], r["scenario"]) == (engine, scenario)),
                          key=lambda r: r["rows"])
            for small, big in zip(runs, runs[1:]):
                if small["drain_s"] <= 0 or small["peak_rss_mib"] <= 0:
                    continue
                work, took = big["rows"] / small["rows"], big["drain_s"] / small["drain_s"]
                ok = "met" if took <= TARGET_GROWTH_PER_WORK * work else "NOT met"
                lines.append(f"| {engine} {scenario} | {small['rows']} → {big['rows']} (×{work:g}) "
                             f"| ×{took:.2f} (target ≤ ×{TARGET_GROWTH_PER_WORK * work:g}: {ok}) "
                             f"| ×{big['peak_rss_mib'] / small['peak_rss_mib']:.2f} |")
    if not lines:
        return []
    return ["", "Growth with work (linear time, flat memory is the goal):", "",
            "| scenario | rows | drain time | peak RSS |", "| --- | --- | --- | --- |", *lines]


def many_tables(report):
    """Peak RSS of twenty captured tables against one, for the same number of rows."""
    lines = []
    for twenty in (r for r in report["scenarios"] if r["scenario"] == "twenty_tables"):
        one = next((r for r in report["scenarios"] if (r["engine"], r["scenario"], r["rows"])
                    == (twenty["engine"], "single_row_txns", twenty["rows"])), None)
        if one and one["peak_rss_mib"] > 0:
            lines.append(f"| {twenty['engine']} | {twenty['rows']} | {one['peak_rss_mib']} | {twenty['peak_rss_mib']} "
                         f"| ×{twenty['peak_rss_mib'] / one['peak_rss_mib']:.2f} |")
    if not lines:
        return []
    return ["", "Memory with many tables (twenty tables within the default `output.memory_budget_bytes`; "
            "flat is the goal):", "", "| engine | rows | one table: peak RSS MiB | twenty tables: peak RSS MiB | ratio |",
            "| --- | --- | --- | --- | --- |", *lines]


def targets(report):
    """Each scenario against issues #22's and #49's targets."""
    rows = report["scenarios"]
    out = ["", "Against issues #22's and #49's targets (notes, not assertions; PostgreSQL against its copy-out "
           f"floor, ≤ {TARGET_PG_AT_SCALE_VS_COPY_OUT} from {SCALE_ROWS} rows; MariaDB against `mariadb-binlog -v`):", ""]

    def note(what, value, limit, unit=""):
        ok = value is not None and value <= limit
        out.append(f"* {what}: {value}{unit} (target ≤ {limit}{unit}) — {'met' if ok else 'NOT met'}")

    for r in rows:
        name = f"{r['engine']} {r['scenario']} {r['rows']}"
        if r["scenario"] == "idle":
            note(f"{r['engine']} idle run", round(r["drain_s"] * 1000), TARGET_IDLE_MS, " ms")
        elif r["engine"] == "postgres":
            limit = TARGET_PG_AT_SCALE_VS_COPY_OUT if r["rows"] >= SCALE_ROWS else TARGET_PG_VS_COPY_OUT
            note(f"{name}: sluice / copy-out floor", r.get("ratio_vs_transfer_floor"), limit)
        elif r["scenario"] in TARGET_MARIADB_VS_DECODE:
            note(f"{name}: sluice / mariadb-binlog -v", r["ratio_vs_floor"], TARGET_MARIADB_VS_DECODE[r["scenario"]])
        if r.get("instructions_per_row") and r["scenario"] != "idle":
            note(f"{name}: instructions per row", r["instructions_per_row"], TARGET_IR_PER_ROW)
        note(f"{name}: peak RSS", r["peak_rss_mib"], TARGET_RSS_MIB, " MiB")
    cold = report["cold_start_ms"]
    note("cold start", cold, TARGET_COLD_MS, " ms")
    zipped = report.get("zip_bytes") or report.get("binary_zip_bytes")
    if zipped:
        what = "zip" if report.get("zip_bytes") else "zip (this host's binary)"
        note(what, round(zipped / 1e6, 1), TARGET_ZIP_MB, " MB")
    return out


def markdown(report):
    m = report["machine"]
    lines = [f"# sluice benchmarks — {report['date']}", "",
             f"Commit {report['commit']}, binary `{report['binary']}`, medians of {report['repeat']} runs "
             f"({report.get('scale_repeat', report['repeat'])} above {SCALE_ROWS} rows).", "",
             f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB RAM, kernel {m['kernel']}; "
             + ", ".join(f"{e} {m[e]}" for e in ENGINES if e in m)
             + f"; load average {m['loadavg_at_start']} at start, {m.get('loadavg_at_end')} at end.", ""]
    if not report.get("complete"):
        lines += ["**Incomplete run**: the scenarios below are those measured before it stopped.", ""]
    if report.get("note"):
        lines += [report["note"], ""]
    lines += [f"Parts, state and spill files in `{report['workdir']}`. "
              "Floors: PostgreSQL `pg_logical_slot_peek_binary_changes` (count + sum of lengths) on the same "
              "slot (decode) and `COPY (SELECT data FROM pg_logical_slot_peek_binary_changes(…)) TO STDOUT` "
              "to /dev/null (transfer: every change sent to a client); MariaDB `mariadb-binlog --read-from-remote-server -v` over the same binlog range to "
              "/dev/null (decode) and `--raw` (transfer).", "",
              "| engine | scenario | rows | decode floor s | transfer floor s | sluice s | sluice/decode "
              "| sluice/transfer | rows/s | CPU s | CPU µs/row | instructions/row | peak RSS MiB | parts "
              "| MB written | GB-s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["scenarios"]:
        lines.append(f"| {r['engine']} | {r['scenario']} | {r['rows']} | {r['floor_s']} | {fmt(r.get('transfer_floor_s'))} "
                     f"| {r['drain_s']} | {r['ratio_vs_floor']} | {fmt(r.get('ratio_vs_transfer_floor'))} "
                     f"| {fmt(r['rows_per_s'])} | {r['cpu_s']} | {fmt(r.get('cpu_us_per_row'))} "
                     f"| {fmt(r.get('instructions_per_row'))} | {r['peak_rss_mib']} | {r['parts']} "
                     f"| {r['bytes'] / 1e6:.1f} | {r['gb_s']} |")
    lines += growth(report)
    lines += many_tables(report)
    zipped = report.get("binary_zip_bytes")
    lines += ["", f"Binary: {report['binary_bytes']} bytes"
              + (f" ({zipped} bytes zipped as a Lambda `bootstrap`)" if zipped else "")
              + f"; Lambda cold start (process start → first `next`): {report['cold_start_ms']} ms (median of 5)."]
    if report.get("zip_bytes"):
        lines.append(f"Lambda zip: {report['zip_bytes']} bytes.")
    for engine in sorted({r["engine"] for r in report["scenarios"]}):
        idle = [r for r in report["scenarios"] if (r["engine"], r["scenario"]) == (engine, "idle")]
        busy = sorted((r for r in report["scenarios"] if (r["engine"], r["scenario"]) == (engine, "single_row_txns")),
                      key=lambda r: r["rows"])
        if idle:
            lines.append(f"Cost ({engine}): idle run {idle[0]['gb_s']} GB-s (peak RSS × wall).")
        if busy and busy[-1]["rows_written"]:
            per_million = busy[-1]["gb_s"] / busy[-1]["rows_written"] * 1e6
            lines.append(f"Cost ({engine}): {per_million:.3f} GB-s per million single-row-transaction changes.")
    lines += targets(report)
    return "\n".join(lines) + "\n"


def history_lines(report):
    return [f"| {report['date']} | {report['commit']} | {r['engine']} {r['scenario']} | {r['rows']} | "
            f"{r['ratio_vs_floor']} | {fmt(r.get('ratio_vs_transfer_floor'))} | {r['peak_rss_mib']} | {r['runs']} |"
            for r in report["scenarios"]]


def write(report, out, history=True):
    """latest.json and latest.md (rewritten after every scenario, so a run cut short
    leaves what it measured, marked incomplete); history.md gets the run's lines once."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "latest.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(markdown(report))
    if not history:
        return
    history = os.path.join(out, "history.md")
    fresh = not os.path.exists(history)
    with open(history, "a") as f:
        if fresh:
            f.write("# Benchmark history\n\nOne line per scenario per run (`make bench`); ratios are sluice / "
                    "the source's own floor, measured side by side.\n\n| date | commit | scenario | rows | "
                    "sluice/decode | sluice/transfer | peak RSS MiB | runs |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
        f.write("\n".join(history_lines(report)) + "\n")


def engines_to_run(names):
    chosen = {}
    for name in names:
        var, module = ENGINES[name]
        if os.environ.get(var):
            chosen[name] = (var, module)
        elif os.environ.get("CI") == "true":
            raise SystemExit(f"bench: {var} is not set (CI=true: every engine must run)")
        else:
            print(f"bench: {var} is not set; skipping {name}", file=sys.stderr)
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="100000,1000000,10000000",
                        help="comma-separated sizes of the single-row and one-transaction scenarios")
    parser.add_argument("--scale-repeat", type=int, default=1,
                        help="repeats of the sizes above one million rows (each is minutes of seeding and draining)")
    parser.add_argument("--wide-rows", type=int, default=200_000)
    parser.add_argument("--idle-rows", type=int, default=10_000, help="rows written to an uncaptured table")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engines", default="postgres,mariadb")
    parser.add_argument("--scenarios", default="single_row_txns,one_big_txn,wide_rows,idle,twenty_tables")
    parser.add_argument("--binary", default=None)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    parser.add_argument("--zip", default=None)
    parser.add_argument("--instructions-max-rows", type=int, default=200_000,
                        help="count one more drain's instructions under callgrind (valgrind) in every scenario "
                             "of at most this many rows; 0 turns it off")
    parser.add_argument("--note", default=None, help="a line for latest.md (e.g. how loaded the machine was)")
    parser.add_argument("--workdir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                        help="where the jobs' parts, state and spill files go (default tmpfs: the local "
                             "disk's fsync latency is not what is measured)")
    parser.add_argument("--keep-binlog", action="store_true", help="do not purge the binlog files a scenario wrote")
    args = parser.parse_args()
    binary = args.binary or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                                         "release", "sluice")
    sizes = [int(x) for x in args.rows.split(",")]
    wanted = args.scenarios.split(",")
    # Smallest sizes first, so a run cut short still has every scenario.
    plan = [("idle", args.idle_rows)]
    plan += [(s, sizes[0]) for s in ("single_row_txns", "one_big_txn")]
    plan += [("wide_rows", args.wide_rows), ("twenty_tables", sizes[0])]
    plan += [(s, n) for n in sizes[1:] for s in ("single_row_txns", "one_big_txn")]
    plan = [(s, n) for s, n in plan if s in wanted]
    engines = engines_to_run(args.engines.split(","))
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": git_commit(), "binary": binary, "repeat": args.repeat, "note": args.note,
              "scale_repeat": args.scale_repeat,
              "workdir": args.workdir or tempfile.gettempdir(), "machine": machine(engines),
              "binary_bytes": os.path.getsize(binary), "binary_zip_bytes": zipped_bytes(binary),
              "cold_start_ms": cold_start(binary),
              "zip_bytes": os.path.getsize(args.zip) if args.zip and os.path.exists(args.zip) else None,
              "complete": False, "scenarios": []}
    print(f"bench cold start: {report['cold_start_ms']} ms; binary {report['binary_bytes']} bytes", flush=True)
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="sluice-bench-") as workdir:
        for name, (var, module) in engines.items():
            paused = mariadb.replica_paused() if module is mariadb else contextlib.nullcontext()
            with paused:
                for scenario, rows in plan:
                    if scenario not in module.TABLES:
                        continue
                    with tempfile.TemporaryDirectory(dir=workdir) as scratch:
                        repeat = args.repeat if rows <= SCALE_ROWS else args.scale_repeat
                        r = module.run_scenario(binary, os.environ[var], scenario, rows, repeat, scratch,
                                                0 < rows <= args.instructions_max_rows)
                    report["scenarios"].append(r)
                    report["machine"]["loadavg_at_end"] = round(os.getloadavg()[0], 1)
                    write(report, args.out, history=False)
                    transfer = f" transfer={r['transfer_floor_s']}s" if "transfer_floor_s" in r else ""
                    print(f"bench {name} {scenario}: rows={rows} drain={r['drain_s']}s floor={r['floor_s']}s{transfer} "
                          f"ratio={r['ratio_vs_floor']} rss={r['peak_rss_mib']}MiB rows/s={r['rows_per_s']} "
                          f"ir/row={r.get('instructions_per_row')}", flush=True)
                if module is mariadb:
                    mariadb.finish(os.environ[var], args.keep_binlog)
    report["complete"] = True
    write(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
