#!/usr/bin/env bash
# infra/local/postgres.sh {install|start|stop|status|url}
# Guarantees after `start`: a private PostgreSQL 15 (Debian's postgresql-15, installed
# if missing, without starting the system cluster) runs as user postgres on
# 127.0.0.1:$SLUICE_PG_PORT with data in $SLUICE_STACK_DIR/pg, wal_level=logical,
# trust auth (incl. replication) for local and 127.0.0.1, and accepts connections.
# Never touches the system cluster or any system service. Idempotent.
# `install` (also done by `start`) only installs the missing packages: postgresql-15 and
# postgresql-15-postgis-3 (so `CREATE EXTENSION postgis` works in any database).
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

PGBIN=/usr/lib/postgresql/15/bin
PGHOME=$SLUICE_STACK_DIR/pg
PGDATA=$PGHOME/data
PGSOCK=$PGHOME/run
PGLOG=$PGHOME/postgres.log

as_pg() { (cd / && runuser -u postgres -- "$@"); }
pmpid() { head -n 1 "$PGDATA/postmaster.pid" 2>/dev/null || true; }
running() { local p; p=$(pmpid); [ -n "$p" ] && sluice_alive "$p" && as_pg "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; }
ready() { "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$SLUICE_PG_PORT" -U postgres -d postgres; }

write_config() {
  as_pg tee "$PGDATA/sluice.conf" >/dev/null <<CONF
# written by infra/local/postgres.sh on every start
listen_addresses = '127.0.0.1'
port = $SLUICE_PG_PORT
unix_socket_directories = '$PGSOCK'
wal_level = logical
max_replication_slots = 64
max_wal_senders = 16
max_connections = 200
# the oracle compares each change's __ts with pg_xact_commit_timestamp
track_commit_timestamp = on
# throwaway instance: no crash safety needed; synchronous_commit must stay on
# (logical decoding only sees flushed WAL)
fsync = off
full_page_writes = off
CONF
  grep -q "^include 'sluice.conf'" "$PGDATA/postgresql.conf" ||
    echo "include 'sluice.conf'" | as_pg tee -a "$PGDATA/postgresql.conf" >/dev/null
  as_pg tee "$PGDATA/pg_hba.conf" >/dev/null <<HBA
local all         all                trust
host  all         all   127.0.0.1/32 trust
local replication all                trust
host  replication all   127.0.0.1/32 trust
HBA
}

# The packages: the server and PostGIS (its geometry/geography types are captured as
# EWKB; the live tests need the extension). Only what is missing is installed.
install_packages() {
  [ -x "$PGBIN/postgres" ] || sluice_apt_install postgresql-15
  [ -f /usr/share/postgresql/15/extension/postgis.control ] || sluice_apt_install postgresql-15-postgis-3
}

start() {
  install_packages
  if running && ready; then return 0; fi
  mkdir -p "$SLUICE_STACK_DIR"
  sluice_traverse postgres "$SLUICE_STACK_DIR"
  install -d -o postgres -g postgres -m 700 "$PGHOME" "$PGSOCK"
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    as_pg "$PGBIN/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$PGHOME/initdb.log"
  fi
  write_config
  # a killed postmaster that is still an unreaped zombie would block the lock file
  local p; p=$(pmpid)
  if [ -n "$p" ] && [ -e "/proc/$p" ] && sluice_dead "$p"; then sluice_wait 30 test ! -e "/proc/$p" || true; fi
  running || as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -w -t 60 -l "$PGLOG" start >/dev/null ||
    { echo "postgres: failed to start, see $PGLOG" >&2; tail -n 20 "$PGLOG" >&2; return 1; }
  sluice_wait 30 ready || { echo "postgres: not accepting connections, see $PGLOG" >&2; return 1; }
}

stop() { if running; then as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null; fi; }

case "${1:-}" in
  install) install_packages ;;
  start) start ;;
  stop) stop ;;
  status) if running && ready; then echo "postgres: running on 127.0.0.1:$SLUICE_PG_PORT"; else echo "postgres: stopped"; exit 3; fi ;;
  url) echo "postgres://postgres@127.0.0.1:$SLUICE_PG_PORT/postgres" ;;
  *) echo "usage: $0 {install|start|stop|status|url}" >&2; exit 2 ;;
esac
