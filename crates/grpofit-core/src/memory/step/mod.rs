//! One GRPO training step, analytically: the step's shapes (`shape`), the `trl` stack's step
//! (`trl`) with its no-grad passes (`scoring`), the adapters' dropout (`dropout`), replayed through PyTorch's caching allocator
//! (`replay`, `allocator`), and Unsloth's step (`unsloth_step`).

pub mod allocator;
pub mod dropout;
mod liger;
pub mod recompute;
pub mod replay;
mod scoring;
pub mod shape;
pub mod trl;
pub mod unsloth_step;

pub use shape::{LayerTensors, StepPeak, StepShape, layer_tensors};
pub use trl::trl_step;
