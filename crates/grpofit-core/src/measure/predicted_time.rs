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
    /// the card's name in grpofit's table (`hardware::Card::name`), or the user's
    pub gpu: String,
    pub efficiencies: Efficiencies,
}

impl PredictedTime {
    /// The `prediction` line's `step_time` object, written by `grpofit run`.
    pub fn json(t: &StepTime, eff: &Efficiencies) -> Value {
        serde_json::json!({"seconds": t.seconds, "gpu": t.gpu.name, "efficiencies": eff})
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
            gpu: gpu.to_string(),
            efficiencies,
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
