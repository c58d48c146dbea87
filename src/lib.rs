//! grpofit's binary side: the screen, NVML, the Hugging Face Hub client and the report. The
//! domain lives in `grpofit_core`.

pub mod gpu;
pub mod hub;
mod palette;
pub mod presets;
pub mod report;
pub mod svg;
pub mod tui;
pub mod untrusted;
