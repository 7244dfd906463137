# shellcheck shell=bash
# infra/local/env.sh — sourced by the other infra/local scripts; prints nothing.
# Guarantees: SLUICE_STACK_DIR and the three service ports are set and exported
# (each overridable from the environment), plus small helpers:
#   sluice_apt_install PKG...   apt-get install without letting packages start services
#   sluice_traverse USER DIR    make sure USER can reach DIR (adds o+x to ancestors that block it)
#   sluice_wait SECONDS CMD...  retry CMD every 0.5s until it succeeds or time runs out
#   sluice_alive PID / sluice_dead PID   process exists and is not a zombie / the opposite

: "${SLUICE_STACK_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/sluice/stack}"
: "${SLUICE_PG_PORT:=54329}"
: "${SLUICE_MARIADB_PORT:=33069}"
: "${SLUICE_MOTO_PORT:=50099}"
export SLUICE_STACK_DIR SLUICE_PG_PORT SLUICE_MARIADB_PORT SLUICE_MOTO_PORT

sluice_apt_install() {
  # policy-rc.d exit 101 = "do not start services" for invoke-rc.d; keep a pre-existing one.
  local own_policy=0 rc=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  echo "sluice: installing $* via apt" >&2
  { apt-get -qq -o DPkg::Lock::Timeout=300 update &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
      --no-install-recommends "$@"; } >&2 || rc=$?
  [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  return "$rc"
}

sluice_traverse() {
  # Walk from / down to DIR; grant search (not read) permission where USER is blocked.
  local user=$1 d="" part
  local IFS=/
  for part in $(readlink -f "$2"); do
    [ -n "$part" ] || continue
    d="$d/$part"
    [ -d "$d" ] || break
    if ! runuser -u "$user" -- test -x "$d" 2>/dev/null; then
      echo "sluice: chmod o+x $d (so $user can reach the stack dir)" >&2
      chmod o+x "$d"
    fi
  done
}

sluice_wait() {
  local secs=$1 i=0; shift
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1)); [ "$i" -ge $((secs * 2)) ] && return 1
    sleep 0.5
  done
}

# A killed daemon can linger as an unreaped zombie (kill -0 still succeeds on it).
sluice_alive() { local st; st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) && [ "${st:0:1}" != Z ]; }
sluice_dead() { ! sluice_alive "$1"; }
