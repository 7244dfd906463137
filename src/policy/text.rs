//! The engine-neutral bytes of a cell that `hash` and `mask` work on, so equal values give
//! equal outputs whichever engine, table or integer width they come from.
//!
//! Guarantees: the form is a pure function of the value and its column's type; it is the
//! text the NDJSON output writes for the cell (docs/output.md, NDJSON) without quotes —
//! integers and decimals in base 10 (a decimal with exactly its column's scale), floats
//! as their shortest round-tripping text, dates `YYYY-MM-DD`, times `HH:MM:SS.ffffff`,
//! timestamps `YYYY-MM-DDTHH:MM:SS.ffffff` (with `Z` for an instant), text, JSON and UUIDs
//! as they are — except binary cells, which are their own bytes (`mask` shows them as
//! lower-case hex). NULL has no form: it stays NULL under every policy.

use std::borrow::Cow;

use crate::change::{ColumnType, Value};

/// The bytes `hash` keys; `None` for NULL (and for a list, which no policy but `exclude`
/// and `null` takes).
pub fn hash_input<'a>(ty: &ColumnType, value: &'a Value) -> Option<Cow<'a, [u8]>> {
    match value {
        Value::Bytes(bytes) => Some(Cow::Borrowed(bytes.as_slice())),
        other => text_form(ty, other).map(|text| match text {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        }),
    }
}

/// The text `mask` and the row filter's comparisons of text see; `None` for NULL and
/// lists.
pub fn text_form<'a>(ty: &ColumnType, value: &'a Value) -> Option<Cow<'a, str>> {
    Some(match value {
        Value::Null | Value::List(_) => return None,
        Value::Text(s) => Cow::Borrowed(s.as_str()),
        Value::Bytes(b) => Cow::Owned(hex(b)),
        Value::Boolean(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
        Value::Int(i) => Cow::Owned(i.to_string()),
        Value::UInt(u) => Cow::Owned(u.to_string()),
        Value::Float(f) => Cow::Owned(float(ty, *f)),
        Value::Decimal(unscaled) => Cow::Owned(decimal(&unscaled.to_string(), scale(ty))),
        Value::Decimal256(le) => Cow::Owned(decimal(&wide_to_string(le), scale(ty))),
        Value::Date(days) => Cow::Owned(date(*days)),
        Value::Time(micros) => Cow::Owned(time(*micros)),
        Value::Timestamp(micros) => Cow::Owned(timestamp(*micros, *ty == ColumnType::TimestampTz)),
    })
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn scale(ty: &ColumnType) -> i8 {
    match ty {
        ColumnType::Decimal { scale, .. } => *scale,
        _ => 0,
    }
}

fn float(ty: &ColumnType, f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if *ty == ColumnType::Float32 {
        // The cell holds an f32 widened: its own shortest text, not the widened one's.
        return format!("{}", f as f32);
    }
    format!("{f}")
}

/// `digits` (an optionally negative base-10 integer) with `scale` digits after the point.
fn decimal(digits: &str, scale: i8) -> String {
    let (sign, digits) = match digits.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", digits),
    };
    if scale <= 0 {
        let zeros = "0".repeat(usize::from(scale.unsigned_abs()));
        if digits == "0" {
            return "0".to_owned();
        }
        return format!("{sign}{digits}{zeros}");
    }
    let scale = usize::from(scale as u8);
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// A 256-bit little-endian two's complement integer in base 10.
fn wide_to_string(le: &[u8; 32]) -> String {
    let negative = le[31] & 0x80 != 0;
    // Magnitude as eight u32 limbs, most significant first.
    let mut bytes = *le;
    if negative {
        let mut carry = true;
        for b in bytes.iter_mut() {
            *b = !*b;
            if carry {
                let (v, c) = b.overflowing_add(1);
                *b = v;
                carry = c;
            }
        }
    }
    let mut limbs: Vec<u32> = (0..8)
        .rev()
        .map(|i| {
            u32::from_le_bytes([
                bytes[i * 4],
                bytes[i * 4 + 1],
                bytes[i * 4 + 2],
                bytes[i * 4 + 3],
            ])
        })
        .collect();
    let mut digits = Vec::new();
    while limbs.iter().any(|&l| l != 0) {
        let mut rem = 0u64;
        for limb in limbs.iter_mut() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / 10) as u32;
            rem = cur % 10;
        }
        digits.push(b'0' + rem as u8);
    }
    if digits.is_empty() {
        return "0".to_owned();
    }
    if negative {
        digits.push(b'-');
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

fn date(days: i32) -> String {
    if days == i32::MAX {
        return "infinity".to_owned();
    }
    if days == -i32::MAX {
        return "-infinity".to_owned();
    }
    match chrono::NaiveDate::from_num_days_from_ce_opt(days.saturating_add(719_163)) {
        Some(d) => d.format("%Y-%m-%d").to_string(),
        None => format!("day {days}"),
    }
}

fn time(micros: i64) -> String {
    let secs = u32::try_from(micros.div_euclid(1_000_000)).ok();
    let nanos = (micros.rem_euclid(1_000_000) * 1_000) as u32;
    match secs.and_then(|s| chrono::NaiveTime::from_num_seconds_from_midnight_opt(s, nanos)) {
        Some(t) => t.format("%H:%M:%S%.6f").to_string(),
        // 24:00:00 and out-of-range times: their microseconds.
        None => format!("{micros}us"),
    }
}

fn timestamp(micros: i64, instant: bool) -> String {
    if micros == i64::MAX {
        return "infinity".to_owned();
    }
    if micros == -i64::MAX {
        return "-infinity".to_owned();
    }
    match chrono::DateTime::from_timestamp_micros(micros) {
        Some(t) if instant => t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        Some(t) => t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
        None => format!("{micros}us"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::*;

    fn form(ty: ColumnType, v: Value) -> String {
        text_form(&ty, &v).unwrap().into_owned()
    }

    #[test]
    fn every_width_and_engine_gives_one_text() {
        assert_eq!(form(Int16, Value::Int(-42)), "-42");
        assert_eq!(form(Int64, Value::Int(-42)), "-42");
        assert_eq!(form(UInt64, Value::UInt(u64::MAX)), "18446744073709551615");
        let dec = |s| Decimal {
            precision: 12,
            scale: s,
        };
        assert_eq!(form(dec(2), Value::Decimal(-5)), "-0.05");
        assert_eq!(form(dec(2), Value::Decimal(12345)), "123.45");
        assert_eq!(form(dec(0), Value::Decimal(7)), "7");
        assert_eq!(form(dec(-2), Value::Decimal(7)), "700");
        let mut wide = [0u8; 32];
        wide[0] = 0x39; // 12345 = 0x3039
        wide[1] = 0x30;
        assert_eq!(form(dec(2), Value::Decimal256(Box::new(wide))), "123.45");
        let minus_one = [0xffu8; 32];
        assert_eq!(form(dec(0), Value::Decimal256(Box::new(minus_one))), "-1");
        assert_eq!(form(Float32, Value::Float(f64::from(1.1f32))), "1.1");
        assert_eq!(form(Float64, Value::Float(0.1)), "0.1");
        assert_eq!(form(Date, Value::Date(19_723)), "2024-01-01");
        assert_eq!(form(Time, Value::Time(3_723_000_001)), "01:02:03.000001");
        assert_eq!(
            form(TimestampTz, Value::Timestamp(1_704_067_200_000_000)),
            "2024-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            form(Timestamp, Value::Timestamp(1_704_067_200_000_000)),
            "2024-01-01T00:00:00.000000"
        );
        assert_eq!(form(Binary, Value::Bytes(vec![0xde, 0xad])), "dead");
        assert!(text_form(&Utf8, &Value::Null).is_none());
        assert_eq!(
            &*hash_input(&Binary, &Value::Bytes(vec![1, 2])).unwrap(),
            &[1u8, 2]
        );
        assert_eq!(
            &*hash_input(&Int32, &Value::Int(7)).unwrap(),
            b"7".as_slice()
        );
    }
}
