//! A run file written elsewhere than the one it was read from still finds its `[grpofit]
//! model_config`: the reader resolves a relative path against the folder of the file that
//! names it, so `fit -o out/fitted.toml` of `proj/run.toml` (`model_config =
//! "cfg/config.json"`) writes `../proj/cfg/config.json`, and a write into the same folder keeps
//! the user's own spelling (`config::relocate`).

#![allow(clippy::unwrap_used)]

use std::path::Path;

const RUN: &str = "# my run\n[grpofit]\nstack = \"trl\"\n\
    model_config = \"cfg/config.json\"   # my model's config\nmax_prompt_length = 256\n\n\
    [model]\nmodel_name_or_path = \"me/my-model\"\n\n\
    [grpo]\nper_device_train_batch_size = 64\nnum_generations = 8\nmax_completion_length = 4096\n";

/// A Qwen2.5-0.5B-shaped config.json.
const CONFIG: &str = r#"{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
 "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
 "num_hidden_layers": 24, "vocab_size": 151936, "max_position_embeddings": 32768,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16"}"#;

fn project(root: &Path) {
    std::fs::create_dir_all(root.join("proj/cfg")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("proj/cfg/config.json"), CONFIG).unwrap();
    std::fs::write(root.join("proj/run.toml"), RUN).unwrap();
}

fn grpofit(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = crate::common::grpofit_in(dir)
        .arg("--offline")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `grpofit fit --config CONFIG --gpu-mem 8GiB -o OUT` in `cwd`, which must succeed: the
/// written file's text.
fn fit_o(cwd: &Path, config: &str, out: &str) -> String {
    let (code, _, err) = grpofit(
        cwd,
        &["fit", "--config", config, "--gpu-mem", "8GiB", "-o", out],
    );
    assert_eq!(code, 0, "{err}");
    std::fs::read_to_string(cwd.join(out)).unwrap()
}

/// The written file reads back with the same config.json, from any working folder.
fn reads_its_config(root: &Path, written: &str) {
    for cwd in [
        root.to_path_buf(),
        root.join(written).parent().unwrap().to_path_buf(),
    ] {
        let file = root.join(written);
        let (code, out, err) = grpofit(
            &cwd,
            &[
                "estimate",
                "--config",
                file.to_str().unwrap(),
                "--gpu-mem",
                "8GiB",
            ],
        );
        assert!(
            matches!(code, 0 | 3),
            "{written} from {}: {err}",
            cwd.display()
        );
        assert!(out.contains("proj/cfg/config.json"), "{out}");
    }
}

#[test]
fn fit_o_into_another_folder_names_the_config_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let text = fit_o(root, "proj/run.toml", "out/fitted.toml");
    // the value changes, the user's comment stays
    assert!(
        text.contains("model_config = \"../proj/cfg/config.json\"   # my model's config"),
        "{text}"
    );
    reads_its_config(root, "out/fitted.toml");
}

#[test]
fn a_write_beside_the_source_keeps_its_spelling_and_an_export_set_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let proj = root.join("proj");
    let text = fit_o(&proj, "run.toml", "fitted.toml");
    assert!(
        text.contains("model_config = \"cfg/config.json\"   # my model's config"),
        "{text}"
    );
    assert!(
        !text.lines().next().unwrap().contains("model_config"),
        "{text}"
    );
    // the launch set's run.toml, in a folder of its own
    let (code, _, err) = grpofit(
        &proj,
        &[
            "estimate",
            "--config",
            "run.toml",
            "--gpu-mem",
            "8GiB",
            "--export-dir",
            "../set",
        ],
    );
    assert!(matches!(code, 0 | 3), "{err}");
    let set = std::fs::read_to_string(root.join("set/run.toml")).unwrap();
    assert!(
        set.contains("model_config = \"../proj/cfg/config.json\""),
        "{set}"
    );
    reads_its_config(root, "set/run.toml");
}

/// The screen's export (`s`) writes into the working folder: the run read from `proj/` names
/// its config.json from there, and the written file loads.
#[test]
fn the_screens_export_names_the_config_from_the_working_folder() {
    use grpofit::tui::app::{App, GpuState};
    use grpofit::tui::theme::Theme;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let file = grpofit_core::config::load(
        &root.join("proj/run.toml"),
        &grpofit_core::resolve::Offline::default(),
    )
    .unwrap();
    let gpu = GpuState {
        capacity: 8 << 30,
        capacity_from_user: true,
        name: "--gpu-mem".into(),
        live: None,
        unavailable: None,
    };
    let mut app = App::new(file, gpu, Theme::mono(), root.to_path_buf());
    crate::tui::keys(&mut app, "s");
    let written = root.join("grpofit-my-model.toml");
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(
        text.contains("model_config = \"proj/cfg/config.json\""),
        "{text}"
    );
    reads_its_config(root, "grpofit-my-model.toml");
}

/// A folder written into that is a symbolic link elsewhere: `../proj/...` from it would climb
/// out of the link's target, so the written file names the config.json by its absolute path,
/// and it reads back.
#[test]
fn a_symlinked_folder_gets_the_path_that_reaches_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), root.join("link")).unwrap();
    let text = fit_o(root, "proj/run.toml", "link/fitted.toml");
    let real = std::fs::canonicalize(root.join("proj/cfg/config.json")).unwrap();
    assert!(
        text.contains(&format!("model_config = \"{}\"", real.display())),
        "{text}"
    );
    reads_its_config(root, "link/fitted.toml");
}
