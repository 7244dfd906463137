//! CRC32C (Castagnoli) of a local file, in the form S3 reports it (`x-amz-checksum-crc32c`:
//! base64 of the big-endian value; a multipart object's is the CRC32C of its parts'
//! checksums followed by `-<parts>`), so sluice can tell whether an object S3 already holds
//! is byte for byte the part it is sending. Only used on the rare path of a refused
//! `If-None-Match`, so a plain table-driven implementation is fast enough. The composite
//! form follows S3's documentation; moto reports another value for multipart objects, so
//! against moto a multipart part is never adopted (the safe side: `DESTINATION_EXISTS`).

use std::io::Read;
use std::path::Path;

const POLY: u32 = 0x82F6_3B78;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// A running CRC32C.
#[derive(Debug, Clone, Copy)]
pub struct Crc32c(u32);

impl Default for Crc32c {
    fn default() -> Self {
        Crc32c(!0)
    }
}

impl Crc32c {
    pub fn update(&mut self, bytes: &[u8]) {
        let mut crc = self.0;
        for &b in bytes {
            crc = TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
        }
        self.0 = crc;
    }

    pub fn value(self) -> u32 {
        !self.0
    }
}

/// The CRC32C of `bytes`.
pub fn of(bytes: &[u8]) -> u32 {
    let mut crc = Crc32c::default();
    crc.update(bytes);
    crc.value()
}

/// S3's text form of a CRC32C value.
pub fn to_base64(value: u32) -> String {
    base64(&value.to_be_bytes())
}

/// The checksum S3 reports for `path` uploaded whole (`part_size: None`) or in parts of
/// `part_size` bytes (the composite `<base64>-<parts>`).
pub fn of_file(path: &Path, part_size: Option<u64>) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut whole = Crc32c::default();
    let mut parts: Vec<u32> = Vec::new();
    let mut part = Crc32c::default();
    let mut in_part = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let mut chunk = &buf[..n];
        match part_size {
            None => whole.update(chunk),
            Some(size) => {
                while !chunk.is_empty() {
                    let take = ((size - in_part) as usize).min(chunk.len());
                    part.update(&chunk[..take]);
                    in_part += take as u64;
                    chunk = &chunk[take..];
                    if in_part == size {
                        parts.push(part.value());
                        part = Crc32c::default();
                        in_part = 0;
                    }
                }
            }
        }
    }
    if part_size.is_none() {
        return Ok(to_base64(whole.value()));
    }
    if in_part > 0 {
        parts.push(part.value());
    }
    let joined: Vec<u8> = parts.iter().flat_map(|p| p.to_be_bytes()).collect();
    Ok(format!("{}-{}", to_base64(of(&joined)), parts.len()))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // RFC 3720 check value, and S3's documented form of it.
        assert_eq!(of(b"123456789"), 0xE306_9283);
        assert_eq!(to_base64(0xE306_9283), "4waSgw==");
        assert_eq!(of(b""), 0);
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
    }

    #[test]
    fn a_file_whole_and_in_parts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let body: Vec<u8> = (0..10_000u32).map(|i| (i * 31) as u8).collect();
        std::fs::write(&path, &body).unwrap();
        assert_eq!(of_file(&path, None).unwrap(), to_base64(of(&body)));
        let parts: Vec<u8> = body
            .chunks(4096)
            .flat_map(|c| of(c).to_be_bytes())
            .collect();
        assert_eq!(
            of_file(&path, Some(4096)).unwrap(),
            format!("{}-3", to_base64(of(&parts)))
        );
    }
}
