//! `check` and `calibrate` read a run log of any length in bounded memory (issue 23, audit:
//! "`check`, `calibrate` and `diagnose` read whole files"): past 1024 steps only the steps
//! that hold a figure are kept, and what needs every step (the step count, the median CUDA
//! context) is counted as the lines are read, so the report is the one a full read gives.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::Command;

const GIB: u64 = 1 << 30;
const TOTAL: u64 = 24 * GIB;
/// what other processes held before the run (the prediction line's `used_before`)
const BEFORE: u64 = 3 << 20;

fn grpofit(config_dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_grpofit"));
    c.arg("--no-gpu").env("GRPOFIT_CONFIG_DIR", config_dir);
    c
}

/// Step `i`'s allocated, reserved and used memory: figures that wander, with peaks inside
/// the log (not at its end), and the memory in use above reserved over a few hundred values.
fn step(i: u64) -> (u64, u64, u64) {
    let reserved = 8 * GIB + (i * 104_729) % (GIB / 2);
    let allocated = reserved - (i * 7_907) % (GIB / 4);
    let used = reserved + BEFORE + (600 << 20) + (i * 7_919) % 997 * 4_096;
    (allocated, reserved, used)
}

/// A run log as `grpofit run` and the callback write it, of `steps` steps, each followed by
/// an NVML sample.
fn write_log(path: &Path, steps: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        f,
        "{{\"kind\": \"prediction\", \"device\": \"NVIDIA L4\", \"total\": {TOTAL}, \"used_before\": {BEFORE}, \"stack\": \"trl\", \"preset\": \"24gb\"}}"
    )
    .unwrap();
    writeln!(
        f,
        "{{\"kind\": \"start\", \"device\": \"NVIDIA L4\", \"total\": {TOTAL}, \"torch\": \"2.9.0\", \"trl\": \"1.15.0\"}}"
    )
    .unwrap();
    for i in 1..=steps {
        let (a, r, used) = step(i);
        writeln!(
            f,
            "{{\"kind\": \"step\", \"step\": {i}, \"max_allocated\": {a}, \"max_reserved\": {r}, \"free\": {}, \"total\": {TOTAL}, \"seconds\": 1.25}}",
            TOTAL - used
        )
        .unwrap();
        writeln!(
            f,
            "{{\"kind\": \"nvml\", \"t\": {i}.5, \"gpus\": [{{\"index\": 0, \"name\": \"NVIDIA L4\", \"used\": {used}, \"total\": {TOTAL}}}], \"tree\": {}}}",
            used - BEFORE - (i * 13) % 9_973
        )
        .unwrap();
    }
    f.flush().unwrap();
}

fn json(c: &mut Command) -> Value {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn check_and_calibrate_give_every_step_s_figures_on_a_log_past_what_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let steps = 3_000;
    write_log(&log, steps);
    // the figures, computed here from every step
    let all: Vec<(u64, u64, u64)> = (1..=steps).map(step).collect();
    let max_allocated = all.iter().map(|s| s.0).max().unwrap();
    let max_reserved = all.iter().map(|s| s.1).max().unwrap();
    let max_used = all.iter().map(|s| s.2).max().unwrap();
    let tree = (1..=steps)
        .map(|i| step(i).2 - BEFORE - (i * 13) % 9_973)
        .max()
        .unwrap();
    let mut contexts: Vec<u64> = all.iter().map(|s| s.2 - s.1 - BEFORE).collect();
    contexts.sort_unstable();
    let (low, high) = (contexts[1_499], contexts[1_500]);
    let median = low / 2 + high / 2 + (low % 2 + high % 2) / 2;
    let peak = all.iter().rev().max_by_key(|s| s.1).unwrap();

    let checked = json(
        grpofit(&dir.path().join("config"))
            .arg("check")
            .arg(&log)
            .args(["--preset", "24gb", "--json"]),
    );
    assert_eq!(checked["steps"], steps);
    let m = &checked["measured"];
    assert_eq!(m["steps"], steps);
    assert_eq!(m["max_allocated"], max_allocated);
    assert_eq!(m["max_reserved"], max_reserved);
    assert_eq!(m["max_used"], max_used);
    assert_eq!(m["total"], TOTAL);
    assert_eq!(checked["nvml_peak"], tree);
    assert_eq!(checked["device"], "NVIDIA L4");

    let text = grpofit(&dir.path().join("config"))
        .arg("check")
        .arg(&log)
        .args(["--preset", "24gb"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(": 3000 steps on NVIDIA L4"), "{text}");

    let learned = json(
        grpofit(&dir.path().join("config"))
            .arg("calibrate")
            .arg(&log)
            .arg("--json"),
    );
    let entry = &learned["learned"][0];
    assert_eq!(entry["context_bytes"], median);
    let slack = entry["slack"].as_f64().unwrap();
    assert!(
        (slack - peak.1 as f64 / peak.0 as f64).abs() < 1e-3,
        "{slack}"
    );
    let stored = std::fs::read_to_string(dir.path().join("config/calibration.toml")).unwrap();
    assert!(stored.contains("steps = 3000"), "{stored}");
}

/// The largest resident memory the command reached, in bytes (Linux: `wait4`'s `ru_maxrss`,
/// the kernel's own count for the child), with its exit status.
fn peak_resident(c: &mut Command) -> (u64, i32) {
    // A child started from this test process inherits its high-water mark: Linux records the
    // mm an exec replaces (fork's copy, or vfork's shared one) in the rusage's maxrss, and the
    // test binary, running tests beside this one, can hold hundreds of MB. A small Python
    // starts the command and reads its rusage instead: its own few MB are all a child inherits.
    const MEASURE: &str = "import os, sys\n\
quiet = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]\n\
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=quiet)\n\
_, status, usage = os.wait4(pid, 0)\n\
print(usage.ru_maxrss * 1024)\n\
sys.exit(os.waitstatus_to_exitcode(status))\n";
    let mut python = Command::new("python3");
    python
        .arg("-c")
        .arg(MEASURE)
        .arg(c.get_program())
        .args(c.get_args());
    for (key, value) in c.get_envs() {
        match value {
            Some(v) => python.env(key, v),
            None => python.env_remove(key),
        };
    }
    let out = python
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("python3 runs");
    let peak = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (peak, out.status.code().unwrap())
}

#[test]
fn check_and_calibrate_read_a_large_log_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.jsonl");
    // 140 000 steps and as many samples (40 MB): kept whole, they took 45-50 MB resident in
    // all; folded, the command holds 15-18 MB (a debug build)
    write_log(&log, 140_000);
    for args in [
        vec!["check", "--preset", "24gb", "--json"],
        vec!["calibrate", "--json"],
    ] {
        let (peak, code) = peak_resident(
            grpofit(&dir.path().join("config"))
                .arg(args[0])
                .arg(&log)
                .args(&args[1..]),
        );
        assert_eq!(code, 0, "{args:?}");
        assert!(peak < 30 << 20, "{args:?}: {} MiB resident", peak >> 20);
    }
}

/// A line of 64 MiB in a log (something else wrote into it) is read past, not held: `check`
/// and `calibrate` name it in a notice, give the figures of the other lines and stay in
/// bounded memory (issue 28: a 300 MB line took 592 MB resident).
#[test]
fn check_and_calibrate_skip_a_line_longer_than_the_cap_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("long.jsonl");
    write_log(&log, 10);
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    // line 23: after the prediction, the start and 10 steps with their samples
    f.write_all(b"{\"kind\": \"junk\", \"x\": \"").unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..64 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\"}\n").unwrap();
    drop(f);
    for args in [
        vec!["check", "--preset", "24gb", "--json"],
        vec!["calibrate", "--json"],
    ] {
        let (peak, code) = peak_resident(
            grpofit(&dir.path().join("config"))
                .arg(args[0])
                .arg(&log)
                .args(&args[1..]),
        );
        assert_eq!(code, 0, "{args:?}");
        assert!(peak < 30 << 20, "{args:?}: {} MiB resident", peak >> 20);
        let out = grpofit(&dir.path().join("config"))
            .arg(args[0])
            .arg(&log)
            .args(&args[1..])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("skipped line 23 (67108890 bytes)"),
            "{args:?}: {stderr}"
        );
    }
}
