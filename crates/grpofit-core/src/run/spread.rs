//! How a run is spread over GPUs: the data-parallel engine that shares the trained model among
//! the training processes (DDP, DeepSpeed ZeRO, FSDP), and the GPUs `trl vllm-serve` generates
//! on. Each term of a training rank's model states comes from the engine's own code or its
//! documented estimator, cited where it is computed.

use crate::arch::Arch;
use serde::Serialize;

/// The engine `accelerate launch` runs the training processes under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// torch DistributedDataParallel: every rank holds the whole model and its states
    Ddp,
    /// DeepSpeed ZeRO, stage 0-3
    DeepSpeed,
    /// PyTorch FSDP2, as accelerate prepares it
    Fsdp,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Ddp, Engine::DeepSpeed, Engine::Fsdp];

    /// The name a run file writes (`[distributed] engine`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Ddp => "ddp",
            Engine::DeepSpeed => "deepspeed",
            Engine::Fsdp => "fsdp",
        }
    }

    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == name)
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `[grpofit] nodes` and `[distributed]`: how the training processes share the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Spread {
    /// machines, each running `[grpofit] gpus` training processes
    pub nodes: u64,
    pub engine: Engine,
    /// DeepSpeed's ZeRO stage; for FSDP, 3 is FULL_SHARD and 2 SHARD_GRAD_OP (parameters kept
    /// gathered between forward and backward)
    pub zero_stage: u8,
    /// optimizer states (and, from ZeRO-2, gradients) in host memory
    pub offload_optimizer: bool,
    /// parameters in host memory (ZeRO-3 / FSDP full shard only)
    pub offload_param: bool,
}

impl Default for Spread {
    fn default() -> Spread {
        Spread {
            nodes: 1,
            engine: Engine::Ddp,
            zero_stage: 0,
            offload_optimizer: false,
            offload_param: false,
        }
    }
}

impl Spread {
    /// The stage that decides the sharding: DDP shards nothing.
    pub fn stage(&self) -> u8 {
        match self.engine {
            Engine::Ddp => 0,
            Engine::DeepSpeed | Engine::Fsdp => self.zero_stage.min(3),
        }
    }

    /// The engine that shards a run spread this way: FSDP stays FSDP, anything else goes to
    /// DeepSpeed.
    pub fn sharding_engine(&self) -> Engine {
        match self.engine {
            Engine::Fsdp => Engine::Fsdp,
            Engine::Ddp | Engine::DeepSpeed => Engine::DeepSpeed,
        }
    }

    /// Whether the 16-bit parameters themselves are sharded (ZeRO-3, FSDP full shard).
    pub fn shards_parameters(&self) -> bool {
        self.stage() >= 3
    }

    /// In words, for reports: `DeepSpeed ZeRO-3, optimizer offloaded to CPU`.
    pub fn describe(&self) -> String {
        let mut s = match (self.engine, self.stage()) {
            (Engine::Ddp, _) => "DDP".to_string(),
            (Engine::DeepSpeed, z) => format!("DeepSpeed ZeRO-{z}"),
            (Engine::Fsdp, 3) => "FSDP full shard".to_string(),
            (Engine::Fsdp, 2) => "FSDP shard grad+optim".to_string(),
            (Engine::Fsdp, _) => "FSDP no shard".to_string(),
        };
        if self.offload_optimizer {
            s.push_str(", optimizer offloaded to CPU");
        }
        if self.offload_param {
            s.push_str(", parameters offloaded to CPU");
        }
        s
    }
}

impl Spread {
    /// The engine after this one (ddp, deepspeed, fsdp, then ddp again), at a stage it has:
    /// DDP shards and offloads nothing; DeepSpeed keeps the stage; FSDP has no ZeRO-1, so stage
    /// 1 becomes SHARD_GRAD_OP (2). Parameters stay offloaded only while they are sharded.
    pub fn next_engine(self) -> Spread {
        let mut next = self;
        next.engine = match self.engine {
            Engine::Ddp => Engine::DeepSpeed,
            Engine::DeepSpeed => Engine::Fsdp,
            Engine::Fsdp => Engine::Ddp,
        };
        match next.engine {
            Engine::Ddp => {
                next.zero_stage = 0;
                next.offload_optimizer = false;
            }
            Engine::Fsdp if next.zero_stage == 1 => next.zero_stage = 2,
            Engine::DeepSpeed | Engine::Fsdp => {}
        }
        next.offload_param &= next.shards_parameters();
        next
    }

    /// The stage after this one: DeepSpeed 0, 1, 2, 3, then 0 again; FSDP no shard (0),
    /// SHARD_GRAD_OP (2), FULL_SHARD (3). `None` under DDP, which has no stages.
    pub fn next_stage(self) -> Option<Spread> {
        let stage = match (self.engine, self.stage()) {
            (Engine::Ddp, _) => return None,
            (Engine::Fsdp, 0 | 1) => 2,
            (_, 3) => 0,
            (_, z) => z + 1,
        };
        let mut next = Spread {
            zero_stage: stage,
            ..self
        };
        next.offload_param &= next.shards_parameters();
        Some(next)
    }

    /// What the loader refuses in `[distributed]`: the key, and why in words (a ZeRO stage
    /// under DDP, parameters offloaded without being sharded). The screen's toggles never reach
    /// one; `rules::validate` checks it for every run.
    pub fn refusal(&self) -> Option<(&'static str, &'static str)> {
        if self.engine == Engine::Ddp && self.zero_stage > 0 {
            return Some((
                "zero_stage",
                "`[distributed] zero_stage` shards nothing under engine = \"ddp\": set engine = \"deepspeed\" or \"fsdp\"",
            ));
        }
        if self.offload_param && !self.shards_parameters() {
            return Some((
                "offload_param",
                "`[distributed] offload_param = \"cpu\"` needs the parameters sharded: zero_stage = 3",
            ));
        }
        None
    }
}

/// `[vllm_server]`: `trl vllm-serve` on GPUs of its own (`[grpo] vllm_mode = "server"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VllmServer {
    /// GPUs the server runs on (`tensor_parallel_size x data_parallel_size` of them)
    pub gpus: u64,
    pub tensor_parallel_size: u64,
    pub data_parallel_size: u64,
    /// vllm-serve's `--gpu_memory_utilization` (0.9 by default, its ScriptArguments)
    pub gpu_memory_utilization: f64,
    /// `--max_model_len`; unset, the model's `max_position_embeddings`
    pub max_model_len: Option<u64>,
}

impl Default for VllmServer {
    /// trl 1.15.0 `trl/scripts/vllm_serve.py` ScriptArguments' defaults (the contract file).
    fn default() -> VllmServer {
        use crate::contract::Call;
        let serve = Call::VllmServe;
        VllmServer {
            gpus: 1,
            tensor_parallel_size: serve.default_u64("tensor_parallel_size").unwrap_or(1),
            data_parallel_size: serve.default_u64("data_parallel_size").unwrap_or(1),
            gpu_memory_utilization: serve.default_f64("gpu_memory_utilization").unwrap_or(0.9),
            max_model_len: None,
        }
    }
}

/// What one training rank holds for the trained parameters, and what the node's host memory
/// holds when states are offloaded. Bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ModelStates {
    /// 16-bit (or fp32 for FSDP2) parameters resident on the rank, sharded or whole
    pub weights: u64,
    /// the gathered parameter buffers of the live layers (ZeRO-3 / FSDP full shard)
    pub gathered: u64,
    /// gradients: 16-bit and fp32 partitions
    pub gradients: u64,
    /// optimizer states, and the fp32 master weights mixed precision keeps with them
    pub optimizer: u64,
    /// DDP's gradient buckets (a second copy of the gradients), ZeRO's reduce buckets and
    /// offload buffer
    pub buckets: u64,
    /// host memory per node for what is offloaded
    pub host: u64,
}

impl ModelStates {
    pub fn on_gpu(&self) -> u64 {
        self.weights + self.gathered + self.gradients + self.optimizer + self.buckets
    }
}

/// DeepSpeed's `additional_buffer_factor` for host memory (its estimators' default, 1.5).
const HOST_BUFFER_FACTOR: f64 = 1.5;

/// The largest module's own parameters: DeepSpeed's `largest_layer_params` (deepspeed 0.18.2
/// `runtime/zero/stage3.py` `model_to_params`: each module's `parameters(recurse=False)`
/// summed), the embedding or the untied head in a dense model, one layer's experts module
/// (`gate_up_proj` and `down_proj` together) in a mixture of experts.
pub fn largest_layer_parameters(arch: &Arch) -> u64 {
    largest_tensor(arch).max(arch.expert_module_parameters())
}

/// The largest single parameter tensor (DeepSpeed's `largest_param_numel`).
fn largest_tensor(arch: &Arch) -> u64 {
    arch.parameter_tensors().max().unwrap_or(0)
}

/// DeepSpeed's reduce bucket, elements: deepspeed 0.18.2 `runtime/zero/config.py`
/// DeepSpeedZeroConfig `reduce_bucket_size` = 5e8, which grpofit's ds_config.json
/// (`config::launch::ds_config_json`) leaves at its default.
pub const REDUCE_BUCKET_ELEMENTS: u64 = 500_000_000;

/// The buffers ZeRO keeps on the GPU beside the model states, bytes, each in the engine's bf16
/// (`DeepSpeedEngine.get_data_types`: the model's dtype, and the gradients' unless
/// `grad_accum_dtype` is set).
/// - Stages 1-2 (`stage_1_and_2.py` `backward_prologue`): a reduce bucket of
///   `reduce_bucket_size` elements, a second with `overlap_comm` (grpofit's ds_config.json sets
///   it), held through the backward pass; with the optimizer offloaded, also
///   `temp_grad_buffer_for_gpu_offload`, one largest parameter (`__init__`).
/// - Stage 3 (`stage3.py` `_setup_for_real_optimizer`): one bucket, allocated once
///   (`contiguous_gradients` defaults to true).
pub fn zero_buffers(arch: &Arch, spread: &Spread) -> u64 {
    if spread.engine != Engine::DeepSpeed {
        return 0;
    }
    let bucket = 2 * REDUCE_BUCKET_ELEMENTS;
    match spread.stage() {
        0 => 0,
        1 | 2 if spread.offload_optimizer => 2 * bucket + 2 * largest_tensor(arch),
        1 | 2 => 2 * bucket,
        _ => bucket,
    }
}

/// FSDP2's gathered bf16 parameters, bytes. accelerate 1.12 `fsdp2_prepare_model` calls
/// `fully_shard` on each decoder layer (the transformer-based auto-wrap policy on
/// `_no_split_modules`), then on the root model, with a bf16 `MixedPrecisionPolicy`. Full shard:
/// the live layer and the next one prefetched (2 x 2 x layer), and the root's own parameters
/// (embedding, final norm, an untied head), which stay gathered from forward to backward
/// (torch's `fully_shard` sets `reshard_after_forward = False` on the root). SHARD_GRAD_OP
/// keeps every parameter gathered (2P).
pub fn fsdp_gathered(arch: &Arch, stage: u8) -> u64 {
    if stage < 3 {
        return 2 * arch.parameters();
    }
    let heads = if arch.tied_embeddings { 1 } else { 2 };
    let root = heads * arch.vocab * arch.hidden + arch.hidden;
    2 * root + 2 * 2 * arch.layer_parameters()
}

/// Model states of a rank in full fine-tuning, the trainer in bf16 mixed precision.
/// `processes` is the data-parallel world size (GPUs x nodes); `param_bytes` the bytes of a
/// parameter as loaded (4 at TRL's default `dtype = "float32"`: trl 1.15.0
/// `trainer/utils.py` `create_model_from_path`, `dtype = kwargs.get("dtype", "float32")`; 2 in
/// bf16); `adam_states_per_parameter` the optimizer's state bytes a parameter under DDP, where
/// torch's AdamW keeps its moments in the parameters' dtype.
pub fn full_finetuning_states(
    arch: &Arch,
    spread: &Spread,
    processes: u64,
    param_bytes: u64,
    adam_states_per_parameter: u64,
) -> ModelStates {
    let p = arch.parameters();
    let n = processes.max(1);
    let per_node = |bytes: u64| (bytes as f64 * HOST_BUFFER_FACTOR) as u64 / spread.nodes.max(1);
    match (spread.engine, spread.stage()) {
        // torch DDP (accelerate's DistributedDataParallelKwargs leave gradient_as_bucket_view
        // False): weights and gradients in the loaded dtype (accelerate's DDP casts nothing;
        // bf16 mixed precision is autocast), AdamW's two moments in the parameters' dtype
        // (torch.optim.AdamW `zeros_like(p)`), and the reducer's buckets, a copy of every
        // gradient. accelerate 1.12 `Accelerator.prepare_model` wraps DDP only when
        // `multi_device` (`use_distributed`: more than one process), so one GPU has no buckets.
        (Engine::Ddp, _) => ModelStates {
            weights: param_bytes * p,
            gradients: param_bytes * p,
            optimizer: adam_states_per_parameter * p,
            buckets: if n > 1 { param_bytes * p } else { 0 },
            ..ModelStates::default()
        },
        (Engine::DeepSpeed, stage @ 0..=2) => {
            let host = per_node(p * (4 * processes).max(16));
            zero12_states(arch, spread, stage, n, host)
        }
        (Engine::DeepSpeed, _) => {
            zero3_states(arch, spread, n, [per_node(18 * p), per_node(16 * p)])
        }
        // accelerate 1.12 `fsdp2_prepare_model` upcasts the parameters to fp32 under mixed
        // precision, so the shards are fp32 parameters (4P/N), fp32 gradients (4P/N) and AdamW's
        // fp32 moments (8P/N); gathered bf16 parameters as `fsdp_gathered` counts them. CPU
        // offload (`offload_params`) moves parameters, gradients and states to the host.
        (Engine::Fsdp, stage) => {
            let gathered = fsdp_gathered(arch, stage);
            if spread.offload_param || spread.offload_optimizer {
                ModelStates {
                    gathered,
                    host: per_node(16 * p),
                    ..ModelStates::default()
                }
            } else {
                ModelStates {
                    weights: 4 * p / n,
                    gathered,
                    gradients: 4 * p / n,
                    optimizer: 8 * p / n,
                    ..ModelStates::default()
                }
            }
        }
    }
}

/// ZeRO stages 0 to 2 on `n` processes (`host`: the offloaded optimizer's bytes per node).
/// deepspeed 0.18.2 stage_1_and_2.py: 2P (16-bit params, the engine casts the module to bf16
/// whatever dtype it was loaded in: `_configure_distributed_model`), fp32 params 4 and Adam
/// moments 8 over N. The gradient partition `grads_in_partition` is in the engine's bf16
/// (`get_data_types`), 2P/N; the fp32 copy (`step`, one parameter group at a time) lives only
/// inside the optimizer step, after the activations are gone, so
/// `estimate_zero2_model_states_mem_needs`' 18P/N overcounts the peak by 4P/N. Stage 1 reduces
/// whole 16-bit gradients: 2P + 2P/N. With the optimizer offloaded, 2P on the GPU and
/// P x max(4N, 16) x 1.5 on the host. Stage 0: nothing sharded (N = 1). Each holds
/// `zero_buffers`.
fn zero12_states(arch: &Arch, spread: &Spread, stage: u8, n: u64, host: u64) -> ModelStates {
    let p = arch.parameters();
    let n = if stage == 0 { 1 } else { n };
    let buckets = zero_buffers(arch, spread);
    if spread.offload_optimizer {
        return ModelStates {
            weights: 2 * p,
            buckets,
            host,
            ..ModelStates::default()
        };
    }
    let (whole_grads, sharded_grads) = match stage {
        0 => (0, 6 * p),
        1 => (2 * p, 2 * p / n),
        _ => (0, 2 * p / n),
    };
    ModelStates {
        weights: 2 * p,
        gradients: whole_grads + sharded_grads,
        optimizer: 12 * p / n,
        buckets,
        ..ModelStates::default()
    }
}

/// ZeRO-3 on `n` processes (`host`: per node, with the parameters offloaded too, and with the
/// optimizer alone offloaded). deepspeed 0.18.2 stage3.py
/// `estimate_zero3_model_states_mem_needs` (zero_init): gpu = 4 x largest layer + 16-bit params
/// 2P/N, fp32 params 4 and Adam moments 8 over N; the gradient partition
/// (`_setup_for_real_optimizer`'s `grad_partitions_flat_buffer`) is in
/// `gradient_accumulation_dtype`, the engine's bf16 (`get_data_types`): 2P/N, not the
/// estimator's 4 (the fp32 copy, `_prepare_fp32_grad_for_sub_group`, lives only in the step).
/// Optimizer offloaded: the partition on the host (`self.device` is the CPU), 2P/N on the GPU,
/// host 16P x 1.5 per node; parameters offloaded too: largest only, host 18P x 1.5 per node.
/// Each holds `zero_buffers`.
fn zero3_states(
    arch: &Arch,
    spread: &Spread,
    n: u64,
    [params_host, optimizer_host]: [u64; 2],
) -> ModelStates {
    let p = arch.parameters();
    let gathered = 4 * largest_layer_parameters(arch);
    let buckets = zero_buffers(arch, spread);
    match (spread.offload_optimizer, spread.offload_param) {
        (_, true) => ModelStates {
            gathered,
            buckets,
            host: params_host,
            ..ModelStates::default()
        },
        (true, false) => ModelStates {
            weights: 2 * p / n,
            gathered,
            buckets,
            host: optimizer_host,
            ..ModelStates::default()
        },
        (false, false) => ModelStates {
            weights: 2 * p / n,
            gathered,
            gradients: 2 * p / n,
            optimizer: 12 * p / n,
            buckets,
            ..ModelStates::default()
        },
    }
}

/// What TRL gathers on every rank to push the weights into vLLM or to generate, beyond the
/// rank's shard: with PEFT under ZeRO-3 the whole model at once (trl 1.15.0
/// `VLLMGeneration._iter_named_params`: "we must gather the full model at once before
/// merging"), and for `use_vllm = false` the whole model when `ds3_gather_for_generation`
/// (`unwrap_model_for_generation`); for full fine-tuning it gathers one parameter at a time.
/// FSDP syncs one module at a time even with PEFT: `gather_params` is a no-op there and
/// `_iter_fsdp2_params` materialises one parameter (`full_tensor()`, fp32 after accelerate's
/// upcast) per step (trl 1.15.0 `trl/distributed.py` `gather_params`,
/// `VLLMGeneration._iter_fsdp_params`; `_sync_fsdp_params_to_vllm` from trl 0.18.2, one
/// module's `summon_full_params(recurse=False)`), inside what FSDP's live layers already hold.
pub fn gather_for_generation(
    arch: &Arch,
    spread: &Spread,
    processes: u64,
    lora: bool,
    whole_model: bool,
) -> u64 {
    if !spread.shards_parameters() {
        return 0;
    }
    if spread.engine == Engine::Fsdp && !whole_model {
        return 4 * largest_tensor(arch);
    }
    let p16 = 2 * arch.parameters();
    if lora || whole_model {
        p16 - p16 / processes.max(1)
    } else {
        2 * largest_layer_parameters(arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::catalog;

    fn arch(id: &str) -> Arch {
        catalog::find(id).expect("in the catalog").arch
    }

    #[test]
    fn zero2_and_zero3_are_deepspeeds_own_estimates() {
        // deepspeed's estimators on 8 GPUs, the gradient partitions in bf16 (2P/8 where the
        // estimators say 4P/8 or 6P/8) and the reduce buckets beside them
        let a = arch("Qwen/Qwen2.5-7B-Instruct");
        let p = a.parameters();
        let z = |stage, opt, param| Spread {
            nodes: 1,
            engine: Engine::DeepSpeed,
            zero_stage: stage,
            offload_optimizer: opt,
            offload_param: param,
        };
        let bucket = 2 * REDUCE_BUCKET_ELEMENTS;
        let s2 = full_finetuning_states(&a, &z(2, false, false), 8, 2, 8);
        assert_eq!(s2.on_gpu(), 2 * p + 2 * p / 8 + 12 * p / 8 + 2 * bucket);
        let s3 = full_finetuning_states(&a, &z(3, false, false), 8, 2, 8);
        let l = largest_layer_parameters(&a);
        assert_eq!(l, 152_064 * 3584);
        assert_eq!(
            s3.on_gpu(),
            4 * l + 2 * p / 8 + 2 * p / 8 + 12 * p / 8 + bucket
        );
        // offloading moves the states to the host: ZeRO-3 with both keeps only the live layer
        // and the reduce bucket
        let both = full_finetuning_states(&a, &z(3, true, true), 8, 2, 8);
        assert_eq!(both.on_gpu(), 4 * l + bucket);
        assert_eq!(both.host, 18 * p * 3 / 2);
        // each stage holds less than the one before
        let on = |s| full_finetuning_states(&a, &z(s, false, false), 8, 2, 8).on_gpu();
        assert!(on(0) > on(1) && on(1) > on(2) && on(2) > on(3));
    }

    #[test]
    fn the_toggles_reach_every_engine_and_stage_and_nothing_the_loader_refuses() {
        let mut s = Spread::default();
        let mut seen = Vec::new();
        for _ in 0..3 {
            for _ in 0..4 {
                assert_eq!(s.refusal(), None, "{s:?}");
                seen.push(s.describe());
                match s.next_stage() {
                    Some(next) => s = next,
                    None => break,
                }
            }
            s = s.next_engine();
        }
        assert_eq!(s, Spread::default());
        for want in [
            "DDP",
            "DeepSpeed ZeRO-1",
            "DeepSpeed ZeRO-3",
            "FSDP full shard",
        ] {
            assert!(seen.iter().any(|d| d == want), "{want}: {seen:?}");
        }
        // parameters offloaded at ZeRO-3 come back when the stage drops
        let z3 = Spread {
            engine: Engine::DeepSpeed,
            zero_stage: 3,
            offload_param: true,
            offload_optimizer: true,
            ..Spread::default()
        };
        assert!(!z3.next_stage().map(|s| s.offload_param).unwrap_or(true));
        assert_eq!(z3.next_engine().refusal(), None);
        assert_eq!(z3.next_engine().next_engine(), Spread::default());
    }

    #[test]
    fn ddp_holds_the_whole_model_states_on_every_rank() {
        let a = arch("Qwen/Qwen2.5-7B-Instruct");
        let p = a.parameters();
        let ddp = full_finetuning_states(&a, &Spread::default(), 8, 2, 4);
        assert_eq!(ddp.on_gpu(), (2 + 2 + 4 + 2) * p);
    }
}
