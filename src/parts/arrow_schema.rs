//! The one mapping from sluice column types to Arrow types, shared by change parts and
//! snapshot parts, and the layout of a change part's schema.
//!
//! Guarantees: every [`ColumnType`] maps to exactly one Arrow [`DataType`] (JSON as Utf8
//! with the canonical `arrow.json` extension, which the Parquet writer turns into the JSON
//! logical type — an Iceberg table's parts leave it out of their stored Arrow schema,
//! [`without_extensions`]; UUID as its canonical text; timestamps in microseconds, `"UTC"` for
//! instants; decimals as `Decimal128` up to precision 38 and `Decimal256` up to 76). A type
//! that has no faithful Arrow form (precision 0 or above 76, a scale outside `0..=precision`)
//! is refused with `SLUICE_SOURCE_UNSUPPORTED_TYPE` instead of being approximated.
//!
//! A change part has the metadata columns first — `__op`, `__pos`, `__seq` (not null),
//! `__ts`, `__unlogged` — then the table's columns, all nullable (a delete row carries only
//! the key). Each table column's field metadata names its source type
//! (`sluice.source_type`).

use std::sync::Arc;

use arrow_schema::extension::{EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY, Json};
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef, TimeUnit};

use crate::change::{ColumnType, TableSchema};
use crate::error::{Code, Error, Result};

/// `__op`: `insert`, `update`, `delete` (or `snapshot`).
pub const OP: &str = "__op";
/// `__pos`: the transaction's commit position, sortable text.
pub const POS: &str = "__pos";
/// `__seq`: ordinal of the change within its transaction.
pub const SEQ: &str = "__seq";
/// `__ts`: commit timestamp, UTC microseconds, where the engine provides it.
pub const TS: &str = "__ts";
/// `__unlogged`: names of the columns whose value the source did not log (NULL when all were).
pub const UNLOGGED: &str = "__unlogged";
/// The metadata columns, in the order they lead every change part.
pub const METADATA_COLUMNS: [&str; 5] = [OP, POS, SEQ, TS, UNLOGGED];

/// Field metadata key carrying a column's source type name (`numeric(12,2)`).
pub const SOURCE_TYPE_KEY: &str = "sluice.source_type";
/// The time zone of every instant column.
pub const UTC: &str = "UTC";
/// The name of a list's element field.
pub const LIST_ITEM: &str = "item";

/// Largest decimal precision Arrow (and Parquet) can hold: `Decimal256`.
pub const MAX_DECIMAL_PRECISION: u8 = 76;
/// Largest precision kept in a `Decimal128`.
pub const MAX_DECIMAL128_PRECISION: u8 = 38;

/// The Arrow type of a column type.
pub fn arrow_type(ty: &ColumnType) -> Result<DataType> {
    Ok(match ty {
        ColumnType::Boolean => DataType::Boolean,
        ColumnType::Int8 => DataType::Int8,
        ColumnType::Int16 => DataType::Int16,
        ColumnType::Int32 => DataType::Int32,
        ColumnType::Int64 => DataType::Int64,
        ColumnType::UInt8 => DataType::UInt8,
        ColumnType::UInt16 => DataType::UInt16,
        ColumnType::UInt32 => DataType::UInt32,
        ColumnType::UInt64 => DataType::UInt64,
        ColumnType::Float32 => DataType::Float32,
        ColumnType::Float64 => DataType::Float64,
        &ColumnType::Decimal { precision, scale } => {
            if precision == 0
                || precision > MAX_DECIMAL_PRECISION
                || scale < 0
                || scale.unsigned_abs() > precision
            {
                return Err(Error::new(
                    Code::SourceUnsupportedType,
                    format!(
                        "decimal({precision},{scale}) has no Arrow form (precision 1..=76, scale 0..=precision)"
                    ),
                )
                .hint("give the column a precision and scale within 1..=76 and 0..=precision (e.g. `numeric(38,9)`), or exclude it from the job's column list"));
            }
            if precision <= MAX_DECIMAL128_PRECISION {
                DataType::Decimal128(precision, scale)
            } else {
                DataType::Decimal256(precision, scale)
            }
        }
        ColumnType::Utf8 | ColumnType::Json | ColumnType::Uuid => DataType::Utf8,
        ColumnType::Binary => DataType::Binary,
        ColumnType::Date => DataType::Date32,
        ColumnType::Time => DataType::Time64(TimeUnit::Microsecond),
        ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        ColumnType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        ColumnType::List(item) => DataType::List(list_item_field(item)?),
    })
}

/// `schema` without the extension type keys, as an Iceberg table's parts store it for Arrow
/// readers (the file's `ARROW:schema`): pyiceberg refuses a column whose stored type is an
/// extension it does not know. A JSON column still says JSON through its Parquet logical
/// type.
pub fn without_extensions(schema: &Schema) -> Schema {
    fn plain(field: &Field) -> Field {
        let mut metadata = field.metadata().clone();
        metadata.remove(EXTENSION_TYPE_NAME_KEY);
        metadata.remove(EXTENSION_TYPE_METADATA_KEY);
        let data_type = match field.data_type() {
            DataType::List(item) => DataType::List(Arc::new(plain(item))),
            other => other.clone(),
        };
        Field::new(field.name(), data_type, field.is_nullable()).with_metadata(metadata)
    }
    Schema::new_with_metadata(
        schema.fields().iter().map(|f| plain(f)).collect::<Vec<_>>(),
        schema.metadata().clone(),
    )
}

/// A nullable Arrow field of a column type, carrying the JSON extension where it applies
/// (also on list elements).
pub fn arrow_field(name: &str, ty: &ColumnType) -> Result<Field> {
    let mut field = Field::new(name, arrow_type(ty)?, true);
    if *ty == ColumnType::Json {
        field
            .try_with_extension_type(Json::default())
            .map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("attaching the JSON extension to column {name}"),
                )
                .source(e)
            })?;
    }
    Ok(field)
}

/// The element field of a list of `item` (named `item`, nullable).
pub fn list_item_field(item: &ColumnType) -> Result<FieldRef> {
    arrow_field(LIST_ITEM, item).map(Arc::new)
}

/// The `__unlogged` column's type: a list of non-null column names.
pub fn unlogged_type() -> DataType {
    DataType::List(Arc::new(Field::new(LIST_ITEM, DataType::Utf8, false)))
}

/// The Arrow schema of a change part for `table`: metadata columns, then the table's.
///
/// Fails when a column type has no Arrow form, or when a source column is named like a
/// metadata column (the part could not tell them apart).
pub fn change_schema(table: &TableSchema) -> Result<SchemaRef> {
    let mut fields = Vec::with_capacity(METADATA_COLUMNS.len() + table.columns.len());
    fields.push(Field::new(OP, DataType::Utf8, false));
    fields.push(Field::new(POS, DataType::Utf8, false));
    fields.push(Field::new(SEQ, DataType::Int64, false));
    fields.push(Field::new(
        TS,
        DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        true,
    ));
    fields.push(Field::new(UNLOGGED, unlogged_type(), true));
    for column in &table.columns {
        if METADATA_COLUMNS.contains(&column.name.as_str()) {
            return Err(Error::new(
                Code::SourceUnsupportedType,
                format!(
                    "table {}: column {} has the name of a sluice metadata column",
                    table.name, column.name
                ),
            )
            .hint("rename the source column or exclude it from the job's column list; `__op`, `__pos`, `__seq`, `__ts` and `__unlogged` are reserved in change parts"));
        }
        let mut field =
            arrow_field(&column.name, &column.ty).map_err(|e| in_column(e, table, column))?;
        let metadata = field.metadata_mut();
        metadata.insert(SOURCE_TYPE_KEY.to_owned(), column.source_type.clone());
        metadata.extend(
            column
                .field_metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        fields.push(field);
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The sluice name of a column type, as the manifest and messages print it:
/// `int32`, `uint64`, `decimal(12,2)`, `timestamp_tz`, `list<utf8>`.
pub fn type_name(ty: &ColumnType) -> String {
    match ty {
        ColumnType::Boolean => "boolean".into(),
        ColumnType::Int8 => "int8".into(),
        ColumnType::Int16 => "int16".into(),
        ColumnType::Int32 => "int32".into(),
        ColumnType::Int64 => "int64".into(),
        ColumnType::UInt8 => "uint8".into(),
        ColumnType::UInt16 => "uint16".into(),
        ColumnType::UInt32 => "uint32".into(),
        ColumnType::UInt64 => "uint64".into(),
        ColumnType::Float32 => "float32".into(),
        ColumnType::Float64 => "float64".into(),
        ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        ColumnType::Utf8 => "utf8".into(),
        ColumnType::Json => "json".into(),
        ColumnType::Uuid => "uuid".into(),
        ColumnType::Binary => "binary".into(),
        ColumnType::Date => "date".into(),
        ColumnType::Time => "time".into(),
        ColumnType::Timestamp => "timestamp".into(),
        ColumnType::TimestampTz => "timestamp_tz".into(),
        ColumnType::List(item) => format!("list<{}>", type_name(item)),
    }
}

fn in_column(err: Error, table: &TableSchema, column: &crate::change::Column) -> Error {
    let message = format!(
        "table {}, column {} ({}): {}",
        table.name,
        column.name,
        column.source_type,
        err.message()
    );
    let hint = err.hint_text().map(str::to_owned);
    let mut out = Error::new(err.code(), message);
    if let Some(hint) = hint {
        out = out.hint(hint);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Column;

    fn column(name: &str, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: true,
            key: false,
            source_type: format!("src_{name}"),
            field_metadata: Default::default(),
        }
    }

    #[test]
    fn maps_every_type() {
        let cases = [
            (ColumnType::Boolean, DataType::Boolean),
            (ColumnType::Int8, DataType::Int8),
            (ColumnType::Int16, DataType::Int16),
            (ColumnType::Int32, DataType::Int32),
            (ColumnType::Int64, DataType::Int64),
            (ColumnType::UInt8, DataType::UInt8),
            (ColumnType::UInt16, DataType::UInt16),
            (ColumnType::UInt32, DataType::UInt32),
            (ColumnType::UInt64, DataType::UInt64),
            (ColumnType::Float32, DataType::Float32),
            (ColumnType::Float64, DataType::Float64),
            (
                ColumnType::Decimal {
                    precision: 38,
                    scale: 4,
                },
                DataType::Decimal128(38, 4),
            ),
            (
                ColumnType::Decimal {
                    precision: 39,
                    scale: 0,
                },
                DataType::Decimal256(39, 0),
            ),
            (
                ColumnType::Decimal {
                    precision: 76,
                    scale: 76,
                },
                DataType::Decimal256(76, 76),
            ),
            (ColumnType::Utf8, DataType::Utf8),
            (ColumnType::Json, DataType::Utf8),
            (ColumnType::Uuid, DataType::Utf8),
            (ColumnType::Binary, DataType::Binary),
            (ColumnType::Date, DataType::Date32),
            (ColumnType::Time, DataType::Time64(TimeUnit::Microsecond)),
            (
                ColumnType::Timestamp,
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            (
                ColumnType::TimestampTz,
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            ),
            (
                ColumnType::List(Box::new(ColumnType::Int32)),
                DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            ),
        ];
        for (ty, expected) in cases {
            assert_eq!(arrow_type(&ty).unwrap(), expected, "{ty:?}");
        }
    }

    #[test]
    fn refuses_decimals_without_arrow_form() {
        for (precision, scale) in [(0, 0), (77, 2), (10, -1), (5, 6)] {
            let err = arrow_type(&ColumnType::Decimal { precision, scale }).unwrap_err();
            assert_eq!(
                err.code(),
                Code::SourceUnsupportedType,
                "{precision},{scale}"
            );
        }
    }

    #[test]
    fn json_carries_the_extension_also_inside_lists() {
        let field = arrow_field("doc", &ColumnType::Json).unwrap();
        assert_eq!(field.extension_type_name(), Some("arrow.json"));
        field.try_extension_type::<Json>().unwrap();
        let list = arrow_field("docs", &ColumnType::List(Box::new(ColumnType::Json))).unwrap();
        let DataType::List(item) = list.data_type() else {
            panic!("not a list: {list:?}");
        };
        assert_eq!(item.extension_type_name(), Some("arrow.json"));
        assert_eq!(
            arrow_field("t", &ColumnType::Utf8)
                .unwrap()
                .extension_type_name(),
            None
        );
    }

    #[test]
    fn change_schema_leads_with_metadata_columns() {
        let table = TableSchema {
            name: "public.orders".into(),
            columns: vec![
                Column {
                    key: true,
                    nullable: false,
                    ..column("id", ColumnType::Int64)
                },
                Column {
                    field_metadata: [("sluice.form".to_owned(), "text".to_owned())].into(),
                    ..column("doc", ColumnType::Json)
                },
            ],
        };
        let schema = change_schema(&table).unwrap();
        let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            ["__op", "__pos", "__seq", "__ts", "__unlogged", "id", "doc"]
        );
        let nullable: Vec<_> = schema.fields().iter().map(|f| f.is_nullable()).collect();
        assert_eq!(nullable, [false, false, false, true, true, true, true]);
        assert_eq!(
            schema.field(3).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        assert_eq!(schema.field(4).data_type(), &unlogged_type());
        assert_eq!(
            schema
                .field(5)
                .metadata()
                .get(SOURCE_TYPE_KEY)
                .map(String::as_str),
            Some("src_id")
        );
        assert_eq!(schema.field(6).extension_type_name(), Some("arrow.json"));
        assert_eq!(
            schema
                .field(6)
                .metadata()
                .get(SOURCE_TYPE_KEY)
                .map(String::as_str),
            Some("src_doc")
        );
        // What the source declares besides the type name is carried too.
        assert_eq!(
            schema
                .field(6)
                .metadata()
                .get("sluice.form")
                .map(String::as_str),
            Some("text")
        );
    }

    #[test]
    fn change_schema_refuses_reserved_names_and_bad_types() {
        let table = TableSchema {
            name: "t".into(),
            columns: vec![column("__seq", ColumnType::Int64)],
        };
        let err = change_schema(&table).unwrap_err();
        assert_eq!(err.code(), Code::SourceUnsupportedType);
        assert!(err.message().contains("__seq"), "{err}");

        let table = TableSchema {
            name: "t".into(),
            columns: vec![column(
                "amount",
                ColumnType::Decimal {
                    precision: 90,
                    scale: 2,
                },
            )],
        };
        let err = change_schema(&table).unwrap_err();
        assert_eq!(err.code(), Code::SourceUnsupportedType);
        assert!(
            err.message().contains("column amount (src_amount)"),
            "{err}"
        );
        assert!(err.hint_text().is_some());
    }

    #[test]
    fn type_names_are_stable() {
        assert_eq!(type_name(&ColumnType::UInt16), "uint16");
        assert_eq!(type_name(&ColumnType::TimestampTz), "timestamp_tz");
        assert_eq!(
            type_name(&ColumnType::List(Box::new(ColumnType::Decimal {
                precision: 12,
                scale: 2
            }))),
            "list<decimal(12,2)>"
        );
    }
}
