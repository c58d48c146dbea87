#![no_main]
//! The run-file loader and the OOM reader on arbitrary bytes: errors, never panics.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(file) = grpofit_core::config::parse(text, "fuzz.toml", None, &grpofit_core::resolve::Offline::from_env()) {
            // whatever loads must also estimate without panicking
            let gpu = grpofit_core::memory::estimate::GpuBudget { capacity: 24 << 30, used_by_others: 0, context: None };
            let _ = grpofit_core::memory::estimate::estimate(&file.run, gpu);
        }
        let _ = grpofit_core::diagnose::oom::diagnose(text);
    }
});
