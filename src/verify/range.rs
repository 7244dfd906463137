//! The key ranges of the verify walker ([`super::walk`]): which lake rows belong to which
//! of a plan's chunks, so one invocation folds only its chunk's share of the lake.
//!
//! Guarantees:
//! * **the source's order, exactly**: a chunk is `lower < key <= upper` in the source's key
//!   order; ranges are built only for keys whose every column is an integer, where that
//!   order is the numeric order sluice compares in ([`walkable`]) — any other key is
//!   verified in one invocation, never by ranges that could disagree with the source;
//! * **a chunk's fold is the full fold restricted to its keys**: the rows kept are the
//!   markers (`truncate`, `rebaseline`: they cut every key), every row of a key in the
//!   ranges, and — for a key change whose insert half has unlogged cells the fold fills
//!   from the old key — every row of the old key, followed back as far as such changes
//!   go ([`lake_rows_in`]); the state is then cut back to the ranges' keys
//!   ([`KeyRanges::retain`]), so a key outside them is never reported;
//! * rows after `upto` (a pinned read's position) are dropped before anything else.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_row::{OwnedRow, Row, RowConverter, Rows, SortField};
use arrow_schema::{DataType, Field};
use arrow_select::filter::filter_record_batch;

use crate::destination::Destination;
use crate::error::{Code, Error, Result};
use crate::fold::{self, Shape};
use crate::lake::files as inputs;
use crate::lake::shape::ShapeColumn;
use crate::parts::arrow_schema::{OP, POS, SEQ, UNLOGGED};
use crate::position::Position;
use crate::source::baseline_read::ChunkBounds;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;

/// The Arrow type a key column is compared in, for the sluice types whose order is the
/// source's order of the column (integers).
fn integer_type(ty: &str) -> Option<DataType> {
    Some(match ty {
        "int8" => DataType::Int8,
        "int16" => DataType::Int16,
        "int32" => DataType::Int32,
        "int64" => DataType::Int64,
        "uint8" => DataType::UInt8,
        "uint16" => DataType::UInt16,
        "uint32" => DataType::UInt32,
        "uint64" => DataType::UInt64,
        _ => return None,
    })
}

/// `Ok` when the table's key lets the lake be split by the plan's ranges; else why not
/// (a table without a key, or a key column whose order sluice cannot reproduce).
pub fn walkable(columns: &[ShapeColumn]) -> std::result::Result<(), String> {
    let key: Vec<&ShapeColumn> = columns.iter().filter(|c| c.key).collect();
    if key.is_empty() {
        return Err("the table has no key: it is read once, at one exact position".to_owned());
    }
    match key.iter().find(|c| integer_type(&c.ty).is_none()) {
        Some(c) => Err(format!(
            "key column {} is {}: chunks follow the source's collation or type order, which sluice does not reproduce for it",
            c.name, c.ty
        )),
        None => Ok(()),
    }
}

/// A set of a plan's chunks, as ranges of typed keys.
pub struct KeyRanges {
    /// The key columns alone, typed as compared (a shape for [`fold::conformed`]).
    key_shape: Shape,
    converter: RowConverter,
    /// Per chunk: its number in the plan (from 1) and its bounds (`None` = open).
    ranges: Vec<(usize, Option<OwnedRow>, Option<OwnedRow>)>,
    /// Per chunk: the first key column's bounds, inclusive (a row group whose statistics
    /// lie outside every one holds no row of the ranges); `None` when the first key
    /// column is unsigned (its statistics are not compared as numbers here).
    first: Option<Vec<(Option<i64>, Option<i64>)>>,
}

/// What one lake object holds of a table's first key column: its smallest and largest
/// value, and whether a row has none (a marker's NULL key). `min`/`max` are `None` when its
/// statistics do not say (or the column is not a signed integer): the object is then read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectSpan {
    pub key: String,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub nulls: bool,
}

/// The span of the object `key` (its Parquet `metadata`) over the first key column of
/// `columns`.
pub fn object_span(columns: &[ShapeColumn], key: &str, metadata: &ParquetMetaData) -> ObjectSpan {
    let unknown = ObjectSpan {
        key: key.to_owned(),
        min: None,
        max: None,
        nulls: true,
    };
    let Some(first) = columns.iter().find(|c| c.key) else {
        return unknown;
    };
    if !matches!(first.ty.as_str(), "int8" | "int16" | "int32" | "int64") {
        return unknown;
    }
    let Some(column) = column_index(metadata, &first.name) else {
        // The object lacks the column (written before it existed): every row's is NULL.
        return unknown;
    };
    let (mut min, mut max, mut nulls) = (i64::MAX, i64::MIN, false);
    for group in metadata.row_groups() {
        match int_statistics(group.column(column).statistics()) {
            Some((lo, hi, count)) => {
                min = min.min(lo);
                max = max.max(hi);
                nulls |= count != Some(0);
            }
            None if group.num_rows() == 0 => {}
            None => return unknown,
        }
    }
    if min > max {
        // No row at all.
        return ObjectSpan { nulls, ..unknown };
    }
    ObjectSpan {
        key: key.to_owned(),
        min: Some(min),
        max: Some(max),
        nulls,
    }
}

fn column_index(metadata: &ParquetMetaData, name: &str) -> Option<usize> {
    metadata
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.path().parts() == [name])
}

impl KeyRanges {
    /// The ranges of `chunks` (number in the plan, bounds) over a table of `columns`.
    pub fn new(columns: &[ShapeColumn], chunks: &[(usize, ChunkBounds)]) -> Result<KeyRanges> {
        walkable(columns).map_err(|why| {
            Error::new(Code::VerifyUnsupported, why)
                .hint("verify the table in one invocation ({\"action\": \"verify\"})")
        })?;
        let fields: Vec<Field> = columns
            .iter()
            .filter(|c| c.key)
            .map(|c| {
                Field::new(
                    &c.name,
                    integer_type(&c.ty).unwrap_or(DataType::Int64),
                    true,
                )
            })
            .collect();
        let key_shape = Shape {
            key: (0..fields.len()).collect(),
            fillable: vec![false; fields.len()],
            fields,
        };
        let converter = RowConverter::new(
            key_shape
                .fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )
        .map_err(|e| Error::new(Code::Internal, "a key row converter").source(e))?;
        let mut ranges = Vec::with_capacity(chunks.len());
        for (n, bounds) in chunks {
            let lower = bound(&converter, &key_shape, bounds.lower.as_deref())?;
            let upper = bound(&converter, &key_shape, bounds.upper.as_deref())?;
            ranges.push((*n, lower, upper));
        }
        let signed = matches!(
            key_shape.fields[0].data_type(),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
        );
        let first_of = |b: &Option<Vec<String>>| -> Option<i64> {
            b.as_ref()
                .and_then(|b| b.first())
                .and_then(|t| t.parse().ok())
        };
        let first = signed.then(|| {
            chunks
                .iter()
                .map(|(_, b)| (first_of(&b.lower), first_of(&b.upper)))
                .collect()
        });
        Ok(KeyRanges {
            key_shape,
            converter,
            ranges,
            first,
        })
    }

    /// The row groups of a Parquet file that may hold a row of the ranges — or a marker
    /// (a NULL key): every row group whose first key column's statistics are missing,
    /// count a NULL, or overlap a range. `None`: read them all.
    pub fn row_groups(&self, metadata: &ParquetMetaData) -> Option<Vec<usize>> {
        let first = self.first.as_ref()?;
        let column = column_index(metadata, self.key_shape.fields[0].name())?;
        let groups = metadata
            .row_groups()
            .iter()
            .enumerate()
            .filter(|(_, group)| {
                let Some((min, max, nulls)) = int_statistics(group.column(column).statistics())
                else {
                    return true;
                };
                nulls != Some(0) || overlaps(first, min, max)
            })
            .map(|(i, _)| i)
            .collect();
        Some(groups)
    }

    /// Whether the object of `span` may hold a row a fold of the ranges needs: a key in a
    /// range, a marker, or what its statistics do not say.
    pub fn may_hold(&self, span: &ObjectSpan) -> bool {
        match (&self.first, span.min, span.max) {
            (Some(first), Some(min), Some(max)) => span.nulls || overlaps(first, min, max),
            (Some(_), None, None) if !span.nulls => false,
            _ => true,
        }
    }
}

/// Whether `[min, max]` meets one of the first key column's inclusive bounds.
fn overlaps(first: &[(Option<i64>, Option<i64>)], min: i64, max: i64) -> bool {
    first
        .iter()
        .any(|(lower, upper)| lower.is_none_or(|l| max >= l) && upper.is_none_or(|u| min <= u))
}

/// A column chunk's integer statistics: min, max, NULL count (`None` when unknown).
fn int_statistics(statistics: Option<&Statistics>) -> Option<(i64, i64, Option<u64>)> {
    match statistics? {
        Statistics::Int32(s) => Some((
            i64::from(*s.min_opt()?),
            i64::from(*s.max_opt()?),
            s.null_count_opt(),
        )),
        Statistics::Int64(s) => Some((*s.min_opt()?, *s.max_opt()?, s.null_count_opt())),
        _ => None,
    }
}

impl KeyRanges {
    /// The key of each row of `batch` (its key columns cast to the compared types).
    pub fn keys(&self, batch: &RecordBatch) -> Result<Rows> {
        let arrays = fold::conformed(batch, &self.key_shape)?;
        self.converter
            .convert_columns(&arrays)
            .map_err(|e| Error::new(Code::Internal, "encoding keys").source(e))
    }

    /// The plan number of the chunk whose range holds `key`.
    pub fn which(&self, key: Row<'_>) -> Option<usize> {
        self.ranges
            .iter()
            .find(|(_, lower, upper)| {
                lower.as_ref().is_none_or(|l| key > l.row())
                    && upper.as_ref().is_none_or(|u| key <= u.row())
            })
            .map(|(n, _, _)| *n)
    }

    /// The rows of `state` (a folded state) whose key is in one of the ranges.
    pub fn retain(&self, state: &RecordBatch) -> Result<RecordBatch> {
        let keys = self.keys(state)?;
        let keep: BooleanArray = (0..state.num_rows())
            .map(|i| Some(self.which(keys.row(i)).is_some()))
            .collect();
        filter(state, &keep)
    }
}

/// One bound's key row (`None`: open); a bound whose text is not an integer of its column
/// is refused (the plan is not over the key it names).
fn bound(
    converter: &RowConverter,
    key_shape: &Shape,
    texts: Option<&[String]>,
) -> Result<Option<OwnedRow>> {
    let Some(texts) = texts else {
        return Ok(None);
    };
    if texts.len() != key_shape.fields.len() {
        return Err(Error::new(
            Code::VerifyUnsupported,
            format!(
                "a chunk bound of {} values for a key of {} columns",
                texts.len(),
                key_shape.fields.len()
            ),
        )
        .hint("the table's key changed since the walk was planned: run the verify machine again"));
    }
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let arrays: Vec<ArrayRef> = texts
        .iter()
        .zip(&key_shape.fields)
        .map(|(text, field)| {
            let text: ArrayRef = Arc::new(StringArray::from(vec![text.as_str()]));
            cast_with_options(&text, field.data_type(), &options).map_err(|e| {
                Error::new(
                    Code::VerifyUnsupported,
                    format!("chunk bound {text:?} is not a {} value of key column {}", field.data_type(), field.name()),
                )
                .hint("the table's key changed since the walk was planned: run the verify machine again")
                .source(e)
            })
        })
        .collect::<Result<_>>()?;
    let rows = converter
        .convert_columns(&arrays)
        .map_err(|e| Error::new(Code::Internal, "encoding a chunk bound").source(e))?;
    Ok(Some(rows.row(0).owned()))
}

fn filter(batch: &RecordBatch, keep: &BooleanArray) -> Result<RecordBatch> {
    filter_record_batch(batch, keep)
        .map_err(|e| Error::new(Code::Internal, "filtering lake rows by key").source(e))
}

/// The lake's rows of `table` a fold of the keys in `ranges` needs (see the module's
/// guarantees), only those at or before `upto` when given, and the fold's shape. Reads
/// the table's files one at a time, keeping only those rows: memory follows the ranges'
/// share of the lake, not the lake. The objects of `spans` that cannot hold such a row
/// ([`KeyRanges::may_hold`]) are not read at all — unless keys outside the ranges are
/// wanted (a key change's old key), when every object is.
pub async fn lake_rows_in(
    destination: &dyn Destination,
    table: &str,
    columns: &[ShapeColumn],
    ranges: &KeyRanges,
    spans: &[ObjectSpan],
    upto: Option<&Position>,
) -> Result<(Vec<RecordBatch>, Shape)> {
    let skip: HashSet<&str> = spans
        .iter()
        .filter(|s| !ranges.may_hold(s))
        .map(|s| s.key.as_str())
        .collect();
    let listing = inputs::list(destination, table).await?;
    let plan = inputs::current_plan_id(destination, &listing).await?;
    let files = inputs::all_files(&listing, plan.as_deref());
    let cut = upto.map(Position::sortable_text);
    // Keys outside the ranges whose rows a key change carries unlogged cells from.
    let mut carried: HashSet<Vec<u8>> = HashSet::new();
    loop {
        let mut kept = Vec::new();
        for key in &files {
            // Row groups outside the ranges are skipped, unless keys outside them are
            // wanted too (a key change's old key: anywhere).
            let batches = if carried.is_empty() {
                if skip.contains(key.as_str()) {
                    continue;
                }
                inputs::read_file_where(destination, key, |m| ranges.row_groups(m)).await?
            } else {
                inputs::read_file(destination, key).await?
            };
            for batch in batches {
                let batch = match &cut {
                    Some(cut) => super::at_or_before(&batch, cut)?,
                    None => batch,
                };
                kept.push(keep_rows(&batch, ranges, &carried)?);
            }
        }
        let wanted = carry_points(&kept)?;
        let mut found = false;
        if !wanted.is_empty() {
            for key in &files {
                for batch in inputs::read_file(destination, key).await? {
                    for old in deleted_at(&batch, ranges, &wanted)? {
                        found |= carried.insert(old);
                    }
                }
            }
        }
        if !found {
            let shape = crate::materialize::shape_of(columns, &kept);
            return Ok((kept, shape));
        }
    }
}

/// The rows of `batch` a fold of `ranges`' keys (and the `carried` keys) needs.
fn keep_rows(
    batch: &RecordBatch,
    ranges: &KeyRanges,
    carried: &HashSet<Vec<u8>>,
) -> Result<RecordBatch> {
    if batch.num_rows() == 0 {
        return Ok(batch.clone());
    }
    let ops = text_column(batch, OP)?;
    let keys = ranges.keys(batch)?;
    let keep: BooleanArray = (0..batch.num_rows())
        .map(|i| {
            let marker = matches!(ops.value(i), "truncate" | "rebaseline");
            let key = keys.row(i);
            Some(marker || ranges.which(key).is_some() || carried.contains(key.as_ref()))
        })
        .collect();
    filter(batch, &keep)
}

/// The `(__pos, __seq)` of the deletes a key change's insert half may fill unlogged cells
/// from (the insert's own `__pos`, its `__seq` less one), that `kept` does not hold.
fn carry_points(kept: &[RecordBatch]) -> Result<HashSet<(String, i64)>> {
    let mut wanted = HashSet::new();
    let mut present = HashSet::new();
    for batch in kept.iter().filter(|b| b.num_rows() > 0) {
        let (ops, pos, seq) = places(batch)?;
        let unlogged = batch
            .column_by_name(UNLOGGED)
            .and_then(|c| c.as_list_opt::<i32>());
        for i in 0..batch.num_rows() {
            match ops.value(i) {
                "delete" => {
                    present.insert((pos.value(i).to_owned(), seq.value(i)));
                }
                "insert" if unlogged.is_some_and(|u| u.is_valid(i) && !u.value(i).is_empty()) => {
                    wanted.insert((pos.value(i).to_owned(), seq.value(i) - 1));
                }
                _ => {}
            }
        }
    }
    Ok(wanted.difference(&present).cloned().collect())
}

/// The keys of the deletes in `batch` at one of `points`.
fn deleted_at(
    batch: &RecordBatch,
    ranges: &KeyRanges,
    points: &HashSet<(String, i64)>,
) -> Result<Vec<Vec<u8>>> {
    if batch.num_rows() == 0 {
        return Ok(Vec::new());
    }
    let (ops, pos, seq) = places(batch)?;
    let mut keys = None;
    let mut out = Vec::new();
    for i in 0..batch.num_rows() {
        if ops.value(i) == "delete" && points.contains(&(pos.value(i).to_owned(), seq.value(i))) {
            let keys = match &keys {
                Some(k) => k,
                None => keys.insert(ranges.keys(batch)?),
            };
            out.push(keys.row(i).as_ref().to_vec());
        }
    }
    Ok(out)
}

/// A part's `__op`, `__pos` and `__seq` columns.
fn places(batch: &RecordBatch) -> Result<(&StringArray, &StringArray, &arrow_array::Int64Array)> {
    let seq = batch
        .column_by_name(SEQ)
        .and_then(|c| c.as_primitive_opt::<arrow_array::types::Int64Type>())
        .ok_or_else(|| Error::new(Code::FoldInput, "a part without an integer __seq"))?;
    Ok((text_column(batch, OP)?, text_column(batch, POS)?, seq))
}

fn text_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::new(Code::FoldInput, format!("a part without a text {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::Schema;

    fn column(name: &str, ty: &str, key: bool) -> ShapeColumn {
        ShapeColumn {
            name: name.into(),
            ty: ty.into(),
            key,
        }
    }

    fn bounds(lower: Option<&str>, upper: Option<&str>) -> ChunkBounds {
        ChunkBounds {
            lower: lower.map(|l| vec![l.to_owned()]),
            upper: upper.map(|u| vec![u.to_owned()]),
        }
    }

    #[test]
    fn only_integer_keys_are_walked() {
        assert!(walkable(&[column("id", "int64", true), column("v", "utf8", false)]).is_ok());
        assert!(walkable(&[column("a", "int32", true), column("b", "uint16", true)]).is_ok());
        let text = walkable(&[column("code", "utf8", true)]).unwrap_err();
        assert!(text.contains("code is utf8"), "{text}");
        assert!(walkable(&[column("v", "int64", false)]).is_err());
    }

    #[test]
    fn ranges_follow_the_numeric_order_with_open_ends() {
        let columns = [column("id", "int32", true)];
        // 9 < 10 < 100 numerically, though not as text.
        let ranges = KeyRanges::new(
            &columns,
            &[
                (1, bounds(None, Some("9"))),
                (2, bounds(Some("9"), Some("100"))),
                (3, bounds(Some("100"), None)),
            ],
        )
        .unwrap();
        // Parts may hold an older, wider type of the column: cast before comparing.
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)])),
            vec![Arc::new(Int64Array::from(vec![-5, 9, 10, 100, 101]))],
        )
        .unwrap();
        let keys = ranges.keys(&batch).unwrap();
        let chunks: Vec<Option<usize>> = (0..5).map(|i| ranges.which(keys.row(i))).collect();
        assert_eq!(chunks, [Some(1), Some(1), Some(2), Some(2), Some(3)]);
        // A subset of the plan's chunks holds only their keys.
        let middle = KeyRanges::new(&columns, &[(2, bounds(Some("9"), Some("100")))]).unwrap();
        assert_eq!(middle.retain(&batch).unwrap().num_rows(), 2);
    }

    #[test]
    fn row_groups_outside_the_ranges_are_skipped_and_those_with_a_null_key_kept() {
        use parquet::arrow::ArrowWriter;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        use parquet::file::properties::WriterProperties;
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let mut body = Vec::new();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(10))
            .build();
        let mut writer = ArrowWriter::try_new(&mut body, schema.clone(), Some(properties)).unwrap();
        // Row groups: 1..=10, 11..=20, 21..=30, then 31..=39 with one NULL (a marker's).
        let ids: Vec<Option<i64>> = (1..=39).map(Some).chain([None]).collect();
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))]).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(body)).unwrap();
        let metadata = builder.metadata();
        assert_eq!(metadata.num_row_groups(), 4);
        let columns = [column("id", "int64", true)];
        let middle = KeyRanges::new(&columns, &[(2, bounds(Some("12"), Some("15")))]).unwrap();
        assert_eq!(middle.row_groups(metadata), Some(vec![1, 3]));
        let ends = KeyRanges::new(
            &columns,
            &[(1, bounds(None, Some("5"))), (3, bounds(Some("25"), None))],
        )
        .unwrap();
        assert_eq!(ends.row_groups(metadata), Some(vec![0, 2, 3]));
        // An unsigned key is not pruned.
        let unsigned = KeyRanges::new(
            &[column("id", "uint64", true)],
            &[(1, bounds(None, Some("5")))],
        )
        .unwrap();
        assert_eq!(unsigned.row_groups(metadata), None);
    }

    fn parquet(ids: Vec<Option<i64>>, rows_per_group: usize) -> Vec<u8> {
        use parquet::arrow::ArrowWriter;
        use parquet::file::properties::WriterProperties;
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let mut body = Vec::new();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows_per_group))
            .build();
        let mut writer = ArrowWriter::try_new(&mut body, schema.clone(), Some(properties)).unwrap();
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))]).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        body
    }

    #[tokio::test]
    async fn an_object_is_skipped_only_when_its_footer_says_no_row_of_the_ranges_is_in_it() {
        use crate::destination::Destination;
        let dir = tempfile::tempdir().unwrap();
        let destination = crate::destination::local::LocalDestination::new(dir.path()).unwrap();
        let columns = [column("id", "int64", true)];
        // A footer longer than the first read (2,000 row groups), and a file with a NULL key.
        destination
            .put_marker("t/a.parquet", &parquet((1..=2000).map(Some).collect(), 1))
            .await
            .unwrap();
        destination
            .put_marker("t/b.parquet", &parquet(vec![Some(5000), None], 10))
            .await
            .unwrap();
        let a = crate::lake::files::read_footer(&destination, "t/a.parquet")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(a.num_row_groups(), 2000);
        let a = object_span(&columns, "t/a.parquet", &a);
        assert_eq!((a.min, a.max, a.nulls), (Some(1), Some(2000), false));
        let b = crate::lake::files::read_footer(&destination, "t/b.parquet")
            .await
            .unwrap()
            .unwrap();
        let b = object_span(&columns, "t/b.parquet", &b);
        assert_eq!((b.min, b.max, b.nulls), (Some(5000), Some(5000), true));
        assert!(
            crate::lake::files::read_footer(&destination, "t/gone.parquet")
                .await
                .unwrap()
                .is_none()
        );

        let inside = KeyRanges::new(&columns, &[(2, bounds(Some("10"), Some("20")))]).unwrap();
        let beyond = KeyRanges::new(&columns, &[(9, bounds(Some("3000"), None))]).unwrap();
        assert!(inside.may_hold(&a));
        assert!(!beyond.may_hold(&a));
        // A NULL key (a marker) is needed by every range.
        assert!(inside.may_hold(&b) && beyond.may_hold(&b));
        // A text key's objects are always read.
        let text = object_span(
            &[column("id", "utf8", true)],
            "t/a.parquet",
            &crate::lake::files::read_footer(&destination, "t/a.parquet")
                .await
                .unwrap()
                .unwrap(),
        );
        assert!(beyond.may_hold(&text));
    }

    #[test]
    fn a_bound_that_is_not_an_integer_is_refused() {
        let err = match KeyRanges::new(
            &[column("id", "int64", true)],
            &[(1, bounds(Some("abc"), None))],
        ) {
            Err(e) => e,
            Ok(_) => panic!("accepted"),
        };
        assert_eq!(err.code(), Code::VerifyUnsupported);
    }
}
