//! Issue 30's minors, each where the user meets it: the eager-attention note, the 16gb preset's
//! fp16, the step-limit message that names the whole-groups rule, and the screen's details.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use crate::tui::{app_of, key, screen};
use assert_cmd::Command;
use grpofit_core::run::knobs::Knob;
use ratatui::crossterm::event::KeyCode;

const TRL: &str = "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 512\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 512\nuse_vllm = false\n";

fn grpofit(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `attn_implementation` picks the step's attention, and the estimate says which it assumed:
/// eager keeps the recomputed layer's attention weights (8 x 12 heads x 1024 x 1024, 6 bytes a
/// score: 576 MiB) and its backward adds as much again, flash attention drops the 4-D mask and `repeat_kv`'s copies; the header line
/// and `--json`'s `attention` name it, and `[grpo] model_init_kwargs` overrides `[model]`, as
/// trl's `scripts/grpo.py` merges them.
#[test]
fn the_attention_implementation_changes_the_step_and_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, line: &str| {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &path,
            TRL.replace(
                "dtype = \"bfloat16\"\n",
                &format!("dtype = \"bfloat16\"\n{line}"),
            ),
        )
        .unwrap();
        let args = ["estimate", "--no-gpu", "--offline", "--gpu-mem", "24GiB"];
        let path = path.to_str().unwrap().to_string();
        let (code, out, err) = grpofit(&[&args[..], &["--config", &path, "--json"]].concat());
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let (_, text, _) = grpofit(&[&args[..], &["--config", &path]].concat());
        let peak = v["training_peak_allocated_bytes"].as_u64().unwrap();
        (v["attention"].as_str().unwrap().to_string(), peak, text)
    };
    let (name, sdpa, text) = run("default", "");
    assert_eq!(name, "sdpa");
    assert!(text.contains("16-bit weights, sdpa attention)"), "{text}");
    let (name, eager, text) = run("eager", "attn_implementation = \"eager\"\n");
    assert_eq!(name, "eager");
    assert!(text.contains("eager attention)"), "{text}");
    // the recomputed layer's weights (6 bytes a score) and its softmax backward's fp32
    // gradients (6 more), less SDPA's output it no longer saves (2 bytes x 1,536 a token) and
    // the mask's byte a score (eager's one bf16 float mask for SDPA's bool mask and its bf16
    // conversion)
    let (scores, tokens) = (8 * 1024 * 1024, 8 * 1024);
    assert_eq!(
        eager - sdpa,
        12 * scores * 12 - 2 * 1536 * tokens - scores,
        "one layer's weights and its backward"
    );
    let (name, flash, _) = run("flash", "attn_implementation = \"flash_attention_2\"\n");
    assert_eq!(name, "flash_attention_2");
    assert!(flash < sdpa, "{flash} {sdpa}");
    let kwargs = TRL.replace(
        "use_vllm = false\n",
        "use_vllm = false\nmodel_init_kwargs = { attn_implementation = \"kernels-community/flash-attn2\" }\n",
    );
    let path = dir.path().join("kwargs.toml");
    std::fs::write(
        &path,
        kwargs.replace(
            "dtype = \"bfloat16\"\n",
            "dtype = \"bfloat16\"\nattn_implementation = \"eager\"\n",
        ),
    )
    .unwrap();
    let (code, out, err) = grpofit(&[
        "estimate",
        "--no-gpu",
        "--offline",
        "--gpu-mem",
        "24GiB",
        "--json",
        "--config",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["attention"], "flash_attention_2");
    assert_eq!(v["training_peak_allocated_bytes"].as_u64().unwrap(), flash);
}

/// An attention implementation grpofit does not model is refused, naming the file, key and
/// value, with exit 2.
#[test]
fn an_unknown_attention_implementation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(
        &path,
        TRL.replace(
            "dtype = \"bfloat16\"\n",
            "dtype = \"bfloat16\"\nattn_implementation = \"flash\"\n",
        ),
    )
    .unwrap();
    let (code, _, err) = grpofit(&[
        "estimate",
        "--no-gpu",
        "--offline",
        "--gpu-mem",
        "24GiB",
        "--config",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("run.toml:8: `[model] attn_implementation = \"flash\"`: not an attention implementation grpofit models"),
        "{err}"
    );
}

/// The 16gb preset is a T4's, which has no bf16: its export trains in fp16.
#[test]
fn the_16gb_preset_exports_fp16_for_its_t4() {
    let (code, out, err) = grpofit(&[
        "estimate",
        "--no-gpu",
        "--offline",
        "--preset",
        "16gb",
        "--export",
        "-",
    ]);
    assert!(code == 0 || code == 3, "{err}");
    assert!(out.contains("\nfp16 = true\n"), "{out}");
    assert!(out.contains("\nbf16 = false\n"), "{out}");
    let (_, out, _) = grpofit(&[
        "estimate",
        "--no-gpu",
        "--offline",
        "--preset",
        "24gb",
        "--export",
        "-",
    ]);
    assert!(
        out.contains("\nbf16 = true\n") && !out.contains("fp16"),
        "{out}"
    );
}

/// Generations at 8 on a batch of 8: the ladder goes on to 10, which TRL refuses (the
/// generation batch must be divisible by num_generations); the message says so rather than
/// "at its largest step".
#[test]
fn a_step_the_whole_groups_rule_refuses_names_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_of(TRL, dir.path(), grpofit::tui::theme::Theme::mono());
    for _ in 0..30 {
        if app.focused() == Knob::Generations {
            break;
        }
        key(&mut app, KeyCode::Down);
    }
    assert_eq!(app.focused(), Knob::Generations);
    key(&mut app, KeyCode::Right);
    let s = screen(&app, 200, 60);
    assert!(s.contains("generations stays 8: 10 refused"), "{s}");
    assert!(s.contains("divisible by it"), "{s}");
}

/// The screen's lines at `w` x `h`.
fn lines_of(app: &grpofit::tui::app::App, w: u16, h: u16) -> Vec<String> {
    screen(app, w, h).lines().map(str::to_string).collect()
}

/// A small screen's legend keeps the largest parts and counts the smallest: on the 24gb
/// preset at 80x24, vLLM's KV cache (3.58 GiB) is shown and the LoRA adapters (228 MiB) are
/// among the "+N more".
#[test]
fn a_small_legend_shows_the_largest_parts() {
    let app = crate::tui::app();
    let s = screen(&app, 80, 24);
    // one row at 80x24 since the time bar took one: the largest part, the rest counted
    assert!(s.contains("model weights       5.85 GiB"), "{s}");
    assert!(s.contains("+9 more") && !s.contains("LoRA adapters"), "{s}");
}

/// vLLM's KV room is whole sequences of its context, never "101.8 seq".
#[test]
fn kv_room_is_whole_sequences() {
    let app = crate::tui::app();
    let s = screen(&app, 80, 24);
    assert!(s.contains("KV 101 seqs") && !s.contains("101.8"), "{s}");
    let s = screen(&app, 200, 60);
    assert!(s.contains("KV 101 seqs of 1024 tokens"), "{s}");
}

/// `estimate` counts vLLM's KV room in whole sequences (vLLM holds no part of one), and gives
/// the ratio vLLM's own start-up log prints ("Maximum concurrency for 1024 tokens per request:
/// 97.20x", vllm v1 `kv_cache_utils.py`) beside it, never "97.2 sequences".
#[test]
fn estimate_counts_whole_sequences_and_gives_vllms_concurrency() {
    let (code, out, _) = grpofit(&["--no-gpu", "estimate", "--preset", "24gb"]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.starts_with("vLLM:")).unwrap();
    assert!(
        line.contains("= 97 sequences of 1024 tokens at once")
            && line.contains("\"maximum concurrency\" 97.17x")
            && !line.contains("97.2 sequences"),
        "{line}"
    );
}

/// At 80 columns the footer of a run on several GPUs (engine and ZeRO keys shown) keeps every
/// key, `m` and `p` among them: the less used lose their word first.
#[test]
fn the_80_column_footer_keeps_m_and_p() {
    let app = crate::tui::open_r1(None, std::path::Path::new("."));
    let lines = lines_of(&app, 80, 24);
    let footer = lines.last().unwrap();
    for key in [" m ", " p ", " d ", " z ", " s ", " f ", " q quit"] {
        assert!(footer.contains(key), "`{key}` missing: {footer}");
    }
}

/// A tall screen uses its rows: each lever's trade-off whole, its further rungs as the rows
/// allow, and the levers with no step down named; at 120x40 (12 blank rows before) a few are
/// left, at 200x60 (32 before) far fewer.
#[test]
fn a_tall_screen_lists_the_levers_whole() {
    for (w, h, most_blank) in [(120u16, 40u16, 6usize), (200, 60, 24)] {
        let mut app = crate::tui::app();
        crate::tui::resize(&mut app, w, h);
        let s = screen(&app, w, h);
        assert!(
            s.contains("smaller KV cache: fewer sequences generated at once, slower generation"),
            "{s}"
        );
        assert!(s.contains("no step down here"), "{s}");
        // the vLLM share's further rungs: 0.45 -> 0.40 first, then 0.35
        assert!(s.contains("→ 0.35"), "{w}x{h}:\n{s}");
        let blank = s.lines().filter(|l| l.trim().is_empty()).count();
        assert!(blank <= most_blank, "{w}x{h}: {blank} blank lines:\n{s}");
    }
}
