//! The step time `grpofit run` writes into its `prediction` line, so that `grpofit calibrate`
//! can set the measured seconds against it: the seconds, the card, the efficiencies in use.

use crate::time::{Efficiencies, StepTime};
use serde::Serialize;
use serde_json::Value;

/// The step time `grpofit run` predicted for the run it started (the `prediction` line's
/// `step_time`): the seconds, the card they were timed on and the efficiencies in use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictedTime {
    pub seconds: f64,
    /// the part of them the efficiencies set (the rest, the link's transfers, vLLM's host work
    /// a decode step, the rewards, checkpoint saves, takes none of them)
    pub scaled: f64,
    /// the generation phase's share of them, and the part of it the efficiencies set
    pub generation: Option<(f64, f64)>,
    /// the `rewards` phase's share of them, and the part of it the efficiencies set (the reward
    /// models' forward; the rest is the reward functions' `reward_seconds`); None in a line
    /// written before grpofit wrote it
    pub rewards: Option<(f64, f64)>,
    /// the card's name in grpofit's table (`hardware::Card::name`), or the user's
    pub gpu: String,
    pub efficiencies: Efficiencies,
    /// the completions each process scored in a scoring step of the run predicted
    /// (`reward_seconds::completions_timed` of its run file then: the batch the log ran, not the
    /// one the file may say when `calibrate` reads it); None in a line written before it was
    pub completions: Option<u64>,
}

impl PredictedTime {
    /// The `prediction` line's `step_time` object, written by `grpofit run`: the step `t` timed
    /// with `eff`, and `slow`, the same step timed with `eff.slower_by(2.0)`. Every term the
    /// efficiencies set doubles there and the others stay, so the difference is the part they
    /// set.
    pub fn json(t: &StepTime, slow: &StepTime, eff: &Efficiencies, completions: u64) -> Value {
        let part = |now: f64, doubled: f64| (doubled - now).clamp(0.0, now);
        let generation = t.phase("generation");
        let rewards = t.phase("rewards");
        serde_json::json!({
            "seconds": t.seconds,
            "scaled": part(t.seconds, slow.seconds),
            "generation": generation,
            "generation_scaled": part(generation, slow.phase("generation")),
            "rewards": rewards,
            "rewards_scaled": part(rewards, slow.phase("rewards")),
            "gpu": t.gpu.name,
            "efficiencies": eff,
            "completions": completions,
        })
    }

    /// Reads the `step_time` object back: absent or null is None; a value out of its range is
    /// an error naming the key, the value and what it can be.
    pub fn read(v: Option<&Value>) -> Result<Option<PredictedTime>, OutOfRange> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let bad = |key: &str, value: Option<&Value>, expected| {
            let shown = value.map_or("nothing".to_string(), Value::to_string);
            OutOfRange {
                key: format!("step_time.{key}"),
                value: shown,
                expected,
            }
        };
        let number = |key: &str| {
            let value = v.get(key);
            value
                .and_then(Value::as_f64)
                .ok_or_else(|| bad(key, value, "a number"))
        };
        let seconds = number("seconds")?;
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(bad("seconds", v.get("seconds"), "seconds above 0"));
        }
        // absent or null: None; else seconds from 0 to `most`
        let part = |key: &str, most: f64| match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(g) => match g.as_f64() {
                Some(x) if x.is_finite() && (0.0..=most).contains(&x) => Ok(Some(x)),
                _ => Err(bad(key, Some(g), "seconds from 0 to the step's")),
            },
        };
        let scaled = part("scaled", seconds)?.unwrap_or(seconds);
        let generation = match part("generation", seconds)? {
            Some(g) => Some((g, part("generation_scaled", g)?.unwrap_or(g))),
            None => None,
        };
        let rewards = match part("rewards", seconds)? {
            Some(r) => Some((r, part("rewards_scaled", r)?.unwrap_or(0.0))),
            None => None,
        };
        let gpu = v
            .get("gpu")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
            .ok_or_else(|| bad("gpu", v.get("gpu"), "the card's name"))?;
        let e = v.get("efficiencies").unwrap_or(&Value::Null);
        let field = |key: &str| {
            let value = e.get(key);
            value
                .and_then(Value::as_f64)
                .ok_or_else(|| bad(&format!("efficiencies.{key}"), value, "a number"))
        };
        let efficiencies = Efficiencies {
            decode_bandwidth: field("decode_bandwidth")?,
            matmul_peak: field("matmul_peak")?,
            eager_op_seconds: field("eager_op_seconds")?,
        };
        if let Some((key, value, expected)) = efficiencies.out_of_range() {
            return Err(OutOfRange {
                key: format!("step_time.efficiencies.{key}"),
                value: value.to_string(),
                expected,
            });
        }
        Ok(Some(PredictedTime {
            seconds,
            scaled,
            generation,
            rewards,
            gpu: gpu.to_string(),
            efficiencies,
            completions: v
                .get("completions")
                .and_then(Value::as_u64)
                .filter(|&c| c > 0),
        }))
    }
}

/// A value of the log out of its range: its key, the value as the JSON writes it, and what it
/// can be, in words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{key}` = {value}: expected {expected}")]
pub struct OutOfRange {
    pub key: String,
    pub value: String,
    pub expected: &'static str,
}

/// A step line's `seconds` (the callback's `on_step_begin` to `on_step_end`): absent or null
/// (no start time) is None; anything but a number of seconds from 0 up is out of range.
pub fn step_seconds(v: Option<&Value>) -> Result<Option<f64>, OutOfRange> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(OutOfRange {
                key: "seconds".into(),
                value: v.to_string(),
                expected: "seconds from 0 up",
            }),
        },
    }
}

/// The names under which TRL times a step's generation (`profiling_context(self,
/// "vLLM.generate")`, "transformers.generate", "transformers.generate_batch": trl 0.23.0 and
/// 1.16.0 `GRPOTrainer._generate_single_turn`), as the callback's `trl_timings` carries them.
pub const GENERATION: [&str; 3] = [
    "vLLM.generate",
    "transformers.generate",
    "transformers.generate_batch",
];

/// A step line's generation seconds: the sum of its `trl_timings` under [`GENERATION`]; None
/// when the line has no timings or none of those. A timing that is no number of seconds from 0
/// up is out of range, named.
pub fn generation(v: Option<&Value>) -> Result<Option<f64>, OutOfRange> {
    let Some(timings) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(timings) = timings.as_object() else {
        return Err(OutOfRange {
            key: "trl_timings".into(),
            value: timings.to_string(),
            expected: "an object of seconds by name",
        });
    };
    let mut sum = None;
    for (name, seconds) in timings {
        let x = seconds
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| OutOfRange {
                key: format!("trl_timings.{name}"),
                value: seconds.to_string(),
                expected: "seconds from 0 up",
            })?;
        if GENERATION.contains(&name.as_str()) {
            sum = Some(sum.unwrap_or(0.0) + x);
        }
    }
    Ok(sum)
}
