//! The fit solver: the configuration closest to the given one that fits, found by an exact
//! search over the knobs' discrete values. "Closest" means least loss of training quality: the
//! effective batch is kept, cheap levers (vLLM share, micro-batch, checkpointing) come before
//! the ones that change what is learned (sequence length, generations, LoRA rank), and fewer
//! knobs changed is better. Costs add up, so a best-first search finds the cheapest fit first.

mod hardware;
mod lever;
mod outcome;

pub use lever::Lever;
pub use outcome::{
    Change, DEFAULT_HEADROOM, FitOutcome, estimate_under_headroom, fits_with_headroom,
    headroom_percent, role_fits_with_headroom, under_headroom,
};

use crate::memory::estimate::{Estimate, Estimator, GpuBudget};
use crate::run::adjust::exact_values;
use crate::run::knobs::{Knob, accumulation_for};
use crate::run::rules;
use crate::run::{Checkpointing, Generation, Quant, RunConfig, Stack};
use hardware::{hardware_that_fits, sharding_that_fits};
use lever::CHECKPOINT_OFFLOAD_TRADE_OFF;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

/// What cutting a context down to the prompt + completion costs: nothing the run generates or
/// trains on.
const UNUSED_CONTEXT_TRADE_OFF: &str =
    "context the run never uses cut: its prompt + completion still fit whole";

/// Cost of changing one more knob: fewer changes are preferred.
const CHANGE_COST: f64 = 2.0;

/// The values each lever may take, current first, then downwards.
struct Grid {
    values: Vec<Vec<u64>>,
    /// the context the run uses (prompt + completion): a shorter context costs the run only
    /// below it
    used: u64,
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
        let mut values: Vec<Vec<u64>> = Lever::ORDER
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
                    // a context longer than the run uses is cut straight to prompt +
                    // completion, which costs the run nothing, before any rung below it
                    let used = run.sequence_len();
                    let below = if lever == Lever::SequenceLength && used < now {
                        v.push(used);
                        used
                    } else {
                        now
                    };
                    v.extend(
                        values.iter().rev().copied().filter(|&x| x < below).filter(
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
        // a lever whose key the pinned trainer lacks stays where it is
        for (v, lever) in values.iter_mut().zip(Lever::ORDER) {
            if !lever.exists_in(run) {
                v.truncate(1);
            }
        }
        Grid {
            values,
            used: run.sequence_len(),
        }
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
                // a context the run never reaches is cut for free: only what falls below the
                // prompt + completion is a loss
                Lever::SequenceLength => {
                    let used = self.used as f64;
                    (from.min(used) / to.min(used)).log2()
                }
                Lever::Checkpointing | Lever::KvCacheFp8 | Lever::FourBitWeights => to - from,
                _ => (from / to).log2(),
            };
            cost += CHANGE_COST + lever.rung_cost() * steps;
        }
        cost
    }

    /// What moving lever `d` to its value `i` costs the run, in words.
    fn trade_off(&self, d: usize, i: usize) -> &'static str {
        let lever = Lever::ORDER[d];
        let (from, to) = (self.values[d][0], self.values[d][i]);
        match lever {
            Lever::SequenceLength if to >= self.used => UNUSED_CONTEXT_TRADE_OFF,
            Lever::VllmShare if to > from => {
                "larger vLLM share: vLLM can start and hold its context, less room left for training"
            }
            Lever::Checkpointing if to == checkpointing_rank(Checkpointing::UnslothOffload) => {
                CHECKPOINT_OFFLOAD_TRADE_OFF
            }
            _ => lever.trade_off(),
        }
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

/// The nearest run that fits: the knobs first, then more sharding, vLLM's own GPUs or more
/// training GPUs when no knob fits.
pub fn fit(run: &RunConfig, gpu: GpuBudget, headroom: f64, est: &mut Estimator) -> FitOutcome {
    fit_within(run, gpu, headroom, est, true)
}

/// The nearest run that fits with the GPUs and the sharding it has: only the run's own knobs
/// move, never the GPU count, the ZeRO stage or offload, nor vLLM's GPUs (which live in the
/// accelerate config and the launch command, not in a recipe).
pub fn fit_in_place(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) -> FitOutcome {
    fit_within(run, gpu, headroom, est, false)
}

fn fit_within(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
    hardware: bool,
) -> FitOutcome {
    let now = est.estimate(run, gpu);
    if fits_with_headroom(&now, headroom) {
        return FitOutcome::AlreadyFits { estimate: now };
    }
    if hardware && let Some(fitted) = sharding_that_fits(run, gpu, headroom, est) {
        return fitted;
    }
    let grid = Grid::new(run);
    // Memory only falls as a lever moves down, so when no floor of the grid fits, nothing does.
    let Some(_) = floor_that_fits(&grid, run, gpu, headroom, est) else {
        return hardware
            .then(|| hardware_that_fits(run, gpu, headroom, est))
            .flatten()
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
            trade_off: grid.trade_off(d, at[d]),
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
                trade_off: grid.trade_off(d, 1),
            };
            Some(StepDown { change, run: lower })
        })
        .collect();
    steps.sort_by_key(|s| std::cmp::Reverse(s.change.bytes_saved));
    steps
}

/// Rungs 2 to `depth` down each lever that [`step_downs`] steps (which gives the first), for a
/// screen with room for them: each moves that lever alone from `run`, and saves what it saves
/// against `run`. A lever's list ends at the first rung after which vLLM would not start or a
/// trainer's own rule refuses the run (as `step_downs` leaves such a rung out).
pub fn deeper_steps(
    run: &RunConfig,
    gpu: GpuBudget,
    est: &mut Estimator,
    depth: usize,
) -> Vec<StepDown> {
    let grid = Grid::new(run);
    let base_estimate = est.estimate(run, gpu);
    let base = base_estimate.total_bytes as i64;
    let base_starts = vllm_starts(&base_estimate);
    let base_valid = rules::validate(run).is_ok();
    let mut out = Vec::new();
    for d in 0..Lever::ORDER.len() {
        let values = &grid.values[d];
        // the same way as the first rung (the vLLM share's candidates go nearest first, up and
        // down alike)
        let rungs: Vec<usize> = (2..values.len())
            .filter(|&i| (values[i] < values[0]) == (values[1] < values[0]))
            .take(depth.saturating_sub(1))
            .collect();
        for i in rungs {
            let mut at = vec![0; Lever::ORDER.len()];
            at[d] = i;
            let lower = grid.run_at(run, &at);
            let lowered = est.estimate(&lower, gpu);
            if (base_starts && !vllm_starts(&lowered))
                || (base_valid && rules::validate(&lower).is_err())
            {
                break;
            }
            let lever = Lever::ORDER[d];
            let change = Change {
                lever,
                key: lever.key_in(run),
                from: grid.show(d, 0),
                to: grid.show(d, i),
                bytes_saved: base - lowered.total_bytes as i64,
                trade_off: grid.trade_off(d, i),
            };
            out.push(StepDown { change, run: lower });
        }
    }
    out
}

/// Whether every vLLM of the run (colocated or a server's) gets past its start-up checks.
fn vllm_starts(e: &Estimate) -> bool {
    e.roles
        .iter()
        .all(|r| r.vllm.as_ref().is_none_or(|v| v.starts))
}

#[cfg(test)]
mod tests;
