//! `grpofit run` hands the terminal over (issue 28), in a real pseudo-terminal (tmux): what is
//! typed reaches the command (`read`), Ctrl-Z stops the whole run and `fg` resumes it with the
//! terminal, and Ctrl-\ ends the command's group, grandchildren included, with an exit line in
//! the log. CI installs tmux (`.ci/run`); where tmux is missing outside CI the test says so and
//! passes.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use crate::tmux_server::{Server, tmux_missing};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a wait polls before the test fails, on a loaded 2-core machine too.
const PATIENCE: Duration = Duration::from_secs(60);

/// A detached tmux session on a server of its own.
struct Pane {
    server: Server,
}

impl Pane {
    fn start(dir: &Path, test: &str) -> Pane {
        let server = Server::new(&format!("run-{test}"));
        let started = server
            .command()
            .args(["-f", "/dev/null", "new-session", "-d"])
            .args(["-s", "run", "-x", "160", "-y", "40"])
            .args(["-c", dir.to_str().unwrap(), "bash --norc --noprofile"])
            .status()
            .unwrap();
        assert!(started.success(), "tmux new-session");
        Pane { server }
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.server.tmux(args)
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "run"];
        args.extend(keys);
        self.tmux(&args);
    }

    fn type_line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "run", "-l", text]);
        self.keys(&["Enter"]);
    }

    /// Polls the pane until `done` holds for it; fails naming `what` after `PATIENCE`.
    fn wait(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.tmux(&["capture-pane", "-p", "-J", "-t", "run", "-S", "-100"]);
            if done(&s) {
                return s;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "waited for {what}; the pane:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The line that starts `grpofit run` on `script` (sh -c), its log `log`, in the pane's shell.
fn run_line(log: &str, script: &str) -> String {
    format!(
        "HF_HUB_OFFLINE=1 GRPOFIT_CONFIG_DIR=config {} --no-gpu run --preset 24gb --gpu-mem 24GiB --log {log} -- sh -c '{script}'",
        assert_cmd::cargo::cargo_bin("grpofit").display()
    )
}

/// The processes whose arguments hold `marker` (this test's own `sleep`s).
fn running(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("sleep ") && c.contains(marker))
        .collect()
}

/// Whether the `sh -c` whose script holds `marker` runs (not stopped) as its terminal's
/// foreground process group (/proc/PID/stat: state, pgrp and tpgid, proc(5)).
fn in_foreground(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                c.starts_with("sh\0-c\0") && c.contains(marker)
            })
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .collect();
            fields[0] != "T" && fields[2] == fields[5]
        })
}

#[test]
fn the_command_reads_what_is_typed_and_ctrl_z_then_fg_resume_it() {
    if tmux_missing("the terminal tests of grpofit run") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pane = Pane::start(dir.path(), "read");
    let marker = format!("read-{}", std::process::id());
    pane.type_line(&run_line(
        "read.jsonl",
        &format!(": {marker}; echo ready-$((20+1)); read x; echo got=$x; read y; echo again=$y"),
    ));
    // what the command prints, not the line typed (grpofit's own lines may run into it)
    pane.wait("the command to start", |s| s.contains("ready-21"));
    pane.type_line("hello");
    pane.wait("the command to read the line", |s| s.contains("got=hello"));
    // Ctrl-Z: the run stops as a job of the shell, which gets the terminal back
    pane.keys(&["C-z"]);
    pane.wait("the shell to see the run stopped", |s| {
        s.to_lowercase().contains("stopped")
    });
    pane.type_line("fg");
    // typed once the command has the terminal again (the shell's own terminal settings, made
    // while `fg` runs, may drop what is typed before)
    let until = Instant::now() + PATIENCE;
    while !in_foreground(&marker) {
        assert!(
            Instant::now() < until,
            "the command never got the terminal back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    pane.type_line("world");
    let screen = pane.wait("the command to resume and read", |s| {
        s.contains("again=world")
    });
    pane.wait("grpofit to end", |s| {
        s.contains("the command exited with 0")
    });
    let log = std::fs::read_to_string(dir.path().join("read.jsonl")).unwrap();
    assert!(log.contains("\"kind\":\"exit\""), "{log}\n{screen}");
    // the shell has the terminal again: what is typed reaches it
    pane.type_line("echo shell-$((40+2))");
    pane.wait("the shell to read the terminal", |s| s.contains("shell-42"));
}

#[test]
fn ctrl_backslash_ends_the_group_and_the_log_gets_an_exit_line() {
    if tmux_missing("the terminal tests of grpofit run") {
        return;
    }
    let marker = format!("36.{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let pane = Pane::start(dir.path(), "quit");
    // `; :` keeps sh from exec'ing sleep: sleep is grpofit's grandchild
    pane.type_line(&run_line(
        "quit.jsonl",
        &format!("echo up-$((30+3)); sleep {marker}; :"),
    ));
    pane.wait("the command to start", |s| s.contains("up-33"));
    let until = Instant::now() + PATIENCE;
    while running(&marker).is_empty() {
        assert!(Instant::now() < until, "sleep never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    pane.keys(&["C-\\"]);
    pane.wait("grpofit to end", |s| {
        s.contains("the command exited with 131")
    });
    let until = Instant::now() + Duration::from_secs(2);
    while !running(&marker).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(running(&marker), Vec::<String>::new());
    let log = std::fs::read_to_string(dir.path().join("quit.jsonl")).unwrap();
    let exit: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(exit["kind"], "exit", "{log}");
    assert_eq!(exit["signal"], libc::SIGQUIT, "{log}");
}
