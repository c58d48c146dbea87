//! A trainer key of the wrong type: `GRPOConfig(**cfg["grpo"])` takes a run file's values
//! unconverted, so `learning_rate = "fast"` or `bf16 = "no"` (a true string) would load and
//! then be misread or fail at launch. The loader checks each key against the annotations of
//! every modelled release (`contract/field_types.json`, tools/contract/field_types.py) and
//! exits 2 naming file, line, key and value; a recipe's strings are first converted as
//! `trl grpo`'s argparse converts them, by the same annotations.

#![allow(clippy::unwrap_used)]

use std::path::Path;

const NOTEBOOK: &str = include_str!("../fixtures/journeys/unsloth-notebook.toml");

/// The notebook's run file with `line` as the first key of `[grpo]` (its own line dropped).
fn notebook_with(line: &str) -> String {
    let key = line.split_whitespace().next().unwrap();
    NOTEBOOK
        .lines()
        .filter(|l| !l.starts_with(&format!("{key} ")))
        .map(|l| {
            if l == "[grpo]" {
                format!("[grpo]\n{line}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn estimate(dir: &Path, name: &str, text: &str) -> assert_cmd::assert::Assert {
    std::fs::write(dir.join(name), text).unwrap();
    crate::common::grpofit_in(dir)
        .args([
            "--offline",
            "estimate",
            "--gpu-mem",
            "80GiB",
            "--config",
            name,
        ])
        .assert()
}

#[test]
fn a_wrongly_typed_grpoconfig_key_is_refused_with_file_line_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let line = NOTEBOOK.lines().position(|l| l == "[grpo]").unwrap() + 2;
    for (written, declared) in [
        ("learning_rate = \"fast\"", "expected float"),
        ("num_train_epochs = \"x\"", "expected float"),
        ("bf16 = \"yes\"", "expected bool | None"),
        ("seed = 1.5", "expected int"),
        ("report_to = 3", "expected None | str | list[str]"),
        ("lr_scheduler_type = 5", "expected SchedulerType | str"),
    ] {
        let (key, value) = written.split_once(" = ").unwrap();
        let out = estimate(dir.path(), "run.toml", &notebook_with(written)).code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            err.contains(&format!(
                "run.toml:{line}: `[grpo] {key} = {value}`: {declared}"
            )),
            "{written}: {err}"
        );
        assert!(err.contains("trl.GRPOConfig declares it"), "{err}");
        // a string where a bool is declared: Python takes it as true
        assert_eq!(
            err.contains("any non-empty string is true"),
            key == "bf16",
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // the same keys with values of their types load
    for written in [
        "learning_rate = 1",
        "bf16 = true",
        "report_to = [\"wandb\"]",
    ] {
        estimate(dir.path(), "run.toml", &notebook_with(written)).code(0);
    }
}

#[test]
fn a_trl_model_config_key_is_checked_on_the_trl_stack() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[grpofit]\nstack = \"trl\"\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-0.5B\"\n\
                use_peft = \"yes\"\n[grpo]\nper_device_train_batch_size = 4\n";
    // a string PEFT's target_modules takes (TRL's get_peft_config hands it on) is no type
    // error: the loader's own advice for the key is what the user reads
    let linear = text.replace(
        "use_peft = \"yes\"",
        "use_peft = true\nlora_target_modules = \"all-linear\"",
    );
    let out = estimate(dir.path(), "linear.toml", &linear).code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        err.contains("write `target_modules = \"all-linear\"` in `[lora]` instead"),
        "{err}"
    );
    let out = estimate(dir.path(), "trl.toml", text).code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        err.contains("trl.toml:5: `[model] use_peft = \"yes\"`: expected bool, as trl.ModelConfig declares it"),
        "{err}"
    );
}

/// A recipe's string is converted as argparse converts it, by the field's annotation: an
/// `Optional[float]` field (None by default) takes `"0.28"` as the float; `"high"` is refused.
#[test]
fn a_recipe_string_converts_by_the_annotation_as_argparse_does() {
    let dir = tempfile::tempdir().unwrap();
    let base = "model_name_or_path: Qwen/Qwen2.5-0.5B\nuse_vllm: false\n";
    estimate(
        dir.path(),
        "ok.yaml",
        &format!("{base}epsilon_high: \"0.28\"\n"),
    )
    .code(0);
    let out = estimate(
        dir.path(),
        "bad.yaml",
        &format!("{base}epsilon_high: high\n"),
    )
    .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        err.contains("bad.yaml:3: `epsilon_high`: `high` is a string that TRL's argparse cannot read as float"),
        "{err}"
    );
}
