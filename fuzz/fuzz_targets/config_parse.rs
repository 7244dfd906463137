//! Any UTF-8 text as a job config: `Config::parse` must accept or refuse it, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = sluice::config::Config::parse(text, "fuzz");
    }
});
