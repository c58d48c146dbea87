//! Unsloth's defaults by release, end to end: where a run file leaves a `[model]` or `[lora]`
//! key out, the estimate takes the default of the Unsloth release the file pins.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{grpofit_in, run};

/// Qwen2.5-1.5B (a 32768-token context) LoRA with Unsloth, vLLM colocated; `{pins}` are the
/// `[grpofit]` version lines, `{model}` and `{lora}` extra keys of those tables.
const UNSLOTH_RUN: &str = r#"
[grpofit]
stack = "unsloth"
gpu_memory = "79.19GiB"
max_prompt_length = 256
{pins}

[model]
model_name = "Qwen/Qwen2.5-1.5B-Instruct"
load_in_4bit = false
fast_inference = true
gpu_memory_utilization = 0.5
{model}

[lora]
r = 16
{lora}

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 512
"#;

/// `estimate --json` of the run pinned to `unsloth` (with a TRL and vLLM it accepts), with
/// extra `[model]` and `[lora]` lines, in an empty Python environment.
fn estimate(unsloth: &str, model: &str, lora: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let (trl, vllm) = if unsloth.starts_with("2025.") {
        ("0.15.2", "0.7.2")
    } else {
        ("0.24.0", "0.11.0")
    };
    let pins = format!(
        "unsloth_version = \"{unsloth}\"\ntrl_version = \"{trl}\"\nvllm_version = \"{vllm}\""
    );
    let text = UNSLOTH_RUN
        .replace("{pins}", &pins)
        .replace("{model}", model)
        .replace("{lora}", lora);
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let venv = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--offline", "--config", "run.toml"]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The training step's peak (the activations checkpointing keeps are in it).
fn training_peak(est: &serde_json::Value) -> u64 {
    est["training_peak_allocated_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no training peak: {est}"))
}

#[test]
fn max_seq_length_left_out_is_the_models_context_on_unsloth_2025_2() {
    // unsloth 2025.2.15 `from_pretrained(max_seq_length = None)`: llama.py takes the model's
    // max_position_embeddings (32768), which becomes vLLM's max_model_len; 2048 from 2025.3.19
    for (unsloth, context) in [("2025.2.15", 32768), ("2025.3.19", 2048)] {
        let est = estimate(unsloth, "", "");
        assert_eq!(est["vllm"]["max_model_len"], context, "{unsloth}: {est}");
    }
    // what the file says wins on every release
    for unsloth in ["2025.2.15", "2025.3.19"] {
        let est = estimate(unsloth, "max_seq_length = 1024", "");
        assert_eq!(est["vllm"]["max_model_len"], 1024, "{unsloth}");
    }
}

#[test]
fn use_gradient_checkpointing_true_keeps_layer_inputs_on_the_gpu_only_where_nothing_patched_torch()
{
    let on = "use_gradient_checkpointing = true";
    let offload = "use_gradient_checkpointing = \"unsloth\"";
    // unsloth 2025.2.15: get_peft_model defaults to True and nothing patches torch's
    // checkpoint, so every layer's input stays on the GPU
    let old = |lora| training_peak(&estimate("2025.2.15", "", lora));
    assert_eq!(old(""), old(on));
    assert!(old("") > old(offload), "{} vs {}", old(""), old(offload));
    // 2025.3.19 to 2026.1 (True its default up to 2025.5): from_pretrained's "unsloth" has
    // made every checkpoint Unsloth's offloaded one, so True offloads too
    for unsloth in ["2025.3.19", "2026.1.4"] {
        let later = |lora| training_peak(&estimate(unsloth, "", lora));
        assert_eq!(later(""), later(offload), "{unsloth}");
        assert_eq!(later(on), later(offload), "{unsloth}");
    }
    // 2026.10's get_peft_model undoes that patch for True: on the GPU again
    let today = |lora| training_peak(&estimate("2026.10.9", "", lora));
    assert!(
        today(on) > today(offload),
        "{} vs {}",
        today(on),
        today(offload)
    );
}

#[test]
fn unsloth_checkpointing_stays_on_the_gpu_under_512_tokens_from_unsloth_2026_10() {
    // apply_unsloth_gradient_checkpointing (2026.10.9): "unsloth" below a 512-token
    // max_seq_length is torch's own checkpointing; 2026.1.4 offloads at any length
    let on = "use_gradient_checkpointing = true";
    let peak = |unsloth, model, lora| training_peak(&estimate(unsloth, model, lora));
    let short = "max_seq_length = 384";
    assert_eq!(peak("2026.10.9", short, ""), peak("2026.10.9", short, on));
    assert!(peak("2026.1.4", short, "") < peak("2026.10.9", short, ""));
    // from 512 tokens it offloads again
    let at_512 = "max_seq_length = 512";
    assert!(peak("2026.10.9", at_512, "") < peak("2026.10.9", at_512, on));
}

/// Issue 29 N16: unsloth_zoo 2026.10.9 `load_vllm` picks its `(max_num_batched_tokens,
/// max_num_seqs)` tier from its own KV estimate, `approximate_vllm_memory_usage` with
/// `weight_bytes = vllm_weights_memory_usage(...)`: every linear weight but the LM head at
/// `2 / (16/5)` bytes when 4-bit (5 bits, where bitsandbytes stores about 4.1), not vLLM's
/// real weights. Llama-3.1-8B in 4 bits on 24 GiB at a 0.6 share: 14.15 GiB less Unsloth's
/// count (about 6.1 GiB with LoRA) and the 0.15 GiB graph reserve leaves under 8 GiB, the
/// (4, 8] tier: 32 sequences, where vLLM's 5.62 GiB of weights would leave 8.38 GiB (48).
#[test]
fn unsloth_2026_picks_its_batch_tier_from_its_own_weight_count() {
    let text = r#"
[grpofit]
stack = "unsloth"
gpu_memory = "24GiB"
max_prompt_length = 256
unsloth_version = "2026.10.9"

[model]
model_name = "unsloth/Meta-Llama-3.1-8B-Instruct"
load_in_4bit = true
fast_inference = true
max_seq_length = 1024
gpu_memory_utilization = 0.6

[lora]
r = 16

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 512
"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "estimate",
        "--json",
        "--offline",
        "--config",
        "run.toml",
    ]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let est: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let plan = &est["vllm"];
    assert_eq!(plan["max_num_seqs"], 32, "{plan}");
    assert_eq!(plan["max_num_batched_tokens"], 4096, "{plan}");
    // vLLM's own weights (bitsandbytes' bytes) would have left the (8, 12] tier
    let left = plan["budget_bytes"].as_u64().unwrap() - plan["weights_bytes"].as_u64().unwrap();
    assert!(left as f64 / (1u64 << 30) as f64 - 0.15 > 8.0, "{plan}");
}

/// Issue 29 N17: unsloth_zoo 2025.8.9 `load_vllm` checks its KV estimate's token count
/// (`int(0.95 x left / kv_elements)`, rounded down to 256) twice: 256 when it is 0, and
/// `max_seq_length` lowered to it when it is no more ("Your GPU cannot handle sequence lengths
/// of ..."). The lowered `max_seq_length` is vLLM's `max_model_len` (`LLM(max_model_len =
/// max_seq_length)`) as well as its chunked-prefill tokens. Llama-3.1-8B in 4 bits asking for
/// 65536 tokens on 24 GiB: vLLM is started with 53504.
#[test]
fn unsloth_2025_8_lowers_vllms_context_to_its_kv_estimate() {
    let text = r#"
[grpofit]
stack = "unsloth"
gpu_memory = "24GiB"
max_prompt_length = 256
unsloth_version = "2025.8.9"
trl_version = "0.19.1"
vllm_version = "0.9.2"

[model]
model_name = "unsloth/Meta-Llama-3.1-8B-Instruct"
load_in_4bit = true
fast_inference = true
max_seq_length = 65536
gpu_memory_utilization = 0.6

[lora]
r = 16

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 512
"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "estimate",
        "--json",
        "--offline",
        "--config",
        "run.toml",
    ]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let est: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let plan = &est["vllm"];
    let context = plan["max_model_len"].as_u64().unwrap();
    assert_eq!(context, 53504, "{plan}");
    assert_eq!(plan["max_num_batched_tokens"], context, "{plan}");
}

/// Where Unsloth raises the micro-batch to `num_generations` (unsloth#3572), the batch line
/// says what it runs (6 completions, 1 prompt x 6 generations), not the file's 1 completion as
/// "0.17 prompts x 6 generations"; the screen's batch line says the same.
#[test]
fn the_batch_line_says_what_unsloth_runs_when_it_raises_the_micro_batch() {
    let dir = tempfile::tempdir().unwrap();
    let text = include_str!("../fixtures/journeys/unsloth-notebook.toml")
        .replace("num_generations = 4", "num_generations = 6");
    std::fs::write(dir.path().join("run.toml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "--offline",
        "estimate",
        "--config",
        "run.toml",
        "--gpu-mem",
        "24GiB",
    ]));
    assert!(
        out.stdout.contains(
            "effective batch 1 completion (1 per device x 1 accumulation x 1 GPU) as written; \
             Unsloth runs 6 completions (micro-batch 6): 1 prompt x 6 generations"
        ),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("0.17 prompts"), "{}", out.stdout);
    let file = grpofit_core::config::load(
        &dir.path().join("run.toml"),
        &grpofit_core::resolve::Offline::default(),
    )
    .unwrap();
    let gpu = grpofit::tui::app::GpuState {
        capacity: 24 << 30,
        capacity_from_user: true,
        name: "--gpu-mem".into(),
        live: None,
        unavailable: None,
    };
    let app = grpofit::tui::app::App::new(
        file,
        gpu,
        grpofit::tui::theme::Theme::mono(),
        dir.path().to_path_buf(),
    );
    let s = crate::tui::screen(&app, 120, 40);
    assert!(s.contains("Unsloth runs 6 = 1 prompt × 6 gens"), "{s}");
}

/// `estimate --json` gives the batch Unsloth runs where it raises the micro-batch (6
/// completions, 1 prompt), and the file's own (1 completion, 0.17 prompts) under
/// `effective_batch_as_written` / `prompts_per_step_as_written`; a run it does not raise has
/// neither key.
#[test]
fn the_json_batch_is_what_unsloth_runs_and_the_file_is_kept_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let notebook = include_str!("../fixtures/journeys/unsloth-notebook.toml");
    let json = |text: &str| {
        std::fs::write(dir.path().join("run.toml"), text).unwrap();
        let out = run(grpofit_in(dir.path()).args([
            "--offline",
            "estimate",
            "--json",
            "--config",
            "run.toml",
            "--gpu-mem",
            "24GiB",
        ]));
        assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()
    };
    let raised = json(&notebook.replace("num_generations = 4", "num_generations = 6"));
    assert_eq!(raised["effective_batch"], 6, "{raised}");
    assert_eq!(raised["prompts_per_step"], 1.0, "{raised}");
    assert_eq!(raised["running_micro_batch"], 6, "{raised}");
    assert_eq!(raised["effective_batch_as_written"], 1, "{raised}");
    let written = raised["prompts_per_step_as_written"].as_f64().unwrap();
    assert!((written - 1.0 / 6.0).abs() < 1e-9, "{raised}");
    let kept = json(&notebook.replace(
        "per_device_train_batch_size = 1",
        "per_device_train_batch_size = 4",
    ));
    assert_eq!(kept["effective_batch"], 4, "{kept}");
    assert!(kept.get("effective_batch_as_written").is_none(), "{kept}");
    assert!(kept.get("prompts_per_step_as_written").is_none(), "{kept}");
}
