//! The MySQL / MariaDB values that have no plain Arrow form, and the exact form each is
//! written in. Pure; the change stream and the baseline both go through it.
//!
//! Guarantees — every value is representable, none stops the run or becomes NULL:
//! * **TIME** is a signed duration (−838:59:59.999999 to 838:59:59.999999), not a time of
//!   day, so it is written as its text, exactly as the server prints it (`-01:30:00`,
//!   `123:00:00.500`, with the column's fractional digits), declared `sluice.form = text`.
//! * **Non-calendar dates** — the zero date `0000-00-00`, dates with a zero month or day
//!   (`2024-00-10`), `ALLOW_INVALID_DATES` dates (`2024-02-30`) and the zero DATETIME /
//!   TIMESTAMP — are written far below every real date, encoding the digits losslessly:
//!   a DATE as day `-1000000000 - yyyymmdd`, a DATETIME / TIMESTAMP as microsecond
//!   `-100000000000000000 - (yyyymmdd * 86400000000 + microsecond of the day)`. Such
//!   columns declare the formula in `sluice.zero_dates`; real dates (0000-01-01 at the
//!   earliest) never reach that range, and DuckDB reads the values as far-BC dates.
//! * **Spatial values** arrive as MySQL's internal form (a 4-byte little-endian SRID,
//!   then WKB); they are written as WKB when the SRID is 0, and as EWKB (the type word's
//!   `0x20000000` flag, the SRID after it — PostGIS's extended WKB) otherwise, so the SRID
//!   is never lost; declared `sluice.form = wkb`.
//! * **MariaDB's `inet6` and `inet4`** arrive as their 16 / 4 network-order bytes; they
//!   are written as the server's text of them ([`inet6_text`], MariaDB's own algorithm:
//!   the first longest run of zero groups compressed, IPv4-compatible and IPv4-mapped
//!   addresses with a dotted tail), declared `sluice.form = text`; **`uuid`** arrives in
//!   MariaDB's record layout (an RFC 4122 version 1–5 UUID with its five groups in
//!   reverse order, for index locality; any other value as is) and is written as its
//!   canonical lower-case text ([`uuid_text`]).

use std::collections::BTreeMap;

/// Field metadata key saying how a column's value is held.
pub const FORM_KEY: &str = "sluice.form";
/// Field metadata key carrying the non-calendar date encoding of a column.
pub const ZERO_DATES_KEY: &str = "sluice.zero_dates";
/// Field metadata key naming the character set of a column written as its raw bytes.
pub const CHARSET_KEY: &str = "sluice.charset";

/// Day number of the zero date `0000-00-00`; a non-calendar date is this minus `yyyymmdd`.
pub const ZERO_DATE_DAYS: i32 = -1_000_000_000;
/// Microsecond of the zero datetime; a non-calendar one is this minus
/// `yyyymmdd * 86400000000 + microsecond of the day`.
pub const ZERO_DATETIME_MICROS: i64 = -100_000_000_000_000_000;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The `sluice.zero_dates` value of a DATE column.
pub const ZERO_DATE_RULE: &str = "days = -1000000000 - yyyymmdd";
/// The `sluice.zero_dates` value of a DATETIME / TIMESTAMP column.
pub const ZERO_DATETIME_RULE: &str =
    "microseconds = -100000000000000000 - (yyyymmdd * 86400000000 + microsecond of the day)";

/// The field metadata `key = value`.
pub fn metadata(key: &str, value: &str) -> BTreeMap<String, String> {
    [(key.to_owned(), value.to_owned())].into()
}

/// `yyyymmdd` of a date's digits, which MySQL bounds at 9999, 12 and 31.
fn digits(y: u16, m: u8, d: u8) -> Result<i64, String> {
    if y > 9999 || m > 12 || d > 31 {
        return Err(format!("{y:04}-{m:02}-{d:02} is not a MySQL date"));
    }
    Ok(i64::from(y) * 10_000 + i64::from(m) * 100 + i64::from(d))
}

/// The day number of a non-calendar DATE.
pub fn zero_date_days(y: u16, m: u8, d: u8) -> Result<i32, String> {
    // yyyymmdd ≤ 99_991_231, so this stays far above i32::MIN.
    Ok(ZERO_DATE_DAYS - digits(y, m, d)? as i32)
}

/// The microsecond of a non-calendar DATETIME / TIMESTAMP (its time of day in range).
pub fn zero_datetime_micros(y: u16, m: u8, d: u8, micros_of_day: i64) -> Result<i64, String> {
    Ok(ZERO_DATETIME_MICROS - (digits(y, m, d)? * MICROS_PER_DAY + micros_of_day))
}

/// The server's text of a TIME: `[-]HH:MM:SS[.f…]` with `fsp` fractional digits.
pub fn time_text(negative: bool, hours: u64, m: u8, s: u8, micros: u32, fsp: u8) -> String {
    let sign = if negative { "-" } else { "" };
    let mut text = format!("{sign}{hours:02}:{m:02}:{s:02}");
    let fsp = usize::from(fsp.min(6));
    if fsp > 0 {
        let fraction = format!("{micros:06}");
        text.push('.');
        text.push_str(&fraction[..fsp]);
    }
    text
}

/// The fractional-second digits of a declared `time(3)` (0 without a length).
pub fn declared_fsp(column_type: &str) -> u8 {
    column_type
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0)
}

/// MySQL's internal spatial value (SRID, WKB) → WKB, or EWKB carrying a non-zero SRID.
pub fn wkb(internal: &[u8]) -> Result<Vec<u8>, String> {
    let [s0, s1, s2, s3, order, t0, t1, t2, t3, body @ ..] = internal else {
        return Err(format!(
            "a spatial value of {} bytes is shorter than its SRID and WKB header",
            internal.len()
        ));
    };
    let srid = u32::from_le_bytes([*s0, *s1, *s2, *s3]);
    if srid == 0 {
        return Ok(internal[4..].to_vec());
    }
    let little = match order {
        1 => true,
        0 => false,
        other => return Err(format!("WKB byte order {other} is neither 0 nor 1")),
    };
    let (kind, srid_bytes) = if little {
        (u32::from_le_bytes([*t0, *t1, *t2, *t3]), srid.to_le_bytes())
    } else {
        (u32::from_be_bytes([*t0, *t1, *t2, *t3]), srid.to_be_bytes())
    };
    let kind = kind | 0x2000_0000;
    let mut out = Vec::with_capacity(internal.len() + 4);
    out.push(*order);
    out.extend(if little {
        kind.to_le_bytes()
    } else {
        kind.to_be_bytes()
    });
    out.extend(srid_bytes);
    out.extend(body);
    Ok(out)
}

/// The canonical text of a MariaDB UUID from its record bytes: a record whose byte 6
/// has the RFC 4122 variant bit and whose byte 8 is a version 1–5 nibble holds the
/// groups swapped (`nnnnnnnnnnnn vsss Vhhh mmmm llllllll`) and is swapped back.
pub fn uuid_text(record: &[u8]) -> Result<String, String> {
    let Ok(record) = <[u8; 16]>::try_from(record) else {
        return Err(format!("a UUID value of {} bytes", record.len()));
    };
    let swapped = record[6] & 0x80 != 0 && record[8] > 0 && record[8] < 0x60;
    let memory: Vec<u8> = if swapped {
        [
            &record[12..16],
            &record[10..12],
            &record[8..10],
            &record[6..8],
            &record[0..6],
        ]
        .concat()
    } else {
        record.to_vec()
    };
    let hex: String = memory.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// The text MariaDB prints for an INET4 value.
pub fn inet4_text(bytes: &[u8]) -> Result<String, String> {
    match bytes {
        [a, b, c, d] => Ok(format!("{a}.{b}.{c}.{d}")),
        other => Err(format!("an INET4 value of {} bytes", other.len())),
    }
}

/// The text MariaDB prints for an INET6 value (`Inet6::to_string`).
pub fn inet6_text(bytes: &[u8]) -> Result<String, String> {
    if bytes.len() != 16 {
        return Err(format!("an INET6 value of {} bytes", bytes.len()));
    }
    let words: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]))
        .collect();
    // The first longest run of zero words (a single zero word counts).
    let (mut gap_pos, mut gap_len) = (usize::MAX, 0);
    let mut i = 0;
    while i < 8 {
        if words[i] == 0 {
            let start = i;
            while i < 8 && words[i] == 0 {
                i += 1;
            }
            if i - start > gap_len {
                (gap_pos, gap_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if i == gap_pos {
            if i == 0 {
                out.push(':');
            }
            out.push(':');
            i += gap_len;
            continue;
        }
        if i == 6 && gap_pos == 0 && (gap_len == 6 || (gap_len == 5 && words[5] == 0xffff)) {
            out.push_str(&inet4_text(&bytes[12..])?);
            return Ok(out);
        }
        out.push_str(&format!("{:x}", words[i]));
        if i + 1 != 8 {
            out.push(':');
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_calendar_dates_encode_their_digits_below_every_real_date() {
        assert_eq!(zero_date_days(0, 0, 0), Ok(-1_000_000_000));
        assert_eq!(zero_date_days(2024, 0, 10), Ok(-1_020_240_010));
        assert_eq!(zero_date_days(9999, 12, 31), Ok(-1_099_991_231));
        assert!(zero_date_days(65535, 15, 31).is_err());
        // 0000-01-01, the earliest real date, is day -719528.
        assert!(zero_date_days(0, 0, 0).unwrap() < -719_528);
        assert_eq!(
            zero_datetime_micros(0, 0, 0, 0),
            Ok(-100_000_000_000_000_000)
        );
        let v = zero_datetime_micros(2024, 0, 10, 3_600_000_001).unwrap();
        let k = -(v - ZERO_DATETIME_MICROS);
        assert_eq!(
            (k / MICROS_PER_DAY, k % MICROS_PER_DAY),
            (20_240_010, 3_600_000_001)
        );
        let lowest = zero_datetime_micros(9999, 12, 31, MICROS_PER_DAY - 1).unwrap();
        assert!(lowest > -i64::MAX, "above DuckDB's -infinity");
    }

    fn ip(text: &str) -> String {
        let addr: std::net::Ipv6Addr = text.parse().unwrap();
        inet6_text(&addr.octets()).unwrap()
    }

    #[test]
    fn inet_values_print_as_mariadb_prints_them() {
        assert_eq!(ip("::"), "::");
        assert_eq!(ip("::1"), "::1");
        assert_eq!(ip("1::"), "1::");
        assert_eq!(ip("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
        assert_eq!(ip("::1.2.3.4"), "::1.2.3.4");
        assert_eq!(ip("2001:db8::1"), "2001:db8::1");
        // A single zero group is compressed too; the first of equal runs wins.
        assert_eq!(ip("1:0:2:3:4:5:6:7"), "1::2:3:4:5:6:7");
        assert_eq!(ip("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4");
        assert_eq!(ip("fe80::abcd:ef01"), "fe80::abcd:ef01");
        assert_eq!(inet4_text(&[10, 0, 0, 1]).unwrap(), "10.0.0.1");
        assert!(inet6_text(&[0; 4]).is_err());
    }

    #[test]
    fn uuids_are_swapped_back_from_the_record_layout() {
        // 6ccd780c-baba-1026-9564-5b8c656024db (version 1) as MariaDB stores it.
        let record = [
            0x5b, 0x8c, 0x65, 0x60, 0x24, 0xdb, 0x95, 0x64, 0x10, 0x26, 0xba, 0xba, 0x6c, 0xcd,
            0x78, 0x0c,
        ];
        assert_eq!(
            uuid_text(&record).unwrap(),
            "6ccd780c-baba-1026-9564-5b8c656024db"
        );
        // Not RFC 4122 version 1-5: as is.
        assert_eq!(
            uuid_text(&[0xff; 16]).unwrap(),
            "ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
        assert_eq!(
            uuid_text(&[0; 16]).unwrap(),
            "00000000-0000-0000-0000-000000000000"
        );
        assert!(uuid_text(&[0; 4]).is_err());
    }

    #[test]
    fn times_print_as_the_server_prints_them() {
        assert_eq!(time_text(true, 838, 59, 59, 0, 0), "-838:59:59");
        assert_eq!(time_text(false, 34, 0, 0, 500_000, 3), "34:00:00.500");
        assert_eq!(time_text(true, 0, 0, 1, 0, 0), "-00:00:01");
        assert_eq!(time_text(false, 1, 2, 3, 4, 6), "01:02:03.000004");
        assert_eq!(declared_fsp("time(3)"), 3);
        assert_eq!(declared_fsp("time"), 0);
    }

    #[test]
    fn spatial_values_are_wkb_with_any_srid_kept() {
        // POINT(1 2), little-endian WKB.
        let mut point = vec![1, 1, 0, 0, 0];
        point.extend(1f64.to_le_bytes());
        point.extend(2f64.to_le_bytes());
        let mut internal = vec![0, 0, 0, 0];
        internal.extend(&point);
        assert_eq!(wkb(&internal).unwrap(), point);
        let mut with_srid = 4326u32.to_le_bytes().to_vec();
        with_srid.extend(&point);
        let ewkb = wkb(&with_srid).unwrap();
        assert_eq!(&ewkb[..9], &[1, 1, 0, 0, 0x20, 0xE6, 0x10, 0, 0]);
        assert_eq!(&ewkb[9..], &point[5..]);
        // Big-endian WKB keeps its order.
        let mut be = vec![0, 0, 0, 0, 1];
        be.extend(1f64.to_be_bytes());
        be.extend(2f64.to_be_bytes());
        let mut internal = 3857u32.to_le_bytes().to_vec();
        internal.extend(&be);
        assert_eq!(
            &wkb(&internal).unwrap()[..9],
            &[0, 0x20, 0, 0, 1, 0, 0, 0x0F, 0x11]
        );
        assert!(wkb(&[0, 0, 0, 0, 1]).is_err());
        assert!(wkb(&[1, 0, 0, 0, 7, 1, 0, 0, 0]).is_err());
    }
}
