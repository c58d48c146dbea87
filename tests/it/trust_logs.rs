//! Run logs and calibration (issue 23): `run` never mixes two runs in one log, `check` and
//! `calibrate` read one run per log and blame the log (its name and line) for its own figures,
//! `calibrate` refuses what would poison calibration.toml, a bad stored entry is skipped with a
//! notice, and twelve `calibrate`s at once lose no update.
#![allow(clippy::unwrap_used)]

use crate::common::{grpofit_in, run};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;

/// One run as `grpofit run` and the callback write it: a prediction, a start line, and
/// `steps` steps whose peak reserves `reserved` of 24 GiB.
fn one_run(device: &str, stack: &str, steps: u64, reserved: u64) -> String {
    let total = 24 * GIB;
    let mut t = format!(
        "{}\n{}\n",
        json!({"kind": "prediction", "device": device, "total": total, "used_before": 0, "stack": stack,
               "allocated": 10 * GIB, "reserved": 11 * GIB}),
        json!({"kind": "start", "device": device, "total": total, "torch": "2.8.0", "trl": "0.24.0"}),
    );
    for step in 1..=steps {
        t += &format!(
            "{}\n",
            json!({"kind": "step", "step": step, "max_allocated": reserved - GIB, "max_reserved": reserved,
                   "free": total - reserved - GIB, "total": total})
        );
    }
    t
}

#[test]
fn run_refuses_an_existing_log_without_append() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let go = |extra: &[&str]| {
        run(grpofit_in(d)
            .args([
                "run",
                "--preset",
                "24gb",
                "--gpu-mem",
                "24GiB",
                "--log",
                "x.jsonl",
            ])
            .args(extra)
            .args(["--", "true"]))
    };
    let first = go(&[]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let second = go(&[]);
    assert_eq!(second.code, Some(2), "{}", second.stderr);
    assert!(second.stderr.contains("--append"), "{}", second.stderr);
    let text = std::fs::read_to_string(d.join("x.jsonl")).unwrap();
    assert_eq!(text.matches("\"prediction\"").count(), 1, "{text}");
    let third = go(&["--append"]);
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    let text = std::fs::read_to_string(d.join("x.jsonl")).unwrap();
    assert_eq!(text.matches("\"prediction\"").count(), 2, "{text}");
}

#[test]
fn an_existing_empty_log_is_kept_when_the_command_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mine.jsonl"), "").unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "run",
        "--preset",
        "24gb",
        "--gpu-mem",
        "24GiB",
        "--log",
        "mine.jsonl",
        "--append",
        "--",
        "/nonexistent/program",
    ]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(dir.path().join("mine.jsonl").exists());
}

#[test]
fn check_reads_the_last_run_of_a_log_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // the first run had 5 steps at 20 GiB, the second 2 steps at 12 GiB
    let text = one_run("NVIDIA GeForce RTX 4090", "trl", 5, 20 * GIB)
        + &one_run("NVIDIA GeForce RTX 4090", "trl", 2, 12 * GIB);
    std::fs::write(d.join("two.jsonl"), text).unwrap();
    let out = run(grpofit_in(d).args(["check", "two.jsonl", "--preset", "24gb", "--json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("two.jsonl holds 2 runs: reading the last one, from line 8"),
        "{}",
        out.stderr
    );
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["measured"]["steps"], 2, "{v}");
    assert_eq!(v["measured"]["max_reserved"], 12 * GIB, "{v}");
}

#[test]
fn a_log_with_no_total_or_free_above_total_is_blamed_not_gpu_mem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let zero = format!(
        "{}\n{}\n",
        json!({"kind": "start", "device": "X", "total": 0, "trl": "0.24.0"}),
        json!({"kind": "step", "step": 1, "max_allocated": 1, "max_reserved": 2, "free": 0, "total": 0}),
    );
    std::fs::write(d.join("zero.jsonl"), zero).unwrap();
    let out = run(grpofit_in(d).args(["check", "zero.jsonl", "--preset", "24gb"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("zero.jsonl:1: `total` = 0"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("--gpu-mem"), "{}", out.stderr);
    let above = format!(
        "{}\n",
        json!({"kind": "step", "step": 3, "max_allocated": GIB, "max_reserved": 2 * GIB, "free": 30 * GIB, "total": 24 * GIB}),
    );
    std::fs::write(d.join("above.jsonl"), above).unwrap();
    let out = run(grpofit_in(d).args(["check", "above.jsonl", "--preset", "24gb"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("above.jsonl:1: step 3: `free`"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("inf"), "{}", out.stdout);
}

#[test]
fn calibrate_refuses_what_would_poison_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("config/calibration.toml");
    // the prediction line allocates more than it reserves (a slack of 0.55)
    let bad = one_run("GPU A", "trl", 1, 12 * GIB).replace(
        &format!("\"allocated\":{}", 10 * GIB),
        &format!("\"allocated\":{}", 20 * GIB),
    );
    assert!(bad.contains(&format!("\"allocated\":{}", 20 * GIB)));
    std::fs::write(d.join("bad.jsonl"), bad).unwrap();
    let out = run(grpofit_in(d).args(["calibrate", "bad.jsonl"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("bad.jsonl"), "{}", out.stderr);
    assert!(!file.exists(), "a poisoned file was written");
    // an unknown stack
    std::fs::write(d.join("stack.jsonl"), one_run("GPU A", "jax", 1, 12 * GIB)).unwrap();
    let out = run(grpofit_in(d).args(["calibrate", "stack.jsonl"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("stack \"jax\""), "{}", out.stderr);
    // a step that reserves less than it allocates
    let low = one_run("GPU A", "trl", 1, 12 * GIB).replace(
        &format!("\"max_allocated\":{}", 11 * GIB),
        &format!("\"max_allocated\":{}", 13 * GIB),
    );
    std::fs::write(d.join("low.jsonl"), low).unwrap();
    let out = run(grpofit_in(d).args(["calibrate", "low.jsonl"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("max_reserved"), "{}", out.stderr);
    assert!(!file.exists(), "a poisoned file was written");
}

#[test]
fn a_bad_stored_entry_is_skipped_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("config")).unwrap();
    std::fs::write(
        d.join("config/calibration.toml"),
        "[[gpu]]\nname = \"GPU B\"\nstack = \"trl\"\n\n[[gpu.run]]\nlog = \"old\"\ncontext_bytes = 1\nsteps = 1\nslack = 1.1\npredicted_slack = 0.55\n",
    )
    .unwrap();
    std::fs::write(d.join("good.jsonl"), one_run("GPU A", "trl", 2, 12 * GIB)).unwrap();
    let out = run(grpofit_in(d).args(["calibrate", "good.jsonl", "--json"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("predicted_slack"), "{}", out.stderr);
    assert!(out.stderr.contains("skipped"), "{}", out.stderr);
    let out = run(grpofit_in(d).args(["check", "good.jsonl", "--preset", "24gb"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[test]
fn twelve_calibrates_at_once_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let children: Vec<_> = (0..12)
        .map(|i| {
            let log = d.join(format!("run-{i}.jsonl"));
            std::fs::write(&log, one_run("GPU A", "trl", 1, (12 + i) * GIB)).unwrap();
            std::process::Command::new(assert_cmd::cargo::cargo_bin("grpofit"))
                .arg("calibrate")
                .arg(&log)
                .env("GRPOFIT_CONFIG_DIR", d.join("config"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(d.join("config/calibration.toml")).unwrap();
    assert_eq!(text.matches("[[gpu.run]]").count(), 12, "{text}");
}

#[test]
fn follow_of_a_folder_is_refused_before_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path()).arg("--follow").arg(dir.path()));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("a folder, not a run log"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

#[test]
fn check_reads_a_log_line_by_line_and_names_a_line_that_is_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut bytes = one_run("GPU A", "trl", 2, 12 * GIB).into_bytes();
    bytes.extend_from_slice(b"{\"kind\": \"note\", \"text\": \"\xff\xfe\"}\n");
    std::fs::write(d.join("bin.jsonl"), bytes).unwrap();
    let out = run(grpofit_in(d).args(["check", "bin.jsonl", "--preset", "24gb"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("bin.jsonl:5: not UTF-8 text"),
        "{}",
        out.stderr
    );
}
