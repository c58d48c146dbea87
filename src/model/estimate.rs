//! The estimate: a list of named components that add up to the GPU memory a run needs.

use super::arch::{Arch, Vision};
use super::generate::generate_memory;
use super::roles::{self, Role};
use super::run::{
    Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack, vllm_max_lora_rank,
};
use super::spread;
use super::step::{self, StepPeak, StepShape};
use super::units::{GIB, MIB};
use super::unsloth_step::{SMALL_CARD, unsloth_step};
use super::versions::UnslothLogits;
use super::vllm;
use serde::Serialize;

/// What one training process holds on the GPU beyond PyTorch's reserved memory: CUDA context,
/// kernels, cuBLAS/cuDNN handles. Measured on the H200 as NVML's used memory after each step less
/// the step's reserved peak, less what NVML counted as used before the process started (the
/// driver's own reservation, 0.604 GiB, which CUDA's total already leaves out: NVML total
/// 150,754,820,096 bytes against torch's total_memory 150,109,880,320). Over the 91 runs of
/// ../shared/calibration/h200-hf-peft.jsonl, `nvml_after - peak_reserved - nvml_before.used`:
/// 0.745-0.771 GiB, median 0.759 GiB. Capacity is CUDA's total throughout (what torch, Unsloth's
/// banner and OOM messages print), so the driver's reservation is counted nowhere.
pub const CUDA_CONTEXT: u64 = (0.759 * GIB as f64) as u64;

/// cuBLAS workspace PyTorch allocates per handle on Hopper (4096 KiB x 8), one for the forward
/// thread and one for autograd's backward thread: `reserved_after_matmul` = 32 MiB in the shared
/// calibration's environment record, and the first record's optimizer-state bytes carry it.
pub const CUBLAS_WORKSPACES: u64 = 2 * 32 * MIB;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    CudaContext,
    VllmWeights,
    SharedWeights,
    VllmCudaGraphs,
    VllmActivations,
    VllmKvCache,
    GenerationKvCache,
    BaseWeights,
    LoraAdapters,
    LoraGradients,
    OptimizerStates,
    Activations,
    Logits,
    MicroBatchLogits,
    SequenceLogitsFp32,
    MicroBatchLogitsFp32,
    AllocatorSlack,
    Weights,
    Gradients,
    GatheredWeights,
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
            Part::GenerationKvCache => "generation KV cache",
            Part::BaseWeights => "base weights",
            Part::LoraAdapters => "LoRA adapters",
            Part::LoraGradients => "LoRA gradients",
            Part::OptimizerStates => "optimizer states",
            Part::Activations => "activations",
            Part::Logits => "logits",
            Part::MicroBatchLogits => "micro-batch logits",
            Part::SequenceLogitsFp32 => "fp32 seq. logits",
            Part::MicroBatchLogitsFp32 => "fp32 batch logits",
            Part::AllocatorSlack => "allocator slack",
            Part::Weights => "model weights",
            Part::Gradients => "gradients",
            Part::GatheredWeights => "gathered weights",
        }
    }

    pub fn explanation(self) -> &'static str {
        match self {
            Part::CudaContext => {
                "CUDA context, kernels and cuBLAS workspaces (measured on an H200)"
            }
            Part::VllmWeights => {
                "vLLM's own weights copy (TRL) or LoRA buffers (Unsloth), and its non-PyTorch memory"
            }
            Part::SharedWeights => {
                "one copy of the weights inside vLLM's share, used by training too (Unsloth)"
            }
            Part::VllmCudaGraphs => "decode CUDA graphs vLLM captures at start-up",
            Part::VllmActivations => "vLLM's profiled forward pass and sampler buffers",
            Part::VllmKvCache => "what is left of vLLM's share: the KV cache for generation",
            Part::GenerationKvCache => {
                "transformers' generate: keys and values of every completion being generated"
            }
            Part::BaseWeights => "the frozen base model the trainer holds",
            Part::LoraAdapters => "trainable LoRA A/B matrices (fp32, as PEFT keeps them)",
            Part::LoraGradients => "gradients of the adapters live at the peak",
            Part::OptimizerStates => {
                "optimizer moments for the trained parameters (and the fp32 master weights ZeRO and FSDP keep)"
            }
            Part::Activations => "tensors autograd keeps for the backward pass at the peak",
            Part::Logits => "logits blocks and log-prob statistics at the peak",
            Part::MicroBatchLogits => {
                "the micro-batch's logits, materialised whole and read by log-softmax (TRL before 1.15; Unsloth 2025.2 runs TRL's loss)"
            }
            Part::MicroBatchLogitsFp32 => {
                "Unsloth 2025.3-2025.7 with a FastModel model: the micro-batch's logits, the reference's, and both upcast to fp32 whole in grpo_compute_loss_slow"
            }
            Part::SequenceLogitsFp32 => {
                "Unsloth 2025's GRPO loss (UnslothEfficientGRPO): each sequence's logits and their fp32 upcast, the reference's too when beta != 0"
            }
            Part::AllocatorSlack => "blocks PyTorch's caching allocator holds but no tensor uses",
            Part::Weights => {
                "the trained model's parameters on this GPU: whole, or this rank's shard (ZeRO-3, FSDP)"
            }
            Part::Gradients => {
                "every weight's gradients on this GPU (ZeRO's fp32 partitions, DDP's buckets)"
            }
            Part::GatheredWeights => {
                "parameters gathered from the other ranks: the live layers (ZeRO-3, FSDP) and the whole model TRL gathers to sync vLLM"
            }
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

pub use super::vllm::VllmPlan;

/// The two phases of a GRPO step on one GPU: generating completions, then training on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Generation,
    Training,
}

impl Phase {
    /// The phase in the user's words.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Generation => "generation",
            Phase::Training => "training",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
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
    /// the phase whose memory is the peak (the components are that phase's)
    pub peak_phase: Phase,
    /// both phases, when vLLM shares the GPU (generation, then training)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseMemory>,
    /// every role's GPUs (one training role on a single GPU); the figures above are the
    /// training role's
    pub roles: Vec<Role>,
    /// host memory each node needs for offloaded states (ZeRO-Offload, FSDP CPU offload)
    pub host_memory_bytes: u64,
    pub warnings: Vec<String>,
}

/// The GPU the run is fitted into.
#[derive(Debug, Clone, Copy)]
pub struct GpuBudget {
    pub capacity: u64,
    /// memory other processes hold (from NVML), when known
    pub used_by_others: u64,
    /// the CUDA context measured on this card (`vramfit calibrate`), instead of `CUDA_CONTEXT`
    pub context: Option<u64>,
}

/// Static training memory: what exists before the step begins.
struct Static {
    weights: u64,
    adapters: u64,
    gradients: u64,
    optimizer: u64,
    /// full fine-tuning: every weight's gradients, held from step to step (ZeRO's partitions)
    full_gradients: u64,
    /// ZeRO-3 / FSDP: the live layers' gathered parameters
    gathered: u64,
    /// host memory per node for offloaded states
    host: u64,
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
        Stack::Unsloth => unsloth_step(&run.arch, targets, shape, run.checkpointing),
    }
}

/// The step's shape. `free` is what the GPU has left when the step starts; only Unsloth's step
/// reads it, so TRL's shape leaves it out and its peaks stay shared in the `Estimator`.
fn step_shape(run: &RunConfig, capacity: u64, free: u64) -> StepShape {
    let unsloth = run.stack == Stack::Unsloth;
    // TRL 1.x (fused head) and Unsloth score the generation batch before training on it; the
    // calibration harness (`measure.py`, unfused logits) runs its reference pass inside the step
    let trainer = unsloth || run.fused_logits;
    StepShape {
        seqs: run.running_micro_batch(),
        prompt: run.prompt_len,
        completion: run.completion_len,
        rank: run.lora_rank,
        checkpointing: run.checkpointing != Checkpointing::Off,
        reference_pass: run.beta > 0.0
            && (!trainer || unsloth && run.versions.unsloth_logits() == UnslothLogits::TrlLoss),
        quantised_base: run.quant.is_quantised(),
        fused_logits: run.fused_logits && run.stack == Stack::Trl,
        expandable_segments: run.expandable_segments,
        scoring_rows: if trainer
            && run.scores_before_training()
            && (!unsloth || run.versions.unsloth_scores_before_training())
        {
            run.generation_rows()
        } else {
            0
        },
        free_at_step: if unsloth { free } else { 0 },
        small_card: unsloth && capacity <= SMALL_CARD,
        unsloth_logits: if unsloth {
            super::versions::unsloth_logits_of(run)
        } else {
            UnslothLogits::Blocks
        },
        reference_logits: unsloth && run.beta != 0.0,
    }
}

fn estimate_using(
    run: &RunConfig,
    gpu: GpuBudget,
    mut step: impl FnMut(&RunConfig, &[bool], &StepShape) -> StepPeak,
) -> Estimate {
    let targets = if run.full_finetuning {
        vec![false; run.arch.projections().len()]
    } else {
        target_mask(&run.arch, &run.lora_targets)
    };
    let micro = run.running_micro_batch();
    let stat = static_memory(run, &targets);
    let shares_weights = run.stack == Stack::Unsloth;
    let context = (
        Part::CudaContext,
        gpu.context.unwrap_or(CUDA_CONTEXT) + CUBLAS_WORKSPACES,
    );
    let weights_part = if run.full_finetuning {
        Part::Weights
    } else if shares_weights && matches!(run.generation, Generation::ColocatedVllm { .. }) {
        Part::SharedWeights
    } else {
        Part::BaseWeights
    };
    let trainer_static = [
        (weights_part, stat.weights),
        (Part::LoraAdapters, stat.adapters),
        (Part::OptimizerStates, stat.optimizer),
        (Part::Gradients, stat.full_gradients),
        (Part::GatheredWeights, stat.gathered),
    ];
    // generating, TRL gathers what it pushes into vLLM or generates with (ZeRO-3), in place of
    // the live layers' buffers
    let sync = spread::gather_for_generation(
        &run.arch,
        &run.spread,
        run.processes(),
        !run.full_finetuning,
        run.generation == Generation::Transformers,
    );
    let mut generating_static = trainer_static;
    generating_static[4].1 = stat.gathered.max(sync);
    let vllm = vllm::plan(
        run,
        &vllm::Surroundings {
            capacity: gpu.capacity,
            used_by_others: gpu.used_by_others,
            trainer_at_start: if shares_weights { 0 } else { stat.weights },
            weights: stat.weights,
        },
    );
    // Before the step: the trainer's static memory and what vLLM keeps while training.
    let mut before_step = vec![context];
    before_step.extend(trainer_static);
    let mut phases = Vec::new();
    let mut warnings = Vec::new();
    if let Some(v) = &vllm {
        if let Some(reason) = &v.refusal {
            warnings.push(reason.clone());
        }
        phases.push(vllm_generation(
            v,
            &stat,
            shares_weights,
            context,
            generating_static,
        ));
        before_step.extend(vllm_while_training(v, &stat, shares_weights));
    }
    if run.generation == Generation::Transformers {
        phases.push(transformers_generation(
            run,
            &stat,
            shares_weights,
            context,
            generating_static,
        ));
    }
    let resident: u64 = before_step.iter().map(|(_, b)| b).sum::<u64>()
        + static_slack(&stat, shares_weights)
        + gpu.used_by_others;
    let shape = step_shape(run, gpu.capacity, gpu.capacity.saturating_sub(resident));
    let peak = step(run, &targets, &shape);
    let train_weights = if shares_weights { 0 } else { stat.weights };
    let allocated = train_weights
        + stat.adapters
        + stat.optimizer
        + stat.full_gradients
        + stat.gathered
        + peak.activations
        + peak.logits;
    let reserved_static = stat.reserved - if shares_weights { stat.weights } else { 0 };
    let reserved = (reserved_static + peak.reserved).max(allocated + stat.gradients);
    let mut training = before_step;
    training.extend([
        (Part::LoraGradients, stat.gradients),
        (Part::Activations, peak.activations),
        (super::versions::logits_part(run), peak.logits),
        (Part::AllocatorSlack, reserved - allocated - stat.gradients),
    ]);
    phases.push(PhaseMemory::new(Phase::Training, training));
    phases.sort_by_key(|p| std::cmp::Reverse(p.total_bytes));
    let peak_phase = phases[0].phase;
    let total = phases[0].total_bytes;
    let components = phases[0].components.clone();
    let phases = if phases.len() > 1 { phases } else { Vec::new() };
    if run.quant == Quant::Fp32 {
        warnings.push("fp32 weights (TRL's ModelConfig dtype default): the step's activations are modelled in 16-bit; set [model] dtype = \"bfloat16\" to match".into());
    }
    warnings.extend(rule_warnings(run, &targets));
    let headroom = gpu.capacity as i64 - total as i64;
    let training_fits = headroom >= 0 && vllm.as_ref().is_none_or(|v| v.starts);
    let mut roles = vec![roles::training(
        run,
        gpu.capacity,
        total,
        training_fits,
        &components,
        &phases,
        vllm.as_ref(),
    )];
    roles.extend(roles::vllm_server(run, gpu.capacity));
    for r in roles.iter().skip(1) {
        if let Some(reason) = r.vllm.as_ref().and_then(|v| v.refusal.as_ref()) {
            warnings.push(format!("{} GPUs: {reason}", r.role.label()));
        }
    }
    warnings.extend(roles::server_queue_warning(run, &roles));
    Estimate {
        capacity_bytes: gpu.capacity,
        total_bytes: total,
        fits: roles.iter().all(|r| r.fits),
        headroom_bytes: headroom,
        components,
        effective_batch: run.effective_batch(),
        prompts_per_step: run.effective_batch() as f64 / run.num_generations.max(1) as f64,
        running_micro_batch: micro,
        training_peak_allocated_bytes: allocated,
        training_peak_reserved_bytes: reserved,
        vllm,
        peak_phase,
        phases,
        roles,
        host_memory_bytes: stat.host,
        warnings,
    }
}

/// Generation with vLLM here: vLLM whole, beside the trainer's static memory (weights,
/// adapters, optimizer states: packed as the allocator reserves them).
fn vllm_generation(
    v: &VllmPlan,
    stat: &Static,
    shares_weights: bool,
    context: (Part, u64),
    trainer_static: [(Part, u64); 5],
) -> PhaseMemory {
    let mut generation = vec![context];
    generation.extend(trainer_static);
    generation.push((Part::AllocatorSlack, static_slack(stat, shares_weights)));
    generation.extend([
        (
            Part::VllmWeights,
            vllm_own_weights(v, stat, shares_weights) + v.non_torch_bytes,
        ),
        (Part::VllmCudaGraphs, v.cuda_graphs_bytes),
        (Part::VllmKvCache, v.kv_cache_bytes),
        (Part::VllmActivations, v.activations_bytes),
    ]);
    PhaseMemory::new(Phase::Generation, generation)
}

/// What vLLM keeps while the step runs; its activation blocks are cache the step reuses.
fn vllm_while_training(v: &VllmPlan, stat: &Static, shares_weights: bool) -> [(Part, u64); 3] {
    let kept = v.kept_while_training_bytes;
    let kv_kept = kept.saturating_sub(v.weights_bytes + v.non_torch_bytes + v.cuda_graphs_bytes);
    [
        (
            Part::VllmWeights,
            kept.min(vllm_own_weights(v, stat, shares_weights) + v.non_torch_bytes),
        ),
        (
            Part::VllmCudaGraphs,
            if kv_kept > 0 { v.cuda_graphs_bytes } else { 0 },
        ),
        (Part::VllmKvCache, kv_kept),
    ]
}

/// vLLM's weights beyond the trainer's: Unsloth's trainer uses vLLM's, counted once as vLLM's.
fn vllm_own_weights(v: &VllmPlan, stat: &Static, shares_weights: bool) -> u64 {
    if shares_weights {
        v.weights_bytes - stat.weights
    } else {
        v.weights_bytes
    }
}

/// Generation by the trained model itself (`use_vllm = false`), beside its static memory.
fn transformers_generation(
    run: &RunConfig,
    stat: &Static,
    shares_weights: bool,
    context: (Part, u64),
    trainer_static: [(Part, u64); 5],
) -> PhaseMemory {
    let g = generate_memory(run);
    let mut generation = vec![context];
    generation.extend(trainer_static);
    generation.push((Part::AllocatorSlack, static_slack(stat, shares_weights)));
    generation.extend([
        (Part::GenerationKvCache, g.kv_cache),
        (Part::Activations, g.activations),
        (Part::Logits, g.logits),
    ]);
    PhaseMemory::new(Phase::Generation, generation)
}

/// One phase's memory: its components, in display order, zero ones dropped.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseMemory {
    pub phase: Phase,
    pub total_bytes: u64,
    pub components: Vec<Component>,
}

impl PhaseMemory {
    /// A phase of `parts`, in display order, zero ones dropped.
    pub fn of(phase: Phase, parts: Vec<(Part, u64)>) -> PhaseMemory {
        PhaseMemory::new(phase, parts)
    }

    fn new(phase: Phase, parts: Vec<(Part, u64)>) -> PhaseMemory {
        let components: Vec<Component> = parts
            .into_iter()
            .filter(|(_, b)| *b > 0)
            .map(|(part, bytes)| Component {
                part,
                name: part.label(),
                bytes,
                explanation: part.explanation(),
            })
            .collect();
        PhaseMemory {
            phase,
            total_bytes: components.iter().map(|c| c.bytes).sum(),
            components,
        }
    }
}

/// What the allocator reserves for the trainer's static tensors beyond their bytes.
fn static_slack(stat: &Static, shares_weights: bool) -> u64 {
    let held = if shares_weights { 0 } else { stat.weights }
        + stat.adapters
        + stat.optimizer
        + stat.full_gradients
        + stat.gathered;
    let reserved = stat.reserved - if shares_weights { stat.weights } else { 0 };
    reserved.saturating_sub(held + stat.gradients)
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
        // TRL's ModelConfig default dtype: every tensor in fp32
        (Quant::Fp32, _) => elements * 4,
        (Quant::Bf16, _) | (_, false) => elements * 2,
        // fp8 e4m3 with one fp32 scale per 128 x 128 block (Unsloth's FP8 checkpoints,
        // vLLM's block-wise fp8): a byte a weight
        (Quant::Fp8, true) => elements + elements / (128 * 128) * 4,
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
    // the experts (3-D parameters, so bitsandbytes leaves them in 16-bit; fp8 checkpoints
    // quantise them) and the router
    for (k, t) in arch.expert_tensors().into_iter().enumerate() {
        add(t, k < 2 && run.quant == Quant::Fp8, arch.layers);
    }
    add(arch.hidden, false, 1);
    // a multimodal checkpoint's vision tower, frozen beside the language model (counted in
    // 16-bit: whether bitsandbytes also packs its linear layers is not modelled)
    if let Vision::Counted(p) = arch.vision {
        add(p, false, 1);
    }
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
    let mut reserved = packing.reserved();
    // Loaded as stored: the checkpoint's own bytes (its safetensors headers) replace the
    // formula's, and what the allocator reserves moves with them.
    if let Some(stored) = run.stored_weights.filter(|s| s.stored_as == run.quant) {
        reserved = (reserved + stored.bytes)
            .saturating_sub(weights)
            .max(stored.bytes);
        weights = stored.bytes;
    }
    let processes = run.processes();
    if run.full_finetuning {
        return full_finetuning_static(run);
    }
    // ZeRO-3 / FSDP full shard: this rank's shard of the frozen base, and the live layers'
    // gathered buffers (DeepSpeed's `largest_layer_memory`, `spread::full_finetuning_states`)
    let (held, gathered) = if run.spread.shards_parameters() {
        let shard = weights / processes.max(1);
        (shard, 4 * spread::largest_layer_parameters(arch))
    } else {
        (weights, 0)
    };
    Static {
        reserved: reserved - weights + held + gathered,
        weights: held,
        adapters,
        gradients,
        optimizer,
        full_gradients: 0,
        gathered,
        host: 0,
    }
}

/// Full fine-tuning's static memory on one rank: the engine's model states
/// (`spread::full_finetuning_states`), each tensor large enough to have its own segments.
fn full_finetuning_static(run: &RunConfig) -> Static {
    // AdamW's moments in the parameters' bf16 under DDP; bitsandbytes' 8-bit moments
    let adam = match run.optimizer {
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => 2,
        Optimizer::AdamW | Optimizer::PagedAdamW => 4,
        Optimizer::Sgd => 0,
    };
    let states = spread::full_finetuning_states(&run.arch, &run.spread, run.processes(), adam);
    Static {
        weights: states.weights,
        adapters: 0,
        gradients: 0,
        optimizer: states.optimizer,
        full_gradients: states.gradients + states.buckets,
        gathered: states.gathered,
        host: states.host,
        reserved: states.on_gpu(),
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

/// The trainer rules of SPEC section 1 that the knobs break.
fn rule_warnings(run: &RunConfig, targets: &[bool]) -> Vec<String> {
    let mut w = Vec::new();
    w.extend(super::versions::batch_note(run));
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
    match &run.arch.vision {
        Vision::Counted(p) => w.push(format!(
            "multimodal checkpoint: its vision tower ({} parameters) is loaded and counted, on both stacks (AutoModelForCausalLM loads the whole model in transformers 5.17; so does Unsloth's FastModel)",
            super::units::format_count(*p)
        )),
        Vision::Uncounted(kind) => w.push(format!(
            "multimodal checkpoint: its vision tower ({kind}) is loaded but not counted: vramfit sizes SigLIP towers only"
        )),
        Vision::None => {}
    }
    if let Some(m) = run.arch.moe {
        let expert_bytes: u64 = run.arch.expert_tensors().iter().take(2).sum::<u64>()
            * run.arch.layers
            * if run.quant == Quant::Fp8 { 1 } else { 2 };
        w.push(format!(
            "mixture of experts: all {} experts stay resident ({} of expert weights, 16-bit unless fp8: bitsandbytes does not quantise transformers 5's 3-D expert parameters); activations follow the {} active per token; LoRA reaches the attention{} only, since the experts are no linear layers",
            m.experts,
            super::units::format_size(expert_bytes),
            m.active,
            if m.shared_intermediate > 0 { " and the shared expert" } else { "" }
        ));
    }
    if !run.full_finetuning && !targets.iter().any(|t| *t) {
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
