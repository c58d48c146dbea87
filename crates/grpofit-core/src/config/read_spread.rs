//! `[grpofit] nodes`, `[distributed]` and `[vllm_server]`: how the run is spread over GPUs
//! (docs/run-file.md). The first two are grpofit's own; `[vllm_server]` holds `trl vllm-serve`'s
//! flags (the contract's `trl.vllm_serve.ScriptArguments`) and the number of its GPUs.

use super::error::LoadError;
use super::tables::Tables;
use crate::contract::Table as T;
use crate::run::spread::{Engine, Spread, VllmServer};

/// Most GPUs or nodes a run file may name: past any cluster GRPO runs on.
const MAX_GPUS: u64 = 4096;

/// Reads `[grpofit] nodes` and `[distributed]`.
pub(super) fn read_spread(t: &Tables) -> Result<Spread, LoadError> {
    let engine = match t.text(T::Distributed, "engine")? {
        None => Engine::Ddp,
        Some(name) => Engine::from_name(name).ok_or_else(|| {
            t.wrong(
                T::Distributed,
                "engine",
                format!("\"{name}\""),
                "expected \"ddp\", \"deepspeed\" or \"fsdp\"",
            )
        })?,
    };
    let stage = t.int(T::Distributed, "zero_stage", 0, 3)?;
    let spread = Spread {
        nodes: t.int(T::Grpofit, "nodes", 1, MAX_GPUS)?.unwrap_or(1),
        engine,
        // FSDP's default sharding is FULL_SHARD (accelerate's `fsdp_sharding_strategy`)
        zero_stage: stage.unwrap_or(if engine == Engine::Fsdp { 3 } else { 0 }) as u8,
        offload_optimizer: offload(t, "offload_optimizer")?,
        offload_param: offload(t, "offload_param")?,
    };
    if let Some((key, why)) = spread.refusal() {
        return Err(t.sentence(T::Distributed, key, why));
    }
    Ok(spread)
}

/// `offload_optimizer` / `offload_param`: `"none"` or `"cpu"`, as DeepSpeed's `device` says it.
fn offload(t: &Tables, key: &str) -> Result<bool, LoadError> {
    match t.text(T::Distributed, key)? {
        None | Some("none") => Ok(false),
        Some("cpu") => Ok(true),
        Some(other) => Err(t.wrong(
            T::Distributed,
            key,
            format!("\"{other}\""),
            "expected \"none\" or \"cpu\"",
        )),
    }
}

/// Reads `[vllm_server]`; missing flags take vllm-serve's own defaults.
pub(super) fn read_vllm_server(t: &Tables) -> Result<VllmServer, LoadError> {
    let d = VllmServer::default();
    let tp = t
        .int(T::VllmServer, "tensor_parallel_size", 1, 64)?
        .unwrap_or(d.tensor_parallel_size);
    let dp = t
        .int(T::VllmServer, "data_parallel_size", 1, MAX_GPUS)?
        .unwrap_or(d.data_parallel_size);
    let gpus = t
        .int(T::VllmServer, "gpus", 1, MAX_GPUS)?
        .unwrap_or(tp * dp);
    if gpus != tp * dp {
        return Err(t.sentence(
            T::VllmServer,
            "gpus",
            format!(
                "`[vllm_server] gpus = {gpus}` but vllm-serve runs on tensor_parallel_size x data_parallel_size = {tp} x {dp} = {} GPUs",
                tp * dp
            ),
        ));
    }
    Ok(VllmServer {
        gpus,
        tensor_parallel_size: tp,
        data_parallel_size: dp,
        gpu_memory_utilization: match t.share(T::VllmServer, "gpu_memory_utilization")? {
            Some(share) => share,
            None => own_gpu_share(t)?.unwrap_or(d.gpu_memory_utilization),
        },
        max_model_len: t.int(T::VllmServer, "max_model_len", 16, 1 << 21)?,
    })
}

/// The share of its own GPU trl 0.14 and 0.15's vLLM takes when `vllm_device` puts it there:
/// `LLM(gpu_memory_utilization=self.args.vllm_gpu_memory_utilization)` (trl 0.15.2
/// `GRPOTrainer.__init__`), the file's or that release's default (0.9, the TRL ladder).
fn own_gpu_share(t: &Tables) -> Result<Option<f64>, LoadError> {
    if !super::read_vllm_device::vllm_on_own_gpu(t)? {
        return Ok(None);
    }
    Ok(t.share(T::Grpo, "vllm_gpu_memory_utilization")?.or(t
        .versions
        .trl_default("vllm_gpu_memory_utilization")
        .and_then(|v| v.as_f64())))
}
