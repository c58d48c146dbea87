//! The followed screen (`--follow`) shows `check`'s rewards line (TRL's timed reward functions
//! against the prediction's rewards phase) under the step time, at every size: in-process at
//! 60x20, 80x24 and 200x60, and from the binary in a real terminal (tmux).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::tmux_server::tmux_missing;
use crate::tui::{SIZES, append, screen, send};
use crate::tui_tmux::{tmux, wait_for};
use grpofit::tui::app::{App, GpuState, Msg};
use grpofit::tui::follow::Following;
use grpofit::tui::theme::Theme;
use grpofit_core::measure::tail::Tail;
use std::process::Command;

const GIB: u64 = 1 << 30;

/// Step `step` of `seconds`, TRL's timings with 12 s of one reward function.
fn rewarded_step(step: u64, seconds: f64) -> String {
    format!(
        "{{\"kind\": \"step\", \"step\": {step}, \"max_allocated\": {}, \"max_reserved\": {}, \"free\": {}, \"total\": {}, \"seconds\": {seconds}, \"trl_timings\": {{\"vLLM.generate\": 1.0, \"accuracy_reward\": 12.0}}, \"reward_funcs\": {{\"accuracy_reward\": \"function\"}}}}\n",
        9 * GIB,
        10 * GIB,
        8 * GIB,
        24 * GIB
    )
}

#[test]
fn the_followed_screen_shows_the_rewards_line_at_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    append(&path, "");
    // the 24gb preset, timed on its RTX 4090 (no live GPU names another); its prediction
    // charges no reward functions
    let file = grpofit_core::config::parse(
        grpofit::presets::built_in("24gb").unwrap(),
        "24gb",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: 24 * GIB,
        capacity_from_user: true,
        name: "--gpu-mem".into(),
        live: None,
        unavailable: None,
    };
    let mut a = App::new(file, gpu, Theme::mono(), dir.path().to_path_buf());
    let predicted = a.step_time().unwrap().seconds;
    a.follow(Following::new("run.jsonl"));
    let mut tail = Tail::open(&path).unwrap();
    // the steps take the prediction and the rewards' 12 s: the rewards are the gap
    for step in 1..=3 {
        append(&path, &rewarded_step(step, predicted + 12.0));
    }
    send(&mut a, Msg::Log(tail.look()));
    for (w, h) in SIZES {
        let s = screen(&a, w, h);
        let line = s.lines().find(|l| l.contains("◆ rewards"));
        let line = line.unwrap_or_else(|| panic!("{w}x{h}\n{s}"));
        assert!(
            line.contains("12 s") && line.contains("0.0 s"),
            "{w}x{h}\n{s}"
        );
        assert!(s.lines().last().unwrap().contains("q quit"), "{w}x{h}\n{s}");
    }
    let wide = screen(&a, 200, 60);
    assert!(
        wide.contains(
            "◆ rewards: predicted 0.0 s, measured 12 s (TRL's own timings) · the gap: set [grpofit] reward_seconds ="
        ),
        "{wide}"
    );
    // the rewards line sits under the step time
    let lines: Vec<&str> = wide.lines().collect();
    let at = lines.iter().position(|l| l.contains("◆ rewards")).unwrap();
    assert!(lines[at - 1].contains("step ≈"), "{wide}");
}

#[test]
fn the_followed_binary_shows_the_rewards_line() {
    if tmux_missing("the pseudo-terminal test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    // the log names the preset it was run with: the screen opens on it, timed on its card
    let prediction = format!(
        "{{\"kind\": \"prediction\", \"preset\": \"24gb\", \"total\": {}}}\n",
        24 * GIB
    );
    let steps: String = (1..=3).map(|s| rewarded_step(s, 40.0)).collect();
    std::fs::write(&log, format!("{prediction}{steps}")).unwrap();
    let session = format!("grpofit-follow-rewards-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_grpofit");
    tmux(&["kill-session", "-t", &session]);
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", "80", "-y", "24"])
        .args(["-c", dir.path().to_str().unwrap()])
        .env("NO_COLOR", "1")
        .status()
        .unwrap();
    assert!(started.success());
    let run = format!("{bin} --no-gpu --no-mouse --follow run.jsonl; echo EXIT=$?");
    tmux(&["send-keys", "-t", &session, &run, "Enter"]);
    let shown = wait_for(&session, "◆ rewards: predicted 0.0 s, measured 12 s");
    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    tmux(&["kill-session", "-t", &session]);
    assert!(
        shown.contains("◆ rewards: predicted 0.0 s, measured 12 s"),
        "{shown}"
    );
    assert!(end.contains("EXIT=0"), "{end}");
}
