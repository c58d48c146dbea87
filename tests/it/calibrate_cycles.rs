//! A run that generates on some steps only: TRL generates and scores once every
//! `steps_per_generation x num_iterations` micro-steps (trl 1.16.0 `_prepare_inputs`), so with
//! `num_iterations = 2` one step in two carries the generation and the rewards and the next
//! trains on the same completions again. The estimate charges every step the average; `calibrate`
//! and `check` set the log's cycles against it, and learn from such a log what they learn from
//! a run that generates every step.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use super::calibrate_time::{
    RUN, callback_lines, grpofit, predicted_time, run_logged, stdout_of, step_seconds,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Seconds of reward functions in a step that scores: 16 completions (4 micro-batches of 4 rows,
/// one generation batch), 1.25 s each.
pub(crate) const REWARDS: f64 = 20.0;

/// The callback's lines of `steps` steps of a run predicted `predicted` s a step, `generation`
/// of them generation, one generation every `every` steps: the generation three times as long
/// as predicted, the reward functions `REWARDS` a scoring step, the rest as predicted.
pub(crate) fn cycled_lines(predicted: f64, generation: f64, every: usize, steps: usize) -> String {
    let k = every as f64;
    // the rest of a step, on average as predicted: the prediction's rewards phase is 0
    let rest = predicted - generation;
    callback_lines(&vec![0.0; steps])
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "step" {
                let i = v["step"].as_u64().unwrap() as usize - 1;
                let mut timings = json!({"_prepare_inputs": 0.01, "compute_loss": 1.0});
                v["seconds"] = Value::from(rest);
                if i.is_multiple_of(every) {
                    let g = 3.0 * generation * k;
                    timings["vLLM.generate"] = Value::from(g);
                    timings["accuracy_reward"] = Value::from(REWARDS);
                    v["reward_funcs"] = json!({"accuracy_reward": "function"});
                    v["seconds"] = Value::from(rest + g + REWARDS);
                }
                v["trl_timings"] = timings;
            }
            format!("{v}\n")
        })
        .collect()
}

struct Calibrated {
    said: String,
    run_file: String,
    check: Value,
    generation: f64,
}

/// `calibrate` then `check` on a log of `run_text`'s run that generates every `every` steps,
/// each in a config folder of its own.
fn calibrated(dir: &Path, name: &str, run_text: &str, every: usize) -> Calibrated {
    let config_dir = dir.join(format!("config-{name}"));
    let run: PathBuf = dir.join(format!("{name}.toml"));
    std::fs::write(&run, run_text).unwrap();
    let (predicted, v) = step_seconds(&config_dir, &run);
    assert_eq!(v["step_time"]["phases"][0]["phase"], "generation");
    let generation = v["step_time"]["phases"][0]["seconds"].as_f64().unwrap();
    let log = dir.join(format!("{name}.jsonl"));
    run_logged(
        &config_dir,
        &run,
        &log,
        &cycled_lines(predicted, generation, every, 8),
    );
    assert_eq!(predicted_time(&log)["rewards"], Value::from(0.0));
    let said = stdout_of(grpofit(&config_dir).args(["calibrate", log.to_str().unwrap()]));
    let mut check = grpofit(&config_dir);
    check.args(["check", log.to_str().unwrap(), "--json"]);
    let check: Value = serde_json::from_str(&stdout_of(&mut check)).unwrap();
    Calibrated {
        said,
        run_file: std::fs::read_to_string(&run).unwrap(),
        check: check["step_time"].clone(),
        generation,
    }
}

/// "decode bandwidth 0.220 of the sheet, matmuls 0.360 of its tensor rate, 10.0 µs": what
/// `calibrate` says it learned of the card.
fn learned_efficiencies(said: &str) -> Option<&str> {
    let from = said.find("decode bandwidth")?;
    let to = said[from..].find("an eager operator")?;
    Some(&said[from..from + to])
}

#[test]
fn a_generation_trained_on_twice_teaches_what_one_every_step_does() {
    let dir = tempfile::tempdir().unwrap();
    let every_step = format!("{RUN}gradient_accumulation_steps = 4\n");
    let reused = format!("{every_step}num_iterations = 2\n");
    let a = calibrated(dir.path(), "every", &every_step, 1);
    let b = calibrated(dir.path(), "reused", &reused, 2);
    // the estimate charges each step half a generation when it generates every other step
    assert!(
        (b.generation / a.generation - 0.5).abs() < 1e-9,
        "{} {}",
        a.generation,
        b.generation
    );
    assert!(learned_efficiencies(&a.said).is_some(), "{}", a.said);
    assert_eq!(
        learned_efficiencies(&a.said),
        learned_efficiencies(&b.said),
        "{}\n{}",
        a.said,
        b.said
    );
    // and the same `reward_seconds`: 20 s over the 16 completions a scoring step scores
    for c in [&a, &b] {
        assert!(
            c.run_file.contains("reward_seconds = 1.25\n"),
            "{}",
            c.run_file
        );
    }
    // check, after: each phase the average a step, which the prediction now meets
    for (c, k) in [(&a, 1.0), (&b, 2.0)] {
        let measured = |phase: &str| c.check[phase]["measured_seconds"].as_f64().unwrap();
        let predicted = |phase: &str| c.check[phase]["predicted_seconds"].as_f64().unwrap();
        assert!(
            (measured("generation") - 3.0 * c.generation).abs() < 1e-9,
            "{}",
            c.check
        );
        assert!(
            (measured("rewards") - REWARDS / k).abs() < 1e-9,
            "{}",
            c.check
        );
        assert!(
            (predicted("rewards") - REWARDS / k).abs() < 1e-9,
            "{}",
            c.check
        );
        let error = c.check["error_percent"].as_f64().unwrap();
        assert!(error.abs() < 10.0, "{}", c.check);
    }
    let error = |c: &Calibrated| c.check["error_percent"].as_f64().unwrap();
    assert!(
        (error(&a) - error(&b)).abs() < 0.5,
        "{} {}",
        a.check,
        b.check
    );
}
