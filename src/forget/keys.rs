//! The keys `sluice forget` erases: parsed from `--key col=value[,col2=value2]` and
//! `--keys-file` lines, matched against the cells of any part or current-state file, and
//! recorded only as digests.
//!
//! Guarantees: a key names exactly the table's key columns, each once (else
//! `SLUICE_CONFIG_INVALID` listing them); a value is the source's text form, `\,` and `\\`
//! escaping a comma and a backslash inside it. A cell matches when it equals the value
//! read as the column's type (the value cast to the cell's Arrow type, so `42`, `042`
//! and `42.0` name the same integer or decimal), or — for a column the table's policy
//! hashes — when it equals the value's keyed hash (hex or binary, as the policy writes
//! it), so old parts written before the policy and new ones both match. A NULL cell never
//! matches. [`digest`] is what a record says of a key: the HMAC-SHA-256 under the job's
//! hash key when the job has one (`hmac-sha256:`), else its SHA-256 (`sha256:`) — never
//! the key.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_schema::DataType;

use crate::change::{ColumnType, Value};
use crate::error::{Code, Error, Result};
use crate::policy::hash::Hasher;
use crate::policy::text::hex;

/// One key: its columns and their values in text form, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(pub Vec<(String, String)>);

impl Key {
    /// Parses `col=value[,col2=value2]`.
    pub fn parse(text: &str) -> Result<Key> {
        let invalid = |why: &str| {
            Error::new(
                Code::ConfigInvalid,
                format!("key {text:?} {why}"),
            )
            .hint("give a key as col=value[,col2=value2] (the table's key columns, values in the source's text form; write \\, for a comma and \\\\ for a backslash in a value)")
        };
        let mut pairs = Vec::new();
        for item in split_unescaped(text) {
            let Some((column, value)) = item.split_once('=') else {
                return Err(invalid("has an item without `=`"));
            };
            let column = column.trim();
            if column.is_empty() {
                return Err(invalid("names an empty column"));
            }
            if pairs.iter().any(|(c, _): &(String, String)| c == column) {
                return Err(invalid(&format!("names column {column} twice")));
            }
            pairs.push((column.to_owned(), unescape(value)));
        }
        if pairs.is_empty() {
            return Err(invalid("is empty"));
        }
        Ok(Key(pairs))
    }

    /// The keys of a keys file: one key a line; blank lines and lines starting with `#`
    /// are skipped.
    pub fn parse_file(text: &str) -> Result<Vec<Key>> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(Key::parse)
            .collect()
    }

    /// Checks that the key names exactly `key_columns`.
    pub fn check(&self, table: &str, key_columns: &[String]) -> Result<()> {
        let given: BTreeSet<&str> = self.0.iter().map(|(c, _)| c.as_str()).collect();
        let want: BTreeSet<&str> = key_columns.iter().map(String::as_str).collect();
        if given != want {
            return Err(Error::new(
                Code::ConfigInvalid,
                format!(
                    "a key names columns {} but {table}'s key is {}",
                    given.into_iter().collect::<Vec<_>>().join(", "),
                    key_columns.join(", ")
                ),
            )
            .hint(format!(
                "name every key column once: --key {}",
                key_columns
                    .iter()
                    .map(|c| format!("{c}=…"))
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        }
        Ok(())
    }

    /// The key in a canonical text form: `col=value` items sorted by column, escaped.
    pub fn canonical(&self) -> String {
        let mut items: Vec<String> = self
            .0
            .iter()
            .map(|(c, v)| format!("{c}={}", v.replace('\\', "\\\\").replace(',', "\\,")))
            .collect();
        items.sort();
        items.join(",")
    }
}

/// What a record says of `key`: `hmac-sha256:<hex>` under the job's hash key, else
/// `sha256:<hex>`.
pub fn digest(key: &Key, hasher: Option<&Hasher>) -> String {
    let canonical = key.canonical();
    match hasher {
        Some(h) => format!("hmac-sha256:{}", hex(&h.derive(canonical.as_bytes()))),
        None => format!(
            "sha256:{}",
            hex(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()).as_ref())
        ),
    }
}

fn split_unescaped(text: &str) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                // Kept escaped: `unescape` resolves it once the item is split.
                let last = items.last_mut().expect("one item at least");
                last.push('\\');
                if let Some(next) = chars.next() {
                    last.push(next);
                }
            }
            ',' => items.push(String::new()),
            c => items.last_mut().expect("one item at least").push(c),
        }
    }
    items
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// One form a key column's cell may take.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// The value in text form (cast to the cell's type before comparing).
    Text(String),
    /// The value's keyed hash as the policy writes it in a binary column.
    Bytes(Vec<u8>),
}

/// Tells which rows of a batch hold one of the keys.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// Per key, per column, the forms a matching cell may take.
    keys: Vec<Vec<(String, Vec<Form>)>>,
}

impl Matcher {
    /// The matcher of `keys`; `hashed` are the columns the table's policy hashes (with
    /// `hasher`, the job's key).
    pub fn new(keys: &[Key], hashed: &BTreeSet<String>, hasher: Option<&Hasher>) -> Matcher {
        let keys = keys
            .iter()
            .map(|key| {
                key.0
                    .iter()
                    .map(|(column, value)| {
                        let mut forms = vec![Form::Text(value.clone())];
                        if let Some(h) = hasher.filter(|_| hashed.contains(column)) {
                            match h.hash(&ColumnType::Utf8, &Value::Text(value.clone())) {
                                Value::Text(t) => forms.push(Form::Text(t)),
                                Value::Bytes(b) => forms.push(Form::Bytes(b)),
                                _ => {}
                            }
                        }
                        (column.clone(), forms)
                    })
                    .collect()
            })
            .collect();
        Matcher { keys }
    }

    /// How many keys it matches.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when it matches no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Per key, which rows of `batch` hold it (a batch without one of a key's columns —
    /// a `truncate` marker's — holds no row of it).
    pub fn per_key(&self, batch: &RecordBatch) -> Result<Vec<BooleanArray>> {
        let rows = batch.num_rows();
        self.keys
            .iter()
            .map(|columns| {
                let mut all = BooleanArray::from(vec![true; rows]);
                for (column, forms) in columns {
                    let Some(array) = batch.column_by_name(column) else {
                        return Ok(BooleanArray::from(vec![false; rows]));
                    };
                    let eq = equals(array, forms)?;
                    all = zip(&all, &eq, |a, b| a && b);
                }
                Ok(all)
            })
            .collect()
    }

    /// Which rows of `batch` hold any of the keys.
    pub fn any(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let mut any = BooleanArray::from(vec![false; batch.num_rows()]);
        for mask in self.per_key(batch)? {
            any = zip(&any, &mask, |a, b| a || b);
        }
        Ok(any)
    }

    /// Which rows of `batch` hold none of the keys (what a rewrite keeps).
    pub fn keep(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        Ok(self
            .any(batch)?
            .iter()
            .map(|v| Some(!v.unwrap_or(false)))
            .collect())
    }
}

/// `f` of two masks without NULLs, cell by cell.
fn zip(a: &BooleanArray, b: &BooleanArray, f: impl Fn(bool, bool) -> bool) -> BooleanArray {
    (0..a.len())
        .map(|i| Some(f(a.value(i), b.value(i))))
        .collect()
}

/// Which cells of `array` equal one of `forms` (NULL: false).
fn equals(array: &ArrayRef, forms: &[Form]) -> Result<BooleanArray> {
    let rows = array.len();
    let data_type = array.data_type().clone();
    let wanted_bytes: Vec<Vec<u8>> = forms
        .iter()
        .flat_map(|f| match f {
            Form::Bytes(b) => vec![b.clone()],
            Form::Text(t) => {
                let mut v = vec![t.as_bytes().to_vec()];
                if let Some(uuid) = uuid_bytes(t) {
                    v.push(uuid);
                }
                v
            }
        })
        .collect();
    let by_bytes = |value: &[u8]| wanted_bytes.iter().any(|w| w.as_slice() == value);
    let out: BooleanArray = match &data_type {
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            (0..rows)
                .map(|i| Some(a.is_valid(i) && by_bytes(a.value(i))))
                .collect()
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            (0..rows)
                .map(|i| Some(a.is_valid(i) && by_bytes(a.value(i))))
                .collect()
        }
        DataType::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            (0..rows)
                .map(|i| Some(a.is_valid(i) && by_bytes(a.value(i))))
                .collect()
        }
        _ => {
            // Each value read as the column's type and written back as text, so both
            // sides come out of one formatter.
            let mut wanted: Vec<String> = Vec::new();
            for form in forms {
                let Form::Text(text) = form else { continue };
                wanted.push(text.clone());
                let one: ArrayRef = Arc::new(StringArray::from(vec![text.as_str()]));
                if let Ok(typed) = arrow_cast::cast(&one, &data_type)
                    && typed.is_valid(0)
                    && let Ok(back) = arrow_cast::cast(&typed, &DataType::Utf8)
                {
                    let back = back.as_string::<i32>();
                    if back.is_valid(0) {
                        wanted.push(back.value(0).to_owned());
                    }
                }
            }
            let text = arrow_cast::cast(array, &DataType::Utf8).map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("reading a {data_type} key column as text"),
                )
                .source(e)
            })?;
            let text = text.as_string::<i32>();
            (0..rows)
                .map(|i| Some(text.is_valid(i) && wanted.iter().any(|w| w == text.value(i))))
                .collect()
        }
    };
    Ok(out)
}

/// The 16 bytes of a UUID in its text form.
fn uuid_bytes(text: &str) -> Option<Vec<u8>> {
    let digits: String = text.chars().filter(|c| *c != '-').collect();
    if digits.len() != 32 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    (0..16)
        .map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, Int64Array};
    use arrow_schema::{Field, Schema};

    #[test]
    fn keys_parse_with_escapes_and_name_the_key_columns() {
        let k = Key::parse("id=42").unwrap();
        assert_eq!(k.0, [("id".to_owned(), "42".to_owned())]);
        let k = Key::parse(r"tenant=a\,b,id=7\\").unwrap();
        assert_eq!(
            k.0,
            [
                ("tenant".to_owned(), "a,b".to_owned()),
                ("id".to_owned(), r"7\".to_owned())
            ]
        );
        assert_eq!(k.canonical(), r"id=7\\,tenant=a\,b");
        assert!(Key::parse("id").is_err());
        assert!(Key::parse("id=1,id=2").is_err());
        assert!(Key::parse("=1").is_err());
        let cols = ["id".to_owned(), "tenant".to_owned()];
        assert!(k.check("t", &cols).is_ok());
        let e = Key::parse("id=1").unwrap().check("t", &cols).unwrap_err();
        assert_eq!(e.code(), Code::ConfigInvalid);
        let many = Key::parse_file("# keys\nid=1\n\n  id=2  \n").unwrap();
        assert_eq!(many.len(), 2);
        assert_eq!(many[1].0[0].1, "2");
    }

    #[test]
    fn digests_never_hold_the_key() {
        let k = Key::parse("email=a@b.example").unwrap();
        let plain = digest(&k, None);
        assert!(plain.starts_with("sha256:") && !plain.contains("a@b"));
        let h = Hasher::new(
            b"0123456789abcdef0123456789abcdef",
            crate::config::HashOutput::Hex,
        )
        .unwrap();
        let keyed = digest(&k, Some(&h));
        assert!(keyed.starts_with("hmac-sha256:") && keyed.len() == 12 + 64);
        assert_ne!(keyed[12..], plain[7..]);
    }

    #[test]
    fn cells_match_by_value_hashed_or_not() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("n", DataType::Int32, true),
            Field::new("h", DataType::Utf8, true),
        ]));
        let h = Hasher::new(
            b"0123456789abcdef0123456789abcdef",
            crate::config::HashOutput::Hex,
        )
        .unwrap();
        let Value::Text(hashed) = h.hash(&ColumnType::Utf8, &Value::Text("5".into())) else {
            panic!()
        };
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(5), Some(6), None])),
                Arc::new(Int32Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![hashed.as_str(), "x", "5"])),
            ],
        )
        .unwrap();
        let m = Matcher::new(&[Key::parse("id=005").unwrap()], &BTreeSet::new(), None);
        assert_eq!(
            m.any(&batch).unwrap(),
            BooleanArray::from(vec![true, false, false])
        );
        let hashed_cols: BTreeSet<String> = ["h".to_owned()].into();
        let m = Matcher::new(&[Key::parse("h=5").unwrap()], &hashed_cols, Some(&h));
        assert_eq!(
            m.any(&batch).unwrap(),
            BooleanArray::from(vec![true, false, true])
        );
        let m = Matcher::new(
            &[
                Key::parse("id=6,n=2").unwrap(),
                Key::parse("n=3,id=6").unwrap(),
            ],
            &BTreeSet::new(),
            None,
        );
        assert_eq!(
            m.keep(&batch).unwrap(),
            BooleanArray::from(vec![true, false, true])
        );
        let m = Matcher::new(&[Key::parse("missing=1").unwrap()], &BTreeSet::new(), None);
        assert_eq!(m.any(&batch).unwrap().true_count(), 0);
        assert_eq!(
            uuid_bytes("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").unwrap()[0],
            0xa0
        );
    }
}
