#!/usr/bin/env bash
# infra/local/postgres-tls.sh {start|stop|status|url|ca|wrong-ca}
# Guarantees after `start`: a SECOND private PostgreSQL 15 (separate from postgres.sh's,
# which it never touches) runs as user postgres on 127.0.0.1:$SLUICE_PG_TLS_PORT with
# data in $SLUICE_STACK_DIR/pg-tls, wal_level=logical, ssl=on, and TCP access ONLY over
# TLS (hostssl): user postgres by trust, every other user by scram-sha-256 password.
# Certificates, generated once with openssl into $SLUICE_STACK_DIR/pg-tls/certs:
#   ca.pem        the CA that signs the server certificate
#   server.pem    server certificate, SAN DNS:localhost only (so 127.0.0.1 is a name mismatch)
#   wrong-ca.pem  an unrelated CA (for wrong-CA tests)
# Idempotent.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${SLUICE_PG_TLS_PORT:=54330}"

PGBIN=/usr/lib/postgresql/15/bin
PGHOME=$SLUICE_STACK_DIR/pg-tls
PGDATA=$PGHOME/data
PGSOCK=$PGHOME/run
PGLOG=$PGHOME/postgres.log
CERTS=$PGHOME/certs

as_pg() { (cd / && runuser -u postgres -- "$@"); }
pmpid() { head -n 1 "$PGDATA/postmaster.pid" 2>/dev/null || true; }
running() { local p; p=$(pmpid); [ -n "$p" ] && sluice_alive "$p" && as_pg "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; }
ready() { "$PGBIN/pg_isready" -q -h "$PGSOCK" -p "$SLUICE_PG_TLS_PORT" -U postgres -d postgres; }

certs() {
  command -v openssl >/dev/null || sluice_apt_install openssl
  [ -s "$CERTS/server.pem" ] && [ -s "$CERTS/wrong-ca.pem" ] && return 0
  install -d -m 755 "$CERTS"
  local t; t=$(mktemp -d)
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sluice test CA" \
    -keyout "$t/ca.key" -out "$t/ca.pem" 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sluice unrelated CA" \
    -keyout "$t/wrong-ca.key" -out "$t/wrong-ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$t/server.key" -out "$t/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$t/ext"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
    -days 3650 -extfile "$t/ext" -out "$t/server.pem" 2>/dev/null
  install -m 644 "$t/ca.pem" "$t/wrong-ca.pem" "$CERTS/"
  install -m 600 -o postgres -g postgres "$t/server.key" "$CERTS/server.key"
  install -m 644 "$t/server.pem" "$CERTS/server.pem"
  rm -rf "$t"
}

write_config() {
  as_pg tee "$PGDATA/sluice.conf" >/dev/null <<CONF
# written by infra/local/postgres-tls.sh on every start
listen_addresses = '127.0.0.1'
port = $SLUICE_PG_TLS_PORT
unix_socket_directories = '$PGSOCK'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 8
max_connections = 100
ssl = on
ssl_cert_file = '$CERTS/server.pem'
ssl_key_file = '$CERTS/server.key'
password_encryption = 'scram-sha-256'
fsync = off
full_page_writes = off
CONF
  grep -q "^include 'sluice.conf'" "$PGDATA/postgresql.conf" ||
    echo "include 'sluice.conf'" | as_pg tee -a "$PGDATA/postgresql.conf" >/dev/null
  as_pg tee "$PGDATA/pg_hba.conf" >/dev/null <<HBA
local   all all                trust
hostssl all postgres 127.0.0.1/32 trust
hostssl all all      127.0.0.1/32 scram-sha-256
HBA
}

start() {
  [ -x "$PGBIN/postgres" ] || sluice_apt_install postgresql-15
  mkdir -p "$SLUICE_STACK_DIR"
  sluice_traverse postgres "$SLUICE_STACK_DIR"
  install -d -o postgres -g postgres -m 700 "$PGHOME/run"
  install -d -o postgres -g postgres -m 711 "$PGHOME"
  certs
  if running && ready; then return 0; fi
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    as_pg "$PGBIN/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$PGHOME/initdb.log"
  fi
  write_config
  local p; p=$(pmpid)
  if [ -n "$p" ] && [ -e "/proc/$p" ] && sluice_dead "$p"; then sluice_wait 30 test ! -e "/proc/$p" || true; fi
  running || as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -w -t 60 -l "$PGLOG" start >/dev/null ||
    { echo "postgres-tls: failed to start, see $PGLOG" >&2; tail -n 20 "$PGLOG" >&2; return 1; }
  sluice_wait 30 ready || { echo "postgres-tls: not accepting connections, see $PGLOG" >&2; return 1; }
}

stop() { if running; then as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null; fi; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running && ready; then echo "postgres-tls: running on 127.0.0.1:$SLUICE_PG_TLS_PORT"; else echo "postgres-tls: stopped"; exit 3; fi ;;
  url) echo "postgres://postgres@localhost:$SLUICE_PG_TLS_PORT/postgres" ;;
  ca) echo "$CERTS/ca.pem" ;;
  wrong-ca) echo "$CERTS/wrong-ca.pem" ;;
  *) echo "usage: $0 {start|stop|status|url|ca|wrong-ca}" >&2; exit 2 ;;
esac
