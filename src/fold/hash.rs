//! Stable row hashes for splitting a state into buckets: the key columns of a keyed table,
//! every column of a keyless one, in arrow's binary row form, hashed by FNV-1a (64 bit).
//!
//! Guarantees: equal keys (equal rows, for a keyless table) hash equal whatever part or
//! state file they come from and whatever their stored type before the cast to the shape's
//! (the bytes hashed are those of the shape's type); the hash never changes between
//! releases (it decides which file a row lives in).

use arrow_array::RecordBatch;
use arrow_row::{RowConverter, SortField};

use super::cells::Columns;
use super::shape::Shape;
use crate::error::{Code, Error, Result};

/// The hash of each row of `batch`, for `shape`.
pub fn row_hashes(batch: &RecordBatch, shape: &Shape) -> Result<Vec<u64>> {
    let columns = Columns::of(std::slice::from_ref(batch), shape)?;
    let fields: Vec<usize> = if shape.key.is_empty() {
        (0..shape.fields.len()).collect()
    } else {
        shape.key.clone()
    };
    let converter = RowConverter::new(
        fields
            .iter()
            .map(|&f| SortField::new(shape.fields[f].data_type().clone()))
            .collect(),
    )
    .map_err(|e| {
        Error::new(
            Code::FoldInput,
            "the table's columns have a type rows cannot be compared by".to_owned(),
        )
        .source(e)
    })?;
    let arrays: Vec<_> = fields
        .iter()
        .map(|&f| columns.of_field(f)[0].clone())
        .collect();
    let rows = converter
        .convert_columns(&arrays)
        .map_err(|e| Error::new(Code::Internal, "encoding rows".to_owned()).source(e))?;
    Ok(rows.iter().map(|row| fnv1a(row.as_ref())).collect())
}

/// FNV-1a, 64 bit.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn the_hash_is_fnv1a_and_never_changes() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
