//! PostgreSQL column types and values: which source types sluice captures, the
//! [`ColumnType`] each becomes, and the decoding of one binary-format cell into a
//! [`Value`].
//!
//! Guarantees:
//! * [`column_type`] maps a closed list of built-in types (by OID) to typed columns and
//!   answers [`Unsupported`] for every other type; [`super::resolve`] then resolves those
//!   (domains, enums, arrays of them) or captures them in their text form
//!   ([`Decode::Text`]) — never a silent fallback.
//! * [`decode_cell`] is total and exact: a cell decodes to a value of its column's type
//!   that means the same thing, or fails with a [`DecodeError`]. Nothing is rounded,
//!   truncated, clamped or turned into NULL. `±infinity` dates and timestamps are written
//!   as the physical type's extremes ([`INFINITY_KEY`]); numeric `NaN`/`±Infinity` are
//!   their text in an unconstrained numeric column; `NaN` in a `numeric(p,s)` column,
//!   out-of-range values and more digits than the column declares are errors, and
//!   malformed bytes are errors, never panics.
//!
//! Numeric columns:
//! * `numeric(p, s)` becomes `Decimal { precision, scale }` (a Decimal128) up to precision
//!   38 — the widest decimal every reader takes (DuckDB reads a Decimal256 as a rounded
//!   DOUBLE; Spark and Athena refuse it). PostgreSQL 15 also allows a negative scale
//!   (`numeric(5,-2)`, multiples of 100) and a scale above the precision (`numeric(2,5)`,
//!   values below 0.001); Parquet's DECIMAL allows neither, so these are widened losslessly
//!   to `Decimal { precision: p - s, scale: 0 }` and `Decimal { precision: s, scale: s }`.
//! * `numeric(p,s)` with p above 38 after widening is captured like unconstrained numeric,
//!   as its exact text with the column's scale (`numeric(50,5)`: `123.45000`).
//! * `time` is its text as PostgreSQL prints it (`12:34:56.5`): Spark and Athena read no
//!   Parquet TIME (Spark refuses the whole file), and the text is exact.
//! * Unconstrained `numeric` (no typmod) has no fixed scale: every value carries its own
//!   (`1.5` and `1.50000` are different values in PostgreSQL), so no single Decimal type
//!   holds a column of them losslessly. Such columns become [`ColumnType::Utf8`] holding the
//!   exact decimal text as PostgreSQL prints it, display scale kept (`-12.3400`), never in
//!   exponent form. Declare the column `numeric(p,s)` to get a Decimal column instead.
//!
//! Text-format cells: pgoutput sends `t` (text) cells only for types without a binary
//! send function, or when binary mode is off. Every type supported here has one, so a text
//! cell means the slot is not being read in binary mode. [`decode_text`] still accepts the
//! types whose text form is trivially exact and independent of session settings (text-like
//! types, `json`/`jsonb`, `bool`, integers, `uuid`) and refuses all others (dates and
//! timestamps depend on `DateStyle`, `bytea` on `bytea_output`, numerics and arrays need a
//! parser this module does not carry) with a reason naming the cause.
//!
//! Text values must be UTF-8: the server converts them to the session's `client_encoding`,
//! which sluice sets to UTF8; anything else is an error, never a lossy conversion.

use std::borrow::Cow;
use std::fmt;

use postgres_protocol::types as wire;

use crate::change::{Column, ColumnType, UnfitValue, Value};
use crate::error::{Code, Error};

/// Microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from 1970-01-01 to PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_DAYS: i32 = 10_957;
/// The widest precision captured as a Decimal (a Decimal128, [`Value::Decimal`]); wider
/// numerics are exact decimal text.
const MAX_DECIMAL128_PRECISION: u8 = 38;

/// Built-in type OIDs (`pg_type.oid`, stable across PostgreSQL versions).
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const NAME: u32 = 19;
    pub const OID: u32 = 26;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const JSONB: u32 = 3802;

    pub const BOOL_ARRAY: u32 = 1000;
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
    pub const VARCHAR_ARRAY: u32 = 1015;
    pub const INT8_ARRAY: u32 = 1016;
    pub const FLOAT4_ARRAY: u32 = 1021;
    pub const FLOAT8_ARRAY: u32 = 1022;
    pub const TIMESTAMP_ARRAY: u32 = 1115;
    pub const DATE_ARRAY: u32 = 1182;
    pub const TIMESTAMPTZ_ARRAY: u32 = 1185;
    pub const NUMERIC_ARRAY: u32 = 1231;
    pub const UUID_ARRAY: u32 = 2951;
}

/// The element type of a supported array type.
pub fn array_element_oid(array_oid: u32) -> Option<u32> {
    Some(match array_oid {
        oid::BOOL_ARRAY => oid::BOOL,
        oid::INT2_ARRAY => oid::INT2,
        oid::INT4_ARRAY => oid::INT4,
        oid::INT8_ARRAY => oid::INT8,
        oid::TEXT_ARRAY => oid::TEXT,
        oid::VARCHAR_ARRAY => oid::VARCHAR,
        oid::FLOAT4_ARRAY => oid::FLOAT4,
        oid::FLOAT8_ARRAY => oid::FLOAT8,
        oid::NUMERIC_ARRAY => oid::NUMERIC,
        oid::UUID_ARRAY => oid::UUID,
        oid::DATE_ARRAY => oid::DATE,
        oid::TIMESTAMP_ARRAY => oid::TIMESTAMP,
        oid::TIMESTAMPTZ_ARRAY => oid::TIMESTAMPTZ,
        _ => return None,
    })
}

/// The OID of the built-in array type whose elements are `element_oid`.
pub fn array_oid_of(element_oid: u32) -> Option<u32> {
    [
        oid::BOOL_ARRAY,
        oid::INT2_ARRAY,
        oid::INT4_ARRAY,
        oid::INT8_ARRAY,
        oid::TEXT_ARRAY,
        oid::VARCHAR_ARRAY,
        oid::FLOAT4_ARRAY,
        oid::FLOAT8_ARRAY,
        oid::NUMERIC_ARRAY,
        oid::UUID_ARRAY,
        oid::DATE_ARRAY,
        oid::TIMESTAMP_ARRAY,
        oid::TIMESTAMPTZ_ARRAY,
    ]
    .into_iter()
    .find(|a| array_element_oid(*a) == Some(element_oid))
}

/// How a column's cells are read, decided once per column when the table is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decode {
    /// The binary send format of the built-in type `oid` (for a domain: its base type's;
    /// for an enum: `text`, whose send format is the label's bytes, as `enum_send`'s is).
    /// For an array of a domain or an enum the array header carries the domain's or the
    /// enum's OID instead of the built-in element's: `wire_element`.
    Binary { oid: u32, wire_element: Option<u32> },
    /// pgvector's `vector` (`half: false`, float4 elements) or `halfvec` (`half: true`,
    /// IEEE half elements, widened exactly to float4) in its binary send form
    /// ([`decode_vector`]): a list of Float32.
    Vector { half: bool },
    /// The type's own text output (`typoutput`) under [`TEXT_OUTPUT_SETTINGS`], as a
    /// string column declared `sluice.form = text`. The baseline reads it through a
    /// `::text` cast; the stream takes a text cell as is and has the server render a
    /// binary cell (its `typreceive` then `typoutput`), so both paths hold what the
    /// server prints for `col::text`.
    Text,
}

/// The session settings every PostgreSQL session that produces text output (the
/// baseline's `::text` casts, the stream's text cells and rendered cells) runs with, so
/// a value prints the same way on both paths and on every run.
pub const TEXT_OUTPUT_SETTINGS: &str = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; \
     SET IntervalStyle = 'iso_8601'; SET extra_float_digits = 3; SET bytea_output = 'hex'; \
     SET standard_conforming_strings = on";

/// Parquet field metadata key declaring how a column holds its source type's values;
/// `text` for [`Decode::Text`] columns.
pub const FORM_KEY: &str = "sluice.form";

/// Parquet field metadata key on every PostgreSQL `date`, `timestamp` and `timestamptz`
/// column: `infinity` and `-infinity` are written as the largest value of the physical
/// type and its negation (`i64::MAX`/`-i64::MAX` µs, `i32::MAX`/`-i32::MAX` days), the
/// values DuckDB itself reads as `infinity`/`-infinity`.
pub const INFINITY_KEY: &str = "sluice.infinity";

/// A source type sluice does not capture; the caller names the column and refuses to open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PostgreSQL type {type_name} is not supported: {reason}")]
pub struct Unsupported {
    /// The type as the caller named it (`format_type(atttypid, atttypmod)`).
    pub type_name: String,
    pub reason: Cow<'static, str>,
}

/// The sluice column type for a PostgreSQL column of `type_oid` with `typmod`
/// (`pg_attribute.atttypmod`; for arrays the element's modifier). `type_name` is only
/// carried into the error.
pub fn column_type(type_oid: u32, typmod: i32, type_name: &str) -> Result<ColumnType, Unsupported> {
    let unsupported = |reason: Cow<'static, str>| Unsupported {
        type_name: type_name.to_owned(),
        reason,
    };
    let scalar_oid = array_element_oid(type_oid).unwrap_or(type_oid);
    let scalar = match scalar_oid {
        oid::BOOL => ColumnType::Boolean,
        oid::INT2 => ColumnType::Int16,
        oid::INT4 => ColumnType::Int32,
        oid::INT8 => ColumnType::Int64,
        oid::FLOAT4 => ColumnType::Float32,
        oid::FLOAT8 => ColumnType::Float64,
        oid::NUMERIC => numeric_column_type(typmod).map_err(|r| unsupported(r.into()))?,
        oid::OID => ColumnType::Int64,
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME => ColumnType::Utf8,
        oid::BYTEA => ColumnType::Binary,
        oid::DATE => ColumnType::Date,
        // Spark and Athena read no Parquet TIME (Spark refuses the whole file): the text.
        oid::TIME => ColumnType::Utf8,
        oid::TIMESTAMP => ColumnType::Timestamp,
        oid::TIMESTAMPTZ => ColumnType::TimestampTz,
        oid::UUID => ColumnType::Uuid,
        oid::JSON | oid::JSONB => ColumnType::Json,
        _ => {
            return Err(unsupported(Cow::Borrowed(
                "sluice has no exact typed mapping for it; leave the column out of the \
                 publication's column list or cast it in a generated column of a supported type",
            )));
        }
    };
    Ok(if scalar_oid == type_oid {
        scalar
    } else {
        ColumnType::List(Box::new(scalar))
    })
}

/// The name `format_type(oid, typmod)` gives a built-in scalar type whose name the
/// stream's Relation message does not carry (`integer`, `numeric(12,2)`, `character
/// varying(40)`), or `None` for any other type (the caller keeps the catalog's name).
pub fn builtin_type_name(type_oid: u32, typmod: i32) -> Option<String> {
    let length = |base: &str, bare: &str| match typmod.checked_sub(4).filter(|n| *n >= 0) {
        Some(n) => format!("{base}({n})"),
        None => bare.to_owned(),
    };
    Some(match type_oid {
        oid::BOOL => "boolean".into(),
        oid::INT2 => "smallint".into(),
        oid::INT4 => "integer".into(),
        oid::INT8 => "bigint".into(),
        oid::FLOAT4 => "real".into(),
        oid::FLOAT8 => "double precision".into(),
        oid::NUMERIC => match numeric_typmod(typmod) {
            Some((p, s)) => format!("numeric({p},{s})"),
            None => "numeric".into(),
        },
        oid::TEXT => "text".into(),
        oid::VARCHAR => length("character varying", "character varying"),
        oid::BPCHAR => length("character", "bpchar"),
        _ => return None,
    })
}

/// `(precision, scale)` of a numeric typmod, `None` for unconstrained `numeric`.
/// PostgreSQL 15 packs the scale as an 11-bit two's-complement field.
fn numeric_typmod(typmod: i32) -> Option<(i32, i32)> {
    let packed = typmod.checked_sub(4).filter(|p| *p >= 0)?;
    let precision = (packed >> 16) & 0xffff;
    let scale = ((packed & 0x7ff) ^ 0x400) - 0x400;
    Some((precision, scale))
}

fn numeric_column_type(typmod: i32) -> Result<ColumnType, String> {
    let Some((precision, scale)) = numeric_typmod(typmod) else {
        return Ok(ColumnType::Utf8);
    };
    // Widen what Parquet cannot declare; the value set is unchanged (see module doc).
    let (p, s) = if scale < 0 {
        (precision - scale, 0)
    } else if scale > precision {
        (scale, scale)
    } else {
        (precision, scale)
    };
    if !(1..=i32::from(MAX_DECIMAL128_PRECISION)).contains(&p) {
        // Wider than Decimal128: exact decimal text, as for unconstrained numeric (DuckDB
        // reads a Decimal256 as a rounded DOUBLE, Spark and Athena refuse it).
        return Ok(ColumnType::Utf8);
    }
    Ok(ColumnType::Decimal {
        // In range by the check above (and 0 <= s <= p).
        precision: u8::try_from(p).map_err(|e| e.to_string())?,
        scale: i8::try_from(s).map_err(|e| e.to_string())?,
    })
}

/// Why a cell could not be decoded; the caller adds table, column and position.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct DecodeError {
    kind: DecodeErrorKind,
    reason: Cow<'static, str>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// What kind of failure a [`DecodeError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// A well-formed value the column type cannot hold (infinity, NaN, too many digits).
    Unrepresentable,
    /// The bytes are not a valid encoding of the expected type (or of any type).
    Malformed,
}

impl DecodeError {
    fn unrepresentable(reason: impl Into<Cow<'static, str>>) -> Self {
        DecodeError {
            kind: DecodeErrorKind::Unrepresentable,
            reason: reason.into(),
            source: None,
        }
    }

    fn malformed(reason: impl Into<Cow<'static, str>>) -> Self {
        DecodeError {
            kind: DecodeErrorKind::Malformed,
            reason: reason.into(),
            source: None,
        }
    }

    /// A malformed value reported by a `postgres_protocol` decoder, cause kept.
    fn wire(what: &'static str) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> Self {
        move |source| DecodeError {
            kind: DecodeErrorKind::Malformed,
            reason: Cow::Owned(format!("invalid binary {what} value")),
            source: Some(source),
        }
    }

    /// The same error, said of the `index`-th (0-based) element of an array.
    fn in_element(mut self, index: usize) -> Self {
        self.reason = Cow::Owned(format!("array element {index}: {}", self.reason));
        self
    }

    pub fn kind(&self) -> DecodeErrorKind {
        self.kind
    }

    /// The short reason, without the cause.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The run's error for this cell of `table`'s `column`, met `at` (`at commit …`, `in
    /// the baseline`). An unrepresentable value carries its [`UnfitValue`] in the chain:
    /// the drain and the baseline move the column to its text form instead of stopping.
    pub fn into_error(self, table: &str, column: &Column, at: &str) -> Error {
        let message = format!(
            "{table}.{} ({}) {at}: {}",
            column.name, column.source_type, self.reason
        );
        match self.kind {
            DecodeErrorKind::Unrepresentable => Error::new(Code::ValueUnrepresentable, message)
                .hint("the column's typed output cannot hold this value: sluice moves the column to its text form and re-baselines the table (docs/types.md, \"A value that does not fit\")")
                .source(UnfitValue {
                    table: table.to_owned(),
                    column: column.name.clone(),
                    reason: self.reason.into_owned(),
                }),
            DecodeErrorKind::Malformed => Error::new(Code::SourceProtocol, message)
                .hint("the server sent bytes that are not a value of the column's type; report it with the run's log")
                .source(self),
        }
    }

    /// The error code the caller's [`Error`](crate::error::Error) should carry.
    pub fn code(&self) -> Code {
        match self.kind {
            DecodeErrorKind::Unrepresentable => Code::ValueUnrepresentable,
            DecodeErrorKind::Malformed => Code::SourceProtocol,
        }
    }
}

/// Decodes one binary-format (`b`) cell of a column of type `ty` (from [`column_type`])
/// whose PostgreSQL type is `type_oid`.
pub fn decode_binary(ty: &ColumnType, type_oid: u32, raw: &[u8]) -> Result<Value, DecodeError> {
    decode_binary_as(ty, type_oid, None, raw)
}

/// Decodes one cell as `decode` says: binary send format, or the type's text output
/// (from a `::text` cast or a text cell).
pub fn decode_cell(ty: &ColumnType, decode: &Decode, raw: &[u8]) -> Result<Value, DecodeError> {
    match decode {
        Decode::Binary { oid, wire_element } => decode_binary_as(ty, *oid, *wire_element, raw),
        Decode::Text => Ok(Value::Text(utf8(raw)?)),
        Decode::Vector { half } => decode_vector(*half, raw),
    }
}

/// pgvector's binary send form of `vector` and `halfvec`: `int16` dimensions, `int16`
/// unused, then each element big-endian — a float4 (`vector`) or an IEEE half
/// (`halfvec`, widened exactly to float4). A list of `Value::Float`.
pub fn decode_vector(half: bool, raw: &[u8]) -> Result<Value, DecodeError> {
    let malformed = || DecodeError::malformed("a pgvector value shorter than its header says");
    let header: [u8; 4] = raw
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(malformed)?;
    let dims = usize::from(u16::from_be_bytes([header[0], header[1]]));
    let width = if half { 2 } else { 4 };
    let body = &raw[4..];
    if body.len() != dims * width {
        return Err(malformed());
    }
    let values = body
        .chunks_exact(width)
        .map(|b| {
            let x = if half {
                f16_to_f32(u16::from_be_bytes([b[0], b[1]]))
            } else {
                f32::from_be_bytes([b[0], b[1], b[2], b[3]])
            };
            Value::Float(f64::from(x))
        })
        .collect();
    Ok(Value::List(values))
}

/// An IEEE 754 half (binary16) as the float4 of the same value (every half is one).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let fraction = u32::from(bits & 0x3ff);
    let magnitude = match exponent {
        0 if fraction == 0 => 0,
        // Subnormal: fraction × 2^-24, exact in a float4.
        0 => (fraction as f32 * f32::powi(2.0, -24)).to_bits(),
        0x1f => 0x7f80_0000 | (fraction << 13),
        _ => ((exponent + 112) << 23) | (fraction << 13),
    };
    f32::from_bits(sign | magnitude)
}

fn decode_binary_as(
    ty: &ColumnType,
    type_oid: u32,
    wire_element: Option<u32>,
    raw: &[u8],
) -> Result<Value, DecodeError> {
    match ty {
        ColumnType::List(element) => {
            let element_oid = array_element_oid(type_oid).ok_or_else(|| mismatch(ty, type_oid))?;
            decode_array(element, element_oid, wire_element, raw)
        }
        _ => decode_scalar(ty, type_oid, raw),
    }
}

fn decode_scalar(ty: &ColumnType, type_oid: u32, raw: &[u8]) -> Result<Value, DecodeError> {
    use ColumnType as T;
    Ok(match (ty, type_oid) {
        (T::Boolean, oid::BOOL) => {
            Value::Boolean(wire::bool_from_sql(raw).map_err(DecodeError::wire("bool"))?)
        }
        (T::Int16, oid::INT2) => Value::Int(
            wire::int2_from_sql(raw)
                .map_err(DecodeError::wire("int2"))?
                .into(),
        ),
        (T::Int32, oid::INT4) => Value::Int(
            wire::int4_from_sql(raw)
                .map_err(DecodeError::wire("int4"))?
                .into(),
        ),
        (T::Int64, oid::INT8) => {
            Value::Int(wire::int8_from_sql(raw).map_err(DecodeError::wire("int8"))?)
        }
        (T::Int64, oid::OID) => Value::Int(
            wire::oid_from_sql(raw)
                .map_err(DecodeError::wire("oid"))?
                .into(),
        ),
        (T::Float32, oid::FLOAT4) => Value::Float(
            wire::float4_from_sql(raw)
                .map_err(DecodeError::wire("float4"))?
                .into(),
        ),
        (T::Float64, oid::FLOAT8) => {
            Value::Float(wire::float8_from_sql(raw).map_err(DecodeError::wire("float8"))?)
        }
        (T::Decimal { precision, scale }, oid::NUMERIC) => {
            Numeric::parse(raw)?.to_decimal(*precision, *scale)?
        }
        (T::Utf8, oid::NUMERIC) => match numeric_special(raw) {
            // PostgreSQL's own text for them; the header must still be well-formed.
            Some(special) if raw.len() == 8 => Value::Text(special.to_owned()),
            _ => Value::Text(Numeric::parse(raw)?.to_text()?),
        },
        (T::Utf8, oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME) | (T::Json, oid::JSON) => {
            Value::Text(utf8(raw)?)
        }
        (T::Json, oid::JSONB) => match raw.split_first() {
            Some((1, text)) => Value::Text(utf8(text)?),
            Some((version, _)) => {
                return Err(DecodeError::malformed(format!(
                    "jsonb binary format version {version} (only version 1 is known)"
                )));
            }
            None => return Err(DecodeError::malformed("empty jsonb value")),
        },
        (T::Binary, oid::BYTEA) => Value::Bytes(wire::bytea_from_sql(raw).to_vec()),
        (T::Uuid, oid::UUID) => Value::Text(uuid_text(
            wire::uuid_from_sql(raw).map_err(DecodeError::wire("uuid"))?,
        )),
        (T::Date, oid::DATE) => {
            let days = wire::date_from_sql(raw).map_err(DecodeError::wire("date"))?;
            // ±infinity: DuckDB's own date infinities (see INFINITY_KEY).
            if days == i32::MAX || days == i32::MIN {
                return Ok(Value::Date(if days > 0 { i32::MAX } else { -i32::MAX }));
            }
            Value::Date(days.checked_add(PG_EPOCH_DAYS).ok_or_else(|| {
                DecodeError::unrepresentable(format!(
                    "date {days} days after 2000-01-01 is out of range"
                ))
            })?)
        }
        (T::Utf8, oid::TIME) => {
            let micros = wire::time_from_sql(raw).map_err(DecodeError::wire("time"))?;
            // PostgreSQL accepts 24:00:00 itself; anything outside a day is corrupt.
            if !(0..=86_400_000_000).contains(&micros) {
                return Err(DecodeError::malformed(format!(
                    "time of day {micros} µs is outside 00:00..24:00"
                )));
            }
            Value::Text(time_text(micros))
        }
        (T::Timestamp, oid::TIMESTAMP) | (T::TimestampTz, oid::TIMESTAMPTZ) => {
            let micros = wire::timestamp_from_sql(raw).map_err(DecodeError::wire("timestamp"))?;
            // ±infinity: DuckDB's own timestamp infinities (see INFINITY_KEY).
            if micros == i64::MAX || micros == i64::MIN {
                return Ok(Value::Timestamp(if micros > 0 {
                    i64::MAX
                } else {
                    -i64::MAX
                }));
            }
            Value::Timestamp(micros.checked_add(PG_EPOCH_MICROS).ok_or_else(|| {
                DecodeError::unrepresentable(format!(
                    "timestamp {micros} µs after 2000-01-01 is out of range"
                ))
            })?)
        }
        _ => return Err(mismatch(ty, type_oid)),
    })
}

/// A one-dimensional array (`array_send`): ndim, has-null flag, element OID, then for
/// one dimension its length and lower bound, then per element an `Int32` length (-1 NULL)
/// and the element's binary value. Parsed here rather than through
/// `postgres_protocol::types::array_from_sql` because iterating its values needs the
/// `fallible-iterator` trait, which is not a direct dependency of sluice.
fn decode_array(
    element: &ColumnType,
    element_oid: u32,
    wire_element: Option<u32>,
    raw: &[u8],
) -> Result<Value, DecodeError> {
    let mut r = ArrayReader(raw);
    let ndim = r.i32()?;
    let flags = r.i32()?;
    let got_oid = u32::from_be_bytes(r.take::<4>()?);
    if flags != 0 && flags != 1 {
        return Err(DecodeError::malformed(format!(
            "invalid array flags {flags}"
        )));
    }
    if got_oid != element_oid && Some(got_oid) != wire_element {
        return Err(DecodeError::malformed(format!(
            "array element type OID {got_oid}, expected {element_oid}"
        )));
    }
    let len = match ndim {
        0 => 0,
        1 => {
            let len = r.i32()?;
            let _lower_bound = r.i32()?;
            usize::try_from(len)
                .map_err(|_| DecodeError::malformed(format!("negative array length {len}")))?
        }
        n if n > 1 => {
            return Err(DecodeError::unrepresentable(format!(
                "{n}-dimensional array (only one-dimensional arrays are captured)"
            )));
        }
        n => {
            return Err(DecodeError::malformed(format!(
                "negative array dimension count {n}"
            )));
        }
    };
    // Each element takes at least its 4-byte length: never reserve more than that.
    let mut values = Vec::with_capacity(len.min(r.0.len() / 4));
    for _ in 0..len {
        let elem_len = r.i32()?;
        let value = match elem_len {
            -1 => Value::Null,
            n => {
                let n = usize::try_from(n).map_err(|_| {
                    DecodeError::malformed(format!("invalid array element length {n}"))
                })?;
                let bytes = r.bytes(n)?;
                // A `List` element type matches no scalar arm: nested lists are refused.
                decode_scalar(element, element_oid, bytes)
                    .map_err(|e| e.in_element(values.len()))?
            }
        };
        values.push(value);
    }
    if !r.0.is_empty() {
        return Err(DecodeError::malformed(format!(
            "{} trailing bytes after array elements",
            r.0.len()
        )));
    }
    Ok(Value::List(values))
}

struct ArrayReader<'a>(&'a [u8]);

impl<'a> ArrayReader<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or_else(|| DecodeError::malformed("truncated array"))?;
        self.0 = rest;
        Ok(*head)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.take().map(i32::from_be_bytes)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let (head, rest) = self
            .0
            .split_at_checked(n)
            .ok_or_else(|| DecodeError::malformed("truncated array element"))?;
        self.0 = rest;
        Ok(head)
    }
}

/// Decodes one text-format (`t`) cell. Only types whose text form is exact and does not
/// depend on session settings are accepted (see the module doc); the others are refused
/// with a reason that points at binary mode.
pub fn decode_text(ty: &ColumnType, type_oid: u32, raw: &[u8]) -> Result<Value, DecodeError> {
    let text = || {
        std::str::from_utf8(raw)
            .map_err(|e| DecodeError::malformed(format!("text value is not UTF-8 ({e})")))
    };
    let int = |min: i64, max: i64| -> Result<Value, DecodeError> {
        let text = text()?;
        text.parse::<i64>()
            .ok()
            .filter(|v| (min..=max).contains(v))
            .map(Value::Int)
            .ok_or_else(|| {
                DecodeError::malformed(format!("{text:?} is not a valid integer of this column"))
            })
    };
    use ColumnType as T;
    match (ty, type_oid) {
        (T::Utf8, oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME)
        | (T::Json, oid::JSON | oid::JSONB) => Ok(Value::Text(text()?.to_owned())),
        (T::Boolean, oid::BOOL) => match raw {
            b"t" => Ok(Value::Boolean(true)),
            b"f" => Ok(Value::Boolean(false)),
            _ => Err(DecodeError::malformed(
                "bool text value is neither 't' nor 'f'",
            )),
        },
        (T::Int16, oid::INT2) => int(i16::MIN.into(), i16::MAX.into()),
        (T::Int32, oid::INT4) => int(i32::MIN.into(), i32::MAX.into()),
        (T::Int64, oid::INT8) => int(i64::MIN, i64::MAX),
        (T::Uuid, oid::UUID) => {
            let text = text()?;
            parse_uuid(text)
                .map(|bytes| Value::Text(uuid_text(bytes)))
                .ok_or_else(|| DecodeError::malformed(format!("{text:?} is not a UUID")))
        }
        _ => Err(DecodeError::malformed(format!(
            "the server sent a {ty:?} value (type OID {type_oid}) in text format, which sluice \
             reads only for text-like, json, bool, integer and uuid columns; the slot must be \
             read with the pgoutput option binary 'true'"
        ))),
    }
}

/// A `numeric` value in PostgreSQL's binary send format.
struct Numeric<'a> {
    negative: bool,
    /// Base-10000 weight of the first digit group.
    weight: i16,
    dscale: u16,
    /// Big-endian base-10000 digit groups, each validated to be 0..=9999.
    groups: &'a [[u8; 2]],
}

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;

impl<'a> Numeric<'a> {
    fn parse(raw: &'a [u8]) -> Result<Self, DecodeError> {
        let Some((header, groups)) = raw.split_first_chunk::<8>() else {
            return Err(DecodeError::malformed("truncated numeric header"));
        };
        let [n0, n1, w0, w1, s0, s1, d0, d1] = *header;
        let ndigits = i16::from_be_bytes([n0, n1]);
        let weight = i16::from_be_bytes([w0, w1]);
        let sign = u16::from_be_bytes([s0, s1]);
        let dscale = u16::from_be_bytes([d0, d1]);
        let negative = match sign {
            NUMERIC_POS => false,
            NUMERIC_NEG => true,
            NUMERIC_NAN => {
                return Err(DecodeError::unrepresentable(
                    "numeric NaN has no value in a Decimal column (numeric(p,s)); an unconstrained \
                     numeric column captures it as the text 'NaN'",
                ));
            }
            NUMERIC_PINF => {
                return Err(DecodeError::unrepresentable(
                    "numeric Infinity has no value in a Decimal column (numeric(p,s)); an unconstrained \
                     numeric column captures it as the text 'Infinity'",
                ));
            }
            NUMERIC_NINF => {
                return Err(DecodeError::unrepresentable(
                    "numeric -Infinity has no value in a Decimal column (numeric(p,s)); an unconstrained \
                     numeric column captures it as the text '-Infinity'",
                ));
            }
            other => {
                return Err(DecodeError::malformed(format!(
                    "invalid numeric sign 0x{other:04x}"
                )));
            }
        };
        if dscale & 0xC000 != 0 {
            return Err(DecodeError::malformed(format!(
                "invalid numeric display scale {dscale}"
            )));
        }
        let (groups, rest) = groups.as_chunks::<2>();
        if usize::try_from(ndigits).ok() != Some(groups.len()) || !rest.is_empty() {
            return Err(DecodeError::malformed(format!(
                "numeric declares {ndigits} digit groups but carries {} bytes of them",
                raw.len() - 8
            )));
        }
        let numeric = Numeric {
            negative,
            weight,
            dscale,
            groups,
        };
        if let Some(bad) = numeric.group_values().find(|g| *g > 9999) {
            return Err(DecodeError::malformed(format!(
                "invalid numeric digit group {bad}"
            )));
        }
        Ok(numeric)
    }

    fn group_values(&self) -> impl Iterator<Item = u16> + '_ {
        self.groups.iter().map(|pair| u16::from_be_bytes(*pair))
    }

    /// The digit group at `index` (0 = the group of weight `self.weight`), 0 outside.
    fn group(&self, index: i64) -> u16 {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.groups.get(i))
            .map_or(0, |pair| u16::from_be_bytes(*pair))
    }

    /// The decimal digit of the value at decimal exponent `exp` (the digit worth 10^exp).
    fn digit(&self, exp: i64) -> u32 {
        let index = i64::from(self.weight) - exp.div_euclid(4);
        let within = exp.rem_euclid(4) as u32; // 0..=3
        u32::from(self.group(index)) / 10u32.pow(within) % 10
    }

    /// Decimal exponents of the most and least significant non-zero digits, or `None`
    /// when the value is zero.
    fn nonzero_span(&self) -> Option<(i64, i64)> {
        let mut first = None;
        let mut last = None;
        for (i, g) in self.group_values().enumerate() {
            if g != 0 {
                first.get_or_insert((i, g));
                last = Some((i, g));
            }
        }
        let ((fi, fg), (li, lg)) = (first?, last?);
        let base = |i: usize| 4 * (i64::from(self.weight) - i as i64);
        let top = base(fi) + i64::from(fg.ilog10());
        let bottom = base(li) + i64::from(decimal_trailing_zeros(lg));
        Some((top, bottom))
    }

    /// The unscaled value at `scale`, as a Decimal128 or Decimal256 value for `precision`.
    fn to_decimal(&self, precision: u8, scale: i8) -> Result<Value, DecodeError> {
        let scale = i64::from(scale);
        let span = self.nonzero_span();
        if let Some((top, bottom)) = span {
            if bottom < -scale {
                return Err(DecodeError::unrepresentable(format!(
                    "numeric value has more fractional digits than the column scale {scale}"
                )));
            }
            let digits = top + scale + 1;
            if digits > i64::from(precision) {
                return Err(DecodeError::unrepresentable(format!(
                    "numeric value needs {digits} digits, more than the column precision {precision}"
                )));
            }
        }
        if precision <= MAX_DECIMAL128_PRECISION {
            // Below 10^38 < 2^127 by the precision check.
            let unscaled = self.unscaled_by_groups(scale);
            let signed = i128::try_from(unscaled)
                .map_err(|_| DecodeError::unrepresentable("numeric overflow"))?;
            Ok(Value::Decimal(if self.negative { -signed } else { signed }))
        } else {
            let magnitude = self.unscaled_by_digits(span, scale);
            let value = if self.negative {
                magnitude.negate()
            } else {
                magnitude
            };
            Ok(Value::Decimal256(Box::new(value.to_le_bytes())))
        }
    }

    /// The magnitude times 10^`scale`, one digit group at a time. The caller has checked
    /// that no non-zero digit lies below 10^-`scale` and that the result has at most 38
    /// digits: each group's term is then exact (a group straddling the scale has zeros
    /// below it) and the sum stays below 10^38.
    fn unscaled_by_groups(&self, scale: i64) -> u128 {
        let mut unscaled = 0u128;
        for (i, g) in self.group_values().enumerate() {
            if g == 0 {
                continue;
            }
            // Decimal exponent of the group's last digit, after scaling: -3..=37 here.
            let exp = 4 * (i64::from(self.weight) - i as i64) + scale;
            let term = if exp >= 0 {
                u128::from(g) * 10u128.pow(exp as u32)
            } else {
                u128::from(g) / 10u128.pow((-exp) as u32)
            };
            unscaled += term;
        }
        unscaled
    }

    /// The magnitude times 10^`scale`, digit by digit from the most significant non-zero
    /// one (`span` as [`Self::nonzero_span`] returned it, checked by the caller: at most
    /// 76 digits, so below 10^76 < 2^253).
    fn unscaled_by_digits(&self, span: Option<(i64, i64)>, scale: i64) -> U256 {
        let mut magnitude = U256::ZERO;
        if let Some((top, _)) = span {
            let mut exp = top;
            while exp >= -scale {
                magnitude = magnitude.mul10_add(self.digit(exp));
                exp -= 1;
            }
        }
        magnitude
    }

    /// The exact decimal text, with as many fractional digits as the display scale.
    fn to_text(&self) -> Result<String, DecodeError> {
        let dscale = i64::from(self.dscale);
        let span = self.nonzero_span();
        if let Some((_, bottom)) = span
            && bottom < -dscale
        {
            return Err(DecodeError::malformed(format!(
                "numeric value has digits beyond its display scale {dscale}"
            )));
        }
        let mut text = String::new();
        if self.negative && span.is_some() {
            text.push('-');
        }
        let top = match span {
            Some((top, _)) if top >= 0 => top,
            _ => 0,
        };
        for exp in (0..=top).rev() {
            text.push(char::from(b'0' + self.digit(exp) as u8));
        }
        if dscale > 0 {
            text.push('.');
            for exp in 1..=dscale {
                text.push(char::from(b'0' + self.digit(-exp) as u8));
            }
        }
        Ok(text)
    }
}

/// Trailing decimal zeros of a non-zero digit group (0..=3).
fn decimal_trailing_zeros(group: u16) -> u32 {
    let mut n = 0;
    let mut v = group;
    while v != 0 && v.is_multiple_of(10) && n < 3 {
        v /= 10;
        n += 1;
    }
    n
}

/// Just enough of a 256-bit unsigned integer for decimal accumulation; little-endian limbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct U256([u64; 4]);

impl U256 {
    const ZERO: U256 = U256([0; 4]);

    /// `self * 10 + digit`, wrapping (callers keep the value below 10^76).
    fn mul10_add(self, digit: u32) -> U256 {
        let mut out = [0u64; 4];
        let mut carry = u128::from(digit);
        for (o, limb) in out.iter_mut().zip(self.0) {
            let wide = u128::from(limb) * 10 + carry;
            *o = wide as u64;
            carry = wide >> 64;
        }
        U256(out)
    }

    #[cfg(test)]
    fn to_u128(self) -> Option<u128> {
        let [a, b, c, d] = self.0;
        (c == 0 && d == 0).then_some(u128::from(a) | (u128::from(b) << 64))
    }

    /// Two's-complement negation.
    fn negate(self) -> U256 {
        let mut out = [0u64; 4];
        let mut carry = true;
        for (o, limb) in out.iter_mut().zip(self.0) {
            let (v, c) = (!limb).overflowing_add(u64::from(carry));
            *o = v;
            carry = c;
        }
        U256(out)
    }

    fn to_le_bytes(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (chunk, limb) in out.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&limb.to_le_bytes());
        }
        out
    }
}

fn utf8(raw: &[u8]) -> Result<String, DecodeError> {
    wire::text_from_sql(raw)
        .map(str::to_owned)
        .map_err(DecodeError::wire("text"))
}

/// A time of day as PostgreSQL prints it (`time_out`): `HH:MM:SS`, then the fraction of
/// a second without trailing zeros when it is not zero; `24:00:00` stays itself.
pub fn time_text(micros: i64) -> String {
    let (secs, frac) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let mut text = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if frac != 0 {
        let digits = format!("{frac:06}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text
}

fn uuid_text(bytes: [u8; 16]) -> String {
    let mut text = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        // Writing to a String cannot fail.
        let _ = fmt::Write::write_fmt(&mut text, format_args!("{b:02x}"));
    }
    text
}

/// Parses PostgreSQL's canonical UUID output (`8-4-4-4-12` hex).
fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 || [8, 13, 18, 23].iter().any(|&i| bytes.get(i) != Some(&b'-')) {
        return None;
    }
    let mut hex = bytes.iter().filter(|&&b| b != b'-');
    let mut out = [0u8; 16];
    for byte in &mut out {
        let hi = char::from(*hex.next()?).to_digit(16)?;
        let lo = char::from(*hex.next()?).to_digit(16)?;
        *byte = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// `NaN`, `Infinity` or `-Infinity` when the binary numeric is one of those.
fn numeric_special(raw: &[u8]) -> Option<&'static str> {
    let sign = u16::from_be_bytes([*raw.get(4)?, *raw.get(5)?]);
    match sign {
        NUMERIC_NAN => Some("NaN"),
        NUMERIC_PINF => Some("Infinity"),
        NUMERIC_NINF => Some("-Infinity"),
        _ => None,
    }
}

fn mismatch(ty: &ColumnType, type_oid: u32) -> DecodeError {
    DecodeError::malformed(format!(
        "column type {ty:?} does not match PostgreSQL type OID {type_oid} (the relation changed?)"
    ))
}

#[cfg(test)]
mod builtin_name_tests {
    use super::*;

    #[test]
    fn builtin_names_are_format_types() {
        // As `SELECT format_type(oid, typmod)` prints them on PostgreSQL 15.
        for (oid, typmod, name) in [
            (oid::BPCHAR, -1, "bpchar"),
            (oid::BPCHAR, 5, "character(1)"),
            (oid::VARCHAR, -1, "character varying"),
            (oid::VARCHAR, 44, "character varying(40)"),
            (oid::NUMERIC, -1, "numeric"),
            (oid::NUMERIC, ((12 << 16) | 2) + 4, "numeric(12,2)"),
            (oid::INT4, -1, "integer"),
            (oid::FLOAT8, -1, "double precision"),
        ] {
            assert_eq!(builtin_type_name(oid, typmod).as_deref(), Some(name));
        }
        assert_eq!(builtin_type_name(oid::UUID, -1), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The typmod PostgreSQL stores for `numeric(p, s)`.
    fn numeric_mod(p: i32, s: i32) -> i32 {
        ((p << 16) | (s & 0x7ff)) + 4
    }

    fn dec(precision: u8, scale: i8) -> ColumnType {
        ColumnType::Decimal { precision, scale }
    }

    fn ok(ty: &ColumnType, oid: u32, hex_text: &str) -> Value {
        decode_binary(ty, oid, &hex(hex_text)).unwrap_or_else(|e| panic!("{hex_text}: {e}"))
    }

    fn fails(ty: &ColumnType, oid: u32, raw: &[u8]) -> DecodeError {
        let err = decode_binary(ty, oid, raw).expect_err("decoded");
        assert!(!err.reason().is_empty());
        err
    }

    fn unrepresentable(ty: &ColumnType, oid: u32, hex_text: &str) -> String {
        let err = fails(ty, oid, &hex(hex_text));
        assert_eq!(err.kind(), DecodeErrorKind::Unrepresentable, "{err}");
        assert_eq!(err.code(), Code::ValueUnrepresentable);
        err.to_string()
    }

    fn malformed(ty: &ColumnType, oid: u32, raw: &[u8]) -> String {
        let err = fails(ty, oid, raw);
        assert_eq!(err.kind(), DecodeErrorKind::Malformed, "{err}");
        assert_eq!(err.code(), Code::SourceProtocol);
        err.to_string()
    }

    /// Little-endian two's-complement 256-bit integer as decimal text, by long division
    /// (independent of the decoder's multiply-accumulate).
    fn le256_to_string(bytes: [u8; 32]) -> String {
        let mut limbs: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let negative = limbs[3] >> 63 == 1;
        if negative {
            let mut carry = 1u128;
            for limb in &mut limbs {
                let v = u128::from(!*limb) + carry;
                *limb = v as u64;
                carry = v >> 64;
            }
        }
        let mut digits = Vec::new();
        while limbs.iter().any(|&l| l != 0) {
            let mut rem = 0u128;
            for limb in limbs.iter_mut().rev() {
                let cur = (rem << 64) | u128::from(*limb);
                *limb = (cur / 10) as u64;
                rem = cur % 10;
            }
            digits.push(b'0' + rem as u8);
        }
        if digits.is_empty() {
            digits.push(b'0');
        }
        if negative {
            digits.push(b'-');
        }
        digits.reverse();
        String::from_utf8(digits).unwrap()
    }

    fn decimal256_text(value: Value) -> String {
        match value {
            Value::Decimal256(bytes) => le256_to_string(*bytes),
            other => panic!("not a Decimal256: {other:?}"),
        }
    }

    /// `numeric_send` as PostgreSQL writes it for `unscaled / 10^scale` with display scale
    /// `scale`: leading and trailing zero groups stripped, zero is positive with weight 0.
    fn encode_numeric(unscaled: i128, scale: u16) -> Vec<u8> {
        let s = usize::from(scale);
        let padded = format!("{:0>width$}", unscaled.unsigned_abs(), width = s + 1);
        let (int, frac) = padded.split_at(padded.len() - s);
        let int = "0".repeat((4 - int.len() % 4) % 4) + int;
        let frac = frac.to_owned() + &"0".repeat((4 - frac.len() % 4) % 4);
        let mut groups: Vec<u16> = int
            .as_bytes()
            .chunks(4)
            .chain(frac.as_bytes().chunks(4))
            .map(|c| std::str::from_utf8(c).unwrap().parse().unwrap())
            .collect();
        let mut weight = (int.len() / 4) as i16 - 1;
        while groups.first() == Some(&0) {
            groups.remove(0);
            weight -= 1;
        }
        while groups.last() == Some(&0) {
            groups.pop();
        }
        if groups.is_empty() {
            weight = 0;
        }
        let sign = if unscaled < 0 {
            NUMERIC_NEG
        } else {
            NUMERIC_POS
        };
        let mut out = Vec::new();
        out.extend((groups.len() as i16).to_be_bytes());
        out.extend(weight.to_be_bytes());
        out.extend(sign.to_be_bytes());
        out.extend(scale.to_be_bytes());
        for g in groups {
            out.extend(g.to_be_bytes());
        }
        out
    }

    fn scaled_text(unscaled: i128, scale: u16) -> String {
        let s = usize::from(scale);
        let padded = format!("{:0>width$}", unscaled.unsigned_abs(), width = s + 1);
        let (int, frac) = padded.split_at(padded.len() - s);
        let sign = if unscaled < 0 { "-" } else { "" };
        if s == 0 {
            format!("{sign}{int}")
        } else {
            format!("{sign}{int}.{frac}")
        }
    }

    // ---- column_type ----

    #[test]
    fn scalar_types_map() {
        let cases = [
            (oid::BOOL, ColumnType::Boolean),
            (oid::INT2, ColumnType::Int16),
            (oid::INT4, ColumnType::Int32),
            (oid::INT8, ColumnType::Int64),
            (oid::FLOAT4, ColumnType::Float32),
            (oid::FLOAT8, ColumnType::Float64),
            (oid::TEXT, ColumnType::Utf8),
            (oid::VARCHAR, ColumnType::Utf8),
            (oid::BPCHAR, ColumnType::Utf8),
            (oid::NAME, ColumnType::Utf8),
            (oid::BYTEA, ColumnType::Binary),
            (oid::DATE, ColumnType::Date),
            (oid::TIME, ColumnType::Utf8),
            (oid::TIMESTAMP, ColumnType::Timestamp),
            (oid::TIMESTAMPTZ, ColumnType::TimestampTz),
            (oid::UUID, ColumnType::Uuid),
            (oid::JSON, ColumnType::Json),
            (oid::JSONB, ColumnType::Json),
        ];
        for (oid, want) in cases {
            assert_eq!(column_type(oid, -1, "t").unwrap(), want, "oid {oid}");
        }
        // Length modifiers of varchar(n) / char(n) / timestamp(p) do not change the type.
        assert_eq!(
            column_type(oid::VARCHAR, 24, "character varying(20)").unwrap(),
            ColumnType::Utf8
        );
        assert_eq!(
            column_type(oid::TIMESTAMPTZ, 3, "timestamptz(3)").unwrap(),
            ColumnType::TimestampTz
        );
    }

    #[test]
    fn array_types_map_to_lists() {
        let cases = [
            (1005, ColumnType::Int16),
            (1007, ColumnType::Int32),
            (1016, ColumnType::Int64),
            (1009, ColumnType::Utf8),
            (1015, ColumnType::Utf8),
            (1000, ColumnType::Boolean),
            (1021, ColumnType::Float32),
            (1022, ColumnType::Float64),
            (1231, ColumnType::Utf8),
            (2951, ColumnType::Uuid),
            (1182, ColumnType::Date),
            (1115, ColumnType::Timestamp),
            (1185, ColumnType::TimestampTz),
        ];
        for (oid, elem) in cases {
            assert_eq!(
                column_type(oid, -1, "a[]").unwrap(),
                ColumnType::List(Box::new(elem)),
                "oid {oid}"
            );
        }
        assert_eq!(
            column_type(oid::NUMERIC_ARRAY, numeric_mod(4, 2), "numeric(4,2)[]").unwrap(),
            ColumnType::List(Box::new(dec(4, 2)))
        );
    }

    #[test]
    fn numeric_typmods() {
        let t = |p, s| column_type(oid::NUMERIC, numeric_mod(p, s), "numeric");
        assert_eq!(t(10, 3).unwrap(), dec(10, 3));
        assert_eq!(t(38, 0).unwrap(), dec(38, 0));
        assert_eq!(t(38, 38).unwrap(), dec(38, 38));
        // PostgreSQL 15 scales outside 0..=p are widened to a Parquet-legal decimal.
        assert_eq!(t(5, -2).unwrap(), dec(7, 0));
        assert_eq!(t(2, 5).unwrap(), dec(5, 5));
        // Wider than Decimal128 (also after widening): exact decimal text, as unconstrained
        // numeric.
        for (p, s) in [
            (39, 0),
            (50, 10),
            (76, 20),
            (37, -2),
            (1, 39),
            (1, -1000),
            (77, 0),
            (1000, 0),
        ] {
            assert_eq!(t(p, s).unwrap(), ColumnType::Utf8, "numeric({p},{s})");
        }
        // Unconstrained numeric: exact text (see the module doc).
        assert_eq!(
            column_type(oid::NUMERIC, -1, "numeric").unwrap(),
            ColumnType::Utf8
        );
        assert_eq!(numeric_typmod(numeric_mod(5, -2)), Some((5, -2)));
        assert_eq!(
            numeric_typmod(numeric_mod(1000, -1000)),
            Some((1000, -1000))
        );
        assert_eq!(numeric_typmod(numeric_mod(1000, 1000)), Some((1000, 1000)));
        assert_eq!(numeric_typmod(3), None);
    }

    #[test]
    fn the_docs_type_table_matches_the_code() {
        let docs = include_str!("../../../docs/postgresql.md");
        let rows: Vec<&str> = docs.lines().filter(|l| l.starts_with("| ")).collect();
        let row = |name: &str| {
            let quoted = format!("`{name}`");
            rows.iter()
                .find(|l| l.split('|').nth(1).is_some_and(|c| c.contains(&quoted)))
                .unwrap_or_else(|| panic!("{name} is not in the type table of docs/postgresql.md"))
                .to_string()
        };
        // Typed built-ins: each is in the table with its output type.
        for (oid, name, output) in [
            (oid::INT2, "smallint", "Int16"),
            (oid::INT4, "int", "Int32"),
            (oid::INT8, "bigint", "Int64"),
            (oid::FLOAT4, "real", "Float32"),
            (oid::FLOAT8, "double precision", "Float64"),
            (oid::BOOL, "boolean", "Boolean"),
            (oid::TEXT, "text", "string"),
            (oid::VARCHAR, "varchar(n)", "string"),
            (oid::BPCHAR, "char(n)", "string"),
            (oid::NAME, "name", "string"),
            (oid::BYTEA, "bytea", "Binary"),
            (oid::DATE, "date", "Date32"),
            (oid::TIME, "time", "string"),
            (oid::TIMESTAMP, "timestamp", "Timestamp(µs)"),
            (oid::TIMESTAMPTZ, "timestamptz", "Timestamp(µs, UTC)"),
            (oid::UUID, "uuid", "string"),
            (oid::JSON, "json", "JSON"),
            (oid::JSONB, "jsonb", "JSON"),
            (oid::OID, "oid", "Int64"),
        ] {
            assert!(column_type(oid, -1, name).is_ok(), "{name}");
            assert!(row(name).contains(output), "{name}: {}", row(name));
        }
        // Built-ins without a typed mapping: the text-form row names them.
        for (oid, name) in [
            (1186, "interval"),
            (1266, "timetz"),
            (790, "money"),
            (869, "inet"),
            (650, "cidr"),
            (829, "macaddr"),
            (774, "macaddr8"),
            (1560, "bit(n)"),
            (1562, "varbit"),
            (18, "\"char\""),
            (142, "xml"),
            (3614, "tsvector"),
            (3615, "tsquery"),
            (600, "point"),
            (603, "box"),
            (28, "xid"),
            (3220, "pg_lsn"),
        ] {
            assert!(column_type(oid, -1, name).is_err(), "{name}");
            assert!(row(name).contains("text form"), "{name}: {}", row(name));
        }
    }

    #[test]
    fn types_without_a_typed_mapping_name_themselves() {
        for (oid, name) in [
            (1186, "interval"),
            (790, "money"),
            (869, "inet"),
            (16418, "mood"),
            (4451, "int4multirange"),
            (1187, "interval[]"),
            (1001, "bytea[]"),
            (199, "json[]"),
        ] {
            let err = column_type(oid, -1, name).unwrap_err();
            assert_eq!(err.type_name, name);
            assert!(
                err.to_string()
                    .starts_with(&format!("PostgreSQL type {name} is not supported"))
            );
        }
    }

    // ---- fixtures: `encode(<type>_send(…), 'hex')` from PostgreSQL 15.18 ----

    const NUM_12345_678: &str = "0003000100000003000109291a7c"; // 12345.678::numeric(10,3)
    const NUM_NEG_12_3400: &str = "0002000040000004000c0d48"; // '-12.3400'::numeric
    const NUM_ZERO: &str = "0000000000000000"; // 0::numeric
    const NUM_ZERO_SCALE2: &str = "0000000000000002"; // 0::numeric(5,2)
    const NUM_P38_MAX: &str = "000a0009000000000063270f270f270f270f270f270f270f270f270f"; // 10^38-1
    const NUM_P38_MIN: &str = "000a0009400000000063270f270f270f270f270f270f270f270f270f"; // -(10^38-1)
    const NUM_P38_S38: &str = "000affff00000026270f270f270f270f270f270f270f270f270f26ac"; // 0.(38 nines)
    const NUM_0_001: &str = "0001ffff00000003000a"; // 0.001::numeric(6,3)
    const NUM_1E20: &str = "00010005000000000001"; // 1e20::numeric
    /// '-1234567890123456789012345678901234567890.1234567890'::numeric(50,10)
    const NUM_P50: &str = "000d00094000000a04d2162e23340d801ed204d2162e23340d801ed204d2162e2328";
    const NUM_P76: &str = "0013001200000000270f270f270f270f270f270f270f270f270f270f270f270f270f270f270f270f270f270f270f";
    const NUM_NAN: &str = "00000000c0000000";
    const NUM_INF: &str = "00000000d0000020";
    const NUM_NINF: &str = "00000000f0000020";
    const NUM_NEGSCALE: &str = "0002000100000000000c0dac"; // 123456::numeric(5,-2) = 123500
    const NUM_BIGSCALE: &str = "0002ffff00000005000107d0"; // 0.00012::numeric(2,5)

    #[test]
    fn numeric_fixtures_into_decimal() {
        let n = oid::NUMERIC;
        assert_eq!(
            ok(&dec(10, 3), n, NUM_12345_678),
            Value::Decimal(12_345_678)
        );
        assert_eq!(
            ok(&dec(12, 5), n, NUM_12345_678),
            Value::Decimal(1_234_567_800)
        );
        assert_eq!(ok(&dec(6, 4), n, NUM_NEG_12_3400), Value::Decimal(-123_400));
        // Trailing zeros are not digits beyond the scale.
        assert_eq!(ok(&dec(4, 2), n, NUM_NEG_12_3400), Value::Decimal(-1_234));
        assert_eq!(ok(&dec(5, 2), n, NUM_ZERO), Value::Decimal(0));
        assert_eq!(ok(&dec(5, 2), n, NUM_ZERO_SCALE2), Value::Decimal(0));
        let max38 = 10i128.pow(38) - 1;
        assert_eq!(ok(&dec(38, 0), n, NUM_P38_MAX), Value::Decimal(max38));
        assert_eq!(ok(&dec(38, 0), n, NUM_P38_MIN), Value::Decimal(-max38));
        assert_eq!(ok(&dec(38, 38), n, NUM_P38_S38), Value::Decimal(max38));
        assert_eq!(ok(&dec(6, 3), n, NUM_0_001), Value::Decimal(1));
        assert_eq!(ok(&dec(7, 0), n, NUM_NEGSCALE), Value::Decimal(123_500));
        assert_eq!(ok(&dec(5, 5), n, NUM_BIGSCALE), Value::Decimal(12));
        assert_eq!(ok(&dec(21, 0), n, NUM_1E20), Value::Decimal(10i128.pow(20)));
    }

    #[test]
    fn numeric_fixtures_into_decimal256() {
        let n = oid::NUMERIC;
        assert_eq!(
            decimal256_text(ok(&dec(50, 10), n, NUM_P50)),
            "-12345678901234567890123456789012345678901234567890"
        );
        assert_eq!(decimal256_text(ok(&dec(76, 0), n, NUM_P76)), "9".repeat(76));
        assert_eq!(
            decimal256_text(ok(&dec(39, 0), n, NUM_P38_MIN)),
            format!("-{}", "9".repeat(38))
        );
        assert_eq!(decimal256_text(ok(&dec(60, 0), n, NUM_ZERO)), "0");
        assert_eq!(
            decimal256_text(ok(&dec(40, 2), n, NUM_NEG_12_3400)),
            "-1234"
        );
    }

    #[test]
    fn numeric_that_does_not_fit_is_refused_not_rounded() {
        let n = oid::NUMERIC;
        let err = unrepresentable(&dec(10, 2), n, NUM_12345_678);
        assert!(err.contains("fractional digits"), "{err}");
        let err = unrepresentable(&dec(7, 3), n, NUM_12345_678);
        assert!(err.contains("needs 8 digits"), "{err}");
        unrepresentable(&dec(37, 0), n, NUM_P38_MAX);
        unrepresentable(&dec(38, 1), n, NUM_P38_MAX);
        unrepresentable(&dec(75, 0), n, NUM_P76);
        unrepresentable(&dec(38, 2), n, NUM_0_001);
        // Its last fractional digit is 0: scale 9 fits, scale 8 does not; 50 digits need p 50.
        assert!(matches!(ok(&dec(49, 9), n, NUM_P50), Value::Decimal256(_)));
        unrepresentable(&dec(50, 8), n, NUM_P50);
        unrepresentable(&dec(49, 10), n, NUM_P50);
    }

    #[test]
    fn numeric_nan_and_infinities_are_text_or_refused_in_a_decimal() {
        for ty in [dec(10, 2), dec(60, 2)] {
            assert!(unrepresentable(&ty, oid::NUMERIC, NUM_NAN).contains("NaN"));
            assert!(unrepresentable(&ty, oid::NUMERIC, NUM_INF).contains("Infinity"));
            assert!(unrepresentable(&ty, oid::NUMERIC, NUM_NINF).contains("-Infinity"));
        }
        // Unconstrained numeric: PostgreSQL's own text for them.
        let t = |h| ok(&ColumnType::Utf8, oid::NUMERIC, h);
        assert_eq!(t(NUM_NAN), Value::Text("NaN".into()));
        assert_eq!(t(NUM_INF), Value::Text("Infinity".into()));
        assert_eq!(t(NUM_NINF), Value::Text("-Infinity".into()));
        // A special value with digits after its header is not taken for the special.
        let mut bad = hex(NUM_NAN);
        bad.extend([0, 1]);
        assert!(decode_binary(&ColumnType::Utf8, oid::NUMERIC, &bad).is_err());
    }

    #[test]
    fn unconstrained_numeric_is_exact_text() {
        let t = |h| ok(&ColumnType::Utf8, oid::NUMERIC, h);
        assert_eq!(t(NUM_NEG_12_3400), Value::Text("-12.3400".into()));
        assert_eq!(t(NUM_12345_678), Value::Text("12345.678".into()));
        assert_eq!(t(NUM_ZERO), Value::Text("0".into()));
        assert_eq!(t(NUM_ZERO_SCALE2), Value::Text("0.00".into()));
        assert_eq!(t(NUM_0_001), Value::Text("0.001".into()));
        assert_eq!(t(NUM_1E20), Value::Text("100000000000000000000".into()));
        assert_eq!(t(NUM_BIGSCALE), Value::Text("0.00012".into()));
        assert_eq!(t(NUM_NEGSCALE), Value::Text("123500".into()));
        assert_eq!(
            t(NUM_P50),
            Value::Text("-1234567890123456789012345678901234567890.1234567890".into())
        );
        assert_eq!(t(NUM_P38_S38), Value::Text(format!("0.{}", "9".repeat(38))));
    }

    #[test]
    fn malformed_numerics() {
        let n = oid::NUMERIC;
        let ty = dec(10, 2);
        malformed(&ty, n, &hex("000000000000"));
        malformed(&ty, n, &hex("0001000000000000")); // declares a group it lacks
        malformed(&ty, n, &hex("0001000000000000000100")); // odd trailing byte
        malformed(&ty, n, &hex("ffff000000000000")); // negative ndigits
        malformed(&ty, n, &hex("0002000000000000270f")); // one group short
        malformed(&ty, n, &hex("00010000000000002710")); // group 10000
        malformed(&ty, n, &hex("0000000080000000")); // bad sign
        malformed(&ty, n, &hex("000000000000c000")); // dscale flag bits
        // Digits hidden beyond the display scale would be lost as text.
        malformed(&ColumnType::Utf8, n, &hex("0001ffff000000000001"));
    }

    #[test]
    fn the_test_encoder_matches_postgres() {
        assert_eq!(encode_numeric(12_345_678, 3), hex(NUM_12345_678));
        assert_eq!(encode_numeric(-123_400, 4), hex(NUM_NEG_12_3400));
        assert_eq!(encode_numeric(0, 0), hex(NUM_ZERO));
        assert_eq!(encode_numeric(0, 2), hex(NUM_ZERO_SCALE2));
        assert_eq!(encode_numeric(10i128.pow(38) - 1, 0), hex(NUM_P38_MAX));
        assert_eq!(encode_numeric(10i128.pow(38) - 1, 38), hex(NUM_P38_S38));
        assert_eq!(encode_numeric(1, 3), hex(NUM_0_001));
        assert_eq!(encode_numeric(12, 5), hex(NUM_BIGSCALE));
    }

    // ---- dates and times ----

    #[test]
    fn timestamps() {
        for (ty, oid) in [
            (ColumnType::TimestampTz, oid::TIMESTAMPTZ),
            (ColumnType::Timestamp, oid::TIMESTAMP),
        ] {
            // '2024-03-01 12:34:56.789012+00'
            assert_eq!(
                ok(&ty, oid, "0002b5975f49e614"),
                Value::Timestamp(1_709_296_496_789_012)
            );
            // '1969-12-31 23:59:59.999999'
            assert_eq!(ok(&ty, oid, "fffca2fec4c81fff"), Value::Timestamp(-1));
            assert_eq!(
                ok(&ty, oid, "0000000000000000"),
                Value::Timestamp(946_684_800_000_000)
            );
            // ±infinity: the extremes DuckDB reads as ±infinity (INFINITY_KEY).
            assert_eq!(ok(&ty, oid, "7fffffffffffffff"), Value::Timestamp(i64::MAX));
            assert_eq!(
                ok(&ty, oid, "8000000000000000"),
                Value::Timestamp(-i64::MAX)
            );
            // Finite but past i64 µs since 1970: refused, not wrapped.
            unrepresentable(&ty, oid, "7ffffffffffffffe");
            malformed(&ty, oid, &hex("00000000000000"));
        }
    }

    #[test]
    fn dates() {
        let d = |h| ok(&ColumnType::Date, oid::DATE, h);
        assert_eq!(d("ffffd48e"), Value::Date(-165)); // 1969-07-20
        assert_eq!(d("00000000"), Value::Date(10_957)); // 2000-01-01
        // ±infinity: the extremes DuckDB reads as ±infinity (INFINITY_KEY).
        assert_eq!(d("7fffffff"), Value::Date(i32::MAX));
        assert_eq!(d("80000000"), Value::Date(-i32::MAX));
        unrepresentable(&ColumnType::Date, oid::DATE, "7ffffffe");
        malformed(&ColumnType::Date, oid::DATE, &hex("0000000000"));
    }

    #[test]
    fn times_are_their_postgresql_text() {
        let text = |hex: &str| ok(&ColumnType::Utf8, oid::TIME, hex);
        assert_eq!(
            text("000000141dd75fff"),
            Value::Text("23:59:59.999999".into())
        );
        assert_eq!(text("000000141dd76000"), Value::Text("24:00:00".into()));
        assert_eq!(text("0000000000000000"), Value::Text("00:00:00".into()));
        // 12:34:56.5 and 01:02:03.000120: trailing zeros of the fraction dropped.
        assert_eq!(text("0000000a8be1bd20"), Value::Text("12:34:56.5".into()));
        assert_eq!(
            text("00000000dde87938"),
            Value::Text("01:02:03.00012".into())
        );
        malformed(&ColumnType::Utf8, oid::TIME, &hex("000000141dd76001"));
        malformed(&ColumnType::Utf8, oid::TIME, &hex("ffffffffffffffff"));
    }

    // ---- the other scalars ----

    #[test]
    fn scalars() {
        use ColumnType as T;
        assert_eq!(ok(&T::Boolean, oid::BOOL, "01"), Value::Boolean(true));
        assert_eq!(ok(&T::Boolean, oid::BOOL, "00"), Value::Boolean(false));
        assert_eq!(ok(&T::Int16, oid::INT2, "fffe"), Value::Int(-2));
        assert_eq!(
            ok(&T::Int32, oid::INT4, "7fffffff"),
            Value::Int(i32::MAX.into())
        );
        assert_eq!(
            ok(&T::Int64, oid::INT8, "8000000000000000"),
            Value::Int(i64::MIN)
        );
        assert_eq!(ok(&T::Float32, oid::FLOAT4, "3fc00000"), Value::Float(1.5));
        assert_eq!(
            ok(&T::Float64, oid::FLOAT8, "bfb999999999999a"),
            Value::Float(-0.1)
        );
        assert_eq!(
            ok(&T::Uuid, oid::UUID, "a0eebc999c0b4ef8bb6d6bb9bd380a11"),
            Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into())
        );
        assert_eq!(
            ok(&T::Json, oid::JSONB, "017b2261223a205b312c20325d7d"),
            Value::Text(r#"{"a": [1, 2]}"#.into())
        );
        assert_eq!(
            ok(&T::Json, oid::JSON, "7b2261223a205b312c20325d7d"),
            Value::Text(r#"{"a": [1, 2]}"#.into())
        );
        assert_eq!(
            ok(&T::Binary, oid::BYTEA, "deadbeef"),
            Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef])
        );
        assert_eq!(ok(&T::Binary, oid::BYTEA, ""), Value::Bytes(vec![]));
        assert_eq!(
            ok(&T::Utf8, oid::BPCHAR, "61622020"),
            Value::Text("ab  ".into())
        );
        assert_eq!(
            ok(&T::Utf8, oid::TEXT, "68c3a96c6c6f"),
            Value::Text("héllo".into())
        );
        assert_eq!(ok(&T::Utf8, oid::VARCHAR, ""), Value::Text(String::new()));
        assert_eq!(ok(&T::Utf8, oid::NAME, "6964"), Value::Text("id".into()));
    }

    #[test]
    fn malformed_scalars() {
        use ColumnType as T;
        malformed(&T::Boolean, oid::BOOL, b"");
        malformed(&T::Int16, oid::INT2, &[0]);
        malformed(&T::Int32, oid::INT4, &[0, 0, 0, 0, 0]);
        malformed(&T::Int64, oid::INT8, &[0; 4]);
        malformed(&T::Float32, oid::FLOAT4, &[0; 8]);
        malformed(&T::Float64, oid::FLOAT8, &[0; 4]);
        malformed(&T::Uuid, oid::UUID, &[0; 15]);
        malformed(&T::Utf8, oid::TEXT, &[0xc3, 0x28]);
        malformed(&T::Json, oid::JSONB, &hex("027b7d"));
        malformed(&T::Json, oid::JSONB, b"");
        malformed(&T::Json, oid::JSONB, &[1, 0xff]);
        // The decoder checks the column type against the OID it was given.
        let err = malformed(&T::Int32, oid::INT8, &[0; 8]);
        assert!(err.contains("does not match"), "{err}");
        malformed(&T::Utf8, oid::BYTEA, b"x");
        malformed(&ColumnType::List(Box::new(T::Int32)), oid::INT4, &[0; 4]);
    }

    #[test]
    fn wire_errors_keep_their_cause() {
        let err = fails(&ColumnType::Int32, oid::INT4, &[0, 0]);
        assert_eq!(err.reason(), "invalid binary int4 value");
        assert!(std::error::Error::source(&err).is_some());
    }

    // ---- arrays ----

    fn list(elem: ColumnType) -> ColumnType {
        ColumnType::List(Box::new(elem))
    }

    #[test]
    fn arrays() {
        let int4 = list(ColumnType::Int32);
        assert_eq!(
            ok(
                &int4,
                oid::INT4_ARRAY,
                "00000001000000010000001700000003000000010000000400000001ffffffff0000000400000003"
            ),
            Value::List(vec![Value::Int(1), Value::Null, Value::Int(3)])
        );
        assert_eq!(
            ok(&int4, oid::INT4_ARRAY, "000000000000000000000017"),
            Value::List(vec![])
        );
        assert_eq!(
            ok(
                &list(ColumnType::Utf8),
                oid::TEXT_ARRAY,
                "00000001000000010000001900000003000000010000000161ffffffff0000000668c3a96c6c6f"
            ),
            Value::List(vec![
                Value::Text("a".into()),
                Value::Null,
                Value::Text("héllo".into())
            ])
        );
        // ARRAY[1.5, NULL]::numeric(4,2)[]
        assert_eq!(
            ok(
                &list(dec(4, 2)),
                oid::NUMERIC_ARRAY,
                "0000000100000001000006a400000002000000010000000c000200000000000200011388ffffffff"
            ),
            Value::List(vec![Value::Decimal(150), Value::Null])
        );
        // '[0:1]={7,8}'::int8[]: the lower bound does not matter.
        assert_eq!(
            ok(
                &list(ColumnType::Int64),
                oid::INT8_ARRAY,
                "0000000100000000000000140000000200000000000000080000000000000007000000080000000000000008"
            ),
            Value::List(vec![Value::Int(7), Value::Int(8)])
        );
    }

    #[test]
    fn bad_arrays() {
        let int4 = list(ColumnType::Int32);
        let two_d = "000000020000000000000017000000020000000100000002000000010000000400000001000000040000000200000004000000030000000400000004";
        assert!(unrepresentable(&int4, oid::INT4_ARRAY, two_d).contains("2-dimensional"));
        // int4[] bytes read as an int8[] column: element OID mismatch.
        let one = "0000000100000000000000170000000100000001000000040000002a";
        assert_eq!(
            ok(&int4, oid::INT4_ARRAY, one),
            Value::List(vec![Value::Int(42)])
        );
        let err = malformed(&list(ColumnType::Int64), oid::INT8_ARRAY, &hex(one));
        assert!(err.contains("element type OID 23, expected 20"), "{err}");
        // Elements that fail decode fail the array.
        let err = malformed(
            &int4,
            oid::INT4_ARRAY,
            &hex("000000010000000000000017000000010000000100000003000000"),
        );
        assert!(
            err.starts_with("array element 0: invalid binary int4"),
            "{err}"
        );
        let ts = list(ColumnType::Timestamp);
        assert_eq!(
            ok(
                &ts,
                oid::TIMESTAMP_ARRAY,
                "00000001000000000000045a0000000200000001ffffffff000000087fffffffffffffff",
            ),
            Value::List(vec![Value::Null, Value::Timestamp(i64::MAX)])
        );
        let err = unrepresentable(
            &list(dec(4, 2)),
            oid::NUMERIC_ARRAY,
            &format!(
                "000000010000000000000{:03x}0000000100000001{:08x}{NUM_NAN}",
                oid::NUMERIC,
                NUM_NAN.len() / 2
            ),
        );
        assert!(err.starts_with("array element 0: numeric NaN"), "{err}");
        // Truncated, trailing, negative counts, bad flags, bad element length.
        let bytes = hex(one);
        for cut in 0..bytes.len() {
            malformed(&int4, oid::INT4_ARRAY, &bytes[..cut]);
        }
        malformed(&int4, oid::INT4_ARRAY, &[bytes.as_slice(), &[0]].concat());
        malformed(&int4, oid::INT4_ARRAY, &hex("ffffffff0000000000000017"));
        malformed(
            &int4,
            oid::INT4_ARRAY,
            &hex("000000010000000200000017000000010000000100000004"),
        );
        malformed(
            &int4,
            oid::INT4_ARRAY,
            &hex("0000000100000000000000170000000100000001fffffffe"),
        );
        malformed(
            &int4,
            oid::INT4_ARRAY,
            &hex("000000010000000000000017ffffffff00000001"),
        );
        // A huge declared length with no data fails fast without reserving memory for it.
        malformed(
            &int4,
            oid::INT4_ARRAY,
            &hex("0000000100000000000000177fffffff00000001"),
        );
    }

    #[test]
    fn arrays_of_domains_and_enums_name_their_element_on_the_wire() {
        // '{42}' of a domain over int4 whose OID is 70000: the header carries 70000.
        let domain = "000000010000000000011170000000010000000100000004000000 2a".replace(' ', "");
        let int4 = list(ColumnType::Int32);
        let as_domain = Decode::Binary {
            oid: oid::INT4_ARRAY,
            wire_element: Some(70_000),
        };
        assert_eq!(
            decode_cell(&int4, &as_domain, &hex(&domain)).unwrap(),
            Value::List(vec![Value::Int(42)])
        );
        // Without the domain's OID declared, the header is a mismatch.
        malformed(&int4, oid::INT4_ARRAY, &hex(&domain));
        // An enum's binary form is its label's bytes, read as text.
        let label = Decode::Binary {
            oid: oid::TEXT,
            wire_element: None,
        };
        assert_eq!(
            decode_cell(&ColumnType::Utf8, &label, b"happy").unwrap(),
            Value::Text("happy".into())
        );
        // The text form is the type's text output, as sent.
        assert_eq!(
            decode_cell(&ColumnType::Utf8, &Decode::Text, b"(1,2)").unwrap(),
            Value::Text("(1,2)".into())
        );
        assert_eq!(
            decode_cell(&ColumnType::Utf8, &Decode::Text, &[0xff])
                .unwrap_err()
                .kind(),
            DecodeErrorKind::Malformed
        );
        // oid → int64, unsigned.
        assert_eq!(
            ok(&ColumnType::Int64, oid::OID, "ffffffff"),
            Value::Int(4_294_967_295)
        );
    }

    // ---- text cells ----

    #[test]
    fn text_cells() {
        use ColumnType as T;
        assert_eq!(
            decode_text(&T::Utf8, oid::TEXT, b"hi").unwrap(),
            Value::Text("hi".into())
        );
        assert_eq!(
            decode_text(&T::Json, oid::JSONB, b"{}").unwrap(),
            Value::Text("{}".into())
        );
        assert_eq!(
            decode_text(&T::Boolean, oid::BOOL, b"t").unwrap(),
            Value::Boolean(true)
        );
        assert_eq!(
            decode_text(&T::Boolean, oid::BOOL, b"f").unwrap(),
            Value::Boolean(false)
        );
        assert_eq!(
            decode_text(&T::Int16, oid::INT2, b"-32768").unwrap(),
            Value::Int(-32768)
        );
        assert_eq!(
            decode_text(&T::Int64, oid::INT8, b"9223372036854775807").unwrap(),
            Value::Int(i64::MAX)
        );
        assert_eq!(
            decode_text(&T::Uuid, oid::UUID, b"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11").unwrap(),
            Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into())
        );
        assert!(decode_text(&T::Int16, oid::INT2, b"32768").is_err());
        assert!(decode_text(&T::Int32, oid::INT4, b"1.0").is_err());
        assert!(decode_text(&T::Boolean, oid::BOOL, b"true").is_err());
        assert!(decode_text(&T::Uuid, oid::UUID, b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g").is_err());
        assert!(decode_text(&T::Utf8, oid::TEXT, &[0xff]).is_err());
        for (ty, oid, text) in [
            (T::Timestamp, oid::TIMESTAMP, "2024-01-01 00:00:00"),
            (dec(10, 2), oid::NUMERIC, "1.00"),
            (T::Utf8, oid::NUMERIC, "1.00"),
            (T::Binary, oid::BYTEA, "\\x00"),
            (list(T::Int32), oid::INT4_ARRAY, "{1}"),
        ] {
            let err = decode_text(&ty, oid, text.as_bytes()).unwrap_err();
            assert!(err.reason().contains("binary 'true'"), "{err}");
        }
    }

    // ---- against a real pgoutput row ----

    /// Relation and Update rows captured from PostgreSQL 15.18 (see pgoutput's tests):
    /// `t (id int4 pk, n numeric(10,3), ts timestamptz, arr int4[], big text, u uuid)`,
    /// after `update t set n = -1` (`big` is unchanged TOAST).
    const REAL_RELATION: &str = "52000040137075626c69630074006400060169640000000017ffffffff006e00000006a4000a000700747300000004a0ffffffff0061727200000003efffffffff006269670000000019ffffffff00750000000b86ffffffff";
    const REAL_UPDATE: &str = "55000040134e0006620000000400000001620000000a0001000040000003000162000000080002b5975f49e614620000002800000001000000010000001700000003000000010000000400000001ffffffff0000000400000003756200000010a0eebc999c0b4ef8bb6d6bb9bd380a11";

    #[test]
    fn a_real_update_decodes_column_by_column() {
        use super::super::pgoutput::{Cell, PgMessage, decode};
        let relation_bytes = hex(REAL_RELATION);
        let PgMessage::Relation(rel) = decode(&relation_bytes).unwrap() else {
            panic!("not a relation")
        };
        let types: Vec<ColumnType> = rel
            .columns
            .iter()
            .map(|c| column_type(c.type_oid, c.type_modifier, &c.name).unwrap())
            .collect();
        assert_eq!(types[1], dec(10, 3));
        let update_bytes = hex(REAL_UPDATE);
        let PgMessage::Update(update) = decode(&update_bytes).unwrap() else {
            panic!("not an update")
        };
        let values: Vec<Option<Value>> = update
            .new
            .iter()
            .zip(&rel.columns)
            .zip(&types)
            .map(|((cell, col), ty)| match cell {
                Cell::Binary(raw) => Some(decode_binary(ty, col.type_oid, raw).unwrap()),
                Cell::Unchanged => None,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            values,
            vec![
                Some(Value::Int(1)),
                Some(Value::Decimal(-1000)),
                Some(Value::Timestamp(1_709_296_496_789_012)),
                Some(Value::List(vec![Value::Int(1), Value::Null, Value::Int(3)])),
                None,
                Some(Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into())),
            ]
        );
    }

    // ---- properties ----

    fn any_type() -> impl Strategy<Value = (ColumnType, u32)> {
        let scalars = vec![
            (ColumnType::Boolean, oid::BOOL),
            (ColumnType::Int16, oid::INT2),
            (ColumnType::Int32, oid::INT4),
            (ColumnType::Int64, oid::INT8),
            (ColumnType::Float32, oid::FLOAT4),
            (ColumnType::Float64, oid::FLOAT8),
            (dec(10, 3), oid::NUMERIC),
            (dec(60, 20), oid::NUMERIC),
            (ColumnType::Utf8, oid::NUMERIC),
            (ColumnType::Utf8, oid::TEXT),
            (ColumnType::Binary, oid::BYTEA),
            (ColumnType::Date, oid::DATE),
            (ColumnType::Utf8, oid::TIME),
            (ColumnType::Timestamp, oid::TIMESTAMP),
            (ColumnType::TimestampTz, oid::TIMESTAMPTZ),
            (ColumnType::Uuid, oid::UUID),
            (ColumnType::Json, oid::JSONB),
            (list(ColumnType::Int32), oid::INT4_ARRAY),
            (list(dec(4, 2)), oid::NUMERIC_ARRAY),
            (list(ColumnType::Utf8), oid::TEXT_ARRAY),
        ];
        proptest::sample::select(scalars)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn numeric_round_trips(unscaled in any::<i64>(), scale in 0u16..=18, widen in 0u16..=10) {
            let v = i128::from(unscaled);
            let raw = encode_numeric(v, scale);
            let s = i8::try_from(scale).unwrap();
            prop_assert_eq!(decode_binary(&dec(38, s), oid::NUMERIC, &raw).unwrap(), Value::Decimal(v));
            let wide = i8::try_from(scale + widen).unwrap();
            prop_assert_eq!(
                decode_binary(&dec(38, wide), oid::NUMERIC, &raw).unwrap(),
                Value::Decimal(v * 10i128.pow(u32::from(widen)))
            );
            prop_assert_eq!(
                decimal256_text(decode_binary(&dec(76, s), oid::NUMERIC, &raw).unwrap()),
                v.to_string()
            );
            prop_assert_eq!(
                decode_binary(&ColumnType::Utf8, oid::NUMERIC, &raw).unwrap(),
                Value::Text(scaled_text(v, scale))
            );
            // One scale digit less is refused exactly when the last digit is not zero.
            if scale > 0 {
                let narrower = decode_binary(&dec(38, s - 1), oid::NUMERIC, &raw);
                if v % 10 == 0 {
                    prop_assert_eq!(narrower.unwrap(), Value::Decimal(v / 10));
                } else {
                    prop_assert_eq!(narrower.unwrap_err().kind(), DecodeErrorKind::Unrepresentable);
                }
            }
            // Precision: exactly as many digits as the unscaled value has.
            let digits = u8::try_from(v.unsigned_abs().max(1).ilog10() + 1).unwrap().max(1);
            let digits = digits.max(u8::try_from(scale).unwrap());
            prop_assert!(decode_binary(&dec(digits, s), oid::NUMERIC, &raw).is_ok());
            if digits > u8::try_from(scale).unwrap() && v != 0 {
                prop_assert!(decode_binary(&dec(digits - 1, s), oid::NUMERIC, &raw).is_err());
            }
        }

        #[test]
        fn wide_numerics_round_trip(hi in any::<i64>(), lo in 0u64..10u64.pow(18), scale in 0u16..=30) {
            // Up to ~37 digits through the i128-based encoder, into Decimal256.
            let v = i128::from(hi) * 10i128.pow(18) + i128::from(lo) * i128::from(hi.signum().max(0) * 2 - 1);
            let raw = encode_numeric(v, scale);
            prop_assert_eq!(
                decimal256_text(decode_binary(&dec(76, i8::try_from(scale).unwrap()), oid::NUMERIC, &raw).unwrap()),
                v.to_string()
            );
        }

        #[test]
        fn arbitrary_cells_never_panic(ty in any_type(), raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let (ty, oid) = ty;
            let _ = decode_binary(&ty, oid, &raw);
            let _ = decode_text(&ty, oid, &raw);
        }

        #[test]
        fn numeric_groups_and_digits_give_the_same_unscaled_value(
            weight in -6i16..5,
            negative in any::<bool>(),
            scale in 0i8..14,
            groups in proptest::collection::vec(0u16..10000, 0..8),
        ) {
            // Digits below 10^-scale cleared, as the caller's check guarantees; at most
            // 20 + 14 = 34 digits, so every value fits the Decimal128 path.
            let cleared: Vec<u16> = groups
                .iter()
                .enumerate()
                .map(|(i, &g)| {
                    let exp = 4 * (i64::from(weight) - i as i64) + i64::from(scale);
                    if exp >= 0 { g } else if exp <= -4 { 0 } else { g - g % 10u16.pow((-exp) as u32) }
                })
                .collect();
            let raw: Vec<[u8; 2]> = cleared.iter().map(|g| g.to_be_bytes()).collect();
            let numeric = Numeric { negative, weight, dscale: 0, groups: &raw };
            let scale = i64::from(scale);
            let span = numeric.nonzero_span();
            prop_assert!(span.is_none_or(|(top, bottom)| bottom >= -scale && top + scale < 38));
            let by_digits = numeric.unscaled_by_digits(span, scale).to_u128();
            prop_assert_eq!(Some(numeric.unscaled_by_groups(scale)), by_digits);
        }

        #[test]
        fn arbitrary_numeric_headers_never_panic(
            ndigits in 0i16..6,
            weight in any::<i16>(),
            sign in proptest::sample::select(vec![0u16, 0x4000]),
            dscale in 0u16..0x4000,
            groups in proptest::collection::vec(0u16..10000, 0..6),
        ) {
            let mut raw = Vec::new();
            raw.extend(ndigits.to_be_bytes());
            raw.extend(weight.to_be_bytes());
            raw.extend(sign.to_be_bytes());
            raw.extend(dscale.to_be_bytes());
            for g in &groups {
                raw.extend(g.to_be_bytes());
            }
            let _ = decode_binary(&dec(38, 10), oid::NUMERIC, &raw);
            let _ = decode_binary(&dec(76, 0), oid::NUMERIC, &raw);
            let _ = decode_binary(&ColumnType::Utf8, oid::NUMERIC, &raw);
        }
    }

    #[test]
    fn pgvector_values_are_float4_lists() {
        // vector '[1.5, -2, 0]': dims 3, unused 0, three float4.
        let mut raw = vec![0, 3, 0, 0];
        for x in [1.5f32, -2.0, 0.0] {
            raw.extend_from_slice(&x.to_be_bytes());
        }
        assert_eq!(
            decode_cell(
                &ColumnType::List(Box::new(ColumnType::Float32)),
                &Decode::Vector { half: false },
                &raw
            )
            .unwrap(),
            Value::List(vec![
                Value::Float(1.5),
                Value::Float(-2.0),
                Value::Float(0.0)
            ])
        );
        // halfvec '[1, -0.5, 65504, 5.96e-8]': halves widened exactly.
        let raw = [0, 4, 0, 0, 0x3c, 0x00, 0xb8, 0x00, 0x7b, 0xff, 0x00, 0x01];
        assert_eq!(
            decode_vector(true, &raw).unwrap(),
            Value::List(vec![
                Value::Float(1.0),
                Value::Float(-0.5),
                Value::Float(65504.0),
                Value::Float(f64::from(f32::powi(2.0, -24))),
            ])
        );
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert!(f16_to_f32(0x7c00).is_infinite());
        // A body that is not dims × width is refused, never truncated.
        assert!(decode_vector(false, &[0, 2, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode_vector(true, &[0, 1]).is_err());
    }
}
