//! One binlog row-image cell, bytes → [`Value`]. Pure.
//!
//! [`decode_cell_as`] is the per-cell path of every rows event the drain reads
//! ([`super::rows`] walks the row images cell by cell through it): mysql_common's binlog
//! cell decoder, then [`values::convert`] — except for DECIMAL(p ≤ 38), the integers,
//! floats, VARCHAR and TIMESTAMP2, read here straight from the bytes with the same result
//! (property-tested against that decoder). It is fuzzed
//! (`fuzz/fuzz_targets/mysql_binlog_cell.rs`) and property-tested over arbitrary bytes.
//! Guarantee: for any column description and any bytes it returns a value or an error,
//! never panics, and never reads past `raw`. Inputs on which mysql_common 0.37's decoder
//! would overflow (ill-formed packed DECIMAL groups) are refused before it runs; TIME
//! cells (TIME2 and the old TIME) are decoded here, sign included, since that decoder
//! overflows on a negative TIME(1|2) and reads the old format unsigned.
//!
//! The column's metadata must be as long as a TABLE_MAP event gives it for its type (the
//! decoder indexes it unchecked); a shorter one is refused before decoding.

use std::fmt;

use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType as MyType;
use mysql_common::io::ParseBuf;
use mysql_common::proto::MyDeserialize;

use super::values::{self, BinlogColumn};
use crate::change::{ColumnType, Value};

/// Why a cell could not be turned into a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellError {
    /// The bytes are not a cell of the column's binlog type (the event does not match its
    /// TABLE_MAP, or the log is corrupt).
    Malformed(String),
    /// A well-formed cell whose value has no exact representation in the output type.
    Unrepresentable(String),
}

impl CellError {
    /// The reason, without the kind.
    pub fn reason(&self) -> &str {
        match self {
            CellError::Malformed(r) | CellError::Unrepresentable(r) => r,
        }
    }
}

impl fmt::Display for CellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// Decodes the non-NULL cell of `col` at the start of `raw` as the column's own binlog
/// type; returns the value and the number of bytes the cell occupied.
pub fn decode_cell(col: &BinlogColumn, raw: &[u8]) -> Result<(Value, usize), CellError> {
    let ty = values::binlog_type(col).map_err(CellError::Unrepresentable)?;
    decode_cell_as(col, &ty, raw)
}

/// Decodes the non-NULL cell of `col` at the start of `raw` into a value of `ty` (the
/// output column's type, which [`values::compatible`] accepts for the binlog type);
/// returns the value and the number of bytes the cell occupied.
pub fn decode_cell_as(
    col: &BinlogColumn,
    ty: &ColumnType,
    raw: &[u8],
) -> Result<(Value, usize), CellError> {
    let need = metadata_len(col.raw);
    if col.meta.len() < need {
        return Err(CellError::Malformed(format!(
            "{:?} needs {need} metadata bytes, the column has {}",
            col.raw,
            col.meta.len()
        )));
    }
    if col.raw == MyType::MYSQL_TYPE_NEWDECIMAL {
        let packed = packed_decimal(col.meta[0].into(), col.meta[1].into(), raw)
            .map_err(CellError::Malformed)?;
        // The output column is the binlog's own DECIMAL(p,s), p ≤ 38: the digit groups
        // are the unscaled integer, no text in between.
        if let (ColumnType::Decimal { precision, scale }, Some(unscaled)) = (ty, packed.unscaled)
            && *precision == col.meta[0]
            && i16::from(*scale) == i16::from(col.meta[1])
        {
            return Ok((Value::Decimal(unscaled), packed.size));
        }
    }
    if let Some(done) = decode_common(col, ty, raw) {
        return done;
    }
    decode_through_mysql_common(col, ty, raw)
}

/// The cells of the most common types read straight from the bytes: integers, floats,
/// VARCHAR and TIMESTAMP2 (which mysql_common renders as text for [`values::convert`] to
/// parse back). Each gives exactly what [`decode_through_mysql_common`] gives (property
/// tested below); `None` for any other type, and for a cell shorter than its type, whose
/// error the general path words.
fn decode_common(
    col: &BinlogColumn,
    ty: &ColumnType,
    raw: &[u8],
) -> Option<Result<(Value, usize), CellError>> {
    let le = |n: usize| -> Option<u64> {
        let bytes = raw.get(..n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
        )
    };
    // An integer of `n` bytes, sign-extended unless the column is UNSIGNED.
    let int = |n: usize| -> Option<i64> {
        let v = le(n)?;
        let unused = 64 - 8 * n as u32;
        Some(if col.unsigned {
            v as i64
        } else {
            ((v << unused) as i64) >> unused
        })
    };
    Some(match col.raw {
        MyType::MYSQL_TYPE_TINY => done(values::int_value(ty, int(1)?), 1),
        MyType::MYSQL_TYPE_SHORT => done(values::int_value(ty, int(2)?), 2),
        // Unsigned and signed alike unextended: `convert` extends a signed one's sign
        // (whatever the output type).
        MyType::MYSQL_TYPE_INT24 => {
            let value = mysql_common::value::Value::Int(le(3)? as i64);
            done(values::convert(col, ty, BinlogValue::Value(value)), 3)
        }
        MyType::MYSQL_TYPE_LONG => done(values::int_value(ty, int(4)?), 4),
        MyType::MYSQL_TYPE_LONGLONG => {
            let v = le(8)?;
            let value = if col.unsigned {
                values::uint_value(ty, v)
            } else {
                values::int_value(ty, v as i64)
            };
            done(value, 8)
        }
        MyType::MYSQL_TYPE_FLOAT => done(
            Ok(Value::Float(f64::from(f32::from_bits(le(4)? as u32)))),
            4,
        ),
        MyType::MYSQL_TYPE_DOUBLE => done(Ok(Value::Float(f64::from_bits(le(8)?))), 8),
        MyType::MYSQL_TYPE_VARCHAR | MyType::MYSQL_TYPE_VAR_STRING => {
            let declared = u16::from_le_bytes([*col.meta.first()?, *col.meta.get(1)?]);
            let prefix = if declared < 256 { 1 } else { 2 };
            let len = le(prefix)? as usize;
            let bytes = raw.get(prefix..prefix + len)?;
            done(values::bytes_value(col, ty, bytes.to_vec()), prefix + len)
        }
        MyType::MYSQL_TYPE_TIMESTAMP2 => return timestamp2(col, ty, raw),
        _ => return None,
    })
}

/// A converted cell that occupied `used` bytes.
fn done(value: Result<Value, String>, used: usize) -> Result<(Value, usize), CellError> {
    value.map(|v| (v, used)).map_err(CellError::Unrepresentable)
}

/// A TIMESTAMP2 cell: big-endian seconds since the epoch, then 0–3 big-endian bytes of
/// fraction by the column's fractional digits; `0` (with no fraction) is the zero
/// timestamp, encoded as [`values::convert`] encodes it.
fn timestamp2(
    col: &BinlogColumn,
    ty: &ColumnType,
    raw: &[u8],
) -> Option<Result<(Value, usize), CellError>> {
    if !matches!(ty, ColumnType::Timestamp | ColumnType::TimestampTz) {
        return None;
    }
    let be = |bytes: &[u8]| bytes.iter().fold(0i64, |acc, b| (acc << 8) | i64::from(*b));
    let (frac_len, unit) = match *col.meta.first()? {
        0 => (0, 0),
        1 | 2 => (1, 10_000),
        3 | 4 => (2, 100),
        5 | 6 => (3, 1),
        _ => return None,
    };
    let seconds = be(raw.get(..4)?);
    let micros = be(raw.get(4..4 + frac_len)?) * unit;
    // The server writes seconds below 2^31 and a fraction below one second; anything else
    // is left to the general path, which words (or reads) it its own way.
    if seconds > i64::from(i32::MAX) || !(0..1_000_000).contains(&micros) {
        return None;
    }
    let value = if seconds == 0 && micros == 0 {
        super::forms::ZERO_DATETIME_MICROS
    } else {
        seconds * 1_000_000 + micros
    };
    Some(Ok((Value::Timestamp(value), 4 + frac_len)))
}

/// Decodes with mysql_common's cell decoder (TIME and TIME2 with ours), then converts to
/// `ty`.
fn decode_through_mysql_common(
    col: &BinlogColumn,
    ty: &ColumnType,
    raw: &[u8],
) -> Result<(Value, usize), CellError> {
    let (cell, used) = match col.raw {
        MyType::MYSQL_TYPE_TIME2 => time2(raw, col.meta[0]).map_err(CellError::Malformed)?,
        MyType::MYSQL_TYPE_TIME => old_time(raw).map_err(CellError::Malformed)?,
        _ => {
            let mut buf = ParseBuf(raw);
            let cell =
                BinlogValue::deserialize((col.raw, &col.meta[..], col.unsigned, false), &mut buf)
                    .map_err(|e| {
                    CellError::Malformed(format!("cannot decode a {:?} cell: {e}", col.raw))
                })?;
            (cell, raw.len() - buf.0.len())
        }
    };
    values::convert(col, ty, cell)
        .map(|v| (v, used))
        .map_err(CellError::Unrepresentable)
}

/// Decodes a TIME2 cell with `fsp` fractional digits (MySQL's `my_time_packed_from_binary`
/// and `TIME_from_longlong_time_packed`): three big-endian bytes of sign, hours, minutes and
/// seconds offset by 0x800000, then 0–3 fraction bytes; a negative value's fraction is
/// borrowed from its integer part.
fn time2(raw: &[u8], fsp: u8) -> Result<(BinlogValue<'static>, usize), String> {
    const TIMEF_INT_OFS: i64 = 0x80_0000;
    const TIMEF_OFS: i64 = 0x8000_0000_0000;
    let frac_len = usize::from(fsp.min(6)).div_ceil(2);
    let len = 3 + frac_len;
    let Some(bytes) = raw.get(..len) else {
        return Err(format!(
            "a TIME2 cell needs {len} bytes, {} remain",
            raw.len()
        ));
    };
    let be = |b: &[u8]| b.iter().fold(0i64, |acc, x| (acc << 8) | i64::from(*x));
    let int_part = be(&bytes[..3]) - TIMEF_INT_OFS;
    let packed = match frac_len {
        0 => int_part << 24,
        1 | 2 => {
            let (scale, span) = if frac_len == 1 {
                (10_000, 0x100)
            } else {
                (100, 0x1_0000)
            };
            let (mut int_part, mut frac) = (int_part, be(&bytes[3..]));
            if int_part < 0 && frac != 0 {
                int_part += 1;
                frac -= span;
            }
            (int_part << 24) + frac * scale
        }
        _ => be(bytes) - TIMEF_OFS,
    };
    let negative = packed < 0;
    let magnitude = packed.unsigned_abs();
    let hms = magnitude >> 24;
    let micros = (magnitude % (1 << 24)) as u32;
    let hours = ((hms >> 12) % (1 << 10)) as u32;
    let minutes = ((hms >> 6) % (1 << 6)) as u8;
    let seconds = (hms % (1 << 6)) as u8;
    if minutes > 59 || seconds > 59 || micros > 999_999 {
        return Err(format!(
            "malformed TIME2 cell: {hours}:{minutes}:{seconds}.{micros}"
        ));
    }
    let value = mysql_async::Value::Time(
        negative,
        hours / 24,
        (hours % 24) as u8,
        minutes,
        seconds,
        micros,
    );
    Ok((BinlogValue::Value(value), len))
}

/// Decodes an old-format TIME cell: a signed little-endian 3-byte `±HHMMSS`.
fn old_time(raw: &[u8]) -> Result<(BinlogValue<'static>, usize), String> {
    let [a, b, c, ..] = *raw else {
        return Err(format!("a TIME cell needs 3 bytes, {} remain", raw.len()));
    };
    // Sign-extend the 24-bit value.
    let v = i32::from_le_bytes([a, b, c, 0]) << 8 >> 8;
    let magnitude = v.unsigned_abs();
    let (hours, minutes, seconds) = (magnitude / 10_000, (magnitude / 100) % 100, magnitude % 100);
    if minutes > 59 || seconds > 59 {
        return Err(format!("malformed TIME cell {v}"));
    }
    let value = mysql_async::Value::Time(
        v < 0,
        hours / 24,
        (hours % 24) as u8,
        minutes as u8,
        seconds as u8,
        0,
    );
    Ok((BinlogValue::Value(value), 3))
}

/// Digits per 4-byte group of MySQL's packed DECIMAL, and the bytes of a partial group.
const DIGITS_PER_GROUP: usize = 9;
const PARTIAL_GROUP_BYTES: [usize; DIGITS_PER_GROUP + 1] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/// A well-formed packed DECIMAL cell.
struct PackedDecimal {
    /// Bytes the cell occupies.
    size: usize,
    /// Its digits as one integer (the value × 10^scale), when it fits an i128 (always for
    /// a precision up to 38).
    unscaled: Option<i128>,
}

/// Reads a packed DECIMAL(precision, scale) cell at the start of `raw` (sign bit flipped;
/// a negative value has every byte inverted; big-endian digit groups of 9, partial groups
/// at both ends — the fraction's last group holds its leading digits, so the groups in
/// order spell the unscaled integer): each group must hold fewer digits than it has room
/// for. mysql_common's decoder multiplies a partial fraction group up without a bound
/// check, so an ill-formed group would overflow there.
fn packed_decimal(precision: usize, scale: usize, raw: &[u8]) -> Result<PackedDecimal, String> {
    if scale > precision {
        return Err(format!(
            "DECIMAL({precision},{scale}) cannot be represented"
        ));
    }
    let int_digits = precision - scale;
    let groups = |digits: usize| {
        let partial = digits % DIGITS_PER_GROUP;
        let full = std::iter::repeat_n(DIGITS_PER_GROUP, digits / DIGITS_PER_GROUP);
        (partial, full)
    };
    let (int_partial, int_full) = groups(int_digits);
    let (frac_partial, frac_full) = groups(scale);
    // Integer part: partial group first; fraction: full groups first.
    let layout: Vec<usize> = std::iter::once(int_partial)
        .filter(|&d| d > 0)
        .chain(int_full)
        .chain(frac_full)
        .chain(std::iter::once(frac_partial).filter(|&d| d > 0))
        .collect();
    let size: usize = layout.iter().map(|&d| PARTIAL_GROUP_BYTES[d]).sum();
    let Some(bytes) = raw.get(..size) else {
        return Err(format!(
            "a DECIMAL cell needs {size} bytes, {} remain",
            raw.len()
        ));
    };
    let negative = bytes.first().is_some_and(|b| b & 0x80 == 0);
    let mut at = 0;
    let mut unscaled = Some(0i128);
    for digits in layout {
        let len = PARTIAL_GROUP_BYTES[digits];
        let mut group = 0u64;
        for (i, b) in bytes[at..at + len].iter().enumerate() {
            let b = if at + i == 0 { b ^ 0x80 } else { *b };
            group = (group << 8) | u64::from(if negative { !b } else { b });
        }
        at += len;
        let room = 10u64.pow(digits as u32);
        if group >= room {
            return Err(format!(
                "malformed DECIMAL cell: a {digits}-digit group holds {group}"
            ));
        }
        unscaled = unscaled
            .and_then(|u| u.checked_mul(i128::from(room)))
            .and_then(|u| u.checked_add(i128::from(group)));
    }
    Ok(PackedDecimal {
        size,
        unscaled: unscaled.map(|u| if negative { -u } else { u }),
    })
}

/// Metadata bytes a TABLE_MAP event carries for a column of `raw` type (as the decoder
/// reads them).
fn metadata_len(raw: MyType) -> usize {
    use MyType::*;
    match raw {
        MYSQL_TYPE_FLOAT
        | MYSQL_TYPE_DOUBLE
        | MYSQL_TYPE_TIME2
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIMESTAMP2
        | MYSQL_TYPE_JSON
        | MYSQL_TYPE_GEOMETRY
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB => 1,
        MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_NEWDECIMAL
        | MYSQL_TYPE_SET
        | MYSQL_TYPE_ENUM
        | MYSQL_TYPE_STRING
        | MYSQL_TYPE_BIT => 2,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every binlog type sluice maps, as a TABLE_MAP names it (real types resolved).
    const TYPES: [MyType; 27] = [
        MyType::MYSQL_TYPE_TINY,
        MyType::MYSQL_TYPE_SHORT,
        MyType::MYSQL_TYPE_INT24,
        MyType::MYSQL_TYPE_LONG,
        MyType::MYSQL_TYPE_LONGLONG,
        MyType::MYSQL_TYPE_NEWDECIMAL,
        MyType::MYSQL_TYPE_FLOAT,
        MyType::MYSQL_TYPE_DOUBLE,
        MyType::MYSQL_TYPE_NEWDATE,
        MyType::MYSQL_TYPE_DATE,
        MyType::MYSQL_TYPE_DATETIME,
        MyType::MYSQL_TYPE_DATETIME2,
        MyType::MYSQL_TYPE_TIMESTAMP,
        MyType::MYSQL_TYPE_TIMESTAMP2,
        MyType::MYSQL_TYPE_TIME,
        MyType::MYSQL_TYPE_TIME2,
        MyType::MYSQL_TYPE_YEAR,
        MyType::MYSQL_TYPE_VARCHAR,
        MyType::MYSQL_TYPE_VAR_STRING,
        MyType::MYSQL_TYPE_STRING,
        MyType::MYSQL_TYPE_BLOB,
        MyType::MYSQL_TYPE_LONG_BLOB,
        MyType::MYSQL_TYPE_JSON,
        MyType::MYSQL_TYPE_ENUM,
        MyType::MYSQL_TYPE_SET,
        MyType::MYSQL_TYPE_BIT,
        MyType::MYSQL_TYPE_GEOMETRY,
    ];

    const CHARSETS: [&str; 7] = [
        "utf8mb4", "latin1", "binary", "ascii", "gbk", "ucs2", "utf32",
    ];

    fn column(raw: MyType, meta: Vec<u8>, unsigned: bool, charset: &str) -> BinlogColumn {
        BinlogColumn {
            name: "c".into(),
            raw,
            meta,
            unsigned,
            nullable: true,
            charset: Some(charset.into()),
            labels: vec!["a".into(), "b".into(), "c".into()],
            plugin: None,
            key: false,
        }
    }

    /// Packs `digits` (precision − scale integer digits, then scale fraction digits) as
    /// the binlog writes a DECIMAL(precision, scale).
    fn pack_decimal(precision: usize, scale: usize, negative: bool, digits: &[u8]) -> Vec<u8> {
        let (int, frac) = digits.split_at(precision - scale);
        let mut groups: Vec<&[u8]> = Vec::new();
        let lead = int.len() % DIGITS_PER_GROUP;
        if lead > 0 {
            groups.push(&int[..lead]);
        }
        groups.extend(int[lead..].chunks(DIGITS_PER_GROUP));
        groups.extend(frac.chunks(DIGITS_PER_GROUP));
        let mut out = Vec::new();
        for group in groups {
            let value = group.iter().fold(0u64, |acc, d| acc * 10 + u64::from(*d));
            let len = PARTIAL_GROUP_BYTES[group.len()];
            out.extend_from_slice(&value.to_be_bytes()[8 - len..]);
        }
        out[0] ^= 0x80;
        if negative {
            out.iter_mut().for_each(|b| *b = !*b);
        }
        out
    }

    proptest! {
        /// The digit-group decoding of a DECIMAL(p ≤ 38, s) cell gives what mysql_common's
        /// decoder and the text conversion give, byte count included.
        #[test]
        fn packed_decimals_decode_as_through_mysql_common(
            precision in 1usize..=40,
            scale_pick in 0usize..=40,
            negative in any::<bool>(),
            digits in proptest::collection::vec(0u8..10, 40),
            trailing in proptest::collection::vec(any::<u8>(), 0..3),
        ) {
            let scale = scale_pick.min(precision).min(30);
            let mut raw = pack_decimal(precision, scale, negative, &digits[..precision]);
            let size = raw.len();
            raw.extend_from_slice(&trailing);
            let col = column(MyType::MYSQL_TYPE_NEWDECIMAL, vec![precision as u8, scale as u8], false, "binary");
            let ty = values::decimal_type(precision as u8, scale as i8);
            let fast = decode_cell_as(&col, &ty, &raw).unwrap();
            prop_assert_eq!(fast.1, size);
            prop_assert_eq!(Ok(fast), decode_through_mysql_common(&col, &ty, &raw));
        }

    }

    /// The types [`decode_common`] reads, with metadata as a TABLE_MAP gives it.
    const COMMON: [(MyType, &[u8]); 12] = [
        (MyType::MYSQL_TYPE_TINY, &[]),
        (MyType::MYSQL_TYPE_SHORT, &[]),
        (MyType::MYSQL_TYPE_INT24, &[]),
        (MyType::MYSQL_TYPE_LONG, &[]),
        (MyType::MYSQL_TYPE_LONGLONG, &[]),
        (MyType::MYSQL_TYPE_FLOAT, &[4]),
        (MyType::MYSQL_TYPE_DOUBLE, &[8]),
        (MyType::MYSQL_TYPE_VARCHAR, &[64, 0]),
        (MyType::MYSQL_TYPE_VARCHAR, &[0x2c, 0x01]),
        (MyType::MYSQL_TYPE_VAR_STRING, &[255, 0]),
        (MyType::MYSQL_TYPE_TIMESTAMP2, &[0]),
        (MyType::MYSQL_TYPE_TIMESTAMP2, &[6]),
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// The direct decoding of the common types gives what mysql_common's decoder and
        /// the conversion give — value, byte count, or error — for any bytes and any
        /// output type the column may have.
        #[test]
        fn common_cells_decode_as_through_mysql_common(
            t in 0..COMMON.len(),
            fsp in 0u8..=6,
            unsigned in any::<bool>(),
            charset in proptest::sample::select(vec!["utf8mb4", "latin1", "binary", "ascii"]),
            ty in proptest::sample::select(vec![
                ColumnType::Int8, ColumnType::Int16, ColumnType::Int32, ColumnType::Int64,
                ColumnType::UInt8, ColumnType::UInt32, ColumnType::UInt64, ColumnType::Float32,
                ColumnType::Float64, ColumnType::Utf8, ColumnType::Binary, ColumnType::Timestamp,
                ColumnType::TimestampTz, ColumnType::Date,
            ]),
            small in proptest::collection::vec(any::<u8>(), 0..12),
            text in "[a-z\u{e9}\u{4e2d}]{0,20}",
            zero_timestamp in any::<bool>(),
        ) {
            let (raw_type, meta) = COMMON[t];
            let mut meta = meta.to_vec();
            if raw_type == MyType::MYSQL_TYPE_TIMESTAMP2 {
                meta[0] = fsp;
            }
            let col = column(raw_type, meta, unsigned, charset);
            let mut raw = small.clone();
            if matches!(raw_type, MyType::MYSQL_TYPE_VARCHAR | MyType::MYSQL_TYPE_VAR_STRING) && !small.is_empty() && small[0] % 2 == 0 {
                // A well-formed cell (the odd case keeps arbitrary bytes).
                let wide = col.meta[1] != 0;
                raw = if wide { (text.len() as u16).to_le_bytes().to_vec() } else { vec![text.len() as u8] };
                raw.extend_from_slice(text.as_bytes());
                raw.extend_from_slice(&small);
            }
            if raw_type == MyType::MYSQL_TYPE_TIMESTAMP2 && zero_timestamp && raw.len() >= 7 {
                raw[..7].fill(0);
            }
            let direct = decode_common(&col, &ty, &raw);
            if let Some(direct) = direct {
                let general = decode_through_mysql_common(&col, &ty, &raw);
                // NaN is not equal to itself: floats compare by their bits.
                let bits = |r: &Result<(Value, usize), CellError>| match r {
                    Ok((Value::Float(f), n)) => Some((f.to_bits(), *n)),
                    _ => None,
                };
                if bits(&direct).is_some() {
                    prop_assert_eq!(bits(&direct), bits(&general));
                } else {
                    prop_assert_eq!(direct, general);
                }
            } else {
                prop_assert!(
                    raw_type == MyType::MYSQL_TYPE_TIMESTAMP2
                        || raw.len() < 8
                        || matches!(raw_type, MyType::MYSQL_TYPE_VARCHAR | MyType::MYSQL_TYPE_VAR_STRING),
                    "only a short cell or a timestamp the server does not write is left to the general path"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_cells_never_panic(
            t in 0..TYPES.len(),
            meta in proptest::collection::vec(any::<u8>(), 0..3),
            unsigned in any::<bool>(),
            charset in proptest::sample::select(CHARSETS.to_vec()),
            raw in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let col = column(TYPES[t], meta, unsigned, charset);
            if let Ok((_, used)) = decode_cell(&col, &raw) {
                prop_assert!(used <= raw.len());
            }
        }

        #[test]
        fn integers_decode_exactly(v in any::<i64>(), unsigned in any::<bool>()) {
            let col = column(MyType::MYSQL_TYPE_LONGLONG, vec![], unsigned, "binary");
            let (value, used) = decode_cell(&col, &v.to_le_bytes()).unwrap();
            prop_assert_eq!(used, 8);
            prop_assert_eq!(value, if unsigned { Value::UInt(v as u64) } else { Value::Int(v) });
        }

        #[test]
        fn utf8_text_decodes_exactly(s in "\\PC{0,60}") {
            let col = column(MyType::MYSQL_TYPE_VARCHAR, vec![0xfc, 0x03], false, "utf8mb4");
            let mut raw = (s.len() as u16).to_le_bytes().to_vec();
            raw.extend_from_slice(s.as_bytes());
            let (value, used) = decode_cell(&col, &raw).unwrap();
            prop_assert_eq!(used, raw.len());
            prop_assert_eq!(value, Value::Text(s));
        }
    }

    /// Found by `arbitrary_cells_never_panic` (DECIMAL(8,5), bytes `00 00 03 47 00`: a
    /// negative value whose 5-digit fraction group holds 16_562_431): mysql_common's
    /// decoder overflowed multiplying the group up.
    #[test]
    fn an_ill_formed_decimal_group_is_refused() {
        let found = column(MyType::MYSQL_TYPE_NEWDECIMAL, vec![8, 5], false, "utf8mb4");
        assert!(
            decode_cell(&found, &[0, 0, 3, 71, 0])
                .unwrap_err()
                .reason()
                .contains("malformed")
        );
        let col = column(MyType::MYSQL_TYPE_NEWDECIMAL, vec![3, 1], false, "binary");
        // 12.3: int group 12 (1 byte, sign bit set for positive), fraction group 3.
        assert_eq!(
            decode_cell(&col, &[0x80 | 12, 3]),
            Ok((Value::Decimal(123), 2))
        );
        // -12.3: every byte inverted.
        assert_eq!(
            decode_cell(&col, &[!(0x80 | 12), !3]),
            Ok((Value::Decimal(-123), 2))
        );
        assert!(
            decode_cell(&col, &[0x80 | 12, 0x7f])
                .unwrap_err()
                .reason()
                .contains("malformed")
        );
        assert!(
            decode_cell(&col, &[0x80 | 100, 3])
                .unwrap_err()
                .reason()
                .contains("malformed")
        );
        assert!(
            decode_cell(&col, &[0x80])
                .unwrap_err()
                .reason()
                .contains("needs 2 bytes")
        );
    }

    #[test]
    fn short_metadata_is_refused_not_indexed() {
        let col = column(MyType::MYSQL_TYPE_STRING, vec![0xfe], false, "utf8mb4");
        assert!(
            decode_cell(&col, b"\x01a")
                .unwrap_err()
                .reason()
                .contains("metadata")
        );
    }

    #[test]
    fn negative_and_long_time2_values_decode_with_their_sign() {
        for decimals in 0..=6u8 {
            let col = column(MyType::MYSQL_TYPE_TIME2, vec![decimals], false, "utf8mb4");
            let frac_len = usize::from(decimals).div_ceil(2);
            // -00:00:01 (the integer part just below TIMEF_INT_OFS), fraction bytes 0:
            // exactly -1 s.
            let mut negative = vec![0x7f, 0xff, 0xff];
            negative.extend(std::iter::repeat_n(0x00, frac_len));
            let (value, used) = decode_cell(&col, &negative).unwrap();
            assert_eq!(used, 3 + frac_len, "TIME({decimals})");
            let want = if decimals == 0 {
                "-00:00:01".to_owned()
            } else {
                format!("-00:00:01.{}", "0".repeat(usize::from(decimals)))
            };
            assert_eq!(value, Value::Text(want), "TIME({decimals})");
            // 00:00:01 with fraction bytes 0x01 decodes, and uses every byte.
            let mut positive = vec![0x80, 0x00, 0x01];
            positive.extend(std::iter::repeat_n(0x01, frac_len));
            let (value, used) = decode_cell(&col, &positive).unwrap();
            assert_eq!(used, 3 + frac_len, "TIME({decimals})");
            assert!(
                matches!(&value, Value::Text(t) if t.starts_with("00:00:01")),
                "TIME({decimals}): {value:?}"
            );
        }
        // What MariaDB writes for TIME(6) '-838:59:59.999999' and TIME(2) '-01:00:00.50'.
        let t6 = column(MyType::MYSQL_TYPE_TIME2, vec![6], false, "utf8mb4");
        let packed = -(((838i64 << 12 | 59 << 6 | 59) << 24) + 999_999) + 0x8000_0000_0000;
        let bytes = &packed.to_be_bytes()[2..];
        assert_eq!(
            decode_cell(&t6, bytes).unwrap().0,
            Value::Text("-838:59:59.999999".into())
        );
        let t2 = column(MyType::MYSQL_TYPE_TIME2, vec![2], false, "utf8mb4");
        // The packed value's integer part floors (-4097 for -1 h 0.5 s), the fraction
        // byte is the (negative) remainder as a signed char: 0x100 - 50.
        let int_part = 0x80_0000 - 4097i64;
        let mut raw = (int_part as u32).to_be_bytes()[1..].to_vec();
        raw.push((0x100 - 50) as u8);
        assert_eq!(
            decode_cell(&t2, &raw).unwrap().0,
            Value::Text("-01:00:00.50".into())
        );
        let old = column(MyType::MYSQL_TYPE_TIME, vec![], false, "utf8mb4");
        let v: i32 = -(8_385_959);
        assert_eq!(
            decode_cell(&old, &v.to_le_bytes()[..3]).unwrap(),
            (Value::Text("-838:59:59".into()), 3)
        );
    }

    #[test]
    fn malformed_and_unrepresentable_cells_are_told_apart() {
        let dec = column(MyType::MYSQL_TYPE_NEWDECIMAL, vec![3, 1], false, "binary");
        assert!(matches!(
            decode_cell(&dec, &[0x80 | 12, 0x7f]),
            Err(CellError::Malformed(_))
        ));
        let date = column(MyType::MYSQL_TYPE_NEWDATE, vec![], false, "binary");
        // 0000-00-00: a well-formed cell with no calendar date, encoded.
        assert_eq!(
            decode_cell(&date, &[0, 0, 0]),
            Ok((Value::Date(super::super::forms::ZERO_DATE_DAYS), 3))
        );
    }
}
