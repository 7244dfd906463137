#!/usr/bin/env python3
"""sluice verify benchmark: what one full `sluice verify` of a PostgreSQL table costs.

Run by `make bench` (1,000,000 rows) and `make bench-quick` (50,000 rows, debug build,
scratch output). Per size: a table of six mixed-type columns is baselined
(`initial: snapshot`), then verified in full, then a 1% sample, then in full by chunks
(`--by-chunks`: the verify machine's tasks one after the other in one process, so its peak
RSS is that of the largest task). Measured, never asserted: wall time, CPU and peak RSS of
each verify, and the chunks and rows it read — the figures that say whether a table of
that size fits one Lambda invocation (15 minutes, 10 GiB), and what one chunk task of the
walk needs.
Every verify must find the table equal (exit 0), so the numbers are reported only for a
verify that is right.

Output: <out>/verify.json, <out>/verify.md, and one summary line on stdout.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402





def verify(binary, config, env, extra, job_dir):
    report = os.path.join(job_dir, "verify.json")
    wall, cpu, rss, out = measure.timed_child(
        [binary, "verify", "--config", config, "--table", "public.t", "--json", report, *extra], env)
    with open(report) as f:
        body = json.load(f)
    if body["mismatched_rows"] != 0:
        raise RuntimeError(f"verify found differences on a clean table: {out}")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss / 1024, "chunks": body["chunks_read"],
            "rows": body["rows_read"], "line": out.strip()}


def one_size(binary, admin, rows, scratch):
    db = f"bench_verify_{rows}"
    measure.psql(admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    measure.psql(admin, f"CREATE DATABASE {db}")
    url = measure.with_db(admin, db)
    job_dir = tempfile.mkdtemp(dir=scratch)
    try:
        measure.psql(url, measure.TABLE)
        measure.psql(url, f"INSERT INTO t SELECT {measure.VALUES} FROM generate_series(1, {rows}) i")
        config = measure.job_config(job_dir, db, ["public.t"],
                                    f"  postgres: {{ slot: s_{db}, publication: p_{db} }}\n")
        with open(config, "a") as f:
            f.write("initial: snapshot\n")
        env = dict(os.environ, BENCH_URL=url)
        subprocess.run([binary, "baseline", "--config", config], env=env, check=True, capture_output=True)
        full = verify(binary, config, env, [], job_dir)
        sample = verify(binary, config, env, ["--sample", "1%"], job_dir)
        walked = verify(binary, config, env, ["--by-chunks"], job_dir)
        return {"rows": rows, "full": full, "sample": sample, "by_chunks": walked}
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)
        measure.psql(admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def markdown(report):
    lines = [f"# sluice verify — {report['at']}", "",
             f"Commit {report['commit']}, binary `{report['binary']}`. A baselined PostgreSQL table, "
             "verified in full and with `--sample 1%`; every verify found it equal.", "",
             "| table rows | full: s | CPU s | peak RSS MiB | chunks | 1% sample: s | peak RSS MiB | chunks "
             "| by chunks: s | CPU s | peak RSS MiB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["sizes"]:
        f, s, w = r["full"], r["sample"], r["by_chunks"]
        lines.append(f"| {r['rows']} | {f['wall_s']:.2f} | {f['cpu_s']:.2f} | {f['peak_rss_mib']:.1f} | {f['chunks']} | "
                     f"{s['wall_s']:.2f} | {s['peak_rss_mib']:.1f} | {s['chunks']} | "
                     f"{w['wall_s']:.2f} | {w['cpu_s']:.2f} | {w['peak_rss_mib']:.1f} |")
    big = report["sizes"][-1]
    lines += ["", f"Full verify of {big['rows']} rows: {big['full']['wall_s']:.1f} s, "
              f"{big['full']['peak_rss_mib']:.0f} MiB peak RSS (a Lambda allows 900 s and 10240 MiB); "
              f"walked by chunks in one process: {big['by_chunks']['wall_s']:.1f} s, "
              f"{big['by_chunks']['peak_rss_mib']:.0f} MiB peak RSS (x{big['by_chunks']['peak_rss_mib'] / big['full']['peak_rss_mib']:.2f} "
              "of the whole verify's)."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = parser.parse_args()
    admin = os.environ.get("SLUICE_TEST_PG_URL")
    if not admin:
        if os.environ.get("CI") == "true":
            sys.exit("SLUICE_TEST_PG_URL is not set (run `make services`)")
        print("verify bench: no PostgreSQL, skipped")
        return
    scratch = tempfile.mkdtemp(prefix="sluice-bench-verify-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        sizes = [one_size(args.binary, admin, int(n), scratch) for n in args.sizes.split(",")]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    measure.write_report(args.out, "verify", {"binary": args.binary, "sizes": sizes}, markdown)


if __name__ == "__main__":
    main()
