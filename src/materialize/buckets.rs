//! A current state split into buckets by a hash of each row's key (of the whole row, for a
//! table without a key), so a build reads and rewrites only the buckets its new changes
//! touch; and a bucket's stored rows turned back into rows the fold takes as its base.
//!
//! Guarantees: a key lives in exactly one bucket ([`crate::fold::row_hashes`] modulo the
//! bucket count, fixed per table until a full build); a base row sorts before every change
//! (`__op = snapshot`, `__pos` empty, `__seq` 0), so every change the build folds applies
//! on top of it and a `truncate` drops it, as the replay rule has it.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array, new_null_array};
use arrow_schema::{DataType, Field, Schema};
use arrow_select::take::take_record_batch;

use crate::error::{Code, Error, Result};
use crate::fold::{Shape, row_hashes};
use crate::parts::arrow_schema::{OP, POS, SEQ, UNLOGGED, unlogged_type};

/// The bucket of each row of `batch`.
pub fn of_rows(batch: &RecordBatch, shape: &Shape, buckets: u32) -> Result<Vec<u32>> {
    Ok(row_hashes(batch, shape)?
        .into_iter()
        .map(|h| (h % u64::from(buckets)) as u32)
        .collect())
}

/// The buckets the changes in `batches` touch: every bucket when one holds a marker.
pub fn touched(batches: &[RecordBatch], shape: &Shape, buckets: u32) -> Result<BTreeSet<u32>> {
    let mut touched = BTreeSet::new();
    for batch in batches {
        let has_marker = batch
            .column_by_name(OP)
            .and_then(|ops| arrow_array::cast::AsArray::as_string_opt::<i32>(ops.as_ref()))
            .is_some_and(|ops| {
                ops.iter()
                    .any(|op| matches!(op, Some("truncate") | Some("rebaseline")))
            });
        if has_marker {
            return Ok((0..buckets).collect());
        }
        touched.extend(of_rows(batch, shape, buckets)?);
    }
    Ok(touched)
}

/// The rows of `state` in bucket `bucket`, per bucket of `buckets`.
pub fn split(state: &RecordBatch, shape: &Shape, buckets: u32) -> Result<Vec<RecordBatch>> {
    let of = of_rows(state, shape, buckets)?;
    let mut indexes: Vec<Vec<u32>> = vec![Vec::new(); buckets as usize];
    for (row, bucket) in of.into_iter().enumerate() {
        indexes[bucket as usize].push(row as u32);
    }
    indexes
        .into_iter()
        .map(|rows| {
            take_record_batch(state, &UInt32Array::from(rows)).map_err(|e| {
                Error::new(Code::Internal, "splitting a state into buckets".to_owned()).source(e)
            })
        })
        .collect()
}

/// A stored bucket's rows with the metadata columns of a base row in front.
pub fn as_base(stored: &RecordBatch) -> Result<RecordBatch> {
    let n = stored.num_rows();
    let mut fields = vec![
        Field::new(OP, DataType::Utf8, false),
        Field::new(POS, DataType::Utf8, false),
        Field::new(SEQ, DataType::Int64, false),
        Field::new(UNLOGGED, unlogged_type(), true),
    ];
    fields.extend(stored.schema().fields().iter().map(|f| f.as_ref().clone()));
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
            "snapshot", n,
        ))),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n("", n))),
        Arc::new(Int64Array::from_iter_values(std::iter::repeat_n(0, n))),
        new_null_array(&unlogged_type(), n),
    ];
    columns.extend(stored.columns().iter().cloned());
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| {
        Error::new(
            Code::Internal,
            "reading a current-state bucket back".to_owned(),
        )
        .source(e)
    })
}
