//! The memory physics: what each phase of a GRPO step holds on each GPU (`estimate`), the
//! roles a multi-GPU run splits into (`roles`), vLLM's share of the card (`vllm`), generation
//! without vLLM (`generate`) and the training step itself (`step`).

pub mod breakdown;
pub mod by_version;
pub mod bytes;
pub mod estimate;
pub mod frozen;
pub mod generate;
pub mod kbit_cast;
pub mod lm_head;
pub mod moe;
mod packing;
pub mod refusal;
pub mod roles;
mod run_warnings;
pub mod saved_modules;
#[cfg(test)]
mod scale_examples;
pub mod step;
mod unsloth_checkpoint;
pub mod unsloth_vllm_2025;
pub mod vllm;
mod vllm_batch_defaults;
