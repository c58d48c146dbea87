//! The public figures that come with a configuration (`tests/speed/figures.jsonl`, each with its
//! source): transformers' `generate` at batch 1 on an A10G, and prime-rl's training tokens a
//! second on an H100, from the model's generation and training phases alone. A figure off by
//! more than x1.5 is listed in `MISSES` with the term the model lacks. Prints the table with
//! `cargo test --test it speed_figures -- --nocapture`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::arch::Arch;
use grpofit_core::config;
use grpofit_core::memory::estimate::{GpuBudget, estimate};
use grpofit_core::run::{Checkpointing, Generation, Optimizer, RunConfig, Stack};
use grpofit_core::time::{self, Efficiencies, TimeKeys};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/speed")
}

/// The figures the model misses by more than x1.5, each with the term it lacks.
const MISSES: &[(&str, &str)] = &[
    (
        "train-primerl-qwen3-0.6b-full-16k-h100",
        "prime-rl's RL step beside the pass: the same table's SFT trainer runs the same model, length, recompute and attention at 20.94k tokens/s (0.39 s a micro-batch, within x1.5 here) where its RL trainer runs 8.95k (0.92 s): about 0.5 s a micro-batch that is prime-rl's RL step's own (its bench mode feeds fake data and broadcasts no weights, `trainer/rl/train.py`; which part of its loss and statistics takes it is not identified), not a pass TRL runs; 0.87 s of passes here and that 0.5 s give the measured 1.38 s",
    ),
    (
        "train-primerl-qwen3-0.6b-lora16-8k-h100",
        "as the 16k row: prime-rl's RL step carries about 0.5 s a micro-batch beside the pass (its SFT row at 8k is within x1.5), against 0.48 s of LoRA passes here for a measured 0.80 s",
    ),
];

fn arch(model: &str, model_config: Option<&str>) -> Arch {
    let mut text = format!(
        "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"{model}\"\ndtype = \"bfloat16\"\n"
    );
    if let Some(c) = model_config {
        text = text.replace("[model]", &format!("model_config = \"{c}\"\n[model]"));
    }
    config::parse(
        &text,
        model,
        Some(&folder()),
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap()
    .run
    .arch
}

/// One sequence a step: the figure's own shape.
fn single(arch: Arch, full: bool, prompt: u64, completion: u64) -> RunConfig {
    let mut run = RunConfig::example(arch);
    run.stack = Stack::Trl;
    run.full_finetuning = full;
    run.micro_batch = 1;
    run.grad_accum = 1;
    run.num_generations = 1;
    run.prompt_len = prompt;
    run.completion_len = completion;
    run.max_seq_len = prompt + completion;
    run.optimizer = Optimizer::AdamW;
    run
}

fn phase_seconds(run: &RunConfig, gpu: &str, phase: &str) -> f64 {
    let est = estimate(
        run,
        GpuBudget {
            capacity: 200 << 30,
            used_by_others: 0,
            context: None,
        },
    );
    let card = time::gpu_speed(Some(gpu), None, None).unwrap();
    // the figures time the pass alone: no checkpoint saved
    let keys = TimeKeys {
        save_strategy: Some("no".into()),
        ..TimeKeys::default()
    };
    time::step_time(run, &est, &card, &keys, &Efficiencies::default()).phase(phase)
}

/// Tokens a second the model predicts for a figure.
fn predicted(f: &Value) -> f64 {
    let c = &f["config"];
    match f["kind"].as_str().unwrap() {
        "hf_generate" => {
            let a = arch(c["model"].as_str().unwrap(), c["model_config"].as_str());
            let new = c["new_tokens"].as_u64().unwrap();
            let mut run = single(a, true, c["prompt_length"].as_u64().unwrap(), new);
            run.generation = Generation::Transformers;
            new as f64 / phase_seconds(&run, "A10G", "generation")
        }
        "training" => {
            let a = arch(c["model"].as_str().unwrap(), None);
            let len = c["sequence_length"].as_u64().unwrap();
            let full = c["full_finetuning"].as_bool().unwrap();
            let mut run = single(a, full, 0, len);
            if let Some(r) = c["lora_r"].as_u64() {
                run.lora_rank = r;
            }
            run.checkpointing = if c["recompute"].as_bool().unwrap() {
                Checkpointing::On
            } else {
                Checkpointing::Off
            };
            len as f64 / phase_seconds(&run, "H100", "training")
        }
        other => panic!("{other}"),
    }
}

#[test]
fn the_public_figures_come_within_x1_5_or_name_the_missing_term() {
    let text = std::fs::read_to_string(folder().join("figures.jsonl")).unwrap();
    let mut table = String::new();
    for f in text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        let id = f["id"].as_str().unwrap();
        let measured = f["measured"]["tokens_per_second"].as_f64().unwrap();
        let p = predicted(&f);
        // a time ratio, as the runs' table gives it: predicted seconds over measured
        let ratio = measured / p;
        table.push_str(&format!(
            "{id:<52} measured {measured:>9.1} tok/s predicted {p:>9.1} time x{ratio:.2}\n"
        ));
        let within = (1.0 / 1.5..=1.5).contains(&ratio);
        match MISSES.iter().find(|(m, _)| *m == id) {
            None => assert!(within, "{id}: x{ratio:.2}\n{table}"),
            Some((_, why)) => assert!(
                !within,
                "{id} is listed as a miss ({why}) but comes within x1.5 (x{ratio:.2})"
            ),
        }
    }
    println!("{table}");
}
