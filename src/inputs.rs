//! Which run and which GPU a command works on, and where each came from: `--config`, a
//! preset or the default; `--gpu-mem`, NVML or the file. The screen and every command resolve
//! their inputs here (clap's raw flags are in cli.rs).

use crate::cli::Source;
use crate::output::say;
use grpofit::gpu::{GpuInfo, GpuProbe, NvmlProbe};
use grpofit::hub::HubResolver;
use grpofit::presets::shipped;
use grpofit_core::config::{self, RunFile};
use grpofit_core::hardware::GpuSpeed;
use grpofit_core::measure::calibration::{self, Calibration, LearnedTime};
use grpofit_core::memory::estimate::GpuBudget;
use grpofit_core::presets;
use grpofit_core::time::Efficiencies;
use grpofit_core::units::{format_size, parse_gpu_size};

pub(crate) fn merge(outer: &Source, inner: &Source) -> Source {
    Source {
        config: inner.config.clone().or_else(|| outer.config.clone()),
        launch: inner.launch.clone().or_else(|| outer.launch.clone()),
        num_processes: inner.num_processes.or(outer.num_processes),
        preset: inner.preset.clone().or_else(|| outer.preset.clone()),
        gpu_mem: inner.gpu_mem.clone().or_else(|| outer.gpu_mem.clone()),
        capacity: inner.capacity.or(outer.capacity),
        gpu: inner.gpu.clone().or_else(|| outer.gpu.clone()),
        gpu_tflops: inner.gpu_tflops.or(outer.gpu_tflops),
        gpu_bandwidth: inner.gpu_bandwidth.or(outer.gpu_bandwidth),
        no_gpu: inner.no_gpu || outer.no_gpu,
        offline: inner.offline || outer.offline,
        versions: inner.versions.or(&outer.versions),
    }
}

/// Where the run readers find a model: the Hugging Face cache, then the Hub, saying what is
/// fetched on standard error, unless `--offline` (before or after the command) or
/// `HF_HUB_OFFLINE`.
pub(crate) fn hub_for(source: &Source) -> HubResolver {
    HubResolver::from_env(source.offline, std::sync::Arc::new(say))
}

/// The GPU NVML sees, unless `--no-gpu`.
pub(crate) fn detect(source: &Source) -> Result<GpuInfo, String> {
    if source.no_gpu {
        return Err("--no-gpu".to_string());
    }
    let gpus = NvmlProbe.probe_all()?;
    if let Some(kinds) = grpofit::gpu::mixed_cards(&gpus) {
        crate::output::say(&format!(
            "grpofit: note: mixed cards ({kinds}): every role is sized on GPU 0's capacity"
        ));
    }
    gpus.into_iter()
        .next()
        .ok_or_else(|| "NVML lists no GPU".to_string())
}

/// The run file, the names it goes by, and where it came from.
pub(crate) struct Loaded {
    pub file: RunFile,
    /// what notes about the file are prefixed with: its path, `preset 24gb`
    pub label: String,
    /// the file as a sentence names it: its path, `the 24gb preset`
    pub name: String,
    /// why this run: `the 24gb preset (default; pass --config or --preset)`
    pub origin: String,
}

/// `--gpu-mem`, read once: the tier it picks and the capacity it sets agree.
pub(crate) fn gpu_mem(source: &Source) -> Result<Option<u64>, String> {
    if source.capacity.is_some() {
        return Ok(source.capacity);
    }
    source
        .gpu_mem
        .as_deref()
        .map(|text| parse_gpu_size(text).map_err(|e| format!("--gpu-mem {text}: {e}")))
        .transpose()
}

/// Where the run's version warnings are said: once, where the user reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Warnings {
    /// on standard error: the command's standard output is machine-read (`--json`,
    /// `--export -`) or does not carry them
    Stderr,
    /// by the command's own report on standard output (estimate's text, the screen's header)
    WithReport,
}

impl Warnings {
    /// With the report, unless the command's standard output is machine-read (`--json`,
    /// `--export -`): then on standard error.
    pub(crate) fn unless_machine_read(machine_read: bool) -> Warnings {
        if machine_read {
            Warnings::Stderr
        } else {
            Warnings::WithReport
        }
    }
}

/// The start state: `--config`, else `--preset`, else the preset of the largest tier that the
/// GPU (`--gpu-mem` or detected) holds, else the 24 GB tier.
pub(crate) fn load_source(
    source: &Source,
    detected: &Result<GpuInfo, String>,
) -> Result<Loaded, String> {
    load_source_with(source, detected, Warnings::Stderr)
}

/// [`load_source`], its version warnings said on standard error only when `warnings` says so.
pub(crate) fn load_source_with(
    source: &Source,
    detected: &Result<GpuInfo, String>,
    warnings: Warnings,
) -> Result<Loaded, String> {
    let loaded = read_source(source, detected)?;
    for note in &loaded.file.notes {
        say(&format!("grpofit: note: {}: {note}", loaded.label));
    }
    if warnings == Warnings::Stderr {
        for warning in &loaded.file.warnings {
            say(&format!("grpofit: warning: {}: {warning}", loaded.label));
        }
    }
    Ok(loaded)
}

/// A run file's text read as `source` reads its run (the same pins, launch config and model
/// resolver): what a written file will be read as. `dir` resolves a relative `model_config`;
/// `format`: the text's, a recipe's (YAML) or a run file's.
pub(crate) fn reread(
    source: &Source,
    text: &str,
    label: &str,
    dir: Option<&std::path::Path>,
    format: config::source::Format,
) -> Result<RunFile, String> {
    let models = hub_for(source);
    let reading = config::Reading {
        models: &models,
        overlay: config::accelerate::Overlay::new(source.launch.as_deref(), source.num_processes)
            .map_err(|e| e.to_string())?,
        installed: crate::versions_env::detect().installed,
        pins: source.versions.pins(),
    };
    match format {
        // a recipe written back is read as a recipe
        config::source::Format::Yaml => {
            config::recipe::load(text, label, std::path::Path::new(label), &reading)
        }
        config::source::Format::Toml => config::parse_with(text, label, dir, &reading),
    }
    .map_err(|e| e.to_string())
}

pub(crate) fn read_source(
    source: &Source,
    detected: &Result<GpuInfo, String>,
) -> Result<Loaded, String> {
    let models = hub_for(source);
    let tiers = shipped();
    let reading = config::Reading {
        models: &models,
        overlay: config::accelerate::Overlay::new(source.launch.as_deref(), source.num_processes)
            .map_err(|e| e.to_string())?,
        installed: crate::versions_env::detect().installed,
        pins: source.versions.pins(),
    };
    let loaded = |path: &std::path::Path, name: String, origin: String| {
        config::load_with(path, &reading)
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
    // the tier: named by --preset, else the largest built-in run that fits the GPU
    let (name, chooser, tier_fits) = match (&source.preset, capacity, detected) {
        (Some(name), _, _) => (name.as_str(), "--preset".to_string(), None),
        (None, Some(bytes), _) => {
            let (name, fits) = tiers.tier_for(bytes, &models);
            (name, "--gpu-mem".to_string(), Some(fits))
        }
        (None, None, Ok(gpu)) => {
            let (name, fits) = tiers.tier_for(gpu.total_bytes, &models);
            (name, format!("the detected {}", gpu.name), Some(fits))
        }
        (None, None, Err(_)) => (presets::DEFAULT, String::new(), None),
    };
    let why = |_: &RunFile| match (source.preset.is_some(), tier_fits) {
        (true, _) => chooser.clone(),
        (false, None) => "default; pass --config or --preset".to_string(),
        (false, Some(false)) => {
            format!("the smallest tier: none fits {chooser}; pass --config or --preset")
        }
        (false, Some(true)) => {
            format!("the largest tier that fits {chooser}; pass --config or --preset")
        }
    };
    // the user's preset wins over a built-in one of the same name, and says so
    if let Some((_, path)) = tiers.user_presets().into_iter().find(|(n, _)| n == name) {
        let mut l = loaded(&path, format!("your preset {name}"), String::new())?;
        let shadows = tiers.built_in(name).map_or(String::new(), |_| {
            format!("; it replaces the built-in {name}")
        });
        l.origin = format!(
            "your preset {name}, {} ({}{shadows})",
            path.display(),
            why(&l.file)
        );
        if !shadows.is_empty() {
            say(&format!(
                "grpofit: note: --preset {name}: your {} is used instead of the built-in {name} preset",
                path.display()
            ));
        }
        return Ok(l);
    }
    if let Some(text) = tiers.built_in(name) {
        let label = format!("preset {name}");
        let file = config::parse_with(text, &label, None, &reading).map_err(|e| e.to_string())?;
        return Ok(Loaded {
            origin: format!("the {name} preset ({})", why(&file)),
            name: format!("the {name} preset"),
            label,
            file,
        });
    }
    let path = std::path::Path::new(name);
    if path.exists() {
        let mut l = loaded(path, name.to_string(), String::new())?;
        l.origin = format!("{name} ({})", why(&l.file));
        return Ok(l);
    }
    let folder = tiers.user_dir().map_or(String::new(), |d| {
        format!(", your presets in {}", d.display())
    });
    Err(format!(
        "unknown preset `{name}`: built-in presets are {}{folder}, or give a file path",
        tiers.names().join(", ")
    ))
}

/// Capacity: `--gpu-mem`, else the detected GPU, else the run file's `gpu_memory`; and the
/// line that says which.
pub(crate) fn capacity(
    source: &Source,
    loaded: &Loaded,
    detected: &Result<GpuInfo, String>,
) -> Result<(GpuBudget, String), String> {
    let budget = |capacity| GpuBudget {
        capacity,
        used_by_others: 0,
        context: None,
    };
    if let Some(bytes) = gpu_mem(source)? {
        return Ok((budget(bytes), format!("{} (--gpu-mem)", format_size(bytes))));
    }
    let why = |why: &String| {
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
            "{} and {} sets no gpu_memory: pass --gpu-mem SIZE{}",
            why(e),
            loaded.name,
            card_named(source)
        )),
    }
}

/// Why `--gpu CARD` gives no capacity: it names the card the step is timed on, and a card's
/// CUDA total (what the run is fitted in) is a little under its sheet's size.
fn card_named(source: &Source) -> String {
    source
        .gpu
        .as_deref()
        .and_then(grpofit_core::hardware::lookup)
        .map_or(String::new(), |card| {
            format!(
                " (--gpu {} times the step; the memory to fit in is its CUDA total, nvidia-smi's, a little under the sheet's {:.0} GB)",
                card.name, card.memory_gb
            )
        })
}

/// A command's inputs, resolved once: the run and where it came from, the GPU and the line
/// that says where its capacity came from, and what NVML answered.
pub(crate) struct Inputs {
    pub loaded: Loaded,
    pub gpu: GpuBudget,
    pub gpu_line: String,
    pub detected: Result<GpuInfo, String>,
    /// the measured CUDA context in use, in words, when `grpofit calibrate` learned one for
    /// this GPU and stack
    pub calibrated: Option<String>,
    /// the card the step is timed on, or why there is none
    pub speed: Result<GpuSpeed, String>,
    /// the efficiencies `grpofit calibrate` learned for that card and the run's stack
    pub time: Option<LearnedTime>,
}

impl Inputs {
    /// The efficiencies the step is timed with: learned for the card, else the declared ones.
    pub(crate) fn efficiencies(&self) -> Efficiencies {
        self.time
            .as_ref()
            .map_or_else(Efficiencies::default, |t| t.efficiencies)
    }
}

/// What `grpofit calibrate` learned of the step's time on the card `speed` with `stack`, from
/// the calibration file; what is wrong with the file is said when `say_notes` (else
/// `calibrate_for` says it).
fn learned_time(
    speed: &Result<GpuSpeed, String>,
    stack: &str,
    say_notes: bool,
) -> Option<LearnedTime> {
    let card = speed.as_ref().ok()?;
    let calibration = if say_notes {
        load_calibration()
            .inspect_err(|e| {
                say(&format!(
                    "grpofit: note: {e}: the step is timed with the declared efficiencies"
                ))
            })
            .ok()??
            .0
    } else {
        read_calibration().ok()??.0.0
    };
    calibration.time_for(&card.name, stack)
}

/// The card the step is timed on: `--gpu`, else the detected card, else the run file's
/// `[grpofit] gpu` (a preset's names its card); `--gpu-tflops` / `--gpu-bandwidth`, else the
/// file's `gpu_tflops` / `gpu_bandwidth`, replace the table's figures or describe a card it
/// lacks.
pub(crate) fn gpu_speed(
    source: &Source,
    loaded: &Loaded,
    detected: &Result<GpuInfo, String>,
) -> Result<GpuSpeed, String> {
    let keys = &loaded.file.time;
    let name = source
        .gpu
        .clone()
        .or_else(|| detected.as_ref().ok().map(|g| g.name.clone()))
        .or_else(|| keys.gpu.clone());
    // a name the file gave is said with its file and key
    let from_file = source.gpu.is_none() && detected.is_err();
    grpofit_core::time::gpu_speed(
        name.as_deref(),
        source.gpu_tflops.or(keys.gpu_tflops),
        source.gpu_bandwidth.or(keys.gpu_bandwidth),
    )
    .map_err(|e| match (&e.name, from_file) {
        (Some(n), true) => format!("{}: `[grpofit] gpu = {n:?}`: {e}", loaded.label),
        _ => e.to_string(),
    })
}

/// `--gpu CARD` names the card the step is timed on, not the memory the run is fitted in: where
/// the capacity came from elsewhere (the run file, a preset) and the card holds another, the GPU
/// line says so and how to fit the run on that card.
fn timed_elsewhere(
    source: &Source,
    detected: &Result<GpuInfo, String>,
    capacity: u64,
) -> Option<String> {
    if source.gpu_mem.is_some() || detected.is_ok() {
        return None;
    }
    let card = grpofit_core::hardware::lookup(source.gpu.as_deref()?)?;
    let card_bytes = card.memory_gb * 1e9;
    // a card's CUDA capacity is a little under its sheet's size (an H100 80GB: 79.1 GiB)
    if (card_bytes / capacity as f64 - 1.0).abs() < 0.1 {
        return None;
    }
    Some(format!(
        "; the step is timed on the {} (--gpu), whose {:.0} GB this run is not fitted in: --gpu-mem with its capacity (nvidia-smi's total) fits it there",
        card.name, card.memory_gb
    ))
}

/// What is wrong with the run's bf16 on the card the step is timed on, when that card is one
/// of the table's (`hardware::precision`).
fn bf16_warning(speed: &Result<GpuSpeed, String>, loaded: &Loaded) -> Option<String> {
    use grpofit_core::config::source::Format;
    use grpofit_core::hardware::precision::{Spelling, bf16_warning};
    let card = grpofit_core::hardware::lookup(&speed.as_ref().ok()?.name)?;
    let spelling = match loaded.file.source.as_ref().map(|s| s.format) {
        Some(Format::Yaml) => Spelling::Recipe,
        _ => Spelling::RunFile,
    };
    bf16_warning(card, &loaded.file.run, loaded.file.bf16, spelling)
}

/// Resolves `source`: the GPU first (NVML unless `--no-gpu`), then the run (its notes said on
/// standard error), then the capacity.
pub(crate) fn resolve(source: &Source) -> Result<Inputs, String> {
    resolve_with(source, Warnings::Stderr)
}

/// [`resolve`], the run's version warnings said where `warnings` says.
pub(crate) fn resolve_with(source: &Source, warnings: Warnings) -> Result<Inputs, String> {
    let detected = detect(source);
    let mut loaded = load_source_with(source, &detected, warnings)?;
    let (gpu, mut gpu_line) = capacity(source, &loaded, &detected)?;
    let name = detected.as_ref().ok().map(|g| g.name.clone());
    let speed = gpu_speed(source, &loaded, &detected);
    if let Some(warning) = bf16_warning(&speed, &loaded) {
        if warnings == Warnings::Stderr {
            say(&format!("grpofit: warning: {}: {warning}", loaded.label));
        }
        loaded.file.warnings.push(warning);
    }
    let loaded_stack = loaded.file.run.stack.name();
    if let (Some(card), Err(why)) = (&source.gpu, &speed) {
        return Err(format!("--gpu {card}: {why}"));
    }
    if let Some(note) = timed_elsewhere(source, &detected, gpu.capacity) {
        gpu_line.push_str(&note);
    }
    let mut inputs = Inputs {
        loaded,
        gpu,
        gpu_line,
        detected,
        calibrated: None,
        time: learned_time(&speed, loaded_stack, name.is_none()),
        speed,
    };
    // the context is the detected card's, else the one `--gpu` names (under NVML's names for it,
    // which `calibrate` stores): a capacity given alone names no card
    if let Some(name) = name {
        calibrate_for(&mut inputs, &name)?;
    } else if let Some(card) = source
        .gpu
        .as_deref()
        .and_then(grpofit_core::hardware::lookup)
    {
        for nvml in card.nvml {
            calibrate_for(&mut inputs, nvml)?;
            if inputs.calibrated.is_some() {
                break;
            }
        }
    }
    Ok(inputs)
}

/// `<config dir>/calibration.toml`, where `grpofit calibrate` keeps what it learned.
pub(crate) fn calibration_path() -> Option<std::path::PathBuf> {
    presets::config_dir().map(|d| d.join("calibration.toml"))
}

/// The calibration file, if there is one; a file that cannot be read is an error that names it.
/// A bad entry in it is skipped, with a notice on standard error.
pub(crate) fn load_calibration() -> Result<Option<(Calibration, std::path::PathBuf)>, String> {
    let Some(((calibration, path), skipped)) = read_calibration()? else {
        return Ok(None);
    };
    for why in skipped {
        say(&format!(
            "grpofit: note: {why}: skipped (`grpofit calibrate` leaves it out of the file it writes next; `--reset` removes the file)"
        ));
    }
    Ok(Some((calibration, path)))
}

/// The calibration file, where it can be read, with nothing said (the command's inputs said
/// what is wrong with it).
pub(crate) fn calibration_quietly() -> Option<Calibration> {
    Some(read_calibration().ok()??.0.0)
}

/// The calibration file and the entries of it skipped, with why, unsaid.
type ReadCalibration = ((Calibration, std::path::PathBuf), Vec<String>);

/// [`load_calibration`], the skipped entries returned instead of said.
fn read_calibration() -> Result<Option<ReadCalibration>, String> {
    let Some(path) = calibration_path() else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let (calibration, skipped) =
                calibration::parse_skipping(&text, &shown).map_err(|e| e.to_string())?;
            Ok(Some(((calibration, path), skipped)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{shown}: cannot read: {e}")),
    }
}

/// Uses the CUDA context `grpofit calibrate` measured on a GPU named `gpu` (NVML's name,
/// exactly) with the run's stack, when there is one.
pub(crate) fn calibrate_for(inputs: &mut Inputs, gpu: &str) -> Result<(), String> {
    // a calibration file that cannot be read is said, never fatal to an estimate
    let Some((calibration, _)) = load_calibration()
        .inspect_err(|e| {
            say(&format!(
                "grpofit: note: {e}: the built-in CUDA context is used"
            ))
        })
        .ok()
        .flatten()
    else {
        return Ok(());
    };
    let stack = inputs.loaded.file.run.stack.name();
    let Some(learned) = calibration.find(gpu, stack).and_then(|e| e.context()) else {
        return Ok(());
    };
    inputs.gpu.context = Some(learned.median);
    inputs.calibrated = Some(format!(
        "CUDA context {}, measured on your {gpu} in {} run{} ({}; `grpofit calibrate --reset` forgets it)",
        format_size(learned.median),
        learned.runs,
        if learned.runs == 1 { "" } else { "s" },
        learned
            .spread
            .map_or("no spread known".to_string(), |s| format!(
                "spread {}",
                format_size(s)
            ))
    ));
    Ok(())
}
