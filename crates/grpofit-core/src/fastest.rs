//! `fit --fastest`: among the runs that fit with the headroom, the one with the least predicted
//! seconds per optimizer step, reached from the nearest fit by moving only what changes speed:
//! the vLLM share, the micro-batch against the accumulation (the effective batch kept),
//! checkpointing and its offload, vLLM's KV cache in fp8 (a numerics change, said), vLLM's
//! sleep, and vLLM's `max_num_seqs` and `max_num_batched_tokens` where the trainer passes them
//! on (Unsloth's `load_vllm`; TRL sizes its colocated vLLM itself). What the run learns (generations, effective batch, lengths, model, rank, learning
//! rate) is never touched. A descent over one knob at a time, repeated while a step gets faster.

use crate::contract::Table;
use crate::fit::{Change, FitOutcome, Lever, fit, fit_in_place, fits_with_headroom};
use crate::hardware::GpuSpeed;
use crate::memory::breakdown::Phase;
use crate::memory::estimate::{Estimate, Estimator, GpuBudget};
use crate::run::adjust::exact_values;
use crate::run::knobs::{Knob, accumulation_for};
use crate::run::{Checkpointing, Generation, RunConfig, Stack, rules};
use crate::time::{Efficiencies, StepTime, TimeKeys, step_time};
use serde::Serialize;

#[path = "fastest_settle.rs"]
mod settle;
pub use settle::FP8_KV_MIN_GAIN;

/// A knob the search moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Throughput {
    MicroBatch,
    Checkpointing,
    VllmShare,
    KvCacheFp8,
    Sleep,
    MaxNumSeqs,
    MaxNumBatchedTokens,
}

/// `max_num_seqs` values the search tries: Unsloth's own tiers (unsloth_zoo 2026.10.9
/// `load_vllm`: 8 to 256 sequences by its KV estimate, `memory::vllm::unsloth_pairs`) and vLLM's
/// V1 default for a large card (512, `EngineArgs.get_batch_defaults`), beside the generation
/// batch itself.
const SEQS_LADDER: [u64; 11] = [8, 16, 32, 48, 64, 80, 96, 112, 128, 256, 512];

/// `max_num_batched_tokens` values the search tries: Unsloth's own tiers (the same table: 2048
/// to 8192 tokens) and vLLM V1's default for a large card (16384, `get_batch_defaults`).
const TOKENS_LADDER: [u64; 5] = [2048, 4096, 6144, 8192, 16384];

impl Throughput {
    const ALL: [Throughput; 7] = [
        Throughput::MicroBatch,
        Throughput::Checkpointing,
        Throughput::VllmShare,
        Throughput::KvCacheFp8,
        Throughput::Sleep,
        Throughput::MaxNumSeqs,
        Throughput::MaxNumBatchedTokens,
    ];

    /// The knob's key in the run's trainer.
    pub fn key(self, stack: Stack) -> &'static str {
        self.setting(stack).1
    }

    /// The run-file table and key the knob is written to on `stack` (the levers' own where a
    /// lever moves it).
    fn setting(self, stack: Stack) -> (Table, &'static str) {
        match (self, stack) {
            (Throughput::MicroBatch, s) => Knob::MicroBatch.key(s),
            (Throughput::Checkpointing, s) => Lever::Checkpointing.setting_on(s),
            (Throughput::VllmShare, s) => Knob::VllmShare.key(s),
            (Throughput::KvCacheFp8, s) => Lever::KvCacheFp8.setting_on(s),
            (Throughput::Sleep, Stack::Unsloth) => (Table::Env, "UNSLOTH_VLLM_STANDBY"),
            (Throughput::Sleep, Stack::Trl) => (Table::Grpo, "vllm_enable_sleep_mode"),
            // Unsloth's `from_pretrained` keys, passed on to `load_vllm` (`passed_on`)
            (Throughput::MaxNumSeqs, _) => (Table::Model, "max_num_seqs"),
            (Throughput::MaxNumBatchedTokens, _) => (Table::Model, "max_num_batched_tokens"),
        }
    }

    /// Whether the releases `run` is pinned to take the knob's key: a key the pinned trainer's
    /// call refuses is left out of the written file (`config::export_keys`), so a move of it
    /// would be printed but never made (`vllm_enable_sleep_mode` exists from trl 0.20).
    fn exists_in(self, run: &RunConfig) -> bool {
        match self {
            // `from_pretrained` hands them to `load_vllm` through its keyword arguments: the
            // pinned `load_vllm` is what takes them
            Throughput::MaxNumSeqs | Throughput::MaxNumBatchedTokens => self.passed_on(run),
            _ => run.pinned_release_takes(self.setting(run.stack)),
        }
    }

    /// Whether the run's trainer passes this knob on to its vLLM: Unsloth's colocated vLLM
    /// where the pinned `load_vllm` takes the key (`max_num_seqs` from unsloth_zoo 2025.11.6,
    /// `max_num_batched_tokens` from 2026.10.9; the contract's ladder). TRL's `GRPOConfig` has
    /// neither: its colocated vLLM gets the generation batch (`GRPOTrainer.__init__`), and
    /// `trl vllm-serve` takes no such flag.
    fn passed_on(self, run: &RunConfig) -> bool {
        matches!(run.generation, Generation::ColocatedVllm { .. })
            && run.stack == Stack::Unsloth
            && crate::contract::accepts::accepts(
                crate::contract::Call::UnslothLoadVllm,
                self.key(run.stack),
                &run.call_versions(),
            )
    }

    /// What the change does beside speed and memory.
    fn note(self) -> Option<&'static str> {
        match self {
            Throughput::KvCacheFp8 => Some(
                "changes numerics: vLLM keeps keys and values in fp8, so sampling drifts slightly from the trained policy",
            ),
            _ => None,
        }
    }

    /// The values this knob may take in `run`, the current one included.
    fn candidates(self, run: &RunConfig) -> Vec<RunConfig> {
        if !self.exists_in(run) {
            return Vec::new();
        }
        let with = |f: &dyn Fn(&mut RunConfig)| {
            let mut r = run.clone();
            f(&mut r);
            r
        };
        let colocated = matches!(run.generation, Generation::ColocatedVllm { .. });
        match self {
            Throughput::MicroBatch => {
                let target = run.effective_batch();
                exact_values(Knob::MicroBatch, target, run)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|mb| {
                        with(&|r| {
                            Knob::MicroBatch.set(r, mb);
                            r.grad_accum = accumulation_for(target, mb, r.processes()).0;
                        })
                    })
                    .filter(|r| r.effective_batch() == target)
                    .filter_map(|r| same_generation_batch(run, r))
                    .collect()
            }
            Throughput::Checkpointing => {
                let mut v = vec![Checkpointing::Off, Checkpointing::On];
                if run.stack == Stack::Unsloth {
                    v.push(Checkpointing::UnslothOffload);
                }
                v.into_iter()
                    .map(|c| with(&|r| r.checkpointing = c))
                    .collect()
            }
            Throughput::VllmShare if colocated => Knob::VllmShare
                .ladder()
                .iter()
                .map(|&s| with(&|r| Knob::VllmShare.set(r, s)))
                .collect(),
            // Unsloth passes kv_cache_dtype="fp8" to vLLM; TRL's colocate call has no such key
            Throughput::KvCacheFp8 if colocated && run.stack == Stack::Unsloth => [false, true]
                .into_iter()
                .map(|b| with(&|r| r.vllm_kv_fp8 = b))
                .collect(),
            Throughput::MaxNumSeqs if self.passed_on(run) => {
                // more than the generation batch decodes no faster
                let rows = run.generation_rows() * run.vllm_tensor_parallel.max(1);
                let mut v: Vec<u64> = SEQS_LADDER.into_iter().filter(|&n| n < rows).collect();
                v.push(rows);
                std::iter::once(None)
                    .chain(v.into_iter().map(Some))
                    .map(|n| with(&|r| r.vllm_max_num_seqs = n))
                    .collect()
            }
            Throughput::MaxNumBatchedTokens if self.passed_on(run) => std::iter::once(None)
                .chain(TOKENS_LADDER.into_iter().map(Some))
                .map(|n| with(&|r| r.vllm_max_num_batched_tokens = n))
                .collect(),
            Throughput::Sleep if colocated => [false, true]
                .into_iter()
                .map(|b| {
                    with(&|r| {
                        r.vllm_sleep = b;
                        if r.stack == Stack::Unsloth {
                            r.unsloth_standby = b;
                        }
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `now` with this knob as `to` has it.
    fn moved(self, now: &RunConfig, to: &RunConfig) -> RunConfig {
        let mut next = now.clone();
        match self {
            Throughput::MicroBatch => {
                (next.micro_batch, next.grad_accum) = (to.micro_batch, to.grad_accum);
                next.steps_per_generation = to.steps_per_generation;
            }
            Throughput::Checkpointing => next.checkpointing = to.checkpointing,
            Throughput::VllmShare => next.generation = to.generation,
            Throughput::KvCacheFp8 => next.vllm_kv_fp8 = to.vllm_kv_fp8,
            Throughput::Sleep => {
                (next.vllm_sleep, next.unsloth_standby) = (to.vllm_sleep, to.unsloth_standby)
            }
            Throughput::MaxNumSeqs => next.vllm_max_num_seqs = to.vllm_max_num_seqs,
            Throughput::MaxNumBatchedTokens => {
                next.vllm_max_num_batched_tokens = to.vllm_max_num_batched_tokens
            }
        }
        next
    }

    /// The keys this knob moves beside its own, from `now` to `to`: the accumulation (and a set
    /// `steps_per_generation`) with the micro-batch.
    fn companions(self, now: &RunConfig, to: &RunConfig) -> Vec<KeyChange> {
        if self != Throughput::MicroBatch {
            return Vec::new();
        }
        let mut v = vec![KeyChange {
            key: Knob::GradAccum.trainer_key(now.stack),
            from: now.grad_accum.to_string(),
            to: to.grad_accum.to_string(),
        }];
        if let (Some(a), Some(b)) = (now.steps_per_generation, to.steps_per_generation) {
            v.push(KeyChange {
                key: "steps_per_generation",
                from: a.to_string(),
                to: b.to_string(),
            });
        }
        v.retain(|c| c.from != c.to);
        v
    }

    /// The knob's value in `run`, as the run file writes it.
    fn show(self, run: &RunConfig) -> String {
        match self {
            Throughput::MicroBatch => run.micro_batch.to_string(),
            Throughput::Checkpointing => match (run.checkpointing, run.stack) {
                (Checkpointing::UnslothOffload, _) => "\"unsloth\"".to_string(),
                (c, _) => (c != Checkpointing::Off).to_string(),
            },
            Throughput::VllmShare => Knob::VllmShare
                .get(run)
                .map_or("-".to_string(), |v| Knob::VllmShare.show(v)),
            Throughput::KvCacheFp8 => run.vllm_kv_fp8.to_string(),
            Throughput::Sleep => run.vllm_sleep.to_string(),
            Throughput::MaxNumSeqs => Self::given(run.vllm_max_num_seqs),
            Throughput::MaxNumBatchedTokens => Self::given(run.vllm_max_num_batched_tokens),
        }
    }

    /// A value the file gives, or what it means unset.
    fn given(v: Option<u64>) -> String {
        v.map_or("unset".to_string(), |n| n.to_string())
    }

    /// `show`, with what vLLM gets where the file leaves the value to the trainer (`est`'s
    /// plan): "unset (32)".
    fn shown(self, run: &RunConfig, est: &Estimate) -> String {
        let plan = est.vllm.as_ref();
        let own = match self {
            Throughput::MaxNumSeqs if run.vllm_max_num_seqs.is_none() => {
                plan.map(|p| p.max_num_seqs)
            }
            Throughput::MaxNumBatchedTokens if run.vllm_max_num_batched_tokens.is_none() => {
                plan.map(|p| p.max_num_batched_tokens)
            }
            _ => None,
        };
        match own {
            Some(n) => format!("unset ({n})"),
            None => self.show(run),
        }
    }
}

/// `moved` (the micro-batch and accumulation of `run` moved) with the generation batch per
/// optimizer step kept, or `None` where it cannot be: TRL's `GRPOConfig.__post_init__` (trl
/// 0.23.0) makes `generation_batch_size = per_device_train_batch_size x num_processes x
/// steps_per_generation` when the file sets `steps_per_generation`, so one generation serves
/// `steps_per_generation / gradient_accumulation_steps` optimizer steps; that ratio is what the
/// run learns from and stays. A file giving `generation_batch_size` (or neither) keeps it as it
/// is: the batch is fixed, or follows the accumulation.
fn same_generation_batch(run: &RunConfig, mut moved: RunConfig) -> Option<RunConfig> {
    let Some(spg) = run.steps_per_generation else {
        return Some(moved);
    };
    let scaled = spg.checked_mul(moved.grad_accum)?;
    if scaled == 0 || !scaled.is_multiple_of(run.grad_accum.max(1)) {
        return None;
    }
    moved.steps_per_generation = Some(scaled / run.grad_accum.max(1));
    Some(moved)
}

/// One knob moved from the nearest fit, with what it did, applied after the ones before it.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedChange {
    /// the same word `fit --json` uses for what moved
    #[serde(rename = "lever")]
    pub knob: Throughput,
    pub key: &'static str,
    pub from: String,
    pub to: String,
    /// keys moved with this one (the accumulation, and `steps_per_generation` where set)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<KeyChange>,
    /// the move this one makes room for, where it makes no step faster itself
    #[serde(skip_serializing_if = "Option::is_none")]
    pub makes_room_for: Option<String>,
    /// the phase whose memory it lowers most in the fastest run (against that run with this
    /// knob left as the nearest fit has it), and by how much
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_saved: Option<PhaseSaving>,
    /// seconds a step this change saves (negative: costs)
    pub seconds_saved: f64,
    /// bytes of GPU memory it saves (negative: takes)
    pub bytes_saved: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

/// The fastest run that fits, against the nearest fit.
#[derive(Debug, Clone, Serialize)]
pub struct Fastest {
    /// what the nearest fit changed in the run to fit (`fit`'s changes), before any speed move;
    /// empty when the run already fits
    pub nearest_changes: Vec<Change>,
    pub changes: Vec<SpeedChange>,
    pub step_time: StepTime,
    /// the nearest fit's step
    pub nearest_seconds: f64,
    /// the nearest fit's seconds over the fastest's
    pub speedup: f64,
    pub estimate: Estimate,
    #[serde(skip)]
    pub run: Box<RunConfig>,
    #[serde(skip)]
    pub nearest: Box<RunConfig>,
}

/// What a search is timed against.
pub struct Timing<'a> {
    pub gpu: &'a GpuSpeed,
    pub keys: &'a TimeKeys,
    pub eff: &'a Efficiencies,
}

/// The fastest run that fits `gpu` with `headroom`, from the nearest fit of `run`; `None` when
/// nothing fits.
pub fn fastest(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    timing: &Timing,
    est: &mut Estimator,
) -> Option<Fastest> {
    let nearest = fit(run, gpu, headroom, est);
    from_nearest(run, nearest, gpu, headroom, timing, est)
}

/// `fastest` from the nearest fit that keeps the run's GPUs and sharding (`fit_in_place`): for a
/// file that cannot hold a change to them (a recipe, a run whose `--launch` config is read
/// again, `--num-processes`), as `fit -o` does.
pub fn fastest_in_place(
    run: &RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    timing: &Timing,
    est: &mut Estimator,
) -> Option<Fastest> {
    let nearest = fit_in_place(run, gpu, headroom, est);
    from_nearest(run, nearest, gpu, headroom, timing, est)
}

/// The search from `nearest`, the fit of `run`; `None` when nothing fits.
fn from_nearest(
    run: &RunConfig,
    nearest: FitOutcome,
    gpu: GpuBudget,
    headroom: f64,
    timing: &Timing,
    est: &mut Estimator,
) -> Option<Fastest> {
    let (nearest, nearest_changes) = match nearest {
        FitOutcome::AlreadyFits { .. } => (run.clone(), Vec::new()),
        FitOutcome::Fitted { run, changes, .. } => (*run, changes),
        FitOutcome::Impossible { .. } => return None,
    };
    let seconds =
        |r: &RunConfig, e: &Estimate| step_time(r, e, timing.gpu, timing.keys, timing.eff).seconds;
    let start = est.estimate(&nearest, gpu);
    let nearest_seconds = seconds(&nearest, &start);
    let mut search = Search {
        gpu,
        headroom,
        timing,
        best: nearest.clone(),
        best_est: start,
        best_s: nearest_seconds,
    };
    // one knob at a time, then two at once (a knob that frees memory with one that spends it),
    // while a pass makes the step faster: each accepted move is at least 0.1 % faster
    for _ in 0..4 {
        let single = search.descend(est);
        let paired = search.pairs(est);
        if !single && !paired {
            break;
        }
    }
    search.settle(&nearest, &mut *est);
    let Search {
        best,
        best_est,
        best_s,
        ..
    } = search;
    let changes = changes(&nearest, &best, gpu, timing, est);
    Some(Fastest {
        nearest_changes,
        changes,
        step_time: step_time(&best, &best_est, timing.gpu, timing.keys, timing.eff),
        nearest_seconds,
        speedup: if best_s > 0.0 {
            nearest_seconds / best_s
        } else {
            1.0
        },
        estimate: best_est,
        run: Box::new(best),
        nearest: Box::new(nearest),
    })
}

/// The search's state: the fastest run found so far.
struct Search<'a> {
    gpu: GpuBudget,
    headroom: f64,
    timing: &'a Timing<'a>,
    best: RunConfig,
    best_est: Estimate,
    best_s: f64,
}

impl Search<'_> {
    /// Takes `candidate` when it is valid, fits and is faster; says whether it did.
    fn offer(&mut self, candidate: RunConfig, est: &mut Estimator) -> bool {
        if candidate == self.best || rules::validate(&candidate).is_err() {
            return false;
        }
        let e = est.estimate(&candidate, self.gpu);
        if !fits_with_headroom(&e, self.headroom) {
            return false;
        }
        let t = self.timing;
        let s = step_time(&candidate, &e, t.gpu, t.keys, t.eff).seconds;
        if s < self.best_s * 0.999 {
            (self.best, self.best_est, self.best_s) = (candidate, e, s);
            return true;
        }
        false
    }

    /// The knobs this run may move now: fp8 KV only while the KV cache bounds how many
    /// sequences vLLM decodes at once (the speed it buys: silybench's H100 Qwen3-8B, 327 to
    /// 373 concurrent users; below that bound it only trims the KV reads, for a numerics change).
    fn knobs(&self) -> Vec<Throughput> {
        let kv_bound = self.best_est.vllm.as_ref().is_some_and(|p| {
            p.run_length_sequences < (p.max_num_seqs.min(self.best.generation_rows())) as f64
        });
        Throughput::ALL
            .into_iter()
            .filter(|k| *k != Throughput::KvCacheFp8 || kv_bound || self.best.vllm_kv_fp8)
            .collect()
    }

    /// Every value of every knob, one knob at a time.
    fn descend(&mut self, est: &mut Estimator) -> bool {
        let mut improved = false;
        for knob in self.knobs() {
            for candidate in knob.candidates(&self.best) {
                improved |= self.offer(candidate, est);
            }
        }
        improved
    }

    /// Every value of two knobs at once.
    fn pairs(&mut self, est: &mut Estimator) -> bool {
        let knobs = self.knobs();
        let mut improved = false;
        for (i, a) in knobs.iter().enumerate() {
            for b in &knobs[i + 1..] {
                for first in a.candidates(&self.best) {
                    for both in b.candidates(&first) {
                        improved |= self.offer(both, est);
                    }
                }
            }
        }
        improved
    }
}

/// Each knob that differs between `from` and `to`, applied in turn, with its seconds and bytes:
/// the moves that only make room (alone, they make no step faster) first, each naming the
/// move it makes room for.
fn changes(
    from: &RunConfig,
    to: &RunConfig,
    gpu: GpuBudget,
    timing: &Timing,
    est: &mut Estimator,
) -> Vec<SpeedChange> {
    let time = |r: &RunConfig, est: &mut Estimator| {
        let e = est.estimate(r, gpu);
        (
            step_time(r, &e, timing.gpu, timing.keys, timing.eff).seconds,
            e,
        )
    };
    let base = time(from, est).0;
    let mut order: Vec<(Throughput, f64)> = Throughput::ALL
        .into_iter()
        .filter(|k| k.show(from) != k.show(to))
        .map(|k| (k, base - time(&k.moved(from, to), est).0))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut now = from.clone();
    let mut out: Vec<SpeedChange> = Vec::new();
    for (knob, _) in order {
        let next = knob.moved(&now, to);
        let ((s0, e0), (s1, e1)) = (time(&now, est), time(&next, est));
        out.push(SpeedChange {
            knob,
            key: knob.key(from.stack),
            from: knob.shown(&now, &e0),
            to: knob.shown(&next, &e1),
            with: knob.companions(&now, to),
            seconds_saved: s0 - s1,
            bytes_saved: e0.total_bytes as i64 - e1.total_bytes as i64,
            makes_room_for: None,
            phase_saved: phase_saved(&time(&knob.moved(to, from), est).1, &time(to, est).1),
            note: knob.note(),
        });
        now = next;
    }
    name_the_room(&mut out, time(to, est).0);
    out
}

/// The phase whose memory a move lowers most, and by how much: a move that frees nothing at
/// the step's peak (the generation phase's, say), or nothing until a later move spends it (a
/// smaller micro-batch before checkpointing goes off), still makes room in the run it leads to.
fn phase_saved(before: &Estimate, after: &Estimate) -> Option<PhaseSaving> {
    before
        .phases
        .iter()
        .filter_map(|p| {
            let a = after.phases.iter().find(|q| q.phase == p.phase)?;
            let saved = p.total_bytes.checked_sub(a.total_bytes)?;
            (saved > 0).then_some(PhaseSaving {
                phase: p.phase,
                bytes_saved: saved,
            })
        })
        .max_by_key(|p| p.bytes_saved)
}

/// What a move frees in one phase of the step.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PhaseSaving {
    pub phase: Phase,
    pub bytes_saved: u64,
}

/// Each move that frees memory in the fastest run and saves under `LEAST_GAIN` of its step
/// (`fastest`, the settling's measure: it drops such a move otherwise) is there to make room:
/// it names the later move that saves the most.
fn name_the_room(changes: &mut [SpeedChange], fastest: f64) {
    for i in 0..changes.len() {
        let c = &changes[i];
        let frees = c.phase_saved.is_some() || c.bytes_saved > 0;
        if !frees || c.seconds_saved >= fastest * settle::LEAST_GAIN {
            continue;
        }
        changes[i].makes_room_for = changes[i + 1..]
            .iter()
            .max_by(|a, b| a.seconds_saved.total_cmp(&b.seconds_saved))
            .map(|c| format!("{} = {}", c.key, c.to));
    }
}

/// A key moved together with a change's own (the accumulation with the micro-batch).
#[derive(Debug, Clone, Serialize)]
pub struct KeyChange {
    pub key: &'static str,
    pub from: String,
    pub to: String,
}
