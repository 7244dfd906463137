#!/usr/bin/env bash
# infra/local/spark.sh {start|stop|status|python}
# Guarantees after `start`: $SLUICE_STACK_DIR/venv-spark holds pyspark (4.x) and pyarrow,
# and a Java runtime Spark runs on is installed (Debian's default-jre-headless when
# `java` is missing) — Spark, the third independent reader the tests check every output
# type with (tests/support/spark_check.py). `python` prints that venv's interpreter.
# Nothing runs in the background (each check starts its own local Spark); `stop` is a no-op.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

: "${SLUICE_SPARK_PIP_SPEC:=pyspark>=4,<5 pyarrow>=14}"
VENV=$SLUICE_STACK_DIR/venv-spark

ready() { command -v java >/dev/null && "$VENV/bin/python" -c 'import pyspark, pyarrow' 2>/dev/null; }

start() {
  ready && return 0
  command -v java >/dev/null || sluice_apt_install default-jre-headless
  command -v python3 >/dev/null || sluice_apt_install python3
  if ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; sluice_apt_install python3-venv && python3 -m venv "$VENV"; }
  fi
  echo "spark: pip install $SLUICE_SPARK_PIP_SPEC" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $SLUICE_SPARK_PIP_SPEC >&2
  ready || { echo "spark: java or pyspark missing (venv $VENV)" >&2; return 1; }
}

case "${1:-}" in
  start) start ;;
  stop) : ;;
  status) ready && echo "spark: $VENV" ;;
  python) echo "$VENV/bin/python" ;;
  *) echo "usage: $0 {start|stop|status|python}" >&2; exit 2 ;;
esac
