//! One GRPO step of the `unsloth` stack (unsloth / unsloth_zoo 2026.10.9), read from the wheels;
//! not yet measured on a GPU. The step has two passes over the model, and its peak is the larger:
//!
//! - the **scoring pass** (no grad): old log-probs of the whole generation batch (always when vLLM
//!   generated), reference log-probs when `beta != 0`; rows go through in mini-batches sized from
//!   the free memory (`autotune_batch_and_chunks`);
//! - the **gradient pass** (`grpo_accumulated_loss`): the micro-batch packed into one varlen
//!   sequence (`UNSLOTH_GRPO_SEQ_PACKING`, on by default), forward and backward.
//!
//! Neither pass builds the `[rows, length, vocab]` logits: Unsloth's forward returns the final
//! hidden states (`UNSLOTH_RETURN_HIDDEN_STATES=1`), and the log-probabilities are computed by
//! `fused_losses.fused_linear.fused_linear_logprobs`, one fp32 logits block at a time.

use crate::arch::Arch;
use crate::memory::step::shape::Logits;
use crate::memory::step::{StepPeak, StepShape};
use crate::run::versions::UnslothLogits;
use crate::run::{Checkpointing, RunConfig, Stack};
use crate::units::{GIB, MIB};

/// What the Unsloth step reads from the GPU when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpuAtStep {
    /// `torch.cuda.mem_get_info()` free bytes when the step begins
    pub free: u64,
    /// total memory at most 24.5 GiB: `_flash_min_rows_auto` takes the tiled ("flash") log-prob
    /// kernel for every row count on such cards
    pub small_card: bool,
}

/// `fused_linear._SMALL_CARD_BYTES`.
pub const SMALL_CARD: u64 = (24.5 * GIB as f64) as u64;

/// `UNSLOTH_LOGPROB_CHUNK_GB` default: the logits block budget, 2 GiB, or half the free memory
/// at the first call if less (`fused_linear._budget_bytes`, cached per device).
const LOGITS_BUDGET: u64 = 2 * GIB;
/// `UNSLOTH_FUSED_LINEAR_MAX_ROWS` default.
const MAX_ROWS: u64 = 4096;
/// `fused_linear._MIN_LOGITS`: the smallest block is 512 rows of Qwen's 151936-entry vocabulary.
const MIN_LOGITS: u64 = 512 * 151_936;
/// The tiled kernel's block: `UNSLOTH_FUSED_LINEAR_BWD_TILE_MB` (256) and `_BWD_ROWS` (4096).
const TILE_BYTES: u64 = 256 * MIB;
const TILE_ROWS: u64 = 4096;
/// `_flash_min_rows_auto` on cards above 24.5 GiB.
const FLASH_MIN_ROWS_LARGE: u64 = 4096;
/// fp32 statistics the log-prob kernel keeps per row (logp, lse, entropy, sums...): eight.
const STATS_PER_ROW: u64 = 8 * 4;

/// The checkpointing a run's step runs: on the unsloth stack `use_gradient_checkpointing = true`
/// offloads as "unsloth" does from Unsloth 2025.3 to 2026.1, where `from_pretrained` has put
/// Unsloth's offloaded checkpoint in place of torch's
/// (`StackVersions::unsloth_true_checkpointing_offloads`), and from 2026.10 "unsloth" keeps
/// layer inputs on the GPU for a context under 512 tokens
/// (`StackVersions::unsloth_offload_min_seq_len`).
pub fn checkpointing_in_effect(run: &RunConfig) -> Checkpointing {
    match (run.stack, run.checkpointing) {
        (Stack::Unsloth, Checkpointing::UnslothOffload)
            if run.max_seq_len < run.versions.unsloth_offload_min_seq_len() =>
        {
            Checkpointing::On
        }
        (Stack::Unsloth, Checkpointing::On)
            if run.versions.unsloth_true_checkpointing_offloads() =>
        {
            Checkpointing::UnslothOffload
        }
        (_, asked) => asked,
    }
}

/// The step's peak above the static memory.
pub fn unsloth_step(
    arch: &Arch,
    targets: &[bool],
    s: &StepShape,
    checkpointing: Checkpointing,
) -> StepPeak {
    let gpu = GpuAtStep {
        free: s.free_at_step,
        small_card: s.small_card,
    };
    let gradient = gradient_pass(arch, targets, s, checkpointing, gpu);
    let scoring = if s.scoring_rows > 0 {
        scoring_pass(arch, s, gpu)
    } else {
        StepPeak::default()
    };
    let peak = if scoring.activations + scoring.logits > gradient.activations + gradient.logits {
        scoring
    } else {
        gradient
    };
    // Slack: the median reserved/allocated ratio of the trl measurements without large logits
    // (1.10, calibration/README.md); Unsloth's own reserved peak is not measured yet.
    let allocated = peak.activations + peak.logits;
    StepPeak {
        reserved: allocated + allocated / 10,
        ..peak
    }
}

/// Forward and backward of the micro-batch, packed into one sequence.
/// - its fused LoRA kernels and RMSNorm keep bf16 inputs (no fp32 casts as in PEFT's path);
/// - `use_gradient_checkpointing = "unsloth"` offloads layer inputs to CPU RAM, so about two
///   layer inputs stay on the GPU;
/// - at the end of the forward, the completion positions' hidden states are gathered and
///   scored: one logits block, and `u`, d logp / d hidden, computed in the forward
///   (`UNSLOTH_FUSED_LINEAR_FORWARD_GRAD`), rows x hidden in bf16.
fn gradient_pass(
    arch: &Arch,
    targets: &[bool],
    s: &StepShape,
    checkpointing: Checkpointing,
    gpu: GpuAtStep,
) -> StepPeak {
    let tokens = s.seqs * (s.prompt + s.completion);
    let hidden = tokens * arch.hidden * 2;
    let (q, kv, i) = (arch.q_dim(), arch.kv_dim(), arch.intermediate);
    let adapters = targets.iter().filter(|t| **t).count() as u64;
    let per_token = 2 * (2 * q + 2 * kv)
        + 2 * 3 * i
        + arch.family.norms_per_layer() * 2 * arch.hidden
        + adapters * 2 * s.rank
        + s.dropout.saved_per_token(arch, targets)
        // 8-bit only: NF4 and FP8 bases add nothing (`shape::quantised_matmul_saves_input`)
        + if s.quantised_base { 2 * i } else { 0 };
    let layer = per_token * tokens;
    let stored = match checkpointing {
        Checkpointing::Off => arch.layers * layer,
        Checkpointing::On => arch.layers * hidden,
        Checkpointing::UnslothOffload => 2 * hidden,
    };
    let rows = s.seqs * s.completion;
    let gathered = rows * arch.hidden * 2;
    let logits = match s.unsloth_logits {
        UnslothLogits::Blocks => {
            logprob_block(arch, rows, gpu, true) + 2 * gathered + rows * STATS_PER_ROW
        }
        UnslothLogits::PerSequenceFp32 => per_sequence_logits(arch, s),
        UnslothLogits::MicroBatchFp32 => micro_batch_logits(arch, s),
        UnslothLogits::TrlLoss if s.every_position_logits => Logits::every_position_peak(arch, s),
        UnslothLogits::TrlLoss => Logits::unfused_peak(arch, s),
    };
    // the forward ends holding what it stored, the final hidden states and the scoring
    let forward = stored + hidden;
    let backward = if checkpointing == Checkpointing::Off {
        0
    } else {
        stored + layer + tokens * (i + arch.hidden) * 2
    };
    StepPeak::larger_moment(backward, (forward, logits))
}

/// Unsloth 2025's loss (unsloth_zoo 2025.5.2 to 2025.11.6 rl_replacements.py): `grpo_accumulated_loss`
/// takes the micro-batch's final hidden states, and the reference's (adapters disabled) when
/// `beta != 0`; `UnslothEfficientGRPO.forward` allocates `grad_inputs = torch.empty_like` of the
/// hidden states and walks `n_chunks` chunks, `unsloth_num_chunks = -1` meaning one sequence each.
/// Per sequence, `compute_loss` multiplies by the LM head (K+1 rows in the compute dtype) and the
/// compiled `grpo_compute_loss` upcasts to fp32 for the log-softmax: see [`logits_pair`].
/// Read from the wheels; not measured.
fn per_sequence_logits(arch: &Arch, s: &StepShape) -> u64 {
    let states = s.seqs * (s.completion + 1) * arch.hidden * 2;
    let reference = if s.reference_logits { states } else { 0 };
    states + reference + logits_pair(arch, 1, s.completion, s.reference_logits)
}

/// One compiled GRPO loss over `rows` sequences of `k` completion tokens (Unsloth 2025's
/// `grpo_compute_loss`, unsloth_zoo 2025.5.2): per logits tensor, the policy's and, when
/// `beta != 0`, the reference's, the product in the compute dtype (K+1 rows) and the fp32
/// log-softmax inductor materialises for it (`old_logits.to(torch.float32)`; the 1.06 GiB request
/// of the Qwen3-4B T4 run in tests/realworld is such a buffer, `empty_strided_cuda((1, s4, 151936),
/// float32)`), which the policy's backward reads.
fn logits_pair(arch: &Arch, rows: u64, k: u64, reference: bool) -> u64 {
    let one = rows * ((k + 1) * arch.vocab * 2 + k * arch.vocab * 4);
    if reference { 2 * one } else { one }
}

/// Unsloth 2025.3 to 2025.7's `FastModel` path (`UnslothLogits::MicroBatchFp32`): the model returns
/// the micro-batch's logits (B x (K+1) x V, compute dtype, kept for the backward); the reference's,
/// computed by `_prepare_inputs` with the adapters off, ride in the inputs when `beta != 0`; and
/// the compiled `grpo_compute_loss_slow` takes both whole ([`logits_pair`] over the micro-batch).
/// Read from the wheels; the 6.01 GiB request of tests/oom/seed-article.txt (a 2025 Gemma 3 1B Unsloth run) is one of these fp32 buffers.
fn micro_batch_logits(arch: &Arch, s: &StepShape) -> u64 {
    logits_pair(arch, s.seqs, s.completion, s.reference_logits)
}

/// The no-grad scoring of the generation batch (`_get_per_token_logps_and_entropies`, Unsloth's
/// replacement in unsloth/models/rl_replacements.py): `batch_size` rows at a time, each forward's
/// hidden states cut to the completion positions and scored. Peak: one layer's working set of a
/// mini-batch (residual stream, normed input, gate, up and their product), or the final hidden
/// states with the gathered rows and a logits block.
fn scoring_pass(arch: &Arch, s: &StepShape, gpu: GpuAtStep) -> StepPeak {
    let length = s.prompt + s.completion;
    let b = rows_per_forward(arch, s.scoring_rows, length, gpu.free);
    let tokens = b * length;
    let hidden = tokens * arch.hidden * 2;
    let layer = 2 * hidden + tokens * 3 * arch.intermediate * 2;
    let rows = b * s.completion;
    let scoring = rows * arch.hidden * 2 + logprob_block(arch, rows, gpu, false);
    StepPeak::larger_moment(layer, (hidden, scoring))
}

/// Rows per forward in the scoring pass: `autotune_batch_and_chunks` (unsloth_zoo
/// rl_replacements.py) takes the largest `b` whose `b x L x H x 16 + (b/N) x b x L x V x 16 / m`
/// fits in 80 % of the free memory, `m = max(4, L / 4096)` (16 is the dtype's bits, passed as
/// bytes; none fitting gives `min(4, N)`); the caller then splits N rows into `N / b` chunks of
/// `ceil(N / chunks)` rows.
pub fn rows_per_forward(arch: &Arch, n: u64, length: u64, free: u64) -> u64 {
    let n = n.max(1);
    let m = (length / 4096).max(4) as f64;
    let limit = free as f64 * 0.8;
    let (l, h, v) = (length as f64, arch.hidden as f64, arch.vocab as f64);
    let fits = |b: f64| b * l * h * 16.0 + (b / n as f64) * b * l * v * 16.0 / m <= limit;
    // the cost grows with b, so the largest fitting b is found by bisection
    let (mut lo, mut hi) = (0u64, n);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid as f64) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let b = if lo == 0 { n.min(4) } else { lo };
    let chunks = (n / b).max(1);
    n.div_ceil(chunks)
}

/// The log-prob kernel's working memory for `rows` scored rows (`fused_linear_logprobs`):
/// - the tiled kernel (on cards up to 24.5 GiB, or from 4096 rows): one fp32 tile of at most
///   256 MiB, plus an fp32 rows x hidden accumulator when it computes `u`;
/// - otherwise one reused fp32 block (`_Buffers`) of R rows x the vocabulary padded to 8, R a
///   power of two near `rows x hidden / vocab`, clamped to [min rows, 4096] and to the budget.
pub fn logprob_block(arch: &Arch, rows: u64, gpu: GpuAtStep, with_grad: bool) -> u64 {
    if rows == 0 {
        return 0;
    }
    let budget = LOGITS_BUDGET.min(gpu.free / 2).max(1);
    let flash = gpu.small_card || rows >= FLASH_MIN_ROWS_LARGE;
    if flash {
        let tile_rows = rows.min(TILE_ROWS);
        let accumulator = if with_grad {
            tile_rows * arch.hidden * 4
        } else {
            0
        };
        return TILE_BYTES.min(budget) + accumulator;
    }
    let v = arch.vocab.max(1);
    let min_rows = pow2_floor(MIN_LOGITS / v).clamp(512, MAX_ROWS);
    let r = pow2_floor(rows * arch.hidden / v)
        .clamp(min_rows, MAX_ROWS)
        .min((budget / (v * 4)).max(2))
        .min(rows);
    r * v.div_ceil(8) * 8 * 4
}

/// The largest power of two at most `x` (1 for 0).
fn pow2_floor(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn arch(name: &str) -> Arch {
        catalog::find(name).expect("catalog model").arch
    }

    #[test]
    fn autotune_takes_every_row_when_memory_is_plenty() {
        let a = arch("Qwen/Qwen2.5-1.5B-Instruct");
        assert_eq!(rows_per_forward(&a, 16, 1024, 100 * GIB), 16);
    }

    #[test]
    fn autotune_splits_rows_evenly_when_memory_is_short() {
        let a = arch("Qwen/Qwen2.5-1.5B-Instruct");
        // 16 rows of 1024 tokens, 2 GiB free: b = 6 fits 80 % of it, so 16 / 6 = 2 chunks of 8
        assert_eq!(rows_per_forward(&a, 16, 1024, 2 * GIB), 8);
        // 4 GiB: b = 9 fits, and 16 / 9 = 1 chunk: all 16 rows at once (Unsloth's rounding)
        assert_eq!(rows_per_forward(&a, 16, 1024, 4 * GIB), 16);
        // nothing fits: four rows at a time, as Unsloth falls back
        assert_eq!(rows_per_forward(&a, 16, 1024, 1), 4);
    }

    #[test]
    fn logits_block_stays_within_two_gib() {
        let a = arch("Qwen/Qwen2.5-1.5B-Instruct");
        let big = GpuAtStep {
            free: 60 * GIB,
            small_card: false,
        };
        let block = logprob_block(&a, 3000, big, true);
        // 3000 x 1536 / 151936 rows is below the floor of 512 x 151936 logits: 512 rows
        assert_eq!(block, 512 * 151_936 * 4);
        let small = GpuAtStep {
            free: 6 * GIB,
            small_card: true,
        };
        assert_eq!(logprob_block(&a, 3000, small, false), TILE_BYTES);
    }

    #[test]
    fn pow2_floor_rounds_down() {
        assert_eq!(
            [0, 1, 2, 3, 1000, 1024].map(pow2_floor),
            [1, 1, 2, 2, 512, 1024]
        );
    }
}
