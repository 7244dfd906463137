use super::*;
use crate::change::{Column, Op};
use crate::parts::checksum::hash_batch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, Int64Array};
use proptest::prelude::*;

fn col(name: &str, ty: ColumnType) -> Column {
    Column {
        name: name.into(),
        ty,
        nullable: true,
        key: false,
        source_type: format!("src_{name}"),
        field_metadata: Default::default(),
    }
}

fn schema(columns: Vec<Column>) -> Arc<TableSchema> {
    Arc::new(TableSchema {
        name: "public.t".into(),
        columns,
    })
}

fn event(table: &Arc<TableSchema>, seq: u64, image: Vec<Value>) -> ChangeEvent {
    ChangeEvent {
        table: table.clone(),
        op: Op::Insert,
        pos: Arc::from("00000001/000000A0"),
        seq,
        commit_ts: Some(1_700_000_000_000_000),
        image,
        unlogged: vec![],
    }
}

fn refusal(ty: ColumnType, value: Value) -> Error {
    let table = schema(vec![col("c", ty)]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    let err = b.append(&event(&table, 7, vec![value])).unwrap_err();
    assert_eq!(b.len(), 0, "a failed append must append nothing");
    err
}

#[test]
fn narrowing_and_wrong_kinds_are_refused_naming_column_and_position() {
    let dec = |precision, scale| ColumnType::Decimal { precision, scale };
    let cases: Vec<(ColumnType, Value, &str)> = vec![
        (
            ColumnType::Int16,
            Value::Int(40_000),
            "out of range for int16",
        ),
        (ColumnType::Int8, Value::UInt(128), "out of range for int8"),
        (
            ColumnType::UInt32,
            Value::Int(-1),
            "out of range for uint32",
        ),
        (
            ColumnType::Int64,
            Value::UInt(u64::MAX),
            "out of range for int64",
        ),
        (
            ColumnType::UInt64,
            Value::Int(i64::MIN),
            "out of range for uint64",
        ),
        (
            ColumnType::Int32,
            Value::Text("1".into()),
            "a text value cannot be written as int32",
        ),
        (
            ColumnType::Boolean,
            Value::Int(1),
            "cannot be written as boolean",
        ),
        (ColumnType::Float32, Value::Float(0.1), "would round"),
        (ColumnType::Float32, Value::Float(1e300), "would round"),
        (
            ColumnType::Float64,
            Value::Int(1),
            "cannot be written as float64",
        ),
        (dec(5, 2), Value::Decimal(100_000), "more than 5 digits"),
        (dec(5, 2), Value::Decimal(-100_000), "more than 5 digits"),
        (
            dec(38, 0),
            Value::Decimal256(Box::new([0; 32])),
            "256-bit decimal value cannot be written",
        ),
        (
            dec(40, 0),
            Value::Decimal256(
                [0xff; 31]
                    .iter()
                    .chain(&[0x7f])
                    .copied()
                    .collect::<Vec<_>>()
                    .try_into()
                    .unwrap(),
            ),
            "more than 40 digits",
        ),
        (
            dec(10, 2),
            Value::Float(1.5),
            "a float value cannot be written as decimal(10,2)",
        ),
        (
            ColumnType::Uuid,
            Value::Text("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11".into()),
            "not a UUID",
        ),
        (
            ColumnType::Uuid,
            Value::Text("a0eebc999c0b4ef8bb6d6bb9bd380a11".into()),
            "not a UUID",
        ),
        (
            ColumnType::Uuid,
            Value::Bytes(vec![0; 16]),
            "cannot be written as uuid",
        ),
        (
            ColumnType::Json,
            Value::Bytes(b"{}".to_vec()),
            "cannot be written as json",
        ),
        (
            ColumnType::Binary,
            Value::Text("x".into()),
            "cannot be written as binary",
        ),
        (ColumnType::Time, Value::Time(-1), "time of day outside"),
        (
            ColumnType::Time,
            Value::Time(86_400_000_001),
            "time of day outside",
        ),
        (
            ColumnType::Date,
            Value::Timestamp(0),
            "cannot be written as date",
        ),
        (
            ColumnType::Timestamp,
            Value::Date(0),
            "cannot be written as timestamp",
        ),
        (
            ColumnType::List(Box::new(ColumnType::Int16)),
            Value::List(vec![Value::Int(1), Value::Null, Value::Int(1 << 20)]),
            "element 2: integer out of range for int16",
        ),
        (
            ColumnType::List(Box::new(ColumnType::Int16)),
            Value::Int(1),
            "cannot be written as list<int16>",
        ),
    ];
    for (ty, value, expected) in cases {
        let label = format!("{ty:?} {value:?}");
        let err = refusal(ty, value);
        assert_eq!(err.code(), Code::ValueUnrepresentable, "{label}: {err}");
        let text = err.message();
        assert!(text.contains("table public.t"), "{label}: {text}");
        assert!(text.contains("column c ("), "{label}: {text}");
        assert!(text.contains("src_c"), "{label}: {text}");
        assert!(
            text.contains("__pos 00000001/000000A0 __seq 7"),
            "{label}: {text}"
        );
        assert!(text.contains(expected), "{label}: {text}");
        assert!(err.hint_text().is_some(), "{label}");
    }
}

#[test]
fn edge_values_that_fit_are_accepted() {
    let dec = |precision, scale| ColumnType::Decimal { precision, scale };
    let max76: [u8; 32] = i256::from_string(&"9".repeat(76)).unwrap().to_le_bytes();
    let cases: Vec<(ColumnType, Value)> = vec![
        (ColumnType::Int16, Value::Int(-32_768)),
        (ColumnType::Int16, Value::UInt(32_767)),
        (ColumnType::UInt64, Value::UInt(u64::MAX)),
        (ColumnType::UInt8, Value::Int(255)),
        (ColumnType::Float32, Value::Float(0.5)),
        (ColumnType::Float32, Value::Float(f64::NAN)),
        (ColumnType::Float32, Value::Float(f64::NEG_INFINITY)),
        (dec(5, 2), Value::Decimal(99_999)),
        (dec(5, 2), Value::Decimal(-99_999)),
        (dec(38, 0), Value::Decimal(10i128.pow(38) - 1)),
        (dec(76, 10), Value::Decimal256(Box::new(max76))),
        (dec(50, 0), Value::Decimal(i128::MIN + 1)),
        (
            ColumnType::Uuid,
            Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
        ),
        (ColumnType::Time, Value::Time(86_400_000_000)),
        (
            ColumnType::List(Box::new(ColumnType::Utf8)),
            Value::List(vec![]),
        ),
    ];
    for (ty, value) in cases {
        let table = schema(vec![col("c", ty.clone())]);
        let mut b = RowBatchBuilder::new(table.clone()).unwrap();
        b.append(&event(&table, 0, vec![value.clone()]))
            .unwrap_or_else(|e| panic!("{ty:?} {value:?}: {e}"));
        let checked = b.finish_verified().unwrap();
        assert_eq!(checked.batch.num_rows(), 1);
        assert_eq!(checked.check.expected, hash_batch(&checked.batch).unwrap());
    }
}

#[test]
fn a_refused_row_leaves_the_batch_intact() {
    let table = schema(vec![
        col("a", ColumnType::Int64),
        col("b", ColumnType::Int8),
    ]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    b.append(&event(&table, 0, vec![Value::Int(1), Value::Int(1)]))
        .unwrap();
    // The first cell fits, the second does not: neither may be appended.
    let err = b
        .append(&event(&table, 1, vec![Value::Int(2), Value::Int(1000)]))
        .unwrap_err();
    assert!(err.message().contains("column b"), "{err}");
    b.append(&event(&table, 2, vec![Value::Int(3), Value::Null]))
        .unwrap();
    let checked = b.finish_verified().unwrap();
    let a = checked.batch.column(5).as_primitive::<Int64Type>();
    assert_eq!(a.values(), &[1, 3]);
    let seq = checked.batch.column(2).as_primitive::<Int64Type>();
    assert_eq!(seq.values(), &[0, 2]);
}

#[test]
fn unlogged_cells_are_null_and_named() {
    let table = schema(vec![
        col("id", ColumnType::Int64),
        col("big", ColumnType::Utf8),
        col("doc", ColumnType::Json),
    ]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    let mut ev = event(
        &table,
        0,
        vec![
            Value::Int(1),
            Value::Text("placeholder".into()),
            Value::Null,
        ],
    );
    ev.unlogged = vec![2, 1];
    b.append(&ev).unwrap();
    b.append(&event(
        &table,
        1,
        vec![Value::Int(2), Value::Text("x".into()), Value::Null],
    ))
    .unwrap();
    let checked = b.finish_verified().unwrap();
    let batch = &checked.batch;
    assert!(batch.column(6).is_null(0), "unlogged cell written as data");
    assert!(batch.column(7).is_null(0));
    let unlogged = batch.column(4).as_list::<i32>();
    let names = unlogged.value(0);
    let names: Vec<_> = names.as_string::<i32>().iter().flatten().collect();
    assert_eq!(names, ["big", "doc"], "column order, not event order");
    assert!(unlogged.is_null(1), "all logged: __unlogged is NULL");
    assert_eq!(batch.column(6).as_string::<i32>().value(1), "x");
}

#[test]
fn metadata_columns_are_written() {
    let table = schema(vec![col("id", ColumnType::Int64)]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    let mut ev = event(&table, 3, vec![Value::Int(1)]);
    ev.op = Op::Delete;
    ev.commit_ts = None;
    b.append(&ev).unwrap();
    let batch = b.finish_verified().unwrap().batch;
    assert_eq!(batch.column(0).as_string::<i32>().value(0), "delete");
    assert_eq!(
        batch.column(1).as_string::<i32>().value(0),
        "00000001/000000A0"
    );
    assert_eq!(batch.column(2).as_primitive::<Int64Type>().value(0), 3);
    assert!(batch.column(3).is_null(0));
}

#[test]
fn structural_bugs_are_internal_errors() {
    let table = schema(vec![col("id", ColumnType::Int64)]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    let err = b.append(&event(&table, 0, vec![])).unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    let mut ev = event(&table, 0, vec![Value::Int(1)]);
    ev.unlogged = vec![1];
    assert_eq!(b.append(&ev).unwrap_err().code(), Code::Internal);
    let other = schema(vec![col("x", ColumnType::Int64)]);
    let err = b
        .append(&event(&other, 0, vec![Value::Int(1)]))
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    let err = b
        .append(&event(&table, u64::MAX, vec![Value::Int(1)]))
        .unwrap_err();
    assert_eq!(err.code(), Code::ValueUnrepresentable);
    assert!(err.message().contains("column __seq"), "{err}");
    assert_eq!(b.len(), 0);
}

#[test]
fn a_checksum_mismatch_fails_finish() {
    let table = schema(vec![col("id", ColumnType::Int64)]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    b.append(&event(&table, 0, vec![Value::Int(1)])).unwrap();
    // Simulate a builder that stored something other than what was appended.
    b.hasher.int(99);
    let err = b.finish_verified().unwrap_err();
    assert_eq!(err.code(), Code::OutputChecksum);
    assert!(err.message().contains("00000001/000000A0"), "{err}");
    // A builder that failed its check is not reused.
    assert_eq!(
        b.append(&event(&table, 1, vec![Value::Int(1)]))
            .unwrap_err()
            .code(),
        Code::Internal
    );
}

#[test]
fn a_hand_corrupted_batch_hashes_differently() {
    let table = schema(vec![
        col("id", ColumnType::Int64),
        col("s", ColumnType::Utf8),
    ]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    for i in 0..3 {
        b.append(&event(
            &table,
            i,
            vec![Value::Int(i as i64), Value::Text("v".into())],
        ))
        .unwrap();
    }
    let checked = b.finish_verified().unwrap();
    let mut columns = checked.batch.columns().to_vec();
    columns[5] = Arc::new(Int64Array::from(vec![0, 1, 5]));
    let corrupted = RecordBatch::try_new(checked.batch.schema(), columns).unwrap();
    assert_eq!(hash_batch(&checked.batch).unwrap(), checked.check.expected);
    assert_ne!(hash_batch(&corrupted).unwrap(), checked.check.expected);
}

#[test]
fn the_checksum_runs_on_across_batches() {
    let table = schema(vec![col("id", ColumnType::Int64)]);
    let mut b = RowBatchBuilder::new(table.clone()).unwrap();
    b.append(&event(&table, 0, vec![Value::Int(1)])).unwrap();
    let first = b.finish_verified().unwrap();
    b.append(&event(&table, 1, vec![Value::Int(2)])).unwrap();
    let second = b.finish_verified().unwrap();
    assert_eq!(first.check.expected, hash_batch(&first.batch).unwrap());
    assert_eq!(
        second.check.expected,
        hash_batch_from(first.check.expected, &second.batch).unwrap()
    );
    let empty = b.finish_verified().unwrap();
    assert_eq!(empty.batch.num_rows(), 0);
    assert_eq!(empty.check.expected, second.check.expected);
}

proptest! {
    #[test]
    fn cell_hash_equals_batch_hash(
        rows in proptest::collection::vec(
            (proptest::option::of(any::<i64>()), proptest::option::of(".{0,12}"), any::<bool>()),
            0..64,
        )
    ) {
        let table = schema(vec![col("n", ColumnType::Int64), col("s", ColumnType::Utf8)]);
        let mut b = RowBatchBuilder::new(table.clone()).unwrap();
        let mut cells = CellHasher::new();
        for (i, (n, s, unlog)) in rows.iter().enumerate() {
            let n = n.map_or(Value::Null, Value::Int);
            let s = s.clone().map_or(Value::Null, Value::Text);
            let mut ev = event(&table, i as u64, vec![n.clone(), s.clone()]);
            if *unlog {
                ev.unlogged = vec![1];
            }
            b.append(&ev).unwrap();
            // An independent feed of the same row, as the part should hold it.
            cells.text("insert");
            cells.text("00000001/000000A0");
            cells.int(i as i64);
            cells.timestamp(Some(1_700_000_000_000_000));
            cells.text_list(unlog.then(|| vec!["s"].into_iter()));
            cells.value(&ColumnType::Int64, &n);
            if *unlog { cells.null() } else { cells.value(&ColumnType::Utf8, &s) }
            cells.end_row();
        }
        let checked = b.finish_verified().unwrap();
        prop_assert_eq!(checked.check.expected, cells.sum());
        prop_assert_eq!(hash_batch(&checked.batch).unwrap(), cells.sum());
    }
}
