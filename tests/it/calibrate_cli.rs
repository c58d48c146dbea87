//! `grpofit calibrate` against real numbers: run logs made from the H200 calibration records
//! (calibration/h200-hf-peft.jsonl, each a process that measured one step), then the estimate
//! that uses what it learned, only on a GPU of that name, and `--reset`.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A TRL run without vLLM: its estimate's total moves by exactly the context's change.
const TRL_RUN: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256

[model]
model_name_or_path = "Qwen/Qwen2.5-0.5B-Instruct"
dtype = "bfloat16"

[lora]
r = 16
lora_alpha = 16

[grpo]
per_device_train_batch_size = 4
num_generations = 4
max_completion_length = 768
"#;

/// How many records become logs (enough for a median and a spread).
const RUNS: usize = 12;

fn grpofit(config_dir: &Path) -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("GRPOFIT_CONFIG_DIR", config_dir);
    c
}

fn records() -> (Value, Vec<Value>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("calibration/h200-hf-peft.jsonl")).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let env = lines.next().unwrap()["env"].clone();
    let measured = lines
        .filter(|r| r.get("nvml_after").is_some() && r.get("peak_reserved").is_some())
        .take(RUNS)
        .collect();
    (env, measured)
}

/// The run log `grpofit run` and the callback would have written for one record: NVML's use
/// before the run, torch's peaks, and the device in use after the step (`nvml_after`).
fn run_log_of(env: &Value, r: &Value) -> String {
    let total = env["total_memory"].as_u64().unwrap();
    let before = env["nvml_before"]["used"].as_u64().unwrap();
    let after = r["nvml_after"].as_u64().unwrap();
    format!(
        "{}\n{}\n{}\n",
        serde_json::json!({"kind": "prediction", "device": env["gpu"], "total": total, "used_before": before, "stack": "trl"}),
        serde_json::json!({"kind": "start", "device": env["gpu"], "total": total, "torch": env["torch"], "transformers": env["transformers"], "trl": "stand-in"}),
        serde_json::json!({"kind": "step", "step": 1, "max_allocated": r["peak_alloc"], "max_reserved": r["peak_reserved"], "free": total - after, "total": total, "seconds": r["step_s"]}),
    )
}

fn write_logs(dir: &Path) -> (Vec<PathBuf>, u64) {
    let (env, records) = records();
    assert_eq!(records.len(), RUNS);
    let before = env["nvml_before"]["used"].as_u64().unwrap();
    let mut contexts: Vec<u64> = records
        .iter()
        .map(|r| r["nvml_after"].as_u64().unwrap() - r["peak_reserved"].as_u64().unwrap() - before)
        .collect();
    contexts.sort_unstable();
    let median = (contexts[RUNS / 2 - 1] + contexts[RUNS / 2]) / 2;
    let paths = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let p = dir.join(format!("h200-{i}.jsonl"));
            std::fs::write(&p, run_log_of(&env, r)).unwrap();
            p
        })
        .collect();
    (paths, median)
}

fn json(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn calibrate_learns_the_h200_context_the_estimate_uses_it_there_only_and_reset_forgets() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let (logs, median) = write_logs(dir.path());
    let run = dir.path().join("trl.toml");
    std::fs::write(&run, TRL_RUN).unwrap();
    let check = |log: &Path| {
        json(
            grpofit(&config_dir)
                .arg("check")
                .arg(log)
                .arg("--config")
                .arg(&run)
                .arg("--json"),
        )
    };
    let before = check(&logs[0]);
    assert_eq!(before["calibrated"], Value::Null);

    let learned = json(
        grpofit(&config_dir)
            .arg("calibrate")
            .args(&logs)
            .arg("--json"),
    );
    let entry = &learned["learned"][0];
    assert_eq!(entry["gpu"], "NVIDIA H200");
    assert_eq!(entry["stack"], "trl");
    assert_eq!(entry["runs"], RUNS);
    // the records' median of nvml_after - peak_reserved - nvml_before.used, within 1 MiB
    let context = entry["context_bytes"].as_u64().unwrap();
    assert!(context.abs_diff(median) <= 1 << 20, "{context} vs {median}");
    // and the figure CUDA_CONTEXT was set from on the same records: 0.745-0.771 GiB
    let gib = context as f64 / (1u64 << 30) as f64;
    assert!((0.74..0.78).contains(&gib), "{gib}");
    assert!(entry["spread_bytes"].as_u64().unwrap() > 0);
    let file = config_dir.join("calibration.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("name = \"NVIDIA H200\""), "{text}");
    assert!(
        text.contains(&format!("from {RUNS} runs, spread")),
        "{text}"
    );

    // the estimate for the log's H200 uses it, and moves by the context's change alone
    let after = check(&logs[0]);
    let said = after["calibrated"].as_str().unwrap();
    assert!(
        said.contains(&format!("measured on your NVIDIA H200 in {RUNS} runs")),
        "{said}"
    );
    let builtin = (0.759 * (1u64 << 30) as f64) as u64;
    assert_eq!(
        after["predicted"]["used"].as_i64().unwrap()
            - before["predicted"]["used"].as_i64().unwrap(),
        context as i64 - builtin as i64
    );
    grpofit(&config_dir)
        .arg("check")
        .arg(&logs[0])
        .arg("--config")
        .arg(&run)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("measured on your NVIDIA H200"));
    // another GPU's log: the built-in context
    let l4 = dir.path().join("l4.jsonl");
    let text = std::fs::read_to_string(&logs[0])
        .unwrap()
        .replace("NVIDIA H200", "NVIDIA L4");
    std::fs::write(&l4, text).unwrap();
    let other = check(&l4);
    assert_eq!(other["calibrated"], Value::Null);
    // a capacity alone names no GPU: not applied
    grpofit(&config_dir)
        .args(["estimate", "--gpu-mem", "140GiB", "--config"])
        .arg(&run)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("measured on your").not());
    // `--gpu H200` names the card without NVML: its calibrated context, as the step time's
    grpofit(&config_dir)
        .args([
            "estimate",
            "--gpu-mem",
            "140GiB",
            "--gpu",
            "H200",
            "--config",
        ])
        .arg(&run)
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains(format!("measured on your NVIDIA H200 in {RUNS} runs"))
                // the table's row says whose context it holds, not the built-in's H200
                .and(predicate::str::contains("as measured on your card (below)"))
                .and(predicate::str::contains("(measured on an H200)").not()),
        );

    // one run: stored, with its uncertainty said
    let single = json(grpofit(&config_dir).arg("calibrate").arg(&l4).arg("--json"));
    assert_eq!(single["learned"][0]["spread_bytes"], Value::Null);
    grpofit(&config_dir)
        .arg("calibrate")
        .arg(&l4)
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("NVIDIA L4 (trl)")
                .and(predicate::str::contains("from 1 run: no spread known")),
        );
    // the H200's runs are kept beside it
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("NVIDIA H200")
    );

    grpofit(&config_dir)
        .args(["calibrate", "--reset"])
        .assert()
        .code(0)
        .stderr(predicate::str::contains("removed"));
    assert!(!file.exists());
    assert_eq!(
        check(&logs[0])["predicted"]["used"],
        before["predicted"]["used"]
    );
    grpofit(&config_dir)
        .args(["calibrate", "--reset"])
        .assert()
        .code(0)
        .stderr(predicate::str::contains("nothing to reset"));
}

#[test]
fn a_log_that_teaches_nothing_is_exit_2_naming_it_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let (logs, _) = write_logs(dir.path());
    let good = std::fs::read_to_string(&logs[0]).unwrap();
    let cases = [
        (
            "truncated.jsonl",
            good[..good.len() - 20].to_string(),
            "truncated.jsonl:3: not a JSON line",
        ),
        (
            "junk.jsonl",
            format!("{good}PK\u{3}\u{4} binary junk\n"),
            "junk.jsonl:4: not a JSON line",
        ),
        (
            "nosteps.jsonl",
            good.lines().take(2).collect::<Vec<_>>().join("\n"),
            "no `step` line",
        ),
        (
            "noname.jsonl",
            good.replace("\"device\":\"NVIDIA H200\",", ""),
            "no GPU name",
        ),
        // the device in use below torch's reserved: another GPU's figures
        (
            "crossed.jsonl",
            good.replace("\"free\":", "\"free\":150109880320,\"was\":"),
            "nothing to learn",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        grpofit(&config_dir)
            .arg("calibrate")
            .arg(&logs[1])
            .arg(&path)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(name).and(predicate::str::contains(needle)));
        assert!(!config_dir.join("calibration.toml").exists(), "{name}");
    }
    grpofit(&config_dir)
        .arg("calibrate")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no run log given"));
}

/// A bad stored entry never breaks a later command (issue 23): it is skipped, with a notice
/// that names the file, the key and the value.
#[test]
fn a_malformed_calibration_entry_is_skipped_naming_the_file_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let file = config_dir.join("calibration.toml");
    std::fs::write(
        &file,
        "[[gpu]]\nname = \"NVIDIA H200\"\nstack = \"trl\"\n\n[[gpu.run]]\nlog = \"a.jsonl\"\ncontext_bytes = \"lots\"\nsteps = 1\nslack = 1.2\n",
    )
    .unwrap();
    let (logs, _) = write_logs(dir.path());
    let run = dir.path().join("trl.toml");
    std::fs::write(&run, TRL_RUN).unwrap();
    for args in [vec!["check"], vec!["calibrate"]] {
        grpofit(&config_dir)
            .args(&args)
            .arg(&logs[0])
            .arg("--config")
            .arg(&run)
            .assert()
            .code(0)
            .stderr(
                predicate::str::contains("calibration.toml")
                    .and(predicate::str::contains("`context_bytes` = \"lots\""))
                    .and(predicate::str::contains("skipped")),
            );
    }
}
