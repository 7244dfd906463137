//! JSON columns in an Iceberg change-log table: pyiceberg scans them as strings holding
//! the documents (its reader refuses an Arrow extension type it does not know, so a part
//! must not store one in its Arrow schema), on PostgreSQL (`json`, `jsonb`) and MariaDB.

use std::path::Path;

use crate::support::{Job, TestDb, TestMysqlDb, readers};

const SCAN: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog("default", uri=sys.argv[1]).load_table(("cdc", "t"))
data = table.scan().to_arrow()
columns = sys.argv[2].split(",")
print(json.dumps({
    "types": {c: str(table.schema().find_field(c).field_type) for c in columns},
    "values": {c: sorted(v for v in data[c].to_pylist() if v is not None) for c in columns},
}))
"#;

fn scan(dir: &Path, columns: &str) -> Option<serde_json::Value> {
    let python = readers::python()?;
    let uri = format!("sqlite:///{}", dir.join("catalog.db").display());
    let out = readers::run(&python, SCAN, &[Path::new(&uri), Path::new(columns)]);
    Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
}

fn yaml(dir: &Path) -> String {
    format!(
        "table_format: iceberg\niceberg:\n  catalog: {{ type: sql, uri: \"sqlite:///{}\" }}\n  namespace: cdc\n",
        dir.join("catalog.db").display()
    )
}

#[test]
fn iceberg_json_columns_are_read_by_pyiceberg_as_their_documents_postgres() {
    let admin = pg_or_skip!();
    let db = TestDb::new(&admin, "ice_json");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, j json, jb jsonb)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::postgres(&db, &["t"], &yaml(dir.path()));
    assert_eq!(job.drain()["status"], "drained");
    db.sql(r#"INSERT INTO t VALUES (1, '{"a": 1}', '{"b": [1, 2]}'), (2, '[true, null]', 'null'), (3, NULL, NULL)"#);
    assert_eq!(job.drain()["status"], "drained");
    let Some(seen) = scan(dir.path(), "j,jb") else {
        return;
    };
    assert_eq!(seen["types"]["j"], "string", "{seen}");
    assert_eq!(seen["types"]["jb"], "string", "{seen}");
    assert_eq!(
        seen["values"]["j"],
        serde_json::json!(["[true, null]", "{\"a\": 1}"]),
        "{seen}"
    );
    assert_eq!(
        seen["values"]["jb"],
        serde_json::json!(["null", "{\"b\": [1, 2]}"]),
        "{seen}"
    );
}

#[test]
fn iceberg_json_columns_are_read_by_pyiceberg_as_their_documents_mariadb() {
    let admin = mysql_or_skip!();
    let db = TestMysqlDb::new(&admin, "ice_json");
    db.sql("CREATE TABLE t (id int PRIMARY KEY, j json)");
    let dir = tempfile::tempdir().unwrap();
    let job = Job::mysql(&db, &["t"], "", &yaml(dir.path()));
    assert_eq!(job.drain()["status"], "drained");
    db.sql(r#"INSERT INTO t VALUES (1, '{"a": 1}'), (2, '[true, null]'), (3, NULL)"#);
    assert_eq!(job.drain()["status"], "drained");
    let Some(seen) = scan(dir.path(), "j") else {
        return;
    };
    assert_eq!(seen["types"]["j"], "string", "{seen}");
    assert_eq!(
        seen["values"]["j"],
        serde_json::json!(["[true, null]", "{\"a\": 1}"]),
        "{seen}"
    );
}
