//! `fit --fastest` on every built-in preset: the search must stay interactive (under 100 ms a
//! preset, issue 31), the nearest fit's search included.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use grpofit_core::config;
use grpofit_core::fastest::{Timing, fastest};
use grpofit_core::memory::estimate::{Estimator, GpuBudget};
use grpofit_core::time::{self, Efficiencies};
use std::hint::black_box;

/// The 24gb preset with 128 completions a generation: more than Unsloth's table lets vLLM
/// decode at once, so the search also walks `max_num_seqs` (tests/it/speed_vllm_limits.rs).
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

fn bench(c: &mut Criterion) {
    let mut runs: Vec<(String, String)> = grpofit::presets::names()
        .iter()
        .map(|n| {
            (
                format!("{n} preset"),
                grpofit::presets::built_in(n).unwrap().to_string(),
            )
        })
        .collect();
    runs.push(("24gb, 128 completions a generation".into(), many_rows()));
    for (name, text) in &runs {
        let file = config::parse(
            text,
            name,
            None,
            &grpofit_core::resolve::Offline::from_env(),
        )
        .unwrap();
        let gpu = GpuBudget {
            capacity: file.gpu_memory.unwrap(),
            used_by_others: 0,
            context: None,
        };
        let card = time::gpu_speed(file.time.gpu.as_deref(), None, None).unwrap();
        let eff = Efficiencies::default();
        let timing = Timing {
            gpu: &card,
            keys: &file.time,
            eff: &eff,
        };
        c.bench_function(&format!("fit --fastest: {name}"), |b| {
            // a fresh estimator each time: the command's own cost, nothing remembered
            b.iter(|| {
                fastest(
                    black_box(&file.run),
                    gpu,
                    0.05,
                    &timing,
                    &mut Estimator::new(),
                )
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
