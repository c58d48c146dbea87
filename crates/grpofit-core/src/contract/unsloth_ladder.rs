//! Unsloth's `FastLanguageModel.from_pretrained` and `get_peft_model` of each release grpofit
//! models (`unsloth_ladder.json`, written by `tools/contract/stack_ladders.py` from each
//! release's wheel: unsloth/models/loader.py `FastLanguageModel.from_pretrained`,
//! unsloth/models/llama.py `FastLlamaModel.get_peft_model`), and the road a `from_pretrained`
//! keyword takes into vLLM when `fast_inference=True`: llama.py `FastLlamaModel.from_pretrained`
//! fills `load_vllm_kwargs = dict(...)` from its own parameters (and passes on any other
//! `load_vllm` keyword of its `**kwargs`), and the `unsloth_zoo` release the wheel's METADATA
//! requires builds `LLM(**engine_args)` in unsloth_zoo/vllm_utils.py `load_vllm`.

use crate::contract::release::Release;
use crate::contract::rungs::{self, Signature};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const LADDER_JSON: &str = include_str!("unsloth_ladder.json");

/// The Unsloth calls the ladder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnslothCall {
    FromPretrained,
    GetPeftModel,
    /// `unsloth_zoo.vllm_utils.load_vllm`, which `from_pretrained` calls for `fast_inference`
    LoadVllm,
}

#[derive(Deserialize)]
struct Rung {
    unsloth_zoo: String,
    from_pretrained: Signature,
    get_peft_model: Signature,
    load_vllm: LoadVllm,
    /// `LLM(...)`'s keyword -> what `load_vllm` gives it
    llm_engine_args: BTreeMap<String, EngineArg>,
    /// the fields Unsloth's config class adds to TRL's `GRPOConfig` (unsloth/models/rl.py,
    /// `class Unsloth{RLConfig_name}`), with their defaults
    grpo_config: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct EngineArg {
    /// the `load_vllm` parameters its value is computed from (a def-use closure over the
    /// function: `max_num_seqs` from `gpu_memory_utilization`, `max_seq_length` ...)
    from: Vec<String>,
}

#[derive(Deserialize)]
struct LoadVllm {
    #[serde(flatten)]
    signature: Signature,
    /// `load_vllm`'s keyword -> the `from_pretrained` expression it is given
    from_pretrained_fills: BTreeMap<String, String>,
}

impl Rung {
    fn signature(&self, call: UnslothCall) -> &Signature {
        match call {
            UnslothCall::FromPretrained => &self.from_pretrained,
            UnslothCall::GetPeftModel => &self.get_peft_model,
            UnslothCall::LoadVllm => &self.load_vllm.signature,
        }
    }
}

fn rungs() -> &'static [(Release, Rung)] {
    static RUNGS: OnceLock<Vec<(Release, Rung)>> = OnceLock::new();
    RUNGS.get_or_init(|| rungs::load(LADDER_JSON))
}

fn rung(unsloth: Release) -> Option<&'static Rung> {
    rungs::find(rungs(), unsloth).map(|(_, r)| r)
}

/// The rung the Unsloth release `unsloth` reads (`rungs::find`).
pub fn rung_of(unsloth: Release) -> Option<Release> {
    rungs::find(rungs(), unsloth).map(|(v, _)| *v)
}

/// Whether `call` of Unsloth `unsloth` names `key` among its parameters. Both calls also take
/// `**kwargs`, but a keyword they do not name reaches no code grpofit models (it goes on to
/// transformers' or PEFT's loader, or nowhere), so the export writes only named ones.
pub fn accepts(call: UnslothCall, unsloth: Release, key: &str) -> bool {
    rung(unsloth).is_some_and(|r| r.signature(call).names(key))
}

/// Whether Unsloth `unsloth`'s own `GRPOConfig` (the `UnslothGRPOConfig` its rl.py builds over
/// TRL's) adds the field `key`: `unsloth_num_chunks` from 2025.2.15, `unsloth_grpo_mini_batch`
/// from 2026.1.
pub fn config_adds(unsloth: Release, key: &str) -> bool {
    rung(unsloth).is_some_and(|r| r.grpo_config.contains_key(key))
}

/// `call`'s default for `key` in Unsloth `unsloth` (None: no constant, or not a key).
pub fn default(
    call: UnslothCall,
    unsloth: Release,
    key: &str,
) -> Option<&'static serde_json::Value> {
    rung(unsloth)?.signature(call).defaults.get(key)
}

/// The `unsloth_zoo` release Unsloth `unsloth` requires (its METADATA's lowest).
pub fn zoo_of(unsloth: Release) -> Option<Release> {
    Release::parse(&rung(unsloth)?.unsloth_zoo)
}

/// The `LLM(...)` keywords (vLLM's `EngineArgs` fields) the `from_pretrained` keyword `key`
/// shapes with `fast_inference=True` in Unsloth `unsloth`: `max_seq_length` becomes
/// `max_model_len` (and sizes `max_num_seqs`), `float8_kv_cache` `kv_cache_dtype`. A
/// `**kwargs` keyword `load_vllm` names (`max_num_seqs` from unsloth_zoo 2025.11) shapes the
/// ones its own name feeds.
pub fn reaches_vllm(unsloth: Release, key: &str) -> Vec<&'static str> {
    let Some(r) = rung(unsloth) else {
        return Vec::new();
    };
    let fills = &r.load_vllm.from_pretrained_fills;
    let mut load_args: Vec<&str> = fills
        .iter()
        .filter(|(_, expr)| mentions(expr, key))
        .map(|(arg, _)| arg.as_str())
        .collect();
    if !r.from_pretrained.names(key) && r.load_vllm.signature.names(key) && !fills.contains_key(key)
    {
        load_args.push(key);
    }
    r.llm_engine_args
        .iter()
        .filter(|(_, arg)| arg.from.iter().any(|p| load_args.contains(&p.as_str())))
        .map(|(engine, _)| engine.as_str())
        .collect()
}

/// Whether the Python expression `expr` uses the name `name` (as a whole word).
fn mentions(expr: &str, name: &str) -> bool {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|word| word == name)
}

/// The rungs' releases, oldest first.
pub fn releases() -> Vec<Release> {
    rungs().iter().map(|(v, _)| *v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Call;

    #[test]
    fn the_targeted_rung_agrees_with_the_contract() {
        let target = Release::new(2026, 10, 9);
        assert_eq!(rung_of(target), Some(target));
        for (call, ours) in [
            (Call::UnslothFromPretrained, UnslothCall::FromPretrained),
            (Call::UnslothGetPeftModel, UnslothCall::GetPeftModel),
            (Call::UnslothLoadVllm, UnslothCall::LoadVllm),
        ] {
            for key in call.keys() {
                assert!(accepts(ours, target, key), "{key}");
                assert_eq!(
                    default(ours, target, key).filter(|v| !v.is_null()),
                    call.default(key).filter(|v| !v.is_null()),
                    "{key}"
                );
            }
        }
    }

    #[test]
    fn older_releases_lack_the_newer_keywords() {
        let first = Release::new(2025, 2, 4);
        // loader.py 2025.2.4 names no load_in_8bit / full_finetuning (2025.3.19 does) and no
        // load_in_fp8 (2025.11.6 does)
        assert!(!accepts(UnslothCall::FromPretrained, first, "load_in_8bit"));
        assert!(accepts(
            UnslothCall::FromPretrained,
            Release::new(2025, 3, 19),
            "load_in_8bit"
        ));
        assert!(!accepts(
            UnslothCall::FromPretrained,
            Release::new(2025, 8, 9),
            "load_in_fp8"
        ));
        assert!(accepts(
            UnslothCall::FromPretrained,
            Release::new(2025, 11, 6),
            "load_in_fp8"
        ));
        for key in [
            "fast_inference",
            "gpu_memory_utilization",
            "max_lora_rank",
            "max_seq_length",
        ] {
            assert!(accepts(UnslothCall::FromPretrained, first, key), "{key}");
        }
        assert_eq!(zoo_of(first), Some(Release::new(2025, 2, 1)));
        assert_eq!(rung_of(Release::new(2024, 12, 1)), None);
    }

    #[test]
    fn the_keywords_that_reach_vllm() {
        for v in releases() {
            for (key, engine) in [
                ("max_seq_length", "max_model_len"),
                ("gpu_memory_utilization", "gpu_memory_utilization"),
                ("gpu_memory_utilization", "max_num_seqs"),
                ("float8_kv_cache", "kv_cache_dtype"),
                ("max_lora_rank", "max_lora_rank"),
            ] {
                assert!(reaches_vllm(v, key).contains(&engine), "{v} {key}");
            }
            assert!(reaches_vllm(v, "load_in_8bit").is_empty(), "{v}");
        }
        // `max_num_seqs` through `**kwargs`: load_vllm names it from unsloth_zoo 2025.11
        assert!(reaches_vllm(Release::new(2025, 2, 4), "max_num_seqs").is_empty());
        assert!(reaches_vllm(Release::new(2026, 10, 9), "max_num_seqs").contains(&"max_num_seqs"));
    }
}
