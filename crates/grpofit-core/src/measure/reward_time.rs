//! The rewards' time as the run measured it. TRL times each reward under its own name
//! (`GRPOTrainer._calculate_rewards`: `profiling_context(self, reward_func_name)`, trl 0.16.1 to
//! 1.16.0; Unsloth's compiled trainer copies that method unchanged), and the callback's step
//! line carries those timings (`trl_timings`) with the names that are rewards and their kind
//! (`reward_funcs`: "function", "async" or "model"). From them `calibrate` learns `[grpofit]
//! reward_seconds`, the seconds a completion's reward functions take, which `time::rewards`
//! charges on the completions each process scores in a step; and `check` sets the step's
//! `rewards` phase against them (`reward_seconds` learns the key from a log's steps).

use crate::measure::predicted_time::OutOfRange;
use serde::Serialize;
use serde_json::Value;

/// A step's rewards as TRL timed them on the main process (each process scores its own
/// completions at the same time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepRewards {
    /// the user's reward functions, on the host: the synchronous ones one after the other
    /// (summed) and the asynchronous ones together (trl 1.0 on runs them with
    /// `asyncio.gather`: the longest); None when the step names none
    pub functions: Option<f64>,
    /// the reward models' forward passes, on the GPU: the step's `rewards` phase times them
    /// with the efficiencies (`time::phases::reward_models`), never as `reward_seconds`
    pub models: Option<f64>,
}

impl StepRewards {
    /// The seconds of the step's `rewards` phase: the functions' and the models' together.
    pub fn phase(&self) -> f64 {
        self.functions.unwrap_or(0.0) + self.models.unwrap_or(0.0)
    }
}

/// The kinds the callback names (`_reward_kind` in examples/grpofit_callback.py).
const KINDS: &str = "\"function\", \"async\" or \"model\"";

/// A step line's rewards: the `trl_timings` that its `reward_funcs` names. None when the line
/// names no reward (TRL before 0.16 times nothing; a callback older than the names writes
/// none); a kind or a timing out of its range is named.
pub fn step_rewards(
    timings: Option<&Value>,
    kinds: Option<&Value>,
) -> Result<Option<StepRewards>, OutOfRange> {
    let Some(kinds) = kinds.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let out = |key: String, value: &Value, expected| OutOfRange {
        key,
        value: value.to_string(),
        expected,
    };
    let kinds = kinds
        .as_object()
        .ok_or_else(|| out("reward_funcs".into(), kinds, "an object of kinds by name"))?;
    let timings = timings.and_then(Value::as_object);
    let (mut sync, mut longest_async, mut models) = (None, None, None);
    let add = |to: &mut Option<f64>, x: f64| *to = Some(to.unwrap_or(0.0) + x);
    for (name, kind) in kinds {
        let Some(seconds) = timings.and_then(|t| t.get(name)) else {
            continue;
        };
        let x = seconds
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| out(format!("trl_timings.{name}"), seconds, "seconds from 0 up"))?;
        match kind.as_str() {
            Some("function") => add(&mut sync, x),
            Some("async") => longest_async = Some(longest_async.map_or(x, |a: f64| a.max(x))),
            Some("model") => add(&mut models, x),
            _ => return Err(out(format!("reward_funcs.{name}"), kind, KINDS)),
        }
    }
    let functions = match (sync, longest_async) {
        (None, None) => None,
        (s, a) => Some(s.unwrap_or(0.0) + a.unwrap_or(0.0)),
    };
    Ok((functions.is_some() || models.is_some()).then_some(StepRewards { functions, models }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::measure::measured::parse_log;
    use serde_json::json;

    /// A log's step line with TRL's timings and the reward functions' kinds (`reward_seconds`'
    /// tests read the same lines).
    pub(crate) fn step(n: u64, timings: Value, kinds: Value) -> String {
        json!({"kind": "step", "step": n, "max_allocated": 5, "max_reserved": 6, "free": 3,
               "total": 10, "seconds": 20.0, "trl_timings": timings, "reward_funcs": kinds})
        .to_string()
    }

    #[test]
    fn functions_add_up_async_ones_overlap_and_models_stay_apart() {
        let timings = json!({"vLLM.generate": 9.0, "accuracy": 2.0, "format": 1.0,
                             "judge_a": 3.0, "judge_b": 4.0, "Skywork-RM": 0.5});
        let kinds = json!({"accuracy": "function", "format": "function", "judge_a": "async",
                           "judge_b": "async", "Skywork-RM": "model", "untimed": "function"});
        let r = step_rewards(Some(&timings), Some(&kinds)).unwrap().unwrap();
        assert_eq!(r.functions, Some(2.0 + 1.0 + 4.0));
        assert_eq!(r.models, Some(0.5));
        assert_eq!(r.phase(), 7.5);
        // no names: nothing known of the rewards, whatever TRL timed
        assert_eq!(step_rewards(Some(&timings), None), Ok(None));
        let e = step_rewards(Some(&timings), Some(&json!({"accuracy": "lambda"}))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`reward_funcs.accuracy` = \"lambda\": expected \"function\", \"async\" or \"model\""
        );
    }

    #[test]
    fn a_bad_kind_is_named_with_its_line() {
        let text = step(1, json!({"a": 1.0}), json!({"a": 3}));
        let e = parse_log(&text, "log.jsonl").unwrap_err().to_string();
        assert!(e.starts_with("log.jsonl:1: `reward_funcs.a` = 3"), "{e}");
        let text = step(1, json!({"a": 1.0}), json!(["a"]));
        let e = parse_log(&text, "log.jsonl").unwrap_err().to_string();
        assert!(e.contains("`reward_funcs` = [\"a\"]"), "{e}");
    }
}
