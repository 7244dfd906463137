//! An independent checksum of the cells of a change part, computed twice: once from the
//! [`Value`]s as they are appended ([`CellHasher`]) and once from the built Arrow arrays
//! ([`hash_batch`]), so a conversion or builder bug cannot reach a part unnoticed.
//!
//! Guarantees: the sum is deterministic across versions, platforms and batch boundaries —
//! a running state over every cell, row by row, columns in schema order — so the running
//! sum of a part equals [`hash_batch_from`] chained over the part's batches read back with
//! any batch size. Its text form names the algorithm ([`Algorithm`]): parts written now
//! carry `mix64:<16 hex>`; `fnv1a64:<16 hex>` (the algorithm of earlier sluice versions,
//! in their manifests and chunk records) is still recomputed and verified by [`verify_batches`].
//!
//! `mix64` absorbs 64-bit words, each with a tag naming what the word is:
//! `state = fold((state ^ word) × (K ^ (tag << 1)))`, where `fold` of the 128-bit product
//! is its low half XOR its high half, `K = 0x9E3779B97F4A7C15` and the state starts at
//! `0x243F6A8885A308D3` ([`EMPTY_SUM`]). Distinct tags give distinct odd multipliers, so
//! a word is never mistaken for another kind of word. The words of each cell:
//!
//! | cell | (tag, word) … |
//! | --- | --- |
//! | NULL | (`00`, 0) |
//! | boolean | (`01`, 0 or 1) |
//! | integer in i64 range | (`02`, the value as i64) |
//! | integer above i64 | (`0C`, high 64 bits of the value as i128), (`0D`, low 64 bits) |
//! | float32 | (`03`, IEEE bits) |
//! | float64 | (`04`, IEEE bits) |
//! | decimal in i64 range | (`05`, unscaled value as i64) |
//! | decimal in i128 range | (`0E`, high 64 bits as i128), (`0D`, low 64 bits) |
//! | wider decimal | (`0F`, bits 192..256 of the i256), (`0D`, bits 128..192), (`0D`, 64..128), (`0D`, 0..64) |
//! | text (utf8, json, uuid) | (`06`, byte length), then (`0D`, each 8 bytes as a little-endian u64, the last zero-padded) |
//! | binary | (`07`, byte length), then its 8-byte words as for text |
//! | date | (`08`, days as i64) |
//! | time | (`09`, µs) |
//! | timestamp (naive or UTC) | (`0A`, µs) |
//! | list | (`0B`, element count), each element as a cell |
//! | end of row | (`FF`, 0) |
//!
//! Every value has exactly one shape (the narrowest that holds it), so an integer or a
//! decimal hashes by value, not by column width. `fnv1a64` (FNV-1a 64 over a byte encoding
//! of the same cells: a tag byte, integers as i128, decimals as i256, lengths as u64, all
//! little-endian, `FF` after each row) is kept for verification only.
//!
//! Not cryptographic: it detects conversion bugs and corruption, not tampering.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, Time64MicrosecondType, TimestampMicrosecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, RecordBatch};
use arrow_buffer::{NullBuffer, i256};
use arrow_schema::{DataType, TimeUnit};

use crate::change::{ColumnType, Value};
use crate::error::{Code, Error, Result};

/// The `mix64` sum of no rows (where a part's running sum starts).
pub const EMPTY_SUM: u64 = 0x243F_6A88_85A3_08D3;
const MIX_K: u64 = 0x9E37_79B9_7F4A_7C15;

/// FNV-1a 64 offset basis: the `fnv1a64` sum of no rows.
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

const TAG_NULL: u8 = 0x00;
const TAG_BOOL: u8 = 0x01;
const TAG_INT: u8 = 0x02;
const TAG_F32: u8 = 0x03;
const TAG_F64: u8 = 0x04;
const TAG_DECIMAL: u8 = 0x05;
const TAG_TEXT: u8 = 0x06;
const TAG_BINARY: u8 = 0x07;
const TAG_DATE: u8 = 0x08;
const TAG_TIME: u8 = 0x09;
const TAG_TIMESTAMP: u8 = 0x0A;
const TAG_LIST: u8 = 0x0B;
const TAG_WIDE_INT: u8 = 0x0C;
const TAG_WORD: u8 = 0x0D;
const TAG_DECIMAL128: u8 = 0x0E;
const TAG_DECIMAL256: u8 = 0x0F;
const TAG_END_OF_ROW: u8 = 0xFF;

/// A checksum algorithm, named by the prefix of the sum's text form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// `mix64:`, written by this version.
    Mix64,
    /// `fnv1a64:`, written by earlier versions; verified, never written.
    Fnv1a64,
}

impl Algorithm {
    /// The text prefix, colon included.
    pub fn prefix(self) -> &'static str {
        match self {
            Algorithm::Mix64 => "mix64:",
            Algorithm::Fnv1a64 => "fnv1a64:",
        }
    }

    /// The sum of no rows.
    pub fn empty_sum(self) -> u64 {
        match self {
            Algorithm::Mix64 => EMPTY_SUM,
            Algorithm::Fnv1a64 => FNV_OFFSET_BASIS,
        }
    }

    /// Splits `<prefix><16 hex>` into its algorithm and sum; `None` for any other text.
    pub fn parse(text: &str) -> Option<(Algorithm, u64)> {
        [Algorithm::Mix64, Algorithm::Fnv1a64]
            .into_iter()
            .find_map(|algorithm| {
                let hex = text.strip_prefix(algorithm.prefix())?;
                let valid = hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit());
                valid
                    .then(|| u64::from_str_radix(hex, 16).ok())
                    .flatten()
                    .map(|sum| (algorithm, sum))
            })
    }

    /// [`hash_batch_from`] with this algorithm.
    pub fn hash_batch_from(self, sum: u64, batch: &RecordBatch) -> Result<u64> {
        match self {
            Algorithm::Mix64 => hash_rows(Mix(sum), batch),
            Algorithm::Fnv1a64 => hash_rows(Fnv(sum), batch),
        }
    }
}

/// The text form of a sum, as parts, manifests and chunk records carry it:
/// `mix64:<16 hex digits>`.
pub fn checksum_text(sum: u64) -> String {
    format!("{}{sum:016x}", Algorithm::Mix64.prefix())
}

/// Recomputes a part's checksum text (either algorithm) from its batches, read back in
/// order with any batch size. Fails with `SLUICE_OUTPUT_CHECKSUM` when the rows do not sum
/// to it or the text names no known algorithm.
pub fn verify_batches<'a>(
    text: &str,
    batches: impl IntoIterator<Item = &'a RecordBatch>,
) -> Result<()> {
    let Some((algorithm, want)) = Algorithm::parse(text) else {
        return Err(Error::new(
            Code::OutputChecksum,
            format!("checksum {text:?} names no algorithm this sluice knows (mix64:, fnv1a64:)"),
        )
        .hint("verify the part with the sluice version that wrote it (its created_by metadata names it)"));
    };
    let got = batches
        .into_iter()
        .try_fold(algorithm.empty_sum(), |sum, batch| {
            algorithm.hash_batch_from(sum, batch)
        })?;
    if got != want {
        return Err(Error::new(
            Code::OutputChecksum,
            format!(
                "the rows sum to {}{got:016x}, not to {text}",
                algorithm.prefix()
            ),
        )
        .hint("the part does not hold the rows it was written with: fetch it again, and report it if it still differs"));
    }
    Ok(())
}

/// What a cell contributes to a sum: the one interface both algorithms implement, so the
/// batch walk ([`hash_rows`]) is shared.
trait Absorb {
    fn null(&mut self);
    fn boolean(&mut self, v: bool);
    fn int(&mut self, v: i64);
    fn uint(&mut self, v: u64);
    fn float32(&mut self, bits: u32);
    fn float64(&mut self, bits: u64);
    fn decimal128(&mut self, v: i128);
    fn decimal256(&mut self, v: i256);
    /// Text (`TAG_TEXT`) or binary (`TAG_BINARY`).
    fn bytes(&mut self, tag: u8, bytes: &[u8]);
    /// Date (days), time or timestamp (µs), by tag.
    fn temporal(&mut self, tag: u8, v: i64);
    fn list(&mut self, count: usize);
    fn end_row(&mut self);
    fn sum(&self) -> u64;
}

/// The `mix64` state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mix(u64);

impl Mix {
    #[inline(always)]
    fn word(&mut self, tag: u8, word: u64) {
        let product = u128::from(self.0 ^ word) * u128::from(MIX_K ^ (u64::from(tag) << 1));
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    #[inline]
    fn wide(&mut self, tag: u8, high: u64, low: u64) {
        self.word(tag, high);
        self.word(TAG_WORD, low);
    }
}

impl Absorb for Mix {
    #[inline]
    fn null(&mut self) {
        self.word(TAG_NULL, 0);
    }
    #[inline]
    fn boolean(&mut self, v: bool) {
        self.word(TAG_BOOL, u64::from(v));
    }
    #[inline]
    fn int(&mut self, v: i64) {
        self.word(TAG_INT, v as u64);
    }
    #[inline]
    fn uint(&mut self, v: u64) {
        match i64::try_from(v) {
            Ok(v) => self.int(v),
            Err(_) => self.wide(TAG_WIDE_INT, 0, v),
        }
    }
    #[inline]
    fn float32(&mut self, bits: u32) {
        self.word(TAG_F32, u64::from(bits));
    }
    #[inline]
    fn float64(&mut self, bits: u64) {
        self.word(TAG_F64, bits);
    }
    #[inline]
    fn decimal128(&mut self, v: i128) {
        match i64::try_from(v) {
            Ok(small) => self.word(TAG_DECIMAL, small as u64),
            Err(_) => self.wide(TAG_DECIMAL128, (v >> 64) as u64, v as u64),
        }
    }
    fn decimal256(&mut self, v: i256) {
        match v.to_i128() {
            Some(v) => self.decimal128(v),
            None => {
                let (low, high) = v.to_parts();
                self.wide(TAG_DECIMAL256, (high >> 64) as u64, high as u64);
                self.word(TAG_WORD, (low >> 64) as u64);
                self.word(TAG_WORD, low as u64);
            }
        }
    }
    #[inline]
    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.word(tag, bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.word(TAG_WORD, u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.word(TAG_WORD, u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn temporal(&mut self, tag: u8, v: i64) {
        self.word(tag, v as u64);
    }
    #[inline]
    fn list(&mut self, count: usize) {
        self.word(TAG_LIST, count as u64);
    }
    #[inline]
    fn end_row(&mut self) {
        self.word(TAG_END_OF_ROW, 0);
    }
    fn sum(&self) -> u64 {
        self.0
    }
}

/// The legacy `fnv1a64` state over its byte encoding (verification of older parts only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fnv(u64);

impl Fnv {
    fn raw(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
        self.0 = h;
    }

    fn tagged(&mut self, tag: u8, payload: &[u8]) {
        self.raw(&[tag]);
        self.raw(payload);
    }

    fn wide_int(&mut self, v: i128) {
        self.tagged(TAG_INT, &v.to_le_bytes());
    }
}

impl Absorb for Fnv {
    fn null(&mut self) {
        self.raw(&[TAG_NULL]);
    }
    fn boolean(&mut self, v: bool) {
        self.tagged(TAG_BOOL, &[u8::from(v)]);
    }
    fn int(&mut self, v: i64) {
        self.wide_int(i128::from(v));
    }
    fn uint(&mut self, v: u64) {
        self.wide_int(i128::from(v));
    }
    fn float32(&mut self, bits: u32) {
        self.tagged(TAG_F32, &bits.to_le_bytes());
    }
    fn float64(&mut self, bits: u64) {
        self.tagged(TAG_F64, &bits.to_le_bytes());
    }
    fn decimal128(&mut self, v: i128) {
        self.decimal256(i256::from_i128(v));
    }
    fn decimal256(&mut self, v: i256) {
        self.tagged(TAG_DECIMAL, &v.to_le_bytes());
    }
    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.tagged(tag, &(bytes.len() as u64).to_le_bytes());
        self.raw(bytes);
    }
    fn temporal(&mut self, tag: u8, v: i64) {
        // Dates were encoded as i32, times and timestamps as i64.
        match (tag, i32::try_from(v)) {
            (TAG_DATE, Ok(days)) => self.tagged(tag, &days.to_le_bytes()),
            _ => self.tagged(tag, &v.to_le_bytes()),
        }
    }
    fn list(&mut self, count: usize) {
        self.tagged(TAG_LIST, &(count as u64).to_le_bytes());
    }
    fn end_row(&mut self) {
        self.raw(&[TAG_END_OF_ROW]);
    }
    fn sum(&self) -> u64 {
        self.0
    }
}

/// Path (a): the checksum of cells fed as they are appended, one row at a time.
///
/// Feed the cells of a row in schema order (metadata columns first) and close it with
/// [`CellHasher::end_row`]. Values must already be known to fit their column (the batch
/// builder checks before it feeds).
#[derive(Debug, Clone)]
pub struct CellHasher(Mix);

impl Default for CellHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl CellHasher {
    /// A hasher over no rows.
    pub fn new() -> Self {
        CellHasher(Mix(EMPTY_SUM))
    }

    /// A hasher that continues after rows already summed to `sum`.
    pub fn resume(sum: u64) -> Self {
        CellHasher(Mix(sum))
    }

    /// The sum of every row fed so far.
    pub fn sum(&self) -> u64 {
        self.0.0
    }

    /// A NULL cell.
    #[inline]
    pub fn null(&mut self) {
        self.0.null();
    }

    /// A text cell.
    #[inline]
    pub fn text(&mut self, text: &str) {
        self.0.bytes(TAG_TEXT, text.as_bytes());
    }

    /// An integer cell of any width.
    #[inline]
    pub fn int(&mut self, v: i64) {
        self.0.int(v);
    }

    /// A timestamp cell, or NULL.
    #[inline]
    pub fn timestamp(&mut self, micros: Option<i64>) {
        match micros {
            Some(v) => self.0.temporal(TAG_TIMESTAMP, v),
            None => self.null(),
        }
    }

    /// A list of text cells (never NULL elements), or NULL.
    pub fn text_list<'a>(&mut self, items: Option<impl ExactSizeIterator<Item = &'a str>>) {
        match items {
            Some(items) => {
                self.0.list(items.len());
                for item in items {
                    self.text(item);
                }
            }
            None => self.null(),
        }
    }

    /// A cell of a column of type `ty`.
    #[inline]
    pub fn value(&mut self, ty: &ColumnType, value: &Value) {
        let h = &mut self.0;
        match value {
            Value::Null => h.null(),
            Value::Boolean(b) => h.boolean(*b),
            Value::Int(v) => h.int(*v),
            Value::UInt(v) => h.uint(*v),
            Value::Float(v) => match ty {
                ColumnType::Float32 => h.float32((*v as f32).to_bits()),
                _ => h.float64(v.to_bits()),
            },
            Value::Decimal(v) => h.decimal128(*v),
            Value::Decimal256(le) => h.decimal256(i256::from_le_bytes(**le)),
            Value::Text(s) => h.bytes(TAG_TEXT, s.as_bytes()),
            Value::Bytes(b) => h.bytes(TAG_BINARY, b),
            Value::Date(d) => h.temporal(TAG_DATE, i64::from(*d)),
            Value::Time(t) => h.temporal(TAG_TIME, *t),
            Value::Timestamp(t) => h.temporal(TAG_TIMESTAMP, *t),
            Value::List(items) => {
                let item_ty = match ty {
                    ColumnType::List(item) => item.as_ref(),
                    other => other,
                };
                h.list(items.len());
                for item in items {
                    self.value(item_ty, item);
                }
            }
        }
    }

    /// Closes the current row.
    #[inline]
    pub fn end_row(&mut self) {
        self.0.end_row();
    }
}

/// Path (b): the checksum of a batch read back out of its Arrow arrays.
///
/// Equals the [`CellHasher`] sum of the same cells. Fails (`SLUICE_INTERNAL`) on an Arrow
/// type no sluice column maps to.
pub fn hash_batch(batch: &RecordBatch) -> Result<u64> {
    hash_batch_from(EMPTY_SUM, batch)
}

/// [`hash_batch`] continuing after rows already summed to `sum`: chaining it over a
/// part's batches in order gives the part's checksum, whatever the batch boundaries.
pub fn hash_batch_from(sum: u64, batch: &RecordBatch) -> Result<u64> {
    hash_rows(Mix(sum), batch)
}

fn hash_rows<A: Absorb>(mut h: A, batch: &RecordBatch) -> Result<u64> {
    let schema = batch.schema();
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(array, field)| {
            Col::new(array.as_ref()).ok_or_else(|| {
                Error::new(
                    Code::Internal,
                    format!(
                        "checksum: column {} has Arrow type {}, which no sluice column maps to",
                        field.name(),
                        array.data_type()
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    for row in 0..batch.num_rows() {
        for column in &columns {
            column.hash(&mut h, row);
        }
        h.end_row();
    }
    Ok(h.sum())
}

/// A column downcast once per batch: its validity and its typed values.
struct Col<'a> {
    nulls: Option<&'a NullBuffer>,
    values: Values<'a>,
}

enum Values<'a> {
    Boolean(&'a arrow_array::BooleanArray),
    Int(Ints<'a>),
    UInt8(&'a [u8]),
    UInt16(&'a [u16]),
    UInt32(&'a [u32]),
    UInt64(&'a [u64]),
    Float32(&'a [f32]),
    Float64(&'a [f64]),
    Decimal128(&'a [i128]),
    Decimal256(&'a [i256]),
    /// Text or binary (by tag): offsets and bytes.
    Bytes(u8, &'a [i32], &'a [u8]),
    /// Date, time or timestamp (by tag).
    Temporal(u8, Ints<'a>),
    List(&'a [i32], Box<Col<'a>>),
}

enum Ints<'a> {
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl Ints<'_> {
    #[inline]
    fn get(&self, i: usize) -> i64 {
        match self {
            Ints::I8(v) => i64::from(v[i]),
            Ints::I16(v) => i64::from(v[i]),
            Ints::I32(v) => i64::from(v[i]),
            Ints::I64(v) => v[i],
        }
    }
}

fn prim<T: ArrowPrimitiveType>(array: &dyn Array) -> Option<&[T::Native]> {
    Some(array.as_primitive_opt::<T>()?.values())
}

impl<'a> Col<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        let values = match array.data_type() {
            DataType::Boolean => Values::Boolean(array.as_boolean_opt()?),
            DataType::Int8 => Values::Int(Ints::I8(prim::<Int8Type>(array)?)),
            DataType::Int16 => Values::Int(Ints::I16(prim::<Int16Type>(array)?)),
            DataType::Int32 => Values::Int(Ints::I32(prim::<Int32Type>(array)?)),
            DataType::Int64 => Values::Int(Ints::I64(prim::<Int64Type>(array)?)),
            DataType::UInt8 => Values::UInt8(prim::<UInt8Type>(array)?),
            DataType::UInt16 => Values::UInt16(prim::<UInt16Type>(array)?),
            DataType::UInt32 => Values::UInt32(prim::<UInt32Type>(array)?),
            DataType::UInt64 => Values::UInt64(prim::<UInt64Type>(array)?),
            DataType::Float32 => Values::Float32(prim::<Float32Type>(array)?),
            DataType::Float64 => Values::Float64(prim::<Float64Type>(array)?),
            DataType::Decimal128(_, _) => Values::Decimal128(prim::<Decimal128Type>(array)?),
            DataType::Decimal256(_, _) => Values::Decimal256(prim::<Decimal256Type>(array)?),
            DataType::Utf8 => {
                let a = array.as_string_opt::<i32>()?;
                Values::Bytes(TAG_TEXT, a.value_offsets(), a.value_data())
            }
            DataType::Binary => {
                let a = array.as_binary_opt::<i32>()?;
                Values::Bytes(TAG_BINARY, a.value_offsets(), a.value_data())
            }
            DataType::Date32 => Values::Temporal(TAG_DATE, Ints::I32(prim::<Date32Type>(array)?)),
            DataType::Time64(TimeUnit::Microsecond) => {
                Values::Temporal(TAG_TIME, Ints::I64(prim::<Time64MicrosecondType>(array)?))
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => Values::Temporal(
                TAG_TIMESTAMP,
                Ints::I64(prim::<TimestampMicrosecondType>(array)?),
            ),
            DataType::List(_) => {
                let list = array.as_list_opt::<i32>()?;
                Values::List(
                    list.value_offsets(),
                    Box::new(Col::new(list.values().as_ref())?),
                )
            }
            _ => return None,
        };
        Some(Col {
            nulls: array.nulls(),
            values,
        })
    }

    #[inline]
    fn hash<A: Absorb>(&self, h: &mut A, i: usize) {
        if self.nulls.is_some_and(|nulls| nulls.is_null(i)) {
            h.null();
            return;
        }
        match &self.values {
            Values::Boolean(a) => h.boolean(a.value(i)),
            Values::Int(v) => h.int(v.get(i)),
            Values::UInt8(v) => h.int(i64::from(v[i])),
            Values::UInt16(v) => h.int(i64::from(v[i])),
            Values::UInt32(v) => h.int(i64::from(v[i])),
            Values::UInt64(v) => h.uint(v[i]),
            Values::Float32(v) => h.float32(v[i].to_bits()),
            Values::Float64(v) => h.float64(v[i].to_bits()),
            Values::Decimal128(v) => h.decimal128(v[i]),
            Values::Decimal256(v) => h.decimal256(v[i]),
            Values::Bytes(tag, offsets, data) => {
                let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
                h.bytes(*tag, &data[start..end]);
            }
            Values::Temporal(tag, v) => h.temporal(*tag, v.get(i)),
            Values::List(offsets, items) => {
                let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
                h.list(end - start);
                for j in start..end {
                    items.hash(h, j);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int64Builder, ListBuilder, StringBuilder};
    use arrow_array::{
        ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Decimal256Array,
        Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, StringArray,
        Time64MicrosecondArray, TimestampMicrosecondArray, UInt8Array, UInt16Array, UInt32Array,
        UInt64Array, record_batch,
    };
    use proptest::prelude::*;
    use std::sync::Arc;

    /// Every Arrow type a sluice column maps to, with NULLs and extreme values.
    fn every_type_batch() -> RecordBatch {
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("a");
        list.values().append_value("bc");
        list.append(true);
        list.append(false);
        list.append(true);
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "bool",
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            ),
            (
                "i8",
                Arc::new(Int8Array::from(vec![Some(i8::MIN), None, Some(7)])),
            ),
            (
                "i16",
                Arc::new(Int16Array::from(vec![Some(-2), Some(i16::MAX), None])),
            ),
            (
                "i32",
                Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(0), None])),
            ),
            (
                "i64",
                Arc::new(Int64Array::from(vec![
                    Some(i64::MIN),
                    Some(i64::MAX),
                    Some(-1),
                ])),
            ),
            (
                "u8",
                Arc::new(UInt8Array::from(vec![Some(255), None, Some(0)])),
            ),
            (
                "u16",
                Arc::new(UInt16Array::from(vec![Some(1), Some(u16::MAX), None])),
            ),
            (
                "u32",
                Arc::new(UInt32Array::from(vec![None, Some(u32::MAX), Some(3)])),
            ),
            (
                "u64",
                Arc::new(UInt64Array::from(vec![
                    Some(u64::MAX),
                    Some(1 << 63),
                    Some(5),
                ])),
            ),
            (
                "f32",
                Arc::new(Float32Array::from(vec![Some(1.5f32), Some(f32::NAN), None])),
            ),
            (
                "f64",
                Arc::new(Float64Array::from(vec![Some(-0.0f64), None, Some(1e300)])),
            ),
            (
                "d128",
                Arc::new(
                    Decimal128Array::from(vec![Some(12345i128), None, Some(-(10i128.pow(37)))])
                        .with_precision_and_scale(38, 2)
                        .unwrap(),
                ),
            ),
            (
                "d256",
                Arc::new(
                    Decimal256Array::from(vec![
                        Some(i256::from_i128(-5)),
                        Some(i256::from_parts(7, 1 << 100)),
                        None,
                    ])
                    .with_precision_and_scale(76, 20)
                    .unwrap(),
                ),
            ),
            (
                "utf8",
                Arc::new(StringArray::from(vec![
                    Some(""),
                    Some("héllo, wörld!"),
                    None,
                ])),
            ),
            (
                "bin",
                Arc::new(BinaryArray::from(vec![
                    Some(&b"\x00\x01"[..]),
                    None,
                    Some(&b"0123456789abcdefg"[..]),
                ])),
            ),
            (
                "date",
                Arc::new(Date32Array::from(vec![Some(-1), Some(19_000), None])),
            ),
            (
                "time",
                Arc::new(Time64MicrosecondArray::from(vec![
                    None,
                    Some(0),
                    Some(86_400_000_000),
                ])),
            ),
            (
                "ts",
                Arc::new(
                    TimestampMicrosecondArray::from(vec![Some(1), None, Some(-1)])
                        .with_timezone("UTC"),
                ),
            ),
            ("list", Arc::new(list.finish())),
        ];
        RecordBatch::try_from_iter(columns).unwrap()
    }

    /// The cells of [`every_type_batch`], fed to path (a).
    fn every_type_cells() -> CellHasher {
        let d256 = |v: i256| Value::Decimal256(Box::new(v.to_le_bytes()));
        let text = |s: &str| Value::Text(s.into());
        let rows: [[Value; 19]; 3] = [
            [
                Value::Boolean(true),
                Value::Int(i8::MIN.into()),
                Value::Int(-2),
                Value::Int(i32::MIN.into()),
                Value::Int(i64::MIN),
                Value::UInt(255),
                Value::UInt(1),
                Value::Null,
                Value::UInt(u64::MAX),
                Value::Float(1.5),
                Value::Float(-0.0),
                Value::Decimal(12345),
                Value::Decimal(-5),
                text(""),
                Value::Bytes(vec![0, 1]),
                Value::Date(-1),
                Value::Null,
                Value::Timestamp(1),
                Value::List(vec![text("a"), text("bc")]),
            ],
            [
                Value::Null,
                Value::Null,
                Value::Int(i16::MAX.into()),
                Value::Int(0),
                Value::Int(i64::MAX),
                Value::Null,
                Value::UInt(u16::MAX.into()),
                Value::UInt(u32::MAX.into()),
                Value::UInt(1 << 63),
                Value::Float(f64::from(f32::NAN)),
                Value::Null,
                Value::Null,
                d256(i256::from_parts(7, 1 << 100)),
                text("héllo, wörld!"),
                Value::Null,
                Value::Date(19_000),
                Value::Time(0),
                Value::Null,
                Value::Null,
            ],
            [
                Value::Boolean(false),
                Value::Int(7),
                Value::Null,
                Value::Null,
                Value::Int(-1),
                Value::UInt(0),
                Value::Null,
                Value::UInt(3),
                Value::UInt(5),
                Value::Null,
                Value::Float(1e300),
                Value::Decimal(-(10i128.pow(37))),
                Value::Null,
                Value::Null,
                Value::Bytes(b"0123456789abcdefg".to_vec()),
                Value::Null,
                Value::Time(86_400_000_000),
                Value::Timestamp(-1),
                Value::List(vec![]),
            ],
        ];
        let types = [
            ColumnType::Boolean,
            ColumnType::Int8,
            ColumnType::Int16,
            ColumnType::Int32,
            ColumnType::Int64,
            ColumnType::UInt8,
            ColumnType::UInt16,
            ColumnType::UInt32,
            ColumnType::UInt64,
            ColumnType::Float32,
            ColumnType::Float64,
            ColumnType::Decimal {
                precision: 38,
                scale: 2,
            },
            ColumnType::Decimal {
                precision: 76,
                scale: 20,
            },
            ColumnType::Utf8,
            ColumnType::Binary,
            ColumnType::Date,
            ColumnType::Time,
            ColumnType::TimestampTz,
            ColumnType::List(Box::new(ColumnType::Utf8)),
        ];
        let mut cells = CellHasher::new();
        for row in &rows {
            for (ty, value) in types.iter().zip(row) {
                cells.value(ty, value);
            }
            cells.end_row();
        }
        cells
    }

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        // From the FNV reference test suite (draft-eastlake-fnv).
        let mut h = Fnv(FNV_OFFSET_BASIS);
        assert_eq!(h.0, 0xcbf29ce484222325);
        h.raw(b"a");
        assert_eq!(h.0, 0xaf63dc4c8601ec8c);
        let mut h = Fnv(FNV_OFFSET_BASIS);
        h.raw(b"foobar");
        assert_eq!(h.0, 0x85944171f73967e8);
    }

    #[test]
    fn fnv1a64_sums_of_older_parts_are_unchanged() {
        // Pinned from the fnv1a64 implementation that wrote them (before mix64).
        let batch = every_type_batch();
        let fnv = |b: &RecordBatch| {
            Algorithm::Fnv1a64
                .hash_batch_from(FNV_OFFSET_BASIS, b)
                .unwrap()
        };
        assert_eq!(fnv(&batch), 0x9c9d9fa43977aabd);
        assert_eq!(fnv(&batch.slice(0, 1)), 0xb984cf7185bbdb3e);
    }

    #[test]
    fn mix64_sums_are_pinned() {
        // A change here changes every part's checksum: that needs a new prefix.
        let batch = every_type_batch();
        assert_eq!(hash_batch(&batch).unwrap(), MIX64_EVERY_TYPE);
        assert_eq!(
            hash_batch(&batch.slice(0, 1)).unwrap(),
            MIX64_EVERY_TYPE_ROW0
        );
    }

    const MIX64_EVERY_TYPE: u64 = 0x50b6_dc3c_b486_eb83;
    const MIX64_EVERY_TYPE_ROW0: u64 = 0xb8ba_7b1d_0f9c_5a23;

    #[test]
    fn both_paths_agree_on_every_type() {
        assert_eq!(
            every_type_cells().sum(),
            hash_batch(&every_type_batch()).unwrap()
        );
    }

    #[test]
    fn checksum_text_is_fixed_width_hex_with_the_new_prefix() {
        assert_eq!(checksum_text(0xab), "mix64:00000000000000ab");
    }

    #[test]
    fn both_prefixes_parse_and_nothing_else_does() {
        assert_eq!(
            Algorithm::parse("mix64:00000000000000ab"),
            Some((Algorithm::Mix64, 0xab))
        );
        assert_eq!(
            Algorithm::parse("fnv1a64:0123456789abcdef"),
            Some((Algorithm::Fnv1a64, 0x0123_4567_89ab_cdef))
        );
        for bad in [
            "",
            "mix64:",
            "mix64:0123",
            "crc32:0123456789abcdef",
            "fnv1a64:0123456789abcdeg",
            "fnv1a64:+123456789abcdef",
            "mix64:0123456789abcdef0",
        ] {
            assert_eq!(Algorithm::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn verify_batches_checks_parts_of_either_algorithm() {
        let batch = every_type_batch();
        let (first, rest) = (batch.slice(0, 1), batch.slice(1, 2));
        let fnv = format!("fnv1a64:{:016x}", 0x9c9d9fa43977aabd_u64);
        let mix = checksum_text(hash_batch(&batch).unwrap());
        for text in [&fnv, &mix] {
            verify_batches(text, [&batch]).unwrap();
            verify_batches(text, [&first, &rest]).unwrap();
            let err = verify_batches(text, [&first]).unwrap_err();
            assert_eq!(err.code(), Code::OutputChecksum, "{err}");
        }
        let err = verify_batches("crc32:0123456789abcdef", [&batch]).unwrap_err();
        assert_eq!(err.code(), Code::OutputChecksum);
        assert!(err.hint_text().is_some());
    }

    #[test]
    fn both_paths_agree_on_a_small_batch() {
        let batch = record_batch!(
            ("a", Int64, [Some(1), None, Some(-3)]),
            ("b", Utf8, [Some("x"), Some(""), None])
        )
        .unwrap();
        let mut cells = CellHasher::new();
        for (a, b) in [
            (Value::Int(1), Value::Text("x".into())),
            (Value::Null, Value::Text(String::new())),
            (Value::Int(-3), Value::Null),
        ] {
            cells.value(&ColumnType::Int64, &a);
            cells.value(&ColumnType::Utf8, &b);
            cells.end_row();
        }
        assert_eq!(cells.sum(), hash_batch(&batch).unwrap());
    }

    #[test]
    fn a_corrupted_batch_hashes_differently() {
        let good = record_batch!(("a", Int64, [Some(1), Some(2)])).unwrap();
        let bad = record_batch!(("a", Int64, [Some(1), Some(3)])).unwrap();
        let nulled = record_batch!(("a", Int64, [Some(1), None])).unwrap();
        let zeroed = record_batch!(("a", Int64, [Some(1), Some(0)])).unwrap();
        let swapped = record_batch!(("a", Int64, [Some(2), Some(1)])).unwrap();
        let good_sum = hash_batch(&good).unwrap();
        for other in [bad, nulled, zeroed, swapped] {
            assert_ne!(good_sum, hash_batch(&other).unwrap());
        }
        // A NULL and an empty text, an empty text and a zero, differ.
        let texts = record_batch!(("t", Utf8, [Some("")])).unwrap();
        let nulls = record_batch!(("t", Utf8, [None::<&str>])).unwrap();
        let zero = record_batch!(("t", Int64, [Some(0)])).unwrap();
        let sums = [&texts, &nulls, &zero].map(|b| hash_batch(b).unwrap());
        assert!(sums[0] != sums[1] && sums[0] != sums[2] && sums[1] != sums[2]);
    }

    #[test]
    fn text_boundaries_and_padding_are_part_of_the_sum() {
        // Zero padding of the last word must not make "a" equal "a\0".
        let one = record_batch!(("t", Binary, [&b"a"[..]])).unwrap();
        let padded = record_batch!(("t", Binary, [&b"a\0"[..]])).unwrap();
        assert_ne!(hash_batch(&one).unwrap(), hash_batch(&padded).unwrap());
        // Moving bytes between adjacent cells changes the sum.
        let ab = record_batch!(("x", Utf8, [Some("ab")]), ("y", Utf8, [Some("c")])).unwrap();
        let a_bc = record_batch!(("x", Utf8, [Some("a")]), ("y", Utf8, [Some("bc")])).unwrap();
        assert_ne!(hash_batch(&ab).unwrap(), hash_batch(&a_bc).unwrap());
        // Text and binary of the same bytes differ.
        let text = record_batch!(("t", Utf8, [Some("a")])).unwrap();
        assert_ne!(hash_batch(&one).unwrap(), hash_batch(&text).unwrap());
    }

    #[test]
    fn list_boundaries_are_part_of_the_sum() {
        // [[a, b], []] and [[a], [b]] hold the same elements in the same order.
        let build = |rows: &[&[&str]]| {
            let mut b = ListBuilder::new(StringBuilder::new());
            for row in rows {
                for item in *row {
                    b.values().append_value(item);
                }
                b.append(true);
            }
            let array: ArrayRef = Arc::new(b.finish());
            RecordBatch::try_from_iter([("l", array)]).unwrap()
        };
        let one = build(&[&["a", "b"], &[]]);
        let two = build(&[&["a"], &["b"]]);
        assert_ne!(hash_batch(&one).unwrap(), hash_batch(&two).unwrap());
    }

    #[test]
    fn chaining_is_independent_of_batch_boundaries() {
        let whole = every_type_batch();
        for split in 0..=whole.num_rows() {
            let (first, second) = (whole.slice(0, split), whole.slice(split, 3 - split));
            let chained = hash_batch_from(hash_batch(&first).unwrap(), &second).unwrap();
            assert_eq!(chained, hash_batch(&whole).unwrap(), "split at {split}");
        }
    }

    #[test]
    fn unsupported_arrow_types_are_an_internal_error() {
        let array: ArrayRef = Arc::new(arrow_array::LargeStringArray::from(vec!["x"]));
        let batch = RecordBatch::try_from_iter([("h", array)]).unwrap();
        assert_eq!(hash_batch(&batch).unwrap_err().code(), Code::Internal);
    }

    #[test]
    fn ints_hash_by_value_not_width() {
        let mut a = CellHasher::new();
        a.value(&ColumnType::Int16, &Value::UInt(7));
        let mut b = CellHasher::new();
        b.value(&ColumnType::Int16, &Value::Int(7));
        assert_eq!(a.sum(), b.sum());
        let mut builder = Int64Builder::new();
        builder.append_value(7);
        let array: ArrayRef = Arc::new(builder.finish());
        let batch = RecordBatch::try_from_iter([("x", array)]).unwrap();
        a.end_row();
        assert_eq!(a.sum(), hash_batch(&batch).unwrap());
    }

    fn one_cell(array: ArrayRef) -> u64 {
        hash_batch(&RecordBatch::try_from_iter([("c", array)]).unwrap()).unwrap()
    }

    proptest! {
        #[test]
        fn integers_hash_by_value_in_every_column_width(v in any::<i64>(), u in any::<u64>()) {
            let mut cells = CellHasher::new();
            cells.value(&ColumnType::Int64, &Value::Int(v));
            cells.end_row();
            prop_assert_eq!(cells.sum(), one_cell(Arc::new(Int64Array::from(vec![v]))));
            if let Ok(w) = i32::try_from(v) {
                prop_assert_eq!(cells.sum(), one_cell(Arc::new(Int32Array::from(vec![w]))));
            }
            if let Ok(w) = u64::try_from(v) {
                prop_assert_eq!(cells.sum(), one_cell(Arc::new(UInt64Array::from(vec![w]))));
            }
            let mut cells = CellHasher::new();
            cells.value(&ColumnType::UInt64, &Value::UInt(u));
            cells.end_row();
            prop_assert_eq!(cells.sum(), one_cell(Arc::new(UInt64Array::from(vec![u]))));
            if let Ok(w) = i64::try_from(u) {
                prop_assert_eq!(cells.sum(), one_cell(Arc::new(Int64Array::from(vec![w]))));
            }
        }

        #[test]
        fn decimals_hash_by_value_in_128_and_256_columns(
            low in any::<u128>(), high in any::<i128>(), small in any::<i64>(), wide in any::<i128>()
        ) {
            for v in [i128::from(small), wide] {
                let mut cells = CellHasher::new();
                cells.value(&ColumnType::Decimal { precision: 38, scale: 0 }, &Value::Decimal(v));
                cells.end_row();
                let d128 = Decimal128Array::from(vec![v]);
                let d256 = Decimal256Array::from(vec![i256::from_i128(v)]);
                prop_assert_eq!(cells.sum(), one_cell(Arc::new(d128)));
                prop_assert_eq!(cells.sum(), one_cell(Arc::new(d256)));
            }
            let v = i256::from_parts(low, high);
            let mut cells = CellHasher::new();
            cells.value(&ColumnType::Decimal { precision: 76, scale: 0 }, &Value::Decimal256(Box::new(v.to_le_bytes())));
            cells.end_row();
            prop_assert_eq!(cells.sum(), one_cell(Arc::new(Decimal256Array::from(vec![v]))));
        }

        #[test]
        fn texts_and_binaries_agree_on_both_paths(
            rows in proptest::collection::vec(proptest::option::of(".{0,40}"), 0..20)
        ) {
            let mut text_cells = CellHasher::new();
            let mut bin_cells = CellHasher::new();
            for row in &rows {
                let (t, b) = match row {
                    Some(s) => (Value::Text(s.clone()), Value::Bytes(s.as_bytes().to_vec())),
                    None => (Value::Null, Value::Null),
                };
                text_cells.value(&ColumnType::Utf8, &t);
                text_cells.end_row();
                bin_cells.value(&ColumnType::Binary, &b);
                bin_cells.end_row();
            }
            let texts = StringArray::from(rows.clone());
            let bins = BinaryArray::from(rows.iter().map(|r| r.as_deref().map(str::as_bytes)).collect::<Vec<_>>());
            prop_assert_eq!(text_cells.sum(), one_cell(Arc::new(texts)));
            prop_assert_eq!(bin_cells.sum(), one_cell(Arc::new(bins)));
        }
    }
}
