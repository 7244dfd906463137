#!/usr/bin/env bash
# Installs the `asl-validator` npm package (Amazon States Language checks) under the
# stack dir and prints the path of its executable. Idempotent; installs Node.js and npm
# from apt when the machine has none.
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir="$SLUICE_STACK_DIR/npm-asl"
bin="$dir/node_modules/.bin/asl-validator"
if [ ! -x "$bin" ]; then
  command -v npm >/dev/null || sluice_apt_install nodejs npm >&2
  mkdir -p "$dir"
  (cd "$dir" && npm install --silent --no-audit --no-fund asl-validator@3.16.0 >&2)
fi
echo "$bin"
