//! `grpofit calibrate`: learns, from run logs, the CUDA context of the user's GPU model and
//! stack, the allocator's slack ratio, and the step time's efficiencies where `grpofit run`
//! predicted the step (grpofit_core::measure::calibration, `step_time`), keeps them in
//! `<config dir>/calibration.toml`, and says what it learned and how uncertain it is; and the
//! reward functions' seconds a completion where TRL timed them, written into the run file as
//! `[grpofit] reward_seconds` (`calibrate_rewards`).

use crate::calibrate_rewards::{self as rewards, ReadLog};
use crate::cli::{CalibrateArgs, Source};
use crate::inputs::{calibration_path, load_calibration};
use crate::output::*;
use grpofit_core::config::export::write_atomically;
use grpofit_core::measure::calibration::{self, Calibration, Entry};
use grpofit_core::measure::measured;
use grpofit_core::memory::estimate::CUDA_CONTEXT;
use grpofit_core::time::Efficiencies;
use grpofit_core::units::format_size;
use std::io::Write;
use std::path::Path;

/// `calibrate`: from `logs`, or `--reset`, or `--reward-seconds` given (`calibrate_rewards`).
pub(crate) fn run_calibrate(args: &CalibrateArgs, source: &Source) -> Result<u8, Failure> {
    let (logs, json) = (&args.logs, args.json);
    if let Some(seconds) = args.reward_seconds {
        return rewards::run_given(seconds, json, source);
    }
    let path = calibration_path().ok_or_else(|| {
        "no config folder: set GRPOFIT_CONFIG_DIR to the folder for calibration.toml".to_string()
    })?;
    if args.reset {
        return forget(&path);
    }
    if logs.is_empty() {
        return Err(Failure::Input(
            "calibrate: no run log given: grpofit calibrate LOG... (or --reset)".into(),
        ));
    }
    // every log first: one that teaches nothing stops the command before the file changes
    let (samples, read): (Vec<_>, Vec<ReadLog>) = logs
        .iter()
        .map(|log| learn_from(log))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();
    // and each run file's `reward_seconds`, read back before anything is written
    let reward_writes = rewards::plan(&read, source)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    }
    // read, merge and replace under the lock: a `calibrate` running beside this one loses
    // nothing (each re-reads the file the other wrote)
    let lock = grpofit_core::files::lock_beside(&path)?;
    let mut calibration = load_calibration()?.map_or_else(Calibration::default, |(c, _)| c);
    let mut learned: Vec<(String, String)> = Vec::new();
    for (gpu, stack, sample) in samples {
        calibration.add(&gpu, &stack, sample);
        if !learned.contains(&(gpu.clone(), stack.clone())) {
            learned.push((gpu, stack));
        }
    }
    // both writes checked before either is made: a run file changed since it was read is
    // refused with calibration.toml as it was
    rewards::check_unchanged(&reward_writes)?;
    write_atomically(&path, &calibration::to_toml(&calibration), true)?;
    drop(lock);
    rewards::write(&reward_writes)?;
    let entries: Vec<&Entry> = learned
        .iter()
        .filter_map(|(g, s)| calibration.find(g, s))
        .collect();
    let text = if json {
        json_text(&serde_json::json!({
            "file": path.display().to_string(),
            "learned": entries.iter().map(|e| entry_json(e)).collect::<Vec<_>>(),
            "reward_seconds": reward_writes.iter().map(rewards::RewardWrite::json).collect::<Vec<_>>(),
        }))?
    } else {
        let mut t: String = entries.iter().map(|e| entry_text(e)).collect();
        t += &reward_writes
            .iter()
            .map(rewards::RewardWrite::said)
            .collect::<String>();
        t += &format!(
            "stored in {}: `grpofit estimate` uses it on a GPU of the same name and stack\n",
            path.display()
        );
        t
    };
    emit(|o| o.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// One log's GPU, stack and measurement, and the log read; errors name the log.
type Learned = ((String, String, calibration::RunSample), ReadLog);

fn learn_from(log: &Path) -> Result<Learned, String> {
    let shown = std::path::absolute(log)
        .unwrap_or_else(|_| log.to_path_buf())
        .display()
        .to_string();
    let file = std::fs::File::open(log).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let (run_log, notes) = measured::parse_last_run_from(std::io::BufReader::new(file), &shown)
        .map_err(|e| e.to_string())?;
    for note in notes {
        say(&format!("grpofit: note: {note}"));
    }
    if let Err(why) = grpofit_core::measure::step_time::learn_time(&run_log) {
        say(&format!(
            "grpofit: note: {shown}: step time not learned: {why}"
        ));
    }
    let sample = calibration::learn(&run_log, &shown).map_err(|e| e.to_string())?;
    Ok((
        sample,
        ReadLog {
            shown,
            log: run_log,
        },
    ))
}

/// `--reset`: the file removed, or nothing to remove.
fn forget(path: &Path) -> Result<u8, Failure> {
    match std::fs::remove_file(path) {
        Ok(()) => say(&format!(
            "removed {}: the estimate uses the built-in CUDA context again",
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            say(&format!("nothing to reset: no {}", path.display()))
        }
        Err(e) => {
            return Err(Failure::Input(format!(
                "{}: cannot remove: {e}",
                path.display()
            )));
        }
    }
    Ok(FITS)
}

fn entry_text(e: &Entry) -> String {
    let Some(l) = e.context() else {
        return String::new();
    };
    let (slack, predicted) = e.slack();
    let against = |p: f64| {
        format!(
            ", the estimate predicts {p:.3} ({:+.1} %)",
            (p - slack) / slack * 100.0
        )
    };
    format!(
        "{} ({}): CUDA context {} {} (built-in: {}, measured on an H200)\n  allocator slack (reserved / allocated at the peak step): {slack:.3}{}\n{}",
        e.gpu,
        e.stack,
        format_size(l.median),
        l.uncertainty(),
        format_size(CUDA_CONTEXT),
        predicted.map_or(String::new(), against),
        time_text(e)
    )
}

/// The efficiencies learned from the runs' step seconds, against the declared ones.
fn time_text(e: &Entry) -> String {
    let Some(t) = e.time() else {
        return String::new();
    };
    let (l, d) = (t.efficiencies, Efficiencies::default());
    format!(
        "  {}: decode bandwidth {:.3} of the sheet (declared {:.2}), matmuls {:.3} of its tensor rate (declared {:.2}), {:.1} µs an eager operator (declared {:.0})\n",
        t.said(),
        l.decode_bandwidth,
        d.decode_bandwidth,
        l.matmul_peak,
        d.matmul_peak,
        l.eager_op_seconds * 1e6,
        d.eager_op_seconds * 1e6
    )
}

fn entry_json(e: &Entry) -> serde_json::Value {
    let l = e.context();
    let (slack, predicted) = e.slack();
    serde_json::json!({
        "gpu": e.gpu,
        "stack": e.stack,
        "context_bytes": l.map(|l| l.median),
        "runs": e.runs.len(),
        "spread_bytes": l.and_then(|l| l.spread),
        "slack": slack,
        "predicted_slack": predicted,
        "logs": e.runs.iter().map(|r| r.log.clone()).collect::<Vec<_>>(),
        "step_time": e.time().map(|t| serde_json::json!({
            "calibrated": t.said(),
            "steps": t.steps,
            "logs": t.logs,
            "efficiencies": t.efficiencies,
        })),
    })
}
