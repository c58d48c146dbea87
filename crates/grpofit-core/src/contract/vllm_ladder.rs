//! vLLM's `EngineArgs` of each release line grpofit models (`vllm_ladder.json`, written by
//! `tools/contract/stack_ladders.py` from vllm/engine/arg_utils.py of each release's wheel,
//! `class EngineArgs`, its defaults that name a config class read from vllm/config.py or
//! vllm/config/*.py). `LLM(...)` builds an `EngineArgs` from its keywords, so these are the
//! keywords every path into vLLM may pass: Unsloth's `load_vllm`, TRL's colocated `LLM(...)`
//! and `trl vllm-serve`.

use crate::contract::release::Release;
use crate::contract::rungs::{self, Signature};
use std::sync::OnceLock;

const LADDER_JSON: &str = include_str!("vllm_ladder.json");

fn rungs() -> &'static [(Release, Signature)] {
    static RUNGS: OnceLock<Vec<(Release, Signature)>> = OnceLock::new();
    RUNGS.get_or_init(|| rungs::load(LADDER_JSON))
}

/// The rung the vLLM release `vllm` reads (`rungs::find`).
pub fn rung_of(vllm: Release) -> Option<Release> {
    rungs::find(rungs(), vllm).map(|(v, _)| *v)
}

/// Whether vLLM `vllm`'s `EngineArgs` has the field `key`.
pub fn engine_accepts(vllm: Release, key: &str) -> bool {
    rungs::find(rungs(), vllm).is_some_and(|(_, s)| s.names(key))
}

/// `EngineArgs`' default for `key` in vLLM `vllm` (the memory-relevant fields the generator
/// keeps: `gpu_memory_utilization`, `max_num_seqs`, `swap_space` ...; None: no constant).
pub fn engine_default(vllm: Release, key: &str) -> Option<&'static serde_json::Value> {
    rungs::find(rungs(), vllm)?.1.defaults.get(key)
}

/// The rungs' releases, oldest first.
pub fn releases() -> Vec<Release> {
    rungs().iter().map(|(v, _)| *v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_release_has_its_own_engine_args() {
        assert!(releases().len() >= 5, "{:?}", releases());
        let old = Release::new(0, 7, 2);
        let new = Release::new(0, 31, 0);
        assert_eq!(rung_of(Release::new(0, 7, 0)), Some(old));
        // vllm/engine/arg_utils.py 0.7.2: `gpu_memory_utilization: float = 0.90`; 0.31.0:
        // `= CacheConfig.gpu_memory_utilization`, vllm/config/cache.py `Field(default=0.92)`
        assert_eq!(
            engine_default(old, "gpu_memory_utilization").and_then(|v| v.as_f64()),
            Some(0.9)
        );
        assert_eq!(
            engine_default(new, "gpu_memory_utilization").and_then(|v| v.as_f64()),
            Some(0.92)
        );
        // `swap_space` left EngineArgs after 0.17; `data_parallel_size` came after 0.7
        assert!(engine_accepts(old, "swap_space") && !engine_accepts(new, "swap_space"));
        assert!(!engine_accepts(old, "data_parallel_size"));
        assert!(engine_accepts(new, "data_parallel_size"));
        for key in [
            "max_model_len",
            "max_num_seqs",
            "enforce_eager",
            "kv_cache_dtype",
        ] {
            assert!(
                engine_accepts(old, key) && engine_accepts(new, key),
                "{key}"
            );
        }
        assert!(!engine_accepts(Release::new(0, 6, 0), "max_model_len"));
    }
}
