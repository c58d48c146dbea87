//! What `grpofit calibrate` learns from run logs, per GPU model (NVML's name) and stack: the
//! CUDA context of that card and the allocator's slack ratio; and `calibration.toml`, the file
//! it keeps them in, written and read here (the binary finds the file).
//!
//! The context is measured as `CUDA_CONTEXT` was on the H200 (estimate.rs): what the device has
//! in use when a step ends, less torch's reserved memory at the step's peak, less what other
//! processes held before the run (the `prediction` line's NVML figure). The median over a run's
//! steps is that run's value; the median over the runs is the one the estimate uses.

use crate::measure::measured::{RunLog, StepRecord};
use crate::measure::step_time::{TimeSample, learn_time};
use crate::time::Efficiencies;
use crate::units::format_size;
use toml::Value;

/// One run's measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSample {
    /// the log it came from, as given
    pub log: String,
    pub context: u64,
    pub steps: u64,
    /// torch's reserved / allocated at the step of the largest reservation
    pub slack: f64,
    /// the same ratio as the estimate predicts it (the `prediction` line), when the log has one
    pub predicted_slack: Option<f64>,
    /// the step's time against its prediction, when the log has both (`step_time::learn_time`)
    pub time: Option<TimeSample>,
}

/// What was learned for one GPU model and stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub gpu: String,
    pub stack: String,
    pub runs: Vec<RunSample>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    pub entries: Vec<Entry>,
}

/// A learned value, with how far it can be trusted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Learned {
    pub median: u64,
    pub runs: usize,
    /// largest less smallest; None from one run
    pub spread: Option<u64>,
}

impl Learned {
    /// `from 3 runs, spread 12.0 MiB`, or `from 1 run: no spread known`
    pub fn uncertainty(&self) -> String {
        match self.spread {
            Some(s) => format!("from {} runs, spread {}", self.runs, format_size(s)),
            None => "from 1 run: no spread known".to_string(),
        }
    }
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some(v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2),
    }
}

impl Entry {
    pub fn context(&self) -> Option<Learned> {
        let values: Vec<u64> = self.runs.iter().map(|r| r.context).collect();
        let (min, max) = (values.iter().min()?, values.iter().max()?);
        Some(Learned {
            median: median(values.clone())?,
            runs: values.len(),
            spread: (values.len() > 1).then_some(max - min),
        })
    }

    /// The median measured slack ratio and, over the runs whose log had a prediction, the
    /// median predicted one.
    pub fn slack(&self) -> (f64, Option<f64>) {
        let mid = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        (
            mid(self.runs.iter().map(|r| r.slack).collect()).unwrap_or(1.0),
            mid(self.runs.iter().filter_map(|r| r.predicted_slack).collect()),
        )
    }
}

/// The efficiencies learned for a card and stack: each the median over the runs that timed
/// their steps, and the steps and logs they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedTime {
    pub efficiencies: Efficiencies,
    pub steps: u64,
    pub logs: Vec<String>,
}

impl LearnedTime {
    /// "step time calibrated on 12 steps of run.jsonl" (or "of 3 logs")
    pub fn said(&self) -> String {
        let of = match self.logs.as_slice() {
            [one] => one.clone(),
            many => format!("{} logs", many.len()),
        };
        format!("step time calibrated on {} steps of {of}", self.steps)
    }
}

impl Entry {
    /// The efficiencies learned from the runs that timed their steps.
    pub fn time(&self) -> Option<LearnedTime> {
        let timed: Vec<(&RunSample, &TimeSample)> = self
            .runs
            .iter()
            .filter_map(|r| Some((r, r.time.as_ref()?)))
            .collect();
        let mid = |f: fn(&Efficiencies) -> f64| {
            let mut v: Vec<f64> = timed.iter().map(|(_, t)| f(&t.efficiencies)).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len();
            (n > 0).then(|| (v[(n - 1) / 2] + v[n / 2]) / 2.0)
        };
        Some(LearnedTime {
            efficiencies: Efficiencies {
                decode_bandwidth: mid(|e| e.decode_bandwidth)?,
                matmul_peak: mid(|e| e.matmul_peak)?,
                eager_op_seconds: mid(|e| e.eager_op_seconds)?,
            },
            steps: timed.iter().map(|(_, t)| t.steps).sum(),
            logs: timed.iter().map(|(r, _)| r.log.clone()).collect(),
        })
    }
}

impl Calibration {
    /// The step time learned for the card `card` (grpofit's table's name, `hardware::Card`;
    /// or the name a user gave an unknown card) on `stack`: the entries whose NVML name is that
    /// card, their runs together.
    pub fn time_for(&self, card: &str, stack: &str) -> Option<LearnedTime> {
        let runs: Vec<RunSample> = self
            .entries
            .iter()
            .filter(|e| e.stack == stack)
            .filter(|e| crate::hardware::lookup(&e.gpu).map_or(e.gpu == card, |c| c.name == card))
            .flat_map(|e| e.runs.iter().cloned())
            .collect();
        Entry {
            gpu: card.to_string(),
            stack: stack.to_string(),
            runs,
        }
        .time()
    }

    /// What was learned for `gpu` (NVML's name, exactly) on `stack`.
    pub fn find(&self, gpu: &str, stack: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.gpu == gpu && e.stack == stack)
    }

    /// Adds a run (a log already there is measured again: its sample is replaced).
    pub fn add(&mut self, gpu: &str, stack: &str, sample: RunSample) {
        let entry = match self
            .entries
            .iter()
            .position(|e| e.gpu == gpu && e.stack == stack)
        {
            Some(i) => &mut self.entries[i],
            None => {
                self.entries.push(Entry {
                    gpu: gpu.to_string(),
                    stack: stack.to_string(),
                    runs: Vec::new(),
                });
                let last = self.entries.len() - 1;
                &mut self.entries[last]
            }
        };
        entry.runs.retain(|r| r.log != sample.log);
        entry.runs.push(sample);
    }
}

/// A run log nothing can be learned from: the log, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{log}: {problem}")]
pub struct LearnError {
    /// the log's name
    pub log: String,
    pub problem: NothingLearned,
}

/// Why a run log teaches nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NothingLearned {
    #[error("no GPU name: neither a callback `start` line nor an NVML sample names the GPU")]
    NoGpu,
    #[error(
        "no stack: no `prediction` line (grpofit run) and no trl or unsloth version in the `start` line"
    )]
    NoStack,
    #[error(
        "no `step` line: the context is learned from the callback's step lines (was GrpofitCallback passed to the trainer?)"
    )]
    NoSteps,
    #[error(
        "the device had less in use than torch reserved at every step: other processes or a different GPU's figures, nothing to learn"
    )]
    LessInUseThanReserved,
    #[error("no `step` line")]
    NoPeak,
    #[error("the peak step allocated 0 bytes: nothing to learn")]
    ZeroPeak,
    #[error("stack \"{stack}\": expected \"trl\" or \"unsloth\"; nothing learned")]
    UnknownStack { stack: String },
    #[error(
        "step {step}: `max_reserved` {reserved} against `max_allocated` {allocated} (ratio {ratio:.3}): torch reserves at least what it allocates; nothing learned"
    )]
    Slack {
        step: u64,
        reserved: u64,
        allocated: u64,
        ratio: f64,
    },
    #[error(
        "the `prediction` line's `reserved` / `allocated` is {ratio:.3}: a prediction reserves at least what it allocates; nothing learned"
    )]
    PredictedSlack { ratio: f64 },
}

impl NothingLearned {
    /// This reason, for the log `name`.
    fn of(self, name: &str) -> LearnError {
        LearnError {
            log: name.to_string(),
            problem: self,
        }
    }
}

/// The GPU, the stack and the measurement of one run log (`name` names it in errors).
pub fn learn(log: &RunLog, name: &str) -> Result<(String, String, RunSample), LearnError> {
    let gpu = log.device().ok_or_else(|| NothingLearned::NoGpu.of(name))?;
    let stack = log
        .stack()
        .ok_or_else(|| NothingLearned::NoStack.of(name))?;
    if log.steps.is_empty() {
        return Err(NothingLearned::NoSteps.of(name));
    }
    let before = log
        .prediction
        .as_ref()
        .and_then(|p| p.used_before)
        .unwrap_or(0);
    let context = log
        .all_steps
        .median_above_reserved(before)
        .ok_or_else(|| NothingLearned::LessInUseThanReserved.of(name))?;
    let peak: &StepRecord = log
        .steps
        .iter()
        .max_by_key(|s| s.max_reserved)
        .ok_or_else(|| NothingLearned::NoPeak.of(name))?;
    if peak.max_allocated == 0 {
        return Err(NothingLearned::ZeroPeak.of(name));
    }
    let predicted_slack = log
        .prediction
        .as_ref()
        .and_then(|p| Some(p.reserved? as f64 / p.allocated.filter(|a| *a > 0)? as f64));
    check_learned(name, stack, peak, predicted_slack)?;
    Ok((
        gpu.to_string(),
        stack.to_string(),
        RunSample {
            log: name.to_string(),
            context,
            steps: log.all_steps.count as u64,
            slack: peak.max_reserved as f64 / peak.max_allocated as f64,
            predicted_slack,
            time: learn_time(log).ok(),
        },
    ))
}

/// What torch's reserved / allocated ratio can be: reserved memory holds every allocated byte
/// (PyTorch `CUDACachingAllocator`: a block is carved out of a reserved segment), so the
/// ratio is at least 1; 100 is far past any measured slack (1.0-1.3 on the runs in
/// tests/realworld), so a larger one is a broken figure.
const SLACK_RANGE: std::ops::RangeInclusive<f64> = 1.0..=100.0;

/// The stacks a calibration is kept for (`Stack::name`).
const STACKS: [&str; 2] = ["trl", "unsloth"];

/// Refuses what would poison `calibration.toml`: an unknown stack, a peak step or a prediction
/// line whose reserved memory is below its allocated memory.
fn check_learned(
    name: &str,
    stack: &str,
    peak: &StepRecord,
    predicted: Option<f64>,
) -> Result<(), LearnError> {
    if !STACKS.contains(&stack) {
        return Err(NothingLearned::UnknownStack {
            stack: stack.to_string(),
        }
        .of(name));
    }
    let slack = peak.max_reserved as f64 / peak.max_allocated as f64;
    if !SLACK_RANGE.contains(&slack) {
        return Err(NothingLearned::Slack {
            step: peak.step,
            reserved: peak.max_reserved,
            allocated: peak.max_allocated,
            ratio: slack,
        }
        .of(name));
    }
    match predicted {
        Some(ratio) if !SLACK_RANGE.contains(&ratio) => {
            Err(NothingLearned::PredictedSlack { ratio }.of(name))
        }
        _ => Ok(()),
    }
}

/// The file's text: a header that says what it is, then one `[[gpu]]` per GPU model and stack
/// with a comment that sums it up and its runs.
pub fn to_toml(c: &Calibration) -> String {
    let mut t = String::from(
        "# grpofit calibration: what `grpofit calibrate` learned from your run logs, per GPU model\n\
         # (NVML's name) and stack. The estimate uses each GPU's median `context_bytes` instead of\n\
         # the built-in CUDA context (0.759 GiB, measured on an H200). `grpofit calibrate --reset`\n\
         # removes this file.\n",
    );
    for e in &c.entries {
        t += "\n[[gpu]]\n";
        t += &format!("name = {}\n", Value::from(e.gpu.as_str()));
        t += &format!("stack = {}\n", Value::from(e.stack.as_str()));
        if let Some(l) = e.context() {
            t += &format!(
                "# CUDA context {}, {}\n",
                format_size(l.median),
                l.uncertainty()
            );
        }
        let (slack, predicted) = e.slack();
        t += &format!(
            "# allocator slack (reserved / allocated at the peak): {slack:.3}{}\n",
            predicted.map_or(String::new(), |p| format!(", predicted {p:.3}"))
        );
        for r in &e.runs {
            t += "\n[[gpu.run]]\n";
            t += &format!("log = {}\n", Value::from(r.log.as_str()));
            t += &format!("context_bytes = {}\n", r.context);
            t += &format!("steps = {}\n", r.steps);
            t += &format!("slack = {}\n", Value::from(r.slack));
            if let Some(p) = r.predicted_slack {
                t += &format!("predicted_slack = {}\n", Value::from(p));
            }
            if let Some(time) = &r.time {
                t += &crate::measure::step_time::time_toml(time);
            }
        }
    }
    t
}

/// Most a CUDA context can be: the built-in one is 0.759 GiB (estimate.rs); 16 GiB is far past
/// any card's, so a larger value is a typo, not a measurement.
const CONTEXT_LIMIT: u64 = 16 << 30;

/// A calibration file that cannot be read: where (the file, its `[[gpu]]` entry and run) and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct CalibrationError {
    /// `calibration.toml`, `calibration.toml: [[gpu]] 2`, `calibration.toml: [[gpu]] 2 run 1`
    pub at: String,
    pub problem: CalibrationProblem,
}

/// What is wrong in a calibration file; values as the file writes them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrationProblem {
    #[error("not valid TOML: {}", .error.message().trim())]
    NotToml { error: toml::de::Error },
    #[error("unknown key `{key}` (only [[gpu]] tables)")]
    UnknownTopKey { key: String },
    #[error("`gpu` = {value}: expected [[gpu]] tables")]
    NotGpuTables { value: String },
    #[error("{value}: expected a table")]
    NotATable { value: String },
    #[error("`{key}` = {value}: expected a non-empty string")]
    NotText { key: String, value: String },
    #[error("`{key}` missing")]
    Missing { key: String },
    #[error("unknown key `{key}` (name, stack, [[gpu.run]])")]
    UnknownGpuKey { key: String },
    #[error("`stack` = \"{stack}\": expected \"trl\" or \"unsloth\"")]
    UnknownStack { stack: String },
    #[error("`run` = {value}: expected [[gpu.run]] tables")]
    NotRunTables { value: String },
    #[error("no [[gpu.run]]: nothing learned")]
    NoRuns,
    /// `known`: the keys a run takes
    #[error("unknown key `{key}` ({})", .known.join(", "))]
    UnknownRunKey {
        key: String,
        known: &'static [&'static str],
    },
    #[error("`{key}` = {value}: expected a whole number from 0 to {max}")]
    NotCount {
        key: String,
        value: String,
        max: u64,
    },
    #[error("`{key}` = {value}: expected a ratio from 1 to 100")]
    NotRatio { key: String, value: String },
    /// a step time's value: `expected` in words
    #[error("`{key}` = {value}: expected {expected}")]
    NotTime {
        key: String,
        value: String,
        expected: &'static str,
    },
}

impl CalibrationProblem {
    /// This problem, at `at`.
    fn at(self, at: &str) -> CalibrationError {
        CalibrationError {
            at: at.to_string(),
            problem: self,
        }
    }
}

/// Reads the file's text; `file` names it in errors, with the key and the value.
pub fn parse(text: &str, file: &str) -> Result<Calibration, CalibrationError> {
    let root: toml::Table = text
        .parse()
        .map_err(|error| CalibrationProblem::NotToml { error }.at(file))?;
    let mut c = Calibration::default();
    for (key, value) in &root {
        if key != "gpu" {
            return Err(CalibrationProblem::UnknownTopKey { key: key.clone() }.at(file));
        }
        let gpus = value.as_array().ok_or_else(|| {
            CalibrationProblem::NotGpuTables {
                value: value.to_string(),
            }
            .at(file)
        })?;
        for (i, gpu) in gpus.iter().enumerate() {
            c.entries
                .push(entry(gpu, &format!("{file}: [[gpu]] {}", i + 1))?);
        }
    }
    Ok(c)
}

/// Reads the file's text as `parse` does, but a bad `[[gpu]]` entry (or a key of another
/// kind) is skipped with a notice instead of failing: a stored file never breaks a later
/// command. Only text that is not TOML at all is an error.
pub fn parse_skipping(
    text: &str,
    file: &str,
) -> Result<(Calibration, Vec<String>), CalibrationError> {
    let root: toml::Table = text
        .parse()
        .map_err(|error| CalibrationProblem::NotToml { error }.at(file))?;
    let (mut c, mut skipped) = (Calibration::default(), Vec::new());
    for (key, value) in &root {
        let Some(gpus) = value.as_array().filter(|_| key == "gpu") else {
            skipped.push(format!("{file}: key `{key}`: only [[gpu]] tables"));
            continue;
        };
        for (i, gpu) in gpus.iter().enumerate() {
            match entry(gpu, &format!("{file}: [[gpu]] {}", i + 1)) {
                Ok(e) => c.entries.push(e),
                Err(e) => skipped.push(e.to_string()),
            }
        }
    }
    Ok((c, skipped))
}

fn table<'a>(v: &'a Value, at: &str) -> Result<&'a toml::Table, CalibrationError> {
    v.as_table().ok_or_else(|| {
        CalibrationProblem::NotATable {
            value: v.to_string(),
        }
        .at(at)
    })
}

fn text(t: &toml::Table, key: &str, at: &str) -> Result<String, CalibrationError> {
    match t.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(v) => Err(CalibrationProblem::NotText {
            key: key.to_string(),
            value: v.to_string(),
        }
        .at(at)),
        None => Err(CalibrationProblem::Missing {
            key: key.to_string(),
        }
        .at(at)),
    }
}

fn entry(v: &Value, at: &str) -> Result<Entry, CalibrationError> {
    let t = table(v, at)?;
    if let Some(k) = t
        .keys()
        .find(|k| !matches!(k.as_str(), "name" | "stack" | "run"))
    {
        return Err(CalibrationProblem::UnknownGpuKey { key: k.clone() }.at(at));
    }
    let stack = text(t, "stack", at)?;
    if !STACKS.contains(&stack.as_str()) {
        return Err(CalibrationProblem::UnknownStack { stack }.at(at));
    }
    let runs = match t.get("run") {
        Some(Value::Array(runs)) if !runs.is_empty() => runs,
        Some(v) => {
            return Err(CalibrationProblem::NotRunTables {
                value: v.to_string(),
            }
            .at(at));
        }
        None => return Err(CalibrationProblem::NoRuns.at(at)),
    };
    Ok(Entry {
        gpu: text(t, "name", at)?,
        stack,
        runs: runs
            .iter()
            .enumerate()
            .map(|(i, r)| run(r, &format!("{at} run {}", i + 1)))
            .collect::<Result<_, _>>()?,
    })
}

fn run(v: &Value, at: &str) -> Result<RunSample, CalibrationError> {
    let t = table(v, at)?;
    const KEYS: [&str; 13] = [
        "log",
        "context_bytes",
        "steps",
        "slack",
        "predicted_slack",
        "step_seconds",
        "predicted_step_seconds",
        "steps_timed",
        "generation_seconds",
        "predicted_generation_seconds",
        "decode_bandwidth",
        "matmul_peak",
        "eager_op_seconds",
    ];
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(CalibrationProblem::UnknownRunKey {
            key: k.clone(),
            known: &KEYS,
        }
        .at(at));
    }
    let missing = |key: &str| {
        CalibrationProblem::Missing {
            key: key.to_string(),
        }
        .at(at)
    };
    let count = |key: &str, max: u64| -> Result<u64, CalibrationError> {
        match t.get(key) {
            Some(Value::Integer(n)) if (0..=max as i64).contains(n) => Ok(*n as u64),
            Some(v) => Err(CalibrationProblem::NotCount {
                key: key.to_string(),
                value: v.to_string(),
                max,
            }
            .at(at)),
            None => Err(missing(key)),
        }
    };
    let ratio = |key: &str| -> Result<Option<f64>, CalibrationError> {
        match t.get(key) {
            None => Ok(None),
            Some(v) => match v.as_float().or_else(|| v.as_integer().map(|i| i as f64)) {
                Some(x) if SLACK_RANGE.contains(&x) => Ok(Some(x)),
                _ => Err(CalibrationProblem::NotRatio {
                    key: key.to_string(),
                    value: v.to_string(),
                }
                .at(at)),
            },
        }
    };
    Ok(RunSample {
        log: text(t, "log", at)?,
        context: count("context_bytes", CONTEXT_LIMIT)?,
        steps: count("steps", u64::from(u32::MAX))?,
        slack: ratio("slack")?.ok_or_else(|| missing("slack"))?,
        predicted_slack: ratio("predicted_slack")?,
        time: crate::measure::step_time::time_from_toml(t).map_err(|o| {
            CalibrationProblem::NotTime {
                key: o.key,
                value: o.value,
                expected: o.expected,
            }
            .at(at)
        })?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::measured::parse_log;

    const GIB: u64 = 1 << 30;

    fn log(name: &str, before: u64, used: u64, reserved: u64) -> RunLog {
        let text = format!(
            "{{\"kind\": \"prediction\", \"device\": \"{name}\", \"used_before\": {before}, \"stack\": \"trl\", \"allocated\": 100, \"reserved\": 110}}\n\
             {{\"kind\": \"step\", \"step\": 1, \"max_allocated\": {}, \"max_reserved\": {reserved}, \"free\": {}, \"total\": {}}}\n",
            reserved / 2,
            24 * GIB - used,
            24 * GIB
        );
        parse_log(&text, "x").expect("a log")
    }

    #[test]
    fn learns_used_less_reserved_less_what_others_held() {
        let (gpu, stack, s) =
            learn(&log("NVIDIA L4", GIB, 10 * GIB, 8 * GIB), "a.jsonl").expect("learns");
        assert_eq!((gpu.as_str(), stack.as_str()), ("NVIDIA L4", "trl"));
        assert_eq!(s.context, GIB);
        assert!((s.slack - 2.0).abs() < 1e-12);
        assert_eq!(s.predicted_slack, Some(1.1));
        // less in use than reserved: no measurement of this process
        let e = learn(&log("NVIDIA L4", 3 * GIB, 10 * GIB, 8 * GIB), "b.jsonl")
            .expect_err("nothing to learn")
            .to_string();
        assert!(e.starts_with("b.jsonl: "), "{e}");
    }

    #[test]
    fn the_file_round_trips_and_one_run_says_it_has_no_spread() {
        let mut c = Calibration::default();
        for (i, ctx) in [(1, 500u64 << 20), (2, 540 << 20), (3, 520 << 20)] {
            let (gpu, stack, mut s) = learn(
                &log("NVIDIA GeForce RTX 4090", 0, 10 * GIB, 10 * GIB - ctx),
                "x",
            )
            .expect("learns");
            s.log = format!("run{i}.jsonl");
            c.add(&gpu, &stack, s);
        }
        let (gpu, stack, s) =
            learn(&log("NVIDIA L4", 0, 9 * GIB, 8 * GIB), "l4.jsonl").expect("learns");
        c.add(&gpu, &stack, s);
        let text = to_toml(&c);
        assert_eq!(parse(&text, "calibration.toml"), Ok(c.clone()));
        let e = c.find("NVIDIA GeForce RTX 4090", "trl").expect("entry");
        let l = e.context().expect("runs");
        assert_eq!((l.median, l.runs, l.spread), (520 << 20, 3, Some(40 << 20)));
        assert!(c.find("NVIDIA GeForce RTX 4090", "unsloth").is_none());
        assert!(text.contains("from 1 run: no spread known"), "{text}");
        assert!(text.contains("from 3 runs, spread 40.0 MiB"), "{text}");
    }

    #[test]
    fn every_cut_of_a_log_reads_or_errs_and_what_it_learns_round_trips() {
        let text = "{\"kind\": \"prediction\", \"device\": \"NVIDIA L4\", \"used_before\": 5, \"stack\": \"unsloth\", \"allocated\": 7, \"reserved\": 9}\n\
                    {\"kind\": \"nvml\", \"gpus\": [{\"name\": \"NVIDIA L4\", \"used\": 40, \"total\": 100}], \"tree\": 30}\n\
                    {\"kind\": \"step\", \"step\": 1, \"max_allocated\": 10, \"max_reserved\": 12, \"free\": 60, \"total\": 100}\n";
        for cut in 0..=text.len() {
            let Ok(log) = parse_log(&text[..cut], "cut.jsonl") else {
                continue;
            };
            if let Ok((gpu, stack, sample)) = learn(&log, "cut.jsonl") {
                assert_eq!(sample.context, 40 - 12 - 5);
                let mut c = Calibration::default();
                c.add(&gpu, &stack, sample);
                assert_eq!(parse(&to_toml(&c), "c.toml"), Ok(c));
            }
        }
    }

    #[test]
    fn a_bad_value_is_named_with_its_key() {
        let good = "[[gpu]]\nname = \"NVIDIA L4\"\nstack = \"trl\"\n[[gpu.run]]\nlog = \"a\"\ncontext_bytes = 1\nsteps = 1\nslack = 1.1\n";
        assert!(parse(good, "c.toml").is_ok());
        for (bad, needle) in [
            (
                good.replace("context_bytes = 1", "context_bytes = -5"),
                "`context_bytes` = -5",
            ),
            (
                good.replace("context_bytes = 1", "context_bytes = \"big\""),
                "`context_bytes` = \"big\"",
            ),
            (good.replace("\"trl\"", "\"keras\""), "`stack` = \"keras\""),
            (good.replace("slack = 1.1", "slack = 0.5"), "`slack` = 0.5"),
            (
                good.replace("steps = 1", "stepz = 1"),
                "unknown key `stepz`",
            ),
            (format!("extra = 1\n{good}"), "unknown key `extra`"),
            (
                "[[gpu]]\nname = \"x\"\nstack = \"trl\"\n".to_string(),
                "no [[gpu.run]]",
            ),
            ("[[gpu".to_string(), "not valid TOML"),
        ] {
            let e = parse(&bad, "c.toml").expect_err(needle).to_string();
            assert!(
                e.starts_with("c.toml: ") && e.contains(needle),
                "{needle}: {e}"
            );
        }
    }

    #[test]
    fn a_refused_file_carries_the_entry_and_the_key() {
        let e = parse("[[gpu]]\nname = \"x\"\nstack = \"trl\"\n", "c.toml").unwrap_err();
        assert_eq!(
            e,
            CalibrationError {
                at: "c.toml: [[gpu]] 1".into(),
                problem: CalibrationProblem::NoRuns
            }
        );
        assert_eq!(
            e.to_string(),
            "c.toml: [[gpu]] 1: no [[gpu.run]]: nothing learned"
        );
        let e = learn(&RunLog::default(), "a.jsonl").unwrap_err();
        assert_eq!(
            e,
            LearnError {
                log: "a.jsonl".into(),
                problem: NothingLearned::NoGpu
            }
        );
    }
}
