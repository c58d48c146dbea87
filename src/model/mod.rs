//! The domain: architectures, runs, and the memory estimate. No terminal code here.

pub mod adjust;
pub mod allocator;
pub mod arch;
pub mod calibration;
pub mod catalog;
pub mod config_json;
pub mod culprit;
pub mod estimate;
pub mod fit;
pub mod follow;
pub mod generate;
pub mod knobs;
pub mod measured;
pub mod oom;
pub mod replay;
pub mod roles;
pub mod rules;
pub mod run;
pub mod spread;
pub mod step;
pub mod units;
pub mod unsloth_step;
pub mod versions;
pub mod vllm;
