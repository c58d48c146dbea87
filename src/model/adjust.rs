//! Adjusting a knob the way the screen does: a micro-batch change keeps the effective batch.

use super::knobs::{Knob, accumulation_for};
use super::run::RunConfig;

/// Moves `knob` to `value`; with `keep_batch`, a micro-batch change re-derives accumulation so
/// that the effective batch stays `keep_batch` completions.
pub fn apply_knob(run: &mut RunConfig, knob: Knob, value: u64, keep_batch: Option<u64>) {
    knob.set(run, value);
    if let (Knob::MicroBatch, Some(target)) = (knob, keep_batch) {
        run.grad_accum = accumulation_for(target, run.micro_batch, run.gpus).0;
    }
}
