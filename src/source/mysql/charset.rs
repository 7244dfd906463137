//! MySQL / MariaDB character sets → how a column's bytes become Unicode text. Pure.
//!
//! The binlog carries a text cell as raw bytes in its column's character set (the
//! TABLE_MAP names the collation; [`super::schema::collations`] maps it to the set).
//! Guarantees: every character set resolves to a [`Decoding`] — none is refused:
//! * the UTF-8 family and `ascii` are validated UTF-8; `latin1` is MySQL's cp1252
//!   variant; `ucs2`/`utf16` (big-endian), `utf16le`, `utf32` (big-endian), the
//!   single-byte Windows, ISO and KOI8 sets and the CJK multi-byte sets decode through
//!   the WHATWG tables (`encoding_rs`) to the same Unicode text the server converts them to;
//! * `binary` is bytes;
//! * a set with no table here (`armscii8`, `cp850`, `cp852`, `dec8`, `geostd8`, `hp8`,
//!   `keybcs2`, `macce`, `swe7`, a set added tomorrow) is [`Decoding::Raw`]: the column's
//!   own bytes, written as Binary with the set named in the field metadata
//!   (`sluice.charset`) — exact, never guessed.
//!
//! A byte sequence that is not valid in its set is an error, never a replacement character.

use encoding_rs::Encoding;

/// How the bytes of a column in one character set are turned into output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoding {
    Utf8,
    /// MySQL's `latin1`: Windows-1252 with the five undefined bytes as C1 controls.
    Latin1,
    /// UTF-32, big-endian (MySQL's `utf32`).
    Utf32,
    Table(&'static Encoding),
    /// The `binary` character set: bytes.
    Binary,
    /// A set sluice has no table for: the raw bytes, written as Binary.
    Raw,
}

impl Decoding {
    /// Whether cells of this decoding are written as bytes (Binary) rather than text.
    pub fn is_bytes(self) -> bool {
        matches!(self, Decoding::Binary | Decoding::Raw)
    }
}

/// The decoding of the character set named `name` (`utf8mb4`, `cp1250`, …).
pub fn decoding(name: &str) -> Decoding {
    use encoding_rs as e;
    match name.to_ascii_lowercase().as_str() {
        "utf8mb4" | "utf8mb3" | "utf8" | "ascii" => Decoding::Utf8,
        "latin1" => Decoding::Latin1,
        "binary" => Decoding::Binary,
        "ucs2" | "utf16" => Decoding::Table(e::UTF_16BE),
        "utf16le" => Decoding::Table(e::UTF_16LE),
        "utf32" => Decoding::Utf32,
        "latin2" => Decoding::Table(e::ISO_8859_2),
        "latin7" => Decoding::Table(e::ISO_8859_13),
        "greek" => Decoding::Table(e::ISO_8859_7),
        "hebrew" => Decoding::Table(e::ISO_8859_8),
        "latin5" => Decoding::Table(e::WINDOWS_1254),
        "cp1250" => Decoding::Table(e::WINDOWS_1250),
        "cp1251" => Decoding::Table(e::WINDOWS_1251),
        "cp1256" => Decoding::Table(e::WINDOWS_1256),
        "cp1257" => Decoding::Table(e::WINDOWS_1257),
        "cp866" => Decoding::Table(e::IBM866),
        "koi8r" => Decoding::Table(e::KOI8_R),
        "koi8u" => Decoding::Table(e::KOI8_U),
        "macroman" => Decoding::Table(e::MACINTOSH),
        "tis620" => Decoding::Table(e::WINDOWS_874),
        "sjis" | "cp932" => Decoding::Table(e::SHIFT_JIS),
        "ujis" | "eucjpms" => Decoding::Table(e::EUC_JP),
        "euckr" => Decoding::Table(e::EUC_KR),
        "gb2312" | "gbk" => Decoding::Table(e::GBK),
        "gb18030" => Decoding::Table(e::GB18030),
        "big5" => Decoding::Table(e::BIG5),
        _ => Decoding::Raw,
    }
}

/// Decodes `bytes` (a text decoding, not [`Decoding::is_bytes`]) into a string; `name`
/// is the set's name for the error.
pub fn decode(decoding: Decoding, name: &str, bytes: Vec<u8>) -> Result<String, String> {
    let invalid = |at: usize| format!("text is not valid {name} (byte {at})");
    match decoding {
        Decoding::Utf8 | Decoding::Binary | Decoding::Raw => {
            String::from_utf8(bytes).map_err(|e| invalid(e.utf8_error().valid_up_to()))
        }
        Decoding::Latin1 => Ok(bytes.iter().map(|&b| latin1_char(b)).collect()),
        Decoding::Utf32 => {
            if !bytes.len().is_multiple_of(4) {
                return Err(invalid(bytes.len() / 4 * 4));
            }
            bytes
                .chunks_exact(4)
                .enumerate()
                .map(|(i, c)| {
                    char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                        .ok_or_else(|| invalid(i * 4))
                })
                .collect()
        }
        Decoding::Table(encoding) => encoding
            .decode_without_bom_handling_and_without_replacement(&bytes)
            .map(|text| text.into_owned())
            .ok_or_else(|| format!("text is not valid {name}")),
    }
}

/// MySQL's `latin1` is Windows-1252, with the five undefined bytes mapped to the C1
/// control characters of the same value.
fn latin1_char(b: u8) -> char {
    const HIGH: [u16; 32] = [
        0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
        0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
        0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
    ];
    match b {
        0x80..=0x9F => char::from_u32(u32::from(HIGH[usize::from(b - 0x80)])).unwrap_or('\u{FFFD}'),
        _ => char::from(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(name: &str, bytes: &[u8]) -> Result<String, String> {
        decode(decoding(name), name, bytes.to_vec())
    }

    #[test]
    fn every_set_decodes_to_the_servers_unicode() {
        assert_eq!(text("utf8mb4", "ünï ✓".as_bytes()).unwrap(), "ünï ✓");
        assert!(text("utf8mb4", &[0xff]).is_err());
        assert_eq!(text("latin1", &[0x80, 0xe9, 0x41]).unwrap(), "€éA");
        assert_eq!(text("cp1250", &[0x8a, 0xe8, 0xf8]).unwrap(), "Ščř");
        assert_eq!(text("latin2", &[0xa9, 0xe8]).unwrap(), "Šč");
        assert_eq!(text("cp1251", &[0xcf, 0xf0]).unwrap(), "Пр");
        assert_eq!(text("ucs2", &[0x00, 0x41, 0x01, 0x61]).unwrap(), "Aš");
        assert_eq!(
            text("utf16", &[0xd8, 0x3d, 0xde, 0x00]).unwrap(),
            "\u{1F600}"
        );
        assert_eq!(text("utf16le", &[0x41, 0x00]).unwrap(), "A");
        assert_eq!(text("utf32", &[0, 1, 0xf6, 0x00]).unwrap(), "\u{1F600}");
        assert!(text("utf32", &[0, 0x11, 0, 0]).is_err());
        assert!(text("utf32", &[0, 0]).is_err());
        assert_eq!(text("gbk", &[0xc4, 0xe3]).unwrap(), "你");
        assert_eq!(text("sjis", &[0x82, 0xa0]).unwrap(), "あ");
        assert!(text("ucs2", &[0xd8, 0x00]).is_err(), "a lone surrogate");
    }

    #[test]
    fn sets_without_a_table_are_bytes_never_guessed() {
        for name in ["armscii8", "cp852", "keybcs2", "swe7", "some_new_set"] {
            assert_eq!(decoding(name), Decoding::Raw, "{name}");
            assert!(decoding(name).is_bytes());
        }
        assert!(decoding("binary").is_bytes());
        assert!(!decoding("CP1250").is_bytes());
    }
}
