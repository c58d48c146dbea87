//! The step's time, predicted against the seconds the callback measured between
//! `on_step_begin` and `on_step_end` (one optimizer step: generation, scoring and every
//! micro-batch's training inside it).

use crate::measure::measured::RunLog;
use crate::time::StepTime;
use serde::Serialize;

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
}

/// The median of the log's step seconds, the first step left out when there are others.
pub fn measured_seconds(log: &RunLog) -> Option<(f64, usize)> {
    let mut s: Vec<f64> = log
        .steps
        .iter()
        .filter_map(|r| r.seconds)
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if s.len() > 1 {
        s.remove(0);
    }
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some((median, n))
}

/// `predicted` against the log; `None` when no step line carries its seconds.
pub fn compare(predicted: &StepTime, log: &RunLog) -> Option<StepTimeCheck> {
    let (measured, steps) = measured_seconds(log)?;
    Some(StepTimeCheck {
        predicted_seconds: predicted.seconds,
        measured_seconds: measured,
        steps,
        error_percent: (predicted.seconds - measured) / measured * 100.0,
        gpu: predicted.gpu.name.clone(),
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
}
