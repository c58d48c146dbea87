//! How TRL prepares a quantised base: 0.22 to 0.25 upcast its 16-bit tensors to fp32
//! (`prepare_peft_model`), 0.26 on keeps the adapters in bf16 ([`adapter_element_bytes`]).
//!
//! trl 0.22.0 to 0.25.1 `GRPOTrainer.__init__` calls `prepare_peft_model` (trl/models/utils.py)
//! whenever a `peft_config` is given. For a model `is_loaded_in_4bit` or `is_loaded_in_8bit` (and
//! not sharded) it runs peft's `prepare_model_for_kbit_training` (peft 0.21.2
//! utils/other.py), which casts every fp16/bf16 parameter that is no `Params4bit` to fp32:
//! the embedding, an untied head, the norms, the attention biases, the experts bitsandbytes does
//! not pack, and the router. bitsandbytes' 8-bit weights are `Int8Params` of dtype int8, so
//! they stay. Then, for a 4-bit model under `args.bf16` (GRPOConfig's default: `bf16 = not
//! fp16`), `peft_module_casting_to_bf16` casts modules named `lm_head` or `embed_tokens` back to
//! bf16 and leaves the rest (names with "norm" go `.to(torch.float32)`) in fp32. An 8-bit model
//! keeps them all in fp32. TRL before 0.22 (0.21.0) calls `get_peft_model` alone, and from 0.26
//! (0.26.2) no longer calls `prepare_peft_model`.

use super::lm_head::fp32_head_bytes;
use crate::arch::Vision;
use crate::run::spread::Engine;
use crate::run::{Quant, RunConfig, Stack};

/// What the fp32 upcast adds to the frozen base on a training GPU, bytes (+2 per element).
/// Sharded QLoRA (FSDP, ZeRO-3) is left to their own terms: DDP and a single GPU only.
pub fn kbit_fp32_bytes(run: &RunConfig) -> u64 {
    let applies = run.stack == Stack::Trl
        && matches!(run.quant, Quant::Nf4 | Quant::Int8)
        && run.versions.trl_prepares_kbit_model()
        && !run.full_finetuning
        && run.spread.engine == Engine::Ddp;
    if !applies {
        return 0;
    }
    let arch = &run.arch;
    let embedding = arch.vocab * arch.hidden;
    let head = if arch.tied_embeddings { 0 } else { embedding };
    let vectors = arch.layers * arch.layer_vectors().iter().sum::<u64>() + arch.hidden;
    let experts_packed = crate::memory::moe::experts_quantised(run);
    let experts = arch.layers
        * arch
            .expert_tensors()
            .iter()
            .enumerate()
            .filter(|(k, _)| *k >= 2 || !experts_packed)
            .map(|(_, t)| t)
            .sum::<u64>();
    let vision = match arch.vision {
        Vision::Counted(p) => p,
        _ => 0,
    };
    let kept_fp32 = vectors + experts + vision;
    match run.quant {
        // `peft_module_casting_to_bf16`: the embedding and head back to bf16
        Quant::Nf4 => 2 * kept_fp32,
        // GRPOConfig's `cast_lm_head_to_fp32` (0.25.1) finds the head already fp32: counted once
        _ => (2 * (kept_fp32 + embedding + head)).saturating_sub(fp32_head_bytes(run).0),
    }
}

/// Bytes per element of the LoRA adapters (and of their gradients): PEFT keeps them in fp32
/// (`get_peft_model`'s `autocast_adapter_dtype=True`), but trl 0.26.2 to 1.15.0
/// `GRPOTrainer.__init__` then casts a quantised model's trainable parameters to bf16
/// (`if _is_quantized_model: ... param.data = param.data.to(torch.bfloat16)`, "the PEFT adapter
/// weights are converted to bf16", 1.15.0 sparing DoRA's magnitude vector). trl 0.22 to 0.25
/// (`prepare_peft_model`) and before leave them fp32.
pub fn adapter_element_bytes(run: &RunConfig) -> u64 {
    let bf16 = run.stack == Stack::Trl
        && matches!(run.quant, Quant::Nf4 | Quant::Int8)
        && run.versions.trl_casts_quantised_adapters_to_bf16();
    if bf16 { 2 } else { 4 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::contract::release::Release;

    fn run(quant: Quant, trl: Release) -> RunConfig {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("in the catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.quant = quant;
        run.versions.trl = trl;
        run
    }

    #[test]
    fn trl_0_22_to_0_25_keep_a_quantised_bases_16_bit_tensors_in_fp32() {
        // Qwen2.5-7B: embedding and untied head 152,064 x 3,584 = 544,997,376 each; per layer
        // q/k/v biases 3584 + 512 + 512 and two norms of 3584, 28 layers, the final norm 3584
        let vectors = 28 * (3584 + 512 + 512 + 2 * 3584) + 3584;
        let eight = run(Quant::Int8, Release::new(0, 23, 0));
        assert_eq!(kbit_fp32_bytes(&eight), 2 * (vectors + 2 * 544_997_376));
        // 4-bit under bf16: the embedding and head cast back
        let four = run(Quant::Nf4, Release::new(0, 22, 0));
        assert_eq!(kbit_fp32_bytes(&four), 2 * vectors);
        for trl in [
            Release::new(0, 21, 0),
            Release::new(0, 26, 2),
            Release::new(1, 15, 0),
        ] {
            assert_eq!(kbit_fp32_bytes(&run(Quant::Int8, trl)), 0, "{trl:?}");
        }
        assert_eq!(
            kbit_fp32_bytes(&run(Quant::Bf16, Release::new(0, 23, 0))),
            0
        );
    }

    #[test]
    fn trl_0_26_on_keeps_a_quantised_models_adapters_in_bf16() {
        assert_eq!(
            adapter_element_bytes(&run(Quant::Nf4, Release::new(0, 26, 2))),
            2
        );
        assert_eq!(
            adapter_element_bytes(&run(Quant::Int8, Release::new(1, 15, 0))),
            2
        );
        assert_eq!(
            adapter_element_bytes(&run(Quant::Nf4, Release::new(0, 25, 1))),
            4
        );
        assert_eq!(
            adapter_element_bytes(&run(Quant::Bf16, Release::new(1, 15, 0))),
            4
        );
    }

    #[test]
    fn an_fp32_head_is_not_counted_twice() {
        let mut eight = run(Quant::Int8, Release::new(0, 25, 1));
        let without = kbit_fp32_bytes(&eight);
        eight.cast_lm_head_to_fp32 = true;
        assert_eq!(kbit_fp32_bytes(&eight), without - 2 * 544_997_376);
    }
}
