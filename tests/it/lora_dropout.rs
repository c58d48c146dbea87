#![allow(clippy::unwrap_used)]
//! The adapters' dropout (`lora_dropout`) from the binary: a TRL recipe with `use_peft` and no
//! `lora_dropout` trains with ModelConfig's 0.05, which keeps each adapter's dropout mask (a
//! larger step peak) and runs its kernels (a longer step) than the same recipe at 0; a run
//! file's `[lora]` takes PEFT's 0.0; Unsloth before 2026.10.7 loses its fused LoRA kernels to it.

use assert_cmd::Command;

fn estimate(file: &std::path::Path) -> serde_json::Value {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .arg("--no-gpu")
        .env("HF_HUB_OFFLINE", "1")
        .args(["estimate", "--config", file.to_str().unwrap()])
        .args(["--gpu", "H100 SXM", "--gpu-mem", "79GiB", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // 3: it does not fit (the estimate is printed all the same)
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}: {err}",
        file.display()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn peak(v: &serde_json::Value) -> u64 {
    v["training_peak_allocated_bytes"].as_u64().unwrap()
}

fn seconds(v: &serde_json::Value) -> f64 {
    v["step_time"]["seconds"].as_f64().unwrap()
}

const RECIPE: &str = "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ntorch_dtype: bfloat16\nuse_peft: true\nlora_r: 16\nlora_target_modules: all-linear\nper_device_train_batch_size: 8\nnum_generations: 8\nmax_prompt_length: 512\nmax_completion_length: 1024\n";

#[test]
fn a_peft_recipe_without_lora_dropout_trains_with_trl_s_default() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, extra: &str| {
        let f = dir.path().join(name);
        std::fs::write(&f, format!("{RECIPE}{extra}")).unwrap();
        estimate(&f)
    };
    let default = write("default.yaml", "");
    let zero = write("zero.yaml", "lora_dropout: 0\n");
    let given = write("given.yaml", "lora_dropout: 0.05\n");
    // checkpointed (TRL 1.x's default): the recomputed layer's masks and the dropped product
    // of down_proj: 8 x 1,536 tokens x (Qwen2.5-7B's adapted inputs a layer, 5 x 3,584 +
    // 3,584 + 18,944 bytes of masks, and 4 x 18,944 - 4 x 3,584 for the dropped product)
    let tokens = 8 * 1536;
    let masks = 5 * 3584 + 3584 + 18944;
    assert_eq!(
        peak(&default) - peak(&zero),
        tokens * (masks + 4 * 18944 - 4 * 3584)
    );
    assert_eq!(peak(&default), peak(&given));
    assert!(seconds(&default) > seconds(&zero));
    // TRL's `disable_dropout: true` zeroes it (disable_dropout_in_model)
    let disabled = write("disabled.yaml", "disable_dropout: true\n");
    assert_eq!(peak(&disabled), peak(&zero));
}

#[test]
fn a_run_file_s_lora_takes_peft_s_default_and_unsloth_falls_back_before_2026_10_7() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        estimate(&f)
    };
    let trl = |lora: &str| {
        format!(
            "[grpofit]\nstack = \"trl\"\nmax_prompt_length = 512\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-7B-Instruct\"\ndtype = \"bfloat16\"\n[lora]\nr = 16\ntarget_modules = \"all-linear\"\n{lora}[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\n"
        )
    };
    let plain = write("plain.toml", trl(""));
    let zero = write("zero.toml", trl("lora_dropout = 0.0\n"));
    let dropped = write("dropped.toml", trl("lora_dropout = 0.1\n"));
    assert_eq!(peak(&plain), peak(&zero));
    assert!(peak(&dropped) > peak(&plain));
    // Unsloth: 2026.1.4 runs PEFT's forward for every adapter once lora_dropout != 0
    // (patch_peft_model), 2026.10.9 keeps its fused kernels with the masks inside
    let unsloth = |release: &str, dropout: &str| {
        format!(
            "[grpofit]\nunsloth_version = \"{release}\"\nmax_prompt_length = 512\n[model]\nmodel_name = \"unsloth/Qwen2.5-7B-Instruct\"\nload_in_4bit = true\nmax_seq_length = 2048\n[lora]\nr = 16\nuse_gradient_checkpointing = false\nlora_dropout = {dropout}\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1024\n"
        )
    };
    let grows = |release: &str| {
        let name = |d: &str| format!("u-{release}-{d}.toml");
        peak(&write(&name("1"), unsloth(release, "0.1")))
            - peak(&write(&name("0"), unsloth(release, "0.0")))
    };
    let (unfused, fused) = (grows("2026.1.4"), grows("2026.10.9"));
    assert!(fused > 0, "{fused}");
    assert!(unfused > 2 * fused, "{unfused} {fused}");
    // FUSED_LORA_DROPOUT arrived in 2026.10.7: 2026.10.6 still takes PEFT's forward
    assert_eq!(grows("2026.10.6"), unfused);
    assert_eq!(grows("2026.10.7"), fused);
}
