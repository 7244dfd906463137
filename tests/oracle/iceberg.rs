//! An Iceberg trial's change-log table as pyiceberg reads it — through the SQL catalog, or
//! from the metadata file an S3 Tables bucket (moto) points at (boto3): the data files of
//! its current snapshot (relative to the table folder; with S3 Tables each is the copy of
//! the part at that path, below the table's warehouse `data/`) and the rows a scan returns.
//! The trial then checks those files' rows by the same rules as the folder's.

use std::path::Path;

/// The namespace an Iceberg trial's config names.
pub const NAMESPACE: &str = "oracle";

/// Where an Iceberg trial's tables are registered.
#[derive(Debug, Clone)]
pub enum Catalog {
    /// The SQL catalog in this SQLite file.
    Sql(std::path::PathBuf),
    /// The S3 Tables bucket `arn` at moto's `endpoint`.
    S3Tables { endpoint: String, arn: String },
}

impl Catalog {
    /// The config's `catalog` value.
    pub fn yaml(&self) -> String {
        match self {
            Catalog::Sql(path) => format!("{{ type: sql, uri: \"sqlite:///{}\" }}", path.display()),
            Catalog::S3Tables { endpoint, arn } => {
                format!(
                    "{{ type: s3tables, table_bucket_arn: '{arn}', endpoint_url: '{endpoint}' }}"
                )
            }
        }
    }
}

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

/// The same from S3 Tables: the table's current metadata file (boto3), its files as
/// paths below the warehouse's `data/`.
const SCAN_S3TABLES: &str = r#"
import json, sys, boto3
from pyiceberg.table import StaticTable
endpoint, arn, namespace, name = sys.argv[1:5]
creds = dict(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
client = boto3.client("s3tables", endpoint_url=endpoint, **creds)
try:
    held = client.get_table_metadata_location(tableBucketARN=arn, namespace=namespace, name=name)
except client.exceptions.NotFoundException:
    held = {}
if not held.get("metadataLocation"):
    print(json.dumps({"files": [], "rows": 0}))
    sys.exit(0)
props = {"s3.endpoint": endpoint, "s3.access-key-id": "testing",
         "s3.secret-access-key": "testing", "s3.region": "us-east-1"}
table = StaticTable.from_metadata(held["metadataLocation"], properties=props)
scan = table.scan()
data = held["warehouseLocation"].rstrip("/") + "/data/"
files = []
for task in scan.plan_files():
    path = task.file.file_path
    if not path.startswith(data):
        print(json.dumps({"outside": path}))
        sys.exit(0)
    files.append(path[len(data):])
print(json.dumps({"files": files, "rows": scan.to_arrow().num_rows, "relative": True}))
"#;

pub fn seen(python: &str, catalog: &Catalog, out: &Path, table: &str) -> Result<Seen, String> {
    seen_named(python, catalog, out, table, "")
}

/// The current-state table `sluice materialize` keeps beside the change log
/// (`<name>_current`, SQL catalog): its files relative to `<out>/<table>/` and its rows.
pub fn seen_current(
    python: &str,
    catalog: &Catalog,
    out: &Path,
    table: &str,
) -> Result<Seen, String> {
    seen_named(python, catalog, out, table, "_current")
}

fn seen_named(
    python: &str,
    catalog: &Catalog,
    out: &Path,
    table: &str,
    suffix: &str,
) -> Result<Seen, String> {
    let name: String = table
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .chain(suffix.chars())
        .collect();
    let mut command = std::process::Command::new(python);
    match catalog {
        Catalog::Sql(path) => command.arg("-c").arg(SCAN).arg(path),
        Catalog::S3Tables { endpoint, arn } => {
            command.arg("-c").arg(SCAN_S3TABLES).args([endpoint, arn])
        }
    };
    let output = command
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
    if let Some(path) = json["outside"].as_str() {
        return Err(format!(
            "an Iceberg data file outside the table's warehouse data/: {path}"
        ));
    }
    let folder = match json["relative"].as_bool() {
        Some(true) => String::new(),
        _ => format!("file://{}/", out.join(table).display()),
    };
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
