#![no_main]
//! The safetensors header reader on arbitrary bytes: errors, never panics, never allocates
//! more than the bytes given (or the 100 MiB cap). The same bytes as an index.json: the shard
//! list fetched from the Hub is read by `index_files` before any file name is used.

use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path};
use grpofit_core::resolve::safetensors;

fuzz_target!(|data: &[u8]| {
    if let Ok(files) = safetensors::index_files(data) {
        // every name is a plain relative path: it may be joined to the snapshot folder
        assert!(files.iter().all(|f| {
            !f.is_empty()
                && Path::new(f)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
        }));
    }
    if let Ok(header) = safetensors::read_header(data) {
        // whatever parses must also be checked against the buffer's length and totalled
        let _ = header.check_file_len(data.len() as u64);
        let _ = header.weights();
    }
});
