//! The card and what the step gets of it: the seconds FLOPs, bytes and eager operators take on
//! it, which `phases` and `kernels` both time with.

use super::efficiency::{Efficiencies, KERNEL_BANDWIDTH};
use crate::hardware::GpuSpeed;

/// The card and what the step gets of it.
pub(super) struct Machine<'a> {
    pub gpu: &'a GpuSpeed,
    pub eff: &'a Efficiencies,
}

impl Machine<'_> {
    /// Seconds for `flops` of matmuls on `gpus` cards.
    pub(super) fn compute(&self, flops: f64, gpus: f64) -> f64 {
        flops / (self.gpu.bf16_tflops * 1e12 * self.eff.matmul_peak * gpus.max(1.0))
    }
    /// Seconds to move `bytes` through memory on `gpus` cards.
    pub(super) fn traffic(&self, bytes: f64, gpus: f64) -> f64 {
        bytes / (self.gpu.memory_gb_s * 1e9 * self.eff.decode_bandwidth * gpus.max(1.0))
    }
    /// Seconds for a pass's kernels to stream `bytes` on one card (`KERNEL_BANDWIDTH`).
    pub(super) fn kernel_traffic(&self, bytes: f64) -> f64 {
        bytes / (self.gpu.memory_gb_s * 1e9 * KERNEL_BANDWIDTH)
    }
    pub(super) fn eager(&self, ops: f64) -> f64 {
        ops * self.eff.eager_op_seconds
    }
}
