//! TRL before 0.22 with gradient checkpointing, generating through transformers 4.53 or later:
//! `generate` runs without its KV cache (`run::generate_mode::drops_kv_cache`, traced by
//! `tools/trace/generate_cache.sh`), and the estimate says so before launch, in its text, its
//! `--json`, on the screen and when `grpofit run` starts the command.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::common::{estimate_80gib, grpofit_in, run};
use crate::tui::{SIZES, app_of, screen};
use grpofit::tui::theme::Theme;

/// Qwen2.5-0.5B with TRL `TRL` and transformers `TF`, generation through transformers.
const RUN: &str = r#"
[grpofit]
stack = "trl"
trl_version = "TRL"
transformers_version = "TF"

[model]
model_name_or_path = "Qwen/Qwen2.5-0.5B-Instruct"
dtype = "bfloat16"

[lora]
r = 16
lora_alpha = 32

[grpo]
per_device_train_batch_size = 8
num_generations = 8
max_prompt_length = 256
max_completion_length = 512
gradient_checkpointing = CKPT
use_vllm = VLLM
"#;

const SAID: &str = "generate runs without its KV cache";

fn text(trl: &str, tf: &str, ckpt: bool, vllm: bool) -> String {
    RUN.replace("TRL", trl)
        .replace("TF", tf)
        .replace("CKPT", &ckpt.to_string())
        .replace("VLLM", &vllm.to_string())
}

fn warned(json: &serde_json::Value) -> bool {
    json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().starts_with(SAID))
}

#[test]
fn trl_before_0_22_checkpointed_on_transformers_4_53_is_warned_of_in_json() {
    let json = |trl, tf, ckpt, vllm| estimate_80gib(&text(trl, tf, ckpt, vllm), &[], trl);
    let bad = json("0.21.0", "4.54.1", true, false);
    assert!(warned(&bad), "{}", bad["warnings"]);
    let w = bad["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .find(|w| w.starts_with(SAID))
        .unwrap();
    // what to do, each way out named by its key
    for fix in [
        "trl >= 0.22",
        "use_vllm = true",
        "gradient_checkpointing = false",
    ] {
        assert!(w.contains(fix), "{w}");
    }
    assert!(w.contains("0.21.0") && w.contains("4.54.1"), "{w}");
    // each way out, and transformers before 4.53, is not warned of
    assert!(!warned(&json("0.22.2", "4.54.1", true, false)));
    assert!(!warned(&json("0.21.0", "4.54.1", true, true)));
    assert!(!warned(&json("0.21.0", "4.54.1", false, false)));
    assert!(!warned(&json("0.21.0", "4.52.4", true, false)));
}

#[test]
fn the_warning_is_in_the_text_and_on_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let file = text("0.21.0", "4.54.1", true, false);
    std::fs::write(dir.path().join("run.toml"), &file).unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "estimate",
        "--config",
        "run.toml",
        "--gpu-mem",
        "80GiB",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains(SAID), "{}", out.stdout);
    let app = app_of(&file, dir.path(), Theme::mono());
    for (w, h) in SIZES {
        let s = screen(&app, w, h);
        assert!(s.contains("generate runs without its KV"), "{w}x{h}\n{s}");
    }
}

#[test]
fn run_says_it_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.toml"),
        text("0.21.0", "4.54.1", true, false),
    )
    .unwrap();
    let out = run(grpofit_in(dir.path()).args([
        "run",
        "--config",
        "run.toml",
        "--gpu-mem",
        "80GiB",
        "--no-gpu",
        "--log",
        "run.jsonl",
        "--",
        "true",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let said = out
        .stderr
        .lines()
        .find(|l| l.contains(SAID))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(said.starts_with("grpofit: warning: "), "{said}");
}
