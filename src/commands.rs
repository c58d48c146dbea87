//! The commands: each resolves its inputs (inputs.rs), does its one job and writes its answer
//! (output.rs).

use crate::cli::Source;
use crate::inputs::{Inputs, Warnings, resolve, resolve_with};
use crate::output::*;
use grpofit::gpu::{GpuProbe, NvmlProbe};
use grpofit_core::arch::catalog;
use grpofit_core::fit::{DEFAULT_HEADROOM, FitOutcome, fit, fit_in_place};
use grpofit_core::memory::estimate::{Estimator, GpuBudget, estimate};
use std::io::Write;

use grpofit::tui::app::{App, GpuState};
use grpofit::tui::theme::Theme;
use grpofit_core::config::RunFile;
use grpofit_core::config::export::{ExportContext, write_atomically};
use grpofit_core::units::format_size;

/// What `estimate` writes besides its report.
pub(crate) struct Exports<'a> {
    /// the run file (`--export`; `-` for standard output)
    pub run_file: Option<&'a std::path::Path>,
    /// the launch set's folder (`--export-dir`)
    pub launch_dir: Option<&'a std::path::Path>,
    pub force: bool,
    /// the main node's address for a multi-node launch set (`--main-process-ip`)
    pub main_process_ip: Option<&'a str>,
    /// the memory bar as SVG (`--svg`)
    pub picture: Option<crate::picture::Svg<'a>>,
}

pub(crate) fn run_estimate(source: &Source, json: bool, exports: Exports) -> Result<u8, Failure> {
    let (export, force) = (exports.run_file, exports.force);
    check_exports(&exports)?;
    let to_stdout = export.is_some_and(|o| o == std::path::Path::new("-"));
    let warnings = Warnings::unless_machine_read(json || to_stdout);
    let inputs = resolve_with(source, warnings)?;
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
    let file = &loaded.file;
    let est = estimate(&file.run, gpu);
    let step = crate::step_time::predict(&speed, file, &file.run, &est, &eff);
    let answer = if est.fits { FITS } else { DOES_NOT_FIT };
    if est.host_memory_bytes > 0
        && let Some(note) = crate::host::offload_note(est.host_memory_bytes)
    {
        say(&note);
    }
    // `--json --export -`: the run file goes inside the one JSON object, as `export`
    if let Some(out) = export.filter(|_| !(json && to_stdout)) {
        export_run(file, &file.run, (gpu, &gpu_line), &est, out, force, answer)?;
    }
    let mut stand_in = None;
    if let Some(dir) = exports.launch_dir {
        let opts = grpofit_core::config::launch_set::LaunchOptions {
            main_process_ip: exports.main_process_ip,
        };
        stand_in = export_launch_set((file, source), (gpu, &gpu_line), &est, (dir, opts), force)?;
    }
    if let Some(svg) = exports.picture {
        crate::picture::write_svg_timed(svg, &file.run, &est, &gpu_line, None, step.as_ref().ok())?;
    }
    if json {
        let mut v = serde_json::to_value(&est).map_err(|e| e.to_string())?;
        v["parameters"] = serde_json::json!(file.run.arch.parameters());
        v["model_source"] = serde_json::to_value(&file.model_source).map_err(|e| e.to_string())?;
        v["stored_weights"] =
            serde_json::to_value(file.run.stored_weights).map_err(|e| e.to_string())?;
        v["calibrated"] = serde_json::json!(calibrated);
        crate::step_time::json(&mut v, &step, time.as_ref())?;
        if to_stdout {
            v["export"] = serde_json::json!(stdout_export(file, (gpu, &gpu_line), &est)?);
        }
        v["versions"] = serde_json::to_value(&file.versions).map_err(|e| e.to_string())?;
        // the versions' warnings first, then the estimate's own (vLLM's refusal ...)
        let own = v["warnings"].as_array().cloned().unwrap_or_default();
        let versions = file.warnings.iter().map(|w| serde_json::json!(w));
        v["warnings"] = serde_json::Value::Array(versions.chain(own).collect());
        // the headroom `fit` keeps, and whether the run keeps it
        v["headroom_kept_fraction"] = serde_json::json!(DEFAULT_HEADROOM);
        v["fits_with_headroom"] = serde_json::json!(grpofit_core::fit::fits_with_headroom(
            &est,
            DEFAULT_HEADROOM
        ));
        let text = json_text(&v)?;
        emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(answer))?;
    } else if !to_stdout {
        let table = grpofit::report::table(&file.run, &est, &gpu_line, calibrated.is_some());
        let weights = grpofit::report::stored_weights_note(&file.run);
        let calibrated = calibrated.map_or(String::new(), |c| format!("{c}\n"));
        // the export set's stand-in script, said with the report it was written for
        let stand_in = stand_in.map_or(String::new(), |s| format!("{s}\n"));
        let warnings: String = file
            .warnings
            .iter()
            .map(|w| format!("warning: {w}\n"))
            .collect();
        let step = crate::step_time::line(&step, time.as_ref());
        emit(|out| {
            write!(
                out,
                "run: {}\nmodel: {}{weights}\nversions: {}\n{warnings}{table}{calibrated}{step}{stand_in}",
                loaded.origin,
                file.model_source,
                grpofit::report::versions_line(&file.versions)
            )
        })
        .map_err(unwritten(answer))?;
    }
    Ok(answer)
}

/// The interactive screen, following the run log `follow` when given; without a terminal, the
/// estimate is printed instead.
pub(crate) fn open_screen(
    source: &Source,
    mouse: bool,
    follow: Option<&std::path::Path>,
) -> Result<u8, Failure> {
    use std::io::IsTerminal;
    let followed = follow
        .map(|log| crate::loop_commands::start_following(log, source))
        .transpose()?;
    let source = followed
        .as_ref()
        .map_or_else(|| source.clone(), |f| f.source.clone());
    let source = &source;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        say("grpofit: not a terminal: printing the estimate instead of the interactive screen");
        return run_estimate(
            source,
            false,
            Exports {
                run_file: None,
                launch_dir: None,
                force: false,
                main_process_ip: None,
                picture: None,
            },
        );
    }
    let Inputs {
        loaded,
        gpu: mut budget,
        detected,
        speed,
        ..
    } = resolve_with(source, Warnings::WithReport)?;
    let live = detected.as_ref().ok().cloned();
    let unavailable = detected.as_ref().err().cloned();
    // a followed run without NVML here: the log's GPU, as `check` takes it
    let log_gpu = followed
        .as_ref()
        .filter(|_| source.gpu_mem.is_none() && live.is_none())
        .and_then(|f| f.log_gpu());
    let name = match (&source.gpu_mem, &live, log_gpu) {
        (Some(_), _, _) => "--gpu-mem".to_string(),
        (None, Some(g), _) => g.name.clone(),
        (None, None, Some((capacity, name))) => {
            budget.capacity = capacity;
            name
        }
        (None, None, None) => format!("{}'s gpu_memory", loaded.name),
    };
    let file = loaded.file;
    let gpu = GpuState {
        capacity: budget.capacity,
        capacity_from_user: source.gpu_mem.is_some(),
        name,
        live,
        unavailable,
    };
    let here = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let mut app = App::new(file, gpu, Theme::from_env(), here);
    app.time_on(speed);
    app.calibrated_with(crate::inputs::calibration_quietly());
    let hub = crate::inputs::hub_for(source);
    app.look_up_in(hub.cache, hub.access);
    let tail = followed.map(|f| {
        app.follow(f.following);
        f.tail
    });
    grpofit::tui::run(app, !source.no_gpu, mouse, tail)?;
    Ok(FITS)
}

pub(crate) fn show_gpu(json: bool) -> Result<u8, Failure> {
    let detected = NvmlProbe.probe_all();
    let answer = if detected.is_ok() { FITS } else { NO_GPU };
    emit(|out| {
        if json {
            let value = match &detected {
                Ok(gpus) => serde_json::json!({
                    "detected": true,
                    "gpu": gpus.first(),
                    "gpus": gpus,
                    "mixed": grpofit::gpu::mixed_cards(gpus),
                }),
                Err(why) => serde_json::json!({ "detected": false, "reason": why }),
            };
            return writeln!(out, "{value}");
        }
        let gpus = match &detected {
            Ok(gpus) => gpus,
            Err(why) => return writeln!(out, "no GPU detected: {why}"),
        };
        let opt = |b: Option<u64>| b.map_or("unknown".to_string(), format_size);
        for (i, g) in gpus.iter().enumerate() {
            writeln!(
                out,
                "GPU {i}: {}: {} total for CUDA ({} installed, {} reserved by the driver), {} used, {} free",
                g.name,
                format_size(g.total_bytes),
                format_size(g.installed_bytes),
                format_size(g.installed_bytes.saturating_sub(g.total_bytes)),
                opt(g.used_bytes),
                opt(g.free_bytes)
            )?;
            for p in &g.processes {
                writeln!(out, "  process {}: {}", p.pid, opt(p.bytes))?;
            }
        }
        if let Some(kinds) = grpofit::gpu::mixed_cards(gpus) {
            writeln!(
                out,
                "mixed cards ({kinds}): grpofit sizes every role on GPU 0's capacity"
            )?;
        }
        Ok(())
    })
    .map_err(unwritten(answer))?;
    Ok(answer)
}

pub(crate) fn run_fit(
    source: &Source,
    headroom: f64,
    output: Option<&std::path::Path>,
    force: bool,
    json: bool,
    picture: Option<crate::picture::Svg>,
) -> Result<u8, Failure> {
    check_fit_args(headroom, output, force, picture)?;
    let Inputs {
        loaded,
        gpu,
        gpu_line,
        ..
    } = resolve(source)?;
    let file = &loaded.file;
    let mut estimator = Estimator::new();
    let outcome = if keeps_hardware(source, file, output) {
        let kept = fit_in_place(&file.run, gpu, headroom / 100.0, &mut estimator);
        if matches!(kept, FitOutcome::Impossible { .. }) {
            advise_hardware(&file.run, gpu, headroom / 100.0, &mut estimator);
        }
        kept
    } else {
        fit(&file.run, gpu, headroom / 100.0, &mut estimator)
    };
    let text = if json {
        json_text(&outcome)?
    } else {
        let fitted = grpofit::report::fit_text(&file.run, &outcome, &gpu_line, headroom);
        format!("run: {}\n{fitted}", loaded.origin)
    };
    // a reader gone from standard output does not stop the fitted file from being written
    let printed = emit(|out| out.write_all(text.as_bytes()));
    let fitted = match &outcome {
        FitOutcome::AlreadyFits { estimate } => Some((file.run.clone(), estimate)),
        FitOutcome::Fitted { run, estimate, .. } => Some(((**run).clone(), estimate)),
        FitOutcome::Impossible { .. } => None,
    };
    let answer = if fitted.is_some() { FITS } else { DOES_NOT_FIT };
    if let Some(svg) = picture {
        let (run, est) = match &outcome {
            FitOutcome::Fitted { run, estimate, .. } => (&**run, estimate),
            FitOutcome::AlreadyFits { estimate } | FitOutcome::Impossible { estimate, .. } => {
                (&file.run, estimate)
            }
        };
        crate::picture::write_svg(svg, run, est, &gpu_line, None)?;
    }
    if let (Some((run, est)), Some(out)) = (fitted, output) {
        export_run(file, &run, (gpu, &gpu_line), est, out, force, answer)?;
    }
    printed.map_err(unwritten(answer))?;
    Ok(answer)
}

/// `fit`'s arguments, checked before any work (`fit` and `fit --fastest`): the headroom, the
/// output file (`--force` to replace one), the picture's file.
pub(crate) fn check_fit_args(
    headroom: f64,
    output: Option<&std::path::Path>,
    force: bool,
    picture: Option<crate::picture::Svg>,
) -> Result<(), Failure> {
    if !headroom.is_finite() || !(0.0..=50.0).contains(&headroom) {
        return Err(Failure::Input(format!(
            "--headroom {headroom}: expected a percentage between 0 and 50"
        )));
    }
    if let Some(out) = output.filter(|o| *o != std::path::Path::new("-")) {
        grpofit_core::files::check_output(out, force)?;
    }
    picture.map(crate::picture::Svg::check).transpose()?;
    Ok(())
}

/// Whether `fit` (and `fit --fastest`'s nearest fit) must keep the run's GPUs and sharding: an explicit `--num-processes` pins
/// the training GPUs, an accelerate config given with `--launch` gives them and the sharding
/// again on every read, and a recipe written with `-o` has no key for the GPU count, the ZeRO
/// stage or vLLM's own GPUs (they are the accelerate config's and the launch command's), so a
/// fit that needs them is not one the written file holds.
pub(crate) fn keeps_hardware(
    source: &Source,
    file: &RunFile,
    output: Option<&std::path::Path>,
) -> bool {
    use grpofit_core::config::source::Format;
    let written = output.map(|out| match &file.source {
        Some(s) if out == std::path::Path::new("-") => s.format,
        _ => Format::of(out),
    });
    // a spread read from `--launch` is read from it again: a write cannot carry a change to it
    source.num_processes.is_some()
        || written == Some(Format::Yaml)
        || (written.is_some() && source.launch.is_some())
}

/// When the run's own knobs cannot fit it: what more GPUs or more sharding would do, said as
/// advice on standard error, since neither the recipe nor `--num-processes` takes it.
fn advise_hardware(
    run: &grpofit_core::run::RunConfig,
    gpu: GpuBudget,
    headroom: f64,
    est: &mut Estimator,
) {
    let FitOutcome::Fitted { changes, .. } = fit(run, gpu, headroom, est) else {
        return;
    };
    let list: Vec<String> = changes
        .iter()
        .map(|c| format!("{} {} -> {}", c.key, c.from, c.to))
        .collect();
    say(&format!(
        "grpofit: note: no setting of the run fits it on these GPUs; it would fit with {}: not written, since the GPU count and the sharding are the accelerate config's (`accelerate launch --num_processes`, its zero_stage / offload) and vLLM's GPUs the launch command's; try `grpofit fit` without --num-processes and with a .toml or no -o, or `grpofit estimate --export-dir` for the launch set",
        list.join(", ")
    ));
}

/// Writes `run` as the trainer's TOML, with the header of the file it came from and its estimate;
/// `answer` is the command's exit code, kept if standard output (`-`) has no reader left.
pub(crate) fn export_run(
    file: &RunFile,
    run: &grpofit_core::run::RunConfig,
    gpu: (GpuBudget, &str),
    estimate: &grpofit_core::memory::estimate::Estimate,
    out: &std::path::Path,
    force: bool,
    answer: u8,
) -> Result<(), Failure> {
    export_run_checked(file, run, gpu, estimate, (out, force), answer, &|_| Ok(()))
}

/// [`export_run`], the text first passed to `check` (which reads it back): nothing is written
/// or printed when it refuses.
pub(crate) fn export_run_checked(
    file: &RunFile,
    run: &grpofit_core::run::RunConfig,
    gpu: (GpuBudget, &str),
    estimate: &grpofit_core::memory::estimate::Estimate,
    (out, force): (&std::path::Path, bool),
    answer: u8,
    check: &dyn Fn(&str) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut notes = Vec::new();
    let model_config = written_model_config(file, out);
    let ctx = ExportContext {
        model_config: model_config.as_deref(),
        ..export_context(file, gpu, estimate)
    };
    let text = grpofit_core::config::write_back::text_for(
        out,
        file.source.as_ref(),
        run,
        &ctx,
        &mut notes,
    )?;
    check(&text)?;
    for note in notes {
        say(&format!("grpofit: note: {note}"));
    }
    if out == std::path::Path::new("-") {
        return emit(|o| o.write_all(text.as_bytes())).map_err(unwritten(answer));
    }
    // the file read may have been saved again since: what is built from it would drop that
    grpofit_core::config::write_back::check_unchanged(file.source.as_ref())?;
    write_atomically(out, &text, force)?;
    say(&format!("wrote {}", out.display()));
    Ok(())
}

/// The run file `--json --export -` puts in its JSON: the user's own file edited in place.
fn stdout_export(
    file: &RunFile,
    gpu: (GpuBudget, &str),
    est: &grpofit_core::memory::estimate::Estimate,
) -> Result<String, Failure> {
    let mut notes = Vec::new();
    let stdout = std::path::Path::new("-");
    let model_config = written_model_config(file, stdout);
    let text = grpofit_core::config::write_back::text_for(
        stdout,
        file.source.as_ref(),
        &file.run,
        &ExportContext {
            model_config: model_config.as_deref(),
            ..export_context(file, gpu, est)
        },
        &mut notes,
    )?;
    for note in notes {
        say(&format!("grpofit: note: {note}"));
    }
    Ok(text)
}

/// The `[grpofit] model_config` a run file written to `out` holds: the config.json the run read,
/// named from `out`'s folder (`config::relocate`, worked out lexically). Where that folder
/// exists and the lexical path does not reach the same file from it (a folder that is a
/// symbolic link elsewhere: `..` is then its target's parent), the config.json's own absolute
/// path, which does.
pub(crate) fn written_model_config(
    file: &RunFile,
    out: &std::path::Path,
) -> Option<std::path::PathBuf> {
    use std::path::Path;
    let here = std::env::current_dir().unwrap_or_default();
    let resolved = file.model_config.as_deref()?;
    let named =
        grpofit_core::config::relocate::model_config_at(out, &here, file.source.as_ref(), resolved);
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if out == Path::new("-") || named.is_absolute() || !dir.is_dir() {
        return Some(named);
    }
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    match (real(&dir.join(&named)), real(resolved)) {
        (Some(found), Some(read)) if found == read => Some(named),
        (_, Some(read)) => Some(read),
        _ => Some(named),
    }
}

/// What an exported file's header says: the GPU, the capacity and the estimate.
fn export_context<'a>(
    file: &'a RunFile,
    gpu: (GpuBudget, &'a str),
    estimate: &'a grpofit_core::memory::estimate::Estimate,
) -> ExportContext<'a> {
    ExportContext {
        gpu: gpu.1,
        gpu_memory: Some(gpu.0.capacity),
        // set by each write, named from the written file's folder (`written_model_config`)
        model_config: None,
        lock_effective_batch: file.lock_effective_batch,
        estimate: Some(estimate),
        time: Some(&file.time),
    }
}

/// The outputs of `estimate`, checked before any work: each path can be written, and nothing
/// there is replaced without `--force`.
fn check_exports(exports: &Exports) -> Result<(), Failure> {
    if let Some(out) = exports.run_file.filter(|o| *o != std::path::Path::new("-")) {
        grpofit_core::files::check_output(out, exports.force)?;
    }
    if let Some(dir) = exports.launch_dir {
        grpofit_core::files::check_output_dir(dir)?;
        // an existing folder only with --force, and only when it holds a set's files alone
        let names = grpofit_core::config::export_set::SET_NAMES;
        grpofit_core::files_set::check_set_folder(dir, names, exports.force)?;
    }
    exports
        .picture
        .map(crate::picture::Svg::check)
        .transpose()?;
    Ok(())
}

/// The example training script the launch set runs (examples/train_trl.py).
const TRAIN_TRL: &str = include_str!("../examples/train_trl.py");
/// The single-GPU Unsloth script an Unsloth launch set runs (examples/train_unsloth.py).
const TRAIN_UNSLOTH: &str = include_str!("../examples/train_unsloth.py");

/// `--export-dir DIR`: the user's own run and its launch set (`export_set`), written as one
/// folder: into a temporary folder beside DIR, then renamed into place (`files_set`). Returns
/// the sentence that says the set's training script is a stand-in, when it is one.
fn export_launch_set(
    (file, source): (&RunFile, &Source),
    gpu: (GpuBudget, &str),
    est: &grpofit_core::memory::estimate::Estimate,
    (dir, opts): (
        &std::path::Path,
        grpofit_core::config::launch_set::LaunchOptions,
    ),
    force: bool,
) -> Result<Option<String>, Failure> {
    use grpofit_core::config::export_set::{SET_NAMES, SetInputs, export_set};
    // the set's run file is written into `dir`
    let model_config =
        written_model_config(file, &dir.join(grpofit_core::config::export_set::RUN_FILE));
    let ctx = ExportContext {
        model_config: model_config.as_deref(),
        ..export_context(file, gpu, est)
    };
    let launch_config = match &source.launch {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| format!("--launch {}: cannot read: {e}", p.display()))?,
        ),
        None => None,
    };
    let recipe_dir = file.source.as_ref().map(|s| s.path.clone());
    let locate = |path: &str| locate_script(recipe_dir.as_deref(), path);
    let set = export_set(&SetInputs {
        run: &file.run,
        source: file.source.as_ref(),
        ctx: &ctx,
        opts,
        launch_config: launch_config.as_deref(),
        locate: &locate,
    })?;
    let mut files = set.files;
    if let Some(script) = set.stand_in {
        let text = match file.run.stack {
            grpofit_core::run::Stack::Trl => TRAIN_TRL,
            grpofit_core::run::Stack::Unsloth => TRAIN_UNSLOTH,
        };
        files.push(grpofit_core::files_set::SetFile {
            name: script.to_string(),
            text: text.to_string(),
            executable: false,
        });
    }
    grpofit_core::files_set::write_set(dir, &files, SET_NAMES, force)?;
    for note in &set.notes {
        say(&format!("grpofit: note: {note}"));
    }
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    say(&format!("wrote {} in {}", names.join(", "), dir.display()));
    let stand_in = set.stand_in.map(|script| format!(
        "{script} is a STAND-IN: it trains on a placeholder prompt with a length reward, not your dataset or rewards; put yours in it, or export from your TRL recipe (--config recipe.yaml) to launch your own run"
    ));
    if let Some(line) = &stand_in {
        say(&format!("grpofit: {line}"));
    }
    Ok(stand_in)
}

/// Where a script a recipe names by a relative path is: beside the recipe or in a folder
/// above it (a recipe inside its project: open-r1's `recipes/...` under the checkout), else in
/// the current folder; as an absolute path.
fn locate_script(recipe: Option<&std::path::Path>, path: &str) -> Option<String> {
    let named = std::path::Path::new(path);
    if named.is_absolute() {
        return named.is_file().then(|| path.to_string());
    }
    let cwd = std::env::current_dir().ok();
    let recipe = recipe.and_then(|r| std::path::absolute(r).ok());
    let above = recipe.iter().flat_map(|r| r.ancestors().skip(1));
    above
        .chain(cwd.as_deref())
        .map(|d| d.join(named))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

pub(crate) fn list_models(json: bool) -> Result<u8, Failure> {
    let text = if json {
        let rows: Vec<serde_json::Value> = catalog::ids()
            .filter_map(catalog::find)
            .map(|found| {
                let a = &found.arch;
                serde_json::json!({
                    "name": found.id,
                    "parameters": a.parameters(),
                    "layers": a.layers,
                    "hidden_size": a.hidden,
                    "vocab_size": a.vocab,
                    "max_position_embeddings": a.max_position,
                    "experts": a.moe.map(|m| m.experts),
                    "active_experts": a.moe.map(|m| m.active),
                })
            })
            .collect();
        json_text(&rows)?
    } else {
        catalog::ids().map(|id| format!("{id}\n")).collect()
    };
    emit(|out| out.write_all(text.as_bytes()))
        .map(|()| FITS)
        .map_err(unwritten(FITS))
}

pub(crate) fn list_presets(source: &crate::cli::Source, json: bool) -> Result<u8, Failure> {
    let presets = grpofit::presets::shipped();
    let rows = presets.all(&crate::inputs::hub_for(source));
    if json {
        let text = json_text(&presets_json(&rows))?;
        return emit(|out| out.write_all(text.as_bytes()))
            .map(|()| FITS)
            .map_err(unwritten(FITS));
    }
    emit(|out| {
        for (name, file) in rows {
            match file {
                Ok(file) => {
                    let cap = file.gpu_memory.unwrap_or(0);
                    let est = estimate(
                        &file.run,
                        GpuBudget {
                            capacity: cap,
                            used_by_others: 0,
                            context: None,
                        },
                    );
                    writeln!(
                        out,
                        "{name:<14} {:<44} capacity {:>10}  estimate {:>10}  {}",
                        file.run.model_name,
                        format_size(cap),
                        format_size(est.total_bytes),
                        if est.fits { "fits" } else { "does not fit" }
                    )?;
                }
                Err(e) => writeln!(out, "{name:<14} cannot be read: {e}")?,
            }
        }
        if let Some(dir) = presets.user_dir() {
            writeln!(out, "your own presets: {}/*.toml", dir.display())?;
        }
        Ok(())
    })
    .map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// `presets --json`: one object per preset, as the text lists them.
fn presets_json(
    rows: &[(String, Result<RunFile, grpofit_core::config::LoadError>)],
) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|(label, file)| {
            let (name, whose) = label
                .split_once(" (")
                .map_or((label.as_str(), "built-in"), |(n, w)| {
                    (n, w.trim_end_matches(')'))
                });
            let Ok(file) = file else {
                let error = file.as_ref().err().map(ToString::to_string);
                return serde_json::json!({"name": name, "whose": whose, "error": error});
            };
            let capacity = file.gpu_memory.unwrap_or(0);
            let gpu = GpuBudget {
                capacity,
                used_by_others: 0,
                context: None,
            };
            let est = estimate(&file.run, gpu);
            serde_json::json!({
                "name": name,
                "whose": whose,
                "model": file.run.model_name,
                "capacity_bytes": capacity,
                "estimate_bytes": est.total_bytes,
                "fits": est.fits,
            })
        })
        .collect();
    serde_json::Value::Array(rows)
}
