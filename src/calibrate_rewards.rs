//! `grpofit calibrate`'s `reward_seconds`: the reward functions' seconds TRL timed in each step
//! (grpofit_core::measure::reward_time) over the completions each process scores, written as
//! `[grpofit] reward_seconds` into the run file the log's prediction line names (or
//! `--config`): only that key changes, every other byte stays, and the text is read back as
//! the same run with that value before the file is replaced.

use crate::cli::Source;
use crate::output::{FITS, Failure, emit, json_text, say, unwritten};
use grpofit_core::config::RunFile;
use grpofit_core::config::export::{ExportContext, write_atomically};
use grpofit_core::config::write_back;
use grpofit_core::measure::measured::RunLog;
use grpofit_core::measure::reward_seconds::{LearnedRewards, learn_rewards, three_figures};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A run log as `calibrate` read it: its name as shown, and its last run.
pub(crate) struct ReadLog {
    pub shown: String,
    pub log: RunLog,
}

/// What `calibrate` learned of one run file's `reward_seconds`, and the text it writes.
pub(crate) struct RewardWrite {
    pub path: PathBuf,
    /// the median log's measurement (three significant figures: `reward_seconds()`)
    pub learned: LearnedRewards,
    pub logs: Vec<String>,
    /// the run file with the key set, read back; None when it already holds the value
    text: Option<String>,
    file: RunFile,
}

impl RewardWrite {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "file": self.path.display().to_string(),
            "reward_seconds": self.learned.reward_seconds(),
            "step_seconds": self.learned.step_seconds,
            "steps": self.learned.steps,
            "completions": self.learned.completions,
            "logs": self.logs,
            "written": self.text.is_some(),
        })
    }

    /// "reward functions: 0.625 s a completion (10.0 s a step over 16 completions, 3 steps of
    /// LOG): written to run.toml as `[grpofit] reward_seconds`"
    pub(crate) fn said(&self) -> String {
        let l = &self.learned;
        let of = match self.logs.as_slice() {
            [one] => one.clone(),
            many => format!("{} logs", many.len()),
        };
        let done = if self.text.is_some() {
            "written to"
        } else {
            "already in"
        };
        format!(
            "reward functions: {} s a completion ({:.3} s a step over the {} completions each process scores, median of {} step{} of {of}): {done} {} as `[grpofit] reward_seconds`\n",
            l.reward_seconds(),
            l.step_seconds,
            l.completions,
            l.steps,
            if l.steps == 1 { "" } else { "s" },
            self.path.display()
        )
    }
}

/// The run a log was measured on: `--config`, else the run file or the preset its prediction
/// line names; else why none (said as a note).
fn target(log: &ReadLog, source: &Source) -> Result<Source, String> {
    let given = source.config.is_some() || source.preset.is_some();
    let prediction = log.log.prediction.as_ref().filter(|_| !given);
    let (config, preset) = match (
        prediction.and_then(|p| p.config.as_deref()),
        prediction.and_then(|p| p.preset.as_deref()),
    ) {
        _ if given => (source.config.clone(), source.preset.clone()),
        (Some(config), _) if Path::new(config).is_file() => (Some(PathBuf::from(config)), None),
        (Some(config), _) => {
            return Err(format!(
                "the log's run file {config} is not here: pass --config"
            ));
        }
        (None, Some(preset)) => (None, Some(preset.to_string())),
        (None, None) => return Err("the log names no run file: pass --config run.toml".into()),
    };
    Ok(Source {
        config,
        preset,
        ..source.clone()
    })
}

/// For each run file the logs name, the `reward_seconds` they measure (the median over the
/// logs) and the file's text with it, read back; what a log teaches nothing of is said as a
/// note. Nothing is written here.
pub(crate) fn plan(logs: &[ReadLog], source: &Source) -> Result<Vec<RewardWrite>, Failure> {
    type Runs = Vec<(Source, RunFile, Vec<(LearnedRewards, String)>)>;
    let mut by_run: Runs = Vec::new();
    for log in logs {
        let run = match target(log, source) {
            Ok(run) => run,
            Err(why) => {
                note_unlearned(log, &why);
                continue;
            }
        };
        let same =
            |(s, _, _): &(Source, RunFile, _)| (&s.config, &s.preset) == (&run.config, &run.preset);
        let at = match by_run.iter().position(same) {
            Some(at) => at,
            None => match load(&run) {
                Ok(file) => {
                    by_run.push((run, file, Vec::new()));
                    by_run.len() - 1
                }
                // --config that cannot be read is the user's input; the log's run, a note
                Err(e) if source.config.is_some() || source.preset.is_some() => {
                    return Err(Failure::Input(e));
                }
                Err(e) => {
                    note_unlearned(log, &e);
                    continue;
                }
            },
        };
        // the batch the log's run scored, as its prediction line says; the run file's now
        // (edited since, by hand or `fit -o`) only for a line written before it said so
        let completions = log
            .log
            .prediction
            .as_ref()
            .and_then(|p| p.step_time.as_ref()?.completions)
            .unwrap_or_else(|| {
                grpofit_core::measure::reward_seconds::completions_timed(&by_run[at].1.run)
            });
        match learn_rewards(&log.log, completions) {
            Ok(l) => by_run[at].2.push((l, log.shown.clone())),
            Err(why) => note_unlearned(log, &why.to_string()),
        }
    }
    let mut plans = Vec::new();
    for (run, file, mut learned) in by_run {
        if learned.is_empty() {
            continue;
        }
        learned.sort_by(|a, b| a.0.per_completion.total_cmp(&b.0.per_completion));
        let median = learned[(learned.len() - 1) / 2].0;
        let seconds = median.reward_seconds();
        let unwritable = match (&run.config, &run.preset) {
            (Some(path), _) if is_recipe(&file) => Some(recipe_holds_none(path, seconds)),
            (Some(_), _) => None,
            (None, preset) => Some(format!(
                "the run is the preset {}, which grpofit does not write: set `[grpofit] reward_seconds = {seconds}` in your run file (or pass --config)",
                preset.as_deref().unwrap_or("?")
            )),
        };
        let (Some(path), None) = (run.config.clone(), &unwritable) else {
            let why = unwritable.unwrap_or_default();
            say(&format!(
                "grpofit: note: {}: reward functions {seconds} s a completion; {why}",
                learned[0].1
            ));
            continue;
        };
        let device = logs
            .iter()
            .find_map(|l| l.log.device())
            .unwrap_or("the log's GPU");
        let text = with_reward_seconds(&path, &file, median.reward_seconds(), (&run, device))?;
        plans.push(RewardWrite {
            path,
            learned: median,
            logs: learned.into_iter().map(|(_, log)| log).collect(),
            text,
            file,
        });
    }
    Ok(plans)
}

/// Whether the run was read from a TRL recipe (YAML), which holds no `[grpofit]` key.
fn is_recipe(file: &RunFile) -> bool {
    file.source
        .as_ref()
        .is_some_and(|s| s.format == grpofit_core::config::source::Format::Yaml)
}

/// What to do with `seconds` when the run is the TRL recipe `path`.
fn recipe_holds_none(path: &Path, seconds: f64) -> String {
    format!(
        "{} is a TRL recipe, which holds no `[grpofit]` key: set `reward_seconds = {seconds}` under `[grpofit]` in a grpofit run file (`grpofit estimate --config {} --export run.toml` writes one)",
        path.display(),
        path.display()
    )
}

/// A note that `log` teaches nothing of `reward_seconds`, and why.
fn note_unlearned(log: &ReadLog, why: &str) {
    say(&format!(
        "grpofit: note: {}: reward_seconds not learned: {why}",
        log.shown
    ));
}

/// The run file or preset `run` names, read as it reads runs (its pins, launch config, resolver).
fn load(run: &Source) -> Result<RunFile, String> {
    let loaded = crate::inputs::read_source(run, &Err("not asked".into()))
        .map_err(|e| format!("calibrate: {e}"))?;
    Ok(loaded.file)
}

/// `file`'s text with `[grpofit] reward_seconds = seconds`, read back as the same run with that
/// value; None when the file already holds it.
fn with_reward_seconds(
    path: &Path,
    file: &RunFile,
    seconds: f64,
    (source, device): (&Source, &str),
) -> Result<Option<String>, Failure> {
    if file.time.reward_seconds == Some(seconds) {
        return Ok(None);
    }
    let mut time = file.time.clone();
    time.reward_seconds = Some(seconds);
    // named from the file's folder as every other write names it: the resolved (absolute)
    // path would replace the user's own spelling (`model_config = "model/config.json"`)
    let model_config = crate::commands::written_model_config(file, path);
    let ctx = ExportContext {
        gpu: device,
        gpu_memory: None,
        model_config: model_config.as_deref(),
        lock_effective_batch: file.lock_effective_batch,
        estimate: None,
        time: Some(&time),
    };
    let mut notes = Vec::new();
    let text = write_back::text_for(path, file.source.as_ref(), &file.run, &ctx, &mut notes)?;
    let shown = path.display().to_string();
    let format = file
        .source
        .as_ref()
        .map_or(grpofit_core::config::source::Format::of(path), |s| s.format);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let back = crate::inputs::reread(source, &text, &shown, dir, format);
    match back {
        Ok(back) if back.run == file.run && back.time == time => Ok(Some(text)),
        Ok(_) => Err(Failure::Input(format!(
            "{shown}: `[grpofit] reward_seconds = {seconds}` would not read back as written ({}): not written; add it by hand",
            if notes.is_empty() {
                "the run read back differs".to_string()
            } else {
                notes.join("; ")
            }
        ))),
        Err(e) => Err(Failure::Input(format!(
            "{shown}: with `[grpofit] reward_seconds = {seconds}` the file would not read back ({e}): not written"
        ))),
    }
}

/// Refuses the plans when a run file they write changed since it was read: `calibrate` asks
/// before it writes calibration.toml, so that neither file changes when one cannot.
pub(crate) fn check_unchanged(plans: &[RewardWrite]) -> Result<(), Failure> {
    for p in plans.iter().filter(|p| p.text.is_some()) {
        write_back::check_unchanged(p.file.source.as_ref())?;
    }
    Ok(())
}

/// Writes each planned run file (refused when the file changed since it was read, checked
/// again: the writes come after calibration.toml's).
pub(crate) fn write(plans: &[RewardWrite]) -> Result<(), Failure> {
    for p in plans {
        if let Some(text) = &p.text {
            write_back::check_unchanged(p.file.source.as_ref())?;
            write_atomically(&p.path, text, true)?;
        }
    }
    Ok(())
}

/// `calibrate --reward-seconds SECONDS --config FILE`: the seconds a completion measured
/// elsewhere (Python's `grpofit.time_rewards`), to three significant figures, written into the
/// run file as a learned one is: only that key changes, the text read back first.
pub(crate) fn run_given(seconds: f64, json: bool, source: &Source) -> Result<u8, Failure> {
    let Some(path) = source.config.clone() else {
        return Err(Failure::Input(
            "calibrate --reward-seconds: no run file to write it into: pass --config run.toml"
                .into(),
        ));
    };
    let file = load(source).map_err(Failure::Input)?;
    let seconds = three_figures(seconds);
    if is_recipe(&file) {
        return Err(Failure::Input(format!(
            "calibrate --reward-seconds: {}",
            recipe_holds_none(&path, seconds)
        )));
    }
    let text = with_reward_seconds(&path, &file, seconds, (source, "your reward functions"))?;
    if let Some(text) = &text {
        write_back::check_unchanged(file.source.as_ref())?;
        write_atomically(&path, text, true)?;
    }
    let said = if json {
        json_text(&serde_json::json!({
            "file": path.display().to_string(),
            "reward_seconds": seconds,
            "written": text.is_some(),
        }))?
    } else {
        format!(
            "reward functions: {seconds} s a completion: {} {} as `[grpofit] reward_seconds`\n",
            if text.is_some() {
                "written to"
            } else {
                "already in"
            },
            path.display()
        )
    };
    emit(|o| o.write_all(said.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}
