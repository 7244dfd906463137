use super::*;
use crate::change::{Column, ColumnType, Op, Value};
use crate::parts::arrow_schema::{SOURCE_TYPE_KEY, UTC};
use crate::parts::checksum::hash_batch_from;
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_buffer::i256;
use arrow_schema::{DataType, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{LogicalType, TimeUnit as ParquetTimeUnit};
use parquet::errors::ParquetError;

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

fn key(name: &str, ty: ColumnType) -> Column {
    Column {
        nullable: false,
        key: true,
        ..col(name, ty)
    }
}

fn table(columns: Vec<Column>) -> Arc<TableSchema> {
    Arc::new(TableSchema {
        name: "public.orders".into(),
        columns,
    })
}

fn settings(dir: &Path) -> PartSettings {
    PartSettings {
        rollover_rows: 1_000_000,
        rollover_bytes: 1 << 40,
        row_group_rows: 3,
        row_group_bytes: 1 << 30,
        zstd_level: 3,
        spill_dir: dir.to_owned(),
        arrow_extensions: true,
    }
}

fn writer(dir: &Path, settings: PartSettings) -> PartWriter {
    PartWriter::new(
        "public.orders",
        "public.orders/cdc-r1-".into(),
        1,
        PartSettings {
            spill_dir: dir.to_owned(),
            ..settings
        },
    )
    .unwrap()
}

fn pos(n: u64) -> Arc<str> {
    Arc::from(format!("00000000/{n:08X}"))
}

fn ev(table: &Arc<TableSchema>, n: u64, image: Vec<Value>) -> ChangeEvent {
    ChangeEvent {
        table: table.clone(),
        op: Op::Insert,
        pos: pos(n),
        seq: n % 3,
        commit_ts: Some(1_700_000_000_000_000 + n as i64),
        image,
        unlogged: vec![],
    }
}

struct ReadBack {
    builder_schema: arrow_schema::SchemaRef,
    metadata: Arc<parquet::file::metadata::ParquetMetaData>,
    batches: Vec<RecordBatch>,
}

fn read(path: &Path, batch_size: usize) -> ReadBack {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let builder_schema = builder.schema().clone();
    let metadata = builder.metadata().clone();
    let batches = builder
        .with_batch_size(batch_size)
        .build()
        .unwrap()
        .collect::<std::result::Result<Vec<_>, _>>()
        .unwrap();
    ReadBack {
        builder_schema,
        metadata,
        batches,
    }
}

/// Reads one cell back into the `Value` a source would have produced for it.
fn cell(array: &dyn Array, i: usize, ty: &ColumnType) -> Value {
    if array.is_null(i) {
        return Value::Null;
    }
    match ty {
        ColumnType::Boolean => Value::Boolean(array.as_boolean().value(i)),
        ColumnType::Int8 => Value::Int(array.as_primitive::<Int8Type>().value(i).into()),
        ColumnType::Int16 => Value::Int(array.as_primitive::<Int16Type>().value(i).into()),
        ColumnType::Int32 => Value::Int(array.as_primitive::<Int32Type>().value(i).into()),
        ColumnType::Int64 => Value::Int(array.as_primitive::<Int64Type>().value(i)),
        ColumnType::UInt8 => Value::UInt(array.as_primitive::<UInt8Type>().value(i).into()),
        ColumnType::UInt16 => Value::UInt(array.as_primitive::<UInt16Type>().value(i).into()),
        ColumnType::UInt32 => Value::UInt(array.as_primitive::<UInt32Type>().value(i).into()),
        ColumnType::UInt64 => Value::UInt(array.as_primitive::<UInt64Type>().value(i)),
        ColumnType::Float32 => Value::Float(array.as_primitive::<Float32Type>().value(i).into()),
        ColumnType::Float64 => Value::Float(array.as_primitive::<Float64Type>().value(i)),
        ColumnType::Decimal { precision, .. } if *precision <= 38 => {
            Value::Decimal(array.as_primitive::<Decimal128Type>().value(i))
        }
        ColumnType::Decimal { .. } => Value::Decimal256(Box::new(
            array
                .as_primitive::<Decimal256Type>()
                .value(i)
                .to_le_bytes(),
        )),
        ColumnType::Utf8 | ColumnType::Json | ColumnType::Uuid => {
            Value::Text(array.as_string::<i32>().value(i).to_owned())
        }
        ColumnType::Binary => Value::Bytes(array.as_binary::<i32>().value(i).to_vec()),
        ColumnType::Date => Value::Date(array.as_primitive::<Date32Type>().value(i)),
        ColumnType::Time => Value::Time(array.as_primitive::<Time64MicrosecondType>().value(i)),
        ColumnType::Timestamp | ColumnType::TimestampTz => {
            Value::Timestamp(array.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        ColumnType::List(item) => {
            let items = array.as_list::<i32>().value(i);
            Value::List((0..items.len()).map(|j| cell(&items, j, item)).collect())
        }
    }
}

/// Equality that treats floats by bit pattern (NaN == NaN, -0.0 != 0.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

/// What a cell reads back as: a 128-bit decimal in a Decimal256 column comes back wide.
fn widened(ty: &ColumnType, value: &Value) -> Value {
    match (ty, value) {
        (ColumnType::Decimal { precision, .. }, Value::Decimal(v)) if *precision > 38 => {
            Value::Decimal256(Box::new(i256::from_i128(*v).to_le_bytes()))
        }
        (ColumnType::List(item), Value::List(items)) => {
            Value::List(items.iter().map(|v| widened(item, v)).collect())
        }
        _ => value.clone(),
    }
}

fn d256(text: &str) -> Value {
    Value::Decimal256(Box::new(i256::from_string(text).unwrap().to_le_bytes()))
}

fn every_type() -> Arc<TableSchema> {
    let dec = |precision, scale| ColumnType::Decimal { precision, scale };
    let list = |t| ColumnType::List(Box::new(t));
    table(vec![
        key("id", ColumnType::Int64),
        col("b", ColumnType::Boolean),
        col("i8", ColumnType::Int8),
        col("i16", ColumnType::Int16),
        col("i32", ColumnType::Int32),
        col("u8", ColumnType::UInt8),
        col("u16", ColumnType::UInt16),
        col("u32", ColumnType::UInt32),
        col("u64", ColumnType::UInt64),
        col("f32", ColumnType::Float32),
        col("f64", ColumnType::Float64),
        col("d12", dec(12, 2)),
        col("d38", dec(38, 10)),
        col("d76", dec(76, 20)),
        col("s", ColumnType::Utf8),
        col("j", ColumnType::Json),
        col("u", ColumnType::Uuid),
        col("bin", ColumnType::Binary),
        col("date", ColumnType::Date),
        col("time", ColumnType::Time),
        col("ts", ColumnType::Timestamp),
        col("tstz", ColumnType::TimestampTz),
        col("li", list(ColumnType::Int32)),
        col("ls", list(ColumnType::Utf8)),
        col("lj", list(ColumnType::Json)),
        col("ld", list(dec(40, 2))),
        col("ll", list(list(ColumnType::Int16))),
    ])
}

fn every_type_rows() -> Vec<Vec<Value>> {
    use Value::*;
    let nines = |n: usize| "9".repeat(n);
    vec![
        vec![
            Int(i64::MIN),
            Boolean(false),
            Int(i8::MIN.into()),
            Int(i16::MIN.into()),
            Int(i32::MIN.into()),
            UInt(0),
            UInt(0),
            UInt(0),
            UInt(0),
            Float(f32::MIN.into()),
            Float(f64::MIN),
            Decimal(-(10i128.pow(12) - 1)),
            Decimal(-(10i128.pow(38) - 1)),
            d256(&format!("-{}", nines(76))),
            Text(String::new()),
            Text("{}".into()),
            Text("00000000-0000-0000-0000-000000000000".into()),
            Bytes(vec![]),
            Date(i32::MIN),
            Time(0),
            Timestamp(i64::MIN),
            Timestamp(-1),
            List(vec![]),
            List(vec![Null, Text(String::new()), Text("ü".into())]),
            List(vec![Text("[1,2]".into()), Null]),
            List(vec![d256(&format!("-{}", nines(40)))]),
            List(vec![List(vec![Int(-1)]), Null, List(vec![])]),
        ],
        vec![
            Int(i64::MAX),
            Boolean(true),
            Int(i8::MAX.into()),
            Int(i16::MAX.into()),
            Int(i32::MAX.into()),
            UInt(u8::MAX.into()),
            UInt(u16::MAX.into()),
            UInt(u32::MAX.into()),
            UInt(u64::MAX),
            Float(f32::MAX.into()),
            Float(f64::MAX),
            Decimal(10i128.pow(12) - 1),
            Decimal(10i128.pow(38) - 1),
            d256(&nines(76)),
            Text("日本語 🦀 \u{0} tab\t\"quote\"".into()),
            Text(r#"{"a":"ü","b":[1,2.5,null],"c":{"d":true}}"#.into()),
            Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
            Bytes(vec![0, 255, 1, 2, 0]),
            Date(i32::MAX),
            Time(86_400_000_000),
            Timestamp(i64::MAX),
            Timestamp(1_700_000_000_123_456),
            List(vec![Int(i32::MIN.into()), Null, Int(i32::MAX.into())]),
            List(vec![Text("x".repeat(1000))]),
            List(vec![Text("null".into())]),
            List(vec![d256(&nines(40)), Null, Decimal(5)]),
            List(vec![List(vec![
                Int(i16::MIN.into()),
                Null,
                Int(i16::MAX.into()),
            ])]),
        ],
        // All NULL but the key.
        std::iter::once(Int(0))
            .chain(std::iter::repeat_n(Null, 26))
            .collect(),
        vec![
            Int(3),
            Boolean(true),
            Int(-1),
            Int(-1),
            Int(-1),
            UInt(1),
            UInt(1),
            UInt(1),
            UInt(1),
            Float(f64::NAN),
            Float(-0.0),
            Decimal(0),
            Decimal(1),
            Decimal(-1),
            Null, // unlogged
            Null, // unlogged
            Null,
            Bytes(vec![7; 3]),
            Date(0),
            Time(1),
            Timestamp(0),
            Timestamp(1),
            Null,
            List(vec![Null]),
            List(vec![]),
            Null,
            List(vec![List(vec![Null])]),
        ],
        vec![
            Int(4),
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Float(f64::INFINITY),
            Float(f64::NEG_INFINITY),
            Null,
            Null,
            Null,
            Text("  ".into()),
            Text("\"unicode \\u00fc\"".into()),
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
        ],
    ]
}

#[test]
fn every_type_round_trips_through_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let schema = every_type();
    let rows = every_type_rows();
    let mut w = PartWriter::new(
        "public.orders",
        "public.orders/cdc-r1-".into(),
        7,
        settings(dir.path()),
    )
    .unwrap();
    let mut events = Vec::new();
    for (n, image) in rows.iter().enumerate() {
        let mut e = ev(&schema, n as u64 + 1, image.clone());
        if n == 3 {
            e.op = Op::Update;
            e.commit_ts = None;
            e.unlogged = vec![14, 15];
        }
        if n == 4 {
            e.op = Op::Delete;
        }
        assert!(w.append(&e).unwrap().is_none());
        events.push(e);
    }
    assert_eq!(w.rows_in_part(), 5);
    let part = w.finish().unwrap().unwrap();
    assert!(w.finish().unwrap().is_none(), "finish twice yields nothing");

    assert_eq!(part.key, "public.orders/cdc-r1-000007.parquet");
    assert_eq!(part.rows, 5);
    assert_eq!(part.bytes, fs::metadata(&part.local_path).unwrap().len());
    assert_eq!(part.first_pos, "00000000/00000001");
    assert_eq!(part.last_pos, "00000000/00000005");
    assert!(part.checksum.starts_with("mix64:") && part.checksum.len() == 22);
    assert_eq!(part.schema, schema);

    let back = read(&part.local_path, 2);

    // The Arrow schema read back (from the embedded Arrow schema and Parquet types).
    let arrow = &back.builder_schema;
    let field = |name: &str| arrow.field_with_name(name).unwrap().clone();
    assert_eq!(
        field("tstz").data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into()))
    );
    assert_eq!(field("__ts").data_type(), field("tstz").data_type());
    assert_eq!(
        field("ts").data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, None)
    );
    assert_eq!(field("d12").data_type(), &DataType::Decimal128(12, 2));
    assert_eq!(field("d38").data_type(), &DataType::Decimal128(38, 10));
    assert_eq!(field("d76").data_type(), &DataType::Decimal256(76, 20));
    assert_eq!(
        field("time").data_type(),
        &DataType::Time64(TimeUnit::Microsecond)
    );
    assert_eq!(field("date").data_type(), &DataType::Date32);
    assert_eq!(field("u64").data_type(), &DataType::UInt64);
    assert_eq!(field("j").extension_type_name(), Some("arrow.json"));
    assert_eq!(field("s").extension_type_name(), None);
    assert_eq!(
        field("j")
            .metadata()
            .get(SOURCE_TYPE_KEY)
            .map(String::as_str),
        Some("src_j")
    );
    assert!(!field("__op").is_nullable() && !field("__seq").is_nullable());
    let written = change_schema_of(&schema);
    assert_eq!(arrow.fields().len(), written.fields().len());
    for (got, want) in arrow.fields().iter().zip(written.fields()) {
        assert_eq!(got, want);
    }

    // Parquet-level types: JSON logical type, UTC-adjusted timestamps, unsigned ints.
    let descr = back.metadata.file_metadata().schema_descr();
    let logical = |path: &str| {
        (0..descr.num_columns())
            .map(|i| descr.column(i))
            .find(|c| c.path().string() == path)
            .unwrap_or_else(|| panic!("no leaf {path}"))
            .logical_type_ref()
            .cloned()
    };
    assert_eq!(logical("j"), Some(LogicalType::Json));
    assert_eq!(logical("lj.list.item"), Some(LogicalType::Json));
    assert_eq!(logical("s"), Some(LogicalType::String));
    assert_eq!(logical("u"), Some(LogicalType::String));
    assert_eq!(
        logical("tstz"),
        Some(LogicalType::timestamp(true, ParquetTimeUnit::MICROS))
    );
    assert_eq!(
        logical("ts"),
        Some(LogicalType::timestamp(false, ParquetTimeUnit::MICROS))
    );
    assert_eq!(logical("u64"), Some(LogicalType::integer(64, false)));
    assert_eq!(logical("d76"), Some(LogicalType::decimal(20, 76)));

    // File-level metadata.
    let file = back.metadata.file_metadata();
    assert_eq!(file.created_by(), Some(created_by().as_str()));
    assert!(created_by().starts_with("sluice "));
    let kv = file.key_value_metadata().unwrap();
    let stored = kv.iter().find(|kv| kv.key == SCHEMA_METADATA_KEY).unwrap();
    let stored: serde_json::Value = serde_json::from_str(stored.value.as_deref().unwrap()).unwrap();
    assert_eq!(stored["table"], "public.orders");
    assert_eq!(stored["columns"][13]["type"], "decimal(76,20)");
    assert_eq!(stored["columns"][0]["key"], true);
    // Two row groups of at most row_group_rows = 3, zstd, with statistics.
    assert_eq!(back.metadata.num_row_groups(), 2);
    for rg in back.metadata.row_groups() {
        assert!(rg.num_rows() <= 3);
        for c in rg.columns() {
            assert!(matches!(c.compression(), Compression::ZSTD(_)), "{c:?}");
        }
        assert!(rg.column(5).statistics().is_some());
    }

    // Cell by cell.
    let mut row = 0;
    for batch in &back.batches {
        for i in 0..batch.num_rows() {
            let e = &events[row];
            assert_eq!(batch.column(0).as_string::<i32>().value(i), e.op.as_str());
            assert_eq!(batch.column(1).as_string::<i32>().value(i), &*e.pos);
            assert_eq!(
                batch.column(2).as_primitive::<Int64Type>().value(i),
                e.seq as i64
            );
            let ts = cell(batch.column(3).as_ref(), i, &ColumnType::TimestampTz);
            assert_eq!(ts, e.commit_ts.map_or(Value::Null, Value::Timestamp));
            let unlogged = cell(
                batch.column(4).as_ref(),
                i,
                &ColumnType::List(Box::new(ColumnType::Utf8)),
            );
            let expected_unlogged = if e.unlogged.is_empty() {
                Value::Null
            } else {
                Value::List(vec![Value::Text("s".into()), Value::Text("j".into())])
            };
            assert_eq!(unlogged, expected_unlogged, "row {row}");
            for (c, column) in schema.columns.iter().enumerate() {
                let got = cell(batch.column(5 + c).as_ref(), i, &column.ty);
                let want = if e.unlogged.contains(&c) {
                    Value::Null
                } else {
                    widened(&column.ty, &e.image[c])
                };
                assert!(
                    same(&got, &want),
                    "row {row} column {}: got {got:?}, want {want:?}",
                    column.name
                );
            }
            row += 1;
        }
    }
    assert_eq!(row, 5);

    // The part checksum is recomputable from the file, whatever the read batch size.
    for batch_size in [1, 2, 5] {
        let back = read(&part.local_path, batch_size);
        let sum = back
            .batches
            .iter()
            .try_fold(crate::parts::checksum::EMPTY_SUM, |sum, b| {
                hash_batch_from(sum, b)
            })
            .unwrap();
        assert_eq!(checksum_text(sum), part.checksum, "batch size {batch_size}");
        crate::parts::checksum::verify_batches(&part.checksum, &back.batches).unwrap();
    }
}

fn change_schema_of(table: &TableSchema) -> arrow_schema::SchemaRef {
    crate::parts::arrow_schema::change_schema(table).unwrap()
}

fn narrow_table() -> Arc<TableSchema> {
    table(vec![
        key("id", ColumnType::Int64),
        col("v", ColumnType::Utf8),
    ])
}

fn row(n: u64) -> Vec<Value> {
    vec![Value::Int(n as i64), Value::Text(format!("value {n}"))]
}

#[test]
fn rolls_over_by_rows_with_increasing_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let t = narrow_table();
    let mut w = writer(
        dir.path(),
        PartSettings {
            rollover_rows: 10,
            ..settings(dir.path())
        },
    );
    let mut parts = Vec::new();
    for n in 0..25 {
        assert!(w.append(&ev(&t, n, row(n))).unwrap().is_none());
        if w.should_roll() {
            parts.push(w.finish().unwrap().unwrap());
        }
    }
    parts.extend(w.finish().unwrap());
    let rows: Vec<_> = parts.iter().map(|p| p.rows).collect();
    assert_eq!(rows, [10, 10, 5]);
    let keys: Vec<_> = parts.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "public.orders/cdc-r1-000001.parquet",
            "public.orders/cdc-r1-000002.parquet",
            "public.orders/cdc-r1-000003.parquet"
        ]
    );
    assert_eq!(parts[1].first_pos, "00000000/0000000A");
    assert_eq!(parts[1].last_pos, "00000000/00000013");
    let paths: std::collections::HashSet<_> = parts.iter().map(|p| &p.local_path).collect();
    assert_eq!(paths.len(), 3, "spill files are unique");
    for p in &parts {
        let back = read(&p.local_path, 1024);
        let n: usize = back.batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(n as u64, p.rows);
    }
}

#[test]
fn rolls_over_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let t = narrow_table();
    let mut w = writer(
        dir.path(),
        PartSettings {
            rollover_bytes: 64 * 1024,
            row_group_rows: 16,
            ..settings(dir.path())
        },
    );
    let mut parts = Vec::new();
    for n in 0..400u64 {
        // Incompressible-ish text, ~1 KiB a row.
        let text: String = (0..128)
            .map(|k| {
                format!(
                    "{:08x}",
                    (n * 131 + k).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32
                )
            })
            .collect::<String>()[..1000]
            .to_owned();
        w.append(&ev(&t, n, vec![Value::Int(n as i64), Value::Text(text)]))
            .unwrap();
        assert!(w.bytes_in_part() > 0);
        if w.should_roll() {
            assert!(w.rows_in_part() < 400);
            parts.push(w.finish().unwrap().unwrap());
        }
    }
    parts.extend(w.finish().unwrap());
    assert!(parts.len() >= 4, "{} parts", parts.len());
    assert_eq!(parts.iter().map(|p| p.rows).sum::<u64>(), 400);
    for p in &parts[..parts.len() - 1] {
        // Rolled near the threshold: the estimate is an upper bound of the file size.
        assert!(p.bytes <= 64 * 1024 + 32 * 1024, "{} bytes", p.bytes);
        assert!(p.bytes >= 16 * 1024, "{} bytes", p.bytes);
    }
}

#[test]
fn a_schema_change_finishes_the_part_and_starts_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = narrow_table();
    let mut w = writer(dir.path(), settings(dir.path()));
    for n in 0..5 {
        assert!(w.append(&ev(&v1, n, row(n))).unwrap().is_none());
    }
    // Same schema in another Arc: no roll.
    let copy = Arc::new((*v1).clone());
    assert!(w.append(&ev(&copy, 5, row(5))).unwrap().is_none());

    // A column added.
    let mut columns = v1.columns.clone();
    columns.push(col("added", ColumnType::Boolean));
    let v2 = table(columns);
    let img = vec![Value::Int(6), Value::Text("x".into()), Value::Boolean(true)];
    let first = w.append(&ev(&v2, 6, img)).unwrap().unwrap();
    assert_eq!(first.rows, 6);
    assert_eq!(first.schema, v1);
    assert_eq!(first.last_pos, "00000000/00000005");
    assert_eq!(w.rows_in_part(), 1);
    assert_eq!(w.schema(), Some(&v2));

    // Columns reordered.
    let v3 = table(vec![
        v2.columns[2].clone(),
        v2.columns[0].clone(),
        v2.columns[1].clone(),
    ]);
    let img = vec![Value::Boolean(false), Value::Int(7), Value::Null];
    let second = w.append(&ev(&v3, 7, img)).unwrap().unwrap();
    assert_eq!(second.schema, v2);
    assert_eq!(second.rows, 1);

    // A column dropped, and only a nullability change: both roll.
    let v4 = table(vec![v3.columns[1].clone()]);
    let third = w.append(&ev(&v4, 8, vec![Value::Int(8)])).unwrap().unwrap();
    assert_eq!(third.schema, v3);
    let mut id = v4.columns[0].clone();
    id.nullable = true;
    let v5 = table(vec![id]);
    let fourth = w.append(&ev(&v5, 9, vec![Value::Int(9)])).unwrap().unwrap();
    assert_eq!(fourth.schema, v4);
    let last = w.finish().unwrap().unwrap();
    assert_eq!(last.schema, v5);

    let keys: Vec<_> = [&first, &second, &third, &fourth, &last]
        .iter()
        .map(|p| p.key.rsplit('-').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        keys,
        [
            "000001.parquet",
            "000002.parquet",
            "000003.parquet",
            "000004.parquet",
            "000005.parquet"
        ]
    );

    let back = read(&second.local_path, 1024);
    let names: Vec<_> = back
        .builder_schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names[5..], ["id", "v", "added"]);
    let back = read(&third.local_path, 1024);
    let names: Vec<_> = back
        .builder_schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names[5..], ["added", "id", "v"]);
}

#[test]
fn a_widened_type_finishes_the_part_and_the_next_carries_the_wider_type() {
    let dir = tempfile::tempdir().unwrap();
    let mut narrow = narrow_table().columns.clone();
    narrow[0].ty = ColumnType::Int32;
    narrow[0].source_type = "integer".into();
    let v1 = table(narrow);
    let mut w = writer(dir.path(), settings(dir.path()));
    w.append(&ev(&v1, 0, vec![Value::Int(1), Value::Null]))
        .unwrap();
    let mut wide = v1.columns.clone();
    wide[0].ty = ColumnType::Int64;
    wide[0].source_type = "bigint".into();
    let v2 = table(wide);
    let first = w
        .append(&ev(&v2, 1, vec![Value::Int(5_000_000_000), Value::Null]))
        .unwrap()
        .expect("the widening closes the first part");
    assert_eq!((first.rows, &first.schema), (1, &v1));
    let second = w.finish().unwrap().unwrap();
    assert_eq!((second.rows, &second.schema), (1, &v2));
}

#[test]
fn a_type_change_is_refused_and_keeps_the_open_part() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = narrow_table();
    let mut w = writer(dir.path(), settings(dir.path()));
    w.append(&ev(&v1, 0, row(0))).unwrap();
    let mut changed = v1.columns.clone();
    changed[0].ty = ColumnType::Int32;
    changed[0].source_type = "integer".into();
    changed.push(col("extra", ColumnType::Utf8));
    let v2 = table(changed);
    let err = w
        .append(&ev(&v2, 1, vec![Value::Int(1), Value::Null, Value::Null]))
        .unwrap_err();
    assert_eq!(err.code(), Code::SourceSchemaChange);
    let text = err.message();
    assert!(text.contains("table public.orders"), "{text}");
    assert!(text.contains("column id"), "{text}");
    assert!(
        text.contains("from int64 (src_id) to int32 (integer)"),
        "{text}"
    );
    assert!(err.hint_text().unwrap().contains("e-baseline"), "{err:?}");
    assert_eq!(w.rows_in_part(), 1);
    let part = w.finish().unwrap().unwrap();
    assert_eq!(part.rows, 1);
    assert_eq!(part.schema, v1);
}

#[test]
fn unrepresentable_values_fail_naming_the_column_and_keep_the_part() {
    let dir = tempfile::tempdir().unwrap();
    let t = table(vec![
        key("id", ColumnType::Int64),
        col("small", ColumnType::Int16),
    ]);
    let mut w = writer(dir.path(), settings(dir.path()));
    w.append(&ev(&t, 0, vec![Value::Int(0), Value::Int(1)]))
        .unwrap();
    let err = w
        .append(&ev(&t, 1, vec![Value::Int(1), Value::Int(70_000)]))
        .unwrap_err();
    assert_eq!(err.code(), Code::ValueUnrepresentable);
    assert!(err.message().contains("column small"), "{err}");
    assert!(err.message().contains("__pos 00000000/00000001"), "{err}");
    // The same failure as the first event of a new schema leaves the old part open.
    let mut wide = t.columns.clone();
    wide.push(col("more", ColumnType::Utf8));
    let t2 = table(wide);
    let err = w
        .append(&ev(
            &t2,
            2,
            vec![Value::Int(2), Value::Int(70_000), Value::Null],
        ))
        .unwrap_err();
    assert_eq!(err.code(), Code::ValueUnrepresentable);
    assert_eq!(w.rows_in_part(), 1);
    assert_eq!(w.schema(), Some(&t));
    let part = w.finish().unwrap().unwrap();
    assert_eq!(part.rows, 1);
    assert!(part.key.ends_with("000001.parquet"));
    let spills = fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(spills, 1, "the abandoned next part left no spill file");
}

#[test]
fn large_transactions_are_flushed_in_row_groups_not_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let t = narrow_table();
    let mut w = writer(
        dir.path(),
        PartSettings {
            row_group_rows: 8192,
            ..settings(dir.path())
        },
    );
    for n in 0..200_000u64 {
        w.append(&ev(&t, n, row(n))).unwrap();
        let open = w.open.as_ref().unwrap();
        assert!(
            open.builder.len() < 8192,
            "the in-memory batch never exceeds a row group"
        );
    }
    let part = w.finish().unwrap().unwrap();
    assert_eq!(part.rows, 200_000);
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(File::open(&part.local_path).unwrap()).unwrap();
    let groups = builder.metadata().num_row_groups();
    assert!(groups >= 24, "{groups} row groups");
    assert!(
        builder
            .metadata()
            .row_groups()
            .iter()
            .all(|rg| rg.num_rows() <= 8192)
    );
}

#[test]
fn wide_rows_flush_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let t = narrow_table();
    let mut w = writer(
        dir.path(),
        PartSettings {
            row_group_rows: 1_000_000,
            row_group_bytes: 100 * 1024,
            ..settings(dir.path())
        },
    );
    let big = "x".repeat(10 * 1024);
    for n in 0..100u64 {
        w.append(&ev(
            &t,
            n,
            vec![Value::Int(n as i64), Value::Text(big.clone())],
        ))
        .unwrap();
        let open = w.open.as_ref().unwrap();
        assert!(open.builder.approx_bytes() < 100 * 1024);
    }
    let part = w.finish().unwrap().unwrap();
    let back = read(&part.local_path, 1024);
    assert!(
        back.metadata.num_row_groups() >= 9,
        "{}",
        back.metadata.num_row_groups()
    );
}

#[test]
fn spill_files_belong_to_the_caller_once_finished() {
    let dir = tempfile::tempdir().unwrap();
    let t = narrow_table();
    let mut w = writer(dir.path(), settings(dir.path()));
    w.append(&ev(&t, 0, row(0))).unwrap();
    let part = w.finish().unwrap().unwrap();
    let name = part
        .local_path
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        name.starts_with(&format!("sluice-{}-", std::process::id())),
        "{name}"
    );
    let path = part.local_path.clone();
    drop(part);
    assert!(path.exists(), "dropping a FinishedPart keeps its file");

    w.append(&ev(&t, 1, row(1))).unwrap();
    let second = w.finish().unwrap().unwrap();
    let second_path = second.local_path.clone();
    second.discard().unwrap();
    assert!(!second_path.exists());

    // An unfinished part is removed with its writer.
    w.append(&ev(&t, 2, row(2))).unwrap();
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    drop(w);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn the_spill_directory_is_created_and_io_failures_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b");
    let t = narrow_table();
    let mut w = writer(&nested, settings(&nested));
    w.append(&ev(&t, 0, row(0))).unwrap();
    assert!(w.finish().unwrap().is_some());

    // A spill "directory" that is a file.
    let file = dir.path().join("plain");
    fs::write(&file, b"x").unwrap();
    let mut w = writer(&file, settings(&file));
    let err = w.append(&ev(&t, 0, row(0))).unwrap_err();
    assert_eq!(err.code(), Code::OutputWrite);

    let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
    let err = parquet_error(
        ParquetError::from(full),
        "writing".into(),
        Path::new("/tmp"),
    );
    assert_eq!(err.code(), Code::SpillFull);
    assert!(err.hint_text().unwrap().contains("output.spill_dir"));
    assert!(err.hint_text().unwrap().contains("ephemeral storage"));
    let err = io_error(
        std::io::Error::from(std::io::ErrorKind::StorageFull),
        "fsync".into(),
        Path::new("/tmp"),
    );
    assert_eq!(err.code(), Code::SpillFull);
    let err = io_error(
        std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        "open".into(),
        Path::new("/tmp"),
    );
    // Not writable stays so: a refusal naming the setting, not a retry.
    assert_eq!(err.code(), Code::SpillDenied);
    assert!(err.hint_text().unwrap().contains("output.spill_dir"));
    let read_only = std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem);
    let err = parquet_error(
        ParquetError::External(Box::new(read_only)),
        "writing".into(),
        Path::new("/tmp"),
    );
    assert_eq!(err.code(), Code::SpillDenied);
}

#[test]
fn unusable_settings_are_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        PartSettings {
            zstd_level: 99,
            ..settings(dir.path())
        },
        PartSettings {
            row_group_rows: 0,
            ..settings(dir.path())
        },
    ] {
        let err = PartWriter::new("t", "t/cdc-r-".into(), 1, bad).unwrap_err();
        assert_eq!(err.code(), Code::ConfigInvalid);
    }
    let t = narrow_table();
    let mut w = writer(dir.path(), settings(dir.path()));
    let other = Arc::new(TableSchema {
        name: "public.other".into(),
        columns: t.columns.clone(),
    });
    assert_eq!(
        w.append(&ev(&other, 0, row(0))).unwrap_err().code(),
        Code::Internal
    );
    assert!(!w.should_roll() && w.finish().unwrap().is_none());
}

#[test]
fn manifest_entries_mirror_the_part() {
    let dir = tempfile::tempdir().unwrap();
    let t = narrow_table();
    let mut w = writer(dir.path(), settings(dir.path()));
    w.append(&ev(&t, 0, row(0))).unwrap();
    let part = w.finish().unwrap().unwrap();
    let entry = part.manifest_entry();
    assert_eq!(
        (
            entry.key.as_str(),
            entry.rows,
            entry.bytes,
            entry.checksum.as_str()
        ),
        (
            part.key.as_str(),
            part.rows,
            part.bytes,
            part.checksum.as_str()
        )
    );
}

#[test]
fn leftover_spill_files_are_skipped_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let next = crate::spill::files::next_number(crate::spill::files::SpillKind::Part { table: "" });
    let mut leftovers = Vec::new();
    for n in next..next + 20 {
        let path = dir.path().join(format!(
            "sluice-{}-{n:06}-public.orders.parquet.partial",
            std::process::id()
        ));
        fs::write(&path, b"left by a crashed run").unwrap();
        leftovers.push(path);
    }
    let t = narrow_table();
    let mut w = writer(dir.path(), settings(dir.path()));
    w.append(&ev(&t, 0, row(0))).unwrap();
    let part = w.finish().unwrap().unwrap();
    assert!(!leftovers.contains(&part.local_path));
    for path in &leftovers {
        assert_eq!(fs::read(path).unwrap(), b"left by a crashed run");
    }
    assert_eq!(read(&part.local_path, 16).batches[0].num_rows(), 1);
}

#[test]
fn writers_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<PartWriter>();
    send::<FinishedPart>();
    send::<RowBatchBuilder>();
}

/// Three transactions: two late on 2026-12-03 (UTC), one just after midnight; the dated
/// layout cuts the part at the day boundary (a transaction boundary: its changes share a
/// commit time), the hourly one also between the two hours of the 3rd, and each part
/// lies in its partition's folder with every `__ts` inside that partition.
#[test]
fn dated_layout_cuts_parts_at_the_partition_boundary() {
    const MIDNIGHT_DEC_4: i64 = 1_796_342_400_000_000;
    let transactions = [
        (1u64, MIDNIGHT_DEC_4 - 3_600_000_000 - 1), // 22:59:59.999999
        (2, MIDNIGHT_DEC_4 - 1),                    // 23:59:59.999999
        (3, MIDNIGHT_DEC_4),                        // 00:00:00 on the 4th
    ];
    let layouts = [
        (
            Layout::Dated,
            vec![
                ("public.orders/dt=2026-12-03/cdc-r1-000001.parquet", 6),
                ("public.orders/dt=2026-12-04/cdc-r1-000002.parquet", 3),
            ],
        ),
        (
            Layout::DatedHourly,
            vec![
                ("public.orders/dt=2026-12-03/hr=22/cdc-r1-000001.parquet", 3),
                ("public.orders/dt=2026-12-03/hr=23/cdc-r1-000002.parquet", 3),
                ("public.orders/dt=2026-12-04/hr=00/cdc-r1-000003.parquet", 3),
            ],
        ),
        (
            Layout::Flat,
            vec![("public.orders/cdc-r1-000001.parquet", 9)],
        ),
    ];
    for (layout, expected) in layouts {
        let dir = tempfile::tempdir().unwrap();
        let t = narrow_table();
        let mut w = writer(dir.path(), settings(dir.path())).with_layout(layout);
        let mut parts = Vec::new();
        for (txn, ts) in transactions {
            for seq in 0..3 {
                let mut e = ev(&t, txn * 10 + seq, row(txn * 10 + seq));
                e.pos = pos(txn);
                e.seq = seq;
                e.commit_ts = Some(ts);
                parts.extend(w.append(&e).unwrap());
            }
        }
        parts.extend(w.finish().unwrap());
        let got: Vec<_> = parts.iter().map(|p| (p.key.as_str(), p.rows)).collect();
        assert_eq!(got, expected, "{layout:?}");
        for part in &parts {
            let folder = part.partition.clone();
            assert_eq!(part.manifest_entry().partition, folder);
            assert_eq!(
                folder.is_some(),
                layout != Layout::Flat,
                "{layout:?}: {folder:?}"
            );
            let back = read(&part.local_path, 1024);
            for batch in &back.batches {
                let ts = batch
                    .column_by_name("__ts")
                    .unwrap()
                    .as_primitive::<TimestampMicrosecondType>();
                for i in 0..ts.len() {
                    let row_folder = crate::parts::partition::folder_of(layout, Some(ts.value(i)));
                    assert_eq!(row_folder, folder, "{}", part.key);
                }
            }
        }
    }
}

#[test]
fn without_arrow_extensions_a_json_column_is_plain_text_to_arrow_and_json_to_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let schema = table(vec![
        key("id", ColumnType::Int64),
        col("j", ColumnType::Json),
    ]);
    let mut stored = Vec::new();
    for arrow_extensions in [true, false] {
        let mut w = writer(
            dir.path(),
            PartSettings {
                arrow_extensions,
                ..settings(dir.path())
            },
        );
        let image = vec![Value::Int(1), Value::Text("{\"a\": 1}".into())];
        assert!(w.append(&ev(&schema, 1, image)).unwrap().is_none());
        let part = w.finish().unwrap().unwrap();
        let back = read(&part.local_path, 8);
        let j = back.builder_schema.field_with_name("j").unwrap().clone();
        assert_eq!(j.data_type(), &DataType::Utf8);
        assert_eq!(
            j.metadata().get(SOURCE_TYPE_KEY).map(String::as_str),
            Some("src_j"),
            "the source type stays in the stored schema"
        );
        let descr = back.metadata.file_metadata().schema_descr();
        let leaf = (0..descr.num_columns())
            .map(|i| descr.column(i))
            .find(|c| c.name() == "j")
            .unwrap();
        assert_eq!(
            leaf.logical_type_ref(),
            Some(&parquet::basic::LogicalType::Json),
            "the Parquet column says JSON either way"
        );
        stored.push(j.extension_type_name().map(str::to_owned));
    }
    assert_eq!(stored, [Some("arrow.json".to_owned()), None]);
}

#[test]
fn distinct_values_fall_back_to_plain_and_few_values_keep_their_dictionary() {
    // 20,000 distinct keys (a 160 KB dictionary, over DICTIONARY_PAGE_BYTES) and a text
    // column of three values, in one row group.
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(
        dir.path(),
        PartSettings {
            row_group_rows: 65_536,
            ..settings(dir.path())
        },
    );
    let schema = narrow_table();
    for n in 0..20_000u64 {
        let status = ["active", "pending", "closed"][(n % 3) as usize];
        let image = vec![Value::Int(n as i64), Value::Text(status.into())];
        assert!(w.append(&ev(&schema, n, image)).unwrap().is_none());
    }
    let part = w.finish().unwrap().unwrap();
    let options = parquet::file::serialized_reader::ReadOptionsBuilder::new()
        .with_encoding_stats_as_mask(false)
        .build();
    let reader = parquet::file::serialized_reader::SerializedFileReader::new_with_options(
        File::open(&part.local_path).unwrap(),
        options,
    )
    .unwrap();
    let metadata = parquet::file::reader::FileReader::metadata(&reader);
    assert_eq!(metadata.num_row_groups(), 1);
    let group = metadata.row_group(0);
    let plain_data_pages = |name: &str| {
        let column = group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == name)
            .unwrap();
        let stats = column.page_encoding_stats().expect("page encoding stats");
        stats
            .iter()
            .filter(|s| {
                s.page_type != parquet::basic::PageType::DICTIONARY_PAGE
                    && s.encoding == parquet::basic::Encoding::PLAIN
            })
            .map(|s| s.count)
            .sum::<i32>()
    };
    assert!(
        plain_data_pages("id") > 0,
        "the key column kept a 160 KB dictionary"
    );
    assert_eq!(
        plain_data_pages("v"),
        0,
        "the three-value column lost its dictionary"
    );
    assert_eq!(part.rows, 20_000);
}
