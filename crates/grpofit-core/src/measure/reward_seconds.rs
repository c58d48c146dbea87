//! `[grpofit] reward_seconds` learned from a run log: the reward functions' seconds TRL timed in
//! each step (`reward_time`), the median over the steps that timed them, over the completions
//! each process scored in such a step ([`completions_timed`]).

use crate::measure::measured::RunLog;
use crate::run::RunConfig;
use serde::Serialize;

/// The completions each process scores in a step whose rewards TRL timed: TRL generates and
/// scores one generation batch (`RunConfig::generation_rows`: the micro-batch's rows x
/// `steps_per_generation`) every `steps_per_generation x num_iterations` micro-steps (trl
/// 1.15.0 `_prepare_inputs`), so a step scores one batch, or as many as its micro-steps start
/// when they start more than one. With the defaults, the micro-batch's rows x the gradient
/// accumulation, what the estimate's `rewards` phase charges a step (`time::rewards`).
pub fn completions_timed(run: &RunConfig) -> u64 {
    let every = run
        .steps_per_generation()
        .saturating_mul(run.num_iterations.max(1));
    let batches = (run.grad_accum / every).max(1);
    run.generation_rows().saturating_mul(batches)
}

/// What a log teaches of `reward_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LearnedRewards {
    /// seconds a completion's reward functions take: `step_seconds` / `completions`
    pub per_completion: f64,
    /// the median over the steps that timed their reward functions, the first left out when
    /// there are others (as the step's seconds: `step_time::measured_seconds`)
    pub step_seconds: f64,
    /// the steps it is taken over
    pub steps: usize,
    /// the completions each process scored in a timed step ([`completions_timed`])
    pub completions: u64,
}

impl LearnedRewards {
    /// `per_completion` as `calibrate` writes it ([`three_figures`]).
    pub fn reward_seconds(&self) -> f64 {
        three_figures(self.per_completion)
    }
}

/// Seconds a completion to three significant figures: what `check` says to set and `calibrate`
/// writes, from a log or from Python's `grpofit.time_rewards` (a median over a few steps or
/// calls holds no more); 0 for nothing or a value that is no number.
pub fn three_figures(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 0.0;
    }
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

/// Why a log teaches nothing of `reward_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum RewardsNotLearned {
    #[error(
        "no step line times a reward function: TRL times them from 0.16 (`profiling_context`, not before), and the callback names them from this release of grpofit (`grpofit callback` writes it); steps without are left out"
    )]
    NotTimed,
    #[error(
        "the rewards timed are reward models only: their forward is the `rewards` phase's GPU time, timed with the efficiencies, not `reward_seconds`"
    )]
    ModelsOnly,
    #[error("the run scores no completion in a step")]
    NoCompletions,
}

/// `reward_seconds` from `log`: the median over its steps of the reward functions' seconds
/// (reward models left out: grpofit times their forward itself), over the `completions` each
/// process scores in a step. Steps whose line times no reward function are left out: with
/// `num_iterations > 1` (or `steps_per_generation` past the accumulation) the steps between
/// two scorings score nothing, and the scoring step's seconds over the completions it scored
/// is already per completion, the same figure as a run that scores every step (check's
/// `rewards` line, set against the prediction's average a step, takes them per cycle instead:
/// `median::per_step_of`).
pub fn learn_rewards(log: &RunLog, completions: u64) -> Result<LearnedRewards, RewardsNotLearned> {
    let timed = crate::measure::median::median_of(log, |s| s.rewards?.functions);
    let Some((step_seconds, steps)) = timed else {
        return Err(if log.steps.iter().any(|s| s.rewards.is_some()) {
            RewardsNotLearned::ModelsOnly
        } else {
            RewardsNotLearned::NotTimed
        });
    };
    if completions == 0 {
        return Err(RewardsNotLearned::NoCompletions);
    }
    Ok(LearnedRewards {
        per_completion: step_seconds / completions as f64,
        step_seconds,
        steps,
        completions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    #[test]
    fn a_timed_step_scores_one_generation_batch_or_every_batch_it_starts() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch);
        run.micro_batch = 4;
        run.grad_accum = 4;
        run.num_generations = 4;
        // the defaults: one batch of the step's 4 micro-batches
        assert_eq!(completions_timed(&run), 16);
        // a batch of two steps' micro-batches, scored in every other step
        run.steps_per_generation = Some(8);
        assert_eq!(completions_timed(&run), 32);
        // a batch of one micro-batch, reused twice: two batches a step
        run.steps_per_generation = Some(1);
        run.num_iterations = 2;
        assert_eq!(completions_timed(&run), 8);
    }
    use crate::measure::measured::parse_log;
    use crate::measure::reward_time::tests::step;
    use serde_json::{Value, json};

    #[test]
    fn the_median_over_timed_steps_over_the_completions_scored() {
        let f = |x: f64| json!({"accuracy_reward": x, "vLLM.generate": 5.0});
        let kinds = json!({"accuracy_reward": "function"});
        let text = [
            step(1, f(30.0), kinds.clone()),
            step(2, f(8.0), kinds.clone()),
            step(3, json!({"vLLM.generate": 5.0}), Value::Null),
            step(4, f(10.0), kinds.clone()),
            step(5, f(12.0), kinds.clone()),
        ]
        .join("\n");
        let log = parse_log(&text, "t").unwrap();
        let l = learn_rewards(&log, 16).unwrap();
        // the first left out (it warms up), step 3 untimed
        assert_eq!((l.step_seconds, l.steps, l.completions), (10.0, 3, 16));
        assert!((l.per_completion - 10.0 / 16.0).abs() < 1e-12);
        assert_eq!(l.reward_seconds(), 0.625);
        let small = LearnedRewards {
            per_completion: 0.000123456,
            ..l
        };
        assert_eq!(small.reward_seconds(), 0.000123);
        assert_eq!(
            learn_rewards(&log, 0),
            Err(RewardsNotLearned::NoCompletions)
        );
        let models = step(1, json!({"RM": 1.0}), json!({"RM": "model"}));
        let log = parse_log(&models, "t").unwrap();
        assert_eq!(learn_rewards(&log, 8), Err(RewardsNotLearned::ModelsOnly));
        let untimed = step(1, json!({"accuracy_reward": 1.0}), Value::Null);
        let log = parse_log(&untimed, "t").unwrap();
        assert_eq!(learn_rewards(&log, 8), Err(RewardsNotLearned::NotTimed));
    }

    /// The callback on the real trainers (calibration/reward-timings: two CPU steps of each
    /// release with a sync function sleeping 0.05 s, an async one 0.08 s from 1.0, a model).
    #[test]
    fn the_real_trainers_step_lines_give_the_functions_apart_from_the_model() {
        for (release, text, has_async) in [
            (
                "0.16.1",
                include_str!("../../../../calibration/reward-timings/trl-0.16.1.jsonl"),
                false,
            ),
            (
                "0.23.0",
                include_str!("../../../../calibration/reward-timings/trl-0.23.0.jsonl"),
                false,
            ),
            (
                "1.0.0",
                include_str!("../../../../calibration/reward-timings/trl-1.0.0.jsonl"),
                true,
            ),
            (
                "1.16.0",
                include_str!("../../../../calibration/reward-timings/trl-1.16.0.jsonl"),
                true,
            ),
        ] {
            let log = parse_log(text, release).unwrap();
            assert_eq!(log.steps.len(), 2, "{release}");
            for s in &log.steps {
                let r = s.rewards.expect(release);
                let functions = r.functions.expect(release);
                let least = if has_async { 0.05 + 0.08 } else { 0.05 };
                assert!(
                    (least..least + 0.05).contains(&functions),
                    "{release}: {functions}"
                );
                assert!(r.models.is_some_and(|m| m > 0.0), "{release}");
            }
            let l = learn_rewards(&log, 4).expect(release);
            assert_eq!(l.steps, 1, "the first step left out");
        }
    }
}
