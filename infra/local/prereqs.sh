#!/usr/bin/env bash
# infra/local/prereqs.sh — guarantees a C toolchain, pkg-config, curl and CA certs
# (Debian packages, installed via apt only if `cc`, `pkg-config` or `curl` is missing).
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

if ! command -v cc >/dev/null || ! command -v pkg-config >/dev/null || ! command -v curl >/dev/null; then
  sluice_apt_install build-essential pkg-config curl ca-certificates
fi
