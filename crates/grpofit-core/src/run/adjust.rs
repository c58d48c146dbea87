//! Adjusting a knob the way the screen does: with the effective batch locked, the micro-batch
//! and the accumulation move together so that micro-batch x accumulation x GPUs stays exact.

use crate::run::RunConfig;
use crate::run::knobs::{Knob, accumulation_for, step_along};
use crate::run::rules;

/// The values `knob` may take while the effective batch stays exactly `target` completions in
/// `run`, ascending: for the micro-batch and the accumulation, the divisors of `target /
/// processes` whose partner (the accumulation, the micro-batch) is in its range too; for the
/// GPUs, the counts per node that leave a whole accumulation in its range. `None` for the other
/// knobs: the effective batch does not bind them.
pub fn exact_values(knob: Knob, target: u64, run: &RunConfig) -> Option<Vec<u64>> {
    match knob {
        Knob::MicroBatch => Some(partner_divisors(
            knob,
            Knob::GradAccum,
            target,
            run.processes(),
        )),
        Knob::GradAccum => Some(partner_divisors(
            knob,
            Knob::MicroBatch,
            target,
            run.processes(),
        )),
        Knob::Gpus => {
            let per_node = run.micro_batch.max(1) * run.spread.nodes.max(1);
            let mut counts = partner_divisors(Knob::Gpus, Knob::GradAccum, target, per_node);
            counts.retain(|&g| g <= Knob::Gpus.range().1);
            Some(counts)
        }
        _ => None,
    }
}

/// The values of `knob` that divide `target / per_unit`, whose quotient is in `partner`'s range.
fn partner_divisors(knob: Knob, partner: Knob, target: u64, per_unit: u64) -> Vec<u64> {
    let per_unit = per_unit.max(1);
    if target == 0 || !target.is_multiple_of(per_unit) {
        return Vec::new();
    }
    let whole = target / per_unit;
    let ((lo, hi), (plo, phi)) = (knob.range(), partner.range());
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d * d <= whole {
        if whole.is_multiple_of(d) {
            small.push(d);
            if d * d != whole {
                large.push(whole / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small.retain(|&v| (lo..=hi).contains(&v) && (plo..=phi).contains(&(whole / v)));
    small
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
    let values = keep_batch.and_then(|t| exact_values(knob, t, run));
    let next = |v: u64| match &values {
        Some(values) => step_along(values, v, up, false),
        None => knob.next(v, up, false),
    };
    let allowed = |v: u64| allowed(run, knob, v, keep_batch);
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

/// Why `knob` does not step from its value in `run` though its ladder goes on that way: the
/// rule its next rung breaks, in words (TRL's whole groups: num_generations must divide the
/// generation batch; the token cap; a range). `None` when the ladder ends there or the rung is
/// allowed.
pub fn refused_step(
    run: &RunConfig,
    knob: Knob,
    up: bool,
    keep_batch: Option<u64>,
) -> Option<String> {
    let current = knob.get(run)?;
    let next = match keep_batch.and_then(|t| exact_values(knob, t, run)) {
        Some(values) => step_along(&values, current, up, false),
        None => knob.next(current, up, false),
    };
    if next == current {
        return None;
    }
    let mut trial = run.clone();
    apply_knob(&mut trial, knob, next, keep_batch);
    let broken = rules::validate(&trial).err().or_else(|| {
        rules::whole_groups(&trial)
            .err()
            .filter(|_| rules::whole_groups(run).is_ok())
    })?;
    Some(format!("{} refused: {}", knob.show(next), broken.message))
}

/// Whether the screen may move `knob` of `run` to `value`: the rules hold after
/// ([`rules::validate`]), and the groups stay whole ([`rules::whole_groups`]) unless they were
/// already split (then any rung that the rules allow, so the knob can leave the split).
pub fn allowed(run: &RunConfig, knob: Knob, value: u64, keep_batch: Option<u64>) -> bool {
    let mut trial = run.clone();
    apply_knob(&mut trial, knob, value, keep_batch);
    rules::validate(&trial).is_ok()
        && (rules::whole_groups(&trial).is_ok() || rules::whole_groups(run).is_err())
}

/// Of `candidates`, the value of `knob` nearest `value` (on a log scale) that [`allowed`]
/// takes; `None` when none is.
pub fn nearest_allowed(
    run: &RunConfig,
    knob: Knob,
    value: u64,
    candidates: &[u64],
    keep_batch: Option<u64>,
) -> Option<u64> {
    let distance = |v: u64| ((v.max(1) as f64).ln() - (value.max(1) as f64).ln()).abs();
    candidates
        .iter()
        .copied()
        .filter(|&v| allowed(run, knob, v, keep_batch))
        .min_by(|a, b| distance(*a).total_cmp(&distance(*b)))
}

/// Moves `knob` to `value`; with `keep_batch`, a micro-batch change re-derives the accumulation
/// and an accumulation change the micro-batch, and a change of GPUs the accumulation, so that
/// the effective batch stays `keep_batch` completions (exactly when `value` is one of
/// [`exact_values`]).
pub fn apply_knob(run: &mut RunConfig, knob: Knob, value: u64, keep_batch: Option<u64>) {
    knob.set(run, value);
    match (knob, keep_batch) {
        (Knob::MicroBatch | Knob::Gpus, Some(target)) => {
            run.grad_accum = accumulation_for(target, run.micro_batch, run.processes()).0;
        }
        (Knob::GradAccum, Some(target)) => {
            run.micro_batch = accumulation_for(target, run.grad_accum, run.processes()).0;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_on(gpus: u64) -> RunConfig {
        let arch = crate::arch::catalog::find("Qwen/Qwen2.5-1.5B-Instruct")
            .expect("catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.gpus = gpus;
        run
    }

    #[test]
    fn exact_values_are_the_divisors_per_gpu() {
        let one = run_on(1);
        assert_eq!(
            exact_values(Knob::MicroBatch, 8, &one),
            Some(vec![1, 2, 4, 8])
        );
        assert_eq!(
            exact_values(Knob::GradAccum, 36, &one),
            Some(vec![1, 2, 3, 4, 6, 9, 12, 18, 36])
        );
        assert_eq!(
            exact_values(Knob::MicroBatch, 64, &run_on(2)),
            Some(vec![1, 2, 4, 8, 16, 32])
        );
        assert_eq!(exact_values(Knob::LoraRank, 8, &one), None);
        // the micro-batch stops at 4096, so the accumulation cannot go below 2 for 8192
        let a = exact_values(Knob::GradAccum, 8192, &one).unwrap_or_default();
        assert_eq!(a.first(), Some(&2));
        // nodes count: 2 nodes of 2 GPUs are 4 processes
        let mut two_nodes = run_on(2);
        two_nodes.spread.nodes = 2;
        assert_eq!(
            exact_values(Knob::MicroBatch, 16, &two_nodes),
            Some(vec![1, 2, 4])
        );
    }

    #[test]
    fn gpus_keep_the_effective_batch_by_moving_the_accumulation() {
        // open-r1: 16 per device x 8 accumulation x 7 GPUs = 896
        let mut run = run_on(7);
        (run.micro_batch, run.grad_accum) = (16, 8);
        assert_eq!(
            exact_values(Knob::Gpus, 896, &run),
            Some(vec![1, 2, 4, 7, 8, 14, 28, 56])
        );
        apply_knob(&mut run, Knob::Gpus, 8, Some(896));
        assert_eq!((run.gpus, run.grad_accum), (8, 7));
        assert_eq!(run.effective_batch(), 896);
        // locked, the step goes to the next count that keeps it: 8 -> 14, 7 -> 4
        assert_eq!(
            step_knob(&run, Knob::Gpus, true, false, Some(896)),
            Some(14)
        );
        run.gpus = 7;
        assert_eq!(
            step_knob(&run, Knob::Gpus, false, false, Some(896)),
            Some(4)
        );
        // free, along the ladder
        assert_eq!(step_knob(&run, Knob::Gpus, true, false, None), Some(8));
    }

    #[test]
    fn unlocked_steps_keep_unsloths_groups_whole() {
        let mut run = run_on(1);
        run.stack = crate::run::Stack::Unsloth;
        (run.micro_batch, run.grad_accum, run.num_generations) = (2, 2, 4);
        assert!(rules::whole_groups(&run).is_ok());
        // micro-batch 3 x 2 = 6 completions: 1.5 prompts of 4; stepped over
        assert_eq!(
            step_knob(&run, Knob::MicroBatch, true, false, None),
            Some(4)
        );
        // generations: 3 does not divide 4 either
        assert_eq!(
            step_knob(&run, Knob::Generations, false, false, None),
            Some(2)
        );
        let ladder = Knob::Generations.ladder();
        assert_eq!(
            nearest_allowed(&run, Knob::Generations, 48, ladder, None),
            Some(4)
        );
    }

    #[test]
    fn steps_skip_what_the_rules_refuse() {
        let arch = crate::arch::catalog::find("Qwen/Qwen2.5-1.5B-Instruct")
            .expect("catalog")
            .arch;
        let mut run = RunConfig::example(arch);
        run.stack = crate::run::Stack::Trl;
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
