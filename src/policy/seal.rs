//! Sealing the key values a baseline's chunk plan carries (`_plan.json`, the Step
//! Functions chunk list) for a table with a policy: a hashed key's raw values must not
//! reach the destination either.
//!
//! Guarantees: a sealed text is `sealed:v1:` and the hex of a random 96-bit nonce followed
//! by the AES-256-GCM ciphertext and tag of the value, under a key derived from the hash
//! key ([`super::hash::Hasher::derive`]) — readable by sluice with the same hash key,
//! by nobody without it, and tamper-evident; a text without the prefix is returned as it
//! is (a plan written before the table had a policy).

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use super::hash::Hasher;
use crate::error::{Code, Error, Result};

const PREFIX: &str = "sealed:v1:";
const LABEL: &[u8] = b"sluice chunk bounds v1";

fn key(hasher: &Hasher) -> LessSafeKey {
    let bytes = hasher.derive(LABEL);
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &bytes).expect("a 32-byte AES-256 key"))
}

/// `value` sealed under `hasher`'s key.
pub fn seal(hasher: &Hasher, value: &str) -> Result<String> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| Error::new(Code::Internal, "the system random source failed"))?;
    let mut sealed = value.as_bytes().to_vec();
    key(hasher)
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::empty(),
            &mut sealed,
        )
        .map_err(|_| Error::new(Code::Internal, "sealing a chunk bound failed"))?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&sealed);
    Ok(format!("{PREFIX}{}", super::text::hex(&out)))
}

/// The value `text` seals, or `text` itself when it is not sealed.
pub fn unseal(hasher: &Hasher, text: &str) -> Result<String> {
    let Some(hex) = text.strip_prefix(PREFIX) else {
        return Ok(text.to_owned());
    };
    let broken = || {
        Error::new(
            Code::StateCorrupt,
            "a sealed chunk bound of the baseline's plan cannot be opened with this hash key",
        )
        .hint("the plan was sealed under another policy.hash_key: start the baseline over (`sluice baseline --table T`, or `sluice baseline --reset`)")
    };
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .filter(|b| b.len() > NONCE_LEN)
        .ok_or_else(broken)?;
    let (nonce, sealed) = bytes.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| broken())?;
    let mut sealed = sealed.to_vec();
    let plain = key(hasher)
        .open_in_place(nonce, Aad::empty(), &mut sealed)
        .map_err(|_| broken())?;
    String::from_utf8(plain.to_vec()).map_err(|_| broken())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HashOutput;

    #[test]
    fn sealed_bounds_open_with_the_key_only() {
        let h = Hasher::new(b"0123456789abcdef0123456789abcdef", HashOutput::Hex).unwrap();
        let sealed = seal(&h, "alice@example.com").unwrap();
        assert!(sealed.starts_with(PREFIX));
        assert!(!sealed.contains("alice"));
        assert_ne!(
            sealed,
            seal(&h, "alice@example.com").unwrap(),
            "a fresh nonce"
        );
        assert_eq!(unseal(&h, &sealed).unwrap(), "alice@example.com");
        assert_eq!(
            unseal(&h, "42").unwrap(),
            "42",
            "an unsealed bound is itself"
        );
        let other =
            Hasher::new(b"another key of at least thirty-two bytes", HashOutput::Hex).unwrap();
        assert_eq!(
            unseal(&other, &sealed).unwrap_err().code(),
            Code::StateCorrupt
        );
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push('0');
        assert!(unseal(&h, &tampered).is_err() || tampered == sealed);
    }
}
