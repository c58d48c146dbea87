//! The reward functions' time inside a step. TRL scores every completion of the generation batch
//! with each reward function on the host (`GRPOTrainer._calculate_rewards`, trl 0.23: a Python
//! call per function over the process's completions) before the advantages; a reward that runs
//! or benchmarks the generated code, or calls a judge, can take longer than the GPU's phases. The
//! run file cannot say how long a user's function takes: `[grpofit] reward_seconds` gives it,
//! the seconds a completion's rewards take (all functions together), and nothing is charged
//! without it.

use super::TimeKeys;
use crate::run::RunConfig;

/// The seconds a completion's reward functions may take (`[grpofit] reward_seconds`,
/// `calibrate --reward-seconds`): none to a day, past any reward a step can wait on.
pub const REWARD_SECONDS_RANGE: (f64, f64) = (0.0, 86_400.0);

/// Seconds the rewards take in one optimizer step on each process, on average over steps:
/// `reward_seconds` for every completion the process scores. It trains on its micro-batches'
/// rows (as Unsloth raises them) each step, but a generation batch is scored once and trained
/// on `num_iterations` times (trl 1.16.0 `_prepare_inputs`: it generates and scores when
/// `_step % (steps_per_generation * num_iterations) == 0`), so a step scores its rows over
/// `num_iterations`. All processes score in parallel.
pub(super) fn seconds(run: &RunConfig, keys: &TimeKeys) -> f64 {
    let per_completion = keys.reward_seconds.unwrap_or(0.0).max(0.0);
    let trained = run.running_micro_batch().saturating_mul(run.grad_accum) as f64;
    per_completion * trained / run.num_iterations.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    #[test]
    fn each_completion_the_process_trains_on_costs_its_reward_seconds() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch);
        run.micro_batch = 4;
        run.grad_accum = 3;
        let none = TimeKeys::default();
        assert_eq!(seconds(&run, &none), 0.0);
        let keys = TimeKeys {
            reward_seconds: Some(0.5),
            ..TimeKeys::default()
        };
        assert!((seconds(&run, &keys) - 0.5 * 12.0).abs() < 1e-12);
        // a second process scores its own completions at the same time
        run.gpus = 2;
        assert!((seconds(&run, &keys) - 0.5 * 12.0).abs() < 1e-12);
    }

    #[test]
    fn a_generation_trained_on_twice_is_scored_once() {
        let mut run = RunConfig::example(catalog::find("Qwen/Qwen2.5-7B-Instruct").unwrap().arch);
        run.micro_batch = 4;
        run.grad_accum = 3;
        run.num_iterations = 2;
        let keys = TimeKeys {
            reward_seconds: Some(0.5),
            ..TimeKeys::default()
        };
        // 12 rows trained a step, each generation batch scored once for two passes over it
        assert!((seconds(&run, &keys) - 0.5 * 6.0).abs() < 1e-12);
    }
}
