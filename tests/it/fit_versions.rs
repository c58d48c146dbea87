//! `fit` on a run pinned to an older trainer: it moves only the knobs that release has.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{Out, grpofit_in, run};

/// Qwen2.5-7B LoRA with TRL, vLLM colocated with a 16384-token context: on 16 GiB, TRL 1.15's
/// fit shortens that context (`vllm_max_model_length`, a GRPOConfig key from trl 0.26).
const TRL_COLOCATED: &str =
    include_str!("../../crates/grpofit-core/tests/fixtures/trl_colocated_7b.toml");

/// `grpofit fit` on the file pinned to `trl`, with `extra` arguments.
fn fit_pinned(trl: &str, extra: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.toml"),
        TRL_COLOCATED.replace("1.15.0", trl),
    )
    .unwrap();
    run(grpofit_in(dir.path())
        .args(["fit", "--config", "run.toml", "--gpu-mem", "16GiB"])
        .args(extra))
}

#[test]
fn fit_never_moves_a_key_the_pinned_trl_lacks() {
    let now = fit_pinned("1.15.0", &["--json"]);
    assert_eq!(now.code, Some(0), "{}", now.stderr);
    let json: serde_json::Value = serde_json::from_str(&now.stdout).unwrap();
    let keys: Vec<&str> = json["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"vllm_max_model_length"), "{keys:?}");
    // trl 0.14 to 0.25 have no `vllm_max_model_length`: neither the changes nor the floors
    // name it, in JSON or in text
    for old in ["0.14.0", "0.19.1", "0.25.1"] {
        for format in [&["--json"][..], &[]] {
            let out = fit_pinned(old, format);
            assert!(matches!(out.code, Some(0 | 3)), "{old}: {}", out.stderr);
            assert!(!out.stdout.is_empty(), "{old}");
            assert!(
                !out.stdout.contains("vllm_max_model_length"),
                "{old} {format:?}: {}",
                out.stdout
            );
        }
    }
}

#[test]
fn fit_moves_the_context_from_trl_0_26() {
    // trl 0.26.2's GRPOConfig takes `vllm_max_model_length` (its own rung of the TRL ladder)
    let out = fit_pinned("0.26.2", &["--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let keys: Vec<&str> = json["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"vllm_max_model_length"), "{keys:?}");
}
