#!/usr/bin/env bash
# infra/local/mariadb-replica.sh {start|stop|status|url|reset}
# Guarantees after `start`: a THIRD private MariaDB (never touching mariadb.sh's or
# mariadb-tls.sh's) runs on 127.0.0.1:$SLUICE_MARIADB_REPLICA_PORT (33071) with its datadir,
# socket, pid file and logs in $SLUICE_STACK_DIR/mariadb-replica: the same ROW/FULL/FULL
# binlog as mariadb.sh, server-id 2, log_slave_updates=ON and gtid_strict_mode=ON, and it
# replicates from mariadb.sh's instance (127.0.0.1:$SLUICE_MARIADB_PORT, root) by GTID
# (MASTER_USE_GTID=slave_pos). The primary must be started first (services.sh does).
# `reset` makes it a fresh clone: drops its user databases, copies the primary's (a
# consistent mariadb-dump --lock-all-tables --gtid --master-data snapshot, which also
# sets gtid_slave_pos), empties its own binlog (RESET MASTER on the replica, never on the
# primary) and replicates from the snapshot's GTID position, then checks the clone is whole
# (caught up, every database of the primary there) and clones again when not — what the
# failover tests do before each test (they may have promoted it); a first `start` does it too.
# --slave-skip-errors=all keeps replication going past a row another test changed on
# both sides. Ignores /etc/mysql (--no-defaults). Idempotent.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${SLUICE_MARIADB_REPLICA_PORT:=33071}"

MY_NAME=mariadb-replica
MY_PORT=$SLUICE_MARIADB_REPLICA_PORT
MYHOME=$SLUICE_STACK_DIR/mariadb-replica
# shellcheck source=infra/local/mariadb-instance.sh
. "$(dirname "${BASH_SOURCE[0]}")/mariadb-instance.sh"

primary() { mariadb --no-defaults -h127.0.0.1 -P"$SLUICE_MARIADB_PORT" -uroot -N -e "$1"; }
user_databases() { # the non-system databases of the server `$1` (a query function)
  "$1" "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN
        ('mysql', 'information_schema', 'performance_schema', 'sys')"
}
replica() { sql "$1" | tail -n +2; }

# Clones the primary's user databases into an emptied replica, then replicates from there.
# The dump holds the primary's global read lock while it lists and reads the databases
# (--lock-all-tables, not --single-transaction): a table another test creates meanwhile is
# either in the dump or after its GTID position, never lost between the two (its rows would
# stop the replication). Writers of other tests wait for the dump, a fraction of a second.
clone() {
  local drop="" db
  for db in $(user_databases replica); do drop="$drop DROP DATABASE \`$db\`;"; done
  [ -z "$drop" ] || sql "$drop"
  sql "RESET MASTER; SET GLOBAL gtid_slave_pos = '';"
  if [ -n "$(user_databases primary)" ]; then
    mariadb-dump --no-defaults -h127.0.0.1 -P"$SLUICE_MARIADB_PORT" -uroot --lock-all-tables \
      --gtid --master-data=1 --all-databases --ignore-database=mysql --ignore-database=sys \
      | mariadb --no-defaults --socket="$MYSOCK" -uroot
  else
    sql "SET GLOBAL gtid_slave_pos = '$(primary "SELECT @@gtid_binlog_pos")';"
  fi
}

# Clones the primary's user databases (a consistent snapshot with its GTID position,
# mariadb-dump --gtid --master-data) into an emptied replica, then replicates from there.
replicate_from_clone() {
  local pos attempt
  sql "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL replicate_wild_do_table = '';"
  for attempt in 1 2 3 4 5 6; do
    clone && break
    [ "$attempt" = 6 ] && { echo "$MY_NAME: cloning the primary failed 6 times" >&2; return 1; }
    sleep 0.5
  done
  # An empty binlog that starts at the clone's GTID position (as if it held the history
  # before it), so a stream at exactly that position can be continued here.
  pos=$(replica "SELECT @@gtid_slave_pos")
  sql "RESET MASTER; SET GLOBAL gtid_binlog_state = '$pos';
       CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $SLUICE_MARIADB_PORT,
         MASTER_USER = 'root', MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos,
         MASTER_CONNECT_RETRY = 1;
       START SLAVE;"
}

# True when the replica caught up with the primary and holds every database the primary
# held before: a CREATE DATABASE that commits while the dump takes its lock can count in
# the dump's GTID position yet be missing from the dump (seen on 10.11) — the database's
# CREATE TABLE then fails here, is skipped (--slave-skip-errors), and its first row stops
# the replication.
caught_up_whole() {
  local dbs pos have db
  dbs=$(user_databases primary)
  pos=$(primary "SELECT @@gtid_binlog_pos")
  [ "$(replica "SELECT MASTER_GTID_WAIT('$pos', 20)")" = 0 ] || return 1
  have=$(user_databases replica)
  for db in $dbs; do grep -qxF "$db" <<<"$have" || return 1; done
}

reset() {
  local attempt
  for attempt in 1 2 3 4; do
    replicate_from_clone && caught_up_whole && return 0
    echo "$MY_NAME: the clone is not whole (a database created during the dump is missing); cloning again" >&2
  done
  echo "$MY_NAME: no whole clone in 4 attempts" >&2
  return 1
}

start() {
  local fresh=0
  [ -f "$MYHOME/.initialized" ] || fresh=1
  instance_start --server-id=2 --log-slave-updates=ON --gtid-strict-mode=ON \
    --slave-skip-errors=all
  if [ "$fresh" = 1 ] || [ -z "$(sql "SHOW SLAVE STATUS" | tail -n +2)" ]; then reset; fi
}

case "${1:-}" in
  start) start ;;
  stop) instance_stop ;;
  status) instance_status ;;
  reset) reset ;;
  url) echo "mysql://root@127.0.0.1:$MY_PORT/" ;;
  *) echo "usage: $0 {start|stop|status|url|reset}" >&2; exit 2 ;;
esac
