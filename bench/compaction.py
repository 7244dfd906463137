#!/usr/bin/env python3
"""sluice compaction benchmark: a table after N small runs, before and after `sluice compact`.

Run by `make bench` (1,500 runs: a day of one-minute runs) and `make bench-quick` (a few
runs, scratch output). One PostgreSQL table of six mixed-type columns and 2,000 rows is
baselined, then each run commits one small transaction (an update, now and then an insert
or a delete) and drains it — one change part and one run manifest per run, as a job
scheduled every minute writes. Measured, never asserted:

* the table folder's data files (what a folder reader opens), per partition;
* the current-state query `sluice sql --dialect duckdb` prints, run by DuckDB (the readers'
  venv): median of --repeat executions after one warm-up, on the folder as the runs left
  it, after `sluice compact`, and on the same rows written as one Parquet file (the
  reference the issue sets: at most 2x its time);
* the compaction's wall time and what it replaced and wrote.

Every query's result is compared with the others (and with the source): the numbers are
only reported when all agree. Output: <out>/compaction.json, <out>/compaction.md, one line
appended to <out>/compaction-history.md, and one summary line on stdout.
"""

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402
# Issue #44's bar (notes, not assertions).
TARGET_QUERY_VS_ONE_FILE, TARGET_FILES_PER_PARTITION = 2.0, 5

QUERY_SCRIPT = r"""
import hashlib, json, statistics, sys, time
import duckdb
query, repeat = open(sys.argv[1]).read(), int(sys.argv[2])
con = duckdb.connect()
rows = sorted(map(repr, con.execute(query).fetchall()))
times = []
for _ in range(repeat):
    start = time.perf_counter()
    con.execute(query).fetchall()
    times.append(time.perf_counter() - start)
print(json.dumps({"median_s": statistics.median(times), "min_s": min(times), "rows": len(rows),
                  "digest": hashlib.sha256("\n".join(rows).encode()).hexdigest()}))
"""

ONE_FILE_SCRIPT = r"""
import sys, pyarrow as pa, pyarrow.parquet as pq
files, target = sys.argv[1:-1], sys.argv[-1]
tables = [pq.read_table(f) for f in files]
pq.write_table(pa.concat_tables(tables, promote_options="permissive"), target, compression="zstd")
"""




def sluice(binary, args, config, env):
    out = subprocess.run([binary, *args, "--config", config], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"sluice {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr[-3000:]}")
    return out.stdout


def data_files(table_dir):
    files = []
    for root, dirs, names in os.walk(table_dir):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        files += [os.path.join(root, n) for n in names if n.endswith(".parquet") and not n.startswith(("_", "."))]
    return sorted(files)


def per_partition(table_dir, files):
    counts = {}
    for f in files:
        rel = os.path.relpath(os.path.dirname(f), table_dir)
        counts[rel] = counts.get(rel, 0) + 1
    return counts


def query(python, binary, config, env, workdir, repeat, source=None):
    args = ["sql", "--dialect", "duckdb", "--table", "public.t"] + (["--source", source] if source else [])
    text = sluice(binary, args, config, env)
    path = os.path.join(workdir, "query.sql")
    with open(path, "w") as f:
        f.write(text)
    script = os.path.join(workdir, "query.py")
    with open(script, "w") as f:
        f.write(QUERY_SCRIPT)
    out = subprocess.run([python, script, path, str(repeat)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def source_rows(url):
    """The source's row count (the query's rows must be as many)."""
    return int(measure.psql(url, "SELECT count(*) FROM t"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    parser.add_argument("--workdir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    parser.add_argument("--note", default=None)
    args = parser.parse_args()
    pg = os.environ.get("SLUICE_TEST_PG_URL")
    python = os.environ.get("SLUICE_TEST_READERS_PYTHON")
    if not pg or not python:
        msg = "bench compaction: SLUICE_TEST_PG_URL and SLUICE_TEST_READERS_PYTHON are needed"
        if os.environ.get("CI") == "true":
            raise SystemExit(msg)
        print(msg + "; skipping", file=sys.stderr)
        return 0
    db = "bench_compaction"
    measure.psql(pg, f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 's_{db}'")
    measure.psql(pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    measure.psql(pg, f"CREATE DATABASE {db}")
    url = measure.with_db(pg, db)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip(),
              "binary": args.binary, "runs": args.runs, "rows": args.rows, "repeat": args.repeat,
              "note": args.note, "loadavg_at_start": round(os.getloadavg()[0], 1)}
    try:
        with tempfile.TemporaryDirectory(dir=args.workdir, prefix="sluice-bench-compaction-") as work:
            measure.psql(url, measure.TABLE)
            measure.psql(url, f"INSERT INTO t SELECT {measure.VALUES} FROM generate_series(1, {args.rows}) i")
            config = os.path.join(work, "sluice.yaml")
            with open(config, "w") as f:
                f.write(f"job: {db}\nsource:\n  url_env: BENCH_SOURCE_URL\n  tables: [public.t]\n"
                        f"  postgres: {{ slot: s_{db}, publication: p_{db} }}\n"
                        f"destination: {{ type: local, path: {work}/out }}\nstate: {{ type: local, path: {work}/state }}\n"
                        f"output: {{ spill_dir: {work} }}\ninitial: snapshot\n"
                        f"compaction: {{ min_age_seconds: 0 }}\n")
            env = dict(os.environ, BENCH_SOURCE_URL=url, SLUICE_LOG="warn")
            sluice(args.binary, ["drain"], config, env)
            rng = random.Random(44)
            started = time.monotonic()
            next_id = args.rows + 1
            for i in range(args.runs):
                k = rng.randint(1, args.rows)
                if i % 10 == 3:
                    sql = f"INSERT INTO t SELECT {measure.VALUES} FROM generate_series({next_id}, {next_id}) i"
                    next_id += 1
                elif i % 25 == 7:
                    sql = f"DELETE FROM t WHERE id = {k}"
                else:
                    sql = f"UPDATE t SET n = n + 1, label = label || '.' WHERE id = {k}"
                measure.psql(url, sql)
                sluice(args.binary, ["drain"], config, env)
            report["drain_runs_s"] = round(time.monotonic() - started, 1)
            table_dir = os.path.join(work, "out", "public.t")
            before = data_files(table_dir)
            report["files_before"] = len(before)
            report["files_before_per_partition"] = per_partition(table_dir, before)
            report["bytes_before"] = sum(os.path.getsize(f) for f in before)
            report["query_before"] = query(python, args.binary, config, env, work, args.repeat)

            started = time.monotonic()
            summary = json.loads(sluice(args.binary, ["compact"], config, env).strip().splitlines()[-1])
            report["compaction_s"] = round(time.monotonic() - started, 2)
            report["compaction"] = summary["tables"]["public.t"]
            after = data_files(table_dir)
            report["files_after"] = len(after)
            report["files_after_per_partition"] = per_partition(table_dir, after)
            report["bytes_after"] = sum(os.path.getsize(f) for f in after)
            report["query_after"] = query(python, args.binary, config, env, work, args.repeat)

            one_dir = os.path.join(work, "one", "public.t")
            os.makedirs(one_dir)
            script = os.path.join(work, "one.py")
            with open(script, "w") as f:
                f.write(ONE_FILE_SCRIPT)
            one = os.path.join(one_dir, "cdc-one-000001.parquet")
            subprocess.run([python, script, *after, one], check=True)
            report["query_one_file"] = query(python, args.binary, config, env, work, args.repeat, source=one_dir)
            digests = {report[k]["digest"] for k in ("query_before", "query_after", "query_one_file")}
            report["same_result"] = len(digests) == 1
            report["source_rows"] = source_rows(url)
            report["result_rows"] = report["query_after"]["rows"]
            shutil.rmtree(one_dir)
    finally:
        measure.psql(pg, f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 's_{db}'")
        measure.psql(pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    one_s = report["query_one_file"]["median_s"]
    report["ratio_before"] = round(report["query_before"]["median_s"] / one_s, 2)
    report["ratio_after"] = round(report["query_after"]["median_s"] / one_s, 2)
    report["loadavg_at_end"] = round(os.getloadavg()[0], 1)
    write(report, args.out)
    print(f"bench compaction: runs={args.runs} files {report['files_before']} -> {report['files_after']} "
          f"query {report['query_before']['median_s']:.4f}s -> {report['query_after']['median_s']:.4f}s "
          f"(one file {one_s:.4f}s: x{report['ratio_before']} -> x{report['ratio_after']}) "
          f"compaction {report['compaction_s']}s same_result={report['same_result']}", flush=True)
    return 0 if report["same_result"] and report["result_rows"] == report["source_rows"] else 1


def write(report, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compaction.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    one = report["query_one_file"]["median_s"]
    worst = max(report["files_after_per_partition"].values(), default=0)
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    lines = [f"# sluice compaction benchmark — {report['date']}", "",
             f"Commit {report['commit']}, binary `{report['binary']}`; load average {report['loadavg_at_start']} at start, "
             f"{report['loadavg_at_end']} at end.", ""]
    if report.get("note"):
        lines += [report["note"], ""]
    lines += [f"A PostgreSQL table of six mixed-type columns: {report['rows']} rows baselined, then {report['runs']} runs "
              f"of one small transaction each (drained in {report['drain_runs_s']} s), then one `sluice compact` "
              f"({report['compaction_s']} s: {report['compaction']['parts_replaced']} parts replaced by "
              f"{report['compaction']['parts_written']}). Query: `sluice sql --dialect duckdb` (the current state), run by "
              f"DuckDB, median of {report['repeat']} after a warm-up; the reference is the same rows written as one "
              f"Parquet file. Every query returned the same {report['result_rows']} rows "
              f"(source: {report['source_rows']}): {report['same_result']}.", "",
              "| folder | data files | per partition | MB | query s | × one file |",
              "| --- | --- | --- | --- | --- | --- |",
              f"| after {report['runs']} runs | {report['files_before']} | {report['files_before_per_partition']} "
              f"| {report['bytes_before'] / 1e6:.2f} | {report['query_before']['median_s']:.4f} | ×{report['ratio_before']} |",
              f"| after `sluice compact` | {report['files_after']} | {report['files_after_per_partition']} "
              f"| {report['bytes_after'] / 1e6:.2f} | {report['query_after']['median_s']:.4f} | ×{report['ratio_after']} |",
              f"| the same rows in one file | 1 | – | – | {one:.4f} | ×1 |", "",
              "Against issue #44's bar (notes, not assertions):", "",
              f"* data files per partition after compaction: {worst} (target ≤ {TARGET_FILES_PER_PARTITION}) — "
              f"{met(worst <= TARGET_FILES_PER_PARTITION)}",
              f"* query after compaction / one file: ×{report['ratio_after']} (target ≤ ×{TARGET_QUERY_VS_ONE_FILE}) — "
              f"{met(report['ratio_after'] <= TARGET_QUERY_VS_ONE_FILE)}"]
    with open(os.path.join(out, "compaction.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    history = os.path.join(out, "compaction-history.md")
    fresh = not os.path.exists(history)
    with open(history, "a") as f:
        if fresh:
            f.write("# Compaction benchmark history\n\nOne line per `make bench` run.\n\n"
                    "| date | commit | runs | files before → after | query before s | after s | one file s | ×before | ×after |\n"
                    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
        f.write(f"| {report['date']} | {report['commit']} | {report['runs']} | {report['files_before']} → "
                f"{report['files_after']} | {report['query_before']['median_s']:.4f} | {report['query_after']['median_s']:.4f} "
                f"| {one:.4f} | ×{report['ratio_before']} | ×{report['ratio_after']} |\n")


if __name__ == "__main__":
    sys.exit(main())
