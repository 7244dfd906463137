"""Parses every .tf file under the given directory with python-hcl2 (the syntax check:
checkov exits 0 on a file it cannot parse). Prints the count; exits 1 on any error."""

import pathlib
import sys

import hcl2

failed = 0
files = sorted(pathlib.Path(sys.argv[1]).rglob("*.tf"))
for path in files:
    if ".terraform" in path.parts:
        continue
    try:
        with open(path) as f:
            hcl2.load(f)
    except Exception as e:  # noqa: BLE001 - every parse failure is reported the same way
        failed += 1
        print(f"{path}: {type(e).__name__}: {e}", file=sys.stderr)
if not files:
    print(f"no .tf files under {sys.argv[1]}", file=sys.stderr)
    sys.exit(1)
print(f"hcl2: parsed {len(files) - failed}/{len(files)} files")
sys.exit(1 if failed else 0)
