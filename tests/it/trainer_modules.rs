#![allow(clippy::unwrap_used)]
//! Trainer options that change what the step holds, end to end from the binary: PEFT's
//! `modules_to_save` (issue 29 N10).

use assert_cmd::Command;
use std::path::Path;

/// The TRL 1.15 colocated 7B run the core's fit tests use.
const RUN_7B: &str = "crates/grpofit-core/tests/fixtures/trl_colocated_7b.toml";

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

/// `estimate --json` of `file` on an 80 GB card: the JSON, the exit code and stderr.
fn estimate(file: &Path) -> (serde_json::Value, i32, String) {
    let out = grpofit()
        .args(["estimate", "--gpu-mem", "80GB", "--json", "--config"])
        .arg(file)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (v, out.status.code().unwrap(), err)
}

fn part(v: &serde_json::Value, name: &str) -> u64 {
    v["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["part"] == name)
        .map(|c| c["bytes"].as_u64().unwrap())
        .sum()
}

/// The 7B run file with `line` added to its `[lora]` table, in `dir`.
fn with_lora_line(dir: &Path, line: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(RUN_7B).unwrap();
    let text = text.replace("[lora]\n", &format!("[lora]\n{line}\n"));
    let path = dir.join("run.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Issue 29's done-when: "`modules_to_save` adds its copies". Qwen2.5-7B, lm_head and
/// embed_tokens: two V x H = 544,997,376-element bf16 copies, each in a 1,090,519,040 B block
/// (`memory::saved_modules`), their AdamW moments (4 blocks + 2 x 512 B), and the step's
/// training peak grows by at least the copies and their moments.
#[test]
fn modules_to_save_adds_its_copies() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, code, err) = estimate(Path::new(RUN_7B));
    assert_eq!(code, 0, "{err}");
    let file = with_lora_line(
        dir.path(),
        "modules_to_save = [\"lm_head\", \"embed_tokens\"]",
    );
    let (saved, code, err) = estimate(&file);
    assert!(code == 0 || code == 3, "{err}");
    assert_eq!(part(&plain, "saved_modules"), 0);
    assert_eq!(part(&saved, "saved_modules"), 2_181_038_080);
    let moments = part(&saved, "optimizer_states") - part(&plain, "optimizer_states");
    assert_eq!(moments, 4 * 1_090_519_040 + 2 * 512);
    let peak = |v: &serde_json::Value| v["training_peak_allocated_bytes"].as_u64().unwrap();
    assert!(peak(&saved) - peak(&plain) >= 2_181_038_080 + moments);
    // the table names it
    let out = grpofit()
        .args(["estimate", "--gpu-mem", "80GB", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("modules_to_save"));
}

/// A TRL recipe's `lora_modules_to_save` (trl ModelConfig, passed to `LoraConfig` by
/// `get_peft_config`) is read as `[lora] modules_to_save`.
#[test]
fn a_recipe_s_lora_modules_to_save_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.yaml");
    std::fs::write(
        &recipe,
        "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ntorch_dtype: bfloat16\nuse_peft: true\nlora_r: 16\nlora_modules_to_save:\n  - lm_head\nper_device_train_batch_size: 4\nnum_generations: 4\nmax_completion_length: 512\n",
    )
    .unwrap();
    let (v, code, err) = estimate(&recipe);
    assert!(code == 0 || code == 3, "{err}");
    assert_eq!(part(&v, "saved_modules"), 1_090_519_040);
}

/// Bad values stop with exit 2 and a message naming the file, the key and the value.
#[test]
fn a_bad_modules_to_save_names_file_key_and_value() {
    for (line, says) in [
        (
            "modules_to_save = \"lm_head\"",
            "expected a list of module names",
        ),
        (
            "modules_to_save = [\"lm_haed\"]",
            "names no module grpofit sizes",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let file = with_lora_line(dir.path(), line);
        let (_, code, err) = estimate(&file);
        assert_eq!(code, 2, "{line}: {err}");
        for part in ["run.toml", "modules_to_save", says] {
            assert!(err.contains(part), "{line}: {err}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = with_lora_line(dir.path(), "modules_to_save = [\"q_proj\"]");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("dtype = \"bfloat16\"", "load_in_4bit = true");
    std::fs::write(&file, text).unwrap();
    let (_, code, err) = estimate(&file);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("quantised projection"), "{err}");
    // Unsloth's get_peft_model handles the key its own way: refused, not estimated as PEFT's
    let unsloth = dir.path().join("unsloth.toml");
    let text = std::fs::read_to_string("presets/8gb.toml")
        .unwrap()
        .replace("[lora]\n", "[lora]\nmodules_to_save = [\"lm_head\"]\n");
    std::fs::write(&unsloth, text).unwrap();
    let (_, code, err) = estimate(&unsloth);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unsloth.toml:") && err.contains("modules_to_save"),
        "{err}"
    );
}

/// The step's logits component and training peak of the 7B run on TRL `release`, with `line`
/// added to `[grpo]`.
fn liger_run(release: &str, line: &str) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(RUN_7B)
        .unwrap()
        .replace(
            "trl_version = \"1.15.0\"",
            &format!("trl_version = \"{release}\""),
        )
        .replace("[grpo]\n", &format!("[grpo]\n{line}\n"));
    let file = dir.path().join("run.toml");
    std::fs::write(&file, text).unwrap();
    let (v, code, err) = estimate(&file);
    assert!(code == 0 || code == 3, "{release} {line}: {err}");
    let training = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "training")
        .unwrap();
    let parts = |name: &str| -> u64 {
        training["components"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["part"] == name)
            .map(|c| c["bytes"].as_u64().unwrap())
            .sum()
    };
    (
        parts("micro_batch_logits"),
        parts("logits"),
        v["training_peak_allocated_bytes"].as_u64().unwrap(),
    )
}

/// Issue 29's done-when: "`use_liger_kernel` removes the logits" (N8). TRL 0.17-0.25 read
/// `use_liger_loss` and 0.26-1.14 `use_liger_kernel` (`GRPOTrainer.__init__`), and compute the
/// loss from the hidden states in chunks (`compute_liger_loss`: liger-kernel's
/// `LigerFusedLinearGRPOLoss` to 1.12; TRL's own copy in 1.13; `_chunked_logps` in 1.14): the
/// micro-batch's materialised logits leave the step, and the peak falls. On 0.19 the old name
/// `use_liger_kernel` is TrainingArguments' layer patching and changes no logits; from 1.15 the
/// fused head runs whatever the flag says.
#[test]
fn use_liger_kernel_removes_the_logits() {
    for (release, key) in [
        ("0.19.1", "use_liger_loss"),
        ("1.10.0", "use_liger_kernel"),
        ("1.13.0", "use_liger_kernel"),
        ("1.14.2", "use_liger_kernel"),
    ] {
        let (plain_logits, _, plain_peak) = liger_run(release, "");
        let (logits, chunks, peak) = liger_run(release, &format!("{key} = true"));
        assert!(plain_logits > 0, "{release}");
        assert_eq!(
            logits, 0,
            "{release} {key}: the micro-batch's logits remain"
        );
        assert!(
            chunks < plain_logits,
            "{release}: {chunks} vs {plain_logits}"
        );
        assert!(peak < plain_peak, "{release}: {peak} vs {plain_peak}");
    }
    // the layer-kernel flag of trl 0.19 and the deprecated flag of 1.15 change nothing
    assert_eq!(
        liger_run("0.19.1", "use_liger_kernel = true"),
        liger_run("0.19.1", "")
    );
    assert_eq!(
        liger_run("1.15.0", "use_liger_kernel = true"),
        liger_run("1.15.0", "")
    );
}

/// N9: TRL scores the completions with each reward model over the whole local generation batch
/// (`_calculate_rewards`), between generation and the step, while vLLM keeps its share: a
/// `scoring` phase. Qwen2.5-7B as its own reward model, 8 rows of 256 + 4,096 tokens: 34,816
/// tokens x (3 x 2 x 18,944 MLP + 4 x 2 x 3,584 hidden-wide + 28 layers x 2 x 2 x 512 keys and
/// values) = 34,816 x 199,680 = 6,952,058,880 B (`frozen::reward_forward_bytes`).
#[test]
fn a_reward_model_scores_the_generation_batch_in_a_phase_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(RUN_7B).unwrap().replace(
        "[grpofit]\n",
        "[grpofit]\nreward_models = [\"Qwen/Qwen2.5-7B-Instruct\"]\n",
    );
    let file = dir.path().join("run.toml");
    std::fs::write(&file, text).unwrap();
    let (v, code, err) = estimate(&file);
    assert!(code == 0 || code == 3, "{err}");
    let scoring = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "scoring")
        .expect("a scoring phase");
    let forward: u64 = scoring["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["part"] == "reward_forward")
        .map(|c| c["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(forward, 6_952_058_880);
    // without a reward model, no such phase
    let (plain, _, _) = estimate(Path::new(RUN_7B));
    assert!(
        plain["phases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["phase"] != "scoring")
    );
}
