//! vramfit: fit a GRPO fine-tuning run into a GPU before launching it.

pub mod config;
pub mod contract;
pub mod dates;
pub mod files;
#[cfg(target_os = "linux")]
mod files_linux;
pub mod gpu;
pub mod hub;
pub mod model;
pub mod presets;
pub mod report;
pub mod tail;
pub mod text;
pub mod tui;
pub mod untrusted;
