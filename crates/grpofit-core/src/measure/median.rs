//! The median of a figure over a log's step lines, as `check` and `calibrate` take each: the
//! first step left out when there are others (it compiles kernels, captures vLLM's graphs and
//! warms the allocator), the steps without the figure left out.

use crate::measure::measured::{RunLog, StepRecord};

/// The median of `figure` over the log's step lines that have it, the first left out when
/// there are others, and how many it is taken over.
pub(crate) fn median_of(
    log: &RunLog,
    figure: impl Fn(&StepRecord) -> Option<f64>,
) -> Option<(f64, usize)> {
    let mut s: Vec<f64> = log
        .steps
        .iter()
        .filter_map(figure)
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
