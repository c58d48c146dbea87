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
