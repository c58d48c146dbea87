//! grpofit's core: the trainers' contract, model architectures, the run, the memory model, the
//! search for a run that fits, the reading of OOM messages and of run logs. No terminal, NVML or
//! HTTP code lives here: the binary crate brings those.

pub mod arch;
pub mod bounded;
pub mod config;
pub mod contract;
pub mod dates;
pub mod diagnose;
pub mod fastest;
pub mod files;
#[cfg(target_os = "linux")]
mod files_linux;
pub mod files_set;
pub mod fit;
pub mod hardware;
pub mod measure;
pub mod memory;
pub mod presets;
pub mod resolve;
pub mod run;
pub mod text;
pub mod time;
pub mod units;

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
