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

fn bench(c: &mut Criterion) {
    for name in grpofit::presets::names() {
        let file = config::parse(
            grpofit::presets::built_in(name).unwrap(),
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
        c.bench_function(&format!("fit --fastest: {name} preset"), |b| {
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
