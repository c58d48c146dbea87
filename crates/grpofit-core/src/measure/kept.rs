//! What a run log keeps of its steps and NVML samples, for `check`, `calibrate` and the
//! screen's `--follow` alike: past `MOST_KEPT` of either, only those a figure reads are kept
//! (the peaks, the first GPU named, the last), and what needs every step (how many there
//! were, the median of the memory in use above torch's reserved) is added up as the lines are
//! read ([`StepTally`]). A log of millions of steps is read in bounded memory, and every figure
//! is the one a read that kept everything gives (the median to within its `grain` when a log
//! holds more than `MOST_DISTINCT` distinct figures; a run has nearly one).

use serde::Serialize;
use std::collections::BTreeMap;

/// The most steps (and NVML samples) kept: past it they are folded to those that hold a peak
/// and the last, so a log of millions of steps is read in bounded memory.
pub const MOST_KEPT: usize = 1024;

/// Past `MOST_KEPT` items, only those at `at(items)` are kept, in their order: the figures'
/// own (`RunLog::fold` says which).
pub fn fold<T: Clone, const N: usize>(items: &mut Vec<T>, at: impl Fn(&[T]) -> [Option<usize>; N]) {
    if items.len() > MOST_KEPT {
        let mut at = at(items);
        at.sort();
        *items = keep(items, &at);
    }
}

/// The last steps a fold keeps whole, in a row, beside the peaks: the step time's figures
/// (`median::per_step_of`: the step's seconds, TRL's phases, by generation cycle) are taken
/// over them, as a median of hundreds of steps or cycles, which an outlier does not move. Half
/// of `MOST_KEPT`, so that a fold still frees half the steps it holds.
pub const TIMED_TAIL: usize = MOST_KEPT / 2;

/// Past `MOST_KEPT` items, those at `at(items)` and the last `TIMED_TAIL` are kept, in their
/// order; the index, among the kept, where those last ones begin (None when nothing is
/// folded).
pub fn fold_keeping_tail<T: Clone, const N: usize>(
    items: &mut Vec<T>,
    at: impl Fn(&[T]) -> [Option<usize>; N],
) -> Option<usize> {
    if items.len() <= MOST_KEPT {
        return None;
    }
    let tail = items.len() - TIMED_TAIL;
    let mut at: Vec<Option<usize>> = at(items).into_iter().collect();
    at.extend((tail..items.len()).map(Some));
    at.sort();
    let before = at.iter().flatten().filter(|&&i| i < tail).count();
    *items = keep(items, &at);
    Some(before)
}

/// What every step of a log adds up to, kept whole while the steps themselves are folded.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepTally {
    /// how many step lines were read
    pub count: usize,
    /// the device's memory in use above torch's reserved when a step ended (`total - free -
    /// max_reserved`, rounded down to a multiple of `grain`), with how many steps had it;
    /// steps with less in use than reserved are left out. A run's figure is its CUDA context
    /// and what no torch counter holds, nearly the same at every step: a few distinct figures
    /// however long the log.
    above_reserved: BTreeMap<u64, u64>,
    /// 1 (every byte) until a log holds more than `MOST_DISTINCT` distinct figures: then the
    /// figures are merged to multiples of 2, 4, ... bytes, and the median is exact to `grain`
    grain: u64,
    /// where, among the steps kept, those read in a row up to the last begin: 0 until the
    /// steps are folded, then past the peaks kept before the last `TIMED_TAIL`
    pub in_a_row_from: usize,
}

/// The most distinct figures of memory in use above reserved kept exactly (1 MiB of memory).
const MOST_DISTINCT: usize = 16 * MOST_KEPT;

impl StepTally {
    /// Counts one step: the device's memory in use when it ended, and torch's reserved peak.
    pub fn add(&mut self, used: u64, reserved: u64) {
        self.count += 1;
        if let Some(above) = used.checked_sub(reserved) {
            let grain = self.grain.max(1);
            *self
                .above_reserved
                .entry(above / grain * grain)
                .or_default() += 1;
        }
        if self.above_reserved.len() > MOST_DISTINCT {
            // to half as many, so that merging is rare however the figures spread
            while self.above_reserved.len() > MOST_DISTINCT / 2 {
                self.coarsen();
            }
        }
    }

    /// Merges the figures to multiples of twice the grain.
    fn coarsen(&mut self) {
        self.grain = self.grain.max(1) * 2;
        let grain = self.grain;
        let mut merged = BTreeMap::new();
        for (value, count) in std::mem::take(&mut self.above_reserved) {
            *merged.entry(value / grain * grain).or_default() += count;
        }
        self.above_reserved = merged;
    }

    /// The median over the steps of the memory in use above torch's reserved less `before`
    /// (what other processes held), over the steps where it is not negative; of two middle
    /// figures, their mean rounded down. None when no step has it.
    pub fn median_above_reserved(&self, before: u64) -> Option<u64> {
        let above = self.above_reserved.range(before..);
        let n: u64 = above.clone().map(|(_, count)| count).sum();
        let nth = |i: u64| {
            let mut seen = 0;
            above.clone().find_map(|(value, count)| {
                seen += count;
                (seen > i).then_some(value - before)
            })
        };
        match n {
            0 => None,
            _ if n % 2 == 1 => nth(n / 2),
            _ => {
                let (a, b) = (nth(n / 2 - 1)?, nth(n / 2)?);
                Some(a / 2 + b / 2 + (a % 2 + b % 2) / 2)
            }
        }
    }
}

/// Where the largest `of` is (the last of equals).
pub fn last_largest<T>(items: &[T], of: impl Fn(&T) -> u64) -> Option<usize> {
    let largest = items.iter().map(&of).max()?;
    items.iter().rposition(|i| of(i) == largest)
}

/// The items at `at` (sorted), each once.
fn keep<T: Clone>(items: &[T], at: &[Option<usize>]) -> Vec<T> {
    let mut at: Vec<usize> = at.iter().flatten().copied().collect();
    at.dedup();
    at.iter().map(|i| items[*i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::calibration::learn;
    use crate::measure::measured::{StepRecord, parse_last_run, parse_log};

    const GIB: u64 = 1 << 30;

    /// The median as the calibration took it before the tally: every step's figure, sorted.
    fn sorted_median(mut v: Vec<u64>) -> Option<u64> {
        v.sort_unstable();
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some(v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2),
        }
    }

    /// `n` steps on a 24 GiB GPU whose figures wander: a few hundred distinct figures of
    /// memory in use above reserved, some below reserved, and peaks in the middle of the log.
    fn steps(n: u64) -> Vec<StepRecord> {
        (0..n)
            .map(|i| {
                let reserved = 8 * GIB + (i * 104_729) % (GIB / 2);
                let above = (i * 7_919) % 997 * 4_096 + (i % 3);
                let used = (reserved + above).saturating_sub(if i % 11 == 0 { GIB } else { 0 });
                StepRecord {
                    step: i + 1,
                    max_allocated: reserved - (i * 31) % (GIB / 4),
                    max_reserved: reserved,
                    free: 24 * GIB - used,
                    total: 24 * GIB,
                    seconds: Some(1.5),
                    generation_seconds: None,
                    rewards: None,
                }
            })
            .collect()
    }

    #[test]
    fn the_tally_median_is_the_median_of_every_step() {
        for n in [1, 2, 3_000, 3_001] {
            let steps = steps(n);
            let mut tally = StepTally::default();
            steps
                .iter()
                .for_each(|s| tally.add(s.used(), s.max_reserved));
            assert_eq!(tally.count, n as usize);
            for before in [0, 1, 5, 2_000_000, 4 * GIB] {
                let every = steps
                    .iter()
                    .filter_map(|s| s.used().checked_sub(s.max_reserved + before))
                    .collect();
                assert_eq!(
                    tally.median_above_reserved(before),
                    sorted_median(every),
                    "{n} steps, {before} before"
                );
            }
        }
    }

    #[test]
    fn figures_past_the_most_distinct_are_merged_in_bounded_memory() {
        let mut tally = StepTally::default();
        let mut every = Vec::new();
        for i in 0..(4 * MOST_DISTINCT as u64) {
            let above = (i * 2_654_435_761) % (1 << 32);
            every.push(above);
            tally.add(GIB + above, GIB);
        }
        assert!(tally.above_reserved.len() <= MOST_DISTINCT);
        assert!(tally.grain > 1);
        let median = tally.median_above_reserved(0).expect("a median");
        let exact = sorted_median(every).expect("a median");
        assert!(median.abs_diff(exact) <= tally.grain, "{median} {exact}");
    }

    #[test]
    fn a_folded_log_gives_every_figure_of_a_full_read() {
        let mut text = String::from(
            "{\"kind\": \"prediction\", \"device\": \"NVIDIA L4\", \"used_before\": 5, \"stack\": \"trl\", \"allocated\": 100, \"reserved\": 110}\n",
        );
        for (i, s) in steps(3_000).iter().enumerate() {
            text += &format!(
                "{{\"kind\": \"step\", \"step\": {}, \"max_allocated\": {}, \"max_reserved\": {}, \"free\": {}, \"total\": {}}}\n",
                s.step, s.max_allocated, s.max_reserved, s.free, s.total
            );
            text += &format!(
                "{{\"kind\": \"nvml\", \"gpus\": [{{\"used\": {}}}], \"tree\": {}}}\n",
                s.used(),
                (i as u64 * 13) % 9_973
            );
        }
        let (folded, _) = parse_last_run(&text, "run.jsonl").expect("reads");
        let full = parse_log(&text, "run.jsonl").expect("reads");
        assert!(folded.steps.len() <= MOST_KEPT && folded.samples.len() <= MOST_KEPT);
        assert_eq!(full.steps.len(), 3_000, "parse_log keeps every step");
        assert_eq!(folded.measured().expect("steps").steps, 3_000);
        assert_eq!(folded.measured(), full.measured());
        assert_eq!(folded.nvml_peak(), full.nvml_peak());
        assert_eq!(folded.whole_process_peak(7), full.whole_process_peak(7));
        assert_eq!(
            (folded.device(), folded.total()),
            (full.device(), full.total())
        );
        let learned = learn(&folded, "run.jsonl").expect("learns");
        assert_eq!(learned, learn(&full, "run.jsonl").expect("learns"));
        assert_eq!(learned.2.steps, 3_000);
    }
}
