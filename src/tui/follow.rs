//! The screen following a live run (`--follow LOG`): the log read so far, what the file did
//! last (cut, vanished), and the text the screen shows: a status line with the measured peak
//! against the estimate's total, the notices, and the figures `grpofit check` sets side by side.

use grpofit_core::measure::calibration::Calibration;
use grpofit_core::measure::check;
use grpofit_core::measure::follow::{Follower, other_gpu};
use grpofit_core::measure::measured::Row;
use grpofit_core::measure::step_time;
use grpofit_core::measure::tail::Change;
use grpofit_core::memory::estimate::Part;
use grpofit_core::memory::estimate::{Estimate, Estimator};
use grpofit_core::run::RunConfig;
use grpofit_core::time::{self, StepTime};
use grpofit_core::units::format_size;

#[derive(Debug, Clone)]
pub struct Following {
    /// the log as the status line names it (its file name)
    pub name: String,
    pub follower: Follower,
    /// what the file itself did last: vanished, or was cut and read again
    pub file_notice: Option<String>,
    /// said once at start: e.g. that the run on screen is not the one the log names
    pub start_notice: Option<String>,
    /// what `grpofit calibrate` learned (`calibration.toml`), read once when following starts:
    /// the log is compared as `check` compares it, with the context learned for its device
    pub calibration: Option<Calibration>,
}

impl Following {
    pub fn new(name: &str) -> Following {
        Following {
            name: name.to_string(),
            follower: Follower::new(name),
            file_notice: None,
            start_notice: None,
            calibration: None,
        }
    }

    /// What one look at the file found.
    pub fn take(&mut self, change: Change) {
        match change {
            Change::Appended(bytes) => {
                if !bytes.is_empty() {
                    self.file_notice = None;
                }
                self.follower.feed(&bytes);
            }
            Change::Restarted(bytes) => {
                self.follower.restart();
                self.follower.feed(&bytes);
                self.file_notice = Some(format!(
                    "{} was cut or written anew: read again from its start",
                    self.name
                ));
            }
            Change::Gone(why) => self.file_notice = Some(why),
        }
    }
}

/// The estimate the log is compared with, as `grpofit check` makes it ([`check::budget`]):
/// on the log's GPU (`capacity` when the user gave it), with the CUDA context calibrated for
/// the log's device.
pub fn checked(
    follow: &Following,
    run: &RunConfig,
    capacity: u64,
    capacity_from_user: bool,
    est: &mut Estimator,
) -> Estimate {
    let gpu = check::budget(
        follow.follower.log(),
        capacity_from_user.then_some(capacity),
        capacity,
        follow.calibration.as_ref(),
        run.stack.name(),
    );
    est.estimate(run, gpu)
}

/// What the follow text reads of the screen: the log followed, the run on screen and its
/// estimate, and the GPU the screen sizes for.
pub struct Screen<'a> {
    pub follow: Option<&'a Following>,
    pub run: &'a RunConfig,
    pub estimate: &'a Estimate,
    /// the estimate on the log's GPU, as `check` makes it ([`checked`]); the screen's when
    /// absent
    pub checked: Option<&'a Estimate>,
    /// the live GPU's name, when NVML answers
    pub gpu_name: Option<&'a str>,
    /// the capacity the screen sizes for
    pub capacity: u64,
}

/// The estimate the log is set against: `check`'s.
fn compared<'a>(s: &Screen<'a>) -> &'a Estimate {
    s.checked.unwrap_or(s.estimate)
}

/// The CUDA context of the estimate: torch's counters leave it out.
fn context(s: &Screen) -> u64 {
    compared(s)
        .components
        .iter()
        .filter(|c| c.part == Part::CudaContext)
        .map(|c| c.bytes)
        .sum()
}

/// The measured peak of the whole process ([`measured::RunLog::whole_process_peak`]) when the
/// log has one.
pub fn measured_peak(s: &Screen) -> Option<u64> {
    let f = s.follow?;
    f.follower.log().whole_process_peak(context(s))
}

/// The status line, longest first: the caller takes the first that fits.
/// `◆ following run.jsonl · step 37 · measured peak 17.20 GiB (predicted 18.40 GiB, +7.0 %)`;
/// the error is `grpofit check`'s: (predicted - measured) / measured.
pub fn status_lines(s: &Screen) -> Vec<String> {
    let Some(f) = s.follow else {
        return Vec::new();
    };
    let log = f.follower.log();
    let step = f.follower.step().map(|s| format!("step {s}"));
    let ended = log.exit.map(|e| match e.code {
        Some(code) => format!("run ended (exit {code})"),
        None => "run ended".to_string(),
    });
    let predicted = compared(s).total_bytes;
    let peak = measured_peak(s).map(|m| {
        let error = Row::new("", predicted, m).error_percent;
        (
            format!(
                "measured peak {} (predicted {}, {error:+.1} %)",
                format_size(m),
                format_size(predicted)
            ),
            format!(
                "◆ measured {}, predicted {} ({error:+.1} %)",
                format_size(m),
                format_size(predicted)
            ),
        )
    });
    let (peak, short) = match peak {
        Some((long, short)) => (long, short),
        None => (
            "no measurement yet".to_string(),
            "◆ no measurement yet".to_string(),
        ),
    };
    let join = |parts: Vec<Option<String>>| {
        let parts: Vec<String> = parts.into_iter().flatten().collect();
        parts.join(" · ")
    };
    vec![
        format!(
            " ◆ {}",
            join(vec![
                Some(format!("following {}", f.name)),
                step.clone(),
                Some(peak.clone()),
                ended.clone(),
            ])
        ),
        format!(" ◆ {}", join(vec![step.clone(), Some(peak.clone()), ended])),
        format!(" ◆ {}", join(vec![step, Some(peak)])),
        format!(" {short}"),
    ]
}

/// What is wrong with the log or its file, most pressing first: the file gone or cut, the
/// lines that did not read, the log's GPU not the screen's, the run not the log's.
pub fn notices(s: &Screen) -> Vec<String> {
    let Some(f) = s.follow else {
        return Vec::new();
    };
    [
        f.file_notice.clone(),
        f.follower.notice(),
        other_gpu(f.follower.log(), s.capacity, s.gpu_name),
        f.start_notice.clone(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The figures `grpofit check` attributes, predicted against measured: torch's peaks and the
/// device's use from the step lines, the whole process from NVML's samples.
pub fn rows(s: &Screen) -> Vec<Row> {
    let Some(f) = s.follow else {
        return Vec::new();
    };
    check::rows(s.run, compared(s), f.follower.log()).1
}

/// `check`'s rewards line for the followed log (`report::rewards_check`): TRL's timed reward
/// functions against `predicted`'s rewards phase, compared as `check` compares them
/// (`measure::step_time::compare`), longest first: with the key to set where the rewards are
/// the step's miss, then alone, then short. None before the log times a reward.
pub fn rewards_lines(s: &Screen, predicted: &StepTime) -> Vec<String> {
    let Some(f) = s.follow else {
        return Vec::new();
    };
    let completions = grpofit_core::measure::reward_seconds::completions_timed(s.run);
    let Some(c) = step_time::compare(predicted, f.follower.log(), completions) else {
        return Vec::new();
    };
    let Some(r) = c.rewards else {
        return Vec::new();
    };
    let line = format!(" ◆ {}", crate::report::rewards_check(&r));
    let mut lines: Vec<String> = c
        .reward_seconds
        .map(|l| {
            format!(
                "{line} · the gap: set [grpofit] reward_seconds = {}",
                l.reward_seconds()
            )
        })
        .into_iter()
        .collect();
    lines.push(line);
    lines.push(format!(
        " ◆ rewards {} (predicted {})",
        time::seconds(r.measured_seconds),
        time::seconds(r.predicted_seconds)
    ));
    lines
}

/// One row as the screen and help show it.
pub fn row_text(r: &Row) -> String {
    format!(
        "  {:<30} {:>11} {:>11} {:>+7.1} %  {}",
        r.name,
        format_size(r.predicted_bytes),
        format_size(r.measured_bytes),
        r.error_percent,
        r.verdict.word()
    )
}

/// The rows' header, aligned with [`row_text`].
pub fn rows_header() -> String {
    format!(
        "  {:<30} {:>11} {:>11} {:>9}  verdict",
        "", "predicted", "measured", "error"
    )
}
