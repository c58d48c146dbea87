//! Where completions are generated, from `[model]` (Unsloth's `from_pretrained` starts vLLM)
//! and `[grpo]` (TRL's `use_vllm`, `vllm_mode`): in a colocated vLLM and its memory share, on
//! a vLLM server, or by transformers; and the colocated vLLM's own settings.

use super::error::LoadError;
use super::read_model::model_call;
use super::read_vllm_device::vllm_on_own_gpu;
use super::tables::Tables;
use crate::contract::{Call, Table as T};
use crate::run::{Generation, Stack};

/// How completions are generated.
pub(super) struct Generating {
    pub generation: Generation,
    pub vllm_kv_fp8: bool,
    pub vllm_sleep: bool,
    pub vllm_max_num_seqs: Option<u64>,
    pub vllm_max_num_batched_tokens: Option<u64>,
    /// TRL colocate's `vllm_tensor_parallel_size`
    pub vllm_tensor_parallel: u64,
}

/// Reads where and how completions are generated; `standby` is Unsloth's vLLM standby
/// (`[env]`), its sleep mode.
pub(super) fn read_generation(t: &Tables, standby: bool) -> Result<Generating, LoadError> {
    let unsloth = |read: Result<Option<u64>, LoadError>| match t.stack {
        Stack::Unsloth => read,
        Stack::Trl => Ok(None),
    };
    Ok(Generating {
        generation: generation(t)?,
        vllm_kv_fp8: match t.stack {
            Stack::Unsloth => t
                .boolean(T::Model, "float8_kv_cache")?
                .or(t
                    .versions
                    .call_default(model_call(t.stack), "float8_kv_cache")
                    .and_then(|v| v.as_bool()))
                .unwrap_or(false),
            Stack::Trl => false,
        },
        vllm_sleep: match t.stack {
            Stack::Trl => t
                .boolean(T::Grpo, "vllm_enable_sleep_mode")?
                .or(Call::GrpoConfig.default_bool("vllm_enable_sleep_mode"))
                .unwrap_or(false),
            Stack::Unsloth => standby,
        },
        vllm_max_num_seqs: unsloth(t.int(T::Model, "max_num_seqs", 1, 1 << 16))?,
        vllm_max_num_batched_tokens: unsloth(t.int(
            T::Model,
            "max_num_batched_tokens",
            1,
            1 << 24,
        ))?,
        vllm_tensor_parallel: match t.stack {
            Stack::Trl => t
                .int(T::Grpo, "vllm_tensor_parallel_size", 1, 64)?
                .or(Call::GrpoConfig.default_u64("vllm_tensor_parallel_size"))
                .unwrap_or(1),
            Stack::Unsloth => 1,
        },
    })
}

fn generation(t: &Tables) -> Result<Generation, LoadError> {
    let grpo = Call::GrpoConfig;
    let model = model_call(t.stack);
    let share = vllm_share(t)?;
    let asked_vllm = t.boolean(T::Grpo, "use_vllm")?;
    let use_vllm = asked_vllm.or(grpo.default_bool("use_vllm"));
    let mode = vllm_mode(t)?;
    // trl 0.14 to 0.17's vLLM on a GPU of its own (`read_vllm_device`)
    let own_gpu = vllm_on_own_gpu(t)?;
    let colocated = match t.stack {
        // Unsloth starts vLLM when from_pretrained has fast_inference = True, and its GRPO
        // patch then sets use_vllm itself
        Stack::Unsloth => t
            .boolean(T::Model, "fast_inference")?
            .or(asked_vllm)
            .or(t
                .versions
                .call_default(model, "fast_inference")
                .and_then(|v| v.as_bool()))
            .unwrap_or(false),
        Stack::Trl => {
            use_vllm.unwrap_or(false) && mode.unwrap_or(default_mode(t)) != "server" && !own_gpu
        }
    };
    let server = t.stack == Stack::Trl
        && use_vllm.unwrap_or(false)
        && (mode.unwrap_or(default_mode(t)) == "server" || own_gpu);
    Ok(if colocated {
        let default = match t.stack {
            Stack::Unsloth => t
                .versions
                .call_default(model, "gpu_memory_utilization")
                .and_then(|v| v.as_f64()),
            // the release's own default: 0.9 in trl 0.14 and 0.15, 0.3 from 0.18 (the ladder)
            Stack::Trl => t
                .versions
                .trl_default("vllm_gpu_memory_utilization")
                .and_then(|v| v.as_f64())
                .or(grpo.default_f64("vllm_gpu_memory_utilization")),
        };
        Generation::ColocatedVllm {
            share: share.or(default).unwrap_or(0.5),
        }
    } else if server {
        Generation::VllmServer
    } else {
        Generation::Transformers
    })
}

/// The colocated vLLM's share of memory: Unsloth's `[model] gpu_memory_utilization` or
/// `[grpo] vllm_gpu_memory_utilization`, which must agree when both are given.
fn vllm_share(t: &Tables) -> Result<Option<f64>, LoadError> {
    let from_model = match t.stack {
        Stack::Unsloth => t.share(T::Model, "gpu_memory_utilization")?,
        Stack::Trl => None,
    };
    let from_grpo = t.share(T::Grpo, "vllm_gpu_memory_utilization")?;
    if let (Some(a), Some(b)) = (from_model, from_grpo)
        && (a - b).abs() > 1e-9
    {
        let message = format!(
            "`[model] gpu_memory_utilization = {a}` and `[grpo] vllm_gpu_memory_utilization = {b}` disagree: they are the same vLLM share"
        );
        return Err(t
            .sentence(T::Model, "gpu_memory_utilization", message)
            .with_value(a));
    }
    Ok(from_model.or(from_grpo))
}

/// TRL's `vllm_mode` where the file leaves it out, by the release in force: its GRPOConfig
/// default (the TRL ladder: "server" from 0.18.2 to 0.29.1, "colocate" from 1.0.0). trl 0.16
/// and 0.17 have no `vllm_mode` and generate only in `trl vllm-serve` (their
/// `GRPOTrainer.__init__` builds a `VLLMClient`); 0.14 and 0.15 start vLLM in the trainer
/// (`LLM(device=vllm_device)`, trl 0.15.2 `GRPOTrainer.__init__`), on the training GPU when it
/// is the only one (`vllm_device = "auto"`), as colocate does.
fn default_mode(t: &Tables) -> &'static str {
    if ((0, 16)..(0, 18)).contains(&t.versions.trl.line()) {
        return "server";
    }
    match t.versions.trl_default("vllm_mode") {
        Some(v) if v.as_str() == Some("server") => "server",
        Some(_) => "colocate",
        None => Call::GrpoConfig
            .default_str("vllm_mode")
            .unwrap_or("colocate"),
    }
}

/// TRL's `vllm_mode`: "colocate" or "server".
fn vllm_mode<'a>(t: &Tables<'a>) -> Result<Option<&'a str>, LoadError> {
    let mode = t.text(T::Grpo, "vllm_mode")?;
    match mode {
        None | Some("colocate" | "server") => Ok(mode),
        Some(m) => Err(t.wrong(
            T::Grpo,
            "vllm_mode",
            format!("\"{m}\""),
            "expected \"colocate\" or \"server\"",
        )),
    }
}
