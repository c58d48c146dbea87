//! The step-time model against ten real GRPO runs with their measured seconds per step
//! (`tests/speed/cases.jsonl`, copied with their sources from public notebooks; README there),
//! and the vLLM decode figures that come with a configuration. Prints the table with
//! `cargo test --test it speed -- --nocapture`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::config;
use grpofit_core::memory::estimate::{GpuBudget, estimate};
use grpofit_core::time::{self, Efficiencies, StepTime};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/speed")
}

/// A case: its id, measured seconds a step, and the prediction.
pub(crate) struct Case {
    pub id: String,
    pub gpu: String,
    pub measured: f64,
    pub predicted: StepTime,
}

/// The card a case names ("NVIDIA A100-SXM4-40GB", "A100 80GB (inferred: ...)"), without the
/// aside in brackets.
fn card(case: &Value) -> String {
    let gpu = case["gpu"].as_str().unwrap();
    gpu.split(" (").next().unwrap().trim().to_string()
}

pub(crate) fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(folder().join("cases.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|c| c["kind"] == "grpo_step")
        .map(|c| {
            let id = c["id"].as_str().unwrap().to_string();
            let mut root: toml::Table = c["toml"].as_str().unwrap().parse().unwrap();
            let own = root["grpofit"].as_table_mut().unwrap();
            own.insert("gpu".into(), toml::Value::String(card(&c)));
            if let Some(mean) = c["derived"]["mean_completion_tokens"].as_f64() {
                own.insert(
                    "mean_completion_length".into(),
                    toml::Value::Integer(mean.round() as i64),
                );
            }
            let text = toml::to_string(&root).unwrap();
            let file = config::parse(
                &text,
                &id,
                Some(&folder()),
                &grpofit_core::resolve::Offline::from_env(),
            )
            .unwrap_or_else(|e| panic!("{id}: {e}"));
            let budget = GpuBudget {
                capacity: file.gpu_memory.unwrap(),
                used_by_others: 0,
                context: None,
            };
            let est = estimate(&file.run, budget);
            let gpu = time::gpu_speed(file.time.gpu.as_deref(), None, None)
                .unwrap_or_else(|e| panic!("{id}: {e}"));
            let predicted =
                time::step_time(&file.run, &est, &gpu, &file.time, &Efficiencies::default());
            Case {
                id,
                gpu: gpu.name,
                measured: c["derived"]["seconds_per_step"].as_f64().unwrap(),
                predicted,
            }
        })
        .collect()
}

/// The runs the model misses by more than x1.5, each with the term it lacks (the model is not
/// tuned to them: docs/accuracy.md). A case listed here that comes within x1.5 fails too, so the
/// list stays true.
pub(crate) const MISSES: &[(&str, &str)] = &[
    (
        "spd-nb-mistral-7b-qlora-rtx4090-vllm",
        "bitsandbytes' dequantise-then-matmul path is charged 4.5 bytes a weight each decode step (32.6 GB for Mistral-7B): at the 4090's 1 TB/s even the mean completion's 189 steps would take 9 s of a measured 10.3 s step, so its decode moves far fewer bytes; the same notebook runs 7x faster than on the T4 against 3.2x the bandwidth. Which kernel path vLLM 0.8.5 took on this card is not known",
    ),
    (
        "spd-nb-r1-0528-qwen3-8b-qlora-a100-40gb-vllm-fulllength",
        "72 ms a decode step measured against 35 ms of bandwidth and 7 ms of LoRA kernels: vLLM's bitsandbytes layers (a dequantize and a matmul per shard) run at about half the bandwidth their bytes would take, which no sourced figure gives",
    ),
    (
        "spd-trl-cookbook-qwen2-0.5b-lora-a100-80gb-colocate-c64",
        "host work: the median 6 s between its weight syncs (the save every 10 steps is modelled, about 1 MB of adapters and moments, and its Hub push runs as a future) against 2.1 s of GPU work leaves about 4 s a step of TRL's per-micro-batch loop over 16 micro-batches, vLLM's scheduling and detokenising of 128 completions and the rewards, which no sourced figure gives",
    ),
    (
        "spd-nb-gpt-oss-20b-bf16-lora-a100-80gb-hfgen",
        "the reward functions run and benchmark the generated Python on the CPU inside each step (the case's own note): `[grpofit] reward_seconds` times such rewards, but nothing the notebook printed measures them. The generation is the path the code takes: Unsloth 2025.10.4 generates in eval mode (`unsloth_unwrap_model_for_generation` -> `for_inference`), where unsloth_zoo 2025.10.4's decode runs every expert in one compiled block (`moe_forward_inference_bf16`): all 32 experts read each step, as charged (34 s of generation), not TRL's training-mode expert loop",
    ),
    (
        "spd-trl-nbu-lmassaron-gemma3-270m-lora-rtx3090-colocate",
        "the completions' length was not logged: timed at the full 1024 tokens where short sentiment answers were generated",
    ),
];

fn within(ratio: f64) -> bool {
    (1.0 / 1.5..=1.5).contains(&ratio)
}

#[test]
fn the_ten_public_runs_come_within_x1_5_or_name_the_missing_term() {
    let cases = cases();
    assert_eq!(cases.len(), 10, "ten GRPO runs in tests/speed/cases.jsonl");
    let mut table = String::new();
    for c in &cases {
        let p = &c.predicted;
        let ratio = p.seconds / c.measured;
        table.push_str(&format!(
            "{:<58} {:<14} measured {:>7.2} s predicted {:>7.2} s x{:.2}  (generation {:.1}, sync {:.1}, scoring {:.1}, training {:.1})\n",
            c.id,
            c.gpu,
            c.measured,
            p.seconds,
            ratio,
            p.phase("generation"),
            p.phase("weight_sync"),
            p.phase("scoring"),
            p.phase("training")
        ));
        let miss = MISSES.iter().find(|(id, _)| *id == c.id);
        match miss {
            None => assert!(within(ratio), "{}: x{ratio:.2} off\n{table}", c.id),
            Some((_, why)) => assert!(
                !within(ratio),
                "{} is listed as a miss ({why}) but comes within x1.5 (x{ratio:.2}): take it off the list",
                c.id
            ),
        }
    }
    println!("{table}");
}

/// The vLLM decode record (ML.ENERGY, Qwen3-8B on one H100): output tokens a second at each
/// measured running batch, from the model's decode term alone.
#[test]
fn the_h100_decode_record_comes_within_x1_5() {
    let text = std::fs::read_to_string(folder().join("cases.jsonl")).unwrap();
    let record: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|c| c["kind"] == "vllm_decode")
        .unwrap();
    let arch = config::parse(
        "[grpofit]\nstack = \"trl\"\nmodel_config = \"configs/qwen3-8b.json\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen3-8B\"\ndtype = \"bfloat16\"\n",
        "qwen3-8b",
        Some(&folder()),
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap()
    .run
    .arch;
    let card = time::gpu_speed(Some("NVIDIA H100 80GB HBM3"), None, None).unwrap();
    for point in record["observed"]["points"].as_array().unwrap() {
        let batch = point["avg_batch_size"].as_f64().unwrap();
        let out_len = point["avg_output_len"].as_f64().unwrap();
        let measured = point["output_throughput_tokens_per_sec"].as_f64().unwrap();
        let predicted = time::decode_tokens_per_second(
            &arch,
            &card,
            &Efficiencies::default(),
            batch,
            out_len / 2.0,
        );
        let ratio = predicted / measured;
        println!(
            "batch {batch:>5.1}: measured {measured:>7.1} tok/s predicted {predicted:>7.1} x{ratio:.2}"
        );
        assert!(within(ratio), "batch {batch}: x{ratio:.2}");
    }
}

#[test]
fn table() {
    for c in cases() {
        let p = &c.predicted;
        println!(
            "{:<62} {:<14} measured {:>7.2} predicted {:>7.2} ratio {:>5.2}  gen {:.2} sync {:.2} score {:.2} train {:.2}",
            c.id,
            c.gpu,
            c.measured,
            p.seconds,
            p.seconds / c.measured,
            p.phase("generation"),
            p.phase("weight_sync"),
            p.phase("scoring"),
            p.phase("training")
        );
    }
}
