//! One GRPO run as grpofit sees it: the stack, the knobs and the settings around them.

pub mod adjust;
pub mod attention;
mod call_versions;
pub mod cycle;
pub mod generate_mode;
pub mod implied;
pub mod knobs;
pub mod reward;
pub mod rules;
pub mod spread;
pub mod versions;

use crate::arch::Arch;
pub use crate::contract::Stack;
use crate::run::spread::{Spread, VllmServer};
use crate::run::versions::{BatchRaise, StackVersions};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quant {
    /// 16-bit weights (bf16 or fp16)
    Bf16,
    /// fp32 weights: TRL's ModelConfig when `dtype` is unset
    Fp32,
    /// fp8 weights (Unsloth's `load_in_fp8`, FP8 checkpoints): one byte a weight
    Fp8,
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

impl Checkpointing {
    /// The setting in the user's words: Unsloth's `use_gradient_checkpointing` values.
    pub fn label(self) -> &'static str {
        match self {
            Checkpointing::Off => "off",
            Checkpointing::On => "on",
            Checkpointing::UnslothOffload => "unsloth",
        }
    }
}

impl std::fmt::Display for Checkpointing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
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

    /// The trainer's name for the optimizer (`optim`): the first of its names in [`Self::ALL`].
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, o)| *o == self)
            .map(|(n, _)| *n)
            .expect("Optimizer::ALL names every optimizer")
    }
}

impl std::fmt::Display for Optimizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Quant {
    /// The weight format in the user's words.
    pub fn label(self) -> &'static str {
        match self {
            Quant::Bf16 => "16-bit",
            Quant::Fp32 => "fp32",
            Quant::Fp8 => "fp8",
            Quant::Int8 => "8-bit",
            Quant::Nf4 => "4-bit NF4",
        }
    }

    /// Whether the decoder's linear layers are stored below 16 bits and dequantised on use.
    pub fn is_quantised(self) -> bool {
        matches!(self, Quant::Int8 | Quant::Nf4 | Quant::Fp8)
    }
}

impl std::fmt::Display for Quant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The batch of one optimizer step as the trainer runs it (`RunConfig::step_batch`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepBatch {
    /// completions per optimizer step across all GPUs (`running_effective_batch`: Unsloth's
    /// raised micro-batch counted, unsloth#3572)
    pub effective_batch: u64,
    /// `effective_batch / num_generations`
    pub prompts_per_step: f64,
    /// the file's own effective batch, only where the trainer runs another
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_batch_as_written: Option<u64>,
    /// the file's own prompts per step, beside it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts_per_step_as_written: Option<f64>,
    /// the micro-batch that really runs (`running_micro_batch`)
    pub running_micro_batch: u64,
}

/// Where generation runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    /// vLLM on this GPU, holding `share` of its memory.
    ColocatedVllm { share: f64 },
    /// `vllm_mode = "server"`: vLLM generates on its own GPUs; nothing of it on this one.
    VllmServer,
    /// `use_vllm = false` (TRL) or `fast_inference = false` (Unsloth): the trained model
    /// generates with transformers' `generate` on this GPU, between training steps.
    Transformers,
}

impl Generation {
    /// vLLM generates the completions, here or on its own GPUs.
    pub fn uses_vllm(self) -> bool {
        !matches!(self, Generation::Transformers)
    }
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
    /// PEFT `LoraConfig.modules_to_save` (`[lora] modules_to_save`): modules trained whole
    /// beside the adapters, each as a trainable copy (`memory::saved_modules`)
    pub modules_to_save: Vec<String>,
    /// the dropout each adapter runs on its input in training mode (PEFT `LoraConfig` /
    /// Unsloth `get_peft_model` `lora_dropout`; TRL ModelConfig's default 0.05 for a recipe),
    /// 0 where `[grpo] disable_dropout` zeroes it (`config::read_lora`); the step's masks
    /// (`memory::step::dropout`) and kernels (`time::kernels`) follow it
    pub lora_dropout: f64,
    pub checkpointing: Checkpointing,
    pub optimizer: Optimizer,
    pub beta: f64,
    pub generation: Generation,
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`
    pub expandable_segments: bool,
    /// `UNSLOTH_VLLM_STANDBY=1`
    pub unsloth_standby: bool,
    /// TRL's `use_liger_kernel`: the lm_head and the GRPO loss fused and chunked, so the
    /// micro-batch's logits are never materialised
    pub fused_logits: bool,
    /// TRL's Liger loss flag (`use_liger_loss` in trl 0.17-0.25, `use_liger_kernel` in
    /// 0.26-1.14): the loss computed from the hidden states in chunks (`LigerLoss`, by release)
    pub liger_loss: bool,
    /// vLLM's KV cache in fp8 (Unsloth's `float8_kv_cache`): half the bytes a token
    pub vllm_kv_fp8: bool,
    /// vLLM sleeps while training runs (TRL's `vllm_enable_sleep_mode`, Unsloth's standby)
    pub vllm_sleep: bool,
    /// TRL's `steps_per_generation` and `generation_batch_size`, when set
    pub steps_per_generation: Option<u64>,
    pub generation_batch_size: Option<u64>,
    /// GRPOConfig's `num_iterations` (trl >= 0.16): optimizer passes over each generation batch;
    /// `_prepare_inputs` generates once every `steps_per_generation x num_iterations` micro-steps
    pub num_iterations: u64,
    /// the vLLM whose behaviour is modelled
    pub vllm_version: VllmVersion,
    /// the TRL, Unsloth and transformers whose behaviours are modelled
    pub versions: StackVersions,
    /// `max_num_seqs` / `max_num_batched_tokens` given to Unsloth's vLLM loader, when set
    pub vllm_max_num_seqs: Option<u64>,
    pub vllm_max_num_batched_tokens: Option<u64>,
    /// `UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE`: standby keeps the file's vLLM share
    pub standby_keeps_share: bool,
    /// the checkpoint's weights as its safetensors headers give them, when read
    pub stored_weights: Option<StoredWeights>,
    /// TRL colocate's `vllm_tensor_parallel_size`: vLLM spans this many training GPUs, each
    /// holding its part of the weights and KV cache
    pub vllm_tensor_parallel: u64,
    /// every weight trained (TRL `use_peft = false`): gradients and optimizer states for all
    pub full_finetuning: bool,
    /// nodes and the engine that shares the model among the training processes
    pub spread: Spread,
    /// the `trl vllm-serve` GPUs, when `generation` is `VllmServer`
    pub vllm_server: VllmServer,
    /// GRPOConfig's `cast_lm_head_to_fp32`: the LM head (and a tied embedding) kept in fp32
    pub cast_lm_head_to_fp32: bool,
    /// GRPOConfig's `fp16`: the trainer computes in fp16, not bf16, as on a GPU without bf16
    /// (a T4, compute capability 7.5); the same two bytes an element, so the estimate is the
    /// same, and the export writes `fp16 = true` with `bf16 = false`
    pub fp16: bool,
    /// `[grpofit] reward_models`: reward models loaded on each training GPU
    pub reward_models: Vec<reward::RewardModel>,
    /// `[grpofit] other_gpu_memory`: bytes the user knows are taken on each training GPU
    pub other_gpu_memory: u64,
    /// GRPOConfig's `pad_to_multiple_of` on a CUDA GPU: the step's prompts and completions each
    /// padded to a multiple of it (`None`: unpadded, as "auto" is off Neuron)
    pub pad_to_multiple_of: Option<u64>,
    /// `attn_implementation` (`[model]`, or `[grpo] model_init_kwargs`): which attention
    /// function the layers call ([`attention::Attention`]); the step's saved tensors follow it
    /// (`memory::step`), and the step time charges eager attention's scores going through memory,
    /// where SDPA and flash attention keep them on chip (`time::kernels`)
    #[serde(skip_serializing_if = "attention::Attention::is_default")]
    pub attention: attention::Attention,
}

/// A checkpoint's weights on disk: their exact bytes, and how they are stored. When the run
/// loads them as stored, these bytes are the weights' memory, not the formula's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StoredWeights {
    pub bytes: u64,
    pub parameters: u64,
    pub stored_as: Quant,
}

/// A vLLM version, for behaviours that moved between releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct VllmVersion {
    pub major: u32,
    pub minor: u32,
}

impl VllmVersion {
    /// vLLM 0.20: CUDA-graph memory is profiled inside `gpu_memory_utilization`
    /// (vllm 0.20.0 `envs.py`: `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` defaults to "1");
    /// before it, graphs were captured after the KV cache was sized, outside the budget.
    pub const GRAPHS_IN_BUDGET: VllmVersion = VllmVersion {
        major: 0,
        minor: 20,
    };

    /// `"0.11"`, `"0.11.2"`, `"v0.21.0"`.
    pub fn parse(text: &str) -> Option<VllmVersion> {
        let t = text.trim().trim_start_matches('v');
        let mut parts = t.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(VllmVersion { major, minor })
    }

    pub fn graphs_in_budget(self) -> bool {
        self >= Self::GRAPHS_IN_BUDGET
    }
}

impl Default for VllmVersion {
    /// The vLLM grpofit targets (`Package::Vllm.targeted()`).
    fn default() -> VllmVersion {
        let target = versions::Package::Vllm.targeted();
        VllmVersion {
            major: target.major,
            minor: target.minor,
        }
    }
}

impl std::fmt::Display for VllmVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl RunConfig {
    /// Completions per optimizer step across all GPUs, as the file writes them.
    pub fn effective_batch(&self) -> u64 {
        self.completions_per_device()
            .saturating_mul(self.grad_accum)
            .saturating_mul(self.processes())
    }

    /// Completions per optimizer step across all GPUs as the trainer runs them: the file's,
    /// except where Unsloth raises the micro-batch to `num_generations` (unsloth#3572,
    /// `running_micro_batch`).
    pub fn running_effective_batch(&self) -> u64 {
        self.running_micro_batch()
            .saturating_mul(self.grad_accum)
            .saturating_mul(self.processes())
    }

    /// The batch a step runs, and the file's where Unsloth runs another (what `estimate` reports).
    pub fn step_batch(&self) -> StepBatch {
        let prompts = |batch: u64| batch as f64 / self.num_generations.max(1) as f64;
        let written = (self.running_effective_batch() != self.effective_batch())
            .then(|| self.effective_batch());
        StepBatch {
            effective_batch: self.running_effective_batch(),
            prompts_per_step: prompts(self.running_effective_batch()),
            effective_batch_as_written: written,
            prompts_per_step_as_written: written.map(prompts),
            running_micro_batch: self.running_micro_batch(),
        }
    }

    /// Training processes in all: `[grpofit] gpus` on each of `nodes` machines (accelerate's
    /// `num_processes`).
    pub fn processes(&self) -> u64 {
        self.gpus.saturating_mul(self.spread.nodes.max(1))
    }

    pub fn sequence_len(&self) -> u64 {
        self.prompt_len + self.completion_len
    }

    /// The prompt and completion lengths the training step's tensors have: each padded to a
    /// multiple of `pad_to_multiple_of` where the run sets one (trl 1.16.0
    /// `GRPOTrainer._generate_and_score_completions`: `pad(prompt_ids, ...,
    /// pad_to_multiple_of=self.pad_to_multiple_of)` left, the completions right).
    pub fn step_lengths(&self) -> (u64, u64) {
        (
            self.padded(self.prompt_len),
            self.padded(self.completion_len),
        )
    }

    /// `len` tokens as the step's tensors hold them: rounded up to a multiple of
    /// `pad_to_multiple_of` where the run sets one (trl 1.16.0 `trl.trainer.utils.pad`).
    pub fn padded(&self, len: u64) -> u64 {
        match self.pad_to_multiple_of {
            Some(m) if m > 1 => len.div_ceil(m) * m,
            _ => len,
        }
    }

    /// Micro-batches generated at once (TRL's `steps_per_generation`): the file's value, else
    /// `generation_batch_size / (per_device_train_batch_size x processes)`, else the gradient
    /// accumulation (trl 1.15.0 `GRPOConfig.__post_init__`; Unsloth runs the same config).
    pub fn steps_per_generation(&self) -> u64 {
        let per_step = self.micro_batch.saturating_mul(self.processes()).max(1);
        self.steps_per_generation
            .or(self.generation_batch_size.map(|g| g / per_step))
            .unwrap_or(self.grad_accum)
            .max(1)
    }

    /// Completions this GPU generates and scores at once: `per_device_train_batch_size x
    /// steps_per_generation` (trl 1.15.0 `_prepare_inputs` buffers one generation batch).
    pub fn generation_rows(&self) -> u64 {
        self.running_micro_batch()
            .saturating_mul(self.steps_per_generation())
    }

    /// Whether the trainer scores the generation batch in a no-grad pass before training on it
    /// (trl 1.15.0 `_generate_and_score_completions`): old log-probs when vLLM generated
    /// (`vllm_importance_sampling_correction` defaults to True) or when one generation serves
    /// several optimizer steps, reference log-probs when `beta != 0`.
    pub fn scores_before_training(&self) -> bool {
        self.generation.uses_vllm()
            || self.beta != 0.0
            || !self.grad_accum.is_multiple_of(self.steps_per_generation())
    }

    /// The completions one `per_device_train_batch_size` stands for: itself, or, where TRL's
    /// batch counts prompts (TRL 0.14), that many prompts of `num_generations` completions each.
    pub fn completions_per_device(&self) -> u64 {
        if self.versions.batch_counts_prompts() {
            self.micro_batch.saturating_mul(self.num_generations.max(1))
        } else {
            self.micro_batch
        }
    }

    /// The attention implementation the step's memory follows (`memory::step`): TRL's step
    /// model reads it; Unsloth's (`memory::step::unsloth_step`) models Unsloth's own patched
    /// attention and does not, so there is none to show. What `estimate`'s header line, its
    /// JSON (`attention`) and the screen's header say.
    pub fn modelled_attention(&self) -> Option<attention::Attention> {
        (self.stack == Stack::Trl).then_some(self.attention)
    }

    /// The micro-batch that really runs. Unsloth's GRPO patch replaces `per_device_train_batch_size`
    /// by `num_generations` when the batch is not a multiple of it: `batch x accumulation x GPUs`
    /// from 2025.11, the per-device batch alone before (see [`BatchRaise`]).
    pub fn running_micro_batch(&self) -> u64 {
        if self.unsloth_raises_batch() {
            self.num_generations.max(1)
        } else {
            self.completions_per_device()
        }
    }

    /// Whether Unsloth silently raises `per_device_train_batch_size` to `num_generations`
    /// (unsloth#3572).
    pub fn unsloth_raises_batch(&self) -> bool {
        let generations = self.num_generations.max(1);
        if self.stack != Stack::Unsloth {
            return false;
        }
        match self.versions.batch_raise() {
            BatchRaise::Never => false,
            BatchRaise::PerDevice => !self.micro_batch.is_multiple_of(generations),
            BatchRaise::EffectiveBatch => {
                self.steps_per_generation.is_none()
                    && self.generation_batch_size.is_none()
                    && !self.effective_batch().is_multiple_of(generations)
            }
        }
    }

    /// Moves the run to `stack`, keeping what both stacks have and setting what each one's
    /// trainer fixes: TRL 1.x always fuses its LM head and has no Unsloth checkpointing,
    /// standby, fp8 KV or `max_lora_rank`; Unsloth's vLLM needs `max_lora_rank` to cover `r`.
    pub fn switch_stack(&mut self, stack: Stack) {
        self.stack = stack;
        self.fused_logits = stack == Stack::Trl && self.versions.trl_fused_head();
        match stack {
            Stack::Trl => {
                if self.checkpointing == Checkpointing::UnslothOffload {
                    self.checkpointing = Checkpointing::On;
                }
                self.max_lora_rank = None;
                self.unsloth_standby = false;
                self.standby_keeps_share = false;
                self.vllm_sleep = false;
                self.vllm_kv_fp8 = false;
                self.vllm_max_num_seqs = None;
                self.vllm_max_num_batched_tokens = None;
            }
            Stack::Unsloth => {
                self.max_lora_rank = Some(vllm_max_lora_rank(self.lora_rank));
                self.steps_per_generation = None;
                self.generation_batch_size = None;
                if self.quant == Quant::Fp32 {
                    self.quant = Quant::Bf16;
                }
            }
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
            modules_to_save: Vec::new(),
            lora_dropout: 0.0,
            checkpointing: Checkpointing::On,
            optimizer: Optimizer::AdamW,
            beta: 0.0,
            generation: Generation::VllmServer,
            expandable_segments: false,
            unsloth_standby: false,
            fused_logits: false,
            liger_loss: false,
            vllm_kv_fp8: false,
            vllm_sleep: false,
            steps_per_generation: None,
            generation_batch_size: None,
            num_iterations: 1,
            vllm_version: VllmVersion::default(),
            versions: StackVersions::default(),
            vllm_max_num_seqs: None,
            vllm_max_num_batched_tokens: None,
            standby_keeps_share: false,
            stored_weights: None,
            vllm_tensor_parallel: 1,
            full_finetuning: false,
            spread: Spread::default(),
            vllm_server: VllmServer::default(),
            attention: attention::Attention::Sdpa,
            cast_lm_head_to_fp32: false,
            fp16: false,
            reward_models: Vec::new(),
            other_gpu_memory: 0,
            pad_to_multiple_of: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_optimizer_has_a_trainer_name_that_reads_back() {
        for (_, o) in Optimizer::ALL {
            assert_eq!(Optimizer::from_trainer_name(o.name()), Some(o));
            assert_eq!(o.to_string(), o.name());
        }
    }
}
