//! The Iceberg schema of a captured table, from the Arrow schema of its parts.
//!
//! Guarantees: every Arrow type sluice writes maps to one Iceberg type, or the column is
//! refused with `SLUICE_ICEBERG_TYPE` naming table and column (`uint64`, decimals wider
//! than 38 digits or with a negative scale); field ids are stable — a column keeps the id
//! it got when it first appeared (matched by name), a new column gets the next unused id,
//! and a column the parts no longer carry stays in the schema (older parts hold it);
//! a column retyped to a wider type is promoted in place (`int` → `long`, `float` →
//! `double`, a decimal's precision), a narrower type reads as the wider one, and any
//! other retyping is refused with `SLUICE_ICEBERG_SCHEMA`. Every field is optional:
//! sources drop and re-add columns, and a dropped column reads as null in later parts.
//! Parts carry no Parquet field ids, so readers match columns by the table's name mapping
//! ([`name_mapping`], property `schema.name-mapping.default`).

use arrow_schema::{DataType, Schema as ArrowSchema, TimeUnit};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::error::{Code, Error, Result};

/// One top-level field of an Iceberg schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub id: i32,
    pub name: String,
    pub required: bool,
    /// A primitive type name (`long`, `decimal(12,2)`) or a nested type object.
    #[serde(rename = "type")]
    pub ty: Json,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Json>,
}

/// The Iceberg fields for the parts' `arrow` schema, evolved from `current` (the table's
/// current fields, none for a new table): returns the fields and the highest id in use,
/// given the table's `last_column_id` so far.
pub fn evolve(
    table: &str,
    current: &[Field],
    last_column_id: i32,
    arrow: &ArrowSchema,
) -> Result<(Vec<Field>, i32)> {
    let mut fields = current.to_vec();
    let mut next = last_column_id;
    for f in arrow.fields() {
        let existing = fields.iter().position(|e| &e.name == f.name());
        let old_ty = existing.map(|i| fields[i].ty.clone());
        let ty = iceberg_type(f.data_type(), old_ty.as_ref(), &mut next)
            .map_err(|e| in_column(e, table, f.name()))?;
        match existing {
            None => {
                next += 1;
                fields.push(Field {
                    id: next,
                    name: f.name().clone(),
                    required: false,
                    ty,
                    extra: Default::default(),
                });
            }
            Some(i) => {
                let old = &fields[i].ty;
                if *old == ty || promotes(&ty, old) {
                    continue;
                }
                if promotes(old, &ty) {
                    fields[i].ty = ty;
                    continue;
                }
                return Err(Error::new(
                    Code::IcebergSchema,
                    format!(
                        "table {table}: column {} is {old} in the Iceberg table and {ty} in the new parts; Iceberg cannot promote one to the other",
                        f.name()
                    ),
                )
                .hint("Iceberg promotes only int → long, float → double and a decimal to a wider precision: re-baseline the table (`sluice baseline --table …`) into a new Iceberg table (another `iceberg.table_prefix`), or drop the Iceberg table first"));
            }
        }
    }
    Ok((fields, next))
}

/// True when Iceberg may promote a column of type `from` to `to`.
fn promotes(from: &Json, to: &Json) -> bool {
    match (from.as_str(), to.as_str()) {
        (Some("int"), Some("long")) | (Some("float"), Some("double")) => true,
        (Some(a), Some(b)) => match (decimal(a), decimal(b)) {
            (Some((p1, s1)), Some((p2, s2))) => s1 == s2 && p2 > p1,
            _ => false,
        },
        _ => false,
    }
}

fn decimal(ty: &str) -> Option<(u32, u32)> {
    let inner = ty.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// The Iceberg type of an Arrow type; a list reuses `existing`'s element id when the
/// column already is a list, else takes the next id from `next`.
fn iceberg_type(dt: &DataType, existing: Option<&Json>, next: &mut i32) -> Result<Json> {
    let primitive = |name: &str| Ok(Json::String(name.to_owned()));
    match dt {
        DataType::Boolean => primitive("boolean"),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            primitive("int")
        }
        DataType::Int64 | DataType::UInt32 => primitive("long"),
        DataType::Float32 => primitive("float"),
        DataType::Float64 => primitive("double"),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) if *p <= 38 && *s >= 0 => {
            primitive(&format!("decimal({p},{s})"))
        }
        DataType::Utf8 | DataType::LargeUtf8 => primitive("string"),
        DataType::Binary | DataType::LargeBinary => primitive("binary"),
        DataType::Date32 => primitive("date"),
        DataType::Time64(TimeUnit::Microsecond) => primitive("time"),
        DataType::Timestamp(TimeUnit::Microsecond, None) => primitive("timestamp"),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => primitive("timestamptz"),
        DataType::List(item) => {
            let old_element = existing.filter(|e| e.get("type") == Some(&json!("list")));
            let element_ty = iceberg_type(
                item.data_type(),
                old_element.and_then(|e| e.get("element")),
                next,
            )?;
            let id = match old_element.and_then(|e| e.get("element-id")?.as_i64()) {
                Some(id) => id,
                None => {
                    *next += 1;
                    i64::from(*next)
                }
            };
            Ok(json!({
                "type": "list",
                "element-id": id,
                "element": element_ty,
                "element-required": !item.is_nullable(),
            }))
        }
        other => Err(Error::new(
            Code::IcebergType,
            format!("{other} has no Iceberg type"),
        )),
    }
}

fn in_column(e: Error, table: &str, column: &str) -> Error {
    if e.code() != Code::IcebergType {
        return e;
    }
    Error::new(
        Code::IcebergType,
        format!("table {table}: column {column}: {}", e.message()),
    )
    .hint(format!("Iceberg has no unsigned 64-bit integer and no decimal wider than 38 digits: leave {column} out of the job's columns, or use `table_format: parquet` for this job"))
}

/// The table property `schema.name-mapping.default`: every field's id by its Parquet
/// column name (list elements by `element`, and `item` as Arrow names them).
pub fn name_mapping(fields: &[Field]) -> String {
    fn entry(id: i64, name: &str, ty: &Json) -> Json {
        let names: Vec<&str> = if name.is_empty() {
            vec!["element", "item"]
        } else {
            vec![name]
        };
        let mut e = json!({ "field-id": id, "names": names });
        if ty.get("type") == Some(&json!("list"))
            && let Some(eid) = ty.get("element-id").and_then(Json::as_i64)
        {
            let element = entry(eid, "", ty.get("element").unwrap_or(&Json::Null));
            e["fields"] = json!([element]);
        }
        e
    }
    let all: Vec<Json> = fields
        .iter()
        .map(|f| entry(i64::from(f.id), &f.name, &f.ty))
        .collect();
    Json::Array(all).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field as ArrowField;
    use std::sync::Arc;

    fn arrow(fields: Vec<ArrowField>) -> ArrowSchema {
        ArrowSchema::new(fields)
    }

    #[test]
    fn maps_types_and_assigns_ids_in_order() {
        let schema = arrow(vec![
            ArrowField::new("__pos", DataType::Utf8, false),
            ArrowField::new(
                "__unlogged",
                DataType::List(Arc::new(ArrowField::new("item", DataType::Utf8, false))),
                true,
            ),
            ArrowField::new("id", DataType::Int32, false),
            ArrowField::new("amount", DataType::Decimal128(12, 2), true),
            ArrowField::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ]);
        let (fields, last) = evolve("t", &[], 0, &schema).unwrap();
        let ids: Vec<_> = fields.iter().map(|f| (f.id, f.name.as_str())).collect();
        assert_eq!(
            ids,
            [
                (1, "__pos"),
                (3, "__unlogged"),
                (4, "id"),
                (5, "amount"),
                (6, "at")
            ]
        );
        assert_eq!(last, 6);
        assert_eq!(fields[1].ty["element-id"], 2);
        assert_eq!(fields[3].ty, json!("decimal(12,2)"));
        assert_eq!(fields[4].ty, json!("timestamptz"));
        let mapping: Json = serde_json::from_str(&name_mapping(&fields)).unwrap();
        assert_eq!(mapping[1]["fields"][0]["field-id"], 2);
        assert_eq!(mapping[2], json!({"field-id": 4, "names": ["id"]}));
    }

    #[test]
    fn keeps_ids_promotes_and_adds_columns() {
        let v1 = arrow(vec![
            ArrowField::new("id", DataType::Int32, false),
            ArrowField::new("gone", DataType::Utf8, true),
        ]);
        let (fields, last) = evolve("t", &[], 0, &v1).unwrap();
        let v2 = arrow(vec![
            ArrowField::new("id", DataType::Int64, false),
            ArrowField::new("new", DataType::Float32, true),
        ]);
        let (fields, last) = evolve("t", &fields, last, &v2).unwrap();
        let got: Vec<_> = fields
            .iter()
            .map(|f| (f.id, f.name.as_str(), f.ty.as_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "id", "long"),
                (2, "gone", "string"),
                (3, "new", "float")
            ]
        );
        assert_eq!(last, 3);
        // A narrower type reads as the wider one: nothing changes.
        let v3 = arrow(vec![ArrowField::new("id", DataType::Int16, false)]);
        let (same, _) = evolve("t", &fields, last, &v3).unwrap();
        assert_eq!(same, fields);
        let v4 = arrow(vec![ArrowField::new("id", DataType::Utf8, false)]);
        let e = evolve("t", &fields, last, &v4).unwrap_err();
        assert_eq!(e.code(), Code::IcebergSchema);
        assert!(e.message().contains("column id"), "{e}");
    }

    #[test]
    fn refuses_types_iceberg_lacks_naming_the_column() {
        for dt in [DataType::UInt64, DataType::Decimal256(60, 2)] {
            let schema = arrow(vec![ArrowField::new("big", dt, true)]);
            let e = evolve("public.t", &[], 0, &schema).unwrap_err();
            assert_eq!(e.code(), Code::IcebergType);
            assert!(e.message().contains("public.t: column big"), "{e}");
            assert!(e.hint_text().is_some());
        }
    }
}
