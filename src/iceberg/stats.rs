//! Column metrics of a data file for its manifest entry, read from the part's own Parquet
//! footer: per top-level column its value count, null count and lower and upper bounds,
//! which readers (pyiceberg, Spark, Trino/Athena, DuckDB) use to skip files.
//!
//! Guarantees: a metric is recorded only when it is exact for every row group of the
//! file — a column whose statistics a row group lacks gets no bounds (and no null count),
//! nested columns (lists) get none at all; bounds are recorded only for the types whose
//! Parquet statistics order and Iceberg's agree — `boolean`, `int`, `long`, `date`,
//! `time`, `timestamp`, `timestamptz` (microseconds), `string`, `binary` — and are encoded
//! in Iceberg's single-value form for the field's type *in the table* (an `int` column of
//! a table promoted to `long` gets 8-byte bounds). Floating point and decimal columns get
//! counts only. String and binary bounds are truncated to 16 characters / bytes as
//! Iceberg's default `truncate(16)` metrics mode does: the lower bound a prefix, the upper
//! bound the prefix with its last character incremented (none when that cannot be done),
//! so both still bound every value.

use parquet::basic::{ConvertedType, LogicalType, TimeUnit, Type as Physical};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::statistics::Statistics;

use crate::destination::Destination;
use crate::error::{Code, Error, Result};

/// How many characters (bytes for binary) of a string bound are kept.
pub const TRUNCATE: usize = 16;

/// A column value as its Parquet statistics hold it, by what Iceberg types it can bound.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stat {
    Bool(bool),
    /// A 32-bit signed integer (`int`, or promoted to `long`).
    Int(i32),
    /// A 64-bit signed integer (`long`).
    Long(i64),
    /// Days since the epoch (`date`).
    Date(i32),
    /// Microseconds (`time`, `timestamp`, `timestamptz`).
    Micros(i64),
    /// Bytes compared unsigned (`string`, `binary`).
    Bytes(Vec<u8>),
}

/// What one file's footer says of one top-level column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMetrics {
    pub name: String,
    pub values: i64,
    pub nulls: Option<i64>,
    /// The smallest and largest non-null value, when every row group records them exactly.
    pub range: Option<(Stat, Stat)>,
}

/// The metrics of the Parquet file at `key` of `destination`, `size` bytes long (reads its
/// footer: one ranged read, two for a footer over 64 KiB).
pub async fn of_part(
    destination: &dyn Destination,
    key: &str,
    size: u64,
) -> Result<Vec<ColumnMetrics>> {
    Ok(metrics(&footer(destination, key, size).await?))
}

/// The Parquet footer of the file at `key` of `destination`, `size` bytes long (one ranged
/// read, two for a footer over 64 KiB).
pub async fn footer(
    destination: &dyn Destination,
    key: &str,
    size: u64,
) -> Result<ParquetMetaData> {
    let unreadable = |what: String| {
        Error::new(Code::IcebergMetadata, format!("part {key}: {what}"))
            .hint("the part is not the Parquet file its run manifest lists: restore it, then run again; nothing was checkpointed")
    };
    const TAIL: u64 = 64 * 1024;
    let start = size.saturating_sub(TAIL);
    let tail = destination
        .get_range(key, start, size - start)
        .await?
        .ok_or_else(|| unreadable("it does not exist".into()))?;
    if tail.len() < 8 || tail[tail.len() - 4..] != *b"PAR1" {
        return Err(unreadable("no Parquet footer at its end".into()));
    }
    let n = tail.len();
    let footer = u64::from(u32::from_le_bytes(tail[n - 8..n - 4].try_into().unwrap()));
    let footer_start = size
        .checked_sub(8 + footer)
        .ok_or_else(|| unreadable("a footer longer than the file".into()))?;
    let bytes = if footer_start >= start {
        tail[(footer_start - start) as usize..n - 8].to_vec()
    } else {
        destination
            .get_range(key, footer_start, footer)
            .await?
            .ok_or_else(|| unreadable("it does not exist".into()))?
    };
    ParquetMetaDataReader::decode_metadata(&bytes)
        .map_err(|e| unreadable(format!("its footer does not decode: {e}")))
}

/// The metrics of every top-level primitive column of `metadata`.
pub fn metrics(metadata: &ParquetMetaData) -> Vec<ColumnMetrics> {
    let Some(first) = metadata.row_groups().first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, chunk) in first.columns().iter().enumerate() {
        let path = chunk.column_path().parts();
        if path.len() != 1 {
            continue;
        }
        let descr = chunk.column_descr();
        let mut values = 0i64;
        let mut nulls = Some(0i64);
        let mut range: Option<(Stat, Stat)> = None;
        let mut exact = true;
        for group in metadata.row_groups() {
            let Some(c) = group.columns().get(i) else {
                return Vec::new();
            };
            values += c.num_values();
            let stats = c.statistics();
            nulls = match (nulls, stats.and_then(Statistics::null_count_opt)) {
                (Some(sum), Some(n)) => Some(sum + n as i64),
                _ => None,
            };
            match stats {
                None => exact = false,
                // A row group of nulls only has no bounds and narrows nothing.
                Some(s) if s.null_count_opt() == Some(c.num_values() as u64) => {}
                Some(s) => match bounds(
                    s,
                    descr.physical_type(),
                    descr.logical_type_ref(),
                    descr.converted_type(),
                ) {
                    Some((l, h)) => {
                        range = Some(match range {
                            None => (l, h),
                            Some((lo, hi)) => (lo.min(l), hi.max(h)),
                        })
                    }
                    None => exact = false,
                },
            }
        }
        out.push(ColumnMetrics {
            name: path[0].clone(),
            values,
            nulls,
            range: range.filter(|_| exact),
        });
    }
    out
}

/// A row group's exact bounds of a column, typed; `None` when they are missing, inexact
/// or of a type whose order Iceberg's does not share.
fn bounds(
    s: &Statistics,
    physical: Physical,
    logical: Option<&LogicalType>,
    converted: ConvertedType,
) -> Option<(Stat, Stat)> {
    if !s.min_is_exact() || !s.max_is_exact() {
        return None;
    }
    let (lo, hi) = (s.min_bytes_opt()?, s.max_bytes_opt()?);
    let i32_of = |b: &[u8]| b.try_into().ok().map(i32::from_le_bytes);
    let i64_of = |b: &[u8]| b.try_into().ok().map(i64::from_le_bytes);
    let micros = matches!(
        logical,
        Some(LogicalType::Timestamp(t) | LogicalType::Time(t)) if t.unit == TimeUnit::MICROS
    );
    match physical {
        Physical::BOOLEAN => Some((Stat::Bool(*lo.first()? != 0), Stat::Bool(*hi.first()? != 0))),
        Physical::INT32 => match (logical, converted) {
            (Some(LogicalType::Date), _) | (None, ConvertedType::DATE) => {
                Some((Stat::Date(i32_of(lo)?), Stat::Date(i32_of(hi)?)))
            }
            // Unsigned 32-bit values above i32::MAX are stored negative: not an `int`.
            (Some(LogicalType::Integer(int)), _) if !int.is_signed && int.bit_width == 32 => None,
            (
                Some(LogicalType::Integer(_)) | None,
                ConvertedType::NONE
                | ConvertedType::INT_8
                | ConvertedType::INT_16
                | ConvertedType::INT_32
                | ConvertedType::UINT_8
                | ConvertedType::UINT_16,
            ) => Some((Stat::Int(i32_of(lo)?), Stat::Int(i32_of(hi)?))),
            _ => None,
        },
        Physical::INT64 if micros => Some((Stat::Micros(i64_of(lo)?), Stat::Micros(i64_of(hi)?))),
        Physical::INT64 => match (logical, converted) {
            (Some(LogicalType::Integer(int)), _) if !int.is_signed => None,
            (Some(LogicalType::Integer(_)) | None, ConvertedType::NONE | ConvertedType::INT_64) => {
                Some((Stat::Long(i64_of(lo)?), Stat::Long(i64_of(hi)?)))
            }
            _ => None,
        },
        Physical::BYTE_ARRAY => match logical {
            None | Some(LogicalType::String | LogicalType::Json | LogicalType::Enum) => {
                Some((Stat::Bytes(lo.to_vec()), Stat::Bytes(hi.to_vec())))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `range`'s lower and upper bound in Iceberg's single-value form for a field of Iceberg
/// type `ty` (the table's); `None` when the column's values cannot bound that type.
pub fn encode(range: &(Stat, Stat), ty: &serde_json::Value) -> Option<(Vec<u8>, Vec<u8>)> {
    let ty = ty.as_str()?;
    let (lo, hi) = range;
    match (ty, lo, hi) {
        ("boolean", Stat::Bool(l), Stat::Bool(h)) => Some((vec![u8::from(*l)], vec![u8::from(*h)])),
        ("int", Stat::Int(l), Stat::Int(h)) | ("date", Stat::Date(l), Stat::Date(h)) => {
            Some((l.to_le_bytes().to_vec(), h.to_le_bytes().to_vec()))
        }
        ("long", Stat::Int(l), Stat::Int(h)) => Some((
            i64::from(*l).to_le_bytes().to_vec(),
            i64::from(*h).to_le_bytes().to_vec(),
        )),
        ("long", Stat::Long(l), Stat::Long(h))
        | ("time" | "timestamp" | "timestamptz", Stat::Micros(l), Stat::Micros(h)) => {
            Some((l.to_le_bytes().to_vec(), h.to_le_bytes().to_vec()))
        }
        ("string", Stat::Bytes(l), Stat::Bytes(h)) => {
            let l = std::str::from_utf8(l).ok()?;
            let h = std::str::from_utf8(h).ok()?;
            Some((
                truncate_str(l).as_bytes().to_vec(),
                upper_str(h)?.into_bytes(),
            ))
        }
        ("binary", Stat::Bytes(l), Stat::Bytes(h)) => {
            Some((l[..l.len().min(TRUNCATE)].to_vec(), upper_bytes(h)?))
        }
        _ => None,
    }
}

/// The first [`TRUNCATE`] characters of `s`: a lower bound of `s`.
fn truncate_str(s: &str) -> &str {
    match s.char_indices().nth(TRUNCATE) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// An upper bound of `s` of at most [`TRUNCATE`] characters: `s` itself when short
/// enough, else its prefix with the last character that can be incremented incremented
/// (the characters after it dropped); `None` when none can.
fn upper_str(s: &str) -> Option<String> {
    let prefix = truncate_str(s);
    if prefix.len() == s.len() {
        return Some(s.to_owned());
    }
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        if (0xD800..=0xDFFF).contains(&next) {
            next = 0xE000;
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// An upper bound of `b` of at most [`TRUNCATE`] bytes, as [`upper_str`] for bytes.
fn upper_bytes(b: &[u8]) -> Option<Vec<u8>> {
    if b.len() <= TRUNCATE {
        return Some(b.to_vec());
    }
    let mut out = b[..TRUNCATE].to_vec();
    while let Some(last) = out.pop() {
        if last < u8::MAX {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounds_take_the_tables_type() {
        let ints = (Stat::Int(-3), Stat::Int(7));
        let (lo, hi) = encode(&ints, &json!("int")).unwrap();
        assert_eq!(
            (lo, hi),
            ((-3i32).to_le_bytes().to_vec(), 7i32.to_le_bytes().to_vec())
        );
        let (lo, hi) = encode(&ints, &json!("long")).unwrap();
        assert_eq!(
            (lo, hi),
            ((-3i64).to_le_bytes().to_vec(), 7i64.to_le_bytes().to_vec())
        );
        assert!(encode(&ints, &json!("string")).is_none());
        assert!(encode(&(Stat::Long(1), Stat::Long(2)), &json!("int")).is_none());
        let ts = (Stat::Micros(1), Stat::Micros(2));
        assert!(encode(&ts, &json!("timestamptz")).is_some());
        assert!(encode(&ts, &json!("date")).is_none());
        assert!(encode(&ints, &json!({"type": "list"})).is_none());
    }

    #[test]
    fn long_strings_are_truncated_and_still_bound_them() {
        let long = "abcdefghijklmnopqrstuvwxyz";
        let range = (Stat::Bytes(long.into()), Stat::Bytes(long.into()));
        let (lo, hi) = encode(&range, &json!("string")).unwrap();
        assert_eq!(lo, b"abcdefghijklmnop");
        assert_eq!(hi, b"abcdefghijklmnoq");
        assert!(lo.as_slice() <= long.as_bytes() && long.as_bytes() <= hi.as_slice());
        // Multi-byte characters are counted as characters, and the last one that can be
        // incremented is.
        let wide = "ééééééééééééééééé";
        assert_eq!(upper_str(wide).unwrap(), "éééééééééééééééê");
        assert_eq!(truncate_str(wide).chars().count(), 16);
        let max = format!("{}x", char::MAX.to_string().repeat(16));
        assert_eq!(upper_str(&max), None);
        assert_eq!(upper_bytes(&[0xFF; 20]), None);
        let mut seven = vec![7u8];
        seven.extend([0xFF; 19]);
        assert_eq!(upper_bytes(&seven).unwrap(), [8]);
        // Short values are kept whole.
        assert_eq!(upper_str("abc").unwrap(), "abc");
    }

    #[test]
    fn metrics_of_a_written_file_span_its_row_groups() {
        use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray};
        use std::sync::Arc;
        let batch = |ids: Vec<Option<i32>>, names: Vec<Option<&str>>| {
            RecordBatch::try_from_iter([
                ("id", Arc::new(Int32Array::from(ids)) as ArrayRef),
                ("name", Arc::new(StringArray::from(names)) as ArrayRef),
            ])
            .unwrap()
        };
        let first = batch(
            vec![Some(5), None, Some(9)],
            vec![Some("m"), Some("b"), None],
        );
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, first.schema(), None).unwrap();
        w.write(&first).unwrap();
        w.flush().unwrap();
        w.write(&batch(vec![Some(-2), Some(3)], vec![Some("z"), Some("c")]))
            .unwrap();
        w.write(&batch(vec![None], vec![None])).unwrap();
        w.flush().unwrap();
        w.close().unwrap();
        let n = out.len();
        let footer = u32::from_le_bytes(out[n - 8..n - 4].try_into().unwrap()) as usize;
        let metadata = ParquetMetaDataReader::decode_metadata(&out[n - 8 - footer..n - 8]).unwrap();
        assert_eq!(metadata.row_groups().len(), 2);
        let m = metrics(&metadata);
        assert_eq!(
            m,
            vec![
                ColumnMetrics {
                    name: "id".into(),
                    values: 6,
                    nulls: Some(2),
                    range: Some((Stat::Int(-2), Stat::Int(9))),
                },
                ColumnMetrics {
                    name: "name".into(),
                    values: 6,
                    nulls: Some(2),
                    range: Some((Stat::Bytes(b"b".to_vec()), Stat::Bytes(b"z".to_vec()))),
                },
            ]
        );
    }
}
