//! The shapes of one micro-batch step and the sizes they imply: the tensors one decoder layer
//! saves per token, the logits-phase tensors, and the step's peak above static memory.

use super::dropout::AdapterDropout;
use crate::arch::Arch;
use crate::run::attention::Attention;
use crate::run::versions::{EntropyChunk, LigerLoss, UnslothLogits};
use crate::run::{Quant, Stack};

/// Shapes of one micro-batch step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepShape {
    /// sequences (completions) in the micro-batch
    pub seqs: u64,
    /// the trainer's step or the calibration harness's ([`StepPath`])
    pub path: StepPath,
    pub prompt: u64,
    pub completion: u64,
    pub rank: u64,
    pub checkpointing: bool,
    pub reference_pass: bool,
    /// the base weights' quantised matmul saves its input too ([`quantised_matmul_saves_input`])
    pub quantised_base: bool,
    pub expandable_segments: bool,
    /// TRL 1.x's fused LM head (`add_fused_lm_head`): log-probabilities computed in tiles, the
    /// micro-batch's logits never materialised. Off: logits materialised in bf16, as TRL 0.x and
    /// the calibration harness (`measure.py`) do.
    pub fused_logits: bool,
    /// PEFT's `modules_to_save` trains a copy of the LM head (`memory::saved_modules`): its
    /// gradient is made in the step
    pub head_copy: bool,
    /// TRL's Liger loss, by release (N8, `memory::step::liger`): the loss's logits never built
    pub liger: LigerLoss,
    /// rows of the generation batch the trainer scores without gradients before training on
    /// them (old and reference log-probs); 0 when it does not
    pub scoring_rows: u64,
    /// free memory when the step runs (Unsloth sizes its mini-batches and logits blocks from it)
    pub free_at_step: u64,
    /// a card of at most 24.5 GiB (Unsloth's tiled log-prob kernel for every row count)
    pub small_card: bool,
    /// how the Unsloth release in force computes the step's log-probabilities
    pub unsloth_logits: UnslothLogits,
    /// `beta != 0`: Unsloth 2025's loss also multiplies the reference hidden states by the head
    pub reference_logits: bool,
    /// the model returns the logits of every position, prompt included, and TRL slices the
    /// completion's out of them (`StackVersions::unsloth_returns_every_position`)
    pub every_position_logits: bool,
    /// how the loss forward's entropy is chunked (TRL by release)
    pub entropy: EntropyChunk,
    /// TRL 0.14's log-probs: a `log_softmax` per row, each saved, and the reference pass after
    /// the policy's forward inside the step (`StackVersions::trl_row_log_softmax`)
    pub row_log_softmax: bool,
    /// the temperature divides the head's output in place, which the loss then keeps
    /// (`StackVersions::trl_divides_logits_in_place`); off: a copy replaces it
    pub logits_in_place: bool,
    /// full fine-tuning of float32 weights under the trainer's bf16 autocast
    /// (`trl::autocast_fp32_weights`): TRL 0.27+'s default dtype for a model named by path
    pub fp32_weights: bool,
    /// the 4-D attention mask the padded batch builds ([`AttentionMask`])
    pub mask: AttentionMask,
    /// the attention function the layers call (`attn_implementation`): what each layer saves
    /// ([`layer_tensors`]) and eager's attention weights (`recompute::eager_weights`)
    pub attention: Attention,
    /// LoRA adapters kept in fp32 under the trainer's bf16 autocast, which casts them
    /// (`recompute::lora_casts_at_recompute`)
    pub fp32_adapters: bool,
    /// what each adapter's dropout saves (`lora_dropout`, [`AdapterDropout`])
    pub dropout: AdapterDropout,
}

/// Whose step runs: TRL's trainer, or the calibration harness (`calibration/measure.py`), which
/// runs the model outside accelerate, without autocast, on an all-ones mask. They differ in:
/// - what PEFT's LoRA branch saves (N2). peft 0.21.2 `tuners/lora/layer.py` `Linear.forward`:
///   `x = self._cast_input_dtype(x, lora_A.weight.dtype)` (the adapters are fp32), then
///   `lora_B(lora_A(dropout(x)))`. Outside autocast `lora_A` saves the fp32 cast of its input and
///   `lora_B` the fp32 rank-wide output: 4 (fan_in + rank) a token. Under the trainer's autocast
///   (accelerate 1.12.0 `Accelerator.prepare_model` wraps the forward in `autocast_context` for
///   bf16 mixed precision) `linear` runs in bf16: `lora_A` saves autocast's bf16 copy of its
///   input, and returns bf16: 2 (fan_in + rank);
/// - the key and value SDPA saves (N3). transformers 5.17.0 `integrations/sdpa_attention.py`
///   `sdpa_attention_forward`: `if not use_gqa_in_sdpa(attention_mask, key, value): key =
///   repeat_kv(...)` and `use_gqa_in_sdpa` needs `attention_mask is None` on CUDA. TRL's batches
///   are padded (prompts of different lengths), so the mask is there and SDPA saves K and V at
///   the query's head count; the harness's all-ones mask is dropped, and grouped-query SDPA keeps
///   them at the KV head count.
///
/// Traced (`calibration/cpu-trace`): the LoRA term alone over-stated TRL 1.15.0's step without
/// checkpointing by 8 %; the at-peak tensors of TRL 0.19.1 show the repeated K and V.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepPath {
    Harness,
    Trainer,
}

impl StepPath {
    /// Bytes per element of the input and rank-wide output the LoRA branch saves.
    pub fn lora_element(self) -> u64 {
        match self {
            StepPath::Harness => 4,
            StepPath::Trainer => 2,
        }
    }

    /// Whether SDPA receives K and V repeated to the query's head count.
    pub fn repeats_kv(self) -> bool {
        self == StepPath::Trainer
    }
}

/// The 4-D attention mask a padded batch builds, by the transformers release in force
/// (`StackVersions::transformers_bool_mask`), held at the checkpointed recompute
/// (`recompute::mask_at_recompute`) and, without checkpointing, by every layer's attention
/// (`recompute::held_without_checkpointing`). The calibration harness's all-ones mask builds
/// none: `_ignore_causal_mask_sdpa` lets SDPA run `is_causal` instead; nor does TRL 0.14, which
/// passes no mask (`StackVersions::trl_passes_attention_mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttentionMask {
    /// no 4-D mask (the harness, TRL 0.14)
    None,
    /// transformers 4.50 to 4.52: `Qwen2Model._update_causal_mask` ->
    /// `_prepare_4d_causal_attention_mask_with_cache_position` (read in 4.50.3 and 4.52.4 for
    /// Qwen2; the same helper in each family's modeling file) fills a `(B, 1, S, S)` mask in the
    /// input embeddings' dtype with `torch.full(..., min_dtype)`, `expand` and `clone`, and
    /// hands it to SDPA as is (on CUDA `_unmask_unattended` replaces it with a same-sized
    /// product). Traced: `clone` 27,848 B (4 x 59 x 59 bf16) at trl 0.16.1's backward peak.
    Float,
    /// transformers 4.53 on: `masking_utils.create_causal_mask` -> `sdpa_mask` builds a bool
    /// `(B, 1, S, S)` mask (`and_masks` of the causal and padding functions, `bitwise_and`), and
    /// torch's `scaled_dot_product_attention` converts a bool mask to the query's dtype before
    /// any kernel runs (torch 2.9 `aten/src/ATen/native/transformers/attention.cpp`
    /// `convert_boolean_attn_mask`: `at::where(mask.logical_not(), -inf, 0)`), a copy the kernel
    /// keeps for its backward (`attn_mask` / `attn_bias` among its saved inputs), one per layer
    /// that ran. Traced: trl 0.19.1 to 1.14.2 qwen2 `where` 27,848 B at the checkpointed
    /// backward's peak (one, the recomputed layer's) and two without checkpointing; the bool
    /// mask, under at_peak's 16 KiB, is `bitwise_and` 14,400 B with every storage listed.
    BoolConverted,
}

impl AttentionMask {
    /// Bytes an element of the mask the model builds and keeps through its forward (and, passed
    /// to each checkpointed layer, through its recompute).
    pub(super) fn kept_element(self) -> u64 {
        match self {
            AttentionMask::None => 0,
            // the input embeddings' dtype: bf16 on the trainer's path (an fp32 model's, 4)
            AttentionMask::Float => 2,
            AttentionMask::BoolConverted => 1,
        }
    }

    /// Bytes an element of the copy each attention call saves: SDPA's conversion to the
    /// query's dtype, bf16 under the trainer's autocast.
    pub(super) fn converted_element(self) -> u64 {
        match self {
            AttentionMask::BoolConverted => 2,
            _ => 0,
        }
    }
}

/// Bytes per token of one decoder layer's tensors, split as the allocator sees them.
#[derive(Debug, Clone, Default)]
pub struct LayerTensors {
    /// each saved tensor's bytes per token (bf16 and fp32)
    pub saved: Vec<u64>,
}

impl LayerTensors {
    pub fn per_token(&self) -> u64 {
        self.saved.iter().sum()
    }
}

/// The tensors autograd keeps for one decoder layer, per token, with LoRA on `targets`.
///
/// - the attention ([`attention_saved`]): its inputs and what its kernel keeps, by implementation;
/// - the MLP saves gate, up and the activation output (bf16; a fused `gate_up_proj` output
///   holds gate and up in one tensor);
/// - each RMSNorm saves its input upcast to fp32 (and Qwen3/Gemma3's query/key norms too);
/// - PEFT keeps adapters in fp32 and casts each targeted projection's input to fp32, which
///   `lora_A` saves; `lora_A`'s output (rank wide, fp32) is saved by `lora_B`; under the
///   trainer's autocast both are bf16 ([`StepPath`]);
/// - bitsandbytes' 8-bit matmul keeps each quantised projection's bf16 input
///   ([`quantised_matmul_saves_input`]): see [`int8_matmul_inputs`].
pub fn layer_tensors(
    arch: &Arch,
    targets: &[bool],
    rank: u64,
    quantised_base: bool,
    lora: StepPath,
    attention: Attention,
) -> LayerTensors {
    let (h, i, q, kv) = (arch.hidden, arch.intermediate, arch.q_dim(), arch.kv_dim());
    let mut saved = attention_saved(arch, lora, attention);
    if arch.family.fused_projections() {
        saved.extend([2 * 2 * i, 2 * i]);
    } else {
        saved.extend([2 * i, 2 * i, 2 * i]);
    }
    saved.extend(std::iter::repeat_n(
        4 * h,
        arch.family.norms_per_layer() as usize,
    ));
    if arch.family.has_qk_norm() {
        saved.extend([4 * q, 4 * kv]);
    }
    for (p, _) in arch
        .projections()
        .iter()
        .zip(targets)
        .filter(|(_, on)| **on)
    {
        saved.push(lora.lora_element() * p.fan_in);
        saved.push(lora.lora_element() * rank);
    }
    if quantised_base {
        saved.extend(int8_matmul_inputs(arch));
    }
    if let Some(m) = arch.moe {
        // each expert's linear saves its gathered input rows (`hidden_states[token_idx]`), and
        // the router its fp32 probabilities (Qwen3MoeExperts / Qwen3MoeTopKRouter, transformers 5.17)
        saved.extend([2 * h * m.active, 4 * m.experts]);
    }
    LayerTensors { saved }
}

/// Bytes per token one layer's attention keeps for the backward, by implementation:
/// - SDPA (efficient kernel) saves the rotated query, key, value and its output (bf16); a value
///   that is a view into a fused `qkv_proj` output keeps that whole output alive; on the
///   trainer's path key and value come repeated to the query's heads ([`StepPath`]);
/// - eager (`eager_attention_forward`, transformers 5.17.0 `modeling_qwen2.py`): `repeat_kv`'s
///   key and value, and `matmul`'s contiguous copy of the rotated query (rotary embedding keeps
///   the projection's transposed layout, which `bmm` cannot take as a view); its output goes on
///   unsaved. Traced (trl 1.15.0 qwen2 `eager_no_gc`, at_peak backward: `clone` 2 q x 3 a
///   layer). Its attention weights, heads x T x T a sequence, are `recompute::eager_weights`;
/// - flash attention (`_flash_attention_forward`): TRL's padded batch goes through
///   `_upad_input`, whose `_index_first_axis` gathers unpadded copies of query, key and value at
///   their own head counts (no `repeat_kv`), and `flash_attn_varlen_func` saves them, its
///   output and `softmax_lse` (fp32, heads a token) (flash-attn 2.8
///   `flash_attn_interface.py` `FlashAttnVarlenFunc.forward`: `ctx.save_for_backward(q, k, v,
///   out_padded, softmax_lse, rng_state)`; FA3's `save_for_backward(q, k, v, out,
///   softmax_lse)`); `_pad_input` scatters the output back into a new tensor that
///   nothing saves. Counted at every position (the estimate's sequences are all full length).
fn attention_saved(arch: &Arch, lora: StepPath, attention: Attention) -> Vec<u64> {
    let (q, kv) = (arch.q_dim(), arch.kv_dim());
    match attention {
        Attention::Flash(_) => vec![2 * q, 2 * kv, 2 * kv, 2 * q, 4 * arch.heads],
        Attention::Eager => vec![2 * q, 2 * q, 2 * q],
        // `repeat_kv`'s copies of the rotated key and of the value (a fused qkv output is then
        // no longer referenced)
        Attention::Sdpa if lora.repeats_kv() => vec![2 * q, 2 * q, 2 * q, 2 * q],
        Attention::Sdpa => vec![
            2 * q,
            2 * q,
            2 * kv,
            if arch.family.fused_projections() {
                2 * (q + 2 * kv)
            } else {
                2 * kv
            },
        ],
    }
}

/// Bytes per token that full fine-tuning adds to one decoder layer's saved tensors: a trained
/// weight's gradient needs its op's input, which a frozen one's does not (autograd saves `mm`'s
/// `self` only when the weight needs its gradient, `should_compute_output(1)`). Transformers'
/// RMSNorm (Qwen2, Llama, Mistral, Phi-3, Qwen3: `self.weight * hidden_states.to(input_dtype)`)
/// then keeps the normalised bf16 input of each norm's weight, and the projections keep theirs:
/// - q/k/v (or qkv): the attention norm's output, 2 H;
/// - gate/up (or gate_up): the MLP norm's output, 2 H;
/// - down_proj: the `act(gate) * up` product, 2 I;
/// - each norm's normalised input, 2 H a norm (and the query and key norms' where there are);
/// - o_proj: SDPA's output, already saved on CUDA (`shape::int8_matmul_inputs`; the CPU trace's
///   flash kernel copies it in `.contiguous()`, 2 q, not counted).
///
/// Traced (trl 0.19.1 and 1.15.0 qwen2 `full_no_gc`, at_peak per layer: `mul` 2 H x 2,
/// `_to_copy` 2 H x 2, `mul` 2 I beside what LoRA saves): the model was 5.4 to 5.9 % under.
pub fn trained_weight_inputs(arch: &Arch) -> u64 {
    let (h, i) = (arch.hidden, arch.intermediate);
    let qk = if arch.family.has_qk_norm() {
        2 * arch.q_dim() + 2 * arch.kv_dim()
    } else {
        0
    };
    2 * h * arch.family.norms_per_layer() + 2 * 2 * h + 2 * i + qk
}

/// Bytes per token that bitsandbytes' 8-bit matmul adds to one decoder layer.
/// `MatMul8bitLt.forward` (bitsandbytes 0.46.0 and 0.50.2 `autograd/_functions.py`) ends with
/// `ctx.tensors = (CAt, subA, A)` whenever `any(ctx.needs_input_grad[:2])`:
/// - `CAt`, the int8 transposed copy, is `None`: it comes from `int8_double_quant` only when
///   `ctx.needs_input_grad[1]`, and LoRA freezes the weight, so `int8_vectorwise_quant` runs;
/// - `subA` holds only the outlier columns (`threshold = 6.0`), a few per layer: not counted;
/// - `A` is the layer's bf16 input itself (`A.reshape(-1, ...)`, a view): it costs memory only
///   where nothing else saves that tensor. Projections sharing an input share it:
///   - q/k/v (or qkv): the attention norm's bf16 output, saved by nothing else (the norm keeps
///     its fp32 input; PEFT's `lora_A` keeps an fp32 cast of it): 2 H;
///   - o_proj: SDPA's output, already saved: transformers 5.17.0 `sdpa_attention_forward`'s
///     `.transpose(1, 2).contiguous()` copies nothing from the flash and efficient kernels'
///     (batch, seq, heads, dim) output, and `reshape` is a view: nothing;
///   - gate/up (or gate_up): the MLP norm's bf16 output: 2 H;
///   - down_proj: `act(gate) * up`, the product the multiply does not save: 2 I.
fn int8_matmul_inputs(arch: &Arch) -> [u64; 3] {
    [2 * arch.hidden, 2 * arch.hidden, 2 * arch.intermediate]
}

/// Whether the base model's quantised linear layers keep their input for the backward pass:
/// - TRL (PEFT over bitsandbytes): 8-bit's `MatMul8bitLt.forward` saves `ctx.tensors = (CAt,
///   subA, A)`, its input `A` ([`int8_matmul_inputs`]); 4-bit's `MatMul4Bit.forward` saves
///   `ctx.tensors = (None, B)`, only the packed weight, which its backward dequantises again
///   (bitsandbytes 0.46.0 and 0.50.2 `autograd/_functions.py`), so NF4 saves no more than
///   16-bit weights do;
/// - Unsloth: its LoRA kernels (unsloth 2025.2.4, 2025.11.6 and 2026.10.9
///   `kernels/fast_lora.py`) dequantise inside `matmul_lora` and save the same tensors whatever
///   the weights' format: `LoRA_MLP.forward` `ctx.save_for_backward(gateA, gateB, upA, upB,
///   downA, downB, X, e, g)` (no `h`, the product feeding `down_proj`, recomputed in the
///   backward), `LoRA_QKV.forward` `(X, QA, QB, KA, KB, VA, VB)`, `LoRA_W.forward` `(A, B, X)`;
///   the packed weights and quant states ride in `ctx.custom_saved_tensors`, already resident.
///   Projections outside those kernels run PEFT over `MatMul4Bit`, which saves no input either.
///   So NF4 and FP8 add nothing; 8-bit keeps the term the step had (whether Unsloth routes
///   bitsandbytes' 8-bit layers through its kernels is not read).
pub fn quantised_matmul_saves_input(stack: Stack, quant: Quant) -> bool {
    quant == Quant::Int8 && matches!(stack, Stack::Trl | Stack::Unsloth)
}

/// What one step needs above the static memory (weights, adapters, optimizer states).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepPeak {
    /// activations and logits at the step's peak (allocated)
    pub activations: u64,
    pub logits: u64,
    /// reserved by the caching allocator for the step's tensors, at its peak
    pub reserved: u64,
    /// activations while the first decoder layer's backward runs, after every later layer's
    /// gradient (full fine-tuning: [`super::trl::gradients_before_first_layer`]); 0 where not
    /// modelled
    pub first_layer: u64,
}

impl StepPeak {
    /// The larger of two moments of a pass: one holding activations alone, and one holding
    /// `(activations, logits)` (the scoring at the end of a forward).
    pub fn larger_moment(activations_only: u64, scoring: (u64, u64)) -> StepPeak {
        let (activations, logits) = if activations_only >= scoring.0 + scoring.1 {
            (activations_only, 0)
        } else {
            scoring
        };
        StepPeak {
            activations,
            logits,
            reserved: 0,
            first_layer: 0,
        }
    }
}

/// Sizes of the logits-phase tensors.
pub(crate) struct Logits {
    /// `logits[:, -keep:] / temperature`: B x K x V bf16
    pub(super) copy: u64,
    /// the lm_head output: B x (K+1) x V bf16
    pub(super) head: u64,
    /// one completion's log_softmax: K x V bf16
    pub(super) row: u64,
    /// one fp32 chunk of the entropy computation ([`EntropyChunk`]; 0 without entropy)
    pub(super) chunk: u64,
    /// fused head: the completion tokens' hidden states gathered (`hidden_states[mask]`), N x H bf16
    pub(super) gathered: u64,
    /// fused head: one tile of logits, min(N, 4096) x 32768 in bf16
    pub(super) tile: u64,
    /// fused head: seven fp32 running statistics per token (max, sums, log_z, entropy...)
    pub(super) stats: u64,
    /// the head's own bf16 output, live while accelerate casts it to fp32 on the trainer's
    /// path ([`logits_element`]); 0 where the logits stay bf16
    pub(super) cast_from: u64,
}

/// Bytes per element of the unfused logits (N1). On the trainer's path accelerate wraps the
/// model's forward in `convert_outputs_to_fp32` (accelerate 1.12.0 `Accelerator.prepare_model`,
/// `utils/operations.py` `ConvertOutputsToFp32`): the head's bf16 output is cast to fp32 and
/// everything TRL 0.16-1.14 builds from it (`_get_per_token_logps[_and_entropies]`:
/// `logits[:, -logits_to_keep:]`, `logits / self.temperature`, `selective_log_softmax`) is fp32.
/// Traced: every `loss_forward` of `calibration/cpu-trace` before 1.15 returns float32 logits
/// (`forwards`). The harness (`measure.py`) runs outside accelerate: bf16.
pub(crate) fn logits_element(s: &StepShape) -> u64 {
    if s.path == StepPath::Trainer && !s.fused_logits {
        4
    } else {
        2
    }
}

/// `ChunkedLogProbFunction`'s tile: at most 4096 tokens (`TOKEN_CHUNK_SIZE`) by 32768 vocabulary
/// entries (`_CHUNKED_LOGPROB_CHUNK_SIZE`), trl 1.15.0 and 1.16.0.
const FUSED_TOKEN_CHUNK: u64 = 4096;
const FUSED_VOCAB_CHUNK: u64 = 32768;

impl Logits {
    /// TRL 0.14's logits phase (`StackVersions::trl_row_log_softmax`; trl 0.14.0
    /// `compute_loss`'s local `get_per_token_logps`). No temperature copy: the slices are views.
    /// - forward: the fp32 head output (`head`) beside the rows' log-softmax outputs, which
    ///   `log_softmax` saves for the backward (`copy`: B rows of K x V); the head output goes
    ///   when the function returns (nothing saves it);
    /// - the reference pass, next, inside the step, under `inference_mode`: the saved rows, and
    ///   the reference head's own output with its fp32 cast (`cast_from` + `head`), its rows one at
    ///   a time after that;
    /// - backward: unbind's stacked row gradients (`copy`) beside the slice's gradient of the
    ///   head's shape (`head`), the rows freed by then.
    ///
    /// The reference moment is the largest: `copy + cast_from + head`. Traced at_peak, trl 0.14.0
    /// qwen2 no_gc (8 x 33 x 964): scoring `to` 1,017,984 + `linear` 508,992 + 8 `_log_softmax`
    /// 123,392; backward `slice_backward` 1,017,984 + `stack` 987,136; loss_forward `_to_copy`
    /// 1,017,984 + 8 `_log_softmax` 123,392. The same with `beta` 0 and 0.04.
    fn row_log_softmax_peak(&self) -> u64 {
        let forward = self.head + self.copy;
        let reference = self.copy + self.cast_from + self.head;
        let backward = self.copy + self.head;
        forward.max(reference).max(backward)
    }

    pub(super) fn new(arch: &Arch, s: &StepShape) -> Logits {
        let v = arch.vocab;
        // the fused head projects the completion tokens only (labels != -100): trl 1.15.0
        // `_fused_forward` `hidden_states[mask]`; 1.16.0 likewise on CUDA (`compact =
        // _use_triton(device)`), every position only on devices without Triton
        let tokens = s.seqs * s.completion;
        let e = logits_element(s);
        Logits {
            copy: s.seqs * s.completion * v * e,
            head: s.seqs * (s.completion + 1) * v * e,
            row: s.completion * v * e,
            chunk: match s.entropy {
                EntropyChunk::None => 0,
                EntropyChunk::Sequence => s.completion * v * 4,
                EntropyChunk::Rows128 => 128 * v * 4,
            },
            gathered: tokens * arch.hidden * 2,
            tile: tokens.min(FUSED_TOKEN_CHUNK) * FUSED_VOCAB_CHUNK * 2,
            stats: tokens * 7 * 4,
            cast_from: if e == 4 {
                s.seqs * (s.completion + 1) * v * 2
            } else {
                0
            },
        }
    }

    /// TRL 1.x's fused LM head (trl/trainer/utils.py `add_fused_lm_head`, the autograd function
    /// `ChunkedLogProbFunction` in trl/kernels/chunked_logprob.py): the forward keeps the gathered
    /// hidden states and fills one logits tile at a time; the backward holds an fp32 gradient of
    /// the gathered states, a tile again, and that gradient cast back to bf16. Read from the trl
    /// 1.15.0 wheel, the same in 1.16.0 on CUDA (whose torch fallback `_forward_tile` /
    /// `_backward_tile` runs only without Triton); traced on CPU with the CUDA path stood in.
    /// Its two moments: (the forward's, the backward's); the step takes the larger, each beside
    /// what else is live then (`trl::Fp32Weights`).
    pub(super) fn fused_moments(&self) -> (u64, u64) {
        let forward = self.gathered + self.tile + self.stats;
        let backward = self.gathered + 2 * self.gathered + self.tile + self.gathered;
        (forward, backward)
    }

    /// The logits phase's peak above what is live before it, unfused (TRL before 1.15).
    pub(crate) fn unfused_peak(arch: &Arch, s: &StepShape) -> u64 {
        Logits::new(arch, s).peak(s, arch.final_logit_softcapping)
    }

    /// The logits phase's peak when the model returns every position's logits
    /// (`StepShape::every_position_logits`): the head's output covers prompt and completion, and
    /// the backward of TRL's slice `logits[:, -logits_to_keep:]` fills a zero tensor of that whole
    /// output's shape (autograd's `SliceBackward`) while the sliced gradient is still held.
    pub(crate) fn every_position_peak(arch: &Arch, s: &StepShape) -> u64 {
        let mut logits = Logits::new(arch, s);
        logits.head = s.seqs * (s.prompt + s.completion) * arch.vocab * 2;
        let sliced_backward = logits.copy + logits.head;
        logits
            .peak(s, arch.final_logit_softcapping)
            .max(sliced_backward)
    }

    /// The logits phase's peak above what is live before it.
    /// - forward: lm_head output and its temperature-scaled copy; then the copy, every row's
    ///   saved log_softmax and three entropy chunks (plus the reference pass's copy when beta > 0,
    ///   which the step still holds, and Gemma 2's saved tanh output);
    /// - backward: the saved rows plus two row gradients (gather, log_softmax), or the rows'
    ///   gradients plus their stacked copy.
    pub(super) fn peak(&self, s: &StepShape, softcap: bool) -> u64 {
        if s.row_log_softmax {
            return self.row_log_softmax_peak() + if softcap { self.head } else { 0 };
        }
        let reference = if s.reference_pass { self.copy } else { 0 };
        let forward = if self.cast_from > 0 && s.logits_in_place {
            // fp32 logits (N1), TRL 1.x: the cast, then the head output (divided in place) beside
            // entropy's reshaped copy and its chunks (traced at_peak: trl 1.0.0 and 1.14.2
            // `_to_copy` + `clone` + `_log_softmax`, `exp`, `mul`).
            (self.cast_from + self.head).max(self.head + self.copy + 3 * self.chunk + reference)
        } else if self.cast_from > 0 {
            // fp32 logits, TRL 0.16-0.29: the cast; the head output beside its temperature copy
            // (`div`), after which it goes; the copy beside the entropy chunks (traced at_peak:
            // trl 0.16.1 `_to_copy` + `div`; 0.23.0 and 0.26.2 `div` + `_log_softmax`, `exp`,
            // `mul`, no head). `selective_log_softmax` takes its fp32 branch (`logsumexp` row by
            // row), which saves no row.
            (self.cast_from + self.head)
                .max(self.head + self.copy)
                .max(self.copy + 3 * self.chunk + reference)
        } else {
            (self.head + self.copy).max(2 * self.copy + 3 * self.chunk + reference)
        };
        let backward = if self.cast_from > 0 {
            // fp32 logits: `selective_log_softmax`'s fp32 branch (trl 0.19.1 `trainer/utils.py`:
            // `torch.gather(logits, ...)`, `torch.stack([torch.logsumexp(lg, dim=-1) for lg in
            // logits])`) keeps its input: the copy, or the head divided in place. Its backward
            // holds beside it unbind's stacked gradient of the rows (`stack`) and the gather's
            // (`GatherBackward`: `new_zeros`, then an out-of-place `scatter_add`): three copies
            // (traced at_peak without checkpointing, trl 0.16.1 to 0.26.2: `div` + `stack` +
            // `new_zeros` + `scatter_add`, all 4 x 32 x 964 fp32; 1.14.2: `_to_copy` + the same)
            let kept = if s.logits_in_place {
                self.head
            } else {
                self.copy
            };
            kept + 3 * self.copy
        } else {
            self.copy + self.copy.max(2 * self.row)
        };
        forward.max(backward) + if softcap { self.head } else { 0 }
    }
}

/// The tests' step: one micro-batch of 4 x (28 + 32) tokens on the trainer's path, LoRA rank 8,
/// checkpointed, with every release's optional term off; each test sets what it varies (one
/// literal, so a new field is added here once).
#[cfg(test)]
pub(crate) fn test_shape() -> StepShape {
    StepShape {
        seqs: 4,
        path: StepPath::Trainer,
        prompt: 28,
        completion: 32,
        rank: 8,
        checkpointing: true,
        reference_pass: false,
        quantised_base: false,
        expandable_segments: false,
        fused_logits: false,
        head_copy: false,
        liger: LigerLoss::Off,
        scoring_rows: 0,
        free_at_step: 0,
        small_card: false,
        unsloth_logits: UnslothLogits::Blocks,
        reference_logits: false,
        every_position_logits: false,
        row_log_softmax: false,
        entropy: EntropyChunk::Rows128,
        logits_in_place: false,
        fp32_weights: false,
        mask: AttentionMask::None,
        attention: Attention::Sdpa,
        fp32_adapters: false,
        dropout: AdapterDropout::Off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    #[test]
    fn the_trainer_s_padded_batch_saves_k_and_v_at_every_query_head() {
        // transformers `sdpa_attention_forward`: a mask (TRL pads) disables grouped-query SDPA,
        // and `repeat_kv` copies K and V to the 28 query heads of Qwen2.5-7B (4 KV heads)
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let none = vec![false; arch.projections().len()];
        let harness =
            layer_tensors(arch, &none, 16, false, StepPath::Harness, Attention::Sdpa).per_token();
        let trainer =
            layer_tensors(arch, &none, 16, false, StepPath::Trainer, Attention::Sdpa).per_token();
        assert_eq!(trainer - harness, 2 * 2 * (arch.q_dim() - arch.kv_dim()));
    }

    /// What one layer's attention saves a token, by implementation, at Qwen2.5-7B (28 query
    /// heads, 4 KV heads of 128): SDPA on the trainer's padded batch keeps `repeat_kv`'s K and V
    /// at the query's width; flash attention its unpadded q, k, v at their own widths, its
    /// output and the fp32 `softmax_lse`; eager the query's copy and the repeated K and V.
    #[test]
    fn each_attention_saves_its_own_tensors() {
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let none = vec![false; arch.projections().len()];
        let at = |attention| {
            layer_tensors(arch, &none, 16, false, StepPath::Trainer, attention).per_token()
        };
        let (q, kv) = (arch.q_dim(), arch.kv_dim());
        assert_eq!((q, kv), (3584, 512));
        let rest = at(Attention::Sdpa) - 4 * 2 * q;
        assert_eq!(
            at(Attention::Flash(2)),
            rest + 2 * q + 2 * kv + 2 * kv + 2 * q + 4 * 28
        );
        assert_eq!(at(Attention::Eager), rest + 3 * 2 * q);
        assert!(at(Attention::Flash(2)) < at(Attention::Sdpa));
    }

    fn logits_shape(path: StepPath, fused_logits: bool, entropy: EntropyChunk) -> StepShape {
        StepShape {
            path,
            prompt: 27,
            fused_logits,
            entropy,
            ..test_shape()
        }
    }

    #[test]
    fn the_trainer_s_unfused_logits_are_fp32() {
        // N1: accelerate's `convert_outputs_to_fp32`; traced trl 0.19.1 qwen2 (4 x 33 x 964):
        // `_to_copy` 508,992 B and the temperature copy `div` 493,568 B, both fp32
        let arch = &catalog::find("Qwen/Qwen2.5-0.5B-Instruct")
            .expect("catalog id")
            .arch;
        let v = arch.vocab;
        let trainer = logits_shape(StepPath::Trainer, false, EntropyChunk::None);
        let lg = Logits::new(arch, &trainer);
        assert_eq!(lg.head, 4 * 33 * v * 4);
        assert_eq!(lg.copy, 4 * 32 * v * 4);
        assert_eq!(lg.cast_from, 4 * 33 * v * 2);
        assert_eq!(lg.chunk, 0);
        // the harness stays bf16, and so does TRL 1.15's fused head
        let harness = Logits::new(
            arch,
            &logits_shape(StepPath::Harness, false, EntropyChunk::Rows128),
        );
        assert_eq!((harness.head, harness.cast_from), (4 * 33 * v * 2, 0));
        let fused = logits_shape(StepPath::Trainer, true, EntropyChunk::Rows128);
        assert_eq!(logits_element(&fused), 2);
        // the fp32 backward: the saved copy and three more (traced: stack, new_zeros, scatter_add)
        assert_eq!(lg.peak(&trainer, false), 4 * lg.copy);
    }

    #[test]
    fn the_temperature_copy_replaces_the_fp32_head_before_1_0() {
        // trl 0.23.0 `logits = logits / self.temperature`, then `entropy_from_logits` on the copy:
        // traced at_peak `div` + `_log_softmax` + `exp` + `mul`, no head (4 x 32 x 964 fp32
        // each, 128 rows a chunk). trl 1.0.0 `logits.div_(...)` keeps the head: `_to_copy` +
        // `clone` + the three chunks.
        let arch = &catalog::find("Qwen/Qwen2.5-0.5B-Instruct")
            .expect("catalog id")
            .arch;
        let copy_of = logits_shape(StepPath::Trainer, false, EntropyChunk::Rows128);
        let lg = Logits::new(arch, &copy_of);
        assert_eq!(lg.chunk, lg.copy);
        assert_eq!(lg.peak(&copy_of, false), 4 * lg.copy);
        let in_place = StepShape {
            logits_in_place: true,
            ..copy_of
        };
        assert_eq!(lg.peak(&in_place, false), lg.head + 4 * lg.copy);
    }

    #[test]
    fn the_fused_head_tiles_the_completion_tokens_only() {
        // trl 1.15.0 and 1.16.0 `add_fused_lm_head` `_fused_forward`: the tile spans
        // `hidden_states[mask]`, the completion tokens (1.16.0 on CUDA: `compact =
        // _use_triton(device)`; only devices without Triton score every position, prompt
        // included). Traced on the CUDA path: 8,388,608 B = 128 x 32768 x 2 at the loss forward's
        // peak of trl 1.16.0 qwen2 base (4 x 32 completions), not 236 x 32768 x 2 (4 x 59
        // positions) as on the CPU path.
        let arch = &catalog::find("Qwen/Qwen2.5-0.5B-Instruct")
            .expect("catalog id")
            .arch;
        let short = logits_shape(StepPath::Trainer, true, EntropyChunk::Rows128);
        let long = StepShape {
            prompt: 4096,
            ..short
        };
        let (a, b) = (Logits::new(arch, &short), Logits::new(arch, &long));
        assert_eq!(a.tile, 4 * 32 * FUSED_VOCAB_CHUNK * 2);
        assert_eq!((a.tile, a.gathered, a.stats), (b.tile, b.gathered, b.stats));
        assert_eq!(a.fused_moments(), b.fused_moments());
    }

    #[test]
    fn trl_0_14_holds_the_rows_and_the_reference_head_not_four_copies() {
        // trl 0.14.0 `get_per_token_logps`: per-row `log_softmax` (saved), the reference pass in
        // the step; traced trl 0.14.0 qwen2 no_gc at the scoring peak (8 x 33 x 964): the rows
        // 987,136 B, the reference head's bf16 output 508,992 B and fp32 cast 1,017,984 B
        let arch = &catalog::find("Qwen/Qwen2.5-0.5B-Instruct")
            .expect("catalog id")
            .arch;
        let v = arch.vocab;
        let s = StepShape {
            seqs: 8,
            row_log_softmax: true,
            ..logits_shape(StepPath::Trainer, false, EntropyChunk::None)
        };
        let lg = Logits::new(arch, &s);
        assert_eq!(
            lg.peak(&s, false),
            8 * 32 * v * 4 + 8 * 33 * v * 2 + 8 * 33 * v * 4
        );
        let later = StepShape {
            row_log_softmax: false,
            ..s
        };
        // 0.15 on: the saved copy and three more in the backward
        assert_eq!(lg.peak(&later, false), 4 * lg.copy);
    }

    #[test]
    fn the_entropy_chunk_follows_the_trl_release() {
        // trl 0.20.0 `entropy_from_logits(chunk_size=1)`: one K x V sequence; 0.23.0: 128 rows
        let arch = &catalog::find("Qwen/Qwen2.5-0.5B-Instruct")
            .expect("catalog id")
            .arch;
        let chunk = |e| Logits::new(arch, &logits_shape(StepPath::Trainer, false, e)).chunk;
        assert_eq!(chunk(EntropyChunk::None), 0);
        assert_eq!(chunk(EntropyChunk::Sequence), 32 * arch.vocab * 4);
        assert_eq!(chunk(EntropyChunk::Rows128), 128 * arch.vocab * 4);
    }

    #[test]
    fn autocast_halves_what_the_lora_branch_saves() {
        // peft `Linear.forward` under accelerate's bf16 autocast: `lora_A` saves a bf16 copy of
        // its input and returns bf16, so each targeted projection keeps 2 (fan_in + rank) a token
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let targets = vec![true; arch.projections().len()];
        let none = vec![false; arch.projections().len()];
        let lora_bytes = |path| {
            layer_tensors(arch, &targets, 16, false, path, Attention::Sdpa).per_token()
                - layer_tensors(arch, &none, 16, false, path, Attention::Sdpa).per_token()
        };
        let lora: u64 = arch.projections().iter().map(|p| p.fan_in + 16).sum();
        assert_eq!(lora_bytes(StepPath::Harness), 4 * lora);
        assert_eq!(lora_bytes(StepPath::Trainer), 2 * lora);
    }

    #[test]
    fn eight_bit_keeps_both_norm_outputs_and_the_down_proj_input() {
        // MatMul8bitLt.forward's `A` (bitsandbytes 0.50.2): q/k/v share the attention norm's
        // output, gate/up the MLP norm's, down_proj takes the product; o_proj's is SDPA's
        let arch = &catalog::find("Qwen/Qwen2.5-7B-Instruct")
            .expect("catalog id")
            .arch;
        let targets = vec![true; arch.projections().len()];
        let plain = layer_tensors(
            arch,
            &targets,
            16,
            false,
            StepPath::Harness,
            Attention::Sdpa,
        )
        .per_token();
        let int8 =
            layer_tensors(arch, &targets, 16, true, StepPath::Harness, Attention::Sdpa).per_token();
        assert_eq!(int8 - plain, 4 * arch.hidden + 2 * arch.intermediate);
    }

    #[test]
    fn only_eight_bit_weights_save_their_inputs() {
        // bitsandbytes' MatMul4Bit saves (None, B); Unsloth's fast_lora kernels save the same
        // tensors whatever the weights' format
        for stack in [Stack::Trl, Stack::Unsloth] {
            assert!(quantised_matmul_saves_input(stack, Quant::Int8));
            for quant in [Quant::Nf4, Quant::Fp8, Quant::Bf16] {
                assert!(!quantised_matmul_saves_input(stack, quant), "{quant:?}");
            }
        }
    }
}
