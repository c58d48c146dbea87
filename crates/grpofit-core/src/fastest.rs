//! `fit --fastest`: among the runs that fit with the headroom, the one with the least predicted
//! seconds per optimizer step, reached from the nearest fit by moving only what changes speed:
//! the vLLM share, the micro-batch against the accumulation (the effective batch kept),
//! checkpointing and its offload, vLLM's KV cache in fp8 (a numerics change, said), vLLM's
//! sleep, and vLLM's `max_num_seqs` and `max_num_batched_tokens` where the trainer passes them
//! on (Unsloth's `load_vllm`; TRL sizes its colocated vLLM itself). What the run learns (generations, effective batch, lengths, model, rank, learning
//! rate) is never touched. A descent over one knob at a time, repeated while a step gets faster.

use crate::fit::{FitOutcome, fit, fit_in_place, fits_with_headroom};
use crate::hardware::GpuSpeed;
use crate::memory::estimate::{Estimate, Estimator, GpuBudget};
use crate::run::adjust::exact_values;
use crate::run::knobs::{Knob, accumulation_for};
use crate::run::{Checkpointing, Generation, RunConfig, Stack, rules};
use crate::time::{Efficiencies, StepTime, TimeKeys, step_time};
use serde::Serialize;

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
        match (self, stack) {
            (Throughput::MicroBatch, _) => "per_device_train_batch_size",
            (Throughput::Checkpointing, Stack::Unsloth) => "use_gradient_checkpointing",
            (Throughput::Checkpointing, Stack::Trl) => "gradient_checkpointing",
            (Throughput::VllmShare, s) => Knob::VllmShare.key(s).1,
            (Throughput::KvCacheFp8, _) => "float8_kv_cache",
            (Throughput::Sleep, Stack::Unsloth) => "UNSLOTH_VLLM_STANDBY",
            (Throughput::Sleep, Stack::Trl) => "vllm_enable_sleep_mode",
            (Throughput::MaxNumSeqs, _) => "max_num_seqs",
            (Throughput::MaxNumBatchedTokens, _) => "max_num_batched_tokens",
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

    /// The knob's value in `run`, as the run file writes it.
    fn show(self, run: &RunConfig) -> String {
        match self {
            Throughput::MicroBatch => {
                format!("{} x {} accumulation", run.micro_batch, run.grad_accum)
            }
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

/// One knob moved from the nearest fit, with what it did, applied after the ones before it.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedChange {
    pub knob: Throughput,
    pub key: &'static str,
    pub from: String,
    pub to: String,
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
    let nearest = match nearest {
        FitOutcome::AlreadyFits { .. } => run.clone(),
        FitOutcome::Fitted { run, .. } => *run,
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
    let Search {
        best,
        best_est,
        best_s,
        ..
    } = search;
    let changes = changes(&nearest, &best, gpu, timing, est);
    Some(Fastest {
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
            p.full_length_sequences < (p.max_num_seqs.min(self.best.generation_rows())) as f64
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

/// Each knob that differs between `from` and `to`, applied in turn, with its seconds and bytes.
fn changes(
    from: &RunConfig,
    to: &RunConfig,
    gpu: GpuBudget,
    timing: &Timing,
    est: &mut Estimator,
) -> Vec<SpeedChange> {
    let mut now = from.clone();
    let mut out = Vec::new();
    for knob in Throughput::ALL {
        if knob.show(&now) == knob.show(to) {
            continue;
        }
        let mut next = now.clone();
        match knob {
            Throughput::MicroBatch => {
                (next.micro_batch, next.grad_accum) = (to.micro_batch, to.grad_accum)
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
        let (a, b) = (est.estimate(&now, gpu), est.estimate(&next, gpu));
        let (was, will) = (knob.shown(&now, &a), knob.shown(&next, &b));
        let time = |r: &RunConfig, e: &Estimate| {
            step_time(r, e, timing.gpu, timing.keys, timing.eff).seconds
        };
        out.push(SpeedChange {
            knob,
            key: knob.key(from.stack),
            from: was,
            to: will,
            seconds_saved: time(&now, &a) - time(&next, &b),
            bytes_saved: a.total_bytes as i64 - b.total_bytes as i64,
            note: knob.note(),
        });
        now = next;
    }
    out
}
