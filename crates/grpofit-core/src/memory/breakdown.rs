//! The words of a breakdown: the parts memory is counted in, the two phases of a GRPO step, and
//! what every process holds before its first tensor (the CUDA context, cuBLAS workspaces).

use crate::units::{GIB, MIB};
use serde::Serialize;

/// What one training process holds on the GPU beyond PyTorch's reserved memory: CUDA context,
/// kernels, cuBLAS/cuDNN handles. Measured on the H200 as NVML's used memory after each step less
/// the step's reserved peak, less what NVML counted as used before the process started (the
/// driver's own reservation, 0.604 GiB, which CUDA's total already leaves out: NVML total
/// 150,754,820,096 bytes against torch's total_memory 150,109,880,320). Over the 91 runs of
/// calibration/h200-hf-peft.jsonl, `nvml_after - peak_reserved - nvml_before.used`:
/// 0.745-0.771 GiB, median 0.759 GiB. Capacity is CUDA's total throughout (what torch, Unsloth's
/// banner and OOM messages print), so the driver's reservation is counted nowhere.
pub const CUDA_CONTEXT: u64 = (0.759 * GIB as f64) as u64;

/// cuBLAS workspace PyTorch allocates per handle on Hopper (4096 KiB x 8), one for the forward
/// thread and one for autograd's backward thread: `reserved_after_matmul` = 32 MiB in the environment
/// record (first line) of calibration/h200-hf-peft.jsonl, and the first record's optimizer-state bytes carry it.
pub const CUBLAS_WORKSPACES: u64 = 2 * 32 * MIB;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    CudaContext,
    VllmWeights,
    SharedWeights,
    VllmCudaGraphs,
    VllmActivations,
    VllmKvCache,
    GenerationKvCache,
    BaseWeights,
    LoraAdapters,
    LoraGradients,
    OptimizerStates,
    Activations,
    Logits,
    MicroBatchLogits,
    SequenceLogitsFp32,
    MicroBatchLogitsFp32,
    AllocatorSlack,
    Weights,
    Gradients,
    GatheredWeights,
    ReferenceModel,
    RewardModel,
    OtherMemory,
    ExpertWeights,
    ExpertLora,
    SavedModules,
    RewardForward,
}

impl Part {
    pub fn label(self) -> &'static str {
        match self {
            Part::CudaContext => "CUDA context",
            Part::VllmWeights => "vLLM weights",
            Part::SharedWeights => "model weights",
            Part::VllmCudaGraphs => "vLLM CUDA graphs",
            Part::VllmActivations => "vLLM activations",
            Part::VllmKvCache => "vLLM KV cache",
            Part::GenerationKvCache => "generation KV cache",
            Part::BaseWeights => "base weights",
            Part::LoraAdapters => "LoRA adapters",
            Part::LoraGradients => "LoRA gradients",
            Part::OptimizerStates => "optimizer states",
            Part::Activations => "activations",
            Part::Logits => "logits",
            Part::MicroBatchLogits => "micro-batch logits",
            Part::SequenceLogitsFp32 => "fp32 seq. logits",
            Part::MicroBatchLogitsFp32 => "fp32 batch logits",
            Part::AllocatorSlack => "allocator slack",
            Part::Weights => "model weights",
            Part::Gradients => "gradients",
            Part::GatheredWeights => "gathered weights",
            Part::ReferenceModel => "reference model",
            Part::RewardModel => "reward models",
            Part::OtherMemory => "other GPU memory",
            Part::ExpertWeights => "expert weights",
            Part::ExpertLora => "expert LoRA",
            Part::SavedModules => "modules_to_save",
            Part::RewardForward => "reward forward",
        }
    }

    pub fn explanation(self) -> &'static str {
        match self {
            Part::CudaContext => {
                "CUDA context, kernels and cuBLAS workspaces (measured on an H200)"
            }
            Part::VllmWeights => {
                "vLLM's own weights copy (TRL) or LoRA buffers (Unsloth), and its non-PyTorch memory"
            }
            Part::SharedWeights => {
                "one copy of the weights inside vLLM's share, used by training too (Unsloth)"
            }
            Part::VllmCudaGraphs => "decode CUDA graphs vLLM captures at start-up",
            Part::VllmActivations => "vLLM's profiled forward pass and sampler buffers",
            Part::VllmKvCache => "what is left of vLLM's share: the KV cache for generation",
            Part::GenerationKvCache => {
                "transformers' generate: keys and values of every completion being generated"
            }
            Part::BaseWeights => "the frozen base model the trainer holds",
            Part::LoraAdapters => "trainable LoRA A/B matrices (fp32, as PEFT keeps them)",
            Part::LoraGradients => "gradients of the adapters live at the peak",
            Part::OptimizerStates => {
                "optimizer moments for the trained parameters (and the fp32 master weights ZeRO and FSDP keep)"
            }
            Part::Activations => "tensors autograd keeps for the backward pass at the peak",
            Part::Logits => "logits blocks and log-prob statistics at the peak",
            Part::MicroBatchLogits => {
                "the micro-batch's logits, materialised whole and read by log-softmax (TRL before 1.15; Unsloth 2025.2 runs TRL's loss)"
            }
            Part::MicroBatchLogitsFp32 => {
                "Unsloth 2025.3-2025.7 with a FastModel model: the micro-batch's logits, the reference's, and both upcast to fp32 whole in grpo_compute_loss_slow"
            }
            Part::SequenceLogitsFp32 => {
                "Unsloth 2025's GRPO loss (UnslothEfficientGRPO): each sequence's logits and their fp32 upcast, the reference's too when beta != 0"
            }
            Part::AllocatorSlack => "blocks PyTorch's caching allocator holds but no tensor uses",
            Part::Weights => {
                "the trained model's parameters on this GPU: whole, or this rank's shard (ZeRO-3, FSDP)"
            }
            Part::Gradients => {
                "every weight's gradients on this GPU (ZeRO's bf16 partitions and reduce buckets, DDP's buckets)"
            }
            Part::GatheredWeights => {
                "parameters gathered from the other ranks: the live layers (ZeRO-3, FSDP) and the whole model TRL gathers to sync vLLM"
            }
            Part::ReferenceModel => {
                "TRL's frozen reference model (full fine-tuning with beta > 0, or any beta before TRL 0.16): whole, or this rank's ZeRO-3 / FSDP shard"
            }
            Part::RewardModel => {
                "the reward models TRL loads on each training GPU (`[grpofit] reward_models`)"
            }
            Part::OtherMemory => {
                "memory you said is taken on this GPU (`[grpofit] other_gpu_memory`)"
            }
            Part::ExpertWeights => {
                "every expert of the mixture, resident, as the stack stores them (16-bit, Unsloth's NF4, fp8)"
            }
            Part::ExpertLora => {
                "Unsloth's LoRA on the experts (PEFT target_parameters, r x experts wide, fp32)"
            }
            Part::RewardForward => {
                "the reward models' forward over the generation batch (TRL's `_calculate_rewards`): the last layer's working set and every layer's keys and values"
            }
            Part::SavedModules => {
                "PEFT's trainable copies of the `[lora] modules_to_save` modules, beside the frozen originals"
            }
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub part: Part,
    pub name: &'static str,
    pub bytes: u64,
    pub explanation: &'static str,
}

/// The two phases of a GRPO step on one GPU: generating completions, then training on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Generation,
    /// the reward models scoring the completions, between generation and the step
    Scoring,
    Training,
}

impl Phase {
    /// The phase in the user's words.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Generation => "generation",
            Phase::Scoring => "scoring",
            Phase::Training => "training",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// One phase's memory: its components, in display order, zero ones dropped.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseMemory {
    pub phase: Phase,
    pub total_bytes: u64,
    pub components: Vec<Component>,
}

impl PhaseMemory {
    /// A phase of `parts`, in display order, zero ones dropped.
    pub fn of(phase: Phase, parts: Vec<(Part, u64)>) -> PhaseMemory {
        let components: Vec<Component> = parts
            .into_iter()
            .filter(|(_, b)| *b > 0)
            .map(|(part, bytes)| Component {
                part,
                name: part.label(),
                bytes,
                explanation: part.explanation(),
            })
            .collect();
        PhaseMemory {
            phase,
            total_bytes: components.iter().map(|c| c.bytes).sum(),
            components,
        }
    }
}
