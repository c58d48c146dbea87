//! The estimate: a list of named components that add up to the GPU memory a run needs.

use super::arch::Arch;
use super::run::{
    Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack, vllm_max_lora_rank,
};
use super::step::{self, StepPeak, StepShape};
use super::units::{GIB, MIB, format_size};
use serde::Serialize;

/// NVML-visible memory above PyTorch's reserved memory, for the whole device with one training
/// process: CUDA context, kernels, cuBLAS/cuDNN handles and the driver's own reservation.
/// Measured on the H200: 1.35-1.37 GiB (median 1.363 GiB) after every step of the 91 runs of
/// ../shared/calibration/h200-hf-peft.jsonl (`nvml_after - peak_reserved`).
pub const CUDA_CONTEXT: u64 = (1.363 * GIB as f64) as u64;

/// cuBLAS workspace PyTorch allocates per handle on Hopper (4096 KiB x 8), one for the forward
/// thread and one for autograd's backward thread: `reserved_after_matmul` = 32 MiB in the shared
/// calibration's environment record, and the first record's optimizer-state bytes carry it.
pub const CUBLAS_WORKSPACES: u64 = 2 * 32 * MIB;

/// vLLM's CUDA graphs: vLLM logs 0.2-1 GiB for graph capture of decode batch sizes up to 512;
/// taken at 0.5 GiB (not measured here).
pub const VLLM_CUDA_GRAPHS: u64 = GIB / 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    CudaContext,
    VllmWeights,
    SharedWeights,
    VllmCudaGraphs,
    VllmActivations,
    VllmKvCache,
    BaseWeights,
    LoraAdapters,
    LoraGradients,
    OptimizerStates,
    Activations,
    Logits,
    AllocatorSlack,
}

impl Part {
    pub fn label(self) -> &'static str {
        match self {
            Part::CudaContext => "CUDA context",
            Part::VllmWeights => "vLLM weights",
            Part::SharedWeights => "model weights",
            Part::VllmCudaGraphs => "vLLM CUDA graphs",
            Part::VllmActivations => "vLLM activations",
            Part::VllmKvCache => "vLLM KV cache",
            Part::BaseWeights => "base weights",
            Part::LoraAdapters => "LoRA adapters",
            Part::LoraGradients => "LoRA gradients",
            Part::OptimizerStates => "optimizer states",
            Part::Activations => "activations",
            Part::Logits => "logits",
            Part::AllocatorSlack => "allocator slack",
        }
    }

    pub fn explanation(self) -> &'static str {
        match self {
            Part::CudaContext => {
                "driver, CUDA context, kernels and cuBLAS workspaces (measured on an H200)"
            }
            Part::VllmWeights => "vLLM's copy of the model weights, inside its memory share",
            Part::SharedWeights => {
                "one copy of the weights inside vLLM's share, used by training too (Unsloth)"
            }
            Part::VllmCudaGraphs => "decode CUDA graphs vLLM captures at start-up",
            Part::VllmActivations => "vLLM's profiled forward pass and sampler buffers",
            Part::VllmKvCache => "what is left of vLLM's share: the KV cache for generation",
            Part::BaseWeights => "the frozen base model the trainer holds",
            Part::LoraAdapters => "trainable LoRA A/B matrices (fp32, as PEFT keeps them)",
            Part::LoraGradients => "gradients of the adapters live at the peak",
            Part::OptimizerStates => "optimizer moments for the adapter parameters",
            Part::Activations => "tensors autograd keeps for the backward pass at the peak",
            Part::Logits => "logits, log-softmax rows and entropy chunks at the peak",
            Part::AllocatorSlack => "blocks PyTorch's caching allocator holds but no tensor uses",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub part: Part,
    pub name: &'static str,
    pub bytes: u64,
    pub explanation: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct VllmPlan {
    pub reservation_bytes: u64,
    pub kv_cache_bytes: u64,
    /// sequences of `max_seq_length` tokens the KV cache can hold at once
    pub full_length_sequences: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub capacity_bytes: u64,
    pub total_bytes: u64,
    pub fits: bool,
    pub headroom_bytes: i64,
    pub components: Vec<Component>,
    pub effective_batch: u64,
    pub prompts_per_step: f64,
    pub running_micro_batch: u64,
    pub training_peak_allocated_bytes: u64,
    pub training_peak_reserved_bytes: u64,
    pub vllm: Option<VllmPlan>,
    pub warnings: Vec<String>,
}

/// The GPU the run is fitted into.
#[derive(Debug, Clone, Copy)]
pub struct GpuBudget {
    pub capacity: u64,
    /// memory other processes hold (from NVML), when known
    pub used_by_others: u64,
}

/// Static training memory: what exists before the step begins.
struct Static {
    weights: u64,
    adapters: u64,
    gradients: u64,
    optimizer: u64,
    /// what the caching allocator reserves for them
    reserved: u64,
}

/// The pure estimate: no I/O, no globals.
pub fn estimate(run: &RunConfig, gpu: GpuBudget) -> Estimate {
    estimate_using(run, gpu, step_peak)
}

/// What one training step's peak depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct StepKey {
    arch: Arch,
    targets: Vec<bool>,
    shape: StepShape,
    stack: Stack,
    checkpointing: Checkpointing,
}

/// Estimates that remember step peaks: the allocator replay of a `trl` step costs a few hundred
/// microseconds, and most knob changes (vLLM share, accumulation, GPUs, optimizer, capacity)
/// leave the step unchanged. For the interactive screen and the fit search.
#[derive(Default)]
pub struct Estimator {
    steps: std::collections::HashMap<StepKey, StepPeak>,
}

impl Estimator {
    /// Step peaks kept before the memory is dropped and filled again.
    const CAPACITY: usize = 4096;

    pub fn new() -> Estimator {
        Estimator::default()
    }

    pub fn estimate(&mut self, run: &RunConfig, gpu: GpuBudget) -> Estimate {
        estimate_using(run, gpu, |run, targets, shape| {
            let key = StepKey {
                arch: run.arch.clone(),
                targets: targets.to_vec(),
                shape: *shape,
                stack: run.stack,
                checkpointing: run.checkpointing,
            };
            if let Some(peak) = self.steps.get(&key) {
                return *peak;
            }
            if self.steps.len() >= Self::CAPACITY {
                self.steps.clear();
            }
            let peak = step_peak(run, targets, shape);
            self.steps.insert(key, peak);
            peak
        })
    }
}

fn step_peak(run: &RunConfig, targets: &[bool], shape: &StepShape) -> StepPeak {
    match run.stack {
        Stack::Trl => step::trl_step(&run.arch, targets, shape),
        Stack::Unsloth => step::unsloth_step(&run.arch, targets, shape, run.checkpointing),
    }
}

fn estimate_using(
    run: &RunConfig,
    gpu: GpuBudget,
    mut step: impl FnMut(&RunConfig, &[bool], &StepShape) -> StepPeak,
) -> Estimate {
    let arch = &run.arch;
    let targets = target_mask(arch, &run.lora_targets);
    let micro = run.running_micro_batch();
    let shape = StepShape {
        seqs: micro,
        prompt: run.prompt_len,
        completion: run.completion_len,
        rank: run.lora_rank,
        checkpointing: run.checkpointing != Checkpointing::Off,
        reference_pass: run.beta > 0.0,
        quantised_base: run.quant != Quant::Bf16,
        fused_logits: run.fused_logits && run.stack == Stack::Trl,
        expandable_segments: run.expandable_segments,
    };
    let stat = static_memory(run, &targets);
    let peak = step(run, &targets, &shape);
    let shares_weights = run.stack == Stack::Unsloth;
    let train_weights = if shares_weights { 0 } else { stat.weights };
    let allocated = train_weights + stat.adapters + stat.optimizer + peak.activations + peak.logits;
    let reserved_static = stat.reserved - if shares_weights { stat.weights } else { 0 };
    let reserved = (reserved_static + peak.reserved).max(allocated + stat.gradients);

    let mut parts = vec![
        (Part::CudaContext, CUDA_CONTEXT + CUBLAS_WORKSPACES),
        (Part::BaseWeights, train_weights),
        (Part::LoraAdapters, stat.adapters),
        (Part::LoraGradients, stat.gradients),
        (Part::OptimizerStates, stat.optimizer),
        (Part::Activations, peak.activations),
        (Part::Logits, peak.logits),
        (Part::AllocatorSlack, reserved - allocated - stat.gradients),
    ];
    let vllm = vllm_plan(run, gpu, stat.weights);
    let mut warnings = Vec::new();
    if let Some(v) = &vllm {
        let (w, g, a) = vllm_fixed(run, stat.weights);
        let weights_part = if shares_weights {
            Part::SharedWeights
        } else {
            Part::VllmWeights
        };
        parts.insert(1, (weights_part, w));
        parts.insert(2, (Part::VllmCudaGraphs, g));
        parts.insert(3, (Part::VllmActivations, a));
        parts.insert(4, (Part::VllmKvCache, v.kv_cache_bytes));
        if v.full_length_sequences < 1.0 {
            warnings.push(format!(
                "vLLM's KV cache ({}) cannot hold one sequence of {} tokens: raise the vLLM share or shorten max_seq_length",
                format_size(v.kv_cache_bytes),
                run.max_seq_len
            ));
        }
    }
    if let (Generation::ColocatedVllm { share }, Stack::Trl) = (run.generation, run.stack) {
        // TRL loads the training model first, then vLLM, which refuses to start when free
        // memory is below `gpu_memory_utilization x total`.
        let wanted = (gpu.capacity as f64 * share) as u64;
        let free = gpu
            .capacity
            .saturating_sub(CUDA_CONTEXT + gpu.used_by_others + stat.weights);
        if wanted > free {
            warnings.push(format!(
                "vLLM will refuse to start: it wants {share} x {} = {} but only {} is free once the training model is loaded",
                format_size(gpu.capacity),
                format_size(wanted),
                format_size(free)
            ));
        }
    }
    let training_side = CUDA_CONTEXT + CUBLAS_WORKSPACES + reserved;
    let total = match (&vllm, run.unsloth_standby && shares_weights) {
        // Standby: vLLM's KV cache is released while training runs, so the peak is the larger phase.
        (Some(v), true) => (CUDA_CONTEXT + v.reservation_bytes).max(training_side + stat.weights),
        (Some(v), false) => training_side + v.reservation_bytes,
        (None, _) => training_side + if shares_weights { stat.weights } else { 0 },
    };
    if vllm.is_none() && shares_weights {
        parts[1] = (Part::BaseWeights, stat.weights);
    }
    let components = normalise(parts, total);
    warnings.extend(rule_warnings(run, micro, &targets));
    let headroom = gpu.capacity as i64 - total as i64;
    Estimate {
        capacity_bytes: gpu.capacity,
        total_bytes: total,
        fits: headroom >= 0,
        headroom_bytes: headroom,
        components,
        effective_batch: run.effective_batch(),
        prompts_per_step: run.effective_batch() as f64 / run.num_generations.max(1) as f64,
        running_micro_batch: micro,
        training_peak_allocated_bytes: allocated,
        training_peak_reserved_bytes: reserved,
        vllm,
        warnings,
    }
}

/// Components in display order, zero ones dropped; in standby mode the phases overlap, so the
/// list is scaled to the phase that sets the peak by trimming the KV cache.
fn normalise(parts: Vec<(Part, u64)>, total: u64) -> Vec<Component> {
    let mut out: Vec<Component> = parts
        .into_iter()
        .filter(|(_, b)| *b > 0)
        .map(|(part, bytes)| Component {
            part,
            name: part.label(),
            bytes,
            explanation: part.explanation(),
        })
        .collect();
    let sum: u64 = out.iter().map(|c| c.bytes).sum();
    if sum > total {
        let mut excess = sum - total;
        for c in out.iter_mut().filter(|c| c.part == Part::VllmKvCache) {
            let cut = excess.min(c.bytes);
            c.bytes -= cut;
            excess -= cut;
        }
    }
    out
}

/// Which of the architecture's projections carry an adapter, by PEFT's name matching.
pub fn target_mask(arch: &Arch, targets: &[String]) -> Vec<bool> {
    let all = targets.iter().any(|t| t == "all-linear");
    arch.projections()
        .iter()
        .map(|p| all || targets.iter().any(|t| t == p.name))
        .collect()
}

fn tensor_bytes(elements: u64, quant: Quant, quantisable: bool) -> u64 {
    match (quant, quantisable) {
        (Quant::Bf16, _) | (_, false) => elements * 2,
        // LLM.int8: one byte a weight plus one fp32 scale per output row (taken as per 4096 weights)
        (Quant::Int8, true) => elements + elements / 1024,
        // NF4: half a byte a weight; one 8-bit absmax per 64 weights; one fp32 per 256 absmaxes
        (Quant::Nf4, true) => elements / 2 + elements / 64 + elements / (64 * 256) * 4,
    }
}

/// Bytes a tensor's block takes when allocated fresh: a tensor over 10 MiB gets its own
/// segment rounded to 2 MiB, and a left-over of 1 MiB or less is not split off (measured:
/// Qwen2.5-3B's 43 MiB MLP weights take 44 MiB each; weights_bytes exceeds 2 x n_params by 104.5 MiB).
fn block_bytes(bytes: u64) -> u64 {
    let rounded = super::allocator::round_request(bytes);
    let segment = rounded.div_ceil(2 * MIB) * 2 * MIB;
    if rounded > 10 * MIB && segment - rounded <= MIB {
        segment
    } else {
        rounded
    }
}

/// Segments a group of tensors occupies: small ones packed into 2 MiB segments, 1-10 MiB ones
/// into 20 MiB segments, larger ones in their own.
#[derive(Default)]
struct Packing {
    small: u64,
    mid: u64,
    large: u64,
}

impl Packing {
    fn add(&mut self, bytes: u64, copies: u64) {
        let b = block_bytes(bytes) * copies;
        if bytes <= MIB {
            self.small += b;
        } else if bytes < 10 * MIB {
            self.mid += b;
        } else {
            self.large += b;
        }
    }
    fn reserved(&self) -> u64 {
        self.small.div_ceil(2 * MIB) * 2 * MIB + self.mid.div_ceil(20 * MIB) * 20 * MIB + self.large
    }
}

fn static_memory(run: &RunConfig, targets: &[bool]) -> Static {
    let arch = &run.arch;
    let mut weights = 0;
    let mut packing = Packing::default();
    let projections = arch.projections();
    let mut add = |elements: u64, quantisable: bool, copies: u64| {
        let b = block_bytes(tensor_bytes(elements, run.quant, quantisable));
        weights += b * copies;
        packing.add(b, copies);
    };
    // bitsandbytes quantises the decoder's linear layers, not the embedding, norms or head
    let embedding = arch.vocab * arch.hidden;
    add(embedding, false, 1);
    for p in &projections {
        add(p.fan_in * p.fan_out, true, arch.layers);
    }
    for v in arch.layer_vectors() {
        add(v, false, arch.layers);
    }
    add(arch.hidden, false, 1);
    if !arch.tied_embeddings {
        add(embedding, false, 1);
    }
    let (mut adapters, mut optimizer) = (0, 0);
    for (p, _) in projections.iter().zip(targets).filter(|(_, on)| **on) {
        for elements in [run.lora_rank * p.fan_in, run.lora_rank * p.fan_out] {
            let a = block_bytes(elements * 4);
            let o = optimizer_bytes(run.optimizer, elements);
            adapters += a * arch.layers;
            optimizer += o * arch.layers;
            // the adapter, its gradient and the optimizer's states
            packing.add(elements * 4, 2 * arch.layers);
            packing.add(o, arch.layers);
        }
    }
    // Gradients live all together only after the backward pass, when activations are gone;
    // at the step's peak one layer's worth exists.
    let gradients = adapters / arch.layers.max(1);
    Static {
        weights,
        adapters,
        gradients,
        optimizer,
        reserved: packing.reserved(),
    }
}

/// Optimizer state bytes for one adapter tensor of `elements`.
/// AdamW: exp_avg and exp_avg_sq in fp32 plus a 4-byte step (measured: opt_state_bytes = 2 x lora_bytes).
/// bitsandbytes 8-bit: two uint8 states with an fp32 absmax per 256-element block; tensors under
/// 4096 elements stay fp32 (bnb's `min_8bit_size`).
fn optimizer_bytes(opt: Optimizer, elements: u64) -> u64 {
    let eight_bit = |n: u64| {
        if n < 4096 {
            8 * n
        } else {
            2 * (n + n.div_ceil(256) * 4)
        }
    };
    match opt {
        Optimizer::AdamW | Optimizer::PagedAdamW => block_bytes(4 * elements) * 2 + 512,
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => block_bytes(eight_bit(elements)),
        Optimizer::Sgd => 0,
    }
}

/// vLLM's weights copy, CUDA graphs and profiled activations: the part of its share that is not KV cache.
fn vllm_fixed(run: &RunConfig, weights: u64) -> (u64, u64, u64) {
    let arch = &run.arch;
    // vLLM profiles one forward of max_num_batched_tokens tokens, taken as max(8192, max_model_len)
    // (vLLM V1's default budget), and keeps the sampler's fp32 logits for up to 256 sequences.
    // Not measured here: an estimate of what vLLM's profiling run holds outside the KV cache.
    let tokens = run.max_seq_len.max(8192);
    let activations = tokens * (arch.intermediate * 2 * 2 + arch.hidden * 4) + 256 * arch.vocab * 4;
    (weights, VLLM_CUDA_GRAPHS, activations)
}

fn vllm_plan(run: &RunConfig, gpu: GpuBudget, weights: u64) -> Option<VllmPlan> {
    let Generation::ColocatedVllm { share } = run.generation else {
        return None;
    };
    // TRL colocate: vLLM takes `share x total`; Unsloth: `share x free` at start-up.
    let base = match run.stack {
        Stack::Trl => gpu.capacity,
        Stack::Unsloth => gpu
            .capacity
            .saturating_sub(CUDA_CONTEXT + gpu.used_by_others),
    };
    let share_bytes = (base as f64 * share) as u64;
    let (w, g, a) = vllm_fixed(run, weights);
    // A share too small for the weights, graphs and profiled activations does not shrink them:
    // vLLM still needs that much (and has no KV cache left), so the larger figure is counted.
    let reservation = share_bytes.max(w + g + a);
    let kv = share_bytes.saturating_sub(w + g + a);
    let per_sequence = run.arch.kv_bytes_for(run.max_seq_len).max(1);
    Some(VllmPlan {
        reservation_bytes: reservation,
        kv_cache_bytes: kv,
        full_length_sequences: kv as f64 / per_sequence as f64,
    })
}

/// The trainer rules of SPEC section 1 that the knobs break.
fn rule_warnings(run: &RunConfig, micro: u64, targets: &[bool]) -> Vec<String> {
    let mut w = Vec::new();
    let generations = run.num_generations.max(1);
    if micro != run.micro_batch {
        w.push(format!(
            "Unsloth will run micro-batch {micro}, not {}: batch x accumulation x GPUs = {} is not divisible by num_generations = {generations} (estimated with {micro})",
            run.micro_batch,
            run.effective_batch()
        ));
    } else if run.stack == Stack::Trl && run.effective_batch() % generations != 0 {
        w.push(format!(
            "TRL needs the generation batch (batch x accumulation x GPUs = {}) divisible by num_generations = {generations}",
            run.effective_batch()
        ));
    }
    if run.max_seq_len < run.sequence_len() {
        w.push(format!(
            "max_seq_length {} is smaller than prompt + completion = {}",
            run.max_seq_len,
            run.sequence_len()
        ));
    }
    if run.stack == Stack::Unsloth && matches!(run.generation, Generation::ColocatedVllm { .. }) {
        let m = run
            .max_lora_rank
            .unwrap_or_else(|| vllm_max_lora_rank(run.lora_rank));
        let served = vllm_max_lora_rank(m);
        if served != m {
            w.push(format!(
                "Unsloth rounds max_lora_rank {m} up to {served}, a rank vLLM supports (8, 16, 32, 64, 128, 256, 320, 512)"
            ));
        }
        if run.lora_rank > served {
            w.push(format!(
                "r = {} exceeds max_lora_rank = {m}: vLLM cannot load the adapter",
                run.lora_rank
            ));
        }
    }
    if !targets.iter().any(|t| *t) {
        w.push(format!(
            "no LoRA target module matches {}'s projections ({}): PEFT will refuse to start",
            run.arch.name,
            run.arch
                .projections()
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    w
}
