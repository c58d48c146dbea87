//! The binary as a user runs it: exit codes, JSON fields, and clear errors for bad input.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use std::io::Write;

/// The binary without NVML, and offline: an unknown model gets the catalog's answer, never a
/// request to the Hub (tests/hub_remote.rs tests the Hub against a local stand-in).
fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

fn file_with(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

const PRESET_24: &str = include_str!("../../presets/24gb.toml");

#[test]
fn preset_estimate_fits_and_prints_a_breakdown() {
    grpofit()
        .args(["estimate", "--preset", "24gb"])
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("LoRA adapters").and(predicate::str::contains("headroom")),
        );
}

#[test]
fn json_components_add_up_to_the_total() {
    let out = grpofit()
        .args(["estimate", "--preset", "24gb", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum: u64 = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, v["total_bytes"].as_u64().unwrap());
    for key in [
        "capacity_bytes",
        "fits",
        "headroom_bytes",
        "effective_batch",
        "warnings",
        "training_peak_allocated_bytes",
        "training_peak_reserved_bytes",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["effective_batch"], 8);
}

#[test]
fn too_small_a_gpu_exits_3() {
    grpofit()
        .args(["estimate", "--preset", "24gb", "--gpu-mem", "8GiB"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("DOES NOT FIT"));
}

#[test]
fn bad_sizes_exit_2_naming_the_value() {
    for bad in ["-4GiB", "NaN", "0", "lots", "999999TiB"] {
        grpofit()
            .args(["estimate", "--preset", "24gb", "--gpu-mem", bad])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--gpu-mem"));
    }
}

#[test]
fn unknown_model_lists_close_names_and_the_config_json_way() {
    let f =
        file_with(&PRESET_24.replace("unsloth/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-2B-Instruct"));
    grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Qwen2.5").and(predicate::str::contains("model_config")));
}

#[test]
fn unknown_key_suggests_the_nearest() {
    let f = file_with(&PRESET_24.replace("num_generations", "num_generation"));
    grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("num_generation")
                .and(predicate::str::contains("did you mean `num_generations`")),
        );
}

#[test]
fn contradicting_shares_name_both_keys() {
    let f = file_with(&PRESET_24.replace(
        "vllm_gpu_memory_utilization = 0.45",
        "vllm_gpu_memory_utilization = 0.6",
    ));
    grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("gpu_memory_utilization")
                .and(predicate::str::contains("vllm_gpu_memory_utilization")),
        );
}

#[test]
fn broken_files_exit_2_without_panicking() {
    let cases: &[&[u8]] = &[
        b"",
        b"[grpo\nper_device_train_batch_size = ",
        b"\xff\xfe\x00binary junk\x00",
        b"[model]\nmodel_name = 3\n",
        b"[model]\nmodel_name = \"unsloth/gemma-3-1b-it\"\n[grpo]\nper_device_train_batch_size = -1\n",
        b"[model]\nmodel_name = \"unsloth/gemma-3-1b-it\"\n[grpo]\nbeta = nan\n",
    ];
    for bytes in cases {
        let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        f.write_all(bytes).unwrap();
        let out = grpofit()
            .args(["estimate", "--config"])
            .arg(f.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&f.path().display().to_string()),
            "error does not name the file: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn model_from_config_json_and_missing_fields() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, r#"{"model_type": "llama", "hidden_size": 2048}"#).unwrap();
    let run = dir.path().join("run.toml");
    std::fs::write(
        &run,
        PRESET_24.replace(
            "lock_effective_batch = true",
            "lock_effective_batch = true\nmodel_config = \"config.json\"",
        ),
    )
    .unwrap();
    grpofit()
        .args(["estimate", "--config"])
        .arg(&run)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("config.json")
                .and(predicate::str::contains("num_attention_heads")),
        );
    std::fs::write(
        &cfg,
        r#"{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": true}"#,
    )
    .unwrap();
    grpofit()
        .args(["estimate", "--config"])
        .arg(&run)
        .assert()
        .code(0);
}

#[test]
fn unknown_preset_names_the_built_in_ones() {
    grpofit()
        .args(["estimate", "--preset", "7gb"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("24gb"));
}

#[test]
fn gpu_reports_what_nvml_found_or_why_not() {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .args(["gpu", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let detected = v["detected"].as_bool().unwrap();
    assert_eq!(out.status.code(), Some(if detected { 0 } else { 1 }));
    if detected {
        assert!(v["gpu"]["total_bytes"].as_u64().unwrap() > 0);
    } else {
        assert!(!v["reason"].as_str().unwrap().is_empty());
    }
}

#[test]
fn every_broken_file_exits_2_with_a_short_message_naming_it() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/broken");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let out = grpofit()
            .args(["estimate", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(
            err.contains(&*name),
            "{name}: the message does not name the file: {err}"
        );
        assert!(
            err.lines().count() <= 5 && !err.contains("panicked"),
            "{name}: {err}"
        );
        seen += 1;
    }
    assert!(seen >= 20, "only {seen} broken files");
}

#[test]
fn export_to_standard_output_round_trips() {
    let out = grpofit()
        .args(["estimate", "--preset", "12gb", "--export", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# grpofit run file"), "{text}");
    let back = grpofit_core::config::parse(
        &text,
        "stdout",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let preset = grpofit_core::config::parse(
        grpofit::presets::built_in("12gb").unwrap(),
        "12gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    assert_eq!(back.run, preset.run);
}

#[test]
fn numbers_and_plurals_read_as_a_person_writes_them() {
    // 4 x 2 completions in groups of 3: Unsloth raises the micro-batch to 3 (unsloth#3572), so
    // a step holds 6 completions, 2 prompts, never the file's 8/3 prompts
    let f = file_with(&PRESET_24.replace("num_generations = 4", "num_generations = 3"));
    let out = grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("x 1 GPU)"), "{text}");
    assert!(!text.contains("666"), "{text}");
    assert!(
        text.contains(
            "as written; Unsloth runs 6 completions (micro-batch 3): 2 prompts x 3 generations"
        ),
        "{text}"
    );
    assert!(!text.contains("2.67"), "{text}");
    let out = grpofit()
        .args(["fit", "--preset", "24gb", "--headroom", "2.5"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("keeping 2.5% free"), "{text}");
}

#[test]
fn a_size_without_a_unit_is_refused_with_the_fix() {
    grpofit()
        .args(["estimate", "--preset", "24gb", "--gpu-mem", "24"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--gpu-mem 24: add a unit, e.g. 24GiB (or 24B for bytes)",
        ));
    grpofit()
        .args(["estimate", "--preset", "24gb", "--gpu-mem", "25769803776B"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("24.00 GiB (--gpu-mem)"));
    let f = file_with(&PRESET_24.replace("gpu_memory = \"25377898496B\"", "gpu_memory = \"24\""));
    let name = f.path().display().to_string();
    grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(name)
                .and(predicate::str::contains("gpu_memory"))
                .and(predicate::str::contains("\"24\""))
                .and(predicate::str::contains("add a unit")),
        );
    grpofit()
        .args(["estimate", "--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("a number alone is refused"));
}

#[test]
fn absurd_gpu_sizes_are_refused_with_a_message() {
    for bad in ["0GiB", "NaNGiB", "infGiB", "-24GiB", "65TiB", "0B"] {
        grpofit()
            .args(["estimate", "--preset", "24gb", "--gpu-mem", bad])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("--gpu-mem {bad}")));
    }
}

#[test]
fn the_report_says_where_the_run_and_the_capacity_came_from() {
    // neither --config nor --preset: the default preset, said so
    grpofit().args(["estimate"]).assert().code(0).stdout(
        predicate::str::contains("run: the 24gb preset (default; pass --config or --preset)")
            .and(predicate::str::contains("the 24gb preset's gpu_memory"))
            .and(predicate::str::contains("the file's").not()),
    );
    grpofit().args(["fit"]).assert().code(0).stdout(
        predicate::str::contains("run: the 24gb preset (default; pass --config or --preset)")
            .and(predicate::str::contains("the 24gb preset's gpu_memory")),
    );
    // --gpu-mem picks the tier and is named as the capacity
    grpofit()
        .args(["estimate", "--gpu-mem", "80GiB"])
        .assert()
        .stdout(
            predicate::str::contains("run: the 80gb preset (the largest tier that fits --gpu-mem")
                .and(predicate::str::contains("80.00 GiB (--gpu-mem)")),
        );
    grpofit()
        .args(["estimate", "--preset", "12gb"])
        .assert()
        .stdout(
            predicate::str::contains("run: the 12gb preset (--preset)")
                .and(predicate::str::contains("the 12gb preset's gpu_memory")),
        );
    let f = file_with(PRESET_24);
    let name = f.path().display().to_string();
    grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .assert()
        .stdout(
            predicate::str::contains(format!("run: {name} (--config)"))
                .and(predicate::str::contains(format!("{name}'s gpu_memory"))),
        );
}

/// Runs `grpofit --no-gpu ARGS` with its standard output a pipe whose read end is closed
/// before the child writes a byte (what `| head -0` or `| true` does), and returns its exit
/// code and standard error.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_grpofit"))
        .arg("--no-gpu")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // no reader left: the child's first write fails with EPIPE
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_leaves_early_ends_the_output_quietly_with_the_answer() {
    for (args, code) in [
        (&["estimate", "--preset", "24gb", "--json"][..], 0),
        (&["estimate", "--preset", "24gb"][..], 0),
        (
            &["estimate", "--preset", "24gb", "--gpu-mem", "8GiB"][..],
            3,
        ),
        (&["estimate", "--preset", "12gb", "--export", "-"][..], 0),
        (&["fit", "--preset", "24gb"][..], 0),
        (&["fit", "--preset", "24gb", "--json"][..], 0),
        (&["presets"][..], 0),
        (&["models"][..], 0),
        (&["--preset", "24gb"][..], 0),
    ] {
        let (got, err) = with_stdout_closed(args);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
    }
    // `gpu` answers 0 with a GPU and 1 without, pipe or no pipe
    for args in [&["gpu"][..], &["gpu", "--json"][..]] {
        let (got, err) = with_stdout_closed(args);
        assert!(matches!(got, Some(0 | 1)), "{args:?}: {got:?} {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_on_standard_output_is_one_clear_error() {
    for args in [
        &["estimate", "--preset", "24gb", "--json"][..],
        &["estimate", "--preset", "24gb"][..],
        &["estimate", "--preset", "12gb", "--export", "-"][..],
        &["fit", "--preset", "24gb"][..],
        &["presets"][..],
        &["models"][..],
        &["gpu"][..],
        &["gpu", "--json"][..],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_grpofit"))
            .arg("--no-gpu")
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("standard output") && err.contains("No space left on device"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn a_bad_value_is_reported_as_path_line_table_key_value() {
    let text = PRESET_24.replace(
        "per_device_train_batch_size = 4",
        "per_device_train_batch_size = 0",
    );
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("per_device_train_batch_size"))
        .unwrap();
    let f = file_with(&text);
    let out = grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "grpofit: {}:{line}: `[grpo] per_device_train_batch_size = 0`: out of range, expected 1 to ",
        f.path().display()
    );
    assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // malformed TOML: the line the parser stopped on
    let f = file_with("[model]\nmodel_name = \"unsloth/Qwen2.5-3B-Instruct\"\n\n[grpo\n");
    let out = grpofit()
        .args(["estimate", "--config"])
        .arg(f.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!("grpofit: {}:4: not valid TOML: ", f.path().display());
    assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
}

/// vLLM's refusal is typed: the start-up check that fails (`reason`) beside vLLM's words
/// (`detail`), the same names `diagnose` gives a real refusal.
#[test]
fn a_refusal_names_vllms_failed_check() {
    let text = PRESET_24.replace("utilization = 0.45", "utilization = 0.15");
    assert_ne!(text, PRESET_24, "the preset's share moved");
    let f = file_with(&text);
    let out = grpofit()
        .args(["estimate", "--json", "--config"])
        .arg(f.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let refusal = &v["vllm"]["refusal"];
    assert_eq!(refusal["reason"], "no_cache_blocks", "{refusal}");
    let detail = refusal["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("vLLM refuses to start: no available memory for the cache blocks"),
        "{detail}"
    );
    assert!(v["warnings"][0].as_str().unwrap().contains(detail));
}

/// No GPU detected and no capacity anywhere: the refusal asks for `--gpu-mem`, and where
/// `--gpu` named a card, says why the card gives none (it times the step; the memory is CUDA's
/// total, under the sheet's size).
#[test]
fn no_capacity_with_a_card_named_says_why_the_card_gives_none() {
    let f = file_with(&PRESET_24.replace("gpu_memory = \"25377898496B\"\n", ""));
    let path = f.path().to_str().unwrap();
    grpofit()
        .args(["estimate", "--config", path, "--gpu", "H100"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "pass --gpu-mem SIZE (--gpu H100 SXM times the step; the memory to fit in is its CUDA total, nvidia-smi's, a little under the sheet's 80 GB)",
        ));
    grpofit()
        .args(["estimate", "--config", path])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("pass --gpu-mem SIZE\n"));
}
