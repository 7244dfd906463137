//! PostgreSQL WAL locations (`pg_lsn`).
//!
//! Text form: two fixed-width, upper-case, 8-digit hex halves, `XXXXXXXX/XXXXXXXX`. It is
//! accepted by PostgreSQL's `pg_lsn` input (which also takes the short `16/B374D848`
//! form, parsed here too) and, being fixed width, sorts as a string in LSN order.

use std::fmt;
use std::str::FromStr;

/// A PostgreSQL log sequence number: a byte offset into the WAL stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PgLsn(pub u64);

impl PgLsn {
    /// The text form, written digit by digit into a stack buffer: this text is every
    /// transaction's `__pos`, and `write!("{:08X}/{:08X}")` costs ~15x as many instructions.
    pub fn text(&self) -> LsnText {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let mut text = [b'/'; 17];
        for i in 0..16 {
            let at = if i < 8 { i } else { i + 1 };
            text[at] = HEX[((self.0 >> (60 - 4 * i)) & 0xF) as usize];
        }
        LsnText(text)
    }
}

/// The 17 ASCII bytes of an LSN's text form.
#[derive(Debug, Clone, Copy)]
pub struct LsnText([u8; 17]);

impl LsnText {
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits and '/' were written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for PgLsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text().as_str())
    }
}

/// The text was not an LSN.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a PostgreSQL LSN (expected hex `X/X`)")]
pub struct ParseLsnError(String);

impl FromStr for PgLsn {
    type Err = ParseLsnError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = || ParseLsnError(text.to_owned());
        let (hi, lo) = text.split_once('/').ok_or_else(fail)?;
        let half = |part: &str| {
            if part.is_empty() || part.len() > 8 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(fail());
            }
            u32::from_str_radix(part, 16).map_err(|_| fail())
        };
        Ok(PgLsn((u64::from(half(hi)?) << 32) | u64::from(half(lo)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_fixed_width() {
        assert_eq!(PgLsn(0x16_B374_D848).to_string(), "00000016/B374D848");
        assert_eq!(PgLsn(0).to_string(), "00000000/00000000");
    }

    #[test]
    fn parses_postgres_short_form() {
        assert_eq!(
            "16/B374D848".parse::<PgLsn>().unwrap(),
            PgLsn(0x16_B374_D848)
        );
        assert!("16/B374D8481".parse::<PgLsn>().is_err());
        assert!("/1".parse::<PgLsn>().is_err());
        assert!("+1/1".parse::<PgLsn>().is_err());
    }

    proptest! {
        #[test]
        fn formats_like_the_fixed_width_hex_pattern(a in any::<u64>()) {
            prop_assert_eq!(PgLsn(a).to_string(), format!("{:08X}/{:08X}", a >> 32, a & 0xFFFF_FFFF));
        }

        #[test]
        fn round_trips_and_sorts(a in any::<u64>(), b in any::<u64>()) {
            let (la, lb) = (PgLsn(a), PgLsn(b));
            prop_assert_eq!(la.to_string().parse::<PgLsn>().unwrap(), la);
            prop_assert_eq!(la.to_string().cmp(&lb.to_string()), la.cmp(&lb));
        }
    }
}
