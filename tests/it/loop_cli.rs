//! Closing the loop with a real run: `grpofit callback` writes a valid Python callback, and
//! `grpofit check` sets its log against the estimate.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
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
    let out = grpofit()
        .current_dir(dir.path())
        .arg("callback")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let path = dir.path().join("grpofit_callback.py");
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), written);
    for needle in [
        "class GrpofitCallback(TrainerCallback)",
        "def __init__(self, log_path=None)",
        "GRPOFIT_LOG",
        "grpofit-run.jsonl",
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
    // the file already holds the callback: left as it is, and still printed (`grpofit callback
    // > cb.py` after a first `grpofit callback` gave an empty cb.py and exit 2)
    let again = grpofit()
        .current_dir(dir.path())
        .arg("callback")
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&again.stdout), written);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds this callback"));
    // anything else there: no overwrite without --force
    std::fs::write(&path, "old").unwrap();
    grpofit()
        .current_dir(dir.path())
        .arg("callback")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--force"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
    let other = dir.path().join("cb.py");
    grpofit()
        .args(["callback", "--force", "-o"])
        .arg(&path)
        .assert()
        .code(0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
    grpofit()
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
        "examples/grpofit_callback.py",
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

/// `grpofit check LOG --preset 24gb --json`, which must exit 0, as JSON.
fn check_json(log: &Path) -> serde_json::Value {
    let out = grpofit()
        .arg("check")
        .arg(log)
        .args(["--preset", "24gb", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn check_prints_predicted_against_measured_with_the_percent() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), &good_log());
    let v = check_json(&log);
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
    let est = grpofit()
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
    grpofit()
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
    grpofit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("log.jsonl:2"));
    // no step at all
    let log = log_in(dir.path(), "{\"kind\": \"start\", \"total\": 1}\n");
    grpofit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no `step` line"));
}

/// Every line of a run log, parsed.
fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kinds(lines: &[serde_json::Value]) -> Vec<&str> {
    lines.iter().map(|l| l["kind"].as_str().unwrap()).collect()
}

/// The 24gb preset with `extra` added to its `[env]` (the file's last table).
fn run_file_in(dir: &Path, extra: &str) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("presets/24gb.toml")).unwrap();
    assert!(
        text.trim_end()
            .rsplit("\n[")
            .next()
            .unwrap()
            .starts_with("env]")
    );
    let path = dir.join("run.toml");
    std::fs::write(&path, format!("{}\n{extra}", text.trim_end())).unwrap();
    path
}

#[test]
fn run_passes_the_commands_status_through_and_writes_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("seven.jsonl");
    let out = grpofit()
        .args(["run", "--preset", "24gb", "--log"])
        .arg(&log)
        .args(["--", "sh", "-c", "echo out; echo err >&2; exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    // the command's output passes through unchanged, grpofit's own lines go to stderr
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\nerr\n"), "{err}");
    assert!(err.contains("no GPU samples are taken: --no-gpu"), "{err}");
    assert!(err.contains(&log.display().to_string()), "{err}");
    assert!(
        !err.contains('\r'),
        "no live status without a terminal: {err}"
    );
    let lines = log_lines(&log);
    assert_eq!(kinds(&lines), ["prediction", "exit"]);
    let est = grpofit()
        .args(["estimate", "--preset", "24gb", "--json"])
        .output()
        .unwrap();
    let est: serde_json::Value = serde_json::from_slice(&est.stdout).unwrap();
    assert_eq!(lines[0]["peak"], est["total_bytes"]);
    assert_eq!(lines[0]["stack"], "unsloth");
    assert_eq!(lines[0]["preset"], "24gb");
    assert_eq!(lines[1]["code"], 7);
    // a signal: 128 + its number, as a shell reports it (a second run: --append)
    grpofit()
        .args(["run", "--preset", "24gb", "--log"])
        .arg(&log)
        .arg("--append")
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .assert()
        .code(128 + 15);
}

#[test]
fn run_without_a_log_names_a_dated_one_here() {
    let dir = tempfile::tempdir().unwrap();
    let out = grpofit()
        .current_dir(dir.path())
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let name = &names[0];
    // grpofit-run-YYYYMMDD-HHMMSS.jsonl
    assert!(
        name.starts_with("grpofit-run-") && name.ends_with(".jsonl"),
        "{name}"
    );
    let stamp = &name["grpofit-run-".len()..name.len() - ".jsonl".len()];
    assert_eq!(stamp.len(), 15, "{stamp}");
    assert!(
        stamp[..8]
            .chars()
            .chain(stamp[9..].chars())
            .all(|c| c.is_ascii_digit())
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(name.as_str()));
}

/// Four runs without `--log` started at once (within one second: each takes the same
/// `grpofit-run-YYYYMMDD-HHMMSS` stamp) all run, each with a log of its own (issue 28: three
/// exited 2, the name taken).
#[test]
fn four_runs_in_the_same_second_get_four_logs() {
    let dir = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("grpofit");
    let runs: Vec<std::process::Child> = (0..4)
        .map(|_| {
            std::process::Command::new(&bin)
                .current_dir(dir.path())
                .env("HF_HUB_OFFLINE", "1")
                .args(["--no-gpu", "run", "--preset", "24gb", "--", "true"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
    for name in &names {
        // the glob grpofit-run-YYYYMMDD-HHMMSS*.jsonl finds each
        assert!(
            name.starts_with("grpofit-run-") && name.ends_with(".jsonl"),
            "{name}"
        );
        let log = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(log.lines().count(), 2, "{name}: {log}");
    }
}

#[test]
fn run_sets_the_env_table_and_the_log_for_the_callback() {
    let dir = tempfile::tempdir().unwrap();
    let config = run_file_in(dir.path(), "GRPOFIT_TEST_NUMBER = 3\n");
    let log = dir.path().join("env.jsonl");
    let out = grpofit()
        .args(["run", "--config"])
        .arg(&config)
        .arg("--log")
        .arg(&log)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"$PYTORCH_CUDA_ALLOC_CONF $GRPOFIT_TEST_NUMBER $GRPOFIT_RUN_LOG\"",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("expandable_segments:True 3 {}\n", log.display())
    );
    // an [env] value no environment variable can hold: exit 2 naming the key and the value
    let bad = run_file_in(dir.path(), "LIST = [1, 2]\n");
    grpofit()
        .args(["run", "--config"])
        .arg(&bad)
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("LIST").and(predicate::str::contains("[1, 2]")));
}

#[test]
fn run_diagnoses_a_real_oom_message_and_exits_with_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    // a message torch 2.11 printed on the H200 (calibration/oom-messages-torch-2.11.txt)
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let messages =
        std::fs::read_to_string(root.join("calibration/oom-messages-torch-2.11.txt")).unwrap();
    let message = messages
        .lines()
        .find(|l| l.contains("Tried to allocate 4.06 GiB"))
        .unwrap();
    let oom = dir.path().join("oom.txt");
    std::fs::write(
        &oom,
        format!("Traceback (most recent call last):\ntorch.OutOfMemoryError: {message}\n"),
    )
    .unwrap();
    let config = run_file_in(dir.path(), "");
    let log = dir.path().join("oom.jsonl");
    let out = grpofit()
        .args(["run", "--config"])
        .arg(&config)
        .arg("--log")
        .arg(&log)
        .args(["--", "sh", "-c", "cat \"$0\" >&2; exit 1"])
        .arg(&oom)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(message), "the message passes through: {err}");
    assert!(err.contains("ran out of GPU memory"), "{err}");
    assert!(err.contains("verdict:"), "{err}");
    assert!(err.contains("requested              4.06 GiB"), "{err}");
    // the proposed fit, on the 8 GiB the message allowed
    assert!(
        err.contains("on 8.00 GiB (the cap in the message)"),
        "{err}"
    );
    assert_eq!(kinds(&log_lines(&log)), ["prediction", "exit"]);
    // the same diagnosis as `grpofit diagnose` with the same run
    let diagnosed = grpofit()
        .arg("diagnose")
        .arg(&oom)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let diagnosed = String::from_utf8_lossy(&diagnosed.stdout);
    assert!(
        err.contains(diagnosed.trim_end()),
        "{diagnosed}\n---\n{err}"
    );
    // a failure that is no OOM: no diagnosis
    let out = grpofit()
        .args(["run", "--config"])
        .arg(&config)
        .arg("--log")
        .arg(&log)
        .arg("--append")
        .args(["--", "sh", "-c", "echo 'ValueError: bad' >&2; exit 1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("verdict:"));
}

#[test]
fn run_of_a_command_that_does_not_exist_is_exit_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("never.jsonl");
    grpofit()
        .args(["run", "--log"])
        .arg(&log)
        .args(["--", "grpofit-no-such-command", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "cannot start `grpofit-no-such-command`",
        ));
    assert!(!log.exists(), "no empty log is left behind");
    grpofit()
        .arg("run")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("<COMMAND>"));
}

#[cfg(unix)]
#[test]
fn ctrl_c_reaches_the_command_and_the_log_is_still_written() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("interrupted.jsonl");
    let ready = dir.path().join("ready");
    // its own process group, as a terminal's foreground job: Ctrl-C signals the whole group
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("grpofit"))
        .args(["--no-gpu", "run", "--log"])
        .arg(&log)
        .args([
            "--",
            "sh",
            "-c",
            "trap 'exit 42' INT; touch \"$0\"; while :; do sleep 0.05; done",
        ])
        .arg(&ready)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let group = format!("-{}", child.id());
    let sent = std::process::Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(42),
        "grpofit waited and passed the status on"
    );
    let lines = log_lines(&log);
    assert_eq!(kinds(&lines), ["prediction", "exit"]);
    assert_eq!(lines[1]["code"], 42);
}

#[test]
fn check_reads_a_run_log_with_the_nvml_peak_as_the_whole_process() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    // what `grpofit run` writes, with the callback's lines between its samples
    let sample = |t: f64, used: u64, tree: u64| {
        format!(
            "{{\"kind\": \"nvml\", \"t\": {t}, \"gpus\": [{{\"index\": 0, \"name\": \"NVIDIA GeForce RTX 4090\", \"used\": {used}, \"total\": {}}}], \"tree\": {tree}, \"processes\": 2}}\n",
            24 * GIB
        )
    };
    let text = format!(
        "{{\"kind\": \"prediction\", \"device\": \"NVIDIA GeForce RTX 4090\", \"total\": {}, \"used_before\": {}, \"stack\": \"unsloth\", \"peak\": 1}}\n{}{}{}{{\"kind\": \"exit\", \"code\": 0}}\n",
        24 * GIB,
        GIB / 2,
        sample(0.5, 3 * GIB, 2 * GIB),
        good_log(),
        sample(1.0, 14 * GIB, 13 * GIB + GIB / 2),
    );
    std::fs::write(&log, &text).unwrap();
    let v = check_json(&log);
    assert_eq!(v["steps"], 3);
    assert_eq!(v["nvml_peak"], 13 * GIB + GIB / 2);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[3]["name"], "whole process (NVML peak)");
    assert_eq!(rows[3]["measured_bytes"], 13 * GIB + GIB / 2);
    assert_eq!(rows[3]["predicted_bytes"], v["predicted"]["used"]);
    // samples alone (no callback): the NVML row only
    let samples_only: String = text
        .lines()
        .filter(|l| !l.contains("\"step\"") && !l.contains("\"start\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, samples_only).unwrap();
    grpofit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("whole process (NVML peak)")
                .and(predicate::str::contains("13.50 GiB"))
                .and(predicate::str::contains(
                    "0 steps on NVIDIA GeForce RTX 4090",
                ))
                .and(predicate::str::contains("peak allocated").not())
                // each row that is there is explained, and only those
                .and(predicate::str::contains(
                    "whole process: the largest memory NVML",
                ))
                .and(predicate::str::contains("torch's counters").not())
                .and(predicate::str::contains("device in use:").not()),
        );
    // the callback's lines alone: no NVML row, and no word of one
    let callback_only: String = text
        .lines()
        .filter(|l| !l.contains("\"nvml\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, callback_only).unwrap();
    grpofit()
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("torch's counters")
                .and(predicate::str::contains("whole process").not()),
        );
}

#[test]
fn the_callbacks_python_unittest_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "tests/python", "-v"])
        .current_dir(root)
        .output()
        .expect("python3 runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Ran 7 tests"), "{err}");
}

#[test]
fn follow_opens_on_the_run_file_the_log_names_and_refuses_a_missing_log() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_file_in(dir.path(), "");
    std::fs::rename(&run, dir.path().join("mine.toml")).unwrap();
    grpofit()
        .current_dir(dir.path())
        .args([
            "run",
            "--config",
            "mine.toml",
            "--log",
            "run.jsonl",
            "--",
            "true",
        ])
        .assert()
        .success();
    let lines = log_lines(&dir.path().join("run.jsonl"));
    let named = lines[0]["config"].as_str().unwrap();
    assert!(Path::new(named).is_absolute(), "{named}");
    assert!(named.ends_with("mine.toml"), "{named}");
    // without a terminal the screen prints its estimate: of the log's run, from anywhere
    let out = grpofit()
        .arg("--follow")
        .arg(dir.path().join("run.jsonl"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("run: {named} (--config)")), "{text}");
    // a log that is not there: exit 2, named
    let out = grpofit()
        .args(["--follow", "no-such-run.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--follow no-such-run.jsonl: cannot read"),
        "{err}"
    );
}
