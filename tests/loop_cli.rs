//! Closing the loop with a real run: `vramfit callback` writes a valid Python callback, and
//! `vramfit check` sets its log against the estimate.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

fn vramfit() -> Command {
    let mut c = Command::cargo_bin("vramfit").unwrap();
    c.arg("--no-gpu");
    c
}

/// Python's own parser accepts the file (nothing imported: torch is not needed).
fn parses_as_python(path: &Path) {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg("import ast,sys; ast.parse(open(sys.argv[1]).read())")
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn callback_writes_valid_python_prints_it_and_keeps_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = vramfit()
        .current_dir(dir.path())
        .arg("callback")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let path = dir.path().join("vramfit_callback.py");
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), written);
    for needle in [
        "class VramfitCallback(TrainerCallback)",
        "def __init__(self, log_path=None)",
        "VRAMFIT_LOG",
        "vramfit-run.jsonl",
        "reset_peak_memory_stats",
        "max_memory_allocated",
        "max_memory_reserved",
        "mem_get_info",
        "\"kind\": \"start\"",
        "\"kind\": \"step\"",
        "_prepare_inputs",
    ] {
        assert!(written.contains(needle), "missing {needle}");
    }
    parses_as_python(&path);
    // no overwrite without --force
    vramfit()
        .current_dir(dir.path())
        .arg("callback")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--force"));
    std::fs::write(&path, "old").unwrap();
    let other = dir.path().join("cb.py");
    vramfit()
        .args(["callback", "--force", "-o"])
        .arg(&path)
        .assert()
        .code(0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
    vramfit()
        .args(["callback", "-o"])
        .arg(&other)
        .assert()
        .code(0);
    parses_as_python(&other);
}

#[test]
fn the_examples_still_parse_with_the_optional_callback() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for script in [
        "examples/train_trl.py",
        "examples/train_unsloth.py",
        "examples/vramfit_callback.py",
    ] {
        parses_as_python(&root.join(script));
    }
    for script in ["examples/train_trl.py", "examples/train_unsloth.py"] {
        let text = std::fs::read_to_string(root.join(script)).unwrap();
        assert!(text.contains("except ImportError"), "{script}");
        assert!(text.contains("callbacks=callbacks"), "{script}");
    }
}

const GIB: u64 = 1 << 30;

fn log_in(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("log.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

fn good_log() -> String {
    let total = 24 * GIB;
    let step = |n: u64, alloc: u64, res: u64, free: u64| {
        format!(
            "{{\"kind\": \"step\", \"step\": {n}, \"max_allocated\": {alloc}, \"max_reserved\": {res}, \"free\": {free}, \"total\": {total}, \"seconds\": 9.5}}\n"
        )
    };
    format!(
        "{{\"kind\": \"start\", \"device\": \"NVIDIA GeForce RTX 4090\", \"total\": {total}, \"torch\": \"2.9.0\", \"trl\": \"1.15.0\"}}\n\n{}{}{}",
        step(1, 11 * GIB, 12 * GIB, 11 * GIB),
        step(2, 12 * GIB, 13 * GIB, 10 * GIB),
        step(3, 11 * GIB, 12 * GIB, 11 * GIB),
    )
}

#[test]
fn check_prints_predicted_against_measured_with_the_percent() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), &good_log());
    let out = vramfit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["steps"], 3);
    assert_eq!(v["capacity_bytes"], 24 * GIB);
    assert_eq!(v["measured"]["max_allocated"], 12 * GIB);
    assert_eq!(v["measured"]["max_reserved"], 13 * GIB);
    assert_eq!(v["measured"]["max_used"], 14 * GIB);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        let p = r["predicted_bytes"].as_f64().unwrap();
        let m = r["measured_bytes"].as_f64().unwrap();
        let e = r["error_percent"].as_f64().unwrap();
        assert!((e - (p - m) / m * 100.0).abs() < 1e-9, "{r}");
        let verdict = r["verdict"].as_str().unwrap();
        let expected = if e.abs() <= 5.0 {
            "good"
        } else if e > 0.0 {
            "overestimated"
        } else {
            "underestimated"
        };
        assert_eq!(verdict, expected, "{r}");
    }
    // the estimate the prediction comes from, on the log's capacity
    let est = vramfit()
        .args([
            "estimate",
            "--preset",
            "24gb",
            "--gpu-mem",
            "24GiB",
            "--json",
        ])
        .output()
        .unwrap();
    let est: serde_json::Value = serde_json::from_slice(&est.stdout).unwrap();
    assert_eq!(v["predicted"]["used"], est["total_bytes"]);
    assert!(
        v["predicted"]["allocated"].as_u64().unwrap()
            >= est["training_peak_allocated_bytes"].as_u64().unwrap()
    );
    // the text: the three figures, the percent and the explanation
    vramfit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("peak allocated (torch)")
                .and(predicate::str::contains("peak reserved (torch)"))
                .and(predicate::str::contains("device in use"))
                .and(predicate::str::contains("12.00 GiB"))
                .and(predicate::str::contains(" %"))
                .and(predicate::str::contains(
                    "3 steps on NVIDIA GeForce RTX 4090",
                ))
                .and(predicate::str::contains("covers both phases")),
        );
}

#[test]
fn a_malformed_line_is_exit_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = good_log();
    text.insert_str(
        text.find('\n').unwrap() + 1,
        "{\"kind\": \"step\", \"step\": 1,\n",
    );
    let log = log_in(dir.path(), &text);
    vramfit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("log.jsonl:2"));
    // no step at all
    let log = log_in(dir.path(), "{\"kind\": \"start\", \"total\": 1}\n");
    vramfit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no `step` line"));
}
