//! Every built-in preset sits at a named card's CUDA total (torch's `total_memory`, the "total
//! capacity" of its out-of-memory errors), not at the tier's nominal GiB: `grpofit presets`
//! lists each at its card's figure, and its run fits there. Each figure's source is cited in
//! the preset file (presets/).
#![allow(clippy::unwrap_used)]

use super::common::{grpofit_in, run};
use serde_json::Value;

/// (preset, card, CUDA's total in GiB as torch prints it)
const CARDS: &[(&str, &str, f64)] = &[
    ("8gb", "RTX 3070", 7.78),
    ("12gb", "RTX 3060 12 GB", 11.75),
    ("16gb", "Tesla T4", 14.74),
    ("22gib", "L4 / A10G", 22.03),
    ("24gb", "RTX 4090", 23.64),
    ("48gb", "RTX A6000", 47.54),
    ("80gb", "A100 80 GB", 79.18),
    ("141gb", "H200", 139.80),
];

#[test]
fn every_built_in_preset_is_at_its_cards_cuda_total_and_fits_there() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path()).args(["presets", "--json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(CARDS.len(), grpofit::presets::BUILT_IN.len());
    for (name, card, gib) in CARDS {
        let row = rows
            .iter()
            .find(|r| r["name"] == *name && r["whose"] == "built-in")
            .unwrap_or_else(|| panic!("{name} not listed: {v}"));
        let capacity = row["capacity_bytes"].as_u64().unwrap() as f64 / (1u64 << 30) as f64;
        assert_eq!(
            format!("{capacity:.2}"),
            format!("{gib:.2}"),
            "{name}: the {card}'s CUDA total"
        );
        assert_eq!(row["fits"], true, "{name}: {row}");
    }
}
