//! PostgreSQL baseline reads: keyset chunks through `COPY (SELECT …) TO STDOUT (FORMAT
//! binary)`, decoded by the same binary decoders as the change stream.
//!
//! Tables without a primary key are chunked by the NOT NULL columns `baseline.keys`
//! declares for them ([`crate::source::baseline_read::baseline_key`]). A table with neither
//! (`REPLICA IDENTITY FULL`) is one consistent read, pinned by [`PgBaselineReader::snapshot_point`]:
//! a second session takes `LOCK TABLE … IN SHARE MODE` (which waits for the table's
//! writers to end and keeps new ones out), exports its snapshot and reads
//! `pg_current_wal_insert_lsn()` *under* the lock; the reading session imports that
//! snapshot, and the lock session ends at once (writers wait milliseconds, not for the
//! read). So every transaction that wrote the table committed either before the lock —
//! visible, its commit record wholly before that LSN — or after it — invisible, its commit
//! record at or after it: the snapshot is exactly "every change of the table at or before
//! the LSN less one" (a change's `__pos` is its commit record's LSN). A standby can do
//! neither (no SHARE lock in recovery): there such a table is refused with the fix.
//!
//! Guarantees: the session runs with `TimeZone = UTC`, `DateStyle = ISO` and standard
//! strings, so key bounds written as text round-trip exactly; every chunk is one short
//! statement ordered by the primary key; planning uses the planner's row estimate and the
//! key's min/max (an index lookup) for a single integer key, a `TABLESAMPLE` otherwise —
//! never a full scan, except `count(*)` for a table that was never analyzed.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio_postgres::Client;

use super::catalog::{self, CapturedTable, quote_ident};
use super::connect::{self, Session, query_error};
use super::copy_binary::CopyParser;
use super::types::{Decode, decode_cell};
use crate::change::{ColumnType, TableSchema, Value};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::position::Position;
use crate::source::baseline_read::{
    BaselineReader, ChunkBounds, ReadScope, RowSink, chunks_from_splits, split_integer_range,
};

/// A baseline reader on one PostgreSQL connection.
pub struct PgBaselineReader {
    client: Client,
    tables: Vec<CapturedTable>,
    /// Connects the session that pins a keyless table's snapshot.
    connect: (
        String,
        crate::config::TlsConfig,
        crate::config::TimeoutsConfig,
    ),
    /// The keyless table whose pinned read is open on `client`.
    pinned: Option<String>,
    /// A pinned read `pin_read` opened: it stays open across chunks.
    held: bool,
    /// The columns held in their text form (`source.text_columns`), for re-reading shapes.
    text_columns: crate::config::TextColumns,
    /// What each table's policy lets its reads skip ([`BaselineReader::restrict`]).
    scopes: std::collections::HashMap<String, ReadScope>,
}

/// How long the pinning session waits for the table's writers before giving up (the run
/// fails transiently and the chunk is read again later).
const PIN_LOCK_TIMEOUT: &str = "30s";

impl PgBaselineReader {
    /// Connects and resolves the configured tables.
    pub async fn open(config: &Config) -> Result<PgBaselineReader> {
        // Chunk COPYs and planning scans run as long as the table needs: no
        // statement_timeout (`Session::bulk`).
        let session = Session::bulk().setup(
            "configuring the baseline session",
            super::types::TEXT_OUTPUT_SETTINGS,
        );
        let client = connect::connect(
            &config.source_url()?,
            &config.source.tls,
            &config.source.timeouts,
            &session,
        )
        .await?;
        let mut tables =
            catalog::resolve(&client, &config.source.tables, &config.source.text_columns).await?;
        for table in &mut tables {
            table.key = crate::source::baseline_read::baseline_key(
                &config.baseline.keys,
                &table.config_name,
                &table.key,
                &table.shape.columns,
            )?;
        }
        Ok(PgBaselineReader {
            client,
            tables,
            connect: (
                config.source_url()?,
                config.source.tls.clone(),
                config.source.timeouts,
            ),
            pinned: None,
            held: false,
            text_columns: config.source.text_columns.clone(),
            scopes: Default::default(),
        })
    }

    fn table(&self, name: &str) -> Result<&CapturedTable> {
        crate::source::baseline_read::captured_table(&self.tables, name, |t| &t.config_name)
    }

    /// Opens a `REPEATABLE READ` transaction on `client` with the snapshot of the table
    /// `quoted` at the moment no transaction writing it is in flight, and returns the WAL
    /// insert position of that moment (see the module doc).
    async fn pin(&mut self, name: &str, quoted: &str) -> Result<crate::position::PgLsn> {
        if super::slot::server_kind(&self.client).await?.1 {
            // A standby takes no SHARE lock and has no WAL insert position of its own.
            return Err(Error::new(
                crate::error::Code::SourcePrerequisite,
                format!("{name} has no key, and its baseline cannot be pinned on a standby"),
            )
            .hint(format!(
                "the baseline of a table without a key is one read pinned by a SHARE lock, which a standby cannot take: \
                 give {name} a primary key or declare its key in baseline.keys, or run this job against the primary"
            )));
        }
        let (url, tls, timeouts) = &self.connect;
        let holder = connect::connect(url, tls, timeouts, &Session::control(timeouts)).await?;
        let locking = |e| query_error(&format!("locking {name} to pin its baseline snapshot"), e);
        holder
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; SET LOCAL lock_timeout = '{PIN_LOCK_TIMEOUT}'; \
                 LOCK TABLE {quoted} IN SHARE MODE"
            ))
            .await
            .map_err(|e| {
                let denied = e.as_db_error().is_some_and(|db| db.code().code() == "42501");
                let error = locking(e);
                if denied {
                    error.hint(format!(
                        "LOCK TABLE … IN SHARE MODE, which pins the baseline of a table without a key, needs UPDATE, DELETE or \
                         TRUNCATE on it (PostgreSQL 17: MAINTAIN): GRANT UPDATE ON {quoted} TO <source user> — sluice holds the \
                         lock for milliseconds and never writes — or give {name} a primary key"
                    ))
                } else {
                    error.hint(format!(
                        "a transaction writing {name} stayed open for {PIN_LOCK_TIMEOUT}; the baseline of a table without a key \
                         waits for its writers to end before reading (for milliseconds once they have) — run it again"
                    ))
                }
            })?;
        let row = holder
            .query_one(
                "SELECT pg_export_snapshot(), pg_current_wal_insert_lsn()::text",
                &[],
            )
            .await
            .map_err(locking)?;
        let snapshot: String = row.get(0);
        let lsn: String = row.get(1);
        self.client
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET TRANSACTION SNAPSHOT '{}'",
                snapshot.replace('\'', "''")
            ))
            .await
            .map_err(|e| query_error("importing the pinned baseline snapshot", e))?;
        holder
            .batch_execute("COMMIT")
            .await
            .map_err(|e| query_error("releasing the baseline lock", e))?;
        lsn.parse().map_err(|_| {
            Error::new(
                crate::error::Code::SourceProtocol,
                format!("pg_current_wal_insert_lsn() answered {lsn:?}"),
            )
        })
    }
}

/// `"a", "b"` of the key columns.
fn key_list(table: &CapturedTable) -> String {
    table
        .key
        .iter()
        .map(|k| quote_ident(k))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ROW('v1'::type1, 'v2'::type2)` for a bound.
fn bound_literal(table: &CapturedTable, values: &[String]) -> String {
    let cells: Vec<String> = table
        .key
        .iter()
        .zip(values)
        .map(|(column, value)| {
            let ty = table
                .type_names
                .get(column)
                .map(String::as_str)
                .unwrap_or("text");
            format!("'{}'::{ty}", value.replace('\'', "''"))
        })
        .collect();
    format!("ROW({})", cells.join(", "))
}

/// The chunk's `SELECT`, with the bounds inlined as typed literals (COPY takes no
/// parameters), reading `scope`'s columns as NULL and only the rows its filter holds.
pub fn chunk_query(table: &CapturedTable, bounds: &ChunkBounds, scope: &ReadScope) -> String {
    let columns = table
        .shape
        .columns
        .iter()
        .zip(&table.decodes)
        .map(|(c, decode)| match decode {
            // Left out by the policy: its value never leaves the server.
            _ if scope.nulled.contains(&c.name) => format!("NULL AS {}", quote_ident(&c.name)),
            // The type's text output, read back as text's binary form (its UTF-8 bytes).
            Decode::Text => format!("{}::text", quote_ident(&c.name)),
            Decode::Binary { .. } | Decode::Vector { .. } => quote_ident(&c.name),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let keys = key_list(table);
    let mut conditions = Vec::new();
    if let Some(filter) = &scope.filter {
        conditions.push(format!("({filter})"));
    }
    if let Some(lower) = &bounds.lower {
        conditions.push(format!("ROW({keys}) > {}", bound_literal(table, lower)));
    }
    if let Some(upper) = &bounds.upper {
        conditions.push(format!("ROW({keys}) <= {}", bound_literal(table, upper)));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    if table.key.is_empty() {
        return format!("SELECT {columns} FROM {}{filter}", table.quoted());
    }
    format!(
        "SELECT {columns} FROM {}{filter} ORDER BY {keys}",
        table.quoted()
    )
}

fn is_integer(ty: &ColumnType) -> bool {
    matches!(
        ty,
        ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64
    )
}

#[async_trait]
impl BaselineReader for PgBaselineReader {
    fn schema(&self, table: &str) -> Result<Arc<TableSchema>> {
        Ok(self.table(table)?.shape.clone())
    }

    async fn current_schema(&mut self, name: &str) -> Result<Arc<TableSchema>> {
        let config_name = self.table(name)?.config_name.clone();
        let mut tables = catalog::resolve(&self.client, &[config_name], &self.text_columns).await?;
        Ok(tables.remove(0).shape)
    }

    fn restrict(&mut self, table: &str, scope: ReadScope) -> Result<()> {
        self.scopes.insert(table.to_owned(), scope);
        Ok(())
    }

    async fn plan(&mut self, name: &str, chunk_rows: u64) -> Result<Vec<ChunkBounds>> {
        let table = self.table(name)?.clone();
        let estimate: i64 = self
            .client
            .query_one(
                "SELECT reltuples::int8 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                &[&table.schema, &table.table],
            )
            .await
            .map_err(|e| query_error("estimating the table size", e))?
            .get(0);
        let rows = if estimate >= 0 {
            estimate as u64
        } else {
            let row = self
                .client
                .query_one(&format!("SELECT count(*) FROM {}", table.quoted()), &[])
                .await
                .map_err(|e| query_error("counting rows", e))?;
            row.get::<_, i64>(0) as u64
        };
        let chunks = rows.div_ceil(chunk_rows.max(1)).max(1);
        if chunks == 1 || table.key.is_empty() {
            return Ok(chunks_from_splits(vec![]));
        }
        let keys = key_list(&table);
        let key_columns: Vec<_> = table
            .key
            .iter()
            .filter_map(|k| table.shape.columns.iter().find(|c| &c.name == k))
            .collect();
        if key_columns.len() == 1 && is_integer(&key_columns[0].ty) {
            let row = self
                .client
                .query_one(
                    &format!(
                        "SELECT min({keys})::int8, max({keys})::int8 FROM {}",
                        table.quoted()
                    ),
                    &[],
                )
                .await
                .map_err(|e| query_error("reading the key range", e))?;
            let (Some(min), Some(max)) =
                (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(1))
            else {
                return Ok(chunks_from_splits(vec![]));
            };
            let splits = split_integer_range(i128::from(min), i128::from(max), chunks);
            return Ok(chunks_from_splits(
                splits.into_iter().map(|s| vec![s.to_string()]).collect(),
            ));
        }
        // Sample about 20 keys per chunk; the sample's quantiles are the split points.
        let percent = ((chunks as f64 * 20.0) / rows.max(1) as f64 * 100.0).clamp(0.01, 100.0);
        let texts = table
            .key
            .iter()
            .map(|k| format!("{}::text", quote_ident(k)))
            .collect::<Vec<_>>()
            .join(", ");
        let sample = self
            .client
            .query(
                &format!(
                    "SELECT {texts} FROM {} TABLESAMPLE SYSTEM ({percent}) ORDER BY {keys}",
                    table.quoted()
                ),
                &[],
            )
            .await
            .map_err(|e| query_error("sampling the key space", e))?;
        let keys: Vec<Vec<String>> = sample
            .iter()
            .map(|r| {
                (0..table.key.len())
                    .map(|i| r.get::<_, String>(i))
                    .collect()
            })
            .collect();
        let step = (keys.len() as u64 / chunks).max(1) as usize;
        let mut splits: Vec<Vec<String>> = keys
            .into_iter()
            .skip(step.saturating_sub(1))
            .step_by(step)
            .collect();
        splits.dedup();
        splits.truncate(chunks.saturating_sub(1) as usize);
        Ok(chunks_from_splits(splits))
    }

    async fn snapshot_point(&mut self, name: &str, anchor: &Position) -> Result<Option<Position>> {
        let table = self.table(name)?.clone();
        if !table.key.is_empty() {
            return Ok(None);
        }
        let lsn = self.pin(name, &table.quoted()).await?;
        self.pinned = Some(name.to_owned());
        let point = Position::Postgres(lsn).just_before();
        let point = crate::source::baseline_read::at_or_after_anchor(point, anchor);
        Ok(Some(point))
    }

    async fn pin_read(&mut self, name: &str, floor: &Position) -> Result<Option<Position>> {
        let table = self.table(name)?.clone();
        let lsn = self.pin(name, &table.quoted()).await?;
        self.pinned = Some(name.to_owned());
        self.held = true;
        let point = Position::Postgres(lsn).just_before();
        Ok(Some(crate::source::baseline_read::at_or_after_anchor(
            point, floor,
        )))
    }

    async fn end_pinned_read(&mut self) -> Result<()> {
        if std::mem::take(&mut self.held) {
            self.pinned = None;
            self.client
                .batch_execute("COMMIT")
                .await
                .map_err(|e| query_error("ending the pinned read", e))?;
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
        let query = format!(
            "COPY ({}) TO STDOUT (FORMAT binary)",
            chunk_query(&table, bounds, &scope)
        );
        let stream = self
            .client
            .copy_out(&query)
            .await
            .map_err(|e| query_error(&format!("reading a baseline chunk of {name}"), e))?;
        let mut stream = std::pin::pin!(stream);
        let columns = &table.shape.columns;
        let mut parser = CopyParser::new(columns.len());
        let mut count = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|e| query_error(&format!("reading a baseline chunk of {name}"), e))?;
            parser.feed(&chunk);
            while let Some(tuple) = parser.next_tuple()? {
                let mut values = Vec::with_capacity(columns.len());
                for (i, cell) in tuple.into_iter().enumerate() {
                    let value = match cell {
                        None => Value::Null,
                        Some(raw) => decode_cell(&columns[i].ty, &table.decodes[i], &raw)
                            .map_err(|e| e.into_error(name, &columns[i], "in the baseline"))?,
                    };
                    values.push(value);
                }
                rows(values)?;
                count += 1;
            }
        }
        parser.finish()?;
        if pinned {
            self.pinned = None;
            self.client
                .batch_execute("COMMIT")
                .await
                .map_err(|e| query_error("ending the pinned baseline read", e))?;
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Column;
    use std::collections::HashMap;

    fn table() -> CapturedTable {
        let col = |name: &str, ty| Column {
            name: name.into(),
            ty,
            nullable: false,
            key: true,
            source_type: String::new(),
            field_metadata: Default::default(),
        };
        CapturedTable {
            partitioned: false,
            oid: None,
            text_columns: Default::default(),
            identity_full: false,
            config_name: "app.t".into(),
            schema: "app".into(),
            table: "t".into(),
            key: vec!["a".into(), "b".into()],
            type_names: HashMap::from([
                ("a".into(), "integer".into()),
                ("b".into(), "text".into()),
            ]),
            type_oids: vec![23, 25],
            decodes: vec![
                Decode::Binary {
                    oid: 23,
                    wire_element: None,
                },
                Decode::Text,
            ],
            shape: Arc::new(TableSchema {
                name: "app.t".into(),
                columns: vec![col("a", ColumnType::Int32), col("b", ColumnType::Utf8)],
            }),
        }
    }

    #[test]
    fn a_policy_scope_reads_excluded_columns_as_null_and_filters_rows() {
        let scope = ReadScope {
            nulled: ["b".to_owned()].into(),
            filter: Some("(\"a\" > 10)".into()),
        };
        let bounds = ChunkBounds {
            lower: Some(vec!["1".into(), "x".into()]),
            upper: None,
        };
        assert_eq!(
            chunk_query(&table(), &bounds, &scope),
            "SELECT \"a\", NULL AS \"b\" FROM \"app\".\"t\" WHERE ((\"a\" > 10)) AND ROW(\"a\", \"b\") > ROW('1'::integer, 'x'::text) ORDER BY \"a\", \"b\""
        );
    }

    #[test]
    fn chunk_queries_are_keyset_ranges_with_quoted_literals() {
        let bounds = ChunkBounds {
            lower: Some(vec!["1".into(), "o'brien".into()]),
            upper: Some(vec!["9".into(), "z".into()]),
        };
        assert_eq!(
            chunk_query(&table(), &bounds, &ReadScope::default()),
            "SELECT \"a\", \"b\"::text FROM \"app\".\"t\" WHERE ROW(\"a\", \"b\") > ROW('1'::integer, 'o''brien'::text) \
             AND ROW(\"a\", \"b\") <= ROW('9'::integer, 'z'::text) ORDER BY \"a\", \"b\""
        );
        let all = ChunkBounds {
            lower: None,
            upper: None,
        };
        assert_eq!(
            chunk_query(&table(), &all, &ReadScope::default()),
            "SELECT \"a\", \"b\"::text FROM \"app\".\"t\" ORDER BY \"a\", \"b\""
        );
    }
}
