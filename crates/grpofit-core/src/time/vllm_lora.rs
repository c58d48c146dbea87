//! vLLM's LoRA kernels in each decode step. Unsloth hands its vLLM the adapters as a LoRA
//! request with every generation (unsloth 2025.5.9 `models/rl.py` rewrites TRL's
//! `self.llm.generate(...)` to pass `lora_request = self.model.load_lora(...)`), so each decode
//! step runs vLLM's punica shrink and expand kernels on every targeted projection of every layer
//! beside the base weights' matmuls. TRL merges the adapters into the weights before it syncs
//! them (`_move_model_to_vllm`: `merge_adapter`, `load_weights`, `unmerge_adapter`), so its vLLM
//! runs no LoRA kernel.

use crate::memory::estimate::target_mask;
use crate::run::{Generation, RunConfig, Stack};

/// Seconds one LoRA-adapted projection adds to a decode step. punica-ai/punica issue #27
/// (2023-12): Yi-34B (60 layers) with a rank-32 LoRA on q, k, v, o, gate, up and down decodes a
/// 5-step task in 0.163 s against 0.102 s without the adapter (steady lines of its log): 0.061 s
/// over 5 steps and 60 x 7 adapted projections, 29 µs each. vLLM's LoRA layers run these
/// punica kernels (`vllm/lora/punica_wrapper`).
pub const LORA_PROJECTION_SECONDS: f64 = 0.061 / (5.0 * 60.0 * 7.0);

/// Seconds vLLM's LoRA kernels add to one decode step of `run`'s generation.
pub(super) fn per_decode_step(run: &RunConfig) -> f64 {
    let serves_adapters = run.stack == Stack::Unsloth
        && !run.full_finetuning
        && matches!(run.generation, Generation::ColocatedVllm { .. });
    if !serves_adapters {
        return 0.0;
    }
    let adapted = target_mask(&run.arch, &run.lora_targets)
        .iter()
        .filter(|t| **t)
        .count() as f64;
    run.arch.layers as f64 * adapted * LORA_PROJECTION_SECONDS
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::arch::catalog;

    #[test]
    fn the_punica_figure_is_29_microseconds_a_projection() {
        assert!((LORA_PROJECTION_SECONDS * 1e6 - 29.0).abs() < 0.1);
    }

    #[test]
    fn only_unsloths_colocated_vllm_serves_the_adapters() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch);
        run.stack = Stack::Unsloth;
        run.generation = Generation::ColocatedVllm { share: 0.5 };
        // 28 layers x 7 targeted projections x 29 µs: 5.7 ms a decode step
        let step = per_decode_step(&run);
        assert!((step - 28.0 * 7.0 * LORA_PROJECTION_SECONDS).abs() < 1e-12);
        run.lora_targets = vec!["q_proj".into(), "v_proj".into()];
        assert!((per_decode_step(&run) - 28.0 * 2.0 * LORA_PROJECTION_SECONDS).abs() < 1e-12);
        let mut full = run.clone();
        full.full_finetuning = true;
        assert_eq!(per_decode_step(&full), 0.0);
        let mut trl = run.clone();
        trl.stack = Stack::Trl;
        assert_eq!(per_decode_step(&trl), 0.0);
        let mut hf = run;
        hf.generation = Generation::Transformers;
        assert_eq!(per_decode_step(&hf), 0.0);
    }
}
