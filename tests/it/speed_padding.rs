//! The step's time runs on the lengths the step's tensors have: TRL 1.16 pads each step's
//! prompts and completions to a multiple of `pad_to_multiple_of` (trl 1.16.0
//! `GRPOTrainer._generate_and_score_completions`), so scoring and training pass over the padded
//! tokens; generation produces the completions themselves and is unchanged.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use serde_json::Value;

/// A TRL 1.16 run generating with transformers, with a reference model (a scoring pass):
/// prompts of 200 tokens and completions of 1000, both multiples of 8 and of neither 256.
fn run(pad: &str) -> String {
    format!(
        "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\ngpu = \"H100 SXM\"\nmax_prompt_length = 200\ntrl_version = \"1.16.0\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1000\nuse_vllm = false\nbeta = 0.04\n{pad}"
    )
}

/// The step's phases (generation, scoring, training) for the run padded by `pad`.
fn phases(pad: &str) -> [f64; 3] {
    let venv = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, run(pad)).unwrap();
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env("VIRTUAL_ENV", venv.path())
        .env_remove("CONDA_PREFIX")
        .args(["estimate", "--json", "--no-gpu", "--offline", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let phase = |name: &str| {
        v["step_time"]["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == name)
            .map(|p| p["seconds"].as_f64().unwrap())
            .unwrap()
    };
    [phase("generation"), phase("scoring"), phase("training")]
}

#[test]
fn pad_to_multiple_of_lengthens_scoring_and_training_not_generation() {
    let unpadded = phases("");
    assert!(unpadded.iter().all(|s| *s > 0.0), "{unpadded:?}");
    assert_eq!(
        phases("pad_to_multiple_of = 8\n"),
        unpadded,
        "200 and 1000 are multiples of 8"
    );
    assert_eq!(
        phases("pad_to_multiple_of = \"auto\"\n"),
        unpadded,
        "auto pads only on Neuron"
    );
    // 200 + 1000 tokens a row become 256 + 1024: x1280/1200 the tokens (and at most its square
    // for the attention's scores, which grow with the length too)
    let padded = phases("pad_to_multiple_of = 256\n");
    assert_eq!(padded[0], unpadded[0], "generation");
    for (i, name) in [(1, "scoring"), (2, "training")] {
        let ratio = padded[i] / unpadded[i];
        assert!(
            ratio > 1.04 && ratio <= (1280.0f64 / 1200.0).powi(2),
            "{name}: {} -> {} (x{ratio:.3})",
            unpadded[i],
            padded[i]
        );
    }
}
