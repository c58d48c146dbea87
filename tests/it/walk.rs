//! One walk through the screen as a user takes it, in a real pseudo-terminal (tmux), at 80x24
//! and at 120x40: the vLLM share stepped down until vLLM refuses to start (the verdict names the
//! refusal, not a shortfall), a typed share with a unit (`30%` replaces the field), a model
//! picker look-up of a Hub id on an unreachable Hub (the status line says so, the screen stays
//! whole), a resize to the other size (the frame drawn again at it), then `q` to a clean shell
//! screen and exit status 0. Every wait polls the pane until what it waits for is on it, so a
//! loaded machine only makes the walk slower. CI installs tmux (`.ci/run`); where tmux is
//! missing outside CI the test says so and passes.
// test helpers: a failed tmux call is the test's failure
#![allow(clippy::unwrap_used)]

use crate::tmux_server::{Server, tmux_missing};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a wait polls before the walk fails, on a loaded 2-core machine too.
const PATIENCE: Duration = Duration::from_secs(30);

/// A Hub id that no catalog names.
const UNKNOWN_MODEL: &str = "someorg/NoSuchModel-7B";

/// A detached tmux session on a server of its own.
struct Pane {
    server: Server,
    session: String,
}

impl Pane {
    fn start(dir: &Path, width: u16, height: u16) -> Pane {
        let tag = format!("walk-{width}x{height}");
        let pane = Pane {
            server: Server::new(&tag),
            session: tag,
        };
        let (w, h) = (width.to_string(), height.to_string());
        let started = pane
            .server
            .command()
            .args(["-f", "/dev/null", "new-session", "-d"])
            .args(["-s", &pane.session, "-x", &w, "-y", &h])
            .args(["-c", dir.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(started.success(), "tmux new-session");
        pane
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.server.tmux(args)
    }

    /// Keys by tmux's names (`Enter`, `q`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.session];
        args.extend(keys);
        self.tmux(&args);
    }

    /// Text typed literally.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", &self.session, "-l", text]);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.session])
    }

    /// Polls the pane until `done` holds for it, and returns it; fails naming `what` after
    /// `PATIENCE`.
    fn wait(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if done(&s) {
                return s;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{} waited for {what}:\n{s}",
                self.session
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_for(&self, text: &str) -> String {
        self.wait(&format!("{text:?}"), |s| s.contains(text))
    }

    /// The pane's size as tmux holds it: (columns, rows).
    fn size(&self) -> (u16, u16) {
        let s = self.tmux(&[
            "display",
            "-p",
            "-t",
            &self.session,
            "#{pane_width} #{pane_height}",
        ]);
        let mut it = s.split_whitespace().map(|n| n.parse().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    }
}

/// The verdict line: `memory X of 23.64 GiB  headroom ...` or `X of 23.64 GiB  vLLM cannot ...`.
fn verdict(screen: &str) -> String {
    line_with(screen, "GiB of 23.64 GiB")
}

fn line_with(screen: &str, text: &str) -> String {
    screen
        .lines()
        .find(|l| l.contains(text))
        .unwrap_or_default()
        .to_string()
}

/// The vLLM share the focused slider shows (`▶ vLLM share ━━●── 0.45 gpu_memory_utilization`).
fn share(screen: &str) -> Option<f64> {
    let line = line_with(screen, "▶ vLLM share");
    line.split_whitespace().find_map(|w| w.parse::<f64>().ok())
}

/// The footer is the last row, whole.
fn footer_at_bottom(screen: &str, rows: u16) -> bool {
    let lines: Vec<&str> = screen.lines().collect();
    lines.len() == usize::from(rows) && lines[lines.len() - 1].contains("? help  q quit")
}

/// The run: the 24gb preset with HOME, the config folder and the Hugging Face cache in the
/// test's folder, and a Hub at a closed port (connections refused at once). A script, so that
/// the shell's screen shows no path that could look like a frame.
fn write_run_script(dir: &Path) {
    let bin = env!("CARGO_BIN_EXE_grpofit");
    let script = format!(
        "unset HF_HUB_CACHE HF_TOKEN HF_TOKEN_PATH HUGGINGFACE_HUB_CACHE\n\
         export NO_COLOR=1 HOME=\"$PWD\" XDG_CONFIG_HOME=\"$PWD/config\" \
         XDG_CACHE_HOME=\"$PWD/cache\" GRPOFIT_CONFIG_DIR=\"$PWD/grpofit\" \
         HF_HOME=\"$PWD/hf\" HF_HUB_OFFLINE= HF_ENDPOINT=http://127.0.0.1:9\n\
         '{bin}' --no-gpu --preset 24gb\n"
    );
    std::fs::write(dir.join("walk.sh"), script).unwrap();
}

/// (a) Steps the vLLM share down (`h`) until vLLM cannot start: the verdict names the refusal.
fn step_down_to_the_refusal(pane: &Pane) {
    let mut last = share(&pane.screen()).unwrap();
    assert_eq!(last, 0.45, "the 24gb preset's share");
    loop {
        assert!(
            last > 0.05,
            "vLLM started at every share:\n{}",
            pane.screen()
        );
        pane.keys(&["h"]);
        let s = pane.wait("the share one step down", |s| {
            share(s).is_some_and(|v| v < last) && verdict(s).contains(" of ")
        });
        last = share(&s).unwrap();
        let line = verdict(&s);
        assert!(!line.contains("SHORT BY"), "a false shortfall:\n{s}");
        if line.contains("vLLM cannot start") {
            assert!(line.contains("KV cache"), "the reason:\n{s}");
            return;
        }
        assert!(line.contains("headroom"), "{s}");
    }
}

/// (b) Enter on the share, `30%`: the field is replaced, then set to 0.30, and vLLM starts.
fn type_the_share(pane: &Pane) {
    pane.keys(&["Enter"]);
    pane.wait_for("typing replaces");
    pane.type_text("30%");
    let s = pane.wait_for("vLLM share = 30%");
    assert!(
        !s.contains("vLLM share = 0."),
        "appended to the field:\n{s}"
    );
    pane.keys(&["Enter"]);
    let s = pane.wait("the share at 0.30", |s| share(s) == Some(0.30));
    assert!(verdict(&s).contains("headroom"), "{s}");
}

/// (c) The model picker: an id outside the catalog, looked up with the Hub unreachable.
fn look_up_an_unknown_model(pane: &Pane, rows: u16) {
    pane.keys(&["m"]);
    pane.wait_for("filter:");
    pane.type_text(UNKNOWN_MODEL);
    pane.wait_for("no match in the catalog");
    pane.keys(&["Enter"]);
    let s = pane.wait_for("cannot reach the Hub");
    assert!(
        line_with(&s, "cannot reach the Hub").contains(UNKNOWN_MODEL),
        "{s}"
    );
    // nothing written under the screen: the notice waits for the exit, the footer is whole,
    // the model and the run are as they were
    assert!(
        !s.contains("grpofit: fetching"),
        "stderr on the screen:\n{s}"
    );
    assert!(footer_at_bottom(&s, rows), "{s}");
    assert!(s.starts_with(" unsloth/Qwen2.5-3B-Instruct"), "{s}");
    assert_eq!(share(&s), Some(0.30), "{s}");
}

/// (d) Resized to `to`: the frame drawn again at that size, its header wrapped to the width.
fn resize(pane: &Pane, (width, height): (u16, u16)) {
    pane.tmux(&[
        "resize-window",
        "-t",
        &pane.session,
        "-x",
        &width.to_string(),
        "-y",
        &height.to_string(),
    ]);
    let s = pane.wait("the frame at the new size", |s| {
        let first = s.lines().next().unwrap_or_default();
        // at 120 columns the settings fit on the model's line; at 80 they wrap
        footer_at_bottom(s, height) && first.contains("adamw_8bit") == (width >= 120)
    });
    assert_eq!(pane.size(), (width, height));
    assert!(verdict(&s).contains("headroom"), "{s}");
    assert!(s.lines().all(|l| l.chars().count() <= usize::from(width)));
}

/// (e) `q`, answered `n` (do not export): exit 0, and the shell's screen holds nothing of the
/// last frame.
fn quit_to_a_clean_terminal(pane: &Pane) {
    pane.keys(&["q"]);
    pane.wait_for("export? y/n/cancel");
    pane.keys(&["n"]);
    // the shell's own line `EXIT=N` (the command line also holds `EXIT=$?`)
    let end = pane.wait("the exit status", |s| {
        s.lines().any(|l| l.starts_with("EXIT="))
    });
    assert!(end.contains("EXIT=0"), "{end}");
    for frame in [
        "levers",
        "saves",
        "→",
        "q quit",
        "memory ",
        "━",
        "─",
        "▶",
        "GiB",
        "MiB",
        "cannot reach",
    ] {
        assert!(!end.contains(frame), "{frame:?} left on the screen:\n{end}");
    }
    // the look-up's notice reaches standard error once the screen is gone
    assert!(
        end.contains(&format!("grpofit: fetching config.json of {UNKNOWN_MODEL}")),
        "{end}"
    );
    let mouse = pane.tmux(&["display", "-p", "-t", &pane.session, "#{mouse_any_flag}"]);
    assert_eq!(mouse.trim(), "0", "the mouse is the terminal's again");
}

#[test]
fn a_walk_through_the_screen_at_80x24_and_120x40() {
    if tmux_missing("the pseudo-terminal walk") {
        return;
    }
    for ((width, height), other) in [((80, 24), (120, 40)), ((120, 40), (80, 24))] {
        let dir = tempfile::tempdir().unwrap();
        write_run_script(dir.path());
        let pane = Pane::start(dir.path(), width, height);
        pane.keys(&["clear", "Enter"]);
        pane.keys(&["sh walk.sh; echo EXIT=$?", "Enter"]);
        let first = pane.wait("the first frame", |s| footer_at_bottom(s, height));
        assert!(verdict(&first).starts_with(" memory "), "{first}");

        step_down_to_the_refusal(&pane);
        type_the_share(&pane);
        look_up_an_unknown_model(&pane, height);
        resize(&pane, other);
        quit_to_a_clean_terminal(&pane);
    }
}
