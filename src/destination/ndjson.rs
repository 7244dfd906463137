//! The NDJSON form of change rows (docs/output.md, NDJSON): one JSON object per change,
//! `{"op","pos","seq","ts","table","unlogged","row":{…}}`, from a change part's Arrow
//! batch.
//!
//! Guarantees: every line is one complete JSON object ending in `\n` (no raw newline
//! inside — JSON text a column carries is re-emitted without its whitespace); every value
//! is exact: integers outside ±(2^53 − 1) and every decimal are strings, floats are
//! numbers in their shortest round-tripping form (`NaN`, `Infinity`, `-Infinity` as
//! strings), binary is standard base64 with padding, instants are RFC 3339 in UTC with
//! the column's microseconds (`…T…​.ffffffZ`), naive timestamps the same without the
//! `Z`, times `HH:MM:SS.ffffff`, dates `YYYY-MM-DD` (PostgreSQL's `±infinity` dates and
//! timestamps `"infinity"` / `"-infinity"`), lists arrays, JSON columns embedded JSON. A cell that cannot be written exactly fails with `SLUICE_VALUE_UNREPRESENTABLE`
//! naming table, column and position, never a `null`.

use std::io::Write;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, Time64MicrosecondType, TimestampMicrosecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, TimeUnit};

use crate::error::{Code, Error, Result};
use crate::parts::arrow_schema::{METADATA_COLUMNS, OP, POS, SEQ, TS, UNLOGGED};

/// Largest magnitude written as a JSON number: 2^53 − 1 (every reader's doubles hold it).
pub const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// The canonical extension name of JSON columns.
const JSON_EXTENSION: &str = "arrow.json";

/// Appends one line per row of `batch` (a change part's batch: metadata columns, then the
/// table's) for `table` to `out`.
pub fn write_batch(table: &str, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
    let schema = batch.schema();
    let column = |name: &str| {
        schema.index_of(name).map_err(|_| {
            Error::new(
                Code::Internal,
                format!("a change batch of {table} has no {name} column"),
            )
        })
    };
    let (op, pos, seq, ts, unlogged) = (
        column(OP)?,
        column(POS)?,
        column(SEQ)?,
        column(TS)?,
        column(UNLOGGED)?,
    );
    let data: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| !METADATA_COLUMNS.contains(&schema.field(i).name().as_str()))
        .collect();
    let table_json = serde_json::to_string(table).unwrap_or_default();
    let pos_array = batch.column(pos).as_string::<i32>();
    for row in 0..batch.num_rows() {
        let at = Cell {
            table,
            column: "",
            pos: pos_array.value(row),
        };
        out.extend_from_slice(b"{\"op\":");
        value(out, batch.column(op), schema.field(op), row, &at)?;
        out.extend_from_slice(b",\"pos\":");
        value(out, batch.column(pos), schema.field(pos), row, &at)?;
        out.extend_from_slice(b",\"seq\":");
        value(out, batch.column(seq), schema.field(seq), row, &at)?;
        out.extend_from_slice(b",\"ts\":");
        value(out, batch.column(ts), schema.field(ts), row, &at)?;
        out.extend_from_slice(b",\"table\":");
        out.extend_from_slice(table_json.as_bytes());
        out.extend_from_slice(b",\"unlogged\":");
        value(
            out,
            batch.column(unlogged),
            schema.field(unlogged),
            row,
            &at,
        )?;
        out.extend_from_slice(b",\"row\":{");
        for (n, &i) in data.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            let field = schema.field(i);
            string(out, field.name());
            out.push(b':');
            let at = Cell {
                column: field.name(),
                ..at
            };
            value(out, batch.column(i), field, row, &at)?;
        }
        out.extend_from_slice(b"}}\n");
    }
    Ok(())
}

/// Where a cell is, for errors.
#[derive(Clone, Copy)]
struct Cell<'a> {
    table: &'a str,
    column: &'a str,
    pos: &'a str,
}

impl Cell<'_> {
    fn unrepresentable(&self, why: impl std::fmt::Display) -> Error {
        Error::new(
            Code::ValueUnrepresentable,
            format!(
                "table {}, column {}, at {}: {why}",
                self.table, self.column, self.pos
            ),
        )
        .hint("nothing past the last checkpoint was emitted as done; write this table to a local or S3 destination (Parquet) instead, and report the value")
    }
}

/// Writes the cell `row` of `array` (typed by `field`) as JSON.
fn value(out: &mut Vec<u8>, array: &dyn Array, field: &Field, row: usize, at: &Cell) -> Result<()> {
    if array.is_null(row) {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    match array.data_type() {
        DataType::Boolean => {
            let v = array.as_boolean().value(row);
            out.extend_from_slice(if v { b"true" } else { b"false" });
        }
        DataType::Int8 => number(out, array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => number(out, array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => number(out, array.as_primitive::<Int32Type>().value(row)),
        DataType::UInt8 => number(out, array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => number(out, array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => number(out, array.as_primitive::<UInt32Type>().value(row)),
        DataType::Int64 => {
            let v = array.as_primitive::<Int64Type>().value(row);
            if v.unsigned_abs() <= MAX_EXACT_INTEGER {
                number(out, v);
            } else {
                string(out, &v.to_string());
            }
        }
        DataType::UInt64 => {
            let v = array.as_primitive::<UInt64Type>().value(row);
            if v <= MAX_EXACT_INTEGER {
                number(out, v);
            } else {
                string(out, &v.to_string());
            }
        }
        DataType::Float32 => float(out, array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => float(out, array.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(..) => string(
            out,
            &array.as_primitive::<Decimal128Type>().value_as_string(row),
        ),
        DataType::Decimal256(..) => string(
            out,
            &array.as_primitive::<Decimal256Type>().value_as_string(row),
        ),
        DataType::Utf8 => {
            let text = array.as_string::<i32>().value(row);
            if is_json(field) {
                embedded_json(out, text).map_err(|why| at.unrepresentable(why))?;
            } else {
                string(out, text);
            }
        }
        DataType::Binary => base64(out, array.as_binary::<i32>().value(row)),
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>().value(row);
            if let Some(text) = infinity(days == i32::MAX, days == -i32::MAX) {
                string(out, text);
                return Ok(());
            }
            let date = chrono::NaiveDate::from_num_days_from_ce_opt(days.saturating_add(719_163))
                .ok_or_else(|| {
                at.unrepresentable(format!("day {days} is not a calendar date"))
            })?;
            string(out, &date.format("%Y-%m-%d").to_string());
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let micros = array.as_primitive::<Time64MicrosecondType>().value(row);
            let time = u32::try_from(micros.div_euclid(1_000_000))
                .ok()
                .and_then(|secs| {
                    let nanos = (micros.rem_euclid(1_000_000) * 1_000) as u32;
                    chrono::NaiveTime::from_num_seconds_from_midnight_opt(secs, nanos)
                })
                .ok_or_else(|| at.unrepresentable(format!("{micros} µs is not a time of day")))?;
            string(out, &time.format("%H:%M:%S%.6f").to_string());
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let micros = array.as_primitive::<TimestampMicrosecondType>().value(row);
            if let Some(text) = infinity(micros == i64::MAX, micros == -i64::MAX) {
                string(out, text);
                return Ok(());
            }
            let instant = chrono::DateTime::from_timestamp_micros(micros).ok_or_else(|| {
                at.unrepresentable(format!("{micros} µs is outside the calendar"))
            })?;
            let text = if tz.is_some() {
                instant.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
            } else {
                instant
                    .naive_utc()
                    .format("%Y-%m-%dT%H:%M:%S%.6f")
                    .to_string()
            };
            string(out, &text);
        }
        DataType::List(item) => {
            let list = array.as_list::<i32>();
            let values = list.value(row);
            out.push(b'[');
            for i in 0..values.len() {
                if i > 0 {
                    out.push(b',');
                }
                value(out, values.as_ref(), item, i, at)?;
            }
            out.push(b']');
        }
        other => {
            return Err(at.unrepresentable(format!("the Arrow type {other} has no NDJSON form")));
        }
    }
    Ok(())
}

/// PostgreSQL's `±infinity` dates and timestamps, which parts hold as the physical type's
/// extremes (`sluice.infinity`): `"infinity"` / `"-infinity"`.
fn infinity(positive: bool, negative: bool) -> Option<&'static str> {
    match (positive, negative) {
        (true, _) => Some("infinity"),
        (_, true) => Some("-infinity"),
        _ => None,
    }
}

fn is_json(field: &Field) -> bool {
    field.extension_type_name() == Some(JSON_EXTENSION)
}

fn number(out: &mut Vec<u8>, n: impl std::fmt::Display) {
    let _ = write!(out, "{n}");
}

/// A float as its shortest round-tripping JSON number; NaN and the infinities as strings.
fn float<F: Into<f64> + serde::Serialize + Copy>(out: &mut Vec<u8>, f: F) {
    let wide: f64 = f.into();
    if wide.is_nan() {
        string(out, "NaN");
    } else if wide.is_infinite() {
        string(out, if wide > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let _ = serde_json::to_writer(&mut *out, &f);
    }
}

fn string(out: &mut Vec<u8>, text: &str) {
    let _ = serde_json::to_writer(&mut *out, text);
}

/// Standard base64 (RFC 4648 §4) with padding.
fn base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.push(b'"');
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]
            } else {
                b'='
            });
        }
    }
    out.push(b'"');
}

/// Embeds JSON text as JSON: checked to be one JSON value, then written without the
/// whitespace between its tokens (numbers, key order and duplicate keys kept as written).
fn embedded_json(out: &mut Vec<u8>, text: &str) -> std::result::Result<(), String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| format!("the JSON column holds text that is not JSON ({e})"))?;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
            out.push(b);
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
