//! The trainer contract: the keyword arguments each trainer call accepts and what a missing one
//! defaults to, read from the pinned wheels by `tools/contract/extract.py` into
//! `trainers.json` (trl 1.15.0, transformers 5.17.0, peft 0.21.2, unsloth 2026.10.9, and
//! accelerate 1.12.0 / deepspeed 0.18.2 for the launch files). The loader's key lists, its
//! defaults for missing keys and the export's keys all come from here.

pub mod accepts;
pub mod field_types;
pub mod ladder;
pub mod release;
pub mod requires;
mod rungs;
pub mod transformers_ladder;
pub mod trl_serve_ladder;
pub mod unsloth_ladder;
pub mod vllm_ladder;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Which trainer stack a run uses; each stack feeds its own calls (`Table::call`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    /// transformers + PEFT + TRL `GRPOTrainer`, vLLM colocated with its own weights.
    Trl,
    /// Unsloth + TRL: one copy of the weights shared with vLLM.
    Unsloth,
}

impl Stack {
    /// The stack's name in run files and on screen.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Trl => "trl",
            Stack::Unsloth => "unsloth",
        }
    }
}

impl std::fmt::Display for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The generated file, compiled in.
const TRAINERS_JSON: &str = include_str!("trainers.json");

/// One trainer call a run-file table feeds (docs/run-file.md, "Which call each table feeds").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    /// `trl.GRPOConfig(**cfg["grpo"])`, both stacks
    GrpoConfig,
    /// `trl.ModelConfig(**cfg["model"])`, the trl stack (TRL's own scripts load models from it)
    TrlModelConfig,
    /// `peft.LoraConfig(**cfg["lora"])`, the trl stack
    LoraConfig,
    /// `FastLanguageModel.from_pretrained(**cfg["model"])`, the unsloth stack
    UnslothFromPretrained,
    /// `FastLanguageModel.get_peft_model(model, **cfg["lora"])`, the unsloth stack
    UnslothGetPeftModel,
    /// `unsloth_zoo.vllm_utils.load_vllm`: `from_pretrained` passes it the keywords of its
    /// `**kwargs` that it names (`max_num_seqs`, `max_num_batched_tokens`, `enforce_eager`...)
    UnslothLoadVllm,
    /// `trl vllm-serve`'s flags (`ScriptArguments` of trl/scripts/vllm_serve.py), both stacks:
    /// `[vllm_server]` when `[grpo] vllm_mode = "server"`
    VllmServe,
}

/// The tables of a run file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    Grpofit,
    Model,
    Lora,
    Grpo,
    Env,
    /// how training is spread over GPUs: becomes accelerate's config (and DeepSpeed's JSON)
    Distributed,
    /// the `trl vllm-serve` GPUs, when generation runs there
    VllmServer,
}

impl Table {
    pub const ALL: [Table; 7] = [
        Table::Grpofit,
        Table::Model,
        Table::Lora,
        Table::Grpo,
        Table::Env,
        Table::Distributed,
        Table::VllmServer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Grpofit => "grpofit",
            Table::Model => "model",
            Table::Lora => "lora",
            Table::Grpo => "grpo",
            Table::Env => "env",
            Table::Distributed => "distributed",
            Table::VllmServer => "vllm_server",
        }
    }

    /// The trainer call this table holds the keyword arguments of, on `stack`.
    pub fn call(self, stack: Stack) -> Option<Call> {
        match (self, stack) {
            (Table::Grpo, _) => Some(Call::GrpoConfig),
            (Table::Model, Stack::Trl) => Some(Call::TrlModelConfig),
            (Table::Model, Stack::Unsloth) => Some(Call::UnslothFromPretrained),
            (Table::Lora, Stack::Trl) => Some(Call::LoraConfig),
            (Table::Lora, Stack::Unsloth) => Some(Call::UnslothGetPeftModel),
            (Table::VllmServer, _) => Some(Call::VllmServe),
            (Table::Grpofit | Table::Env | Table::Distributed, _) => None,
        }
    }
}

impl Call {
    pub const ALL: [Call; 7] = [
        Call::GrpoConfig,
        Call::TrlModelConfig,
        Call::LoraConfig,
        Call::UnslothFromPretrained,
        Call::UnslothGetPeftModel,
        Call::UnslothLoadVllm,
        Call::VllmServe,
    ];

    /// The call's name in the contract file and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Call::GrpoConfig => "trl.GRPOConfig",
            Call::TrlModelConfig => "trl.ModelConfig",
            Call::LoraConfig => "peft.LoraConfig",
            Call::UnslothFromPretrained => "unsloth.FastLanguageModel.from_pretrained",
            Call::UnslothGetPeftModel => "unsloth.FastLanguageModel.get_peft_model",
            Call::UnslothLoadVllm => "unsloth_zoo.vllm_utils.load_vllm",
            Call::VllmServe => "trl.vllm_serve.ScriptArguments",
        }
    }

    fn spec(self) -> &'static CallSpec {
        // the file is generated and compiled in; its presence and shape are checked by the tests
        contract().calls.get(self.name()).unwrap_or(&EMPTY)
    }

    /// Whether the call takes `key` as a keyword argument.
    pub fn accepts(self, key: &str) -> bool {
        self.spec().params.contains_key(key)
    }

    /// Every keyword the call takes, sorted.
    pub fn keys(self) -> impl Iterator<Item = &'static str> {
        self.spec().params.keys().map(String::as_str)
    }

    /// The value the call uses when `key` is left out, when the source spells out a constant.
    pub fn default(self, key: &str) -> Option<&'static serde_json::Value> {
        self.spec().params.get(key)?.default.as_ref()
    }

    pub fn default_u64(self, key: &str) -> Option<u64> {
        self.default(key)?.as_u64()
    }

    pub fn default_f64(self, key: &str) -> Option<f64> {
        self.default(key)?.as_f64()
    }

    pub fn default_bool(self, key: &str) -> Option<bool> {
        self.default(key)?.as_bool()
    }

    pub fn default_str(self, key: &str) -> Option<&'static str> {
        self.default(key)?.as_str()
    }

    /// The package and version the call was read from (`trl 1.15.0`).
    pub fn version(self) -> String {
        let s = self.spec();
        format!("{} {}", s.package, s.version)
    }
}

#[derive(Debug, Default, Deserialize)]
struct CallSpec {
    package: String,
    version: String,
    params: BTreeMap<String, Param>,
}

#[derive(Debug, Deserialize)]
struct Param {
    default: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Contract {
    pins: BTreeMap<String, String>,
    calls: BTreeMap<String, CallSpec>,
}

static EMPTY: CallSpec = CallSpec {
    package: String::new(),
    version: String::new(),
    params: BTreeMap::new(),
};

fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        serde_json::from_str(TRAINERS_JSON).unwrap_or(Contract {
            pins: BTreeMap::new(),
            calls: BTreeMap::new(),
        })
    })
}

/// The keys a launch file may hold, read from accelerate's and DeepSpeed's own sources:
/// `accelerate.ClusterConfig` (accelerate.yaml), `accelerate.deepspeed_config`,
/// `accelerate.fsdp_config`, `deepspeed.config` (ds_config.json's top level),
/// `deepspeed.DeepSpeedZeroConfig` (its `zero_optimization`),
/// `deepspeed.DeepSpeedZeroOffloadConfig` (`offload_optimizer` / `offload_param`).
pub fn launch_keys(config: &str) -> Vec<&'static str> {
    contract()
        .calls
        .get(config)
        .map(|c| c.params.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The pinned versions, `trl 1.15.0, transformers 5.17.0, ...`.
pub fn pins() -> String {
    contract()
        .pins
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A key an older file may carry that the targeted trainer removed or grpofit moved: it loads
/// with a note and is not exported.
#[derive(Debug, Clone, Copy)]
pub struct Retired {
    pub table: Table,
    pub key: &'static str,
    /// the stack it applies to, `None` for both
    pub stack: Option<Stack>,
    /// where the value goes now, and why
    pub now: &'static str,
    /// where the value is still read from, when it is
    pub moved_to: Option<(Table, &'static str)>,
}

/// Keys grpofit's earlier exports or older trainers used. Each names the change that retired it.
pub const RETIRED: &[Retired] = &[
    Retired {
        table: Table::Grpo,
        key: "max_prompt_length",
        stack: None,
        now: "TRL 1.x removed it from GRPOConfig; the dataset's longest prompt is now `[grpofit] max_prompt_length`",
        moved_to: Some((Table::Grpofit, "max_prompt_length")),
    },
    Retired {
        table: Table::Grpo,
        key: "use_liger_loss",
        stack: None,
        now: "TRL 1.x renamed it `use_liger_kernel`",
        moved_to: Some((Table::Grpo, "use_liger_kernel")),
    },
    Retired {
        table: Table::Model,
        key: "model_name",
        stack: Some(Stack::Trl),
        now: "TRL's ModelConfig calls it `model_name_or_path`",
        moved_to: Some((Table::Model, "model_name_or_path")),
    },
    Retired {
        table: Table::Model,
        key: "torch_dtype",
        stack: None,
        now: "transformers 5 and TRL's ModelConfig call it `dtype`",
        moved_to: Some((Table::Model, "dtype")),
    },
    Retired {
        table: Table::Grpofit,
        key: "max_seq_length",
        stack: Some(Stack::Trl),
        now: "TRL's vLLM context is `[grpo] vllm_max_model_length`; training sequences are prompt + completion",
        moved_to: Some((Table::Grpo, "vllm_max_model_length")),
    },
    Retired {
        table: Table::Grpo,
        key: "vllm_max_model_len",
        stack: Some(Stack::Trl),
        // trl 0.15.2 GRPOTrainer.__init__: LLM(max_model_len=self.args.vllm_max_model_len);
        // deprecated unused in 0.16 and 0.17, absent from 0.18 (the TRL ladder)
        now: "TRL 0.15's colocated vLLM context; from TRL 0.26 it is `vllm_max_model_length`",
        moved_to: Some((Table::Grpo, "vllm_max_model_length")),
    },
];

/// The retired key `key` of `table`, on `stack`.
pub fn retired(table: Table, key: &str, stack: Stack) -> Option<&'static Retired> {
    RETIRED
        .iter()
        .find(|r| r.table == table && r.key == key && r.stack.is_none_or(|s| s == stack))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_in_the_file_with_its_parameters() {
        for call in Call::ALL {
            assert!(
                call.keys().count() > 10,
                "{} missing from trainers.json",
                call.name()
            );
        }
        assert!(pins().contains("trl 1.15.0"), "{}", pins());
    }

    #[test]
    fn defaults_are_the_trainers_own() {
        // read from trl/trainer/base_config.py (_BaseConfig), grpo_config.py, peft's LoraConfig
        // and unsloth's loader.py / llama.py at the pinned versions
        assert_eq!(
            Call::GrpoConfig.default_bool("gradient_checkpointing"),
            Some(true)
        );
        assert_eq!(
            Call::GrpoConfig.default_u64("per_device_train_batch_size"),
            Some(8)
        );
        assert_eq!(
            Call::GrpoConfig.default_f64("vllm_gpu_memory_utilization"),
            Some(0.3)
        );
        assert_eq!(Call::LoraConfig.default_u64("r"), Some(8));
        assert_eq!(
            Call::UnslothFromPretrained.default_u64("max_lora_rank"),
            Some(64)
        );
        assert_eq!(
            Call::UnslothFromPretrained.default_bool("load_in_4bit"),
            Some(true)
        );
        assert_eq!(Call::UnslothGetPeftModel.default_u64("r"), Some(16));
    }

    #[test]
    fn retired_keys_are_really_gone_from_their_call() {
        for r in RETIRED {
            for stack in [Stack::Trl, Stack::Unsloth] {
                if r.stack.is_some_and(|s| s != stack) {
                    continue;
                }
                if let Some(call) = r.table.call(stack) {
                    assert!(
                        !call.accepts(r.key),
                        "{} accepts {} again",
                        call.name(),
                        r.key
                    );
                }
            }
        }
        assert!(Call::GrpoConfig.accepts("use_liger_kernel"));
        assert!(Call::GrpoConfig.accepts("vllm_max_model_length"));
    }
}
