//! `[grpofit] reward_models` and `other_gpu_memory`: what else sits on each training GPU. Reward
//! models are resolved like the policy model (catalog, cache, Hub: the `ModelResolver` the file is read with).

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::resolve::ModelResolver;
use crate::run::reward::RewardModel;
use crate::units::parse_size;
use toml::Value;

/// The two keys, read together.
pub(super) struct Frozen {
    pub reward_models: Vec<RewardModel>,
    pub other_gpu_memory: u64,
}

pub(super) fn read_frozen(t: &Tables, models: &dyn ModelResolver) -> Result<Frozen, LoadError> {
    Ok(Frozen {
        reward_models: reward_models(t, models)?,
        other_gpu_memory: other_gpu_memory(t)?,
    })
}

/// `reward_models = ["name", ...]`: each a model id the catalog, the cache or the Hub knows.
fn reward_models(t: &Tables, models: &dyn ModelResolver) -> Result<Vec<RewardModel>, LoadError> {
    let key = "reward_models";
    let Some(v) = t.get(T::Grpofit, key)? else {
        return Ok(Vec::new());
    };
    let names = v.as_array().ok_or_else(|| {
        t.wrong(
            T::Grpofit,
            key,
            v,
            "expected a list of model names, e.g. [\"Skywork/Skywork-Reward-V2-Qwen3-0.6B\"]",
        )
    })?;
    names
        .iter()
        .map(|n| {
            let name = n
                .as_str()
                .ok_or_else(|| t.wrong(T::Grpofit, key, n, "expected a model name in quotes"))?;
            let resolved = models
                .resolve(name, None)
                .map_err(|e| t.wrong(T::Grpofit, key, format!("\"{name}\""), e.to_string()))?;
            let resolved = resolved.ok_or_else(|| {
                t.wrong(
                    T::Grpofit,
                    key,
                    format!("\"{name}\""),
                    format!("unknown model: not in the Hugging Face cache nor in the catalog. Download its config once (`hf download {name} config.json`)"),
                )
            })?;
            Ok(RewardModel {
                name: name.to_string(),
                arch: resolved.arch,
            })
        })
        .collect()
}

/// `other_gpu_memory = "2GiB"`: a size in quotes with its unit.
fn other_gpu_memory(t: &Tables) -> Result<u64, LoadError> {
    let key = "other_gpu_memory";
    match t.get(T::Grpofit, key)? {
        None => Ok(0),
        Some(Value::String(s)) => {
            parse_size(s).map_err(|e| t.wrong(T::Grpofit, key, format!("\"{s}\""), e.to_string()))
        }
        Some(v) => Err(t.wrong(
            T::Grpofit,
            key,
            v,
            "expected a size in quotes with its unit, e.g. \"2GiB\"",
        )),
    }
}
