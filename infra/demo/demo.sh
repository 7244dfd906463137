#!/usr/bin/env bash
# make demo: a real PostgreSQL → Parquet drain on the local stack, shown end to end.
# Creates database `sluice_demo`, writes inserts/updates/deletes and a key change, runs
# drains, prints their run summaries and the files written, then runs `sluice sql`'s
# current-state query with DuckDB over the parts and checks that it equals the source
# table (exit 1 when not) — a TOASTed value left out of an update's log record and a
# TRUNCATE included. Safe to re-run: it starts over each time; at the end it drops its
# replication slot (an idle slot would retain WAL).
set -euo pipefail
cd "$(dirname "$0")/../.."
source infra/local/env.sh

: "${SLUICE_TEST_PG_URL:?run through 'make demo' (it starts the stack and exports the URLs)}"
demo_dir="${SLUICE_DEMO_DIR:-$PWD/demo}"
db_url="${SLUICE_TEST_PG_URL%/*}/sluice_demo"
psql_admin() { psql "$SLUICE_TEST_PG_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_demo() { psql "$db_url" -X -q -v ON_ERROR_STOP=1 "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "building sluice"
cargo build --quiet $( [ -f Cargo.lock ] && echo --locked )
bin="${CARGO_TARGET_DIR:-target}/debug/sluice"

step "a fresh demo database with a table of orders"
psql_admin -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'sluice_demo'" >/dev/null
psql_admin -c "DROP DATABASE IF EXISTS sluice_demo WITH (FORCE)" -c "CREATE DATABASE sluice_demo"
psql_demo <<'SQL'
CREATE TABLE orders (
  id        bigint PRIMARY KEY,
  customer  text NOT NULL,
  amount    numeric(12,2),
  placed_at timestamptz NOT NULL DEFAULT now(),
  tags      text[],
  note      text
);
SQL
rm -rf "$demo_dir" && mkdir -p "$demo_dir"
cat > "$demo_dir/sluice.yaml" <<YAML
job: demo_orders
source:
  url_env: SLUICE_SOURCE_URL
  tables: [public.orders]
  postgres: { slot: sluice_demo, publication: sluice_demo }
destination: { type: local, path: $demo_dir/out }
state: { type: local, path: $demo_dir/state }
output: { rollover_rows: 100000 }
YAML
echo "config: $demo_dir/sluice.yaml"
export SLUICE_SOURCE_URL="$db_url"

step "first drain: creates the publication and slot (nothing to read yet)"
"$bin" drain --config "$demo_dir/sluice.yaml" 2>/dev/null

step "writes: a row emptied by TRUNCATE, inserts, updates, a delete, and a primary-key change"
psql_demo <<'SQL'
INSERT INTO orders (id, customer, amount) VALUES (7, 'zoe', 1.00);
TRUNCATE orders;
INSERT INTO orders (id, customer, amount, tags) VALUES
  (1, 'ada', 12.50, '{new}'), (2, 'brian', 99.99, NULL), (3, 'chen', 5.00, '{gift,rush}');
-- A note large enough to be stored out of line (TOAST): the updates below leave it
-- unchanged, so PostgreSQL does not log it again (`__unlogged`), and the replay fills it.
UPDATE orders SET note = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i) WHERE id IN (1, 3);
UPDATE orders SET amount = 15.00, tags = '{new,edited}' WHERE id = 1;
DELETE FROM orders WHERE id = 2;
UPDATE orders SET id = 30 WHERE id = 3;
SQL

step "second drain"
"$bin" drain --config "$demo_dir/sluice.yaml" 2>/dev/null

step "more writes, in one transaction"
psql_demo <<'SQL'
BEGIN;
INSERT INTO orders (id, customer, amount) VALUES (4, 'dana', 42.00);
UPDATE orders SET customer = 'ada lovelace' WHERE id = 1;
COMMIT;
SQL

step "third drain"
"$bin" drain --config "$demo_dir/sluice.yaml" 2>/dev/null

step "files written"
(cd "$demo_dir/out" && find . -type f | sort)

step "every change row (DuckDB over the parts)"
infra/local/readers.sh start >/dev/null
py="$(infra/local/readers.sh python)"
"$bin" sql --config "$demo_dir/sluice.yaml" --dialect duckdb --table public.orders > "$demo_dir/orders.sql"
echo "the current-state query: $demo_dir/orders.sql (sluice sql --dialect duckdb; also athena, spark)"
parts="$demo_dir/out/public.orders/**/*.parquet"
"$py" - "$parts" <<'PY'
import sys, duckdb
parts = sys.argv[1]
print(duckdb.sql(f"SELECT __op, __pos, __seq, __unlogged, id, customer, amount, tags, left(note, 12) AS note FROM read_parquet('{parts}', union_by_name=true) ORDER BY __pos, __seq"))
PY

step "the current state (sluice sql's query, DuckDB) against the source table"
canon="id, customer, amount::text, coalesce(array_to_string(tags, ','), '-'), coalesce(md5(note), '-')"
psql_demo -At -F '|' -c "SELECT $canon FROM orders ORDER BY id" > "$demo_dir/source.txt"
"$py" - "$demo_dir/orders.sql" "$canon" > "$demo_dir/replayed.txt" <<'PY'
import sys, duckdb
query = open(sys.argv[1]).read().strip().rstrip(';')
for row in duckdb.sql(f"SELECT {sys.argv[2]} FROM ({query}) ORDER BY id").fetchall():
    print('|'.join(str(c) for c in row))
PY
paste -d '\n' <(sed 's/^/source:   /' "$demo_dir/source.txt") <(sed 's/^/replayed: /' "$demo_dir/replayed.txt")
if diff -q "$demo_dir/source.txt" "$demo_dir/replayed.txt" >/dev/null; then
  echo "OK: the replayed state equals the source table"
else
  echo "MISMATCH: the replayed state differs from the source table" >&2
  diff "$demo_dir/source.txt" "$demo_dir/replayed.txt" >&2 || true
  exit 1
fi

# An idle replication slot keeps every later WAL segment of the stack's server (tests
# write gigabytes): the demo drops its slot. Its output and database stay for a look;
# `make demo` starts over.
psql_admin -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'sluice_demo'" >/dev/null
echo "dropped the demo's replication slot (an idle slot retains WAL); 'make demo' starts over"
