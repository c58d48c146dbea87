//! Unsloth's vLLM batch limits on the real runs that printed them ("Unsloth: Using
//! conservativeness = 1.0. Chunked prefill tokens = T. Num Sequences = N." and "vLLM's KV Cache
//! can use up to X GB"): what grpofit's release rule (`StackVersions::unsloth_vllm_limits`) gives
//! from each run's own settings, with then.json's `model.max_num_seqs` and
//! `model.max_num_batched_tokens` left out. Where then.json no longer sets them the rule must give
//! the printed numbers exactly. Prints its table with `--nocapture`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use super::realworld::{estimated, folder, with_then};
use grpofit_core::memory::unsloth_vllm_2025::kv_estimate;
use grpofit_core::units::GIB;
use serde_json::Value;

const OVERRIDES: [&str; 2] = ["model.max_num_seqs", "model.max_num_batched_tokens"];

/// The number after `label` in the run's printed lines.
fn printed_number(case: &Value, label: &str) -> Option<f64> {
    case["observed"]["printed"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find_map(|line| {
            let rest = &line[line.find(label)? + label.len()..];
            let digits: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            digits.trim_end_matches('.').parse().ok()
        })
}

#[test]
fn unsloth_vllm_limits_against_printed() {
    let then: Value =
        serde_json::from_str(&std::fs::read_to_string(folder().join("then.json")).unwrap())
            .unwrap();
    let cases = std::fs::read_to_string(folder().join("cases.jsonl")).unwrap();
    println!(
        "{:<46} {:<10} {:<16} {:<16} {:<20} override",
        "run", "unsloth", "seqs pred/print", "tokens pred/print", "KV est GB pred/print"
    );
    let mut exact_without_override = 0;
    for line in cases.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        let Some(seqs) = printed_number(&case, "Num Sequences = ") else {
            continue;
        };
        let tokens = printed_number(&case, "Chunked prefill tokens = ").unwrap();
        let kv_gb = printed_number(&case, "KV Cache can use up to ").unwrap();
        let id = case["id"].as_str().unwrap();
        let mut own = then[id].clone();
        own.as_object_mut()
            .unwrap()
            .retain(|k, _| !OVERRIDES.contains(&k.as_str()));
        let overridden = then[id]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| OVERRIDES.contains(&k.as_str()));
        let (file, est) = estimated(id, &with_then(case["toml"].as_str().unwrap(), &own));
        let plan = est.vllm.as_ref().unwrap();
        let kv = kv_estimate(&file.run, plan.budget_bytes) / GIB as f64;
        println!(
            "{:<46} {:<10} {:>5} / {:<8} {:>5} / {:<9} {:>6.2} / {:<11} {}",
            id,
            file.run.versions.unsloth.to_string(),
            plan.max_num_seqs,
            seqs,
            plan.max_num_batched_tokens,
            tokens,
            kv,
            kv_gb,
            if overridden { "kept" } else { "none" }
        );
        let exact =
            plan.max_num_seqs as f64 == seqs && plan.max_num_batched_tokens as f64 == tokens;
        if !overridden {
            assert!(
                exact,
                "{id}: the release rule gives {} sequences and {} tokens, the run printed {seqs} and {tokens}; keep its override in then.json",
                plan.max_num_seqs, plan.max_num_batched_tokens
            );
            exact_without_override += 1;
        }
    }
    assert!(
        exact_without_override > 0,
        "the rule replaces at least one override"
    );
}
