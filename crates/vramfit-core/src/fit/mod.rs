//! The fit solver: the configuration closest to the given one that fits, found by an exact
//! search over the knobs' discrete values. "Closest" means least loss of training quality: the
//! effective batch is kept, cheap levers (vLLM share, micro-batch, checkpointing) come before
//! the ones that change what is learned (sequence length, generations, LoRA rank), and fewer
//! knobs changed is better. Costs add up, so a best-first search finds the cheapest fit first.

use crate::memory::estimate::{Estimate, Estimator, GpuBudget};
use crate::memory::roles::{Role, RoleKind};
use crate::run::adjust::exact_values;
use crate::run::knobs::{Knob, accumulation_for};
use crate::run::rules;
use crate::run::spread::Spread;
use crate::run::{Checkpointing, Generation, Quant, RunConfig, Stack};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

/// One lever the solver may pull, in the order of their strength for a GRPO run (the vLLM share first, the LoRA rank last; docs/commands.md, "fit"): a dimension the fit moves along
/// (a numeric [`Knob`], or checkpointing, fp8 KV cache, 4-bit weights). One rung down a lever is
/// a [`StepDown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lever {
    VllmShare,
    MicroBatch,
    Checkpointing,
    /// vLLM's KV cache in fp8 (Unsloth's `float8_kv_cache`): twice the tokens in the same share
    KvCacheFp8,
    /// the base weights in 4-bit (QLoRA): about a quarter of their 16-bit bytes
    FourBitWeights,
    SequenceLength,
    Generations,
    LoraRank,
    /// how the training processes share the model (`[distributed]`): tried before any knob
    /// moves, since sharding changes no training number, only speed
    Sharding,
    /// more training GPUs of the same kind, sharded with ZeRO-3: tried when no knob fits
    Gpus,
    /// vLLM on GPUs of its own (`trl vllm-serve`), tensor-parallel over as many as it needs
    VllmServerGpus,
}

impl Lever {
    pub const ORDER: [Lever; 8] = [
        Lever::VllmShare,
        Lever::MicroBatch,
        Lever::Checkpointing,
        Lever::KvCacheFp8,
        Lever::FourBitWeights,
        Lever::SequenceLength,
        Lever::Generations,
        Lever::LoraRank,
    ];

    /// The lever's name on screen.
    pub fn label(self) -> &'static str {
        match self {
            Lever::VllmShare => "vLLM share",
            Lever::MicroBatch => "micro-batch",
            Lever::Checkpointing => "checkpointing",
            Lever::KvCacheFp8 => "fp8 KV cache",
            Lever::FourBitWeights => "4-bit weights",
            Lever::SequenceLength => "sequence",
            Lever::Generations => "generations",
            Lever::LoraRank => "LoRA rank",
            Lever::Sharding => "sharding",
            Lever::Gpus => "GPUs",
            Lever::VllmServerGpus => "vLLM server GPUs",
        }
    }

    /// The key the lever changes in `run` (the server's `max_model_len` for the sequence in
    /// server mode, `Knob::key_for`).
    pub fn key_in(self, run: &RunConfig) -> &'static str {
        match self.knob() {
            Some(k) => k.key_for(run).1,
            None => self.trainer_key(run.stack),
        }
    }

    pub fn trainer_key(self, stack: Stack) -> &'static str {
        match (self, stack) {
            (Lever::Checkpointing, Stack::Unsloth) => "use_gradient_checkpointing",
            (Lever::Checkpointing, Stack::Trl) => "gradient_checkpointing",
            (Lever::KvCacheFp8, _) => "float8_kv_cache",
            (Lever::FourBitWeights, _) => "load_in_4bit",
            (Lever::Sharding, _) => "zero_stage",
            (Lever::Gpus, _) => "gpus",
            (Lever::VllmServerGpus, _) => "tensor_parallel_size",
            (other, _) => other.knob().map_or("", |k| k.trainer_key(stack)),
        }
    }

    fn knob(self) -> Option<Knob> {
        Some(match self {
            Lever::VllmShare => Knob::VllmShare,
            Lever::MicroBatch => Knob::MicroBatch,
            Lever::SequenceLength => Knob::SequenceLength,
            Lever::Generations => Knob::Generations,
            Lever::LoraRank => Knob::LoraRank,
            Lever::Checkpointing
            | Lever::KvCacheFp8
            | Lever::FourBitWeights
            | Lever::Sharding
            | Lever::Gpus
            | Lever::VllmServerGpus => return None,
        })
    }

    pub fn trade_off(self) -> &'static str {
        match self {
            Lever::Checkpointing => {
                "layers are recomputed in the backward pass: about 30 % slower steps"
            }
            Lever::KvCacheFp8 => {
                "fp8 keys and values: twice the sequences in the same share, slightly noisier sampling"
            }
            Lever::FourBitWeights => {
                "QLoRA: the frozen weights in 4-bit NF4, somewhat slower and a little less accurate"
            }
            Lever::SequenceLength => {
                "shorter context, the completion within it: long reasoning gets truncated"
            }
            Lever::Sharding => {
                "the model's states split across the training GPUs: more communication, same training"
            }
            Lever::Gpus => "more GPUs of this kind, the model sharded over them (ZeRO-3)",
            Lever::VllmServerGpus => {
                "vLLM generates on GPUs of its own (trl vllm-serve), its weights split over them"
            }
            other => other.knob().map_or("", Knob::trade_off),
        }
    }

    /// Whether the lever is a setting of `run` at all: the vLLM share and its fp8 KV cache only
    /// with vLLM colocated (the fp8 cache only on Unsloth, whose vLLM call takes
    /// kv_cache_dtype; TRL's colocate call has no such key), the adapter rank and 4-bit frozen
    /// weights only when adapters are trained.
    pub fn applies(self, run: &RunConfig) -> bool {
        let colocated = matches!(run.generation, Generation::ColocatedVllm { .. });
        match self {
            Lever::VllmShare => colocated,
            Lever::KvCacheFp8 => colocated && run.stack == Stack::Unsloth,
            Lever::FourBitWeights | Lever::LoraRank => !run.full_finetuning,
            _ => true,
        }
    }

    /// Cost of moving one rung down this lever's candidate list. The training-quality levers
    /// cost an order of magnitude more than the ones that only cost speed or generation room.
    fn rung_cost(self) -> f64 {
        match self {
            Lever::VllmShare => 1.0,
            Lever::MicroBatch => 5.0,
            Lever::Checkpointing => 3.0,
            // fp8 KV barely moves sampling quality; 4-bit weights (QLoRA) cost some accuracy and
            // speed, still less than cutting what the model learns from
            Lever::KvCacheFp8 => 2.0,
            Lever::FourBitWeights => 10.0,
            Lever::SequenceLength => 20.0,
            Lever::Generations => 40.0,
            Lever::LoraRank => 30.0,
            Lever::Sharding => 1.0,
            Lever::Gpus => 50.0,
            Lever::VllmServerGpus => 50.0,
        }
    }
}

impl std::fmt::Display for Lever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Cost of changing one more knob: fewer changes are preferred.
const CHANGE_COST: f64 = 2.0;

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub lever: Lever,
    pub key: &'static str,
    pub from: String,
    pub to: String,
    /// total bytes this change saves, applied after the changes listed before it
    pub bytes_saved: i64,
    pub trade_off: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum FitOutcome {
    AlreadyFits {
        estimate: Estimate,
    },
    Fitted {
        changes: Vec<Change>,
        cost: f64,
        estimate: Estimate,
        #[serde(skip)]
        run: Box<RunConfig>,
    },
    /// nothing on the grid fits: every lever at its floor still needs `smallest_gpu_bytes`
    Impossible {
        floors: Vec<String>,
        smallest_gpu_bytes: u64,
        estimate: Estimate,
    },
}

/// The values each lever may take, current first, then downwards.
struct Grid {
    values: Vec<Vec<u64>>,
}

fn checkpointing_rank(c: Checkpointing) -> u64 {
    match c {
        Checkpointing::Off => 0,
        Checkpointing::On => 1,
        Checkpointing::UnslothOffload => 2,
    }
}

impl Grid {
    fn new(run: &RunConfig) -> Grid {
        let batch = run.effective_batch();
        let values = Lever::ORDER
            .iter()
            .map(|&lever| match lever {
                Lever::Checkpointing => {
                    let top = if run.stack == Stack::Unsloth { 2 } else { 1 };
                    (checkpointing_rank(run.checkpointing)..=top).collect()
                }
                Lever::VllmShare if !matches!(run.generation, Generation::ColocatedVllm { .. }) => {
                    vec![0]
                }
                Lever::VllmShare => shares_nearest_first(run),
                // Unsloth passes kv_cache_dtype="fp8" to vLLM; TRL's colocate call has no such key
                Lever::KvCacheFp8
                    if run.stack == Stack::Unsloth
                        && !run.vllm_kv_fp8
                        && matches!(run.generation, Generation::ColocatedVllm { .. }) =>
                {
                    vec![0, 1]
                }
                // a full fine-tune trains 16-bit weights and has no adapter rank to lower
                Lever::FourBitWeights if run.full_finetuning => vec![0],
                Lever::LoraRank if run.full_finetuning => vec![run.lora_rank],
                Lever::FourBitWeights if run.quant != Quant::Nf4 => vec![0, 1],
                Lever::KvCacheFp8 | Lever::FourBitWeights => vec![0],
                _ => {
                    // every other lever is a numeric knob; one without a knob stays where it is
                    let Some(knob) = lever.knob() else {
                        return vec![0];
                    };
                    let now = knob.get(run).unwrap_or(0);
                    // keep the effective batch exactly: the micro-batches that divide it, the
                    // values the screen's locked slider steps through
                    let values = match lever {
                        Lever::MicroBatch => exact_values(knob, batch, run).unwrap_or_default(),
                        _ => knob.ladder().to_vec(),
                    };
                    let mut v = vec![now];
                    v.extend(
                        values.iter().rev().copied().filter(|&x| x < now).filter(
                            |&x| match lever {
                                // keep the generation batch divisible by the generations
                                Lever::Generations => batch.is_multiple_of(x),
                                // the prompt whole and at least 64 tokens of completion
                                Lever::SequenceLength => x >= run.prompt_len + 64,
                                _ => true,
                            },
                        ),
                    );
                    v
                }
            })
            .collect();
        Grid { values }
    }

    fn run_at(&self, base: &RunConfig, at: &[usize]) -> RunConfig {
        let mut run = base.clone();
        let target = base.effective_batch();
        for (d, &lever) in Lever::ORDER.iter().enumerate() {
            if at[d] == 0 {
                continue;
            }
            let v = self.values[d][at[d]];
            match lever {
                Lever::Checkpointing => {
                    run.checkpointing = [
                        Checkpointing::Off,
                        Checkpointing::On,
                        Checkpointing::UnslothOffload,
                    ][v as usize]
                }
                Lever::KvCacheFp8 => run.vllm_kv_fp8 = v == 1,
                Lever::FourBitWeights => run.quant = Quant::Nf4,
                Lever::MicroBatch => {
                    Knob::MicroBatch.set(&mut run, v);
                    run.grad_accum = accumulation_for(target, v, run.processes()).0;
                }
                // a shorter context takes the completion down with it when they no longer fit;
                // the prompt is the dataset's, never shortened
                Lever::SequenceLength => {
                    Knob::SequenceLength.set(&mut run, v);
                    let room = v.saturating_sub(run.prompt_len).max(1);
                    let completion = run.completion_len.min(room);
                    Knob::CompletionLength.set(&mut run, completion);
                }
                other => {
                    if let Some(knob) = other.knob() {
                        knob.set(&mut run, v)
                    }
                }
            }
        }
        run
    }

    fn cost(&self, at: &[usize]) -> f64 {
        let mut cost = 0.0;
        for (d, &lever) in Lever::ORDER.iter().enumerate() {
            if at[d] == 0 {
                continue;
            }
            let (from, to) = (self.values[d][0] as f64, self.values[d][at[d]] as f64);
            let steps = match lever {
                Lever::VllmShare => (from - to).abs() / 5.0,
                Lever::Checkpointing | Lever::KvCacheFp8 | Lever::FourBitWeights => to - from,
                _ => (from / to).log2(),
            };
            cost += CHANGE_COST + lever.rung_cost() * steps;
        }
        cost
    }

    fn show(&self, d: usize, i: usize) -> String {
        let v = self.values[d][i];
        match Lever::ORDER[d] {
            Lever::Checkpointing => ["false", "true", "\"unsloth\""][v as usize].to_string(),
            Lever::KvCacheFp8 | Lever::FourBitWeights => (v == 1).to_string(),
            lever => lever.knob().map_or(v.to_string(), |k| k.show(v)),
        }
    }
}

#[derive(PartialEq)]
struct Candidate {
    cost: f64,
    at: Vec<usize>,
}

impl Eq for Candidate {}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // a min-heap on cost; ties broken towards later levers changed less
        other
            .cost
            .total_cmp(&self.cost)
            .then_with(|| other.at.cmp(&self.at))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The memory `fit` leaves free unless told otherwise: 5 % of the capacity, above the
/// calibration's p90 error on PyTorch's reserved memory (4.35 %, over the measurements in calibration/).
pub const DEFAULT_HEADROOM: f64 = 0.05;

/// Whether `est` fits with `headroom` (a fraction of the capacity) to spare and vLLM starts
/// (free memory for its share, and a KV cache that holds one sequence of its context).
pub fn fits_with_headroom(est: &Estimate, headroom: f64) -> bool {
    est.roles
        .iter()
        .all(|r| role_fits_with_headroom(r, headroom))
}

/// Whether one role's GPUs keep `headroom` free and its vLLM, if any, starts.
fn role_fits_with_headroom(role: &Role, headroom: f64) -> bool {
    let limit = role.capacity_bytes as f64 * (1.0 - headroom);
    (role.total_bytes as f64) <= limit && role.vllm.as_ref().is_none_or(|v| v.starts)
}

/// The vLLM share's candidates: the current one, then the others nearest first, up and down
/// alike. A larger share can be what makes vLLM start (its KV cache must hold one sequence).
fn shares_nearest_first(run: &RunConfig) -> Vec<u64> {
    let now = Knob::VllmShare.get(run).unwrap_or(0);
    let mut v: Vec<u64> = Knob::VllmShare
        .ladder()
        .iter()
        .copied()
        .filter(|&x| x != now)
        .collect();
    v.sort_by_key(|&x| (x.abs_diff(now), x));
    v.insert(0, now);
    v
}

pub fn fit(run: &RunConfig, gpu: GpuBudget, headroom: f64, est: &mut Estimator) -> FitOutcome {
    let now = est.estimate(run, gpu);
    if fits_with_headroom(&now, headroom) {
        return FitOutcome::AlreadyFits { estimate: now };
    }
    if let Some(fitted) = sharding_that_fits(run, gpu, headroom, est) {
        return fitted;
    }
    let grid = Grid::new(run);
    // Memory only falls as a lever moves down, so when no floor of the grid fits, nothing does.
    let Some(_) = floor_that_fits(&grid, run, gpu, headroom, est) else {
        return hardware_that_fits(run, gpu, headroom, est)
            .unwrap_or_else(|| impossible(&grid, run, gpu, headroom, est));
    };
    let mut queue = BinaryHeap::new();
    let mut seen: HashSet<Vec<usize>> = HashSet::new();
    let start = vec![0; Lever::ORDER.len()];
    queue.push(Candidate {
        cost: 0.0,
        at: start.clone(),
    });
    seen.insert(start);
    while let Some(Candidate { cost, at }) = queue.pop() {
        let candidate = grid.run_at(run, &at);
        let e = est.estimate(&candidate, gpu);
        // the loader must accept what the fit proposes
        if fits_with_headroom(&e, headroom) && rules::validate(&candidate).is_ok() {
            let changes = describe(&grid, run, &at, gpu, est);
            return FitOutcome::Fitted {
                changes,
                cost,
                estimate: e,
                run: Box::new(candidate),
            };
        }
        for d in 0..at.len() {
            if at[d] + 1 < grid.values[d].len() {
                let mut next = at.clone();
                next[d] += 1;
                if seen.insert(next.clone()) {
                    queue.push(Candidate {
                        cost: grid.cost(&next),
                        at: next,
                    });
                }
            }
        }
    }
    impossible(&grid, run, gpu, headroom, est)
}

/// Every lever but the vLLM share at its floor; the share at the first value (from the top)
/// with which the run fits: the least memory the grid allows, or `None`.
fn floor_that_fits(
    grid: &Grid,
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> Option<Vec<usize>> {
    let mut floor: Vec<usize> = grid.values.iter().map(|v| v.len() - 1).collect();
    (0..grid.values[0].len()).find_map(|share| {
        floor[0] = share;
        fits_with_headroom(&est.estimate(&grid.run_at(run, &floor), gpu), headroom)
            .then(|| floor.clone())
    })
}

/// Nothing fits: the floors, what the run needs there, and the smallest GPU on which the grid
/// has a fit (searched in 256 MiB steps).
fn impossible(
    grid: &Grid,
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> FitOutcome {
    let mut floor: Vec<usize> = grid.values.iter().map(|v| v.len() - 1).collect();
    // vLLM's floor: of the shares with which it starts, the one needing least memory
    floor[0] = (0..grid.values[0].len())
        .filter_map(|share| {
            let mut at = floor.clone();
            at[0] = share;
            let e = est.estimate(&grid.run_at(run, &at), gpu);
            e.vllm
                .as_ref()
                .is_none_or(|v| v.starts)
                .then_some((e.total_bytes, share))
        })
        .min()
        .map_or(0, |(_, share)| share);
    let e = est.estimate(&grid.run_at(run, &floor), gpu);
    let floors = Lever::ORDER
        .iter()
        .enumerate()
        .filter(|(_, l)| l.applies(run))
        .map(|(d, l)| format!("{} = {}", l.key_in(run), grid.show(d, floor[d])))
        .collect();
    const STEP: u64 = 256 << 20;
    let fits_on = |capacity: u64, est: &mut Estimator| {
        let g = GpuBudget { capacity, ..gpu };
        floor_that_fits(grid, run, g, headroom, est).is_some()
    };
    let (mut lo, mut hi) = (gpu.capacity / STEP, crate::units::ABSURD / STEP);
    let smallest = if fits_on(hi * STEP, est) {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits_on(mid * STEP, est) {
                hi = mid
            } else {
                lo = mid
            }
        }
        hi * STEP
    } else {
        crate::units::ABSURD
    };
    FitOutcome::Impossible {
        floors,
        smallest_gpu_bytes: smallest,
        estimate: e,
    }
}

/// The changes from `run` to grid point `at`, each priced after the ones before it.
fn describe(
    grid: &Grid,
    run: &RunConfig,
    at: &[usize],
    gpu: GpuBudget,
    est: &mut Estimator,
) -> Vec<Change> {
    let mut applied = vec![0; at.len()];
    let mut before = est.estimate(run, gpu).total_bytes as i64;
    let mut changes = Vec::new();
    for (d, &lever) in Lever::ORDER.iter().enumerate() {
        if at[d] == 0 {
            continue;
        }
        applied[d] = at[d];
        let after = est.estimate(&grid.run_at(run, &applied), gpu).total_bytes as i64;
        changes.push(Change {
            lever,
            key: lever.key_in(run),
            from: grid.show(d, 0),
            to: grid.show(d, at[d]),
            bytes_saved: before - after,
            trade_off: if lever == Lever::VllmShare && grid.values[d][at[d]] > grid.values[d][0] {
                "larger vLLM share: vLLM can start and hold its context, less room left for training"
            } else if lever == Lever::Checkpointing
                && grid.values[d][at[d]] == checkpointing_rank(Checkpointing::UnslothOffload)
            {
                CHECKPOINT_OFFLOAD_TRADE_OFF
            } else {
                lever.trade_off()
            },
        });
        before = after;
    }
    changes
}

/// The cost the solver gives to a set of changes (for comparing strategies).
pub fn cost_of(run: &RunConfig, changed: &RunConfig) -> f64 {
    let grid = Grid::new(run);
    let at: Vec<usize> = Lever::ORDER
        .iter()
        .enumerate()
        .map(|(d, &lever)| {
            let v = match lever {
                Lever::Checkpointing => checkpointing_rank(changed.checkpointing),
                Lever::KvCacheFp8 => u64::from(changed.vllm_kv_fp8 && !run.vllm_kv_fp8),
                Lever::FourBitWeights => {
                    u64::from(changed.quant == Quant::Nf4 && run.quant != Quant::Nf4)
                }
                other => other.knob().and_then(|k| k.get(changed)).unwrap_or(0),
            };
            grid.values[d].iter().position(|&x| x == v).unwrap_or(0)
        })
        .collect();
    grid.cost(&at)
}

/// One rung down a lever: the change, and the run it makes.
#[derive(Debug, Clone)]
pub struct StepDown {
    pub change: Change,
    pub run: RunConfig,
}

/// One rung down each lever the solver may pull, largest saving first: the screen's levers
/// panel and the solver read the same grid. A rung that would break a startable run is left
/// out: one after which vLLM refuses to start, or which a trainer's own rule refuses.
pub fn step_downs(run: &RunConfig, gpu: GpuBudget, est: &mut Estimator) -> Vec<StepDown> {
    let grid = Grid::new(run);
    let base_estimate = est.estimate(run, gpu);
    let base = base_estimate.total_bytes as i64;
    let base_starts = vllm_starts(&base_estimate);
    let base_valid = rules::validate(run).is_ok();
    let mut steps: Vec<StepDown> = (0..Lever::ORDER.len())
        .filter(|&d| grid.values[d].len() > 1)
        .filter_map(|d| {
            let mut at = vec![0; Lever::ORDER.len()];
            at[d] = 1;
            let lower = grid.run_at(run, &at);
            let lowered = est.estimate(&lower, gpu);
            if (base_starts && !vllm_starts(&lowered))
                || (base_valid && rules::validate(&lower).is_err())
            {
                return None;
            }
            let lever = Lever::ORDER[d];
            let change = Change {
                lever,
                key: lever.key_in(run),
                from: grid.show(d, 0),
                to: grid.show(d, 1),
                bytes_saved: base - lowered.total_bytes as i64,
                trade_off: lever.trade_off(),
            };
            Some(StepDown { change, run: lower })
        })
        .collect();
    steps.sort_by_key(|s| std::cmp::Reverse(s.change.bytes_saved));
    steps
}

/// Whether every vLLM of the run (colocated or a server's) gets past its start-up checks.
fn vllm_starts(e: &Estimate) -> bool {
    e.roles
        .iter()
        .all(|r| r.vllm.as_ref().is_none_or(|v| v.starts))
}

/// What offloading the optimizer to CPU costs: not GPU communication but host memory (the
/// estimate's `host_memory_bytes`, DeepSpeed's `estimate_zero3_model_states_mem_needs`) and the
/// PCIe link, which carries the gradients out and the updated weights back every step
/// (DeepSpeed ZeRO-Offload, `offload_optimizer.device = "cpu"`).
const OFFLOAD_TRADE_OFF: &str = "the optimizer's states in host memory, updated on the CPU: RAM on each node, and gradients and weights over PCIe every step (slower steps)";

/// What Unsloth's offloaded checkpointing costs: the checkpointed activations in host memory,
/// copied over PCIe and back each step (unsloth_zoo 2026.10.9 `gradient_checkpointing.py`,
/// `Unsloth_Offloaded_Gradient_Checkpointer`: `hidden_states.to("cpu", non_blocking = True)`).
const CHECKPOINT_OFFLOAD_TRADE_OFF: &str = "checkpoints kept in host memory and copied over PCIe each step: host RAM, and slower steps than on-GPU checkpointing";

/// The least sharding that fits a run of several training processes, every knob kept: DeepSpeed
/// ZeRO-2, then ZeRO-3, then ZeRO-3 with the optimizer offloaded to CPU (each shards more and
/// communicates more than the one before).
fn sharding_that_fits(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> Option<FitOutcome> {
    if run.processes() < 2 || run.stack != Stack::Trl {
        return None;
    }
    let now = run.spread;
    let ladder = [(2, false), (3, false), (3, true)];
    for (stage, offload) in ladder {
        if now.stage() > stage || (now.stage() == stage && now.offload_optimizer == offload) {
            continue;
        }
        let mut candidate = run.clone();
        candidate.spread = Spread {
            engine: now.sharding_engine(),
            zero_stage: stage,
            offload_optimizer: offload,
            ..now
        };
        let before = est.estimate(run, gpu).total_bytes as i64;
        let e = est.estimate(&candidate, gpu);
        if fits_with_headroom(&e, headroom) && rules::validate(&candidate).is_ok() {
            let change = Change {
                lever: Lever::Sharding,
                key: "zero_stage",
                from: now.describe(),
                to: candidate.spread.describe(),
                bytes_saved: before - e.total_bytes as i64,
                trade_off: if offload {
                    OFFLOAD_TRADE_OFF
                } else {
                    Lever::Sharding.trade_off()
                },
            };
            return Some(FitOutcome::Fitted {
                changes: vec![change],
                cost: Lever::Sharding.rung_cost(),
                estimate: e,
                run: Box::new(candidate),
            });
        }
    }
    None
}

/// When no knob fits a TRL run, GPUs added: first the vLLM server's, so that vLLM starts on
/// GPUs of its own (a colocated vLLM moved to `trl vllm-serve`, or a server that cannot start
/// given tensor parallelism), then training GPUs.
fn hardware_that_fits(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> Option<FitOutcome> {
    if run.stack != Stack::Trl {
        return None;
    }
    let here = more_gpus_that_fit(run, gpu, headroom, est);
    let served = server_that_starts(run, gpu, headroom, est)
        .and_then(|(served, change)| with_server(served, change, gpu, headroom, est));
    // the answer with fewer GPUs in all; vLLM stays where it is on a tie
    match (here, served) {
        (Some(h), Some(s)) if gpus_in_all(&s) < gpus_in_all(&h) => Some(s),
        (Some(h), _) => Some(h),
        (None, s) => s,
    }
}

/// GPUs a fitted run uses: its training processes and its vLLM server's.
fn gpus_in_all(outcome: &FitOutcome) -> u64 {
    match outcome {
        FitOutcome::Fitted { run, .. } => {
            let server = if run.generation == Generation::VllmServer {
                run.vllm_server.gpus
            } else {
                0
            };
            run.processes() + server
        }
        _ => u64::MAX,
    }
}

/// `served` (vLLM moved to or widened on its own GPUs by `change`) as it is, or with the
/// training GPUs it still needs.
fn with_server(
    served: RunConfig,
    change: Change,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> Option<FitOutcome> {
    let e = est.estimate(&served, gpu);
    let fitted = if fits_with_headroom(&e, headroom) && rules::validate(&served).is_ok() {
        FitOutcome::Fitted {
            changes: Vec::new(),
            cost: 0.0,
            estimate: e,
            run: Box::new(served),
        }
    } else {
        more_gpus_that_fit(&served, gpu, headroom, est)?
    };
    match fitted {
        FitOutcome::Fitted {
            mut changes,
            cost,
            estimate,
            run,
        } => {
            changes.insert(0, change);
            Some(FitOutcome::Fitted {
                changes,
                cost: cost + Lever::VllmServerGpus.rung_cost(),
                estimate,
                run,
            })
        }
        other => Some(other),
    }
}

/// The fewest `trl vllm-serve` GPUs (tensor parallel 1, 2, 4, 8) on which the server role fits,
/// for a run whose vLLM is colocated (then moved there) or served but not fitting; `None` when
/// vLLM already fits where it is.
fn server_that_starts(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> Option<(RunConfig, Change)> {
    let now = est.estimate(run, gpu);
    let server_fits = now
        .roles
        .iter()
        .filter(|r| r.role == RoleKind::VllmServer)
        .all(|r| role_fits_with_headroom(r, headroom));
    let from = match run.generation {
        Generation::ColocatedVllm { .. } => "colocated".to_string(),
        Generation::VllmServer if !server_fits => {
            format!("{} GPU(s)", run.vllm_server.gpus)
        }
        _ => return None,
    };
    [1u64, 2, 4, 8]
        .into_iter()
        .filter(|&tp| {
            run.generation != Generation::VllmServer || tp > run.vllm_server.tensor_parallel_size
        })
        .find_map(|tp| {
            let mut candidate = run.clone();
            candidate.generation = Generation::VllmServer;
            candidate.vllm_server.tensor_parallel_size = tp;
            candidate.vllm_server.gpus = tp * candidate.vllm_server.data_parallel_size.max(1);
            let e = est.estimate(&candidate, gpu);
            let server = e.roles.iter().find(|r| r.role == RoleKind::VllmServer)?;
            role_fits_with_headroom(server, headroom).then(|| {
                let change = Change {
                    lever: Lever::VllmServerGpus,
                    key: "vllm_server",
                    from: from.clone(),
                    to: format!("{} GPU(s), TP {tp}", candidate.vllm_server.gpus),
                    bytes_saved: now.total_bytes as i64 - e.total_bytes as i64,
                    trade_off: Lever::VllmServerGpus.trade_off(),
                };
                (candidate, change)
            })
        })
}

/// Training GPU counts tried when no knob fits: each count to 8 (a node), then whole nodes.
const GPU_COUNTS: [u64; 11] = [2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128];

/// The fewest training GPUs of this kind on which the run fits with every knob kept, the model
/// sharded with ZeRO-3 (FSDP full shard when the run uses FSDP), and the gradient accumulation
/// lowered to keep the effective batch where it divides (TRL runs: `hardware_that_fits` asks).
fn more_gpus_that_fit(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> Option<FitOutcome> {
    let before = est.estimate(run, gpu).total_bytes as i64;
    let nodes = run.spread.nodes.max(1);
    for gpus in GPU_COUNTS.into_iter().filter(|&g| g > run.gpus) {
        let mut candidate = run.clone();
        candidate.gpus = gpus;
        candidate.spread = Spread {
            engine: run.spread.sharding_engine(),
            zero_stage: 3,
            ..run.spread
        };
        let per_step = run.micro_batch * gpus * nodes;
        if run.effective_batch().is_multiple_of(per_step) && run.effective_batch() >= per_step {
            candidate.grad_accum = run.effective_batch() / per_step;
        }
        let e = est.estimate(&candidate, gpu);
        if !(fits_with_headroom(&e, headroom) && rules::validate(&candidate).is_ok()) {
            continue;
        }
        let mut changes = vec![Change {
            lever: Lever::Gpus,
            key: "gpus",
            from: run.gpus.to_string(),
            to: gpus.to_string(),
            bytes_saved: before - e.total_bytes as i64,
            trade_off: Lever::Gpus.trade_off(),
        }];
        if candidate.grad_accum != run.grad_accum {
            changes.push(Change {
                lever: Lever::Gpus,
                key: "gradient_accumulation_steps",
                from: run.grad_accum.to_string(),
                to: candidate.grad_accum.to_string(),
                bytes_saved: 0,
                trade_off: "fewer accumulation steps on more GPUs: the same effective batch",
            });
        }
        if candidate.spread != run.spread {
            changes.push(Change {
                lever: Lever::Sharding,
                key: "zero_stage",
                from: run.spread.describe(),
                to: candidate.spread.describe(),
                bytes_saved: 0,
                trade_off: Lever::Sharding.trade_off(),
            });
        }
        return Some(FitOutcome::Fitted {
            changes,
            cost: Lever::Gpus.rung_cost(),
            estimate: e,
            run: Box::new(candidate),
        });
    }
    None
}
