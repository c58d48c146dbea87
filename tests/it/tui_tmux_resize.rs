//! The terminal in a real pseudo-terminal (tmux): grown from 80x24 to 120x40 and quit, the
//! shell's screen shows nothing of the last frame; a picker look-up on an unreachable Hub
//! writes nothing under the screen, and its notice reaches standard error after exit.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(session: &str, text: &str) -> String {
    let start = Instant::now();
    loop {
        let s = tmux(&["capture-pane", "-p", "-t", session]);
        if s.contains(text) || start.elapsed() > Duration::from_secs(60) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_terminal_is_restored_exactly_after_a_resize() {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI must install tmux");
        eprintln!("tmux is not installed: the pseudo-terminal test did not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let session = format!("grpofit-resize-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_grpofit");
    tmux(&["kill-session", "-t", &session]);
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", "80", "-y", "24"])
        .args(["-c", dir.path().to_str().unwrap()])
        .env("NO_COLOR", "1")
        .status()
        .unwrap();
    assert!(started.success());
    tmux(&["send-keys", "-t", &session, "clear", "Enter"]);
    let run = format!("{bin} --no-gpu --preset 24gb; echo EXIT=$?");
    tmux(&["send-keys", "-t", &session, &run, "Enter"]);
    let first = wait_for(&session, "levers");
    assert!(first.contains("levers"), "{first}");
    tmux(&["resize-window", "-t", &session, "-x", "120", "-y", "40"]);
    // the frame drawn again at the new size: rows past the old 24, lines past 80 columns
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let grown = tmux(&["capture-pane", "-p", "-t", &session]);
        if grown.lines().skip(24).any(|l| l.contains("saves")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    tmux(&["kill-session", "-t", &session]);
    assert!(end.contains("EXIT=0"), "{end}");
    // nothing of the frame: no slider, bar, footer or border
    for frame in [
        "levers", "saves", "→", "q quit", "memory ", "━", "─", "▶", "GiB", "MiB",
    ] {
        assert!(!end.contains(frame), "{frame:?} left on the screen:\n{end}");
    }
}

#[test]
fn a_picker_look_up_writes_nothing_under_the_screen() {
    if Command::new("tmux").arg("-V").output().is_err() {
        return;
    }
    // a Hub that refuses connections: the look-up fails at once, after its notice
    let dir = tempfile::tempdir().unwrap();
    let session = format!("grpofit-lookup-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_grpofit");
    tmux(&["kill-session", "-t", &session]);
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", "80", "-y", "24"])
        .args(["-c", dir.path().to_str().unwrap()])
        .env("NO_COLOR", "1")
        .status()
        .unwrap();
    assert!(started.success());
    tmux(&["send-keys", "-t", &session, "clear", "Enter"]);
    let run = format!(
        "HF_HUB_OFFLINE= HF_HOME={home} HF_ENDPOINT=http://127.0.0.1:9 {bin} --no-gpu --no-mouse --preset 24gb; echo EXIT=$?",
        home = dir.path().display()
    );
    tmux(&["send-keys", "-t", &session, &run, "Enter"]);
    let first = wait_for(&session, "levers");
    assert!(first.contains("levers"), "{first}");
    tmux(&["send-keys", "-t", &session, "m"]);
    tmux(&["send-keys", "-t", &session, "-l", "org/nowhere"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux(&["send-keys", "-t", &session, "Enter"]);
    // the answer (the fetching line, shown meanwhile, names the model too)
    let answered = wait_for(&session, "cannot reach the Hub");
    // the notice never reached the screen's rows; the footer is whole
    assert!(!answered.contains("grpofit: fetching"), "{answered}");
    assert!(answered.contains("q quit"), "{answered}");
    std::thread::sleep(Duration::from_millis(300));
    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    tmux(&["kill-session", "-t", &session]);
    // after the screen closed, the notice is on standard error
    assert!(
        end.contains("grpofit: fetching config.json of org/nowhere"),
        "{end}"
    );
}
