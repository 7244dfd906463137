#!/usr/bin/env bash
# infra/local/mariadb.sh {start|stop|status|url}
# Guarantees after `start`: a private MariaDB (Debian 12's mariadb-server 10.11, installed
# if missing, without starting the system service) runs on 127.0.0.1:$SLUICE_MARIADB_PORT
# with its datadir, socket, pid file and logs in $SLUICE_STACK_DIR/mariadb, a ROW/FULL/FULL
# binlog (server-id 1), and root@127.0.0.1 / root@localhost with an empty password and
# ALL PRIVILEGES WITH GRANT OPTION. Ignores /etc/mysql (--no-defaults). Idempotent.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
MY_NAME=mariadb
MY_PORT=$SLUICE_MARIADB_PORT
MYHOME=$SLUICE_STACK_DIR/mariadb
# shellcheck source=infra/local/mariadb-instance.sh
. "$(dirname "${BASH_SOURCE[0]}")/mariadb-instance.sh"

case "${1:-}" in
  start) instance_start ;;
  stop) instance_stop ;;
  status) instance_status ;;
  url) echo "mysql://root@127.0.0.1:$MY_PORT/" ;;
  *) echo "usage: $0 {start|stop|status|url}" >&2; exit 2 ;;
esac
