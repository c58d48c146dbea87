//! The step's time, predicted against the seconds the callback measured between
//! `on_step_begin` and `on_step_end` (one optimizer step: generation, scoring and every
//! micro-batch's training inside it).

use crate::hardware;
use crate::measure::measured::RunLog;
use crate::measure::median::{Missing, per_step_of};
pub use crate::measure::predicted_time::{OutOfRange, PredictedTime};
use crate::measure::reward_seconds::{self, LearnedRewards};
use crate::time::{Efficiencies, StepTime};
use serde::Serialize;

/// What one run log teaches of the step's time: the measured median against the step time
/// `grpofit run` predicted, and the efficiencies that make the prediction meet it.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSample {
    pub measured_seconds: f64,
    /// step lines the median is taken over
    pub steps: u64,
    pub predicted_seconds: f64,
    /// the generation's measured and predicted seconds, where TRL timed it (`trl_timings`)
    pub generation: Option<(f64, f64)>,
    /// the efficiencies learned: those the prediction used, scaled by measured / predicted
    /// ([`learn_time`])
    pub efficiencies: Efficiencies,
}

/// Why a log teaches nothing of the step's time (its memory may still be learned).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimeNotLearned {
    #[error(
        "no predicted step time: the log has no `prediction` line with `step_time` (written by `grpofit run` when it can time the step)"
    )]
    NoPrediction,
    #[error("no step line carries its `seconds`")]
    NoSeconds,
    #[error(
        "the step was timed on {timed_on}, the log ran on {device}: nothing learned for either"
    )]
    OtherCard { timed_on: String, device: String },
    #[error(
        "measured {measured:.2} s a step, no more than the {fixed:.2} s of it no efficiency sets (the link, vLLM's host work, rewards, saves): nothing to scale"
    )]
    BelowFixed { measured: f64, fixed: f64 },
    #[error(
        "measured {measured:.2} s a step against {predicted:.2} s predicted: `{key}` would be {value:.3}, outside {expected}; the prediction misses something the efficiencies cannot carry (`[grpofit] mean_completion_length`?)"
    )]
    OutOfRange {
        measured: f64,
        predicted: f64,
        key: &'static str,
        value: f64,
        expected: &'static str,
    },
}

/// The step time learned from `log`: its median step seconds against its prediction. Where
/// TRL timed the generation (`trl_timings`), the decode bandwidth is scaled by the generation's
/// measured / predicted seconds and the matmul rate and dispatch by the rest of the step's
/// (generation is mostly decode traffic, the rest mostly matmuls: an approximation, as each
/// phase takes a little of the other's efficiency); else all three by the whole step's.
pub fn learn_time(log: &RunLog) -> Result<TimeSample, TimeNotLearned> {
    let predicted = log
        .prediction
        .as_ref()
        .and_then(|p| p.step_time.as_ref())
        .ok_or(TimeNotLearned::NoPrediction)?;
    let (whole, steps) = measured_seconds(log).ok_or(TimeNotLearned::NoSeconds)?;
    if let Some(device) = log.device() {
        let card = hardware::lookup(device).map(|c| c.name);
        if card.is_some_and(|c| c != predicted.gpu) {
            return Err(TimeNotLearned::OtherCard {
                timed_on: predicted.gpu.clone(),
                device: device.to_string(),
            });
        }
    }
    let used = predicted.efficiencies;
    // the step is s x scaled + fixed for efficiencies `used.slower_by(s)`: the fixed terms
    // (the link, vLLM's host work, rewards, saves) are taken as predicted
    let fixed = predicted.seconds - predicted.scaled;
    let (measured, fixed) = without_reward_functions(log, predicted, whole, fixed);
    let scale = |measured: f64, fixed: f64, scaled: f64| {
        (scaled > 0.0 && measured > fixed).then(|| (measured - fixed) / scaled)
    };
    let generation = predicted
        .generation
        .zip(generation_per_step(log))
        .filter(|&((p, _), m)| m > 0.0 && p > 0.0 && measured > m && predicted.seconds > p);
    let split = generation.and_then(|((p, p_scaled), m)| {
        let on_generation = scale(m, p - p_scaled, p_scaled)?;
        let rest = scale(
            measured - m,
            fixed - (p - p_scaled),
            predicted.scaled - p_scaled,
        )?;
        Some((on_generation, rest))
    });
    let efficiencies = match (split, scale(measured, fixed, predicted.scaled)) {
        (Some((on_generation, rest)), _) => Efficiencies {
            decode_bandwidth: used.decode_bandwidth / on_generation,
            ..used.slower_by(rest)
        },
        (None, Some(s)) => used.slower_by(s),
        (None, None) => {
            return Err(TimeNotLearned::BelowFixed { measured, fixed });
        }
    };
    let generation = generation.map(|((p, _), m)| (m, p));
    if let Some((key, value, expected)) = efficiencies.out_of_range() {
        return Err(TimeNotLearned::OutOfRange {
            measured: whole,
            predicted: predicted.seconds,
            key,
            value,
            expected,
        });
    }
    Ok(TimeSample {
        measured_seconds: whole,
        steps: steps as u64,
        predicted_seconds: predicted.seconds,
        generation,
        efficiencies,
    })
}

/// The measured step and the terms no efficiency sets, both without the reward functions where
/// TRL timed them (`reward_time`) and the prediction says what it charged them: efficiencies
/// learned from a step whose rewards were not predicted would otherwise carry them, and carry
/// them twice once `calibrate` writes `reward_seconds` too. A prediction line without its
/// `rewards` (written before grpofit split them) leaves both whole.
fn without_reward_functions(
    log: &RunLog,
    predicted: &PredictedTime,
    measured: f64,
    fixed: f64,
) -> (f64, f64) {
    let timed = per_step_of(log, |s| s.rewards?.functions, Missing::Zero).map(|(m, _)| m);
    match (predicted.rewards, timed) {
        (Some((p, p_scaled)), Some(m)) if m < measured => {
            (measured - m, (fixed - (p - p_scaled)).max(0.0))
        }
        _ => (measured, fixed),
    }
}

/// The `[[gpu.run]]` keys of a timed run in `calibration.toml`.
pub(crate) fn time_toml(t: &TimeSample) -> String {
    let e = &t.efficiencies;
    let f = |x: f64| toml::Value::from(x).to_string();
    let generation = t.generation.map_or(String::new(), |(m, p)| {
        format!(
            "generation_seconds = {}\npredicted_generation_seconds = {}\n",
            f(m),
            f(p)
        )
    });
    format!(
        "step_seconds = {}\npredicted_step_seconds = {}\nsteps_timed = {}\n{generation}decode_bandwidth = {}\nmatmul_peak = {}\neager_op_seconds = {}\n",
        f(t.measured_seconds),
        f(t.predicted_seconds),
        t.steps,
        f(e.decode_bandwidth),
        f(e.matmul_peak),
        f(e.eager_op_seconds)
    )
}

/// Reads back what `time_toml` wrote: none of its keys is None; some but not all, or a value
/// out of its range, is an error naming the key.
pub(crate) fn time_from_toml(t: &toml::Table) -> Result<Option<TimeSample>, OutOfRange> {
    const KEYS: [&str; 6] = [
        "step_seconds",
        "predicted_step_seconds",
        "steps_timed",
        "decode_bandwidth",
        "matmul_peak",
        "eager_op_seconds",
    ];
    if KEYS.iter().all(|k| !t.contains_key(*k)) {
        return Ok(None);
    }
    let generation_keys = ["generation_seconds", "predicted_generation_seconds"];
    let out = |key: &str, expected| OutOfRange {
        key: key.to_string(),
        value: t.get(key).map_or("nothing".into(), toml::Value::to_string),
        expected,
    };
    let number = |key: &str| {
        let v = t.get(key);
        v.and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
            .ok_or_else(|| out(key, "a number, set with the other step-time keys"))
    };
    let seconds = |key: &str| {
        number(key).and_then(|x| {
            (x.is_finite() && x > 0.0)
                .then_some(x)
                .ok_or_else(|| out(key, "seconds above 0"))
        })
    };
    let steps = match t.get("steps_timed") {
        Some(toml::Value::Integer(n)) if *n > 0 => *n as u64,
        _ => return Err(out("steps_timed", "a whole number of steps above 0")),
    };
    let efficiencies = Efficiencies {
        decode_bandwidth: number("decode_bandwidth")?,
        matmul_peak: number("matmul_peak")?,
        eager_op_seconds: number("eager_op_seconds")?,
    };
    if let Some((key, _, expected)) = efficiencies.out_of_range() {
        return Err(out(key, expected));
    }
    let generation = if generation_keys.iter().any(|k| t.contains_key(*k)) {
        Some((seconds(generation_keys[0])?, seconds(generation_keys[1])?))
    } else {
        None
    };
    Ok(Some(TimeSample {
        measured_seconds: seconds("step_seconds")?,
        steps,
        predicted_seconds: seconds("predicted_step_seconds")?,
        generation,
        efficiencies,
    }))
}

/// Predicted seconds a step against the log's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTimeCheck {
    pub predicted_seconds: f64,
    /// the median over the step lines, the first one left out (it compiles kernels, captures
    /// vLLM's graphs and warms the allocator) when there are others
    pub measured_seconds: f64,
    /// step lines the median is taken over
    pub steps: usize,
    /// (predicted - measured) / measured, in percent
    pub error_percent: f64,
    /// the card the prediction is timed on
    pub gpu: String,
    /// the generation's predicted seconds and its median as TRL timed it (`trl_timings`), where
    /// the log carries it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<PhaseCheck>,
    /// the `rewards` phase's predicted seconds and its median as TRL timed the rewards (the
    /// callback's `reward_funcs`), where the log carries them
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewards: Option<PhaseCheck>,
    /// the `[grpofit] reward_seconds` the log measures, when the rewards are the step's miss
    /// ([`rewards_are_the_gap`])
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward_seconds: Option<LearnedRewards>,
}

/// One phase, predicted against measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseCheck {
    pub predicted_seconds: f64,
    pub measured_seconds: f64,
}

/// The log's seconds a step: the median over its generation cycles of their steps' average
/// (`median::per_step_of`; the median of the step seconds when every step generates), the
/// first left out when there are others; and the steps it is taken over.
pub fn measured_seconds(log: &RunLog) -> Option<(f64, usize)> {
    per_step_of(log, |r| r.seconds, Missing::Unknown)
}

/// The generation's seconds a step as TRL timed it (`trl_timings`), on average over the steps
/// as the prediction charges it: a step that reuses a batch generated before counts 0.
fn generation_per_step(log: &RunLog) -> Option<f64> {
    per_step_of(log, |s| s.generation_seconds, Missing::Zero).map(|(g, _)| g)
}

/// Whether the rewards are the step's miss: the step off by more than
/// `measured::GOOD_WITHIN_PERCENT`, and the rewards' own miss (measured less predicted) the
/// larger part of the step's, the same way.
pub fn rewards_are_the_gap(rewards: PhaseCheck, predicted: f64, measured: f64) -> bool {
    let step = measured - predicted;
    let own = rewards.measured_seconds - rewards.predicted_seconds;
    let off = step.abs() > crate::measure::measured::GOOD_WITHIN_PERCENT / 100.0 * measured;
    off && own * step > 0.0 && own.abs() >= step.abs() / 2.0
}

/// `predicted` against the log; `None` when no step line carries its seconds. `completions`:
/// those each process scores in a timed step (`reward_seconds::completions_timed`), over which the
/// reward functions' seconds make `reward_seconds`.
pub fn compare(predicted: &StepTime, log: &RunLog, completions: u64) -> Option<StepTimeCheck> {
    let (measured, steps) = measured_seconds(log)?;
    let timed = per_step_of(log, |s| s.rewards.map(|r| r.phase()), Missing::Zero);
    let rewards = timed.map(|(m, _)| PhaseCheck {
        predicted_seconds: predicted.phase("rewards"),
        measured_seconds: m,
    });
    let reward_seconds = rewards
        .filter(|r| rewards_are_the_gap(*r, predicted.seconds, measured))
        .and_then(|_| reward_seconds::learn_rewards(log, completions).ok());
    Some(StepTimeCheck {
        predicted_seconds: predicted.seconds,
        measured_seconds: measured,
        steps,
        error_percent: (predicted.seconds - measured) / measured * 100.0,
        gpu: predicted.gpu.name.clone(),
        generation: generation_per_step(log).map(|m| PhaseCheck {
            predicted_seconds: predicted.phase("generation"),
            measured_seconds: m,
        }),
        rewards,
        reward_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::measured::parse_log;

    #[test]
    fn the_median_leaves_the_first_step_out() {
        let text = [
            r#"{"kind": "step", "step": 1, "max_allocated": 5, "max_reserved": 6, "free": 3, "total": 10, "seconds": 90.0}"#,
            r#"{"kind": "step", "step": 2, "max_allocated": 5, "max_reserved": 6, "free": 3, "total": 10, "seconds": 10.0}"#,
            r#"{"kind": "step", "step": 3, "max_allocated": 5, "max_reserved": 6, "free": 3, "total": 10, "seconds": 12.0}"#,
            r#"{"kind": "step", "step": 4, "max_allocated": 5, "max_reserved": 6, "free": 3, "total": 10, "seconds": null}"#,
            r#"{"kind": "step", "step": 5, "max_allocated": 5, "max_reserved": 6, "free": 3, "total": 10, "seconds": 11.0}"#,
        ]
        .join("\n");
        let log = parse_log(&text, "t").unwrap();
        assert_eq!(measured_seconds(&log), Some((11.0, 3)));
        let one = parse_log(
            r#"{"kind": "step", "step": 1, "max_allocated": 5, "max_reserved": 6, "free": 3, "total": 10, "seconds": 7.0}"#,
            "t",
        )
        .unwrap();
        assert_eq!(measured_seconds(&one), Some((7.0, 1)));
    }

    fn timed_log(device: &str, predicted: f64, measured: &[f64]) -> String {
        let mut t = format!(
            r#"{{"kind": "prediction", "device": "{device}", "stack": "trl", "step_time": {{"seconds": {predicted}, "gpu": "H100 SXM", "efficiencies": {{"decode_bandwidth": 0.66, "matmul_peak": 0.36, "eager_op_seconds": 1e-5}}}}}}"#
        );
        for (i, s) in measured.iter().enumerate() {
            t += &format!(
                "\n{{\"kind\": \"step\", \"step\": {}, \"max_allocated\": 5, \"max_reserved\": 6, \"free\": 3, \"total\": 10, \"seconds\": {s}}}",
                i + 1
            );
        }
        t
    }

    #[test]
    fn steps_half_again_as_slow_learn_efficiencies_two_thirds_as_high() {
        let log = parse_log(
            &timed_log("NVIDIA H100 80GB HBM3", 10.0, &[40.0, 15.0, 15.0, 15.0]),
            "t",
        )
        .unwrap();
        let t = learn_time(&log).expect("learns");
        assert_eq!(
            (t.measured_seconds, t.steps, t.predicted_seconds),
            (15.0, 3, 10.0)
        );
        assert!((t.efficiencies.decode_bandwidth - 0.44).abs() < 1e-12);
        assert!((t.efficiencies.matmul_peak - 0.24).abs() < 1e-12);
        let back = time_from_toml(&time_toml(&t).parse().unwrap()).unwrap();
        assert_eq!(back, Some(t));
        // timed on an H100, run on an L4: nothing learned
        let l4 = parse_log(&timed_log("NVIDIA L4", 10.0, &[15.0]), "t").unwrap();
        assert!(matches!(
            learn_time(&l4),
            Err(TimeNotLearned::OtherCard { .. })
        ));
        // 3x faster than predicted: past the sheet's bandwidth
        let fast = parse_log(&timed_log("NVIDIA H100 80GB HBM3", 10.0, &[3.0]), "t").unwrap();
        assert!(matches!(
            learn_time(&fast),
            Err(TimeNotLearned::OutOfRange {
                key: "decode_bandwidth",
                ..
            })
        ));
    }

    #[test]
    fn trls_generation_timing_scales_the_decode_bandwidth_apart() {
        // predicted 10 s, 4 of them generation; measured 16 s, 8 of them generation (TRL's)
        let text = timed_log("NVIDIA H100 80GB HBM3", 10.0, &[16.0, 16.0])
            .replace("\"seconds\": 10,", "\"seconds\": 10, \"generation\": 4.0,")
            .replace(
                "\"seconds\": 16}",
                "\"seconds\": 16, \"trl_timings\": {\"vLLM.generate\": 8.0, \"sync_weights\": 1.0}}",
            );
        let t = learn_time(&parse_log(&text, "t").unwrap()).expect("learns");
        assert_eq!(t.generation, Some((8.0, 4.0)), "{text}");
        // generation 2x slower: half the bandwidth; the rest 8 s against 6 s
        assert!((t.efficiencies.decode_bandwidth - 0.33).abs() < 1e-12);
        assert!((t.efficiencies.matmul_peak - 0.36 * 6.0 / 8.0).abs() < 1e-12);
        let back = time_from_toml(&time_toml(&t).parse().unwrap()).unwrap();
        assert_eq!(back, Some(t));
        let bad = text.replace("\"vLLM.generate\": 8.0", "\"vLLM.generate\": \"slow\"");
        let e = parse_log(&bad, "log.jsonl").unwrap_err().to_string();
        assert!(
            e.ends_with("`trl_timings.vLLM.generate` = \"slow\": expected seconds from 0 up"),
            "{e}"
        );
    }

    #[test]
    fn reward_functions_timed_apart_are_kept_out_of_the_efficiencies() {
        // predicted 10 s, none of it rewards; measured 25 s, 10 of them a reward function
        let timed = |prediction: &str| {
            let text = timed_log("NVIDIA H100 80GB HBM3", 10.0, &[25.0, 25.0])
                .replace("\"seconds\": 10,", &format!("\"seconds\": 10,{prediction}"))
                .replace(
                    "\"seconds\": 25}",
                    "\"seconds\": 25, \"trl_timings\": {\"accuracy\": 10.0, \"RM\": 2.0}, \"reward_funcs\": {\"accuracy\": \"function\", \"RM\": \"model\"}}",
                );
            learn_time(&parse_log(&text, "t").unwrap()).expect("learns")
        };
        // the 15 s left took 1.5x the 10 s predicted: the reward model's 2 s is GPU time, scaled
        let t = timed(" \"rewards\": 0.0, \"rewards_scaled\": 0.0,");
        assert!((t.efficiencies.matmul_peak - 0.24).abs() < 1e-12, "{t:?}");
        assert_eq!(t.measured_seconds, 25.0);
        // 4 s of reward functions predicted (`reward_seconds`) among the fixed terms: the rest
        // 15 s against 6 s scaled
        let t = timed(" \"scaled\": 6.0, \"rewards\": 4.0, \"rewards_scaled\": 0.0,");
        assert!(
            (t.efficiencies.matmul_peak - 0.36 / 2.5).abs() < 1e-12,
            "{t:?}"
        );
        // a prediction line from before the split: the whole step scaled, as before
        let t = timed("");
        assert!(
            (t.efficiencies.matmul_peak - 0.36 / 2.5).abs() < 1e-12,
            "{t:?}"
        );
    }

    /// A log whose steps each take `seconds` with `generation` and `rewards` timed by TRL, or
    /// (`every` = 2: `num_iterations = 2`) every other step generating and scoring twice as
    /// many completions, the step between training on them.
    fn cycled_log(every: usize, seconds: f64, generation: f64, rewards: f64) -> RunLog {
        let k = every as f64;
        let mut text = timed_log("NVIDIA H100 80GB HBM3", 10.0, &[seconds; 7]).replace(
            "\"seconds\": 10,",
            "\"seconds\": 10, \"generation\": 4.0, \"rewards\": 0.0, \"rewards_scaled\": 0.0,",
        );
        for (i, line) in text.clone().lines().skip(1).enumerate() {
            let generates = i.is_multiple_of(every);
            let (g, r) = (generation * k, rewards * k);
            let (s, timings) = if generates {
                let extra = (g + r) * (k - 1.0) / k;
                (
                    seconds + extra,
                    format!("\"vLLM.generate\": {g}, \"accuracy\": {r}, \"compute_loss\": 1.0"),
                )
            } else {
                (seconds - (g + r) / k, "\"compute_loss\": 1.0".to_string())
            };
            let kinds = if generates {
                ", \"reward_funcs\": {\"accuracy\": \"function\"}"
            } else {
                ""
            };
            let timed = line.replace(
                &format!("\"seconds\": {seconds}}}"),
                &format!("\"seconds\": {s}, \"trl_timings\": {{{timings}}}{kinds}}}"),
            );
            text = text.replace(line, &timed);
        }
        parse_log(&text, "t").unwrap()
    }

    #[test]
    fn a_generation_trained_on_twice_teaches_what_one_a_step_does() {
        // predicted 10 s, 4 of them generation; measured 16 s a step on average, 8 of them
        // generation and 2 reward functions
        let every_step = cycled_log(1, 16.0, 8.0, 2.0);
        let reused = cycled_log(2, 16.0, 8.0, 2.0);
        assert!(reused.steps[1].generation_seconds.is_none());
        assert_eq!(reused.steps[2].generation_seconds, Some(16.0));
        let (a, b) = (learn_time(&every_step), learn_time(&reused));
        assert_eq!(a.as_ref().unwrap().generation, Some((8.0, 4.0)));
        let (t, u) = (a.unwrap(), b.unwrap());
        assert_eq!(u.efficiencies, t.efficiencies);
        assert_eq!(TimeSample { steps: 6, ..u }, t);
        // the first cycle left out: 6 steps, or 2 cycles of 2 (the last is cut short)
        assert_eq!((t.steps, u.steps), (6, 4));
        assert_eq!(t.measured_seconds, 16.0);
        // the generation 2x slower: half the bandwidth; the rest, without the 2 s of rewards,
        // 6 s as predicted
        assert!(
            (t.efficiencies.decode_bandwidth - 0.33).abs() < 1e-12,
            "{t:?}"
        );
        assert!((t.efficiencies.matmul_peak - 0.36).abs() < 1e-12, "{t:?}");
        // check's phases: each the average a step
        let predicted = StepTime {
            seconds: 10.0,
            phases: Vec::new(),
            gpu: crate::time::GpuFigures {
                name: "H100 SXM".into(),
                bf16_tflops: 989.0,
                memory_gb_s: 3350.0,
                source: String::new(),
            },
            tokens_per_second: 0.0,
            completion_tokens: 0.0,
            completion_is_mean: false,
            mean_capped_from: None,
            steps: None,
            run_hours: None,
            reward_functions_timed: false,
        };
        let (a, b) = (
            compare(&predicted, &every_step, 16).unwrap(),
            compare(&predicted, &reused, 16).unwrap(),
        );
        assert_eq!(b.generation.map(|g| g.measured_seconds), Some(8.0));
        assert_eq!(b.rewards.map(|r| r.measured_seconds), Some(2.0));
        assert_eq!(
            (a.measured_seconds, a.generation, a.rewards),
            (b.measured_seconds, b.generation, b.rewards)
        );
    }

    #[test]
    fn the_rewards_are_the_gap_when_they_make_most_of_the_miss() {
        let r = |p, m| PhaseCheck {
            predicted_seconds: p,
            measured_seconds: m,
        };
        // 30 s measured against 12: 15 of the 18 are rewards
        assert!(rewards_are_the_gap(r(0.0, 15.0), 12.0, 30.0));
        // 5 of the 18: something else
        assert!(!rewards_are_the_gap(r(0.0, 5.0), 12.0, 30.0));
        // the step within 5 %
        assert!(!rewards_are_the_gap(r(0.0, 1.0), 29.0, 30.0));
        // the rewards slower, the step faster than predicted
        assert!(!rewards_are_the_gap(r(0.0, 15.0), 40.0, 30.0));
        // predicted too long, the rewards the reason
        assert!(rewards_are_the_gap(r(20.0, 2.0), 40.0, 25.0));
    }

    #[test]
    fn terms_no_efficiency_sets_are_taken_as_predicted() {
        // 10 s predicted, 6 of them set by the efficiencies (4 s of link, host work, rewards)
        let log = |measured: f64| {
            let text = timed_log("NVIDIA H100 80GB HBM3", 10.0, &[measured])
                .replace("\"seconds\": 10,", "\"seconds\": 10, \"scaled\": 6.0,");
            parse_log(&text, "t").unwrap()
        };
        // 13 s measured: the 6 s took 9, x1.5
        let t = learn_time(&log(13.0)).expect("learns");
        assert!((t.efficiencies.matmul_peak - 0.24).abs() < 1e-12, "{t:?}");
        assert_eq!(
            learn_time(&log(3.0)),
            Err(TimeNotLearned::BelowFixed {
                measured: 3.0,
                fixed: 4.0
            })
        );
        let bad = timed_log("NVIDIA H100 80GB HBM3", 10.0, &[1.0])
            .replace("\"seconds\": 10,", "\"seconds\": 10, \"scaled\": 12.0,");
        let e = parse_log(&bad, "log.jsonl").unwrap_err().to_string();
        assert!(e.contains("`step_time.scaled` = 12.0"), "{e}");
    }

    #[test]
    fn a_bad_time_value_is_named() {
        let bad = timed_log("NVIDIA H100 80GB HBM3", -2.0, &[1.0]);
        let e = parse_log(&bad, "log.jsonl").unwrap_err().to_string();
        assert_eq!(
            e,
            "log.jsonl:1: `step_time.seconds` = -2: expected seconds above 0"
        );
        let bad = timed_log("NVIDIA H100 80GB HBM3", 2.0, &[1.0]).replace("0.36", "3.6");
        let e = parse_log(&bad, "log.jsonl").unwrap_err().to_string();
        assert!(
            e.contains("`step_time.efficiencies.matmul_peak` = 3.6"),
            "{e}"
        );
        let bad = timed_log("NVIDIA H100 80GB HBM3", 2.0, &[-1.0]);
        let e = parse_log(&bad, "log.jsonl").unwrap_err().to_string();
        assert_eq!(e, "log.jsonl:2: `seconds` = -1: expected seconds from 0 up");
        let table: toml::Table = "step_seconds = 3.0\nmatmul_peak = 0.3".parse().unwrap();
        let e = time_from_toml(&table).unwrap_err();
        assert_eq!(e.key, "steps_timed");
    }
}
