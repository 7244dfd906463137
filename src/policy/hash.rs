//! `hash`: a column's values as the keyed HMAC-SHA-256 of their engine-neutral bytes
//! ([`super::text::hash_input`]), so equal values give equal hashes across tables, engines
//! and jobs that share the key, and nobody without the key can test a guess.
//!
//! Guarantees: the key is read from its source (an environment variable, or the Secrets
//! Manager secret a face read into the config) and never written anywhere; what is written
//! about it is its id ([`Hasher::key_id`]: the first 16 hex digits of the HMAC of a fixed
//! label under the key), which names the key without revealing it. NULL stays NULL. The
//! output is the 32 bytes (`hash_output: binary`) or their 64 lower-case hex digits
//! (`hex`, the default). The format is versioned: `hash-hmac-sha256:v1`.

use ring::hmac;

use crate::change::{ColumnType, Value};
use crate::config::{Config, HashOutput};
use crate::error::{Code, Error, Result};

/// The `sluice.policy` value of a hashed column.
pub const FORMAT: &str = "hash-hmac-sha256:v1";

/// The shortest key accepted, in bytes: an HMAC-SHA-256 key shorter than its output
/// weakens it.
pub const MIN_KEY_BYTES: usize = 32;

/// The label whose HMAC under the key is the key's id.
const KEY_ID_LABEL: &[u8] = b"sluice key id v1";

/// A keyed hasher.
pub struct Hasher {
    key: hmac::Key,
    key_id: String,
    output: HashOutput,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hasher")
            .field("key_id", &self.key_id)
            .field("output", &self.output)
            .finish()
    }
}

impl Hasher {
    /// A hasher with `key` (its bytes, surrounding ASCII whitespace ignored).
    pub fn new(key: &[u8], output: HashOutput) -> Result<Hasher> {
        let key = key.trim_ascii();
        if key.len() < MIN_KEY_BYTES {
            return Err(Error::new(
                Code::ConfigSecret,
                format!(
                    "the hash key has {} bytes; policy.hash_key needs at least {MIN_KEY_BYTES}",
                    key.len()
                ),
            )
            .hint("generate one with `openssl rand -hex 32` and store it in the environment variable or secret policy.hash_key names"));
        }
        let key = hmac::Key::new(hmac::HMAC_SHA256, key);
        let key_id = super::text::hex(&hmac::sign(&key, KEY_ID_LABEL).as_ref()[..8]);
        Ok(Hasher {
            key,
            key_id,
            output,
        })
    }

    /// The hasher of `config`'s `policy.hash_key`, or `None` when it names none.
    pub fn of(config: &Config) -> Result<Option<Hasher>> {
        let policy = &config.policy;
        let Some(source) = &policy.hash_key else {
            return Ok(None);
        };
        if let Some(key) = &policy.key {
            return Hasher::new(key.expose(), policy.hash_output).map(Some);
        }
        if let Some(arn) = &source.secret_arn {
            return Err(Error::new(
                Code::Internal,
                format!("policy.hash_key.secret_arn {arn} was used before it was read"),
            ));
        }
        let var = source.env.as_deref().unwrap_or_default();
        let key = std::env::var_os(var).ok_or_else(|| {
            Error::new(
                Code::ConfigSecret,
                format!("environment variable {var} (policy.hash_key.env) is not set"),
            )
            .hint(format!(
                "export {var}=\"$(openssl rand -hex 32)\" — and keep it: another key hashes every value differently"
            ))
        })?;
        Hasher::new(key.as_encoded_bytes(), policy.hash_output).map(Some)
    }

    /// The key's id: names the key in metadata without revealing it.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The output column type.
    pub fn output_type(&self) -> ColumnType {
        match self.output {
            HashOutput::Hex => ColumnType::Utf8,
            HashOutput::Binary => ColumnType::Binary,
        }
    }

    /// The hash of `value` of a column typed `ty`; NULL stays NULL.
    pub fn hash(&self, ty: &ColumnType, value: &Value) -> Value {
        let Some(input) = super::text::hash_input(ty, value) else {
            return Value::Null;
        };
        let tag = hmac::sign(&self.key, &input);
        match self.output {
            HashOutput::Hex => Value::Text(super::text::hex(tag.as_ref())),
            HashOutput::Binary => Value::Bytes(tag.as_ref().to_vec()),
        }
    }

    /// A key derived from this one for `label` (32 bytes), for sealing what must stay
    /// readable to sluice alone.
    pub fn derive(&self, label: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(hmac::sign(&self.key, label).as_ref());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn the_hash_is_rfc_4231_hmac_sha256_of_the_value_text() {
        // RFC 4231 test case 2: key "Jefe" is too short for a policy, so compare with
        // ring's own HMAC of the same input under our key instead, and pin one value.
        let h = Hasher::new(KEY, HashOutput::Hex).unwrap();
        let Value::Text(a) = h.hash(&ColumnType::Utf8, &Value::Text("alice@example.com".into()))
        else {
            panic!("hex is text");
        };
        assert_eq!(a.len(), 64);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        let direct = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, KEY),
            b"alice@example.com",
        );
        assert_eq!(a, crate::policy::text::hex(direct.as_ref()));
        // What docs/privacy.md's check prints:
        // printf %s 'alice@example.com' | openssl dgst -sha256 -hmac "$KEY"
        assert_eq!(
            a,
            "841240d2a5b6654b3ae21fc4499db7b7867077cdd67c3e16cef1f9843e27d1fa"
        );
        // The same value from another integer width or engine hashes the same.
        assert_eq!(
            h.hash(&ColumnType::Int16, &Value::Int(7)),
            h.hash(&ColumnType::Int64, &Value::Int(7))
        );
        assert_eq!(
            h.hash(&ColumnType::Int64, &Value::Int(7)),
            h.hash(&ColumnType::Utf8, &Value::Text("7".into()))
        );
        assert_eq!(h.hash(&ColumnType::Utf8, &Value::Null), Value::Null);
        let b = Hasher::new(KEY, HashOutput::Binary).unwrap();
        assert_eq!(
            b.hash(&ColumnType::Utf8, &Value::Text("x".into())),
            Value::Bytes(direct_of(b"x"))
        );
    }

    fn direct_of(input: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, KEY), input)
            .as_ref()
            .to_vec()
    }

    #[test]
    fn the_key_id_names_the_key_and_short_keys_are_refused() {
        let a = Hasher::new(KEY, HashOutput::Hex).unwrap();
        let again = Hasher::new(&[b"  ", KEY, b"\n"].concat(), HashOutput::Hex).unwrap();
        assert_eq!(
            a.key_id(),
            again.key_id(),
            "surrounding whitespace is ignored"
        );
        assert_eq!(a.key_id().len(), 16);
        let other =
            Hasher::new(b"another key of at least thirty-two bytes", HashOutput::Hex).unwrap();
        assert_ne!(a.key_id(), other.key_id());
        let e = Hasher::new(b"short", HashOutput::Hex).unwrap_err();
        assert_eq!(e.code(), Code::ConfigSecret);
        assert!(
            !format!("{a:?}").contains("0123"),
            "the key is never printed"
        );
    }
}
