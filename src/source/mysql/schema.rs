//! The captured tables as `information_schema` declares them at open: columns, declared
//! types, nullability and the key.
//!
//! Guarantees: every configured table exists and is a base table; every column of a
//! MySQL / MariaDB built-in type resolves to an output type and its field metadata
//! ([`declared_type`], [`declared_metadata`]: every character set, spatial types, TIME,
//! zero dates, MariaDB's `inet6` / `inet4` / `uuid` — none refused); a type sluice does
//! not know (one newer than it: MariaDB 11's `vector`) fails the open naming every such
//! column; the key is the
//! primary key, or else the first unique index over NOT NULL columns (a table with
//! neither is captured without a key: a key change cannot be split and downstream
//! dedupe needs all columns). The binlog's own TABLE_MAP metadata decides how each row
//! is decoded ([`super::values`]); the declared types add what the binlog cannot say
//! (MariaDB's JSON is a LONGTEXT with a `json_valid` check) and the source type names.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::charset;
use super::connect::query_error;
use super::forms;
use crate::change::{Column, ColumnType, TableSchema};
use crate::error::{Code, Error, Result};

/// A captured table as `information_schema` describes it.
#[derive(Debug, Clone)]
pub struct CapturedTable {
    /// Name as configured (the output directory).
    pub config_name: String,
    pub database: String,
    pub table: String,
    /// The key's column names in index order (empty: no key).
    pub key: Vec<String>,
    /// The table as of the open.
    pub shape: Arc<TableSchema>,
}

impl CapturedTable {
    /// `` `database`.`table` ``.
    pub fn quoted(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.database),
            quote_ident(&self.table)
        )
    }

    /// The key columns, in index order.
    pub fn key_columns(&self) -> Vec<&Column> {
        self.key.iter().filter_map(|k| self.column(k)).collect()
    }

    /// The declared column named `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.shape.columns.iter().find(|c| c.name == name)
    }

    /// A configured table the server no longer shows (dropped or renamed while its
    /// changes were still in the backlog): no columns, no key. The stream maps its rows
    /// from the binlog's own TABLE_MAP events (names, types and, with FULL metadata, the
    /// primary key), so its changes up to the drop or rename are written.
    pub fn gone(config_name: &str, default_db: Option<&str>) -> Result<CapturedTable> {
        let (database, table) = split_name(config_name, default_db)?;
        Ok(CapturedTable {
            config_name: config_name.to_owned(),
            database,
            table,
            key: Vec::new(),
            shape: Arc::new(TableSchema {
                name: config_name.to_owned(),
                columns: Vec::new(),
            }),
        })
    }

    /// True for a table the server no longer shows ([`CapturedTable::gone`]).
    pub fn is_gone(&self) -> bool {
        self.shape.columns.is_empty()
    }
}

/// `` `name` `` with backticks doubled.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Splits `database.table`; a bare name uses the URL's database.
pub fn split_name(config_name: &str, default_db: Option<&str>) -> Result<(String, String)> {
    match config_name.split_once('.') {
        Some((db, table)) => Ok((db.to_owned(), table.to_owned())),
        None => match default_db {
            Some(db) if !db.is_empty() => Ok((db.to_owned(), config_name.to_owned())),
            _ => Err(Error::new(
                Code::ConfigInvalid,
                format!("source.tables entry {config_name:?} names no database"),
            )
            .hint("write MySQL tables as database.table, or put the database in the source URL (mysql://host:3306/app)")),
        },
    }
}

/// The spatial `DATA_TYPE`s.
const SPATIAL: &[&str] = &[
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
    "geomcollection",
];

/// The sluice type for a declared column (`DATA_TYPE`, `COLUMN_TYPE`, charset, and
/// whether MariaDB's `json_valid` check marks it as JSON). Pure.
pub fn declared_type(
    data_type: &str,
    column_type: &str,
    charset: Option<&str>,
    is_json: bool,
) -> Result<ColumnType, String> {
    let unsigned = column_type.to_ascii_lowercase().contains("unsigned");
    let int =
        |signed: ColumnType, unsigned_ty: ColumnType| if unsigned { unsigned_ty } else { signed };
    let text = || match charset.map(charset::decoding) {
        Some(decoding) if decoding.is_bytes() => ColumnType::Binary,
        _ if is_json => ColumnType::Json,
        _ => ColumnType::Utf8,
    };
    let data_type = data_type.to_ascii_lowercase();
    Ok(match data_type.as_str() {
        "tinyint" => int(ColumnType::Int8, ColumnType::UInt8),
        "smallint" => int(ColumnType::Int16, ColumnType::UInt16),
        "mediumint" | "int" | "integer" => int(ColumnType::Int32, ColumnType::UInt32),
        "bigint" => int(ColumnType::Int64, ColumnType::UInt64),
        "decimal" | "numeric" => {
            let (precision, scale) = super::values::decimal_args(column_type)
                .ok_or_else(|| format!("cannot read precision and scale from {column_type}"))?;
            super::values::decimal_type(precision, scale)
        }
        "float" => ColumnType::Float32,
        "double" | "real" | "double precision" => ColumnType::Float64,
        "date" => ColumnType::Date,
        "datetime" => ColumnType::Timestamp,
        "timestamp" => ColumnType::TimestampTz,
        "time" => ColumnType::Utf8,
        "year" => ColumnType::Int16,
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" => text(),
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
            ColumnType::Binary
        }
        "json" => ColumnType::Json,
        "enum" | "set" => ColumnType::Utf8,
        "bit" => ColumnType::UInt64,
        "inet6" | "inet4" | "uuid" => ColumnType::Utf8,
        spatial if SPATIAL.contains(&spatial) => ColumnType::Binary,
        other => return Err(format!("type {other} is not supported")),
    })
}

/// The field metadata a declared column's output carries besides its source type: how
/// a TIME, a spatial value or a column in a character set without a decoding table is
/// held, and the non-calendar date encoding of DATE, DATETIME and TIMESTAMP columns
/// ([`forms`]). Pure.
pub fn declared_metadata(data_type: &str, charset: Option<&str>) -> BTreeMap<String, String> {
    let data_type = data_type.to_ascii_lowercase();
    match data_type.as_str() {
        "time" | "inet6" | "inet4" | "uuid" => forms::metadata(forms::FORM_KEY, "text"),
        "date" => forms::metadata(forms::ZERO_DATES_KEY, forms::ZERO_DATE_RULE),
        "datetime" | "timestamp" => {
            forms::metadata(forms::ZERO_DATES_KEY, forms::ZERO_DATETIME_RULE)
        }
        spatial if SPATIAL.contains(&spatial) => forms::metadata(forms::FORM_KEY, "wkb"),
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" => match charset {
            Some(cs) if charset::decoding(cs) == charset::Decoding::Raw => {
                forms::metadata(forms::CHARSET_KEY, &cs.to_ascii_lowercase())
            }
            _ => BTreeMap::new(),
        },
        _ => BTreeMap::new(),
    }
}

/// Resolves the configured tables the server shows; returns them and the names of those
/// it does not (each still a refusal where a table must exist).
pub async fn resolve_present(
    conn: &mut Conn,
    tables: &[String],
    default_db: Option<&str>,
) -> Result<(Vec<CapturedTable>, Vec<String>)> {
    let (mut present, mut gone) = (Vec::new(), Vec::new());
    for name in tables {
        match resolve_one(conn, name, default_db).await? {
            Some(table) => present.push(table),
            None => gone.push(name.clone()),
        }
    }
    Ok((present, gone))
}

/// Resolves every configured table.
pub async fn resolve(
    conn: &mut Conn,
    tables: &[String],
    default_db: Option<&str>,
) -> Result<Vec<CapturedTable>> {
    let mut out = Vec::with_capacity(tables.len());
    for name in tables {
        let Some(table) = resolve_one(conn, name, default_db).await? else {
            let (database, table) = split_name(name, default_db)?;
            return Err(Error::new(
                Code::SourcePrerequisite,
                format!("table {name} does not exist"),
            )
            .hint(format!(
                "check source.tables (database.table) and grant the source user SELECT on it: GRANT SELECT ON `{database}`.`{table}` TO '<user>'@'<host>'"
            )));
        };
        out.push(table);
    }
    Ok(out)
}

type ColumnRow = (String, String, String, String, Option<String>);

/// The table `config_name` names, or `None` when the server shows no such table.
async fn resolve_one(
    conn: &mut Conn,
    config_name: &str,
    default_db: Option<&str>,
) -> Result<Option<CapturedTable>> {
    let (database, table) = split_name(config_name, default_db)?;
    let found: Option<(String, String, String)> = conn
        .exec_first(
            "SELECT TABLE_TYPE, TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (&database, &table),
        )
        .await
        .map_err(|e| query_error("reading information_schema.TABLES", e))?;
    // The names as the server stores them: TABLE_MAP events carry these.
    let (kind, database, table) = match found {
        Some((kind, db, name)) => (Some(kind), db, name),
        None => (None, database, table),
    };
    match kind.as_deref() {
        None => return Ok(None),
        Some("BASE TABLE" | "SYSTEM VERSIONED") => {}
        Some(other) => {
            return Err(Error::new(
                Code::SourcePrerequisite,
                format!("{config_name} is not a base table ({other})"),
            )
            .hint("only tables have row events in the binlog; capture the underlying table"));
        }
    }
    let rows: Vec<ColumnRow> = conn
        .exec(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (&database, &table),
        )
        .await
        .map_err(|e| query_error("reading information_schema.COLUMNS", e))?;
    let json_columns = json_checked_columns(conn, &database, &table).await?;
    let key = key_columns(conn, &database, &table, &rows).await?;
    let mut columns = Vec::with_capacity(rows.len());
    let mut unsupported = Vec::new();
    for (name, data_type, column_type, nullable, charset) in rows {
        let is_json = json_columns.contains(&name);
        let field_metadata = declared_metadata(&data_type, charset.as_deref());
        let ty = match declared_type(&data_type, &column_type, charset.as_deref(), is_json) {
            Ok(ty) => ty,
            Err(reason) => {
                unsupported.push(format!("{name} has type {column_type}: {reason}"));
                continue;
            }
        };
        columns.push(Column {
            key: key.contains(&name),
            nullable: nullable.eq_ignore_ascii_case("YES"),
            source_type: if is_json {
                "json".to_owned()
            } else {
                column_type
            },
            field_metadata,
            name,
            ty,
        });
    }
    crate::source::refuse_unsupported(
        config_name,
        &unsupported,
        "see the type table in docs/mysql.md; a type newer than this sluice has no mapping yet: change each such column to a type in the table, or stop capturing the table",
    )?;
    if key.is_empty() {
        tracing::warn!(table = %config_name, "table has no primary key or NOT NULL unique index; it is captured without a key");
    }
    Ok(Some(CapturedTable {
        config_name: config_name.to_owned(),
        database,
        table,
        key,
        shape: Arc::new(TableSchema {
            name: config_name.to_owned(),
            columns,
        }),
    }))
}

/// MariaDB declares JSON as LONGTEXT with a column-level `json_valid(col)` check.
async fn json_checked_columns(conn: &mut Conn, database: &str, table: &str) -> Result<Vec<String>> {
    let clauses: Vec<String> = match conn
        .exec(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS \
             WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?",
            (database, table),
        )
        .await
    {
        Ok(rows) => rows,
        // MySQL's CHECK_CONSTRAINTS has no TABLE_NAME column; MySQL has a real JSON type.
        Err(_) => return Ok(Vec::new()),
    };
    Ok(clauses
        .iter()
        .filter_map(|clause| {
            let inner = clause
                .trim()
                .strip_prefix("json_valid(")?
                .strip_suffix(')')?;
            Some(inner.trim_matches('`').replace("``", "`"))
        })
        .collect())
}

/// The primary key, or the first unique index whose columns are all NOT NULL.
async fn key_columns(
    conn: &mut Conn,
    database: &str,
    table: &str,
    columns: &[ColumnRow],
) -> Result<Vec<String>> {
    let rows: Vec<(String, String)> = conn
        .exec(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX",
            (database, table),
        )
        .await
        .map_err(|e| query_error("reading information_schema.STATISTICS", e))?;
    let mut indexes: Vec<(String, Vec<String>)> = Vec::new();
    for (index, column) in rows {
        match indexes.last_mut() {
            Some((name, cols)) if *name == index => cols.push(column),
            _ => indexes.push((index, vec![column])),
        }
    }
    let not_null: HashMap<&str, bool> = columns
        .iter()
        .map(|(name, _, _, nullable, _)| (name.as_str(), nullable.eq_ignore_ascii_case("NO")))
        .collect();
    Ok(indexes
        .into_iter()
        .find(|(name, cols)| {
            name == "PRIMARY"
                || cols
                    .iter()
                    .all(|c| not_null.get(c.as_str()).copied().unwrap_or(false))
        })
        .map(|(_, cols)| cols)
        .unwrap_or_default())
}

/// Collation id → character set name, from the server (MariaDB's and MySQL's ids differ).
pub async fn collations(conn: &mut Conn) -> Result<HashMap<u16, String>> {
    let rows: Vec<(Option<u64>, Option<String>)> = conn
        .query("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS")
        .await
        .map_err(|e| query_error("reading information_schema.COLLATIONS", e))?;
    let mut map: HashMap<u16, String> = rows
        .into_iter()
        .filter_map(|(id, cs)| Some((u16::try_from(id?).ok()?, cs?)))
        .collect();
    map.entry(63).or_insert_with(|| "binary".to_owned());
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_need_a_database() {
        assert_eq!(
            split_name("app.orders", None).unwrap(),
            ("app".into(), "orders".into())
        );
        assert_eq!(
            split_name("orders", Some("app")).unwrap(),
            ("app".into(), "orders".into())
        );
        assert_eq!(
            split_name("orders", None).unwrap_err().code(),
            Code::ConfigInvalid
        );
    }

    #[test]
    fn declared_types_map_to_sluice_types() {
        let t = |d: &str, c: &str, cs: Option<&str>| declared_type(d, c, cs, false);
        assert_eq!(t("tinyint", "tinyint(4)", None), Ok(ColumnType::Int8));
        assert_eq!(
            t("tinyint", "tinyint(3) unsigned", None),
            Ok(ColumnType::UInt8)
        );
        assert_eq!(
            t("mediumint", "mediumint(8) unsigned", None),
            Ok(ColumnType::UInt32)
        );
        assert_eq!(
            t("bigint", "bigint(20) unsigned", None),
            Ok(ColumnType::UInt64)
        );
        assert_eq!(t("decimal", "decimal(65,30)", None), Ok(ColumnType::Utf8));
        assert_eq!(
            t("decimal", "decimal(38,30)", None),
            Ok(ColumnType::Decimal {
                precision: 38,
                scale: 30
            })
        );
        assert_eq!(
            t("decimal", "decimal(10,0) unsigned", None),
            Ok(ColumnType::Decimal {
                precision: 10,
                scale: 0
            })
        );
        assert_eq!(
            t("timestamp", "timestamp(6)", None),
            Ok(ColumnType::TimestampTz)
        );
        assert_eq!(
            t("datetime", "datetime(3)", None),
            Ok(ColumnType::Timestamp)
        );
        assert_eq!(
            t("varchar", "varchar(10)", Some("utf8mb4")),
            Ok(ColumnType::Utf8)
        );
        assert_eq!(t("text", "text", Some("latin1")), Ok(ColumnType::Utf8));
        assert_eq!(
            t("varchar", "varchar(10)", Some("binary")),
            Ok(ColumnType::Binary)
        );
        assert_eq!(t("blob", "blob", None), Ok(ColumnType::Binary));
        assert_eq!(
            t("enum", "enum('a','b')", Some("utf8mb4")),
            Ok(ColumnType::Utf8)
        );
        assert_eq!(t("bit", "bit(5)", None), Ok(ColumnType::UInt64));
        assert_eq!(t("json", "json", None), Ok(ColumnType::Json));
        assert_eq!(
            declared_type("longtext", "longtext", Some("utf8mb4"), true),
            Ok(ColumnType::Json)
        );
        assert_eq!(t("point", "point", None), Ok(ColumnType::Binary));
        assert_eq!(t("geometry", "geometry", None), Ok(ColumnType::Binary));
        assert_eq!(t("time", "time(3)", None), Ok(ColumnType::Utf8));
        assert_eq!(
            t("varchar", "varchar(10)", Some("sjis")),
            Ok(ColumnType::Utf8)
        );
        assert_eq!(t("char", "char(4)", Some("ucs2")), Ok(ColumnType::Utf8));
        assert_eq!(
            t("varchar", "varchar(4)", Some("keybcs2")),
            Ok(ColumnType::Binary)
        );
        assert_eq!(t("inet6", "inet6", None), Ok(ColumnType::Utf8));
        assert_eq!(t("uuid", "uuid", None), Ok(ColumnType::Utf8));
        assert!(
            t("vector", "vector(3)", None)
                .unwrap_err()
                .contains("vector")
        );
    }

    /// The name docs/mysql.md's type table gives an output type.
    fn doc_name(ty: &ColumnType) -> String {
        match ty {
            ColumnType::Decimal { precision, .. } if *precision > 38 => "Decimal256".into(),
            ColumnType::Decimal { .. } => "Decimal128".into(),
            ColumnType::Date => "Date32".into(),
            ColumnType::Timestamp => "Timestamp(µs)".into(),
            ColumnType::TimestampTz => "Timestamp(µs, UTC)".into(),
            ColumnType::Json => "JSON extension".into(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn the_docs_type_table_matches_the_code() {
        let docs = include_str!("../../../docs/mysql.md");
        let rows: Vec<&str> = docs.lines().filter(|l| l.starts_with("| ")).collect();
        let row = |name: &str| {
            let quoted = format!("`{name}`");
            rows.iter()
                .find(|l| l.split('|').nth(1).is_some_and(|c| c.contains(&quoted)))
                .unwrap_or_else(|| panic!("{name} is not in the type table of docs/mysql.md"))
                .to_string()
        };
        // (doc name, DATA_TYPE, COLUMN_TYPE, charset, what the row must also say)
        for (name, data_type, column_type, charset, also) in [
            ("tinyint", "tinyint", "tinyint(4)", None, ""),
            ("smallint", "smallint", "smallint(6)", None, ""),
            ("int", "int", "int(11)", None, ""),
            ("bigint", "bigint", "bigint(20)", None, ""),
            ("decimal(p,s)", "decimal", "decimal(12,2)", None, ""),
            ("decimal(p,s)", "decimal", "decimal(65,30)", None, ""),
            ("float", "float", "float", None, ""),
            ("double", "double", "double", None, ""),
            ("date", "date", "date", None, "sluice.zero_dates"),
            (
                "datetime(fsp)",
                "datetime",
                "datetime(6)",
                None,
                "sluice.zero_dates",
            ),
            (
                "timestamp(fsp)",
                "timestamp",
                "timestamp(3)",
                None,
                "sluice.zero_dates",
            ),
            ("time(fsp)", "time", "time(6)", None, "sluice.form = text"),
            ("year", "year", "year(4)", None, ""),
            ("varchar", "varchar", "varchar(10)", Some("cp1250"), ""),
            (
                "keybcs2",
                "varchar",
                "varchar(10)",
                Some("keybcs2"),
                "sluice.charset",
            ),
            ("varbinary", "varbinary", "varbinary(10)", None, ""),
            ("json", "json", "json", None, ""),
            ("enum", "enum", "enum('a')", Some("utf8mb4"), ""),
            ("set", "set", "set('a')", Some("utf8mb4"), ""),
            ("bit(n)", "bit", "bit(5)", None, ""),
            (
                "geometry",
                "geometry",
                "geometry",
                None,
                "sluice.form = wkb",
            ),
            ("point", "point", "point", None, "sluice.form = wkb"),
            ("inet6", "inet6", "inet6", None, "sluice.form = text"),
            ("inet4", "inet4", "inet4", None, "sluice.form = text"),
            ("uuid", "uuid", "uuid", None, "sluice.form = text"),
        ] {
            let ty = declared_type(data_type, column_type, charset, false).unwrap();
            let row = row(name);
            assert!(row.contains(&doc_name(&ty)), "{name}: {ty:?} not in {row}");
            assert!(row.contains(also), "{name}: {also} not in {row}");
            let metadata = declared_metadata(data_type, charset);
            for key in metadata.keys() {
                assert!(row.contains(key.as_str()), "{name}: {key} not in {row}");
            }
        }
        let unsigned = row("tinyint");
        assert!(unsigned.contains("Int8"));
        let unsigned = rows.iter().find(|l| l.contains("unsigned")).unwrap();
        for ty in ["UInt8", "UInt16", "UInt32", "UInt64"] {
            assert!(unsigned.contains(ty), "{ty} not in {unsigned}");
        }
        // Every character set the docs name as decoded is decoded, and the raw ones raw.
        for set in [
            "latin2", "cp1250", "ucs2", "utf16", "utf16le", "utf32", "sjis", "gbk",
        ] {
            assert!(docs.contains(&format!("`{set}`")), "{set}");
            assert!(!charset::decoding(set).is_bytes(), "{set}");
        }
        for set in [
            "armscii8", "cp850", "cp852", "dec8", "geostd8", "hp8", "keybcs2", "macce", "swe7",
        ] {
            assert!(row("keybcs2").contains(&format!("`{set}`")), "{set}");
            assert_eq!(charset::decoding(set), charset::Decoding::Raw, "{set}");
        }
    }

    #[test]
    fn declared_metadata_says_how_values_are_held() {
        let m = |d: &str, cs: Option<&str>| declared_metadata(d, cs);
        assert_eq!(m("time", None)["sluice.form"], "text");
        assert_eq!(m("point", None)["sluice.form"], "wkb");
        assert_eq!(m("multipolygon", None)["sluice.form"], "wkb");
        assert_eq!(m("date", None)["sluice.zero_dates"], forms::ZERO_DATE_RULE);
        assert_eq!(
            m("timestamp", None)["sluice.zero_dates"],
            forms::ZERO_DATETIME_RULE
        );
        assert_eq!(
            m("datetime", None)["sluice.zero_dates"],
            forms::ZERO_DATETIME_RULE
        );
        assert_eq!(m("varchar", Some("keybcs2"))["sluice.charset"], "keybcs2");
        assert!(m("varchar", Some("cp1250")).is_empty());
        assert!(m("int", None).is_empty());
    }
}
