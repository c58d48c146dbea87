#![no_main]
//! The safetensors header reader on arbitrary bytes: errors, never panics, never allocates
//! more than the bytes given (or the 100 MiB cap).

use libfuzzer_sys::fuzz_target;
use vramfit::hub::safetensors;

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = safetensors::read_header(data) {
        // whatever parses must also be checked against the buffer's length and totalled
        let _ = header.check_file_len(data.len() as u64);
        let _ = header.weights();
    }
});
