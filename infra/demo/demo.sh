#!/usr/bin/env bash
# make demo: a real PostgreSQL → Parquet drain on the local stack, shown end to end.
# Creates database `sluice_demo`, writes inserts/updates/deletes and a key change, runs
# two drains (the second after more writes), prints their run summaries, the files
# written, and the latest state replayed from the parts with DuckDB — next to the
# source table, so you can see they agree. Safe to re-run: it starts over each time.
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
  tags      text[]
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

step "writes: inserts, an update, a delete, and a primary-key change"
psql_demo <<'SQL'
INSERT INTO orders (id, customer, amount, tags) VALUES
  (1, 'ada', 12.50, '{new}'), (2, 'brian', 99.99, NULL), (3, 'chen', 5.00, '{gift,rush}');
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
venv="$SLUICE_STACK_DIR/venv-duckdb"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" install --quiet duckdb
fi
parts="$demo_dir/out/public.orders/cdc-*.parquet"
"$venv/bin/python" - "$parts" <<'PY'
import sys, duckdb
parts = sys.argv[1]
con = duckdb.connect()
print(con.sql(f"SELECT __op, __pos, __seq, id, customer, amount, tags FROM read_parquet('{parts}', union_by_name=true) ORDER BY __pos, __seq"))
print("latest state per key (highest (__pos, __seq) per id, deletes dropped):")
print(con.sql(f"""
  SELECT id, customer, amount, tags FROM read_parquet('{parts}', union_by_name=true)
  QUALIFY row_number() OVER (PARTITION BY id ORDER BY __pos DESC, __seq DESC) = 1 AND __op <> 'delete'
  ORDER BY id"""))
PY

step "the source table, for comparison"
psql_demo -c "SELECT id, customer, amount, tags FROM orders ORDER BY id"
