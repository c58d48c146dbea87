//! The estimator against real H200 measurements of the `trl` step:
//! `calibration/h200-hf-peft.jsonl` (the shared ground truth) and
//! `calibration/h200-heldout-*.jsonl` (architectures and knob mixes measured later with the same
//! script, never used to choose a constant). Prints median / p90 / max relative error.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use grpofit_core::arch::catalog;
use grpofit_core::arch::config_json;
use grpofit_core::memory::estimate::{GpuBudget, estimate};
use grpofit_core::run::{Checkpointing, RunConfig};
use serde_json::Value;
use std::path::{Path, PathBuf};

struct Errors {
    allocated: Vec<f64>,
    reserved: Vec<f64>,
    worst: Vec<(f64, String)>,
}

fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r.get("peak_alloc").is_some())
        .collect()
}

fn run_of(r: &Value) -> RunConfig {
    let arch = match r.get("arch") {
        Some(a) => config_json::parse(a, r["model"].as_str().unwrap()).unwrap(),
        None => {
            catalog::find(r["model"].as_str().unwrap())
                .expect("catalog has every shared model")
                .arch
        }
    };
    let n = |k: &str| r[k].as_u64().unwrap();
    let mut run = RunConfig::example(arch);
    run.micro_batch = n("seqs");
    run.num_generations = n("seqs");
    run.grad_accum = 1;
    run.prompt_len = n("prompt");
    run.completion_len = n("completion");
    run.max_seq_len = run.prompt_len + run.completion_len;
    run.lora_rank = n("rank");
    run.lora_alpha = n("rank");
    run.checkpointing = if r["gc"].as_bool().unwrap() {
        Checkpointing::On
    } else {
        Checkpointing::Off
    };
    run.beta = r["beta"].as_f64().unwrap();
    if let Some(t) = r.get("targets").and_then(Value::as_array) {
        run.lora_targets = t.iter().map(|s| s.as_str().unwrap().to_string()).collect();
    }
    run.expandable_segments = r
        .get("alloc_conf")
        .and_then(Value::as_str)
        .is_some_and(|c| c.contains("expandable_segments:True"));
    run
}

fn errors(files: &[PathBuf], expandable: bool) -> Errors {
    let mut e = Errors {
        allocated: vec![],
        reserved: vec![],
        worst: vec![],
    };
    for f in files {
        for r in records(f) {
            let mut run = run_of(&r);
            run.expandable_segments |= expandable;
            let est = estimate(
                &run,
                GpuBudget {
                    capacity: 150 << 30,
                    used_by_others: 0,
                    context: None,
                },
            );
            let rel =
                |p: u64, m: &str| (p as f64 - r[m].as_f64().unwrap()) / r[m].as_f64().unwrap();
            let (a, v) = (
                rel(est.training_peak_allocated_bytes, "peak_alloc"),
                rel(est.training_peak_reserved_bytes, "peak_reserved"),
            );
            e.allocated.push(a.abs());
            e.reserved.push(v.abs());
            let c = |k: &str| r[k].to_string();
            e.worst.push((
                a.abs().max(v.abs()),
                format!(
                    "{} seqs={} prompt={} completion={} rank={} gc={} beta={}: allocated {:+.1}%, reserved {:+.1}%",
                    c("model"), c("seqs"), c("prompt"), c("completion"), c("rank"), c("gc"), c("beta"),
                    100.0 * a, 100.0 * v
                ),
            ));
        }
    }
    e
}

fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    (100.0 * at(0.5), 100.0 * at(0.9), 100.0 * v[v.len() - 1])
}

fn check(name: &str, mut e: Errors) {
    let n = e.allocated.len();
    assert!(n > 0, "{name}: no records");
    let (am, ap, ax) = stats(&mut e.allocated);
    let (rm, rp, rx) = stats(&mut e.reserved);
    println!("{name}: {n} records");
    println!(
        "  training_peak_allocated_bytes vs peak_alloc:    median {am:.2}%  p90 {ap:.2}%  max {ax:.2}%"
    );
    println!(
        "  training_peak_reserved_bytes  vs peak_reserved: median {rm:.2}%  p90 {rp:.2}%  max {rx:.2}%"
    );
    e.worst.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    for (_, w) in e
        .worst
        .iter()
        .take(std::env::var("CALIB_SHOW").map_or(4, |v| v.parse().unwrap_or(4)))
    {
        println!("  worst: {w}");
    }
    assert!(
        am <= 2.0 && ax <= 8.0,
        "{name}: allocated error median {am:.2}% / max {ax:.2}% over target (2% / 8%)"
    );
    // The targets: allocated median <= 2 %, max <= 8 %; reserved median <= 5 %, max <= 15 %.
    assert!(
        rm <= 5.0,
        "{name}: reserved error median {rm:.2}% over target (5%)"
    );
    assert!(
        rx <= 15.0,
        "{name}: reserved error max {rx:.2}% over target (15%)"
    );
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn shared_h200_measurements() {
    let file = root().join("calibration/h200-hf-peft.jsonl");
    check("calibration/h200-hf-peft.jsonl", errors(&[file], false));
}

#[test]
fn shared_h200_measurements_with_expandable_segments() {
    let file = root().join("calibration/h200-hf-peft-expandable-segments.jsonl");
    // expandable_segments: median 5.27 % today, 0.27 points over the 5 % target (see the issue note).
    check(
        "calibration/h200-hf-peft-expandable-segments.jsonl",
        errors(&[file], true),
    );
}

#[test]
fn heldout_h200_measurements() {
    let files = [
        root().join("calibration/h200-heldout-2026-11-29.jsonl"),
        root().join("calibration/h200-heldout-expandable-2026-11-29.jsonl"),
        root().join("calibration/h200-heldout-big-2026-11-29.jsonl"),
    ];
    check("calibration/h200-heldout-*.jsonl", errors(&files, false));
}
