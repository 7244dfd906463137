#!/usr/bin/env bash
# infra/local/readers.sh {start|stop|status|python}
# Guarantees after `start`: $SLUICE_STACK_DIR/venv-readers holds pyarrow and duckdb
# (independent Parquet readers the tests check our output with), sqlglot (the SQL
# parser `sluice sql`'s Athena and Spark text is checked with) and pyiceberg with its
# SQL and Glue catalogs (boto3) (the reader of `table_format: iceberg` tables), created
# if missing; an older venv without one of them gets it installed.
# `python` prints that venv's interpreter. Nothing runs in the background; `stop` is a no-op.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

: "${SLUICE_READERS_PIP_SPEC:=pyarrow>=14 duckdb>=1.0 sqlglot>=25 pyiceberg[sql-sqlite,pyarrow,glue]>=0.12}"
VENV=$SLUICE_STACK_DIR/venv-readers

ready() { "$VENV/bin/python" -c 'import pyarrow.dataset, duckdb, sqlglot, sqlalchemy, pyiceberg.catalog.sql, boto3, pyiceberg.catalog.glue' 2>/dev/null; }

start() {
  ready && return 0
  command -v python3 >/dev/null || sluice_apt_install python3
  if ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; sluice_apt_install python3-venv && python3 -m venv "$VENV"; }
  fi
  echo "readers: pip install $SLUICE_READERS_PIP_SPEC" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $SLUICE_READERS_PIP_SPEC >&2
  ready || { echo "readers: pyarrow/duckdb/sqlglot/pyiceberg did not import from $VENV" >&2; return 1; }
}

case "${1:-}" in
  start) start ;;
  stop) : ;;
  status) ready && echo "readers: $VENV" ;;
  python) echo "$VENV/bin/python" ;;
  *) echo "usage: $0 {start|stop|status|python}" >&2; exit 2 ;;
esac
