//! Closing the loop with a real run: `callback` writes the Python callback that measures each
//! step, `check` sets its log against the estimate (grpofit_core::measure::measured).

use crate::cli::Source;
use crate::inputs::{Inputs, calibrate_for, resolve};
use crate::output::*;
use grpofit::tui::follow::Following;
use grpofit_core::config::export::write_atomically;
use grpofit_core::measure::measured::{self, GOOD_WITHIN_PERCENT};
use grpofit_core::measure::tail::Tail;
use grpofit_core::memory::estimate::{Phase, estimate};
use grpofit_core::units::{MIN_GPU_MEMORY, format_size};
use std::io::Write;
use std::path::Path;

/// A run log the screen follows (`grpofit --follow LOG`): the file, what its first look read,
/// and the run to show.
pub(crate) struct Followed {
    pub tail: Tail,
    pub following: Following,
    /// `--config`/`--preset`, else the run file or the preset the log's prediction line names
    pub source: Source,
}

impl Followed {
    /// The log's GPU, for a screen with no NVML reading and no `--gpu-mem`: its memory, and
    /// how the header names it.
    pub(crate) fn log_gpu(&self) -> Option<(u64, String)> {
        let log = self.following.follower.log();
        let device = log.device().unwrap_or("GPU");
        Some((log.total()?, format!("the log's {device}")))
    }
}

/// Opens `log` (a missing one is an error naming it) and reads what it holds so far. Without
/// `--config` or `--preset`, the run is the one the log's prediction line names; when it names
/// none that is here, the screen says so.
pub(crate) fn start_following(log: &Path, source: &Source) -> Result<Followed, Failure> {
    let mut tail = Tail::open(log).map_err(|e| format!("--follow {e}"))?;
    let name = log
        .file_name()
        .map_or_else(|| log.display().to_string(), |n| n.to_string_lossy().into());
    let mut following = Following::new(&name);
    following.take(tail.look());
    // compared as `check` compares it: with the context calibrated for the log's device
    following.calibration = crate::inputs::load_calibration()
        .ok()
        .flatten()
        .map(|(c, _)| c);
    let (source, notice) = source_named_by(following.follower.log(), source);
    following.start_notice = notice;
    Ok(Followed {
        tail,
        following,
        source,
    })
}

/// `--config`/`--preset` when given, else the run file or the preset the log's prediction line
/// names (`grpofit run` writes it), which `--follow` and `check` compare the log with; the
/// second value says why the log's own run is not used, when it is not.
fn source_named_by(log: &measured::RunLog, source: &Source) -> (Source, Option<String>) {
    let mut source = source.clone();
    if source.config.is_some() || source.preset.is_some() {
        return (source, None);
    }
    let named = log.prediction.as_ref();
    let notice = match (
        named.and_then(|p| p.config.clone()),
        named.and_then(|p| p.preset.clone()),
    ) {
        (Some(config), _) if Path::new(&config).is_file() => {
            source.config = Some(config.into());
            None
        }
        (Some(config), _) => Some(format!(
            "the log's run file {config} is not here: pass --config"
        )),
        (None, Some(preset)) => {
            source.preset = Some(preset);
            None
        }
        (None, None) => Some("the log names no run file (yet): pass --config run.toml".into()),
    };
    (source, notice)
}

/// The callback, as `grpofit callback` writes it.
pub(crate) const CALLBACK: &str = include_str!("../examples/grpofit_callback.py");

/// Whether standard output is `path` itself (`grpofit callback > grpofit_callback.py`).
#[cfg(unix)]
fn stdout_is(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata("/dev/stdout"), std::fs::metadata(path)) {
        (Ok(out), Ok(file)) => out.is_file() && out.dev() == file.dev() && out.ino() == file.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn stdout_is(_: &Path) -> bool {
    false
}

/// What follows `grpofit callback`: the loop's next step. Under `grpofit run` the callback
/// writes to the dated log the run names (`$GRPOFIT_RUN_LOG`), not `grpofit-run.jsonl`, which
/// is its file only when the script runs on its own.
const NEXT: &str = "train under `grpofit run --config run.toml -- python train.py` and run the `grpofit check LOG` it prints when it ends (a script run on its own logs to grpofit-run.jsonl)";

/// `callback`: writes the callback to `output` (atomically; an existing file only with
/// `force`, unless it already holds the callback) and prints it, unless standard output is that
/// file (then the shell writes it).
pub(crate) fn write_callback(output: &Path, force: bool) -> Result<u8, Failure> {
    let print = || emit(|out| out.write_all(CALLBACK.as_bytes())).map_err(unwritten(FITS));
    if output == Path::new("-") || stdout_is(output) {
        return print().map(|()| FITS);
    }
    // a file that already holds this callback is left as it is (`grpofit callback > cb.py`
    // after a first `grpofit callback` still prints it); one that holds anything else needs
    // --force
    if std::fs::read(output).is_ok_and(|held| held == CALLBACK.as_bytes()) {
        say(&format!(
            "{} already holds this callback: pass `callbacks=[GrpofitCallback()]` to GRPOTrainer",
            output.display()
        ));
        return print().map(|()| FITS);
    }
    write_atomically(output, CALLBACK, force)?;
    say(&format!(
        "wrote {}: pass `callbacks=[GrpofitCallback()]` to GRPOTrainer, then {NEXT}",
        output.display()
    ));
    print()?;
    Ok(FITS)
}

/// The log's last run (a note says when it holds others before it).
fn read_last_run(log: &Path, shown: &str) -> Result<measured::RunLog, Failure> {
    let file = std::fs::File::open(log).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let (run_log, notes) = measured::parse_last_run_from(std::io::BufReader::new(file), shown)?;
    for note in notes {
        say(&format!("grpofit: note: {note}"));
    }
    Ok(run_log)
}

/// `check`: the log's peaks against the estimate of the run (`--config`/`--preset`), on the
/// GPU the log names unless `--gpu-mem`.
pub(crate) fn run_check(
    log: &Path,
    source: &Source,
    json: bool,
    picture: Option<crate::picture::Svg>,
) -> Result<u8, Failure> {
    picture.map(crate::picture::Svg::check).transpose()?;
    let shown = log.display().to_string();
    let run_log = read_last_run(log, &shown)?;
    let measured = run_log.measured();
    let nvml_peak = run_log.nvml_peak();
    if measured.is_none() && nvml_peak.is_none() {
        return Err(Failure::Input(format!(
            "{shown}: no `step` line and no `nvml` sample: was GrpofitCallback passed to the trainer, or the run started under `grpofit run`?"
        )));
    }
    // the run the log names, unless --config or --preset says otherwise
    let (inputs, from_log) = inputs_for_log(&run_log, source, &shown)?;
    let eff = inputs.efficiencies();
    let Inputs {
        loaded,
        gpu,
        gpu_line,
        calibrated,
        speed,
        time,
        ..
    } = inputs;
    let gpu_line = if from_log {
        format!("{} (the log's)", format_size(gpu.capacity))
    } else {
        gpu_line
    };
    let run = &loaded.file.run;
    let est = estimate(run, gpu);
    let (predicted, rows) = grpofit_core::measure::check::rows(run, &est, &run_log);
    let (timed, step_check) =
        crate::step_time::checked((&speed, &eff), &loaded.file, &est, &run_log);
    let steps = measured.as_ref().map_or(0, |m| m.steps);
    if let Some(svg) = picture {
        let peak = drawn_peak(nvml_peak, measured.as_ref());
        crate::picture::write_svg(svg, run, &est, &gpu_line, peak)?;
    }
    let mut start = run_log.start.clone().unwrap_or_default();
    start.device = run_log.device().map(str::to_string);
    let phase = match predicted.phase {
        Phase::Generation => "generation",
        Phase::Scoring => "scoring",
        Phase::Training => "training",
    };
    let out = if json {
        json_text(&serde_json::json!({
            "run": loaded.origin,
            "log": shown,
            "steps": steps,
            "device": start.device,
            "versions": start.versions.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "capacity_bytes": gpu.capacity,
            "predicted": predicted,
            "measured": measured,
            "nvml_peak": nvml_peak,
            "calibrated": calibrated,
            "rows": rows,
            "step_time": step_check,
            "step_time_calibrated": time.as_ref().map(|t| t.said()),
        }))?
    } else {
        check_text(&CheckText {
            origin: &loaded.origin,
            shown: &shown,
            steps,
            start: &start,
            gpu_line: &gpu_line,
            calibrated: calibrated.as_deref(),
            rows: &rows,
            phase,
            log_total: run_log.total(),
            capacity: gpu.capacity,
            exit: run_log.exit,
        }) + &crate::step_time::check_line(&timed, step_check.as_ref(), time.as_ref())
    };
    emit(|o| o.write_all(out.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// The run and the GPU `check` compares `run_log` with: `--config`/`--preset`, else the run the
/// log names (its origin says so; a note says what stands in when the log's run file is not
/// here), on the log's GPU unless `--gpu-mem`; and whether the capacity is the log's.
fn inputs_for_log(
    run_log: &measured::RunLog,
    source: &Source,
    shown: &str,
) -> Result<(Inputs, bool), Failure> {
    let given = source.config.is_some() || source.preset.is_some();
    let (mut source, notice) = source_named_by(run_log, source);
    let named_by_log = !given && (source.config.is_some() || source.preset.is_some());
    // the run was measured on the log's GPU, not on this machine's: NVML is not asked
    source.no_gpu = true;
    // the step is timed on the log's card, unless --gpu names another
    source.gpu = source
        .gpu
        .or_else(|| crate::step_time::known_card(run_log.device()));
    let from_log = source.gpu_mem.is_none();
    if from_log {
        source.capacity = run_log.total();
        if let Some(t) = run_log.total().filter(|t| *t < MIN_GPU_MEMORY) {
            return Err(Failure::Input(format!(
                "{shown}: the log gives the GPU's total memory as {t} bytes, below {}: not a GPU this log can be checked on (pass --gpu-mem SIZE to check it against another)",
                format_size(MIN_GPU_MEMORY)
            )));
        }
    }
    let mut inputs = resolve(&source)?;
    // the context measured on the log's GPU, when `grpofit calibrate` learned one
    if let Some(device) = run_log.device() {
        calibrate_for(&mut inputs, device)?;
    }
    if named_by_log {
        inputs.loaded.origin = (inputs.loaded.origin)
            .replace(
                "(--config)",
                "(the run file the log's prediction line names)",
            )
            .replace("(--preset)", "(the preset the log's prediction line names)");
    }
    if let Some(notice) = notice {
        say(&format!(
            "grpofit: note: {shown}: {notice}; compared with {}",
            inputs.loaded.origin
        ));
    }
    Ok((inputs, from_log))
}

/// The peak `check --svg` sets against the estimate's total: the process tree's, else the
/// device's.
fn drawn_peak(
    nvml_peak: Option<u64>,
    measured: Option<&measured::Measured>,
) -> Option<(u64, &'static str)> {
    nvml_peak
        .map(|p| (p, "measured, whole process (NVML peak)"))
        .or_else(|| measured.map(|m| (m.max_used, "measured, device in use")))
}

/// What `check`'s text report says.
struct CheckText<'a> {
    origin: &'a str,
    shown: &'a str,
    steps: usize,
    start: &'a measured::Start,
    gpu_line: &'a str,
    calibrated: Option<&'a str>,
    rows: &'a [measured::Row],
    phase: &'a str,
    log_total: Option<u64>,
    capacity: u64,
    /// the `exit` line (`grpofit run`), when the log has one
    exit: Option<measured::Exit>,
}

/// A line when the log's `exit` line says the command failed or was stopped (128 + the
/// signal): its figures are those of the steps it ran, which a run cut short can leave below
/// the peak it would have reached.
fn ended_early(exit: Option<measured::Exit>) -> String {
    let Some(exit) = exit else {
        return String::new();
    };
    match (exit.signal, exit.code) {
        (Some(signal), _) => format!(
            "ended: stopped by signal {signal}: the figures are those of the steps it ran\n"
        ),
        (None, None | Some(0)) => String::new(),
        (None, Some(c)) => {
            format!(
                "ended: the command failed (exit {c}): the figures are those of the steps it ran\n"
            )
        }
    }
}

/// `check`'s report in words: the run, the log, the GPU, the rows, and how to read them.
fn check_text(c: &CheckText) -> String {
    let mut t = format!("run: {}\n", c.origin);
    let versions: Vec<String> = c
        .start
        .versions
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    t += &format!(
        "log: {}: {} step{} on {}{}\n",
        c.shown,
        c.steps,
        if c.steps == 1 { "" } else { "s" },
        c.start.device.as_deref().unwrap_or("an unnamed GPU"),
        if versions.is_empty() {
            String::new()
        } else {
            format!(" ({})", versions.join(", "))
        }
    );
    t += &ended_early(c.exit);
    t += &format!("GPU: {}\n", c.gpu_line);
    if let Some(cal) = c.calibrated {
        t += &format!("{cal}\n");
    }
    t += "\n";
    t += &format!(
        "{:<30} {:>11} {:>11} {:>9}  verdict\n",
        "", "predicted", "measured", "error"
    );
    for r in c.rows {
        t += &format!(
            "{:<30} {:>11} {:>11} {:>7.1} %  {}\n",
            r.name,
            format_size(r.predicted_bytes),
            format_size(r.measured_bytes),
            r.error_percent,
            r.verdict.word()
        );
    }
    // how to read each row that is there: a log of NVML samples alone has no torch rows, one
    // of the callback alone no NVML row
    let has = |name: &str| c.rows.iter().any(|r| r.name.starts_with(name));
    t += &format!(
        "\nerror: (predicted - measured) / measured; good within {GOOD_WITHIN_PERCENT} %.\n"
    );
    if has("peak allocated") {
        t += &format!(
            "torch's counters are the largest over the steps and count everything the training \
             process holds: weights, adapters, optimizer states and, with vLLM colocated, vLLM's \
             tensors, besides the step's activations. GRPOTrainer generates inside the training \
             step, so a step's peak covers both phases: predicted from the {} phase, the \
             larger.\n",
            c.phase
        );
    }
    if has("device in use") {
        t += "device in use: total - free when a step ended (other processes count too), against \
              the estimate's total (CUDA context included).\n";
    }
    if has("whole process") {
        t += "whole process: the largest memory NVML listed for the command's processes while \
              `grpofit run` sampled it twice a second, against the estimate's total.\n";
    }
    if let Some(total) = c.log_total.filter(|t| *t != c.capacity) {
        t += &format!(
            "note: the log's GPU has {}, the estimate was made for {}\n",
            format_size(total),
            format_size(c.capacity)
        );
    }
    t
}
