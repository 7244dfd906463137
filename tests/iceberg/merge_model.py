"""The MERGE of `sluice sql --merge --dialect duckdb` (argv[1]) against a model of the
replay rule, over random change logs: keyed rows with unlogged columns, key changes,
deletes, truncates, re-baselines and a baseline whose rows land behind the watermark
(committed after later changes were merged). The change log is a DuckDB table `log`
standing in for `iceberg_scan(...)` — the only textual change to the statement. After
every batch the current-state table must equal the model. Prints `bad 0` when it did for
every seed; otherwise the first counterexample."""
import duckdb, random, re, sys, os
merge_sql = open(sys.argv[1]).read()
seed0 = int(sys.argv[2]) if len(sys.argv) > 2 else 0
def run(seed):
    rnd = random.Random(seed)
    con = duckdb.connect()
    con.execute("CREATE TABLE log (__op VARCHAR, __pos VARCHAR, __seq BIGINT, __unlogged VARCHAR[], id BIGINT, note VARCHAR, amount DECIMAL(12,2), \"at\" TIMESTAMPTZ)")
    con.execute('CREATE SCHEMA cdc')
    con.execute('CREATE TABLE cdc.public_orders_current AS SELECT id, note, amount, \"at\", CAST(NULL AS VARCHAR) AS __watermark_pos, CAST(NULL AS BIGINT) AS __watermark_rows FROM log LIMIT 0')
    sql, n = re.subn(r"iceberg_scan\('[^']*'\)", "log", merge_sql)
    assert n == 1, n
    truth = {}   # current state as of all events so far (in pos order; we only append increasing pos except late rows)
    events = []
    pos = 100
    def model():
        st = {}
        prev_del = {}
        evs = sorted(events, key=lambda e: (e[1], e[2]))
        last = None
        for e in evs:
            op, p, s, unl, k, note, amount = e
            if op in ('truncate', 'rebaseline'):
                st = {}
            elif op == 'delete':
                prev_del[(p, s)] = st.pop(k, None)
            else:
                old = st.get(k)
                if old is None and op == 'insert' and (p, s - 1) in prev_del:
                    old = prev_del[(p, s - 1)]
                row = {'note': note, 'amount': amount}
                for c in (unl or []):
                    row[c] = old[c] if old else None
                st[k] = row
        return st
    def add(op, s, unl, k, note, amount, p=None):
        events.append((op, p if p is not None else '%08d' % pos, s, unl, k, note, amount))
    for step in range(rnd.randint(3, 8)):
        for _ in range(rnd.randint(1, 6)):
            pos += 1
            st = model()
            r = rnd.random()
            keys = sorted(st)
            if r < 0.3 or not keys:
                k = rnd.randint(1, 9)
                if k in st: continue
                add('insert', 0, None, k, 'n%d' % rnd.randint(0, 99), rnd.randint(0, 9))
            elif r < 0.6:
                k = rnd.choice(keys)
                for s in range(rnd.randint(1, 2)):
                    unl = [c for c in ('note', 'amount') if rnd.random() < 0.5] or None
                    add('update', s, unl, k, None if unl and 'note' in unl else 'u%d' % rnd.randint(0, 99), None if unl and 'amount' in unl else rnd.randint(0, 9))
            elif r < 0.7:
                add('delete', 0, None, rnd.choice(keys), None, None)
            elif r < 0.85:
                k = rnd.choice(keys); k2 = rnd.randint(10, 30)
                if k2 in st: continue
                unl = [c for c in ('note', 'amount') if rnd.random() < 0.6] or None
                add('delete', 0, None, k, None, None)
                add('insert', 1, unl, k2, None if unl and 'note' in unl else 'kc', None if unl and 'amount' in unl else 5)
            elif r < 0.92:
                add('truncate', 0, None, None, None, None)
            elif r < 0.96:
                # a re-baseline: marker then snapshot rows of the state
                add('rebaseline', 0, None, None, None, None)
                for i, (k, row) in enumerate(sorted(st.items())):
                    add('snapshot', i + 1, None, k, row['note'], row['amount'])
            else:
                # a late baseline: snapshot rows below the earliest position, committed now
                add('rebaseline', 0, None, None, None, None, p='%08d' % 50)
                for i in range(rnd.randint(0, 3)):
                    add('snapshot', i + 1, None, 40 + i, 'late', 1, p='%08d' % 50)
        # commit new events into the log
        con.execute("DELETE FROM log")
        for e in events:
            con.execute("INSERT INTO log VALUES (?, ?, ?, ?, ?, ?, ?, NULL)", list(e))
        con.execute(sql)
        got = {r[0]: {'note': r[1], 'amount': None if r[2] is None else int(r[2])} for r in con.execute("SELECT id, note, amount FROM cdc.public_orders_current WHERE __watermark_pos IS NULL").fetchall()}
        n = con.execute("SELECT count(*) FROM cdc.public_orders_current WHERE __watermark_pos IS NOT NULL").fetchone()[0]
        want = {k: {'note': v['note'], 'amount': v['amount']} for k, v in model().items()}
        if got != want or n != 1:
            print('seed', seed, 'step', step, '\nwant', want, '\ngot ', got, n)
            for e in sorted(events, key=lambda e: (e[1], e[2])): print(e)
            return False
    return True
bad = 0
for seed in range(seed0, seed0 + (int(sys.argv[3]) if len(sys.argv) > 3 else 200)):
    if not run(seed):
        bad += 1
        break
print('bad', bad)
