//! The mode transformers' `generate` runs in, as each trainer calls it, and what that mode
//! changes in a decode step beside the experts' path (`experts`).
//!
//! - TRL generates with the model in training mode: `Trainer.training_step` runs `model.train()`
//!   and then `_prepare_inputs` -> `_generate_and_score_completions`, whose
//!   `unwrapped_model.generate(...)` runs under `torch.no_grad()` only
//!   (`unwrap_model_for_generation` calls no `eval()`: read in trl 0.14.0, 0.15.2, 0.21.0,
//!   0.22.2, 0.27.2, 1.5.0, 1.15.0 and 1.16.0; 0.27.2 on even calls `unwrapped_model.train()`
//!   after `generate_batch`, "restore training mode, as generate_batch forces eval mode").
//! - Unsloth patches `unwrap_model_for_generation` in every `trl.trainer.*_trainer` module
//!   (`models/rl.py` `PatchRL`, which its compiled trainer imports from there) with
//!   `unsloth_unwrap_model_for_generation`, which calls `FastLanguageModel.for_inference(model)`:
//!   `model.eval()`, checkpointing off on every module (read in unsloth 2025.4.7, 2025.10.4 and
//!   2026.10.9).
//!
//! It sits beside the run, below `memory` and `time`: the step time reads it (`time/phases`,
//! `time/ops`, `time/experts`) and so does the estimate's warning of a cache-less `generate`
//! (`memory/run_warnings`).

use crate::run::{Checkpointing, Generation, RunConfig, Stack};

/// Whether the run's `generate` runs with the model in training mode (TRL's) rather than eval
/// (Unsloth's `for_inference`).
pub fn training(run: &RunConfig) -> bool {
    run.stack == Stack::Trl
}

/// Whether TRL's `generate` runs every decode step without its KV cache (only where transformers
/// generates: `use_vllm = false`). TRL before 0.22 leaves
/// gradient checkpointing on around `generate` (0.22.2 `unwrap_model_for_generation` is the
/// first to call `gradient_checkpointing_disable()`; read in 0.14.0, 0.15.2, 0.16.1 to 0.21.0),
/// and from transformers 4.53 each decoder layer is a `GradientCheckpointingLayer`, whose
/// `__call__` with `gradient_checkpointing and self.training` sets `past_key_values` (4.53
/// `past_key_value`) to `None` ("Caching is incompatible with gradient checkpointing"): traced
/// on CPU (`tools/trace/generate_cache.sh`) with transformers 4.53.1 and 4.54.1, every decode
/// step's attention gets one query token and no cache (4.52.4 and 4.50.3 keep it). Each step
/// then reads no KV at all, and each completion's tokens attend only to themselves.
pub fn drops_kv_cache(run: &RunConfig) -> bool {
    training(run)
        && run.generation == Generation::Transformers
        && run.checkpointing != Checkpointing::Off
        && run.versions.trl.line() < (0, 22)
        && run.versions.transformers.line() >= (4, 53)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::contract::release::Release;

    #[test]
    fn only_trl_before_0_22_checkpointed_on_transformers_4_53_generates_without_its_cache() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen3-0.6B").unwrap().arch);
        run.stack = Stack::Trl;
        run.generation = Generation::Transformers;
        run.checkpointing = Checkpointing::On;
        run.versions.trl = Release::new(0, 21, 0);
        run.versions.transformers = Release::new(4, 54, 1);
        assert!(drops_kv_cache(&run));
        let mut other = run.clone();
        other.versions.trl = Release::new(0, 22, 2);
        assert!(
            !drops_kv_cache(&other),
            "0.22 turns checkpointing off around generate"
        );
        let mut other = run.clone();
        other.versions.transformers = Release::new(4, 52, 4);
        assert!(!drops_kv_cache(&other), "4.52's layers keep the cache");
        let mut other = run.clone();
        other.checkpointing = Checkpointing::Off;
        assert!(!drops_kv_cache(&other));
        let mut other = run.clone();
        other.generation = Generation::VllmServer;
        assert!(!drops_kv_cache(&other), "vLLM generates, not transformers");
        let mut other = run.clone();
        other.stack = Stack::Unsloth;
        assert!(
            !drops_kv_cache(&other),
            "for_inference: eval, checkpointing off"
        );
    }
}
