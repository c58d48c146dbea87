//! The strongest levers: for each knob, what one step down saves and what it costs.

use super::estimate::{Estimator, GpuBudget};
use super::knobs::{Knob, accumulation_for};
use super::run::RunConfig;

#[derive(Debug, Clone, PartialEq)]
pub struct Lever {
    pub knob: Knob,
    pub from: u64,
    pub to: u64,
    /// total bytes saved (negative: the step down costs memory)
    pub bytes_saved: i64,
    pub trade_off: &'static str,
}

/// Moves `knob` to `value`; with `keep_batch`, a micro-batch change re-derives accumulation so
/// that the effective batch stays `keep_batch` completions.
pub fn apply(run: &mut RunConfig, knob: Knob, value: u64, keep_batch: Option<u64>) {
    knob.set(run, value);
    if let (Knob::MicroBatch, Some(target)) = (knob, keep_batch) {
        run.grad_accum = accumulation_for(target, run.micro_batch, run.gpus).0;
    }
}

/// Every knob's one-step-down lever, largest saving first.
pub fn levers(
    run: &RunConfig,
    gpu: GpuBudget,
    keep_batch: Option<u64>,
    est: &mut Estimator,
) -> Vec<Lever> {
    let base = est.estimate(run, gpu).total_bytes as i64;
    let mut out: Vec<Lever> = Knob::ALL
        .iter()
        .filter_map(|&knob| {
            let from = knob.get(run)?;
            let to = knob.next(from, false, false);
            if to == from {
                return None;
            }
            let mut lower = run.clone();
            apply(&mut lower, knob, to, keep_batch);
            let total = est.estimate(&lower, gpu).total_bytes as i64;
            Some(Lever {
                knob,
                from,
                to,
                bytes_saved: base - total,
                trade_off: knob.trade_off(),
            })
        })
        .collect();
    out.sort_by_key(|l| std::cmp::Reverse(l.bytes_saved));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalog;
    use crate::model::run::{Generation, Stack};

    #[test]
    fn levers_of_the_seed_scenario_are_sorted_and_priced() {
        let mut run = RunConfig::example(catalog::find("google/gemma-3-1b-it").unwrap().arch);
        run.stack = Stack::Unsloth;
        run.generation = Generation::ColocatedVllm { share: 0.6 };
        let gpu = GpuBudget {
            capacity: (22.03 * (1u64 << 30) as f64) as u64,
            used_by_others: 0,
        };
        let levers = levers(&run, gpu, Some(16), &mut Estimator::new());
        assert!(
            levers
                .windows(2)
                .all(|w| w[0].bytes_saved >= w[1].bytes_saved),
            "{levers:?}"
        );
        let share = levers.iter().find(|l| l.knob == Knob::VllmShare).unwrap();
        // 5 % of the free 20.7 GiB
        assert!(
            (share.bytes_saved - 1_109_551_114).abs() < 50 << 20,
            "{share:?}"
        );
        let accum = levers.iter().find(|l| l.knob == Knob::GradAccum).unwrap();
        assert_eq!(accum.bytes_saved, 0);
    }
}
