//! MySQL / MariaDB baseline reads: keyset chunks by the table's key, each one short
//! autocommit `SELECT` (binary protocol), decoded into the declared column types the
//! change stream writes ([`super::values::convert_selected`]).
//!
//! Tables without a key are chunked by the NOT NULL columns `baseline.keys` declares for
//! them ([`crate::source::baseline_read::baseline_key`]). A table with neither is one read in
//! `START TRANSACTION WITH CONSISTENT SNAPSHOT`, pinned by [`MyBaselineReader`]'s
//! `snapshot_point`: MariaDB reports the binlog position that snapshot is consistent with
//! (`binlog_snapshot_file` / `binlog_snapshot_position`, taken under the binlog's commit
//! lock), so the rows hold exactly the transactions whose commit event ends at or before
//! it (a change's `__pos` is the end of its commit event). MySQL does not report it; a
//! keyless table there is refused for a baseline.
//!
//! Guarantees: the session runs with `time_zone = '+00:00'` and utf8mb4 results, so
//! TIMESTAMPs are instants and every character set with a decoding arrives as UTF-8 (a
//! set without one is selected as its bytes, as the binlog carries it); a chunk is
//! `lower < key <= upper` in the key's index order, the bounds bound as typed parameters
//! (integers as integers, DECIMAL through `CAST(? AS DECIMAL(p,s))`, BINARY as bytes) so
//! a comparison never goes through floating point; planning uses the table's row estimate
//! and, when the key's first column is an integer, that column's min/max (index
//! lookups) split evenly — a composite key takes, at each split, the greatest key at or
//! below it (one index seek). Other keys are split by walking the key index in
//! `chunk_rows` steps, each a short statement (MySQL has no `TABLESAMPLE`). Keys whose
//! order differs from their comparison order (ENUM, SET) or that are inexact (FLOAT,
//! DOUBLE) are read as one chunk.

use std::sync::Arc;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value as MyValue};

use super::connect::{self, Session, query_error};
use super::forms;
use super::schema::{self, CapturedTable, quote_ident};
use super::values::convert_selected;
use crate::change::{Column, ColumnType, TableSchema};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::position::Position;
use crate::source::baseline_read::{
    BaselineReader, ChunkBounds, ReadScope, RowSink, chunks_from_splits, split_integer_range,
};

/// A baseline reader on one MySQL / MariaDB connection.
pub struct MyBaselineReader {
    conn: Conn,
    tables: Vec<CapturedTable>,
    /// The keyless table whose pinned read is open on `conn`.
    pinned: Option<String>,
    /// A pinned read `pin_read` opened: it stays open across chunks.
    held: bool,
    /// The URL's database, which unqualified table names are in.
    default_db: Option<String>,
    /// What each table's policy lets its reads skip ([`BaselineReader::restrict`]).
    scopes: std::collections::HashMap<String, ReadScope>,
}

impl MyBaselineReader {
    /// Connects and resolves the configured tables.
    pub async fn open(config: &Config) -> Result<MyBaselineReader> {
        let url = config.source_url()?;
        let default_db = connect::options(&url, &config.source.tls)?
            .db_name()
            .map(str::to_owned);
        let session = Session::setup(
            "configuring the baseline session",
            "SET NAMES utf8mb4, time_zone = '+00:00'",
        );
        let timeouts = &config.source.timeouts;
        let mut conn = connect::connect(&url, &config.source.tls, timeouts, &session).await?;
        let mut tables =
            schema::resolve(&mut conn, &config.source.tables, default_db.as_deref()).await?;
        for table in &mut tables {
            table.key = crate::source::baseline_read::baseline_key(
                &config.baseline.keys,
                &table.config_name,
                &table.key,
                &table.shape.columns,
            )?;
        }
        Ok(MyBaselineReader {
            conn,
            tables,
            pinned: None,
            held: false,
            default_db,
            scopes: Default::default(),
        })
    }

    fn table(&self, name: &str) -> Result<&CapturedTable> {
        crate::source::baseline_read::captured_table(&self.tables, name, |t| &t.config_name)
    }

    /// Starts the consistent-snapshot transaction and returns the binlog coordinates it
    /// is consistent with, or `None` where the server does not report them (MySQL).
    async fn pin(&mut self) -> Result<Option<(String, u32)>> {
        let what = "starting a consistent-snapshot read";
        self.conn
            .query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            .await
            .map_err(|e| query_error(what, e))?;
        let status: Vec<(String, String)> = self
            .conn
            .query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
            .await
            .map_err(|e| query_error(what, e))?;
        let get = |name: &str| {
            status
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        Ok(
            match (get("binlog_snapshot_file"), get("binlog_snapshot_position")) {
                (Some(file), Some(offset)) if !file.is_empty() => {
                    offset.parse().ok().map(|offset| (file, offset))
                }
                _ => None,
            },
        )
    }
}

fn is_integer(ty: &ColumnType) -> bool {
    matches!(
        ty,
        ColumnType::Int8
            | ColumnType::Int16
            | ColumnType::Int32
            | ColumnType::Int64
            | ColumnType::UInt8
            | ColumnType::UInt16
            | ColumnType::UInt32
            | ColumnType::UInt64
    )
}

/// True when `ORDER BY column` and `column > ?` agree and bound values round-trip.
fn splittable(column: &Column) -> bool {
    let source = column.source_type.to_ascii_lowercase();
    !(source.starts_with("enum")
        || source.starts_with("set")
        || matches!(
            column.ty,
            ColumnType::Float32 | ColumnType::Float64 | ColumnType::Json
        ))
}

/// The placeholder for a bound value of `column`.
fn placeholder(column: &Column) -> String {
    let decimal = match column.ty {
        ColumnType::Decimal { precision, scale } => Some((precision, scale)),
        // A DECIMAL wider than 38 digits is written as its text; bound as a DECIMAL all
        // the same, so the server never compares it as a string or a float.
        ColumnType::Utf8 => super::values::decimal_args(&column.source_type).filter(|_| {
            column
                .source_type
                .to_ascii_lowercase()
                .starts_with("decimal")
        }),
        _ => None,
    };
    match decimal {
        Some((precision, scale)) => format!("CAST(? AS DECIMAL({precision},{scale}))"),
        None => "?".to_owned(),
    }
}

/// The typed parameter for a bound value's text (hex for binary keys).
fn parameter(column: &Column, text: &str) -> Result<MyValue> {
    let bad = || {
        Error::new(
            Code::StateCorrupt,
            format!(
                "chunk bound {text:?} is not a value of {} ({})",
                column.name, column.source_type
            ),
        )
        .hint("the stored chunk plan does not fit the table: `sluice baseline --reset` and start again")
    };
    Ok(match column.ty {
        ColumnType::Int8 | ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64 => {
            MyValue::Int(text.parse().map_err(|_| bad())?)
        }
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            MyValue::UInt(text.parse().map_err(|_| bad())?)
        }
        ColumnType::Binary => MyValue::Bytes(from_hex(text).ok_or_else(bad)?),
        _ => MyValue::Bytes(text.as_bytes().to_vec()),
    })
}

/// Bytes from upper- or lower-case hex text.
fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `(k1 > ?) OR (k1 = ? AND k2 > ?)…` — the lexicographic comparison of the key with a
/// bound, expanded so the optimizer sees index ranges; `inclusive` adds equality on the
/// last column (`<=` / `>=`). Returns the SQL and the parameters.
fn compare(
    keys: &[&Column],
    values: &[String],
    greater: bool,
    inclusive: bool,
) -> Result<(String, Vec<MyValue>)> {
    if keys.len() != values.len() {
        return Err(Error::new(
            Code::StateCorrupt,
            format!(
                "a chunk bound has {} values for a key of {} columns",
                values.len(),
                keys.len()
            ),
        )
        .hint("the stored chunk plan does not fit the table: `sluice baseline --reset` and start again"));
    }
    let op = if greater { ">" } else { "<" };
    let mut disjuncts = Vec::with_capacity(keys.len());
    let mut params = Vec::new();
    for i in 0..keys.len() {
        let mut terms = Vec::with_capacity(i + 1);
        for (key, value) in keys.iter().zip(values).take(i) {
            terms.push(format!("{} = {}", quote_ident(&key.name), placeholder(key)));
            params.push(parameter(key, value)?);
        }
        let last = i + 1 == keys.len();
        let this_op = if last && inclusive {
            format!("{op}=")
        } else {
            op.to_owned()
        };
        terms.push(format!(
            "{} {this_op} {}",
            quote_ident(&keys[i].name),
            placeholder(keys[i])
        ));
        params.push(parameter(keys[i], &values[i])?);
        disjuncts.push(format!("({})", terms.join(" AND ")));
    }
    Ok((format!("({})", disjuncts.join(" OR ")), params))
}

/// The chunk's `SELECT` and its parameters, reading `scope`'s columns as NULL and only
/// the rows its filter holds.
pub fn chunk_query(
    table: &CapturedTable,
    bounds: &ChunkBounds,
    scope: &ReadScope,
) -> Result<(String, Vec<MyValue>)> {
    let columns = table
        .shape
        .columns
        .iter()
        .map(|c| {
            if scope.nulled.contains(&c.name) {
                // Left out by the policy: its value never leaves the server.
                format!("NULL AS {}", quote_ident(&c.name))
            } else {
                select_expression(c)
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let keys = table.key_columns();
    let mut conditions = Vec::new();
    let mut params = Vec::new();
    if let Some(filter) = &scope.filter {
        conditions.push(format!("({filter})"));
    }
    if let Some(lower) = &bounds.lower {
        let (sql, p) = compare(&keys, lower, true, false)?;
        conditions.push(sql);
        params.extend(p);
    }
    if let Some(upper) = &bounds.upper {
        let (sql, p) = compare(&keys, upper, false, true)?;
        conditions.push(sql);
        params.extend(p);
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    if keys.is_empty() {
        return Ok((
            format!("SELECT {columns} FROM {}{filter}", table.quoted()),
            params,
        ));
    }
    Ok((
        format!(
            "SELECT {columns} FROM {}{filter} ORDER BY {}",
            table.quoted(),
            order_by(&keys, "")
        ),
        params,
    ))
}

/// A column as the chunk selects it: text in a character set sluice has no decoding
/// table for as its own bytes (`CAST(… AS BINARY)`, what the binlog carries), every
/// other column as it is.
fn select_expression(column: &Column) -> String {
    let name = quote_ident(&column.name);
    if column.field_metadata.contains_key(forms::CHARSET_KEY) {
        format!("CAST({name} AS BINARY) AS {name}")
    } else {
        name
    }
}

fn order_by(keys: &[&Column], direction: &str) -> String {
    keys.iter()
        .map(|k| format!("{}{direction}", quote_ident(&k.name)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The key columns as bound text: integers and text as they print, binary as hex, the
/// rest through `CAST(… AS CHAR)` (their canonical text, which compares back exactly).
fn key_texts(keys: &[&Column]) -> String {
    keys.iter()
        .map(|k| match &k.ty {
            ColumnType::Binary => format!("HEX({})", quote_ident(&k.name)),
            ty if is_integer(ty) => quote_ident(&k.name),
            _ => format!("CAST({} AS CHAR)", quote_ident(&k.name)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a row of text cells (text protocol) as strings.
fn texts(row: Row, what: &str) -> Result<Vec<Option<String>>> {
    row.unwrap()
        .into_iter()
        .map(|v| match v {
            MyValue::NULL => Ok(None),
            MyValue::Bytes(b) => String::from_utf8(b).map(Some).map_err(|_| {
                Error::new(
                    Code::SourceProtocol,
                    format!("{what}: a key is not UTF-8 text"),
                )
            }),
            MyValue::Int(i) => Ok(Some(i.to_string())),
            MyValue::UInt(u) => Ok(Some(u.to_string())),
            other => Err(Error::new(
                Code::SourceProtocol,
                format!("{what}: unexpected {other:?}"),
            )),
        })
        .collect()
}

impl MyBaselineReader {
    async fn estimate_rows(&mut self, table: &CapturedTable) -> Result<u64> {
        let estimate: Option<Option<u64>> = self
            .conn
            .exec_first(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (&table.database, &table.table),
            )
            .await
            .map_err(|e| query_error("estimating the table size", e))?;
        match estimate.flatten() {
            Some(rows) if rows > 0 => Ok(rows),
            // No statistics (or a table they call empty): count, which is cheap if it is.
            _ => {
                let rows: Option<u64> = self
                    .conn
                    .query_first(format!("SELECT COUNT(*) FROM {}", table.quoted()))
                    .await
                    .map_err(|e| query_error("counting rows", e))?;
                Ok(rows.unwrap_or(0))
            }
        }
    }

    /// Splits on the first key column's integer range.
    async fn plan_integer(
        &mut self,
        table: &CapturedTable,
        keys: &[&Column],
        chunks: u64,
    ) -> Result<Vec<ChunkBounds>> {
        let first = quote_ident(&keys[0].name);
        let row: Option<Row> = self
            .conn
            .query_first(format!(
                "SELECT CAST(MIN({first}) AS CHAR), CAST(MAX({first}) AS CHAR) FROM {}",
                table.quoted()
            ))
            .await
            .map_err(|e| query_error("reading the key range", e))?;
        let range = match row.map(|r| texts(r, "reading the key range")).transpose()? {
            Some(cells) => match (cells.first(), cells.get(1)) {
                (Some(Some(min)), Some(Some(max))) => {
                    min.parse::<i128>().ok().zip(max.parse::<i128>().ok())
                }
                _ => None,
            },
            None => None,
        };
        let Some((min, max)) = range else {
            return Ok(chunks_from_splits(vec![]));
        };
        let points = split_integer_range(min, max, chunks);
        if keys.len() == 1 {
            return Ok(chunks_from_splits(
                points.into_iter().map(|s| vec![s.to_string()]).collect(),
            ));
        }
        // A composite key: the greatest key whose first column is at or below each point.
        let statement = format!(
            "SELECT {} FROM {} WHERE {first} <= ? ORDER BY {} LIMIT 1",
            key_texts(keys),
            table.quoted(),
            order_by(keys, " DESC")
        );
        let mut splits: Vec<Vec<String>> = Vec::new();
        for point in points {
            let param = parameter(keys[0], &point.to_string())?;
            let row: Option<Row> = self
                .conn
                .exec_first(&statement, vec![param])
                .await
                .map_err(|e| query_error("seeking a chunk boundary", e))?;
            if let Some(key) = row
                .map(|r| texts(r, "seeking a chunk boundary"))
                .transpose()?
            {
                let key: Option<Vec<String>> = key.into_iter().collect();
                if let Some(key) = key
                    && splits.last() != Some(&key)
                {
                    splits.push(key);
                }
            }
        }
        Ok(chunks_from_splits(splits))
    }

    /// Walks the key index in `chunk_rows` steps: each step one short statement.
    async fn plan_walk(
        &mut self,
        table: &CapturedTable,
        keys: &[&Column],
        chunk_rows: u64,
    ) -> Result<Vec<ChunkBounds>> {
        let skip = chunk_rows.max(1) - 1;
        let mut splits: Vec<Vec<String>> = Vec::new();
        loop {
            let bounds = ChunkBounds {
                lower: splits.last().cloned(),
                upper: None,
            };
            let (filter, params) = match &bounds.lower {
                Some(lower) => {
                    let (sql, p) = compare(keys, lower, true, false)?;
                    (format!(" WHERE {sql}"), p)
                }
                None => (String::new(), vec![]),
            };
            let statement = format!(
                "SELECT {} FROM {}{filter} ORDER BY {} LIMIT 1 OFFSET {skip}",
                key_texts(keys),
                table.quoted(),
                order_by(keys, "")
            );
            let row: Option<Row> = self
                .conn
                .exec_first(&statement, params)
                .await
                .map_err(|e| query_error("walking the key for chunk boundaries", e))?;
            let Some(row) = row else { break };
            let key: Option<Vec<String>> = texts(row, "walking the key")?.into_iter().collect();
            match key {
                Some(key) => splits.push(key),
                None => break,
            }
        }
        // The last split's chunk may hold the table's tail only; an empty final chunk
        // (the split was the last key) is harmless.
        Ok(chunks_from_splits(splits))
    }
}

#[async_trait]
impl BaselineReader for MyBaselineReader {
    fn schema(&self, table: &str) -> Result<Arc<TableSchema>> {
        Ok(self.table(table)?.shape.clone())
    }

    async fn current_schema(&mut self, name: &str) -> Result<Arc<TableSchema>> {
        let config_name = self.table(name)?.config_name.clone();
        let mut tables =
            schema::resolve(&mut self.conn, &[config_name], self.default_db.as_deref()).await?;
        Ok(tables.remove(0).shape)
    }

    fn restrict(&mut self, table: &str, scope: ReadScope) -> Result<()> {
        self.scopes.insert(table.to_owned(), scope);
        Ok(())
    }

    async fn plan(&mut self, name: &str, chunk_rows: u64) -> Result<Vec<ChunkBounds>> {
        let table = self.table(name)?.clone();
        let rows = self.estimate_rows(&table).await?;
        let chunks = rows.div_ceil(chunk_rows.max(1)).max(1);
        let keys = table.key_columns();
        if chunks == 1 || keys.is_empty() {
            return Ok(chunks_from_splits(vec![]));
        }
        if !keys.iter().all(|k| splittable(k)) {
            tracing::warn!(table = %name, "the key's order cannot be bound exactly (ENUM, SET, FLOAT); the table is read as one chunk");
            return Ok(chunks_from_splits(vec![]));
        }
        if is_integer(&keys[0].ty) {
            return self.plan_integer(&table, &keys, chunks).await;
        }
        self.plan_walk(&table, &keys, chunk_rows).await
    }

    async fn snapshot_point(&mut self, name: &str, anchor: &Position) -> Result<Option<Position>> {
        if !self.table(name)?.key.is_empty() {
            return Ok(None);
        }
        let Some((file, offset)) = self.pin().await? else {
            let _ = self.conn.query_drop("ROLLBACK").await;
            return Err(Error::new(
                Code::SourcePrerequisite,
                format!("{name} has no key, and the server does not report the binlog position of a consistent snapshot (binlog_snapshot_file, a MariaDB status variable)"),
            )
            .hint(format!("a baseline of a table without a key must know exactly which changes it holds: add a primary key (or a NOT NULL unique index) to {name}, or capture it from MariaDB")));
        };
        let generation = match anchor {
            Position::MySql(p) => p.generation(),
            _ => 0,
        };
        let point = crate::position::BinlogPosition::new(&file, offset)
            .map_err(|e| {
                Error::new(
                    Code::SourceProtocol,
                    format!("binlog_snapshot_file {file:?} is not a binlog file name"),
                )
                .source(e)
            })?
            .with_generation(generation);
        let point = Position::MySql(Box::new(point));
        let point = crate::source::baseline_read::at_or_after_anchor(point, anchor);
        self.pinned = Some(name.to_owned());
        Ok(Some(point))
    }

    async fn pin_read(&mut self, name: &str, floor: &Position) -> Result<Option<Position>> {
        self.table(name)?;
        let Some((file, offset)) = self.pin().await? else {
            let _ = self.conn.query_drop("ROLLBACK").await;
            return Ok(None);
        };
        let generation = match floor {
            Position::MySql(p) => p.generation(),
            _ => 0,
        };
        let point = crate::position::BinlogPosition::new(&file, offset)
            .map_err(|e| {
                Error::new(
                    Code::SourceProtocol,
                    format!("binlog_snapshot_file {file:?} is not a binlog file name"),
                )
                .source(e)
            })?
            .with_generation(generation);
        self.pinned = Some(name.to_owned());
        self.held = true;
        Ok(Some(crate::source::baseline_read::at_or_after_anchor(
            Position::MySql(Box::new(point)),
            floor,
        )))
    }

    async fn end_pinned_read(&mut self) -> Result<()> {
        if std::mem::take(&mut self.held) {
            self.pinned = None;
            self.conn
                .query_drop("COMMIT")
                .await
                .map_err(|e| query_error("ending the consistent-snapshot read", e))?;
        }
        Ok(())
    }

    async fn read_chunk(
        &mut self,
        name: &str,
        bounds: &ChunkBounds,
        rows: &mut RowSink<'_>,
    ) -> Result<u64> {
        let table = self.table(name)?.clone();
        // A keyless table's pinned read ends with its one chunk; a pinned read of a keyed
        // table (`pin_read`) stays open for more chunks until `end_pinned_read`.
        let pinned = table.key.is_empty() && !self.held;
        if table.key.is_empty() {
            crate::source::baseline_read::check_pinned(name, self.pinned.as_deref(), bounds)?;
        }
        let scope = self.scopes.get(name).cloned().unwrap_or_default();
        let (statement, params) = chunk_query(&table, bounds, &scope)?;
        let what = format!("reading a baseline chunk of {name}");
        let mut result = self
            .conn
            .exec_iter(statement, params)
            .await
            .map_err(|e| query_error(&what, e))?;
        let result_types: Vec<mysql_async::consts::ColumnType> = result
            .columns_ref()
            .iter()
            .map(|c| c.column_type())
            .collect();
        let columns = &table.shape.columns;
        let mut count = 0u64;
        while let Some(row) = result.next().await.map_err(|e| query_error(&what, e))? {
            let cells = row.unwrap();
            let mut values = Vec::with_capacity(columns.len());
            for (i, cell) in cells.into_iter().enumerate() {
                let column = &columns[i];
                let result_type = result_types
                    .get(i)
                    .copied()
                    .unwrap_or(mysql_async::consts::ColumnType::MYSQL_TYPE_NULL);
                let value = convert_selected(column, result_type, cell)
                    .map_err(|reason| {
                        Error::new(
                            Code::ValueUnrepresentable,
                            format!("{name}.{} ({}) in the baseline: {reason}", column.name, column.source_type),
                        )
                        .hint("the value has no form in the column's output type (text bytes invalid in the column's character set): fix the row at the source, or change the column to a binary type (ALTER TABLE … MODIFY … VARBINARY / BLOB), then baseline again")
                    })?;
                values.push(value);
            }
            rows(values)?;
            count += 1;
        }
        drop(result);
        if pinned {
            self.pinned = None;
            self.conn
                .query_drop("COMMIT")
                .await
                .map_err(|e| query_error("ending the consistent-snapshot read", e))?;
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: ColumnType, source_type: &str) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: false,
            key: true,
            source_type: source_type.into(),
            field_metadata: Default::default(),
        }
    }

    fn table(columns: Vec<Column>) -> CapturedTable {
        CapturedTable {
            config_name: "app.t".into(),
            database: "app".into(),
            table: "t".into(),
            key: columns.iter().map(|c| c.name.clone()).collect(),
            shape: Arc::new(TableSchema {
                name: "app.t".into(),
                columns,
            }),
        }
    }

    #[test]
    fn a_policy_scope_reads_excluded_columns_as_null_and_pushes_the_filter() {
        let mut key = col("a", ColumnType::Int64, "bigint(20)");
        key.key = true;
        let mut t = table(vec![key, col("b", ColumnType::Utf8, "varchar(10)")]);
        t.key = vec!["a".into()];
        let scope = ReadScope {
            nulled: ["b".to_owned()].into(),
            filter: Some("(`a` > 10)".into()),
        };
        let bounds = ChunkBounds {
            lower: None,
            upper: Some(vec!["50".into()]),
        };
        let (sql, params) = chunk_query(&t, &bounds, &scope).unwrap();
        assert_eq!(
            sql,
            "SELECT `a`, NULL AS `b` FROM `app`.`t` WHERE ((`a` > 10)) AND ((`a` <= ?)) ORDER BY `a`"
        );
        assert_eq!(params, vec![MyValue::Int(50)]);
    }

    #[test]
    fn chunk_queries_are_expanded_keyset_ranges_with_typed_parameters() {
        let t = table(vec![
            col("a", ColumnType::Int64, "bigint(20)"),
            col("b", ColumnType::Utf8, "varchar(10)"),
        ]);
        let bounds = ChunkBounds {
            lower: Some(vec!["-1".into(), "o'b".into()]),
            upper: Some(vec!["9".into(), "z".into()]),
        };
        let (sql, params) = chunk_query(&t, &bounds, &ReadScope::default()).unwrap();
        assert_eq!(
            sql,
            "SELECT `a`, `b` FROM `app`.`t` WHERE ((`a` > ?) OR (`a` = ? AND `b` > ?)) \
             AND ((`a` < ?) OR (`a` = ? AND `b` <= ?)) ORDER BY `a`, `b`"
        );
        assert_eq!(
            params,
            vec![
                MyValue::Int(-1),
                MyValue::Int(-1),
                MyValue::Bytes(b"o'b".to_vec()),
                MyValue::Int(9),
                MyValue::Int(9),
                MyValue::Bytes(b"z".to_vec()),
            ]
        );
        let (all, none) = chunk_query(
            &t,
            &ChunkBounds {
                lower: None,
                upper: None,
            },
            &ReadScope::default(),
        )
        .unwrap();
        assert_eq!(all, "SELECT `a`, `b` FROM `app`.`t` ORDER BY `a`, `b`");
        assert!(none.is_empty());
    }

    #[test]
    fn decimal_and_binary_bounds_never_compare_as_floating_point_or_text() {
        let d = table(vec![col(
            "d",
            ColumnType::Decimal {
                precision: 30,
                scale: 2,
            },
            "decimal(30,2)",
        )]);
        let (sql, params) = chunk_query(
            &d,
            &ChunkBounds {
                lower: None,
                upper: Some(vec!["12345678901234567890.01".into()]),
            },
            &ReadScope::default(),
        )
        .unwrap();
        assert!(sql.contains("`d` <= CAST(? AS DECIMAL(30,2))"), "{sql}");
        assert_eq!(
            params,
            vec![MyValue::Bytes(b"12345678901234567890.01".to_vec())]
        );
        let wide = table(vec![col("w", ColumnType::Utf8, "decimal(50,5) unsigned")]);
        let (sql, _) = chunk_query(
            &wide,
            &ChunkBounds {
                lower: Some(vec!["1.00000".into()]),
                upper: None,
            },
            &ReadScope::default(),
        )
        .unwrap();
        assert!(sql.contains("`w` > CAST(? AS DECIMAL(50,5))"), "{sql}");
        let u = table(vec![col("u", ColumnType::UInt64, "bigint(20) unsigned")]);
        let (_, params) = chunk_query(
            &u,
            &ChunkBounds {
                lower: Some(vec![u64::MAX.to_string()]),
                upper: None,
            },
            &ReadScope::default(),
        )
        .unwrap();
        assert_eq!(params, vec![MyValue::UInt(u64::MAX)]);
        let b = table(vec![col("b", ColumnType::Binary, "varbinary(16)")]);
        let (_, params) = chunk_query(
            &b,
            &ChunkBounds {
                lower: Some(vec!["00FF".into()]),
                upper: None,
            },
            &ReadScope::default(),
        )
        .unwrap();
        assert_eq!(params, vec![MyValue::Bytes(vec![0, 255])]);
    }

    #[test]
    fn bad_bounds_are_state_errors_not_panics() {
        let t = table(vec![col("a", ColumnType::Int32, "int(11)")]);
        for bounds in [
            ChunkBounds {
                lower: Some(vec!["x".into()]),
                upper: None,
            },
            ChunkBounds {
                lower: None,
                upper: Some(vec!["1".into(), "2".into()]),
            },
        ] {
            assert_eq!(
                chunk_query(&t, &bounds, &ReadScope::default())
                    .unwrap_err()
                    .code(),
                Code::StateCorrupt
            );
        }
    }

    #[test]
    fn enum_set_and_float_keys_are_not_split() {
        assert!(!splittable(&col("e", ColumnType::Utf8, "enum('a','b')")));
        assert!(!splittable(&col("s", ColumnType::Utf8, "set('a','b')")));
        assert!(!splittable(&col("f", ColumnType::Float64, "double")));
        assert!(splittable(&col("v", ColumnType::Utf8, "varchar(10)")));
        assert!(splittable(&col("t", ColumnType::Timestamp, "datetime(6)")));
    }
}
