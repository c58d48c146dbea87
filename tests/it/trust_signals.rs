//! `grpofit run`'s signals (issue 23, audit; issue 28): the command runs in its own process
//! group, a SIGTERM, SIGHUP, SIGINT, SIGQUIT or SIGUSR1 sent to grpofit reaches every process of
//! it (a shell's `sleep` too), a command that ignores the signal is killed after the grace
//! period the message names, and a SIGKILL of grpofit takes the command and its children with
//! it, its watchdog writing the exit line (Linux).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `sleep` duration that names one test of this process: other runs of these tests on the
/// machine (another checkout's) have other PIDs, so neither sees nor ends the other's processes.
fn marker(test: u32) -> String {
    format!("25.{}{test}", std::process::id())
}

/// The processes whose program (argv[0]) is `program` and whose arguments mention `marker`,
/// by PID.
fn running(program: &str, marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let argv: Vec<String> = c
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            argv.first().is_some_and(|a| a == program)
                && argv[1..].iter().any(|a| a.contains(marker))
        })
        .collect()
}

/// `grpofit run -- bash -c SCRIPT` in `dir`, its log at `dir/run.jsonl`.
fn start(dir: &Path, script: &str) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("grpofit"))
        .current_dir(dir)
        .env("HF_HUB_OFFLINE", "1")
        .env("GRPOFIT_CONFIG_DIR", dir.join("config"))
        .args(["--no-gpu", "run", "--preset", "24gb", "--gpu-mem", "24GiB"])
        .args(["--log", "run.jsonl", "--", "bash", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `marker`'s `sleep` runs (the command is up).
fn wait_for(marker: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while running("sleep", marker).is_empty() {
        assert!(Instant::now() < until, "the command never started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, signal: i32) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the PID of a child this test started
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Ends what is left of `marker`'s processes (this test's own), so a failure leaves nothing.
fn clean(marker: &str) {
    for pid in running("sleep", marker)
        .into_iter()
        .chain(running("bash", marker))
    {
        // SAFETY: kill(2) on processes this test started (their arguments have its marker)
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// grpofit's exit status and standard error.
fn finish(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Whether no `program` with `marker` runs, given up to 10 s to go: the watchdog notices its
/// parent's death and kills the group within milliseconds on an idle machine, but a loaded one
/// (the whole suite on two cores) has delayed it past one second.
fn gone(program: &str, marker: &str) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while !running(program, marker).is_empty() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[test]
fn sigterm_sigint_sigquit_and_sigusr1_reach_the_commands_grandchildren() {
    for (sig, marker) in [
        (libc::SIGTERM, marker(1)),
        (libc::SIGINT, marker(2)),
        (libc::SIGQUIT, marker(5)),
        (libc::SIGUSR1, marker(6)),
    ] {
        let marker = marker.as_str();
        let dir = tempfile::tempdir().unwrap();
        // `; :` keeps bash from exec'ing sleep: sleep is bash's child, grpofit's grandchild
        let child = start(dir.path(), &format!("sleep {marker}; :"));
        wait_for(marker);
        signal(&child, sig);
        let started = Instant::now();
        let (code, stderr) = finish(child);
        let survived = !gone("sleep", marker);
        clean(marker);
        assert!(!survived, "sleep survived signal {sig}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(8), "{stderr}");
        if sig == libc::SIGQUIT {
            // bash outlives SIGQUIT (its sleep does not) and ends with `:`'s status, or dies
            assert!(matches!(code, Some(0 | 131)), "{stderr}");
        } else {
            assert_eq!(code, Some(128 + sig), "{stderr}");
        }
        assert!(stderr.contains("process group"), "{stderr}");
        let log = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
        assert!(log.contains("\"exit\""), "{log}");
    }
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let marker = &marker(3);
    let dir = tempfile::tempdir().unwrap();
    let child = start(dir.path(), &format!("trap '' TERM; sleep {marker}; :"));
    wait_for(marker);
    signal(&child, libc::SIGTERM);
    let started = Instant::now();
    let (code, stderr) = finish(child);
    let took = started.elapsed();
    let survived = !gone("sleep", marker) || !gone("bash", marker);
    clean(marker);
    assert!(!survived, "{stderr}");
    assert_eq!(code, Some(128 + libc::SIGKILL), "{stderr}");
    assert!(stderr.contains("in 10 s"), "{stderr}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(20),
        "{took:?}"
    );
    // the log is still written
    let log = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    assert!(log.contains("\"exit\""), "{log}");
}

#[test]
fn the_command_dies_with_grpofit() {
    let marker = &marker(4);
    let dir = tempfile::tempdir().unwrap();
    let child = start(dir.path(), &format!("sleep {marker}; echo {marker}"));
    wait_for(marker);
    signal(&child, libc::SIGKILL);
    let _ = finish(child);
    // bash, grpofit's child, dies with it, and so does its own child, sleep: the watchdog
    // kills the command's group
    let bash_left = !gone("bash", marker);
    let sleep_left = !gone("sleep", marker);
    clean(marker);
    assert!(!bash_left, "the command outlived a SIGKILL of grpofit");
    assert!(
        !sleep_left,
        "the command's child outlived a SIGKILL of grpofit"
    );
    let log = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    let exit: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(exit["kind"], "exit", "{log}");
    assert_eq!(exit["signal"], libc::SIGKILL, "{log}");
    assert!(exit["by"].as_str().unwrap().contains("watchdog"), "{log}");
}

/// A grandchild that left the command's process group (setsid) is not reached by the signal
/// passed on to the group; when its parent dies grpofit adopts it (a child subreaper) and kills
/// it with what is left once the run has ended (issue 28).
#[test]
fn a_grandchild_that_left_the_group_dies_with_a_signalled_run() {
    let marker = &marker(7);
    let dir = tempfile::tempdir().unwrap();
    let child = start(
        dir.path(),
        &format!("setsid sleep {marker} & sleep {marker}; :"),
    );
    let until = Instant::now() + Duration::from_secs(20);
    while running("sleep", marker).len() < 2 {
        assert!(
            Instant::now() < until,
            "the command never started both sleeps"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&child, libc::SIGTERM);
    let (code, stderr) = finish(child);
    let survived = !gone("sleep", marker);
    clean(marker);
    assert!(!survived, "the setsid sleep outlived the run: {stderr}");
    assert_eq!(code, Some(128 + libc::SIGTERM), "{stderr}");
}
