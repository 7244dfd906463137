//! Baseline keys of a SQL Server table, as pure functions: which columns order the
//! keyset chunks, and how one key value travels — a decoded cell, the exact bound text a
//! chunk plan stores, the typed parameter a chunk statement compares with.
//!
//! Guarantees:
//! * The key is the capture instance's unique index (normally the primary key) in index
//!   order, so chunk statements follow that index. A nullable key column, or a type with
//!   no exact bound (LOBs, `(max)` types, anything not listed in [`KeyKind`]), is refused
//!   with `SLUICE_SOURCE_PREREQUISITE` before any row is read.
//! * Bound text is exact: [`KeyColumn::parse`] of [`KeyColumn::format`] gives back the
//!   value, for every value the column can hold; text that is not the canonical text of
//!   such a value is refused (only a stored chunk plan supplies bound text, so the caller
//!   reports it as `SLUICE_STATE_CORRUPT`).
//! * A parameter holds the same value in a type that converts to the column's type
//!   without rounding — integers, floats, dates and times, binary and GUIDs natively,
//!   `datetime` / `smalldatetime` in their own tick units, decimals and money as their
//!   exact text — and the statement `CAST`s it to the column's own type ([`KeyColumn::
//!   placeholder`]); `char` / `varchar` parameters are first given the column's collation,
//!   so the conversion uses the column's code page. Every comparison is then SQL Server's
//!   own on the column's type and collation: the order the chunk's `ORDER BY` uses.

use chrono::{Datelike, NaiveDate};
use tiberius::ColumnData;
use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};

use super::values::{
    CaptureColumn, DAY_US, DAYS_0001_TO_1970, DAYS_1900_TO_1970, convert, datetime_us,
};
use crate::change::{ColumnType, Value};
use crate::error::{Code, Error, Result};

/// How a key column's values are written as bound text and bound as parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// `bit`: `0` or `1`.
    Bit,
    /// `tinyint` … `bigint`: decimal digits within the type's range.
    Integer { min: i64, max: i64 },
    /// `real` (`single`) / `float`: the shortest exponent form that parses back to the
    /// same binary value (`1.5e0`, `-2.25e100`).
    Float { single: bool },
    /// `decimal`, `numeric`, `money`, `smallmoney`: fixed point with exactly `scale`
    /// decimals (`-12.50`).
    Decimal { precision: u8, scale: u8 },
    /// `date`: `YYYY-MM-DD`.
    Date,
    /// `time(scale)`: `HH:MM:SS` and exactly `scale` fraction digits — the text the
    /// column is written as ([`super::values::time_text`]).
    Time { scale: u8 },
    /// `datetime2`: `YYYY-MM-DD HH:MM:SS.ffffff`.
    DateTime2,
    /// `datetime`: the same text, always of a whole 1/300 s tick.
    DateTime,
    /// `smalldatetime`: the same text, always of a whole minute.
    SmallDateTime,
    /// `datetimeoffset`: the UTC instant, `YYYY-MM-DD HH:MM:SS.ffffff+00:00` (SQL Server
    /// compares `datetimeoffset` values by their instant).
    DateTimeOffset,
    /// `nchar` / `nvarchar`: the string itself.
    NationalText,
    /// `char` / `varchar`: the string itself, converted on the server through the
    /// column's `collation` (a validated collation name).
    Text { collation: String },
    /// `binary`, `varbinary`, `rowversion`: `0x` and upper-case hex.
    Binary,
    /// `uniqueidentifier`: the canonical lower-case hyphenated form.
    Guid,
}

/// One column of the baseline key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyColumn {
    /// Position in the table schema (and in a baseline row).
    pub index: usize,
    pub name: String,
    /// The output type the value decoder produces for the column.
    pub ty: ColumnType,
    pub kind: KeyKind,
    /// The column's own type: the target of the parameter's `CAST`.
    pub sql_type: String,
}

/// The key of a captured table in index order; refuses what cannot bound chunks exactly.
/// An empty result means the table has no key (the caller refuses that).
pub fn key_columns(config_name: &str, columns: &[CaptureColumn]) -> Result<Vec<KeyColumn>> {
    let mut ordered: Vec<(i32, usize)> = columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.key_ordinal.map(|ordinal| (ordinal, i)))
        .collect();
    ordered.sort_unstable();
    ordered
        .into_iter()
        .map(|(_, i)| key_column(config_name, i, &columns[i]))
        .collect()
}

/// The key a baseline of the captured table chunks by: its own ([`key_columns`]), or for
/// a table without one the columns `baseline.keys` declares (`declared`, resolved by the
/// rule every engine shares, [`crate::source::baseline_read::baseline_key`], then held to the
/// same exactness rules). A table with neither is refused
/// ([`crate::source::baseline_read::chunk_key`]).
pub fn baseline_key(
    config_name: &str,
    columns: &[CaptureColumn],
    shape: &[crate::change::Column],
    declared: &std::collections::BTreeMap<String, Vec<String>>,
) -> Result<Vec<KeyColumn>> {
    let own = key_columns(config_name, columns)?;
    let own_names: Vec<String> = own.iter().map(|k| k.name.clone()).collect();
    let names = crate::source::baseline_read::chunk_key(
        declared,
        config_name,
        &own_names,
        shape,
        KEY_NAMES,
    )?;
    if names == own_names {
        return Ok(own);
    }
    names
        .iter()
        .map(|name| {
            let i = columns
                .iter()
                .position(|c| c.name == *name)
                .ok_or_else(|| {
                    Error::new(Code::Internal, format!("{config_name}: no column {name}"))
                })?;
            key_column(config_name, i, &columns[i])
        })
        .collect()
}

/// What counts as a key on SQL Server, for refusals.
pub const KEY_NAMES: &str = "primary key (nor a unique index named by the capture instance)";

fn key_column(config_name: &str, index: usize, c: &CaptureColumn) -> Result<KeyColumn> {
    let refuse = |why: &str| {
        Error::new(
            Code::SourcePrerequisite,
            format!(
                "{config_name}.{} ({}) is part of the capture instance's key, which {why}",
                c.name,
                c.declaration()
            ),
        )
        .hint(
            "a keyset baseline needs a unique index of NOT NULL columns of exactly comparable types \
             (integers, bit, decimal/numeric/money, real/float, date and time types, char/varchar/nchar/nvarchar \
             and binary/varbinary up to 8000 bytes, uniqueidentifier); re-create the capture instance \
             with @index_name naming such an index, or use `initial: none`",
        )
    };
    if c.nullable {
        return Err(refuse(
            "is nullable: a keyset baseline has no place for a NULL key",
        ));
    }
    let ty = c
        .column_type()
        .map_err(|why| refuse(&format!("has no output type: {why}")))?;
    let bounded = c.max_length != -1;
    let kind = match c.type_name.as_str() {
        "bit" => KeyKind::Bit,
        "tinyint" => KeyKind::Integer { min: 0, max: 255 },
        "smallint" => KeyKind::Integer {
            min: i16::MIN.into(),
            max: i16::MAX.into(),
        },
        "int" => KeyKind::Integer {
            min: i32::MIN.into(),
            max: i32::MAX.into(),
        },
        "bigint" => KeyKind::Integer {
            min: i64::MIN,
            max: i64::MAX,
        },
        "real" => KeyKind::Float { single: true },
        "float" => KeyKind::Float { single: false },
        "decimal" | "numeric" | "money" | "smallmoney" => match ty {
            ColumnType::Decimal { precision, scale } => KeyKind::Decimal {
                precision,
                scale: u8::try_from(scale).map_err(|_| refuse("has a negative scale"))?,
            },
            _ => return Err(refuse("is not an exact decimal")),
        },
        "date" => KeyKind::Date,
        "time" => KeyKind::Time {
            scale: u8::try_from(c.scale)
                .ok()
                .filter(|s| *s <= 7)
                .ok_or_else(|| refuse("has a time scale outside 0-7"))?,
        },
        "datetime2" => KeyKind::DateTime2,
        "datetime" => KeyKind::DateTime,
        "smalldatetime" => KeyKind::SmallDateTime,
        "datetimeoffset" => KeyKind::DateTimeOffset,
        "nchar" | "nvarchar" if bounded => KeyKind::NationalText,
        "char" | "varchar" if bounded => match c.collation.as_deref() {
            Some(name) if is_collation_name(name) => KeyKind::Text {
                collation: name.to_owned(),
            },
            _ => {
                return Err(refuse(
                    "has no collation name sluice can use to convert bounds to its code page",
                ));
            }
        },
        "binary" | "varbinary" | "timestamp" | "rowversion" if bounded => KeyKind::Binary,
        "uniqueidentifier" => KeyKind::Guid,
        _ => return Err(refuse("has a type sluice cannot bound chunks by exactly")),
    };
    let sql_type = match c.type_name.as_str() {
        // `rowversion` is not a CAST target; its values are binary(8).
        "timestamp" | "rowversion" => "binary(8)".to_owned(),
        _ => c.declaration(),
    };
    Ok(KeyColumn {
        index,
        name: c.name.clone(),
        ty,
        kind,
        sql_type,
    })
}

/// A collation name as `sys.columns` spells it (letters, digits, `_`): safe to write
/// into a statement after `COLLATE`.
fn is_collation_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl KeyColumn {
    /// True for `tinyint` … `bigint`: the key a `MIN`/`MAX` range split applies to.
    pub fn is_integer(&self) -> bool {
        matches!(self.kind, KeyKind::Integer { .. })
    }

    /// The parameter `@P<n>` as the column's type, for comparing with the column.
    pub fn placeholder(&self, n: usize) -> String {
        match &self.kind {
            KeyKind::Text { collation } => {
                format!("CAST(@P{n} COLLATE {collation} AS {})", self.sql_type)
            }
            _ => format!("CAST(@P{n} AS {})", self.sql_type),
        }
    }

    /// The exact bound text of a key value.
    pub fn format(&self, value: &Value) -> Result<String, String> {
        let wrong = || Err(format!("{value:?} is not a {} value", self.sql_type));
        Ok(match (&self.kind, value) {
            (_, Value::Null) => return Err("a key value is NULL".into()),
            (KeyKind::Bit, Value::Boolean(b)) => if *b { "1" } else { "0" }.to_owned(),
            (KeyKind::Integer { .. }, Value::Int(v)) => v.to_string(),
            (KeyKind::Integer { .. }, Value::UInt(v)) => v.to_string(),
            (KeyKind::Float { .. }, Value::Float(v)) => format!("{v:e}"),
            (KeyKind::Decimal { scale, .. }, Value::Decimal(v)) => decimal_text(*v, *scale),
            (KeyKind::Date, Value::Date(days)) => date_text(i64::from(*days))?,
            (KeyKind::Time { scale }, Value::Text(t)) if is_time_text(t, *scale) => t.clone(),
            (
                KeyKind::DateTime2 | KeyKind::DateTime | KeyKind::SmallDateTime,
                Value::Timestamp(us),
            ) => timestamp_text(*us)?,
            (KeyKind::DateTimeOffset, Value::Timestamp(us)) => {
                format!("{}{UTC_SUFFIX}", timestamp_text(*us)?)
            }
            (KeyKind::NationalText | KeyKind::Text { .. }, Value::Text(s)) => s.clone(),
            (KeyKind::Binary, Value::Bytes(b)) => {
                let mut text = String::with_capacity(2 + 2 * b.len());
                text.push_str("0x");
                for byte in b {
                    text.push_str(&format!("{byte:02X}"));
                }
                text
            }
            (KeyKind::Guid, Value::Text(s)) => s.clone(),
            _ => return wrong(),
        })
    }

    /// The value of a bound text; refuses text that is not the canonical text of a value
    /// the column can hold.
    pub fn parse(&self, text: &str) -> Result<Value, String> {
        let bad = || {
            format!(
                "{text:?} is not the bound text of a {} value",
                self.sql_type
            )
        };
        let value = match &self.kind {
            KeyKind::Bit => match text {
                "0" => Value::Boolean(false),
                "1" => Value::Boolean(true),
                _ => return Err(bad()),
            },
            KeyKind::Integer { min, max } => {
                let v: i64 = text.parse().map_err(|_| bad())?;
                if v < *min || v > *max {
                    return Err(bad());
                }
                match self.ty {
                    ColumnType::UInt8 => Value::UInt(v as u64),
                    _ => Value::Int(v),
                }
            }
            KeyKind::Float { single } => {
                let v: f64 = text.parse().map_err(|_| bad())?;
                if !v.is_finite() || (*single && f64::from(v as f32) != v) {
                    return Err(bad());
                }
                Value::Float(v)
            }
            KeyKind::Decimal { precision, scale } => {
                Value::Decimal(parse_decimal(text, *precision, *scale).ok_or_else(bad)?)
            }
            KeyKind::Date => {
                let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| bad())?;
                Value::Date(
                    i32::try_from(i64::from(date.num_days_from_ce()) - DAYS_CE_TO_1970)
                        .map_err(|_| bad())?,
                )
            }
            KeyKind::Time { scale } if is_time_text(text, *scale) => Value::Text(text.to_owned()),
            KeyKind::Time { .. } => return Err(bad()),
            KeyKind::DateTime2 | KeyKind::DateTime | KeyKind::SmallDateTime => {
                Value::Timestamp(parse_timestamp(text).ok_or_else(bad)?)
            }
            KeyKind::DateTimeOffset => {
                let naive = text.strip_suffix(UTC_SUFFIX).ok_or_else(bad)?;
                Value::Timestamp(parse_timestamp(naive).ok_or_else(bad)?)
            }
            KeyKind::NationalText | KeyKind::Text { .. } => Value::Text(text.to_owned()),
            KeyKind::Binary => Value::Bytes(parse_hex(text).ok_or_else(bad)?),
            KeyKind::Guid => Value::Text(
                text.parse::<tiberius::Uuid>()
                    .map_err(|_| bad())?
                    .hyphenated()
                    .to_string(),
            ),
        };
        // Canonical text only, and only values the column's type can hold.
        if self.format(&value).as_deref() != Ok(text) {
            return Err(bad());
        }
        self.parameter(&value)
            .map_err(|why| format!("{}: {why}", bad()))?;
        Ok(value)
    }

    /// The typed parameter carrying `value` (see the module's guarantees).
    pub fn parameter(&self, value: &Value) -> Result<ColumnData<'static>, String> {
        let wrong = || Err(format!("{value:?} is not a {} value", self.sql_type));
        Ok(match (&self.kind, value) {
            (_, Value::Null) => return Err("a key value is NULL".into()),
            (KeyKind::Bit, Value::Boolean(b)) => ColumnData::Bit(Some(*b)),
            (KeyKind::Integer { .. }, Value::Int(v)) => ColumnData::I64(Some(*v)),
            (KeyKind::Integer { .. }, Value::UInt(v)) => {
                ColumnData::I64(Some(i64::try_from(*v).map_err(|e| e.to_string())?))
            }
            (KeyKind::Float { .. }, Value::Float(v)) => ColumnData::F64(Some(*v)),
            // Exact text to decimal conversion on the server; no binary rounding.
            (KeyKind::Decimal { .. }, Value::Decimal(_)) => {
                ColumnData::String(Some(self.format(value)?.into()))
            }
            (KeyKind::Date, Value::Date(days)) => {
                ColumnData::Date(Some(date_param(i64::from(*days))?))
            }
            // The server converts the text to the column's `time` exactly (time outranks
            // nvarchar), so a 100 ns digit is compared as it is.
            (KeyKind::Time { scale }, Value::Text(t)) if is_time_text(t, *scale) => {
                ColumnData::String(Some(t.clone().into()))
            }
            (KeyKind::DateTime2, Value::Timestamp(us)) => {
                ColumnData::DateTime2(Some(datetime2_param(*us)?))
            }
            (KeyKind::DateTime, Value::Timestamp(us)) => {
                ColumnData::DateTime(Some(datetime_param(*us)?))
            }
            (KeyKind::SmallDateTime, Value::Timestamp(us)) => {
                ColumnData::SmallDateTime(Some(smalldatetime_param(*us)?))
            }
            (KeyKind::DateTimeOffset, Value::Timestamp(us)) => {
                ColumnData::DateTimeOffset(Some(DateTimeOffset::new(datetime2_param(*us)?, 0)))
            }
            (KeyKind::NationalText | KeyKind::Text { .. }, Value::Text(s)) => {
                ColumnData::String(Some(s.clone().into()))
            }
            (KeyKind::Binary, Value::Bytes(b)) => ColumnData::Binary(Some(b.clone().into())),
            (KeyKind::Guid, Value::Text(s)) => ColumnData::Guid(Some(
                s.parse::<tiberius::Uuid>().map_err(|e| e.to_string())?,
            )),
            _ => return wrong(),
        })
    }
}

/// The parameters for one stored bound (the key's values as bound text, in key order).
pub fn bound_parameters(
    table: &str,
    keys: &[KeyColumn],
    texts: &[String],
) -> Result<Vec<ColumnData<'static>>> {
    let corrupt = |what: String| {
        Error::new(Code::StateCorrupt, format!("{table}: a chunk bound {what}")).hint(
            "the stored chunk plan does not fit the table: `sluice baseline --reset` and start again",
        )
    };
    if texts.len() != keys.len() {
        return Err(corrupt(format!(
            "has {} values for a key of {} columns",
            texts.len(),
            keys.len()
        )));
    }
    keys.iter()
        .zip(texts)
        .map(|(key, text)| {
            key.parse(text)
                .and_then(|value| key.parameter(&value))
                .map_err(|why| corrupt(format!("does not fit {}: {why}", key.name)))
        })
        .collect()
}

/// The bound text of a key read from the table: `cells` are the key columns in key order.
pub fn key_texts(
    table: &str,
    keys: &[KeyColumn],
    cells: Vec<ColumnData<'static>>,
) -> Result<Vec<String>> {
    if cells.len() != keys.len() {
        return Err(Error::new(
            Code::SourceProtocol,
            format!(
                "{table}: a key row has {} cells, the key has {} columns",
                cells.len(),
                keys.len()
            ),
        ));
    }
    keys.iter()
        .zip(cells)
        .map(|(key, cell)| {
            let value = convert(&key.ty, cell).map_err(|why| {
                Error::new(
                    Code::ValueUnrepresentable,
                    format!("{table}.{} ({}) in the baseline: {why}", key.name, key.sql_type),
                )
                .hint("the value has no exact representation in the column's output type; fix the row or the column type at the source")
            })?;
            key.format(&value).map_err(|why| {
                Error::new(
                    Code::SourceProtocol,
                    format!("{table}.{}: a key read for chunk planning has no bound: {why}", key.name),
                )
            })
        })
        .collect()
}

/// Days from 0001-01-01 (day 1 of the common era in chrono's count) to 1970-01-01.
const DAYS_CE_TO_1970: i64 = DAYS_0001_TO_1970 + 1;
const UTC_SUFFIX: &str = "+00:00";
/// 1753-01-01, the first `datetime` day, as days since 1900-01-01.
const DATETIME_FIRST_DAY: i32 = -53_690;

/// `-12.50` for unscaled `-1250` at scale 2.
fn decimal_text(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = usize::from(scale);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// The unscaled value of a canonical decimal text with `scale` decimals that fits
/// `precision` digits.
fn parse_decimal(text: &str, precision: u8, scale: u8) -> Option<i128> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = if scale == 0 {
        (body, "")
    } else {
        body.split_once('.')?
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || (scale > 0 && (!digits(frac) || frac.len() != usize::from(scale))) {
        return None;
    }
    let significant = int.trim_start_matches('0').len() + usize::from(scale);
    if significant > usize::from(precision).max(usize::from(scale)) {
        return None;
    }
    let magnitude: i128 = format!("{int}{frac}").parse().ok()?;
    let value = if negative { -magnitude } else { magnitude };
    (decimal_text(value, scale) == text).then_some(value)
}

/// `YYYY-MM-DD` of days since 1970-01-01, years 0001-9999.
fn date_text(days_1970: i64) -> Result<String, String> {
    i32::try_from(days_1970 + DAYS_CE_TO_1970)
        .ok()
        .and_then(NaiveDate::from_num_days_from_ce_opt)
        .filter(|d| (1..=9999).contains(&d.year()))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .ok_or_else(|| format!("day {days_1970} after 1970-01-01 is outside years 1-9999"))
}

/// `HH:MM:SS.ffffff` of microseconds since midnight.
fn time_text(us: i64) -> Result<String, String> {
    if !(0..DAY_US).contains(&us) {
        return Err(format!("{us} µs is not within one day"));
    }
    let (secs, frac) = (us / 1_000_000, us % 1_000_000);
    Ok(format!(
        "{:02}:{:02}:{:02}.{frac:06}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    ))
}

fn timestamp_text(us: i64) -> Result<String, String> {
    Ok(format!(
        "{} {}",
        date_text(us.div_euclid(DAY_US))?,
        time_text(us.rem_euclid(DAY_US))?
    ))
}

fn parse_time(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let shape = b.len() == 15
        && b[2] == b':'
        && b[5] == b':'
        && b[8] == b'.'
        && [0, 1, 3, 4, 6, 7, 9, 10, 11, 12, 13, 14]
            .iter()
            .all(|&i| b[i].is_ascii_digit());
    if !shape {
        return None;
    }
    let field = |range: std::ops::Range<usize>| text[range].parse::<i64>().ok();
    let (h, m, s, f) = (field(0..2)?, field(3..5)?, field(6..8)?, field(9..15)?);
    (h < 24 && m < 60 && s < 60).then_some(((h * 60 + m) * 60 + s) * 1_000_000 + f)
}

/// `HH:MM:SS` with exactly `scale` fraction digits (none for 0), a time of day: the text
/// a `time(scale)` column is written as ([`super::values::time_text`]).
fn is_time_text(text: &str, scale: u8) -> bool {
    let (clock, frac) = text.split_once('.').unwrap_or((text, ""));
    let b = clock.as_bytes();
    let field = |range: std::ops::Range<usize>| clock[range].parse::<u32>().ok();
    b.len() == 8
        && b[2] == b':'
        && b[5] == b':'
        && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
        && field(0..2).is_some_and(|h| h < 24)
        && field(3..5).is_some_and(|m| m < 60)
        && field(6..8).is_some_and(|s| s < 60)
        && frac.len() == usize::from(scale)
        && (scale == 0) == (text.len() == 8)
        && frac.bytes().all(|d| d.is_ascii_digit())
}

fn parse_timestamp(text: &str) -> Option<i64> {
    let (date, time) = text.split_once(' ')?;
    let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    let days = i64::from(date.num_days_from_ce()) - DAYS_CE_TO_1970;
    days.checked_mul(DAY_US)?.checked_add(parse_time(time)?)
}

/// Bytes of `0x` + hex text.
fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("0x")?;
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn date_param(days_1970: i64) -> Result<Date, String> {
    u32::try_from(days_1970 + DAYS_0001_TO_1970)
        .ok()
        .filter(|_| date_text(days_1970).is_ok())
        .map(Date::new)
        .ok_or_else(|| "date out of range".to_owned())
}

fn time_param(us: i64) -> Result<Time, String> {
    time_text(us)?;
    Ok(Time::new(us as u64 * 10, 7))
}

fn datetime2_param(us: i64) -> Result<DateTime2, String> {
    Ok(DateTime2::new(
        date_param(us.div_euclid(DAY_US))?,
        time_param(us.rem_euclid(DAY_US))?,
    ))
}

/// `datetime`: days since 1900-01-01 and 1/300 s ticks, only for an instant that is a
/// whole tick as the value decoder writes it.
fn datetime_param(us: i64) -> Result<DateTime, String> {
    let days = i32::try_from(us.div_euclid(DAY_US) + DAYS_1900_TO_1970)
        .map_err(|_| "datetime out of range".to_owned())?;
    let ticks = (us.rem_euclid(DAY_US) * 3 + 5_000) / 10_000;
    let ticks = u32::try_from(ticks).map_err(|_| "datetime out of range".to_owned())?;
    if days < DATETIME_FIRST_DAY || date_text(us.div_euclid(DAY_US)).is_err() {
        return Err("datetime out of range (1753-01-01 to 9999-12-31)".to_owned());
    }
    if datetime_us(days, ticks) != us {
        return Err(format!("{us} µs is not a datetime value (1/300 s ticks)"));
    }
    Ok(DateTime::new(days, ticks))
}

/// `smalldatetime`: days since 1900-01-01 and minutes, only for whole minutes.
fn smalldatetime_param(us: i64) -> Result<SmallDateTime, String> {
    let tod = us.rem_euclid(DAY_US);
    let days = u16::try_from(us.div_euclid(DAY_US) + DAYS_1900_TO_1970)
        .map_err(|_| "smalldatetime out of range".to_owned())?;
    if tod % 60_000_000 != 0 {
        return Err(format!("{us} µs is not a whole minute"));
    }
    Ok(SmallDateTime::new(days, (tod / 60_000_000) as u16))
}

#[cfg(test)]
mod tests;
