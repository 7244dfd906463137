//! The SQL Server baseline reader: the captured table in primary-key (keyset) chunks,
//! anchored at `sys.fn_cdc_get_max_lsn()`.
//!
//! Contract (DESIGN "Baselines"): the anchor is read *before* the first chunk, so every
//! change committed after the anchor is in the change stream that resumes there — rows a
//! chunk reads that changed after the anchor are replayed by the drain (overlap,
//! deduplicated by `(__pos, __seq)`), never lost. Chunks are `TOP (n)` in key order after
//! the previous chunk's last key, so a crashed baseline resumes at the next chunk from
//! the recorded key; each chunk is one statement (READ COMMITTED), independent of the
//! others. A table without a key (primary key or the instance's unique index) is refused:
//! keyset chunks need one.

use std::sync::Arc;

use tiberius::ColumnData;

use super::catalog::{self, Captured};
use super::connect::{self, SqlClient, query_error};
use super::queries;
use crate::change::{ColumnType, TableSchema, Value};
use crate::config::Config;
use crate::error::{Code, Error, Result};
use crate::position::{Position, SqlServerLsn as Lsn};

/// One chunk of baseline rows.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotChunk {
    /// Rows in key order, positional over the table schema.
    pub rows: Vec<Vec<Value>>,
    /// The key of the last row: where the next chunk starts. `None` when the chunk was
    /// short, i.e. the table is exhausted.
    pub next_after: Option<Vec<Value>>,
}

/// An open baseline of one captured table.
pub struct SqlServerSnapshot {
    client: SqlClient,
    captured: Captured,
    key: Vec<usize>,
    first_sql: String,
    next_sql: String,
    chunk_rows: i64,
    anchor: Lsn,
}

impl SqlServerSnapshot {
    /// Connects, checks the capture instance like a drain would, and fixes the anchor.
    pub async fn open(config: &Config, chunk_rows: u64) -> Result<SqlServerSnapshot> {
        let ms = super::settings(config)?;
        let url = config.source_url()?;
        let mut client = connect::connect(&url, &config.source.tls).await?;
        let captured =
            catalog::load(&mut client, &config.source.tables[0], &ms.capture_instance).await?;
        let key = captured.key();
        if key.is_empty() {
            return Err(Error::new(
                Code::SourcePrerequisite,
                format!(
                    "{} has no primary key (nor a unique index named by the capture instance)",
                    captured.config_name
                ),
            )
            .hint(format!(
                "add a primary key to {}: the baseline reads it in key order",
                queries::qualified(&captured.schema, &captured.table)
            )));
        }
        let anchor = catalog::max_lsn(&mut client).await?;
        let first_sql =
            queries::first_chunk(&captured.schema, &captured.table, &captured.columns, &key);
        let next_sql =
            queries::next_chunk(&captured.schema, &captured.table, &captured.columns, &key);
        Ok(SqlServerSnapshot {
            client,
            captured,
            key,
            first_sql,
            next_sql,
            chunk_rows: i64::try_from(chunk_rows.max(1)).unwrap_or(i64::MAX),
            anchor,
        })
    }

    /// The change-stream position the baseline is consistent with: drains resume after it.
    pub fn anchor(&self) -> Position {
        Position::SqlServer(self.anchor)
    }

    /// The identity a checkpoint at the anchor is stored with.
    pub fn source_identity(&self) -> String {
        self.captured.identity.to_string()
    }

    /// The table as the baseline writes it.
    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.captured.shape
    }

    /// Reads the chunk after `after` (the previous chunk's `next_after`), or the first.
    pub async fn read_chunk(&mut self, after: Option<&[Value]>) -> Result<SnapshotChunk> {
        let shape = self.captured.shape.clone();
        let what = format!("reading baseline chunk of {}", shape.name);
        let mut params: Vec<ColumnData<'static>> = vec![ColumnData::I64(Some(self.chunk_rows))];
        if let Some(after) = after {
            params.extend(key_params(&shape, &self.key, after)?);
        }
        let refs: Vec<&dyn tiberius::ToSql> =
            params.iter().map(|p| p as &dyn tiberius::ToSql).collect();
        let sql = if after.is_some() {
            &self.next_sql
        } else {
            &self.first_sql
        };
        let rows = self
            .client
            .query(sql.as_str(), &refs)
            .await
            .map_err(|e| query_error(&what, e))?
            .into_first_result()
            .await
            .map_err(|e| query_error(&what, e))?;
        let rows = rows
            .into_iter()
            .map(|row| snapshot_row(row.into_iter().collect(), &shape))
            .collect::<Result<Vec<_>>>()?;
        let next_after = if rows.len() as i64 >= self.chunk_rows {
            rows.last()
                .map(|r| self.key.iter().map(|&k| r[k].clone()).collect())
        } else {
            None
        };
        Ok(SnapshotChunk { rows, next_after })
    }
}

/// Converts one baseline row.
pub fn snapshot_row(cells: Vec<ColumnData<'static>>, shape: &TableSchema) -> Result<Vec<Value>> {
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
            super::values::convert(&column.ty, data).map_err(|why| {
                Error::new(
                    Code::ValueUnrepresentable,
                    format!("{}.{} ({}) in the baseline: {why}", shape.name, column.name, column.source_type),
                )
                .hint("the value has no exact representation in the column's output type; fix the row or the column type at the source")
            })
        })
        .collect()
}

/// The keyset parameters for the key values `after` (in key order).
pub fn key_params(
    shape: &TableSchema,
    key: &[usize],
    after: &[Value],
) -> Result<Vec<ColumnData<'static>>> {
    if after.len() != key.len() {
        return Err(Error::new(
            Code::Internal,
            format!(
                "{}: a resume key has {} values, the key has {} columns",
                shape.name,
                after.len(),
                key.len()
            ),
        ));
    }
    key.iter()
        .zip(after)
        .map(|(&k, value)| {
            let column = &shape.columns[k];
            key_param(&column.ty, value).map_err(|why| {
                Error::new(
                    Code::StateCorrupt,
                    format!("{}.{}: the recorded resume key {value:?} does not fit the column: {why}", shape.name, column.name),
                )
                .hint("the baseline's chunk record was edited or the key column's type changed; restart the baseline")
            })
        })
        .collect()
}

/// One key value as a typed parameter (the statement `CAST`s it to the column's type).
pub fn key_param(ty: &ColumnType, value: &Value) -> Result<ColumnData<'static>, String> {
    use tiberius::time::{Date, DateTime2, DateTimeOffset, Time};
    const DAY_US: i64 = 86_400_000_000;
    const DAYS_0001_TO_1970: i64 = 719_162;
    let date = |days_1970: i64| {
        u32::try_from(days_1970 + DAYS_0001_TO_1970)
            .map(Date::new)
            .map_err(|_| "date out of range".to_owned())
    };
    let datetime2 = |micros: i64| -> Result<DateTime2, String> {
        let (days, time) = (micros.div_euclid(DAY_US), micros.rem_euclid(DAY_US));
        Ok(DateTime2::new(date(days)?, Time::new(time as u64 * 10, 7)))
    };
    Ok(match (ty, value) {
        (_, Value::Null) => return Err("a key value is NULL".into()),
        (ColumnType::Boolean, Value::Boolean(b)) => ColumnData::Bit(Some(*b)),
        (
            ColumnType::UInt8 | ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64,
            Value::Int(v),
        ) => ColumnData::I64(Some(*v)),
        (
            ColumnType::UInt8 | ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64,
            Value::UInt(v),
        ) => ColumnData::I64(Some(i64::try_from(*v).map_err(|e| e.to_string())?)),
        (ColumnType::Float32 | ColumnType::Float64, Value::Float(v)) => ColumnData::F64(Some(*v)),
        (ColumnType::Decimal { scale, .. }, Value::Decimal(v)) => {
            let scale = u8::try_from(*scale).map_err(|e| e.to_string())?;
            ColumnData::Numeric(Some(tiberius::numeric::Numeric::new_with_scale(*v, scale)))
        }
        (ColumnType::Uuid, Value::Text(s)) => ColumnData::Guid(Some(
            s.parse::<tiberius::Uuid>().map_err(|e| e.to_string())?,
        )),
        (ColumnType::Utf8, Value::Text(s)) => ColumnData::String(Some(s.clone().into())),
        (ColumnType::Binary, Value::Bytes(b)) => ColumnData::Binary(Some(b.clone().into())),
        (ColumnType::Date, Value::Date(d)) => ColumnData::Date(Some(date(i64::from(*d))?)),
        (ColumnType::Time, Value::Time(us)) => ColumnData::Time(Some(Time::new(
            u64::try_from(*us).map_err(|e| e.to_string())? * 10,
            7,
        ))),
        (ColumnType::Timestamp, Value::Timestamp(us)) => {
            ColumnData::DateTime2(Some(datetime2(*us)?))
        }
        (ColumnType::TimestampTz, Value::Timestamp(us)) => {
            ColumnData::DateTimeOffset(Some(DateTimeOffset::new(datetime2(*us)?, 0)))
        }
        (ty, other) => return Err(format!("{other:?} is not a {ty:?} value")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Column;
    use crate::source::sqlserver::values::convert;
    use std::borrow::Cow;

    fn shape() -> TableSchema {
        let col = |name: &str, ty: ColumnType, key: bool| Column {
            name: name.into(),
            ty,
            nullable: !key,
            key,
            source_type: "x".into(),
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
            snapshot_row(cells, &shape()).unwrap(),
            vec![
                Value::Text("eu".into()),
                Value::Null,
                Value::Decimal(12_345)
            ]
        );
        let err = snapshot_row(vec![ColumnData::I32(Some(1))], &shape()).unwrap_err();
        assert_eq!(err.code(), Code::SourceProtocol);
    }

    #[test]
    fn key_params_round_trip_through_the_value_decoder() {
        // A key read from a row, turned into a parameter, decodes back to the same value.
        let cases = [
            (
                ColumnType::Timestamp,
                Value::Timestamp(1_709_290_896_123_456),
            ),
            (ColumnType::Timestamp, Value::Timestamp(-1)),
            (
                ColumnType::TimestampTz,
                Value::Timestamp(1_709_290_896_000_001),
            ),
            (ColumnType::Date, Value::Date(19_783)),
            (ColumnType::Time, Value::Time(45_296_123_456)),
            (
                ColumnType::Uuid,
                Value::Text("6f9619ff-8b86-d011-b42d-00c04fc964ff".into()),
            ),
            (
                ColumnType::Decimal {
                    precision: 19,
                    scale: 4,
                },
                Value::Decimal(-5),
            ),
            (ColumnType::Utf8, Value::Text("k".into())),
            (ColumnType::Binary, Value::Bytes(vec![1, 2])),
            (ColumnType::Boolean, Value::Boolean(true)),
        ];
        for (ty, value) in cases {
            let param = key_param(&ty, &value).unwrap();
            assert_eq!(convert(&ty, param).unwrap(), value, "{ty:?}");
        }
        assert_eq!(
            key_param(&ColumnType::Int32, &Value::Int(7)).unwrap(),
            ColumnData::I64(Some(7))
        );
        assert!(key_param(&ColumnType::Int32, &Value::Null).is_err());
        let s = shape();
        assert_eq!(
            key_params(&s, &[0, 1], &[Value::Text("a".into())])
                .unwrap_err()
                .code(),
            Code::Internal
        );
        let err = key_params(
            &s,
            &[0, 1],
            &[Value::Text("a".into()), Value::Bytes(vec![])],
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::StateCorrupt);
    }
}
