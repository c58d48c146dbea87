use clap::Parser;
use std::io::{self, Write};
use std::process::ExitCode;
use vramfit::config::export::{ExportContext, to_toml, write_atomically};
use vramfit::config::{self, RunFile};
use vramfit::gpu::{GpuInfo, GpuProbe, NvmlProbe};
use vramfit::model::catalog;
use vramfit::model::estimate::{Estimator, GpuBudget, estimate};
use vramfit::model::fit::{FitOutcome, fit};
use vramfit::model::units::{format_size, parse_size};
use vramfit::presets;
use vramfit::tui::app::{App, GpuState};
use vramfit::tui::theme::Theme;

mod cli;
use cli::{Cli, Command, Source};

/// Exit codes of SPEC section 3.
const FITS: u8 = 0;
const BAD_INPUT: u8 = 2;
const DOES_NOT_FIT: u8 = 3;
const NO_GPU: u8 = 1;
/// Standard output could not be written: the code of bad input, the one that says the command
/// did not do its job (1 and 3 are answers: no GPU, does not fit).
const FAILED: u8 = 2;

/// Why a command stopped before its answer.
enum Failure {
    /// bad input, or a file that cannot be read or written: the message
    Input(String),
    /// writing standard output failed; `answer` is the exit code the command had reached
    Output { error: io::Error, answer: u8 },
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Input(message)
    }
}

/// Turns an error writing standard output into a `Failure` that keeps the command's answer.
fn unwritten(answer: u8) -> impl FnOnce(io::Error) -> Failure {
    move |error| Failure::Output { error, answer }
}

/// Writes to standard output, locked, through `f`, and flushes: every write error comes back
/// as an `io::Error` instead of the panic of `print!`.
fn emit(f: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    f(&mut out)?;
    out.flush()
}

/// A line for the user on standard error. If even that cannot be written there is nobody left
/// to tell, so its error is dropped rather than turned into a panic.
fn say(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        say(&format!("vramfit: {e}"));
    }
    let cli = Cli::parse();
    let result = match cli.command {
        None => open_screen(&cli.source, !cli.no_mouse),
        Some(Command::Estimate {
            source,
            json,
            export,
            force,
        }) => run_estimate(&merge(&cli.source, &source), json, export.as_deref(), force),
        Some(Command::Fit {
            source,
            headroom,
            output,
            force,
            json,
        }) => run_fit(
            &merge(&cli.source, &source),
            headroom,
            output.as_deref(),
            force,
            json,
        ),
        Some(Command::Diagnose { file, source, json }) => {
            run_diagnose(file.as_deref(), &merge(&cli.source, &source), json)
        }
        Some(Command::Models { json }) => list_models(json),
        Some(Command::Presets) => list_presets(),
        Some(Command::Gpu { json }) => show_gpu(json),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure::Input(message)) => {
            say(&format!("vramfit: {message}"));
            ExitCode::from(BAD_INPUT)
        }
        // The reader left early (`| head -1`, `| true`): that is no failure, and saying so on
        // standard error would only be noise. Like ripgrep, which exits quietly with its
        // answer's code on EPIPE (0, "found", since it had output to write), vramfit stops
        // writing and exits with the answer it had already reached (0 fits, 3 does not fit,
        // 1 no GPU), so that a script under `set -o pipefail` still reads the verdict.
        Err(Failure::Output { error, answer }) if error.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::from(answer)
        }
        Err(Failure::Output { error, .. }) => {
            say(&format!(
                "vramfit: cannot write to standard output: {error}"
            ));
            ExitCode::from(FAILED)
        }
    }
}

fn merge(outer: &Source, inner: &Source) -> Source {
    Source {
        config: inner.config.clone().or_else(|| outer.config.clone()),
        preset: inner.preset.clone().or_else(|| outer.preset.clone()),
        gpu_mem: inner.gpu_mem.clone().or_else(|| outer.gpu_mem.clone()),
        no_gpu: inner.no_gpu || outer.no_gpu,
    }
}

/// The GPU NVML sees, unless `--no-gpu`.
fn detect(source: &Source) -> Result<GpuInfo, String> {
    if source.no_gpu {
        Err("--no-gpu".to_string())
    } else {
        NvmlProbe.probe()
    }
}

/// The run file, the names it goes by, and where it came from.
struct Loaded {
    file: RunFile,
    /// what notes about the file are prefixed with: its path, `preset 24gb`
    label: String,
    /// the file as a sentence names it: its path, `the 24gb preset`
    name: String,
    /// why this run: `the 24gb preset (default; pass --config or --preset)`
    origin: String,
}

/// `--gpu-mem`, read once: the tier it picks and the capacity it sets agree.
fn gpu_mem(source: &Source) -> Result<Option<u64>, String> {
    source
        .gpu_mem
        .as_deref()
        .map(|text| parse_size(text).map_err(|e| format!("--gpu-mem {text}: {e}")))
        .transpose()
}

/// The start state: `--config`, else `--preset`, else the preset of the largest tier that the
/// GPU (`--gpu-mem` or detected) holds, else the 24 GB tier.
fn load_source(source: &Source, detected: &Result<GpuInfo, String>) -> Result<Loaded, String> {
    let loaded = read_source(source, detected)?;
    for note in &loaded.file.notes {
        say(&format!("vramfit: note: {}: {note}", loaded.label));
    }
    Ok(loaded)
}

fn read_source(source: &Source, detected: &Result<GpuInfo, String>) -> Result<Loaded, String> {
    let loaded = |path: &std::path::Path, name: String, origin: String| {
        config::load(path)
            .map(|file| Loaded {
                file,
                label: path.display().to_string(),
                name,
                origin,
            })
            .map_err(|e| e.to_string())
    };
    if let Some(path) = &source.config {
        let shown = path.display().to_string();
        return loaded(path, shown.clone(), format!("{shown} (--config)"));
    }
    let capacity = gpu_mem(source)?;
    let (name, chooser) = match (&source.preset, capacity, detected) {
        (Some(name), _, _) => (name.as_str(), "--preset".to_string()),
        (None, Some(bytes), _) => (
            presets::largest_tier_within(bytes).unwrap_or("24gb"),
            "--gpu-mem".to_string(),
        ),
        (None, None, Ok(gpu)) => (
            presets::largest_tier_within(gpu.total_bytes).unwrap_or("24gb"),
            format!("the detected {}", gpu.name),
        ),
        (None, None, Err(_)) => ("24gb", String::new()),
    };
    // why this file: named by --preset, the default, or the tier the GPU holds (the smallest
    // when it holds none)
    let why = |file: &RunFile| {
        let holds = capacity.or(detected.as_ref().ok().map(|g| g.total_bytes));
        match (source.preset.is_some(), holds, file.gpu_memory) {
            (true, _, _) => chooser.clone(),
            (false, None, _) => "default; pass --config or --preset".to_string(),
            (false, Some(cap), Some(tier)) if tier > cap => {
                format!("the smallest tier: {chooser} holds none; pass --config or --preset")
            }
            (false, Some(_), _) => {
                format!("the largest tier that {chooser} holds; pass --config or --preset")
            }
        }
    };
    if let Some(text) = presets::built_in(name) {
        let label = format!("preset {name}");
        let file = config::parse(text, &label, None).map_err(|e| e.to_string())?;
        return Ok(Loaded {
            origin: format!("the {name} preset ({})", why(&file)),
            name: format!("the {name} preset"),
            label,
            file,
        });
    }
    if let Some((_, path)) = presets::user_presets().into_iter().find(|(n, _)| n == name) {
        let mut l = loaded(&path, format!("your preset {name}"), String::new())?;
        l.origin = format!("your preset {name}, {} ({})", path.display(), why(&l.file));
        return Ok(l);
    }
    let path = std::path::Path::new(name);
    if path.exists() {
        let mut l = loaded(path, name.to_string(), String::new())?;
        l.origin = format!("{name} ({})", why(&l.file));
        return Ok(l);
    }
    let folder = presets::user_dir().map_or(String::new(), |d| {
        format!(", your presets in {}", d.display())
    });
    Err(format!(
        "unknown preset `{name}`: built-in presets are {}{folder}, or give a file path",
        presets::names().join(", ")
    ))
}

/// Capacity: `--gpu-mem`, else the detected GPU, else the run file's `gpu_memory`; and the
/// line that says which.
fn capacity(
    source: &Source,
    loaded: &Loaded,
    detected: Result<GpuInfo, String>,
) -> Result<(GpuBudget, String), String> {
    let budget = |capacity| GpuBudget {
        capacity,
        used_by_others: 0,
    };
    if let Some(bytes) = gpu_mem(source)? {
        return Ok((budget(bytes), format!("{} (--gpu-mem)", format_size(bytes))));
    }
    let why = |why: String| {
        if source.no_gpu {
            "--no-gpu: NVML not asked".to_string()
        } else {
            format!("no GPU detected: {why}")
        }
    };
    match (detected, loaded.file.gpu_memory) {
        (Ok(gpu), _) => Ok((
            budget(gpu.total_bytes),
            format!(
                "{}, {} (detected by NVML)",
                gpu.name,
                format_size(gpu.total_bytes)
            ),
        )),
        (Err(e), Some(bytes)) => Ok((
            budget(bytes),
            format!(
                "{} from {}'s gpu_memory ({})",
                format_size(bytes),
                loaded.name,
                why(e)
            ),
        )),
        (Err(e), None) => Err(format!(
            "{} and {} sets no gpu_memory: pass --gpu-mem SIZE",
            why(e),
            loaded.name
        )),
    }
}

fn run_estimate(
    source: &Source,
    json: bool,
    export: Option<&std::path::Path>,
    force: bool,
) -> Result<u8, Failure> {
    let detected = detect(source);
    let loaded = load_source(source, &detected)?;
    let (gpu, gpu_line) = capacity(source, &loaded, detected)?;
    let file = &loaded.file;
    let est = estimate(&file.run, gpu);
    let answer = if est.fits { FITS } else { DOES_NOT_FIT };
    if let Some(out) = export {
        export_run(file, &file.run, (gpu, &gpu_line), &est, out, force, answer)?;
    }
    let to_stdout = export.is_some_and(|o| o == std::path::Path::new("-"));
    if json {
        let mut v = serde_json::to_value(&est).map_err(|e| e.to_string())?;
        v["parameters"] = serde_json::json!(file.run.arch.parameters());
        v["model_source"] = serde_json::to_value(&file.model_source).map_err(|e| e.to_string())?;
        let text = json_text(&v)?;
        emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(answer))?;
    } else if !to_stdout {
        let table = vramfit::report::table(&file.run, &est, &gpu_line);
        emit(|out| {
            write!(
                out,
                "run: {}\nmodel: {}\n{table}",
                loaded.origin, file.model_source
            )
        })
        .map_err(unwritten(answer))?;
    }
    Ok(answer)
}

/// The interactive screen; without a terminal, the estimate is printed instead.
fn open_screen(source: &Source, mouse: bool) -> Result<u8, Failure> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        say("vramfit: not a terminal: printing the estimate instead of the interactive screen");
        return run_estimate(source, false, None, false);
    }
    let detected = detect(source);
    let loaded = load_source(source, &detected)?;
    let live = detected.as_ref().ok().cloned();
    let unavailable = detected.as_ref().err().cloned();
    let (budget, _) = capacity(source, &loaded, detected)?;
    let name = match (&source.gpu_mem, &live) {
        (Some(_), _) => "--gpu-mem".to_string(),
        (None, Some(g)) => g.name.clone(),
        (None, None) => format!("{}'s gpu_memory", loaded.name),
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
    let app = App::new(file, gpu, Theme::from_env(), here);
    vramfit::tui::run(app, !source.no_gpu, mouse)?;
    Ok(FITS)
}

fn show_gpu(json: bool) -> Result<u8, Failure> {
    let detected = NvmlProbe.probe();
    let answer = if detected.is_ok() { FITS } else { NO_GPU };
    emit(|out| {
        if json {
            let value = match &detected {
                Ok(gpu) => serde_json::json!({ "detected": true, "gpu": gpu }),
                Err(why) => serde_json::json!({ "detected": false, "reason": why }),
            };
            return writeln!(out, "{value}");
        }
        match &detected {
            Ok(g) => {
                let opt = |b: Option<u64>| b.map_or("unknown".to_string(), format_size);
                writeln!(
                    out,
                    "{}: {} total, {} used, {} free",
                    g.name,
                    format_size(g.total_bytes),
                    opt(g.used_bytes),
                    opt(g.free_bytes)
                )?;
                for p in &g.processes {
                    writeln!(out, "  process {}: {}", p.pid, opt(p.bytes))?;
                }
                Ok(())
            }
            Err(why) => writeln!(out, "no GPU detected: {why}"),
        }
    })
    .map_err(unwritten(answer))?;
    Ok(answer)
}

fn run_fit(
    source: &Source,
    headroom: f64,
    output: Option<&std::path::Path>,
    force: bool,
    json: bool,
) -> Result<u8, Failure> {
    if !headroom.is_finite() || !(0.0..=50.0).contains(&headroom) {
        return Err(Failure::Input(format!(
            "--headroom {headroom}: expected a percentage between 0 and 50"
        )));
    }
    let detected = detect(source);
    let loaded = load_source(source, &detected)?;
    let (gpu, gpu_line) = capacity(source, &loaded, detected)?;
    let file = &loaded.file;
    let mut estimator = Estimator::new();
    let outcome = fit(&file.run, gpu, headroom / 100.0, &mut estimator);
    let text = if json {
        json_text(&outcome)?
    } else {
        let fitted = vramfit::report::fit_text(&file.run, &outcome, &gpu_line, headroom);
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
    if let (Some((run, est)), Some(out)) = (fitted, output) {
        export_run(file, &run, (gpu, &gpu_line), est, out, force, answer)?;
    }
    printed.map_err(unwritten(answer))?;
    Ok(answer)
}

/// `diagnose`: the last OOM message of a log, read with the run that failed (`--config` or
/// `--preset`) and the GPU's memory (`--gpu-mem`, else the run file's) where the message gives
/// none.
fn run_diagnose(log: Option<&std::path::Path>, source: &Source, json: bool) -> Result<u8, Failure> {
    use std::io::{IsTerminal, Read};
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
    let gpu_mem = source
        .gpu_mem
        .as_deref()
        .map(parse_size)
        .transpose()
        .map_err(|e| format!("--gpu-mem: {e}"))?;
    let mut bytes = Vec::new();
    match log {
        Some(p) if p != std::path::Path::new("-") => {
            bytes = std::fs::read(p).map_err(|e| format!("{}: cannot read: {e}", p.display()))?
        }
        _ => {
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| format!("standard input: {e}"))?;
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let shown = log.map_or("standard input".to_string(), |p| p.display().to_string());
    let mut report = vramfit::model::oom::diagnose(&text)
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
    // the GPU's memory: the message's, else --gpu-mem, else the run file's gpu_memory
    let assumed = gpu_mem.map(|b| (b, "--gpu-mem")).or_else(|| {
        run.as_ref()
            .and_then(|f| f.gpu_memory)
            .map(|b| (b, "the run file's gpu_memory"))
    });
    if let Some((bytes, from)) = assumed {
        if !report.assume_total(bytes, from) && from == "--gpu-mem" {
            say(&format!(
                "vramfit: note: --gpu-mem {} not used: the message gives the GPU's memory, {}",
                format_size(bytes),
                report.total_bytes.map_or_else(String::new, format_size)
            ));
        }
    }
    // a tensor is looked for only in PyTorch's requests: vLLM's are its share or its KV cache
    let culprit = run.as_ref().filter(|_| !report.from_vllm()).and_then(|f| {
        report
            .requested_bytes
            .map(|r| vramfit::model::culprit::likely_request(&f.run, r))
    });
    // With the run: the verdict in the light of its estimate, and the fit on the GPU the
    // message describes (less what other processes hold).
    let limit = report.limit_bytes();
    if run.is_some() && limit.is_none() {
        say(
            "vramfit: note: no fit proposed: neither the message nor the run file gives the GPU's memory (pass --gpu-mem SIZE)",
        );
    }
    let proposal = run.as_ref().zip(limit).map(|(f, capacity)| {
        let others: u64 = report.other_processes.iter().map(|p| p.bytes).sum();
        let gpu = GpuBudget {
            capacity: capacity.saturating_sub(others),
            used_by_others: 0,
        };
        let mut estimator = Estimator::new();
        vramfit::model::oom::refine(&mut report, &estimator.estimate(&f.run, gpu));
        (fit(&f.run, gpu, 0.05, &mut estimator), capacity)
    });
    let mut advice = vramfit::model::oom::advice(&report, run.as_ref().map(|f| &f.run));
    if let (Some(c), Some((FitOutcome::AlreadyFits { estimate }, _))) = (&culprit, &proposal) {
        if c.matches && c.older_trainers_only {
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
    let culprit = culprit.map(|c| c.sentence());
    let text = if json {
        let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        v["advice"] = serde_json::json!(advice);
        v["likely_request"] = serde_json::json!(culprit);
        v["fit"] =
            serde_json::to_value(proposal.as_ref().map(|p| &p.0)).map_err(|e| e.to_string())?;
        json_text(&v)?
    } else {
        let mut text = vramfit::report::diagnosis_text(&report, &advice, culprit.as_deref());
        if let (Some((outcome, capacity)), Some(f)) = (&proposal, &run) {
            let from = match (report.allowed_bytes, report.total_bytes) {
                (Some(_), _) => "the cap in the message",
                (None, Some(_)) => "from the message",
                (None, None) => report.assumed_total_from.unwrap_or("assumed"),
            };
            let line = format!("{} ({from})", format_size(*capacity));
            text.push('\n');
            text.push_str(&vramfit::report::fit_text(&f.run, outcome, &line, 5.0));
        }
        text
    };
    emit(|out| out.write_all(text.as_bytes())).map_err(unwritten(FITS))?;
    Ok(FITS)
}

/// `value` as pretty JSON and a newline, for standard output.
fn json_text(value: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(value)
        .map(|text| text + "\n")
        .map_err(|e| e.to_string())
}

/// Writes `run` as the trainer's TOML, with the header of the file it came from and its estimate;
/// `answer` is the command's exit code, kept if standard output (`-`) has no reader left.
fn export_run(
    file: &RunFile,
    run: &vramfit::model::run::RunConfig,
    gpu: (GpuBudget, &str),
    estimate: &vramfit::model::estimate::Estimate,
    out: &std::path::Path,
    force: bool,
    answer: u8,
) -> Result<(), Failure> {
    let ctx = ExportContext {
        gpu: gpu.1,
        gpu_memory: Some(gpu.0.capacity),
        model_config: file.model_config.as_deref(),
        lock_effective_batch: file.lock_effective_batch,
        estimate: Some(estimate),
    };
    let text = to_toml(run, &ctx);
    if out == std::path::Path::new("-") {
        return emit(|o| o.write_all(text.as_bytes())).map_err(unwritten(answer));
    }
    write_atomically(out, &text, force)?;
    say(&format!("wrote {}", out.display()));
    Ok(())
}

fn list_models(json: bool) -> Result<u8, Failure> {
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

fn list_presets() -> Result<u8, Failure> {
    let rows = presets::all();
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
