#!/usr/bin/env bash
# bench/profile.sh BINARY [SINGLE_ROW_TXNS] [BIG_TXN_ROWS] — a callgrind profile of one
# PostgreSQL drain of a moderate backlog: SINGLE_ROW_TXNS single-row transactions (default
# 20000) then one transaction of BIG_TXN_ROWS rows (default 80000) of bench/postgres.py's
# six-column table, in a private database `bench_profile` (dropped before and after).
# Instruction counts are repeatable on a loaded machine, unlike times. BINARY should be a
# release build with symbols:
#   CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_PROFILE_RELEASE_STRIP=false cargo build --release
# Writes $PROFILE_OUT (default /tmp/sluice-callgrind.out) and prints the inclusive and
# exclusive top functions (callgrind_annotate). Needs SLUICE_TEST_PG_URL (services.sh env).
set -euo pipefail
binary=$1 singles=${2:-20000} big=${3:-80000}
out=${PROFILE_OUT:-/tmp/sluice-callgrind.out}
admin=$SLUICE_TEST_PG_URL
url="${admin%/*}/bench_profile"
work=$(mktemp -d "${TMPDIR:-/dev/shm}/sluice-profile-XXXXXX")
six="i, i % 1000, (i % 100000) / 100.0, 'label-' || i, now() - (i || ' s')::interval, i % 2 = 0"
q() { psql "$1" -X -q -t -A -v ON_ERROR_STOP=1 -c "$2"; }
drop() {
  q "$admin" "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = 'bench_profile'" >/dev/null
  q "$admin" "DROP DATABASE IF EXISTS bench_profile WITH (FORCE)"
}
trap 'drop; rm -rf "$work"' EXIT
drop
q "$admin" "CREATE DATABASE bench_profile"
q "$url" "CREATE TABLE t (id bigint PRIMARY KEY, n int, amount numeric(12,2), label text, at timestamptz, flag boolean)"
q "$url" "CREATE PUBLICATION p_profile FOR TABLE t"
q "$url" "SELECT pg_create_logical_replication_slot('s_profile', 'pgoutput')" >/dev/null
q "$url" "DO \$\$ BEGIN FOR i IN 1..$singles LOOP INSERT INTO t SELECT $six; COMMIT; END LOOP; END \$\$"
q "$url" "INSERT INTO t SELECT $six FROM generate_series($singles + 1, $singles + $big) i"
cat >"$work/sluice.yaml" <<EOF
job: bench_profile
source:
  url_env: BENCH_URL
  tables: [t]
  postgres: { slot: s_profile, publication: p_profile, create: false, adopt_slot: true }
destination: { type: local, path: $work/out }
state: { type: local, path: $work/state }
output: { spill_dir: $work }
EOF
BENCH_URL=$url SLUICE_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
  "$binary" drain --config "$work/sluice.yaml"
# head closes the pipe early; that is not a failure.
echo "== inclusive"
callgrind_annotate --inclusive=yes "$out" | head -60 || true
echo "== exclusive"
callgrind_annotate "$out" | head -60 || true
