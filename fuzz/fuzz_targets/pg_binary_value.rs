//! One binary-format cell of a supported PostgreSQL type: the first two bytes pick the
//! type (and, for numeric, a typmod), the rest is the cell. `column_type` + `decode_binary`
//! must return a value or an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::source::postgres::types::{column_type, decode_binary, decode_text, oid};

const TYPES: &[u32] = &[
    oid::BOOL,
    oid::BYTEA,
    oid::NAME,
    oid::INT8,
    oid::INT2,
    oid::INT4,
    oid::TEXT,
    oid::JSON,
    oid::FLOAT4,
    oid::FLOAT8,
    oid::BPCHAR,
    oid::VARCHAR,
    oid::DATE,
    oid::TIME,
    oid::TIMESTAMP,
    oid::TIMESTAMPTZ,
    oid::NUMERIC,
    oid::UUID,
    oid::JSONB,
    oid::BOOL_ARRAY,
    oid::INT2_ARRAY,
    oid::INT4_ARRAY,
    oid::TEXT_ARRAY,
    oid::VARCHAR_ARRAY,
    oid::INT8_ARRAY,
    oid::FLOAT4_ARRAY,
    oid::FLOAT8_ARRAY,
    oid::TIMESTAMP_ARRAY,
    oid::DATE_ARRAY,
    oid::TIMESTAMPTZ_ARRAY,
    oid::NUMERIC_ARRAY,
    oid::UUID_ARRAY,
];

/// numeric typmods: unconstrained, and (precision, scale) pairs incl. negative and
/// scale > precision (PostgreSQL 15).
const TYPMODS: &[(i32, i32)] = &[
    (0, 0),
    (10, 2),
    (38, 10),
    (50, 10),
    (76, 0),
    (5, -2),
    (2, 5),
    (1, 0),
];

fuzz_target!(|data: &[u8]| {
    let [t, m, raw @ ..] = data else { return };
    let type_oid = TYPES[usize::from(*t) % TYPES.len()];
    let typmod = match TYPMODS[usize::from(*m) % TYPMODS.len()] {
        (0, 0) => -1,
        (p, s) => ((p << 16) | (s & 0x7ff)) + 4,
    };
    if let Ok(ty) = column_type(type_oid, typmod, "fuzz") {
        let _ = decode_binary(&ty, type_oid, raw);
        let _ = decode_text(&ty, type_oid, raw);
    }
});
