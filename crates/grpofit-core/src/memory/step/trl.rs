//! One GRPO training step of the `trl` stack (transformers + PEFT + TRL), analytically:
//! which large tensors exist, in which order they come and go, and so what PyTorch's
//! `max_memory_allocated()` and `max_memory_reserved()` report.
//!
//! Evidence: allocator traces of the calibration step (calibration/measure.py) (`torch.cuda.memory._record_memory_history`,
//! recorded on the H200 on 2026-11-29, `tools/calibration/extend.py`), summarised in
//! `calibration/README.md`. The forward peak comes while the entropy of the logits is computed
//! in 128-row chunks; with checkpointing the backward peak comes while the last layer is recomputed.

use super::dropout::AdapterDropout;
use super::recompute;
use super::replay;
use super::scoring::{
    final_norm_output, in_step_reference, trl_scoring_pass, whole_batch_reference,
};
use super::shape::{Logits, StepPath, StepPeak, StepShape, layer_tensors, trained_weight_inputs};
use crate::arch::Arch;
use crate::run::versions::LigerLoss;

/// The step's peak, for the `trl` stack.
pub fn trl_step(arch: &Arch, targets: &[bool], s: &StepShape) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let hidden = tokens * arch.hidden * 2;
    let layer = layer_tensors(arch, targets, s.rank, s.quantised_base, s.path, s.attention);
    // full fine-tuning (no adapter): the trained weights' inputs too
    let full = !targets.iter().any(|t| *t);
    let trained_inputs = if full { trained_weight_inputs(arch) } else { 0 };
    let casts = Fp32Weights::of(arch, s);
    let dropout = s.dropout.saved_per_token(arch, targets);
    let layer_bytes = (layer.per_token() + trained_inputs + casts.wider_saved + dropout) * tokens;
    let logits = Logits::new(arch, s);
    let final_norm = final_norm_output(arch, tokens);
    // With beta > 0, two hidden-state-sized bf16 tensors of the reference pass outlive it (trace).
    let residue = if s.reference_pass { 2 * hidden } else { 0 };
    let stored = if s.checkpointing {
        arch.layers * (hidden + casts.wider_residual * tokens)
    } else {
        arch.layers * layer_bytes
            - frozen_input_norm(arch, full, tokens)
            - s.dropout.unsaved_in_first_layer(arch, targets) * tokens
            + recompute::held_without_checkpointing(arch, targets, s, arch.layers)
    };
    let (logits_peak, copy_grad, forward_casts) = logits_moment(arch, targets, s, &logits, &casts);
    let forward = stored + final_norm + logits_peak + residue + forward_casts;
    // the trainer's recompute also holds the padded batch's attention mask and autocast's copies
    // of the layer's fp32 adapters ([`recompute`]); without checkpointing the first layer's
    // backward holds its own (`stored` has every layer's)
    let at_recompute = if s.checkpointing {
        recompute::mask_at_recompute(s)
            + recompute::lora_casts_at_recompute(arch, targets, s)
            + recompute::eager_weights(arch, s)
    } else {
        recompute::held_without_checkpointing(arch, targets, s, 1)
    } + recompute::eager_backward_transient(arch, s);
    let backward = if s.checkpointing {
        stored
            + residue
            + recomputed_layer(arch, targets, tokens, layer_bytes, s.path, s.dropout)
            + copy_grad
            + casts.layer
            + at_recompute
    } else {
        0
    };
    let activations = forward.max(backward) - if forward >= backward { logits_peak } else { 0 };
    // the Liger loss's chunks are replayed as the fused head's tiles: both hold no micro-batch
    // logits, and the reserved peak then follows the chunked step, not the materialised one
    let reserved = if s.liger != LigerLoss::Off {
        let chunked = StepShape {
            fused_logits: true,
            ..*s
        };
        replay::replay(
            arch,
            targets,
            tokens,
            &Logits::new(arch, &chunked),
            &chunked,
        )
        .peak_reserved
    } else {
        replay::replay(arch, targets, tokens, &logits, s).peak_reserved
    };
    // the first layer's backward: its own checkpoint, its saved set and the gradients it makes
    let first_layer = if s.checkpointing { hidden } else { 0 }
        + layer_gradients(arch, tokens, layer_bytes, s.path)
        + casts.layer
        + at_recompute;
    let step = StepPeak {
        activations,
        logits: if forward >= backward { logits_peak } else { 0 },
        reserved,
        first_layer,
    };
    if s.scoring_rows == 0 {
        return step;
    }
    let scoring = if s.fused_logits {
        trl_scoring_pass(arch, s, &logits, casts.all)
    } else {
        whole_batch_reference(arch, s)
    };
    let reserved = step.reserved.max(scoring.activations + scoring.logits);
    if scoring.activations + scoring.logits > step.activations + step.logits {
        StepPeak {
            reserved,
            first_layer: step.first_layer,
            ..scoring
        }
    } else {
        StepPeak { reserved, ..step }
    }
}

/// What the first decoder layer's input norm does not save when nothing before it needs a
/// gradient: LoRA freezes the embedding (peft `get_peft_model`), and its output requires grad
/// only where `enable_input_require_grads` hooks it, which trl 0.16.1
/// `_enable_gradient_checkpointing`, trl 1.15.0 `GRPOTrainer.__init__` (`if is_peft_model(model)
/// and args.gradient_checkpointing`) and `calibration/measure.py` (`if c["gc"]`) do only with
/// checkpointing (0.14 / 0.15 never). The RMSNorm's `hidden_states.to(torch.float32)`, `pow` and
/// `mul` then save nothing (autograd saves an input only for a gradient that is needed, and the
/// norm's weight is frozen too): 4 H a token less than the other norms. Full fine-tuning trains
/// the embedding, and checkpointing stores only the layers' inputs. Traced (no_gc, LoRA, trl
/// 0.14.0 to 0.19.1 qwen2: 4 fp32 H-wide `_to_copy` at the peak for 2 layers' 4 norms and the
/// final one; 5 with `full_no_gc`; reproduced with transformers 4.48.1 and peft 0.14.0 under CPU
/// autocast): every LoRA `no_gc` record was 0.7 to 2.5 % over.
fn frozen_input_norm(arch: &Arch, full: bool, tokens: u64) -> u64 {
    if full { 0 } else { tokens * arch.hidden * 4 }
}

/// Full fine-tuning of float32 weights under the trainer's bf16 autocast (TRL 0.27+ loads a model
/// named by path in float32: trl 1.15.0 `create_model_from_path`, `kwargs.get("dtype",
/// "float32")`, TRL PR #4778). accelerate 1.12.0 `Accelerator.prepare_model` wraps the model's
/// `forward` in `torch.autocast` (bf16 under mixed precision); torch 2.9 autocast
/// (`aten/src/ATen/autocast_mode.cpp` `cached_cast`) caches the bf16 cast of every weight that is
/// a leaf requiring grad (`arg.is_leaf() && arg.requires_grad()`, the cache on by default) until
/// the outermost autocast region exits (`clear_cache` when the nesting reaches 0). So:
/// - every projection's and the head's bf16 copy (2 bytes a parameter; the embedding is looked
///   up, not cast) is live while the forward runs, and the matmuls save them for the backward
///   where nothing is checkpointed. With checkpointing, once the forward returns only the head's
///   copy (saved by its matmul) stays, and the recomputed layer's weights are cast again (its
///   own autocast region, `torch.utils.checkpoint`).
/// - the residual stream is float32 (the embedding of fp32 weights is fp32, and the residual
///   adds promote the bf16 outputs): each stored checkpoint holds 4 bytes an element, not 2;
///   and a layer's saved set grows by 8 H + 2 q_dim bytes a token (traced `full_fp32_no_gc`
///   against `full_no_gc`, trl 1.15.0 qwen2 at_peak): each norm's normalised product is saved in
///   fp32 (`mul`, 4 H, for the norm weight's gradient, not a bf16 `_to_copy`: +2 H each); the
///   norm's fp32 output is cast by q, k, v, gate and up each on its own, each saving its cast
///   (`_to_copy` 2 H x 5, where a bf16 output is one shared 2 H per norm: +6 H); the rotary
///   embedding's cos and sin come in the hidden states' dtype (fp32), so the query and the
///   repeated key reach SDPA in fp32 and autocast saves their bf16 casts (2 q_dim each) where
///   bf16 saves repeat_kv's key and value clones (+2 q_dim); the residual add's output is the
///   next norm's saved input, no bf16 add beside an fp32 upcast (-2 H).
///
/// Traced (trl 0.26.2 and 1.15.0 qwen2 `full_fp32` / `full_fp32_no_gc`, 1.15.0 llama
/// `full_fp32`, `autocast` cache on): `at_peak` holds a `_to_copy` of every projection and of
/// the head, and fp32 `embedding` / `add` outputs. LoRA's frozen base weights require no grad and
/// are not cached; bf16 weights need no cast.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fp32Weights {
    /// every projection's and the head's bf16 copy
    pub all: u64,
    /// the head's copy
    pub head: u64,
    /// one layer's projections' copies
    pub layer: u64,
    /// bytes a token a stored checkpoint holds beyond the bf16 hidden state
    pub wider_residual: u64,
    /// bytes a token one layer saves beyond its bf16-residual saved set
    pub wider_saved: u64,
}

impl Fp32Weights {
    pub fn of(arch: &Arch, s: &StepShape) -> Fp32Weights {
        if !s.fp32_weights {
            return Fp32Weights::default();
        }
        let layer: u64 = arch
            .projections()
            .iter()
            .map(|p| 2 * p.fan_in * p.fan_out)
            .sum();
        let head = 2 * arch.vocab * arch.hidden;
        Fp32Weights {
            all: arch.layers * layer + head,
            head,
            layer,
            wider_residual: 2 * arch.hidden,
            wider_saved: 8 * arch.hidden + 2 * arch.q_dim(),
        }
    }
}

/// The checkpointed backward's peak above the stored checkpoints: the last layer recomputed.
/// - The trainer, with LoRA on `down_proj` (N1's remainder): the end of the recomputed forward,
///   in `down_proj`'s adapter. peft 0.16.0 `tuners/lora/layer.py` `Linear.forward` runs
///   `result = self.base_layer(x)`, then `x = self._cast_input_dtype(x, lora_A.weight.dtype)` (an
///   fp32 copy of the `act * up` product, which the local `x` holds until the forward returns)
///   and `result = result + lora_B(lora_A(dropout(x))) * scaling`. Live beside the layer's saved
///   set: that fp32 copy (4 I), the product itself (2 I, saved by nothing: the frozen weight's
///   `mm` keeps no input), the MLP's normed input and the residual the decoder layer holds
///   (2 H each), the frozen output, `lora_B`'s output and its scaled copy (2 H each). Traced
///   (`at_peak` `ops`: ... `mm`, `_to_copy` 4 I, `_to_copy` 2 I, `mm`, `mm`, `mul`): trl 0.16.1
///   to 0.26.2 qwen2, and 0.19.1 phi3 and gemma3, all peak there.
///   With the adapters' dropout ([`AdapterDropout`]) the peak comes earlier, at `lora_A`'s `mm`:
///   `native_dropout`'s fp32 output (4 I) beside the fp32 copy, its mask and autocast's bf16
///   copy of it (both saved), the product and three 2 H tensors (traced: trl 0.19.1 and 1.0.0
///   qwen2 and llama `dropout`, at_peak `ops`: ... `_to_copy` 4 I, `native_dropout` 4 I + I,
///   `_to_copy` 2 I, `mm`).
/// - Otherwise the layer's own backward ([`layer_gradients`]).
fn recomputed_layer(
    arch: &Arch,
    targets: &[bool],
    tokens: u64,
    layer_bytes: u64,
    path: StepPath,
    dropout: AdapterDropout,
) -> u64 {
    let (h, i) = (arch.hidden, arch.intermediate);
    let down_adapter = arch
        .projections()
        .iter()
        .zip(targets)
        .any(|(p, on)| *on && p.name == "down_proj");
    if path == StepPath::Trainer && down_adapter {
        let end = 4 * i + 2 * i + 5 * 2 * h;
        // with dropout the moment before comes first: `lora_A`'s matmul, with the fp32 copy,
        // its dropped fp32 output (4 I), the product and three of the 2 H tensors live, not yet
        // `lora_B`'s output and its scaled copy
        let dropped = if dropout == AdapterDropout::Off {
            0
        } else {
            4 * i + 4 * i + 2 * i + 3 * 2 * h
        };
        return layer_bytes + tokens * end.max(dropped);
    }
    layer_gradients(arch, tokens, layer_bytes, path)
}

/// A decoder layer's backward beside its saved set: the gradient of the down projection's input
/// and the incoming gradient, `(I + H) 4` a token, and on the harness a fused `gate_up`
/// gradient (`4 I`; the harness's H200 allocator traces, this module's evidence).
///
/// On the trainer's path a fused MLP adds nothing over separate projections. transformers 4.48
/// to 4.50 `Phi3MLP.forward` (`gate, up_states = up_states.chunk(2, dim=-1)`; `up_states =
/// up_states * self.activation_fn(gate)`): the layer's backward peaks in the product's `mul`
/// backward, where the `gate_up_proj` output (4 I, alive through the chunk's views that `silu`
/// and `mul` saved), the activation, the product's gradient and its two operands' gradients
/// are live: 4 I + 4 x 2 I, the same bytes as Qwen2's separate gate and up (2 I each) beside the
/// same four. The chunk's backward (`cat` of the two 2 I gradients into 4 I) comes after `silu`
/// and `mul` have released the output. Traced (trl 0.14.0 and 0.15.2 phi3 `full`, at_peak
/// backward of the first layer, per token: `mm` 4 I, `silu` 2 I, `mul` 2 I x 2, `mm` 2 I, no
/// `cat` 4 I; qwen2 `full`: `mm` 2 I x 3, `silu` 2 I, `mul` 2 I x 2): the fused term put these
/// records 3.5 and 5.5 % over.
fn layer_gradients(arch: &Arch, tokens: u64, layer_bytes: u64, path: StepPath) -> u64 {
    let (h, i) = (arch.hidden, arch.intermediate);
    let fused = if arch.family.fused_projections() && path == StepPath::Harness {
        tokens * i * 4
    } else {
        0
    };
    layer_bytes + tokens * (i + h) * 4 + fused
}

/// The gradients that exist when the first decoder layer's MLP backward runs, of `all` the
/// step's gradients (full fine-tuning): every parameter's but the input embedding's (untied:
/// its backward comes last) and the first layer's, whose `down_proj` has just been made.
/// Traced (trl 0.16.1 to 0.26.2 qwen2 `full`, at_peak `ops`: layer 0's `mm` for `down_proj`'s
/// weight gradient, then `mm` 2 I and `mul` 2 I for its input's and the product's; `mm` of the
/// head's, layer 1's and that `down_proj`'s weight gradients live): with 2 layers the step peaks
/// there, not at the logits, which precede every gradient. In a larger model the first layer's
/// moment holds nearly every gradient beside one layer's activations.
pub fn gradients_before_first_layer(arch: &Arch, all: u64) -> u64 {
    let params = arch.parameters();
    let embedding = if arch.tied_embeddings {
        0
    } else {
        arch.vocab * arch.hidden
    };
    let down = arch
        .projections()
        .iter()
        .find(|p| p.name == "down_proj")
        .map_or(0, |p| p.fan_in * p.fan_out);
    let before = params.saturating_sub(embedding + arch.layer_parameters()) + down;
    (u128::from(all) * u128::from(before) / u128::from(params.max(1))) as u64
}

/// The logits' moment of the step (the head's output or its chunks, with the head's weight
/// gradient where the head trains), and the bf16 gradient of PEFT's head copy, which outlives it.
fn logits_moment(
    arch: &Arch,
    targets: &[bool],
    s: &StepShape,
    logits: &Logits,
    casts: &Fp32Weights,
) -> (u64, u64, u64) {
    // Full fine-tuning (no adapter) trains the head too, and so does PEFT's trainable copy of it
    // (`modules_to_save`): `ChunkedLogProbFunction.backward` (trl 1.15.0
    // kernels/chunked_logprob.py) fills an fp32 `grad_weight` (V x H) and returns it cast to
    // bf16, both live at once. Under DDP the bf16 copy becomes the `.grad` the static gradients
    // already count (2 V H over there). Traced (qwen2 `modules_to_save`, trl 1.15.0): the
    // backward's peak is the base run's plus the copy's static states plus exactly 6 V H.
    let head_trained = s.head_copy || !targets.iter().any(|t| *t);
    let head_grad = if s.fused_logits && head_trained {
        6 * arch.vocab * arch.hidden
    } else {
        0
    };
    // The head copy's bf16 `.grad` (2 V H) is made by the logits' backward and stays until the
    // optimizer step, through the recomputed layers' backward; the loss's forward (its entropy
    // chunks) comes before it. Traced (qwen2 `modules_to_save`, trl 0.19.1, 1.0.0, 1.14.2): the
    // loss forward's peak is the base run's plus the copy's static states, the backward's plus
    // 2 V H more. So with checkpointing it joins the recomputation's moment; without, the
    // logits' moment (whose backward comes while every saved tensor is live).
    let copy_grad = if s.head_copy {
        2 * arch.vocab * arch.hidden
    } else {
        0
    };
    let at_logits = if s.checkpointing { 0 } else { copy_grad };
    // the fp32 weights' bf16 copies after the forward returns: all, saved by the matmuls, or with
    // checkpointing only the head's ([`Fp32Weights`])
    let saved_casts = if s.checkpointing {
        casts.head
    } else {
        casts.all
    };
    if s.fused_logits {
        // the fused head's forward runs inside the model's forward (autocast's cache full), its
        // backward after it
        let (f, b) = logits.fused_moments();
        return (
            (f + casts.all).max(b + head_grad + saved_casts),
            copy_grad,
            0,
        );
    }
    let peak = if s.liger != LigerLoss::Off {
        // N8: the Liger loss builds no micro-batch logits, only its chunk's
        super::liger::liger_peak(arch, s, head_trained) + at_logits
    } else if s.row_log_softmax {
        // TRL 0.14: the reference pass runs inside the step, beside the policy's saved set; its
        // KV cache is shown with the activations
        let softcap = if arch.final_logit_softcapping {
            logits.head
        } else {
            0
        };
        let policy = logits.peak(s, arch.final_logit_softcapping);
        let keeps_cache = !targets.iter().any(|t| *t) || !s.checkpointing;
        let (pass, cache) = in_step_reference(arch, s, logits, keeps_cache);
        if pass + softcap + cache > policy {
            return (pass + softcap + at_logits, copy_grad, saved_casts + cache);
        }
        policy + at_logits
    } else {
        logits.peak(s, arch.final_logit_softcapping) + at_logits
    };
    (peak, copy_grad, saved_casts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;
    use crate::run::attention::Attention;

    fn shape(scoring_rows: u64) -> StepShape {
        StepShape {
            seqs: 8,
            path: StepPath::Harness,
            prompt: 256,
            completion: 768,
            rank: 16,
            fused_logits: true,
            scoring_rows,
            ..super::super::shape::test_shape()
        }
    }

    /// The scoring pass goes a micro-batch at a time with nothing saved, so it neither grows
    /// with the generation batch nor, for the catalog's models, outgrows a checkpointed step.
    #[test]
    fn trl_scoring_pass_stays_below_a_checkpointed_step() {
        for id in catalog::ids() {
            let arch = &catalog::find(id).expect("catalog id").arch;
            let targets = vec![true; arch.projections().len()];
            let s = shape(8);
            let logits = Logits::new(arch, &s);
            let pass = trl_scoring_pass(arch, &s, &logits, 0);
            let scored = trl_step(arch, &targets, &s);
            let quiet = trl_step(arch, &targets, &shape(0));
            assert_eq!(pass, trl_scoring_pass(arch, &shape(64), &logits, 0));
            assert!(pass.activations + pass.logits > 0);
            assert!(
                pass.activations + pass.logits < quiet.activations + quiet.logits,
                "{}",
                arch.name
            );
            assert_eq!(scored, quiet, "{}", arch.name);
        }
    }

    /// N1's remainder: on the trainer's path the checkpointed backward peaks at the end of the
    /// recomputed forward, in `down_proj`'s adapter (peft `Linear.forward`: the fp32 cast of the
    /// product beside it, the frozen output, `lora_B`'s and its scaled copy); the harness keeps
    /// its measured moment.
    #[test]
    fn the_trainer_s_recomputed_layer_peaks_in_down_proj_s_adapter() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let (h, i, t) = (arch.hidden, arch.intermediate, 8 * 1024);
        let all = vec![true; arch.projections().len()];
        let layer = 1 << 30;
        let trainer =
            recomputed_layer(arch, &all, t, layer, StepPath::Trainer, AdapterDropout::Off);
        assert_eq!(trainer - layer, t * (4 * i + 2 * i + 10 * h));
        let harness =
            recomputed_layer(arch, &all, t, layer, StepPath::Harness, AdapterDropout::Off);
        assert_eq!(harness - layer, t * (i + h) * 4);
        // without an adapter on down_proj there is no fp32 copy of the product
        let mut attention = all.clone();
        attention[6] = false;
        assert_eq!(
            recomputed_layer(
                arch,
                &attention,
                t,
                layer,
                StepPath::Trainer,
                AdapterDropout::Off
            ),
            harness
        );
    }

    /// A fused `gate_up_proj` adds its 4 I gradient on the harness only: on the trainer's path
    /// Phi-3's layer backward peaks in the product's `mul` backward, with the same bytes as
    /// Qwen2's separate gate and up (traced trl 0.14.0 / 0.15.2 phi3 and qwen2 `full`, at_peak
    /// backward), for the recomputed layer and the first layer's backward alike.
    #[test]
    fn a_fused_mlp_adds_its_gradient_on_the_harness_only() {
        let arch = &catalog::find("microsoft/Phi-3-mini-4k-instruct")
            .expect("catalog id")
            .arch;
        assert!(arch.family.fused_projections());
        let (h, i, t) = (arch.hidden, arch.intermediate, 8 * 1024);
        let none = vec![false; arch.projections().len()];
        let layer = 1 << 30;
        let trainer = recomputed_layer(
            arch,
            &none,
            t,
            layer,
            StepPath::Trainer,
            AdapterDropout::Off,
        );
        assert_eq!(trainer - layer, t * (i + h) * 4);
        let harness = recomputed_layer(
            arch,
            &none,
            t,
            layer,
            StepPath::Harness,
            AdapterDropout::Off,
        );
        assert_eq!(harness - trainer, t * i * 4);
        // the full fine-tuning step's first-layer moment follows the same path
        let s = StepShape {
            fused_logits: false,
            path: StepPath::Trainer,
            ..shape(0)
        };
        let tokens = s.seqs * (s.prompt + s.completion);
        let saved = layer_tensors(arch, &none, s.rank, false, StepPath::Trainer, s.attention)
            .per_token()
            + trained_weight_inputs(arch);
        assert_eq!(
            trl_step(arch, &none, &s).first_layer,
            tokens * (2 * h + saved + (i + h) * 4)
        );
    }

    /// TRL 0.14's in-step reference pass keeps its `DynamicCache` (every layer's key, and the
    /// value's storage: Phi-3's whole fused qkv output) beside the larger of its logits and its
    /// last layer's MLP; LoRA with checkpointing runs it in train mode, without the cache
    /// (traced trl 0.14.0 at_peak scoring: phi3 `no_gc` -6.2 %, qwen2 `full_no_gc` -4.3 % without).
    #[test]
    fn trl_0_14_s_reference_pass_keeps_its_cache_beside_the_step() {
        for id in [
            "microsoft/Phi-3-mini-4k-instruct",
            "Qwen/Qwen2.5-7B-Instruct",
        ] {
            let arch = &catalog::find(id).expect("catalog id").arch;
            let (h, i, q, kv) = (arch.hidden, arch.intermediate, arch.q_dim(), arch.kv_dim());
            let s = StepShape {
                path: StepPath::Trainer,
                checkpointing: false,
                fused_logits: false,
                row_log_softmax: true,
                prompt: 27,
                completion: 32,
                ..shape(0)
            };
            let tokens = s.seqs * (s.prompt + s.completion);
            let lg = Logits::new(arch, &s);
            let (value, mlp) = if arch.family.fused_projections() {
                (2 * (q + 2 * kv), 8 * i)
            } else {
                (2 * kv, 6 * i)
            };
            let cache = arch.layers * tokens * (2 * kv + value);
            let rest = (lg.cast_from + lg.head).max(tokens * (8 * h + mlp));
            assert_eq!(
                in_step_reference(arch, &s, &lg, true),
                (lg.copy + rest, cache)
            );
            assert_eq!(in_step_reference(arch, &s, &lg, false), (lg.copy + rest, 0));
            // the step holds the policy's saved set and its final norm beside it
            let targets = vec![true; arch.projections().len()];
            let layer =
                layer_tensors(arch, &targets, s.rank, false, s.path, s.attention).per_token();
            let step = trl_step(arch, &targets, &s);
            // (less the first input norm's, which the frozen embedding spares)
            let beside = arch.layers * tokens * layer - tokens * h * 4 + tokens * h * 6;
            // where the pass is the step's peak: the cache with the activations
            assert!(
                step.activations + step.logits >= beside + lg.copy + cache + rest,
                "{id}"
            );
            assert_eq!(step.logits, lg.copy + rest, "{id}");
            assert_eq!(step.activations, beside + cache, "{id}");
        }
    }

    /// LoRA without checkpointing: the frozen embedding's output needs no gradient, so the first
    /// layer's input norm saves no fp32 input (traced: 4 fp32 H-wide saves for 5 norms); full
    /// fine-tuning trains the embedding and keeps it.
    #[test]
    fn lora_s_first_input_norm_saves_nothing_without_checkpointing() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let s = StepShape {
            checkpointing: false,
            fused_logits: false,
            ..shape(0)
        };
        let t = s.seqs * (s.prompt + s.completion);
        let lora = vec![true; arch.projections().len()];
        let layer = layer_tensors(arch, &lora, s.rank, false, s.path, s.attention).per_token();
        let logits = Logits::new(arch, &s).peak(&s, false);
        let step = trl_step(arch, &lora, &s);
        let saved = arch.layers * t * layer - t * arch.hidden * 4;
        assert_eq!(
            step.activations + step.logits,
            saved + t * arch.hidden * 6 + logits
        );
        assert_eq!(frozen_input_norm(arch, true, t), 0);
    }

    /// Full fine-tuning keeps every trained weight's input: the norms' normalised inputs, their
    /// outputs that feed the projections, and the `act * up` product (traced `full_no_gc`).
    #[test]
    fn full_fine_tuning_saves_the_trained_weights_inputs() {
        let qwen2 = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let (h, i) = (qwen2.hidden, qwen2.intermediate);
        assert_eq!(trained_weight_inputs(qwen2), 2 * 2 * h + 2 * 2 * h + 2 * i);
        let s = StepShape {
            checkpointing: false,
            fused_logits: false,
            ..shape(0)
        };
        let t = s.seqs * (s.prompt + s.completion);
        let none = vec![false; qwen2.projections().len()];
        let full = trl_step(qwen2, &none, &s);
        let without = layer_tensors(qwen2, &none, 16, false, s.path, s.attention).per_token();
        let logits = Logits::new(qwen2, &s).peak(&s, false);
        let stored = qwen2.layers * t * (without + trained_weight_inputs(qwen2));
        assert_eq!(full.activations + full.logits, stored + t * h * 6 + logits);
    }

    /// float32 weights trained under bf16 autocast: torch caches each trained weight's bf16 copy
    /// (`cached_cast`: leaf, requires grad) for the forward, the matmuls save them where nothing
    /// is checkpointed, and the residual stream is fp32 (traced trl 0.26.2 / 1.15.0 `full_fp32`:
    /// at_peak `_to_copy` 90,112 B x 6, 32,768 x 4, 16,384 x 4, the head's 246,784, fp32 `add`).
    #[test]
    fn autocast_keeps_a_bf16_copy_of_every_trained_fp32_weight() {
        let arch = &catalog::find("Qwen/Qwen3-1.7B").expect("catalog id").arch;
        let (h, v) = (arch.hidden, arch.vocab);
        let none = vec![false; arch.projections().len()];
        let fp32 = |checkpointing, fp32_weights| StepShape {
            checkpointing,
            fused_logits: false,
            fp32_weights,
            ..shape(0)
        };
        let casts = Fp32Weights::of(arch, &fp32(true, true));
        let layer: u64 = arch
            .projections()
            .iter()
            .map(|p| p.fan_in * p.fan_out)
            .sum();
        assert_eq!(casts.layer, 2 * layer);
        assert_eq!(casts.head, 2 * v * h);
        assert_eq!(casts.all, arch.layers * 2 * layer + 2 * v * h);
        assert_eq!(
            Fp32Weights::of(arch, &fp32(true, false)),
            Fp32Weights::default()
        );
        let total = |p: StepPeak| p.activations + p.logits;
        // nothing checkpointed: every copy is saved beside the logits
        // and each layer's saved set is wider: fp32 normalised products, each projection's own
        // cast of the fp32 normed input, SDPA's casts of the fp32 rotated query and key
        assert_eq!(casts.wider_saved, 8 * h + 2 * arch.q_dim());
        let s = fp32(true, true);
        let t = s.seqs * (s.prompt + s.completion);
        let (with, without) = (
            trl_step(arch, &none, &fp32(false, true)),
            trl_step(arch, &none, &fp32(false, false)),
        );
        let saved = arch.layers * t * casts.wider_saved;
        assert_eq!(total(with) - total(without), casts.all + saved);
        // checkpointed: the stored layer inputs are fp32, and the recomputed layer's copies
        let (with, without) = (
            trl_step(arch, &none, &s),
            trl_step(arch, &none, &fp32(true, false)),
        );
        let wider = arch.layers * t * 2 * h;
        assert!(total(with) - total(without) >= wider + casts.head.min(casts.layer));
        assert_eq!(
            with.first_layer - without.first_layer,
            casts.layer + t * casts.wider_saved
        );
        // the no-grad scoring forward caches them too
        let logits = Logits::new(arch, &s);
        let scored = |s: &StepShape| {
            total(trl_scoring_pass(
                arch,
                s,
                &logits,
                Fp32Weights::of(arch, s).all,
            ))
        };
        assert_eq!(scored(&s) - scored(&fp32(true, false)), casts.all);
    }

    /// Full fine-tuning: the first layer's backward runs once the head's and every later layer's
    /// gradients exist, and its own down_proj's (traced at_peak, trl 0.19.1 qwen2 `full`).
    #[test]
    fn the_first_layer_s_backward_follows_nearly_every_gradient() {
        // Qwen2.5-7B: 7,615,616,512 parameters, less the input embedding (544,997,376) and one
        // layer (233,057,792), plus its down_proj (18,944 x 3,584 = 67,895,296): 6,905,456,640
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let all = 2 * arch.parameters();
        assert_eq!(gradients_before_first_layer(arch, all), 2 * 6_905_456_640);
        assert_eq!(gradients_before_first_layer(arch, 0), 0);
    }

    /// PEFT's trainable copy of the head (`modules_to_save`): TRL 1.15's fused head makes its
    /// fp32 gradient and the bf16 cast (6 V H, traced); with materialised logits its bf16
    /// gradient (2 V H) joins the backward's moments only: the recomputation's with
    /// checkpointing (which the logits' forward may outweigh), the logits' own without.
    #[test]
    fn a_head_copy_adds_its_gradient_to_the_step() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let targets = vec![true; arch.projections().len()];
        let vh = arch.vocab * arch.hidden;
        let grew = |s: StepShape| {
            let copy = StepShape {
                head_copy: true,
                ..s
            };
            let (a, b) = (
                trl_step(arch, &targets, &s),
                trl_step(arch, &targets, &copy),
            );
            (b.activations + b.logits) - (a.activations + a.logits)
        };
        let fused = grew(shape(0));
        assert!((2 * vh..=6 * vh).contains(&fused), "fused: {fused}");
        let unfused = StepShape {
            fused_logits: false,
            ..shape(0)
        };
        let checkpointed = grew(unfused);
        assert!(checkpointed > 0 && checkpointed <= 2 * vh, "{checkpointed}");
        let without = grew(StepShape {
            checkpointing: false,
            ..unfused
        });
        assert_eq!(without, 2 * vh);
    }

    /// The replay's allocated peak of Qwen2.5-7B without checkpointing, every projection adapted,
    /// at `shape(0)` unfused with `vary` applied: the shape and its tokens beside it.
    fn unchecked_7b_replay(vary: impl Fn(StepShape) -> StepShape) -> (Arch, StepShape, u64, u64) {
        let arch = catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let targets = vec![true; arch.projections().len()];
        let s = vary(StepShape {
            checkpointing: false,
            fused_logits: false,
            ..shape(0)
        });
        let tokens = s.seqs * (s.prompt + s.completion);
        let peak =
            replay::replay(&arch, &targets, tokens, &Logits::new(&arch, &s), &s).peak_allocated;
        (arch, s, tokens, peak)
    }

    /// bitsandbytes' 8-bit matmul keeps its inputs in the replay as in the analytic step: without
    /// checkpointing every layer holds them at the peak.
    #[test]
    fn the_replay_keeps_the_eight_bit_inputs() {
        let peak = |quantised_base| {
            unchecked_7b_replay(|s| StepShape {
                quantised_base,
                ..s
            })
        };
        let ((arch, _, tokens, with), (.., without)) = (peak(true), peak(false));
        let kept = arch.layers * tokens * (4 * arch.hidden + 2 * arch.intermediate);
        assert_eq!(with - without, kept);
    }

    /// Eager attention's kept scores are in the replay as in the analytic step
    /// (`recompute::eager_weights`): without checkpointing every layer's fp32 softmax and its
    /// bf16 copy are live at the peak, so the reserved peak follows them.
    #[test]
    fn the_replay_keeps_eager_attentions_scores() {
        let peak = |attention| unchecked_7b_replay(|s| StepShape { attention, ..s });
        let ((arch, s, _, eager), (.., sdpa)) = (peak(Attention::Eager), peak(Attention::Sdpa));
        let seq = s.prompt + s.completion;
        let scores = s.seqs * arch.heads * seq * seq;
        assert_eq!(eager - sdpa, arch.layers * scores * 6);
    }

    /// The replay (for the reserved peak) and the analytic step (for the allocated peak) walk
    /// the same tensors, so the replay's allocated peak must land near the analytic one. Found
    /// on the catalog: 0 % without checkpointing, +2 to +15 % with it (the replay keeps the
    /// recomputed layer's transients alive a little longer than the analytic peak counts; the
    /// most for Mixtral, whose two active experts make a 28672-wide MLP).
    #[test]
    fn the_replay_tracks_the_analytic_allocated_peak() {
        let mut worst = (0.0f64, String::new());
        let mut lowest = f64::MAX;
        for id in catalog::ids() {
            let arch = &catalog::find(id).expect("catalog id").arch;
            let targets = vec![true; arch.projections().len()];
            for (checkpointing, fused, beta) in [
                (true, true, false),
                (false, false, true),
                (true, false, false),
            ] {
                let s = StepShape {
                    checkpointing,
                    fused_logits: fused,
                    reference_pass: beta,
                    scoring_rows: 0,
                    ..shape(0)
                };
                let tokens = s.seqs * (s.prompt + s.completion);
                let analytic = trl_step(arch, &targets, &s);
                let replayed = replay::replay(arch, &targets, tokens, &Logits::new(arch, &s), &s);
                let a = (analytic.activations + analytic.logits) as f64;
                let err = (replayed.peak_allocated as f64 - a) / a;
                lowest = lowest.min(err);
                if err.abs() > worst.0 {
                    worst = (
                        err.abs(),
                        format!(
                            "{id} gc={checkpointing} fused={fused}: {:+.1} %",
                            err * 100.0
                        ),
                    );
                }
            }
        }
        assert!(worst.0 < 0.20, "worst {}", worst.1);
        assert!(
            lowest > -0.02,
            "the replay's peak falls below the analytic one: {lowest}"
        );
    }
}
