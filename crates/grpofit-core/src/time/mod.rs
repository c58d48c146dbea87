//! How long one optimizer step takes, by phase: generation (prefill and decode, vLLM's or
//! transformers'), the weight sync into vLLM and its sleep, scoring (old and reference
//! log-probs), the reward functions (`rewards`, the user's `reward_seconds`), training (forward,
//! backward, recompute, optimizer (on the host's cores when offloaded, with its PCIe traffic:
//! `offload`), the gradients' all-reduce or ZeRO-3's gathers, and the
//! checkpoint saves amortised over `save_steps`: `checkpoint`). A roofline over the card's sheet (`hardware`) with the efficiencies of
//! `efficiency`, on the memory model's own quantities (the run, vLLM's plan); vLLM's LoRA
//! kernels in each decode step where Unsloth hands it the adapters (`vllm_lora`).

pub mod checkpoint;
pub mod efficiency;
mod experts;
mod kernels;
mod machine;
pub mod offload;
mod ops;
mod phases;
pub mod rewards;
pub mod vllm_lora;

use crate::hardware::{self, GpuSpeed};
use crate::memory::estimate::Estimate;
use crate::run::RunConfig;
pub use efficiency::Efficiencies;
use serde::Serialize;

/// What the run file says about time beside the run (`[grpofit] gpu`, `gpu_tflops`,
/// `gpu_bandwidth`, `mean_completion_length`, `reward_seconds`, `dataset_size`; `[grpo]
/// max_steps`, `num_train_epochs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TimeKeys {
    /// the card, as written
    pub gpu: Option<String>,
    pub gpu_tflops: Option<f64>,
    /// GB/s
    pub gpu_bandwidth: Option<f64>,
    /// the completions' mean length in tokens, when the user knows it (a decimal, as the
    /// trainer logs `completion_length`)
    pub mean_completion_length: Option<f64>,
    /// seconds a completion's reward functions take on the host, when the user knows it
    pub reward_seconds: Option<f64>,
    /// `[grpo] save_steps`, `save_strategy`, `save_only_model`: when the trainer saves a
    /// checkpoint inside the run's timing, and what
    pub save_steps: Option<f64>,
    pub save_strategy: Option<String>,
    pub save_only_model: Option<bool>,
    pub max_steps: Option<u64>,
    /// prompts in the training set
    pub dataset_size: Option<u64>,
    pub num_train_epochs: Option<f64>,
}

/// The dense bf16 TFLOPS a user may give a card (`[grpofit] gpu_tflops`, `--gpu-tflops`), least
/// and most: the table's cards span a T4's 65 to a B200's 2,250 (`hardware/cards.rs`).
pub const GPU_TFLOPS_RANGE: (f64, f64) = (1.0, 100_000.0);
/// The memory GB/s a user may give a card (`[grpofit] gpu_bandwidth`, `--gpu-bandwidth`): the
/// table spans a T4's 320 to a B200's 8,000.
pub const GPU_BANDWIDTH_RANGE: (f64, f64) = (10.0, 100_000.0);

/// A card figure the user gave, checked against its range: the value, or why not.
pub fn check_figure(x: f64, (least, most): (f64, f64)) -> Result<f64, String> {
    if x.is_finite() && (least..=most).contains(&x) {
        Ok(x)
    } else {
        Err(format!("out of range, expected {least} to {most}"))
    }
}

/// Which card the step is timed on: a name (from `--gpu`, NVML or the file) and the figures
/// the user gave (which replace the table's, or describe a card it lacks).
pub fn gpu_speed(
    name: Option<&str>,
    tflops: Option<f64>,
    bandwidth: Option<f64>,
) -> Result<GpuSpeed, UnknownGpu> {
    let card = name.and_then(hardware::lookup);
    match (card, tflops, bandwidth) {
        (Some(c), None, None) => Ok(c.speed()),
        (Some(c), t, b) => {
            let mut s = c.speed();
            s.bf16_tflops = t.unwrap_or(s.bf16_tflops);
            s.memory_gb_s = b.unwrap_or(s.memory_gb_s);
            s.source = format!("{} (with your gpu_tflops / gpu_bandwidth)", c.name);
            Ok(s)
        }
        (None, Some(t), Some(b)) => Ok(GpuSpeed::given(name.unwrap_or("your GPU"), t, b)),
        (None, t, b) => Err(UnknownGpu {
            name: name.map(str::to_string),
            missing: match (t, b) {
                (Some(_), None) => Some("gpu_bandwidth"),
                (None, Some(_)) => Some("gpu_tflops"),
                _ => None,
            },
        }),
    }
}

/// No card to time the step on: a name the table lacks, or none at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct UnknownGpu {
    pub name: Option<String>,
    /// the one figure of the two the user left out, when they gave the other
    pub missing: Option<&'static str>,
}

impl std::fmt::Display for UnknownGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(n) => write!(f, "the card `{n}` is not in grpofit's table"),
            None => write!(f, "no card named"),
        }?;
        if let Some(key) = self.missing {
            let flag = format!("--{}", key.replace('_', "-"));
            return write!(
                f,
                ", and of its figures `[grpofit] {key}` (`{flag}`) is missing: a card the table lacks needs both its dense bf16 TFLOPS and its memory GB/s"
            );
        }
        write!(
            f,
            " ({}): name one with `--gpu` or `[grpofit] gpu`, or give its dense bf16 TFLOPS and memory GB/s (`[grpofit] gpu_tflops`, `gpu_bandwidth`; `--gpu-tflops`, `--gpu-bandwidth`)",
            hardware::names().join(", ")
        )
    }
}

/// One phase's seconds in an optimizer step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseTime {
    pub phase: &'static str,
    pub seconds: f64,
}

/// The card as `--json` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFigures {
    pub name: String,
    pub bf16_tflops: f64,
    pub memory_gb_s: f64,
    pub source: String,
}

/// Seconds per optimizer step, by phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTime {
    pub seconds: f64,
    pub phases: Vec<PhaseTime>,
    pub gpu: GpuFigures,
    /// completion tokens generated per second over the whole step, all GPUs
    pub tokens_per_second: f64,
    /// the completions' length the generation is timed for, and whether it is the full one
    pub completion_tokens: f64,
    pub completion_is_mean: bool,
    /// the user's `mean_completion_length` when above `max_completion_length`: timed at the cap
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_capped_from: Option<f64>,
    /// optimizer steps in the run, when `max_steps` or the dataset's size says
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_hours: Option<f64>,
    /// whether the `rewards` phase times the reward functions (`[grpofit] reward_seconds`
    /// given), beside the reward models' forward it always times
    #[serde(skip)]
    pub reward_functions_timed: bool,
}

impl StepTime {
    pub fn phase(&self, name: &str) -> f64 {
        self.phases
            .iter()
            .find(|p| p.phase == name)
            .map_or(0.0, |p| p.seconds)
    }
}

/// A phase as the user reads it: `scoring` (the JSON's key, kept stable) is the old and
/// reference log-prob passes, not the reward functions; `weight_sync` is two words.
pub fn phase_label(phase: &str) -> &str {
    match phase {
        "scoring" => "log-probs",
        "weight_sync" => "weight sync",
        other => other,
    }
}

/// The phases, in the order a step runs them.
pub const PHASES: [&str; 5] = [
    "generation",
    "weight_sync",
    "scoring",
    "rewards",
    "training",
];

/// The step's time for `run` (whose memory is `est`) on `gpu`.
pub fn step_time(
    run: &RunConfig,
    est: &Estimate,
    gpu: &GpuSpeed,
    keys: &TimeKeys,
    eff: &Efficiencies,
) -> StepTime {
    let lens = phases::Lengths::of(run, keys.mean_completion_length);
    let m = phases::Machine { gpu, eff };
    let seconds = [
        phases::generation(run, est, &m, &lens),
        phases::weight_sync(run, est, &m),
        phases::scoring(run, &m, &lens),
        rewards::seconds(run, keys) + phases::reward_models(run, &m, &lens),
        phases::training(run, &m, &lens)
            + checkpoint::seconds(run, phases::trainable_parameters(run), keys),
    ];
    let total: f64 = seconds.iter().sum();
    let completions = run.effective_batch() as f64;
    let tokens = completions * lens.mean;
    let steps = keys.max_steps.filter(|&s| s > 0).or_else(|| {
        // `num_train_epochs` left out: TrainingArguments' default (3.0 in the contract: GRPOConfig
        // keeps it), as the trainer runs
        let epochs = keys
            .num_train_epochs
            .or(crate::contract::Call::GrpoConfig.default_f64("num_train_epochs"))
            .unwrap_or(1.0);
        let prompts = keys.dataset_size? as f64 * epochs;
        (est.batch.prompts_per_step > 0.0)
            .then(|| (prompts / est.batch.prompts_per_step).ceil() as u64)
    });
    StepTime {
        seconds: total,
        phases: PHASES
            .iter()
            .zip(seconds)
            .map(|(phase, seconds)| PhaseTime { phase, seconds })
            .collect(),
        gpu: GpuFigures {
            name: gpu.name.clone(),
            bf16_tflops: gpu.bf16_tflops,
            memory_gb_s: gpu.memory_gb_s,
            source: gpu.source.clone(),
        },
        tokens_per_second: if total > 0.0 { tokens / total } else { 0.0 },
        completion_tokens: lens.mean,
        completion_is_mean: keys.mean_completion_length.is_some(),
        mean_capped_from: keys.mean_completion_length.filter(|&m| m > lens.max),
        run_hours: steps.map(|s| s as f64 * total / 3600.0),
        steps,
        reward_functions_timed: keys.reward_seconds.is_some(),
    }
}

/// Why the step of a run whose memory is `est` is not timed: vLLM refuses to start (its
/// start-up checks, `memory::refusal`), so no step runs.
pub fn untimed(est: &Estimate) -> Option<String> {
    let plan = est.vllm.as_ref().filter(|p| !p.starts)?;
    let why = plan
        .refusal
        .as_ref()
        .map_or("its start-up checks fail", |r| r.reason.name());
    Some(format!(
        "vLLM does not start ({why}), so no step runs; make vLLM's share fit first"
    ))
}

/// vLLM's decode term alone: output tokens a second at `batch` running sequences of `context`
/// tokens on average, 16-bit weights and KV cache.
pub fn decode_tokens_per_second(
    arch: &crate::arch::Arch,
    gpu: &GpuSpeed,
    eff: &Efficiencies,
    batch: f64,
    context: f64,
) -> f64 {
    phases::decode_tokens_per_second(arch, &phases::Machine { gpu, eff }, batch, context)
}

/// "step ≈ 41 s (generation 29 s, log-probs 3 s, training 9 s) on H100 SXM; 640 steps ≈ 7.3 h".
pub fn summary(t: &StepTime) -> String {
    let parts: Vec<String> = t
        .phases
        .iter()
        .filter(|p| p.seconds >= 0.05 || p.phase == "generation" || p.phase == "training")
        .map(|p| format!("{} {}", phase_label(p.phase), seconds(p.seconds)))
        .collect();
    let run = match (t.steps, t.run_hours) {
        (Some(s), Some(h)) if h >= 1.0 => format!("; {s} steps ≈ {h:.1} h"),
        (Some(s), Some(h)) => format!("; {s} steps ≈ {:.0} min", h * 60.0),
        _ => String::new(),
    };
    format!(
        "step ≈ {} ({}) on {}{run}",
        seconds(t.seconds),
        parts.join(", "),
        t.gpu.name
    )
}

/// Seconds as people read them: "41 s", "3.2 s", "0.4 s".
pub fn seconds(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}
