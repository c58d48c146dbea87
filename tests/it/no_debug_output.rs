//! No Rust `Debug` text reaches the user: `estimate`, `fit`, `presets`, `models` and `diagnose`
//! over every preset and both stacks print the domain's names (`Display`), never a variant's
//! identifier (`Nf4`, `UnslothOffload`, `VllmShare`...) nor `Some(..)` / `None`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use regex::Regex;
use std::path::{Path, PathBuf};

/// What `{:?}` of an option or a result prints.
const DEBUG_CALLS: [&str; 3] = ["Some(", "Ok(", "Err("];

/// What `{:?}` of the domain's enums prints, and no user-facing text contains: every variant of
/// every `pub enum` in the core (read from its source, so a new variant is covered the day it is
/// written) whose identifier is a compound (`UnslothOffload`, `VllmShare`) or carries a digit
/// (`Nf4`, `Bf16`), the single-word ones that are no English word, and `None`. The trainers' own
/// class names (`LoraConfig`...) and the model families (`Qwen2`) are user-facing, so variants
/// named after them are left out.
fn debug_words() -> Vec<String> {
    // single-word variants that are no English word
    const NOT_WORDS: [&str; 3] = ["None", "Trl", "Sgd"];
    // variants named as the trainers name their classes, which messages cite
    const TRAINERS_NAMES: [&str; 5] = [
        "GrpoConfig",
        "LoraConfig",
        "TrlModelConfig",
        "FastModel",
        "DeepSpeed",
    ];
    let variant = Regex::new(r"^\s+([A-Z][A-Za-z0-9]*)\s*(?:[,({]|$)").unwrap();
    let mut words: Vec<String> = NOT_WORDS.iter().map(|w| w.to_string()).collect();
    let core = root().join("crates/grpofit-core/src");
    let mut files = vec![core];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for block in text.split("\npub enum ").skip(1) {
            // the architecture families are named as the models are (`Qwen2`, `Gemma3`)
            if block.starts_with("Family ") {
                continue;
            }
            let body = block.split_once('{').map_or("", |(_, b)| b);
            let body = body.split("\n}").next().unwrap_or("");
            for line in body.lines() {
                let Some(c) = variant.captures(line) else {
                    continue;
                };
                let name = &c[1];
                let compound = name.chars().filter(char::is_ascii_uppercase).count() > 1;
                let digit = name.chars().any(|ch| ch.is_ascii_digit());
                if (compound || digit) && !TRAINERS_NAMES.contains(&name) {
                    words.push(name.to_string());
                }
            }
        }
    }
    words.extend(["RunConfig", "GpuBudget"].map(String::from));
    words.sort();
    words.dedup();
    words
}

#[test]
fn the_debug_words_come_from_the_enums() {
    let words = debug_words();
    // a few of every kind, from enums in different files
    for w in [
        "Nf4",
        "UnslothOffload",
        "VllmShare",
        "VllmCannotStart",
        "MicroBatchLogitsFp32",
        "KvCacheTooSmall",
        "ColocatedVllm",
    ] {
        assert!(words.iter().any(|x| x == w), "{w} not among {words:?}");
    }
    assert!(!words.iter().any(|x| x == "Training" || x == "LoraConfig"));
}

const PRESETS: [&str; 8] = [
    "8gb", "12gb", "16gb", "22gib", "24gb", "48gb", "80gb", "141gb",
];

/// A TRL run (vLLM colocated, 16-bit weights, gradient checkpointing, torch AdamW).
const TRL_RUN: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256

[model]
model_name_or_path = "Qwen/Qwen2.5-1.5B-Instruct"
dtype = "bfloat16"

[lora]
r = 16
lora_alpha = 32
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_completion_length = 1024
gradient_checkpointing = true
optim = "adamw_torch"
use_vllm = true
vllm_mode = "colocate"
vllm_gpu_memory_utilization = 0.3
"#;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs grpofit without NVML and returns standard output and error together.
fn output(args: &[&str]) -> String {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .arg("--no-gpu")
        .args(args)
        .output()
        .unwrap();
    let code = out.status.code();
    // 0 fits, 3 does not, 2 bad input (its message is checked too); 101 would be a panic
    assert!(
        matches!(code, Some(0 | 2 | 3)),
        "grpofit {args:?} exited {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut text = String::from_utf8(out.stdout).unwrap();
    text.push_str(&String::from_utf8(out.stderr).unwrap());
    text
}

fn assert_no_debug(args: &[&str], text: &str) {
    let calls: Vec<String> = DEBUG_CALLS.iter().map(|c| regex::escape(c)).collect();
    let debug = Regex::new(&format!(
        r"\b(?:{})\b|\b(?:{})",
        debug_words().join("|"),
        calls.join("|")
    ))
    .unwrap();
    for line in text.lines() {
        if let Some(hit) = debug.find(line) {
            panic!(
                "grpofit {args:?} printed Debug text \"{}\" in:\n{line}",
                hit.as_str()
            );
        }
    }
}

fn check(args: &[&str]) {
    let text = output(args);
    assert!(!text.trim().is_empty(), "grpofit {args:?} printed nothing");
    assert_no_debug(args, &text);
}

#[test]
fn the_token_check_catches_debug_output() {
    // the check itself: a line with a variant's identifier or an option's Debug fails it
    for line in [
        "weights Nf4",
        "gc UnslothOffload",
        "changed VllmShare",
        "Some(4)",
        "share None",
    ] {
        let r = std::panic::catch_unwind(|| assert_no_debug(&["x"], line));
        assert!(r.is_err(), "{line} passed the check");
    }
    assert_no_debug(
        &["x"],
        "unsloth · 4-bit NF4 · gc unsloth · adamw_8bit · vLLM share",
    );
}

#[test]
fn every_preset_estimates_and_fits_without_debug_text() {
    for preset in PRESETS {
        check(&["estimate", "--preset", preset]);
        check(&["estimate", "--preset", preset, "--json"]);
        check(&["fit", "--preset", preset]);
        // too small for any preset: the fit changes knobs, or names its floors
        check(&["estimate", "--preset", preset, "--gpu-mem", "6GiB"]);
        check(&["fit", "--preset", preset, "--gpu-mem", "6GiB"]);
        check(&["fit", "--preset", preset, "--gpu-mem", "6GiB", "--json"]);
    }
    // a mid-sized card: some presets fit after a few changes
    for preset in ["24gb", "48gb", "80gb"] {
        check(&["fit", "--preset", preset, "--gpu-mem", "20GiB"]);
    }
}

#[test]
fn a_trl_run_estimates_and_fits_without_debug_text() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("trl.toml");
    std::fs::write(&path, TRL_RUN).unwrap();
    let path = path.to_str().unwrap();
    for gpu in ["80GiB", "24GiB", "12GiB", "4GiB"] {
        check(&["estimate", "--config", path, "--gpu-mem", gpu]);
        check(&["fit", "--config", path, "--gpu-mem", gpu]);
    }
}

#[test]
fn listings_and_diagnoses_print_no_debug_text() {
    check(&["presets"]);
    check(&["models"]);
    // refusals of bad input
    check(&["estimate", "--preset", "no-such-tier"]);
    check(&["estimate", "--preset", "24gb", "--gpu-mem", "24"]);
    check(&["fit", "--preset", "24gb", "--headroom", "-5"]);
    let oom = root().join("tests/oom");
    for entry in std::fs::read_dir(&oom).unwrap() {
        let log = entry.unwrap().path();
        let log = log.to_str().unwrap();
        check(&["diagnose", log]);
        check(&["diagnose", log, "--preset", "24gb"]);
    }
}
