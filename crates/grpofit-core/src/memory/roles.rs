//! The GPUs a run uses, by what they do: the training ranks (every one alike under data
//! parallelism, so one breakdown stands for all) and, with `vllm_mode = "server"`, the GPUs
//! `trl vllm-serve` generates on. A run fits when every role fits.

use crate::memory::breakdown::{Component, Part, PhaseMemory};
use crate::memory::vllm::{self, VllmPlan};
use crate::run::{Generation, RunConfig};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleKind {
    Training,
    VllmServer,
}

impl RoleKind {
    /// In the user's words.
    pub fn label(self) -> &'static str {
        match self {
            RoleKind::Training => "training",
            RoleKind::VllmServer => "vLLM server",
        }
    }
}

/// One role's GPUs: how many, and what each one holds at its peak.
#[derive(Debug, Clone, Serialize)]
pub struct Role {
    pub role: RoleKind,
    /// GPUs in this role across all nodes
    pub gpus: u64,
    pub capacity_bytes: u64,
    pub total_bytes: u64,
    pub fits: bool,
    pub headroom_bytes: i64,
    pub components: Vec<Component>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseMemory>,
    /// the vLLM on these GPUs, when one runs there
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm: Option<VllmPlan>,
}

/// The training role, from the per-GPU estimate of a training rank.
#[allow(clippy::too_many_arguments)]
pub fn training(
    run: &RunConfig,
    capacity: u64,
    total: u64,
    fits: bool,
    components: &[Component],
    phases: &[PhaseMemory],
    vllm: Option<&VllmPlan>,
) -> Role {
    Role {
        role: RoleKind::Training,
        gpus: run.processes(),
        capacity_bytes: capacity,
        total_bytes: total,
        fits,
        headroom_bytes: capacity as i64 - total as i64,
        components: components.to_vec(),
        phases: phases.to_vec(),
        vllm: vllm.cloned(),
    }
}

/// The `trl vllm-serve` role, when generation runs there: each of its GPUs holds its share of
/// the weights, CUDA graphs, the profiled activations and the KV cache, within
/// `gpu_memory_utilization` of a card like the trainers'.
pub fn vllm_server(run: &RunConfig, capacity: u64) -> Option<Role> {
    if run.generation != Generation::VllmServer {
        return None;
    }
    let plan = vllm::server_plan(run, capacity);
    let parts = [
        (
            Part::CudaContext,
            crate::memory::breakdown::CUDA_CONTEXT + crate::memory::breakdown::CUBLAS_WORKSPACES,
        ),
        (Part::VllmWeights, plan.weights_bytes + plan.non_torch_bytes),
        (Part::VllmCudaGraphs, plan.cuda_graphs_bytes),
        (Part::VllmKvCache, plan.kv_cache_bytes),
        (Part::VllmActivations, plan.activations_bytes),
    ];
    let memory = PhaseMemory::of(crate::memory::breakdown::Phase::Generation, parts.to_vec());
    let total = memory.total_bytes;
    Some(Role {
        role: RoleKind::VllmServer,
        gpus: run.vllm_server.gpus,
        capacity_bytes: capacity,
        total_bytes: total,
        fits: total <= capacity && plan.starts,
        headroom_bytes: capacity as i64 - total as i64,
        components: memory.components,
        phases: Vec::new(),
        vllm: Some(plan),
    })
}

/// When the vLLM server's KV cache cannot hold the completions the ranks ask for at once, vLLM
/// queues the rest: slower generation, not an out-of-memory error. TRL's server mode sends the
/// whole generation batch, `per_device_train_batch_size x processes x steps_per_generation`
/// (trl 1.15.0 `VLLMGeneration.generate`: the main process gathers every rank's prompts), split
/// over the data-parallel replicas. A request takes KV blocks for the tokens it holds, never for
/// `max_model_len` (vLLM's paged `KVCacheManager.allocate_slots`), so the cache holds as many
/// requests as fit at the run's own length: prompt + completion.
pub fn server_queue_warning(run: &RunConfig, roles: &[Role]) -> Option<String> {
    let server = roles.iter().find(|r| r.role == RoleKind::VllmServer)?;
    let plan = server.vllm.as_ref()?;
    let batch = run
        .micro_batch
        .saturating_mul(run.processes())
        .saturating_mul(run.steps_per_generation());
    let per_replica = batch.div_ceil(run.vllm_server.data_parallel_size.max(1));
    let tokens = run.sequence_len().min(plan.max_model_len).max(1);
    let held = plan.run_length_sequences.floor() as u64;
    (plan.starts && per_replica > held).then(|| {
        format!(
            "the vLLM server's KV cache holds {held} sequences of the run's {tokens} tokens (prompt + completion) and the ranks send {per_replica} completions at once: vLLM queues the rest (slower generation, not out of memory)"
        )
    })
}
