#!/usr/bin/env bash
# infra/local/mariadb-tls.sh {start|stop|status|url|ca|wrong-ca}
# Guarantees after `start`: a SECOND private MariaDB (separate from mariadb.sh's, which it
# never touches) runs on 127.0.0.1:$SLUICE_MARIADB_TLS_PORT with its datadir, socket, pid
# file and logs in $SLUICE_STACK_DIR/mariadb-tls, the same ROW/FULL/FULL binlog as
# mariadb.sh, TLS on and require_secure_transport=ON: every TCP session must use TLS
# (the Unix socket, used only by this script, is exempt). root@localhost (socket) and
# root@127.0.0.1 (TCP, TLS) have an empty password and ALL PRIVILEGES WITH GRANT OPTION.
# Certificates, generated once with openssl into $SLUICE_STACK_DIR/mariadb-tls/certs (the
# same approach as postgres-tls.sh):
#   ca.pem        the CA that signs the server certificate
#   server.pem    server certificate, SAN DNS:localhost only (so 127.0.0.1 is a name mismatch)
#   wrong-ca.pem  an unrelated CA (for wrong-CA tests)
# Ignores /etc/mysql (--no-defaults). Idempotent.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${SLUICE_MARIADB_TLS_PORT:=33070}"

MYHOME=$SLUICE_STACK_DIR/mariadb-tls
MYDATA=$MYHOME/data
MYSOCK=$MYHOME/mariadb.sock
MYPID=$MYHOME/mariadb.pid
MYLOG=$MYHOME/mariadb.log
CERTS=$MYHOME/certs

pid() { cat "$MYPID" 2>/dev/null || true; }
running() { local p; p=$(pid); [ -n "$p" ] && sluice_alive "$p" && [ "$(cat "/proc/$p/comm")" = mariadbd ]; }
ping() { mariadb-admin --no-defaults --socket="$MYSOCK" -uroot ping; }
answers_or_died() { ping || { [ -n "${launched:-}" ] && sluice_dead "$launched"; }; }
sql() { mariadb --no-defaults --socket="$MYSOCK" -uroot -e "$1"; }

certs() {
  command -v openssl >/dev/null || sluice_apt_install openssl
  [ -s "$CERTS/server.pem" ] && [ -s "$CERTS/wrong-ca.pem" ] && return 0
  install -d -m 755 "$CERTS"
  local t; t=$(mktemp -d)
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sluice test CA (mariadb)" \
    -keyout "$t/ca.key" -out "$t/ca.pem" 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sluice unrelated CA (mariadb)" \
    -keyout "$t/wrong-ca.key" -out "$t/wrong-ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$t/server.key" -out "$t/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$t/ext"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
    -days 3650 -extfile "$t/ext" -out "$t/server.pem" 2>/dev/null
  install -m 644 "$t/ca.pem" "$t/wrong-ca.pem" "$t/server.pem" "$CERTS/"
  install -m 600 -o mysql -g mysql "$t/server.key" "$CERTS/server.key"
  rm -rf "$t"
}

ensure_root() {
  sql "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
       ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '';
       ALTER USER 'root'@'localhost' IDENTIFIED BY '';
       GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
       GRANT ALL PRIVILEGES ON *.* TO 'root'@'localhost' WITH GRANT OPTION;"
}

start() {
  [ -x /usr/sbin/mariadbd ] || sluice_apt_install mariadb-server
  if running && ping >/dev/null 2>&1; then return 0; fi
  mkdir -p "$SLUICE_STACK_DIR"
  sluice_traverse mysql "$SLUICE_STACK_DIR"
  install -d -o mysql -g mysql -m 750 "$MYHOME"
  certs
  if [ ! -f "$MYHOME/.initialized" ]; then
    rm -rf "$MYDATA"
    mariadb-install-db --no-defaults --datadir="$MYDATA" --user=mysql --skip-test-db \
      --auth-root-authentication-method=normal >"$MYHOME/install-db.log" 2>&1 ||
      { echo "mariadb-tls: mariadb-install-db failed, see $MYHOME/install-db.log" >&2; return 1; }
    touch "$MYHOME/.initialized"
  fi
  launched=""
  if ! running; then
    rm -f "$MYPID" "$MYSOCK"
    setsid nohup /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$MYDATA" \
      --port="$SLUICE_MARIADB_TLS_PORT" --bind-address=127.0.0.1 --socket="$MYSOCK" \
      --pid-file="$MYPID" --log-error="$MYLOG" --skip-name-resolve --server-id=1 \
      --log-bin="$MYDATA/mariadb-bin" --binlog-format=ROW --binlog-row-image=FULL \
      --binlog-row-metadata=FULL --character-set-server=utf8mb4 \
      --collation-server=utf8mb4_general_ci \
      --ssl-ca="$CERTS/ca.pem" --ssl-cert="$CERTS/server.pem" --ssl-key="$CERTS/server.key" \
      --require-secure-transport=ON </dev/null >>"$MYHOME/mariadbd.out" 2>&1 &
    launched=$!
  fi
  sluice_wait 60 answers_or_died
  ping >/dev/null 2>&1 ||
    { echo "mariadb-tls: not answering, see $MYLOG" >&2; tail -n 20 "$MYLOG" >&2; return 1; }
  ensure_root
  [ "$(sql "SELECT @@have_ssl" | tail -n 1)" = YES ] ||
    { echo "mariadb-tls: the server started without TLS, see $MYLOG" >&2; return 1; }
}

stop() {
  running || return 0
  local p; p=$(pid)
  kill "$p"
  sluice_wait 60 sluice_dead "$p" ||
    { echo "mariadb-tls: pid $p ignored SIGTERM for 60s, killing" >&2; kill -9 "$p"; }
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running && ping >/dev/null 2>&1; then echo "mariadb-tls: running on 127.0.0.1:$SLUICE_MARIADB_TLS_PORT"; else echo "mariadb-tls: stopped"; exit 3; fi ;;
  url) echo "mysql://root@localhost:$SLUICE_MARIADB_TLS_PORT/" ;;
  ca) echo "$CERTS/ca.pem" ;;
  wrong-ca) echo "$CERTS/wrong-ca.pem" ;;
  *) echo "usage: $0 {start|stop|status|url|ca|wrong-ca}" >&2; exit 2 ;;
esac
