//! When no knob fits: more sharding, vLLM on GPUs of its own, more training GPUs.

use super::lever::{Lever, OFFLOAD_TRADE_OFF};
use super::outcome::*;
use crate::memory::estimate::{Estimator, GpuBudget};
use crate::memory::roles::RoleKind;
use crate::run::rules;
use crate::run::spread::Spread;
use crate::run::{Generation, RunConfig, Stack};

/// The least sharding that fits a run of several training processes, every knob kept: DeepSpeed
/// ZeRO-2, then ZeRO-3, then ZeRO-3 with the optimizer offloaded to CPU (each shards more and
/// communicates more than the one before).
pub(super) fn sharding_that_fits(
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
pub(super) fn hardware_that_fits(
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
    // `vllm_mode = "server"` (from trl 0.18) or the server's flags must exist in the pinned TRL
    if !Lever::VllmServerGpus.exists_in(run) {
        return None;
    }
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
