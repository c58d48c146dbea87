//! Today's releases never block, flags pin versions without a run file, versions imply each
//! other, keys any modelled release takes load on both formats, and the Python probe answers
//! within its deadline and once per interpreter: end to end from the binary.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{Out, grpofit_in, run};
use std::path::Path;

/// A virtual environment holding `packages` (name, version) as dist-info folders.
fn venv(packages: &[(&str, &str)]) -> tempfile::TempDir {
    let venv = tempfile::tempdir().unwrap();
    let site = venv.path().join("lib/python3.11/site-packages");
    for (name, version) in packages {
        let info = site.join(format!("{name}-{version}.dist-info"));
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"),
        )
        .unwrap();
    }
    venv
}

/// `grpofit ARGS` in a fresh folder, with `VIRTUAL_ENV` at `venv`.
fn in_venv(venv: &Path, args: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    run(grpofit_in(dir.path())
        .env("VIRTUAL_ENV", venv)
        .env_remove("CONDA_PREFIX")
        .arg("--offline")
        .args(args))
}

fn json(out: &Out) -> serde_json::Value {
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn version<'a>(est: &'a serde_json::Value, package: &str) -> &'a serde_json::Value {
    est["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["package"] == package)
        .unwrap()
}

#[test]
fn releases_newer_than_the_newest_modelled_are_estimated_with_a_warning() {
    let env = venv(&[
        ("trl", "1.17.0"),
        ("transformers", "5.26.0"),
        ("vllm", "0.35.0"),
    ]);
    let warning =
        "trl 1.17.0 is newer than the newest release modelled, 1.16.0: estimated with 1.16's rules";
    let text = in_venv(env.path(), &["estimate", "--preset", "24gb"]);
    assert!(matches!(text.code, Some(0 | 3)), "{}", text.stderr);
    assert!(
        text.stdout.contains(&format!("warning: {warning}")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("vllm 0.35.0 is newer than the newest release modelled, 0.34.0")
    );
    let est = json(&in_venv(
        env.path(),
        &["estimate", "--preset", "24gb", "--json"],
    ));
    let warnings = est["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w == warning), "{warnings:?}");
    assert_eq!(version(&est, "trl")["version"], "1.17.0");
    // the screen without a terminal prints the estimate rather than exiting before it
    let screen = in_venv(env.path(), &["--preset", "24gb"]);
    assert!(matches!(screen.code, Some(0 | 3)), "{}", screen.stderr);
    assert!(screen.stdout.contains(warning), "{}", screen.stdout);
    // today's registry: trl 1.16.0, transformers 5.25.0 and vllm 0.34.0 are modelled; what
    // their requirements forbid is said, never refused
    let today = venv(&[
        ("trl", "1.16.0"),
        ("transformers", "5.25.0"),
        ("vllm", "0.34.0"),
    ]);
    let est = json(&in_venv(
        today.path(),
        &["estimate", "--preset", "24gb", "--json"],
    ));
    assert_eq!(version(&est, "vllm")["version"], "0.34.0");
    let warnings = est["warnings"].to_string();
    assert!(!warnings.contains("newer than the newest"), "{warnings}");
    assert!(
        warnings.contains("vllm 0.34.0 requires transformers<5.23.0,>=5.16.1"),
        "{warnings}"
    );
    // only a release older than the oldest modelled is refused
    let old = venv(&[("trl", "0.13.0")]);
    let out = in_venv(old.path(), &["estimate", "--preset", "24gb"]);
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("older than the oldest trl release grpofit models"),
        "{}",
        out.stderr
    );
    // `env` still shows what is installed, and says the estimate refuses it
    let out = in_venv(old.path(), &["env"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("an estimate refuses it unless --trl-version"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_screen_header_says_what_the_versions_warn_of() {
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("[grpofit]\n", "[grpofit]\ntrl_version = \"1.17.0\"\n");
    let dir = tempfile::tempdir().unwrap();
    let app = crate::tui::app_of(&text, dir.path(), grpofit::tui::theme::Theme::mono());
    let shown = crate::tui::screen(&app, 160, 40);
    assert!(
        shown.contains("warning: trl 1.17.0 is newer than the newest release modelled, 1.16.0"),
        "{shown}"
    );
}

#[test]
fn flags_pin_versions_without_a_run_file() {
    let none = venv(&[]);
    let oom = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oom/seed-article.txt");
    let oom = oom.to_str().unwrap();
    for command in [&["estimate"][..], &["fit"], &["diagnose", oom]] {
        let mut args = command.to_vec();
        args.extend(["--preset", "24gb", "--trl-version", "0.13.0"]);
        let out = in_venv(none.path(), &args);
        // the flag reaches every command that estimates: an old release is refused by name
        assert!(
            out.stderr.contains("--trl-version 0.13.0"),
            "{command:?}: {}",
            out.stderr
        );
    }
    let est = json(&in_venv(
        none.path(),
        &[
            "estimate",
            "--preset",
            "24gb",
            "--json",
            "--trl-version",
            "0.19.1",
            "--vllm-version",
            "0.10.2",
        ],
    ));
    assert_eq!(version(&est, "trl")["version"], "0.19.1");
    assert_eq!(version(&est, "trl")["origin"]["from"], "command_line");
    assert_eq!(version(&est, "trl")["origin"]["detail"], "--trl-version");
    assert_eq!(version(&est, "vllm")["version"], "0.10.2");
    // a flag wins over the run file's key
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.toml");
    let text = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("[grpofit]\n", "[grpofit]\ntrl_version = \"0.24.0\"\n");
    std::fs::write(&file, text).unwrap();
    let est = json(&in_venv(
        none.path(),
        &[
            "estimate",
            "--json",
            "--config",
            file.to_str().unwrap(),
            "--trl-version",
            "0.19.1",
        ],
    ));
    assert_eq!(version(&est, "trl")["version"], "0.19.1");
}

#[test]
fn one_pinned_release_implies_the_others_of_its_era() {
    let none = venv(&[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.toml");
    let text = grpofit::presets::built_in("24gb").unwrap().replace(
        "[grpofit]\n",
        "[grpofit]\nunsloth_version = \"2025.3.19\"\n",
    );
    std::fs::write(&file, text).unwrap();
    let c = file.to_str().unwrap();
    let est = json(&in_venv(
        none.path(),
        &["estimate", "--json", "--config", c],
    ));
    // unsloth 2025.3.19 requires trl<=0.15.2; trl 0.15.2's vllm extra vllm==0.7.2
    for (package, expected) in [
        ("trl", "0.15.2"),
        ("vllm", "0.7.2"),
        ("transformers", "4.48.3"),
    ] {
        let v = version(&est, package);
        assert_eq!(v["version"], expected, "{package}");
        assert_eq!(v["origin"]["from"], "implied", "{package}");
        assert!(
            v["origin"]["detail"]
                .as_str()
                .unwrap()
                .contains("unsloth 2025.3.19 (run file)"),
            "{v}"
        );
    }
    let text = in_venv(none.path(), &["estimate", "--config", c]);
    assert!(
        text.stdout
            .contains("trl 0.15.2 (implied: from unsloth 2025.3.19 (run file)"),
        "{}",
        text.stdout
    );
    // a combination pip cannot install is flagged with the requirement that forbids it
    let est = json(&in_venv(
        none.path(),
        &[
            "estimate",
            "--json",
            "--config",
            c,
            "--trl-version",
            "1.15.0",
        ],
    ));
    assert!(
        est["warnings"]
            .to_string()
            .contains("unsloth 2025.3.19 requires trl!=0.15.0"),
        "{}",
        est["warnings"]
    );
    // `grpofit env` says what an estimate would take and from what
    let env = venv(&[("unsloth", "2025.3.19")]);
    let out = in_venv(env.path(), &["env"]);
    assert!(
        out.stdout.contains(
            "trl: not installed; an estimate uses 0.15.2 (implied: from unsloth 2025.3.19"
        ),
        "{}",
        out.stdout
    );
    let j = json(&in_venv(env.path(), &["env", "--json"]));
    let trl = j["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["package"] == "trl")
        .unwrap();
    assert_eq!(trl["estimated_with"]["version"], "0.15.2");
    assert_eq!(trl["estimated_with"]["origin"]["from"], "implied");
}

/// The 24gb preset with `extra` in `[grpo]` and `pin` in `[grpofit]`.
fn preset_with(pin: &str, extra: &str) -> String {
    grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("[grpofit]\n", &format!("[grpofit]\n{pin}"))
        .replace("[grpo]\n", &format!("[grpo]\n{extra}"))
}

#[test]
fn keys_an_older_release_takes_load_on_both_formats() {
    let none = venv(&[]);
    let dir = tempfile::tempdir().unwrap();
    let keys = "warmup_ratio = 0.1\noverwrite_output_dir = true\nlogging_dir = \"logs\"\nevaluation_strategy = \"no\"\nunsloth_num_chunks = 4\n";
    let file = dir.path().join("old.toml");
    std::fs::write(&file, preset_with("trl_version = \"0.15.2\"\n", keys)).unwrap();
    let c = file.to_str().unwrap();
    let out = in_venv(none.path(), &["estimate", "--config", c]);
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    // pinned to trl 0.15.2, its era's transformers (4.53.3 with unsloth 2025.8.9) takes
    // warmup_ratio, overwrite_output_dir and logging_dir: no note for them
    for key in [
        "warmup_ratio",
        "overwrite_output_dir",
        "logging_dir",
        "unsloth_num_chunks",
    ] {
        assert!(
            !out.stderr.contains(&format!("`[grpo] {key}`")),
            "{key}: {}",
            out.stderr
        );
    }
    // evaluation_strategy left TrainingArguments in 4.51: a note names those that take it
    assert!(
        out.stderr
            .contains("transformers 4.46.3, 4.48.3, 4.50.3 take it"),
        "{}",
        out.stderr
    );
    // on today's releases they load with a note naming the releases that take them
    let file = dir.path().join("today.toml");
    std::fs::write(&file, preset_with("", keys)).unwrap();
    let out = in_venv(
        none.path(),
        &["estimate", "--config", file.to_str().unwrap()],
    );
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`[grpo] warmup_ratio`: trl 1.15.0's GRPOConfig does not take it")
            && out.stderr.contains("transformers 4.46.3 to 5.10.4 take it"),
        "{}",
        out.stderr
    );
    // `unsloth_num_chunks` is Unsloth's GRPOConfig field (unsloth 2025.8.9 rl.py): the
    // unsloth stack takes it on today's releases, the trl stack refuses it
    let file = dir.path().join("chunks.toml");
    std::fs::write(&file, preset_with("", "unsloth_num_chunks = 4\n")).unwrap();
    let out = in_venv(
        none.path(),
        &["estimate", "--config", file.to_str().unwrap()],
    );
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    assert!(!out.stderr.contains("unsloth_num_chunks"), "{}", out.stderr);
    let file = dir.path().join("trl.toml");
    let trl = "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 256\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\n\n[grpo]\nunsloth_num_chunks = 4\n";
    std::fs::write(&file, trl).unwrap();
    let out = in_venv(
        none.path(),
        &["estimate", "--config", file.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("unknown key `[grpo] unsloth_num_chunks`"),
        "{}",
        out.stderr
    );
    // a truly unknown key names the pinned releases
    let file = dir.path().join("typo.toml");
    std::fs::write(
        &file,
        preset_with("trl_version = \"0.15.2\"\n", "warmup_ratioo = 0.1\n"),
    )
    .unwrap();
    let out = in_venv(
        none.path(),
        &["estimate", "--config", file.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .contains("trl 0.15.2's trl.GRPOConfig (with transformers 4.53.3's TrainingArguments"),
        "{}",
        out.stderr
    );
    // the same keys in a TRL recipe, pinned from the command line
    let recipe = dir.path().join("recipe.yaml");
    std::fs::write(
        &recipe,
        "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nmax_prompt_length: 256\nper_device_train_batch_size: 8\nnum_generations: 8\nwarmup_ratio: 0.1\noverwrite_output_dir: true\nlogging_dir: logs\nevaluation_strategy: \"no\"\n",
    )
    .unwrap();
    let r = recipe.to_str().unwrap();
    let out = in_venv(
        none.path(),
        &[
            "estimate",
            "--config",
            r,
            "--trl-version",
            "0.15.2",
            "--gpu-mem",
            "80GiB",
        ],
    );
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    assert!(!out.stderr.contains("warmup_ratio"), "{}", out.stderr);
    let out = in_venv(
        none.path(),
        &["estimate", "--config", r, "--gpu-mem", "80GiB"],
    );
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`[grpo] warmup_ratio`: trl 1.15.0's GRPOConfig does not take it"),
        "{}",
        out.stderr
    );
}

/// A `python3` on a `PATH` of its own (no site-packages beside it, as a pyenv shim) that runs
/// `body` (a shell script).
fn fake_python(body: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python = bin.join("python3");
    std::fs::write(&python, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `grpofit ARGS` with only `python` on `PATH` and no virtual environment, in `dir`.
fn with_python(python: &Path, dir: &Path, args: &[&str]) -> (Out, std::time::Duration) {
    let started = std::time::Instant::now();
    let out = run(grpofit_in(dir)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", python.join("bin").display()),
        )
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .arg("--offline")
        .args(args));
    (out, started.elapsed())
}

#[test]
fn a_slow_python_is_abandoned_at_its_deadline() {
    // without a deadline the probe waits out the minute
    let slow = fake_python("sleep 60; echo /nowhere");
    let dir = tempfile::tempdir().unwrap();
    let (out, took) = with_python(slow.path(), dir.path(), &["estimate", "--preset", "24gb"]);
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
}

#[test]
fn the_probes_answer_is_kept_per_interpreter() {
    let site = tempfile::tempdir().unwrap();
    let info = site.path().join("trl-0.19.1.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("METADATA"), "Name: trl\nVersion: 0.19.1\n\n").unwrap();
    let calls = site.path().join("calls");
    let python = fake_python(&format!(
        "echo x >> {}; echo {}",
        calls.display(),
        site.path().display()
    ));
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        let (out, _) = with_python(python.path(), dir.path(), &["env"]);
        assert!(out.stdout.contains("trl 0.19.1"), "{}", out.stdout);
    }
    let asked = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        asked.lines().count(),
        1,
        "the interpreter was asked {asked:?}"
    );
    // a changed interpreter is asked again
    let script = python.path().join("bin/python3");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("{text}\n# changed\n")).unwrap();
    let (out, _) = with_python(python.path(), dir.path(), &["env"]);
    assert!(out.stdout.contains("trl 0.19.1"), "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 2);
}
