//! A figure's median over a log's step lines, as `check` and `calibrate` take each: the first
//! step (or generation cycle) left out when there are others (it compiles kernels, captures
//! vLLM's graphs and warms the allocator), the steps without the figure left out.
//!
//! TRL generates and scores once every `steps_per_generation x num_iterations` micro-steps
//! (trl 1.16.0 `GRPOTrainer._prepare_inputs`: `self._step % generate_every == 0`; 0.16.1 and
//! 0.17.0 every `num_iterations` optimizer steps), so with `num_iterations > 1`, or
//! `steps_per_generation` past the gradient accumulation, only one optimizer step in k carries
//! the generation and the rewards, and the k - 1 after it reuse the batch. The prediction
//! charges every step the average (`time::phases::generations_per_step`, `time::rewards`): the
//! log's figures are set against it per cycle ([`per_step_of`]), each cycle's sum over its k
//! steps, the median over the cycles.

use crate::measure::measured::{RunLog, StepRecord};
use std::ops::Range;

/// The median of `figure` over the log's step lines that have it, the first left out when
/// there are others, and how many it is taken over.
pub(crate) fn median_of(
    log: &RunLog,
    figure: impl Fn(&StepRecord) -> Option<f64>,
) -> Option<(f64, usize)> {
    let s: Vec<f64> = in_a_row(log).iter().filter_map(figure).collect();
    median_after_first(s.into_iter().map(|x| (x, 1)))
}

/// The log's steps read in a row up to its last: all of them, or past `kept::MOST_KEPT` the
/// last `kept::TIMED_TAIL` (the peaks kept before them are apart from the rest, in no cycle).
fn in_a_row(log: &RunLog) -> &[StepRecord] {
    log.steps.get(log.all_steps.in_a_row_from..).unwrap_or(&[])
}

/// How a step line without the figure counts inside a generation cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Missing {
    /// the figure was not measured (a step line without `seconds`): the cycle is left out
    Unknown,
    /// the step did not run the phase (it trains on a batch generated before): 0 s
    Zero,
}

/// The seconds `figure` takes a step on average, as the prediction charges it: over the log's
/// generation cycles ([`cycles`]), each cycle's sum over its steps divided by its length, the
/// median over the cycles, the first left out when there are others; and the steps those
/// cycles hold. The median of the cycles, not the mean of the steps: a save, an evaluation or a
/// slow judge call makes an outlier step, which moves a mean and not a median, and a cycle
/// holds the generation with the steps that reuse it, so its average is what the prediction
/// charges each. When every step generates (or no step carries a generation or reward timing:
/// TRL before 0.16, or a callback before `trl_timings`), each step is its own cycle, and this
/// is [`median_of`]. None when no cycle has the figure above 0 (a phase TRL did not time).
pub(crate) fn per_step_of(
    log: &RunLog,
    figure: impl Fn(&StepRecord) -> Option<f64>,
    missing: Missing,
) -> Option<(f64, usize)> {
    let steps = in_a_row(log);
    let Some(cycles) = cycles(steps) else {
        return median_of(log, figure);
    };
    let average = |r: &Range<usize>| -> Option<(f64, usize)> {
        let mut sum = 0.0;
        for s in &steps[r.clone()] {
            match (figure(s), missing) {
                (Some(x), _) => sum += x,
                (None, Missing::Zero) => {}
                (None, Missing::Unknown) => return None,
            }
        }
        Some((sum / r.len() as f64, r.len()))
    };
    median_after_first(cycles.iter().filter_map(average))
}

/// Whether TRL generated or scored in the step: its line carries a generation or a reward
/// timing (`trl_timings`), which only the micro-steps that call
/// `_generate_and_score_completions` time.
fn starts_cycle(s: &StepRecord) -> bool {
    s.generation_seconds.is_some() || s.rewards.is_some()
}

/// The log's generation cycles: each from a step that generated up to the next that did. The
/// last one only when it is as long as the others' median (a log that stops before its cycle
/// ends holds part of it); steps before the first generation (a run resumed mid-cycle) left
/// out. None when no step carries a generation or reward timing.
fn cycles(steps: &[StepRecord]) -> Option<Vec<Range<usize>>> {
    let starts: Vec<usize> = (0..steps.len())
        .filter(|&i| starts_cycle(&steps[i]))
        .collect();
    let last = *starts.last()?;
    let mut cycles: Vec<Range<usize>> = starts.windows(2).map(|w| w[0]..w[1]).collect();
    let mut lengths: Vec<usize> = cycles.iter().map(ExactSizeIterator::len).collect();
    lengths.sort_unstable();
    let tail = steps.len() - last;
    let k = lengths.get(lengths.len().saturating_sub(1) / 2).copied();
    match k {
        Some(k) if tail >= k => cycles.push(last..last + k),
        Some(_) => {}
        None => cycles.push(last..steps.len()),
    }
    Some(cycles)
}

/// The median of the values above 0, each with the steps it covers, the first left out when
/// there are others; and the steps the rest cover.
fn median_after_first(values: impl Iterator<Item = (f64, usize)>) -> Option<(f64, usize)> {
    let mut s: Vec<(f64, usize)> = values.filter(|(x, _)| x.is_finite() && *x > 0.0).collect();
    if s.len() > 1 {
        s.remove(0);
    }
    if s.is_empty() {
        return None;
    }
    let steps = s.iter().map(|(_, n)| n).sum();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2].0
    } else {
        (s[n / 2 - 1].0 + s[n / 2].0) / 2.0
    };
    Some((median, steps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::measured::parse_log;
    use serde_json::{Value, json};

    /// Step lines of `seconds`, each with TRL's timings when it has a generation.
    fn log(steps: &[(Option<f64>, Option<f64>)]) -> RunLog {
        let lines: Vec<String> = steps
            .iter()
            .enumerate()
            .map(|(i, (seconds, generation))| {
                let mut v = json!({"kind": "step", "step": i + 1, "max_allocated": 5,
                    "max_reserved": 6, "free": 3, "total": 10, "seconds": seconds,
                    "trl_timings": {"_prepare_inputs": 0.1, "compute_loss": 0.2}});
                if let Some(g) = generation {
                    v["trl_timings"]["vLLM.generate"] = Value::from(*g);
                }
                v.to_string()
            })
            .collect();
        parse_log(&lines.join("\n"), "t").unwrap()
    }

    fn generation(s: &StepRecord) -> Option<f64> {
        s.generation_seconds
    }

    #[test]
    fn every_step_generating_is_the_median_of_the_steps() {
        let every = log(&[
            (Some(90.0), Some(50.0)),
            (Some(10.0), Some(4.0)),
            (Some(12.0), Some(6.0)),
            (None, Some(5.0)),
            (Some(11.0), Some(5.0)),
        ]);
        let seconds = |s: &StepRecord| s.seconds;
        assert_eq!(
            per_step_of(&every, seconds, Missing::Unknown),
            median_of(&every, seconds)
        );
        assert_eq!(
            per_step_of(&every, seconds, Missing::Unknown),
            Some((11.0, 3))
        );
        assert_eq!(
            per_step_of(&every, generation, Missing::Zero),
            Some((5.0, 4))
        );
        // no generation timed at all (TRL before 0.16): the median of the steps, no generation
        let untimed = log(&[(Some(9.0), None), (Some(3.0), None), (Some(5.0), None)]);
        assert_eq!(
            per_step_of(&untimed, seconds, Missing::Unknown),
            Some((4.0, 2))
        );
        assert_eq!(per_step_of(&untimed, generation, Missing::Zero), None);
    }

    #[test]
    fn a_generation_reused_for_a_second_step_is_averaged_over_its_cycle() {
        // num_iterations = 2: one step in two generates (8 s) and takes 14 s, the next 6 s
        let mut steps = vec![(Some(40.0), Some(30.0)), (Some(6.0), None)];
        for _ in 0..3 {
            steps.extend([(Some(14.0), Some(8.0)), (Some(6.0), None)]);
        }
        // stopped inside a cycle: that one left out
        steps.push((Some(50.0), Some(45.0)));
        let l = log(&steps);
        let seconds = |s: &StepRecord| s.seconds;
        assert_eq!(per_step_of(&l, seconds, Missing::Unknown), Some((10.0, 6)));
        assert_eq!(per_step_of(&l, generation, Missing::Zero), Some((4.0, 6)));
        // the median over the generating steps would say 8 s, the steps' median 6 or 14 s
        assert_eq!(median_of(&l, generation).map(|m| m.0), Some(8.0));
        // a save in one cycle moves its average, not the median
        let mut saved = steps.clone();
        saved[5].0 = Some(600.0);
        let l = log(&saved);
        assert_eq!(per_step_of(&l, seconds, Missing::Unknown), Some((10.0, 6)));
        // a cycle with a step unmeasured is left out of the seconds, not of the generation
        saved[5].0 = None;
        let l = log(&saved);
        assert_eq!(per_step_of(&l, seconds, Missing::Unknown), Some((10.0, 4)));
        assert_eq!(per_step_of(&l, generation, Missing::Zero), Some((4.0, 6)));
    }

    #[test]
    fn a_long_log_is_timed_on_its_last_steps_in_a_row_not_on_its_peaks() {
        use crate::measure::kept::{MOST_KEPT, TIMED_TAIL};
        use crate::measure::measured::parse_last_run_from;
        // 3071 steps (the last read just folded the log), one generation every two: 14 s and
        // 6 s; the memory's peak step a save
        let lines: Vec<String> = (0..3071)
            .map(|i| {
                let generates = i % 2 == 0;
                let seconds = match i {
                    100 => 500.0,
                    _ if generates => 14.0,
                    _ => 6.0,
                };
                let mut v = json!({"kind": "step", "step": i + 1, "max_allocated": 5,
                    "max_reserved": 6, "free": 3, "total": 10, "seconds": seconds,
                    "trl_timings": {"compute_loss": 0.2}});
                if i == 100 {
                    v["max_allocated"] = json!(6);
                }
                if generates {
                    v["trl_timings"]["vLLM.generate"] = json!(8.0);
                }
                v.to_string() + "\n"
            })
            .collect();
        let text = lines.concat();
        let (log, _) = parse_last_run_from(std::io::Cursor::new(text), "t").unwrap();
        assert!(log.steps.len() <= MOST_KEPT);
        assert_eq!(log.all_steps.count, 3071);
        // the peak step kept for the memory's figures
        assert!(log.steps.iter().any(|s| s.step == 101));
        let seconds = |s: &StepRecord| s.seconds;
        let (m, steps) = per_step_of(&log, seconds, Missing::Unknown).unwrap();
        assert_eq!(m, 10.0);
        // the last steps in a row: at least TIMED_TAIL, less the first cycle
        assert!((TIMED_TAIL - 4..MOST_KEPT).contains(&steps), "{steps}");
        assert_eq!(
            per_step_of(&log, generation, Missing::Zero).map(|g| g.0),
            Some(4.0)
        );
        assert_eq!(median_of(&log, generation).map(|g| g.0), Some(8.0));
    }
}
