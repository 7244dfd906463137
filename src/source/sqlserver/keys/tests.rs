use super::*;
use proptest::prelude::*;
use std::borrow::Cow;
use tiberius::numeric::Numeric;

fn column(
    name: &str,
    type_name: &str,
    max_length: i32,
    precision: i32,
    scale: i32,
) -> CaptureColumn {
    CaptureColumn {
        key_ordinal: Some(1),
        nullable: false,
        collation: matches!(type_name, "char" | "varchar" | "nchar" | "nvarchar")
            .then(|| "SQL_Latin1_General_CP1_CI_AS".to_owned()),
        ..CaptureColumn::sample(name, type_name, max_length, precision, scale)
    }
}

fn key(type_name: &str, max_length: i32, precision: i32, scale: i32) -> KeyColumn {
    key_columns(
        "dbo.t",
        &[column("k", type_name, max_length, precision, scale)],
    )
    .unwrap()
    .remove(0)
}

/// Days from 1970-01-01 of a date.
fn day(y: i32, m: u32, d: u32) -> i64 {
    i64::from(NaiveDate::from_ymd_opt(y, m, d).unwrap().num_days_from_ce()) - DAYS_CE_TO_1970
}

#[test]
fn the_key_is_the_instance_index_in_index_order() {
    let mut cols = vec![
        column("b", "int", 4, 10, 0),
        column("v", "nvarchar", -1, 0, 0),
        column("a", "varchar", 20, 0, 0),
        column("m", "money", 8, 19, 4),
    ];
    cols[0].key_ordinal = Some(2);
    cols[1].key_ordinal = None;
    cols[1].nullable = true;
    cols[2].key_ordinal = Some(1);
    cols[3].key_ordinal = Some(3);
    let keys = key_columns("dbo.t", &cols).unwrap();
    let names: Vec<(&str, usize, &str)> = keys
        .iter()
        .map(|k| (k.name.as_str(), k.index, k.sql_type.as_str()))
        .collect();
    assert_eq!(
        names,
        [("a", 2, "varchar(20)"), ("b", 0, "int"), ("m", 3, "money")]
    );
    assert_eq!(
        keys[2].kind,
        KeyKind::Decimal {
            precision: 19,
            scale: 4
        }
    );
    assert!(keys[1].is_integer() && !keys[0].is_integer());
    cols.iter_mut().for_each(|c| c.key_ordinal = None);
    assert!(key_columns("dbo.t", &cols).unwrap().is_empty());
}

#[test]
fn placeholders_cast_to_the_column_type_and_collation() {
    assert_eq!(
        key("varchar", 20, 0, 0).placeholder(3),
        "CAST(@P3 COLLATE SQL_Latin1_General_CP1_CI_AS AS varchar(20))"
    );
    assert_eq!(
        key("nvarchar", 20, 0, 0).placeholder(1),
        "CAST(@P1 AS nvarchar(10))"
    );
    assert_eq!(
        key("datetime2", 8, 27, 3).placeholder(2),
        "CAST(@P2 AS datetime2(3))"
    );
    assert_eq!(
        key("rowversion", 8, 0, 0).placeholder(1),
        "CAST(@P1 AS binary(8))"
    );
    assert_eq!(
        key("smallmoney", 4, 10, 4).placeholder(1),
        "CAST(@P1 AS smallmoney)"
    );
}

#[test]
fn keys_without_an_exact_bound_are_refused_naming_the_column() {
    let mut nullable = column("k", "int", 4, 10, 0);
    nullable.nullable = true;
    let mut no_collation = column("k", "varchar", 10, 0, 0);
    no_collation.collation = None;
    let mut odd_collation = column("k", "varchar", 10, 0, 0);
    odd_collation.collation = Some("Latin1 AS varchar) --".into());
    for (c, needle) in [
        (nullable, "nullable"),
        (no_collation, "collation"),
        (odd_collation, "collation"),
        (column("k", "varchar", -1, 0, 0), "cannot bound"),
        (column("k", "nvarchar", -1, 0, 0), "cannot bound"),
        (column("k", "varbinary", -1, 0, 0), "cannot bound"),
        (column("k", "text", 16, 0, 0), "cannot bound"),
        (column("k", "xml", -1, 0, 0), "cannot bound"),
        (column("k", "image", 16, 0, 0), "cannot bound"),
        (column("k", "sql_variant", 8016, 0, 0), "cannot bound"),
    ] {
        let err = key_columns("dbo.t", &[c]).unwrap_err();
        assert_eq!(err.code(), Code::SourcePrerequisite);
        let text = err.to_string();
        assert!(text.contains("dbo.t.k") && text.contains(needle), "{text}");
        assert!(err.hint_text().unwrap_or_default().contains("@index_name"));
    }
}

/// Formats, parses back, and binds `value`; returns the text and the parameter.
fn round_trip(k: &KeyColumn, value: Value) -> (String, ColumnData<'static>) {
    let text = k.format(&value).unwrap();
    assert_eq!(k.parse(&text), Ok(value.clone()), "{} {text:?}", k.sql_type);
    let param = k.parameter(&value).unwrap();
    (text, param)
}

/// As [`round_trip`], and the parameter decodes back to the value.
fn exact(k: &KeyColumn, value: Value) -> String {
    let (text, param) = round_trip(k, value.clone());
    assert_eq!(convert(&k.ty, param), Ok(value), "{} {text:?}", k.sql_type);
    text
}

#[test]
fn bound_texts_are_exact_for_every_key_type() {
    let bit = key("bit", 1, 1, 0);
    assert_eq!(exact(&bit, Value::Boolean(true)), "1");
    assert_eq!(exact(&bit, Value::Boolean(false)), "0");

    let tiny = key("tinyint", 1, 3, 0);
    for v in [0u64, 255] {
        let (text, param) = round_trip(&tiny, Value::UInt(v));
        assert_eq!(
            (text, param),
            (v.to_string(), ColumnData::I64(Some(v as i64)))
        );
    }
    for (ty, v) in [
        ("smallint", i64::from(i16::MIN)),
        ("int", i64::from(i32::MAX)),
        ("bigint", i64::MIN),
        ("bigint", i64::MAX),
    ] {
        let (text, param) = round_trip(&key(ty, 8, 19, 0), Value::Int(v));
        assert_eq!((text, param), (v.to_string(), ColumnData::I64(Some(v))));
    }

    let real = key("real", 4, 24, 0);
    for v in [0.1f32, -0.0, f32::MAX, f32::MIN_POSITIVE, 1e-45] {
        let (_, param) = round_trip(&real, Value::Float(f64::from(v)));
        assert_eq!(param, ColumnData::F64(Some(f64::from(v))));
    }
    let float = key("float", 8, 53, 0);
    assert_eq!(exact(&float, Value::Float(0.1)), "1e-1");
    assert_eq!(exact(&float, Value::Float(-2.25e100)), "-2.25e100");
    for v in [f64::MAX, f64::MIN, 5e-324, -0.0, 0.0, 1.0 / 3.0] {
        exact(&float, Value::Float(v));
    }

    let dec = key("decimal", 9, 10, 2);
    for (v, want) in [
        (-1250, "-12.50"),
        (5, "0.05"),
        (0, "0.00"),
        (-5, "-0.05"),
        (9_999_999_999, "99999999.99"),
    ] {
        let (text, param) = round_trip(&dec, Value::Decimal(v));
        assert_eq!(text, want);
        assert_eq!(param, ColumnData::String(Some(Cow::Owned(want.into()))));
    }
    let wide = key("numeric", 17, 38, 38);
    let nines = 10i128.pow(38) - 1;
    assert_eq!(
        round_trip(&wide, Value::Decimal(-nines)).0,
        format!("-0.{}", "9".repeat(38))
    );
    let whole = key("decimal", 17, 38, 0);
    assert_eq!(round_trip(&whole, Value::Decimal(nines)).0, "9".repeat(38));
    let money = key("money", 8, 19, 4);
    assert_eq!(
        round_trip(&money, Value::Decimal(i128::from(i64::MIN))).0,
        "-922337203685477.5808"
    );

    let date = key("date", 3, 10, 0);
    assert_eq!(exact(&date, Value::Date(day(1, 1, 1) as i32)), "0001-01-01");
    assert_eq!(
        exact(&date, Value::Date(day(9999, 12, 31) as i32)),
        "9999-12-31"
    );
    assert_eq!(
        exact(&date, Value::Date(day(2024, 2, 29) as i32)),
        "2024-02-29"
    );
    assert_eq!(exact(&date, Value::Date(-1)), "1969-12-31");

    // A `time` key is its text (the value written), bound as text the server converts.
    let time = key("time", 5, 16, 7);
    for text in ["00:00:00.0000000", "23:59:59.9999999", "12:34:56.1234567"] {
        assert_eq!(exact(&time, Value::Text(text.into())), text);
    }
    let time0 = key("time", 5, 8, 0);
    assert_eq!(exact(&time0, Value::Text("12:34:56".into())), "12:34:56");

    let dt2 = key("datetime2", 8, 27, 7);
    assert_eq!(
        exact(&dt2, Value::Timestamp(day(1, 1, 1) * DAY_US)),
        "0001-01-01 00:00:00.000000"
    );
    assert_eq!(
        exact(&dt2, Value::Timestamp((day(9999, 12, 31) + 1) * DAY_US - 1)),
        "9999-12-31 23:59:59.999999"
    );
    assert_eq!(
        exact(&dt2, Value::Timestamp(-1)),
        "1969-12-31 23:59:59.999999"
    );

    let sdt = key("smalldatetime", 4, 16, 0);
    assert_eq!(
        exact(&sdt, Value::Timestamp(day(1900, 1, 1) * DAY_US)),
        "1900-01-01 00:00:00.000000"
    );
    assert_eq!(
        exact(
            &sdt,
            Value::Timestamp((day(2079, 6, 6) + 1) * DAY_US - 60_000_000)
        ),
        "2079-06-06 23:59:00.000000"
    );

    let dto = key("datetimeoffset", 10, 34, 7);
    assert_eq!(
        exact(&dto, Value::Timestamp(1_709_290_896_000_001)),
        "2024-03-01 11:01:36.000001+00:00"
    );

    for ty in ["nvarchar", "varchar", "nchar", "char"] {
        let k = key(ty, 40, 0, 0);
        for s in [
            "",
            "żółw 🦀",
            "o'brien",
            "trailing  ",
            "nul\u{0}in",
            "]]'--",
        ] {
            assert_eq!(exact(&k, Value::Text(s.into())), s);
        }
    }

    let bin = key("varbinary", 16, 0, 0);
    assert_eq!(exact(&bin, Value::Bytes(vec![])), "0x");
    assert_eq!(exact(&bin, Value::Bytes(vec![0, 255, 16])), "0x00FF10");
    let rv = key("timestamp", 8, 0, 0);
    assert_eq!(
        exact(&rv, Value::Bytes(vec![0, 0, 0, 0, 0, 0, 7, 209])),
        "0x00000000000007D1"
    );

    let guid = key("uniqueidentifier", 16, 0, 0);
    let g = "6f9619ff-8b86-d011-b42d-00c04fc964ff";
    assert_eq!(exact(&guid, Value::Text(g.into())), g);
}

#[test]
fn every_datetime_tick_binds_as_itself() {
    // Every 1/300 s tick of a second, on the first and the last datetime day: the
    // decoder's microseconds go back to the same tick.
    let dt = key("datetime", 8, 23, 3);
    for days_1900 in [-53_690, 0, 45_351, 2_958_463] {
        for ticks in (0..300).chain(25_919_700..25_920_000) {
            let us = datetime_us(days_1900, ticks);
            let (text, param) = round_trip(&dt, Value::Timestamp(us));
            assert_eq!(
                param,
                ColumnData::DateTime(Some(DateTime::new(days_1900, ticks))),
                "{text}"
            );
        }
    }
    assert_eq!(
        dt.format(&Value::Timestamp(datetime_us(0, 1))).unwrap(),
        "1900-01-01 00:00:00.003333"
    );
}

#[test]
fn non_canonical_or_impossible_texts_are_refused() {
    let cases: &[(&str, i32, i32, i32, &[&str])] = &[
        ("bit", 1, 1, 0, &["2", "true", "", " 1"]),
        ("tinyint", 1, 3, 0, &["256", "-1", "+1", "01", "1.0"]),
        ("int", 4, 10, 0, &["2147483648", "1e3", "", "-0"]),
        ("real", 4, 24, 0, &["1e-1", "NaN", "inf", "1e39", "0.5"]),
        ("float", 8, 53, 0, &["0.1", "1e400", "-inf", "1E0"]),
        (
            "decimal",
            9,
            10,
            2,
            &[
                "-0.00",
                "1.5",
                "12345678901.00",
                "1e3",
                ".50",
                "01.00",
                "1.500",
            ],
        ),
        (
            "date",
            3,
            10,
            0,
            &[
                "2024-2-29",
                "2023-02-29",
                "0000-01-01",
                "10000-01-01",
                "2024-02-29 ",
            ],
        ),
        (
            "time",
            5,
            16,
            7,
            &[
                "24:00:00.0000000",
                "12:00:00",
                "12:00:00.123456",
                "12:00:00.12345678",
                "12:60:00.0000000",
                "12:00:00.",
                "1:02:03.0000000",
                "noon",
            ],
        ),
        (
            "datetime2",
            8,
            27,
            7,
            &["2024-01-01T00:00:00.000000", "2024-01-01 00:00:00"],
        ),
        (
            "datetime",
            8,
            23,
            3,
            &["2024-01-01 00:00:00.001000", "1752-12-31 00:00:00.000000"],
        ),
        (
            "smalldatetime",
            4,
            16,
            0,
            &[
                "2024-01-01 00:00:30.000000",
                "1899-12-31 23:59:00.000000",
                "2079-06-07 00:00:00.000000",
            ],
        ),
        (
            "datetimeoffset",
            10,
            34,
            7,
            &[
                "2024-01-01 00:00:00.000000",
                "2024-01-01 00:00:00.000000+01:00",
            ],
        ),
        ("varbinary", 16, 0, 0, &["00FF", "0xF", "0xff", "0xZZ"]),
        (
            "uniqueidentifier",
            16,
            0,
            0,
            &[
                "6F9619FF-8B86-D011-B42D-00C04FC964FF",
                "{6f9619ff-8b86-d011-b42d-00c04fc964ff}",
                "x",
            ],
        ),
    ];
    for (ty, len, p, s, texts) in cases {
        let k = key(ty, *len, *p, *s);
        for text in *texts {
            assert!(k.parse(text).is_err(), "{ty}: {text:?} was accepted");
        }
    }
}

#[test]
fn values_of_the_wrong_shape_have_no_text_or_parameter() {
    let k = key("int", 4, 10, 0);
    assert!(k.format(&Value::Null).is_err());
    assert!(k.parameter(&Value::Null).is_err());
    assert!(k.format(&Value::Text("1".into())).is_err());
    assert!(k.parameter(&Value::UInt(u64::MAX)).is_err());
    let dt = key("datetime", 8, 23, 3);
    assert!(
        dt.parameter(&Value::Timestamp(1)).is_err(),
        "not a whole tick"
    );
    let sdt = key("smalldatetime", 4, 16, 0);
    assert!(
        sdt.parameter(&Value::Timestamp(1_000_000)).is_err(),
        "not a whole minute"
    );
}

#[test]
fn stored_bounds_become_parameters_or_state_errors() {
    let mut cols = vec![
        column("r", "varchar", 4, 0, 0),
        column("id", "int", 4, 10, 0),
    ];
    cols[1].key_ordinal = Some(2);
    let keys = key_columns("dbo.t", &cols).unwrap();
    assert_eq!(
        bound_parameters("dbo.t", &keys, &["eu".into(), "-7".into()]).unwrap(),
        vec![
            ColumnData::String(Some(Cow::Owned("eu".into()))),
            ColumnData::I64(Some(-7))
        ]
    );
    for texts in [vec!["eu".to_owned()], vec!["eu".into(), "x".into()], vec![]] {
        let err = bound_parameters("dbo.t", &keys, &texts).unwrap_err();
        assert_eq!(err.code(), Code::StateCorrupt, "{texts:?}");
        assert!(err.hint_text().unwrap_or_default().contains("--reset"));
    }
    let err = bound_parameters("dbo.t", &keys, &["eu".into(), "x".into()]).unwrap_err();
    assert!(err.to_string().contains("id"), "{err}");
}

#[test]
fn keys_read_from_the_table_become_bound_texts() {
    let mut cols = vec![
        column("m", "money", 8, 19, 4),
        column("t", "time", 5, 16, 7),
    ];
    cols[1].key_ordinal = Some(2);
    let keys = key_columns("dbo.t", &cols).unwrap();
    let cells = |time: u64| {
        vec![
            ColumnData::Numeric(Some(Numeric::new_with_scale(-125, 2))),
            ColumnData::Time(Some(Time::new(time, 7))),
        ]
    };
    // A 100 ns digit is kept: the time is its text at the column's scale.
    assert_eq!(
        key_texts("dbo.t", &keys, cells(1)).unwrap(),
        ["-1.2500", "00:00:00.0000001"]
    );
    let null = vec![ColumnData::Numeric(None), ColumnData::Time(None)];
    assert_eq!(
        key_texts("dbo.t", &keys, null).unwrap_err().code(),
        Code::SourceProtocol
    );
    assert_eq!(
        key_texts("dbo.t", &keys, vec![ColumnData::I32(Some(1))])
            .unwrap_err()
            .code(),
        Code::SourceProtocol
    );
}

proptest! {
    #[test]
    fn datetime2_and_datetimeoffset_texts_round_trip(
        us in (day(1, 1, 1) * DAY_US)..((day(9999, 12, 31) + 1) * DAY_US),
    ) {
        for ty in ["datetime2", "datetimeoffset"] {
            let k = key(ty, 8, 27, 6);
            let text = k.format(&Value::Timestamp(us)).unwrap();
            prop_assert_eq!(k.parse(&text), Ok(Value::Timestamp(us)));
            prop_assert_eq!(convert(&k.ty, k.parameter(&Value::Timestamp(us)).unwrap()), Ok(Value::Timestamp(us)));
        }
    }

    #[test]
    fn datetime_ticks_round_trip(days in -53_690i32..=2_958_463, ticks in 0u32..25_920_000) {
        let k = key("datetime", 8, 23, 3);
        let value = Value::Timestamp(datetime_us(days, ticks));
        let text = k.format(&value).unwrap();
        prop_assert_eq!(k.parse(&text), Ok(value.clone()));
        prop_assert_eq!(k.parameter(&value).unwrap(), ColumnData::DateTime(Some(DateTime::new(days, ticks))));
    }

    #[test]
    fn decimal_texts_round_trip(magnitude in 0i128..10i128.pow(38), negative: bool, scale in 0u8..=38) {
        let k = key("decimal", 17, 38, i32::from(scale));
        let value = Value::Decimal(if negative { -magnitude } else { magnitude });
        let text = k.format(&value).unwrap();
        prop_assert_eq!(k.parse(&text), Ok(value));
    }

    #[test]
    fn float_texts_round_trip_bit_for_bit(bits: u64, single_bits: u32) {
        let v = f64::from_bits(bits);
        prop_assume!(v.is_finite());
        let k = key("float", 8, 53, 0);
        let text = k.format(&Value::Float(v)).unwrap();
        match k.parse(&text).unwrap() {
            Value::Float(back) => prop_assert_eq!(back.to_bits(), v.to_bits()),
            other => prop_assert!(false, "{other:?}"),
        }
        let s = f32::from_bits(single_bits);
        prop_assume!(s.is_finite());
        let k = key("real", 4, 24, 0);
        let value = Value::Float(f64::from(s));
        let text = k.format(&value).unwrap();
        prop_assert_eq!(k.parse(&text), Ok(value));
    }

    #[test]
    fn text_keys_are_their_own_bound(s in "\\PC*") {
        let k = key("nvarchar", 800, 0, 0);
        prop_assert_eq!(k.parse(&s), Ok(Value::Text(s.clone())));
    }
}
