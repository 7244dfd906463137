#!/usr/bin/env bash
# infra/local/moto.sh {start|stop|status|url}
# Guarantees after `start`: moto_server (moto[server] 5.x in the venv
# $SLUICE_STACK_DIR/venv-moto, created if missing) answers HTTP on
# 127.0.0.1:$SLUICE_MOTO_PORT; pid file and log in $SLUICE_STACK_DIR/moto. In-memory:
# state is lost on stop. Idempotent. It runs through moto_server_serialized.py, which
# makes DynamoDB and conditional S3 requests atomic as they are in AWS (see that file).
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

: "${SLUICE_MOTO_PIP_SPEC:=moto[server]>=5,<6}"
VENV=$SLUICE_STACK_DIR/venv-moto
MOTOHOME=$SLUICE_STACK_DIR/moto
MOTOPID=$MOTOHOME/moto.pid
MOTOLOG=$MOTOHOME/moto.log
URL=http://127.0.0.1:$SLUICE_MOTO_PORT

pid() { cat "$MOTOPID" 2>/dev/null || true; }
running() { local p; p=$(pid); [ -n "$p" ] && sluice_alive "$p" && grep -q moto_server "/proc/$p/cmdline"; }
answers() { curl -s -o /dev/null --max-time 2 "$URL/moto-api/"; }

ensure_venv() {
  [ -x "$VENV/bin/moto_server" ] && "$VENV/bin/python" -c 'import moto.server' 2>/dev/null && return 0
  command -v python3 >/dev/null || sluice_apt_install python3
  if ! "$VENV/bin/python" -c '' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; sluice_apt_install python3-venv && python3 -m venv "$VENV"; }
  fi
  echo "moto: pip install $SLUICE_MOTO_PIP_SPEC" >&2
  "$VENV/bin/pip" install -q "$SLUICE_MOTO_PIP_SPEC" >&2
}

start() {
  command -v curl >/dev/null || sluice_apt_install curl ca-certificates
  if running && answers; then return 0; fi
  if ! running && answers; then echo "moto: port $SLUICE_MOTO_PORT is taken by another process" >&2; return 1; fi
  ensure_venv
  mkdir -p "$MOTOHOME"
  if ! running; then
    setsid nohup "$VENV/bin/python" "$(dirname "${BASH_SOURCE[0]}")/moto_server_serialized.py" \
      -H 127.0.0.1 -p "$SLUICE_MOTO_PORT" </dev/null >>"$MOTOLOG" 2>&1 &
    echo $! >"$MOTOPID"
  fi
  sluice_wait 30 answers ||
    { echo "moto: not answering on $URL, see $MOTOLOG" >&2; tail -n 20 "$MOTOLOG" >&2; return 1; }
}

stop() {
  running || { rm -f "$MOTOPID"; return 0; }
  local p; p=$(pid)
  kill "$p"
  sluice_wait 20 sluice_dead "$p" || kill -9 "$p"
  rm -f "$MOTOPID"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running && answers; then echo "moto: running on $URL"; else echo "moto: stopped"; exit 3; fi ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 {start|stop|status|url}" >&2; exit 2 ;;
esac
