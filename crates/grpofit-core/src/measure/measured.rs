//! A run measured against its estimate: the JSON-lines log `grpofit_callback.py` writes (a
//! `start` line, then one `step` line per training step), to which `grpofit run` adds its own
//! lines (a `prediction` line, `nvml` samples, an `exit` line), and the peaks it compares with
//! the estimate: torch's allocated and reserved bytes, the device's used memory and the NVML
//! peak of the command's processes.
//!
//! torch's counters count every tensor of the training process: the weights, adapters and
//! optimizer states as well as the step's activations, and a colocated vLLM's tensors (its
//! weights copy, KV cache and CUDA graph pools). GRPOTrainer generates inside `training_step`,
//! so a step's peak covers generation and training alike: the prediction is the larger of the
//! two phases.

use crate::measure::kept::{self, StepTally};
use crate::measure::predicted_time::{self, PredictedTime};
use crate::measure::reward_time::{self, StepRewards};
use crate::memory::estimate::{Estimate, Part, Phase};
use crate::run::{RunConfig, Stack};
use serde::Serialize;
use serde_json::Value;

/// The `start` line: the device and the library versions the run used.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Start {
    pub device: Option<String>,
    pub total: Option<u64>,
    /// `torch`, `trl`, `transformers`, ... as the line gives them
    pub versions: Vec<(String, String)>,
}

/// One `step` line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepRecord {
    pub step: u64,
    pub max_allocated: u64,
    pub max_reserved: u64,
    pub free: u64,
    pub total: u64,
    pub seconds: Option<f64>,
    /// the step's generation as TRL timed it (`trl_timings`, `predicted_time::GENERATION`)
    pub generation_seconds: Option<f64>,
    /// the step's rewards as TRL timed them (`reward_funcs`, `reward_time`)
    pub rewards: Option<StepRewards>,
}

impl StepRecord {
    /// what the whole device had in use when the step ended
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

/// The `prediction` line `grpofit run` writes before it starts the command: the GPU it saw and
/// what the estimate predicts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PredictionRecord {
    /// NVML's name of GPU 0, when NVML answered
    pub device: Option<String>,
    /// the capacity the estimate was made for
    pub total: Option<u64>,
    /// NVML's used memory on GPU 0 before the command started (other processes)
    pub used_before: Option<u64>,
    /// `trl` or `unsloth`
    pub stack: Option<String>,
    /// the run file `grpofit run` was given (an absolute path), or the preset
    pub config: Option<String>,
    pub preset: Option<String>,
    /// the estimate's peak (`total_bytes`)
    pub peak: Option<u64>,
    /// torch's allocated and reserved peaks as `predicted` gives them
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    /// the step time predicted for the run, when the card was known
    pub step_time: Option<PredictedTime>,
}

/// One `nvml` line: GPU 0's used memory and the command's process tree's, at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmlSample {
    pub device: Option<String>,
    pub used: u64,
    pub total: Option<u64>,
    /// the memory NVML lists for the command's processes, when it lists any
    pub tree: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunLog {
    pub start: Option<Start>,
    /// the step lines read; past `kept::MOST_KEPT`, only those a figure reads (`kept::fold`)
    pub steps: Vec<StepRecord>,
    /// what every step line adds up to, folded or not: their count, the median context
    pub all_steps: StepTally,
    pub prediction: Option<PredictionRecord>,
    pub samples: Vec<NvmlSample>,
    /// the `exit` line `grpofit run` writes when the command has ended
    pub exit: Option<Exit>,
}

/// The `exit` line: how the command ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Exit {
    /// grpofit's exit status (128 + `signal` when a signal ended the command), and that signal
    pub code: Option<u64>,
    pub signal: Option<u64>,
}

/// A run log that cannot be read: where (`log.jsonl:7`, or the log alone) and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct LogError {
    /// the log's name and the 1-based line: `log.jsonl:7`
    pub at: String,
    pub problem: LogProblem,
}

/// What is wrong with a run log's line.
#[derive(Debug, thiserror::Error)]
pub enum LogProblem {
    #[error("cannot read: {0}")]
    Unreadable(std::io::Error),
    #[error("not UTF-8 text")]
    NotUtf8,
    #[error("not a JSON line: {0}")]
    NotJson(serde_json::Error),
    #[error("expected a JSON object")]
    NotAnObject,
    #[error("no `kind` (\"start\", \"step\", \"prediction\" or \"nvml\")")]
    NoKind,
    #[error("`{key}` missing or not a byte count")]
    MissingBytes { key: String },
    /// `value` as the JSON writes it
    #[error("`{key}` = {value}: not a byte count")]
    NotBytes { key: String, value: String },
    #[error("{0}")]
    Out(#[from] predicted_time::OutOfRange),
    #[error("`gpus` missing or empty")]
    NoGpus,
    /// the start line's or the prediction's
    #[error("`total` = 0: the GPU's total memory cannot be 0 bytes; this log cannot be read")]
    ZeroTotal,
    #[error("step {step}: `total` = 0: the GPU's total memory cannot be 0 bytes")]
    StepZeroTotal { step: u64 },
    #[error("step {step}: `free` = {free} above `total` = {total}: not a measurement")]
    FreeAboveTotal { step: u64, free: u64, total: u64 },
}

impl LogProblem {
    /// This problem, at `at`.
    fn at(self, at: &str) -> LogError {
        LogError {
            at: at.to_string(),
            problem: self,
        }
    }
}

/// Reads the log; `name` prefixes errors (`log.jsonl:2: ...`). Blank lines and lines of other
/// kinds are skipped; a line that is no JSON object, or a `step`/`start`/`prediction`/`nvml`
/// line with a field missing or of the wrong type, is an error. A last line cut short (the run
/// still writing, or killed mid-line) is an error too: it names the line.
pub fn parse_log(text: &str, name: &str) -> Result<RunLog, LogError> {
    let mut log = RunLog::default();
    for (i, line) in text.lines().enumerate() {
        read_line(&mut log, line, &format!("{name}:{}", i + 1))?;
    }
    Ok(log)
}

/// Reads the log's last run: a log that `grpofit run --append` (or a training script run twice)
/// added a second run to holds several, which are never mixed. The notes say which lines were
/// read when there was more than one run, and which were skipped for their length
/// (`lines::MAX_LINE_BYTES`). Errors name the log and the line.
pub fn parse_last_run(text: &str, name: &str) -> Result<(RunLog, Vec<String>), LogError> {
    parse_last_run_from(text.as_bytes(), name)
}

/// `parse_last_run`, a line at a time from `reader`: a log of any size is read in bounded
/// memory (its text is not held, a line longer than `lines::MAX_LINE_BYTES` is skipped, and
/// its steps and samples are folded: `kept`). A line that is not UTF-8 is an error naming it.
pub fn parse_last_run_from(
    mut reader: impl std::io::BufRead,
    name: &str,
) -> Result<(RunLog, Vec<String>), LogError> {
    use super::lines::{self, Line};
    let mut log = RunLog::default();
    let (mut runs, mut first) = (1, 1);
    let mut bytes = Vec::new();
    let mut skipped = lines::Skipped::default();
    for i in 0.. {
        match lines::next(&mut reader, &mut bytes, lines::MAX_LINE_BYTES) {
            Ok(Line::End) => break,
            Ok(Line::Held) => {}
            Ok(Line::TooLong(len)) => {
                skipped.add(i + 1, len);
                continue;
            }
            Err(e) => return Err(LogProblem::Unreadable(e).at(name)),
        }
        let at = format!("{name}:{}", i + 1);
        let line = std::str::from_utf8(&bytes).map_err(|_| LogProblem::NotUtf8.at(&at))?;
        if starts_another_run(&log, line) {
            log = RunLog::default();
            (runs, first) = (runs + 1, i + 1);
        }
        let steps = log.steps.len();
        read_line(&mut log, line, &at)?;
        check_totals(&log, steps, &at)?;
        log.fold();
    }
    let note = (runs > 1).then(|| {
        format!(
            "{name} holds {runs} runs: reading the last one, from line {first} (one run per log)"
        )
    });
    Ok((log, note.into_iter().chain(skipped.notice(name)).collect()))
}

/// Whether `line` begins a new run after what `log` holds: a `prediction` line (the first line
/// `grpofit run` writes) after a prediction, a step or an exit; a `start` line (the callback's
/// first) after a start, a step or an exit.
fn starts_another_run(log: &RunLog, line: &str) -> bool {
    let (prediction, start) = (line.contains("\"prediction\""), line.contains("\"start\""));
    if !prediction && !start {
        return false;
    }
    let kind = serde_json::from_str::<Value>(line.trim())
        .ok()
        .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string));
    let ran = !log.steps.is_empty() || log.exit.is_some();
    match kind.as_deref() {
        Some("prediction") => ran || log.prediction.is_some(),
        Some("start") => ran || log.start.is_some(),
        _ => false,
    }
}

/// After the line `at`: a GPU total of 0 (the start line's, or a step's) or a step whose free
/// memory exceeds its total is an error naming the line: every figure `check` gives would be
/// divided by it, and the blame is the log's, not `--gpu-mem`'s.
fn check_totals(log: &RunLog, steps_before: usize, at: &str) -> Result<(), LogError> {
    let start = log.start.as_ref().and_then(|s| s.total);
    if start == Some(0) || log.prediction.as_ref().and_then(|p| p.total) == Some(0) {
        return Err(LogProblem::ZeroTotal.at(at));
    }
    match log.steps.get(steps_before) {
        Some(s) if s.total == 0 => Err(LogProblem::StepZeroTotal { step: s.step }.at(at)),
        Some(s) if s.free > s.total => Err(LogProblem::FreeAboveTotal {
            step: s.step,
            free: s.free,
            total: s.total,
        }
        .at(at)),
        _ => Ok(()),
    }
}

/// Adds one line of a log to `log`; `at` (`log.jsonl:7`) prefixes its error. A blank line or a
/// line of another kind changes nothing; on an error `log` is left as it was.
pub fn read_line(log: &mut RunLog, line: &str, at: &str) -> Result<(), LogError> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(());
    }
    let value: Value = serde_json::from_str(line).map_err(|e| LogProblem::NotJson(e).at(at))?;
    let Some(object) = value.as_object() else {
        return Err(LogProblem::NotAnObject.at(at));
    };
    let fields = Fields { object, at };
    match object.get("kind").and_then(Value::as_str) {
        Some("start") => log.start = Some(fields.start()),
        Some("step") => {
            let step = fields.step()?;
            log.all_steps.add(step.used(), step.max_reserved);
            log.steps.push(step);
        }
        Some("prediction") => log.prediction = Some(fields.prediction()?),
        Some("nvml") => log.samples.push(fields.nvml()?),
        Some("exit") => log.exit = Some(fields.exit()),
        Some(_) => {}
        None => return Err(LogProblem::NoKind.at(at)),
    }
    Ok(())
}

/// One line's fields, read with errors that name the line and the key.
struct Fields<'a> {
    object: &'a serde_json::Map<String, Value>,
    at: &'a str,
}

impl Fields<'_> {
    fn bytes(&self, key: &str) -> Result<u64, LogError> {
        self.object.get(key).and_then(Value::as_u64).ok_or_else(|| {
            LogProblem::MissingBytes {
                key: key.to_string(),
            }
            .at(self.at)
        })
    }

    /// absent or null: None; anything but a byte count: an error naming the value
    fn optional_bytes(&self, key: &str) -> Result<Option<u64>, LogError> {
        match self.object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                LogProblem::NotBytes {
                    key: key.to_string(),
                    value: v.to_string(),
                }
                .at(self.at)
            }),
        }
    }

    fn text(&self, key: &str) -> Option<String> {
        self.object
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn start(&self) -> Start {
        let versions = self
            .object
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "kind" | "device" | "total" | "free"))
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        Start {
            device: self.text("device"),
            total: self.object.get("total").and_then(Value::as_u64),
            versions,
        }
    }

    fn step(&self) -> Result<StepRecord, LogError> {
        Ok(StepRecord {
            step: self.bytes("step")?,
            max_allocated: self.bytes("max_allocated")?,
            max_reserved: self.bytes("max_reserved")?,
            free: self.bytes("free")?,
            total: self.bytes("total")?,
            seconds: predicted_time::step_seconds(self.object.get("seconds"))
                .map_err(|o| LogProblem::Out(o).at(self.at))?,
            generation_seconds: predicted_time::generation(self.object.get("trl_timings"))
                .map_err(|o| LogProblem::Out(o).at(self.at))?,
            rewards: reward_time::step_rewards(
                self.object.get("trl_timings"),
                self.object.get("reward_funcs"),
            )
            .map_err(|o| LogProblem::Out(o).at(self.at))?,
        })
    }

    fn prediction(&self) -> Result<PredictionRecord, LogError> {
        Ok(PredictionRecord {
            device: self.text("device"),
            total: self.optional_bytes("total")?,
            used_before: self.optional_bytes("used_before")?,
            stack: self.text("stack"),
            config: self.text("config"),
            preset: self.text("preset"),
            peak: self.optional_bytes("peak")?,
            allocated: self.optional_bytes("allocated")?,
            reserved: self.optional_bytes("reserved")?,
            step_time: PredictedTime::read(self.object.get("step_time"))
                .map_err(|o| LogProblem::Out(o).at(self.at))?,
        })
    }

    fn exit(&self) -> Exit {
        Exit {
            code: self.object.get("code").and_then(Value::as_u64),
            signal: self.object.get("signal").and_then(Value::as_u64),
        }
    }

    /// GPU 0 of the `gpus` array, and the process tree's memory.
    fn nvml(&self) -> Result<NvmlSample, LogError> {
        let gpu = self
            .object
            .get("gpus")
            .and_then(Value::as_array)
            .and_then(|gpus| gpus.first())
            .and_then(Value::as_object)
            .ok_or_else(|| LogProblem::NoGpus.at(self.at))?;
        let gpu = Fields {
            object: gpu,
            at: self.at,
        };
        Ok(NvmlSample {
            device: gpu.text("name"),
            used: gpu.bytes("used")?,
            total: gpu.optional_bytes("total")?,
            tree: self.optional_bytes("tree")?,
        })
    }
}

/// The peaks over every step of the log, and how many steps there were.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measured {
    pub steps: usize,
    pub max_allocated: u64,
    pub max_reserved: u64,
    /// `total - free`, at its largest
    pub max_used: u64,
    pub total: u64,
}

impl RunLog {
    /// None when the log has no step line.
    pub fn measured(&self) -> Option<Measured> {
        let last = self.steps.last()?;
        Some(Measured {
            steps: self.all_steps.count,
            max_allocated: self.steps.iter().map(|s| s.max_allocated).max()?,
            max_reserved: self.steps.iter().map(|s| s.max_reserved).max()?,
            max_used: self.steps.iter().map(StepRecord::used).max()?,
            total: last.total,
        })
    }

    /// The device's memory: the start line's, else the steps', else what `grpofit run` saw.
    pub fn total(&self) -> Option<u64> {
        self.start
            .as_ref()
            .and_then(|s| s.total)
            .or_else(|| self.steps.last().map(|s| s.total))
            .or_else(|| self.prediction.as_ref().and_then(|p| p.total))
    }

    /// The GPU's name: the callback's, else NVML's (the prediction line's or a sample's).
    pub fn device(&self) -> Option<&str> {
        self.start
            .as_ref()
            .and_then(|s| s.device.as_deref())
            .or_else(|| self.prediction.as_ref().and_then(|p| p.device.as_deref()))
            .or_else(|| self.samples.iter().find_map(|s| s.device.as_deref()))
    }

    /// The stack: the prediction line's, else `unsloth` when the callback saw it installed.
    pub fn stack(&self) -> Option<&str> {
        self.prediction
            .as_ref()
            .and_then(|p| p.stack.as_deref())
            .or_else(|| {
                let start = self.start.as_ref()?;
                let has = |p: &str| start.versions.iter().any(|(k, _)| k == p);
                if has("unsloth") {
                    Some("unsloth")
                } else if has("trl") {
                    Some("trl")
                } else {
                    None
                }
            })
    }

    /// The NVML peak of the command's processes: the largest process-tree figure, else the
    /// largest used memory less what was in use before the command started. None without
    /// samples.
    pub fn nvml_peak(&self) -> Option<u64> {
        let tree = self.samples.iter().filter_map(|s| s.tree).max();
        let before = self
            .prediction
            .as_ref()
            .and_then(|p| p.used_before)
            .unwrap_or(0);
        tree.or_else(|| {
            let used = self.samples.iter().map(|s| s.used).max()?;
            Some(used.saturating_sub(before))
        })
    }
}

impl RunLog {
    /// Past `kept::MOST_KEPT` steps or samples, only those a figure reads are kept: the steps
    /// of the largest allocated, reserved and used memory ([`RunLog::measured`], the
    /// calibration's peak step) and the last `kept::TIMED_TAIL` (the step time's); the first
    /// sample that names a GPU ([`RunLog::device`]), those of the largest process tree and
    /// used memory ([`RunLog::nvml_peak`]) and the last. Of equals, the last.
    pub fn fold(&mut self) {
        let in_a_row = kept::fold_keeping_tail(&mut self.steps, |s| {
            [
                kept::last_largest(s, |s| s.max_allocated),
                kept::last_largest(s, |s| s.max_reserved),
                kept::last_largest(s, StepRecord::used),
            ]
        });
        self.all_steps.in_a_row_from = in_a_row.unwrap_or(self.all_steps.in_a_row_from);
        kept::fold(&mut self.samples, |s| {
            let tree = s.iter().filter_map(|s| s.tree).max();
            [
                s.iter().position(|s| s.device.is_some()),
                tree.and_then(|t| s.iter().rposition(|s| s.tree == Some(t))),
                kept::last_largest(s, |s| s.used),
                s.len().checked_sub(1),
            ]
        });
    }

    /// The whole process's peak as far as the log shows it: NVML's peak for the command's
    /// processes ([`RunLog::nvml_peak`]), or torch's largest reserved plus `context` (the CUDA
    /// context, which no torch counter holds), whichever is larger. None when the log has
    /// neither a sample nor a step.
    pub fn whole_process_peak(&self, context: u64) -> Option<u64> {
        let torch = self.measured().map(|m| m.max_reserved + context);
        self.nvml_peak().max(torch)
    }
}

/// What the estimate predicts torch's counters and the device will show at a step's peak.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Predicted {
    pub allocated: u64,
    pub reserved: u64,
    /// the estimate's total: the larger phase, CUDA context included
    pub used: u64,
    /// the phase whose torch memory is the larger
    pub phase: Phase,
}

/// Torch's view of the estimate. The training phase: `training_peak_allocated_bytes` (weights
/// on TRL, adapters, optimizer states, the step's activations and logits) plus what the same
/// process holds beside it: Unsloth's weights (counted as vLLM's share, or as base weights,
/// not in the step's figure) and a colocated vLLM's tensors kept while training; reserved
/// likewise from `training_peak_reserved_bytes`. The generation phase, when there is one: its
/// components less the CUDA context (and, for allocated, the allocator's slack). vLLM's
/// non-torch memory (NCCL and the like) is in no torch counter and is left out of both.
pub fn predicted(run: &RunConfig, est: &Estimate) -> Predicted {
    let phase = |which: Phase| {
        if est.phases.is_empty() {
            (est.peak_phase == which).then_some(est.components.as_slice())
        } else {
            est.phases
                .iter()
                .find(|p| p.phase == which)
                .map(|p| p.components.as_slice())
        }
    };
    let bytes = |components: &[crate::memory::estimate::Component], part: Part| -> u64 {
        components
            .iter()
            .filter(|c| c.part == part)
            .map(|c| c.bytes)
            .sum()
    };
    let non_torch = |components: &[crate::memory::estimate::Component]| {
        est.vllm
            .as_ref()
            .map_or(0, |v| v.non_torch_bytes)
            .min(bytes(components, Part::VllmWeights))
    };
    let beside_step = phase(Phase::Training).map_or(0, |c| {
        let weights = bytes(c, Part::SharedWeights)
            + if run.stack == Stack::Unsloth {
                bytes(c, Part::BaseWeights) + bytes(c, Part::ExpertWeights)
            } else {
                0
            };
        let vllm = bytes(c, Part::VllmWeights)
            + bytes(c, Part::VllmCudaGraphs)
            + bytes(c, Part::VllmKvCache);
        (weights + vllm).saturating_sub(non_torch(c))
    });
    let training = (
        est.training_peak_allocated_bytes + beside_step,
        est.training_peak_reserved_bytes + beside_step,
    );
    let generation = phase(Phase::Generation).map_or((0, 0), |c| {
        let total: u64 = c.iter().map(|c| c.bytes).sum();
        let reserved = total
            .saturating_sub(bytes(c, Part::CudaContext))
            .saturating_sub(non_torch(c));
        (
            reserved.saturating_sub(bytes(c, Part::AllocatorSlack)),
            reserved,
        )
    });
    let (phase, (allocated, reserved)) = if generation.0 > training.0 {
        (Phase::Generation, generation)
    } else {
        (Phase::Training, training)
    };
    Predicted {
        allocated,
        reserved: reserved.max(generation.1).max(training.1),
        used: est.total_bytes,
        phase,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Good,
    Overestimated,
    Underestimated,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Overestimated => "overestimated",
            Verdict::Underestimated => "underestimated",
        }
    }
}

/// Within this many percent of the measurement, the estimate is good.
pub const GOOD_WITHIN_PERCENT: f64 = 5.0;

/// One figure, predicted against measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: &'static str,
    pub predicted_bytes: u64,
    pub measured_bytes: u64,
    /// `(predicted - measured) / measured`, in percent: positive when the estimate is above
    pub error_percent: f64,
    pub verdict: Verdict,
}

impl Row {
    pub fn new(name: &'static str, predicted: u64, measured: u64) -> Row {
        let error = if measured == 0 {
            if predicted == 0 { 0.0 } else { f64::INFINITY }
        } else {
            (predicted as f64 - measured as f64) / measured as f64 * 100.0
        };
        let verdict = if error.abs() <= GOOD_WITHIN_PERCENT {
            Verdict::Good
        } else if error > 0.0 {
            Verdict::Overestimated
        } else {
            Verdict::Underestimated
        };
        Row {
            name,
            predicted_bytes: predicted,
            measured_bytes: measured,
            error_percent: error,
            verdict,
        }
    }
}

/// The three comparisons: torch's peak allocated, its peak reserved, the device's peak use.
pub fn compare(predicted: &Predicted, measured: &Measured) -> Vec<Row> {
    vec![
        Row::new(
            "peak allocated (torch)",
            predicted.allocated,
            measured.max_allocated,
        ),
        Row::new(
            "peak reserved (torch)",
            predicted.reserved,
            measured.max_reserved,
        ),
        Row::new(
            "device in use (total - free)",
            predicted.used,
            measured.max_used,
        ),
    ]
}

/// The command's processes at their NVML peak (what `grpofit run` sampled) against the
/// estimate's total: everything the run holds on the device, CUDA context included.
pub fn nvml_row(predicted: &Predicted, nvml_peak: u64) -> Row {
    Row::new("whole process (NVML peak)", predicted.used, nvml_peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"kind": "start", "device": "NVIDIA H200", "total": 1000, "torch": "2.9.0", "trl": "1.15.0"}

{"kind": "step", "step": 1, "max_allocated": 500, "max_reserved": 600, "free": 300, "total": 1000, "seconds": 1.5}
{"kind": "step", "step": 2, "max_allocated": 520, "max_reserved": 580, "free": 350, "total": 1000, "seconds": null}
{"kind": "note", "text": "other kinds are skipped"}
"#;

    #[test]
    fn reads_the_start_and_the_steps_skipping_blank_lines() {
        let log = parse_log(LOG, "log.jsonl").expect("reads");
        let start = log.start.clone().expect("start");
        assert_eq!(start.device.as_deref(), Some("NVIDIA H200"));
        assert_eq!(start.total, Some(1000));
        assert!(start.versions.contains(&("trl".into(), "1.15.0".into())));
        assert_eq!(log.steps.len(), 2);
        let m = log.measured().expect("steps");
        assert_eq!(
            (m.max_allocated, m.max_reserved, m.max_used),
            (520, 600, 700)
        );
        // no NVML sample: torch's reserved peak and the context
        assert_eq!(log.whole_process_peak(50), Some(650));
        assert_eq!(RunLog::default().whole_process_peak(50), None);
    }

    #[test]
    fn a_bad_line_is_named_by_its_number() {
        let text = "{\"kind\": \"start\"}\n{\"kind\": \"step\", \"step\": 1\n";
        let e = parse_log(text, "log.jsonl")
            .expect_err("line 2 is cut")
            .to_string();
        assert!(e.starts_with("log.jsonl:2:"), "{e}");
        let e = parse_log("\n[1]\n", "x")
            .expect_err("no object")
            .to_string();
        assert!(e.starts_with("x:2:"), "{e}");
        let e = parse_log(r#"{"kind": "step", "step": 1}"#, "x")
            .expect_err("fields")
            .to_string();
        assert!(e.contains("max_allocated"), "{e}");
    }

    #[test]
    fn reads_what_grpofit_run_adds_and_takes_the_tree_peak() {
        let text = r#"{"kind": "prediction", "device": "NVIDIA L4", "total": 1000, "used_before": 100, "stack": "trl", "peak": 800}
{"kind": "nvml", "t": 0.5, "gpus": [{"index": 0, "name": "NVIDIA L4", "used": 400, "total": 1000}], "tree": 250}
{"kind": "nvml", "t": 1.0, "gpus": [{"index": 0, "name": "NVIDIA L4", "used": 700, "total": 1000}], "tree": 560}
{"kind": "exit", "code": 0}
"#;
        let log = parse_log(text, "run.jsonl").expect("reads");
        assert_eq!(log.device(), Some("NVIDIA L4"));
        assert_eq!(log.stack(), Some("trl"));
        assert_eq!(log.total(), Some(1000));
        assert_eq!(log.nvml_peak(), Some(560));
        assert!(log.measured().is_none());
        // without process figures: the device's peak less what was in use before
        let untreed = text
            .replace(", \"tree\": 250", "")
            .replace(", \"tree\": 560", "");
        let log = parse_log(&untreed, "run.jsonl").expect("reads");
        assert_eq!(log.nvml_peak(), Some(600));
        assert_eq!(log.whole_process_peak(50), Some(600));
        let e = parse_log(r#"{"kind": "nvml", "gpus": []}"#, "x")
            .expect_err("no GPU")
            .to_string();
        assert!(e.contains("`gpus`"), "{e}");
        let e = parse_log(r#"{"kind": "prediction", "total": "big"}"#, "x")
            .expect_err("type")
            .to_string();
        assert!(e.contains("`total` = \"big\""), "{e}");
    }

    #[test]
    fn the_verdict_is_good_within_five_percent() {
        assert_eq!(Row::new("a", 104, 100).verdict, Verdict::Good);
        assert_eq!(Row::new("a", 95, 100).verdict, Verdict::Good);
        assert_eq!(Row::new("a", 110, 100).verdict, Verdict::Overestimated);
        assert_eq!(Row::new("a", 80, 100).verdict, Verdict::Underestimated);
        assert!((Row::new("a", 80, 100).error_percent + 20.0).abs() < 1e-9);
    }

    #[test]
    fn torch_sees_unsloth_weights_that_the_step_figure_leaves_out() {
        use crate::memory::estimate::{GpuBudget, estimate};
        let text = crate::presets::tests::RUN_24GB;
        let file = crate::config::parse(text, "24gb", None, &crate::resolve::Offline::from_env())
            .expect("parses");
        let gpu = GpuBudget {
            capacity: file.gpu_memory.expect("capacity"),
            used_by_others: 0,
            context: None,
        };
        let est = estimate(&file.run, gpu);
        let p = predicted(&file.run, &est);
        assert!(p.allocated > est.training_peak_allocated_bytes);
        assert!(p.reserved >= p.allocated);
        assert!(p.used >= p.reserved);
        let mut trl = file.run.clone();
        trl.switch_stack(Stack::Trl);
        let est = estimate(&trl, gpu);
        assert!(predicted(&trl, &est).allocated >= est.training_peak_allocated_bytes);
    }

    #[test]
    fn a_bad_line_carries_where_and_what() {
        let e = parse_log("\n[1]\n", "x").unwrap_err();
        assert_eq!(e.at, "x:2");
        assert!(matches!(e.problem, LogProblem::NotAnObject), "{e:?}");
        let e = parse_log(r#"{"kind": "step", "step": 1}"#, "x").unwrap_err();
        assert!(
            matches!(&e.problem, LogProblem::MissingBytes { key } if key == "max_allocated"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "x:1: `max_allocated` missing or not a byte count"
        );
    }
}
