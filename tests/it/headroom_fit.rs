//! One headroom rule, and `fit`'s ranking by what a change costs the run (issue 30): a run that
//! keeps less than the headroom `fit` keeps is not a plain "fits" anywhere `estimate` speaks
//! (text, JSON, the screen's title), and a vLLM context the run never uses is cut before the
//! vLLM share grows.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit::tui::app::{App, GpuState};
use grpofit::tui::theme::Theme;
use grpofit::tui::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::path::{Path, PathBuf};

/// A TRL LoRA run that generates with transformers: its estimate does not move with the GPU's
/// capacity (no vLLM share), so a capacity sets its headroom exactly.
const NO_VLLM: &str = "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 512\nuse_vllm = false\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn grpofit(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env("PATH", "/usr/bin:/bin")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn total_of(config: &Path) -> u64 {
    let (code, out, err) = grpofit(&[
        "estimate",
        "--json",
        "--no-gpu",
        "--offline",
        "--config",
        config.to_str().unwrap(),
        "--gpu-mem",
        "40GiB",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["total_bytes"].as_u64().unwrap()
}

/// 4.1 to 4.7 % free (the runs): `estimate` says the run fits under the 5% `fit`
/// keeps, its JSON says it does not keep it, and `fit` changes the run; at 7 % free both
/// agree it fits.
#[test]
fn estimate_and_fit_share_one_headroom() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "run.toml", NO_VLLM);
    let c = config.to_str().unwrap();
    let total = total_of(&config);
    for (free, under) in [(0.041, true), (0.047, true), (0.07, false)] {
        let gpu = format!("{}B", (total as f64 / (1.0 - free)).round() as u64);
        let args = ["--no-gpu", "--offline", "--config", c, "--gpu-mem", &gpu];
        let (code, text, err) = grpofit(&[&["estimate"][..], &args[..]].concat());
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            text.contains("fits, but under the 5% headroom fit keeps: headroom"),
            under,
            "{free}: {text}"
        );
        assert_eq!(text.contains("\nfits, headroom"), !under, "{free}: {text}");
        let (_, json, _) = grpofit(&[&["estimate", "--json"][..], &args[..]].concat());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["fits_with_headroom"], !under, "{free}");
        assert_eq!(v["headroom_kept_fraction"], 0.05);
        let (_, fitted, err) = grpofit(&[&["fit"][..], &args[..]].concat());
        assert!(fitted.contains("keeping 5% free"), "{fitted}{err}");
        assert_eq!(fitted.contains("already fits"), !under, "{free}: {fitted}");
    }
}

/// The screen's title says the same: `headroom …, under the 5% fit keeps`.
#[test]
fn the_screens_title_says_the_run_is_under_fits_headroom() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "run.toml", NO_VLLM);
    let total = total_of(&config);
    let file = grpofit_core::config::parse(
        NO_VLLM,
        "test",
        None,
        &grpofit_core::resolve::Offline::from_env(),
    )
    .unwrap();
    for (free, under) in [(0.045, true), (0.07, false)] {
        let gpu = GpuState {
            capacity: (total as f64 / (1.0 - free)).round() as u64,
            capacity_from_user: true,
            name: "Test GPU".into(),
            live: None,
            unavailable: None,
        };
        let app = App::new(file.clone(), gpu, Theme::mono(), dir.path().to_path_buf());
        let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
        t.draw(|f| {
            view::draw(f, &app);
        })
        .unwrap();
        let screen: String = t
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        assert_eq!(
            screen.contains("under the 5% fit keeps"),
            under,
            "{free}: {screen}"
        );
    }
}

/// Issue 30: TRL's colocated vLLM on a context of 32768 tokens its run never reaches (512 +
/// 1024): vLLM's KV cache cannot hold one such sequence, and `fit` raised the vLLM share. The
/// context the run never uses goes first: cut to prompt + completion, with no larger share.
#[test]
fn fit_cuts_a_context_the_run_never_uses_before_it_grows_the_vllm_share() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "run.toml",
        "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 512\ngpu_memory = \"24GiB\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-3B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 4\nnum_generations = 4\nmax_completion_length = 1024\nuse_vllm = true\nvllm_mode = \"colocate\"\nvllm_gpu_memory_utilization = 0.3\nvllm_max_model_length = 32768\n",
    );
    let c = config.to_str().unwrap();
    let (code, _, _) = grpofit(&["estimate", "--no-gpu", "--offline", "--config", c]);
    assert_eq!(code, 3, "vLLM cannot start on 32768 tokens");
    let (code, out, err) = grpofit(&["fit", "--json", "--no-gpu", "--offline", "--config", c]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let changes = v["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{v}");
    assert_eq!(changes[0]["key"], "vllm_max_model_length");
    assert_eq!(changes[0]["to"], "1536");
    assert!(
        changes[0]["trade_off"]
            .as_str()
            .unwrap()
            .contains("never uses"),
        "{v}"
    );
}
