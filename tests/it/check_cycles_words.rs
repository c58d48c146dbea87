//! `check`'s words on a run that generates every other step (`num_iterations = 2`): the step's
//! figure is the median over generation cycles of each cycle's average a step
//! (`measure::median::per_step_of`), and the rewards' gap gives the same average the rewards
//! line shows, beside the scoring step's own seconds (which `reward_seconds` is learned from).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use super::calibrate_cycles::{REWARDS, cycled_lines};
use super::calibrate_time::{RUN, grpofit, run_logged, stdout_of, step_seconds};

#[test]
fn the_rewards_gap_gives_the_average_a_step_the_rewards_line_gives() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let run = dir.path().join("run.toml");
    std::fs::write(
        &run,
        format!("{RUN}gradient_accumulation_steps = 4\nnum_iterations = 2\n"),
    )
    .unwrap();
    let (predicted, v) = step_seconds(&config_dir, &run);
    let generation = v["step_time"]["phases"][0]["seconds"].as_f64().unwrap();
    let log = dir.path().join("run.jsonl");
    // the generation as predicted (a third of it, three times over), the rewards 20 s a
    // scoring step: 10 s a step on average over each two-step cycle
    run_logged(
        &config_dir,
        &run,
        &log,
        &cycled_lines(predicted, generation / 3.0, 2, 8),
    );
    let said = stdout_of(grpofit(&config_dir).args(["check", log.to_str().unwrap()]));
    let average = REWARDS / 2.0;
    assert!(
        said.contains(&format!(
            "rewards: predicted 0.0 s, measured {average:.0} s"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "the rewards are the gap: your reward functions take {average:.0} s a step on average, {REWARDS:.0} s each step that scores, over the 16 completions each process scores: set `[grpofit] reward_seconds = 1.25`"
        )),
        "{said}"
    );
    assert!(
        said.contains("(the median over the generation cycles of 6 steps of each cycle's average a step, the first cycle left out when there are more)"),
        "{said}"
    );
}
