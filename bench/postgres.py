"""PostgreSQL scenarios: a backlog in a logical slot, drained by sluice and decoded by the
server itself.

Each scenario gets its own database `bench_<scenario>` (dropped with its slots before and
after). The backlog is written after the slot is created, so the slot holds exactly it
(plus nothing else: the database is private). Per repeat:

* floor ("decode"): `SELECT count(*), sum(length(data)) FROM
  pg_logical_slot_peek_binary_changes(...)` on the slot with the drain's own pgoutput
  options — the server's decode of the same changes, without consuming them;
* floor ("transfer", the copy-out floor): `COPY (SELECT data FROM
  pg_logical_slot_peek_binary_changes(...)) TO STDOUT` through psql to /dev/null — the
  same decode with every change sent to a client, what any SQL-path reader pays;
* sluice: `sluice drain` on a copy of the slot (pg_copy_logical_replication_slot), so
  every repeat reads the full backlog; with `count_instructions`, one more drain on a
  fresh copy runs under callgrind (instructions, not time).
"""

import os
import shutil
import time

import measure

SIX = ("CREATE TABLE t (id bigint PRIMARY KEY, n int, amount numeric(12,2), label text, "
       "at timestamptz, flag boolean)")
WIDE = ("CREATE TABLE t (id bigint PRIMARY KEY, "
        + ", ".join(f"c{i} {('text', 'int', 'numeric(18,4)', 'timestamptz')[i % 4]}" for i in range(1, 40))
        + ")")
# Twenty captured tables of the six-column shape: the memory a job with many tables
# needs (one part writer per table, within output.memory_budget_bytes).
TWENTY = [f"t{i:02}" for i in range(1, 21)]
TABLES = {"single_row_txns": SIX, "one_big_txn": SIX, "wide_rows": WIDE,
          "idle": "CREATE TABLE t (id bigint PRIMARY KEY, v text)",
          "twenty_tables": "; ".join(SIX.replace("TABLE t ", f"TABLE {t} ") for t in TWENTY)}
# Rows of the twenty-table scenario are written in transactions of this many rows, each
# to one table, round robin.
TWENTY_TXN_ROWS = 100


def captured(scenario):
    """The tables a scenario's job captures."""
    return TWENTY if scenario == "twenty_tables" else ["t"]


SIX_VALUES = measure.VALUES
WIDE_VALUES = ", ".join(("repeat(md5(i::text), 8)", "i", "i / 7.0", "now()")[c % 4] for c in range(1, 40))
# Wide rows are written in transactions of this many rows (as an application would).
WIDE_TXN_ROWS = 1000


psql = measure.psql
with_db = measure.with_db


def version(admin_url):
    return psql(admin_url, "SHOW server_version")


def seed(url, scenario, rows):
    if scenario == "single_row_txns":
        psql(url, f"DO $$ BEGIN FOR i IN 1..{rows} LOOP INSERT INTO t SELECT {SIX_VALUES}; COMMIT; END LOOP; END $$")
    elif scenario == "one_big_txn":
        psql(url, f"INSERT INTO t SELECT {SIX_VALUES} FROM generate_series(1, {rows}) i")
    elif scenario == "wide_rows":
        psql(url, f"DO $$ BEGIN FOR k IN 0..{(rows - 1) // WIDE_TXN_ROWS} LOOP "
                  f"INSERT INTO t SELECT i, {WIDE_VALUES} FROM generate_series(k * {WIDE_TXN_ROWS} + 1, "
                  f"least((k + 1) * {WIDE_TXN_ROWS}, {rows})) i; COMMIT; END LOOP; END $$")
    elif scenario == "twenty_tables":
        blocks = ", ".join(f"'{t}'" for t in TWENTY)
        psql(url, f"DO $$ DECLARE names text[] := ARRAY[{blocks}]; BEGIN "
                  f"FOR k IN 0..{(rows - 1) // TWENTY_TXN_ROWS} LOOP "
                  f"EXECUTE format('INSERT INTO %I SELECT {SIX_VALUES.replace(chr(39), chr(39) * 2).replace('%', '%%')} FROM generate_series($1, $2) i', "
                  f"names[k % 20 + 1]) USING k * {TWENTY_TXN_ROWS} + 1, least((k + 1) * {TWENTY_TXN_ROWS}, {rows}); "
                  f"COMMIT; END LOOP; END $$")
    elif scenario == "idle":
        psql(url, "CREATE TABLE noise (id serial PRIMARY KEY, v text)")
        psql(url, f"INSERT INTO noise (v) SELECT 'x' FROM generate_series(1, {rows}) i")


def _drop(admin_url, db):
    psql(admin_url, f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}'")
    psql(admin_url, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def run_scenario(binary, admin_url, scenario, rows, repeat, workdir, count_instructions=False):
    db = f"bench_{scenario}"
    _drop(admin_url, db)
    psql(admin_url, f"CREATE DATABASE {db}")
    try:
        return _measure(binary, with_db(admin_url, db), db, scenario, rows, repeat, workdir, count_instructions)
    finally:
        _drop(admin_url, db)


def _measure(binary, url, db, scenario, rows, repeat, workdir, count_instructions):
    psql(url, TABLES[scenario])
    tables = captured(scenario)
    psql(url, f"CREATE PUBLICATION p_{db} FOR TABLE {', '.join(tables)}")
    slot = f"s_{db}"
    psql(url, f"SELECT lsn FROM pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    seed_start = time.monotonic()
    seed(url, scenario, rows)
    seed_s = time.monotonic() - seed_start
    floor_sql = (f"SELECT count(*), coalesce(sum(length(data)), 0) FROM pg_logical_slot_peek_binary_changes("
                 f"'{slot}', NULL, NULL, 'proto_version', '1', 'publication_names', 'p_{db}', 'binary', 'true')")
    copy_sql = (f"COPY (SELECT data FROM pg_logical_slot_peek_binary_changes("
                f"'{slot}', NULL, NULL, 'proto_version', '1', 'publication_names', 'p_{db}', 'binary', 'true')) "
                f"TO STDOUT")
    floors, copies, drains = [], [], []
    decoded = (0, 0)
    for attempt in range(repeat):
        t0 = time.monotonic()
        decoded = tuple(int(x) for x in psql(url, floor_sql).split("|"))
        floors.append({"wall_s": time.monotonic() - t0})
        copies.append(measure.floor(["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", copy_sql]))
        drains.append(_drain(binary, url, db, slot, tables, scenario, f"r{attempt}", workdir, measure.drain))
    instructions = (_drain(binary, url, db, slot, tables, scenario, "ir", workdir, measure.instructions)
                    if count_instructions else None)
    return measure.result("postgres", scenario, rows, seed_s, drains, {"decode": floors, "transfer": copies},
                          {"changes_decoded": decoded[0], "decoded_bytes": decoded[1]}, instructions)


def _drain(binary, url, db, slot, tables, scenario, run, workdir, how):
    """One drain (`how`: measure.drain or measure.instructions) of a copy of the slot."""
    copy = f"{slot}_{run}"
    psql(url, f"SELECT pg_copy_logical_replication_slot('{slot}', '{copy}')")
    job_dir = os.path.join(workdir, f"pg_{scenario}_{run}")
    os.makedirs(job_dir)
    config = measure.job_config(
        job_dir, f"{db}_{run}", tables,
        f"  postgres: {{ slot: {copy}, publication: p_{db}, create: false, adopt_slot: true }}\n")
    env = dict(os.environ, BENCH_URL=url, SLUICE_LOG="warn")
    try:
        return how(binary, config, env)
    finally:
        psql(url, f"SELECT pg_drop_replication_slot('{copy}')")
        shutil.rmtree(job_dir)
