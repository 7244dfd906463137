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

MY_NAME=mariadb-tls
MY_PORT=$SLUICE_MARIADB_TLS_PORT
MYHOME=$SLUICE_STACK_DIR/mariadb-tls
CERTS=$MYHOME/certs
# shellcheck source=infra/local/mariadb-instance.sh
. "$(dirname "${BASH_SOURCE[0]}")/mariadb-instance.sh"

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

start() {
  serving && return 0
  instance_home
  certs
  instance_start \
    --ssl-ca="$CERTS/ca.pem" --ssl-cert="$CERTS/server.pem" --ssl-key="$CERTS/server.key" \
    --require-secure-transport=ON
  [ "$(sql "SELECT @@have_ssl" | tail -n 1)" = YES ] ||
    { echo "$MY_NAME: the server started without TLS, see $MYLOG" >&2; return 1; }
}

case "${1:-}" in
  start) start ;;
  stop) instance_stop ;;
  status) instance_status ;;
  url) echo "mysql://root@localhost:$MY_PORT/" ;;
  ca) echo "$CERTS/ca.pem" ;;
  wrong-ca) echo "$CERTS/wrong-ca.pem" ;;
  *) echo "usage: $0 {start|stop|status|url|ca|wrong-ca}" >&2; exit 2 ;;
esac
