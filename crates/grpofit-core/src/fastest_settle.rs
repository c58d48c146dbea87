//! After `fit --fastest`'s descent: each moved knob brought back as near the nearest fit's value
//! as it can go without a slower step (a share that makes room stops at the first value that
//! fits), fp8 KV kept only for a gain worth a numerics change, and a search whose whole gain
//! rounds to nothing given up for the nearest fit itself.

use super::{Search, Throughput};
use crate::memory::estimate::Estimator;
use crate::run::RunConfig;

/// The least part of a step fp8 KV must save to be taken: a numerics change (sampling drifts
/// from the trained policy) is worth it only for a real gain. A third of the least gain measured
/// where the KV cache bounds concurrency (silybench, one H100, Qwen3-8B, vLLM: 13,322 → 15,103
/// output tokens/s decode-heavy, +13 %; 2,815 → 3,653 balanced, +30 %), so a gain the model
/// predicts well below what fp8 was ever measured to give is not taken on the model's word.
pub const FP8_KV_MIN_GAIN: f64 = 0.05;

/// The least part of a step a move must save to count as a speed move: the speed-up is printed
/// to two places, so a search gaining under 0.5 % prints "1.00x faster", which is none. A move
/// saving less is kept only where it makes room, and said to.
pub(super) const LEAST_GAIN: f64 = 0.005;

/// How far the knob's value in `run` is from its value in `nearest`, on the knob's own scale:
/// the micro-batch by its ratio (a doubling is one), the share in hundredths, an on/off or a mode
/// by whether it differs.
fn distance(knob: Throughput, run: &RunConfig, nearest: &RunConfig) -> f64 {
    match knob {
        Throughput::MicroBatch => {
            let mb = |r: &RunConfig| (r.micro_batch.max(1) as f64).log2();
            (mb(run) - mb(nearest)).abs()
        }
        Throughput::VllmShare => {
            let share = |r: &RunConfig| crate::run::knobs::Knob::VllmShare.get(r).unwrap_or(0);
            share(run).abs_diff(share(nearest)) as f64
        }
        _ => f64::from(u8::from(knob.show(run) != knob.show(nearest))),
    }
}

impl Search<'_> {
    /// Brings each knob back towards `nearest` while the step stays as fast (within
    /// `LEAST_GAIN`; within `FP8_KV_MIN_GAIN` for dropping fp8 KV), then gives up a search whose
    /// gain rounds to none.
    pub(super) fn settle(&mut self, nearest: &RunConfig, est: &mut Estimator) {
        for knob in Throughput::ALL {
            let now = distance(knob, &self.best, nearest);
            if now == 0.0 {
                continue;
            }
            let mut values = knob.candidates(&self.best);
            values.retain(|c| distance(knob, c, nearest) < now);
            values
                .sort_by(|a, b| distance(knob, a, nearest).total_cmp(&distance(knob, b, nearest)));
            let gain = if knob == Throughput::KvCacheFp8 {
                FP8_KV_MIN_GAIN
            } else {
                LEAST_GAIN
            };
            let slack = 1.0 / (1.0 - gain);
            for candidate in values {
                if self.take_within(candidate, slack, est) {
                    break;
                }
            }
        }
        let nearest_s = self.seconds_of(nearest, est);
        if self.best_s > nearest_s * (1.0 - LEAST_GAIN) {
            self.best_est = est.estimate(nearest, self.gpu);
            (self.best, self.best_s) = (nearest.clone(), nearest_s);
        }
    }

    /// Takes `candidate` when it is valid, fits, and its step is at most `slack` times the best.
    fn take_within(&mut self, candidate: RunConfig, slack: f64, est: &mut Estimator) -> bool {
        if crate::run::rules::validate(&candidate).is_err() {
            return false;
        }
        let e = est.estimate(&candidate, self.gpu);
        if !crate::fit::fits_with_headroom(&e, self.headroom) {
            return false;
        }
        let t = self.timing;
        let s = crate::time::step_time(&candidate, &e, t.gpu, t.keys, t.eff).seconds;
        if s > self.best_s * slack {
            return false;
        }
        (self.best, self.best_est, self.best_s) = (candidate, e, s);
        true
    }

    fn seconds_of(&self, run: &RunConfig, est: &mut Estimator) -> f64 {
        let e = est.estimate(run, self.gpu);
        let t = self.timing;
        crate::time::step_time(run, &e, t.gpu, t.keys, t.eff).seconds
    }
}
