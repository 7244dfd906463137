//! The Avro object container files of an Iceberg table (manifests, manifest lists): a
//! writer for a schema given as JSON text and a reader that decodes any file by the
//! writer schema in its own header.
//!
//! Guarantees: the schema text is written into the header exactly as given (Iceberg
//! readers map fields by the `field-id` attributes in it, so they must survive); values
//! are encoded in Avro's binary encoding, one block, codec `null`; the reader accepts the
//! codecs other Iceberg writers use — `null`, `deflate` (pyiceberg's and Iceberg Java's
//! default, `gzip` in their table properties) and `zstandard` — and refuses anything it
//! cannot decode (`snappy`, a damaged block: `SLUICE_ICEBERG_METADATA` naming the file)
//! instead of guessing. Written by hand rather than with the
//! `apache-avro` crate: the two fixed Iceberg schemas need ~300 lines, where the crate
//! brings two proc-macro stacks and a big-decimal library into the Lambda binary.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::error::{Code, Error, Result};

/// An Avro schema (the subset Iceberg's metadata files use, plus float/double/enum).
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Record(Vec<(String, Schema)>),
    Array(Box<Schema>),
    Map(Box<Schema>),
    Union(Vec<Schema>),
    Fixed(usize),
    Enum(Vec<String>),
}

/// A decoded (or to be encoded) Avro value. Unions hold their branch's value; `int` and
/// `long` are both `Long`, `float` and `double` both `Double`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Long(i64),
    Double(f64),
    Bytes(Vec<u8>),
    String(String),
    Record(Vec<(String, Value)>),
    Array(Vec<Value>),
    Map(Vec<(String, Value)>),
}

impl Value {
    /// The field `name` of a record (`None` for another value or a missing field).
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as an integer, if it is one.
    pub fn as_long(&self) -> Option<i64> {
        match self {
            Value::Long(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as text, if it is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

fn bad(what: impl Into<String>) -> Error {
    Error::new(Code::IcebergMetadata, what.into())
        .hint("the Iceberg table's metadata was written by another tool in a form sluice cannot append to: commit to a new table (another `iceberg.table_prefix`) or repair the table")
}

/// Parses an Avro schema from its JSON form (named types may be referenced by name).
pub fn parse_schema(json: &Json) -> Result<Schema> {
    parse(json, &mut BTreeMap::new())
}

fn parse(json: &Json, named: &mut BTreeMap<String, Schema>) -> Result<Schema> {
    Ok(match json {
        Json::String(name) => match name.as_str() {
            "null" => Schema::Null,
            "boolean" => Schema::Boolean,
            "int" => Schema::Int,
            "long" => Schema::Long,
            "float" => Schema::Float,
            "double" => Schema::Double,
            "bytes" => Schema::Bytes,
            "string" => Schema::String,
            other => named
                .get(other)
                .cloned()
                .ok_or_else(|| bad(format!("Avro schema names unknown type {other:?}")))?,
        },
        Json::Array(branches) => Schema::Union(
            branches
                .iter()
                .map(|b| parse(b, named))
                .collect::<Result<_>>()?,
        ),
        Json::Object(o) => {
            let ty = o.get("type").cloned().unwrap_or(Json::Null);
            let schema = match ty.as_str() {
                Some("record") => {
                    let mut fields = Vec::new();
                    for f in o
                        .get("fields")
                        .and_then(Json::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let name = f.get("name").and_then(Json::as_str).unwrap_or_default();
                        let ty = f.get("type").cloned().unwrap_or(Json::Null);
                        fields.push((name.to_owned(), parse(&ty, named)?));
                    }
                    Schema::Record(fields)
                }
                Some("array") => Schema::Array(Box::new(parse(
                    o.get("items").unwrap_or(&Json::Null),
                    named,
                )?)),
                Some("map") => Schema::Map(Box::new(parse(
                    o.get("values").unwrap_or(&Json::Null),
                    named,
                )?)),
                Some("fixed") => {
                    Schema::Fixed(o.get("size").and_then(Json::as_u64).unwrap_or(0) as usize)
                }
                Some("enum") => Schema::Enum(
                    o.get("symbols")
                        .and_then(Json::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect(),
                ),
                _ => parse(&ty, named)?,
            };
            if let Some(name) = o.get("name").and_then(Json::as_str) {
                named.insert(name.to_owned(), schema.clone());
            }
            schema
        }
        other => return Err(bad(format!("{other} is not an Avro schema"))),
    })
}

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// Encodes `value` as `schema` in Avro's binary encoding.
pub fn encode(out: &mut Vec<u8>, schema: &Schema, value: &Value) -> Result<()> {
    match (schema, value) {
        (Schema::Null, Value::Null) => {}
        (Schema::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (Schema::Int | Schema::Long, Value::Long(v)) => put_long(out, *v),
        (Schema::Float, Value::Double(v)) => out.extend_from_slice(&(*v as f32).to_le_bytes()),
        (Schema::Double, Value::Double(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Schema::Bytes, Value::Bytes(b)) => put_bytes(out, b),
        (Schema::Fixed(_), Value::Bytes(b)) => out.extend_from_slice(b),
        (Schema::String, Value::String(s)) => put_bytes(out, s.as_bytes()),
        (Schema::Record(fields), Value::Record(_)) => {
            for (name, field_schema) in fields {
                let v = value.field(name).unwrap_or(&Value::Null);
                encode(out, field_schema, v)?;
            }
        }
        (Schema::Array(item), Value::Array(items)) => {
            if !items.is_empty() {
                put_long(out, items.len() as i64);
                for v in items {
                    encode(out, item, v)?;
                }
            }
            put_long(out, 0);
        }
        (Schema::Map(item), Value::Map(entries)) => {
            if !entries.is_empty() {
                put_long(out, entries.len() as i64);
                for (k, v) in entries {
                    put_bytes(out, k.as_bytes());
                    encode(out, item, v)?;
                }
            }
            put_long(out, 0);
        }
        (Schema::Union(branches), v) => {
            let index = branches
                .iter()
                .position(|b| (*b == Schema::Null) == (*v == Value::Null))
                .ok_or_else(|| Error::new(Code::Internal, "no Avro union branch fits a value"))?;
            put_long(out, index as i64);
            encode(out, &branches[index], v)?;
        }
        (schema, value) => {
            return Err(Error::new(
                Code::Internal,
                format!("Avro value {value:?} does not fit schema {schema:?}"),
            ));
        }
    }
    Ok(())
}

/// A cursor over Avro binary data.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| bad("Avro data ends early"))?;
        let slice = &self.data[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn long(&mut self) -> Result<i64> {
        let mut z: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            z |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((z >> 1) as i64 ^ -((z & 1) as i64));
            }
        }
        Err(bad("an Avro integer is longer than 10 bytes"))
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = usize::try_from(self.long()?).map_err(|_| bad("negative Avro length"))?;
        Ok(self.take(n)?.to_vec())
    }

    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| bad("Avro string is not UTF-8"))
    }

    /// The item count of the next array/map block (0 ends it); skips a block byte size.
    fn block_count(&mut self) -> Result<usize> {
        let n = self.long()?;
        if n < 0 {
            self.long()?;
        }
        Ok(n.unsigned_abs() as usize)
    }

    fn value(&mut self, schema: &Schema) -> Result<Value> {
        Ok(match schema {
            Schema::Null => Value::Null,
            Schema::Boolean => Value::Boolean(self.take(1)?[0] != 0),
            Schema::Int | Schema::Long => Value::Long(self.long()?),
            Schema::Float => {
                let b: [u8; 4] = self.take(4)?.try_into().unwrap_or_default();
                Value::Double(f64::from(f32::from_le_bytes(b)))
            }
            Schema::Double => {
                let b: [u8; 8] = self.take(8)?.try_into().unwrap_or_default();
                Value::Double(f64::from_le_bytes(b))
            }
            Schema::Bytes => Value::Bytes(self.bytes()?),
            Schema::Fixed(n) => Value::Bytes(self.take(*n)?.to_vec()),
            Schema::String => Value::String(self.string()?),
            Schema::Enum(symbols) => {
                let i = self.long()?;
                let symbol = usize::try_from(i).ok().and_then(|i| symbols.get(i));
                Value::String(
                    symbol
                        .cloned()
                        .ok_or_else(|| bad("Avro enum index out of range"))?,
                )
            }
            Schema::Record(fields) => Value::Record(
                fields
                    .iter()
                    .map(|(name, s)| Ok((name.clone(), self.value(s)?)))
                    .collect::<Result<_>>()?,
            ),
            Schema::Array(item) => {
                let mut items = Vec::new();
                loop {
                    let n = self.block_count()?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        items.push(self.value(item)?);
                    }
                }
                Value::Array(items)
            }
            Schema::Map(item) => {
                let mut entries = Vec::new();
                loop {
                    let n = self.block_count()?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        let k = self.string()?;
                        entries.push((k, self.value(item)?));
                    }
                }
                Value::Map(entries)
            }
            Schema::Union(branches) => {
                let i = self.long()?;
                let branch = usize::try_from(i).ok().and_then(|i| branches.get(i));
                self.value(branch.ok_or_else(|| bad("Avro union index out of range"))?)?
            }
        })
    }
}

const MAGIC: &[u8; 4] = b"Obj\x01";

/// The metadata map of a container file's header.
pub type Header = BTreeMap<String, Vec<u8>>;

/// An object container file: `schema_json` (written verbatim), header `metadata`, and the
/// `records`, each encoded as the schema.
pub fn write_container(
    schema_json: &str,
    metadata: &[(&str, String)],
    records: &[Value],
) -> Result<Vec<u8>> {
    let schema = parse_schema(
        &serde_json::from_str(schema_json)
            .map_err(|e| Error::new(Code::Internal, "an Avro schema is not JSON").source(e))?,
    )?;
    let mut out = MAGIC.to_vec();
    put_long(&mut out, metadata.len() as i64 + 2);
    put_bytes(&mut out, b"avro.schema");
    put_bytes(&mut out, schema_json.as_bytes());
    put_bytes(&mut out, b"avro.codec");
    put_bytes(&mut out, b"null");
    for (k, v) in metadata {
        put_bytes(&mut out, k.as_bytes());
        put_bytes(&mut out, v.as_bytes());
    }
    put_long(&mut out, 0);
    let sync: [u8; 16] = rand::random();
    out.extend_from_slice(&sync);
    if !records.is_empty() {
        let mut block = Vec::new();
        for r in records {
            encode(&mut block, &schema, r)?;
        }
        put_long(&mut out, records.len() as i64);
        put_bytes(&mut out, &block);
        out.extend_from_slice(&sync);
    }
    Ok(out)
}

/// The header metadata and records of an object container file (`name` names it in
/// errors).
pub fn read_container(data: &[u8], name: &str) -> Result<(Header, Vec<Value>)> {
    let in_file = |e: Error| {
        Error::new(e.code(), format!("{name}: {}", e.message())).hint(
            "the file is not an Avro file sluice can read (codecs `null`, `deflate`, `zstandard`): set the table's `write.avro.compression-codec` to `gzip`, `zstd` or `none` for the writer that rewrote it, or commit to a new table (another `iceberg.table_prefix`)",
        )
    };
    let mut r = Reader { data, at: 0 };
    if r.take(4).map_err(in_file)? != MAGIC {
        return Err(in_file(bad("not an Avro object container file")));
    }
    let mut metadata = BTreeMap::new();
    let meta = r
        .value(&Schema::Map(Box::new(Schema::Bytes)))
        .map_err(in_file)?;
    if let Value::Map(entries) = meta {
        for (k, v) in entries {
            if let Value::Bytes(b) = v {
                metadata.insert(k, b);
            }
        }
    }
    let sync = r.take(16).map_err(in_file)?.to_vec();
    let codec = String::from_utf8_lossy(
        metadata
            .get("avro.codec")
            .map(Vec::as_slice)
            .unwrap_or(b"null"),
    )
    .into_owned();
    if !matches!(codec.as_str(), "null" | "deflate" | "zstandard") {
        return Err(in_file(bad(format!(
            "Avro codec {codec:?} is not supported"
        ))));
    }
    let schema_json: Json = metadata
        .get("avro.schema")
        .and_then(|s| serde_json::from_slice(s).ok())
        .ok_or_else(|| in_file(bad("no readable avro.schema in the header")))?;
    let schema = parse_schema(&schema_json).map_err(in_file)?;
    let mut records = Vec::new();
    while r.at < data.len() {
        let count = r.long().map_err(in_file)?;
        let size = r.long().map_err(in_file)?;
        let stored = r
            .take(usize::try_from(size).map_err(|_| in_file(bad("a negative block size")))?)
            .map_err(in_file)?;
        let block = decompress(&codec, stored).map_err(in_file)?;
        let mut b = Reader {
            data: &block,
            at: 0,
        };
        for _ in 0..count {
            records.push(b.value(&schema).map_err(in_file)?);
        }
        if r.take(16).map_err(in_file)? != sync.as_slice() {
            return Err(in_file(bad("an Avro block's sync marker does not match")));
        }
    }
    Ok((metadata, records))
}

/// A block's bytes as stored with `codec` (one `read_container` accepts), decoded.
fn decompress(codec: &str, stored: &[u8]) -> Result<Vec<u8>> {
    use std::io::Read;
    match codec {
        "deflate" => {
            let mut out = Vec::new();
            flate2::read::DeflateDecoder::new(stored)
                .read_to_end(&mut out)
                .map_err(|e| bad(format!("a deflate block does not decompress: {e}")))?;
            Ok(out)
        }
        "zstandard" => zstd::stream::decode_all(stored)
            .map_err(|e| bad(format!("a zstandard block does not decompress: {e}"))),
        _ => Ok(stored.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
        {"name":"a","type":"long","field-id":1},
        {"name":"b","type":["null","string"],"default":null,"field-id":2},
        {"name":"c","type":{"type":"array","items":{"type":"record","name":"e","fields":[{"name":"k","type":"int"}]}},"field-id":3},
        {"name":"d","type":{"type":"record","name":"empty","fields":[]}}]}"#;

    #[test]
    fn round_trips_records_and_keeps_the_schema_text() {
        let records = vec![
            Value::Record(vec![
                ("a".into(), Value::Long(-300)),
                ("b".into(), Value::String("x".into())),
                (
                    "c".into(),
                    Value::Array(vec![Value::Record(vec![("k".into(), Value::Long(7))])]),
                ),
                ("d".into(), Value::Record(vec![])),
            ]),
            Value::Record(vec![
                ("a".into(), Value::Long(i64::MAX)),
                ("b".into(), Value::Null),
                ("c".into(), Value::Array(vec![])),
                ("d".into(), Value::Record(vec![])),
            ]),
        ];
        let file = write_container(SCHEMA, &[("format-version", "2".into())], &records).unwrap();
        let (meta, read) = read_container(&file, "t.avro").unwrap();
        assert_eq!(read, records);
        assert_eq!(meta["avro.schema"], SCHEMA.as_bytes());
        assert_eq!(meta["format-version"], b"2");
    }

    #[test]
    fn zigzag_matches_the_spec() {
        let mut out = Vec::new();
        for v in [0, -1, 1, -2, 2, 64] {
            put_long(&mut out, v);
        }
        assert_eq!(out, [0, 1, 2, 3, 4, 0x80, 1]);
    }

    /// `file` (codec `null`, one block) with its block stored by `codec` as `compress`
    /// encodes it.
    fn recompressed(file: &[u8], codec: &str, compress: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
        let mut r = Reader { data: file, at: 4 };
        let mut meta = match r.value(&Schema::Map(Box::new(Schema::Bytes))).unwrap() {
            Value::Map(m) => m,
            _ => unreachable!(),
        };
        let sync = r.take(16).unwrap().to_vec();
        let count = r.long().unwrap();
        let size = r.long().unwrap() as usize;
        let block = r.take(size).unwrap().to_vec();
        for (k, v) in meta.iter_mut() {
            if k == "avro.codec" {
                *v = Value::Bytes(codec.as_bytes().to_vec());
            }
        }
        let mut out = MAGIC.to_vec();
        put_long(&mut out, meta.len() as i64);
        for (k, v) in &meta {
            let Value::Bytes(b) = v else { unreachable!() };
            put_bytes(&mut out, k.as_bytes());
            put_bytes(&mut out, b);
        }
        put_long(&mut out, 0);
        out.extend_from_slice(&sync);
        put_long(&mut out, count);
        put_bytes(&mut out, &compress(&block));
        out.extend_from_slice(&sync);
        out
    }

    #[test]
    fn reads_the_codecs_other_iceberg_writers_use() {
        use std::io::Write;
        let records = vec![Value::Record(vec![
            ("a".into(), Value::Long(42)),
            ("b".into(), Value::String("compressed".repeat(20))),
            ("c".into(), Value::Array(vec![])),
            ("d".into(), Value::Record(vec![])),
        ])];
        let file = write_container(SCHEMA, &[], &records).unwrap();
        let deflated = recompressed(&file, "deflate", |b| {
            let mut e =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        });
        assert!(deflated.len() < file.len(), "the block is compressed");
        assert_eq!(read_container(&deflated, "d.avro").unwrap().1, records);
        let zstd = recompressed(&file, "zstandard", |b| {
            zstd::stream::encode_all(b, 3).unwrap()
        });
        assert_eq!(read_container(&zstd, "z.avro").unwrap().1, records);
        // A codec it has no decoder for, and a block that is not what its codec says.
        let snappy = recompressed(&file, "snappy", |b| b.to_vec());
        let e = read_container(&snappy, "s.avro").unwrap_err();
        assert_eq!(e.code(), Code::IcebergMetadata);
        assert!(
            e.message().contains("\"snappy\" is not supported"),
            "{}",
            e.message()
        );
        let broken = recompressed(&file, "deflate", |b| b.to_vec());
        let e = read_container(&broken, "b.avro").unwrap_err();
        assert_eq!(e.code(), Code::IcebergMetadata);
        assert!(e.message().contains("b.avro"), "{}", e.message());
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let e = read_container(b"PAR1", "x.avro").unwrap_err();
        assert_eq!(e.code(), Code::IcebergMetadata);
        assert!(e.message().contains("x.avro"), "{}", e.message());
    }
}
