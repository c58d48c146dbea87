//! TRL 0.14 and 0.15's `[grpo] vllm_device`: the GPU the trainer starts its own vLLM on (0.16
//! and 0.17 still take the key but generate in `trl vllm-serve`, trl 0.16.1
//! `GRPOTrainer.__init__` builds a `VLLMClient`, so it places nothing there).
//! trl 0.15.2 `GRPOTrainer.__init__` (0.14.0 likewise): `LLM(device=vllm_device)` on the main
//! process; "auto" is `cuda:0` on a one-GPU machine (0.15 only) or `cuda:{num_processes}`, the
//! GPU after the training processes' (always in 0.14.0). A device past the training processes' is a GPU of vLLM's own,
//! sized by `vllm_gpu_memory_utilization`, as `trl vllm-serve` on one GPU is today; a training
//! GPU's index shares that GPU, as colocate does.

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::contract::ladder::grpo_accepts;
use crate::contract::trl_serve_ladder::has_serve;
use crate::run::knobs::Knob;

/// Whether the trainer's vLLM runs on a GPU of its own (`vllm_device = "cuda:N"` with N at or
/// past `[grpofit] gpus`, the training processes), in a TRL release whose trainer starts vLLM
/// itself. "auto", GRPOConfig's default in 0.14.0 and 0.15.2, is the next GPU after the training
/// processes' (`cuda:{num_processes}`) in 0.14.0 always, and in 0.15.2 unless the machine has
/// one GPU (`torch.cuda.device_count() == 1`: `cuda:0`, shared), which grpofit reads as one
/// training GPU. Either way vLLM runs on the main process only.
pub(super) fn vllm_on_own_gpu(t: &Tables) -> Result<bool, LoadError> {
    let trl = t.versions.trl;
    if !grpo_accepts(trl, "vllm_device") || has_serve(trl) {
        return Ok(false);
    }
    let training = t.knob(Knob::Gpus)?.unwrap_or(1);
    let device = t.text(T::Grpo, "vllm_device")?.unwrap_or("auto");
    if device == "auto" {
        return Ok(trl.line() < (0, 15) || training > 1);
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
    Ok(index >= training)
}
