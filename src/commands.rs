//! The commands: each resolves its inputs (inputs.rs), does its one job and writes its answer
//! (output.rs).

use crate::cli::{Cli, Source};
use crate::inputs::{Inputs, load_source, resolve};
use crate::output::*;
use grpofit::gpu::{GpuProbe, NvmlProbe};
use grpofit_core::arch::catalog;
use grpofit_core::fit::{DEFAULT_HEADROOM, FitOutcome, fit};
use grpofit_core::memory::estimate::{Estimator, GpuBudget, estimate};
use std::io::Write;

use grpofit::tui::app::{App, GpuState};
use grpofit::tui::theme::Theme;
use grpofit_core::config::RunFile;
use grpofit_core::config::export::{ExportContext, write_atomically};
use grpofit_core::presets;
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
    pub picture: Option<&'a std::path::Path>,
}

pub(crate) fn run_estimate(source: &Source, json: bool, exports: Exports) -> Result<u8, Failure> {
    let (export, force) = (exports.run_file, exports.force);
    check_exports(&exports)?;
    let Inputs {
        loaded,
        gpu,
        gpu_line,
        calibrated,
        speed,
        ..
    } = resolve(source)?;
    let file = &loaded.file;
    let est = estimate(&file.run, gpu);
    let step = crate::step_time::predict(&speed, file, &file.run, &est);
    let answer = if est.fits { FITS } else { DOES_NOT_FIT };
    if est.host_memory_bytes > 0
        && let Some(note) = crate::host::offload_note(est.host_memory_bytes)
    {
        say(&note);
    }
    let to_stdout = export.is_some_and(|o| o == std::path::Path::new("-"));
    // `--json --export -`: the run file goes inside the one JSON object, as `export`
    if let Some(out) = export.filter(|_| !(json && to_stdout)) {
        export_run(file, &file.run, (gpu, &gpu_line), &est, out, force, answer)?;
    }
    if let Some(dir) = exports.launch_dir {
        let opts = grpofit_core::config::launch_set::LaunchOptions {
            main_process_ip: exports.main_process_ip,
        };
        export_launch_set(file, (gpu, &gpu_line), &est, (dir, opts), force)?;
    }
    if let Some(path) = exports.picture {
        crate::picture::write_svg_timed(
            path,
            &file.run,
            &est,
            &gpu_line,
            None,
            step.as_ref().ok(),
        )?;
    }
    if json {
        let mut v = serde_json::to_value(&est).map_err(|e| e.to_string())?;
        v["parameters"] = serde_json::json!(file.run.arch.parameters());
        v["model_source"] = serde_json::to_value(&file.model_source).map_err(|e| e.to_string())?;
        v["stored_weights"] =
            serde_json::to_value(file.run.stored_weights).map_err(|e| e.to_string())?;
        v["calibrated"] = serde_json::json!(calibrated);
        crate::step_time::json(&mut v, &step)?;
        if to_stdout {
            // the run file `--export -` writes: the user's own file edited in place
            let mut notes = Vec::new();
            let text = grpofit_core::config::write_back::text_for(
                std::path::Path::new("-"),
                file.source.as_ref(),
                &file.run,
                &export_context(file, (gpu, &gpu_line), &est),
                &mut notes,
            )?;
            notes
                .iter()
                .for_each(|n| say(&format!("grpofit: note: {n}")));
            v["export"] = serde_json::json!(text);
        }
        v["versions"] = serde_json::to_value(&file.versions).map_err(|e| e.to_string())?;
        let text = json_text(&v)?;
        emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(answer))?;
    } else if !to_stdout {
        let table = grpofit::report::table(&file.run, &est, &gpu_line);
        let weights = grpofit::report::stored_weights_note(&file.run);
        let calibrated = calibrated.map_or(String::new(), |c| format!("{c}\n"));
        let step = crate::step_time::line(&step);
        emit(|out| {
            write!(
                out,
                "run: {}\nmodel: {}{weights}\nversions: {}\n{table}{calibrated}{step}",
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
        ..
    } = resolve(source)?;
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
    picture: Option<&std::path::Path>,
) -> Result<u8, Failure> {
    if !headroom.is_finite() || !(0.0..=50.0).contains(&headroom) {
        return Err(Failure::Input(format!(
            "--headroom {headroom}: expected a percentage between 0 and 50"
        )));
    }
    if let Some(out) = output.filter(|o| *o != std::path::Path::new("-")) {
        grpofit_core::files::check_output(out, force)?;
    }
    let Inputs {
        loaded,
        gpu,
        gpu_line,
        ..
    } = resolve(source)?;
    let file = &loaded.file;
    let mut estimator = Estimator::new();
    let outcome = fit(&file.run, gpu, headroom / 100.0, &mut estimator);
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
    if let Some(path) = picture {
        let (run, est) = match &outcome {
            FitOutcome::Fitted { run, estimate, .. } => (&**run, estimate),
            FitOutcome::AlreadyFits { estimate } | FitOutcome::Impossible { estimate, .. } => {
                (&file.run, estimate)
            }
        };
        crate::picture::write_svg(path, run, est, &gpu_line, None)?;
    }
    if let (Some((run, est)), Some(out)) = (fitted, output) {
        export_run(file, &run, (gpu, &gpu_line), est, out, force, answer)?;
    }
    printed.map_err(unwritten(answer))?;
    Ok(answer)
}

/// `diagnose`: the last OOM message of a log, read with the run that failed (`--config` or
/// `--preset`) and the GPU's memory (`--gpu-mem`, else the run file's) where the message gives
/// none.
pub(crate) fn run_diagnose(
    log: Option<&std::path::Path>,
    source: &Source,
    json: bool,
    picture: Option<&std::path::Path>,
) -> Result<u8, Failure> {
    use std::io::IsTerminal;
    if log.is_none() && std::io::stdin().is_terminal() {
        // nothing piped in: say what is expected rather than wait for a log typed by hand
        use clap::CommandFactory;
        let mut cli = Cli::command();
        cli.build();
        let usage = cli
            .find_subcommand_mut("diagnose")
            .map(|c| c.render_usage().to_string())
            .unwrap_or_default();
        return Err(Failure::Input(format!(
            "diagnose: no log given and standard input is a terminal: name the log file, or pipe the log in (`-` reads standard input)\n{usage}"
        )));
    }
    let gpu_mem = crate::inputs::gpu_mem(source)?;
    // the log's last 16 MiB (log_tail.rs): the last OOM message is at its end
    let (bytes, cut) = match log {
        Some(p) if p != std::path::Path::new("-") => crate::log_tail::read_file_end(p)
            .map_err(|e| format!("{}: cannot read: {e}", p.display()))?,
        _ => crate::log_tail::read_end(std::io::stdin().lock())
            .map_err(|e| format!("standard input: {e}"))?,
    };
    let text = String::from_utf8_lossy(&bytes);
    let shown = log.map_or("standard input".to_string(), |p| p.display().to_string());
    if cut {
        say(&format!(
            "grpofit: note: {shown}: only its last {} MiB are read, where the last out-of-memory message is",
            crate::log_tail::KEPT >> 20
        ));
    }
    let text = diagnosis_drawn(&text, &shown, source, gpu_mem, json, picture)?;
    emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// The diagnosis of the last OOM message of `text` (`shown` names it), as `diagnose` prints it:
/// with the run of `source` when it names one, the GPU's memory from the message, else
/// `gpu_mem`, else the run file's. `grpofit run` prints it when its command runs out of memory.
pub(crate) fn diagnosis(
    text: &str,
    shown: &str,
    source: &Source,
    gpu_mem: Option<u64>,
    json: bool,
) -> Result<String, Failure> {
    diagnosis_drawn(text, shown, source, gpu_mem, json, None)
}

/// `diagnosis`, and with `picture` (`diagnose --svg`) the memory bar of the fit it proposes,
/// when it proposes one.
fn diagnosis_drawn(
    text: &str,
    shown: &str,
    source: &Source,
    gpu_mem: Option<u64>,
    json: bool,
    picture: Option<&std::path::Path>,
) -> Result<String, Failure> {
    let mut report = grpofit_core::diagnose::oom::diagnose(text)
        .ok_or_else(|| format!("{shown}: no out-of-memory message found"))?;
    // the run that failed: --config or --preset (no GPU is detected: the message describes it)
    let run = if source.config.is_some() || source.preset.is_some() {
        Some(
            load_source(
                source,
                &Err("diagnose takes the GPU from the message".to_string()),
            )?
            .file,
        )
    } else {
        None
    };
    assume_capacity(&mut report, gpu_mem, run.as_ref());
    // a tensor is looked for only in PyTorch's requests: vLLM's are its share or its KV cache
    let culprit = run.as_ref().filter(|_| !report.from_vllm()).and_then(|f| {
        report
            .requested_bytes
            .map(|r| grpofit_core::diagnose::culprit::likely_request(&f.run, r))
    });
    // With the run: the verdict in the light of its estimate, and the fit on the GPU the
    // message describes (less what other processes hold).
    let limit = report.limit_bytes();
    if run.is_some() && limit.is_none() {
        say(
            "grpofit: note: no fit proposed: neither the message nor the run file gives the GPU's memory (pass --gpu-mem SIZE)",
        );
    }
    let proposal = run.as_ref().zip(limit).map(|(f, capacity)| {
        let others = (report.other_processes.iter()).fold(0u64, |s, p| s.saturating_add(p.bytes));
        let gpu = GpuBudget {
            capacity: capacity.saturating_sub(others),
            used_by_others: 0,
            context: None,
        };
        let mut estimator = Estimator::new();
        grpofit_core::diagnose::oom::refine(&mut report, &estimator.estimate(&f.run, gpu));
        (fit(&f.run, gpu, DEFAULT_HEADROOM, &mut estimator), capacity)
    });
    let mut advice = grpofit_core::diagnose::oom::advice(&report, run.as_ref().map(|f| &f.run));
    if let Some(c) = &culprit {
        culprit_advice(c, proposal.as_ref().map(|p| &p.0), &mut advice);
    }
    let culprit = culprit.map(|c| c.sentence());
    if let (Some(path), Some((outcome, capacity)), Some(f)) = (picture, &proposal, &run) {
        draw_proposal(path, outcome, *capacity, &f.run)?;
    }
    let text = if json {
        let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        v["advice"] = serde_json::json!(advice);
        v["likely_request"] = serde_json::json!(culprit);
        v["fit"] =
            serde_json::to_value(proposal.as_ref().map(|p| &p.0)).map_err(|e| e.to_string())?;
        json_text(&v)?
    } else {
        let mut text = grpofit::report::diagnosis_text(&report, &advice, culprit.as_deref());
        if let (Some((outcome, capacity)), Some(f)) = (&proposal, &run) {
            let from = match (report.allowed_bytes, report.total_bytes) {
                (Some(_), _) => "the cap in the message",
                (None, Some(_)) => "from the message",
                (None, None) => report.assumed_total_from.unwrap_or("assumed"),
            };
            let line = format!("{} ({from})", format_size(*capacity));
            text.push('\n');
            text.push_str(&grpofit::report::fit_text(&f.run, outcome, &line, 5.0));
        }
        text
    };
    Ok(text)
}

/// The GPU's memory when the message gives none: --gpu-mem, else the run file's gpu_memory;
/// `--gpu-mem` that the message overrules is said to be unused.
fn assume_capacity(
    report: &mut grpofit_core::diagnose::oom::OomReport,
    gpu_mem: Option<u64>,
    run: Option<&RunFile>,
) {
    let assumed = gpu_mem.map(|b| (b, "--gpu-mem")).or_else(|| {
        run.and_then(|f| f.gpu_memory)
            .map(|b| (b, "the run file's gpu_memory"))
    });
    if let Some((bytes, from)) = assumed
        && !report.assume_total(bytes, from)
        && from == "--gpu-mem"
    {
        say(&format!(
            "grpofit: note: --gpu-mem {} not used: the message gives the GPU's memory, {}",
            format_size(bytes),
            report.total_bytes.map_or_else(String::new, format_size)
        ));
    }
}

/// The advice a request gets when it is a tensor only older trainers build: the pinned release
/// that builds it, or, when today's trainers fit the same run (`proposal` already fits), the
/// upgrade.
fn culprit_advice(
    c: &grpofit_core::diagnose::culprit::Request,
    proposal: Option<&FitOutcome>,
    advice: &mut Vec<String>,
) {
    if let (true, Some(who)) = (c.matches, &c.built_by) {
        advice.insert(
                0,
                format!(
                    "this request is {}: {who}, the version this run is pinned to, builds it in every step (the fit below is on that stack; trl 1.15 with unsloth 2026.10 never builds it)",
                    c.tensor
                ),
            );
    }
    if let Some(FitOutcome::AlreadyFits { estimate }) = proposal
        && c.matches
        && c.older_trainers_only
    {
        advice.insert(
                0,
                format!(
                    "this request is {}: today's trainers (trl 1.15, unsloth 2026.10) never build it, and the same run needs {} of {} with them; upgrade the trainer",
                    c.tensor,
                    format_size(estimate.total_bytes),
                    format_size(estimate.capacity_bytes)
                ),
            );
    }
}

/// `diagnose --svg`: the memory bar of the fit proposed on the message's GPU of `capacity`.
fn draw_proposal(
    path: &std::path::Path,
    outcome: &FitOutcome,
    capacity: u64,
    failed: &grpofit_core::run::RunConfig,
) -> Result<(), Failure> {
    let (run, est) = match outcome {
        FitOutcome::Fitted { run, estimate, .. } => (&**run, estimate),
        FitOutcome::AlreadyFits { estimate } | FitOutcome::Impossible { estimate, .. } => {
            (failed, estimate)
        }
    };
    let gpu = format!(
        "{} of the message's {} left to this run; the fit proposed",
        format_size(est.capacity_bytes),
        format_size(capacity)
    );
    crate::picture::write_svg(path, run, est, &gpu, None)?;
    Ok(())
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
    let mut notes = Vec::new();
    let ctx = export_context(file, gpu, estimate);
    let text = grpofit_core::config::write_back::text_for(
        out,
        file.source.as_ref(),
        run,
        &ctx,
        &mut notes,
    )?;
    for note in notes {
        say(&format!("grpofit: note: {note}"));
    }
    if out == std::path::Path::new("-") {
        return emit(|o| o.write_all(text.as_bytes())).map_err(unwritten(answer));
    }
    write_atomically(out, &text, force)?;
    say(&format!("wrote {}", out.display()));
    Ok(())
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
        model_config: file.model_config.as_deref(),
        lock_effective_batch: file.lock_effective_batch,
        estimate: Some(estimate),
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
        // the launch set's files for every run (ds_config.json only for DeepSpeed)
        let names = ["run.toml", "accelerate.yaml", "launch.sh", "train_trl.py"];
        grpofit_core::files::check_none_there(dir, &names, exports.force)?;
    }
    Ok(())
}

/// The example training script the launch set runs (examples/train_trl.py).
const TRAIN_TRL: &str = include_str!("../examples/train_trl.py");
/// The single-GPU Unsloth script an Unsloth launch set runs (examples/train_unsloth.py).
const TRAIN_UNSLOTH: &str = include_str!("../examples/train_unsloth.py");

/// `--export-dir DIR`: the run file and its launch set. Nothing is written when any file is
/// there already (without `--force`), so a set is never half replaced; each file is atomic.
fn export_launch_set(
    file: &RunFile,
    gpu: (GpuBudget, &str),
    est: &grpofit_core::memory::estimate::Estimate,
    (dir, opts): (
        &std::path::Path,
        grpofit_core::config::launch_set::LaunchOptions,
    ),
    force: bool,
) -> Result<(), Failure> {
    use grpofit_core::config::launch_set::{launch_set, training_script};
    // the reason an Unsloth run has no launch set, before anything is written
    let launch = launch_set(&file.run, "run.toml", opts)?;
    let ctx = export_context(file, gpu, est);
    let mut notes = Vec::new();
    let run_toml = grpofit_core::config::write_back::text_for(
        std::path::Path::new("run.toml"),
        file.source.as_ref(),
        &file.run,
        &ctx,
        &mut notes,
    )?;
    notes
        .iter()
        .for_each(|n| say(&format!("grpofit: note: {n}")));
    let mut files = vec![("run.toml", run_toml)];
    files.extend(launch);
    let script = match file.run.stack {
        grpofit_core::run::Stack::Trl => TRAIN_TRL,
        grpofit_core::run::Stack::Unsloth => TRAIN_UNSLOTH,
    };
    files.push((training_script(file.run.stack), script.to_string()));
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "--export-dir {}: cannot create the folder: {e}",
            dir.display()
        )
    })?;
    if !force && let Some((name, _)) = files.iter().find(|(n, _)| dir.join(n).exists()) {
        return Err(format!(
            "{}: already exists; nothing written (pass --force to replace the launch set)",
            dir.join(name).display()
        )
        .into());
    }
    for (name, text) in &files {
        write_atomically(&dir.join(name), text, true)?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("launch.sh");
        let _ = std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755));
    }
    let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
    say(&format!("wrote {} in {}", names.join(", "), dir.display()));
    Ok(())
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
    let rows = presets::all(&crate::inputs::hub_for(source));
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
        if let Some(dir) = presets::user_dir() {
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
