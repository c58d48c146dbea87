//! TRL 0.14 and 0.15's `[grpo] vllm_device`: the GPU the trainer starts its own vLLM on (0.16
//! and 0.17 still take the key but generate in `trl vllm-serve`, trl 0.16.1
//! `GRPOTrainer.__init__` builds a `VLLMClient`, so it places nothing there).
//! trl 0.15.2 `GRPOTrainer.__init__` (0.14.0 likewise): `LLM(device=vllm_device)` on the main
//! process; "auto" is `cuda:0` on a one-GPU machine (0.15) or `cuda:{num_processes}`, the GPU
//! after the training processes'. A device past the training processes' is a GPU of vLLM's own,
//! sized by `vllm_gpu_memory_utilization`, as `trl vllm-serve` on one GPU is today; a training
//! GPU's index shares that GPU, as colocate does.

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::contract::ladder::grpo_accepts;
use crate::contract::trl_serve_ladder::has_serve;
use crate::run::knobs::Knob;

/// Whether the file puts the trainer's vLLM on a GPU of its own (`vllm_device = "cuda:N"` with
/// N at or past `[grpofit] gpus`, the training processes), in a TRL release whose trainer starts
/// vLLM itself.
/// "auto" is read as the release's default placement (`read_generation::default_mode`).
pub(super) fn vllm_on_own_gpu(t: &Tables) -> Result<bool, LoadError> {
    let Some(device) = t.text(T::Grpo, "vllm_device")? else {
        return Ok(false);
    };
    let trl = t.versions.trl;
    if !grpo_accepts(trl, "vllm_device") || has_serve(trl) {
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
