//! Flags and presets a user trusts (issue 23): a GPU size below the floor is refused with the
//! reason, a negative --headroom gets the range message, `--json` is honoured with `--export -`,
//! `presets --json` exists, and a user preset named as a built-in one wins and says so.
#![allow(clippy::unwrap_used)]

use crate::common::run;
use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn grpofit(config: &Path) -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu")
        .env("HF_HUB_OFFLINE", "1")
        .env("GRPOFIT_CONFIG_DIR", config);
    c
}

#[test]
fn a_gpu_size_below_the_floor_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    for size in ["1B", "24MB", "255MiB"] {
        let out = run(grpofit(dir.path()).args(["estimate", "--gpu-mem", size]));
        assert_eq!(out.code, Some(2), "{size}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("--gpu-mem {size}: "))
                && out.stderr.contains("below 256.0 MiB"),
            "{}",
            out.stderr
        );
    }
    let out = run(grpofit(dir.path()).args(["estimate", "--gpu-mem", "256MiB"]));
    assert_ne!(out.code, Some(2), "{}", out.stderr);
}

#[test]
fn a_negative_headroom_gets_the_range_message() {
    let dir = tempfile::tempdir().unwrap();
    for value in ["-5", "150"] {
        let out = run(grpofit(dir.path()).args(["fit", "--preset", "24gb", "--headroom", value]));
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "--headroom {value}: expected a percentage between 0 and 50"
            )),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn json_is_honoured_with_export_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        run(grpofit(dir.path()).args(["estimate", "--preset", "24gb", "--json", "--export", "-"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).expect("one JSON object");
    assert!(v["total_bytes"].as_u64().is_some(), "{v}");
    let export = v["export"].as_str().unwrap();
    assert!(export.contains("[grpofit]"), "{export}");
}

#[test]
fn presets_json_lists_every_preset() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(grpofit(dir.path()).args(["presets", "--json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), grpofit::presets::BUILT_IN.len());
    let row = rows.iter().find(|r| r["name"] == "24gb").unwrap();
    assert_eq!(row["whose"], "built-in");
    assert!(row["capacity_bytes"].as_u64().unwrap() > 0);
    assert!(row["fits"].is_boolean());
}

#[test]
fn a_user_preset_named_as_a_built_in_one_wins_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let presets = dir.path().join("presets");
    std::fs::create_dir_all(&presets).unwrap();
    let mine = include_str!("../../presets/24gb.toml").replace(
        "unsloth/Qwen2.5-3B-Instruct",
        "unsloth/Qwen2.5-1.5B-Instruct",
    );
    assert!(mine.contains("Qwen2.5-1.5B"));
    std::fs::write(presets.join("24gb.toml"), mine).unwrap();
    let out = run(grpofit(dir.path()).args(["estimate", "--preset", "24gb"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Qwen2.5-1.5B"), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("is used instead of the built-in 24gb preset"),
        "{}",
        out.stderr
    );
    let out = run(grpofit(dir.path()).args(["presets", "--json"]));
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let named: Vec<&Value> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == "24gb")
        .collect();
    assert_eq!(named.len(), 1, "{v}");
    assert_eq!(named[0]["whose"], "yours, replaces the built-in");
}

#[test]
fn tiers_are_at_cudas_capacity_of_a_named_card() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(grpofit(dir.path()).args(["presets", "--json"]));
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let capacity = |name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["capacity_bytes"]
            .as_u64()
            .unwrap()
    };
    // RTX 4090, A100 80 GB and H200 as torch's total_memory reports them
    assert_eq!(capacity("24gb"), 25_377_898_496);
    assert_eq!(capacity("80gb"), 85_024_112_640);
    assert_eq!(capacity("141gb"), 150_109_880_320);
}
