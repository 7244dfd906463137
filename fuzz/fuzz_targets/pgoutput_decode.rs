//! Any bytes as one pgoutput message: `decode` must return a message or an error, never
//! panic; a decoded tuple's binary cells then go through the value decoder as text-like
//! and numeric columns (the types whose decoders take arbitrary lengths).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::change::ColumnType;
use sluice::source::postgres::pgoutput::{Cell, PgMessage, decode};
use sluice::source::postgres::types::{decode_binary, oid};

fuzz_target!(|data: &[u8]| {
    if let Ok(PgMessage::Insert(insert)) = decode(data) {
        for cell in &insert.new {
            if let Cell::Binary(raw) = cell {
                let _ = decode_binary(&ColumnType::Utf8, oid::NUMERIC, raw);
                let _ = decode_binary(&ColumnType::Utf8, oid::TEXT, raw);
            }
        }
    }
});
