use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use vramfit::config;
use vramfit::model::estimate::{GpuBudget, estimate};

fn bench(c: &mut Criterion) {
    let file = config::parse(vramfit::presets::built_in("24gb").unwrap(), "24gb", None).unwrap();
    let gpu = GpuBudget {
        capacity: 24 << 30,
        used_by_others: 0,
    };
    c.bench_function("estimate 24gb preset (unsloth)", |b| {
        b.iter(|| estimate(black_box(&file.run), gpu))
    });
    let mut trl = file.run.clone();
    trl.stack = vramfit::model::run::Stack::Trl;
    c.bench_function("estimate 24gb preset as trl (allocator replay)", |b| {
        b.iter(|| estimate(black_box(&trl), gpu))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
