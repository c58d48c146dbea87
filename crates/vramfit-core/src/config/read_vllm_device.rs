//! TRL 0.14 to 0.17's `[grpo] vllm_device`: the GPU the trainer starts its own vLLM on.
//! trl 0.15.2 `GRPOTrainer.__init__` (0.14.0 likewise): `LLM(device=vllm_device)` on the main
//! process; "auto" is `cuda:0` on a one-GPU machine (0.15) or `cuda:{num_processes}`, the GPU
//! after the training processes'. A device past the training processes' is a GPU of vLLM's own,
//! sized by `vllm_gpu_memory_utilization`, as `trl vllm-serve` on one GPU is today; a training
//! GPU's index shares that GPU, as colocate does.

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::contract::ladder::grpo_accepts;
use crate::run::knobs::Knob;

/// Whether the file puts the trainer's vLLM on a GPU of its own (`vllm_device = "cuda:N"` with
/// N at or past `[vramfit] gpus`, the training processes), in a TRL release that takes the key.
/// "auto" is read as the release's default placement (`read_generation::default_mode`).
pub(super) fn vllm_on_own_gpu(t: &Tables) -> Result<bool, LoadError> {
    let Some(device) = t.text(T::Grpo, "vllm_device")? else {
        return Ok(false);
    };
    if !grpo_accepts(t.versions.trl, "vllm_device") {
        return Ok(false);
    }
    if device == "auto" {
        return Ok(false);
    }
    let index = device
        .strip_prefix("cuda:")
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| {
            t.wrong(
                T::Grpo,
                "vllm_device",
                format!("\"{device}\""),
                "expected \"auto\" or \"cuda:N\" (the GPU TRL starts vLLM on)",
            )
        })?;
    let training = t.knob(Knob::Gpus)?.unwrap_or(1);
    Ok(index >= training)
}
