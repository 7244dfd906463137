//! Binlog row-image cells of a supported MySQL / MariaDB column: the first bytes pick the
//! column (type, signedness, character set, two metadata bytes), the rest is a row image
//! decoded cell after cell as a rows event lays them out. `cell::decode_cell` must return
//! a value or an error, never panic, and never claim more bytes than it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::source::mysql::cell::decode_cell;
use sluice::source::mysql::values::BinlogColumn;

use mysql_async::consts::ColumnType as MyType;

const TYPES: &[MyType] = &[
    MyType::MYSQL_TYPE_TINY,
    MyType::MYSQL_TYPE_SHORT,
    MyType::MYSQL_TYPE_INT24,
    MyType::MYSQL_TYPE_LONG,
    MyType::MYSQL_TYPE_LONGLONG,
    MyType::MYSQL_TYPE_NEWDECIMAL,
    MyType::MYSQL_TYPE_FLOAT,
    MyType::MYSQL_TYPE_DOUBLE,
    MyType::MYSQL_TYPE_NEWDATE,
    MyType::MYSQL_TYPE_DATE,
    MyType::MYSQL_TYPE_DATETIME,
    MyType::MYSQL_TYPE_DATETIME2,
    MyType::MYSQL_TYPE_TIMESTAMP,
    MyType::MYSQL_TYPE_TIMESTAMP2,
    MyType::MYSQL_TYPE_TIME,
    MyType::MYSQL_TYPE_TIME2,
    MyType::MYSQL_TYPE_YEAR,
    MyType::MYSQL_TYPE_VARCHAR,
    MyType::MYSQL_TYPE_VAR_STRING,
    MyType::MYSQL_TYPE_STRING,
    MyType::MYSQL_TYPE_TINY_BLOB,
    MyType::MYSQL_TYPE_BLOB,
    MyType::MYSQL_TYPE_MEDIUM_BLOB,
    MyType::MYSQL_TYPE_LONG_BLOB,
    MyType::MYSQL_TYPE_JSON,
    MyType::MYSQL_TYPE_ENUM,
    MyType::MYSQL_TYPE_SET,
    MyType::MYSQL_TYPE_BIT,
];

const CHARSETS: &[&str] = &["utf8mb4", "utf8mb3", "latin1", "binary", "ascii", "gbk"];

fuzz_target!(|data: &[u8]| {
    let [t, flags, m0, m1, meta_len, rest @ ..] = data else {
        return;
    };
    let meta = [*m0, *m1];
    let column = BinlogColumn {
        name: "c".into(),
        raw: TYPES[usize::from(*t) % TYPES.len()],
        meta: meta[..usize::from(*meta_len) % 3].to_vec(),
        unsigned: flags & 1 != 0,
        nullable: true,
        charset: Some(CHARSETS[usize::from(flags >> 1) % CHARSETS.len()].into()),
        labels: (0..usize::from(flags >> 5))
            .map(|i| format!("l{i}"))
            .collect(),
        plugin: None,
        key: false,
    };
    let mut row = rest;
    while !row.is_empty() {
        match decode_cell(&column, row) {
            Ok((_, used)) => {
                assert!(used <= row.len(), "{used} bytes of {}", row.len());
                if used == 0 {
                    break;
                }
                row = &row[used..];
            }
            Err(_) => break,
        }
    }
});
