//! Runs pinned to a TRL before 1.x, end to end: what those releases do that today's does not
//! (the colocated vLLM's context, the key `diagnose` names for it).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{Out, component, estimate_80gib, grpofit_in, run};

/// Qwen2.5-7B LoRA with TRL, vLLM colocated, no context set: 256-token prompts and
/// 1024-token completions.
const TRL_COLOCATED: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256
trl_version = "1.15.0"

[model]
model_name_or_path = "Qwen/Qwen2.5-7B-Instruct"
dtype = "bfloat16"

[lora]
r = 16
lora_alpha = 32
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 1024
use_vllm = true
vllm_mode = "colocate"
vllm_gpu_memory_utilization = 0.3
"#;

/// `grpofit ARGS --config run.toml` on the file pinned to `trl`.
fn pinned(trl: &str, args: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.toml"),
        TRL_COLOCATED.replace("1.15.0", trl),
    )
    .unwrap();
    run(grpofit_in(dir.path())
        .args(args)
        .args(["--config", "run.toml", "--gpu-mem", "80GiB"]))
}

/// vLLM's `max_model_len` in `estimate --json` on the file pinned to `trl`.
fn vllm_context(trl: &str) -> u64 {
    let out = pinned(trl, &["estimate", "--json"]);
    assert!(matches!(out.code, Some(0 | 3)), "{trl}: {}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    json["vllm"]["max_model_len"].as_u64().unwrap()
}

#[test]
fn trl_0_18_to_0_25_give_colocated_vllm_prompt_plus_completion() {
    // trl 0.19.1 GRPOTrainer.__init__: LLM(max_model_len=max_prompt_length + max_completion_length)
    for old in ["0.18.2", "0.19.1", "0.23.0", "0.25.1"] {
        assert_eq!(vllm_context(old), 256 + 1024, "{old}");
    }
    // the text says it too
    let text = pinned("0.19.1", &["estimate"]);
    assert!(
        text.stdout.contains("sequences of 1280 tokens"),
        "{}",
        text.stdout
    );
    // trl 0.26.2 on, vllm_max_model_length unset: the model's own context (Qwen2.5-7B: 32768)
    for new in ["0.26.2", "1.15.0"] {
        assert_eq!(vllm_context(new), 32768, "{new}");
    }
}

/// The advice of `diagnose --config` on vLLM's refusal for want of KV cache (a 40960-token
/// context, 32768 what fits), with the run file pinned to `trl`: the line that shortens the context.
fn context_advice(trl: &str) -> String {
    let log =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oom/vllm-kv-cache-long.txt");
    let out = pinned(trl, &["diagnose", log.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{trl}: {}", out.stderr);
    out.stdout
        .lines()
        .find(|l| l.contains("shorten its context"))
        .unwrap_or_else(|| panic!("{trl}: {}", out.stdout))
        .to_string()
}

#[test]
fn diagnose_names_the_context_key_of_the_pinned_trl() {
    // GRPOConfig's vllm_max_model_length from trl 0.26 (the TRL ladder)
    for new in ["0.26.2", "0.28.0", "1.15.0"] {
        let a = context_advice(new);
        assert!(a.contains("(`vllm_max_model_length`)"), "{new}: {a}");
    }
    // trl 0.15.2 GRPOTrainer.__init__: LLM(max_model_len=self.args.vllm_max_model_len)
    let a = context_advice("0.15.2");
    assert!(a.contains("(`vllm_max_model_len`)"), "{a}");
    // trl 0.19.1: LLM(max_model_len=self.max_prompt_length + self.max_completion_length)
    let a = context_advice("0.19.1");
    assert!(
        a.contains("`max_prompt_length` + `max_completion_length`, now 256 + 1024"),
        "{a}"
    );
    // trl 0.16 and 0.17 generate only in `trl vllm-serve`; trl 0.14 passes vLLM no context
    let a = context_advice("0.16.1");
    assert!(a.contains("`trl vllm-serve --max_model_len`"), "{a}");
    let a = context_advice("0.14.0");
    assert!(a.contains("no key in trl 0.14.0"), "{a}");
    for old in ["0.14.0", "0.15.2", "0.16.1", "0.19.1", "0.23.0"] {
        assert!(
            !context_advice(old).contains("vllm_max_model_length"),
            "{old}"
        );
    }
}

/// A component's bytes in `estimate --json` (0 when absent).
#[test]
fn four_bit_weights_keep_no_more_activations_under_trl() {
    // bitsandbytes' MatMul4Bit.forward saves only the packed weight, ctx.tensors = (None, B)
    // (bitsandbytes 0.46.0 autograd/_functions.py): NF4 leaves the activations as they were
    let estimate = |four_bit: bool| -> serde_json::Value {
        let dir = tempfile::tempdir().unwrap();
        let text = TRL_COLOCATED.replace("1.15.0", "0.19.1");
        let text = if four_bit {
            text.replace(
                "dtype = \"bfloat16\"",
                "dtype = \"bfloat16\"\nload_in_4bit = true",
            )
        } else {
            text
        };
        std::fs::write(dir.path().join("run.toml"), text).unwrap();
        let out = run(grpofit_in(dir.path()).args([
            "estimate",
            "--json",
            "--config",
            "run.toml",
            "--gpu-mem",
            "80GiB",
        ]));
        assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    };
    let (bf16, nf4) = (estimate(false), estimate(true));
    assert_eq!(
        component(&nf4, "activations"),
        component(&bf16, "activations")
    );
    assert!(component(&nf4, "base_weights") < component(&bf16, "base_weights"));
    assert!(nf4["total_bytes"].as_u64() < bf16["total_bytes"].as_u64());
}

#[test]
fn trl_0_15_reads_vllm_max_model_len_as_the_colocated_context() {
    // trl 0.15.2 GRPOTrainer.__init__: LLM(max_model_len=self.args.vllm_max_model_len); the
    // key diagnose names for that release loads as vLLM's context: that release's own key, so
    // neither "read but not exported" nor refused
    let dir = tempfile::tempdir().unwrap();
    let text = TRL_COLOCATED
        .replace("1.15.0", "0.15.2")
        .replace("vllm_mode = \"colocate\"", "vllm_max_model_len = 2048");
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "estimate",
        "--json",
        "--config",
        "run.toml",
        "--gpu-mem",
        "80GiB",
    ]));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["vllm"]["max_model_len"], 2048, "{}", out.stdout);
    assert!(!out.stderr.contains("vllm_max_model_len"), "{}", out.stderr);
}

/// `estimate --json` on `TRL_COLOCATED` pinned to `trl`, without the lines holding `drop`.
fn estimate_without(trl: &str, drop: &[&str]) -> serde_json::Value {
    let text: String = TRL_COLOCATED
        .replace("1.15.0", trl)
        .lines()
        .filter(|l| !drop.iter().any(|d| l.starts_with(d)))
        .map(|l| format!("{l}\n"))
        .collect();
    estimate_80gib(&text, &[], trl)
}

#[test]
fn use_vllm_alone_runs_where_the_pinned_trl_puts_vllm() {
    let roles = |json: &serde_json::Value| -> Vec<String> {
        json["roles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["role"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    // GRPOConfig.vllm_mode defaults to "server" from trl 0.18.2 to 0.29.1 (the TRL ladder), and
    // 0.16/0.17 only build a VLLMClient: `trl vllm-serve`, no vLLM on the training GPU
    for server in ["0.16.1", "0.19.1", "0.28.0"] {
        let json = estimate_without(server, &["vllm_mode"]);
        assert!(json["vllm"].is_null(), "{server}: {}", json["vllm"]);
        assert!(
            roles(&json).contains(&"vllm_server".to_string()),
            "{server}"
        );
    }
    // "colocate" from 1.0; trl 0.15 starts vLLM on the only GPU
    for colocated in ["0.15.2", "1.0.0", "1.15.0"] {
        let json = estimate_without(colocated, &["vllm_mode"]);
        assert!(!json["vllm"].is_null(), "{colocated}");
    }
    // the share's default: 0.9 in trl 0.14 and 0.15 (GRPOConfig.vllm_gpu_memory_utilization), 0.3 later
    let share = |trl: &str| {
        estimate_without(trl, &["vllm_mode", "vllm_gpu_memory_utilization"])["vllm"]["utilization"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(share("0.15.2"), 0.9);
    assert_eq!(share("1.15.0"), 0.3);
}
