//! The step's terms a run file states beside the run (issue 31), from the binary end to end:
//! `[grpofit] reward_seconds`, the seconds a completion's reward functions take, and the
//! checkpoint saves of `[grpo] save_steps`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{grpofit_in, run};

/// `estimate --json`'s step time for the 24gb preset with `extra` added to `[grpofit]`.
fn step_json(extra: &str) -> serde_json::Value {
    step_json_with(extra, "")
}

/// The same with `grpo` added to `[grpo]`.
fn step_json_with(extra: &str, grpo: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("[grpofit]\n", &format!("[grpofit]\n{extra}"))
        .replace("[grpo]\n", &format!("[grpo]\n{grpo}"));
    std::fs::write(dir.path().join("run.toml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args(["estimate", "--config", "run.toml", "--json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    v["step_time"].clone()
}

fn phase(t: &serde_json::Value, name: &str) -> f64 {
    t["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap()["seconds"]
        .as_f64()
        .unwrap()
}

#[test]
fn reward_seconds_add_a_rewards_phase_for_every_completion_a_step_trains() {
    let without = step_json("");
    assert_eq!(phase(&without, "rewards"), 0.0);
    let with = step_json("reward_seconds = 0.25\n");
    // the 24gb preset trains 4 x 2 completions a step on its one GPU
    let rewards = phase(&with, "rewards");
    assert!((rewards - 0.25 * 8.0).abs() < 1e-9, "{rewards}");
    let added = with["seconds"].as_f64().unwrap() - without["seconds"].as_f64().unwrap();
    assert!((added - rewards).abs() < 1e-9, "{added}");
    let dir = tempfile::tempdir().unwrap();
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("[grpofit]\n", "[grpofit]\nreward_seconds = 0.25\n");
    std::fs::write(dir.path().join("run.toml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args(["estimate", "--config", "run.toml"]));
    assert!(out.stdout.contains("rewards 2.0 s"), "{}", out.stdout);
}

#[test]
fn a_negative_reward_seconds_names_file_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("[grpofit]\n", "[grpofit]\nreward_seconds = -1.5\n");
    std::fs::write(dir.path().join("run.toml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args(["estimate", "--config", "run.toml"]));
    assert_eq!(out.code, Some(2));
    for part in ["run.toml", "reward_seconds", "-1.5"] {
        assert!(out.stderr.contains(part), "{part}: {}", out.stderr);
    }
}

#[test]
fn a_save_every_few_steps_is_charged_to_each_step_and_none_without_saves() {
    let none = phase(&step_json_with("", "save_strategy = \"no\"\n"), "training");
    let default = phase(&step_json(""), "training");
    let every_2 = phase(&step_json_with("", "save_steps = 2\n"), "training");
    let every_1 = phase(&step_json_with("", "save_steps = 1\n"), "training");
    // the trainer's own default saves every 500 steps
    assert!(default > none, "{default} {none}");
    assert!(
        every_1 > every_2 && every_2 > default,
        "{every_1} {every_2} {default}"
    );
    let (one, two) = (every_1 - none, every_2 - none);
    assert!((one - 2.0 * two).abs() < 1e-9 * one.max(1.0), "{one} {two}");
    assert!((one - 500.0 * (default - none)).abs() < 1e-6 * one, "{one}");
    // saving the model alone leaves the optimizer's state out
    let model_only = phase(
        &step_json_with("", "save_steps = 1\nsave_only_model = true\n"),
        "training",
    );
    assert!(model_only < every_1 && model_only > none);
}

/// A TRL run on an H100 (the presets are Unsloth's, whose loader takes no
/// `attn_implementation`).
const TRL_RUN: &str = "[grpofit]\nstack = \"trl\"\ngpu = \"H100\"\ngpu_memory = \"80GB\"\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-0.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 3584\nuse_vllm = true\nvllm_mode = \"colocate\"\n";

/// `[model] attn_implementation = "eager"`: each layer's scores go through memory, so the
/// log-prob passes and the training take longer than SDPA's, and generation (vLLM's own
/// attention) does not change.
#[test]
fn eager_attention_slows_the_passes_that_run_it() {
    let dir = tempfile::tempdir().unwrap();
    let eager = TRL_RUN.replace("[model]\n", "[model]\nattn_implementation = \"eager\"\n");
    let step = |text: &str| {
        std::fs::write(dir.path().join("run.toml"), text).unwrap();
        let out = run(grpofit_in(dir.path()).args(["estimate", "--config", "run.toml", "--json"]));
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()["step_time"].clone()
    };
    let (sdpa, eager) = (step(TRL_RUN), step(&eager));
    assert!(
        phase(&eager, "training") > 1.2 * phase(&sdpa, "training"),
        "{eager} {sdpa}"
    );
    assert!(phase(&eager, "scoring") > phase(&sdpa, "scoring"));
    assert_eq!(phase(&eager, "generation"), phase(&sdpa, "generation"));
}

/// `estimate --json` for tests/fixtures/fastest/trl7.toml (TRL colocate, Qwen2.5-7B LoRA) on an
/// 80 GiB H100 with vLLM's share at 0.3, and `grpo` added to `[grpo]`.
fn trl7_on_h100(grpo: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fastest/trl7.toml"),
    )
    .unwrap()
    .replace("gpu_memory = \"39.39GiB\"", "gpu_memory = \"79.19GiB\"")
    .replace("gpu = \"A100 40GB SXM\"", "gpu = \"H100 SXM\"")
    .replace("vllm_gpu_memory_utilization = 0.5", "vllm_gpu_memory_utilization = 0.3")
    .replace("[grpo]\n", &format!("[grpo]\n{grpo}"));
    std::fs::write(dir.path().join("run.toml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args(["estimate", "--config", "run.toml", "--json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// vLLM decodes as many of the run's requests at once as its KV cache holds at their own length
/// (a request takes blocks for the tokens it holds: `KVCacheManager.allocate_slots`), so a
/// longer `max_model_len` with the same KV cache decodes no slower. Timed at `max_model_len`,
/// the 32,768-token context's generation took 31.8 s against 8.4 s at 1,536.
#[test]
fn vllm_decodes_as_many_requests_as_its_cache_holds_at_the_runs_length() {
    let long = trl7_on_h100("vllm_max_model_length = 32768\n");
    let short = trl7_on_h100("vllm_max_model_length = 1536\n");
    let kv = |v: &serde_json::Value| v["vllm"]["kv_cache_bytes"].as_f64().unwrap();
    let held = |v: &serde_json::Value| v["vllm"]["run_length_sequences"].as_f64().unwrap();
    // the same cache either way, within what the longer context's profile takes
    assert!((kv(&long) / kv(&short) - 1.0).abs() < 0.02, "{} {}", kv(&long), kv(&short));
    assert!((held(&long) / held(&short) - 1.0).abs() < 0.02);
    let (a, b) = (
        phase(&long["step_time"], "generation"),
        phase(&short["step_time"], "generation"),
    );
    assert!((a / b - 1.0).abs() < 0.02, "generation {a} s at 32768 against {b} s at 1536");
}
