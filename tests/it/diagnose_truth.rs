//! `diagnose` and `check` tell the truth (issue 30, items 6, 7 and 10): a request is a tensor of
//! the run only at the run's own shapes, no upgrade is advised to the release in force, an
//! estimate that falls short of what the message shows is said to, and `check` compares the
//! run its log names.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const GIB: u64 = 1 << 30;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A virtual environment holding `packages` (distribution name, version) as dist-info folders.
fn venv_with(packages: &[(&str, &str)]) -> tempfile::TempDir {
    let venv = tempfile::tempdir().unwrap();
    let site = venv.path().join("lib/python3.11/site-packages");
    for (name, version) in packages {
        let info = site.join(format!("{name}-{version}.dist-info"));
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(&site).unwrap();
    venv
}

/// `grpofit ARGS` with `VIRTUAL_ENV` at `venv`: (exit code, stdout, stderr).
fn grpofit(venv: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env("VIRTUAL_ENV", venv)
        .env_remove("CONDA_PREFIX")
        .env("GRPOFIT_CONFIG_DIR", venv)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// tests/fixtures/seed-gemma-22gib.toml with `extra` lines added to its `[grpofit]` table.
fn seed_run_with(dir: &Path, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo("tests/fixtures/seed-gemma-22gib.toml")).unwrap();
    let path = dir.join("run.toml");
    std::fs::write(
        &path,
        text.replace("[grpofit]\n", &format!("[grpofit]\n{extra}")),
    )
    .unwrap();
    path
}

/// Issue 30, item 6: on a 16 GB card with today's trainers installed (trl 1.15, unsloth 2026.10:
/// they never build fp32 logits), a 300 MiB request is no tensor of the run's shapes, and no
/// upgrade is advised to the releases already there.
#[test]
fn a_300_mib_request_on_todays_trainers_is_not_fp32_logits_and_gets_no_upgrade() {
    let venv = venv_with(&[("trl", "1.15.0"), ("unsloth", "2026.10.9")]);
    let log = repo("tests/oom/torch-2.5-300mib-t4.txt");
    let (code, out, err) = grpofit(
        venv.path(),
        &[
            "diagnose",
            "--offline",
            "--preset",
            "16gb",
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("fp32 logits"), "{out}");
    assert!(!out.contains("upgrade"), "{out}");
    assert!(!out.contains("Unsloth 2025"), "{out}");
}

/// Without releases in force the 2025 tensors stay candidates, but only at the run's own
/// lengths: on the 16gb preset (4 x 769 x 151936 fp32 logits, 1.74 GiB; one sequence's 445.7
/// MiB) neither 64 MiB nor 1 GiB is a tensor of the run (the issue saw anything from 64 MiB to
/// 1.74 GiB "match" one sequence's fp32 logits).
#[test]
fn a_request_is_matched_at_the_runs_own_lengths_only() {
    let venv = venv_with(&[]);
    let dir = tempfile::tempdir().unwrap();
    for (size, matches) in [
        ("64.00 MiB", false),
        ("1.00 GiB", false),
        ("1.74 GiB", true),
    ] {
        let log = dir.path().join("oom.txt");
        std::fs::write(
            &log,
            std::fs::read_to_string(repo("tests/oom/torch-2.5-300mib-t4.txt"))
                .unwrap()
                .replace("300.00 MiB", size),
        )
        .unwrap();
        let (code, out, err) = grpofit(
            venv.path(),
            &[
                "diagnose",
                "--offline",
                "--json",
                "--preset",
                "16gb",
                log.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let said = v["likely_request"].as_str().unwrap();
        assert_eq!(said.contains(" matches "), matches, "{size}: {said}");
        if matches {
            assert!(said.contains("4 x 769 x 151936 x 4 bytes"), "{said}");
        }
    }
}

/// Issue 30, item 7: the message shows the process holding 18.90 GiB against an estimate of
/// less: `diagnose` says so with both figures, and fits from the message's numbers (what the
/// process held and asked for beyond the estimate is kept free), never "already fits".
#[test]
fn an_estimate_short_of_what_the_process_held_is_said_and_the_fit_uses_the_message() {
    let venv = venv_with(&[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = seed_run_with(
        dir.path(),
        "trl_version = \"1.15.0\"\nunsloth_version = \"2026.10.9\"\n",
    );
    let log = repo("tests/oom/torch-2.5-process-over-estimate.txt");
    let args = |json: bool| {
        let mut a = vec!["diagnose", "--offline", "--config", cfg.to_str().unwrap()];
        if json {
            a.push("--json");
        }
        a.push(log.to_str().unwrap());
        a
    };
    let (code, out, err) = grpofit(venv.path(), &args(true));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let estimate = v["estimate_bytes"].as_u64().unwrap();
    let held = v["process_in_use_bytes"].as_u64().unwrap();
    assert!(estimate < held, "{v}");
    assert_eq!(v["estimate_short_bytes"].as_u64().unwrap(), held - estimate);
    assert_ne!(v["fit"]["outcome"], "already_fits", "{v}");
    // the fit leaves room for what the process held and asked for beyond the estimate
    let requested = v["requested_bytes"].as_u64().unwrap();
    let total = v["total_bytes"].as_u64().unwrap();
    let fitted = v["fit"]["estimate"]["total_bytes"].as_u64().unwrap();
    assert!(
        fitted + (held + requested - estimate) <= total,
        "fitted {fitted} + {} > {total}",
        held + requested - estimate
    );
    let (_, text, _) = grpofit(venv.path(), &args(false));
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / GIB as f64);
    let said = format!(
        "the process held 18.90 GiB; the estimate is {}: it falls short by {}",
        gib(estimate),
        gib(held - estimate)
    );
    assert!(text.contains(&said), "`{said}` missing:\n{text}");
    assert!(!text.contains("already fits"), "{text}");
    // the fit's headroom is said with what it keeps free beyond the estimate, not only the
    // estimate's (which leaves that out)
    let demand = held + requested - estimate;
    let with = format!(
        "with the {} beyond the estimate: {} of {} (headroom ",
        gib(demand),
        gib(fitted + demand),
        gib(total)
    );
    assert!(text.contains(&with), "`{with}` missing:\n{text}");
}

/// A run log as `grpofit run` writes it: the prediction line naming `config`, and three steps
/// of the callback on a 22 GiB card.
fn run_log(dir: &Path, config: &Path) -> PathBuf {
    let total = 22 * GIB;
    let step = |n: u64, alloc: u64, res: u64| {
        format!(
            "{{\"kind\": \"step\", \"step\": {n}, \"max_allocated\": {alloc}, \"max_reserved\": {res}, \"free\": {}, \"total\": {total}}}\n",
            total - res - GIB
        )
    };
    let log = dir.join("grpofit-run.jsonl");
    std::fs::write(
        &log,
        format!(
            "{}\n{{\"kind\": \"start\", \"device\": \"NVIDIA A10G\", \"total\": {total}}}\n{}{}{}",
            serde_json::json!({
                "kind": "prediction",
                "device": "NVIDIA A10G",
                "total": total,
                "used_before": 0,
                "stack": "unsloth",
                "config": config.to_str().unwrap(),
                "peak": 14 * GIB,
            }),
            step(1, 12 * GIB, 13 * GIB),
            step(2, 13 * GIB, 14 * GIB),
            step(3, 12 * GIB, 13 * GIB),
        ),
    )
    .unwrap();
    log
}

/// Issue 30, item 10: `check LOG` without `--config` compares the run file the log's prediction
/// line names, as `--config` with it does (and as `--follow` does), and says so.
#[test]
fn check_without_config_compares_the_run_the_log_names() {
    let venv = venv_with(&[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = seed_run_with(dir.path(), "");
    let log = run_log(dir.path(), &cfg);
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--json", log.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (code, out, err) = grpofit(venv.path(), &args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let named = check(&[]);
    let given = check(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(named["rows"], given["rows"], "{named}\n{given}");
    assert_eq!(named["predicted"], given["predicted"]);
    let run = named["run"].as_str().unwrap();
    assert!(
        run.contains(cfg.to_str().unwrap()) && run.contains("the log's prediction line names"),
        "{run}"
    );
    // the log's run file gone: the report says what it compares with instead
    std::fs::remove_file(&cfg).unwrap();
    let (code, _, err) = grpofit(venv.path(), &["check", log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("is not here: pass --config; compared with"),
        "{err}"
    );
}
