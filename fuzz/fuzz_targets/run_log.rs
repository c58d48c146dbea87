#![no_main]
//! The run-log reader and the calibration file reader on arbitrary bytes: errors, never panics;
//! what `calibrate` learns from a log that reads is written and read back unchanged. The
//! follower (`--follow`) takes the same bytes in two pieces cut anywhere: it never panics, and
//! where the whole log reads it reads the same log, with no notice.

use libfuzzer_sys::fuzz_target;
use grpofit_core::measure::{calibration, follow, measured};

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    let mut follower = follow::Follower::new("fuzz.jsonl");
    follower.feed(&data[..cut]);
    follower.feed(&data[cut..]);
    follower.feed(b"\n");
    let _ = follower.log().whole_process_peak(1 << 30);
    let _ = follow::other_gpu(follower.log(), 24 << 30, Some("GPU"));
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(log) = measured::parse_log(text, "fuzz.jsonl") {
            assert_eq!(follower.log(), &log);
            assert_eq!(follower.notice(), None);
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
