// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use grpofit_core::config;
use grpofit_core::memory::estimate::{Estimator, GpuBudget, estimate};
use grpofit_core::run::{Generation, Stack};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let file = config::parse(
        grpofit::presets::built_in("24gb").unwrap(),
        "24gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
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

/// A multi-GPU run: the open-r1 7+1 H100 full fine-tune (training ranks under ZeRO-3 and a
/// vLLM server role), and `fit` sharding its DDP version.
fn multi_gpu(c: &mut Criterion) {
    use grpofit_core::fit::fit;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/multi-gpu/open-r1-7plus1-h100.toml");
    let file = config::load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
    let gpu = GpuBudget {
        capacity: file.gpu_memory.unwrap(),
        used_by_others: 0,
        context: None,
    };
    let mut estimator = Estimator::new();
    c.bench_function("Estimator: open-r1 7+1 H100, two roles", |b| {
        b.iter(|| estimator.estimate(black_box(&file.run), gpu))
    });
    let mut ddp = file.run.clone();
    ddp.spread = Default::default();
    c.bench_function("fit: its DDP version, sharded (fresh Estimator)", |b| {
        b.iter(|| fit(black_box(&ddp), gpu, 0.05, &mut Estimator::new()))
    });
}

criterion_group!(benches, bench, fit_search, resolve, multi_gpu);
criterion_main!(benches);

fn fit_search(c: &mut Criterion) {
    use grpofit_core::fit::fit;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/qwen7b-unsloth-22gib.toml");
    let file = config::load(&path, &grpofit_core::resolve::Offline::from_env()).unwrap();
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

/// A model name resolved from the catalog, and from a Hugging Face cache snapshot (config.json
/// and three header-only shards of Qwen3-4B's 398 tensors, as a Hub fetch leaves them): the
/// cache hit is what `estimate` adds for a model outside the catalog (issue 12: under 5 ms).
fn resolve(c: &mut Criterion) {
    use grpofit_core::resolve::{self as hub, safetensors};
    let cache = tempfile::tempdir().unwrap();
    let snap = cache.path().join(
        "models--Qwen--Qwen3-4B-Instruct-2507/snapshots/cdbee75f17c01a7cc42f958dc650907174af0554",
    );
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/configs/qwen3-4b-instruct-2507.json"),
        snap.join("config.json"),
    )
    .unwrap();
    let mut tensors = vec![(
        "model.embed_tokens.weight".to_string(),
        vec![151_936u64, 2560],
    )];
    for l in 0..36 {
        for (name, shape) in [
            ("self_attn.q_proj.weight", vec![4096, 2560]),
            ("self_attn.k_proj.weight", vec![1024, 2560]),
            ("self_attn.v_proj.weight", vec![1024, 2560]),
            ("self_attn.o_proj.weight", vec![2560, 4096]),
            ("self_attn.q_norm.weight", vec![128]),
            ("self_attn.k_norm.weight", vec![128]),
            ("mlp.gate_proj.weight", vec![9728, 2560]),
            ("mlp.up_proj.weight", vec![9728, 2560]),
            ("mlp.down_proj.weight", vec![2560, 9728]),
            ("input_layernorm.weight", vec![2560]),
            ("post_attention_layernorm.weight", vec![2560]),
        ] {
            tensors.push((format!("model.layers.{l}.{name}"), shape));
        }
    }
    tensors.push(("model.norm.weight".into(), vec![2560]));
    let mut weight_map = serde_json::Map::new();
    for (i, part) in tensors.chunks(tensors.len().div_ceil(3)).enumerate() {
        let shard = format!("model-0000{}-of-00003.safetensors", i + 1);
        let mut header = serde_json::Map::new();
        let mut at = 0u64;
        for (name, shape) in part {
            let bytes = shape.iter().product::<u64>() * 2;
            header.insert(
                name.clone(),
                serde_json::json!({"dtype": "BF16", "shape": shape, "data_offsets": [at, at + bytes]}),
            );
            weight_map.insert(name.clone(), serde_json::json!(shard));
            at += bytes;
        }
        let header = serde_json::Value::Object(header).to_string();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        std::fs::write(
            snap.join(format!("{shard}{}", safetensors::HEADER_ONLY_SUFFIX)),
            bytes,
        )
        .unwrap();
    }
    std::fs::write(
        snap.join(safetensors::INDEX_FILE),
        serde_json::json!({"weight_map": weight_map}).to_string(),
    )
    .unwrap();
    let hit = hub::resolve_offline("Qwen/Qwen3-4B-Instruct-2507", None, Some(cache.path()))
        .unwrap()
        .unwrap();
    assert_eq!(hit.weights.unwrap().tensors, 398);
    c.bench_function("resolve: Qwen3-4B from the catalog", |b| {
        b.iter(|| hub::resolve_offline(black_box("Qwen/Qwen3-4B"), None, None))
    });
    c.bench_function(
        "resolve: Qwen3-4B-Instruct-2507 from the cache (config.json, 3 header-only shards)",
        |b| {
            b.iter(|| {
                hub::resolve_offline(
                    black_box("Qwen/Qwen3-4B-Instruct-2507"),
                    None,
                    Some(cache.path()),
                )
            })
        },
    );
}
