//! The catalog columns of a table's parts: each Arrow field of the part schema
//! ([`crate::parts::change_schema`], metadata columns first) as a Hive / Athena type.
//!
//! Guarantees: every Arrow type a part can hold has exactly one declared Hive type, chosen
//! so that the Parquet column reads into it without loss where Athena has such a type:
//! integers keep their width (unsigned ones the next wider signed type, `uint64` as
//! `decimal(20,0)`), decimals their precision and scale, instants and local date-times
//! are `timestamp`, lists `array<…>`. Athena has no time of day and no decimal wider than
//! 38 digits: a `time` column is declared `bigint` (microseconds since midnight, Parquet's
//! own encoding) and a wider decimal `decimal(38,s)` — such a column's values of more than
//! 38 digits do not read in Athena (docs/aws.md, Glue catalog).

use arrow_schema::{DataType, Schema};

/// `(name, hive type)` of every field of `schema`, in order.
pub fn hive_columns(schema: &Schema) -> Vec<(String, String)> {
    schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), hive_type(f.data_type())))
        .collect()
}

/// The Hive / Athena type a Parquet column of `ty` is declared as.
pub fn hive_type(ty: &DataType) -> String {
    match ty {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 => "int".into(),
        DataType::Int64 | DataType::UInt32 => "bigint".into(),
        DataType::UInt64 => "decimal(20,0)".into(),
        DataType::Float16 | DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => {
            let p = (*p).min(38);
            let s = (*s).clamp(0, p as i8);
            format!("decimal({p},{s})")
        }
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Time32(_) | DataType::Time64(_) => "bigint".into(),
        DataType::Timestamp(_, _) => "timestamp".into(),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "binary".into(),
        DataType::List(item)
        | DataType::LargeList(item)
        | DataType::ListView(item)
        | DataType::FixedSizeList(item, _) => format!("array<{}>", hive_type(item.data_type())),
        // Utf8 (text, JSON, UUID) and anything a part does not hold.
        _ => "string".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Column, ColumnType, TableSchema};

    #[test]
    fn every_column_type_of_a_part_has_its_hive_type() {
        let columns = [
            ("b", ColumnType::Boolean, "boolean"),
            ("i8", ColumnType::Int8, "tinyint"),
            ("i16", ColumnType::Int16, "smallint"),
            ("i32", ColumnType::Int32, "int"),
            ("i64", ColumnType::Int64, "bigint"),
            ("u8", ColumnType::UInt8, "smallint"),
            ("u16", ColumnType::UInt16, "int"),
            ("u32", ColumnType::UInt32, "bigint"),
            ("u64", ColumnType::UInt64, "decimal(20,0)"),
            ("f32", ColumnType::Float32, "float"),
            ("f64", ColumnType::Float64, "double"),
            (
                "d",
                ColumnType::Decimal {
                    precision: 12,
                    scale: 2,
                },
                "decimal(12,2)",
            ),
            (
                "dw",
                ColumnType::Decimal {
                    precision: 50,
                    scale: 10,
                },
                "decimal(38,10)",
            ),
            ("s", ColumnType::Utf8, "string"),
            ("j", ColumnType::Json, "string"),
            ("u", ColumnType::Uuid, "string"),
            ("bin", ColumnType::Binary, "binary"),
            ("dt", ColumnType::Date, "date"),
            ("t", ColumnType::Time, "bigint"),
            ("ts", ColumnType::Timestamp, "timestamp"),
            ("tz", ColumnType::TimestampTz, "timestamp"),
            (
                "l",
                ColumnType::List(Box::new(ColumnType::Int32)),
                "array<int>",
            ),
        ];
        let table = TableSchema {
            name: "public.every".into(),
            columns: columns
                .iter()
                .map(|(name, ty, _)| Column {
                    name: (*name).into(),
                    ty: ty.clone(),
                    nullable: true,
                    key: *name == "i64",
                    source_type: String::new(),
                    field_metadata: Default::default(),
                })
                .collect(),
        };
        let schema = crate::parts::change_schema(&table).unwrap();
        let got = hive_columns(&schema);
        let mut want: Vec<(String, String)> = [
            ("__op", "string"),
            ("__pos", "string"),
            ("__seq", "bigint"),
            ("__ts", "timestamp"),
            ("__unlogged", "array<string>"),
        ]
        .iter()
        .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
        .collect();
        want.extend(
            columns
                .iter()
                .map(|(n, _, t)| ((*n).to_owned(), (*t).to_owned())),
        );
        assert_eq!(got, want);
    }
}
