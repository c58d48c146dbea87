//! The step's time where the commands show it: `estimate`'s line and `--json`'s `step_time`.

use grpofit_core::config::RunFile;
use grpofit_core::hardware::GpuSpeed;
use grpofit_core::measure::calibration::LearnedTime;
use grpofit_core::memory::estimate::Estimate;
use grpofit_core::run::RunConfig;
use grpofit_core::time::{self, Efficiencies, StepTime};

/// The step time of `run` (read from `file`, whose memory is `est`) on the card `speed`, or why
/// there is none.
pub(crate) fn predict(
    speed: &Result<GpuSpeed, String>,
    file: &RunFile,
    run: &RunConfig,
    est: &Estimate,
    eff: &Efficiencies,
) -> Result<StepTime, String> {
    let gpu = speed.as_ref().map_err(Clone::clone)?;
    if let Some(why) = time::untimed(est) {
        return Err(why);
    }
    Ok(time::step_time(run, est, gpu, &file.time, eff))
}

/// "step time calibrated on 12 steps of run.jsonl", where `grpofit calibrate` learned the
/// card's efficiencies: the line under the step's.
pub(crate) fn calibrated_line(time: Option<&LearnedTime>) -> String {
    time.map_or(String::new(), |t| {
        format!("  {} (`grpofit calibrate --reset` forgets it)\n", t.said())
    })
}

/// The line `estimate` prints: the step and its phases, or why the step is not timed; and
/// whether it is timed with the efficiencies `grpofit calibrate` learned.
pub(crate) fn line(step: &Result<StepTime, String>, time: Option<&LearnedTime>) -> String {
    match step {
        Ok(t) => {
            let length = if let Some(given) = t.mean_capped_from {
                format!(
                    "note: `[grpofit] mean_completion_length = {given}` is above `max_completion_length`: completions timed at the cap, {:.0} tokens",
                    t.completion_tokens
                )
            } else if t.completion_is_mean {
                format!(
                    "completions of {:.0} tokens on average",
                    t.completion_tokens
                )
            } else {
                format!(
                    "completions at the full {:.0} tokens (set `[grpofit] mean_completion_length` if yours end sooner)",
                    t.completion_tokens
                )
            };
            format!(
                "{}\n  {length}\n  {}\n{}",
                time::summary(t),
                left_out(t),
                calibrated_line(time)
            )
        }
        Err(why) => format!("step time: not estimated: {why}\n"),
    }
}

/// What the `step ≈` line does not count.
fn left_out(t: &StepTime) -> &'static str {
    if t.reward_functions_timed {
        "not counted: logging, evaluation and other host work between steps"
    } else {
        "not counted: the reward functions (give `[grpofit] reward_seconds`, or `grpofit calibrate` learns it from a run's log), logging, evaluation and other host work between steps"
    }
}

/// `--json`'s `step_time`: the step (with `calibrated`, what the efficiencies were learned
/// from, or null), or null with `step_time_note` saying why.
pub(crate) fn json(
    v: &mut serde_json::Value,
    step: &Result<StepTime, String>,
    time: Option<&LearnedTime>,
) -> Result<(), String> {
    match step {
        Ok(t) => {
            v["step_time"] = serde_json::to_value(t).map_err(|e| e.to_string())?;
            v["step_time"]["calibrated"] = serde_json::json!(time.map(LearnedTime::said));
        }
        Err(why) => {
            v["step_time"] = serde_json::Value::Null;
            v["step_time_note"] = serde_json::json!(why);
        }
    }
    Ok(())
}

/// `check`'s line: the predicted step against the log's median, or why one is missing.
pub(crate) fn check_line(
    timed: &Result<StepTime, String>,
    check: Option<&grpofit_core::measure::step_time::StepTimeCheck>,
    time: Option<&LearnedTime>,
) -> String {
    let line = match (timed, check) {
        (_, Some(c)) => format!(
            "\nstep time on {}: predicted {}, measured {} (the median over the generation cycles of {} step{} of each cycle's average a step, the first cycle left out when there are more): {:+.0} %\n{}",
            c.gpu,
            time::seconds(c.predicted_seconds),
            time::seconds(c.measured_seconds),
            c.steps,
            if c.steps == 1 { "" } else { "s" },
            c.error_percent,
            c.generation.map_or(String::new(), |g| format!(
                "  generation: predicted {}, measured {} (TRL's own timings)\n",
                time::seconds(g.predicted_seconds),
                time::seconds(g.measured_seconds)
            )) + &rewards_lines(c)
        ),
        (Ok(t), None) => format!(
            "\nstep time: predicted {} on {}; the log's step lines carry no seconds\n",
            time::seconds(t.seconds),
            t.gpu.name
        ),
        (Err(why), None) => format!("\nstep time: not estimated: {why}\n"),
    };
    line + &calibrated_line(time)
}

/// `check`'s rewards line, where TRL timed them, and what to set when they are the step's miss.
fn rewards_lines(c: &grpofit_core::measure::step_time::StepTimeCheck) -> String {
    let Some(r) = c.rewards else {
        return String::new();
    };
    let mut t = format!("  {}\n", grpofit::report::rewards_check(&r));
    if let Some(l) = c.reward_seconds {
        // the rewards line's figure is the average a step over a generation cycle; the scoring
        // step's own seconds (what `reward_seconds` is learned from) differ where some steps
        // reuse a batch generated before (`measure::median::per_step_of`)
        let (average, scoring) = (
            time::seconds(r.measured_seconds),
            time::seconds(l.step_seconds),
        );
        let take = if average == scoring {
            format!("{average} a step over the {} completions", l.completions)
        } else {
            format!(
                "{average} a step on average, {scoring} each step that scores, over the {} completions",
                l.completions
            )
        };
        t += &format!(
            "  the rewards are the gap: your reward functions take {take} each process scores: set `[grpofit] reward_seconds = {}` (`grpofit calibrate LOG` writes it)\n",
            l.reward_seconds()
        );
    }
    t
}

/// `device` (NVML's name, from a log) when the table knows the card.
pub(crate) fn known_card(device: Option<&str>) -> Option<String> {
    device
        .filter(|d| grpofit_core::hardware::lookup(d).is_some())
        .map(str::to_string)
}

/// `check`'s step time: the prediction for the file's run, and its comparison with the log.
pub(crate) fn checked(
    (speed, eff): (&Result<GpuSpeed, String>, &Efficiencies),
    file: &RunFile,
    est: &Estimate,
    log: &grpofit_core::measure::measured::RunLog,
) -> (
    Result<StepTime, String>,
    Option<grpofit_core::measure::step_time::StepTimeCheck>,
) {
    let timed = predict(speed, file, &file.run, est, eff);
    let check = timed.as_ref().ok().and_then(|t| {
        let completions = grpofit_core::measure::reward_seconds::completions_timed(&file.run);
        grpofit_core::measure::step_time::compare(t, log, completions)
    });
    (timed, check)
}
