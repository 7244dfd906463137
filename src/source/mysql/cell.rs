//! One binlog row-image cell, bytes → [`Value`]. Pure.
//!
//! [`decode_cell_as`] is the per-cell path of every rows event the drain reads
//! ([`super::rows`] walks the row images cell by cell through it): mysql_common's binlog
//! cell decoder, then [`values::convert`]. It is fuzzed
//! (`fuzz/fuzz_targets/mysql_binlog_cell.rs`) and property-tested over arbitrary bytes.
//! Guarantee: for any column description and any bytes it returns a value or an error,
//! never panics, and never reads past `raw`. Inputs on which mysql_common 0.37's decoder
//! would overflow (ill-formed packed DECIMAL groups, negative TIME2 of 1–2 fractional
//! digits) are refused before it runs.
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
        packed_decimal_is_well_formed(col.meta[0].into(), col.meta[1].into(), raw)
            .map_err(CellError::Malformed)?;
    }
    if col.raw == MyType::MYSQL_TYPE_TIME2 {
        time2_is_not_negative(raw).map_err(CellError::Unrepresentable)?;
    }
    let mut buf = ParseBuf(raw);
    let cell = BinlogValue::deserialize((col.raw, &col.meta[..], col.unsigned, false), &mut buf)
        .map_err(|e| CellError::Malformed(format!("cannot decode a {:?} cell: {e}", col.raw)))?;
    let used = raw.len() - buf.0.len();
    values::convert(col, ty, cell)
        .map(|v| (v, used))
        .map_err(CellError::Unrepresentable)
}

/// A TIME2 cell's first three bytes are its integer part (sign, hours, minutes, seconds)
/// offset by 0x800000, so a value below the offset is negative. Every negative TIME is
/// outside a day and refused by [`values::convert`] anyway; refusing it here, before
/// decoding, also keeps mysql_common 0.37 away from the `u32 - 0x100` overflow it hits on
/// a negative TIME(1|2) with a fraction.
fn time2_is_not_negative(raw: &[u8]) -> Result<(), String> {
    const TIMEF_INT_OFS: u32 = 0x80_0000;
    if let [a, b, c, ..] = *raw
        && u32::from_be_bytes([0, a, b, c]) < TIMEF_INT_OFS
    {
        return Err("a negative TIME is outside a day (00:00:00 to 23:59:59.999999)".to_owned());
    }
    Ok(())
}

/// Digits per 4-byte group of MySQL's packed DECIMAL, and the bytes of a partial group.
const DIGITS_PER_GROUP: usize = 9;
const PARTIAL_GROUP_BYTES: [usize; DIGITS_PER_GROUP + 1] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/// Checks a packed DECIMAL(precision, scale) cell at the start of `raw` (sign bit flipped;
/// a negative value has every byte inverted; big-endian digit groups of 9, partial groups
/// at both ends): each group must hold fewer digits than it has room for. The decoder
/// multiplies a partial fraction group up without a bound check, so an ill-formed group
/// would overflow there.
fn packed_decimal_is_well_formed(precision: usize, scale: usize, raw: &[u8]) -> Result<(), String> {
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
    for digits in layout {
        let len = PARTIAL_GROUP_BYTES[digits];
        let mut group = 0u64;
        for (i, b) in bytes[at..at + len].iter().enumerate() {
            let b = if at + i == 0 { b ^ 0x80 } else { *b };
            group = (group << 8) | u64::from(if negative { !b } else { b });
        }
        at += len;
        if group >= 10u64.pow(digits as u32) {
            return Err(format!(
                "malformed DECIMAL cell: a {digits}-digit group holds {group}"
            ));
        }
    }
    Ok(())
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
    const TYPES: [MyType; 26] = [
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
    ];

    const CHARSETS: [&str; 5] = ["utf8mb4", "latin1", "binary", "ascii", "gbk"];

    fn column(raw: MyType, meta: Vec<u8>, unsigned: bool, charset: &str) -> BinlogColumn {
        BinlogColumn {
            name: "c".into(),
            raw,
            meta,
            unsigned,
            nullable: true,
            charset: Some(charset.into()),
            labels: vec!["a".into(), "b".into(), "c".into()],
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
    fn a_negative_time2_is_refused_as_outside_a_day_not_overflowed() {
        for decimals in 0..=6u8 {
            let col = column(MyType::MYSQL_TYPE_TIME2, vec![decimals], false, "utf8mb4");
            let frac_len = usize::from(decimals).div_ceil(2);
            // -00:00:01 (the integer part just below TIMEF_INT_OFS) with a non-zero fraction.
            let mut negative = vec![0x7f, 0xff, 0xff];
            negative.extend(std::iter::repeat_n(0x01, frac_len));
            let err = decode_cell(&col, &negative).unwrap_err();
            assert!(
                matches!(&err, CellError::Unrepresentable(r) if r.contains("outside a day")),
                "TIME({decimals}): {err:?}"
            );
            // 00:00:01 with the same fraction bytes decodes, and uses every byte.
            let mut positive = vec![0x80, 0x00, 0x01];
            positive.extend(std::iter::repeat_n(0x01, frac_len));
            let (value, used) = decode_cell(&col, &positive).unwrap();
            assert_eq!(used, 3 + frac_len, "TIME({decimals})");
            assert!(
                matches!(value, Value::Time(us) if (1_000_000..2_000_000).contains(&us)),
                "TIME({decimals}): {value:?}"
            );
        }
    }

    #[test]
    fn malformed_and_unrepresentable_cells_are_told_apart() {
        let dec = column(MyType::MYSQL_TYPE_NEWDECIMAL, vec![3, 1], false, "binary");
        assert!(matches!(
            decode_cell(&dec, &[0x80 | 12, 0x7f]),
            Err(CellError::Malformed(_))
        ));
        let date = column(MyType::MYSQL_TYPE_NEWDATE, vec![], false, "binary");
        // 0000-00-00: a well-formed cell with no calendar date.
        let zero = decode_cell(&date, &[0, 0, 0]);
        assert!(
            matches!(zero, Err(CellError::Unrepresentable(_))),
            "{zero:?}"
        );
    }
}
