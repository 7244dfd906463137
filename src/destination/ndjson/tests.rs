use std::sync::Arc;

use serde_json::{Value as Json, json};

use crate::change::{ChangeEvent, Column, ColumnType, Op, TableSchema, Value};
use crate::destination::stdout::encode_part;
use crate::error::Code;
use crate::parts::{PartSettings, PartWriter};

fn col(name: &str, ty: ColumnType) -> Column {
    Column {
        name: name.into(),
        ty,
        nullable: true,
        key: name == "id",
        source_type: format!("src_{name}"),
        field_metadata: Default::default(),
    }
}

fn table() -> Arc<TableSchema> {
    let dec = |precision, scale| ColumnType::Decimal { precision, scale };
    Arc::new(TableSchema {
        name: "public.every".into(),
        columns: vec![
            col("id", ColumnType::Int64),
            col("flag", ColumnType::Boolean),
            col("small", ColumnType::Int16),
            col("big", ColumnType::Int64),
            col("ubig", ColumnType::UInt64),
            col("f32", ColumnType::Float32),
            col("f64", ColumnType::Float64),
            col("price", dec(12, 2)),
            col("wide", dec(50, 10)),
            col("name", ColumnType::Utf8),
            col("doc", ColumnType::Json),
            col("uid", ColumnType::Uuid),
            col("blob", ColumnType::Binary),
            col("day", ColumnType::Date),
            col("at_time", ColumnType::Time),
            col("naive", ColumnType::Timestamp),
            col("instant", ColumnType::TimestampTz),
            col("tags", ColumnType::List(Box::new(ColumnType::Utf8))),
            col("docs", ColumnType::List(Box::new(ColumnType::Json))),
            col("op", ColumnType::Utf8),
        ],
    })
}

fn event(table: &Arc<TableSchema>, op: Op, seq: u64, image: Vec<Value>) -> ChangeEvent {
    ChangeEvent {
        table: table.clone(),
        op,
        pos: Arc::from("00000001/000000A0"),
        seq,
        commit_ts: Some(1_700_000_000_123_456),
        image,
        unlogged: vec![],
    }
}

/// Writes `events` into a real part (Parquet, as the drain does) and emits it as NDJSON.
fn lines(events: &[ChangeEvent]) -> Vec<Json> {
    let dir = tempfile::tempdir().unwrap();
    let settings = PartSettings {
        row_group_rows: 2,
        ..PartSettings::new(dir.path())
    };
    let mut writer = PartWriter::new(
        &events[0].table.name,
        "public.every/cdc-r-".into(),
        1,
        settings,
    )
    .unwrap();
    for e in events {
        assert!(writer.append(e).unwrap().is_none());
    }
    let part = writer.finish().unwrap().unwrap();
    let mut out = Vec::new();
    let rows = encode_part(&part.local_path, |buf| {
        out.extend_from_slice(buf);
        Ok(())
    })
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with('\n'));
    let parsed: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(parsed.len() as u64, rows);
    parsed
}

fn full_row() -> Vec<Value> {
    let wide = {
        // 12345678901234567890123456789012345678901.2345678901 unscaled, little-endian.
        let unscaled: i128 = 123_456_789_012_345_678_901_234_567_890_123_456_789;
        let mut bytes = [0u8; 32];
        bytes[..16].copy_from_slice(&unscaled.to_le_bytes());
        Value::Decimal256(Box::new(bytes))
    };
    vec![
        Value::Int(1),
        Value::Boolean(true),
        Value::Int(-7),
        Value::Int(9_007_199_254_740_993),
        Value::UInt(u64::MAX),
        Value::Float(f64::from(0.1f32)),
        Value::Float(f64::NAN),
        Value::Decimal(-12_345),
        wide,
        Value::Text("line\none \"quoted\" ü".into()),
        Value::Text("{ \"a\" : [1, 2.50, 12345678901234567890],\n \"b\": \"x y\" }".into()),
        Value::Text("0e5a4b1c-0000-4000-8000-000000000001".into()),
        Value::Bytes(vec![0, 1, 2, 253, 254, 255, 10]),
        Value::Date(19_723),
        Value::Time(45_296_789_012),
        Value::Timestamp(1_700_000_000_000_001),
        Value::Timestamp(-1),
        Value::List(vec![Value::Text("a".into()), Value::Null]),
        Value::List(vec![Value::Text("{\"k\": true}".into())]),
        Value::Text("a column named op".into()),
    ]
}

#[test]
fn every_type_maps_to_its_documented_json() {
    let t = table();
    let got = lines(&[event(&t, Op::Insert, 0, full_row())]);
    let line = &got[0];
    assert_eq!(line["op"], "insert");
    assert_eq!(line["pos"], "00000001/000000A0");
    assert_eq!(line["seq"], 0);
    assert_eq!(line["ts"], "2023-11-14T22:13:20.123456Z");
    assert_eq!(line["table"], "public.every");
    assert_eq!(line["unlogged"], Json::Null);
    let row = &line["row"];
    assert_eq!(row["id"], 1);
    assert_eq!(row["flag"], true);
    assert_eq!(row["small"], -7);
    assert_eq!(row["big"], "9007199254740993", "beyond 2^53: a string");
    assert_eq!(row["ubig"], "18446744073709551615");
    assert_eq!(row["f32"], json!(0.1), "shortest f32 form, not 0.100000001");
    assert_eq!(row["f64"], "NaN");
    assert_eq!(row["price"], "-123.45");
    assert_eq!(row["wide"], "12345678901234567890123456789.0123456789");
    assert_eq!(row["name"], "line\none \"quoted\" ü");
    assert_eq!(
        row["doc"],
        json!({"a": [1, 2.5, 12345678901234567890u64], "b": "x y"})
    );
    assert_eq!(row["uid"], "0e5a4b1c-0000-4000-8000-000000000001");
    assert_eq!(row["blob"], "AAEC/f7/Cg==");
    assert_eq!(row["day"], "2024-01-01");
    assert_eq!(row["at_time"], "12:34:56.789012");
    assert_eq!(row["naive"], "2023-11-14T22:13:20.000001", "no offset");
    assert_eq!(row["instant"], "1969-12-31T23:59:59.999999Z");
    assert_eq!(row["tags"], json!(["a", null]));
    assert_eq!(row["docs"], json!([{"k": true}]));
    assert_eq!(
        row["op"], "a column named op",
        "columns never clash with metadata"
    );
    let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 7, "{keys:?}");
}

#[test]
fn json_text_keeps_its_numbers_and_loses_only_whitespace() {
    let mut out = Vec::new();
    super::embedded_json(
        &mut out,
        "{ \"n\" : 1.50 ,\n\t\"s\": \"a \\\" b\\\\\", \"big\": 123456789012345678901234567890 }",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"n":1.50,"s":"a \" b\\","big":123456789012345678901234567890}"#
    );
    let mut out = Vec::new();
    assert!(super::embedded_json(&mut out, "{not json").is_err());
}

#[test]
fn integers_switch_to_strings_exactly_past_two_to_the_53() {
    let t = Arc::new(TableSchema {
        name: "public.n".into(),
        columns: vec![col("id", ColumnType::Int64)],
    });
    let edge = super::MAX_EXACT_INTEGER as i64;
    let values = [edge, edge + 1, -edge, -edge - 1, i64::MIN, 0];
    let events: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(i, v)| event(&t, Op::Insert, i as u64, vec![Value::Int(*v)]))
        .collect();
    let got: Vec<Json> = lines(&events)
        .into_iter()
        .map(|l| l["row"]["id"].clone())
        .collect();
    assert_eq!(
        got,
        vec![
            json!(9007199254740991i64),
            json!("9007199254740992"),
            json!(-9007199254740991i64),
            json!("-9007199254740992"),
            json!("-9223372036854775808"),
            json!(0),
        ]
    );
}

#[test]
fn floats_nulls_deletes_and_unlogged_columns() {
    let t = Arc::new(TableSchema {
        name: "public.f".into(),
        columns: vec![col("id", ColumnType::Int64), col("v", ColumnType::Float64)],
    });
    let mut unlogged = event(&t, Op::Update, 1, vec![Value::Int(2), Value::Null]);
    unlogged.unlogged = vec![1];
    unlogged.commit_ts = None;
    let got = lines(&[
        event(
            &t,
            Op::Insert,
            0,
            vec![Value::Int(1), Value::Float(f64::INFINITY)],
        ),
        unlogged,
        event(
            &t,
            Op::Delete,
            2,
            vec![Value::Int(3), Value::Float(f64::NEG_INFINITY)],
        ),
        event(
            &t,
            Op::Insert,
            3,
            vec![Value::Int(4), Value::Float(-2.5e-300)],
        ),
    ]);
    assert_eq!(got[0]["row"]["v"], "Infinity");
    assert_eq!(got[1]["op"], "update");
    assert_eq!(got[1]["unlogged"], json!(["v"]));
    assert_eq!(got[1]["ts"], Json::Null);
    assert_eq!(got[1]["row"]["v"], Json::Null);
    assert_eq!(got[2]["op"], "delete");
    assert_eq!(got[2]["row"]["v"], "-Infinity");
    assert_eq!(got[3]["row"]["v"], json!(-2.5e-300));
    assert_eq!(
        got.iter()
            .map(|l| l["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
}

#[test]
fn a_json_column_that_holds_no_json_is_refused_naming_the_cell() {
    let t = Arc::new(TableSchema {
        name: "public.j".into(),
        columns: vec![col("doc", ColumnType::Json)],
    });
    let mut builder = crate::parts::RowBatchBuilder::new(t.clone()).unwrap();
    builder
        .append(&event(&t, Op::Insert, 0, vec![Value::Text("{oops".into())]))
        .unwrap();
    let batch = builder.finish().unwrap().batch;
    let mut out = Vec::new();
    let e = super::write_batch("public.j", &batch, &mut out).unwrap_err();
    assert_eq!(e.code(), Code::ValueUnrepresentable);
    assert!(
        e.message()
            .contains("public.j, column doc, at 00000001/000000A0"),
        "{e}"
    );
}

#[test]
fn infinite_dates_and_timestamps_are_words() {
    let t = Arc::new(TableSchema {
        name: "public.inf".into(),
        columns: vec![
            col("d", ColumnType::Date),
            col("ts", ColumnType::TimestampTz),
            col("naive", ColumnType::Timestamp),
        ],
    });
    let got = lines(&[
        event(
            &t,
            Op::Insert,
            0,
            vec![
                Value::Date(i32::MAX),
                Value::Timestamp(i64::MAX),
                Value::Timestamp(-i64::MAX),
            ],
        ),
        event(
            &t,
            Op::Insert,
            1,
            vec![
                Value::Date(-i32::MAX),
                Value::Timestamp(-i64::MAX),
                Value::Timestamp(0),
            ],
        ),
    ]);
    assert_eq!(
        got[0]["row"],
        json!({"d": "infinity", "ts": "infinity", "naive": "-infinity"})
    );
    assert_eq!(
        got[1]["row"],
        json!({"d": "-infinity", "ts": "-infinity", "naive": "1970-01-01T00:00:00.000000"})
    );
}
