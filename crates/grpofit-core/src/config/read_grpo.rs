//! `[grpo]`: the trainer's batch, group, completion length, KL weight and optimizer.
//! (Where completions are generated is `read_generation`.)

use super::error::LoadError;
use super::tables::{Tables, suggest};
use crate::contract::{Call, Table as T};
use crate::run::knobs::Knob;
use crate::run::versions::LigerLoss;
use crate::run::{Optimizer, Stack};

/// What `[grpo]` says about training.
pub(super) struct Grpo {
    pub micro_batch: u64,
    pub grad_accum: u64,
    pub num_generations: u64,
    pub completion_len: u64,
    pub beta: f64,
    pub optimizer: Optimizer,
    pub steps_per_generation: Option<u64>,
    pub generation_batch_size: Option<u64>,
    /// GRPOConfig's `num_iterations`: 1 unless the file says
    pub num_iterations: u64,
    /// whether the logits go through a fused LM head
    pub fused_logits: bool,
    /// GRPOConfig's `cast_lm_head_to_fp32`
    pub cast_lm_head_to_fp32: bool,
    /// GRPOConfig's `fp16` (TrainingArguments: mixed precision in fp16 rather than bf16)
    pub fp16: bool,
    /// GRPOConfig's `bf16` as written (None: the release's default)
    pub bf16: Option<bool>,
    /// the Liger loss flag of the release (`StackVersions::trl_liger_key`) is on
    pub liger_loss: bool,
    /// said when `use_liger_kernel` is asked for where it changes no logits
    pub note: Option<String>,
    /// GRPOConfig's `pad_to_multiple_of` on a CUDA GPU ([`pad_to_multiple_of`])
    pub pad_to_multiple_of: Option<u64>,
}

/// Reads `[grpo]`, with GRPOConfig's defaults for what it leaves out.
pub(super) fn read_grpo(t: &Tables) -> Result<Grpo, LoadError> {
    let grpo = Call::GrpoConfig;
    // a knob's value under its key, else GRPOConfig's default for that key, else `default`
    let knob = |knob: Knob, default: u64| -> Result<u64, LoadError> {
        let key = knob.trainer_key(t.stack);
        let moved = t.versions.trl_default(key).and_then(|v| v.as_u64());
        Ok(t.knob(knob)?
            .or(moved)
            .or(grpo.default_u64(key))
            .unwrap_or(default))
    };
    Ok(Grpo {
        micro_batch: knob(Knob::MicroBatch, 8)?,
        grad_accum: knob(Knob::GradAccum, 1)?,
        num_generations: knob(Knob::Generations, 8)?,
        completion_len: knob(Knob::CompletionLength, 512)?,
        beta: t
            .float(T::Grpo, "beta", 0.0, 100.0)?
            .or(t.versions.trl_default("beta").and_then(|v| v.as_f64()))
            .or(grpo.default_f64("beta"))
            .unwrap_or(0.0),
        optimizer: optimizer(t)?,
        steps_per_generation: t.int(T::Grpo, "steps_per_generation", 1, 1 << 16)?,
        generation_batch_size: t.int(T::Grpo, "generation_batch_size", 1, 1 << 24)?,
        num_iterations: t
            .int(T::Grpo, "num_iterations", 1, 1 << 16)?
            .or(grpo.default_u64("num_iterations"))
            .unwrap_or(1),
        // TRL 1.x always projects through its fused LM head (GRPOTrainer.__init__ calls
        // add_fused_lm_head); use_liger_kernel no longer touches the logits, since TRL forces
        // Liger's fused cross-entropy off and applies only its layer kernels. Before 1.15 the
        // logits are materialised (`StackVersions::trl_fused_head`).
        fused_logits: t.stack == Stack::Trl && t.versions.trl_fused_head(),
        fp16: t.boolean(T::Grpo, "fp16")?.unwrap_or(false),
        bf16: t.boolean(T::Grpo, "bf16")?,
        cast_lm_head_to_fp32: t
            .boolean(T::Grpo, "cast_lm_head_to_fp32")?
            .or(grpo.default_bool("cast_lm_head_to_fp32"))
            .unwrap_or(false),
        liger_loss: liger_loss(t)?,
        note: (t.boolean(T::Grpo, "use_liger_kernel")? == Some(true)
            && t.versions.trl_fused_head())
        .then(|| {
            "`[grpo] use_liger_kernel`: TRL 1.x applies only Liger's layer kernels (its fused LM head already keeps logits small); not exported, since it is deprecated".to_string()
        }),
        pad_to_multiple_of: pad_to_multiple_of(t)?,
    })
}

/// Whether the release's Liger loss is on (N8): `use_liger_loss` where trl 0.17-0.25 reads it
/// (`GRPOTrainer.__init__`: `self.use_liger_loss = args.use_liger_loss`), `use_liger_kernel`
/// from 0.26 (or the retired `use_liger_loss`, read there). Before 0.17 and from 1.15 the flag
/// changes no logits (`LigerLoss::Off`). The trl stack only: Unsloth runs its own loss.
fn liger_loss(t: &Tables) -> Result<bool, LoadError> {
    if t.stack != Stack::Trl || t.versions.trl_liger_loss() == LigerLoss::Off {
        return Ok(false);
    }
    Ok(t.boolean(T::Grpo, t.versions.trl_liger_key())? == Some(true))
}

/// The most `pad_to_multiple_of` is read as: a whole context of the longest modelled lengths.
const PAD_MAX: u64 = 1 << 16;

/// GRPOConfig's `pad_to_multiple_of` on a CUDA GPU. A whole number pads the step's prompts and
/// completions to a multiple of it. trl 1.16.0's default "auto" pads only on Neuron
/// (`GRPOConfig.__post_init__`: `128 if self.device.type == "neuron" else None`), so on the
/// GPUs grpofit models it is no padding, as the default `None` of the releases before and the
/// CLI's "none"/"null" are; any other string is `int(...)` there. A release without the key
/// refuses it already (`Tables::check_keys_at`).
fn pad_to_multiple_of(t: &Tables) -> Result<Option<u64>, LoadError> {
    let key = "pad_to_multiple_of";
    let Some(v) = t.get(T::Grpo, key)? else {
        return Ok(None);
    };
    if v.is_integer() {
        return t.int(T::Grpo, key, 1, PAD_MAX);
    }
    let text = t.as_text(T::Grpo, key, v)?;
    if text == "auto" || matches!(text.to_ascii_lowercase().as_str(), "none" | "null") {
        return Ok(None);
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| (1..=PAD_MAX).contains(n))
        .map(Some)
        .ok_or_else(|| {
            t.wrong(
                T::Grpo,
                key,
                v,
                format!("expected a whole number 1 to {PAD_MAX}, \"auto\" or \"none\""),
            )
        })
}

/// `optim`, by the trainer's name for it.
fn optimizer(t: &Tables) -> Result<Optimizer, LoadError> {
    let name = t
        .text(T::Grpo, "optim")?
        .or(Call::GrpoConfig.default_str("optim"))
        .unwrap_or("adamw_torch");
    Optimizer::from_trainer_name(name).ok_or_else(|| {
        let names: Vec<&str> = Optimizer::ALL.iter().map(|(n, _)| *n).collect();
        let message = format!(
            "unknown optimizer{}; known: {}",
            suggest(name, names.iter().copied()),
            names.join(", ")
        );
        t.wrong(T::Grpo, "optim", format!("\"{name}\""), message)
    })
}
