#!/usr/bin/env bash
# Installs cargo-lambda (the PyPI wheel bundles the binary and zig, seconds instead of a
# ~13 minute `cargo install`) into a venv under the stack dir, and the Rust std for the
# target architecture; prints the venv's bin dir. Idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"
arch="${1:-arm64}"
venv="$SLUICE_STACK_DIR/venv-cargo-lambda"
if [ ! -x "$venv/bin/cargo-lambda" ]; then
  python3 -m venv "$venv" >&2 || { sluice_apt_install python3-venv >&2 && python3 -m venv "$venv" >&2; }
  "$venv/bin/pip" install --quiet cargo-lambda >&2
fi
case "$arch" in
  arm64) triple=aarch64-unknown-linux-gnu ;;
  x86_64) triple=x86_64-unknown-linux-gnu ;;
  *) echo "unknown arch $arch (arm64 | x86_64)" >&2; exit 1 ;;
esac
rustup target list --installed | grep -qx "$triple" || rustup target add "$triple" >&2
echo "$venv/bin"
