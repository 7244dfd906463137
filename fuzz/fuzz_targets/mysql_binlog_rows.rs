//! A whole rows event's row section, as the drain decodes it: the first byte picks the
//! column count and which images the event carries, then four bytes per column pick its
//! type, flags and metadata, and the rest is the rows data. `rows::RowImages` must yield
//! rows of exactly the table's width or one error and then stop — never panic, never
//! yield more rows than there are bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::source::mysql::rows::{ImageColumns, RowImages};
use sluice::source::mysql::values::{BinlogColumn, binlog_type};

use mysql_async::consts::ColumnType as MyType;

const TYPES: &[MyType] = &[
    MyType::MYSQL_TYPE_TINY,
    MyType::MYSQL_TYPE_LONG,
    MyType::MYSQL_TYPE_LONGLONG,
    MyType::MYSQL_TYPE_NEWDECIMAL,
    MyType::MYSQL_TYPE_DOUBLE,
    MyType::MYSQL_TYPE_DATE,
    MyType::MYSQL_TYPE_DATETIME2,
    MyType::MYSQL_TYPE_TIMESTAMP2,
    MyType::MYSQL_TYPE_TIME2,
    MyType::MYSQL_TYPE_VARCHAR,
    MyType::MYSQL_TYPE_STRING,
    MyType::MYSQL_TYPE_BLOB,
    MyType::MYSQL_TYPE_JSON,
    MyType::MYSQL_TYPE_ENUM,
    MyType::MYSQL_TYPE_SET,
    MyType::MYSQL_TYPE_BIT,
];

const CHARSETS: &[&str] = &["utf8mb4", "latin1", "binary"];

fuzz_target!(|data: &[u8]| {
    let [shape, rest @ ..] = data else {
        return;
    };
    let count = usize::from(shape & 0x03) + 1;
    let Some((described, rows)) = rest.split_at_checked(count * 4) else {
        return;
    };
    let columns: Vec<BinlogColumn> = described
        .chunks_exact(4)
        .enumerate()
        .map(|(i, d)| BinlogColumn {
            name: format!("c{i}"),
            raw: TYPES[usize::from(d[0]) % TYPES.len()],
            meta: vec![d[2], d[3]],
            unsigned: d[1] & 1 != 0,
            nullable: true,
            charset: Some(CHARSETS[usize::from(d[1] >> 1) % CHARSETS.len()].into()),
            labels: (0..usize::from(d[1] >> 5)).map(|l| format!("l{l}")).collect(),
            plugin: None,
            key: false,
        })
        .collect();
    let Ok(types) = columns.iter().map(binlog_type).collect::<Result<Vec<_>, _>>() else {
        return;
    };
    let all = || Some(ImageColumns::new(std::iter::repeat_n(true, count)));
    let (before, after) = match shape >> 2 & 0x03 {
        0 => (None, all()),
        1 => (all(), None),
        _ => (all(), all()),
    };
    let mut seen = 0;
    for row in RowImages::new(&columns, &types, before, after, rows) {
        seen += 1;
        assert!(seen <= rows.len(), "{seen} rows from {} bytes", rows.len());
        match row {
            Ok((b, a)) => {
                for image in [b, a].into_iter().flatten() {
                    assert_eq!(image.len(), count, "an image of the wrong width");
                }
            }
            Err(_) => break,
        }
    }
});
