//! vLLM on the training GPU: the share it takes, how that share splits into weights, profiled
//! activations, CUDA graphs and KV cache, and whether vLLM starts at all. Unsloth's arithmetic
//! (`unsloth_zoo.vllm_utils.load_vllm` / `approximate_vllm_memory_usage`, 2026.10.9), TRL's
//! colocate call (`trl.generation.vllm_generation.VLLMGeneration._init_vllm`, 1.15.0) and vLLM's
//! own budget (`vllm.v1.worker.gpu_worker.Worker.determine_available_memory`, 0.33).

use crate::arch::Arch;
use crate::memory::refusal::{Refusal, VllmRefusal};
use crate::run::versions::UnslothVllmLimits;
use crate::run::{Generation, Quant, RunConfig, Stack};
use crate::units::{GIB, format_size};
use serde::Serialize;

/// Memory in use on the GPU before vLLM starts under Unsloth (the CUDA and torch context only:
/// Unsloth builds the training model from vLLM's own weight tensors afterwards). The median of
/// what the five shared Unsloth runs that printed their utilisation had in use,
/// `total x (1 - printed% / asked share)`: 0.10, 0.10, 0.42, 0.46 and 0.83 GiB.
pub const CONTEXT_BEFORE_VLLM: u64 = (0.42 * GIB as f64) as u64;

/// vLLM's "non_torch_memory" (NCCL, cuBLAS handles outside PyTorch): 0.03-0.08 GiB in the four
/// shared runs that printed it; their median.
pub const VLLM_NON_TORCH: u64 = (0.05 * GIB as f64) as u64;

/// CUDA-graph capture: 0.21, 0.58, 0.62, 0.70, 1.12 and 1.90 GiB printed by the six shared
/// vLLM runs ("Graph capturing finished ... took X GiB"); their median.
pub const VLLM_CUDA_GRAPHS: u64 = (0.66 * GIB as f64) as u64;

/// fp32 copies of the sampler's `[sequences x vocabulary]` logits at the profile run's peak
/// (logits, temperature, softmax, log-softmax, sort values and indices...). The five shared
/// runs that printed their activation peak give (peak - forward) / (sequences x vocabulary x
/// 4 B) = 9.1, 9.2, 8.6, 7.2 and 8.6; their median.
const SAMPLER_COPIES: f64 = 8.6;

/// vLLM's KV block size (tokens): the KV cache is sized in whole blocks, one of them the null block.
pub(crate) const BLOCK: u64 = 16;

/// vLLM on this GPU.
#[derive(Debug, Clone, Serialize)]
pub struct VllmPlan {
    /// what vLLM holds while generating, KV cache and CUDA graphs included
    pub reservation_bytes: u64,
    /// `gpu_memory_utilization x total`, as vLLM computes it (`request_memory`)
    pub budget_bytes: u64,
    /// the share of total memory vLLM is given (Unsloth's "actual GPU utilization")
    pub utilization: f64,
    pub weights_bytes: u64,
    pub activations_bytes: u64,
    pub cuda_graphs_bytes: u64,
    pub non_torch_bytes: u64,
    pub kv_cache_bytes: u64,
    /// sequences of `max_model_len` tokens the KV cache can hold at once
    pub full_length_sequences: f64,
    /// sequences of the run's own length (prompt + completion, at most `max_model_len`) the KV
    /// cache holds at once: how many of the run's requests vLLM decodes together. A request
    /// takes KV blocks for the tokens it holds, never for `max_model_len` (vLLM's paged
    /// `KVCacheManager.allocate_slots`)
    pub run_length_sequences: f64,
    pub max_model_len: u64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    /// whether vLLM gets past its start-up checks
    pub starts: bool,
    /// why it does not, in vLLM's terms
    pub refusal: Option<Refusal>,
    /// what vLLM keeps on the GPU while training runs (sleep frees part of it)
    pub kept_while_training_bytes: u64,
}

/// What the plan needs to know of the rest of the GPU.
pub struct Surroundings {
    pub capacity: u64,
    pub used_by_others: u64,
    /// memory the trainer already holds when vLLM starts (TRL: the training model)
    pub trainer_at_start: u64,
    /// the weights vLLM starts from: Unsloth's shared training copy; for TRL the whole
    /// checkpoint, unsharded (trl 1.15.0 `VLLMGeneration._init_vllm` loads
    /// `model.name_or_path` on every rank, split only by `tensor_parallel_size`)
    pub weights: u64,
}

pub fn plan(run: &RunConfig, around: &Surroundings) -> Option<VllmPlan> {
    let Generation::ColocatedVllm { share } = run.generation else {
        return None;
    };
    let arch = &run.arch;
    let total = around.capacity;
    let (utilization, free_at_start) = match run.stack {
        Stack::Unsloth => {
            let free = total.saturating_sub(CONTEXT_BEFORE_VLLM + around.used_by_others);
            let share = if run.unsloth_standby && !run.standby_keeps_share {
                standby_share(total)
            } else {
                share
            };
            (
                unsloth_utilization(arch, run.max_seq_len, share, free, total),
                free,
            )
        }
        Stack::Trl => (
            share,
            total.saturating_sub(
                crate::memory::breakdown::CUDA_CONTEXT
                    + around.used_by_others
                    + around.trainer_at_start,
            ),
        ),
    };
    // TRL colocate with `vllm_tensor_parallel_size`: each GPU of the group holds its part
    let tp = run.vllm_tensor_parallel.max(1);
    let weights = vllm_weights(run, around.weights) / tp;
    let budget = request_memory(total, utilization);
    let context = match (run.stack, run.versions.unsloth_vllm_limits()) {
        // Unsloth before unsloth_zoo 2025.11.6 lowers max_seq_length, vLLM's max_model_len,
        // to what its KV estimate holds (`unsloth_vllm_2025::max_seq_length`)
        (Stack::Unsloth, UnslothVllmLimits::SequencesByKv) => {
            super::unsloth_vllm_2025::max_seq_length(run, budget)
        }
        _ => colocated_context(run),
    };
    let (seqs, batched) = batch_limits(run, total, budget, context);
    Some(plan_with(
        run,
        &Setup {
            total,
            utilization,
            free_at_start,
            trainer_at_start: around.trainer_at_start,
            weights,
            seqs,
            batched,
            context,
            kv_split: tp.min(run.arch.kv_heads.max(1)),
        },
    ))
}

/// The colocated vLLM's `max_model_len`: prompt + completion where the pinned TRL passes that
/// sum (`StackVersions::trl_context_is_prompt_and_completion`, trl 0.19.1
/// `GRPOTrainer.__init__`), else the run's context (`vllm_max_model_length` or Unsloth's
/// `max_seq_length`, the model's own when unset).
pub fn colocated_context(run: &RunConfig) -> u64 {
    if context_is_prompt_and_completion(run) {
        run.sequence_len()
    } else {
        run.max_seq_len
    }
}

/// Whether the pinned TRL gives its colocated vLLM `max_prompt_length +
/// max_completion_length` as its context rather than the run's (trl 0.18 to 0.25,
/// `StackVersions::trl_context_is_prompt_and_completion`).
pub fn context_is_prompt_and_completion(run: &RunConfig) -> bool {
    run.stack == Stack::Trl && run.versions.trl_context_is_prompt_and_completion()
}

/// vLLM's `request_memory`: what it asks of the GPU, `ceil(total x utilization)`.
fn request_memory(total: u64, utilization: f64) -> u64 {
    (total as f64 * utilization).ceil() as u64
}

/// What decides one vLLM instance's memory, wherever it runs.
struct Setup {
    total: u64,
    utilization: f64,
    free_at_start: u64,
    /// memory the trainer already holds on this GPU when vLLM starts
    trainer_at_start: u64,
    /// this GPU's part of vLLM's weights
    weights: u64,
    seqs: u64,
    batched: u64,
    /// `max_model_len`
    context: u64,
    /// GPUs each token's keys and values are split over (tensor parallelism)
    kv_split: u64,
}

/// vLLM's start-up on one GPU: its budget, the profile run, the KV cache that is left, and
/// whether it starts.
fn plan_with(run: &RunConfig, s: &Setup) -> VllmPlan {
    let (total, utilization, free_at_start, weights, seqs, batched) = (
        s.total,
        s.utilization,
        s.free_at_start,
        s.weights,
        s.seqs,
        s.batched,
    );
    let arch = &run.arch;
    let budget = request_memory(total, utilization);
    let activations = profile_peak(arch, batched, seqs);
    let graphs_in_budget = run.vllm_version.graphs_in_budget();
    let fixed = weights + activations + VLLM_NON_TORCH;
    let kv = budget.saturating_sub(
        fixed
            + if graphs_in_budget {
                VLLM_CUDA_GRAPHS
            } else {
                0
            },
    );
    let per_token = kv_bytes_per_token(arch, run.vllm_kv_fp8, s.context) / s.kv_split.max(1);
    let needed = per_token * s.context.div_ceil(BLOCK) * BLOCK;
    let usable = kv.saturating_sub(per_token * BLOCK);
    let refusal = if free_at_start < budget {
        Some(Refusal {
            reason: VllmRefusal::FreeMemory,
            detail: format!(
                "vLLM refuses to start: free memory on device ({}/{}) is less than desired GPU memory utilization ({utilization:.2}, {}){}",
                format_size(free_at_start),
                format_size(total),
                format_size(budget),
                if s.trainer_at_start > 0 {
                    format!(
                        "; the training model already holds {}",
                        format_size(s.trainer_at_start)
                    )
                } else {
                    String::new()
                },
            ),
        })
    } else if usable == 0 {
        Some(Refusal {
            reason: VllmRefusal::NoCacheBlocks,
            detail: format!(
                "vLLM refuses to start: no available memory for the cache blocks (its share of {} is taken by weights {}, profiled activations {} and CUDA graphs)",
                format_size(budget),
                format_size(weights),
                format_size(activations)
            ),
        })
    } else if needed > usable {
        Some(Refusal {
            reason: VllmRefusal::KvCacheTooSmall,
            detail: format!(
                "vLLM refuses to start: one request of max_model_len {} needs {} of KV cache, more than the {} available",
                s.context,
                format_size(needed),
                format_size(usable)
            ),
        })
    } else {
        None
    };
    let graphs = VLLM_CUDA_GRAPHS;
    let resident = weights + kv + graphs + VLLM_NON_TORCH;
    VllmPlan {
        reservation_bytes: resident + activations,
        budget_bytes: budget,
        utilization,
        weights_bytes: weights,
        activations_bytes: activations,
        cuda_graphs_bytes: graphs,
        non_torch_bytes: VLLM_NON_TORCH,
        kv_cache_bytes: kv,
        full_length_sequences: kv as f64 / needed.max(1) as f64,
        run_length_sequences: kv as f64
            / (per_token
                * run
                    .sequence_len()
                    .clamp(1, s.context.max(1))
                    .div_ceil(BLOCK)
                * BLOCK)
                .max(1) as f64,
        max_model_len: s.context,
        max_num_seqs: seqs,
        max_num_batched_tokens: batched,
        starts: refusal.is_none(),
        refusal,
        kept_while_training_bytes: kept_while_training(run, weights, resident),
    }
}

/// `trl vllm-serve` on one of its GPUs (a `capacity`-byte card like the trainers'): the
/// checkpoint's weights split by tensor parallelism (vLLM loads them itself and TRL pushes
/// merged weights into them), its own budget and context. No TRL release passes batch limits,
/// so vLLM's own defaults apply, by the pinned TRL and vLLM
/// (`vllm_batch_defaults::server_batch_defaults`: on vLLM 0.31 under trl 1.15's `vllm serve`,
/// 1024 sequences and 16384 batched tokens on a card of 160 GiB or more, 1024 and 8192 from
/// 70 GiB, else 256 and 2048).
pub fn server_plan(run: &RunConfig, capacity: u64) -> VllmPlan {
    let server = &run.vllm_server;
    let tp = server.tensor_parallel_size.max(1);
    let context = server.max_model_len.unwrap_or(run.arch.max_position);
    let (seqs, batched) = super::vllm_batch_defaults::server_batch_defaults(
        run.versions.trl,
        run.call_versions().vllm,
        capacity,
        context,
    );
    let free_at_start = capacity.saturating_sub(crate::memory::breakdown::CUDA_CONTEXT);
    plan_with(
        run,
        &Setup {
            total: capacity,
            utilization: server.gpu_memory_utilization,
            free_at_start,
            trainer_at_start: 0,
            // the checkpoint as vLLM loads it: 16-bit, or MXFP4 experts kept packed
            weights: super::moe::vllm_mxfp4_bytes(&run.arch).unwrap_or(2 * run.arch.parameters())
                / tp,
            seqs,
            batched: batched.max(seqs),
            context,
            kv_split: tp.min(run.arch.kv_heads.max(1)),
        },
    )
}

/// What stays on the GPU while the trainer runs its step. vLLM's profiled activations live in
/// PyTorch's cache of the same process, which the step reuses.
/// - TRL `vllm_enable_sleep_mode`: `llm.sleep(level=2)` after each generation discards what
///   vLLM's `CuMemAllocator` pool holds, the weights and the KV cache, and nothing else (vllm
///   0.20.0 `v1/worker/gpu_worker.py` `Worker.sleep`: `allocator.sleep(offload_tags=())`;
///   `device_allocator/cumem.py` `CuMemAllocator.sleep` releases only the pool's allocations,
///   tagged "weights" and "kv_cache" by `_maybe_get_memory_pool_context`). The CUDA graphs are
///   captured outside that pool (`compile_or_warm_up_model` -> `capture_model`) and stay;
/// - Unsloth standby: sleep discards the KV cache and moves graphs to CPU; the weights stay,
///   since training uses them.
fn kept_while_training(run: &RunConfig, weights: u64, resident: u64) -> u64 {
    match (run.stack, run.vllm_sleep) {
        (_, false) => resident,
        (Stack::Trl, true) => VLLM_NON_TORCH + VLLM_CUDA_GRAPHS,
        (Stack::Unsloth, true) => weights + VLLM_NON_TORCH,
    }
}

/// Whether vLLM's CUDA graphs stay on the GPU while the trainer runs its step
/// ([`kept_while_training`]): always but under Unsloth's standby.
pub fn graphs_kept_while_training(run: &RunConfig) -> bool {
    !(run.stack == Stack::Unsloth && run.vllm_sleep)
}

/// Unsloth standby's share, replacing the user's (load_vllm, vLLM >= 0.11): a tier by a tenth
/// of total memory, times 0.95.
pub fn standby_share(total: u64) -> f64 {
    let tenth = total as f64 / GIB as f64 * 0.1;
    let tier = match tenth {
        t if t >= 4.0 => 0.925,
        t if t >= 2.5 => 0.9,
        t if t >= 2.0 => 0.825,
        t if t >= 1.4 => 0.8,
        t if t >= 1.0 => 0.775,
        _ => 0.75,
    };
    tier * 0.95
}

/// `approximate_vllm_memory_usage`: the share of *free* memory, capped so that two sequences'
/// activations (x 1.25, 2 bytes) stay free; returned as a fraction of total memory.
fn unsloth_utilization(arch: &Arch, seq: u64, share: f64, free: u64, total: u64) -> f64 {
    let kv_width = arch.hidden / arch.heads.max(1) * arch.kv_heads;
    let qkv = seq * 2 * (arch.hidden + 2 * kv_width);
    let residual = seq * 2 * 2;
    let mlp = seq * 2 * 2 * arch.intermediate;
    let weights = arch.intermediate * arch.hidden;
    let reserve = (qkv + residual + mlp + weights) as f64 * 1.25 * 2.0;
    let wanted = share * free as f64;
    wanted.min(total as f64 - reserve).max(0.0) / total.max(1) as f64
}

/// vLLM's copy of the weights. Unsloth: the shared copy plus vLLM's LoRA buffers for
/// `max_lora_rank` (fp16, one adapter; `approximate_vllm_memory_usage`'s lora terms). TRL: 16-bit
/// (vLLM casts an fp32 checkpoint down) or bitsandbytes 4-bit when training is 4-bit.
fn vllm_weights(run: &RunConfig, training_weights: u64) -> u64 {
    let arch = &run.arch;
    match run.stack {
        Stack::Unsloth => training_weights + unsloth_lora_buffers(run),

        Stack::Trl => super::moe::vllm_mxfp4_bytes(arch).unwrap_or(if run.quant == Quant::Fp32 {
            training_weights / 2
        } else {
            training_weights
        }),
    }
}

/// vLLM's fp16 LoRA buffers for `max_lora_rank`, one adapter, as `approximate_vllm_memory_usage`
/// counts them (`lora_elements`, unsloth_zoo 2026.10.9: A and B on q, k, v, o and the MLP).
fn unsloth_lora_buffers(run: &RunConfig) -> u64 {
    let arch = &run.arch;
    let r = crate::run::vllm_max_lora_rank(run.max_lora_rank.unwrap_or(run.lora_rank));
    let (h, i, q, kv) = (arch.hidden, arch.intermediate, arch.q_dim(), arch.kv_dim());
    let qkvo = r * (3 * h + q) + r * (q + 2 * kv + h);
    let mlp = 2 * h * r + i * r + r * 2 * i + r * h;
    (qkvo + mlp) * arch.layers * 2
}

/// Unsloth's own count of vLLM's weights, which picks its batch tier (unsloth_zoo 2026.10.9
/// `vllm_weights_memory_usage`, passed to `approximate_vllm_memory_usage` as `weight_bytes`):
/// every linear weight and stacked expert tensor but the LM head at `2 / (16/5)` bytes when
/// 4-bit ("Should be 4.5 but use 5": 5 bits, where bitsandbytes' NF4 stores about 4.1),
/// `2 / (8/5)` for fp8, else 2; everything else (embedding, head, norms, biases) at 2 bytes;
/// plus the LoRA buffers ([`unsloth_lora_buffers`]). Not what vLLM holds: what Unsloth thinks.
fn unsloth_counted_weights(run: &RunConfig) -> u64 {
    let arch = &run.arch;
    let per_layer: u64 = arch
        .projections()
        .iter()
        .map(|p| p.fan_in * p.fan_out)
        .sum::<u64>()
        + arch.expert_tensors().iter().take(3).sum::<u64>();
    let packed = per_layer * arch.layers;
    let rest = arch.parameters().saturating_sub(packed);
    let packed_bytes = match run.quant {
        Quant::Nf4 => packed as f64 * 2.0 / (16.0 / 5.0),
        Quant::Fp8 => packed as f64 * 2.0 / (8.0 / 5.0),
        _ => packed as f64 * 2.0,
    };
    packed_bytes as u64 + 2 * rest + unsloth_lora_buffers(run)
}

/// `max_num_seqs` and `max_num_batched_tokens`. TRL: the generation batch of the tensor-parallel
/// group (`per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation`,
/// trl 1.15.0 `GRPOTrainer.__init__`; `gradient_accumulation_steps` in place of
/// `steps_per_generation` before 0.20, `StackVersions::trl_colocated_seqs_per_micro_batch`)
/// and 4096 tokens from trl 0.19, vLLM's own default before
/// (`vllm_batch_defaults::colocated_batched_tokens`). Unsloth: by release (`unsloth_vllm_limits`), a
/// table on its own KV estimate (load_vllm, 2026.10.9: `unsloth_pairs`; before unsloth_zoo
/// 2025.11.6: `unsloth_vllm_2025::limits`), the tokens capped at `seqs x max_seq_length`, unless
/// the file passes them to load_vllm. `context`: the colocated vLLM's `max_model_len`
/// ([`colocated_context`]).
fn batch_limits(run: &RunConfig, total: u64, budget: u64, context: u64) -> (u64, u64) {
    match run.stack {
        Stack::Trl => {
            let tokens = super::vllm_batch_defaults::colocated_batched_tokens(
                run.versions.trl,
                run.call_versions().vllm,
                total,
                context,
            );
            let micro_batches = run
                .versions
                .trl_colocated_seqs_per_micro_batch(run.grad_accum, run.steps_per_generation());
            (
                (run.micro_batch * run.vllm_tensor_parallel.max(1) * micro_batches)
                    .clamp(1, tokens),
                tokens,
            )
        }
        Stack::Unsloth => {
            let (tokens, seqs) = match run.versions.unsloth_vllm_limits() {
                UnslothVllmLimits::SequencesByKv => super::unsloth_vllm_2025::limits(run, budget),
                UnslothVllmLimits::PairsByKv => unsloth_pairs(run, budget),
            };
            let seqs = run.vllm_max_num_seqs.unwrap_or(seqs.max(1));
            let tokens = run
                .vllm_max_num_batched_tokens
                .unwrap_or(tokens.min(seqs * run.max_seq_len))
                .max(seqs);
            (seqs, tokens)
        }
    }
}

/// unsloth_zoo 2025.11.6 on (`load_vllm`, read in 2026.10.9): `(max_num_batched_tokens,
/// max_num_seqs)` from one tier of its KV estimate, sequences x 1.05 with an fp8 KV cache.
fn unsloth_pairs(run: &RunConfig, budget: u64) -> (u64, u64) {
    // Unsloth's own KV estimate: its share less its own count of the weights and LoRA
    // (`unsloth_counted_weights`) and a CUDA-graph reserve of 172 graphs x hidden x layers x 4
    // bytes, clamped to 0.15-1 GiB
    let reserve =
        (172 * run.arch.hidden * run.arch.layers * 4).clamp((0.15 * GIB as f64) as u64, GIB);
    let kv_gib = budget.saturating_sub(unsloth_counted_weights(run) + reserve) as f64 / GIB as f64;
    let (tokens, seqs) = match kv_gib {
        g if g <= 2.0 => (2048, 8),
        g if g <= 4.0 => (2048, 16),
        g if g <= 8.0 => (4096, 32),
        g if g <= 12.0 => (4096, 48),
        g if g <= 16.0 => (6144, 64),
        g if g <= 24.0 => (6144, 80),
        g if g <= 40.0 => (8192, 96),
        g if g <= 48.0 => (8192, 112),
        g if g <= 80.0 => (8192, 128),
        _ => (8192, 256),
    };
    let fp8 = if run.vllm_kv_fp8 { 1.05 } else { 1.0 };
    (tokens, (seqs as f64 * fp8) as u64)
}

/// The profile run's peak above the weights: one forward of `tokens` tokens (the MLP's
/// intermediate tensors dominate) and the sampler over `min(tokens, seqs)` rows of fp32 logits.
fn profile_peak(arch: &Arch, tokens: u64, seqs: u64) -> u64 {
    let forward = tokens * (arch.intermediate * 2 * 2 + arch.hidden * 4);
    let rows = tokens.min(seqs);
    forward + (SAMPLER_COPIES * (rows * arch.vocab * 4) as f64) as u64
}

/// KV-cache bytes a token takes across the layers: keys and values, 16-bit or fp8; a
/// sliding-window layer holds at most its window, spread here over `context` tokens.
pub fn kv_bytes_per_token(arch: &Arch, fp8: bool, context: u64) -> u64 {
    let width = 2 * arch.kv_heads * arch.head_dim * if fp8 { 1 } else { 2 };
    let full = arch.layers - arch.sliding_layers.min(arch.layers);
    let sliding = match arch.sliding_window {
        Some(w) if context > 0 => arch.sliding_layers * w.min(context) / context,
        _ => arch.sliding_layers,
    };
    width * (full + sliding).max(1)
}
