#![allow(clippy::unwrap_used)]
//! Journeys: a user's path from a realistic input to the files they would launch, from the
//! binary. Each exported set is read the way the trainers read it: `tests/journeys/
//! check_export.py` parses `tuned.yaml` with PyYAML (as TRL's `TrlParser` does) and checks each
//! key against the declared type of the `GRPOScriptArguments` / `GRPOConfig` / `ModelConfig`
//! field it sets (crates/grpofit-core/src/contract/field_types.json, from the ladders' wheels), `run.toml`
//! against the same and the contract's LoraConfig / Unsloth calls, `accelerate.yaml` against
//! accelerate's `ClusterConfig`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

const RECIPES: &str = "tests/fixtures/recipes";
const JOURNEYS: &str = "tests/fixtures/journeys";

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu")
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX");
    c
}

/// `estimate ARGS --export-dir DIR` in a new temporary folder: the folder kept alive, the set's
/// folder, and stderr then stdout.
fn export(args: &[&str]) -> (tempfile::TempDir, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let out = grpofit()
        .arg("estimate")
        .args(args)
        .arg("--export-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
    let said = err + &String::from_utf8_lossy(&out.stdout);
    (tmp, dir, said)
}

/// The checker's findings on the set in `dir` (against `source` when given).
pub(crate) fn check(dir: &Path, source: Option<&Path>) -> Value {
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("tests/journeys/check_export.py").arg(dir);
    if let Some(s) = source {
        cmd.arg(s);
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "the check failed (it needs PyYAML): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Nothing the trainers would refuse, and nothing of the source dropped or changed unless
/// `changed` names it.
fn assert_kept(v: &Value, changed: &[&str]) {
    assert_eq!(v["type_errors"], serde_json::json!([]), "{v}");
    assert_eq!(v["dropped"], serde_json::json!([]), "{v}");
    let keys: Vec<&str> = v["changed"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, changed, "{v}");
}

fn files(v: &Value) -> Vec<&str> {
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

fn launch(v: &Value) -> String {
    let lines = v["launch"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{v}");
    lines[0].as_str().unwrap().to_string()
}

#[test]
fn an_open_r1_recipe_on_zero2_launches_open_r1_s_script_on_the_tuned_recipe() {
    let recipe = format!("{RECIPES}/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml");
    let zero2 = format!("{RECIPES}/accelerate_configs/zero2.yaml");
    let (_tmp, dir, err) = export(&[
        "--config",
        &recipe,
        "--launch",
        &zero2,
        "--num-processes",
        "7",
        "--gpu-mem",
        "80GiB",
    ]);
    let v = check(&dir, Some(Path::new(&recipe)));
    assert_eq!(
        files(&v),
        [
            "accelerate.yaml",
            "ds_config.json",
            "launch.sh",
            "tuned.yaml"
        ],
        "no stand-in script beside a recipe"
    );
    assert_kept(&v, &[]);
    let t = &v["tuned"];
    assert_eq!(t["learning_rate"], 2e-5);
    assert_eq!(t["lr_scheduler_type"], "cosine");
    assert_eq!(t["num_train_epochs"], 1);
    assert_eq!(t["seed"], 42);
    assert_eq!(t["output_dir"], "data/Qwen2.5-1.5B-Open-R1-GRPO");
    assert_eq!(t["report_to"], serde_json::json!(["wandb"]));
    assert_eq!(t["attn_implementation"], "flash_attention_2");
    assert_eq!(v["accelerate"]["distributed_type"], "DEEPSPEED");
    assert_eq!(v["accelerate"]["num_processes"], 7);
    assert!(
        v["unknown"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| !u.as_str().unwrap().starts_with("accelerate.yaml"))
    );
    // open-r1's rewards (accuracy, format, tag_count) load only in open-r1's own script
    assert!(
        launch(&v).ends_with(
            "accelerate launch --config_file accelerate.yaml src/open_r1/grpo.py --config tuned.yaml"
        ),
        "{v}"
    );
    assert!(err.contains("launch.sh runs src/open_r1/grpo.py"), "{err}");
}

#[test]
fn an_open_r1_lora_recipe_on_zero3_keeps_all_linear_a_string_and_finds_its_script() {
    // the recipe inside an open-r1 checkout, as its users keep it
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("open-r1");
    let recipes = root.join("recipes/DeepSeek-R1-Distill-Qwen-1.5B/grpo");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::create_dir_all(root.join("src/open_r1")).unwrap();
    std::fs::write(root.join("src/open_r1/grpo.py"), "# open-r1's script\n").unwrap();
    let recipe = recipes.join("config_lora.yaml");
    std::fs::copy(
        format!("{JOURNEYS}/open-r1-distill-1.5b-lora.yaml"),
        &recipe,
    )
    .unwrap();
    let zero3 = format!("{RECIPES}/accelerate_configs/zero3.yaml");
    let (_out, dir, _) = export(&[
        "--config",
        recipe.to_str().unwrap(),
        "--launch",
        &zero3,
        "--gpu-mem",
        "80GiB",
    ]);
    let v = check(&dir, Some(&recipe));
    assert_kept(&v, &[]);
    let t = &v["tuned"];
    // PEFT expands "all-linear" only as a string (tuners_utils._maybe_include_all_linear_layers)
    assert_eq!(t["lora_target_modules"], "all-linear");
    assert_eq!(t["lora_dropout"], 0.05);
    assert_eq!(t["learning_rate"], 1e-6);
    assert_eq!(t["temperature"], 0.7);
    assert_eq!(
        t["lr_scheduler_kwargs"],
        serde_json::json!({"min_lr_rate": 0.1})
    );
    let ds: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ds_config.json")).unwrap())
            .unwrap();
    assert_eq!(ds["zero_optimization"]["stage"], 3);
    let script = std::path::absolute(root.join("src/open_r1/grpo.py")).unwrap();
    assert!(
        launch(&v).ends_with(&format!(
            "accelerate launch --config_file accelerate.yaml {} --config tuned.yaml",
            script.display()
        )),
        "{v}"
    );
}

#[test]
fn the_trl_docs_example_fitted_then_exported_launches_trl_grpo() {
    let source = format!("{JOURNEYS}/trl-docs-grpo.yaml");
    let tmp = tempfile::tempdir().unwrap();
    let fitted = tmp.path().join("fitted.yaml");
    grpofit()
        .args(["fit", "--config", &source, "--gpu-mem", "6GiB", "-o"])
        .arg(&fitted)
        .assert()
        .code(0);
    let (_out, dir, _) = export(&["--config", fitted.to_str().unwrap(), "--gpu-mem", "6GiB"]);
    let v = check(&dir, Some(Path::new(&source)));
    // the fit's keys changed, as numbers of the fields' types; nothing else
    assert_kept(
        &v,
        &[
            "gradient_accumulation_steps",
            "per_device_train_batch_size",
            "vllm_gpu_memory_utilization",
        ],
    );
    let t = &v["tuned"];
    assert!(t["per_device_train_batch_size"].is_u64(), "{t}");
    assert!(t["vllm_gpu_memory_utilization"].is_f64(), "{t}");
    assert_eq!(t["lora_target_modules"], "all-linear");
    assert_eq!(
        t["reward_funcs"],
        serde_json::json!(["accuracy_reward", "think_format_reward"])
    );
    assert_eq!(v["unknown"], serde_json::json!(["warmup_ratio"]), "{v}");
    assert!(
        launch(&v).ends_with(
            "accelerate launch --config_file accelerate.yaml -m trl.scripts.grpo --config tuned.yaml"
        ),
        "{v}"
    );
    let sh = std::fs::read_to_string(dir.join("launch.sh")).unwrap();
    assert!(sh.contains("`trl grpo --config tuned.yaml`"), "{sh}");
}

#[test]
fn a_recipe_with_anchors_and_merge_keys_exports_what_pyyaml_reads() {
    let source = format!("{JOURNEYS}/trl-anchors.yaml");
    let (_tmp, dir, _) = export(&["--config", &source, "--gpu-mem", "24GiB"]);
    let v = check(&dir, Some(Path::new(&source)));
    assert_kept(&v, &[]);
    let t = &v["tuned"];
    // the root merges `batch`'s keys; the alias repeats the anchored value
    assert_eq!(t["per_device_train_batch_size"], 4);
    assert_eq!(t["gradient_accumulation_steps"], 4);
    assert_eq!(t["logging_dir"], t["output_dir"]);
    assert_eq!(t["learning_rate"], 5e-6);
    assert!(launch(&v).contains("-m trl.scripts.grpo --config tuned.yaml"));
}

#[test]
fn unsloth_notebook_parameters_get_a_stand_in_said_plainly() {
    let source = format!("{JOURNEYS}/unsloth-notebook.toml");
    let (_tmp, dir, err) = export(&["--config", &source, "--gpu-mem", "80GiB"]);
    let v = check(&dir, None);
    assert_eq!(files(&v), ["launch.sh", "run.toml", "train_unsloth.py"]);
    assert_eq!(v["type_errors"], serde_json::json!([]), "{v}");
    assert_eq!(v["unknown"], serde_json::json!([]), "{v}");
    let grpo = &v["run"]["grpo"];
    assert_eq!(grpo["learning_rate"], 5e-6);
    assert_eq!(grpo["report_to"], "none");
    assert_eq!(grpo["max_steps"], 100);
    assert_eq!(v["run"]["lora"]["random_state"], 3407);
    // on standard error as the set is written, and with the report on standard output
    assert_eq!(
        err.matches("train_unsloth.py is a STAND-IN").count(),
        2,
        "{err}"
    );
    let sh = std::fs::read_to_string(dir.join("launch.sh")).unwrap();
    assert!(sh.contains("# STAND-IN TASK"), "{sh}");
    let script = std::fs::read_to_string(dir.join("train_unsloth.py")).unwrap();
    assert!(script.starts_with("\"\"\"STAND-IN TASK"), "{script}");
}

#[test]
fn a_recipe_exported_as_a_run_file_keeps_all_linear_a_string() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run.toml");
    grpofit()
        .args([
            "estimate",
            "--config",
            &format!("{JOURNEYS}/trl-docs-grpo.yaml"),
        ])
        .args(["--gpu-mem", "24GiB", "--export"])
        .arg(&out)
        .assert()
        .code(0);
    let v = check(tmp.path(), None);
    assert_eq!(v["type_errors"], serde_json::json!([]), "{v}");
    assert_eq!(v["run"]["lora"]["target_modules"], "all-linear");
}
