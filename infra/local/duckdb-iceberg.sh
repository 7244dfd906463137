#!/usr/bin/env bash
# infra/local/duckdb-iceberg.sh {start|stop|status|python}
# Guarantees after `start`: $SLUICE_STACK_DIR/venv-duckdb-iceberg holds DuckDB with its
# `iceberg` and `avro` extensions as pip packages (no download from extensions.duckdb.org at
# test time; DuckDB's extensions are built per DuckDB version, so this venv pins the
# version the packaged extensions exist for, apart from the readers' venv), created if
# missing. `python` prints that venv's interpreter. Nothing runs in the background; `stop`
# is a no-op.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

: "${SLUICE_DUCKDB_ICEBERG_PIP_SPEC:=duckdb==1.4.4 duckdb-ext-iceberg==1.4.4.20260205 duckdb-ext-avro==1.4.4.20260205}"
VENV=$SLUICE_STACK_DIR/venv-duckdb-iceberg

ready() {
  "$VENV/bin/python" -c 'import duckdb, duckdb_ext' 2>/dev/null \
    && compgen -G "$VENV/lib/python3*/site-packages/duckdb_ext/extensions/*/*/iceberg.duckdb_extension" >/dev/null
}

start() {
  ready && return 0
  command -v python3 >/dev/null || sluice_apt_install python3
  if ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; sluice_apt_install python3-venv && python3 -m venv "$VENV"; }
  fi
  echo "duckdb-iceberg: pip install $SLUICE_DUCKDB_ICEBERG_PIP_SPEC" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $SLUICE_DUCKDB_ICEBERG_PIP_SPEC >&2
  ready || { echo "duckdb-iceberg: DuckDB's iceberg extension is not in $VENV" >&2; return 1; }
}

case "${1:-}" in
  start) start ;;
  stop) : ;;
  status) ready && echo "duckdb-iceberg: $VENV" ;;
  python) echo "$VENV/bin/python" ;;
  *) echo "usage: $0 {start|stop|status|python}" >&2; exit 2 ;;
esac
