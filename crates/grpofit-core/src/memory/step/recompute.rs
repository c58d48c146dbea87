//! What the trainer's step holds beside the layers' own tensors, which the calibration harness
//! (all-ones mask, no autocast) does not: the attention mask of the padded batch, and autocast's
//! bf16 copies of the fp32 LoRA weights. With checkpointing, at the recomputed layer
//! ([`super::trl`] `recomputed_layer`); without, in every layer's saved set
//! ([`held_without_checkpointing`]).
//!
//! Traced (trl 0.19.1 qwen2 `iterations2`, 4 x 60 tokens, every storage listed at the backward's
//! peak with `TRACE_AT_PEAK_MIN=1`): the peak comes at the end of the first layer's recomputed
//! forward, and beside what the model counted it holds the mask (`bitwise_and` 14,400 B bool and
//! `where` 28,800 B bf16, 4 x 60 x 60), the recomputed layer's adapter copies (`_to_copy` 2,048 B
//! x 9, 5,632 B x 3, 1,024 B x 2: 37,376 B) and the second layer's adapter gradients (74,752 B):
//! 155,328 of the 155,644 B the model was under. The gradients are not modelled: the 2-layer
//! model peaks at its first layer's recompute because one layer's fp32 adapter gradients
//! outweigh one layer's stored input (61,440 B); at real sizes the stored inputs outweigh them
//! (Qwen2.5-7B, 8 x 1,024 tokens, rank 16: 58.7 MB against 5.8 MB a layer) and the last
//! layer's recompute, before any gradient, stays the peak.

use super::shape::{AttentionMask, StepShape};
use crate::arch::Arch;
use crate::run::attention::Attention;

/// The attention mask at the checkpointed backward's recompute: the model's own mask (kept for
/// the recompute: `GradientCheckpointingLayer` passes it to the checkpointed call) and the
/// recomputed attention's converted copy. `B x S x S` elements: at 8 x 4096 that is 134 MB a
/// byte, so 134 MB for the bool mask of transformers 4.53+ plus 268 MB for its bf16 conversion
/// (403 MB), or 268 MB for 4.50-4.52's bf16 mask, beside Qwen2.5-7B's 28 stored layer inputs
/// of 235 MB each (8 x 4096 x 3,584 bf16).
pub fn mask_at_recompute(s: &StepShape) -> u64 {
    kept_mask(s) + mask_elements(s) * s.mask.converted_element()
}

/// Without checkpointing every layer's attention keeps its own conversion of the mask for its
/// backward, and every layer's `lora_A` / `lora_B` matmuls keep autocast's bf16 copies of their
/// weights (the same `cached_cast` rule: a matmul saves the operand its input's gradient needs);
/// 4.50-4.52's float mask is one tensor every layer's attention saves, 4.53's bool mask is
/// dropped with the forward once each layer has converted it. `layers` is how many layers' saved
/// sets are live: all of them at the logits, one at the first layer's backward. Traced (trl
/// 0.19.1 qwen2 `no_gc`, at_peak backward at the logits' backward: `where` 27,848 B x 2, one a
/// layer; trl 0.16.1: `clone` 27,848 B x 1, the float mask; with every storage listed, each
/// layer's adapter copies `_to_copy` 2,048 / 5,632 / 1,024 B as at the recompute). At
/// Qwen2.5-7B, 8 x 4096 on 4.53+: 268 MB a layer, 7.5 GB over 28 layers.
pub fn held_without_checkpointing(
    arch: &Arch,
    targets: &[bool],
    s: &StepShape,
    layers: u64,
) -> u64 {
    let shared = if s.mask == AttentionMask::Float {
        kept_mask(s)
    } else {
        0
    };
    let per_layer = mask_elements(s) * s.mask.converted_element()
        + lora_casts_at_recompute(arch, targets, s)
        + eager_weights(arch, s);
    shared + layers * per_layer
}

/// Eager attention's weights one layer keeps for its backward (`eager_attention_forward`,
/// transformers 5.17.0 `modeling_qwen2.py`, the same in each family's file):
/// `softmax(attn_weights, dim=-1, dtype=torch.float32)`, which `softmax` saves (its output,
/// fp32), then `.to(query.dtype)`, the bf16 copy `matmul(attn_weights, value_states)` saves
/// (dropout is 0, so returns its input): 6 bytes a score, `B x heads x S x S`. Every layer's
/// without checkpointing ([`held_without_checkpointing`]), the recomputed layer's with it. SDPA
/// and flash attention keep no score. Traced (trl 1.15.0 qwen2 and gemma3 `eager_no_gc`,
/// at_peak backward: `_softmax` 222,784 B and `_to_copy` 111,392 B a layer, 4 x 4 x 59 x 59).
/// At Qwen2.5-7B, 8 x 4096: 22.5 GB a layer.
pub fn eager_weights(arch: &Arch, s: &StepShape) -> u64 {
    if s.attention != Attention::Eager {
        return 0;
    }
    mask_elements(s) * arch.heads * (4 + 2)
}

/// What eager attention's backward adds, one layer at a time, over the weights it saved
/// ([`eager_weights`]), at its largest moment, the softmax's backward: the second matmul's
/// backward makes the bf16 gradient of the weights and releases their bf16 copy;
/// `ToCopyBackward` casts that gradient to fp32 (4) and `_softmax_backward_data(grad, output)`
/// makes the fp32 gradient of its input (4) beside the saved fp32 output: 12 bytes a score live
/// against the 6 saved, 6 more (torch 2.9 `derivatives.yaml`: `_softmax` saves `result`,
/// `_to_copy` nothing). Larger than the forward's own moment, the fp32 cast and the softmax's
/// output beside the bf16 scores (10 bytes a score, `at::softmax` with `dtype`: `toType` then
/// `_softmax`). Read, not traced: the tiny traces peak at the logits.
pub fn eager_backward_transient(arch: &Arch, s: &StepShape) -> u64 {
    eager_weights(arch, s)
}

/// `B x S x S`: the mask's elements (broadcast over the heads).
fn mask_elements(s: &StepShape) -> u64 {
    let seq = s.prompt + s.completion;
    s.seqs * seq * seq
}

/// The mask the model builds, in its dtype (an fp32 model's float mask is fp32).
fn kept_mask(s: &StepShape) -> u64 {
    let fp32 = if s.fp32_weights && s.mask == AttentionMask::Float {
        2
    } else {
        1
    };
    mask_elements(s) * s.mask.kept_element() * fp32
}

/// Autocast's bf16 copies of one layer's fp32 LoRA weights: under `torch.autocast` a leaf fp32
/// tensor that requires grad is cast once per autocast region and the copy cached until the
/// region exits (torch 2.9 `aten/src/ATen/autocast_mode.cpp` `cached_cast`: `arg.is_leaf() &&
/// arg.requires_grad()`, cleared when the outermost region exits). `torch.utils.checkpoint`
/// re-enters autocast for the recompute (`CheckpointFunction.backward` restores
/// `cpu_autocast_kwargs` / `device_autocast_kwargs`), so the recomputed layer's adapters are
/// cast again and their copies live until its forward returns: 2 r (fan_in + fan_out) bytes a
/// targeted projection. PEFT keeps the adapters fp32 (`autocast_adapter_dtype=True`) unless the
/// trainer casts them to bf16 (`kbit_cast::adapter_element_bytes`), when there is nothing to
/// cast. At Qwen2.5-7B, rank 16, every projection: 2.9 MB.
pub fn lora_casts_at_recompute(arch: &Arch, targets: &[bool], s: &StepShape) -> u64 {
    if !s.fp32_adapters {
        return 0;
    }
    arch.projections()
        .iter()
        .zip(targets)
        .filter(|(_, on)| **on)
        .map(|(p, _)| 2 * s.rank * (p.fan_in + p.fan_out))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::contract::release::Release;

    fn traced_shape(mask: AttentionMask, fp32_adapters: bool) -> StepShape {
        StepShape {
            mask,
            attention: Attention::Sdpa,
            fp32_adapters,
            ..super::super::shape::test_shape()
        }
    }

    fn example_versions() -> crate::run::versions::StackVersions {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch
            .clone();
        crate::run::RunConfig::example(arch).versions
    }

    /// `masking_utils` from transformers 4.53 (4.52.4's Qwen2 still calls
    /// `_prepare_4d_causal_attention_mask_with_cache_position`, 4.53.1's `create_causal_mask`).
    #[test]
    fn transformers_builds_a_bool_mask_from_4_53() {
        let mut v = example_versions();
        for (release, bool_mask) in [("4.50.3", false), ("4.52.4", false), ("4.53.1", true)] {
            v.transformers = Release::parse(release).expect("release");
            assert_eq!(v.transformers_bool_mask(), bool_mask, "{release}");
        }
        v.transformers = Release::parse("5.20.0").expect("release");
        assert!(v.transformers_bool_mask());
    }

    /// The trainer's checkpointed step holds both at the recompute (and at full fine-tuning's
    /// first-layer moment); without checkpointing, every layer's bf16 mask and copies.
    #[test]
    fn the_checkpointed_step_holds_the_mask_and_the_adapter_copies() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let all = vec![true; arch.projections().len()];
        let none = vec![false; arch.projections().len()];
        let long = |mask, fp32_adapters, checkpointing| StepShape {
            seqs: 8,
            prompt: 3072,
            completion: 1024,
            rank: 16,
            checkpointing,
            // TRL 1.x's fused head: no micro-batch logits outweigh the recompute
            fused_logits: true,
            ..traced_shape(mask, fp32_adapters)
        };
        let peak = |targets: &[bool], s: &StepShape| {
            let p = super::super::trl::trl_step(arch, targets, s);
            (p.activations + p.logits, p.first_layer)
        };
        let bare = long(AttentionMask::None, false, true);
        let padded = long(AttentionMask::BoolConverted, true, true);
        let extra = mask_at_recompute(&padded) + lora_casts_at_recompute(arch, &all, &padded);
        assert_eq!(extra, 8 * 4096 * 4096 * 3 + 2 * 16 * 90_112);
        let (with, without) = (peak(&all, &padded), peak(&all, &bare));
        assert_eq!(with.0 - without.0, extra);
        assert_eq!(with.1 - without.1, extra);
        // full fine-tuning: the mask only
        let (with, without) = (peak(&none, &padded), peak(&none, &bare));
        assert_eq!(with.1 - without.1, mask_at_recompute(&padded));
        // without checkpointing every layer keeps its bf16 mask and adapter copies: 28 x 271 MB
        let (with, without) = (
            peak(&all, &long(AttentionMask::BoolConverted, true, false)),
            peak(&all, &long(AttentionMask::None, false, false)),
        );
        assert_eq!(
            with.0 - without.0,
            28 * (8 * 4096 * 4096 * 2 + 2 * 16 * 90_112)
        );
    }

    /// TRL 0.14 hands its log-prob forwards no attention mask, so the model builds none; 0.15 on
    /// pass the batch's.
    #[test]
    fn trl_0_14_builds_no_mask() {
        let mut v = example_versions();
        for (release, passes) in [("0.14.0", false), ("0.15.2", true), ("1.16.0", true)] {
            v.trl = Release::parse(release).expect("release");
            assert_eq!(v.trl_passes_attention_mask(), passes, "{release}");
        }
    }

    /// Without checkpointing each layer keeps its own bf16 conversion of the mask and its
    /// adapters' bf16 copies, the float mask once: trl 0.19.1 qwen2 `no_gc` at 4 x 59 (`where`
    /// 27,848 B x 2), 0.16.1 (`clone` 27,848 B x 1).
    #[test]
    fn without_checkpointing_every_layer_keeps_its_mask_and_adapter_copies() {
        let tiny = tiny_qwen2();
        let all = vec![true; tiny.projections().len()];
        let copies = 2_048 * 9 + 5_632 * 3 + 1_024 * 2;
        let no_gc = |mask| StepShape {
            checkpointing: false,
            prompt: 27,
            ..traced_shape(mask, true)
        };
        let bool_mask = no_gc(AttentionMask::BoolConverted);
        assert_eq!(
            held_without_checkpointing(&tiny, &all, &bool_mask, 2),
            2 * 27_848 + 2 * copies
        );
        let float = no_gc(AttentionMask::Float);
        assert_eq!(
            held_without_checkpointing(&tiny, &all, &float, 2),
            27_848 + 2 * copies
        );
        // the step holds every layer's, beside what it held without them
        let bare = StepShape {
            fp32_adapters: false,
            ..no_gc(AttentionMask::None)
        };
        let (with, without) = (
            super::super::trl::trl_step(&tiny, &all, &bool_mask),
            super::super::trl::trl_step(&tiny, &all, &bare),
        );
        assert_eq!(
            with.activations + with.logits - without.activations - without.logits,
            2 * 27_848 + 2 * copies
        );
        assert_eq!(with.first_layer - without.first_layer, 27_848 + copies);
    }

    /// trl 0.19.1 qwen2 `iterations2` (transformers 4.53.1), 4 x 60: `bitwise_and` 14,400 B and
    /// `where` 28,800 B; trl 0.16.1 (4.50.3) at 4 x 59: `clone` 27,848 B.
    #[test]
    fn the_mask_follows_the_transformers_release() {
        let s = traced_shape(AttentionMask::BoolConverted, true);
        assert_eq!(mask_at_recompute(&s), 14_400 + 28_800);
        let older = StepShape {
            mask: AttentionMask::Float,
            prompt: 27,
            ..s
        };
        assert_eq!(mask_at_recompute(&older), 27_848);
        // an fp32 model's embeddings give 4.52's float mask their dtype; 4.53's conversion
        // follows the query, which SDPA gets in bf16 under autocast
        let fp32 = |s: StepShape| StepShape {
            fp32_weights: true,
            ..s
        };
        assert_eq!(mask_at_recompute(&fp32(older)), 2 * 27_848);
        assert_eq!(mask_at_recompute(&fp32(s)), 14_400 + 28_800);
        let harness = StepShape {
            mask: AttentionMask::None,
            ..s
        };
        assert_eq!(mask_at_recompute(&harness), 0);
        // 8 x 4096 on 4.53+: 134 MB bool + 268 MB bf16
        let long = StepShape {
            seqs: 8,
            prompt: 3072,
            completion: 1024,
            ..s
        };
        assert_eq!(mask_at_recompute(&long), 8 * 4096 * 4096 * 3);
    }

    /// Eager attention keeps each layer's fp32 softmax and its bf16 copy: trl 1.15.0 qwen2
    /// `eager_no_gc` at 4 x 59, `_softmax` 222,784 B and `_to_copy` 111,392 B a layer (4 heads);
    /// every layer's without checkpointing, none for SDPA or flash attention.
    #[test]
    fn eager_attention_keeps_every_layers_weights() {
        let tiny = tiny_qwen2();
        let none = vec![false; tiny.projections().len()];
        let sdpa = StepShape {
            prompt: 27,
            checkpointing: false,
            ..traced_shape(AttentionMask::Float, false)
        };
        let eager = StepShape {
            attention: Attention::Eager,
            ..sdpa
        };
        assert_eq!(eager_weights(&tiny, &eager), 222_784 + 111_392);
        assert_eq!(eager_weights(&tiny, &sdpa), 0);
        let flash = StepShape {
            attention: Attention::Flash(2),
            ..sdpa
        };
        assert_eq!(eager_weights(&tiny, &flash), 0);
        assert_eq!(
            held_without_checkpointing(&tiny, &none, &eager, 2)
                - held_without_checkpointing(&tiny, &none, &sdpa, 2),
            2 * (222_784 + 111_392)
        );
        // Qwen2.5-7B (28 heads), 8 x 4096: 22.5 GB a layer
        let q7 = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let long = StepShape {
            seqs: 8,
            prompt: 3072,
            completion: 1024,
            ..eager
        };
        assert_eq!(eager_weights(q7, &long), 8 * 28 * 4096 * 4096 * 6);
    }

    /// The tiny Qwen2 of the traces (hidden 128, intermediate 352, 4 x 32 query and 2 x 32 KV
    /// heads), rank 8 on every projection: `_to_copy` 2,048 B x 9, 5,632 B x 3, 1,024 B x 2.
    fn tiny_qwen2() -> Arch {
        crate::arch::config_json::parse(
            &serde_json::json!({
                "model_type": "qwen2", "hidden_size": 128, "intermediate_size": 352,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 32, "vocab_size": 964, "tie_word_embeddings": false,
                "max_position_embeddings": 512
            }),
            "qwen2",
        )
        .expect("tiny config")
    }

    #[test]
    fn the_recomputed_layer_casts_its_fp32_adapters_once() {
        let tiny = tiny_qwen2();
        let all = vec![true; tiny.projections().len()];
        let s = traced_shape(AttentionMask::BoolConverted, true);
        assert_eq!(
            lora_casts_at_recompute(&tiny, &all, &s),
            2_048 * 9 + 5_632 * 3 + 1_024 * 2
        );
        // bf16 adapters (TRL's cast of a quantised model's) need no copy
        let bf16 = traced_shape(AttentionMask::BoolConverted, false);
        assert_eq!(lora_casts_at_recompute(&tiny, &all, &bf16), 0);
        // Qwen2.5-7B, rank 16: 2 x 16 x 90,112 B a layer
        let q7 = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let s7 = StepShape { rank: 16, ..s };
        let all7 = vec![true; q7.projections().len()];
        assert_eq!(lora_casts_at_recompute(q7, &all7, &s7), 2 * 16 * 90_112);
    }
}
