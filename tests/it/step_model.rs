//! The step-time model's defects a QA review found (issue 31), each from the binary end to end
//! on the reviewer's run files (tests/fixtures/time/).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{Out, grpofit_in, run};
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/time/{name}"))
}

/// `grpofit <args> --config <fixture with each (from, to) replaced>`.
fn with(name: &str, edits: &[(&str, &str)], args: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(fixture(name)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{name}: {from}");
        text = text.replace(from, to);
    }
    std::fs::write(dir.path().join("run.toml"), &text).unwrap();
    let mut cmd = grpofit_in(dir.path());
    cmd.args(args).args(["--config", "run.toml"]);
    run(&mut cmd)
}

/// `estimate --json`'s `step_time`.
fn step(name: &str, edits: &[(&str, &str)]) -> Value {
    let out = with(name, edits, &["estimate", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["step_time"].clone()
}

fn phase(t: &Value, name: &str) -> f64 {
    t["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap()["seconds"]
        .as_f64()
        .unwrap()
}

/// Qwen2.5-7B-Instruct's 7.62 billion parameters in bf16 (its model card), read whole by every
/// decode step of each data-parallel copy.
const QWEN25_7B_BYTES: f64 = 7.62e9 * 2.0;

#[test]
fn a_data_parallel_server_reads_each_copys_whole_weights_every_decode_step() {
    let one = step("dp1.toml", &[]);
    let four = step("dp4.toml", &[]);
    let bandwidth = four["gpu"]["memory_gb_s"].as_f64().unwrap() * 1e9;
    // 14 completions of 1024 tokens: each copy decodes 1024 steps whatever its share
    let floor = QWEN25_7B_BYTES * 1024.0 / bandwidth;
    let g4 = phase(&four, "generation");
    let g1 = phase(&one, "generation");
    assert!(
        g4 >= floor,
        "4 copies: {g4} s under the weights' floor {floor} s"
    );
    assert!(g4 <= g1, "4 copies {g4} s slower than one {g1} s");
    // tensor parallelism splits the reads: 4 GPUs of one copy beat 4 copies on a weight-bound decode
    let tp4 = step(
        "dp4.toml",
        &[
            ("tensor_parallel_size = 1", "tensor_parallel_size = 4"),
            ("data_parallel_size = 4", "data_parallel_size = 1"),
        ],
    );
    let gt = phase(&tp4, "generation");
    assert!(gt < g4 / 2.0, "tp4 {gt} s against dp4 {g4} s");
}

#[test]
fn num_iterations_divides_the_generation_and_its_log_probs_among_the_steps_it_serves() {
    // ni4.toml: the 24gb preset (Unsloth's GRPOTrainer is TRL's) with `num_iterations = 4`
    let four = step("ni4.toml", &[]);
    let one = step("ni4.toml", &[("num_iterations = 4", "num_iterations = 1")]);
    for name in ["generation", "scoring"] {
        let (g4, g1) = (phase(&four, name), phase(&one, name));
        assert!(g1 > 0.0, "{name}");
        assert!(
            (g4 - g1 / 4.0).abs() < 1e-9 * g1,
            "{name}: {g4} s against {g1} s / 4"
        );
    }
    assert_eq!(phase(&four, "training"), phase(&one, "training"));
}

#[test]
fn a_run_whose_vllm_does_not_start_is_not_timed() {
    // p80-03.toml: the 80gb preset with vLLM's share below its weights: no KV cache block
    let out = with("p80-03.toml", &[], &["estimate"]);
    assert!(!out.stdout.contains("step ≈"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("step time: not estimated: vLLM does not start"),
        "{}",
        out.stdout
    );
    let json = with("p80-03.toml", &[], &["estimate", "--json"]);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["vllm"]["starts"], false);
    assert!(v["step_time"].is_null(), "{}", v["step_time"]);
    let note = v["step_time_note"].as_str().unwrap();
    assert!(
        note.contains("vLLM does not start (no room for a single KV cache block)"),
        "{note}"
    );
}

#[test]
fn cpu_offload_costs_the_host_optimizer_and_the_pcie_traffic() {
    // or1.toml / or1-off.toml: open-r1's 7B full fine-tuning under ZeRO-3, states on the GPU or
    // optimizer and parameters on the CPU
    let on_gpu = phase(&step("or1.toml", &[]), "training");
    let off = phase(&step("or1-off.toml", &[]), "training");
    // DeepSpeed's CPU Adam steps all 7.62e9 parameters on the node's cores; the GPU's own
    // AdamW step it replaces moves 28 bytes a parameter at 3.35 TB/s (under 0.1 s)
    let host = QWEN25_7B_BYTES / 2.0 / grpofit_core::time::offload::CPU_ADAM_PARAMS_PER_SECOND;
    assert!(
        off - on_gpu > host - 0.1,
        "{off} s against {on_gpu} s (+{host} s)"
    );
    // the parameters alone on the host: each pass fetches them over PCIe
    let params_only = phase(
        &step(
            "or1-off.toml",
            &[(
                "offload_optimizer = \"cpu\"",
                "offload_optimizer = \"none\"",
            )],
        ),
        "training",
    );
    assert!(params_only > on_gpu, "{params_only} s against {on_gpu} s");
    assert!(params_only < off, "{params_only} s against {off} s");
}

#[test]
fn a_generation_batch_of_two_to_the_24_is_timed_and_searched() {
    // slow.toml: mean_completion_length with a huge generation_batch_size; the longest of n
    // completions took a harmonic sum of n terms, which never ended at 2^24
    let edits = [(
        "generation_batch_size = 1048576",
        "generation_batch_size = 16777216",
    )];
    let t = step("slow.toml", &edits);
    assert!(t["seconds"].as_f64().unwrap().is_finite(), "{t}");
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("slow.toml"))
        .unwrap()
        .replace(edits[0].0, edits[0].1);
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    // a hang guard, not a timing: the search takes milliseconds
    let out = run(grpofit_in(dir.path())
        .args(["fit", "--fastest", "--config", "run.toml"])
        .timeout(std::time::Duration::from_secs(120)));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[test]
fn card_figure_flags_out_of_the_file_keys_range_exit_2_naming_flag_and_value() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value) in [
        ("--gpu-tflops", "0"),
        ("--gpu-tflops", "nan"),
        ("--gpu-tflops", "inf"),
        ("--gpu-bandwidth", "0"),
        ("--gpu-bandwidth", "1e-300"),
    ] {
        let out = run(grpofit_in(dir.path()).args(["estimate", "--preset", "24gb", flag, value]));
        assert_eq!(out.code, Some(2), "{flag} {value}: {}", out.stdout);
        assert!(
            out.stderr.contains(flag) && out.stderr.contains(value),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("out of range"), "{}", out.stderr);
    }
    let out = run(grpofit_in(dir.path()).args([
        "estimate",
        "--preset",
        "24gb",
        "--gpu-tflops",
        "500",
        "--gpu-bandwidth",
        "2000",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("step ≈"), "{}", out.stdout);
}

#[test]
fn the_cards_keys_say_what_is_wrong_with_file_and_key() {
    // a card the table lacks, named by the file: fit --fastest names the file and key
    let out = with(
        "ni4.toml",
        &[("gpu = \"RTX 4090\"", "gpu = \"MI300X\"")],
        &["fit", "--fastest"],
    );
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("run.toml: `[grpofit] gpu = \"MI300X\"`"),
        "{}",
        out.stderr
    );
    // a blank name says blank
    let out = with(
        "ni4.toml",
        &[("gpu = \"RTX 4090\"", "gpu = \"  \"")],
        &["estimate"],
    );
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("gpu = \"  \"`: blank"),
        "{}",
        out.stderr
    );
    // one figure of the two for a card the table lacks names the missing one
    let out = with(
        "ni4.toml",
        &[("gpu = \"RTX 4090\"", "gpu = \"MI300X\"\ngpu_tflops = 1000")],
        &["estimate"],
    );
    assert!(
        out.stdout
            .contains("`[grpofit] gpu_bandwidth` (`--gpu-bandwidth`) is missing"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_mean_completion_length_may_be_a_decimal_and_above_the_cap_is_said_capped() {
    let decimal = step(
        "ni4.toml",
        &[(
            "gpu = \"RTX 4090\"",
            "gpu = \"RTX 4090\"\nmean_completion_length = 300.5",
        )],
    );
    assert_eq!(decimal["completion_tokens"], 300.5);
    assert!(decimal.get("mean_capped_from").is_none());
    let edits = [(
        "gpu = \"RTX 4090\"",
        "gpu = \"RTX 4090\"\nmean_completion_length = 5000",
    )];
    let capped = step("ni4.toml", &edits);
    // ni4.toml's max_completion_length is 768
    assert_eq!(capped["completion_tokens"], 768.0);
    assert_eq!(capped["mean_capped_from"], 5000.0);
    let out = with("ni4.toml", &edits, &["estimate"]);
    assert!(out.stdout.contains("mean_completion_length = 5000` is above `max_completion_length`: completions timed at the cap, 768 tokens"), "{}", out.stdout);
}

#[test]
fn the_step_line_names_the_log_prob_passes_and_says_what_it_leaves_out() {
    let out = with("ni4.toml", &[], &["estimate"]);
    assert!(out.stdout.contains(", log-probs 0.2 s,"), "{}", out.stdout);
    assert!(!out.stdout.contains("scoring"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "not counted: the reward functions (give `[grpofit] reward_seconds`, or `grpofit calibrate` learns it from a run's log), logging"
        ),
        "{}",
        out.stdout
    );
    let timed = with(
        "ni4.toml",
        &[(
            "gpu = \"RTX 4090\"",
            "gpu = \"RTX 4090\"\nreward_seconds = 0.5",
        )],
        &["estimate"],
    );
    assert!(
        timed.stdout.contains("not counted: logging, evaluation"),
        "{}",
        timed.stdout
    );
    // the JSON's phase key stays `scoring` (docs/json.md)
    assert!(phase(&step("ni4.toml", &[]), "scoring") > 0.0);
}
