//! A current state split into buckets, so a build reads and rewrites only the buckets its
//! new changes touch; and a bucket's stored rows turned back into rows the fold takes as
//! its base.
//!
//! Two ways to split ([`Bucketing`]): a table whose key is one integer column is split by
//! **key range** — appends and changes to recent rows, the usual pattern, touch one or two
//! buckets of a fixed size however large the table grows; any other table by a **hash** of
//! its key (of the whole row, for a table without a key) modulo the bucket count.
//!
//! Guarantees: a key lives in exactly one bucket (the bucketing and, for a hash, the
//! bucket count are fixed per table until a full build; a range bucket's number depends
//! only on the key); a base row sorts before every change
//! (`__op = snapshot`, `__pos` empty, `__seq` 0), so every change the build folds applies
//! on top of it and a `truncate` drops it, as the replay rule has it.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array, new_null_array};
use arrow_schema::{DataType, Field, Schema};
use arrow_select::take::take_record_batch;
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};
use crate::fold::{Shape, row_hashes};
use crate::parts::arrow_schema::{OP, POS, SEQ, UNLOGGED, unlogged_type};

/// The most buckets a state is split into.
pub const MAX_BUCKETS: u32 = 4096;

/// A full build splits by key range only when no range holds more than this many times
/// the bucket size (a state one bucket of which grows past eight times it is built in full
/// again).
const UNEVEN: u64 = 4;

/// How a state's rows are assigned to buckets (recorded in the pointer; a pointer without
/// it is hashed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Bucketing {
    /// The key's hash modulo the bucket count.
    #[default]
    Hash,
    /// Integer key ranges: bucket `n` holds the keys in `[base + n·width, base + (n+1)·width)`;
    /// keys below `base` are in bucket 0, and the last possible bucket (`MAX_BUCKETS - 1`)
    /// holds every key beyond its start. The bucket count grows as keys do.
    Range { base: i64, width: i64 },
}

impl Bucketing {
    /// The bucketing a full build gives a state: by key range when the key is one integer
    /// column (`count` buckets of about equal key spans over the state's keys, or
    /// `per_bucket` keys each for an empty state), by hash otherwise.
    pub fn choose(state: &RecordBatch, shape: &Shape, count: u32, per_bucket: u64) -> Result<Self> {
        let Some(field) = range_key(shape) else {
            return Ok(Bucketing::Hash);
        };
        let keys = int_keys(state, &shape.fields[field])?;
        let (Some(min), Some(max)) = (keys.iter().flatten().min(), keys.iter().flatten().max())
        else {
            return Ok(Bucketing::Range {
                base: 0,
                width: i64::try_from(per_bucket.max(1)).unwrap_or(i64::MAX),
            });
        };
        let span = i128::from(*max) - i128::from(*min) + 1;
        let width = (span + i128::from(count.max(1)) - 1) / i128::from(count.max(1));
        let (base, width) = (*min, i64::try_from(width.max(1)).unwrap_or(i64::MAX));
        // Equal key spans hold about equal rows only where keys are spread evenly; keys
        // bunched together (a few outliers far from the rest) would make one bucket hold
        // most of the table, and every build after a full one again. Such a state is hashed.
        let mut rows_in = vec![0u64; MAX_BUCKETS as usize];
        for key in keys.iter().flatten() {
            rows_in[range_bucket(*key, base, width) as usize] += 1;
        }
        if rows_in.iter().any(|&n| n > UNEVEN * per_bucket.max(1)) {
            return Ok(Bucketing::Hash);
        }
        Ok(Bucketing::Range { base, width })
    }
}

/// The key field of a table bucketed by range: its one key column, when that is an
/// integer type every value of which an `i64` holds.
fn range_key(shape: &Shape) -> Option<usize> {
    let [field] = shape.key.as_slice() else {
        return None;
    };
    matches!(
        shape.fields[*field].data_type(),
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
    )
    .then_some(*field)
}

/// The integer keys of `batch` (`None` for a row without one: a marker).
fn int_keys(batch: &RecordBatch, field: &Field) -> Result<Vec<Option<i64>>> {
    let Some(column) = batch.column_by_name(field.name()) else {
        return Ok(vec![None; batch.num_rows()]);
    };
    let cast = arrow_cast::cast(column, &DataType::Int64).map_err(|e| {
        Error::new(
            Code::FoldInput,
            format!("key column {} cannot be read as an integer", field.name()),
        )
        .source(e)
    })?;
    Ok(cast.as_primitive::<Int64Type>().iter().collect())
}

/// The range bucket of `key`.
fn range_bucket(key: i64, base: i64, width: i64) -> u32 {
    let n = (i128::from(key) - i128::from(base)).div_euclid(i128::from(width.max(1)));
    n.clamp(0, i128::from(MAX_BUCKETS - 1)) as u32
}

/// The bucket of each row of `batch`, of `buckets` (the count matters to a hash only).
pub fn of_rows(
    batch: &RecordBatch,
    shape: &Shape,
    bucketing: Bucketing,
    buckets: u32,
) -> Result<Vec<u32>> {
    match bucketing {
        Bucketing::Range { base, width } => match range_key(shape) {
            Some(field) => Ok(int_keys(batch, &shape.fields[field])?
                .into_iter()
                .map(|key| key.map_or(0, |k| range_bucket(k, base, width)))
                .collect()),
            None => Err(Error::new(
                Code::Internal,
                "a state bucketed by key range whose key is not one integer column".to_owned(),
            )),
        },
        Bucketing::Hash => Ok(row_hashes(batch, shape)?
            .into_iter()
            .map(|h| (h % u64::from(buckets.max(1))) as u32)
            .collect()),
    }
}

/// The buckets the changes in `batches` touch: every one of the `buckets` when one holds a
/// marker (a range bucket may be new, beyond them).
pub fn touched(
    batches: &[RecordBatch],
    shape: &Shape,
    bucketing: Bucketing,
    buckets: u32,
) -> Result<BTreeSet<u32>> {
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
            touched.extend(0..buckets);
        }
        touched.extend(of_rows(batch, shape, bucketing, buckets)?);
    }
    Ok(touched)
}

/// The rows of `state` per bucket: at least `buckets` of them, more when a range bucket
/// beyond them holds rows.
pub fn split(
    state: &RecordBatch,
    shape: &Shape,
    bucketing: Bucketing,
    buckets: u32,
) -> Result<Vec<RecordBatch>> {
    let of = of_rows(state, shape, bucketing, buckets)?;
    let count = of.iter().map(|b| b + 1).max().unwrap_or(0).max(buckets);
    let mut indexes: Vec<Vec<u32>> = vec![Vec::new(); count as usize];
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(key_type: DataType, keys: usize) -> Shape {
        let mut fields = vec![Field::new("id", key_type, true)];
        fields.extend((1..keys).map(|i| Field::new(format!("k{i}"), DataType::Int64, true)));
        fields.push(Field::new("v", DataType::Utf8, true));
        Shape {
            key: (0..keys).collect(),
            fillable: vec![false; fields.len()],
            fields,
        }
    }

    fn state(ids: &[Option<i64>], ops: &[&str]) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new(OP, DataType::Utf8, false),
            Field::new("id", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from_iter_values(ops.iter().copied())),
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from_iter_values(ids.iter().map(|_| "x"))),
            ],
        )
        .unwrap()
    }

    #[test]
    fn one_integer_key_is_bucketed_by_range_over_the_states_keys() {
        let ids: Vec<Option<i64>> = (100..=1099).map(Some).collect();
        let batch = state(&ids, &vec!["snapshot"; ids.len()]);
        let bucketing = Bucketing::choose(&batch, &shape(DataType::Int64, 1), 4, 250).unwrap();
        assert_eq!(
            bucketing,
            Bucketing::Range {
                base: 100,
                width: 250
            }
        );
        let of = of_rows(&batch, &shape(DataType::Int64, 1), bucketing, 4).unwrap();
        assert_eq!(of[0], 0);
        assert_eq!(of[249], 0);
        assert_eq!(of[250], 1);
        assert_eq!(of[999], 3);
        // Every bucket holds a quarter.
        let split = split(&batch, &shape(DataType::Int64, 1), bucketing, 4).unwrap();
        assert_eq!(
            split.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            [250; 4]
        );
    }

    #[test]
    fn other_keys_and_keyless_tables_are_hashed() {
        let batch = state(&[Some(1), Some(2)], &["snapshot", "snapshot"]);
        for shape in [
            shape(DataType::Utf8, 1),
            shape(DataType::Int64, 2),
            shape(DataType::Int64, 0),
            shape(DataType::UInt64, 1),
        ] {
            assert_eq!(
                Bucketing::choose(&batch, &shape, 2, 1).unwrap(),
                Bucketing::Hash,
                "{shape:?}"
            );
        }
    }

    #[test]
    fn new_keys_fall_in_new_buckets_and_old_ones_stay_put() {
        let bucketing = Bucketing::Range { base: 0, width: 10 };
        assert_eq!(range_bucket(-5, 0, 10), 0);
        assert_eq!(range_bucket(9, 0, 10), 0);
        assert_eq!(range_bucket(10, 0, 10), 1);
        assert_eq!(range_bucket(i64::MAX, i64::MIN, 1), MAX_BUCKETS - 1);
        // Appends past the state's buckets touch a new bucket only; split makes room for it.
        let appends = state(&[Some(35), Some(36)], &["insert", "insert"]);
        let s = shape(DataType::Int64, 1);
        let touched = touched(std::slice::from_ref(&appends), &s, bucketing, 2).unwrap();
        assert_eq!(touched, BTreeSet::from([3]));
        assert_eq!(split(&appends, &s, bucketing, 2).unwrap().len(), 4);
    }

    #[test]
    fn a_marker_touches_every_bucket_and_the_new_ones_beside_it() {
        let bucketing = Bucketing::Range { base: 0, width: 10 };
        let changes = state(&[None, Some(55)], &["truncate", "insert"]);
        let touched = touched(&[changes], &shape(DataType::Int64, 1), bucketing, 3).unwrap();
        assert_eq!(touched, BTreeSet::from([0, 1, 2, 5]));
    }

    #[test]
    fn keys_spanning_the_whole_integer_range_stay_within_the_buckets_touched() {
        let ids = [
            Some(i64::MIN),
            Some(-1),
            Some(0),
            Some(1116),
            Some(i64::MAX),
        ];
        let batch = state(&ids, &["snapshot"; 5]);
        let s = shape(DataType::Int64, 1);
        let bucketing = Bucketing::choose(&batch, &s, 1, 65_536).unwrap();
        let split = split(&batch, &s, bucketing, 1).unwrap();
        let touched = touched(std::slice::from_ref(&batch), &s, bucketing, 1).unwrap();
        // A span wider than an i64 puts rows beyond the one bucket counted...
        assert!(split.len() > 1, "{bucketing:?}");
        // ...and every row is still in a bucket the build writes.
        let held: usize = split
            .iter()
            .enumerate()
            .filter(|(b, _)| touched.contains(&(*b as u32)))
            .map(|(_, rows)| rows.num_rows())
            .sum();
        assert_eq!(held, ids.len(), "{bucketing:?} {touched:?}");
    }

    #[test]
    fn keys_bunched_by_a_far_outlier_are_hashed() {
        let mut ids: Vec<Option<i64>> = (1..=1000).map(Some).collect();
        ids.push(Some(1_000_000_000_000));
        let batch = state(&ids, &vec!["snapshot"; ids.len()]);
        let s = shape(DataType::Int64, 1);
        // 1,001 rows in buckets of 100: equal spans would put 1,000 rows in bucket 0.
        assert_eq!(
            Bucketing::choose(&batch, &s, 11, 100).unwrap(),
            Bucketing::Hash
        );
        // Spread evenly, the same keys without the outlier are ranged.
        let even = state(&ids[..1000], &vec!["snapshot"; 1000]);
        assert!(matches!(
            Bucketing::choose(&even, &s, 10, 100).unwrap(),
            Bucketing::Range { .. }
        ));
    }

    #[test]
    fn an_empty_state_gets_ranges_of_the_bucket_size() {
        let batch = state(&[], &[]);
        assert_eq!(
            Bucketing::choose(&batch, &shape(DataType::Int32, 1), 1, 500).unwrap(),
            Bucketing::Range {
                base: 0,
                width: 500
            }
        );
    }

    #[test]
    fn a_pointer_without_a_bucketing_is_hashed() {
        let old: Bucketing = serde_json::from_str("\"hash\"").unwrap_or_default();
        assert_eq!(old, Bucketing::Hash);
        let range = Bucketing::Range { base: -3, width: 7 };
        let json = serde_json::to_string(&range).unwrap();
        assert_eq!(json, r#"{"by":"range","base":-3,"width":7}"#);
        assert_eq!(serde_json::from_str::<Bucketing>(&json).unwrap(), range);
    }
}
