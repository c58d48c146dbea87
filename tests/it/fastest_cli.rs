//! `fit --fastest` from the binary: the defects a QA review of issue 31 found, each with the run
//! file that showed it (tests/fixtures/fastest/).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{grpofit_in, run};

/// A fixture of tests/fixtures/fastest/, copied into `dir` as `name`.
fn fixture(dir: &std::path::Path, name: &str) {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fastest")
        .join(name);
    std::fs::copy(from, dir.join(name)).unwrap();
}

/// `estimate --json` of `file` in `dir`, with `extra` arguments.
fn estimate_json(dir: &std::path::Path, file: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["estimate", "--config", file, "--json"];
    args.extend_from_slice(extra);
    let out = run(grpofit_in(dir).args(&args));
    serde_json::from_str(&out.stdout).unwrap()
}

/// TRL 0.19.1's GRPOConfig has no `vllm_enable_sleep_mode` (it arrives in 0.20): the search
/// must not move it, since the written file cannot carry it and would not fit.
#[test]
fn fastest_moves_only_keys_the_pinned_release_takes() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), "trl7.toml");
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--config",
        "trl7.toml",
        "--trl-version",
        "0.19.1",
        "-o",
        "out.toml",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        !out.stdout.contains("vllm_enable_sleep_mode"),
        "{}",
        out.stdout
    );
    let v = estimate_json(dir.path(), "out.toml", &["--trl-version", "0.19.1"]);
    assert_eq!(v["fits_with_headroom"], true, "{v}");
}

/// The written file's `[grpo]` integer `key`.
fn grpo_int(dir: &std::path::Path, file: &str, key: &str) -> i64 {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let t: toml::Table = text.parse().unwrap();
    t["grpo"][key].as_integer().unwrap()
}

/// With `steps_per_generation` set, TRL's generation batch is `per_device_train_batch_size x
/// processes x steps_per_generation` (GRPOConfig.__post_init__): a new split keeps the
/// generation batch and how many optimizer steps one generation serves.
#[test]
fn fastest_keeps_the_generation_batch_per_optimizer_step() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), "spg.toml");
    fixture(dir.path(), "qwen2-0.5b-instruct.json");
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--config",
        "spg.toml",
        "-o",
        "out.toml",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (d, f) = (dir.path(), "out.toml");
    let (mb, ga, spg) = (
        grpo_int(d, f, "per_device_train_batch_size"),
        grpo_int(d, f, "gradient_accumulation_steps"),
        grpo_int(d, f, "steps_per_generation"),
    );
    // the file: 32 x 4, steps_per_generation = 4: 128 completions a generation, one a step
    assert_eq!(mb * ga, 128, "{}", out.stdout);
    assert_eq!(mb * spg, 128, "{}", out.stdout);
    assert_eq!(spg, ga, "{}", out.stdout);
}

/// The nearest fit's own changes (here vLLM's share 0.45 → 0.60 so vLLM can start in 12 GiB, as
/// `fit` gives it) are printed first, from the user's values, then the speed moves from there.
#[test]
fn fastest_shows_the_nearest_fits_changes_first() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["fit", "--fastest", "--preset", "24gb", "--gpu-mem", "12GiB"];
    let out = run(grpofit_in(dir.path()).args(args));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let fit_line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("gpu_memory_utilization "))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        fit_line.contains("0.45") && fit_line.contains("0.60"),
        "{fit_line}"
    );
    let table = out.stdout.find(fit_line).unwrap();
    let speed = out.stdout.find("faster than the nearest fit").unwrap();
    assert!(table < speed, "{}", out.stdout);
    let out = run(grpofit_in(dir.path()).args(args).arg("--json"));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let first = &v["nearest_changes"][0];
    assert_eq!(first["key"], "gpu_memory_utilization", "{v}");
    assert_eq!(first["from"], "0.45", "{v}");
    // 48 GB's run on 20 GiB: the nearest fit loads the weights in 4-bit, and says so
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--preset",
        "48gb",
        "--gpu-mem",
        "20GiB",
    ]));
    assert!(out.stdout.contains("load_in_4bit"), "{}", out.stdout);
}

/// `fit --fastest --json` of `args`, run in `dir`.
fn fastest_json(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let out = run(grpofit_in(dir)
        .args(["fit", "--fastest", "--json"])
        .args(args));
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// fp8 KV, a numerics change, is not taken for a gain under `FP8_KV_MIN_GAIN` of a step: on 12
/// GiB the 24 GB run gained 0.1 s of 18 s from it.
#[test]
fn fastest_takes_fp8_kv_only_for_a_real_gain() {
    let dir = tempfile::tempdir().unwrap();
    let v = fastest_json(dir.path(), &["--preset", "24gb", "--gpu-mem", "12GiB"]);
    let changes = v["changes"].as_array().unwrap();
    assert!(!changes.is_empty(), "{v}");
    assert!(changes.iter().all(|c| c["lever"] != "kv_cache_fp8"), "{v}");
}

/// No output prints "1.00x faster", "saves 0.0 s" or "frees 0 B" for a move that only makes
/// room: such a move says what it makes room for, and a share stops at the first value that
/// fits (16 GB: 0.35, where the search had gone to 0.25).
#[test]
fn fastest_says_what_a_move_that_only_makes_room_is_for() {
    let dir = tempfile::tempdir().unwrap();
    for preset in ["8gb", "16gb", "24gb", "48gb", "80gb"] {
        let out = run(grpofit_in(dir.path()).args(["fit", "--fastest", "--preset", preset]));
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(!out.stdout.contains("1.00x"), "{}", out.stdout);
        for line in out.stdout.lines().filter(|l| l.contains(" → ")) {
            let idle = line.contains("saves 0.0 s") || line.contains("costs +");
            assert!(!idle || line.contains("makes room for"), "{line}");
            assert!(
                !line.contains("makes room for") || line.contains("frees"),
                "{line}"
            );
        }
    }
    let v = fastest_json(dir.path(), &["--preset", "16gb"]);
    let share = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["lever"] == "vllm_share")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(share["to"], "0.35", "{v}");
    assert!(share["makes_room_for"].is_string(), "{v}");
}

/// `fit --fastest --json` names what moved as `fit --json` does (`lever`), gives each key its
/// own values (the accumulation beside the micro-batch, not "4 x 2 accumulation"), and answers
/// in JSON when nothing fits.
#[test]
fn fastest_json_speaks_fits_words() {
    let dir = tempfile::tempdir().unwrap();
    let v = fastest_json(dir.path(), &["--preset", "24gb", "--gpu-mem", "12GiB"]);
    let mb = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["lever"] == "micro_batch")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(mb["from"], "4", "{v}");
    assert_eq!(mb["to"], "8", "{v}");
    assert_eq!(mb["with"][0]["key"], "gradient_accumulation_steps", "{v}");
    assert_eq!(mb["with"][0]["from"], "2", "{v}");
    assert_eq!(mb["with"][0]["to"], "1", "{v}");
    // it takes memory for a speed gain of its own: no move that makes room
    assert!(mb["makes_room_for"].is_null(), "{v}");
    assert!(v["nearest_changes"][0]["lever"].is_string(), "{v}");
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--json",
        "--preset",
        "24gb",
        "--gpu-mem",
        "3GiB",
    ]));
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "impossible", "{v}");
    assert!(v["smallest_gpu_bytes"].is_number(), "{v}");
}

/// `-o` names the card the step was timed on (`--gpu H100`), not the preset's RTX 4090: the
/// written run's `estimate` times the same step `fit --fastest` printed.
#[test]
fn fastest_writes_the_card_it_timed_the_step_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--preset",
        "24gb",
        "--gpu",
        "H100",
        "-o",
        "h.toml",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let text = std::fs::read_to_string(dir.path().join("h.toml")).unwrap();
    let t: toml::Table = text.parse().unwrap();
    assert_eq!(t["grpofit"]["gpu"].as_str(), Some("H100 SXM"), "{text}");
    let step = out.stdout.lines().find(|l| l.contains("step ≈")).unwrap();
    let again = run(grpofit_in(dir.path()).args(["estimate", "--config", "h.toml"]));
    assert!(
        again.stdout.contains(step.trim()),
        "{step}\n{}",
        again.stdout
    );
}

/// `-o` into another folder names the run's relative `model_config` from there
/// (`config::relocate`), so the written file reads back as the run found (`-o` reads it back
/// before writing it, and refused this file when the path was copied unchanged).
#[test]
fn fastest_into_another_folder_writes_a_file_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), "spg.toml");
    fixture(dir.path(), "qwen2-0.5b-instruct.json");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--config",
        "spg.toml",
        "-o",
        "sub/out.toml",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let text = std::fs::read_to_string(dir.path().join("sub/out.toml")).unwrap();
    assert!(
        text.contains("model_config = \"../qwen2-0.5b-instruct.json\""),
        "{text}"
    );
}

/// `-o` onto the user's own file names the card too: a file that named none (and one that named
/// another) gets `[grpofit] gpu = "H100 SXM"`, every other line kept, and its `estimate` times
/// the step `fit --fastest` printed. The in-place write left the file's card as it was.
#[test]
fn fastest_in_place_writes_the_card_it_timed_the_step_on() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), "trl7.toml");
    let own = std::fs::read_to_string(dir.path().join("trl7.toml")).unwrap();
    for (name, text) in [
        ("named.toml", own.clone()),
        (
            "unnamed.toml",
            own.replace("gpu = \"A100 40GB SXM\"\n", "# my card: none named\n"),
        ),
    ] {
        std::fs::write(dir.path().join(name), &text).unwrap();
        let out = run(grpofit_in(dir.path()).args([
            "fit",
            "--fastest",
            "--config",
            name,
            "--gpu",
            "H100",
            "-o",
            name,
            "--force",
        ]));
        assert_eq!(out.code, Some(0), "{name}: {}", out.stderr);
        let written = std::fs::read_to_string(dir.path().join(name)).unwrap();
        let t: toml::Table = written.parse().unwrap();
        assert_eq!(t["grpofit"]["gpu"].as_str(), Some("H100 SXM"), "{written}");
        for line in text.lines().filter(|l| !l.starts_with("gpu ")) {
            let key = line.split(" = ").next().unwrap();
            assert!(
                written
                    .lines()
                    .any(|w| w == line
                        || (line.contains(" = ") && w.starts_with(&format!("{key} = ")))),
                "{name}: `{line}` lost:\n{written}"
            );
        }
        let step = out.stdout.lines().find(|l| l.contains("step ≈")).unwrap();
        let again = run(grpofit_in(dir.path()).args(["estimate", "--config", name]));
        assert!(
            again.stdout.contains(step.trim()),
            "{step}\n{}",
            again.stdout
        );
    }
}

/// `-o` onto a TRL recipe (`.yaml`) reads the written text back as a recipe: it was parsed as
/// TOML and refused ("not valid TOML: key with no value"), nothing written. The card has no
/// recipe key: the note says to pass `--gpu` to grpofit, not to an accelerate config.
#[test]
fn fastest_writes_a_recipe_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml");
    let text = std::fs::read_to_string(from).unwrap();
    std::fs::write(dir.path().join("demo.yaml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--config",
        "demo.yaml",
        "--gpu-mem",
        "79.19GiB",
        "--gpu",
        "H100",
        "-o",
        "demo.yaml",
        "--force",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("pass --gpu \"H100 SXM\" to grpofit"),
        "{}",
        out.stderr
    );
    let written = std::fs::read_to_string(dir.path().join("demo.yaml")).unwrap();
    assert_ne!(written, text);
    // every line but the tuned keys' is kept
    let kept = text
        .lines()
        .filter(|l| written.lines().any(|w| w == *l))
        .count();
    assert!(kept + 4 >= text.lines().count(), "{written}");
    let again = run(grpofit_in(dir.path()).args([
        "estimate",
        "--config",
        "demo.yaml",
        "--gpu-mem",
        "79.19GiB",
        "--gpu",
        "H100",
    ]));
    let step = out.stdout.lines().find(|l| l.contains("step ≈")).unwrap();
    assert!(
        again.stdout.contains(step.trim()),
        "{step}\n{}",
        again.stdout
    );
}

/// A file that names the card in its own spelling (`gpu = "h100"`) keeps it: the in-place write
/// changes the card only when the step was timed on another.
#[test]
fn fastest_in_place_keeps_the_files_spelling_of_its_card() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), "trl7.toml");
    let text = std::fs::read_to_string(dir.path().join("trl7.toml"))
        .unwrap()
        .replace("gpu = \"A100 40GB SXM\"", "gpu = \"a100 40gb sxm\"");
    std::fs::write(dir.path().join("own.toml"), &text).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "fit",
        "--fastest",
        "--config",
        "own.toml",
        "-o",
        "own.toml",
        "--force",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let written = std::fs::read_to_string(dir.path().join("own.toml")).unwrap();
    assert!(written.contains("\ngpu = \"a100 40gb sxm\"\n"), "{written}");
    assert!(!written.contains("A100 40GB SXM"), "{written}");
}
