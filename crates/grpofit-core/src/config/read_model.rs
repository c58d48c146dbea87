//! `[model]`: which model, where its architecture comes from, how its weights are stored, and
//! how long a sequence it takes.

use super::error::LoadError;
use super::tables::Tables;
use crate::arch::Arch;
use crate::arch::catalog::{self, ImpliedQuant};
use crate::contract::{Call, Table as T};
use crate::resolve::safetensors::WeightsOnDisk;
use crate::resolve::{ModelResolver, ModelSource, Resolved};
use crate::run::attention::{self, Attention};
use crate::run::knobs::Knob;
use crate::run::{Quant, Stack, StoredWeights};
use std::path::Path;
use toml::Value;

/// What `[model]` says, with the architecture it names.
pub(super) struct Model {
    pub name: String,
    pub arch: Arch,
    pub quant: Quant,
    /// the longest sequence, prompt and completion: vLLM's `max_model_len` too
    pub max_seq_len: u64,
    /// the largest LoRA rank vLLM makes room for (Unsloth's `from_pretrained`)
    pub max_lora_rank: Option<u64>,
    /// where the architecture was read
    pub source: ModelSource,
    /// the checkpoint's weights, from its safetensors headers in the cache
    pub stored_weights: Option<StoredWeights>,
}

/// Reads `[model]`; the architecture comes from `model_config` when given (`[grpofit]`), else
/// from the local Hugging Face cache, else from the catalog (`hub::resolve`).
pub(super) fn read_model(
    t: &Tables,
    model_config: Option<&Path>,
    models: &dyn ModelResolver,
) -> Result<Model, LoadError> {
    let name = model_name(t)?;
    let resolved = models.resolve(&name, model_config).map_err(|e| {
        if model_config.is_some() {
            t.wrong_key(T::Grpofit, "model_config", e.to_string())
        } else {
            t.wrong(
                T::Model,
                model_name_key(t.stack),
                format!("\"{name}\""),
                e.to_string(),
            )
        }
    })?;
    let resolved = resolved.ok_or_else(|| unknown_model(t, &name, models))?;
    let quant = quant(t, resolved.quant)?;
    let max_seq_len = max_seq_len(t, &resolved.arch)?;
    let stored_weights = stored_weights_of(&resolved);
    Ok(Model {
        name,
        arch: resolved.arch,
        quant,
        max_seq_len,
        max_lora_rank: max_lora_rank(t)?,
        source: resolved.source,
        stored_weights,
    })
}

/// The weights a resolved model's safetensors headers give, when they agree with its config.
pub fn stored_weights_of(resolved: &Resolved) -> Option<StoredWeights> {
    resolved
        .weights
        .as_ref()
        .and_then(stored_weights)
        .filter(|w| agrees(w.parameters, resolved.arch.parameters()))
}

/// Whether the headers' parameters are the config's: a snapshot holding part of its shards, or
/// other files than the model's, leaves the formula in charge. The formula is exact for the
/// catalog's models (their parameter-count tests), so 1 % covers extra tensors a checkpoint
/// may carry (rotary buffers, an untied copy).
fn agrees(stored: u64, formula: u64) -> bool {
    stored.abs_diff(formula) as f64 <= 0.01 * formula as f64
}

/// How a checkpoint's headers say its weights are stored: bitsandbytes NF4 or FP8 when its
/// linear layers are packed so, else the 16- or 32-bit float most of its bytes are in. MXFP4
/// and other packings grpofit does not model leave the formula in charge (None).
fn stored_weights(w: &WeightsOnDisk) -> Option<StoredWeights> {
    let p = &w.packed;
    let stored_as = if p.mxfp4.tensors > 0 || p.bnb_fp4.tensors > 0 {
        return None;
    } else if p.bnb_nf4.tensors > 0 {
        Quant::Nf4
    } else if p.fp8.tensors > 0 {
        Quant::Fp8
    } else {
        let (dtype, _) = w.bytes_by_dtype.iter().max_by_key(|(_, b)| **b)?;
        match dtype.as_str() {
            "BF16" | "F16" => Quant::Bf16,
            "F32" => Quant::Fp32,
            _ => return None,
        }
    };
    Some(StoredWeights {
        bytes: w.bytes,
        parameters: w.parameters,
        stored_as,
    })
}

/// The call `[model]` feeds on `stack`.
pub(super) fn model_call(stack: Stack) -> Call {
    T::Model.call(stack).unwrap_or(Call::UnslothFromPretrained)
}

/// The key that names the model: Unsloth's `model_name`, TRL ModelConfig's `model_name_or_path`.
pub fn model_name_key(stack: Stack) -> &'static str {
    match stack {
        Stack::Unsloth => "model_name",
        Stack::Trl => "model_name_or_path",
    }
}

fn model_name(t: &Tables) -> Result<String, LoadError> {
    let key = model_name_key(t.stack);
    t.text(T::Model, key)?
        .map(str::to_string)
        .ok_or_else(|| t.sentence(T::Model, key, format!("missing `[model] {key}`")))
}

/// The unknown-model message's advice that only a run file can follow: a TRL recipe has no
/// `[grpofit]` table, so `recipe::load` drops it there.
pub(super) const MODEL_CONFIG_ADVICE: &str =
    ", or set `[grpofit] model_config = \"path/to/config.json\"`";

fn unknown_model(t: &Tables, name: &str, models: &dyn ModelResolver) -> LoadError {
    let cache = models
        .cache()
        .map_or("no Hugging Face cache folder found".to_string(), |c| {
            format!("not in the Hugging Face cache ({})", c.display())
        });
    let hub = models
        .why_not_online(name)
        .map_or_else(String::new, |why| format!("; {why}"));
    let message = format!(
        "unknown model: {cache}, nor in the catalog (closest: {}){hub}. Download it once (`hf download {name} config.json`){MODEL_CONFIG_ADVICE} (run `grpofit models` for the catalog)",
        catalog::closest(name, 3).join(", ")
    );
    t.wrong(
        T::Model,
        model_name_key(t.stack),
        format!("\"{name}\""),
        message,
    )
}

/// The base weights' format: 4-bit, 8-bit, fp8 or 16/32-bit, from the stack's own keys and
/// defaults; `implied` by a catalog name such as `unsloth/...-bnb-4bit`.
fn quant(t: &Tables, implied: ImpliedQuant) -> Result<Quant, LoadError> {
    let model = model_call(t.stack);
    let four = t.boolean(T::Model, "load_in_4bit")?;
    let eight = t.boolean(T::Model, "load_in_8bit")?.unwrap_or(false);
    let fp8 = fp8(t)?;
    let asked = [
        ("load_in_4bit", four == Some(true)),
        ("load_in_8bit", eight),
        ("load_in_fp8", fp8),
    ];
    let mut on = asked.iter().filter(|(_, b)| *b).map(|(key, _)| *key);
    if let (Some(first), Some(_)) = (on.next(), on.next()) {
        return Err(t.sentence(
            T::Model,
            first,
            "`[model] load_in_4bit`, `load_in_8bit` and `load_in_fp8`: more than one is true",
        ));
    }
    let four = four.unwrap_or_else(|| {
        implied == ImpliedQuant::FourBit
            || t.versions.call_default(model, "load_in_4bit")
                == Some(&serde_json::Value::Bool(true))
    });
    if fp8 {
        Ok(Quant::Fp8)
    } else if eight {
        Ok(Quant::Int8)
    } else if four {
        Ok(Quant::Nf4)
    } else {
        dtype(t)
    }
}

/// `load_in_fp8 = true` or `"block"`: fp8 weights, one byte each (Unsloth's FP8 GRPO).
fn fp8(t: &Tables) -> Result<bool, LoadError> {
    if t.stack == Stack::Trl {
        return Ok(false);
    }
    match t.get(T::Model, "load_in_fp8")? {
        None | Some(Value::Boolean(false)) => Ok(false),
        Some(Value::Boolean(true)) => Ok(true),
        Some(Value::String(s)) if s == "block" => Ok(true),
        Some(v) => Err(t.wrong(
            T::Model,
            "load_in_fp8",
            v,
            "expected true, false or \"block\"",
        )),
    }
}

/// 16- or 32-bit weights, from `dtype`.
fn dtype(t: &Tables) -> Result<Quant, LoadError> {
    match t.text(T::Model, "dtype")?.or(t
        .versions
        .call_default(model_call(t.stack), "dtype")
        .and_then(|v| v.as_str()))
    {
        // TRL's ModelConfig defaults dtype to "float32", and its scripts load with it
        Some("float32") => Ok(Quant::Fp32),
        Some("bfloat16" | "float16" | "auto") | None => Ok(Quant::Bf16),
        Some(other) => Err(t.wrong(
            T::Model,
            "dtype",
            format!("\"{other}\""),
            "expected \"bfloat16\", \"float16\", \"float32\" or \"auto\"",
        )),
    }
}

/// The longest sequence the run takes.
fn max_seq_len(t: &Tables, arch: &Arch) -> Result<u64, LoadError> {
    let given = t.knob(Knob::SequenceLength)?;
    Ok(match t.stack {
        // Unsloth: from_pretrained's max_seq_length is vLLM's max_model_len too. Its default
        // by release: `None` in 2025.2, which `FastLlamaModel.from_pretrained` (unsloth 2025.2.4
        // and 2025.2.15 llama.py, "If max_seq_length is not specified, use maximum fron
        // config") replaces by the model's `max_position_embeddings`; 2048 from 2025.3.19
        Stack::Unsloth => given.unwrap_or_else(|| {
            match t
                .versions
                .call_default(model_call(t.stack), "max_seq_length")
            {
                Some(serde_json::Value::Null) => arch.max_position,
                default => default.and_then(|v| v.as_u64()).unwrap_or(2048),
            }
        }),
        // TRL colocate: vllm_max_model_length, else vLLM takes the model's own context
        // (GRPOTrainer.__init__ passes max_model_len=self.vllm_max_model_length, None when unset)
        Stack::Trl => given.unwrap_or(arch.max_position),
    })
}

/// Unsloth's `max_lora_rank`: the LoRA rank vLLM makes room for.
fn max_lora_rank(t: &Tables) -> Result<Option<u64>, LoadError> {
    Ok(match t.stack {
        Stack::Unsloth => Some(
            t.int(T::Model, "max_lora_rank", 1, 4096)?
                .or(t
                    .versions
                    .call_default(model_call(t.stack), "max_lora_rank")
                    .and_then(|v| v.as_u64()))
                .unwrap_or(64),
        ),
        Stack::Trl => None,
    })
}

/// `attn_implementation`: `[grpo] model_init_kwargs`'s when it names one, else `[model]`'s, else
/// transformers' default, SDPA. trl 1.15.0 `scripts/grpo.py` builds `model_init_kwargs` from
/// `ModelConfig` (`attn_implementation=model_args.attn_implementation`) and then
/// `model_init_kwargs.update(training_args.model_init_kwargs)`, so GRPOConfig's wins; a user's
/// own script hands `GRPOConfig(model_init_kwargs=...)` to `create_model_from_path` the same way.
/// A value transformers would refuse, or one grpofit does not model, is an error naming it.
pub(super) fn attention(t: &Tables) -> Result<Attention, LoadError> {
    if let Some(kwargs) = t.get(T::Grpo, "model_init_kwargs")?
        && let Some(v) = kwargs.as_table().and_then(|k| k.get("attn_implementation"))
    {
        let key = "model_init_kwargs.attn_implementation";
        return named_attention(t, T::Grpo, "model_init_kwargs", key, v);
    }
    match t.get(T::Model, "attn_implementation")? {
        Some(v) => named_attention(t, T::Model, "attn_implementation", "attn_implementation", v),
        None => Ok(Attention::Sdpa),
    }
}

/// The implementation `v` names (`key`, written under `[table] written`).
fn named_attention(
    t: &Tables,
    table: T,
    written: &str,
    key: &str,
    v: &Value,
) -> Result<Attention, LoadError> {
    let refuse = |why: String| {
        LoadError::at_key(table.name(), key, Some(v.to_string()), why)
            .on_line(t.line(table, written))
    };
    let text = v
        .as_str()
        .ok_or_else(|| refuse("expected a string".into()))?;
    Attention::parse(text).ok_or_else(|| {
        refuse(format!(
            "not an attention implementation grpofit models: expected {}",
            attention::ACCEPTED
        ))
    })
}
