#!/usr/bin/env bash
# infra/local/services.sh {up|down|status|env}
# up:   starts PostgreSQL, the TLS PostgreSQL (postgres-tls.sh), PostgreSQL 18 and its
#       physical standby (postgres18.sh), MariaDB, the TLS MariaDB
#       (mariadb-tls.sh), MariaDB's GTID replica (mariadb-replica.sh, after MariaDB), moto,
#       the reader venv (readers.sh: pyarrow, duckdb, pyiceberg), DuckDB with its iceberg
#       extension (duckdb-iceberg.sh) and the Spark venv (spark.sh: pyspark
#       and a JRE) (each
#       idempotent); names every one that
#       failed and exits non-zero if any did.
# down: stops all of them (data dirs in $SLUICE_STACK_DIR survive; moto state does not).
# env:  prints `export` lines for the tests: SLUICE_TEST_PG_URL, SLUICE_TEST_MYSQL_URL,
#       SLUICE_TEST_PG_TLS_URL, SLUICE_TEST_TLS_CA_FILE, SLUICE_TEST_TLS_WRONG_CA_FILE,
#       SLUICE_TEST_MYSQL_TLS_URL, SLUICE_TEST_MYSQL_TLS_CA_FILE, SLUICE_TEST_MYSQL_TLS_WRONG_CA_FILE,
#       SLUICE_TEST_MYSQL_REPLICA_URL, SLUICE_TEST_PG18_URL, SLUICE_TEST_PG18_STANDBY_URL,
#       SLUICE_TEST_PG18_BIN (the PostgreSQL 18 binaries, for tests that make their own clusters),
#       SLUICE_TEST_AWS_ENDPOINT, SLUICE_TEST_READERS_PYTHON, SLUICE_TEST_DUCKDB_ICEBERG_PYTHON,
#       SLUICE_TEST_SPARK_PYTHON and
#       dummy AWS credentials/region.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=infra/local/env.sh
. "$here/env.sh"
services=(postgres postgres-tls postgres18 mariadb mariadb-tls mariadb-replica moto readers duckdb-iceberg spark)

each() { # each ACTION: run ACTION for every service, collect failures
  local s failed=()
  for s in "${services[@]}"; do
    "$here/$s.sh" "$1" || failed+=("$s")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "services.sh $1: NOT OK: ${failed[*]} (logs under $SLUICE_STACK_DIR)" >&2
    return 1
  fi
}

case "${1:-}" in
  up) each start && echo "services up: postgres :$SLUICE_PG_PORT, postgres-tls :${SLUICE_PG_TLS_PORT:-54330}, postgres18 :${SLUICE_PG18_PORT:-54331} (standby :${SLUICE_PG18_STANDBY_PORT:-54332}), mariadb :$SLUICE_MARIADB_PORT, mariadb-tls :${SLUICE_MARIADB_TLS_PORT:-33070}, mariadb-replica :${SLUICE_MARIADB_REPLICA_PORT:-33071}, moto :$SLUICE_MOTO_PORT, readers $("$here/readers.sh" python), duckdb-iceberg $("$here/duckdb-iceberg.sh" python), spark $("$here/spark.sh" python)" >&2 ;;
  down) each stop ;;
  status) each status ;;
  env)
    printf 'export %s=%q\n' \
      SLUICE_TEST_PG_URL "$("$here/postgres.sh" url)" \
      SLUICE_TEST_PG_TLS_URL "$("$here/postgres-tls.sh" url)" \
      SLUICE_TEST_TLS_CA_FILE "$("$here/postgres-tls.sh" ca)" \
      SLUICE_TEST_TLS_WRONG_CA_FILE "$("$here/postgres-tls.sh" wrong-ca)" \
      SLUICE_TEST_PG18_URL "$("$here/postgres18.sh" url)" \
      SLUICE_TEST_PG18_STANDBY_URL "$("$here/postgres18.sh" standby-url)" \
      SLUICE_TEST_PG18_BIN "$("$here/postgres18.sh" bin)" \
      SLUICE_TEST_MYSQL_URL "$("$here/mariadb.sh" url)" \
      SLUICE_TEST_MYSQL_TLS_URL "$("$here/mariadb-tls.sh" url)" \
      SLUICE_TEST_MYSQL_TLS_CA_FILE "$("$here/mariadb-tls.sh" ca)" \
      SLUICE_TEST_MYSQL_TLS_WRONG_CA_FILE "$("$here/mariadb-tls.sh" wrong-ca)" \
      SLUICE_TEST_MYSQL_REPLICA_URL "$("$here/mariadb-replica.sh" url)" \
      SLUICE_TEST_AWS_ENDPOINT "$("$here/moto.sh" url)" \
      SLUICE_TEST_READERS_PYTHON "$("$here/readers.sh" python)" \
      SLUICE_TEST_DUCKDB_ICEBERG_PYTHON "$("$here/duckdb-iceberg.sh" python)" \
      SLUICE_TEST_SPARK_PYTHON "$("$here/spark.sh" python)" \
      AWS_ACCESS_KEY_ID testing \
      AWS_SECRET_ACCESS_KEY testing \
      AWS_REGION us-east-1 ;;
  *) echo "usage: $0 {up|down|status|env}" >&2; exit 2 ;;
esac
