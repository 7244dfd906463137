//! SQL Server baseline reads ([`BaselineReader`]): the captured table in keyset chunks of
//! the capture instance's unique index (normally the primary key), each chunk one short
//! `SELECT` with typed key parameters, decoded by the change stream's value decoder.
//!
//! Guarantees:
//! * The anchor is not taken here: the baseline tasks take it from the change stream's
//!   start (`fn_cdc_get_max_lsn()` at a first open) before any chunk is read, so every
//!   change committed after it is in the stream and a row a chunk reads after changing
//!   is replayed by the drain (overlap, never a gap).
//! * Chunks are `lower < key <= upper` in key order, with bounds as exact text
//!   ([`keys`](super::keys)) compared on the server in the column's own type and
//!   collation; each chunk is one autocommit statement at the session's default READ
//!   COMMITTED — no long transaction, no dirty read.
//! * Planning: the row estimate from `sys.partitions` (`COUNT_BIG(*)` only when it says
//!   zero); a single integer key splits `[MIN, MAX]` evenly (two index lookups); any other
//!   key is walked in `chunk_rows` steps ([`key_walk`](super::key_walk)), each a short
//!   key-only statement.
//! * Rows have the change stream's schema and values ([`values::convert`]), so baseline
//!   and change parts share their Arrow types; a value without an exact representation
//!   fails the chunk naming table and column.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use tiberius::ColumnData;

use super::catalog::{self, Captured};
use super::connect::{self, SqlClient, query_error};
use super::key_walk::KeyWalk;
use super::keys::{self, KeyColumn};
use super::queries;
use super::values;
use crate::change::{TableSchema, Value};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::source::baseline_read::{
    BaselineReader, ChunkBounds, RowSink, chunks_from_splits, keyed_table, split_integer_range,
};

/// A baseline reader of the configured table on one connection.
pub struct SqlServerBaselineReader {
    client: SqlClient,
    captured: Captured,
    /// `baseline.keys`: declared keys of tables without one.
    declared: std::collections::BTreeMap<String, Vec<String>>,
}

impl SqlServerBaselineReader {
    /// Connects and loads the capture instance like a drain does (same refusals).
    pub async fn open(config: &Config) -> Result<SqlServerBaselineReader> {
        let ms = super::settings(config)?;
        let (url, tls) = (config.source_url()?, &config.source.tls);
        let mut client = connect::connect(&url, tls, &config.source.timeouts).await?;
        let captured =
            catalog::load(&mut client, &config.source.tables[0], &ms.capture_instance).await?;
        Ok(SqlServerBaselineReader {
            client,
            captured,
            declared: config.baseline.keys.clone(),
        })
    }

    /// The captured table `name`; whether it has a key to chunk by is [`Self::keyset`]'s
    /// decision (its own key or a declared one).
    fn table(&self, name: &str) -> Result<&Captured> {
        keyed_table(
            std::slice::from_ref(&self.captured),
            name,
            |t| &t.config_name,
            |_| true,
            keys::KEY_NAMES,
        )
    }

    /// The table and its key, refused when the key cannot bound chunks exactly.
    fn keyset(&self, name: &str) -> Result<(Captured, Vec<KeyColumn>)> {
        let table = self.table(name)?.clone();
        let keys = keys::baseline_key(
            &table.config_name,
            &table.columns,
            &table.shape.columns,
            &self.declared,
        )?;
        Ok((table, keys))
    }

    async fn estimate_rows(&mut self, table: &Captured) -> Result<u64> {
        let object_id = table.instance.source_object_id;
        let row = catalog::one_row(
            &mut self.client,
            queries::ROW_ESTIMATE,
            &[&object_id],
            "estimating the table size",
        )
        .await?;
        let estimate = match &row {
            Some(row) => catalog::cell::<i64>(row, 0)?.unwrap_or(0),
            None => 0,
        };
        if estimate > 0 {
            return Ok(estimate as u64);
        }
        // No estimate (or an empty table, where counting is cheap).
        let row = catalog::one_row(
            &mut self.client,
            &queries::row_count(&table.schema, &table.table),
            &[],
            "counting rows",
        )
        .await?;
        Ok(match &row {
            Some(row) => catalog::cell::<i64>(row, 0)?.unwrap_or(0).max(0) as u64,
            None => 0,
        })
    }

    /// Splits a single integer key's `[MIN, MAX]` into `chunks` ranges.
    async fn plan_integer(
        &mut self,
        table: &Captured,
        key: &KeyColumn,
        chunks: u64,
    ) -> Result<Vec<ChunkBounds>> {
        let row = catalog::one_row(
            &mut self.client,
            &queries::key_range(&table.schema, &table.table, key),
            &[],
            "reading the key range",
        )
        .await?;
        let range = match &row {
            Some(row) => catalog::cell::<i64>(row, 0)?.zip(catalog::cell::<i64>(row, 1)?),
            None => None,
        };
        let Some((min, max)) = range else {
            return Ok(chunks_from_splits(vec![]));
        };
        let splits = split_integer_range(i128::from(min), i128::from(max), chunks);
        Ok(chunks_from_splits(
            splits.into_iter().map(|s| vec![s.to_string()]).collect(),
        ))
    }

    /// Walks the key in `chunk_rows` steps.
    async fn plan_walk(
        &mut self,
        table: &Captured,
        keys: &[KeyColumn],
        chunk_rows: u64,
    ) -> Result<Vec<ChunkBounds>> {
        let skip = i64::try_from(chunk_rows.max(1) - 1).unwrap_or(i64::MAX);
        let first = queries::key_walk(&table.schema, &table.table, &table.columns, keys, false);
        let next = queries::key_walk(&table.schema, &table.table, &table.columns, keys, true);
        let mut walk = KeyWalk::new();
        loop {
            let mut params = match walk.after() {
                Some(after) => keys::bound_parameters(&table.config_name, keys, after)?,
                None => Vec::new(),
            };
            params.push(ColumnData::I64(Some(skip)));
            let sql = if walk.after().is_some() {
                &next
            } else {
                &first
            };
            let refs: Vec<&dyn tiberius::ToSql> =
                params.iter().map(|p| p as &dyn tiberius::ToSql).collect();
            let row = catalog::one_row(
                &mut self.client,
                sql,
                &refs,
                "walking the key for chunk boundaries",
            )
            .await?;
            let found = row
                .map(|row| keys::key_texts(&table.config_name, keys, row.into_iter().collect()))
                .transpose()?;
            if !walk.record(found)? {
                break;
            }
        }
        Ok(walk.finish())
    }
}

#[async_trait]
impl BaselineReader for SqlServerBaselineReader {
    fn schema(&self, table: &str) -> Result<Arc<TableSchema>> {
        Ok(self.table(table)?.shape.clone())
    }

    async fn plan(&mut self, name: &str, chunk_rows: u64) -> Result<Vec<ChunkBounds>> {
        let (table, keys) = self.keyset(name)?;
        let rows = self.estimate_rows(&table).await?;
        let chunks = rows.div_ceil(chunk_rows.max(1)).max(1);
        if chunks == 1 {
            return Ok(chunks_from_splits(vec![]));
        }
        match keys.as_slice() {
            [key] if key.is_integer() => self.plan_integer(&table, key, chunks).await,
            _ => self.plan_walk(&table, &keys, chunk_rows).await,
        }
    }

    async fn read_chunk(
        &mut self,
        name: &str,
        bounds: &ChunkBounds,
        rows: &mut RowSink<'_>,
    ) -> Result<u64> {
        let (table, keys) = self.keyset(name)?;
        let mut params = Vec::new();
        for bound in [&bounds.lower, &bounds.upper].into_iter().flatten() {
            params.extend(keys::bound_parameters(&table.config_name, &keys, bound)?);
        }
        let sql = queries::chunk(
            &table.schema,
            &table.table,
            &table.columns,
            &keys,
            bounds.lower.is_some(),
            bounds.upper.is_some(),
        );
        let refs: Vec<&dyn tiberius::ToSql> =
            params.iter().map(|p| p as &dyn tiberius::ToSql).collect();
        let what = format!("reading a baseline chunk of {name}");
        let mut stream = self
            .client
            .query(sql.as_str(), &refs)
            .await
            .map_err(|e| query_error(&what, e))?
            .into_row_stream();
        let mut count = 0u64;
        while let Some(row) = stream.next().await {
            let row = row.map_err(|e| query_error(&what, e))?;
            rows(baseline_row(row.into_iter().collect(), &table.shape)?)?;
            count += 1;
        }
        Ok(count)
    }
}

/// Converts one baseline row (cells in schema order) with the change stream's decoder.
pub fn baseline_row(cells: Vec<ColumnData<'static>>, shape: &TableSchema) -> Result<Vec<Value>> {
    if cells.len() != shape.columns.len() {
        return Err(Error::new(
            Code::SourceProtocol,
            format!(
                "{}: a baseline row has {} cells, expected {}",
                shape.name,
                cells.len(),
                shape.columns.len()
            ),
        ));
    }
    cells
        .into_iter()
        .zip(&shape.columns)
        .map(|(data, column)| {
            values::convert(&column.ty, data).map_err(|why| {
                Error::new(
                    Code::ValueUnrepresentable,
                    format!("{}.{} ({}) in the baseline: {why}", shape.name, column.name, column.source_type),
                )
                .hint("the value has no exact representation in the column's output type; fix the row or the column type at the source")
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType};
    use std::borrow::Cow;

    fn shape() -> TableSchema {
        let col = |name: &str, ty: ColumnType, key: bool| Column {
            name: name.into(),
            ty,
            nullable: !key,
            key,
            source_type: "x".into(),
            field_metadata: Default::default(),
        };
        TableSchema {
            name: "dbo.t".into(),
            columns: vec![
                col("region", ColumnType::Utf8, true),
                col("at", ColumnType::Timestamp, true),
                col(
                    "amount",
                    ColumnType::Decimal {
                        precision: 19,
                        scale: 4,
                    },
                    false,
                ),
            ],
        }
    }

    #[test]
    fn rows_convert_in_schema_order() {
        let cells = vec![
            ColumnData::String(Some(Cow::Borrowed("eu"))),
            ColumnData::DateTime2(None),
            ColumnData::Numeric(Some(tiberius::numeric::Numeric::new_with_scale(12_345, 4))),
        ];
        assert_eq!(
            baseline_row(cells, &shape()).unwrap(),
            vec![
                Value::Text("eu".into()),
                Value::Null,
                Value::Decimal(12_345)
            ]
        );
        let err = baseline_row(vec![ColumnData::I32(Some(1))], &shape()).unwrap_err();
        assert_eq!(err.code(), Code::SourceProtocol);
        let cells = vec![
            ColumnData::String(Some(Cow::Borrowed("eu"))),
            ColumnData::DateTime2(None),
            ColumnData::Numeric(Some(tiberius::numeric::Numeric::new_with_scale(1, 5))),
        ];
        let err = baseline_row(cells, &shape()).unwrap_err();
        assert_eq!(err.code(), Code::ValueUnrepresentable);
        assert!(err.to_string().contains("dbo.t.amount"), "{err}");
    }
}
