# infra/local/mariadb-instance.sh — sourced by mariadb.sh and mariadb-tls.sh: one private
# MariaDB instance (Debian 12's mariadb-server 10.11, installed if missing, never the system
# service), named $MY_NAME, on 127.0.0.1:$MY_PORT, datadir/socket/pid/logs in $MYHOME, a
# ROW/FULL/FULL binlog (server-id 1), root@127.0.0.1 and root@localhost with an empty
# password and ALL PRIVILEGES WITH GRANT OPTION. Ignores /etc/mysql (--no-defaults).
# The caller sets MY_NAME, MY_PORT and MYHOME before sourcing it; every function is idempotent.
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

MYDATA=$MYHOME/data
MYSOCK=$MYHOME/mariadb.sock
MYPID=$MYHOME/mariadb.pid
MYLOG=$MYHOME/mariadb.log

pid() { cat "$MYPID" 2>/dev/null || true; }
running() { local p; p=$(pid); [ -n "$p" ] && sluice_alive "$p" && [ "$(cat "/proc/$p/comm")" = mariadbd ]; }
ping() { mariadb-admin --no-defaults --socket="$MYSOCK" -uroot ping; }
answers_or_died() { ping || { [ -n "${launched:-}" ] && sluice_dead "$launched"; }; }
sql() { mariadb --no-defaults --socket="$MYSOCK" -uroot -e "$1"; }
serving() { running && ping >/dev/null 2>&1; }

ensure_root() {
  sql "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
       ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '';
       ALTER USER 'root'@'localhost' IDENTIFIED BY '';
       GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
       GRANT ALL PRIVILEGES ON *.* TO 'root'@'localhost' WITH GRANT OPTION;"
}

# The package and the instance's home directory (owned by mysql).
instance_home() {
  [ -x /usr/sbin/mariadbd ] || sluice_apt_install mariadb-server
  mkdir -p "$SLUICE_STACK_DIR"
  sluice_traverse mysql "$SLUICE_STACK_DIR"
  install -d -o mysql -g mysql -m 750 "$MYHOME"
}

# Starts the instance with the extra mariadbd arguments "$@" unless it already serves.
instance_start() {
  serving && return 0
  instance_home
  if [ ! -f "$MYHOME/.initialized" ]; then
    rm -rf "$MYDATA"
    mariadb-install-db --no-defaults --datadir="$MYDATA" --user=mysql --skip-test-db \
      --auth-root-authentication-method=normal >"$MYHOME/install-db.log" 2>&1 ||
      { echo "$MY_NAME: mariadb-install-db failed, see $MYHOME/install-db.log" >&2; return 1; }
    touch "$MYHOME/.initialized"
  fi
  launched=""
  if ! running; then
    rm -f "$MYPID" "$MYSOCK"
    setsid nohup /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$MYDATA" \
      --port="$MY_PORT" --bind-address=127.0.0.1 --socket="$MYSOCK" \
      --pid-file="$MYPID" --log-error="$MYLOG" --skip-name-resolve --server-id=1 \
      --log-bin="$MYDATA/mariadb-bin" --binlog-format=ROW --binlog-row-image=FULL \
      --binlog-row-metadata=FULL --character-set-server=utf8mb4 \
      --collation-server=utf8mb4_general_ci "$@" </dev/null >>"$MYHOME/mariadbd.out" 2>&1 &
    launched=$!
  fi
  sluice_wait 60 answers_or_died
  ping >/dev/null 2>&1 ||
    { echo "$MY_NAME: not answering, see $MYLOG" >&2; tail -n 20 "$MYLOG" >&2; return 1; }
  ensure_root
}

instance_stop() {
  running || return 0
  local p; p=$(pid)
  kill "$p"
  sluice_wait 60 sluice_dead "$p" ||
    { echo "$MY_NAME: pid $p ignored SIGTERM for 60s, killing" >&2; kill -9 "$p"; }
}

instance_status() {
  if serving; then echo "$MY_NAME: running on 127.0.0.1:$MY_PORT"; else echo "$MY_NAME: stopped"; return 3; fi
}
