//! CPU offload's time (`[distributed] offload_optimizer`, `offload_param`): the optimizer step
//! on the host's cores instead of the GPU, and the gradients, updated weights and offloaded
//! parameters crossing PCIe (`GpuSpeed::pcie_gb_s`).

use crate::hardware::GpuSpeed;
use crate::run::spread::Engine;
use crate::run::{Checkpointing, RunConfig};

/// DeepSpeed's `DeepSpeedCPUAdam` (ZeRO-Offload's CPU-Adam), parameters updated a second by a
/// host's cores: 10 billion parameters in 2.57 s on a DGX-2 host (2 x 24-core Xeon Platinum
/// 8168), ZeRO-Offload (Ren et al., USENIX ATC 2021, arXiv:2101.06840), its table of Adam
/// latencies; deepspeed 0.18.2 `ops/adam/cpu_adam.py` states the same 5x-7x over torch's.
/// The two latencies were taken from the paper's table as remembered, not re-read from it here
/// (the paper was not reachable): their 5.7x ratio is checked against DeepSpeed's own 5x-7x.
pub const CPU_ADAM_PARAMS_PER_SECOND: f64 = 10e9 / 2.57;

/// torch's own AdamW on the CPU (FSDP's `CPUOffload` steps the optimizer there): the same
/// table's PyTorch row, 14.76 s for 10 billion parameters.
pub const TORCH_CPU_ADAM_PARAMS_PER_SECOND: f64 = 10e9 / 14.76;

/// Whether the optimizer steps on the host.
pub(super) fn optimizer_on_host(run: &RunConfig) -> bool {
    run.spread.stage() > 0 && run.spread.offload_optimizer
}

/// The optimizer step on the host: every rank of a node updates its partition on the node's
/// shared cores, so a node updates `trainable / nodes` parameters.
pub(super) fn host_optimizer(run: &RunConfig, trainable: f64) -> f64 {
    let rate = match run.spread.engine {
        Engine::Fsdp => TORCH_CPU_ADAM_PARAMS_PER_SECOND,
        _ => CPU_ADAM_PARAMS_PER_SECOND,
    };
    trainable / run.spread.nodes.max(1) as f64 / rate
}

/// Bytes over each rank's own PCIe link a step, and their seconds: with the optimizer on the
/// host, each micro-batch's 16-bit gradients of the rank's partition go down (ZeRO-Offload
/// accumulates them on the CPU) and the updated 16-bit weights come back once; with the
/// parameters on the host, each forward, backward and recompute fetches the rank's partition.
pub(super) fn pcie(run: &RunConfig, gpu: &GpuSpeed, trainable: f64) -> f64 {
    let n = run.processes().max(1) as f64;
    let micro = run.grad_accum as f64;
    let mut bytes = 0.0;
    if optimizer_on_host(run) {
        bytes += (micro + 1.0) * 2.0 * trainable / n;
    }
    if run.spread.offload_param && run.spread.shards_parameters() {
        let passes = 3.0 + (run.checkpointing != Checkpointing::Off) as u8 as f64;
        bytes += passes * micro * 2.0 * run.arch.parameters() as f64 / n;
    }
    bytes / (gpu.pcie_gb_s * 1e9)
}
