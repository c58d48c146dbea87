//! One GRPO run as vramfit sees it: the stack, the six knobs and the settings around them.

use super::arch::Arch;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    /// transformers + PEFT + TRL `GRPOTrainer`, vLLM colocated with its own weights.
    Trl,
    /// Unsloth + TRL: one copy of the weights shared with vLLM.
    Unsloth,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quant {
    Bf16,
    /// bitsandbytes LLM.int8
    Int8,
    /// bitsandbytes NF4 with double-quantised constants
    Nf4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Checkpointing {
    Off,
    On,
    /// Unsloth's `use_gradient_checkpointing = "unsloth"`: layer inputs offloaded to CPU RAM.
    UnslothOffload,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    /// torch AdamW: two fp32 states per trainable parameter.
    AdamW,
    /// bitsandbytes 8-bit AdamW: two 8-bit states plus block-wise constants.
    AdamW8bit,
    /// paged variants: states live in unified memory and page out under pressure.
    PagedAdamW,
    PagedAdamW8bit,
    /// plain SGD without momentum: no state.
    Sgd,
}

impl Optimizer {
    pub const ALL: [(&'static str, Optimizer); 8] = [
        ("adamw_torch", Optimizer::AdamW),
        ("adamw_torch_fused", Optimizer::AdamW),
        ("adamw_hf", Optimizer::AdamW),
        ("adamw_8bit", Optimizer::AdamW8bit),
        ("adamw_bnb_8bit", Optimizer::AdamW8bit),
        ("paged_adamw_32bit", Optimizer::PagedAdamW),
        ("paged_adamw_8bit", Optimizer::PagedAdamW8bit),
        ("sgd", Optimizer::Sgd),
    ];

    pub fn from_trainer_name(name: &str) -> Option<Optimizer> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, o)| *o)
    }
}

/// Where generation runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    /// vLLM on this GPU, holding `share` of its memory.
    ColocatedVllm { share: f64 },
    /// `use_vllm = false` or `vllm_mode = "server"`: nothing of vLLM on this GPU.
    Elsewhere,
}

/// Everything the estimate depends on. Knob values are the trainer's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunConfig {
    pub stack: Stack,
    pub arch: Arch,
    pub model_name: String,
    pub quant: Quant,
    pub gpus: u64,
    /// completions per micro-batch (`per_device_train_batch_size`)
    pub micro_batch: u64,
    pub grad_accum: u64,
    pub num_generations: u64,
    pub prompt_len: u64,
    pub completion_len: u64,
    /// `max_seq_length`, the vLLM context (`max_model_len`)
    pub max_seq_len: u64,
    pub lora_rank: u64,
    pub lora_alpha: u64,
    /// Unsloth's `max_lora_rank` (the largest adapter vLLM is set up for)
    pub max_lora_rank: Option<u64>,
    /// names of the targeted projections (`q_proj`...)
    pub lora_targets: Vec<String>,
    pub checkpointing: Checkpointing,
    pub optimizer: Optimizer,
    pub beta: f64,
    pub generation: Generation,
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`
    pub expandable_segments: bool,
    /// `UNSLOTH_VLLM_STANDBY=1`
    pub unsloth_standby: bool,
    /// TRL's `use_liger_loss`: the lm_head and the GRPO loss fused and chunked, so the
    /// micro-batch's logits are never materialised
    pub fused_logits: bool,
}

impl RunConfig {
    /// Completions per optimizer step across all GPUs.
    pub fn effective_batch(&self) -> u64 {
        self.micro_batch
            .saturating_mul(self.grad_accum)
            .saturating_mul(self.gpus)
    }

    pub fn sequence_len(&self) -> u64 {
        self.prompt_len + self.completion_len
    }

    /// The micro-batch that really runs. Unsloth's GRPO patch replaces `per_device_train_batch_size`
    /// by `num_generations` when `batch x accumulation x GPUs` is not a multiple of it.
    pub fn running_micro_batch(&self) -> u64 {
        let generations = self.num_generations.max(1);
        if self.stack == Stack::Unsloth && self.effective_batch() % generations != 0 {
            generations
        } else {
            self.micro_batch
        }
    }

    /// A default run of `arch` for tests and starting points.
    pub fn example(arch: Arch) -> RunConfig {
        RunConfig {
            stack: Stack::Trl,
            model_name: arch.name.clone(),
            arch,
            quant: Quant::Bf16,
            gpus: 1,
            micro_batch: 4,
            grad_accum: 4,
            num_generations: 4,
            prompt_len: 256,
            completion_len: 768,
            max_seq_len: 1024,
            lora_rank: 16,
            lora_alpha: 16,
            max_lora_rank: None,
            lora_targets: ALL_LINEAR.iter().map(|s| s.to_string()).collect(),
            checkpointing: Checkpointing::On,
            optimizer: Optimizer::AdamW,
            beta: 0.0,
            generation: Generation::Elsewhere,
            expandable_segments: false,
            unsloth_standby: false,
            fused_logits: false,
        }
    }
}

/// The seven projections Unsloth's and TRL's GRPO examples target.
pub const ALL_LINEAR: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// The ranks vLLM's LoRA kernels support; Unsloth rounds `max_lora_rank` up to one of them.
pub const VLLM_LORA_RANKS: [u64; 8] = [8, 16, 32, 64, 128, 256, 320, 512];

/// The smallest vLLM-supported rank at or above `r` (or `r` itself past 512).
pub fn vllm_max_lora_rank(r: u64) -> u64 {
    VLLM_LORA_RANKS
        .iter()
        .copied()
        .find(|&x| x >= r)
        .unwrap_or(r)
}
