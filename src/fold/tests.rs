use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use super::{Shape, fold};

/// One change row: op, pos, seq, unlogged names, id, note.
type Change<'a> = (
    &'a str,
    &'a str,
    i64,
    &'a [&'a str],
    Option<i64>,
    Option<&'a str>,
);

fn batch(rows: &[Change<'_>]) -> RecordBatch {
    let mut unlogged = ListBuilder::new(StringBuilder::new());
    for (_, _, _, names, _, _) in rows {
        if names.is_empty() {
            unlogged.append_null();
        } else {
            for n in *names {
                unlogged.values().append_value(n);
            }
            unlogged.append(true);
        }
    }
    let unlogged = unlogged.finish();
    let schema = Schema::new(vec![
        Field::new("__op", DataType::Utf8, false),
        Field::new("__pos", DataType::Utf8, false),
        Field::new("__seq", DataType::Int64, false),
        Field::new("__unlogged", unlogged.data_type().clone(), true),
        Field::new("id", DataType::Int64, true),
        Field::new("note", DataType::Utf8, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(unlogged),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.4))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.5))),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

fn shape(keyed: bool) -> Shape {
    Shape {
        fields: vec![
            Field::new("id", DataType::Int64, true),
            Field::new("note", DataType::Utf8, true),
        ],
        key: if keyed { vec![0] } else { vec![] },
        fillable: vec![false, true],
    }
}

fn rows(state: &RecordBatch) -> Vec<(Option<i64>, Option<String>)> {
    let ids = state.column(0).as_primitive::<Int64Type>();
    let notes = state.column(1).as_string::<i32>();
    (0..state.num_rows())
        .map(|i| {
            (
                (!ids.is_null(i)).then(|| ids.value(i)),
                (!notes.is_null(i)).then(|| notes.value(i).to_owned()),
            )
        })
        .collect()
}

fn row(id: i64, note: Option<&str>) -> (Option<i64>, Option<String>) {
    (Some(id), note.map(str::to_owned))
}

use arrow_array::Array;

#[test]
fn the_latest_row_per_key_wins_and_a_delete_removes_the_key() {
    let b = batch(&[
        ("insert", "0002", 0, &[], Some(1), Some("b")),
        ("insert", "0001", 0, &[], Some(1), Some("a")),
        ("insert", "0001", 1, &[], Some(2), Some("x")),
        ("delete", "0003", 0, &[], Some(2), None),
        ("update", "0003", 1, &[], Some(3), Some("c")),
    ]);
    let state = fold(&[b], &shape(true)).unwrap();
    assert_eq!(rows(&state), [row(1, Some("b")), row(3, Some("c"))]);
}

#[test]
fn an_unlogged_cell_keeps_the_keys_previous_value_and_crosses_a_key_change() {
    let b = batch(&[
        ("insert", "0001", 0, &[], Some(1), Some("toast")),
        ("update", "0002", 0, &["note"], Some(1), None),
        // key change 1 → 5 at one position: the insert half has no row of its own
        ("delete", "0003", 0, &[], Some(1), None),
        ("insert", "0003", 1, &["note"], Some(5), None),
        ("update", "0004", 0, &["note"], Some(5), None),
        // a plain insert with an unlogged cell and no history stays NULL
        ("insert", "0005", 0, &["note"], Some(7), None),
    ]);
    let state = fold(&[b], &shape(true)).unwrap();
    assert_eq!(rows(&state), [row(5, Some("toast")), row(7, None)]);
}

#[test]
fn a_marker_drops_every_earlier_row_and_is_no_row() {
    let b = batch(&[
        ("insert", "0001", 0, &[], Some(1), Some("a")),
        ("truncate", "0002", 0, &[], None, None),
        ("insert", "0002", 1, &[], Some(2), Some("b")),
        ("snapshot", "0000", 0, &[], Some(3), Some("old baseline")),
    ]);
    let state = fold(&[b], &shape(true)).unwrap();
    assert_eq!(rows(&state), [row(2, Some("b"))]);
}

#[test]
fn duplicates_count_once_across_batches() {
    let first = batch(&[
        ("insert", "0001", 0, &[], Some(1), Some("a")),
        ("delete", "0002", 0, &[], Some(1), None),
        ("insert", "0002", 1, &["note"], Some(2), None),
    ]);
    let again = batch(&[
        ("delete", "0002", 0, &[], Some(1), None),
        ("insert", "0002", 1, &["note"], Some(2), None),
    ]);
    let state = fold(&[first, again], &shape(true)).unwrap();
    assert_eq!(rows(&state), [row(2, Some("a"))]);
}

#[test]
fn a_keyless_table_is_a_multiset_and_a_redelivery_counts_once() {
    let rows_of = |batches: &[RecordBatch]| {
        let mut r = rows(&fold(batches, &shape(false)).unwrap());
        r.sort();
        r
    };
    let b = batch(&[
        ("insert", "0001", 0, &[], Some(1), Some("a")),
        ("insert", "0001", 1, &[], Some(1), Some("a")),
        ("insert", "0002", 0, &[], Some(2), None),
        ("delete", "0003", 0, &[], Some(1), Some("a")),
    ]);
    let again = batch(&[("delete", "0003", 0, &[], Some(1), Some("a"))]);
    assert_eq!(rows_of(&[b, again]), [row(1, Some("a")), (Some(2), None)]);

    // a re-baseline: its own snapshot rows at its position are the base
    let rebaselined = batch(&[
        ("insert", "0001", 0, &[], Some(9), Some("gone")),
        ("snapshot", "0005", 0, &[], Some(4), Some("d")),
        ("snapshot", "0005", 1, &[], Some(4), Some("d")),
        ("rebaseline", "0005", i64::MAX, &[], None, None),
        ("delete", "0006", 0, &[], Some(4), Some("d")),
    ]);
    assert_eq!(rows_of(&[rebaselined]), [row(4, Some("d"))]);
}

#[test]
fn a_column_a_batch_lacks_is_null_there() {
    let old = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("__op", DataType::Utf8, false),
            Field::new("__pos", DataType::Utf8, false),
            Field::new("__seq", DataType::Int64, false),
            Field::new("id", DataType::Int32, true),
        ])),
        vec![
            Arc::new(StringArray::from(vec!["insert"])),
            Arc::new(StringArray::from(vec!["0001"])),
            Arc::new(Int64Array::from(vec![0])),
            Arc::new(arrow_array::Int32Array::from(vec![1])),
        ],
    )
    .unwrap();
    let state = fold(&[old], &shape(true)).unwrap();
    assert_eq!(rows(&state), [(Some(1), None)]);
}

#[test]
fn a_row_that_is_not_a_part_is_refused() {
    let b = batch(&[("upsert", "0001", 0, &[], Some(1), None)]);
    let err = fold(&[b], &shape(true)).unwrap_err();
    assert_eq!(err.code().as_str(), "SLUICE_FOLD_INPUT", "{err}");
}
