//! An export keeps the run file's time keys (`[grpofit] gpu`, `gpu_tflops`, `gpu_bandwidth`, `reward_seconds`,
//! `mean_completion_length`, `dataset_size`; `[grpo] max_steps`, `num_train_epochs`, `save_steps`,
//! `save_strategy`, `save_only_model`): the run
//! alone does not hold them, and `estimate --export`, `fit -o` and the screen's `s` write from
//! the run (`config::export::ExportContext::time`).

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit_core::config::parse;
use grpofit_core::resolve::Offline;

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

/// The time keys a file states, read back.
fn time_of(text: &str) -> grpofit_core::time::TimeKeys {
    parse(text, "t", None, &Offline::from_env()).unwrap().time
}

#[test]
fn a_presets_export_keeps_its_card() {
    let preset = grpofit::presets::built_in("80gb").unwrap();
    for args in [
        ["estimate", "--preset", "80gb", "--export", "-"],
        ["fit", "--preset", "80gb", "-o", "-"],
    ] {
        let out = grpofit().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let text = text.find("# ").map_or(text.as_str(), |i| &text[i..]);
        assert_eq!(time_of(text), time_of(preset), "{args:?}:\n{text}");
        assert!(text.contains("gpu = \"A100 80GB SXM\""), "{text}");
    }
}

#[test]
fn every_time_key_round_trips_through_an_export() {
    let preset = grpofit::presets::built_in("12gb").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.toml");
    let text = preset
        .replace(
            "[grpofit]\n",
            "[grpofit]\ngpu_tflops = 123.5\ngpu_bandwidth = 456.0\nmean_completion_length = 300\nreward_seconds = 0.75\ndataset_size = 7473\n",
        )
        .replace(
            "[grpo]\n",
            "[grpo]\nmax_steps = 640\nnum_train_epochs = 2.0\nsave_steps = 25\nsave_strategy = \"steps\"\nsave_only_model = true\n",
        );
    std::fs::write(&input, &text).unwrap();
    let before = time_of(&text);
    assert_eq!(before.dataset_size, Some(7473));
    assert_eq!(before.max_steps, Some(640));
    assert_eq!(before.reward_seconds, Some(0.75));
    assert_eq!(before.save_steps, Some(25.0));
    assert_eq!(before.save_only_model, Some(true));
    for args in [
        vec![
            "estimate",
            "--config",
            input.to_str().unwrap(),
            "--export",
            "-",
        ],
        vec!["fit", "--config", input.to_str().unwrap(), "-o", "-"],
    ] {
        let out = grpofit().args(&args).output().unwrap();
        let written = String::from_utf8(out.stdout).unwrap();
        // the file starts at its header's first comment (fit says its verdict before it)
        let written = written
            .find("\n# ")
            .map_or(written.as_str(), |i| &written[i + 1..]);
        assert_eq!(time_of(written), before, "{args:?}:\n{written}");
    }
}

/// `--gpu CARD` times the step on that card; the memory stays the run's. Where the card holds
/// another size, the GPU line says the run is not fitted in it and how to fit it there; a card
/// of the run's own size says nothing more.
#[test]
fn a_card_of_another_size_is_named_as_timed_not_fitted() {
    let gpu_line = |card: &str| {
        let out = grpofit()
            .args(["estimate", "--preset", "24gb", "--gpu", card])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{card}");
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .find(|l| l.starts_with("GPU:"))
            .unwrap()
            .to_string()
    };
    let h100 = gpu_line("H100");
    assert!(
        h100.starts_with("GPU: 23.64 GiB from the 24gb preset's gpu_memory")
            && h100
                .contains("timed on the H100 SXM (--gpu), whose 80 GB this run is not fitted in")
            && h100.contains("--gpu-mem"),
        "{h100}"
    );
    let rtx = gpu_line("RTX 4090");
    assert!(!rtx.contains("timed on"), "{rtx}");
}

/// The run's steps from `[grpofit] dataset_size`: `num_train_epochs` left out is
/// TrainingArguments' 3.0, which GRPOConfig keeps (the contract's default), not one epoch. The
/// fastest fixture's TRL run takes 8 x 2 completions, 2 prompts a step: 7500 prompts are 3750
/// steps an epoch.
#[test]
fn steps_from_the_dataset_count_the_trainers_default_epochs() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fastest/trl7.toml");
    let text = std::fs::read_to_string(fixture).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (epochs, steps) in [
        ("", "11250 steps"),
        ("num_train_epochs = 1\n", "3750 steps"),
    ] {
        let file = dir.path().join("run.toml");
        let run = text
            .replace(
                "max_prompt_length = 512\n",
                "max_prompt_length = 512\ndataset_size = 7500\n",
            )
            .replace("beta = 0.0\n", &format!("beta = 0.0\n{epochs}"));
        std::fs::write(&file, run).unwrap();
        let out = grpofit()
            .args(["estimate", "--config", file.to_str().unwrap()])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        let line = said
            .lines()
            .find(|l| l.contains("step ≈"))
            .unwrap_or_default();
        assert!(line.contains(steps), "{epochs:?}: {line}\n{said}");
    }
}
