//! An Iceberg trial's change-log table as pyiceberg reads it through the SQL catalog: the
//! data files of its current snapshot (relative to the table folder) and the rows a scan
//! returns. The trial then checks those files' rows by the same rules as the folder's.

use std::path::Path;

/// The namespace an Iceberg trial's config names.
pub const NAMESPACE: &str = "oracle";

/// What pyiceberg sees of the table.
#[derive(Debug)]
pub struct Seen {
    /// Data files of the current snapshot, relative to `<out>/<table>/`.
    pub files: Vec<String>,
    /// Rows a scan of the current snapshot returns.
    pub rows: u64,
}

/// Loads the table of `table` (its Iceberg name: every character other than a letter,
/// digit or `_` becomes `_`, lower case) from the catalog `catalog` (a SQLite file) and
/// lists its files; a table the catalog lacks has none.
const SCAN: &str = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
catalog = SqlCatalog("default", uri="sqlite:///" + sys.argv[1])
try:
    table = catalog.load_table((sys.argv[2], sys.argv[3]))
except NoSuchTableError:
    print(json.dumps({"files": [], "rows": 0}))
    sys.exit(0)
scan = table.scan()
files = [task.file.file_path for task in scan.plan_files()]
print(json.dumps({"files": files, "rows": scan.to_arrow().num_rows}))
"#;

pub fn seen(python: &str, catalog: &Path, out: &Path, table: &str) -> Result<Seen, String> {
    let name: String = table
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let output = std::process::Command::new(python)
        .arg("-c")
        .arg(SCAN)
        .arg(catalog)
        .args([NAMESPACE, &name])
        .output()
        .map_err(|e| format!("pyiceberg: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "pyiceberg could not read {NAMESPACE}.{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("pyiceberg's answer: {e}"))?;
    let folder = format!("file://{}/", out.join(table).display());
    let mut files = Vec::new();
    for path in json["files"].as_array().into_iter().flatten() {
        let path = path.as_str().unwrap_or_default();
        match path.strip_prefix(&folder) {
            Some(file) => files.push(file.to_owned()),
            None => {
                return Err(format!(
                    "an Iceberg data file outside the table folder: {path}"
                ));
            }
        }
    }
    Ok(Seen {
        files,
        rows: json["rows"].as_u64().unwrap_or_default(),
    })
}
