//! The real binary in tmux runs each command the screen's update asks for, and shows its answer:
//! the fit search (`f`), the export written and, once the file is there, the question before
//! overwriting it (`s`, `y`), the presets read from disk (`p`), a model looked up (`m`).
// test helpers: a failed tmux call is the test's failure
#![allow(clippy::unwrap_used)]

use crate::tmux_server::tmux_missing;
use crate::tui_tmux::{screen, tmux, wait_for};
use std::path::Path;
use std::process::Command;

/// Sends `keys` (tmux key names) to the pane and waits for `text` on screen.
fn press(session: &str, keys: &[&str], text: &str) -> String {
    let mut args = vec!["send-keys", "-t", session];
    args.extend(keys);
    tmux(&args);
    let s = wait_for(session, text);
    assert!(
        s.contains(text),
        "{text:?} not on screen after {keys:?}:\n{s}"
    );
    s
}

#[test]
fn the_loop_runs_what_the_keys_ask_for() {
    if tmux_missing("the pseudo-terminal test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let session = format!("grpofit-cmds-{}", std::process::id());
    let dir_s = dir.path().to_str().unwrap();
    tmux(&["kill-session", "-t", &session]);
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session])
        .args(["-x", "140", "-y", "30", "-c", dir_s])
        .env("NO_COLOR", "1")
        .status()
        .unwrap();
    assert!(started.success());
    let bin = env!("CARGO_BIN_EXE_grpofit");
    let run = format!("{bin} --no-gpu --offline --gpu-mem 12GiB --preset 24gb; echo EXIT=$?");
    press(&session, &[&run, "Enter"], "levers");

    // the fit search: the same change `grpofit fit` proposes on this GPU
    press(&session, &["f"], "fit: gpu_memory_utilization 0.45 → 0.60");

    // the export: written, then asked about once it is there
    let file = Path::new(dir_s).join("grpofit-qwen2.5-3b-instruct.toml");
    press(&session, &["s"], "wrote ");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("vllm_gpu_memory_utilization = 0.6"), "{text}");
    press(&session, &["l"], "0.65");
    press(&session, &["s"], "exists: y overwrites");
    press(&session, &["y"], "wrote ");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("vllm_gpu_memory_utilization = 0.65"),
        "{text}"
    );

    // the presets, read when the picker opens
    press(&session, &["p"], "12gb");
    // the picker closed before the next key: an Escape read together with the `m` after it
    // is Alt+m to the terminal ("levers" stays on screen under the picker, so it cannot say)
    tmux(&["send-keys", "-t", &session, "Escape"]);
    let start = std::time::Instant::now();
    while screen(&session).contains("12gb") {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the preset picker never closed:\n{}",
            screen(&session)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // a name the catalog lacks, looked up off the UI thread (offline: not on the Hub)
    press(&session, &["m"], "filter");
    press(&session, &["-l", "org/nowhere"], "org/nowhere");
    press(&session, &["Enter"], "unknown model org/nowhere");

    tmux(&["send-keys", "-t", &session, "q"]);
    let end = wait_for(&session, "EXIT=0");
    let last = screen(&session);
    tmux(&["kill-session", "-t", &session]);
    assert!(end.contains("EXIT=0"), "{last}");
}
