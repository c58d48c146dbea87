#![no_main]
//! The run-log reader and the calibration file reader on arbitrary bytes: errors, never panics;
//! what `calibrate` learns from a log that reads is written and read back unchanged.

use libfuzzer_sys::fuzz_target;
use vramfit::model::{calibration, measured};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(log) = measured::parse_log(text, "fuzz.jsonl") {
            let _ = log.measured();
            let _ = log.nvml_peak();
            if let Ok((gpu, stack, sample)) = calibration::learn(&log, "fuzz.jsonl") {
                let mut c = calibration::Calibration::default();
                c.add(&gpu, &stack, sample);
                let written = calibration::to_toml(&c);
                assert_eq!(calibration::parse(&written, "c.toml").ok(), Some(c));
            }
        }
        let _ = calibration::parse(text, "fuzz.toml");
    }
});
