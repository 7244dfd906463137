//! The Iceberg SQL catalog in a SQLite file — the tables of Iceberg's JDBC catalog as
//! pyiceberg's `SqlCatalog` creates and reads them (`iceberg_tables`,
//! `iceberg_namespace_properties`).
//!
//! Guarantees: the catalog tables are created when missing, with pyiceberg's DDL (a
//! catalog pyiceberg created first is used as it is, with or without its `iceberg_type`
//! column); a table's metadata pointer moves only by [`SqlCatalog::swap`], a conditional
//! `UPDATE … WHERE metadata_location = <the one read>` — exactly pyiceberg's commit —
//! so of two writers that read the same metadata only one moves it, and the other learns
//! it lost (`false`); a table row is created only when absent (`INSERT` under the primary
//! key). Each call opens its own connection (waiting up to 10 s for a lock): nothing is
//! held across a run's other I/O. Failures are `SLUICE_ICEBERG_CATALOG` (transient).

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::error::{Code, Error, Result};

const CREATE_TABLES: &str = "CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// A SQL catalog named `name` in the SQLite file at `path`.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    path: PathBuf,
    name: String,
}

/// The file a `sqlite:///…` URI names (SQLAlchemy's form: `sqlite:///rel.db`,
/// `sqlite:////abs.db`); `None` for any other URI.
pub fn sqlite_path(uri: &str) -> Option<PathBuf> {
    let path = uri.strip_prefix("sqlite:///")?;
    (!path.is_empty() && !path.contains('?')).then(|| PathBuf::from(path))
}

impl SqlCatalog {
    pub fn new(path: PathBuf, name: &str) -> Self {
        SqlCatalog {
            path,
            name: name.to_owned(),
        }
    }

    fn fail(&self, what: &str, e: rusqlite::Error) -> Error {
        Error::new(
            Code::IcebergCatalog,
            format!("Iceberg SQL catalog {}: {what}", self.path.display()),
        )
        .hint("check that the catalog file's directory exists and is writable, that the file is a SQLite database (or absent), and that no process holds it locked; the run's data stays, the next run commits again")
        .source(e)
    }

    fn open(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path).map_err(|e| self.fail("cannot open", e))?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(|e| self.fail("cannot set a busy timeout", e))?;
        conn.execute_batch(CREATE_TABLES)
            .map_err(|e| self.fail("cannot create the catalog tables", e))?;
        Ok(conn)
    }

    /// The current metadata location of `namespace.table` read without creating or
    /// changing anything (`sluice doctor`): `None` also when the catalog file or its
    /// tables do not exist yet; a file that is there but not readable is an error.
    pub fn peek(&self, namespace: &str, table: &str) -> Result<Option<String>> {
        if !self.path.exists() {
            return Ok(None);
        }
        let conn = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| self.fail("cannot open", e))?;
        if conn
            .prepare("SELECT metadata_location FROM iceberg_tables LIMIT 0")
            .is_err()
        {
            // No catalog tables yet is fine; a file that is no database is not.
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(|e| self.fail("is not a SQLite database", e))?;
            return Ok(None);
        }
        self.location(&conn, namespace, table)
    }

    /// The `metadata_location` of `namespace.table`'s row, `None` without one.
    fn location(&self, conn: &Connection, namespace: &str, table: &str) -> Result<Option<String>> {
        conn.query_row(
            "SELECT metadata_location FROM iceberg_tables
             WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
            params![self.name, namespace, table],
            |row| row.get::<_, Option<String>>(0),
        )
        .optional()
        .map(Option::flatten)
        .map_err(|e| self.fail("cannot read the table row", e))
    }

    /// The directory the catalog file is (or will be) in exists.
    pub fn directory_exists(&self) -> bool {
        let parent = self.path.parent().filter(|p| !p.as_os_str().is_empty());
        parent.is_none_or(std::path::Path::is_dir)
    }

    /// The catalog file, for messages.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Creates `namespace` (its `exists` property) when missing.
    pub fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        self.open()?
            .execute(
                "INSERT OR IGNORE INTO iceberg_namespace_properties
                 (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
                params![self.name, namespace],
            )
            .map_err(|e| self.fail("cannot create the namespace", e))?;
        Ok(())
    }

    /// The current metadata location of `namespace.table`; `None` when the table is not
    /// in the catalog.
    pub fn load(&self, namespace: &str, table: &str) -> Result<Option<String>> {
        self.location(&self.open()?, namespace, table)
    }

    /// Registers `namespace.table` at `location`; `false` when another writer registered
    /// it first.
    pub fn create(&self, namespace: &str, table: &str, location: &str) -> Result<bool> {
        let conn = self.open()?;
        let has_type = conn
            .prepare("SELECT iceberg_type FROM iceberg_tables LIMIT 0")
            .is_ok();
        let sql = if has_type {
            "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name,
             metadata_location, previous_metadata_location, iceberg_type) VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')"
        } else {
            "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name,
             metadata_location, previous_metadata_location) VALUES (?1, ?2, ?3, ?4, NULL)"
        };
        let n = conn
            .execute(sql, params![self.name, namespace, table, location])
            .map_err(|e| self.fail("cannot register the table", e))?;
        Ok(n == 1)
    }

    /// Moves `namespace.table` from metadata `old` to `new`; `false` when the table no
    /// longer points at `old` (another writer committed).
    pub fn swap(&self, namespace: &str, table: &str, old: &str, new: &str) -> Result<bool> {
        let n = self
            .open()?
            .execute(
                "UPDATE iceberg_tables SET metadata_location = ?4, previous_metadata_location = ?5
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3
                   AND metadata_location = ?5",
                params![self.name, namespace, table, new, old],
            )
            .map_err(|e| self.fail("cannot move the table's metadata pointer", e))?;
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sqlalchemy_uris() {
        assert_eq!(
            sqlite_path("sqlite:///cat.db"),
            Some(PathBuf::from("cat.db"))
        );
        assert_eq!(
            sqlite_path("sqlite:////tmp/cat.db"),
            Some(PathBuf::from("/tmp/cat.db"))
        );
        assert_eq!(sqlite_path("postgresql://h/db"), None);
        assert_eq!(sqlite_path("sqlite:///"), None);
    }

    #[test]
    fn only_the_holder_of_the_current_pointer_moves_it() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = SqlCatalog::new(dir.path().join("cat.db"), "default");
        catalog.ensure_namespace("ns").unwrap();
        catalog.ensure_namespace("ns").unwrap();
        assert_eq!(catalog.load("ns", "t").unwrap(), None);
        assert!(catalog.create("ns", "t", "m0").unwrap());
        assert!(!catalog.create("ns", "t", "other").unwrap());
        assert!(catalog.swap("ns", "t", "m0", "m1").unwrap());
        assert!(!catalog.swap("ns", "t", "m0", "m2").unwrap());
        assert_eq!(catalog.load("ns", "t").unwrap().as_deref(), Some("m1"));
        let other = SqlCatalog::new(dir.path().join("cat.db"), "other");
        assert_eq!(other.load("ns", "t").unwrap(), None);
        assert_eq!(catalog.peek("ns", "t").unwrap().as_deref(), Some("m1"));
    }

    #[test]
    fn peeking_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = SqlCatalog::new(dir.path().join("cat.db"), "default");
        assert_eq!(catalog.peek("ns", "t").unwrap(), None);
        assert!(!dir.path().join("cat.db").exists());
        assert!(catalog.directory_exists());
        std::fs::write(
            dir.path().join("cat.db"),
            b"not sqlite at all, certainly not",
        )
        .unwrap();
        assert_eq!(
            catalog.peek("ns", "t").unwrap_err().code(),
            Code::IcebergCatalog
        );
    }

    #[test]
    fn a_missing_directory_is_a_coded_error() {
        let catalog = SqlCatalog::new(PathBuf::from("/nonexistent/dir/cat.db"), "default");
        let e = catalog.load("ns", "t").unwrap_err();
        assert_eq!(e.code(), Code::IcebergCatalog);
    }
}
