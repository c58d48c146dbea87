//! The levers the fit pulls, in their order, each with its trainer key and what a step down
//! costs in training terms.

use crate::contract::Table;
use crate::run::knobs::Knob;
use crate::run::{Generation, RunConfig, Stack};
use serde::Serialize;

/// One lever the solver may pull, in the order of their strength for a GRPO run (the vLLM share first, the LoRA rank last; docs/commands.md, "fit"): a dimension the fit moves along
/// (a numeric [`Knob`], or checkpointing, fp8 KV cache, 4-bit weights). One rung down a lever is
/// a [`StepDown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lever {
    VllmShare,
    MicroBatch,
    Checkpointing,
    /// vLLM's KV cache in fp8 (Unsloth's `float8_kv_cache`): twice the tokens in the same share
    KvCacheFp8,
    /// the base weights in 4-bit (QLoRA): about a quarter of their 16-bit bytes
    FourBitWeights,
    SequenceLength,
    Generations,
    LoraRank,
    /// how the training processes share the model (`[distributed]`): tried before any knob
    /// moves, since sharding changes no training number, only speed
    Sharding,
    /// more training GPUs of the same kind, sharded with ZeRO-3: tried when no knob fits
    Gpus,
    /// vLLM on GPUs of its own (`trl vllm-serve`), tensor-parallel over as many as it needs
    VllmServerGpus,
}

impl Lever {
    pub const ORDER: [Lever; 8] = [
        Lever::VllmShare,
        Lever::MicroBatch,
        Lever::Checkpointing,
        Lever::KvCacheFp8,
        Lever::FourBitWeights,
        Lever::SequenceLength,
        Lever::Generations,
        Lever::LoraRank,
    ];

    /// The lever's name on screen.
    pub fn label(self) -> &'static str {
        match self {
            Lever::VllmShare => "vLLM share",
            Lever::MicroBatch => "micro-batch",
            Lever::Checkpointing => "checkpointing",
            Lever::KvCacheFp8 => "fp8 KV cache",
            Lever::FourBitWeights => "4-bit weights",
            Lever::SequenceLength => "sequence",
            Lever::Generations => "generations",
            Lever::LoraRank => "LoRA rank",
            Lever::Sharding => "sharding",
            Lever::Gpus => "GPUs",
            Lever::VllmServerGpus => "vLLM server GPUs",
        }
    }

    /// The key the lever changes in `run` (the server's `max_model_len` for the sequence in
    /// server mode, `Knob::key_for`).
    pub fn key_in(self, run: &RunConfig) -> &'static str {
        self.setting(run).1
    }

    pub fn trainer_key(self, stack: Stack) -> &'static str {
        self.setting_on(stack).1
    }

    /// The run-file table and key the lever changes in `run`: its knob's (`Knob::key_for`), or
    /// its own on `run.stack`; moving a colocated vLLM to GPUs of its own is `[grpo] vllm_mode`.
    pub fn setting(self, run: &RunConfig) -> (Table, &'static str) {
        match (self, self.knob()) {
            (_, Some(k)) => k.key_for(run),
            (Lever::VllmServerGpus, None)
                if matches!(run.generation, Generation::ColocatedVllm { .. }) =>
            {
                (Table::Grpo, "vllm_mode")
            }
            (_, None) => self.setting_on(run.stack),
        }
    }

    /// The table and key of the lever on `stack`, declared once.
    pub(crate) fn setting_on(self, stack: Stack) -> (Table, &'static str) {
        match (self, stack) {
            (Lever::Checkpointing, Stack::Unsloth) => (Table::Lora, "use_gradient_checkpointing"),
            (Lever::Checkpointing, Stack::Trl) => (Table::Grpo, "gradient_checkpointing"),
            (Lever::KvCacheFp8, _) => (Table::Model, "float8_kv_cache"),
            (Lever::FourBitWeights, _) => (Table::Model, "load_in_4bit"),
            (Lever::Sharding, _) => (Table::Distributed, "zero_stage"),
            (Lever::Gpus, _) => (Table::Grpofit, "gpus"),
            (Lever::VllmServerGpus, _) => (Table::VllmServer, "tensor_parallel_size"),
            (other, _) => other.knob().map_or((Table::Grpofit, ""), |k| k.key(stack)),
        }
    }

    /// Whether the key the lever changes exists in the trainer versions `run` is pinned to: a
    /// lever whose key that release's call does not take is never offered, since that trainer
    /// would refuse the file (`TypeError: __init__() got an unexpected keyword argument`). The
    /// pinned releases have the key when the call its table feeds takes it
    /// (`RunConfig::pinned_release_takes`, read from the wheels' ladders: GRPOConfig per TRL
    /// release, Unsloth's `from_pretrained` / `get_peft_model`, `trl vllm-serve`'s flags and
    /// vLLM's `EngineArgs`). E.g. `vllm_max_model_length` exists from trl 0.26 (0.18 to 0.25 size
    /// the colocated vLLM's context as `max_prompt_length + max_completion_length`, trl 0.19.1
    /// `GRPOTrainer.__init__`), `vllm_mode` from 0.18.
    pub fn exists_in(self, run: &RunConfig) -> bool {
        run.pinned_release_takes(self.setting(run))
    }

    pub(super) fn knob(self) -> Option<Knob> {
        Some(match self {
            Lever::VllmShare => Knob::VllmShare,
            Lever::MicroBatch => Knob::MicroBatch,
            Lever::SequenceLength => Knob::SequenceLength,
            Lever::Generations => Knob::Generations,
            Lever::LoraRank => Knob::LoraRank,
            Lever::Checkpointing
            | Lever::KvCacheFp8
            | Lever::FourBitWeights
            | Lever::Sharding
            | Lever::Gpus
            | Lever::VllmServerGpus => return None,
        })
    }

    pub fn trade_off(self) -> &'static str {
        match self {
            Lever::Checkpointing => {
                "layers are recomputed in the backward pass: about 30 % slower steps"
            }
            Lever::KvCacheFp8 => {
                "fp8 keys and values: twice the sequences in the same share, slightly noisier sampling"
            }
            Lever::FourBitWeights => {
                "QLoRA: the frozen weights in 4-bit NF4, somewhat slower and a little less accurate"
            }
            Lever::SequenceLength => {
                "shorter context, the completion within it: long reasoning gets truncated"
            }
            Lever::Sharding => {
                "the model's states split across the training GPUs: more communication, same training"
            }
            Lever::Gpus => "more GPUs of this kind, the model sharded over them (ZeRO-3)",
            Lever::VllmServerGpus => {
                "vLLM generates on GPUs of its own (trl vllm-serve), its weights split over them"
            }
            other => other.knob().map_or("", Knob::trade_off),
        }
    }

    /// Whether the lever is a setting of `run` at all: the vLLM share and its fp8 KV cache only
    /// with vLLM colocated (the fp8 cache only on Unsloth, whose vLLM call takes
    /// kv_cache_dtype; TRL's colocate call has no such key), the adapter rank and 4-bit frozen
    /// weights only when adapters are trained; and only when its key exists in the run's
    /// pinned versions (`exists_in`).
    pub fn applies(self, run: &RunConfig) -> bool {
        let colocated = matches!(run.generation, Generation::ColocatedVllm { .. });
        let here = match self {
            Lever::VllmShare => colocated,
            Lever::KvCacheFp8 => colocated && run.stack == Stack::Unsloth,
            Lever::FourBitWeights | Lever::LoraRank => !run.full_finetuning,
            _ => true,
        };
        here && self.exists_in(run)
    }

    /// Cost of moving one rung down this lever's candidate list. The training-quality levers
    /// cost an order of magnitude more than the ones that only cost speed or generation room.
    pub(super) fn rung_cost(self) -> f64 {
        match self {
            Lever::VllmShare => 1.0,
            Lever::MicroBatch => 5.0,
            Lever::Checkpointing => 3.0,
            // fp8 KV barely moves sampling quality; 4-bit weights (QLoRA) cost some accuracy and
            // speed, still less than cutting what the model learns from
            Lever::KvCacheFp8 => 2.0,
            Lever::FourBitWeights => 10.0,
            Lever::SequenceLength => 20.0,
            Lever::Generations => 40.0,
            Lever::LoraRank => 30.0,
            Lever::Sharding => 1.0,
            Lever::Gpus => 50.0,
            Lever::VllmServerGpus => 50.0,
        }
    }
}

impl std::fmt::Display for Lever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// What offloading the optimizer to CPU costs: not GPU communication but host memory (the
/// estimate's `host_memory_bytes`, DeepSpeed's `estimate_zero3_model_states_mem_needs`) and the
/// PCIe link, which carries the gradients out and the updated weights back every step
/// (DeepSpeed ZeRO-Offload, `offload_optimizer.device = "cpu"`).
pub(super) const OFFLOAD_TRADE_OFF: &str = "the optimizer's states in host memory, updated on the CPU: RAM on each node, and gradients and weights over PCIe every step (slower steps)";

/// What Unsloth's offloaded checkpointing costs: the checkpointed activations in host memory,
/// copied over PCIe and back each step (unsloth_zoo 2026.10.9 `gradient_checkpointing.py`,
/// `Unsloth_Offloaded_Gradient_Checkpointer`: `hidden_states.to("cpu", non_blocking = True)`).
pub(super) const CHECKPOINT_OFFLOAD_TRADE_OFF: &str = "checkpoints kept in host memory and copied over PCIe each step: host RAM, and slower steps than on-GPU checkpointing";
