//! Layout cases: a table's output folder, read by independent readers (pyarrow's dataset
//! discovery and a DuckDB glob) with no knowledge of sluice, holds data only — snapshot
//! and change parts — and replays to the source's state with the documented query.

use super::Engine;
use crate::support::readers;

/// Reads the folder given as argv[1] twice — pyarrow's dataset discovery (which skips
/// names starting with `_` or `.`) and DuckDB's recursive glob — and prints, for each, the
/// latest state per `id` (the documented replay query) as `id=v,…` in id-text order.
const READ_FOLDER: &str = r#"
import sys, duckdb, pyarrow.dataset as ds
folder = sys.argv[1]
latest = """
    SELECT CAST(id AS VARCHAR) AS id, v FROM {src}
    QUALIFY row_number() OVER (PARTITION BY id ORDER BY __pos DESC, __seq DESC) = 1
        AND __op <> 'delete'
"""
def text(rows):
    return ",".join(f"{i}={'NULL' if v is None else v}" for i, v in sorted(rows))
con = duckdb.connect()
arrow = ds.dataset(folder, format="parquet").to_table()
con.register("arrow_folder", arrow)
print(text(con.execute(latest.format(src="arrow_folder")).fetchall()))
glob = f"read_parquet('{folder}/**/*.parquet', union_by_name = true)"
print(text(con.execute(latest.format(src=glob)).fetchall()))
"#;

pub fn a_table_folder_reads_as_data_only_with_pyarrow_and_duckdb<E: Engine>() {
    let Some(python) = readers::python() else {
        return;
    };
    let Some(db) = E::for_test("reader_layout") else {
        return;
    };
    db.create_table("t", &format!("id int PRIMARY KEY, v {}", E::TEXT));
    db.insert_series("t", 40, "seed");
    let job = db.job(&["t"], "initial: snapshot");
    assert_eq!(job.drain()["status"], "drained");
    db.sql("UPDATE t SET v = 'changed' WHERE id <= 5; DELETE FROM t WHERE id = 40");
    db.sql("INSERT INTO t (id, v) VALUES (41, 'new')");
    assert_eq!(job.drain()["status"], "drained");
    let folder = job.out().join("t");
    // The markers are there, under names every reader skips.
    for marker in [
        "_manifest.json",
        "_SUCCESS",
        "snapshot/_manifest.json",
        "snapshot/_SUCCESS",
    ] {
        assert!(folder.join(marker).exists(), "{marker} missing");
    }
    let out = readers::run(&python, READ_FOLDER, &[&folder]);
    let source = db.id_v_text("t");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0], source, "pyarrow.dataset on the table folder");
    assert_eq!(lines[1], source, "DuckDB glob over the table folder");
}
