//! The command line (clap derive).

use clap::{Args, Parser, Subcommand};
use grpofit_core::fit::DEFAULT_HEADROOM;
use grpofit_core::run::versions::Package;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "grpofit",
    version,
    about = "Fit a GRPO fine-tuning run into a GPU before launching it"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub source: Source,
    /// The interactive screen following a run log that `grpofit run` writes: the measured peak
    /// (◆) on the bar against the estimate, and the measured figures beside the predicted ones,
    /// read again twice a second. The run: --config or --preset, else the one the log names.
    #[arg(long, value_name = "LOG")]
    pub follow: Option<PathBuf>,
    /// The interactive screen without the mouse (it then leaves clicks and selection to the
    /// terminal).
    #[arg(long)]
    pub no_mouse: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Print where the GPU memory goes. Exit 0 when it fits, 3 when it does not, 2 on bad input.
    Estimate {
        #[command(flatten)]
        source: Source,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the run, as the trainer reads it, to this TOML file (`-`: standard output,
        /// instead of the table).
        #[arg(long, value_name = "OUT")]
        export: Option<PathBuf>,
        /// Write the launch set into this folder (a new or empty one; --force replaces an
        /// earlier set whole): from a TRL recipe, tuned.yaml (the recipe tuned in place),
        /// accelerate.yaml, ds_config.json (DeepSpeed) and launch.sh running the recipe's own
        /// script or TRL's GRPO script; from a run file or preset, run.toml and a STAND-IN
        /// train_trl.py (placeholder data); an Unsloth run: run.toml, launch.sh and
        /// train_unsloth.py on one GPU (refused on several). Several nodes: launch.sh runs on
        /// each with MACHINE_RANK set, the vLLM server on the main node only.
        #[arg(long, value_name = "DIR")]
        export_dir: Option<PathBuf>,
        /// Let --export / --export-dir / --svg replace existing files.
        #[arg(long)]
        force: bool,
        /// The main node's address for a multi-node launch set (accelerate's main_process_ip);
        /// without it accelerate.yaml holds a placeholder that launch.sh refuses to run with.
        #[arg(long, value_name = "IP")]
        main_process_ip: Option<String>,
        /// Also draw the memory bar as an SVG picture into this file (a file there only with
        /// --force).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Find the closest configuration that fits (exit 0), or say which floor was hit (exit 3).
    Fit {
        #[command(flatten)]
        source: Source,
        /// Memory to leave free, in percent of the capacity.
        #[arg(
            long,
            default_value_t = DEFAULT_HEADROOM * 100.0,
            value_name = "PCT",
            allow_negative_numbers = true
        )]
        headroom: f64,
        /// Write the fitted run file here.
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        output: Option<PathBuf>,
        /// Let -o and --svg replace existing files.
        #[arg(long)]
        force: bool,
        /// One JSON object: `changes` and `estimate`.
        #[arg(long)]
        json: bool,
        /// Also draw the fitted run's memory bar (or, when nothing fits, the floors') as an SVG
        /// picture into this file (a file there only with --force).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Of the runs that fit, the one with the least predicted seconds a step: from the
        /// nearest fit, only the vLLM share, micro-batch x accumulation (the effective batch
        /// kept), checkpointing, fp8 KV cache and vLLM's sleep move; each change is printed
        /// with its seconds and bytes. Needs a known card (NVML, --gpu or `[grpofit] gpu`).
        #[arg(long)]
        fastest: bool,
    },
    /// Read an out-of-memory message from a log (a file, or - for standard input): what caused
    /// it and what to do. --config or --preset: the run that failed (names the tensor that made
    /// the request, proposes the nearest configuration that fits); --gpu-mem: the GPU's memory
    /// when the message gives none.
    Diagnose {
        /// The log; `-` for standard input (also read when absent, unless it is a terminal).
        file: Option<PathBuf>,
        #[command(flatten)]
        source: Source,
        /// One JSON object: the message's figures, `verdict`, `causes`, `advice`,
        /// `likely_request`, `fit`.
        #[arg(long)]
        json: bool,
        /// With the run that failed: also draw the memory bar of the fit proposed as an SVG
        /// picture into this file (a file there only with --force).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Let --svg replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Write grpofit_callback.py: a transformers TrainerCallback that logs each step's GPU
    /// memory as JSON lines (grpofit-run.jsonl, or $GRPOFIT_LOG) for `grpofit check`. Also
    /// printed on standard output unless that is the file.
    Callback {
        /// Where to write it (`-`: standard output only).
        #[arg(
            short = 'o',
            long = "output",
            value_name = "PATH",
            default_value = "grpofit_callback.py"
        )]
        output: PathBuf,
        /// Let -o replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Set a measured run (the callback's log) against its estimate: torch's peak allocated and
    /// reserved, and the device's peak use, each with the error in percent. --config or
    /// --preset: the run; the GPU's memory is the log's unless --gpu-mem. Exit 2 on a bad log.
    Check {
        /// The JSON-lines log grpofit_callback.py wrote.
        log: PathBuf,
        #[command(flatten)]
        source: Source,
        /// One JSON object: `predicted`, `measured`, `rows`.
        #[arg(long)]
        json: bool,
        /// Also draw the estimate's memory bar with the measured peak (◆) as an SVG picture
        /// into this file (a file there only with --force).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Let --svg replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Run a training command under watch: `[env]` of the run applied, GRPOFIT_RUN_LOG set for
    /// the callback, NVML sampled twice a second, a run log written (the prediction, the
    /// samples, the callback's lines), an out-of-memory death diagnosed. The command gets the
    /// terminal (prompts and breakpoints work; Ctrl-Z stops the run, `fg` resumes it). Exits
    /// with the command's own status (128 + signal when a signal ended it); 2 when it cannot
    /// start.
    Run {
        #[command(flatten)]
        source: Source,
        /// The run log (JSON lines); default grpofit-run-YYYYMMDD-HHMMSS.jsonl (UTC) here
        /// (-2, -3... for runs started in the same second).
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// Add this run to an existing --log (refused without it: one run per log; `check`
        /// and `calibrate` read a log's last run).
        #[arg(long, requires = "log")]
        append: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<std::ffi::OsString>,
    },
    /// Learn from run logs, per GPU model (NVML's name) and stack, the CUDA context of your card,
    /// the allocator's slack ratio and the step time's efficiencies; kept in <config
    /// dir>/grpofit/calibration.toml ($GRPOFIT_CONFIG_DIR overrides the folder), used by the
    /// estimate on a GPU of that name. Where TRL timed your reward functions, their seconds a
    /// completion are written into the run file the log names (or --config) as `[grpofit]
    /// reward_seconds`, every other key and comment kept.
    Calibrate(CalibrateArgs),
    /// List the built-in model catalog (any other model: its config.json in the Hugging Face
    /// cache, `[grpofit] model_config`, or fetched from the Hub unless --offline).
    Models {
        /// One JSON array: name, parameters, layers, hidden size, vocabulary, context.
        #[arg(long)]
        json: bool,
    },
    /// List the presets: built-in tiers and your own.
    Presets {
        /// One JSON array: name, model, capacity, estimate, whether it fits, and whose it is.
        #[arg(long)]
        json: bool,
    },
    /// Show the GPU NVML detects (name, total, used, free), or why none was found. Exit 1 when none.
    Gpu {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show the trainer versions of the active Python environment ($VIRTUAL_ENV, else
    /// $CONDA_PREFIX, else the python3 on PATH), read from its *.dist-info/METADATA: what the
    /// estimate uses where the run file pins no `[grpofit] trl_version`, `unsloth_version`,
    /// `transformers_version` or `vllm_version`.
    Env {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug, Clone, Default)]
pub(crate) struct Source {
    /// A run file (TOML), or a TRL CLI recipe (`.yaml`/`.yml`, as `trl grpo --config` reads it).
    /// A write (-o, --export, the screen's export) edits this file's text: only the tuned keys
    /// change.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// An accelerate config (`accelerate launch --config_file`): its num_processes,
    /// num_machines, distributed_type and DeepSpeed / FSDP settings spread the run.
    #[arg(long, global = true, value_name = "ACCELERATE_YAML")]
    pub launch: Option<PathBuf>,
    /// The training processes over all machines (accelerate's --num_processes), over the
    /// run's or --launch's own.
    #[arg(long, global = true, value_name = "N", value_parser = processes, allow_hyphen_values = true)]
    pub num_processes: Option<u64>,
    /// A preset: a tier name (e.g. 24gb) or a file path.
    #[arg(
        long,
        global = true,
        value_name = "NAME|FILE",
        conflicts_with = "config"
    )]
    pub preset: Option<String>,
    /// GPU capacity with its unit: 24GiB, 24576MiB, 24GB (10^9 bytes) or 25769803776B; a number
    /// alone is refused (24 would be 24 bytes). Overrides what is detected.
    #[arg(long, global = true, value_name = "SIZE", allow_hyphen_values = true)]
    pub gpu_mem: Option<String>,
    /// A capacity a command takes from elsewhere than the command line (`check`: the log's
    /// GPU), in bytes: it stands where `--gpu-mem` would.
    #[arg(skip)]
    pub capacity: Option<u64>,
    /// The card the step is timed on (a table name or NVML's: H100, "A100 40GB PCIe", "Tesla
    /// T4"), over the detected one and the run file's `[grpofit] gpu`.
    #[arg(long, global = true, value_name = "CARD")]
    pub gpu: Option<String>,
    /// The card's dense bf16 tensor TFLOPS, over the table's (or for a card it lacks).
    #[arg(long, global = true, value_name = "TFLOPS", value_parser = tflops, allow_hyphen_values = true)]
    pub gpu_tflops: Option<f64>,
    /// The card's memory bandwidth in GB/s, over the table's (or for a card it lacks).
    #[arg(long, global = true, value_name = "GB_S", value_parser = bandwidth, allow_hyphen_values = true)]
    pub gpu_bandwidth: Option<f64>,
    /// Do not ask NVML for the GPU.
    #[arg(long, global = true)]
    pub no_gpu: bool,
    /// Never look a model up on the Hugging Face Hub (as HF_HUB_OFFLINE=1): the run file's
    /// model_config, the local Hugging Face cache and the catalog only.
    #[arg(long, global = true)]
    pub offline: bool,
    #[command(flatten)]
    pub versions: VersionFlags,
}

/// The trainer releases to estimate for, over the run file's `[grpofit]` keys of the same
/// names and the Python environment's; each pinned release implies the others it requires.
/// The flags are the keys' names (`Package::key`, `Package::flag`).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct VersionFlags {
    /// The TRL release (e.g. 0.15.2), over `[grpofit] trl_version` and the environment's.
    #[arg(long, global = true, value_name = "VERSION")]
    pub trl_version: Option<String>,
    /// The Unsloth release (e.g. 2025.3.19), over `[grpofit] unsloth_version`.
    #[arg(long, global = true, value_name = "VERSION")]
    pub unsloth_version: Option<String>,
    /// The vLLM release (e.g. 0.10.2), over `[grpofit] vllm_version`.
    #[arg(long, global = true, value_name = "VERSION")]
    pub vllm_version: Option<String>,
    /// The transformers release (e.g. 4.51.3), over `[grpofit] transformers_version`.
    #[arg(long, global = true, value_name = "VERSION")]
    pub transformers_version: Option<String>,
}

impl VersionFlags {
    fn of(&self, p: Package) -> Option<&String> {
        match p {
            Package::Trl => self.trl_version.as_ref(),
            Package::Unsloth => self.unsloth_version.as_ref(),
            Package::Vllm => self.vllm_version.as_ref(),
            Package::Transformers => self.transformers_version.as_ref(),
        }
    }

    /// The releases the flags pin, for the run readers (`config::Reading::pins`).
    pub(crate) fn pins(&self) -> Vec<(Package, String)> {
        Package::ALL
            .iter()
            .filter_map(|p| Some((*p, self.of(*p)?.clone())))
            .collect()
    }

    /// Each flag given here, else the one given there (`inputs::merge`).
    pub(crate) fn or(&self, outer: &VersionFlags) -> VersionFlags {
        let pick = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
        VersionFlags {
            trl_version: pick(&self.trl_version, &outer.trl_version),
            unsloth_version: pick(&self.unsloth_version, &outer.unsloth_version),
            vllm_version: pick(&self.vllm_version, &outer.vllm_version),
            transformers_version: pick(&self.transformers_version, &outer.transformers_version),
        }
    }
}

/// `--gpu-tflops`: a number in the range `[grpofit] gpu_tflops` takes (clap names the flag and
/// the value, and exits 2).
fn tflops(s: &str) -> Result<f64, String> {
    figure(s, grpofit_core::time::GPU_TFLOPS_RANGE)
}

/// `grpofit calibrate`'s arguments.
#[derive(Args, Debug)]
pub(crate) struct CalibrateArgs {
    /// Run logs written by `grpofit run` (with the callback's step lines).
    pub logs: Vec<PathBuf>,
    /// Remove calibration.toml: the built-in values again.
    #[arg(long, conflicts_with = "logs")]
    pub reset: bool,
    /// One JSON object: `file`, `learned`, `reward_seconds`.
    #[arg(long)]
    pub json: bool,
    /// Write this many seconds a completion as `[grpofit] reward_seconds` into --config's run
    /// file, without a log (what Python's `grpofit.time_rewards` measured).
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["logs", "reset"], value_parser = reward_seconds)]
    pub reward_seconds: Option<f64>,
}

/// `calibrate --reward-seconds`: as `[grpofit] reward_seconds`.
fn reward_seconds(s: &str) -> Result<f64, String> {
    figure(s, grpofit_core::time::rewards::REWARD_SECONDS_RANGE)
}

/// `--gpu-bandwidth`: as `[grpofit] gpu_bandwidth`.
fn bandwidth(s: &str) -> Result<f64, String> {
    figure(s, grpofit_core::time::GPU_BANDWIDTH_RANGE)
}

/// `--num-processes`: a count an accelerate config's `num_processes` may hold (clap names the
/// flag and the value, and exits 2).
fn processes(s: &str) -> Result<u64, String> {
    let max = grpofit_core::config::accelerate::MAX_PROCESSES;
    s.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .map(|n| n as u64)
        .ok_or_else(|| format!("out of range, expected 1 to {max}"))
}

fn figure(s: &str, range: (f64, f64)) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number".to_string())?;
    grpofit_core::time::check_figure(x, range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn each_package_has_its_flag() {
        let cli = Cli::command();
        for p in Package::ALL {
            let flag = p.flag();
            assert!(
                cli.get_arguments()
                    .any(|a| a.get_long().is_some_and(|l| format!("--{l}") == flag)),
                "{flag}"
            );
            let parsed = Cli::try_parse_from(["grpofit", flag.as_str(), "0.15.2"]);
            let pins = parsed.map(|c| c.source.versions.pins()).unwrap_or_default();
            assert_eq!(pins, vec![(p, "0.15.2".to_string())], "{flag}");
        }
    }
}
