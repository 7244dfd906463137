//! Binlog column types and cells → sluice types and [`Value`]s. Pure.
//!
//! A [`BinlogColumn`] is one column as a TABLE_MAP event describes it (real type, type
//! metadata, signedness, character set, ENUM/SET labels — all from FULL row metadata).
//! [`binlog_type`] gives its sluice type; [`convert`] turns one decoded cell into a value
//! of that type or fails with the reason — never a silent NULL, never a rounded or
//! clamped value:
//!
//! * integers keep their signedness (`UInt*` for UNSIGNED); DECIMAL is exact: a Decimal128
//!   up to 38 digits, and above that (MySQL allows 65) its text at the column's scale
//!   ([`decimal_type`]: DuckDB reads a Decimal256 as a rounded DOUBLE, Spark and Athena
//!   refuse it);
//! * DATE / DATETIME are calendar values (naive), TIMESTAMP is an instant (the binlog
//!   stores UTC seconds, so the session time zone never matters); zero, partial-zero and
//!   invalid dates (`0000-00-00`, `2024-00-10`) are written in the lossless encoding of
//!   [`super::forms`], far below every real date;
//! * TIME is a signed duration (±838 h), written as the server's text of it
//!   ([`super::forms::time_text`]); YEAR is an integer (0 for `0000`);
//! * text is decoded by its column's character set ([`super::charset`]); `binary`-charset
//!   columns, and sets without a decoding table, are bytes; BINARY(n) is re-padded with
//!   the zero bytes the binlog strips, as `SELECT` returns it;
//! * spatial values are WKB (EWKB with a non-zero SRID, [`super::forms::wkb`]);
//! * ENUM and SET become their labels (SET labels comma-joined in definition order — the
//!   text MySQL prints; the ENUM error value 0 is `''`, as MySQL prints it); BIT(n) is an
//!   unsigned integer; JSON is its text (MySQL's binary JSON rendered, opaque scalars —
//!   DECIMAL, DATE, TIME, DATETIME — as strings).

use mysql_async::Value as MyValue;
use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType as MyType;

use super::charset::{self, Decoding};
use super::forms;
use crate::change::{Column, ColumnType, Value};

/// One column as a TABLE_MAP event describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BinlogColumn {
    pub name: String,
    /// The real type (ENUM/SET/STRING resolved from the metadata).
    pub raw: MyType,
    /// The type's metadata bytes.
    pub meta: Vec<u8>,
    pub unsigned: bool,
    pub nullable: bool,
    /// Character set name, for character, ENUM and SET columns.
    pub charset: Option<String>,
    /// ENUM or SET labels, in definition order.
    pub labels: Vec<String>,
    /// A MariaDB plugin type the binlog carries as a fixed BINARY (set from the declared
    /// type when the table is mapped).
    pub plugin: Option<Plugin>,
    /// Part of the primary key, as the event's FULL metadata says.
    pub key: bool,
}

/// MariaDB's plugin types that arrive as fixed-width bytes and are written as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plugin {
    Inet6,
    Inet4,
    Uuid,
}

impl Plugin {
    /// The plugin type a declared column type names (`inet6`, `inet4`).
    pub fn of_declared(source_type: &str) -> Option<Plugin> {
        match source_type.to_ascii_lowercase().as_str() {
            "inet6" => Some(Plugin::Inet6),
            "inet4" => Some(Plugin::Inet4),
            "uuid" => Some(Plugin::Uuid),
            _ => None,
        }
    }
}

fn charset_of(col: &BinlogColumn) -> Result<Decoding, String> {
    col.charset
        .as_deref()
        .map(charset::decoding)
        .ok_or_else(|| "the binlog gives no character set for the column".to_owned())
}

/// The sluice type of a binlog column.
pub fn binlog_type(col: &BinlogColumn) -> Result<ColumnType, String> {
    if col.plugin.is_some() && col.raw == MyType::MYSQL_TYPE_STRING {
        return Ok(ColumnType::Utf8);
    }
    let int = |signed, unsigned| if col.unsigned { unsigned } else { signed };
    Ok(match col.raw {
        MyType::MYSQL_TYPE_TINY => int(ColumnType::Int8, ColumnType::UInt8),
        MyType::MYSQL_TYPE_SHORT => int(ColumnType::Int16, ColumnType::UInt16),
        MyType::MYSQL_TYPE_INT24 | MyType::MYSQL_TYPE_LONG => {
            int(ColumnType::Int32, ColumnType::UInt32)
        }
        MyType::MYSQL_TYPE_LONGLONG => int(ColumnType::Int64, ColumnType::UInt64),
        MyType::MYSQL_TYPE_NEWDECIMAL => {
            let (precision, scale) = match col.meta[..] {
                [p, s, ..] => (p, s),
                _ => return Err("DECIMAL without precision metadata".to_owned()),
            };
            if precision == 0 || precision > 76 || scale > precision {
                return Err(format!(
                    "DECIMAL({precision},{scale}) cannot be represented"
                ));
            }
            decimal_type(precision, scale as i8)
        }
        MyType::MYSQL_TYPE_FLOAT => ColumnType::Float32,
        MyType::MYSQL_TYPE_DOUBLE => ColumnType::Float64,
        MyType::MYSQL_TYPE_NEWDATE | MyType::MYSQL_TYPE_DATE => ColumnType::Date,
        MyType::MYSQL_TYPE_DATETIME | MyType::MYSQL_TYPE_DATETIME2 => ColumnType::Timestamp,
        MyType::MYSQL_TYPE_TIMESTAMP | MyType::MYSQL_TYPE_TIMESTAMP2 => ColumnType::TimestampTz,
        MyType::MYSQL_TYPE_TIME | MyType::MYSQL_TYPE_TIME2 => ColumnType::Utf8,
        MyType::MYSQL_TYPE_YEAR => ColumnType::Int16,
        MyType::MYSQL_TYPE_VARCHAR
        | MyType::MYSQL_TYPE_VAR_STRING
        | MyType::MYSQL_TYPE_STRING
        | MyType::MYSQL_TYPE_BLOB
        | MyType::MYSQL_TYPE_TINY_BLOB
        | MyType::MYSQL_TYPE_MEDIUM_BLOB
        | MyType::MYSQL_TYPE_LONG_BLOB => {
            if charset_of(col)?.is_bytes() {
                ColumnType::Binary
            } else {
                ColumnType::Utf8
            }
        }
        MyType::MYSQL_TYPE_GEOMETRY => ColumnType::Binary,
        MyType::MYSQL_TYPE_JSON => ColumnType::Json,
        MyType::MYSQL_TYPE_ENUM | MyType::MYSQL_TYPE_SET => {
            if col.labels.is_empty() {
                return Err(
                    "the binlog carries no ENUM/SET labels (binlog_row_metadata is not FULL)"
                        .to_owned(),
                );
            }
            ColumnType::Utf8
        }
        MyType::MYSQL_TYPE_BIT => ColumnType::UInt64,
        other => return Err(format!("binlog type {other:?} is not supported")),
    })
}

/// True when a cell decoded as `binlog` may be written into a column declared `declared`
/// (MariaDB's JSON is LONGTEXT in the binlog).
pub fn compatible(declared: &ColumnType, binlog: &ColumnType) -> bool {
    declared == binlog || (*declared == ColumnType::Json && *binlog == ColumnType::Utf8)
}

/// Converts one decoded cell of `col` into a value of type `ty`.
pub fn convert(
    col: &BinlogColumn,
    ty: &ColumnType,
    cell: BinlogValue<'_>,
) -> Result<Value, String> {
    let value = match cell {
        BinlogValue::Value(v) => v,
        BinlogValue::Jsonb(doc) => {
            let json: serde_json::Value = doc
                .parse()
                .map_err(|e| format!("JSON value cannot be rendered as text: {e}"))?
                .into();
            return Ok(Value::Text(json.to_string()));
        }
        BinlogValue::JsonDiff(_) => {
            return Err("a partial JSON update carries a diff, not the value (binlog_row_value_options = PARTIAL_JSON)".to_owned());
        }
    };
    if value == MyValue::NULL {
        return Ok(Value::Null);
    }
    match (col.raw, value) {
        (MyType::MYSQL_TYPE_STRING, MyValue::Bytes(bytes)) if col.plugin.is_some() => {
            let width = string_width(&col.meta);
            let mut bytes = bytes;
            if bytes.len() < width {
                bytes.resize(width, 0);
            }
            match col.plugin {
                Some(Plugin::Inet6) => forms::inet6_text(&bytes),
                Some(Plugin::Uuid) => forms::uuid_text(&bytes),
                _ => forms::inet4_text(&bytes),
            }
            .map(Value::Text)
        }
        (MyType::MYSQL_TYPE_ENUM, MyValue::Int(index)) => enum_label(col, index),
        (MyType::MYSQL_TYPE_SET, MyValue::Bytes(bits)) => set_labels(col, &bits),
        (MyType::MYSQL_TYPE_BIT, MyValue::Bytes(bytes)) => {
            if bytes.len() > 8 {
                return Err(format!("BIT value of {} bytes", bytes.len()));
            }
            Ok(Value::UInt(
                bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
            ))
        }
        (MyType::MYSQL_TYPE_YEAR, MyValue::Bytes(text)) => {
            let year: i64 = ascii(&text)?
                .parse()
                .map_err(|_| "bad YEAR value".to_owned())?;
            // The binlog stores YEAR as an offset from 1900; 0 is the year 0000.
            Ok(Value::Int(if year == 1900 { 0 } else { year }))
        }
        (MyType::MYSQL_TYPE_NEWDECIMAL, MyValue::Bytes(text)) => match col.meta[..] {
            [precision, scale, ..] => decimal(precision, scale as i8, ascii(&text)?),
            _ => Err("DECIMAL without precision metadata".to_owned()),
        },
        (MyType::MYSQL_TYPE_TIMESTAMP2, MyValue::Bytes(text)) => timestamp_text(ascii(&text)?),
        (MyType::MYSQL_TYPE_TIMESTAMP, MyValue::Int(seconds)) => {
            Ok(Value::Timestamp(if seconds == 0 {
                forms::ZERO_DATETIME_MICROS
            } else {
                seconds * 1_000_000
            }))
        }
        (MyType::MYSQL_TYPE_GEOMETRY, MyValue::Bytes(internal)) => {
            forms::wkb(&internal).map(Value::Bytes)
        }
        (
            MyType::MYSQL_TYPE_TIME2 | MyType::MYSQL_TYPE_TIME,
            MyValue::Time(neg, days, h, m, s, us),
        ) => {
            let fsp = if col.raw == MyType::MYSQL_TYPE_TIME2 {
                col.meta.first().copied().unwrap_or(0)
            } else {
                0
            };
            Ok(time_value(neg, days, h, m, s, us, fsp))
        }
        // mysql_common reads a signed MEDIUMINT without sign extension.
        (MyType::MYSQL_TYPE_INT24, MyValue::Int(v))
            if !col.unsigned && (0x80_0000..0x100_0000).contains(&v) =>
        {
            Ok(Value::Int(v - 0x100_0000))
        }
        (_, MyValue::Int(v)) => int_value(ty, v),
        (_, MyValue::UInt(v)) => uint_value(ty, v),
        (_, MyValue::Float(v)) => Ok(Value::Float(f64::from(v))),
        (_, MyValue::Double(v)) => Ok(Value::Float(v)),
        (_, MyValue::Date(y, m, d, h, i, s, us)) => date_time(ty, (y, m, d), (h, i, s, us)),
        (_, MyValue::Bytes(bytes)) => bytes_value(col, ty, bytes),
        (raw, other) => Err(format!("unexpected {other:?} for binlog type {raw:?}")),
    }
}

/// A signed integer cell (of a column with no form of its own) as a value of `ty`.
pub fn int_value(ty: &ColumnType, v: i64) -> Result<Value, String> {
    match ty {
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            u64::try_from(v)
                .map(Value::UInt)
                .map_err(|_| format!("negative value {v} in an UNSIGNED column"))
        }
        _ => Ok(Value::Int(v)),
    }
}

/// An unsigned integer cell (of a column with no form of its own) as a value of `ty`.
pub fn uint_value(ty: &ColumnType, v: u64) -> Result<Value, String> {
    match ty {
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
            Ok(Value::UInt(v))
        }
        _ => i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| format!("{v} exceeds a signed column")),
    }
}

/// A byte-string cell (of a column with no form of its own) as a value of `ty`: binary
/// padded to the column's width, anything else text in the column's character set.
pub fn bytes_value(col: &BinlogColumn, ty: &ColumnType, bytes: Vec<u8>) -> Result<Value, String> {
    match ty {
        ColumnType::Binary => Ok(Value::Bytes(pad_binary(col, bytes))),
        _ => text(col, bytes).map(Value::Text),
    }
}

/// Converts one cell of a `SELECT` (binary protocol, `time_zone = '+00:00'`, results in
/// utf8mb4) of `column` into a value of its declared type — the type the change stream
/// writes for the same column, through the same forms as [`convert`]: DECIMAL from its
/// text, non-calendar dates encoded ([`super::forms`]), TIME as its text, BIT as an
/// unsigned integer, spatial values as WKB. `result` is the result column's type: a
/// MySQL JSON result is re-rendered as the binlog path renders a JSON document;
/// MariaDB's JSON is LONGTEXT and passes through as written.
pub fn convert_selected(column: &Column, result: MyType, value: MyValue) -> Result<Value, String> {
    let ty = &column.ty;
    let unsigned = matches!(
        ty,
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64
    );
    match value {
        MyValue::NULL => Ok(Value::Null),
        MyValue::Int(v) if unsigned => u64::try_from(v)
            .map(Value::UInt)
            .map_err(|_| format!("negative value {v} in an UNSIGNED column")),
        MyValue::Int(v) => Ok(Value::Int(v)),
        MyValue::UInt(v) if unsigned => Ok(Value::UInt(v)),
        MyValue::UInt(v) => i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| format!("{v} exceeds a signed column")),
        MyValue::Float(v) => Ok(Value::Float(f64::from(v))),
        MyValue::Double(v) => Ok(Value::Float(v)),
        MyValue::Date(y, m, d, h, i, s, us) => date_time(ty, (y, m, d), (h, i, s, us)),
        MyValue::Time(negative, days, h, m, s, us) => Ok(time_value(
            negative,
            days,
            h,
            m,
            s,
            us,
            forms::declared_fsp(&column.source_type),
        )),
        MyValue::Bytes(bytes) => match ty {
            ColumnType::Binary if result == MyType::MYSQL_TYPE_GEOMETRY => {
                forms::wkb(&bytes).map(Value::Bytes)
            }
            ColumnType::Binary => Ok(Value::Bytes(bytes)),
            ColumnType::Decimal { precision, scale } => decimal(*precision, *scale, ascii(&bytes)?),
            ColumnType::Utf8 if result == MyType::MYSQL_TYPE_NEWDECIMAL => {
                let (precision, scale) = decimal_args(&column.source_type)
                    .ok_or_else(|| format!("no precision and scale in {}", column.source_type))?;
                decimal(precision, scale, ascii(&bytes)?)
            }
            ColumnType::UInt64 => {
                // BIT(n): big-endian bytes.
                if bytes.len() > 8 {
                    return Err(format!("BIT value of {} bytes", bytes.len()));
                }
                Ok(Value::UInt(
                    bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
                ))
            }
            ColumnType::Json if result == MyType::MYSQL_TYPE_JSON => {
                let doc: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("JSON value is not valid JSON: {e}"))?;
                Ok(Value::Text(doc.to_string()))
            }
            ColumnType::Utf8 | ColumnType::Json => {
                String::from_utf8(bytes).map(Value::Text).map_err(|e| {
                    format!(
                        "text is not valid UTF-8 (byte {})",
                        e.utf8_error().valid_up_to()
                    )
                })
            }
            other => Err(format!("unexpected bytes for a {other:?} column")),
        },
    }
}

/// A TIME as the server prints it.
fn time_value(negative: bool, days: u32, h: u8, m: u8, s: u8, us: u32, fsp: u8) -> Value {
    let hours = u64::from(days) * 24 + u64::from(h);
    Value::Text(forms::time_text(negative, hours, m, s, us, fsp))
}

fn ascii(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|_| "malformed numeric text".to_owned())
}

fn enum_label(col: &BinlogColumn, index: i64) -> Result<Value, String> {
    if index == 0 {
        return Ok(Value::Text(String::new()));
    }
    usize::try_from(index - 1)
        .ok()
        .and_then(|i| col.labels.get(i))
        .map(|label| Value::Text(label.clone()))
        .ok_or_else(|| {
            format!(
                "ENUM index {index} has no label ({} known)",
                col.labels.len()
            )
        })
}

fn set_labels(col: &BinlogColumn, bits: &[u8]) -> Result<Value, String> {
    let mut mask = 0u64;
    for (i, b) in bits.iter().enumerate().take(8) {
        mask |= u64::from(*b) << (8 * i);
    }
    let mut labels = Vec::new();
    for bit in 0..64 {
        if mask & (1 << bit) != 0 {
            labels.push(
                col.labels
                    .get(bit)
                    .ok_or_else(|| format!("SET bit {bit} has no label"))?
                    .as_str(),
            );
        }
    }
    Ok(Value::Text(labels.join(",")))
}

/// BINARY(n) arrives with its trailing zero bytes stripped; `SELECT` returns all n.
fn pad_binary(col: &BinlogColumn, mut bytes: Vec<u8>) -> Vec<u8> {
    if col.raw == MyType::MYSQL_TYPE_STRING && charset_of(col) == Ok(Decoding::Binary) {
        let width = string_width(&col.meta);
        if bytes.len() < width {
            bytes.resize(width, 0);
        }
    }
    bytes
}

/// The declared byte width of a CHAR/BINARY column from its TABLE_MAP metadata.
fn string_width(meta: &[u8]) -> usize {
    match meta {
        [b0, b1, ..] if b0 & 0x30 != 0x30 => {
            usize::from(*b1) | ((usize::from(b0 & 0x30) ^ 0x30) << 4)
        }
        [_, b1, ..] => usize::from(*b1),
        _ => 0,
    }
}

fn text(col: &BinlogColumn, bytes: Vec<u8>) -> Result<String, String> {
    let decoding = charset_of(col)?;
    charset::decode(decoding, col.charset.as_deref().unwrap_or("UTF-8"), bytes)
}

/// `decimal(12,2) unsigned` → (12, 2).
pub(super) fn decimal_args(column_type: &str) -> Option<(u8, i8)> {
    let inner = column_type.split_once('(')?.1.split_once(')')?.0;
    let (p, s) = inner.split_once(',').unwrap_or((inner, "0"));
    let precision: u8 = p.trim().parse().ok()?;
    let scale: i8 = s.trim().parse().ok()?;
    ((1..=76).contains(&precision) && scale >= 0 && scale as u8 <= precision)
        .then_some((precision, scale))
}

/// The output type of a `DECIMAL(precision, scale)`: a Decimal128 up to 38 digits, the
/// widest decimal DuckDB, Spark and Athena all read exactly; wider ones are text.
pub fn decimal_type(precision: u8, scale: i8) -> ColumnType {
    if precision <= 38 {
        ColumnType::Decimal { precision, scale }
    } else {
        ColumnType::Utf8
    }
}

/// `-1234.5600` of a `DECIMAL(precision, scale)` → the unscaled integer (up to 38
/// digits), or the text as MySQL prints it at the column's scale (`-1234.56000`, `0.00000`:
/// no leading zeros, every fraction digit, no negative zero) for a wider column
/// ([`decimal_type`]).
fn decimal(precision: u8, scale: i8, text: &str) -> Result<Value, String> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let scale = usize::try_from(scale).map_err(|_| format!("DECIMAL scale {scale}"))?;
    if frac_part.len() > scale
        || !int_part
            .bytes()
            .chain(frac_part.bytes())
            .all(|b| b.is_ascii_digit())
        || int_part.is_empty()
    {
        return Err(format!("malformed DECIMAL text {text:?}"));
    }
    let int_digits = int_part.trim_start_matches('0');
    let significant = int_digits.len() + scale;
    if significant > precision as usize {
        return Err(format!(
            "DECIMAL {text} has more digits than precision {precision}"
        ));
    }
    let frac_zeros = scale - frac_part.len();
    if precision <= 38 {
        let mut unscaled = String::with_capacity(int_part.len() + scale + 1);
        if negative {
            unscaled.push('-');
        }
        unscaled.push_str(int_part);
        unscaled.push_str(frac_part);
        unscaled.extend(std::iter::repeat_n('0', frac_zeros));
        return unscaled
            .parse::<i128>()
            .map(Value::Decimal)
            .map_err(|_| format!("malformed DECIMAL text {text:?}"));
    }
    let zero = int_digits.is_empty() && frac_part.bytes().all(|b| b == b'0');
    let mut out = String::with_capacity(int_part.len() + scale + 2);
    if negative && !zero {
        out.push('-');
    }
    out.push_str(if int_digits.is_empty() {
        "0"
    } else {
        int_digits
    });
    if scale > 0 {
        out.push('.');
        out.push_str(frac_part);
        out.extend(std::iter::repeat_n('0', frac_zeros));
    }
    Ok(Value::Text(out))
}

/// `1733000000` or `1733000000.000123` (UTC seconds) → µs.
fn timestamp_text(text: &str) -> Result<Value, String> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs: i64 = secs
        .parse()
        .map_err(|_| format!("malformed TIMESTAMP {text:?}"))?;
    let micros: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}")[..6]
            .parse()
            .map_err(|_| format!("malformed TIMESTAMP {text:?}"))?
    };
    if secs == 0 && micros == 0 {
        return Ok(Value::Timestamp(forms::ZERO_DATETIME_MICROS));
    }
    Ok(Value::Timestamp(secs * 1_000_000 + micros))
}

fn date_time(
    ty: &ColumnType,
    (y, m, d): (u16, u8, u8),
    (h, i, s, us): (u8, u8, u8, u32),
) -> Result<Value, String> {
    if h > 23 || i > 59 || s > 59 || us > 999_999 {
        return Err(format!("{h:02}:{i:02}:{s:02}.{us:06} is not a time of day"));
    }
    let micros_of_day =
        (i64::from(h) * 3600 + i64::from(i) * 60 + i64::from(s)) * 1_000_000 + i64::from(us);
    let Some(date) = chrono::NaiveDate::from_ymd_opt(i32::from(y), u32::from(m), u32::from(d))
    else {
        // The zero date, a zero month or day, an ALLOW_INVALID_DATES date: encoded.
        return match ty {
            ColumnType::Date => forms::zero_date_days(y, m, d).map(Value::Date),
            ColumnType::Timestamp | ColumnType::TimestampTz => {
                forms::zero_datetime_micros(y, m, d, micros_of_day).map(Value::Timestamp)
            }
            other => Err(format!("a date value for a {other:?} column")),
        };
    };
    let days = date
        .signed_duration_since(chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch"))
        .num_days();
    match ty {
        ColumnType::Date => i32::try_from(days)
            .map(Value::Date)
            .map_err(|_| "date out of range".to_owned()),
        ColumnType::Timestamp | ColumnType::TimestampTz => {
            Ok(Value::Timestamp(days * 86_400_000_000 + micros_of_day))
        }
        other => Err(format!("a date value for a {other:?} column")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(raw: MyType, meta: &[u8]) -> BinlogColumn {
        BinlogColumn {
            name: "c".into(),
            raw,
            meta: meta.to_vec(),
            unsigned: false,
            nullable: true,
            charset: None,
            labels: vec![],
            plugin: None,
            key: false,
        }
    }

    fn v(value: MyValue) -> BinlogValue<'static> {
        BinlogValue::Value(value)
    }

    #[test]
    fn types_follow_the_metadata() {
        let mut c = col(MyType::MYSQL_TYPE_LONGLONG, &[]);
        assert_eq!(binlog_type(&c), Ok(ColumnType::Int64));
        c.unsigned = true;
        assert_eq!(binlog_type(&c), Ok(ColumnType::UInt64));
        assert_eq!(
            binlog_type(&col(MyType::MYSQL_TYPE_NEWDECIMAL, &[38, 30])),
            Ok(ColumnType::Decimal {
                precision: 38,
                scale: 30
            })
        );
        let mut s = col(MyType::MYSQL_TYPE_VARCHAR, &[40, 0]);
        assert!(binlog_type(&s).is_err(), "no charset, no guess");
        s.charset = Some("utf8mb4".into());
        assert_eq!(binlog_type(&s), Ok(ColumnType::Utf8));
        s.charset = Some("binary".into());
        assert_eq!(binlog_type(&s), Ok(ColumnType::Binary));
        s.charset = Some("gbk".into());
        assert_eq!(binlog_type(&s), Ok(ColumnType::Utf8), "gbk decodes");
        s.charset = Some("keybcs2".into());
        assert_eq!(binlog_type(&s), Ok(ColumnType::Binary), "no table: bytes");
        let e = col(MyType::MYSQL_TYPE_ENUM, &[247, 1]);
        assert!(binlog_type(&e).unwrap_err().contains("FULL"));
        assert_eq!(
            binlog_type(&col(MyType::MYSQL_TYPE_GEOMETRY, &[4])),
            Ok(ColumnType::Binary)
        );
        assert_eq!(
            binlog_type(&col(MyType::MYSQL_TYPE_TIME2, &[3])),
            Ok(ColumnType::Utf8)
        );
        assert!(compatible(&ColumnType::Json, &ColumnType::Utf8));
        assert!(!compatible(&ColumnType::Int32, &ColumnType::Int64));
    }

    #[test]
    fn integers_keep_signedness() {
        let mut c = col(MyType::MYSQL_TYPE_LONGLONG, &[]);
        c.unsigned = true;
        assert_eq!(
            convert(&c, &ColumnType::UInt64, v(MyValue::UInt(u64::MAX))),
            Ok(Value::UInt(u64::MAX))
        );
        assert_eq!(
            convert(&c, &ColumnType::UInt8, v(MyValue::Int(255))),
            Ok(Value::UInt(255))
        );
        assert!(convert(&c, &ColumnType::UInt8, v(MyValue::Int(-1))).is_err());
        let medium = col(MyType::MYSQL_TYPE_INT24, &[]);
        assert_eq!(
            convert(&medium, &ColumnType::Int32, v(MyValue::Int(0x80_0000))),
            Ok(Value::Int(-8_388_608))
        );
        assert_eq!(
            convert(&medium, &ColumnType::Int32, v(MyValue::Int(0xFF_FFFF))),
            Ok(Value::Int(-1))
        );
        assert_eq!(
            convert(&medium, &ColumnType::Int32, v(MyValue::Int(0x7F_FFFF))),
            Ok(Value::Int(8_388_607))
        );
        let s = col(MyType::MYSQL_TYPE_TINY, &[]);
        assert_eq!(
            convert(&s, &ColumnType::Int8, v(MyValue::Int(-128))),
            Ok(Value::Int(-128))
        );
        assert_eq!(
            convert(&s, &ColumnType::Int8, v(MyValue::NULL)),
            Ok(Value::Null)
        );
    }

    #[test]
    fn decimals_are_exact() {
        let c = col(MyType::MYSQL_TYPE_NEWDECIMAL, &[12, 2]);
        let ty = ColumnType::Decimal {
            precision: 12,
            scale: 2,
        };
        let dec = |t: &str| convert(&c, &ty, v(MyValue::Bytes(t.as_bytes().to_vec())));
        assert_eq!(dec("-1234.56"), Ok(Value::Decimal(-123456)));
        assert_eq!(dec("0.5"), Ok(Value::Decimal(50)));
        assert_eq!(dec("7"), Ok(Value::Decimal(700)));
        assert!(dec("1.234").is_err(), "more fraction digits than the scale");
        assert!(
            dec("12345678901.00").is_err(),
            "more digits than the precision"
        );
        // Wider than 38 digits: the text MySQL prints, at the column's scale.
        let wide = col(MyType::MYSQL_TYPE_NEWDECIMAL, &[65, 30]);
        assert_eq!(binlog_type(&wide), Ok(ColumnType::Utf8));
        let wide_dec = |t: &str| {
            convert(
                &wide,
                &ColumnType::Utf8,
                v(MyValue::Bytes(t.as_bytes().to_vec())),
            )
        };
        let text = "12345678901234567890123456789012345.123456789012345678901234567890";
        assert_eq!(wide_dec(text), Ok(Value::Text(text.into())));
        assert_eq!(
            wide_dec("-007.5"),
            Ok(Value::Text(format!("-7.5{}", "0".repeat(29))))
        );
        assert_eq!(
            wide_dec("-0.0"),
            Ok(Value::Text(format!("0.{}", "0".repeat(30))))
        );
        assert!(
            wide_dec(&format!("1{}", "0".repeat(35))).is_err(),
            "36 integer digits"
        );
        assert!(wide_dec("1.2.3").is_err());
    }

    #[test]
    fn temporal_values() {
        let d = col(MyType::MYSQL_TYPE_NEWDATE, &[]);
        assert_eq!(
            convert(
                &d,
                &ColumnType::Date,
                v(MyValue::Date(1969, 7, 20, 0, 0, 0, 0))
            ),
            Ok(Value::Date(-165))
        );
        assert_eq!(
            convert(&d, &ColumnType::Date, v(MyValue::Date(0, 0, 0, 0, 0, 0, 0))),
            Ok(Value::Date(-1_000_000_000))
        );
        assert_eq!(
            convert(
                &d,
                &ColumnType::Date,
                v(MyValue::Date(2024, 0, 10, 0, 0, 0, 0))
            ),
            Ok(Value::Date(-1_020_240_010))
        );
        let dt = col(MyType::MYSQL_TYPE_DATETIME2, &[6]);
        assert_eq!(
            convert(
                &dt,
                &ColumnType::Timestamp,
                v(MyValue::Date(2000, 2, 29, 12, 34, 56, 789_012))
            ),
            Ok(Value::Timestamp(951_827_696_789_012))
        );
        let ts = col(MyType::MYSQL_TYPE_TIMESTAMP2, &[3]);
        let tsv = |t: &str| {
            convert(
                &ts,
                &ColumnType::TimestampTz,
                v(MyValue::Bytes(t.as_bytes().to_vec())),
            )
        };
        assert_eq!(
            tsv("1733000000.123000"),
            Ok(Value::Timestamp(1_733_000_000_123_000))
        );
        assert_eq!(
            tsv("1733000000"),
            Ok(Value::Timestamp(1_733_000_000_000_000))
        );
        assert_eq!(tsv("0"), Ok(Value::Timestamp(forms::ZERO_DATETIME_MICROS)));
        let ts1 = col(MyType::MYSQL_TYPE_TIMESTAMP, &[]);
        assert_eq!(
            convert(&ts1, &ColumnType::TimestampTz, v(MyValue::Int(0))),
            Ok(Value::Timestamp(forms::ZERO_DATETIME_MICROS))
        );
        assert_eq!(
            convert(
                &dt,
                &ColumnType::Timestamp,
                v(MyValue::Date(0, 0, 0, 0, 0, 0, 0))
            ),
            Ok(Value::Timestamp(-100_000_000_000_000_000))
        );
        let t = col(MyType::MYSQL_TYPE_TIME2, &[6]);
        assert_eq!(
            convert(
                &t,
                &ColumnType::Utf8,
                v(MyValue::Time(false, 0, 23, 59, 59, 999_999))
            ),
            Ok(Value::Text("23:59:59.999999".into()))
        );
        assert_eq!(
            convert(&t, &ColumnType::Utf8, v(MyValue::Time(true, 0, 1, 0, 0, 0))),
            Ok(Value::Text("-01:00:00.000000".into()))
        );
        assert_eq!(
            convert(
                &t,
                &ColumnType::Utf8,
                v(MyValue::Time(false, 1, 10, 0, 0, 0))
            ),
            Ok(Value::Text("34:00:00.000000".into()))
        );
        let y = col(MyType::MYSQL_TYPE_YEAR, &[]);
        assert_eq!(
            convert(&y, &ColumnType::Int16, v(MyValue::Bytes(b"2024".to_vec()))),
            Ok(Value::Int(2024))
        );
        assert_eq!(
            convert(&y, &ColumnType::Int16, v(MyValue::Bytes(b"1900".to_vec()))),
            Ok(Value::Int(0))
        );
    }

    #[test]
    fn text_follows_the_charset() {
        let mut c = col(MyType::MYSQL_TYPE_VARCHAR, &[40, 0]);
        c.charset = Some("utf8mb4".into());
        assert_eq!(
            convert(
                &c,
                &ColumnType::Utf8,
                v(MyValue::Bytes("ünï ✓".as_bytes().to_vec()))
            ),
            Ok(Value::Text("ünï ✓".into()))
        );
        assert!(convert(&c, &ColumnType::Utf8, v(MyValue::Bytes(vec![0xff]))).is_err());
        c.charset = Some("latin1".into());
        assert_eq!(
            convert(
                &c,
                &ColumnType::Utf8,
                v(MyValue::Bytes(vec![0x80, 0xe9, 0x41]))
            ),
            Ok(Value::Text("€éA".into()))
        );
        let mut b = col(MyType::MYSQL_TYPE_STRING, &[0xfe, 4]);
        b.charset = Some("binary".into());
        assert_eq!(
            convert(&b, &ColumnType::Binary, v(MyValue::Bytes(b"ab".to_vec()))),
            Ok(Value::Bytes(b"ab\0\0".to_vec()))
        );
        let mut vb = col(MyType::MYSQL_TYPE_VARCHAR, &[4, 0]);
        vb.charset = Some("binary".into());
        assert_eq!(
            convert(&vb, &ColumnType::Binary, v(MyValue::Bytes(b"ab".to_vec()))),
            Ok(Value::Bytes(b"ab".to_vec()))
        );
    }

    /// A JSON cell as a MySQL 8 binlog carries it: 4-byte length, then binary JSON.
    fn jsonb_cell(doc: &[u8]) -> Vec<u8> {
        let mut raw = (doc.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(doc);
        raw
    }

    #[test]
    fn mysql8_binary_json_renders_as_text_opaque_scalars_included() {
        let mut j = col(MyType::MYSQL_TYPE_JSON, &[4]);
        j.charset = Some("binary".into());
        let decode = |doc: &[u8]| {
            super::super::cell::decode_cell_as(&j, &ColumnType::Json, &jsonb_cell(doc))
                .map(|(v, _)| v)
        };
        // A small object {"a": 1, "b": "x"}: count 2, size, key entries, value entries.
        let object = [
            0x00, 2, 0, 22, 0, // small object, 2 members, 22 bytes
            18, 0, 1, 0, // key "a" at 18, length 1
            19, 0, 1, 0, // key "b" at 19, length 1
            0x05, 1, 0, // int16 1, inlined
            0x0c, 20, 0, // string at 20
            b'a', b'b', 1, b'x',
        ];
        assert_eq!(
            decode(&object),
            Ok(Value::Text(r#"{"a":1,"b":"x"}"#.into()))
        );
        // An opaque DECIMAL(3,2) 1.50 (CAST(1.5 AS DECIMAL(3,2)) in a document): a
        // string, never a stop (serde_json's TryFrom refuses opaque values).
        let decimal = [0x0f, 246, 4, 3, 2, 0x81, 0x32];
        assert_eq!(decode(&decimal), Ok(Value::Text(r#""1.50""#.into())));
        // Literals and numbers.
        assert_eq!(decode(&[0x04, 0x01]), Ok(Value::Text("true".into())));
        assert_eq!(decode(&[0x04, 0x00]), Ok(Value::Text("null".into())));
        let mut uint = vec![0x0a];
        uint.extend(u64::MAX.to_le_bytes());
        assert_eq!(decode(&uint), Ok(Value::Text(u64::MAX.to_string())));
        // A partial update's diff is not the value: refused, named.
        assert!(
            convert(&j, &ColumnType::Json, BinlogValue::JsonDiff(vec![]))
                .unwrap_err()
                .contains("PARTIAL_JSON")
        );
    }

    #[test]
    fn enums_sets_and_bits() {
        let mut e = col(MyType::MYSQL_TYPE_ENUM, &[247, 1]);
        e.labels = vec!["small".into(), "large".into()];
        assert_eq!(
            convert(&e, &ColumnType::Utf8, v(MyValue::Int(2))),
            Ok(Value::Text("large".into()))
        );
        assert_eq!(
            convert(&e, &ColumnType::Utf8, v(MyValue::Int(0))),
            Ok(Value::Text(String::new()))
        );
        assert!(convert(&e, &ColumnType::Utf8, v(MyValue::Int(3))).is_err());
        let mut s = col(MyType::MYSQL_TYPE_SET, &[248, 1]);
        s.labels = vec!["a".into(), "b".into(), "c".into()];
        assert_eq!(
            convert(&s, &ColumnType::Utf8, v(MyValue::Bytes(vec![0b101]))),
            Ok(Value::Text("a,c".into()))
        );
        assert_eq!(
            convert(&s, &ColumnType::Utf8, v(MyValue::Bytes(vec![0]))),
            Ok(Value::Text(String::new()))
        );
        let bit = col(MyType::MYSQL_TYPE_BIT, &[5, 0]);
        assert_eq!(
            convert(
                &bit,
                &ColumnType::UInt64,
                v(MyValue::Bytes(vec![0x01, 0x02]))
            ),
            Ok(Value::UInt(258))
        );
    }

    fn declared(ty: &ColumnType, source_type: &str) -> Column {
        Column {
            name: "c".into(),
            ty: ty.clone(),
            nullable: true,
            key: false,
            source_type: source_type.into(),
            field_metadata: Default::default(),
        }
    }

    /// A selected cell of a column of `ty`; `json`: the result column is MySQL's JSON.
    fn sel(ty: &ColumnType, json: bool, value: MyValue) -> Result<Value, String> {
        let result = if json {
            MyType::MYSQL_TYPE_JSON
        } else {
            MyType::MYSQL_TYPE_VAR_STRING
        };
        convert_selected(&declared(ty, "x"), result, value)
    }

    #[test]
    fn selected_cells_match_the_binlog_conversion() {
        assert_eq!(
            sel(&ColumnType::UInt64, false, MyValue::UInt(u64::MAX)),
            Ok(Value::UInt(u64::MAX))
        );
        assert_eq!(
            sel(&ColumnType::UInt8, false, MyValue::Int(255)),
            Ok(Value::UInt(255))
        );
        assert!(sel(&ColumnType::UInt8, false, MyValue::Int(-1)).is_err());
        assert!(sel(&ColumnType::Int64, false, MyValue::UInt(u64::MAX)).is_err());
        assert_eq!(
            sel(&ColumnType::Int16, false, MyValue::UInt(2024)),
            Ok(Value::Int(2024))
        );
        let dec = ColumnType::Decimal {
            precision: 12,
            scale: 2,
        };
        let bin = col(MyType::MYSQL_TYPE_NEWDECIMAL, &[12, 2]);
        for text in ["-1234.5", "0.01", "9999999999.99"] {
            assert_eq!(
                sel(&dec, false, MyValue::Bytes(text.into())),
                convert(&bin, &dec, v(MyValue::Bytes(text.into())))
            );
        }
        assert_eq!(
            sel(
                &ColumnType::TimestampTz,
                false,
                MyValue::Date(2026, 12, 1, 10, 0, 0, 123_000)
            ),
            Ok(Value::Timestamp(1_796_119_200_123_000))
        );
        assert_eq!(
            sel(&ColumnType::Date, false, MyValue::Date(0, 0, 0, 0, 0, 0, 0)),
            Ok(Value::Date(forms::ZERO_DATE_DAYS)),
            "zero dates are encoded"
        );
        let d = col(MyType::MYSQL_TYPE_DATETIME2, &[0]);
        for (y, m, dd) in [(0, 0, 0), (2024, 0, 10), (2024, 2, 30)] {
            let cell = MyValue::Date(y, m, dd, 12, 0, 1, 5);
            assert_eq!(
                sel(&ColumnType::Timestamp, false, cell.clone()),
                convert(&d, &ColumnType::Timestamp, v(cell)),
                "{y}-{m}-{dd}"
            );
        }
        assert_eq!(
            sel(
                &ColumnType::Date,
                false,
                MyValue::Date(1969, 7, 20, 0, 0, 0, 0)
            ),
            Ok(Value::Date(-165))
        );
        let time = |source_type: &str, cell| {
            convert_selected(
                &declared(&ColumnType::Utf8, source_type),
                MyType::MYSQL_TYPE_TIME,
                cell,
            )
        };
        assert_eq!(
            time("time", MyValue::Time(false, 1, 10, 0, 0, 0)),
            Ok(Value::Text("34:00:00".into()))
        );
        assert_eq!(
            time("time(2)", MyValue::Time(true, 34, 22, 59, 59, 990_000)),
            Ok(Value::Text("-838:59:59.99".into()))
        );
        let t2 = col(MyType::MYSQL_TYPE_TIME2, &[2]);
        let cell = MyValue::Time(true, 0, 1, 2, 3, 40_000);
        assert_eq!(
            time("time(2)", cell.clone()),
            convert(&t2, &ColumnType::Utf8, v(cell))
        );
        let mut point = vec![7, 0, 0, 0, 1, 1, 0, 0, 0];
        point.extend([0; 16]);
        let geometry = convert_selected(
            &declared(&ColumnType::Binary, "point"),
            MyType::MYSQL_TYPE_GEOMETRY,
            MyValue::Bytes(point.clone()),
        );
        let g = col(MyType::MYSQL_TYPE_GEOMETRY, &[4]);
        assert_eq!(
            geometry,
            convert(&g, &ColumnType::Binary, v(MyValue::Bytes(point)))
        );
        assert!(matches!(geometry, Ok(Value::Bytes(b)) if b[..5] == [1, 1, 0, 0, 0x20]));
        assert_eq!(
            sel(&ColumnType::UInt64, false, MyValue::Bytes(vec![2, 1])),
            Ok(Value::UInt(513))
        );
        assert_eq!(
            sel(&ColumnType::Binary, false, MyValue::Bytes(vec![0, 255])),
            Ok(Value::Bytes(vec![0, 255]))
        );
        assert!(sel(&ColumnType::Utf8, false, MyValue::Bytes(vec![0xff])).is_err());
        assert_eq!(
            sel(
                &ColumnType::Json,
                true,
                MyValue::Bytes(br#"{"k": [1, 2]}"#.to_vec())
            ),
            Ok(Value::Text(r#"{"k":[1,2]}"#.into()))
        );
        assert_eq!(
            sel(
                &ColumnType::Json,
                false,
                MyValue::Bytes(br#"{"k": [1, 2]}"#.to_vec())
            ),
            Ok(Value::Text(r#"{"k": [1, 2]}"#.into())),
            "MariaDB JSON is text, kept as written"
        );
        assert_eq!(
            sel(&ColumnType::Utf8, false, MyValue::NULL),
            Ok(Value::Null)
        );
    }
}
