//! "Does the call take keyword K in the pinned versions?": the one question the export and
//! the levers ask of the release ladders (TRL's `GRPOConfig`: `ladder`, with the
//! `TrainingArguments` it inherits: `transformers_ladder`, and on the unsloth stack the fields
//! Unsloth's config adds; Unsloth's calls: `unsloth_ladder`; vLLM's `EngineArgs`: `vllm_ladder`).

use crate::contract::release::Release;
use crate::contract::unsloth_ladder::{self, UnslothCall};
use crate::contract::{Call, Stack, ladder, transformers_ladder, trl_serve_ladder, vllm_ladder};

/// The releases a run's calls are made against (the run's resolved trl / unsloth /
/// transformers / vllm), and the stack (Unsloth's `GRPOConfig` adds fields to TRL's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallVersions {
    pub trl: Release,
    pub unsloth: Release,
    pub transformers: Release,
    pub vllm: Release,
    pub stack: Stack,
}

/// Whether `call`, in the releases `versions` pins, takes the keyword `key`. `GRPOConfig`,
/// Unsloth's calls and `trl vllm-serve`'s flags are read from each release's wheel (the
/// ladders); `ModelConfig` and `LoraConfig` only from the targeted wheels (trainers.json).
/// `GRPOConfig` takes its own TRL release's fields, the pinned transformers'
/// `TrainingArguments` fields, and on the unsloth stack the fields the pinned Unsloth's
/// `UnslothGRPOConfig` adds (`unsloth_num_chunks`).
pub fn accepts(call: Call, key: &str, versions: &CallVersions) -> bool {
    let unsloth = |c| unsloth_ladder::accepts(c, versions.unsloth, key);
    match call {
        Call::GrpoConfig => {
            ladder::grpo_accepts(versions.trl, key)
                || transformers_ladder::training_accepts(versions.transformers, key)
                || (versions.stack == Stack::Unsloth
                    && unsloth_ladder::config_adds(versions.unsloth, key))
        }
        Call::UnslothFromPretrained => unsloth(UnslothCall::FromPretrained),
        Call::UnslothGetPeftModel => unsloth(UnslothCall::GetPeftModel),
        Call::UnslothLoadVllm => unsloth(UnslothCall::LoadVllm),
        Call::VllmServe => trl_serve_ladder::serve_accepts(versions.trl, key),
        Call::TrlModelConfig | Call::LoraConfig => call.accepts(key),
    }
}

/// The modelled releases whose `call` takes `key` on `stack`, each with its package (each
/// ladder's rungs, oldest first): TRL's for `GRPOConfig` and `trl vllm-serve`, then
/// transformers' whose `TrainingArguments` `GRPOConfig` inherits, then (unsloth stack)
/// Unsloth's whose config adds it; Unsloth's for its calls; `ModelConfig` and `LoraConfig` are
/// modelled at the targeted release only, so none.
pub fn releases_taking(call: Call, key: &str, stack: Stack) -> Vec<(&'static str, Release)> {
    let at = |package: &'static str,
              rungs: Vec<Release>,
              takes: &dyn Fn(Release) -> bool|
     -> Vec<(&'static str, Release)> {
        rungs
            .into_iter()
            .filter(|r| takes(*r))
            .map(|r| (package, r))
            .collect()
    };
    let unsloth = |c| {
        at("unsloth", unsloth_ladder::releases(), &|r| {
            unsloth_ladder::accepts(c, r, key)
        })
    };
    match call {
        Call::GrpoConfig => {
            let mut all = at("trl", ladder::releases(), &|r| ladder::grpo_accepts(r, key));
            all.extend(
                transformers_ladder::releases_taking(key)
                    .into_iter()
                    .map(|r| ("transformers", r)),
            );
            if stack == Stack::Unsloth {
                all.extend(at("unsloth", unsloth_ladder::releases(), &|r| {
                    unsloth_ladder::config_adds(r, key)
                }));
            }
            all
        }
        Call::UnslothFromPretrained => unsloth(UnslothCall::FromPretrained),
        Call::UnslothGetPeftModel => unsloth(UnslothCall::GetPeftModel),
        Call::UnslothLoadVllm => unsloth(UnslothCall::LoadVllm),
        Call::VllmServe => at("trl", trl_serve_ladder::releases(), &|r| {
            trl_serve_ladder::serve_accepts(r, key)
        }),
        Call::TrlModelConfig | Call::LoraConfig => Vec::new(),
    }
}

/// Whether vLLM's `EngineArgs` (what `LLM(...)` and `trl vllm-serve` build vLLM from) has the
/// field `key` in the pinned vLLM.
pub fn engine_accepts(key: &str, versions: &CallVersions) -> bool {
    vllm_ladder::engine_accepts(versions.vllm, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_asks_its_own_ladder() {
        let old = CallVersions {
            trl: Release::new(0, 15, 2),
            unsloth: Release::new(2025, 2, 4),
            transformers: Release::new(4, 46, 3),
            vllm: Release::new(0, 7, 2),
            stack: Stack::Unsloth,
        };
        let new = CallVersions {
            trl: Release::new(1, 15, 0),
            unsloth: Release::new(2026, 10, 9),
            transformers: Release::new(5, 17, 0),
            vllm: Release::new(0, 31, 0),
            stack: Stack::Unsloth,
        };
        for (call, key) in [
            (Call::GrpoConfig, "vllm_mode"),
            (Call::UnslothFromPretrained, "load_in_fp8"),
            (Call::UnslothGetPeftModel, "qat_scheme"),
            (Call::UnslothLoadVllm, "max_num_seqs"),
            (Call::VllmServe, "gpu_memory_utilization"),
        ] {
            assert!(!accepts(call, key, &old), "{} {key}", call.name());
            assert!(accepts(call, key, &new), "{} {key}", call.name());
        }
        assert!(accepts(Call::LoraConfig, "r", &old));
        // trl 0.14 to 0.17 place the colocated vLLM with `vllm_device`; 1.15 has none
        let takers = releases_taking(Call::GrpoConfig, "vllm_device", Stack::Trl);
        assert_eq!(takers.first(), Some(&("trl", Release::new(0, 14, 0))));
        assert_eq!(takers.last(), Some(&("trl", Release::new(0, 17, 0))));
        assert!(releases_taking(Call::GrpoConfig, "vllm_devise", Stack::Trl).is_empty());
        // GRPOConfig inherits TrainingArguments: transformers 4.x's `warmup_ratio`; on the
        // unsloth stack Unsloth's own config adds `unsloth_num_chunks` (unsloth 2025.8.9 rl.py)
        assert!(accepts(Call::GrpoConfig, "warmup_ratio", &old));
        assert!(!accepts(Call::GrpoConfig, "warmup_ratio", &new));
        assert!(accepts(Call::GrpoConfig, "unsloth_num_chunks", &new));
        let trl_stack = CallVersions {
            stack: Stack::Trl,
            ..new
        };
        assert!(!accepts(Call::GrpoConfig, "unsloth_num_chunks", &trl_stack));
        assert!(releases_taking(Call::GrpoConfig, "unsloth_num_chunks", Stack::Trl).is_empty());
        assert!(!engine_accepts("data_parallel_size", &old));
        assert!(engine_accepts("data_parallel_size", &new));
    }
}
