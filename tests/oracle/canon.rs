//! The canonical text of a cell, shared by both sides of the comparison.
//!
//! The parts side renders Arrow cells ([`super::parts`]); each engine renders its own
//! `SELECT` into the same forms with these functions. Forms are chosen to be exact and
//! unambiguous, not pretty: floats are Rust's shortest round-trip text of the exact bits,
//! decimals are their digits at the column's scale, binary is lower-case hex, dates and
//! timestamps are proleptic-Gregorian ISO text computed here from day / microsecond counts
//! (astronomical years, so 1 BC is year 0), lists are a JSON array of canonical elements
//! (`null` for a NULL element, so `[""]`, `[null]` and `[]` differ).

/// A cell: `None` is SQL NULL.
pub type Cell = Option<String>;

pub fn float32(v: f32) -> String {
    format!("{v:?}")
}

pub fn float64(v: f64) -> String {
    format!("{v:?}")
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex text"))
        .collect()
}

/// `unscaled × 10^-scale` as decimal text with exactly `scale` fraction digits.
pub fn decimal(unscaled: &str, scale: i8) -> String {
    let (sign, digits) = match unscaled.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", unscaled),
    };
    if scale <= 0 {
        let zeros = "0".repeat((-scale) as usize);
        return if digits == "0" {
            "0".into()
        } else {
            format!("{sign}{digits}{zeros}")
        };
    }
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// (year, month, day) of a day count from 1970-01-01 (H. Hinnant's `civil_from_days`).
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days from 1970-01-01 to the given proleptic-Gregorian date (astronomical year).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn year(y: i64) -> String {
    if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("{y:04}")
    }
}

/// `YYYY-MM-DD` of a day count from 1970-01-01.
pub fn date(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{}-{m:02}-{d:02}", year(y))
}

/// `HH:MM:SS.ffffff` of microseconds since midnight (24:00:00 included).
pub fn time(micros: i64) -> String {
    let (s, us) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    format!("{:02}:{:02}:{:02}.{us:06}", s / 3600, (s / 60) % 60, s % 60)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff`, with a trailing `Z` for an instant (`utc`).
pub fn timestamp(micros: i128, utc: bool) -> String {
    let day_us = 86_400_000_000i128;
    let days = micros.div_euclid(day_us) as i64;
    let rest = micros.rem_euclid(day_us) as i64;
    format!(
        "{}T{}{}",
        date(days),
        time(rest),
        if utc { "Z" } else { "" }
    )
}

/// A list cell: the JSON array of its canonical elements.
pub fn list(elements: &[Cell]) -> String {
    serde_json::to_string(elements).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(decimal("-10", 4), "-0.0010");
        assert_eq!(decimal("123400", 4), "12.3400");
        assert_eq!(decimal("0", 2), "0.00");
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(-2_440_588), "-4713-11-24");
        assert_eq!(date(days_from_civil(2000, 2, 29)), "2000-02-29");
        assert_eq!(time(86_400_000_000), "24:00:00.000000");
        assert_eq!(
            timestamp(i128::from(i64::MAX), true),
            "294247-01-10T04:00:54.775807Z"
        );
        assert_eq!(list(&[Some("".into()), None]), r#"["",null]"#);
    }
}
