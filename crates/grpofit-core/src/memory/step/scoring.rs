//! The `trl` step's no-grad passes over the model: the scoring before training (old and
//! reference log-probs), trl 0.19's reference over the whole generation batch, and trl 0.14's
//! reference pass inside the step. Each returns what the pass holds at its peak; `trl::trl_step`
//! sets it beside what the step holds then.

use super::shape::{Logits, StepPeak, StepShape};
use crate::arch::Arch;

/// TRL 0.14's reference pass, inside the step (`StepShape::row_log_softmax`): trl 0.14.0
/// `compute_loss` calls its local `get_per_token_logps(ref_model, ...)` (or the policy's under
/// `disable_adapter()`) under `torch.inference_mode()` while the policy's saved set and its
/// per-row log-softmax outputs (`logits.copy`) are held. That call is `model(input_ids,
/// num_logits_to_keep=...)`: no `use_cache=False`, so transformers 4.48.1 (`Phi3Model.forward`,
/// `Qwen2Model.forward`: `if use_cache and past_key_values is None: past_key_values =
/// DynamicCache()`) keeps every layer's rotated key and its value in a `DynamicCache`
/// (`update` appends the tensors themselves) until the output is dropped. The cache is off only
/// where `self.gradient_checkpointing and self.training`: the LoRA policy (train mode) with
/// checkpointing; a full fine-tuning reference model is `create_reference_model`'s
/// `deepcopy(model).eval()` and keeps it. Per layer and token the cache holds the key (2 KV) and
/// the value's storage: Phi-3's value is a view into the fused `qkv_proj` output
/// (`qkv[..., query_pos + ...:]`), which it keeps whole (2 (Q + 2 KV)); else 2 KV. Beside it the
/// pass peaks at the larger of:
/// - its logits: the head's bf16 output and accelerate's fp32 cast of it;
/// - the last layer's MLP, nothing saved: the embedding (`inputs_embeds`, held by the model's
///   forward), the layer's input, its residual and normed input (2 H each), and `Phi3MLP`'s
///   `gate_up_proj` output (4 I, held by the local `up_states` while `gate` is a view into it)
///   beside the activation and the product (2 I each); Qwen2's `down_proj(act_fn(gate_proj(x)) *
///   up_proj(x))` frees the gate once activated: up, activation and product, 6 I.
///
/// Traced (trl 0.14.0, at_peak scoring): qwen2 `no_gc` / `full` / `full_no_gc` peak at the
/// logits (`to` 1,017,984 fp32, `linear` 508,992 bf16) beside the cache (`add` 61,440 x 2 keys,
/// `linear` 61,440 x 2 values), which LoRA with checkpointing lacks (`base`); phi3 `no_gc` at the
/// second layer's MLP (`linear` 675,840, `silu` and `mul` 337,920, `embedding` and `add`
/// 122,880 x 2, `mul` 122,880) beside its cache (`linear` 245,760 x 2, the whole qkv outputs,
/// and `add` 61,440 x 2): -6.2 % without it.
///
/// Returns (the pass with the rows, the cache): the step shows the cache with the activations.
pub(super) fn in_step_reference(
    arch: &Arch,
    s: &StepShape,
    logits: &Logits,
    cache: bool,
) -> (u64, u64) {
    let tokens = s.seqs * (s.prompt + s.completion);
    let (h, i, kv) = (arch.hidden, arch.intermediate, arch.kv_dim());
    let fused = arch.family.fused_projections();
    let value = if fused {
        2 * (arch.q_dim() + 2 * kv)
    } else {
        2 * kv
    };
    let cache = if cache {
        arch.layers * tokens * (2 * kv + value)
    } else {
        0
    };
    let mlp = if fused { 8 * i } else { 6 * i };
    let layer = tokens * (4 * 2 * h + mlp);
    (
        logits.copy + (logits.cast_from + logits.head).max(layer),
        cache,
    )
}

/// The no-grad scoring before training (trl 1.15.0 `_generate_and_score_completions`): old
/// log-probs, and reference log-probs with the adapter disabled when `beta > 0`, in chunks of
/// `per_device_train_batch_size` rows, with gradient checkpointing switched off. Nothing is
/// saved for a backward, so the peak is one layer's working set (residual stream, normed input,
/// PEFT's fp32 copy of a projection's input, the MLP's gate, up and product), or the final
/// norm's output and the fused head's forward, beside autocast's copies of fp32 trained weights
/// (`trl::Fp32Weights`, `fp32_casts`). Read from the wheel; traced on CPU.
pub(super) fn trl_scoring_pass(
    arch: &Arch,
    s: &StepShape,
    logits: &Logits,
    fp32_casts: u64,
) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let scoring = logits.gathered + logits.tile + logits.stats;
    // the policy's fp32 weights still require grad under no_grad, so autocast caches their bf16
    // copies through this forward too (traced 1.15.0 `full_fp32_beta`, at_peak scoring: every
    // projection's and the head's `_to_copy`); the reference model's require none
    StepPeak::larger_moment(
        no_grad_layer(arch, tokens) + fp32_casts,
        (final_norm_output(arch, tokens) + fp32_casts, scoring),
    )
}

/// trl 0.19.1's reference pass (N4, `StackVersions::trl_reference_over_generation_batch`): one
/// no-grad forward over all `scoring_rows`, its logits fp32 as the trainer returns them
/// (`shape::logits_element`). The peak is the larger of a layer's working set over every row
/// (as [`trl_scoring_pass`]) and the logits' moments: the head's bf16 output with its fp32 cast,
/// then the fp32 output with its temperature copy, beside the final norm's output.
pub(super) fn whole_batch_reference(arch: &Arch, s: &StepShape) -> StepPeak {
    let rows = StepShape {
        seqs: s.scoring_rows,
        ..*s
    };
    let tokens = rows.seqs * (s.prompt + s.completion);
    let lg = Logits::new(arch, &rows);
    let logits = (lg.cast_from + lg.head).max(lg.head + lg.copy);
    StepPeak::larger_moment(
        no_grad_layer(arch, tokens),
        (final_norm_output(arch, tokens), logits),
    )
}

/// One decoder layer's working set in a no-grad forward, nothing saved: the residual stream and
/// the normed input (2 H each), PEFT's fp32 copy of the widest projection input (4 max(I, H)),
/// and the MLP's gate, up and product (2 I each).
fn no_grad_layer(arch: &Arch, tokens: u64) -> u64 {
    let widest_input = arch.intermediate.max(arch.hidden);
    tokens * (2 * arch.hidden * 2 + widest_input * 4 + 3 * arch.intermediate * 2)
}

/// The final norm's moment before the head: it keeps its fp32 input (4 H), and the normed bf16
/// output (2 H) feeds the head.
pub(super) fn final_norm_output(arch: &Arch, tokens: u64) -> u64 {
    tokens * arch.hidden * 6
}
