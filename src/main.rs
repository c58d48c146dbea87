use clap::Parser;
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

fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        eprintln!("vramfit: {e}");
    }
    let cli = Cli::parse();
    let result = match cli.command {
        None => open_screen(&cli.source),
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
        Some(Command::Models) => {
            catalog::ids().for_each(|id| println!("{id}"));
            Ok(FITS)
        }
        Some(Command::Presets) => list_presets(),
        Some(Command::Gpu { json }) => show_gpu(json),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("vramfit: {message}");
            ExitCode::from(BAD_INPUT)
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

/// The start state: `--config`, else `--preset`, else the preset of the largest tier that the
/// GPU (`--gpu-mem` or detected) holds, else the 24 GB tier.
fn load_source(source: &Source, detected: &Result<GpuInfo, String>) -> Result<RunFile, String> {
    let (file, label) = read_source(source, detected)?;
    for note in &file.notes {
        eprintln!("vramfit: note: {label}: {note}");
    }
    Ok(file)
}

/// The run file and the name it is known by in messages.
fn read_source(
    source: &Source,
    detected: &Result<GpuInfo, String>,
) -> Result<(RunFile, String), String> {
    let loaded = |path: &std::path::Path| {
        config::load(path)
            .map(|f| (f, path.display().to_string()))
            .map_err(|e| e.to_string())
    };
    if let Some(path) = &source.config {
        return loaded(path);
    }
    let capacity = match (&source.gpu_mem, detected) {
        (Some(text), _) => parse_size(text).ok(),
        (None, Ok(gpu)) => Some(gpu.total_bytes),
        (None, Err(_)) => None,
    };
    let tier = capacity.and_then(presets::largest_tier_within);
    let name = source.preset.as_deref().or(tier).unwrap_or("24gb");
    if let Some(text) = presets::built_in(name) {
        let label = format!("preset {name}");
        return config::parse(text, &label, None)
            .map(|f| (f, label))
            .map_err(|e| e.to_string());
    }
    if let Some((_, path)) = presets::user_presets().into_iter().find(|(n, _)| n == name) {
        return loaded(&path);
    }
    let path = std::path::Path::new(name);
    if path.exists() {
        return loaded(path);
    }
    let folder = presets::user_dir().map_or(String::new(), |d| {
        format!(", your presets in {}", d.display())
    });
    Err(format!(
        "unknown preset `{name}`: built-in presets are {}{folder}, or give a file path",
        presets::names().join(", ")
    ))
}

/// Capacity: `--gpu-mem`, else the detected GPU, else the file's `gpu_memory`.
fn capacity(
    source: &Source,
    file: &RunFile,
    detected: Result<GpuInfo, String>,
) -> Result<(GpuBudget, String), String> {
    if let Some(text) = &source.gpu_mem {
        let bytes = parse_size(text).map_err(|e| format!("--gpu-mem: {e}"))?;
        return Ok((
            GpuBudget {
                capacity: bytes,
                used_by_others: 0,
            },
            format!("{} (--gpu-mem)", format_size(bytes)),
        ));
    }
    match (detected, file.gpu_memory) {
        (Ok(gpu), _) => Ok((
            GpuBudget {
                capacity: gpu.total_bytes,
                used_by_others: 0,
            },
            format!(
                "{}, {} (detected by NVML)",
                gpu.name,
                format_size(gpu.total_bytes)
            ),
        )),
        (Err(why), Some(bytes)) => Ok((
            GpuBudget {
                capacity: bytes,
                used_by_others: 0,
            },
            format!(
                "{} from the file's gpu_memory (no GPU detected: {why})",
                format_size(bytes)
            ),
        )),
        (Err(why), None) => Err(format!(
            "no GPU detected ({why}) and the file sets no gpu_memory: pass --gpu-mem SIZE"
        )),
    }
}

fn run_estimate(
    source: &Source,
    json: bool,
    export: Option<&std::path::Path>,
    force: bool,
) -> Result<u8, String> {
    let detected = detect(source);
    let file = load_source(source, &detected)?;
    let (gpu, gpu_line) = capacity(source, &file, detected)?;
    let est = estimate(&file.run, gpu);
    if let Some(out) = export {
        export_run(&file, &file.run, (gpu, &gpu_line), &est, out, force)?;
    }
    let to_stdout = export.is_some_and(|o| o == std::path::Path::new("-"));
    if json {
        print_json(&est)?;
    } else if !to_stdout {
        print!("{}", vramfit::report::table(&file.run, &est, &gpu_line));
    }
    Ok(if est.fits { FITS } else { DOES_NOT_FIT })
}

/// The interactive screen; without a terminal, the estimate is printed instead.
fn open_screen(source: &Source) -> Result<u8, String> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!(
            "vramfit: not a terminal: printing the estimate instead of the interactive screen"
        );
        return run_estimate(source, false, None, false);
    }
    let detected = detect(source);
    let file = load_source(source, &detected)?;
    let live = detected.as_ref().ok().cloned();
    let unavailable = detected.as_ref().err().cloned();
    let (budget, _) = capacity(source, &file, detected)?;
    let name = match (&source.gpu_mem, &live) {
        (Some(_), _) => "--gpu-mem".to_string(),
        (None, Some(g)) => g.name.clone(),
        (None, None) => "the file's capacity".to_string(),
    };
    let gpu = GpuState {
        capacity: budget.capacity,
        capacity_from_user: source.gpu_mem.is_some(),
        name,
        live,
        unavailable,
    };
    let here = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let app = App::new(file, gpu, Theme::from_env(), here);
    vramfit::tui::run(app, !source.no_gpu)?;
    Ok(FITS)
}

fn show_gpu(json: bool) -> Result<u8, String> {
    let detected = NvmlProbe.probe();
    if json {
        let value = match &detected {
            Ok(gpu) => serde_json::json!({ "detected": true, "gpu": gpu }),
            Err(why) => serde_json::json!({ "detected": false, "reason": why }),
        };
        println!("{value}");
    } else {
        match &detected {
            Ok(g) => {
                let opt = |b: Option<u64>| b.map_or("unknown".to_string(), format_size);
                println!(
                    "{}: {} total, {} used, {} free",
                    g.name,
                    format_size(g.total_bytes),
                    opt(g.used_bytes),
                    opt(g.free_bytes)
                );
                for p in &g.processes {
                    println!("  process {}: {}", p.pid, opt(p.bytes));
                }
            }
            Err(why) => println!("no GPU detected: {why}"),
        }
    }
    Ok(if detected.is_ok() { FITS } else { NO_GPU })
}

fn run_fit(
    source: &Source,
    headroom: f64,
    output: Option<&std::path::Path>,
    force: bool,
    json: bool,
) -> Result<u8, String> {
    if !headroom.is_finite() || !(0.0..=50.0).contains(&headroom) {
        return Err(format!(
            "--headroom {headroom}: expected a percentage between 0 and 50"
        ));
    }
    let detected = detect(source);
    let file = load_source(source, &detected)?;
    let (gpu, gpu_line) = capacity(source, &file, detected)?;
    let mut estimator = Estimator::new();
    let outcome = fit(&file.run, gpu, headroom / 100.0, &mut estimator);
    if json {
        print_json(&outcome)?;
    } else {
        print!(
            "{}",
            vramfit::report::fit_text(&file.run, &outcome, &gpu_line, headroom)
        );
    }
    let fitted = match &outcome {
        FitOutcome::AlreadyFits { estimate } => Some((file.run.clone(), estimate)),
        FitOutcome::Fitted { run, estimate, .. } => Some(((**run).clone(), estimate)),
        FitOutcome::Impossible { .. } => None,
    };
    match (fitted, output) {
        (Some((run, est)), Some(out)) => {
            export_run(&file, &run, (gpu, &gpu_line), est, out, force)?;
            Ok(FITS)
        }
        (Some(_), None) => Ok(FITS),
        (None, _) => Ok(DOES_NOT_FIT),
    }
}

/// `diagnose`: the last OOM message of a log, read with the run that failed (`--config` or
/// `--preset`) and the GPU's memory (`--gpu-mem`, else the run file's) where the message gives
/// none.
fn run_diagnose(log: Option<&std::path::Path>, source: &Source, json: bool) -> Result<u8, String> {
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
        return Err(format!(
            "diagnose: no log given and standard input is a terminal: name the log file, or pipe the log in (`-` reads standard input)\n{usage}"
        ));
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
        Some(load_source(
            source,
            &Err("diagnose takes the GPU from the message".to_string()),
        )?)
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
            eprintln!(
                "vramfit: note: --gpu-mem {} not used: the message gives the GPU's memory, {}",
                format_size(bytes),
                report.total_bytes.map_or_else(String::new, format_size)
            );
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
        eprintln!(
            "vramfit: note: no fit proposed: neither the message nor the run file gives the GPU's memory (pass --gpu-mem SIZE)"
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
    let advice = vramfit::model::oom::advice(&report, run.as_ref().map(|f| &f.run));
    if json {
        let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        v["advice"] = serde_json::json!(advice);
        v["likely_request"] = serde_json::json!(culprit);
        v["fit"] =
            serde_json::to_value(proposal.as_ref().map(|p| &p.0)).map_err(|e| e.to_string())?;
        print_json(&v)?;
    } else {
        print!(
            "{}",
            vramfit::report::diagnosis_text(&report, &advice, culprit.as_deref())
        );
        if let (Some((outcome, capacity)), Some(f)) = (&proposal, &run) {
            let from = match (report.allowed_bytes, report.total_bytes) {
                (Some(_), _) => "the cap in the message",
                (None, Some(_)) => "from the message",
                (None, None) => report.assumed_total_from.unwrap_or("assumed"),
            };
            let line = format!("{} ({from})", format_size(*capacity));
            print!(
                "\n{}",
                vramfit::report::fit_text(&f.run, outcome, &line, 5.0)
            );
        }
    }
    Ok(FITS)
}

fn print_json(value: &impl serde::Serialize) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Writes `run` as the trainer's TOML, with the header of the file it came from and its estimate.
fn export_run(
    file: &RunFile,
    run: &vramfit::model::run::RunConfig,
    gpu: (GpuBudget, &str),
    estimate: &vramfit::model::estimate::Estimate,
    out: &std::path::Path,
    force: bool,
) -> Result<(), String> {
    let ctx = ExportContext {
        gpu: gpu.1,
        gpu_memory: Some(gpu.0.capacity),
        model_config: file.model_config.as_deref(),
        lock_effective_batch: file.lock_effective_batch,
        estimate: Some(estimate),
    };
    let text = to_toml(run, &ctx);
    if out == std::path::Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    write_atomically(out, &text, force)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

fn list_presets() -> Result<u8, String> {
    let rows = presets::all();
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
                println!(
                    "{name:<14} {:<44} capacity {:>10}  estimate {:>10}  {}",
                    file.run.model_name,
                    format_size(cap),
                    format_size(est.total_bytes),
                    if est.fits { "fits" } else { "does not fit" }
                );
            }
            Err(e) => println!("{name:<14} cannot be read: {e}"),
        }
    }
    if let Some(dir) = presets::user_dir() {
        println!("your own presets: {}/*.toml", dir.display());
    }
    Ok(FITS)
}
