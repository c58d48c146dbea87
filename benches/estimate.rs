// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use vramfit::config;
use vramfit::model::estimate::{Estimator, GpuBudget, estimate};
use vramfit::model::run::{Generation, Stack};

fn bench(c: &mut Criterion) {
    let file = config::parse(vramfit::presets::built_in("24gb").unwrap(), "24gb", None).unwrap();
    let gpu = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 0,
        context: None,
    };
    c.bench_function("estimate: unsloth 24gb preset", |b| {
        b.iter(|| estimate(black_box(&file.run), gpu))
    });
    let mut trl = file.run.clone();
    trl.switch_stack(Stack::Trl);
    c.bench_function("estimate: trl (allocator replay of the step)", |b| {
        b.iter(|| estimate(black_box(&trl), gpu))
    });
    // The interactive case: the vLLM share moves, the step stays, its peak is remembered.
    let mut estimator = Estimator::new();
    let mut share = 0.3;
    c.bench_function("Estimator: trl, vLLM share changed, step remembered", |b| {
        b.iter(|| {
            share = if share > 0.8 { 0.3 } else { share + 0.05 };
            trl.generation = Generation::ColocatedVllm { share };
            estimator.estimate(black_box(&trl), gpu)
        })
    });
}

criterion_group!(benches, bench, fit_search);
criterion_main!(benches);

fn fit_search(c: &mut Criterion) {
    use vramfit::model::fit::fit;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/qwen7b-unsloth-22gib.toml");
    let file = config::load(&path).unwrap();
    let gpu = GpuBudget {
        capacity: file.gpu_memory.unwrap(),
        used_by_others: 0,
        context: None,
    };
    c.bench_function(
        "fit: Qwen2.5-7B unsloth on 22 GiB, does not fit (fresh Estimator)",
        |b| b.iter(|| fit(black_box(&file.run), gpu, 0.05, &mut Estimator::new())),
    );
    let mut trl = file.run.clone();
    trl.switch_stack(Stack::Trl);
    let small = GpuBudget {
        capacity: 16 << 30,
        used_by_others: 0,
        context: None,
    };
    c.bench_function(
        "fit: the same run as trl on 16 GiB (fresh Estimator)",
        |b| b.iter(|| fit(black_box(&trl), small, 0.05, &mut Estimator::new())),
    );
}
