//! An independent checksum of the cells of a change part, computed twice: once from the
//! [`Value`]s as they are appended ([`CellHasher`]) and once from the built Arrow arrays
//! ([`hash_batch`]), so a conversion or builder bug cannot reach a part unnoticed.
//!
//! Guarantees: the sum is FNV-1a 64 (offset basis `0xcbf29ce484222325`, prime
//! `0x100000001b3`) over a canonical byte encoding of every cell, row by row, columns in
//! schema order — deterministic across versions, platforms and batch boundaries, so the
//! running sum of a part equals [`hash_batch_from`] chained over the part's batches read
//! back with any batch size. The encoding (all integers little-endian):
//!
//! | cell | bytes |
//! | --- | --- |
//! | NULL | `00` |
//! | boolean | `01`, `00`/`01` |
//! | any integer | `02`, the value as i128 (16 bytes) |
//! | float32 | `03`, IEEE bits (4 bytes) |
//! | float64 | `04`, IEEE bits (8 bytes) |
//! | decimal (128 or 256) | `05`, unscaled value as i256 (32 bytes) |
//! | text (utf8, json, uuid) | `06`, length u64, UTF-8 bytes |
//! | binary | `07`, length u64, bytes |
//! | date | `08`, days i32 |
//! | time | `09`, µs i64 |
//! | timestamp (naive or UTC) | `0A`, µs i64 |
//! | list | `0B`, element count u64, each element encoded as a cell |
//! | end of row | `FF` |

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, Time64MicrosecondType, TimestampMicrosecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Decimal256Array, Float32Array,
    Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, ListArray, PrimitiveArray,
    RecordBatch, StringArray, Time64MicrosecondArray, TimestampMicrosecondArray, UInt8Array,
    UInt16Array, UInt32Array, UInt64Array,
};
use arrow_buffer::i256;
use arrow_schema::{DataType, TimeUnit};

use crate::change::{ColumnType, Value};
use crate::error::{Code, Error, Result};

/// FNV-1a 64 offset basis: the sum of no rows.
pub const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
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
const TAG_END_OF_ROW: u8 = 0xFF;

/// The text form of a sum, as parts and manifests carry it: `fnv1a64:<16 hex digits>`.
pub fn checksum_text(sum: u64) -> String {
    format!("fnv1a64:{sum:016x}")
}

/// FNV-1a 64 state over the canonical cell encoding (the shared low level of both paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fnv(u64);

impl Fnv {
    #[inline]
    fn bytes(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
        self.0 = h;
    }

    #[inline]
    fn tagged(&mut self, tag: u8, payload: &[u8]) {
        self.bytes(&[tag]);
        self.bytes(payload);
    }

    fn int(&mut self, v: i128) {
        self.tagged(TAG_INT, &v.to_le_bytes());
    }

    fn decimal(&mut self, v: i256) {
        self.tagged(TAG_DECIMAL, &v.to_le_bytes());
    }

    fn sized(&mut self, tag: u8, payload: &[u8]) {
        self.tagged(tag, &(payload.len() as u64).to_le_bytes());
        self.bytes(payload);
    }

    fn list_header(&mut self, count: usize) {
        self.tagged(TAG_LIST, &(count as u64).to_le_bytes());
    }
}

/// Path (a): the checksum of cells fed as they are appended, one row at a time.
///
/// Feed the cells of a row in schema order (metadata columns first) and close it with
/// [`CellHasher::end_row`]. Values must already be known to fit their column (the batch
/// builder checks before it feeds).
#[derive(Debug, Clone)]
pub struct CellHasher(Fnv);

impl Default for CellHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl CellHasher {
    /// A hasher over no rows.
    pub fn new() -> Self {
        CellHasher(Fnv(FNV_OFFSET_BASIS))
    }

    /// A hasher that continues after rows already summed to `sum`.
    pub fn resume(sum: u64) -> Self {
        CellHasher(Fnv(sum))
    }

    /// The sum of every row fed so far.
    pub fn sum(&self) -> u64 {
        self.0.0
    }

    /// A NULL cell.
    pub fn null(&mut self) {
        self.0.bytes(&[TAG_NULL]);
    }

    /// A text cell.
    pub fn text(&mut self, text: &str) {
        self.0.sized(TAG_TEXT, text.as_bytes());
    }

    /// An integer cell of any width.
    pub fn int(&mut self, v: i128) {
        self.0.int(v);
    }

    /// A timestamp cell, or NULL.
    pub fn timestamp(&mut self, micros: Option<i64>) {
        match micros {
            Some(v) => self.0.tagged(TAG_TIMESTAMP, &v.to_le_bytes()),
            None => self.null(),
        }
    }

    /// A list of text cells (never NULL elements), or NULL.
    pub fn text_list<'a>(&mut self, items: Option<impl ExactSizeIterator<Item = &'a str>>) {
        match items {
            Some(items) => {
                self.0.list_header(items.len());
                for item in items {
                    self.text(item);
                }
            }
            None => self.null(),
        }
    }

    /// A cell of a column of type `ty`.
    pub fn value(&mut self, ty: &ColumnType, value: &Value) {
        let h = &mut self.0;
        match value {
            Value::Null => h.bytes(&[TAG_NULL]),
            Value::Boolean(b) => h.tagged(TAG_BOOL, &[u8::from(*b)]),
            Value::Int(v) => h.int(i128::from(*v)),
            Value::UInt(v) => h.int(i128::from(*v)),
            Value::Float(v) => match ty {
                ColumnType::Float32 => h.tagged(TAG_F32, &(*v as f32).to_bits().to_le_bytes()),
                _ => h.tagged(TAG_F64, &v.to_bits().to_le_bytes()),
            },
            Value::Decimal(v) => h.decimal(i256::from_i128(*v)),
            Value::Decimal256(le) => h.decimal(i256::from_le_bytes(*le)),
            Value::Text(s) => h.sized(TAG_TEXT, s.as_bytes()),
            Value::Bytes(b) => h.sized(TAG_BINARY, b),
            Value::Date(d) => h.tagged(TAG_DATE, &d.to_le_bytes()),
            Value::Time(t) => h.tagged(TAG_TIME, &t.to_le_bytes()),
            Value::Timestamp(t) => h.tagged(TAG_TIMESTAMP, &t.to_le_bytes()),
            Value::List(items) => {
                let item_ty = match ty {
                    ColumnType::List(item) => item.as_ref(),
                    other => other,
                };
                h.list_header(items.len());
                for item in items {
                    self.value(item_ty, item);
                }
            }
        }
    }

    /// Closes the current row.
    pub fn end_row(&mut self) {
        self.0.bytes(&[TAG_END_OF_ROW]);
    }
}

/// Path (b): the checksum of a batch read back out of its Arrow arrays.
///
/// Equals the [`CellHasher`] sum of the same cells. Fails (`SLUICE_INTERNAL`) on an Arrow
/// type no sluice column maps to.
pub fn hash_batch(batch: &RecordBatch) -> Result<u64> {
    hash_batch_from(FNV_OFFSET_BASIS, batch)
}

/// [`hash_batch`] continuing after rows already summed to `sum`: chaining it over a
/// part's batches in order gives the part's checksum, whatever the batch boundaries.
pub fn hash_batch_from(sum: u64, batch: &RecordBatch) -> Result<u64> {
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
    let mut h = Fnv(sum);
    for row in 0..batch.num_rows() {
        for column in &columns {
            column.hash(&mut h, row);
        }
        h.bytes(&[TAG_END_OF_ROW]);
    }
    Ok(h.0)
}

/// A column downcast once per batch to the array type its DataType promises.
enum Col<'a> {
    Boolean(&'a BooleanArray),
    Int8(&'a Int8Array),
    Int16(&'a Int16Array),
    Int32(&'a Int32Array),
    Int64(&'a Int64Array),
    UInt8(&'a UInt8Array),
    UInt16(&'a UInt16Array),
    UInt32(&'a UInt32Array),
    UInt64(&'a UInt64Array),
    Float32(&'a Float32Array),
    Float64(&'a Float64Array),
    Decimal128(&'a Decimal128Array),
    Decimal256(&'a Decimal256Array),
    Utf8(&'a StringArray),
    Binary(&'a BinaryArray),
    Date(&'a Date32Array),
    Time(&'a Time64MicrosecondArray),
    Timestamp(&'a TimestampMicrosecondArray),
    List(&'a ListArray, Box<Col<'a>>),
}

impl<'a> Col<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Boolean => Col::Boolean(array.as_boolean_opt()?),
            DataType::Int8 => Col::Int8(array.as_primitive_opt::<Int8Type>()?),
            DataType::Int16 => Col::Int16(array.as_primitive_opt::<Int16Type>()?),
            DataType::Int32 => Col::Int32(array.as_primitive_opt::<Int32Type>()?),
            DataType::Int64 => Col::Int64(array.as_primitive_opt::<Int64Type>()?),
            DataType::UInt8 => Col::UInt8(array.as_primitive_opt::<UInt8Type>()?),
            DataType::UInt16 => Col::UInt16(array.as_primitive_opt::<UInt16Type>()?),
            DataType::UInt32 => Col::UInt32(array.as_primitive_opt::<UInt32Type>()?),
            DataType::UInt64 => Col::UInt64(array.as_primitive_opt::<UInt64Type>()?),
            DataType::Float32 => Col::Float32(array.as_primitive_opt::<Float32Type>()?),
            DataType::Float64 => Col::Float64(array.as_primitive_opt::<Float64Type>()?),
            DataType::Decimal128(_, _) => {
                Col::Decimal128(array.as_primitive_opt::<Decimal128Type>()?)
            }
            DataType::Decimal256(_, _) => {
                Col::Decimal256(array.as_primitive_opt::<Decimal256Type>()?)
            }
            DataType::Utf8 => Col::Utf8(array.as_string_opt::<i32>()?),
            DataType::Binary => Col::Binary(array.as_binary_opt::<i32>()?),
            DataType::Date32 => Col::Date(array.as_primitive_opt::<Date32Type>()?),
            DataType::Time64(TimeUnit::Microsecond) => {
                Col::Time(array.as_primitive_opt::<Time64MicrosecondType>()?)
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                Col::Timestamp(array.as_primitive_opt::<TimestampMicrosecondType>()?)
            }
            DataType::List(_) => {
                let list = array.as_list_opt::<i32>()?;
                Col::List(list, Box::new(Col::new(list.values().as_ref())?))
            }
            _ => return None,
        })
    }

    fn array(&self) -> &dyn Array {
        match self {
            Col::Boolean(a) => *a,
            Col::Int8(a) => *a,
            Col::Int16(a) => *a,
            Col::Int32(a) => *a,
            Col::Int64(a) => *a,
            Col::UInt8(a) => *a,
            Col::UInt16(a) => *a,
            Col::UInt32(a) => *a,
            Col::UInt64(a) => *a,
            Col::Float32(a) => *a,
            Col::Float64(a) => *a,
            Col::Decimal128(a) => *a,
            Col::Decimal256(a) => *a,
            Col::Utf8(a) => *a,
            Col::Binary(a) => *a,
            Col::Date(a) => *a,
            Col::Time(a) => *a,
            Col::Timestamp(a) => *a,
            Col::List(a, _) => *a,
        }
    }

    fn hash(&self, h: &mut Fnv, i: usize) {
        if self.array().is_null(i) {
            h.bytes(&[TAG_NULL]);
            return;
        }
        match self {
            Col::Boolean(a) => h.tagged(TAG_BOOL, &[u8::from(a.value(i))]),
            Col::Int8(a) => int_cell(h, a, i),
            Col::Int16(a) => int_cell(h, a, i),
            Col::Int32(a) => int_cell(h, a, i),
            Col::Int64(a) => int_cell(h, a, i),
            Col::UInt8(a) => int_cell(h, a, i),
            Col::UInt16(a) => int_cell(h, a, i),
            Col::UInt32(a) => int_cell(h, a, i),
            Col::UInt64(a) => int_cell(h, a, i),
            Col::Float32(a) => h.tagged(TAG_F32, &a.value(i).to_bits().to_le_bytes()),
            Col::Float64(a) => h.tagged(TAG_F64, &a.value(i).to_bits().to_le_bytes()),
            Col::Decimal128(a) => h.decimal(i256::from_i128(a.value(i))),
            Col::Decimal256(a) => h.decimal(a.value(i)),
            Col::Utf8(a) => h.sized(TAG_TEXT, a.value(i).as_bytes()),
            Col::Binary(a) => h.sized(TAG_BINARY, a.value(i)),
            Col::Date(a) => h.tagged(TAG_DATE, &a.value(i).to_le_bytes()),
            Col::Time(a) => h.tagged(TAG_TIME, &a.value(i).to_le_bytes()),
            Col::Timestamp(a) => h.tagged(TAG_TIMESTAMP, &a.value(i).to_le_bytes()),
            Col::List(list, items) => {
                let offsets = list.value_offsets();
                let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
                h.list_header(end - start);
                for j in start..end {
                    items.hash(h, j);
                }
            }
        }
    }
}

fn int_cell<T>(h: &mut Fnv, array: &PrimitiveArray<T>, i: usize)
where
    T: arrow_array::ArrowPrimitiveType,
    i128: From<T::Native>,
{
    h.int(i128::from(array.value(i)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int64Builder, ListBuilder, StringBuilder};
    use arrow_array::{ArrayRef, record_batch};
    use std::sync::Arc;

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        // From the FNV reference test suite (draft-eastlake-fnv).
        let mut h = Fnv(FNV_OFFSET_BASIS);
        assert_eq!(h.0, 0xcbf29ce484222325);
        h.bytes(b"a");
        assert_eq!(h.0, 0xaf63dc4c8601ec8c);
        let mut h = Fnv(FNV_OFFSET_BASIS);
        h.bytes(b"foobar");
        assert_eq!(h.0, 0x85944171f73967e8);
    }

    #[test]
    fn checksum_text_is_fixed_width_hex() {
        assert_eq!(checksum_text(0xab), "fnv1a64:00000000000000ab");
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
        let good_sum = hash_batch(&good).unwrap();
        assert_ne!(good_sum, hash_batch(&bad).unwrap());
        assert_ne!(good_sum, hash_batch(&nulled).unwrap());
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
        let whole = record_batch!(("a", Int64, [Some(1), Some(2), None, Some(4)])).unwrap();
        let (first, second) = (whole.slice(0, 1), whole.slice(1, 3));
        let chained = hash_batch_from(hash_batch(&first).unwrap(), &second).unwrap();
        assert_eq!(chained, hash_batch(&whole).unwrap());
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
}
