//! The estimate against thirteen real GRPO runs from public notebooks (`tests/realworld/`, copied
//! from public notebooks and the logs they printed; sources in tests/realworld/README.md): each run's verdict, and vLLM's share and KV cache against what vLLM and
//! Unsloth printed. `then.json` gives each run's trainer versions (and the few behaviours no
//! version rule explains yet). Prints the table, with the verdict on today's stack (the run's
//! TRL, Unsloth and transformers versions left out: grpofit's defaults) beside the verdict on
//! the run's own stack, with `cargo test --test realworld -- --nocapture`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::config;
use grpofit_core::memory::estimate::{GpuBudget, estimate};
use grpofit_core::memory::vllm::kv_bytes_per_token;
use grpofit_core::units::GIB;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub(crate) fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realworld")
}

/// The case's TOML with `then.json`'s keys (`table.key`) set in it.
pub(crate) fn with_then(toml_text: &str, then: &Value) -> String {
    let mut root: toml::Table = toml_text.parse().expect("case TOML parses");
    for (path, value) in then.as_object().into_iter().flatten() {
        let (table, key) = path.split_once('.').expect("table.key");
        let value = match value {
            Value::Bool(b) => toml::Value::Boolean(*b),
            Value::Number(n) if n.is_u64() => toml::Value::Integer(n.as_u64().unwrap() as i64),
            Value::Number(n) => toml::Value::Float(n.as_f64().unwrap()),
            Value::String(s) => toml::Value::String(s.clone()),
            other => panic!("{path}: unsupported {other}"),
        };
        root.entry(table)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .unwrap()
            .insert(key.to_string(), value);
    }
    toml::to_string(&root).unwrap()
}

struct Row {
    id: String,
    fits: (bool, bool),
    /// the verdict and peak on today's TRL, Unsloth and transformers
    today: (bool, f64),
    budget: Option<(f64, f64)>,
    kv: Option<(f64, f64)>,
    /// the estimate's peak and its phase, beside a printed or noted peak when the run has one
    peak: (f64, &'static str, Option<f64>),
    /// `torch.cuda.max_memory_reserved()` as the run printed it (`observed.memory_figure`),
    /// beside the estimate's peak without the CUDA context, which it does not count
    figure: Option<(f64, f64)>,
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

fn rows() -> Vec<Row> {
    let then: Value = serde_json::from_str(
        &std::fs::read_to_string(folder().join("then.json")).expect("then.json"),
    )
    .unwrap();
    let cases = std::fs::read_to_string(folder().join("cases.jsonl")).expect("cases.jsonl");
    cases
        .lines()
        .map(|line| {
            let case: Value = serde_json::from_str(line).unwrap();
            let id = case["id"].as_str().unwrap().to_string();
            let toml = case["toml"].as_str().unwrap();
            let (file, est) = estimated(&id, &with_then(toml, &then[&id]));
            let (_, today) =
                estimated(&id, &with_then(toml, &without_trainer_versions(&then[&id])));
            let capacity = est.capacity_bytes;
            let o = &case["observed"];
            // the last three cases nest vLLM's profile: `vllm_profile.budget_GiB`
            let profile = |k: &str| o["vllm_profile"].get(k).and_then(Value::as_f64);
            let printed = |k: &str| {
                o.get(k).and_then(Value::as_f64).or_else(|| {
                    let nested = k
                        .strip_prefix("vllm_profile_")
                        .or(k.strip_prefix("vllm_"))?;
                    profile(nested)
                })
            };
            let total = gib(capacity);
            let observed_budget = printed("vllm_budget_GiB").or_else(|| {
                printed("unsloth_vllm_actual_gpu_utilization_pct").map(|p| p / 100.0 * total)
            });
            let observed_kv = printed("vllm_profile_kv_cache_GiB")
                .or_else(|| printed("vllm_available_kv_cache_GiB"))
                .or_else(|| {
                    // "GPU KV cache size: N tokens" x the bytes a token takes
                    printed("vllm_kv_cache_tokens").map(|tokens| {
                        tokens
                            * kv_bytes_per_token(&file.run.arch, false, file.run.max_seq_len) as f64
                            / GIB as f64
                    })
                });
            let v = est.vllm.as_ref();
            let phase = est.peak_phase.label();
            // "~9.5GB VRAM" in a notebook's comment: decimal gigabytes
            let noted = printed("vram_GB_approx").map(|gb| gb * 1e9 / GIB as f64);
            let context: u64 = est
                .components
                .iter()
                .filter(|c| c.part == grpofit_core::memory::breakdown::Part::CudaContext)
                .map(|c| c.bytes)
                .sum();
            let figure = o["memory_figure"]["peak_reserved_GiB"]
                .as_f64()
                .map(|observed| (gib(est.total_bytes - context), observed));
            Row {
                peak: (gib(est.total_bytes), phase, noted),
                // a figure is a run that trained to its end and printed its peak
                fits: (
                    est.fits,
                    matches!(case["outcome"].as_str(), Some("fits" | "figure")),
                ),
                figure,
                today: (today.fits, gib(today.total_bytes)),
                budget: v.and_then(|v| Some((gib(v.budget_bytes), observed_budget?))),
                kv: v.and_then(|v| Some((gib(v.kv_cache_bytes), observed_kv?))),
                id,
            }
        })
        .collect()
}

/// The run file and its estimate on the capacity it names.
pub(crate) fn estimated(
    id: &str,
    text: &str,
) -> (config::RunFile, grpofit_core::memory::estimate::Estimate) {
    let file = config::parse(
        text,
        id,
        Some(&folder()),
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap_or_else(|e| panic!("{id}: {e}"));
    let capacity = file.gpu_memory.expect("every case names its capacity");
    let est = estimate(
        &file.run,
        GpuBudget {
            capacity,
            used_by_others: 0,
            context: None,
        },
    );
    (file, est)
}

/// `then` without its TRL, Unsloth and transformers versions: the run on today's trainers (the
/// vLLM version and the other keys kept, as the table had them before versions were an input).
fn without_trainer_versions(then: &Value) -> Value {
    let mut v = then.clone();
    if let Some(map) = v.as_object_mut() {
        map.retain(|k, _| {
            !matches!(
                k.as_str(),
                "grpofit.trl_version" | "grpofit.unsloth_version" | "grpofit.transformers_version"
            )
        });
    }
    v
}

fn error(pair: Option<(f64, f64)>) -> Option<f64> {
    pair.map(|(p, o)| (p - o) / o)
}

fn cell(pair: Option<(f64, f64)>) -> String {
    match pair {
        Some((p, o)) => format!("{p:5.2} / {o:5.2} ({:+5.1}%)", (p - o) / o * 100.0),
        None => "-".into(),
    }
}

/// Runs the estimate gets wrong today, with why. The test fails when one of them is put right,
/// so that this list is kept true.
const KNOWN_MISSES: &[(&str, &str)] = &[(
    "nbu-matthewchung74-qwen2.5-3b-qlora-rtx3090-10seq-oom",
    "its 2.94 GiB request is an fp32 tensor of the micro-batch's whole sequences (10 x 512 x 151936 x 4 B); on TRL 0.14 with Unsloth 2025.2.4 (TRL's own loss, logits in the compute dtype as read from the wheels) no such tensor is modelled, nor are the two reward models it kept on the GPU (about 1.9 GB)",
)];

/// Printed peaks (`observed.memory_figure`) the estimate does not reach within 5 % yet, with the
/// term still missing. The test fails when one comes within 5 %, so that this list is kept true.
const FIGURE_MISSES: &[(&str, &str)] = &[
    (
        "nb-trl-openenv-wordle-qwen3-1.7b-full-fp32-a100-40gb-figure",
        "not yet attributed: with autocast's bf16 copies of the fp32 weights and the fp32 residual stream (trl::Fp32Weights) and the gradients kept through 64 accumulated micro-batches (by_version::gradients_live_through_step) both modelled, 2.9 GiB of reserved memory are missing; the CPU traces measure allocated bytes, so what the caching allocator keeps reserved over micro-batches of different lengths is not checked by them",
    ),
    (
        "nb-trl-openenv-wordle-qlora-qwen2.5-0.5b-a100-40gb-figure",
        "the rollout_func concatenates up to six turns' prompts into one training sequence (about 6 x 1400 tokens), which no run-file key says, on top of N1",
    ),
];

#[test]
fn real_runs() {
    let rows = rows();
    println!(
        "{:<46} {:<18} {:<16} {:<28} {:<28} peak GiB (phase) / noted",
        "run",
        "today: fits, peak",
        "its stack / obs",
        "vLLM share GiB pred / printed",
        "KV cache GiB pred / printed"
    );
    for r in &rows {
        let (peak, phase, noted) = r.peak;
        println!(
            "{:<46} {:<18} {:<16} {:<28} {:<28} {peak:5.2} ({phase}){}",
            r.id,
            format!("{} {:5.2}", r.today.0, r.today.1),
            format!("{} / {}", r.fits.0, r.fits.1),
            cell(r.budget),
            cell(r.kv),
            noted.map_or(String::new(), |n| format!(" / {n:.2}"))
        );
    }
    assert_eq!(rows.len(), 13);
    for r in &rows {
        let Some((est, observed)) = r.figure else {
            continue;
        };
        let e = (est - observed) / observed;
        println!(
            "{}: max_memory_reserved {observed:.2} GiB, estimated {est:.2} ({:+.1} %)",
            r.id,
            100.0 * e
        );
        match FIGURE_MISSES.iter().find(|(id, _)| *id == r.id) {
            Some((_, term)) => {
                assert!(
                    e.abs() > 0.05,
                    "{}: within 5 % now; drop it from FIGURE_MISSES",
                    r.id
                );
                println!("  still missing: {term}");
            }
            None => assert!(e.abs() <= 0.05, "{}: peak off by {:.1} %", r.id, 100.0 * e),
        }
    }
    for r in &rows {
        match KNOWN_MISSES.iter().find(|(id, _)| *id == r.id) {
            Some((_, why)) => {
                assert_ne!(
                    r.fits.0, r.fits.1,
                    "{}: now right; drop it from KNOWN_MISSES",
                    r.id
                );
                println!("known miss, {}: {why}", r.id);
            }
            None => assert_eq!(r.fits.0, r.fits.1, "{}: verdict", r.id),
        }
        // The share is Unsloth's arithmetic on free memory; what is in use before vLLM starts
        // differs by card (0.10-0.83 GiB), which moves the share by up to 5 %.
        if let Some(e) = error(r.budget) {
            assert!(
                e.abs() <= 0.05,
                "{}: vLLM share off by {:.1} %",
                r.id,
                e * 100.0
            );
        }
        // The KV cache is what is left of the share after weights (within 3 % of what vLLM
        // printed), the profiled activations and graphs: the share's 5 % on top of those,
        // taken as 15 % of a cache that is a third of the share or more.
        if let Some(e) = error(r.kv) {
            assert!(
                e.abs() <= 0.15,
                "{}: KV cache off by {:.1} %",
                r.id,
                e * 100.0
            );
        }
    }
    let kv_checked = rows.iter().filter(|r| r.kv.is_some()).count();
    assert_eq!(kv_checked, 10, "every vLLM run's KV cache is compared");
}
