//! `grpofit calibrate` learns `[grpofit] reward_seconds`: TRL times each reward function
//! (`_calculate_rewards`: `profiling_context(self, reward_func_name)`), the callback's step lines
//! carry those timings and name them (`reward_funcs`), and `calibrate` writes their seconds a
//! completion into the run file the log names, so that the next estimate's `rewards` phase
//! counts them and `check` meets the log.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use super::calibrate_time::{
    RUN, callback_lines, grpofit, on_h100, predicted_time, run_logged, stdout_of, step_seconds,
};
use serde_json::Value;
use std::path::Path;

/// The run of `calibrate_time`, 4 micro-batches a step: each process scores 4 x 4 completions.
fn run_file() -> String {
    format!("# my run: keep this comment\n{RUN}gradient_accumulation_steps = 4 # four a step\n")
}

const COMPLETIONS: f64 = 16.0;

/// The callback's lines, each step `seconds` long with TRL's timings of `rewards` (name, kind,
/// seconds) beside its generation.
fn rewarded_lines(seconds: f64, rewards: &[(&str, &str, f64)], steps: usize) -> String {
    callback_lines(&vec![seconds; steps])
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "step" {
                let mut timings = serde_json::json!({"vLLM.generate": 1.0});
                let mut kinds = serde_json::json!({});
                for (name, kind, s) in rewards {
                    timings[*name] = Value::from(*s);
                    kinds[*name] = Value::from(*kind);
                }
                v["trl_timings"] = timings;
                v["reward_funcs"] = kinds;
            }
            format!("{v}\n")
        })
        .collect()
}

fn rewards_phase(v: &Value) -> f64 {
    let phases = v["step_time"]["phases"].as_array().unwrap();
    let p = phases.iter().find(|p| p["phase"] == "rewards").unwrap();
    p["seconds"].as_f64().unwrap()
}

fn check(config_dir: &Path, log: &Path, json: bool) -> String {
    let mut c = grpofit(config_dir);
    c.args(["check", log.to_str().unwrap()]);
    if json {
        c.arg("--json");
    }
    stdout_of(&mut c)
}

#[test]
fn calibrate_writes_the_reward_functions_seconds_and_the_estimate_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, run_file()).unwrap();
    let (predicted, before) = step_seconds(&config_dir, &run);
    assert_eq!(rewards_phase(&before), 0.0);
    let text = stdout_of(&mut on_h100(&config_dir, &run, &["estimate"]));
    assert!(text.contains("not counted: the reward functions"), "{text}");
    // 20 s of reward functions a step: 12 s of one, and two async ones together (8 s the longer)
    let rewards = [
        ("accuracy_reward", "function", 12.0),
        ("judge", "async", 8.0),
        ("judge_b", "async", 5.0),
    ];
    let measured = predicted + 20.0;
    let log = dir.path().join("run.jsonl");
    run_logged(
        &config_dir,
        &run,
        &log,
        &rewarded_lines(measured, &rewards, 4),
    );
    assert_eq!(predicted_time(&log)["rewards"], Value::from(0.0));

    // check, before: the rewards are the gap, and it says which key to set
    let said = check(&config_dir, &log, false);
    assert!(
        said.contains("rewards: predicted 0.0 s, measured 20 s"),
        "{said}"
    );
    let per_completion = 20.0 / COMPLETIONS;
    assert!(
        said.contains(&format!("the rewards are the gap: your reward functions take 20 s a step over the 16 completions each process scores: set `[grpofit] reward_seconds = {per_completion}`")),
        "{said}"
    );

    let said = stdout_of(grpofit(&config_dir).args(["calibrate", log.to_str().unwrap()]));
    assert!(
        said.contains(&format!(
            "reward functions: {per_completion} s a completion (20.000 s a step over the 16 completions each process scores, median of 3 steps of {}): written to {} as `[grpofit] reward_seconds`",
            log.display(),
            run.display()
        )),
        "{said}"
    );
    let written = std::fs::read_to_string(&run).unwrap();
    assert!(
        written.contains(&format!("reward_seconds = {per_completion}")),
        "{written}"
    );
    // every other line of the user's file kept, its comments included
    for line in run_file().lines() {
        assert!(written.contains(line), "{line:?} lost:\n{written}");
    }

    // the next estimate charges them, and the efficiencies did not take them in as well
    let (after, v) = step_seconds(&config_dir, &run);
    assert!((rewards_phase(&v) - 20.0).abs() < 1e-9, "{v}");
    assert!(
        (after / measured - 1.0).abs() < 0.01,
        "{after} against {measured}"
    );
    let text = stdout_of(&mut on_h100(&config_dir, &run, &["estimate"]));
    assert!(
        !text.contains("not counted: the reward functions"),
        "{text}"
    );
    // check, after: the rewards phase meets the log, the gap is gone
    let said = check(&config_dir, &log, false);
    assert!(
        said.contains("rewards: predicted 20 s, measured 20 s"),
        "{said}"
    );
    assert!(!said.contains("the rewards are the gap"), "{said}");
    let c: Value = serde_json::from_str(&check(&config_dir, &log, true)).unwrap();
    assert!(
        c["step_time"]["error_percent"].as_f64().unwrap().abs() < 1.0,
        "{c}"
    );
    assert_eq!(
        c["step_time"]["rewards"]["measured_seconds"],
        Value::from(20.0)
    );
    // again on the same log: the file already holds it, nothing rewritten
    let said = stdout_of(grpofit(&config_dir).args(["calibrate", log.to_str().unwrap()]));
    assert!(said.contains("already in"), "{said}");
    assert_eq!(std::fs::read_to_string(&run).unwrap(), written);
    let mut json = grpofit(&config_dir);
    json.args(["calibrate", "--json", log.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&stdout_of(&mut json)).unwrap();
    let r = &v["reward_seconds"][0];
    assert_eq!(r["reward_seconds"], Value::from(per_completion), "{v}");
    assert_eq!(
        (&r["completions"], &r["steps"], &r["written"]),
        (&Value::from(16), &Value::from(3), &Value::Bool(false)),
        "{v}"
    );
}

#[test]
fn a_log_without_reward_timings_or_with_reward_models_only_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, run_file()).unwrap();
    let (predicted, _) = step_seconds(&config_dir, &run);
    for (name, lines, why) in [
        (
            "untimed.jsonl",
            callback_lines(&[predicted; 3]),
            "no step line times a reward function",
        ),
        (
            "models.jsonl",
            rewarded_lines(predicted, &[("Skywork-RM", "model", 2.0)], 3),
            "the rewards timed are reward models only",
        ),
    ] {
        let log = dir.path().join(name);
        run_logged(&config_dir, &run, &log, &lines);
        let out = grpofit(&config_dir)
            .args(["calibrate", log.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains(&format!(
                "{}: reward_seconds not learned: {why}",
                log.display()
            )),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&run).unwrap(), run_file());
    }
}

/// `grpofit.time_rewards` measures the seconds in Python and hands them to the binary:
/// `calibrate --reward-seconds` writes them as a learned value is written.
#[test]
fn reward_seconds_given_are_written_into_the_run_file_to_three_figures() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, run_file()).unwrap();
    let given = |seconds: &str| {
        let mut c = grpofit(&config_dir);
        c.args(["calibrate", "--reward-seconds", seconds, "--config"])
            .arg(&run);
        c
    };
    let said = stdout_of(&mut given("0.0123456"));
    assert!(
        said.contains(&format!(
            "reward functions: 0.0123 s a completion: written to {} as `[grpofit] reward_seconds`",
            run.display()
        )),
        "{said}"
    );
    let written = std::fs::read_to_string(&run).unwrap();
    assert!(written.contains("reward_seconds = 0.0123\n"), "{written}");
    for line in run_file().lines() {
        assert!(written.contains(line), "{line:?} lost:\n{written}");
    }
    let (_, v) = step_seconds(&config_dir, &run);
    assert!(
        (rewards_phase(&v) - 0.0123 * COMPLETIONS).abs() < 1e-12,
        "{v}"
    );
    let again: Value = serde_json::from_str(&stdout_of(given("0.0123").arg("--json"))).unwrap();
    assert_eq!(again["written"], Value::Bool(false), "{again}");
    assert_eq!(std::fs::read_to_string(&run).unwrap(), written);

    // no run file, out of range, a TRL recipe: exit 2, named, nothing written
    let recipe = dir.path().join("recipe.yaml");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let yaml = std::fs::read_to_string(root.join("tests/fixtures/journeys/trl-docs-grpo.yaml"));
    std::fs::write(&recipe, yaml.unwrap()).unwrap();
    let mut on_recipe = grpofit(&config_dir);
    on_recipe.args([
        "--offline",
        "calibrate",
        "--reward-seconds",
        "0.5",
        "--config",
    ]);
    let mut no_file = grpofit(&config_dir);
    no_file.args(["calibrate", "--reward-seconds", "0.5"]);
    for (mut c, needle) in [
        (
            no_file,
            "no run file to write it into: pass --config run.toml",
        ),
        (given("1e9"), "out of range, expected 0 to 86400"),
        (
            {
                on_recipe.arg(&recipe);
                on_recipe
            },
            "is a TRL recipe, which holds no `[grpofit]` key",
        ),
    ] {
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&run).unwrap(), written);
}

/// Whether process `pid` waits for a lock (`/proc/locks`: a waiter's line reads `N: -> FLOCK
/// ... PID ...`).
fn waits_for_a_lock(pid: u32) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"->") && f.get(5) == Some(&pid.to_string().as_str())
    })
}

/// `calibrate` writes calibration.toml and the run file's `reward_seconds`: a run file changed
/// after it was read (here while `calibrate` waits for calibration.toml's lock) is refused, and
/// calibration.toml is left as it was too, not half the work done.
#[cfg(target_os = "linux")]
#[test]
fn a_run_file_changed_meanwhile_leaves_calibration_toml_unwritten_too() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(&run, run_file()).unwrap();
    let (predicted, _) = step_seconds(&config_dir, &run);
    let log = dir.path().join("run.jsonl");
    let rewards = [("accuracy_reward", "function", 20.0)];
    run_logged(
        &config_dir,
        &run,
        &log,
        &rewarded_lines(predicted + 20.0, &rewards, 4),
    );
    let calibration = config_dir.join("calibration.toml");
    std::fs::write(&calibration, "# the user's calibration\n").unwrap();
    let lock = grpofit_core::files::lock_beside(&calibration).unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_grpofit"));
    c.args(["--no-gpu", "calibrate", log.to_str().unwrap()])
        .env("GRPOFIT_CONFIG_DIR", &config_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    let waited = std::time::Instant::now();
    while !waits_for_a_lock(child.id()) {
        assert!(
            waited.elapsed().as_secs() < 60,
            "calibrate never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // the run file read, the learned value planned: saved again in an editor
    let edited = format!("{}learning_rate = 3e-6 # saved meanwhile\n", run_file());
    std::fs::write(&run, &edited).unwrap();
    drop(lock);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("changed on disk since grpofit read it"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&run).unwrap(), edited);
    assert_eq!(
        std::fs::read_to_string(&calibration).unwrap(),
        "# the user's calibration\n"
    );
}
