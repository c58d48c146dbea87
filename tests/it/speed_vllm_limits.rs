//! `fit --fastest` moves vLLM's `max_num_seqs` and `max_num_batched_tokens` where the trainer
//! passes them on: Unsloth's colocated vLLM (`[model] max_num_seqs` into `load_vllm` from
//! unsloth_zoo 2025.11.6, `max_num_batched_tokens` from 2026.10.9). A generation batch larger
//! than the sequences Unsloth's own table lets vLLM decode at once, with a KV cache that holds
//! them, decodes faster with a larger `max_num_seqs`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// The 24gb preset with Qwen2.5-0.5B and 128 completions a generation: Unsloth's table gives
/// vLLM 80 sequences while its KV cache holds hundreds of full-length ones.
fn many_rows() -> String {
    grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("Qwen2.5-3B-Instruct", "Qwen2.5-0.5B-Instruct")
        .replace(
            "per_device_train_batch_size = 4",
            "per_device_train_batch_size = 16",
        )
        .replace(
            "gradient_accumulation_steps = 2",
            "gradient_accumulation_steps = 8",
        )
        .replace("num_generations = 4", "num_generations = 16")
}

fn grpofit(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        .env("GRPOFIT_CONFIG_DIR", dir.join("config"))
        .arg("--no-gpu")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let (code, out, err) = grpofit(dir, args);
    assert!(code == Some(0) || code == Some(3), "{err}");
    serde_json::from_str(&out).unwrap()
}

fn seqs_change(v: &Value) -> Option<&Value> {
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "max_num_seqs")
}

#[test]
fn a_kv_cache_holding_more_than_max_num_seqs_gets_a_larger_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), many_rows()).unwrap();
    let before = json(dir.path(), &["estimate", "--config", "run.toml", "--json"]);
    let own = before["vllm"]["max_num_seqs"].as_u64().unwrap();
    let full = before["vllm"]["full_length_sequences"].as_f64().unwrap();
    assert!(
        full > 2.0 * own as f64,
        "{own} sequences, {full} full-length"
    );
    let v = json(
        dir.path(),
        &["fit", "--fastest", "--config", "run.toml", "--json"],
    );
    let c = seqs_change(&v).unwrap_or_else(|| panic!("{v}"));
    // what Unsloth's table gives once the changes before this one are made (a larger share
    // takes a larger tier)
    let from = c["from"].as_str().unwrap();
    let then: u64 = from
        .strip_prefix("unset (")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{c}"))
        .parse()
        .unwrap();
    assert!(then >= own, "{c}");
    let to: u64 = c["to"].as_str().unwrap().parse().unwrap();
    assert!(to > then && to as f64 <= full, "{c}");
    assert!(c["seconds_saved"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["bytes_saved"].is_number(), "{c}");
    // said in words, and written to the run file where Unsloth's `from_pretrained` takes it
    let (code, text, err) = grpofit(
        dir.path(),
        &[
            "fit",
            "--fastest",
            "--config",
            "run.toml",
            "-o",
            "fast.toml",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        text.contains(&format!("max_num_seqs: {from} → {to}: saves ")),
        "{text}"
    );
    let written = std::fs::read_to_string(dir.path().join("fast.toml")).unwrap();
    assert!(
        written.contains(&format!("max_num_seqs = {to}")),
        "{written}"
    );
    let after = json(dir.path(), &["estimate", "--config", "fast.toml", "--json"]);
    assert_eq!(after["vllm"]["max_num_seqs"], to);
    assert!(
        after["step_time"]["seconds"].as_f64().unwrap()
            < before["step_time"]["seconds"].as_f64().unwrap()
    );
}

#[test]
fn a_trainer_that_sizes_vllm_itself_keeps_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    // unsloth_zoo before 2025.11.6: `load_vllm` takes no `max_num_seqs` (its own tier)
    let old = many_rows().replace("[grpofit]\n", "[grpofit]\nunsloth_version = \"2025.8.9\"\n");
    std::fs::write(dir.path().join("old.toml"), old).unwrap();
    let v = json(
        dir.path(),
        &["fit", "--fastest", "--config", "old.toml", "--json"],
    );
    assert!(seqs_change(&v).is_none(), "{v}");
    // TRL's colocated vLLM gets the generation batch (`GRPOTrainer.__init__`): no key to move
    let trl = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/grpofit-core/tests/fixtures/trl_colocated_7b.toml"
    ))
    .unwrap();
    std::fs::write(dir.path().join("trl.toml"), trl).unwrap();
    let v = json(
        dir.path(),
        &[
            "fit",
            "--fastest",
            "--config",
            "trl.toml",
            "--gpu",
            "H100",
            "--gpu-mem",
            "80GiB",
            "--json",
        ],
    );
    let keys: Vec<&str> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(
        !keys.contains(&"max_num_seqs") && !keys.contains(&"max_num_batched_tokens"),
        "{keys:?}"
    );
}
