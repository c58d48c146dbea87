//! The real binary in a real pseudo-terminal (tmux): change a slider and see the bar's total
//! change, export, quit, and find the shell's screen back; at 60x20 (the minimum), 80x24 and
//! 200x60, walk to every knob and find its value on screen; shrink below the minimum and see
//! keys change nothing. CI installs tmux (`.ci/run`); where tmux is missing outside CI the test
//! says so and passes.
// test helpers: a failed tmux call is the test's failure
#![allow(clippy::unwrap_used)]

use crate::tmux_server::tmux_missing;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn screen(session: &str) -> String {
    tmux(&["capture-pane", "-p", "-t", session])
}

/// Waits until the screen contains `text`, up to a few seconds.
pub(crate) fn wait_for(session: &str, text: &str) -> String {
    let start = Instant::now();
    loop {
        let s = screen(session);
        if s.contains(text) || start.elapsed() > Duration::from_secs(60) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn total_line(screen: &str) -> String {
    screen
        .lines()
        .find(|l| l.trim_start().starts_with("memory "))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn change_a_slider_export_and_quit_in_a_real_terminal() {
    if tmux_missing("the pseudo-terminal test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let session = format!("grpofit-test-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_grpofit");
    let dir_s = dir.path().to_str().unwrap();
    tmux(&["kill-session", "-t", &session]);
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "80",
            "-y",
            "24",
            "-c",
            dir_s,
        ])
        .env("NO_COLOR", "1")
        .status()
        .unwrap();
    assert!(started.success());
    let run = format!("{bin} --no-gpu --preset 24gb; echo EXIT=$?");
    tmux(&["send-keys", "-t", &session, &run, "Enter"]);
    let first = wait_for(&session, "levers");
    let before = total_line(&first);
    assert!(before.contains("of 23.64 GiB"), "{first}");

    // vLLM share up one step: the total grows
    tmux(&["send-keys", "-t", &session, "l"]);
    let mut after = String::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        after = total_line(&screen(&session));
        if after != before && !after.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_ne!(before, after, "the total did not change");
    assert!(screen(&session).contains("0.50"));

    // the mouse is on: a click (SGR report, 1-based) on the generations row focuses it
    assert_eq!(mouse_flag(&session), "1");
    let row = screen(&session)
        .lines()
        .position(|l| l.contains("generations"))
        .unwrap()
        + 1;
    let click = format!("\x1b[<0;4;{row}M\x1b[<0;4;{row}m");
    tmux(&["send-keys", "-t", &session, "-l", &click]);
    let clicked = wait_for(&session, "▶ generations");
    assert!(clicked.contains("▶ generations"), "{clicked}");
    tmux(&["send-keys", "-t", &session, "k"]);
    wait_for(&session, "▶ vLLM share");

    tmux(&["send-keys", "-t", &session, "s"]);
    let exported = wait_for(&session, "wrote ");
    let file = Path::new(dir_s).join("grpofit-qwen2.5-3b-instruct.toml");
    assert!(file.exists(), "{exported}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("vllm_gpu_memory_utilization = 0.5"), "{text}");

    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    // and the mouse is the terminal's again
    let flag = mouse_flag(&session);
    tmux(&["kill-session", "-t", &session]);
    assert!(end.contains("EXIT=0"), "{end}");
    assert_eq!(flag, "0");
    // the alternate screen is gone: the shell's own lines are back, the sliders are not
    assert!(!end.contains("vllm_gpu_memory_utilization"), "{end}");
}

/// Whether the program in the pane asked for mouse reports: "1" or "0".
fn mouse_flag(session: &str) -> String {
    tmux(&["display", "-p", "-t", session, "#{mouse_any_flag}"])
        .trim()
        .to_string()
}

/// The line of the focused knob (`▶ label ... value`).
fn focused(screen: &str) -> String {
    screen
        .lines()
        .find(|l| l.starts_with("▶ "))
        .unwrap_or_default()
        .to_string()
}

/// Starts the screen in a detached tmux session of `width` x `height`, walks down the knob list
/// and checks each knob's value is on the focused line. Returns the session, still running.
fn walk_every_knob(dir: &std::path::Path, width: u16, height: u16) -> String {
    let session = format!("grpofit-{width}x{height}-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_grpofit");
    tmux(&["kill-session", "-t", &session]);
    let (w, h) = (width.to_string(), height.to_string());
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", &w, "-y", &h])
        .args(["-c", dir.to_str().unwrap()])
        .env("NO_COLOR", "1")
        .status()
        .unwrap();
    assert!(started.success());
    let run = format!("{bin} --no-gpu --no-mouse --preset 24gb; echo EXIT=$?");
    tmux(&["send-keys", "-t", &session, &run, "Enter"]);
    let first = wait_for(&session, "levers");
    assert!(first.contains("memory"), "{first}");
    // --no-mouse: the terminal keeps its mouse
    assert_eq!(mouse_flag(&session), "0");
    // the 24gb preset's knobs, in order
    let knobs = [
        ("vLLM share", "0.45"),
        ("generations", "4"),
        ("micro-batch", "4"),
        ("sequence", "1024"),
        ("prompt", "256"),
        ("completion", "768"),
        ("LoRA rank", "32"),
        ("grad accum", "2"),
    ];
    for (i, (label, value)) in knobs.iter().enumerate() {
        if i > 0 {
            tmux(&["send-keys", "-t", &session, "j"]);
        }
        let start = Instant::now();
        let mut line = String::new();
        while start.elapsed() < Duration::from_secs(10) {
            line = focused(&screen(&session));
            if line.contains(label) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            line.contains(label),
            "{width}x{height}, {label}: {line}\n{}",
            screen(&session)
        );
        assert!(
            line.split_whitespace().any(|w| w == *value),
            "{width}x{height}, {label} = {value}: {line}"
        );
    }
    session
}

#[test]
fn every_knob_is_reachable_and_seen_at_80x24_and_200x60() {
    if tmux_missing("the pseudo-terminal test") {
        return;
    }
    for (w, h) in [(80, 24), (200, 60)] {
        let dir = tempfile::tempdir().unwrap();
        let session = walk_every_knob(dir.path(), w, h);
        tmux(&["send-keys", "-t", &session, "q"]);
        let end = wait_for(&session, "EXIT=0");
        assert!(end.contains("EXIT=0"), "{end}");
        tmux(&["kill-session", "-t", &session]);
    }
}

#[test]
fn every_knob_is_reachable_and_seen_at_60x20() {
    if tmux_missing("the pseudo-terminal test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let session = walk_every_knob(dir.path(), 60, 20);

    // below the minimum: the notice, and a key that would change the run changes nothing
    tmux(&["resize-window", "-t", &session, "-x", "40", "-y", "12"]);
    let small = wait_for(&session, "needs 60x20");
    assert!(small.contains("needs 60x20"), "{small}");
    std::thread::sleep(Duration::from_millis(300));
    tmux(&["send-keys", "-t", &session, "L"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux(&["resize-window", "-t", &session, "-x", "60", "-y", "20"]);
    let back = wait_for(&session, "levers");
    let line = focused(&back);
    assert!(line.contains("grad accum"), "{back}");
    assert!(line.split_whitespace().any(|w| w == "2"), "{line}");

    // nothing changed: q quits at once
    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    tmux(&["kill-session", "-t", &session]);
    assert!(end.contains("EXIT=0"), "{end}");
}

#[test]
fn the_screen_follows_a_run_log_as_it_grows() {
    if tmux_missing("the pseudo-terminal test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let nvml = |tree: u64| {
        format!(
            "{{\"kind\": \"nvml\", \"gpus\": [{{\"name\": \"Test GPU\", \"used\": {tree}, \"total\": 25769803776}}], \"tree\": {tree}}}\n"
        )
    };
    // the log names the preset it was run with: the screen opens on it, on the log's GPU
    let prediction = "{\"kind\": \"prediction\", \"preset\": \"8gb\", \"total\": 25769803776}\n";
    std::fs::write(&log, format!("{prediction}{}", nvml(9 << 30))).unwrap();
    let session = format!("grpofit-follow-{}", std::process::id());
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
    let first = wait_for(&session, "measured peak 9.00 GiB");
    assert!(
        first.contains("gemma-3-1b-it"),
        "the 8gb preset's model\n{first}"
    );
    assert!(first.contains("of 24.00 GiB"), "{first}");
    // a sample and half a line: the sample is read, the half line waits, nothing breaks
    let mut more = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    use std::io::Write;
    more.write_all(format!("{}{{\"kind\": \"st", nvml(10 << 30)).as_bytes())
        .unwrap();
    let grown = wait_for(&session, "measured peak 10.00 GiB");
    assert!(grown.contains("measured peak 10.00 GiB"), "{grown}");
    assert!(!grown.contains(" ! "), "{grown}");
    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    tmux(&["kill-session", "-t", &session]);
    assert!(end.contains("EXIT=0"), "{end}");
}
