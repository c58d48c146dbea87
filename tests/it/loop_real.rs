//! The loop run as a user runs it, against logs of real trainers: `grpofit run --
//! python train.py` on CPU (tests/fixtures/loop/README.md: a tiny random qwen2, LoRA, two
//! reward functions, TRL's own `GRPOTrainer.train()` and the callback grpofit writes), then
//! `check`, `calibrate`, `estimate` and `check` again on the log it wrote.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use super::calibrate_time::{grpofit, stdout_of};
use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/loop");

/// The release's run folder (run.toml, model/config.json, the logs) copied into `into`.
fn copy_run(release: &str, into: &Path) -> PathBuf {
    let from = Path::new(FIXTURES).join(release);
    let to = into.join(release);
    copy_dir(&from, &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The lines of `after` that `before` lacks, and those it lost.
fn changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let added = after
        .lines()
        .filter(|l| !before.lines().any(|b| b == *l))
        .map(str::to_string)
        .collect();
    let lost = before
        .lines()
        .filter(|l| !after.lines().any(|a| a == *l))
        .map(str::to_string)
        .collect();
    (added, lost)
}

/// `calibrate` writes `reward_seconds` and nothing else: the user's relative `model_config`
/// stays as they spelled it (it was written back as the absolute path the reader resolved).
#[test]
fn calibrate_keeps_a_relative_model_config_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = copy_run("trl-1.16.0", dir.path());
    let run = run_dir.join("run.toml");
    let before = std::fs::read_to_string(&run).unwrap();
    let log = run_dir.join("ni1.jsonl");
    stdout_of(grpofit(&dir.path().join("config")).args([
        "calibrate",
        log.to_str().unwrap(),
        "--config",
        run.to_str().unwrap(),
    ]));
    let after = std::fs::read_to_string(&run).unwrap();
    let (added, lost) = changed_lines(&before, &after);
    assert!(lost.is_empty(), "lost {lost:?}:\n{after}");
    assert_eq!(added.len(), 2, "{added:?}");
    assert!(added[0].starts_with("# tuned by grpofit"), "{added:?}");
    assert!(added[1].starts_with("reward_seconds = "), "{added:?}");
    assert!(
        after.contains("model_config = \"model/config.json\""),
        "{after}"
    );
}

/// The callback's lines (`start`, `step`) of the release's real log `name`.
fn callback_lines_of(run_dir: &Path, name: &str) -> String {
    std::fs::read_to_string(run_dir.join(name))
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"kind\": \"start\"") || l.contains("\"kind\": \"step\""))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `grpofit run --log LOG [--append] -- sh -c SCRIPT` on the release's run file; its stderr.
fn run_under_grpofit(
    config_dir: &Path,
    run: &Path,
    log: &Path,
    append: bool,
    script: &str,
) -> String {
    let mut c = grpofit(config_dir);
    c.args(["run", "--config", run.to_str().unwrap(), "--gpu", "H100"])
        .args(["--gpu-mem", "80GiB", "--log", log.to_str().unwrap()]);
    if append {
        c.arg("--append");
    }
    let out = c.args(["--", "sh", "-c", script]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

/// A run whose command wrote no callback line into the log (the callback not passed, given a
/// path of its own, or on a machine without CUDA, where it writes nothing) is said so when it
/// ends, with what to pass: `check` on that log can only refuse it. Only this run's lines count
/// (`--append` after a run that had them).
#[test]
fn run_says_when_the_callback_wrote_no_line_into_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run_dir = copy_run("trl-1.16.0", dir.path());
    let run = run_dir.join("run.toml");
    let lines = dir.path().join("callback.jsonl");
    std::fs::write(&lines, callback_lines_of(&run_dir, "ni1.jsonl")).unwrap();
    let log = dir.path().join("run.jsonl");
    let with = format!("cat '{}' >> \"$GRPOFIT_RUN_LOG\"", lines.display());
    let said = run_under_grpofit(&config_dir, &run, &log, false, &with);
    assert!(!said.contains("the callback wrote no line"), "{said}");
    let said = run_under_grpofit(&config_dir, &run, &log, true, "true");
    assert!(
        said.contains("the callback wrote no line into this log")
            && said
                .contains("pass `callbacks=[GrpofitCallback()]` to the trainer with no log path"),
        "{said}"
    );
}

/// `grpofit callback` names the loop's next step as README.md gives it: training under
/// `grpofit run`, whose log is the dated one it prints; it named `grpofit check
/// grpofit-run.jsonl`, a file a run under `grpofit run` never writes.
#[test]
fn callback_names_the_next_step_of_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let out = grpofit(&dir.path().join("config"))
        .current_dir(dir.path())
        .arg("callback")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(
        said.contains("then train under `grpofit run --config run.toml -- python train.py`"),
        "{said}"
    );
    assert!(!said.contains("grpofit check grpofit-run.jsonl"), "{said}");
}

/// The reward functions' seconds a completion of a real log, worked out here from its step
/// lines as docs/loop.md says: the scoring steps (those whose `trl_timings` time a reward),
/// their rewards' seconds added up over the 4 completions each scores (per_device_train_batch_size
/// 4), the median over them with the first left out.
fn reward_seconds_of(log: &Path) -> f64 {
    let mut per_completion: Vec<f64> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "step")
        .filter_map(|v| {
            let kinds = v["reward_funcs"].as_object()?;
            let timed = &v["trl_timings"];
            let sum: f64 = kinds.keys().filter_map(|k| timed[k].as_f64()).sum();
            (sum > 0.0).then_some(sum / 4.0)
        })
        .skip(1)
        .collect();
    per_completion.sort_by(f64::total_cmp);
    let n = per_completion.len();
    assert!(n > 0, "{}", log.display());
    if n % 2 == 1 {
        per_completion[n / 2]
    } else {
        (per_completion[n / 2 - 1] + per_completion[n / 2]) / 2.0
    }
}

fn json_of(c: &mut assert_cmd::Command) -> serde_json::Value {
    serde_json::from_str(&stdout_of(c)).unwrap()
}

/// The loop on each real log (trl 1.16.0 and 0.23.0, num_iterations 1 and 2): `calibrate`
/// writes the reward functions' seconds the log's scoring steps measured (with num_iterations
/// 2 one step in two scores), and `check` afterwards predicts the rewards phase the log
/// measured, a step's average over its generation cycle.
#[test]
fn the_loop_on_real_logs_meets_its_own_rewards() {
    for (release, ni) in [
        ("trl-1.16.0", 1),
        ("trl-1.16.0", 2),
        ("trl-0.23.0", 1),
        ("trl-0.23.0", 2),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().join("config");
        let run_dir = copy_run(release, dir.path());
        let run = run_dir.join("run.toml");
        let text = std::fs::read_to_string(&run).unwrap();
        let text = text.replace("num_iterations = 1", &format!("num_iterations = {ni}"));
        std::fs::write(&run, &text).unwrap();
        let log = run_dir.join(format!("ni{ni}.jsonl"));
        let (log_s, run_s) = (log.to_str().unwrap(), run.to_str().unwrap());
        let learned =
            json_of(grpofit(&config_dir).args(["calibrate", log_s, "--config", run_s, "--json"]));
        let written = learned["reward_seconds"][0]["reward_seconds"]
            .as_f64()
            .unwrap();
        let expected = reward_seconds_of(&log);
        assert!(
            (written / expected - 1.0).abs() < 0.005,
            "{release} ni {ni}: {written} against {expected}: {learned}"
        );
        let c = json_of(grpofit(&config_dir).args(["check", log_s, "--config", run_s, "--json"]));
        let r = &c["step_time"]["rewards"];
        let (p, m) = (
            r["predicted_seconds"].as_f64().unwrap(),
            r["measured_seconds"].as_f64().unwrap(),
        );
        assert!((p / m - 1.0).abs() < 0.01, "{release} ni {ni}: {r}");
    }
}

/// `check` on a run cut short says how it ended (the `exit` line): a run stopped by Ctrl-C
/// (the real log of one), or one whose command failed, measured only the steps it ran; it
/// said nothing of it, so a run that died before its peak read as a fit.
#[test]
fn check_says_when_the_run_ended_early() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run_dir = copy_run("trl-0.23.0", dir.path());
    let run = run_dir.join("run.toml");
    let check = |log: &Path| {
        stdout_of(grpofit(&config_dir).args([
            "check",
            log.to_str().unwrap(),
            "--config",
            run.to_str().unwrap(),
        ]))
    };
    let said = check(&run_dir.join("ctrl-c.jsonl"));
    assert!(
        said.contains("ended: stopped by signal 2: the figures are those of the steps it ran"),
        "{said}"
    );
    assert!(!check(&run_dir.join("ni1.jsonl")).contains("ended:"));
    // a command that failed, its callback lines written first
    let lines = dir.path().join("callback.jsonl");
    std::fs::write(&lines, callback_lines_of(&run_dir, "ni1.jsonl")).unwrap();
    let log = dir.path().join("failed.jsonl");
    let out = grpofit(&config_dir)
        .args([
            "run",
            "--config",
            run.to_str().unwrap(),
            "--gpu-mem",
            "80GiB",
            "--log",
        ])
        .arg(&log)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "cat '{}' >> \"$GRPOFIT_RUN_LOG\"; exit 3",
            lines.display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    // the prediction line comes first, however quickly the command writes (it was written
    // after the command started: a command quicker than that put its lines before it)
    let first = std::fs::read_to_string(&log).unwrap();
    assert!(
        first
            .lines()
            .next()
            .unwrap()
            .contains("\"kind\":\"prediction\""),
        "{first}"
    );
    let said = check(&log);
    assert!(
        said.contains(
            "ended: the command failed (exit 3): the figures are those of the steps it ran"
        ),
        "{said}"
    );
}

/// `calibrate` divides the rewards' seconds by the completions the log's run scored, which its
/// prediction line says, not by those of the run file as it is when `calibrate` reads it: a
/// batch doubled since (by hand, or `fit -o`) halved the `reward_seconds` it wrote.
#[test]
fn calibrate_counts_the_completions_the_logs_run_scored() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = copy_run("trl-1.16.0", dir.path());
    let run = run_dir.join("run.toml");
    let log = run_dir.join("completions.jsonl");
    let expected = reward_seconds_of(&log);
    let text = std::fs::read_to_string(&run).unwrap();
    let doubled = text.replace(
        "per_device_train_batch_size = 4",
        "per_device_train_batch_size = 8",
    );
    assert_ne!(text, doubled);
    std::fs::write(&run, doubled).unwrap();
    let learned = json_of(grpofit(&dir.path().join("config")).args([
        "calibrate",
        log.to_str().unwrap(),
        "--config",
        run.to_str().unwrap(),
        "--json",
    ]));
    let w = &learned["reward_seconds"][0];
    assert_eq!(w["completions"], 4, "{learned}");
    let written = w["reward_seconds"].as_f64().unwrap();
    assert!(
        (written / expected - 1.0).abs() < 0.005,
        "{written} against {expected}"
    );
}

/// A command that cannot start leaves the log as it was: the prediction line, written before
/// the command starts, is taken back (the log removed when the run made it; an `--append`ed
/// log cut back to its earlier runs).
#[test]
fn a_command_that_cannot_start_leaves_the_log_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run_dir = copy_run("trl-1.16.0", dir.path());
    let run = run_dir.join("run.toml");
    let earlier = std::fs::read_to_string(run_dir.join("ni1.jsonl")).unwrap();
    for (log, append) in [
        (run_dir.join("new.jsonl"), false),
        (run_dir.join("ni1.jsonl"), true),
    ] {
        let mut c = grpofit(&config_dir);
        c.args([
            "run",
            "--config",
            run.to_str().unwrap(),
            "--gpu-mem",
            "80GiB",
            "--log",
        ])
        .arg(&log);
        if append {
            c.arg("--append");
        }
        let out = c.args(["--", "/nonexistent/python"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        if append {
            assert_eq!(std::fs::read_to_string(&log).unwrap(), earlier);
        } else {
            assert!(!log.exists());
        }
    }
}
