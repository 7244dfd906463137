//! Reading the database's CDC state and the capture instance's columns at open, through
//! the statements in [`queries`](super::queries), with every refusal decided by
//! [`prerequisites`](super::prerequisites).
//!
//! Guarantees: what [`load`] returns describes a capture instance that exists, belongs to
//! the configured table, carries exactly the table's columns, has only supported types,
//! and is readable by the source user.

use std::sync::Arc;

use tiberius::{FromSql, Row};

use super::connect::{SqlClient, query_error};
use super::prerequisites::{self, DatabaseStatus, InstanceInfo, SourceIdentity};
use super::queries;
use super::values::{CaptureColumn, Logging};
use crate::change::{Column, TableSchema};
use crate::error::{Code, Error, Result};
use crate::position::SqlServerLsn as Lsn;

/// A captured table, as of the open.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Name as configured (the output directory).
    pub config_name: String,
    pub schema: String,
    pub table: String,
    pub capture_instance: String,
    pub identity: SourceIdentity,
    pub instance: InstanceInfo,
    pub columns: Vec<CaptureColumn>,
    pub shape: Arc<TableSchema>,
    /// The server's offset from UTC, minutes (local = UTC + offset).
    pub utc_offset_minutes: i32,
}

impl Captured {
    /// How each column is logged in old images, in schema order.
    pub fn logging(&self) -> Vec<Logging> {
        self.columns.iter().map(CaptureColumn::logging).collect()
    }

    /// Indexes of the key columns, in column order.
    pub fn key(&self) -> Vec<usize> {
        self.shape.key_indexes()
    }
}

/// Splits `schema.table` (a bare name means `dbo`).
pub fn split_name(config_name: &str) -> (String, String) {
    match config_name.split_once('.') {
        Some((schema, table)) => (schema.to_owned(), table.to_owned()),
        None => ("dbo".to_owned(), config_name.to_owned()),
    }
}

/// What the catalog says about the database and the capture instance, before any rule
/// is applied (`doctor` judges each part on its own).
#[derive(Debug, Clone)]
pub struct CatalogFacts {
    pub status: DatabaseStatus,
    /// The server's offset from UTC, minutes.
    pub utc_offset_minutes: i32,
    /// The instance's `cdc.change_tables` row; `None` when CDC is off for the database
    /// (the table does not exist then) or the instance does not exist.
    pub instance: Option<InstanceInfo>,
    /// The instance's captured columns (empty without an instance).
    pub columns: Vec<CaptureColumn>,
    /// The source table's column names (empty without an instance).
    pub source_columns: Vec<String>,
}

/// Reads and checks everything the stream needs about the database and the instance.
pub async fn load(
    client: &mut SqlClient,
    config_name: &str,
    capture_instance: &str,
) -> Result<Captured> {
    let facts = read_facts(client, capture_instance).await?;
    decide(config_name, capture_instance, facts)
}

/// Reads the catalog facts; refuses nothing but a failed query.
pub async fn read_facts(client: &mut SqlClient, capture_instance: &str) -> Result<CatalogFacts> {
    let row = one_row(
        client,
        queries::DATABASE_STATUS,
        &[],
        "reading the database status",
    )
    .await?
    .ok_or_else(|| Error::new(Code::SourceProtocol, "sys.databases has no row for DB_ID()"))?;
    let status = DatabaseStatus {
        database: cell::<&str>(&row, 0)?.unwrap_or_default().to_owned(),
        cdc_enabled: cell::<bool>(&row, 1)?.unwrap_or(false),
        family_guid: cell::<tiberius::Uuid>(&row, 2)?.map(|g| g.hyphenated().to_string()),
        recovery_fork_guid: cell::<tiberius::Uuid>(&row, 3)?.map(|g| g.hyphenated().to_string()),
    };
    let utc_offset_minutes = cell::<i32>(&row, 4)?.unwrap_or(0);
    let mut facts = CatalogFacts {
        status,
        utc_offset_minutes,
        instance: None,
        columns: Vec::new(),
        source_columns: Vec::new(),
    };
    if !facts.status.cdc_enabled {
        return Ok(facts);
    }
    facts.instance = one_row(
        client,
        queries::CAPTURE_INSTANCE,
        &[&capture_instance],
        "reading cdc.change_tables",
    )
    .await?
    .map(|row| instance_info(&row))
    .transpose()?;
    let Some(instance) = &facts.instance else {
        return Ok(facts);
    };
    let rows = all_rows(
        client,
        queries::CAPTURED_COLUMNS,
        &[&instance.change_table_id, &instance.source_object_id],
        "reading cdc.captured_columns",
    )
    .await?;
    for row in &rows {
        facts.columns.push(CaptureColumn {
            name: cell::<&str>(row, 0)?.unwrap_or_default().to_owned(),
            type_name: cell::<&str>(row, 1)?.unwrap_or_default().to_owned(),
            max_length: cell::<i32>(row, 2)?.unwrap_or(0),
            precision: cell::<i32>(row, 3)?.unwrap_or(0),
            scale: cell::<i32>(row, 4)?.unwrap_or(0),
            computed: cell::<i32>(row, 5)? == Some(1),
            key_ordinal: cell::<i32>(row, 6)?,
            nullable: cell::<i32>(row, 7)? != Some(0),
            collation: cell::<&str>(row, 8)?.map(str::to_owned),
        });
    }
    let source_rows = all_rows(
        client,
        queries::SOURCE_COLUMNS,
        &[&instance.source_object_id],
        "reading the table's columns",
    )
    .await?;
    facts.source_columns = source_rows
        .iter()
        .map(|r| cell::<&str>(r, 0).map(|n| n.unwrap_or_default().to_owned()))
        .collect::<Result<Vec<_>>>()?;
    Ok(facts)
}

/// Applies every catalog rule, in the order the drain refuses by. Pure.
pub fn decide(config_name: &str, capture_instance: &str, facts: CatalogFacts) -> Result<Captured> {
    let (schema, table) = split_name(config_name);
    let identity = prerequisites::check_database(&facts.status, &schema, &table, capture_instance)?;
    let instance =
        prerequisites::check_instance(facts.instance.as_ref(), &schema, &table, capture_instance)?
            .clone();
    prerequisites::check_columns(
        &schema,
        &table,
        capture_instance,
        &facts.source_columns,
        &facts.columns,
    )?;
    let shape = Arc::new(shape(config_name, &facts.columns)?);
    Ok(Captured {
        config_name: config_name.to_owned(),
        schema,
        table,
        capture_instance: capture_instance.to_owned(),
        identity,
        instance,
        columns: facts.columns,
        shape,
        utc_offset_minutes: facts.utc_offset_minutes,
    })
}

/// The output schema of the captured columns; refuses an unsupported type.
pub fn shape(config_name: &str, columns: &[CaptureColumn]) -> Result<TableSchema> {
    let mut out = Vec::with_capacity(columns.len());
    let mut unsupported = Vec::new();
    for c in columns {
        let ty = match c.column_type() {
            Ok(ty) => ty,
            Err(why) => {
                unsupported.push(format!("{} has type {}: {why}", c.name, c.declaration()));
                continue;
            }
        };
        out.push(Column {
            name: c.name.clone(),
            ty,
            nullable: c.nullable,
            key: c.is_key(),
            source_type: c.declaration(),
            field_metadata: c.field_metadata(),
        });
    }
    crate::source::refuse_unsupported(
        config_name,
        &unsupported,
        "see the type table in docs/sqlserver.md; re-create the capture instance with a @captured_column_list that leaves the columns out, or change their types",
    )?;
    Ok(TableSchema {
        name: config_name.to_owned(),
        columns: out,
    })
}

fn instance_info(row: &Row) -> Result<InstanceInfo> {
    Ok(InstanceInfo {
        change_table_id: cell::<i32>(row, 0)?.unwrap_or(0),
        change_table: cell::<&str>(row, 1)?.unwrap_or_default().to_owned(),
        source_schema: cell::<&str>(row, 2)?.unwrap_or_default().to_owned(),
        source_table: cell::<&str>(row, 3)?.unwrap_or_default().to_owned(),
        source_object_id: cell::<i32>(row, 4)?.unwrap_or(0),
        role_name: cell::<&str>(row, 5)?.map(str::to_owned),
        is_role_member: cell::<i32>(row, 6)? == Some(1),
        min_lsn: lsn_cell(row, 7)?.unwrap_or(Lsn::ZERO),
    })
}

/// The read bound `sys.fn_cdc_get_max_lsn()`; refuses when the capture job has not run.
pub async fn max_lsn(client: &mut SqlClient) -> Result<Lsn> {
    let row = one_row(
        client,
        queries::MAX_LSN,
        &[],
        "reading sys.fn_cdc_get_max_lsn()",
    )
    .await?;
    match row.as_ref().map(|r| lsn_cell(r, 0)).transpose()?.flatten() {
        Some(lsn) if !lsn.is_zero() => Ok(lsn),
        _ => Err(Error::new(
            Code::SourcePrerequisite,
            "sys.fn_cdc_get_max_lsn() returned no LSN: the CDC capture job has not processed the log yet",
        )
        .hint("start SQL Server Agent and the database's capture job (`EXEC sys.sp_cdc_start_job @job_type = N'capture'`); RDS: Agent runs by default")),
    }
}

/// The instance's current low-water mark.
pub async fn min_lsn(client: &mut SqlClient, capture_instance: &str) -> Result<Lsn> {
    let row = one_row(
        client,
        queries::MIN_LSN,
        &[&capture_instance],
        "reading sys.fn_cdc_get_min_lsn",
    )
    .await?;
    Ok(row
        .as_ref()
        .map(|r| lsn_cell(r, 0))
        .transpose()?
        .flatten()
        .unwrap_or(Lsn::ZERO))
}

/// Runs a statement and returns its first row.
pub async fn one_row(
    client: &mut SqlClient,
    sql: &str,
    params: &[&dyn tiberius::ToSql],
    what: &str,
) -> Result<Option<Row>> {
    let stream = client
        .query(sql, params)
        .await
        .map_err(|e| query_error(what, e))?;
    stream.into_row().await.map_err(|e| query_error(what, e))
}

/// Runs a statement and returns every row of its first result set.
pub async fn all_rows(
    client: &mut SqlClient,
    sql: &str,
    params: &[&dyn tiberius::ToSql],
    what: &str,
) -> Result<Vec<Row>> {
    let stream = client
        .query(sql, params)
        .await
        .map_err(|e| query_error(what, e))?;
    stream
        .into_first_result()
        .await
        .map_err(|e| query_error(what, e))
}

/// One typed cell; a type other than the statement's own is a protocol error.
pub fn cell<'a, R: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<Option<R>> {
    row.try_get::<R, usize>(idx).map_err(|e| {
        Error::new(
            Code::SourceProtocol,
            format!("column {idx} of a catalog row has an unexpected type"),
        )
        .source(e)
    })
}

/// A `binary(10)` LSN cell.
pub fn lsn_cell(row: &Row, idx: usize) -> Result<Option<Lsn>> {
    match cell::<&[u8]>(row, idx)? {
        None => Ok(None),
        Some(raw) => Lsn::try_from(raw).map(Some).map_err(|e| {
            Error::new(Code::SourceProtocol, "the server returned a malformed LSN").source(e)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ColumnType;

    fn column(name: &str, type_name: &str, key: bool) -> CaptureColumn {
        CaptureColumn {
            name: name.into(),
            type_name: type_name.into(),
            max_length: 4,
            precision: 10,
            scale: 0,
            computed: false,
            key_ordinal: key.then_some(1),
            nullable: !key,
            collation: None,
        }
    }

    #[test]
    fn names_default_to_dbo() {
        assert_eq!(split_name("orders"), ("dbo".into(), "orders".into()));
        assert_eq!(
            split_name("sales.orders"),
            ("sales".into(), "orders".into())
        );
    }

    #[test]
    fn shape_keeps_order_keys_and_refuses_unsupported_types() {
        let shape = shape(
            "dbo.t",
            &[column("id", "int", true), column("v", "bigint", false)],
        )
        .unwrap();
        assert_eq!(shape.key_indexes(), vec![0]);
        assert_eq!(shape.columns[1].ty, ColumnType::Int64);
        assert!(!shape.columns[0].nullable);
        // No type is refused for being a type: spatial columns are WKB, others their text.
        let wide = super::shape(
            "dbo.t",
            &[
                column("g", "geography", false),
                column("h", "hierarchyid", false),
            ],
        )
        .unwrap();
        assert_eq!(wide.columns[0].ty, ColumnType::Binary);
        assert_eq!(wide.columns[0].field_metadata["sluice.form"], "wkb");
        assert_eq!(wide.columns[1].ty, ColumnType::Utf8);
        assert_eq!(wide.columns[1].field_metadata["sluice.form"], "text");
        // A declaration no output type holds (a catalog reporting a decimal of precision 0)
        // is refused, every offending column named.
        let mut bad = column("g", "decimal", false);
        bad.precision = 0;
        let err = super::shape("dbo.t", std::slice::from_ref(&bad)).unwrap_err();
        assert_eq!(err.code(), Code::SourceUnsupportedType);
        assert!(err.to_string().contains("dbo.t.g"));
        let mut bad2 = column("h", "decimal", false);
        bad2.precision = 39;
        let err = super::shape("dbo.t", &[column("id", "int", true), bad, bad2]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("dbo.t.g") && text.contains("dbo.t.h") && text.contains("2 columns"),
            "{text}"
        );
    }
}
