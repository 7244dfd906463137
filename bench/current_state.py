#!/usr/bin/env python3
"""sluice current-state benchmark: what one `sluice materialize` costs after a run, on a
small and a large table with the same changes.

Run by `make bench` (10,000 and 1,000,000 rows) and `make bench-quick` (small sizes,
scratch output). Per size: a PostgreSQL table of six mixed-type columns is baselined and
built once (`full`), then each round commits the same number of single-row updates and
drains them, and `sluice materialize` brings the state up to date (`incremental`) — three
times per round: the changes scattered over the whole key range, then all within the
newest 1% of keys, then as many rows appended (new keys above every other). Measured, never asserted: the build's wall time, CPU and peak RSS, the parts it
read, the state files it rewrote (buckets touched) and the rows those hold. The state is
checked against the source (row count and a digest through DuckDB) after every build, so
the numbers are reported only for a state that is right.

With `--iceberg` the job is `table_format: iceberg` on a SQL catalog in its folder, so
every build also commits the Iceberg table `t_current`; the state is then also checked as
pyiceberg reads that table, and the report is named current-state-iceberg.

Output: <out>/current-state[-iceberg].json and .md, and one summary line on stdout.
"""

import argparse
import datetime
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402


DIGEST_SCRIPT = r"""
import hashlib, json, sys, duckdb
files = json.load(open(sys.argv[1]))["files"]
root = sys.argv[2]
rows = duckdb.connect().execute(
    "SELECT id, n, amount::VARCHAR, label FROM read_parquet([%s]) ORDER BY id"
    % ", ".join("'%s/%s'" % (root, f) for f in files)).fetchall()
print(json.dumps({"rows": len(rows), "digest": hashlib.sha256(repr(rows).encode()).hexdigest()}))
"""

ICEBERG_DIGEST_SCRIPT = r"""
import hashlib, json, sys
from pyiceberg.catalog.sql import SqlCatalog
data = SqlCatalog("default", uri="sqlite:///" + sys.argv[1]).load_table(("bench", "t_current")).scan().to_arrow()
rows = sorted(zip(data["id"].to_pylist(), data["n"].to_pylist(),
                  [None if a is None else str(a) for a in data["amount"].to_pylist()], data["label"].to_pylist()))
print(json.dumps({"rows": len(rows), "digest": hashlib.sha256(repr(rows).encode()).hexdigest()}))
"""


def source_digest(url):
    rows = measure.psql(url, "SELECT json_agg(json_build_array(id, n, amount::text, label) ORDER BY id) FROM t")
    data = json.loads(rows) if rows else []
    return {"rows": len(data),
            "digest": hashlib.sha256(repr([(r[0], r[1], r[2], r[3]) for r in data]).encode()).hexdigest()}


def state_digest(python, job_dir):
    pointer = os.path.join(job_dir, "out", "t", "_current_state", "_version.json")
    out = subprocess.run([python, "-c", DIGEST_SCRIPT, pointer, os.path.join(job_dir, "out")],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def iceberg_digest(python, job_dir):
    out = subprocess.run([python, "-c", ICEBERG_DIGEST_SCRIPT, os.path.join(job_dir, "catalog.db")],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def materialize(binary, config, env):
    wall, cpu, rss, out = measure.timed_child([binary, "materialize", "--config", config], env)
    table = json.loads(out.strip().splitlines()[-1])["tables"][0]
    if "error" in table:
        raise RuntimeError(f"sluice materialize failed: {table}")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss / 1024, **table}


def rewritten(job_dir, version):
    """Files and rows the build of `version` wrote (its own folder)."""
    folder = os.path.join(job_dir, "out", "t", "_current_state", f"v-{version:010}")
    return len(os.listdir(folder)) if os.path.isdir(folder) else 0


def one_size(binary, admin, python, rows, changes, rounds, scratch, iceberg=False):
    db = f"bench_state_{rows}"
    measure.psql(admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    measure.psql(admin, f"CREATE DATABASE {db}")
    url = measure.with_db(admin, db)
    job_dir = tempfile.mkdtemp(dir=scratch)
    try:
        measure.psql(url, measure.TABLE)
        measure.psql(url, f"INSERT INTO t SELECT {measure.VALUES} FROM generate_series(1, {rows}) i")
        config = measure.job_config(job_dir, f"bench_state_{rows}", ["t"],
                                    f"  postgres: {{ slot: s_{db}, publication: p_{db} }}\n")
        with open(config, "a") as f:
            f.write("initial: snapshot\n")
            if iceberg:
                f.write("table_format: iceberg\niceberg: { catalog: { type: sql, uri: \"sqlite:///%s/catalog.db\" }, "
                        "namespace: bench }\n" % job_dir)
        env = dict(os.environ, BENCH_URL=url)
        subprocess.run([binary, "baseline", "--config", config], env=env, check=True,
                       capture_output=True)
        full = materialize(binary, config, env)
        builds = {"scattered": [], "recent": [], "appended": []}
        rng = random.Random(rows)
        top = rows
        for _ in range(rounds):
            for kind in builds:
                if kind == "appended":
                    measure.psql(url, f"INSERT INTO t SELECT {measure.VALUES} FROM generate_series({top + 1}, {top + changes}) i")
                    top += changes
                else:
                    low = 1 if kind == "scattered" else max(1, rows - rows // 100)
                    ids = [rng.randint(low, rows) for _ in range(changes)]
                    measure.psql(url, "; ".join(f"UPDATE t SET n = n + 1, label = label || 'x' WHERE id = {i}" for i in ids))
                measure.drain(binary, config, env)
                b = materialize(binary, config, env)
                b["files_rewritten"] = rewritten(job_dir, b["version"])
                got, want = state_digest(python, job_dir), source_digest(url)
                if got != want:
                    raise RuntimeError(f"the current state differs from the source after a {kind} build: {got} {want}")
                if iceberg and iceberg_digest(python, job_dir) != want:
                    raise RuntimeError(f"the Iceberg current-state table differs from the source after a {kind} build")
                builds[kind].append(b)
        med = lambda runs, k: statistics.median(r[k] for r in runs)
        return {"rows": rows, "changes": changes, "full_s": full["wall_s"], "full_rss_mib": full["peak_rss_mib"],
                **{f"{kind}_{k}": med(runs, k) for kind, runs in builds.items()
                   for k in ("wall_s", "cpu_s", "peak_rss_mib", "parts_read", "files_rewritten")}}
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)
        measure.psql(admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def markdown(report):
    title = "current-state builds, Iceberg table committed too" if report.get("iceberg") else "current-state builds"
    lines = [f"# sluice {title} — {report['at']}", "",
             f"Commit {report['commit']}, binary `{report['binary']}`, medians of {report['rounds']} rounds. "
             "Each round: the same number of single-row updates, drained, then one `sluice materialize` "
             "(incremental): once scattered over every key, once within the newest 1% of keys, once as "
             "many rows appended. The state was checked against the source after every build.", "",
             "| table rows | changes | full build s | scattered: build s | files rewritten | recent: build s | files rewritten | appended: build s | files rewritten | peak RSS MiB (full / scattered / recent / appended) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["sizes"]:
        lines.append(f"| {r['rows']} | {r['changes']} | {r['full_s']:.3f} | {r['scattered_wall_s']:.3f} | "
                     f"{r['scattered_files_rewritten']:.0f} | {r['recent_wall_s']:.3f} | "
                     f"{r['recent_files_rewritten']:.0f} | {r['appended_wall_s']:.3f} | {r['appended_files_rewritten']:.0f} | "
                     f"{r['full_rss_mib']:.1f} / {r['scattered_peak_rss_mib']:.1f} / {r['recent_peak_rss_mib']:.1f} / "
                     f"{r['appended_peak_rss_mib']:.1f} |")
    if len(report["sizes"]) >= 2:
        small, big = report["sizes"][0], report["sizes"][-1]
        lines += ["", f"Incremental build, {big['rows']} rows against {small['rows']} with the same changes: "
                  f"scattered ×{big['scattered_wall_s'] / small['scattered_wall_s']:.2f}, "
                  f"recent keys ×{big['recent_wall_s'] / small['recent_wall_s']:.2f}, "
                  f"appended ×{big['appended_wall_s'] / small['appended_wall_s']:.2f} "
                  "(issue #45's bar: no growth with the table's size)."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    parser.add_argument("--iceberg", action="store_true",
                        help="table_format: iceberg (SQL catalog): each build also commits the Iceberg table t_current")
    args = parser.parse_args()
    admin = os.environ.get("SLUICE_TEST_PG_URL")
    python = os.environ.get("SLUICE_TEST_READERS_PYTHON") or shutil.which("python3")
    if not admin:
        if os.environ.get("CI") == "true":
            sys.exit("SLUICE_TEST_PG_URL is not set (run `make services`)")
        print("current-state bench: no PostgreSQL, skipped")
        return
    scratch = tempfile.mkdtemp(prefix="sluice-bench-state-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        sizes = [one_size(args.binary, admin, python, int(n), args.changes, args.rounds, scratch, args.iceberg)
                 for n in args.sizes.split(",")]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    name = "current-state-iceberg" if args.iceberg else "current-state"
    measure.write_report(args.out, name, {"binary": args.binary, "rounds": args.rounds, "iceberg": args.iceberg,
                                          "sizes": sizes}, markdown)


if __name__ == "__main__":
    main()
