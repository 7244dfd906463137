"""Measuring one process and folding repeated measurements into one result row; the
PostgreSQL helpers and the six-column table the lake benchmarks share.

Guarantees: every time is wall-clock of a child process (monotonic clock, fork to
wait4); CPU and peak RSS are that child's own (wait4 rusage, not its children's), measured
by a small parent process so the peak is not this Python process's size; a result row
carries the median of its runs, and the sluice / floor ratios are ratios of those
medians, measured side by side on the same backlog in the same run. A child that exits non-zero raises with its stderr tail.
"""

import datetime
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


# The measuring parent: the child's own wall time, CPU and peak RSS (child_usage.py says
# why it is a separate small process).
CHILD_USAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_usage.py")


def timed_child(cmd, env=None, stdout=subprocess.PIPE, cwd=None):
    """Runs cmd; returns (wall_s, cpu_s, peak_rss_kib, stdout text or ""): the child's own
    wall time (fork to wait4), CPU and peak RSS, measured by a small parent (CHILD_USAGE)."""
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile(mode="r") as report:
        proc = subprocess.Popen(["python3", "-S", CHILD_USAGE, report.name, *cmd], env=env,
                                stdout=stdout, stderr=err, cwd=cwd)
        out = proc.stdout.read().decode() if stdout == subprocess.PIPE else ""
        proc.wait()
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{cmd[0]} exited {proc.returncode}: {out[-500:]}\n{tail}")
        wall, cpu, rss = report.read().split()
    return float(wall), float(cpu), int(rss), out


def drain(binary, config, env):
    """One `sluice drain`: its cost and the fields of its run summary the report uses."""
    wall, cpu, rss, out = timed_child([binary, "drain", "--config", config], env)
    summary = json.loads(out.strip().splitlines()[-1])
    if summary["status"] != "drained":
        raise RuntimeError(f"the bench drain ended {summary['status']}: {summary}")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss / 1024, "rows": summary["rows"],
            "parts": summary["parts"], "bytes": summary["bytes"], "to": summary["to"]}


def job_config(job_dir, job, tables, source_extra=""):
    """Writes `job_dir`/sluice.yaml: a job reading `tables` from the URL in BENCH_URL,
    with its output, state and spill files in `job_dir`; returns its path."""
    config = os.path.join(job_dir, "sluice.yaml")
    with open(config, "w") as f:
        f.write(f"job: {job}\nsource:\n  url_env: BENCH_URL\n  tables: [{', '.join(tables)}]\n{source_extra}"
                f"destination: {{ type: local, path: {job_dir}/out }}\n"
                f"state: {{ type: local, path: {job_dir}/state }}\noutput: {{ spill_dir: {job_dir} }}\n")
    return config


def instructions(binary, config, env):
    """Instructions one `sluice drain` executes (every thread), counted by callgrind — the
    figure that does not move with the machine's load. None without valgrind."""
    if not shutil.which("valgrind"):
        return None
    with tempfile.TemporaryDirectory() as scratch:
        # SLUICE_BENCH_CALLGRIND_DIR keeps each profile (callgrind_annotate reads it; a
        # binary with line tables names the functions: bench/profile.sh says how to build one).
        keep = os.environ.get("SLUICE_BENCH_CALLGRIND_DIR")
        out = os.path.join(keep or scratch, f"callgrind.{os.path.basename(os.path.dirname(config))}.{time.time_ns()}")
        timed_child(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                     binary, "drain", "--config", config], env)
        with open(out) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
    raise RuntimeError(f"callgrind wrote no instruction total for {binary}")


def floor(cmd, env=None, stdout=subprocess.DEVNULL, cwd=None):
    """One floor measurement (the source's own tool): wall and CPU of the client process."""
    wall, cpu, _, _ = timed_child(cmd, env, stdout=stdout, cwd=cwd)
    return {"wall_s": wall, "cpu_s": cpu}


def _median(runs, key):
    return statistics.median(r[key] for r in runs)


def result(engine, scenario, rows, seed_s, drains, floors, extra=None, instructions=None):
    """One report row. `floors` maps a floor name ("decode", "transfer") to its runs;
    `instructions` is one drain's callgrind count (None when not measured)."""
    wall = _median(drains, "wall_s")
    peak = _median(drains, "peak_rss_mib")
    row = {
        "scenario": scenario, "engine": engine, "rows": rows, "seed_s": round(seed_s, 2),
        "drain_s": round(wall, 3), "cpu_s": round(_median(drains, "cpu_s"), 3),
        "rows_per_s": round(drains[0]["rows"] / wall) if wall > 0 else None,
        "peak_rss_mib": round(peak, 1), "parts": drains[0]["parts"], "bytes": drains[0]["bytes"],
        "rows_written": drains[0]["rows"], "gb_s": round(peak / 1024 * wall, 4), "runs": len(drains),
        "drain_runs_s": [round(d["wall_s"], 3) for d in drains],
        "cpu_us_per_row": round(_median(drains, "cpu_s") / drains[0]["rows"] * 1e6, 2) if drains[0]["rows"] else None,
        "instructions": instructions,
        "instructions_per_row": round(instructions / drains[0]["rows"]) if instructions and drains[0]["rows"] else None,
    }
    for name, runs in floors.items():
        f = _median(runs, "wall_s")
        prefix = "" if name == "decode" else f"{name}_"
        row[f"{prefix}floor_s"] = round(f, 3)
        row[f"ratio_vs_{prefix}floor"] = round(wall / f, 2) if f > 0 else None
        row[f"{prefix}floor_runs_s"] = [round(r["wall_s"], 3) for r in runs]
    row.update(extra or {})
    return row


# The table of the lake benchmarks (compaction, current state, verify): six mixed-type
# columns, and the values of row `i`.
TABLE = ("CREATE TABLE t (id bigint PRIMARY KEY, n int, amount numeric(12,2), label text, "
         "at timestamptz, flag boolean)")
VALUES = "i, i % 1000, (i % 100000) / 100.0, 'label-' || i, now() - (i || ' s')::interval, i % 2 = 0"


def psql(url, sql):
    """One statement through psql; its output, trimmed. Raises with psql's stderr."""
    out = subprocess.run(["psql", url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {sql[:200]}\n{out.stderr}")
    return out.stdout.strip()


def with_db(url, db):
    """`url` pointing at database `db` (its query string kept)."""
    base, _, rest = url.rpartition("/")
    query = rest.partition("?")[2]
    return f"{base}/{db}" + (f"?{query}" if query else "")


def write_report(out, name, report, markdown):
    """`report` (with the time and the commit added) as `<out>/<name>.json`, its markdown
    as `<out>/<name>.md`; the markdown's last line printed as the summary."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()
    report = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": commit, **report}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(report, f, indent=2)
    text = markdown(report)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(text)
    print(text.strip().splitlines()[-1])
