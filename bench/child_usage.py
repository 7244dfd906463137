"""Runs a command as this process's only child and writes the child's own wall seconds,
CPU seconds and peak RSS (KiB) to a file: `python3 -S bench/child_usage.py REPORT CMD…`.

A child's ru_maxrss keeps the peak of the memory it had before its exec, so a command
forked straight from a large process (the bench harness, a test binary running tests side
by side) would report that process's size; forked from this small interpreter it reports
its own. Used by bench/measure.py and the tests' peak-RSS measurements
(tests/support/mod.rs). Exits with the child's code (128 + signal when killed).
"""

import os
import sys
import time

report, argv = sys.argv[1], sys.argv[2:]
start = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.monotonic() - start
with open(report, "w") as f:
    f.write(f"{wall} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
