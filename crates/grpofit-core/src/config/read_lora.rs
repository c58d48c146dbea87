//! `[lora]`: the adapter's rank, scale and target modules, and gradient checkpointing (which
//! Unsloth's `get_peft_model` takes, and `[grpo]` may say too).

use super::error::LoadError;
use super::tables::Tables;
use crate::arch::Arch;
use crate::contract::{Call, Table as T};
use crate::run::knobs::Knob;
use crate::run::{Checkpointing, Quant, Stack};
use toml::Value;

/// What `[lora]` says.
pub(super) struct Lora {
    pub rank: u64,
    pub alpha: u64,
    pub targets: Vec<String>,
    /// PEFT's `modules_to_save`
    pub modules_to_save: Vec<String>,
    /// the adapters' dropout in training mode ([`dropout`])
    pub dropout: f64,
    pub checkpointing: Checkpointing,
    /// no adapter: every weight trained (`use_peft = false`)
    pub full: bool,
}

/// Reads `[lora]`; `arch` decides PEFT's default target modules, `quant` which modules can be
/// trained as copies.
pub(super) fn read_lora(t: &Tables, arch: &Arch, quant: Quant) -> Result<Lora, LoadError> {
    refuse_cli_keys(t)?;
    let full = full_finetuning(t)?;
    let call = lora_call(t);
    let rank = t
        .knob(Knob::LoraRank)?
        .or(t.versions.call_default(call, "r").and_then(|v| v.as_u64()))
        .unwrap_or(8);
    let alpha = t
        .int(T::Lora, "lora_alpha", 1, 1 << 16)?
        .or(t
            .versions
            .call_default(call, "lora_alpha")
            .and_then(|v| v.as_u64()))
        .unwrap_or(rank);
    Ok(Lora {
        rank,
        alpha,
        targets: targets(t, arch)?,
        modules_to_save: modules_to_save(t, arch, quant)?,
        dropout: if full { 0.0 } else { dropout(t)? },
        checkpointing: checkpointing(t)?,
        full,
    })
}

/// Whether every weight is trained. TRL: ModelConfig's `use_peft = false` said outright (then
/// `[lora]` has nothing to configure). Unsloth's `from_pretrained(full_finetuning=True)` is
/// refused: its full fine-tuning path (no vLLM weight sharing, its own offloading) is not
/// modelled, rather than estimated as LoRA.
fn full_finetuning(t: &Tables) -> Result<bool, LoadError> {
    match t.stack {
        Stack::Unsloth if t.boolean(T::Model, "full_finetuning")? == Some(true) => Err(t.wrong(
            T::Model,
            "full_finetuning",
            true,
            "Unsloth's full fine-tuning is not modelled: grpofit estimates it on the trl stack (`[grpofit] stack = \"trl\"`, `[model] use_peft = false`)",
        )),
        Stack::Unsloth => Ok(false),
        Stack::Trl if t.boolean(T::Model, "use_peft")? == Some(false) => {
            if t.has(T::Lora) {
                return Err(t.wrong(
                    T::Model,
                    "use_peft",
                    false,
                    "trains every weight, so `[lora]` configures nothing: remove `[lora]` or set use_peft = true",
                ));
            }
            Ok(true)
        }
        Stack::Trl => Ok(false),
    }
}

/// TRL ModelConfig's `lora_*` keys in `[model]`: TRL's CLI passes them to PEFT
/// (`get_peft_config`), but a run file's adapter is `[lora]` (train_trl.py's
/// `LoraConfig(**cfg["lora"])`), so they would be silently ignored: refused, naming the key.
fn refuse_cli_keys(t: &Tables) -> Result<(), LoadError> {
    for (cli, key) in super::source::MODEL_LORA_KEYS {
        if let Some(v) = t.get(T::Model, cli)? {
            return Err(t.wrong(
                T::Model,
                cli,
                v,
                format!("TRL's CLI key; a run file sizes and trains the adapter from `[lora] {key}`: write `{key} = {v}` in `[lora]` instead"),
            ));
        }
    }
    Ok(())
}

/// The call `[lora]` feeds: Unsloth's `get_peft_model`, or PEFT's `LoraConfig`.
fn lora_call(t: &Tables) -> Call {
    T::Lora.call(t.stack).unwrap_or(Call::LoraConfig)
}

/// `target_modules`: a list of module names, or "all-linear".
fn targets(t: &Tables, arch: &Arch) -> Result<Vec<String>, LoadError> {
    let key = "target_modules";
    match t.get(T::Lora, key)? {
        None => Ok(default_targets(t, arch)),
        Some(Value::String(s)) if s == "all-linear" => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| t.as_text(T::Lora, key, v).map(str::to_string))
            .collect(),
        Some(v) => Err(t.wrong(T::Lora, key, v, "expected a list of module names")),
    }
}

/// `modules_to_save`: a list of module names, each trained whole as PEFT's trainable copy
/// (`memory::saved_modules`). A name must select a module grpofit sizes (the LM head, the
/// embedding, a projection), by PEFT's suffix match; a projection of a quantised base cannot be
/// copied for training (its packed weight is no floating-point tensor, which autograd refuses).
/// Unsloth's `get_peft_model` handles `modules_to_save` its own way, which is not modelled.
fn modules_to_save(t: &Tables, arch: &Arch, quant: Quant) -> Result<Vec<String>, LoadError> {
    let key = "modules_to_save";
    let names: Vec<String> = match t.get(T::Lora, key)? {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| t.as_text(T::Lora, key, v).map(str::to_string))
            .collect::<Result<_, _>>()?,
        Some(v) => return Err(t.wrong(T::Lora, key, v, "expected a list of module names")),
    };
    if t.stack == Stack::Unsloth && !names.is_empty() {
        return Err(t.sentence(
            T::Lora,
            key,
            "Unsloth's get_peft_model trains `modules_to_save` its own way, which grpofit does not model: estimate it on the trl stack (`[grpofit] stack = \"trl\"`)",
        ));
    }
    let modules = crate::memory::saved_modules::modules(arch);
    for name in &names {
        let selected: Vec<&str> = modules
            .iter()
            .map(|(m, _, _)| *m)
            .filter(|m| crate::memory::saved_modules::matches(m, name))
            .collect();
        if selected.is_empty() {
            let known: Vec<&str> = modules.iter().map(|(m, _, _)| *m).collect();
            return Err(t.wrong(
                T::Lora,
                key,
                format!("\"{name}\""),
                format!("names no module grpofit sizes; known: {}", known.join(", ")),
            ));
        }
        let packed = !matches!(quant, Quant::Bf16 | Quant::Fp32);
        if packed
            && selected
                .iter()
                .any(|m| *m != "lm_head" && *m != "embed_tokens")
        {
            return Err(t.wrong(
                T::Lora,
                key,
                format!("\"{name}\""),
                "selects a quantised projection, which cannot be trained as a copy: list lm_head or embed_tokens, or load the model in 16-bit",
            ));
        }
    }
    Ok(names)
}

fn default_targets(t: &Tables, arch: &Arch) -> Vec<String> {
    match t
        .versions
        .call_default(lora_call(t), "target_modules")
        .and_then(|v| v.as_array())
    {
        // Unsloth's get_peft_model: the seven projections
        Some(list) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        // PEFT's LoraConfig(target_modules=None) takes the model type's entry of
        // TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: q and v, Phi-3's fused qkv
        None if arch.family.fused_projections() => vec!["qkv_proj".to_string()],
        None => vec!["q_proj".to_string(), "v_proj".to_string()],
    }
}

/// `[lora] lora_dropout`, else the call's default: PEFT `LoraConfig.lora_dropout` 0.0 (the run
/// file's `[lora]` is `LoraConfig(**cfg["lora"])`), Unsloth `get_peft_model(lora_dropout=0.0)`;
/// a TRL recipe's reader writes ModelConfig's 0.05 where it leaves the key out
/// (`recipe::versions`). torch's `nn.Dropout` refuses p outside 0 to 1. `[grpo]
/// disable_dropout = true` (GRPOConfig from TRL 0.17) zeroes it: `GRPOTrainer.__init__` calls
/// `disable_dropout_in_model(model)` (trl 0.19.1 / 1.16.0 `trainer/utils.py`: every
/// `nn.Dropout`'s `p = 0`, PEFT's `lora_dropout` modules among them), and torch's dropout
/// returns its input when p is 0 (`_dropout_impl`; the fused CUDA kernel needs `p > 0`).
fn dropout(t: &Tables) -> Result<f64, LoadError> {
    let asked = t
        .float(T::Lora, "lora_dropout", 0.0, 1.0)?
        .or(t
            .versions
            .call_default(lora_call(t), "lora_dropout")
            .and_then(|v| v.as_f64()))
        .unwrap_or(0.0);
    Ok(match t.boolean(T::Grpo, "disable_dropout")? {
        Some(true) => 0.0,
        _ => asked,
    })
}

/// `[lora] use_gradient_checkpointing` (true, false or "unsloth") and `[grpo]
/// gradient_checkpointing`, which must agree; each trainer's default when neither is given.
fn checkpointing(t: &Tables) -> Result<Checkpointing, LoadError> {
    let key = "use_gradient_checkpointing";
    let from_lora = match t.get(T::Lora, key)? {
        None => None,
        Some(Value::Boolean(true)) => Some(Checkpointing::On),
        Some(Value::Boolean(false)) => Some(Checkpointing::Off),
        Some(Value::String(s)) if s == "unsloth" => Some(Checkpointing::UnslothOffload),
        Some(v) => {
            return Err(t.wrong(T::Lora, key, v, "expected true, false or \"unsloth\""));
        }
    };
    match (from_lora, t.boolean(T::Grpo, "gradient_checkpointing")?) {
        (Some(Checkpointing::Off), Some(true))
        | (Some(Checkpointing::On | Checkpointing::UnslothOffload), Some(false)) => Err(t
            .sentence(
                T::Lora,
                key,
                "`[lora] use_gradient_checkpointing` and `[grpo] gradient_checkpointing` disagree",
            )),
        (Some(c), _) => Ok(c),
        (None, Some(false)) => Ok(Checkpointing::Off),
        (None, Some(true)) => Ok(Checkpointing::On),
        (None, None) => Ok(default_checkpointing(t)),
    }
}

/// Unsloth's get_peft_model defaults to "unsloth" (`True` before 2025.8, which the memory
/// model offloads all the same from 2025.3: `unsloth_step::checkpointing_in_effect`); TRL 1.x's
/// _BaseConfig to true.
fn default_checkpointing(t: &Tables) -> Checkpointing {
    let moved = t.versions.trl_default("gradient_checkpointing");
    match t
        .versions
        .call_default(lora_call(t), "use_gradient_checkpointing")
        .or(moved.as_ref())
        .or(Call::GrpoConfig.default("gradient_checkpointing"))
    {
        Some(serde_json::Value::String(s)) if s == "unsloth" => Checkpointing::UnslothOffload,
        Some(serde_json::Value::Bool(false)) => Checkpointing::Off,
        _ => Checkpointing::On,
    }
}
