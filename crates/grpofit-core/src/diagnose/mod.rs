//! Reading an out-of-memory message (`oom`) and naming the tensor that asked (`culprit`).

pub mod advice;
pub mod culprit;
pub mod oom;
pub mod report;
mod vllm_context;
