//! SQL Server log sequence numbers (`binary(10)` in the CDC functions and change tables).
//!
//! An LSN is three big-endian fields: the virtual log file sequence number (4 bytes), the
//! log block offset within it (4 bytes) and the record slot within the block (2 bytes).
//! Byte order of `binary(10)` is exactly that, so comparing the fields in order — what
//! the derived `Ord` does — is SQL Server's own `binary(10)` comparison.
//!
//! Text form: `VVVVVVVV:BBBBBBBB:RRRR`, fixed-width upper-case hex of the three fields
//! (the layout `fn_dblog` prints). Being fixed width with the most significant field
//! first, it sorts as a string in LSN order. Parsing also accepts the `0x…` binary
//! literal (20 hex digits) that SQL Server tools print.

use std::fmt;
use std::str::FromStr;

/// A SQL Server log sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn {
    /// Virtual log file sequence number.
    pub vlf: u32,
    /// Log block offset within the VLF.
    pub block: u32,
    /// Record slot within the block.
    pub record: u16,
}

/// Bytes in a `binary(10)` LSN.
pub const LSN_BYTES: usize = 10;

impl Lsn {
    /// The all-zero LSN (what `sys.fn_cdc_get_min_lsn` returns for an unknown instance).
    pub const ZERO: Lsn = Lsn {
        vlf: 0,
        block: 0,
        record: 0,
    };

    /// The largest representable LSN.
    pub const MAX: Lsn = Lsn {
        vlf: u32::MAX,
        block: u32::MAX,
        record: u16::MAX,
    };

    /// The `binary(10)` form.
    pub fn to_bytes(self) -> [u8; LSN_BYTES] {
        let mut out = [0u8; LSN_BYTES];
        out[..4].copy_from_slice(&self.vlf.to_be_bytes());
        out[4..8].copy_from_slice(&self.block.to_be_bytes());
        out[8..].copy_from_slice(&self.record.to_be_bytes());
        out
    }

    /// The LSN as one 80-bit unsigned integer.
    fn as_u128(self) -> u128 {
        (u128::from(self.vlf) << 48) | (u128::from(self.block) << 16) | u128::from(self.record)
    }

    fn from_u128(n: u128) -> Lsn {
        Lsn {
            vlf: (n >> 48) as u32,
            block: (n >> 16) as u32,
            record: n as u16,
        }
    }

    /// The next LSN, as `sys.fn_cdc_increment_lsn` computes it (the 80-bit value plus
    /// one); `None` at [`Lsn::MAX`].
    pub fn increment(self) -> Option<Lsn> {
        (self < Lsn::MAX).then(|| Lsn::from_u128(self.as_u128() + 1))
    }

    /// The previous LSN (the 80-bit value minus one); `None` at [`Lsn::ZERO`].
    pub fn decrement(self) -> Option<Lsn> {
        (self > Lsn::ZERO).then(|| Lsn::from_u128(self.as_u128() - 1))
    }

    /// True for the all-zero LSN.
    pub fn is_zero(self) -> bool {
        self == Lsn::ZERO
    }
}

/// The bytes were not a `binary(10)` LSN.
#[derive(Debug, thiserror::Error)]
#[error("an LSN is {LSN_BYTES} bytes, got {0}")]
pub struct LsnLengthError(usize);

impl TryFrom<&[u8]> for Lsn {
    type Error = LsnLengthError;

    fn try_from(raw: &[u8]) -> Result<Self, Self::Error> {
        let raw: &[u8; LSN_BYTES] = raw.try_into().map_err(|_| LsnLengthError(raw.len()))?;
        Ok(Lsn {
            vlf: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
            block: u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]),
            record: u16::from_be_bytes([raw[8], raw[9]]),
        })
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08X}:{:08X}:{:04X}", self.vlf, self.block, self.record)
    }
}

/// The text was not an LSN.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a SQL Server LSN (expected `VVVVVVVV:BBBBBBBB:RRRR` or 0x + 20 hex digits)")]
pub struct ParseLsnError(String);

impl FromStr for Lsn {
    type Err = ParseLsnError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = || ParseLsnError(text.to_owned());
        let hex = |part: &str, width: usize| {
            if part.len() != width || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(fail());
            }
            u32::from_str_radix(part, 16).map_err(|_| fail())
        };
        if let Some(digits) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            // Checked whole before slicing: a multi-byte character would put a slice
            // boundary inside it.
            if digits.len() != 2 * LSN_BYTES || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(fail());
            }
            return Ok(Lsn {
                vlf: hex(&digits[..8], 8)?,
                block: hex(&digits[8..16], 8)?,
                record: hex(&digits[16..], 4)? as u16,
            });
        }
        let mut parts = text.split(':');
        let (Some(v), Some(b), Some(r), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(fail());
        };
        Ok(Lsn {
            vlf: hex(v, 8)?,
            block: hex(b, 8)?,
            record: hex(r, 4)? as u16,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `position_parse` fuzz target: a non-ASCII character inside the 20
    /// digits of the `0x` form put a slice boundary inside it (a panic).
    #[test]
    fn non_ascii_in_the_hex_form_is_refused_not_sliced() {
        for text in [
            "0X000000000020309\u{23c}223",
            "0x0000000\u{e9}00000000000",
            "0x\u{1F600}0000000000000000",
        ] {
            assert!(text.parse::<Lsn>().is_err(), "{text:?}");
        }
        assert!(
            "mssql:0X000000000020309\u{23c}223"
                .parse::<crate::position::Position>()
                .is_err()
        );
        // Every placement of a 2-, 3- or 4-byte character among 20 bytes of digits.
        for wide in ['\u{e9}', '\u{2603}', '\u{1F600}'] {
            for at in 0..=20 - wide.len_utf8() {
                let text = format!(
                    "0x{}{wide}{}",
                    "0".repeat(at),
                    "0".repeat(20 - at - wide.len_utf8())
                );
                assert_eq!(text.len(), 22);
                assert!(text.parse::<Lsn>().is_err(), "{text:?}");
            }
        }
        assert_eq!(
            "0x0000002a0000000b0001".parse::<Lsn>().unwrap(),
            "0000002A:0000000B:0001".parse::<Lsn>().unwrap()
        );
    }
    use proptest::prelude::*;

    fn lsn() -> impl Strategy<Value = Lsn> {
        (any::<u32>(), any::<u32>(), any::<u16>()).prop_map(|(vlf, block, record)| Lsn {
            vlf,
            block,
            record,
        })
    }

    #[test]
    fn formats_fixed_width_and_reads_binary() {
        let raw = [0, 0, 0, 0x2A, 0, 0, 0x01, 0x50, 0, 0x03];
        let lsn = Lsn::try_from(&raw[..]).unwrap();
        assert_eq!(
            lsn,
            Lsn {
                vlf: 0x2A,
                block: 0x150,
                record: 3
            }
        );
        assert_eq!(lsn.to_string(), "0000002A:00000150:0003");
        assert_eq!(lsn.to_bytes(), raw);
        assert_eq!("0x0000002A000001500003".parse::<Lsn>().unwrap(), lsn);
        assert!(Lsn::try_from(&raw[..9]).is_err());
    }

    #[test]
    fn rejects_malformed_text() {
        for text in [
            "",
            "2A:150:3",
            "0000002A:00000150",
            "0000002A:00000150:0003:0000",
            "0000002A:0000015G:0003",
            "0x0000002A00000150000",
            "+000002A:00000150:0003",
        ] {
            assert!(text.parse::<Lsn>().is_err(), "{text}");
        }
    }

    #[test]
    fn increment_carries_across_fields() {
        let at = |vlf, block, record| Lsn { vlf, block, record };
        assert_eq!(at(1, 2, 3).increment(), Some(at(1, 2, 4)));
        assert_eq!(at(1, 2, u16::MAX).increment(), Some(at(1, 3, 0)));
        assert_eq!(at(1, u32::MAX, u16::MAX).increment(), Some(at(2, 0, 0)));
        assert_eq!(Lsn::MAX.increment(), None);
        assert_eq!(at(2, 0, 0).decrement(), Some(at(1, u32::MAX, u16::MAX)));
        assert_eq!(Lsn::ZERO.decrement(), None);
    }

    proptest! {
        #[test]
        fn text_and_binary_round_trip(a in lsn()) {
            prop_assert_eq!(a.to_string().parse::<Lsn>().unwrap(), a);
            prop_assert_eq!(Lsn::try_from(&a.to_bytes()[..]).unwrap(), a);
        }

        #[test]
        fn order_matches_text_and_binary_order(a in lsn(), b in lsn()) {
            prop_assert_eq!(a.to_string().cmp(&b.to_string()), a.cmp(&b));
            prop_assert_eq!(a.to_bytes().cmp(&b.to_bytes()), a.cmp(&b));
        }

        #[test]
        fn tagged_checkpoint_form_round_trips(a in lsn()) {
            use crate::position::Position;
            let pos = Position::SqlServer(a);
            prop_assert!(pos.to_string().starts_with("mssql:"));
            prop_assert_eq!(pos.to_string().parse::<Position>().unwrap(), pos.clone());
            let pg = Position::Postgres(crate::position::PgLsn(1));
            prop_assert_eq!(pos.partial_cmp(&pg), None);
        }

        #[test]
        fn increment_is_the_successor(a in lsn()) {
            if let Some(next) = a.increment() {
                prop_assert!(next > a);
                prop_assert_eq!(next.as_u128(), a.as_u128() + 1);
                prop_assert_eq!(next.decrement(), Some(a));
            }
        }
    }
}
