//! vLLM's defaults by release, end to end: `trl vllm-serve` passes no batch limits, so the
//! server's `max_num_seqs` and `max_num_batched_tokens` (and the profile run they size) follow
//! the pinned vLLM and how the pinned TRL starts it.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{grpofit_in, run};

/// The open-r1 shape (7 H100s training, an eighth serving) with `pins` as `[grpofit]` lines:
/// the server role's `(max_num_seqs, max_num_batched_tokens, profiled activations)`.
fn server(pins: &str) -> (u64, u64, u64) {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/multi-gpu/open-r1-7plus1-h100.toml"
    );
    let text = std::fs::read_to_string(example).unwrap().replace(
        "max_prompt_length = 512\n",
        &format!("max_prompt_length = 512\n{pins}\n"),
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let venv = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--offline", "--config", "run.toml"]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let est: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let role = est["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "vllm_server")
        .unwrap_or_else(|| panic!("no server role: {est}"));
    let plan = &role["vllm"];
    let n = |key: &str| plan[key].as_u64().unwrap();
    (
        n("max_num_seqs"),
        n("max_num_batched_tokens"),
        n("activations_bytes"),
    )
}

#[test]
fn the_servers_batch_follows_how_the_pinned_trl_starts_vllm() {
    // trl 1.15 runs `vllm serve`: vLLM 0.23's server pair on an 80 GB card, 1024 and 8192
    let today = server("trl_version = \"1.15.0\"\nvllm_version = \"0.23.0\"");
    // trl 1.10 builds `LLM(...)` itself: the offline pair, 16384 tokens, a larger profile run
    let older = server("trl_version = \"1.10.0\"\nvllm_version = \"0.23.0\"");
    assert_eq!((today.0, today.1), (1024, 8192));
    assert_eq!((older.0, older.1), (1024, 16384));
    assert!(older.2 > today.2, "{older:?} vs {today:?}");
}

#[test]
fn vllm_0_7_sizes_the_servers_batch_by_its_context() {
    // vLLM 0.7's V0 engine: 256 sequences and max_model_len (4096) tokens; 0.8's V1 the
    // offline pair for `LLM(...)`
    let v07 = server("trl_version = \"0.16.1\"\nvllm_version = \"0.7.2\"");
    let v08 = server("trl_version = \"0.16.1\"\nvllm_version = \"0.8.5\"");
    assert_eq!((v07.0, v07.1), (256, 4096));
    assert_eq!((v08.0, v08.1), (1024, 16384));
}

/// Qwen2.5-1.5B LoRA with TRL, vLLM colocated on an 80 GB card, pinned to `trl` and vLLM 0.8.5:
/// the colocated plan's `(max_num_batched_tokens, profiled activations)`.
fn colocated(trl: &str) -> (u64, u64) {
    let text = format!(
        "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 512\ntrl_version = \"{trl}\"\nvllm_version = \"0.8.5\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\n"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let venv = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--offline", "--config", "run.toml"]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let est: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let plan = &est["vllm"];
    (
        plan["max_num_batched_tokens"].as_u64().unwrap(),
        plan["activations_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn trl_0_18s_colocated_vllm_takes_vllms_own_batched_tokens() {
    // trl 0.19 on passes max_num_batched_tokens = 4096; trl 0.18.2 passes none, so vLLM
    // 0.8.5's `LLM(...)` default on a card of 70 GiB or more, 16384, sizes the profile run
    let passed = colocated("0.19.1");
    let default = colocated("0.18.2");
    assert_eq!(passed.0, 4096);
    assert_eq!(default.0, 16384);
    assert!(default.1 > passed.1, "{default:?} vs {passed:?}");
}

/// Qwen2.5-1.5B LoRA with TRL colocating vLLM on an 80 GB card, the releases pinned by `pins`
/// (`[grpofit]` lines), with `extra` lines in `[grpo]`: the whole estimate.
fn colocated_estimate(pins: &str, extra: &str) -> serde_json::Value {
    let text = format!(
        "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 512\n{pins}\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\n{extra}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let venv = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--offline", "--config", "run.toml"]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// Issue 29 N11: vLLM profiles its CUDA graphs inside `gpu_memory_utilization` from 0.20.0
/// (vllm 0.20.0 `envs.py`: `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` defaults to "1"), so on
/// 0.20 the graphs come out of the KV cache's share; on 0.19 (the same variable, default "0")
/// they were captured outside it.
#[test]
fn vllm_0_20_counts_cuda_graphs_inside_its_share() {
    let kv = |v: &serde_json::Value| v["vllm"]["kv_cache_bytes"].as_u64().unwrap();
    let v19 = colocated_estimate("vllm_version = \"0.19.0\"", "");
    let v20 = colocated_estimate("vllm_version = \"0.20.0\"", "");
    let graphs = v20["vllm"]["cuda_graphs_bytes"].as_u64().unwrap();
    assert!(graphs > 0);
    assert_eq!(kv(&v19) - kv(&v20), graphs);
}

/// Issue 29 N12: TRL's `llm.sleep(level=2)` frees only what vLLM's `CuMemAllocator` pool holds,
/// the weights and the KV cache (vllm 0.20.0 `v1/worker/gpu_worker.py` `Worker.sleep`:
/// `allocator.sleep(offload_tags=())`; `device_allocator/cumem.py` `CuMemAllocator.sleep`).
/// The CUDA graphs are captured outside that pool (`compile_or_warm_up_model`) and stay on
/// the GPU while the trainer runs its step.
#[test]
fn sleep_level_2_keeps_vllms_cuda_graphs_while_training() {
    let v = colocated_estimate(
        "vllm_version = \"0.31.0\"",
        "vllm_enable_sleep_mode = true\n",
    );
    let training = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "training")
        .unwrap();
    let part = |name: &str| {
        training["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["part"] == name)
            .map_or(0, |c| c["bytes"].as_u64().unwrap())
    };
    assert_eq!(
        part("vllm_cuda_graphs"),
        v["vllm"]["cuda_graphs_bytes"].as_u64().unwrap()
    );
    assert_eq!(part("vllm_kv_cache"), 0);
    assert_eq!(
        part("vllm_weights"),
        v["vllm"]["non_torch_bytes"].as_u64().unwrap()
    );
}

/// Issue 29 N14: trl 0.18.2 and 0.19.1 size the colocated vLLM's `max_num_seqs` as
/// `per_device_train_batch_size x vllm_tensor_parallel_size x gradient_accumulation_steps`
/// (`GRPOTrainer.__init__`), though they already generate `steps_per_generation` micro-batches
/// at once; trl 0.20.0 passes `steps_per_generation`. 8 rows, 4 accumulation steps, 2 steps
/// per generation: 32 sequences on 0.19.1, 16 on 0.20.0.
#[test]
fn trl_0_19_sizes_colocated_vllm_by_gradient_accumulation() {
    let grpo = "gradient_accumulation_steps = 4\nsteps_per_generation = 2\n";
    let seqs = |trl: &str| {
        let pins = format!("trl_version = \"{trl}\"\nvllm_version = \"0.8.5\"");
        colocated_estimate(&pins, grpo)["vllm"]["max_num_seqs"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(seqs("0.18.2"), 32);
    assert_eq!(seqs("0.19.1"), 32);
    assert_eq!(seqs("0.20.0"), 16);
}
