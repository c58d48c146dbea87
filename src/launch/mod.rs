//! `grpofit run`: starts the training command with the run file's `[env]`, passes its output
//! through, samples NVML while it runs, writes the run log (the prediction, the samples, and
//! the callback's lines, which land in the same file through `GRPOFIT_RUN_LOG`), diagnoses an
//! out-of-memory death, and exits with the command's own status.

mod console;
mod env_notice;
mod group;
mod log;
mod sampler;
mod signals;
mod tee;
mod terminal;
mod wait;
mod watchdog;

use crate::cli::Source;
use crate::diagnose_command::diagnosis;
use crate::inputs::{Inputs, gpu_mem, resolve};
use crate::output::Failure;
use console::Console;
use grpofit::gpu::NvmlSession;
use grpofit_core::measure::measured;
use grpofit_core::memory::estimate::{Estimate, estimate};
use grpofit_core::units::format_size;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The variable the callback reads the run log's path from (examples/grpofit_callback.py).
pub(crate) const LOG_VARIABLE: &str = "GRPOFIT_RUN_LOG";

/// How long the command's standard error may stay open after it exits (a descendant still
/// holding it) before grpofit stops waiting for its last bytes.
const TEE_GRACE: Duration = Duration::from_secs(2);

/// How often the tee is looked at while its grace runs.
const POLL: Duration = Duration::from_millis(50);

/// What `run` says before the command starts: the run, its predicted peak and log, the
/// environment it sets, and what `estimate` warns of (a run that generates garbage,
/// `run::generate_mode::drops_kv_cache`, or that vLLM refuses, is worth stopping).
fn announce(console: &Console, inputs: &Inputs, est: &Estimate, log: &Path) {
    console.say(&format!(
        "grpofit: run: {}; predicted peak {} of {}; logging to {}",
        inputs.loaded.origin,
        format_size(est.total_bytes),
        format_size(inputs.gpu.capacity),
        log.display()
    ));
    for line in env_notice::lines(&inputs.loaded.file.env) {
        console.say(&line);
    }
    for w in &est.warnings {
        console.say(&format!("grpofit: warning: {w}"));
    }
}

pub(crate) fn run_command(
    source: &Source,
    log: Option<&Path>,
    append: bool,
    command: &[OsString],
) -> Result<u8, Failure> {
    let Some((program, args)) = command.split_first() else {
        return Err(Failure::Input(
            "run: no command given: grpofit run --config run.toml -- python train.py".into(),
        ));
    };
    let run_log = Arc::new(open_log(log, append)?);
    let path = run_log.path.clone();
    let inputs = resolve(source).inspect_err(|_| run_log.remove_if_empty())?;
    let est = estimate(&inputs.loaded.file.run, inputs.gpu);
    let console = Arc::new(Console::new(std::io::stderr().is_terminal()));
    announce(&console, &inputs, &est, &path);
    let signals = signals::Signals::catch()?;
    // written before the command starts, so that the callback's lines follow it (a command
    // quicker than the write put them before it: two runs, the last without steps); taken
    // back when the command cannot start
    if let Err(e) = run_log.write(&prediction(source, &inputs, &est)) {
        console.say(&format!(
            "grpofit: {}: cannot write the run log: {e}",
            path.display()
        ));
    }
    let started =
        start(program, args, &inputs, &run_log, &console).inspect_err(|_| run_log.undo())?;
    let Started {
        mut child,
        terminal,
        watchdog,
    } = started;
    let started = Instant::now();
    let tail = tee::Tail::default();
    let tee = child
        .stderr
        .take()
        .map(|e| tee::spawn(e, Arc::clone(&console), tail.clone()));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let sampler = match session(source) {
        Ok(session) => Some(sampler::spawn(
            sampler::Watch {
                session,
                root: child.id(),
                log: Arc::clone(&run_log),
                console: Arc::clone(&console),
                predicted: est.total_bytes,
            },
            stopped,
        )),
        Err(why) => {
            console.say(&format!("grpofit: no GPU samples are taken: {why}"));
            None
        }
    };
    let waited = wait::wait(child.id(), &signals, &console, terminal);
    if let Some(terminal) = terminal {
        terminal.take_back();
    }
    if let Ok((_, true)) = waited {
        group::sweep(child.id(), watchdog.as_ref().map(watchdog::Watchdog::pid));
    }
    drop(stop);
    let peaks = sampler.and_then(|s| s.join().ok());
    if let Some(tee) = tee {
        let deadline = Instant::now() + TEE_GRACE;
        while !tee.is_finished() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
    }
    console.clear();
    let (status, _) = waited?;
    let code = signals::exit_code(status);
    let ended = exit_record(code, status, started.elapsed(), peaks);
    if run_log.write(&ended).is_err() {
        console.say(&format!(
            "grpofit: cannot append the exit line to {}",
            path.display()
        ));
    }
    if let Some(watchdog) = watchdog {
        watchdog.stand_down();
    }
    console.say(&summary(code, peaks, &est, &run_log, source));
    if !status.success() {
        diagnose_death(&tail.text(), source, &console);
    }
    Ok(code)
}

/// The command started, and what watches it.
struct Started {
    child: std::process::Child,
    /// the terminal handed to it, when there is one (terminal.rs)
    terminal: Option<terminal::Terminal>,
    watchdog: Option<watchdog::Watchdog>,
}

/// Starts the command in its own process group with the run file's `[env]` and the log's
/// variable, its standard error piped to grpofit; hands it the terminal (when grpofit has it)
/// and starts its watchdog. grpofit becomes the reaper of the command's orphans first.
fn start(
    program: &OsString,
    args: &[OsString],
    inputs: &Inputs,
    run_log: &log::RunLog,
    console: &Console,
) -> Result<Started, Failure> {
    if let Err(why) = group::become_subreaper() {
        console.say(&format!(
            "grpofit: orphaned grandchildren are not adopted: {why}"
        ));
    }
    let terminal = terminal::Terminal::foreground();
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(inputs.loaded.file.env.iter().map(|(k, v)| (k, v)))
        .env(LOG_VARIABLE, &run_log.path)
        .stderr(Stdio::piped());
    group::own_group(&mut command);
    #[cfg(unix)]
    if terminal.is_some() {
        terminal::Terminal::hand_over_in_child(&mut command);
    }
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", program.to_string_lossy()))?;
    if let Some(terminal) = terminal {
        terminal.give(child.id());
    }
    let watchdog = watchdog::Watchdog::start(child.id(), run_log.raw_fd())
        .inspect_err(|why| {
            console.say(&format!(
                "grpofit: no watchdog: a SIGKILL of grpofit would leave the command's children: {why}"
            ))
        })
        .ok();
    Ok(Started {
        child,
        terminal,
        watchdog,
    })
}

/// `--log`, else a new `grpofit-run-YYYYMMDD-HHMMSS*.jsonl` in the current folder
/// (`RunLog::open_dated`); its path absolute, so the command finds it from any folder it
/// changes to.
fn open_log(log: Option<&Path>, append: bool) -> Result<log::RunLog, String> {
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
    match log {
        Some(path) => log::RunLog::open(&absolute(path)?, append),
        None => {
            let here = std::env::current_dir()
                .map_err(|e| format!("the current folder, for the run log: {e}"))?;
            log::RunLog::open_dated(&here, SystemTime::now())
        }
    }
}

/// NVML for the sampler, or why there is none.
fn session(source: &Source) -> Result<NvmlSession, String> {
    if source.no_gpu {
        return Err("--no-gpu".into());
    }
    NvmlSession::open()
}

/// The `prediction` line: the GPU grpofit saw and what the estimate predicts, in the figures
/// `grpofit check` compares (measured::predicted) and the vLLM share; the run file (its
/// absolute path) or the preset, for `grpofit --follow` to open the screen on the same run.
fn prediction(source: &Source, inputs: &Inputs, est: &Estimate) -> serde_json::Value {
    let config = source
        .config
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
    let run = &inputs.loaded.file.run;
    let p = measured::predicted(run, est);
    let detected = inputs.detected.as_ref().ok();
    // the step time, with the efficiencies in use, for `grpofit calibrate` to learn from
    let eff = inputs.efficiencies();
    let slower = eff.slower_by(2.0);
    let timed = |eff: &grpofit_core::time::Efficiencies| {
        crate::step_time::predict(&inputs.speed, &inputs.loaded.file, run, est, eff).ok()
    };
    let step_time = timed(&eff).zip(timed(&slower)).map(|(t, slow)| {
        let completions = grpofit_core::measure::reward_seconds::completions_timed(run);
        grpofit_core::measure::predicted_time::PredictedTime::json(&t, &slow, &eff, completions)
    });
    serde_json::json!({
        "kind": "prediction",
        "run": inputs.loaded.origin,
        "config": config,
        "preset": source.preset,
        "stack": run.stack.name(),
        "device": detected.map(|g| g.name.clone()),
        "total": inputs.gpu.capacity,
        "used_before": detected.and_then(|g| g.used_bytes),
        "peak": est.total_bytes,
        "fits": est.fits,
        "allocated": p.allocated,
        "reserved": p.reserved,
        "phase": p.phase,
        "training_allocated": est.training_peak_allocated_bytes,
        "training_reserved": est.training_peak_reserved_bytes,
        "vllm": est.vllm.as_ref().map(|v| v.reservation_bytes),
        "step_time": step_time,
    })
}

fn exit_record(
    code: u8,
    status: ExitStatus,
    took: Duration,
    peaks: Option<sampler::Peaks>,
) -> serde_json::Value {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal: Option<i32> = None;
    serde_json::json!({
        "kind": "exit",
        "code": code,
        "signal": signal,
        "seconds": took.as_secs_f64(),
        "samples": peaks.map_or(0, |p| p.samples),
        "peak_used": peaks.map(|p| p.used),
        "peak_tree": peaks.and_then(|p| p.tree),
    })
}

/// Said when the command wrote no callback line into the run log: `check` and `calibrate`
/// need its step lines (the callback writes to `$GRPOFIT_RUN_LOG` only without a path of its
/// own, and nothing where `torch.cuda` is unavailable).
const NO_CALLBACK_LINE: &str = "grpofit: the callback wrote no line into this log, so `grpofit check` and `grpofit calibrate` have no step to read: pass `callbacks=[GrpofitCallback()]` to the trainer with no log path (it then writes to $GRPOFIT_RUN_LOG, which `grpofit run` sets; `grpofit callback` writes grpofit_callback.py); the callback writes only where torch.cuda is available";

/// The line said when the command has ended, with the `check` that reads its log.
fn summary(
    code: u8,
    peaks: Option<sampler::Peaks>,
    est: &Estimate,
    log: &log::RunLog,
    source: &Source,
) -> String {
    let path = &log.path;
    let measured = match peaks.and_then(|p| p.tree.or((p.samples > 0).then_some(p.used))) {
        Some(peak) => format!(
            "NVML peak {} (predicted {})",
            format_size(peak),
            format_size(est.total_bytes)
        ),
        None => "no GPU samples".to_string(),
    };
    let run = match (&source.config, &source.preset) {
        (Some(config), _) => format!(" --config {}", config.display()),
        (None, Some(preset)) => format!(" --preset {preset}"),
        (None, None) => String::new(),
    };
    let said = format!(
        "grpofit: the command exited with {code}; {measured}; log: {} (compare: grpofit check {}{run})",
        path.display(),
        path.display()
    );
    if log::callback_lines(path, log.begins) == 0 {
        return format!("{said}\n{NO_CALLBACK_LINE}");
    }
    said
}

/// When the command's standard error ends with an out-of-memory message: the verdict and the
/// proposed fit, as `grpofit diagnose` gives them for the same run.
fn diagnose_death(stderr: &str, source: &Source, console: &Console) {
    if grpofit_core::diagnose::oom::diagnose(stderr).is_none() {
        return;
    }
    console.say("grpofit: the command ran out of GPU memory; diagnosis:");
    let gpu_mem = gpu_mem(source).ok().flatten();
    match diagnosis(
        stderr,
        "the command's standard error",
        source,
        gpu_mem,
        false,
    ) {
        Ok(text) => console.say(text.trim_end()),
        Err(Failure::Input(why)) => console.say(&format!("grpofit: no diagnosis: {why}")),
        Err(Failure::Output { error, .. }) => {
            console.say(&format!("grpofit: no diagnosis: {error}"))
        }
    }
}
