//! Any text as a stored checkpoint position: `Position::parse_tagged` must parse it (and
//! then print it back identically) or refuse it, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::position::Position;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(position) = Position::parse_tagged(text)
    {
        let printed = position.to_string();
        assert_eq!(
            Position::parse_tagged(&printed).ok(),
            Some(position),
            "{text:?} printed back as {printed:?} does not parse to the same position"
        );
    }
});
