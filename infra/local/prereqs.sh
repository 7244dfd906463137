#!/usr/bin/env bash
# infra/local/prereqs.sh — guarantees a C toolchain, pkg-config, curl and CA certs
# (Debian packages, installed via apt only if `cc`, `pkg-config` or `curl` is missing),
# plus any command named as an argument.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

if ! command -v cc >/dev/null || ! command -v pkg-config >/dev/null || ! command -v curl >/dev/null; then
  sluice_apt_install build-essential pkg-config curl ca-certificates
fi

# Further commands named as arguments (e.g. `prereqs.sh valgrind` for the benchmarks'
# instruction counts), each installed from the Debian package of the same name if missing.
for tool in "$@"; do
  command -v "$tool" >/dev/null || sluice_apt_install "$tool"
done
