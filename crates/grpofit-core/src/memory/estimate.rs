//! The estimate: a list of named components that add up to the GPU memory a run needs.

use crate::arch::{Arch, Vision};
use crate::memory::by_version;
use crate::memory::bytes::tensor_bytes;
use crate::memory::generate::generate_memory;
use crate::memory::packing::{Packing, block_bytes, optimizer_bytes};
use crate::memory::roles::{self, Role};
use crate::memory::run_warnings;
use crate::memory::saved_modules;
use crate::memory::step::shape::StepPath;
use crate::memory::step::unsloth_step::{SMALL_CARD, unsloth_step};
use crate::memory::step::{self, StepPeak, StepShape};
use crate::memory::vllm;
use crate::run::attention::Attention;
use crate::run::spread;
use crate::run::versions::{EntropyChunk, UnslothLogits};
use crate::run::{Checkpointing, Generation, Optimizer, Quant, RunConfig, Stack};
use serde::Serialize;

pub use crate::memory::breakdown::{
    CUBLAS_WORKSPACES, CUDA_CONTEXT, Component, Part, Phase, PhaseMemory,
};
pub use crate::memory::vllm::VllmPlan;

#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub capacity_bytes: u64,
    pub total_bytes: u64,
    pub fits: bool,
    pub headroom_bytes: i64,
    pub components: Vec<Component>,
    /// the step's batch as it runs (`RunConfig::step_batch`), its fields at this level
    #[serde(flatten)]
    pub batch: crate::run::StepBatch,
    pub training_peak_allocated_bytes: u64,
    pub training_peak_reserved_bytes: u64,
    pub vllm: Option<VllmPlan>,
    /// the phase whose memory is the peak (the components are that phase's)
    pub peak_phase: Phase,
    /// both phases, when vLLM shares the GPU or the weights are pushed to its server
    /// (generation, then training)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseMemory>,
    /// every role's GPUs (one training role on a single GPU); the figures above are the
    /// training role's
    pub roles: Vec<Role>,
    /// host memory each node needs for offloaded states (ZeRO-Offload, FSDP CPU offload)
    pub host_memory_bytes: u64,
    pub warnings: Vec<String>,
    /// the attention the step's memory follows (`RunConfig::modelled_attention`; none: Unsloth's)
    pub attention: Option<Attention>,
}

/// The GPU the run is fitted into.
#[derive(Debug, Clone, Copy)]
pub struct GpuBudget {
    pub capacity: u64,
    /// memory other processes hold (from NVML), when known
    pub used_by_others: u64,
    /// the CUDA context measured on this card (`grpofit calibrate`), instead of `CUDA_CONTEXT`
    pub context: Option<u64>,
}

/// Static training memory: what exists before the step begins.
struct Static {
    weights: u64,
    /// the whole checkpoint as this rank loads it before any sharding: what TRL's colocated vLLM
    /// loads on every rank (`LLM(model=model.name_or_path, ...)`, trl 1.15.0
    /// `VLLMGeneration._init_vllm`), whatever ZeRO-3 or FSDP does to the trainer's copy
    checkpoint: u64,
    adapters: u64,
    /// PEFT's `modules_to_save`: the trainable copies (`saved_modules`)
    saved: u64,
    gradients: u64,
    optimizer: u64,
    /// full fine-tuning: every weight's gradients, held from step to step (ZeRO's partitions)
    full_gradients: u64,
    /// the part of `full_gradients` made in each backward (one process, no DDP: set_to_none)
    step_gradients: u64,
    /// ZeRO-3 / FSDP: the live layers' gathered parameters
    gathered: u64,
    /// host memory per node for offloaded states
    host: u64,
    /// what the caching allocator reserves for them
    reserved: u64,
    /// TRL's reference model and the reward models (`frozen`)
    reference: u64,
    rewards: u64,
    /// of `weights` and `adapters`: the experts' share, shown apart
    expert_weights: u64,
    expert_adapters: u64,
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
                checkpointing: step::unsloth_step::checkpointing_in_effect(run),
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
        Stack::Unsloth => {
            let checkpointing = step::unsloth_step::checkpointing_in_effect(run);
            unsloth_step(&run.arch, targets, shape, checkpointing)
        }
    }
}

/// The step's shape. `free` is what the GPU has left when the step starts; only Unsloth's step
/// reads it, so TRL's shape leaves it out and its peaks stay shared in the `Estimator`.
fn step_shape(run: &RunConfig, capacity: u64, free: u64) -> StepShape {
    let unsloth = run.stack == Stack::Unsloth;
    // TRL 1.x (fused head) and Unsloth score the generation batch before training on it; the
    // calibration harness (`measure.py`, unfused logits) runs its reference pass inside the step
    let trainer = unsloth || run.fused_logits;
    let (prompt, completion) = run.step_lengths();
    let on_trainer = run.stack == Stack::Trl && by_version::step_path(run) == StepPath::Trainer;
    // TRL 0.14: the reference pass runs inside the step whatever beta is, counted in the logits
    let row_log_softmax = on_trainer && run.versions.trl_row_log_softmax();
    StepShape {
        seqs: run.running_micro_batch(),
        path: crate::memory::by_version::step_path(run),
        prompt,
        completion,
        rank: run.lora_rank,
        checkpointing: run.checkpointing != Checkpointing::Off,
        reference_pass: run.beta > 0.0
            && (!trainer || unsloth && run.versions.unsloth_logits() == UnslothLogits::TrlLoss)
            && (run.stack != Stack::Trl
                || by_version::step_path(run) != StepPath::Trainer
                || run.versions.trl_reference_in_loss())
            && !row_log_softmax,
        quantised_base: step::shape::quantised_matmul_saves_input(run.stack, run.quant),
        fused_logits: run.fused_logits && run.stack == Stack::Trl,
        head_copy: run.stack == Stack::Trl
            && !run.full_finetuning
            && run
                .modules_to_save
                .iter()
                .any(|n| saved_modules::matches("lm_head", n)),
        liger: if run.stack == Stack::Trl && run.liger_loss {
            run.versions.trl_liger_loss()
        } else {
            crate::run::versions::LigerLoss::Off
        },
        expandable_segments: run.expandable_segments,
        scoring_rows: if trainer
            && run.scores_before_training()
            && (!unsloth || run.versions.unsloth_scores_before_training())
        {
            run.generation_rows()
        } else if run.stack == Stack::Trl
            && run.beta != 0.0
            && !run.fused_logits
            && run.versions.trl_reference_over_generation_batch()
        {
            // N4: trl 0.19's reference pass over the whole generation batch
            run.generation_rows()
        } else {
            0
        },
        free_at_step: if unsloth { free } else { 0 },
        small_card: unsloth && capacity <= SMALL_CARD,
        unsloth_logits: if unsloth {
            crate::memory::by_version::unsloth_logits_of(run)
        } else {
            UnslothLogits::Blocks
        },
        reference_logits: unsloth && run.beta != 0.0,
        every_position_logits: unsloth && run.versions.unsloth_returns_every_position(),
        entropy: if on_trainer {
            run.versions.trl_entropy_chunk()
        } else {
            EntropyChunk::Rows128
        },
        row_log_softmax,
        logits_in_place: run.versions.trl_divides_logits_in_place(),
        fp32_weights: on_trainer && run.full_finetuning && run.quant == Quant::Fp32,
        mask: by_version::attention_mask(run, on_trainer),
        attention: run.attention,
        fp32_adapters: on_trainer
            && !run.full_finetuning
            && crate::memory::kbit_cast::adapter_element_bytes(run) == 4,
        dropout: step::dropout::AdapterDropout::of(run),
    }
}

fn estimate_using(
    run: &RunConfig,
    gpu: GpuBudget,
    step: impl FnMut(&RunConfig, &[bool], &StepShape) -> StepPeak,
) -> Estimate {
    let targets = if run.full_finetuning {
        vec![false; run.arch.projections().len()]
    } else {
        target_mask(&run.arch, &run.lora_targets)
    };
    let stat = static_memory(run, &targets);
    let context = (
        Part::CudaContext,
        gpu.context.unwrap_or(CUDA_CONTEXT) + CUBLAS_WORKSPACES,
    );
    let mut warnings = Vec::new();
    let generating = generation_phases(run, gpu, &stat, context, &mut warnings);
    let scoring = scoring_phase(run, &stat, &generating.before_step);
    let trained = training_phase(run, gpu, &stat, &targets, generating.before_step, step);
    let mut phases = generating.phases;
    phases.push(trained.phase);
    phases.extend(scoring);
    phases.sort_by_key(|p| std::cmp::Reverse(p.total_bytes));
    let peak_phase = phases[0].phase;
    let total = phases[0].total_bytes;
    let components = phases[0].components.clone();
    let phases = if phases.len() > 1 { phases } else { Vec::new() };
    warnings.extend(run_warnings::dtype_warnings(run));
    warnings.extend(run_warnings::rule_warnings(run, &targets));
    let vllm = generating.vllm;
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
        batch: run.step_batch(),
        training_peak_allocated_bytes: trained.allocated,
        training_peak_reserved_bytes: trained.reserved,
        vllm,
        peak_phase,
        phases,
        roles,
        host_memory_bytes: stat.host,
        warnings,
        attention: run.modelled_attention(),
    }
}

/// The trainer's static memory as the breakdown names it: weights (shared with vLLM on Unsloth,
/// whole or a shard when fully fine-tuned), adapters, optimizer states and what else sits on the
/// GPU beside the trained model.
fn trainer_static(run: &RunConfig, stat: &Static) -> [(Part, u64); 11] {
    let weights_part = if run.full_finetuning {
        Part::Weights
    } else if run.stack == Stack::Unsloth
        && matches!(run.generation, Generation::ColocatedVllm { .. })
    {
        Part::SharedWeights
    } else {
        Part::BaseWeights
    };
    [
        (weights_part, stat.weights - stat.expert_weights),
        (Part::ExpertWeights, stat.expert_weights),
        (Part::LoraAdapters, stat.adapters - stat.expert_adapters),
        (Part::ExpertLora, stat.expert_adapters),
        (Part::SavedModules, stat.saved),
        (Part::OptimizerStates, stat.optimizer),
        (Part::Gradients, stat.full_gradients),
        (Part::GatheredWeights, stat.gathered),
        (Part::ReferenceModel, stat.reference),
        (Part::RewardModel, stat.rewards),
        (Part::OtherMemory, run.other_gpu_memory),
    ]
}

/// The generation phases (vLLM here, or transformers' generate), vLLM's plan, and what is held
/// when the step starts: the trainer's static memory and what vLLM keeps while training.
struct Generating {
    phases: Vec<PhaseMemory>,
    vllm: Option<VllmPlan>,
    before_step: Vec<(Part, u64)>,
}

fn generation_phases(
    run: &RunConfig,
    gpu: GpuBudget,
    stat: &Static,
    context: (Part, u64),
    warnings: &mut Vec<String>,
) -> Generating {
    let shares_weights = run.stack == Stack::Unsloth;
    let trainer_static = trainer_static(run, stat);
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
    for (part, bytes) in generating_static.iter_mut() {
        if *part == Part::GatheredWeights {
            *bytes = stat.gathered.max(sync);
        }
    }
    let vllm = vllm::plan(
        run,
        &vllm::Surroundings {
            capacity: gpu.capacity,
            used_by_others: gpu.used_by_others + run.other_gpu_memory,
            trainer_at_start: if shares_weights { 0 } else { stat.weights },
            // TRL's colocated vLLM loads the whole checkpoint on every rank, not the trainer's
            // ZeRO-3 / FSDP shard (`Static::checkpoint`); Unsloth's vLLM holds its own weights
            weights: if shares_weights {
                stat.weights
            } else {
                stat.checkpoint
            },
        },
    );
    let mut before_step = vec![context];
    before_step.extend(trainer_static);
    let mut phases = Vec::new();
    if let Some(v) = &vllm {
        if let Some(reason) = &v.refusal {
            warnings.push(reason.detail.clone());
        }
        phases.push(vllm_generation(
            v,
            stat,
            shares_weights,
            context,
            generating_static,
        ));
        before_step.extend(vllm_while_training(
            v,
            stat,
            shares_weights,
            vllm::graphs_kept_while_training(run),
        ));
    }
    if run.generation == Generation::VllmServer && sync > stat.gathered {
        // pushing the weights to `trl vllm-serve`: the rank's static memory with what it
        // gathers (PEFT under ZeRO-3: the whole model at once, trl 1.15.0
        // `VLLMGeneration._iter_named_params` / `sync_weights`), a phase of its own when that
        // is more than the step's own gathered layers (full fine-tuning gathers one at a time)
        let mut pushing = vec![context];
        pushing.extend(generating_static);
        pushing.push((Part::AllocatorSlack, static_slack(stat, shares_weights)));
        phases.push(PhaseMemory::of(Phase::Generation, pushing));
    }
    if run.generation == Generation::Transformers {
        phases.push(transformers_generation(
            run,
            stat,
            shares_weights,
            context,
            generating_static,
        ));
    }
    Generating {
        phases,
        vllm,
        before_step,
    }
}

/// The reward models scoring the completions (N9, `frozen::reward_forward_bytes`): what is held
/// before the step (vLLM's share as it stays while training), and their forward over the
/// generation batch.
fn scoring_phase(
    run: &RunConfig,
    stat: &Static,
    before_step: &[(Part, u64)],
) -> Option<PhaseMemory> {
    let forward = crate::memory::frozen::reward_forward_bytes(run);
    (forward > 0).then(|| {
        let mut parts = before_step.to_vec();
        parts.push((
            Part::AllocatorSlack,
            static_slack(stat, run.stack == Stack::Unsloth),
        ));
        parts.push((Part::RewardForward, forward));
        PhaseMemory::of(Phase::Scoring, parts)
    })
}

/// The training phase: what is held before the step, and the step's peak above it, as PyTorch
/// allocates and reserves it.
struct Trained {
    phase: PhaseMemory,
    allocated: u64,
    reserved: u64,
}

fn training_phase(
    run: &RunConfig,
    gpu: GpuBudget,
    stat: &Static,
    targets: &[bool],
    before_step: Vec<(Part, u64)>,
    mut step: impl FnMut(&RunConfig, &[bool], &StepShape) -> StepPeak,
) -> Trained {
    let shares_weights = run.stack == Stack::Unsloth;
    let resident: u64 = before_step.iter().map(|(_, b)| b).sum::<u64>()
        + static_slack(stat, shares_weights)
        + gpu.used_by_others;
    let shape = step_shape(run, gpu.capacity, gpu.capacity.saturating_sub(resident));
    let peak = step(run, targets, &shape);
    let train_weights = if shares_weights { 0 } else { stat.weights };
    // the logits' peak precedes every weight's gradient (traced: TRL 1.15.0, calibration/cpu-trace);
    // the first layer's backward follows nearly all of them (`trl::gradients_before_first_layer`)
    let first = step::trl::gradients_before_first_layer(&run.arch, stat.step_gradients);
    let step = (peak.activations + peak.logits)
        .max(stat.step_gradients)
        .max(if first > 0 {
            first + peak.first_layer
        } else {
            0
        });
    let allocated = train_weights
        + stat.adapters
        + stat.saved
        + stat.optimizer
        + (stat.full_gradients - stat.step_gradients)
        + stat.gathered
        + stat.reference
        + stat.rewards
        + step;
    let reserved_static = stat.reserved - if shares_weights { stat.weights } else { 0 };
    let reserved = (reserved_static + peak.reserved).max(allocated + stat.gradients);
    let shown_twice = peak.activations + peak.logits + stat.step_gradients - step;
    let mut training = before_step;
    training.extend([
        (Part::LoraGradients, stat.gradients),
        (Part::Activations, peak.activations),
        (crate::memory::by_version::logits_part(run), peak.logits),
        // the parts show the step beside every gradient: the slack leaves out their overlap
        (
            Part::AllocatorSlack,
            reserved.saturating_sub(allocated + stat.gradients + shown_twice),
        ),
    ]);
    let kept = by_version::kept_gradients(run, stat.gradients);
    Trained {
        phase: PhaseMemory::of(Phase::Training, training),
        allocated: allocated + kept,
        reserved,
    }
}

/// Generation with vLLM here: vLLM whole, beside the trainer's static memory (weights,
/// adapters, optimizer states: packed as the allocator reserves them).
fn vllm_generation(
    v: &VllmPlan,
    stat: &Static,
    shares_weights: bool,
    context: (Part, u64),
    trainer_static: [(Part, u64); 11],
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
    PhaseMemory::of(Phase::Generation, generation)
}

/// What vLLM keeps while the step runs; its activation blocks are cache the step reuses.
fn vllm_while_training(
    v: &VllmPlan,
    stat: &Static,
    shares_weights: bool,
    graphs_kept: bool,
) -> [(Part, u64); 3] {
    let kept = v.kept_while_training_bytes;
    let graphs = if graphs_kept { v.cuda_graphs_bytes } else { 0 };
    let kv_kept = kept.saturating_sub(v.weights_bytes + v.non_torch_bytes + graphs);
    [
        (
            Part::VllmWeights,
            (kept - graphs).min(vllm_own_weights(v, stat, shares_weights) + v.non_torch_bytes),
        ),
        (Part::VllmCudaGraphs, graphs),
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
    trainer_static: [(Part, u64); 11],
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
    PhaseMemory::of(Phase::Generation, generation)
}

/// What the allocator reserves for the trainer's static tensors beyond their bytes.
fn static_slack(stat: &Static, shares_weights: bool) -> u64 {
    let held = if shares_weights { 0 } else { stat.weights }
        + stat.adapters
        + stat.saved
        + stat.optimizer
        + stat.full_gradients
        + stat.gathered
        + stat.reference
        + stat.rewards;
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

fn static_memory(run: &RunConfig, targets: &[bool]) -> Static {
    if run.full_finetuning {
        return full_finetuning_static(run);
    }
    let arch = &run.arch;
    let mut packing = Packing::default();
    let (mut weights, expert_bytes) = base_weights(run, &mut packing);
    let (adapters, optimizer, expert_adapters) = adapter_states(run, targets, &mut packing);
    let saved = saved_modules::saved_modules(run, &mut packing);
    // Gradients live all together only after the backward pass, when activations are gone;
    // at the step's peak one layer's worth exists (unless accumulated: `by_version`).
    let gradients = by_version::adapter_gradients_at_peak(run, adapters);
    let mut reserved = packing.reserved();
    // Loaded as stored: the checkpoint's own bytes (its safetensors headers) replace the
    // formula's, and what the allocator reserves moves with them.
    if let Some(stored) = run.stored_weights.filter(|s| s.stored_as == run.quant) {
        reserved = (reserved + stored.bytes)
            .saturating_sub(weights)
            .max(stored.bytes);
        weights = stored.bytes;
    }
    let (held, gathered) = held_of_frozen_base(run, weights);
    // ZeRO's reduce buckets are allocated whatever is trained (`spread::zero_buffers`); an
    // fp32 head (`lm_head::fp32_head_bytes`)
    let buckets = spread::zero_buffers(arch, &run.spread);
    let (head, _, _) = crate::memory::lm_head::fp32_head_bytes(run);
    // the experts' share of what this rank holds (a checkpoint's own bytes may differ)
    let expert_weights =
        (expert_bytes.min(weights) as u128 * held as u128 / weights.max(1) as u128) as u64;
    // TRL 0.22 to 0.25 upcast a quantised base's 16-bit tensors (`kbit_cast::kbit_fp32_bytes`)
    let kbit = crate::memory::kbit_cast::kbit_fp32_bytes(run);
    let held = held + head + kbit;
    let (reference, rewards) = crate::memory::frozen::frozen_models(run);
    Static {
        reserved: reserved - weights + held + gathered + buckets + reference + rewards,
        checkpoint: weights + head + kbit,
        weights: held,
        adapters,
        saved: saved.copies,
        gradients,
        optimizer: optimizer + saved.optimizer,
        // the copies' gradients are made in each backward and dropped by `zero_grad`
        full_gradients: buckets + saved.gradients,
        step_gradients: saved.gradients,
        gathered,
        host: 0,
        reference,
        rewards,
        expert_weights,
        expert_adapters,
    }
}

/// The frozen base's bytes as the allocator holds them (each tensor in its block), packed into
/// `packing`; and the experts' part of them. bitsandbytes quantises the decoder's linear layers,
/// not the embedding, norms or head; the experts (3-D parameters) are packed as
/// `moe::experts_quantised` says.
fn base_weights(run: &RunConfig, packing: &mut Packing) -> (u64, u64) {
    let arch = &run.arch;
    let mut weights = 0;
    let mut add = |elements: u64, quantisable: bool, copies: u64| {
        let b = block_bytes(tensor_bytes(elements, run.quant, quantisable));
        weights += b * copies;
        packing.add(b, copies);
    };
    let embedding = arch.vocab * arch.hidden;
    add(embedding, false, 1);
    for p in &arch.projections() {
        add(p.fan_in * p.fan_out, true, arch.layers);
    }
    for v in arch.layer_vectors() {
        add(v, false, arch.layers);
    }
    // the experts and the router
    let experts_packed = crate::memory::moe::experts_quantised(run);
    let mut expert_bytes = 0;
    for (k, t) in arch.expert_tensors().into_iter().enumerate() {
        if k < 2 {
            expert_bytes += block_bytes(tensor_bytes(t, run.quant, experts_packed)) * arch.layers;
        }
        add(t, k < 2 && experts_packed, arch.layers);
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
    (weights, expert_bytes)
}

/// The LoRA adapters on `targets` and on the experts (Unsloth: `moe::expert_lora_tensors`), fp32
/// as PEFT keeps them, with their optimizer states, packed into `packing`: (adapters, optimizer
/// states, the experts' adapters).
fn adapter_states(run: &RunConfig, targets: &[bool], packing: &mut Packing) -> (u64, u64, u64) {
    let arch = &run.arch;
    let (mut adapters, mut optimizer, mut expert_adapters) = (0, 0, 0);
    let linear = arch
        .projections()
        .iter()
        .zip(targets)
        .filter(|(_, on)| **on)
        .flat_map(|(p, _)| [run.lora_rank * p.fan_in, run.lora_rank * p.fan_out])
        .collect::<Vec<_>>();
    let experts = crate::memory::moe::expert_lora_tensors(run);
    let per = crate::memory::kbit_cast::adapter_element_bytes(run);
    for (elements, expert) in linear
        .into_iter()
        .map(|e| (e, false))
        .chain(experts.into_iter().map(|e| (e, true)))
    {
        let a = block_bytes(elements * per);
        let o = optimizer_bytes(run.optimizer, elements, per);
        adapters += a * arch.layers;
        optimizer += o * arch.layers;
        if expert {
            expert_adapters += a * arch.layers;
        }
        // the adapter, its gradient and the optimizer's states
        packing.add(elements * per, 2 * arch.layers);
        packing.add(o, arch.layers);
    }
    (adapters, optimizer, expert_adapters)
}

/// What this rank holds of the frozen base of `weights` bytes, and the live layers' gathered
/// buffers. ZeRO-3 / FSDP full shard: a shard, and the gathered layers (DeepSpeed's
/// `largest_layer_memory`, `spread::full_finetuning_states`). accelerate 1.12
/// `fsdp2_prepare_model` upcasts the whole model, frozen base included, to fp32 under mixed
/// precision (`model.to(torch.float32)`): a 16-bit base's shard doubles.
fn held_of_frozen_base(run: &RunConfig, weights: u64) -> (u64, u64) {
    let processes = run.processes().max(1);
    match (run.spread.shards_parameters(), run.spread.engine) {
        (true, spread::Engine::Fsdp) => {
            let upcast = if run.quant == Quant::Bf16 { 2 } else { 1 };
            (
                upcast * weights / processes,
                spread::fsdp_gathered(&run.arch, 3),
            )
        }
        (true, _) => (
            weights / processes,
            4 * spread::largest_layer_parameters(&run.arch),
        ),
        (false, _) => (weights, 0),
    }
}

/// Full fine-tuning's static memory on one rank: the engine's model states
/// (`spread::full_finetuning_states`), each tensor large enough to have its own segments.
fn full_finetuning_static(run: &RunConfig) -> Static {
    // the parameters as loaded: TRL's default dtype "float32" (`create_model_from_path`), else
    // 16-bit; AdamW's moments in the parameters' dtype under DDP; bitsandbytes' 8-bit moments
    let param_bytes = if run.quant == Quant::Fp32 { 4 } else { 2 };
    let adam = match run.optimizer {
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => 2,
        Optimizer::AdamW | Optimizer::PagedAdamW => 2 * param_bytes,
        Optimizer::Sgd => 0,
    };
    let states =
        spread::full_finetuning_states(&run.arch, &run.spread, run.processes(), param_bytes, adam);
    let (reference, rewards) = crate::memory::frozen::frozen_models(run);
    let (head, head_grads, head_moments) = crate::memory::lm_head::fp32_head_bytes(run);
    let per_step = run.processes() == 1
        && run.spread.engine == spread::Engine::Ddp
        && !by_version::gradients_live_through_step(run);
    Static {
        weights: states.weights + head,
        checkpoint: param_bytes * run.arch.parameters() + head,
        adapters: 0,
        saved: 0,
        gradients: 0,
        optimizer: states.optimizer + head_moments,
        full_gradients: states.gradients + states.buckets + head_grads,
        step_gradients: u64::from(per_step) * (states.gradients + head_grads),
        gathered: states.gathered,
        host: states.host,
        reserved: states.on_gpu() + head + head_grads + head_moments + reference + rewards,
        reference,
        rewards,
        expert_weights: 0,
        expert_adapters: 0,
    }
}
