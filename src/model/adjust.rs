//! Adjusting a knob the way the screen does: with the effective batch locked, the micro-batch
//! and the accumulation move together so that micro-batch x accumulation x GPUs stays exact.

use super::knobs::{Knob, accumulation_for, step_along};
use super::rules;
use super::run::RunConfig;

/// The values `knob` may take while the effective batch stays exactly `target` completions on
/// `gpus` GPUs, ascending: for the micro-batch and the accumulation, the divisors of
/// `target / gpus` whose partner (the accumulation, the micro-batch) is in its range too.
/// `None` for the other knobs: the effective batch does not bind them.
pub fn exact_values(knob: Knob, target: u64, gpus: u64) -> Option<Vec<u64>> {
    let partner = match knob {
        Knob::MicroBatch => Knob::GradAccum,
        Knob::GradAccum => Knob::MicroBatch,
        _ => return None,
    };
    let gpus = gpus.max(1);
    if target == 0 || target % gpus != 0 {
        return Some(Vec::new());
    }
    let per_gpu = target / gpus;
    let ((lo, hi), (plo, phi)) = (knob.range(), partner.range());
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d * d <= per_gpu {
        if per_gpu % d == 0 {
            small.push(d);
            if d * d != per_gpu {
                large.push(per_gpu / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small.retain(|&v| (lo..=hi).contains(&v) && (plo..=phi).contains(&(per_gpu / v)));
    Some(small)
}

/// One step (three with `coarse`) of `knob` from its value in `run`: along the values that keep
/// the effective batch at `keep_batch` when it is given and binds the knob, else along the
/// knob's ladder; rungs the rules refuse (`rules::validate`: TRL's group divisibility, the token
/// cap) are stepped over. The value itself when no rung that way is allowed. `None` when the
/// knob does not apply to `run` (no vLLM on this GPU).
pub fn step_knob(
    run: &RunConfig,
    knob: Knob,
    up: bool,
    coarse: bool,
    keep_batch: Option<u64>,
) -> Option<u64> {
    let current = knob.get(run)?;
    let values = keep_batch.and_then(|t| exact_values(knob, t, run.gpus));
    let next = |v: u64| match &values {
        Some(values) => step_along(values, v, up, false),
        None => knob.next(v, up, false),
    };
    let allowed = |v: u64| {
        let mut trial = run.clone();
        apply_knob(&mut trial, knob, v, keep_batch);
        rules::validate(&trial).is_ok()
    };
    let (mut at, mut chosen, mut steps) = (current, current, 0);
    while steps < if coarse { 3 } else { 1 } {
        let n = next(at);
        if n == at {
            break;
        }
        at = n;
        if allowed(at) {
            chosen = at;
            steps += 1;
        }
    }
    Some(chosen)
}

/// Moves `knob` to `value`; with `keep_batch`, a micro-batch change re-derives the accumulation
/// and an accumulation change the micro-batch, so that the effective batch stays `keep_batch`
/// completions (exactly when `value` is one of [`exact_values`]).
pub fn apply_knob(run: &mut RunConfig, knob: Knob, value: u64, keep_batch: Option<u64>) {
    knob.set(run, value);
    match (knob, keep_batch) {
        (Knob::MicroBatch, Some(target)) => {
            run.grad_accum = accumulation_for(target, run.micro_batch, run.gpus).0;
        }
        (Knob::GradAccum, Some(target)) => {
            run.micro_batch = accumulation_for(target, run.grad_accum, run.gpus).0;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values_are_the_divisors_per_gpu() {
        assert_eq!(exact_values(Knob::MicroBatch, 8, 1), Some(vec![1, 2, 4, 8]));
        assert_eq!(
            exact_values(Knob::GradAccum, 36, 1),
            Some(vec![1, 2, 3, 4, 6, 9, 12, 18, 36])
        );
        assert_eq!(
            exact_values(Knob::MicroBatch, 64, 2),
            Some(vec![1, 2, 4, 8, 16, 32])
        );
        assert_eq!(exact_values(Knob::LoraRank, 8, 1), None);
        // the micro-batch stops at 4096, so the accumulation cannot go below 2 for 8192
        let a = exact_values(Knob::GradAccum, 8192, 1).unwrap_or_default();
        assert_eq!(a.first(), Some(&2));
    }

    #[test]
    fn steps_skip_what_the_rules_refuse() {
        let arch = crate::model::catalog::find("Qwen/Qwen2.5-1.5B-Instruct")
            .expect("catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.stack = crate::model::run::Stack::Trl;
        (run.micro_batch, run.grad_accum, run.num_generations) = (8, 1, 4);
        // TRL: the generation batch of 8 takes groups of 2, 4 or 8 only
        assert_eq!(
            step_knob(&run, Knob::Generations, true, false, None),
            Some(8)
        );
        assert_eq!(
            step_knob(&run, Knob::Generations, false, false, None),
            Some(2)
        );
        run.micro_batch = 4;
        assert_eq!(
            step_knob(&run, Knob::Generations, true, false, None),
            Some(4)
        );
    }
}
