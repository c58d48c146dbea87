//! `grpofit calibrate` learns the step's time: `grpofit run` writes the predicted step and the
//! efficiencies it used into the log's `prediction` line, the callback's step lines carry the
//! measured seconds, and `calibrate` scales the card's efficiencies so that the next
//! `estimate`, `fit --fastest` and `check` meet them, and say so.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit_core::time::efficiency::{DECODE_BANDWIDTH, MATMUL_PEAK};
use serde_json::Value;
use std::path::Path;

/// A TRL run with vLLM colocated on one card: every term of its step takes an efficiency
/// (no link between GPUs), so scaling them scales the whole step.
pub(super) const RUN: &str = r#"
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
use_vllm = true
vllm_mode = "colocate"
"#;

/// The H100's NVML name: the log's device and the card the step is timed on.
pub(super) const H100: &str = "NVIDIA H100 80GB HBM3";

pub(super) fn grpofit(config_dir: &Path) -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("GRPOFIT_CONFIG_DIR", config_dir);
    c
}

pub(super) fn on_h100(config_dir: &Path, run: &Path, cmd: &[&str]) -> Command {
    let mut c = grpofit(config_dir);
    c.args(cmd)
        .args(["--config", run.to_str().unwrap(), "--gpu", H100])
        .args(["--gpu-mem", "80GiB"]);
    c
}

pub(super) fn stdout_of(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(super) fn step_seconds(config_dir: &Path, run: &Path) -> (f64, Value) {
    let v: Value = serde_json::from_str(&stdout_of(&mut on_h100(
        config_dir,
        run,
        &["estimate", "--json"],
    )))
    .unwrap();
    (v["step_time"]["seconds"].as_f64().unwrap(), v)
}

/// The callback's lines for a run whose steps take `seconds` (the first twice as long: it
/// compiles and captures graphs), as a shell command appends them to `$GRPOFIT_RUN_LOG`.
pub(super) fn callback_lines(seconds: &[f64]) -> String {
    let gib = 1u64 << 30;
    let mut lines = vec![
        serde_json::json!({"kind": "start", "device": H100, "total": 80 * gib, "trl": "1.15.0"}),
    ];
    for (i, s) in seconds.iter().enumerate() {
        lines.push(serde_json::json!({"kind": "step", "step": i + 1, "max_allocated": 18 * gib, "max_reserved": 20 * gib, "free": 59 * gib, "total": 80 * gib, "seconds": s}));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// `grpofit run` on `run` with a command that writes the callback's lines into its log.
pub(super) fn run_logged(config_dir: &Path, run: &Path, log: &Path, lines: &str) {
    let dir = log.parent().unwrap();
    let lines_file = dir.join("callback.jsonl");
    std::fs::write(&lines_file, lines).unwrap();
    let mut c = on_h100(config_dir, run, &["run"]);
    c.args(["--log", log.to_str().unwrap(), "--", "sh", "-c"])
        // as a trainer's callback, after `grpofit run` has written its prediction line
        .arg(format!(
            "sleep 0.3; cat '{}' >> \"$GRPOFIT_RUN_LOG\"",
            lines_file.display()
        ));
    stdout_of(&mut c);
}

/// The `prediction` line's `step_time` that `grpofit run` wrote into `log`.
pub(super) fn predicted_time(log: &Path) -> Value {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "prediction")
        .unwrap()["step_time"]
        .clone()
}

/// The decode bandwidth `calibrate` should learn when `measured` seconds meet a prediction of
/// `seconds` of which `scaled` take the efficiencies (the rest, vLLM's host work a decode step,
/// stays): the declared figure over the factor the scaled part grew by.
fn learned(declared: f64, seconds: f64, scaled: f64, measured: f64) -> String {
    let factor = (measured - (seconds - scaled)) / scaled;
    format!("{:.3}", declared / factor)
}

#[test]
fn steps_half_again_as_slow_make_the_next_estimate_half_again_as_long() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    let (predicted, before) = step_seconds(&config_dir, &run);
    assert_eq!(before["step_time"]["calibrated"], Value::Null);
    let log = dir.path().join("run.jsonl");
    let slow = 1.5 * predicted;
    run_logged(
        &config_dir,
        &run,
        &log,
        &callback_lines(&[3.0 * slow, slow, slow, slow]),
    );
    let said = stdout_of(grpofit(&config_dir).args(["calibrate", log.to_str().unwrap()]));
    let calibrated = format!("step time calibrated on 3 steps of {}", log.display());
    assert!(said.contains(&calibrated), "{said}");
    let p = predicted_time(&log);
    let (seconds, scaled) = (
        p["seconds"].as_f64().unwrap(),
        p["scaled"].as_f64().unwrap(),
    );
    let bandwidth = learned(DECODE_BANDWIDTH, seconds, scaled, slow);
    assert!(
        said.contains(&format!("decode bandwidth {bandwidth} of the sheet")),
        "{bandwidth}: {said}"
    );

    let (after, v) = step_seconds(&config_dir, &run);
    assert!(
        (after / predicted - 1.5).abs() < 0.01,
        "{predicted} s -> {after} s"
    );
    assert_eq!(
        v["step_time"]["calibrated"],
        Value::from(calibrated.clone())
    );
    let text = stdout_of(&mut on_h100(&config_dir, &run, &["estimate"]));
    assert!(text.contains(&calibrated), "{text}");
    let fastest = stdout_of(&mut on_h100(&config_dir, &run, &["fit", "--fastest"]));
    assert!(fastest.contains(&calibrated), "{fastest}");
    // `check` on the same log: the calibrated prediction meets the measured median
    let mut check = grpofit(&config_dir);
    check.args([
        "check",
        log.to_str().unwrap(),
        "--config",
        run.to_str().unwrap(),
    ]);
    let checked = stdout_of(check.arg("--json"));
    let c: Value = serde_json::from_str(&checked).unwrap();
    let error = c["step_time"]["error_percent"].as_f64().unwrap();
    assert!(error.abs() < 1.0, "{checked}");
    assert_eq!(c["step_time_calibrated"], Value::from(calibrated));
    // another card keeps the declared efficiencies
    let mut l4 = grpofit(&config_dir);
    l4.args(["estimate", "--json", "--config", run.to_str().unwrap()])
        .args(["--gpu", "NVIDIA L4", "--gpu-mem", "24GiB"]);
    let v: Value = serde_json::from_str(&stdout_of(&mut l4)).unwrap();
    assert_eq!(v["step_time"]["calibrated"], Value::Null);
}

#[test]
fn a_bad_step_time_is_named_with_its_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    let log = dir.path().join("bad.jsonl");
    run_logged(&config_dir, &run, &log, &callback_lines(&[2.0, -4.0]));
    let out = grpofit(&config_dir)
        .args(["calibrate", log.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:4: `seconds` = -4.0: expected seconds from 0 up",
            log.display()
        )),
        "{err}"
    );
    assert!(!config_dir.join("calibration.toml").exists());
    // a calibration file whose learned value is out of range: the entry is skipped, named
    let good = dir.path().join("good.jsonl");
    let (predicted, _) = step_seconds(&config_dir, &run);
    run_logged(
        &config_dir,
        &run,
        &good,
        &callback_lines(&[2.0 * predicted, predicted]),
    );
    let written = std::fs::read_to_string(&good).unwrap();
    assert_eq!(written.lines().count(), 5, "{written}");
    stdout_of(grpofit(&config_dir).args(["calibrate", good.to_str().unwrap()]));
    let file = config_dir.join("calibration.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = regex_free_replace(&text, "matmul_peak = ", "matmul_peak = 7.5 #");
    std::fs::write(&file, bad).unwrap();
    let out = on_h100(&config_dir, &run, &["estimate"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`matmul_peak` = 7.5: expected a fraction"),
        "{err}"
    );
}

/// `text` with the first `from` and the rest of its line replaced by `to`'s start.
fn regex_free_replace(text: &str, from: &str, to: &str) -> String {
    let at = text.find(from).unwrap();
    format!("{}{to}{}", &text[..at], &text[at + from.len()..])
}

/// The callback's lines as above, each step with TRL's own generation timing.
fn timed_callback_lines(seconds: f64, generation: f64, steps: usize) -> String {
    callback_lines(&vec![seconds; steps])
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "step" {
                v["trl_timings"] =
                    serde_json::json!({"vLLM.generate": generation, "_calculate_rewards": 0.001});
            }
            format!("{v}\n")
        })
        .collect()
}

#[test]
fn trls_generation_timing_is_learned_apart_from_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    let (predicted, v) = step_seconds(&config_dir, &run);
    let generation = v["step_time"]["phases"][0]["seconds"].as_f64().unwrap();
    assert_eq!(v["step_time"]["phases"][0]["phase"], "generation");
    // generation three times as long as predicted, the rest as predicted
    let measured = predicted + 2.0 * generation;
    let log = dir.path().join("run.jsonl");
    let lines = timed_callback_lines(measured, 3.0 * generation, 4);
    run_logged(&config_dir, &run, &log, &lines);
    let said = stdout_of(grpofit(&config_dir).args(["calibrate", log.to_str().unwrap()]));
    let p = predicted_time(&log);
    let (g, g_scaled) = (
        p["generation"].as_f64().unwrap(),
        p["generation_scaled"].as_f64().unwrap(),
    );
    let bandwidth = learned(DECODE_BANDWIDTH, g, g_scaled, 3.0 * generation);
    assert!(
        said.contains(&format!("decode bandwidth {bandwidth} of the sheet")),
        "{bandwidth}: {said}"
    );
    // the rest as predicted: the declared GEMM efficiency kept
    assert!(
        said.contains(&format!("matmuls {MATMUL_PEAK:.3} of its tensor rate")),
        "{said}"
    );
    let mut check = grpofit(&config_dir);
    check.args([
        "check",
        log.to_str().unwrap(),
        "--config",
        run.to_str().unwrap(),
    ]);
    let text = stdout_of(&mut check);
    assert!(text.contains("(TRL's own timings)"), "{text}");
    let c: Value = serde_json::from_str(&stdout_of(check.arg("--json"))).unwrap();
    let g = &c["step_time"]["generation"];
    assert!(
        (g["measured_seconds"].as_f64().unwrap() - 3.0 * generation).abs() < 1e-9,
        "{c}"
    );
    // the calibrated generation: its decode three times as long, its prefill as it was
    let predicted_now = g["predicted_seconds"].as_f64().unwrap();
    assert!(
        predicted_now > 2.5 * generation && predicted_now <= 3.0 * generation + 1e-9,
        "{generation} s -> {predicted_now} s"
    );
    let step_now = c["step_time"]["predicted_seconds"].as_f64().unwrap();
    assert!(
        (step_now / measured - 1.0).abs() < 0.1,
        "{step_now} against {measured}"
    );
}

/// open-r1's shape (7 training A100 PCIe cards under ZeRO-3, `trl vllm-serve` on an eighth):
/// the weights' broadcast to the server and ZeRO-3's gathers go over PCIe, which no efficiency
/// sets, so the learned scale applies to the rest and the next estimate still meets the log (a
/// scale of the whole step would miss it by half the link's share).
#[test]
fn terms_over_the_link_are_kept_out_of_the_scale() {
    const A100: &str = "NVIDIA A100 80GB PCIe";
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = root.join("examples/multi-gpu/open-r1-7plus1-h100.toml");
    let on_a100 = |cmd: &[&str]| {
        let mut c = grpofit(&config_dir);
        c.args(cmd)
            .args(["--config", run.to_str().unwrap(), "--gpu", A100]);
        c
    };
    let estimate = || {
        let v: Value =
            serde_json::from_str(&stdout_of(&mut on_a100(&["estimate", "--json"]))).unwrap();
        v["step_time"]["seconds"].as_f64().unwrap()
    };
    let predicted = estimate();
    let slow = 1.5 * predicted;
    let lines = callback_lines(&[2.0 * slow, slow, slow]).replace(H100, A100);
    let log = dir.path().join("open-r1.jsonl");
    std::fs::write(dir.path().join("callback.jsonl"), lines).unwrap();
    let mut c = on_a100(&["run"]);
    c.args(["--log", log.to_str().unwrap(), "--", "sh", "-c"])
        .arg("sleep 0.3; cat callback.jsonl >> \"$GRPOFIT_RUN_LOG\"")
        .current_dir(dir.path());
    stdout_of(&mut c);
    let text = std::fs::read_to_string(&log).unwrap();
    let prediction: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let t = &prediction["step_time"];
    let (seconds, scaled) = (
        t["seconds"].as_f64().unwrap(),
        t["scaled"].as_f64().unwrap(),
    );
    assert!((seconds - predicted).abs() < 1e-9 * predicted, "{t}");
    assert!(scaled < 0.97 * seconds, "the link's share: {t}");
    stdout_of(grpofit(&config_dir).args(["calibrate", log.to_str().unwrap()]));
    let after = estimate();
    assert!(
        (after / slow - 1.0).abs() < 0.002,
        "{predicted} s -> {after} s, measured {slow} s"
    );
}
