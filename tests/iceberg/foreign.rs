//! Another Iceberg writer between sluice's commits, through the SQL catalog: **pyiceberg**
//! rewrites the change-log table (an overwrite with the table's own rows, as a compaction
//! does) and writes its manifests the way pyiceberg and Iceberg Java do by default —
//! Avro compressed with `deflate`, or `zstandard` when the table asks. sluice's next
//! commits read them and append; every change reads exactly once. A run that died between
//! its commit and its checkpoint, followed by such a rewrite, is refused — sluice cannot
//! prove which rows to drop — until the operator rolls the table back as the hint says;
//! then the next run commits every change once.

use std::path::Path;

use serde_json::Value;

use super::source;
use crate::support::{Job, TestDb, readers};

/// pyiceberg on table `cdc.<argv[2]>` of SQL catalog `argv[1]`: `rewrite <codec>` sets
/// `write.avro.compression-codec` and overwrites the table with its own rows;
/// `rollback <snapshot id>` makes that snapshot current. Prints the current snapshot's
/// manifest list and the snapshots (id, operation, whether sluice wrote it).
const WRITE: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", sys.argv[2]))
action, arg = sys.argv[3], sys.argv[4]
if action == "rewrite":
    with table.transaction() as tx:
        tx.set_properties({"write.avro.compression-codec": arg})
    table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", sys.argv[2]))
    table.overwrite(table.scan().to_arrow())
elif action == "rollback":
    table.manage_snapshots().rollback_to_snapshot(int(arg)).commit()
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", sys.argv[2]))
print(json.dumps({
    "manifest_list": table.current_snapshot().manifest_list,
    "snapshots": [[s.snapshot_id, s.summary.operation.value, "sluice.job" in s.summary.additional_properties]
                  for s in table.snapshots()],
}))
"#;

/// What pyiceberg reads of `cdc.t`, replayed by `id`.
const READ: &str = concat!(
    crate::py_replay_by_id!(),
    r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", sys.argv[2]))
rows = table.scan().to_arrow().to_pylist()
state = replay(rows)
print(json.dumps({
    "rows": len(rows),
    "distinct": len(set((r["__pos"], r["__seq"]) for r in rows)),
    "replayed": sorted([k, v] for k, v in state.items()),
}))
"#
);

fn python(script: &str, dir: &Path, args: &[&str]) -> Option<Value> {
    let python = readers::python()?;
    let uri = format!("sqlite:///{}", dir.join("catalog.db").display());
    let mut all = vec![Path::new(&uri), Path::new("t")];
    all.extend(args.iter().map(Path::new));
    let out = readers::run(&python, script, &all);
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
}

/// The `avro.codec` of the Avro file at `uri` (`file://…`).
fn codec(uri: &Value) -> String {
    let path = uri.as_str().unwrap().trim_start_matches("file://");
    let body = std::fs::read(path).unwrap();
    let header = &body[..body.len().min(4096)];
    ["deflate", "zstandard", "null"]
        .into_iter()
        .find(|c| {
            header
                .windows(c.len() + 1)
                .any(|w| w[1..] == *c.as_bytes() && w[0] as usize == c.len() * 2)
        })
        .unwrap_or("unknown")
        .to_owned()
}

#[test]
fn iceberg_commits_go_on_after_another_writer_rewrote_the_table() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_foreign");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &super::iceberg_yaml(dir.path(), ""));
    let _ = job.drain();
    db.sql("INSERT INTO t SELECT i, 'a' || i FROM generate_series(1, 20) i");
    assert_eq!(job.drain()["rows"], 20);

    // pyiceberg compacts with its default codec, then sluice commits on top.
    let Some(rewritten) = python(WRITE, dir.path(), &["rewrite", "gzip"]) else {
        return;
    };
    assert_eq!(codec(&rewritten["manifest_list"]), "deflate", "{rewritten}");
    db.sql("UPDATE t SET v = 'b' WHERE id <= 5; DELETE FROM t WHERE id > 18");
    assert_eq!(job.drain()["rows"], 7);
    // Again with zstd.
    let rewritten = python(WRITE, dir.path(), &["rewrite", "zstd"]).unwrap();
    assert_eq!(
        codec(&rewritten["manifest_list"]),
        "zstandard",
        "{rewritten}"
    );
    db.sql("INSERT INTO t VALUES (100, 'late')");
    assert_eq!(job.drain()["rows"], 1);
    let read = python(READ, dir.path(), &[]).unwrap();
    assert_eq!(read["rows"], 28, "{read}");
    assert_eq!(read["distinct"], 28, "every change exactly once: {read}");
    assert_eq!(read["replayed"], source(&db), "replay == source: {read}");

    // A run dies between its commit and its checkpoint; a rewrite follows: refused.
    db.sql("UPDATE t SET v = 'c' WHERE id = 1");
    let run = job.run(&["drain"], &[("SLUICE_FAULT", "iceberg_committed:error")]);
    assert_eq!(run.error_code(), "SLUICE_FAULT_INJECTED", "{}", run.stdout);
    let before = python(WRITE, dir.path(), &["none", "-"]).unwrap();
    let snapshots = before["snapshots"].as_array().unwrap();
    let crashed = snapshots.last().unwrap();
    assert_eq!(
        crashed[2], true,
        "sluice's crashed snapshot is current: {before}"
    );
    let parent = snapshots[snapshots.len() - 2][0].as_i64().unwrap();
    python(WRITE, dir.path(), &["rewrite", "gzip"]).unwrap();
    let run = job.run(&["drain"], &[]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert_eq!(
        run.error_code(),
        "SLUICE_ICEBERG_METADATA",
        "{}",
        run.stdout
    );
    let hint = run.summary()["error"]["hint"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(hint.contains("roll the table back"), "{hint}");
    assert!(
        run.stdout.contains(&crashed[0].to_string()),
        "the message names the snapshot to drop: {}",
        run.stdout
    );
    // The operator rolls back as the hint says; the next run commits the change once.
    python(WRITE, dir.path(), &["rollback", &parent.to_string()]).unwrap();
    assert_eq!(job.drain()["rows"], 1);
    let read = python(READ, dir.path(), &[]).unwrap();
    assert_eq!(read["rows"], 29, "{read}");
    assert_eq!(read["distinct"], 29, "{read}");
    assert_eq!(read["replayed"], source(&db), "replay == source: {read}");
}
