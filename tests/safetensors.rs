//! A model in the local Hugging Face cache whose snapshot holds safetensors weights: sound
//! headers leave `estimate` answering; a malformed one stops it with the model and file named.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const RUN: &str = r#"
[vramfit]
stack = "trl"
max_prompt_length = 256

[model]
model_name_or_path = "Qwen/Qwen3-4B-Instruct-2507"
dtype = "bfloat16"

[grpo]
use_vllm = true
vllm_max_model_length = 2048
"#;

/// The snapshot folder of a cache holding Qwen3-4B-Instruct-2507's config.json.
fn snapshot(hub: &Path) -> PathBuf {
    let snap = hub.join(
        "models--Qwen--Qwen3-4B-Instruct-2507/snapshots/cdbee75f17c01a7cc42f958dc650907174af0554",
    );
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/configs/qwen3-4b-instruct-2507.json"),
        snap.join("config.json"),
    )
    .unwrap();
    snap
}

/// A safetensors file: its JSON header, then `data` zero bytes.
fn safetensors(header: &str, data: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.resize(out.len() + data, 0);
    out
}

fn estimate(dir: &Path) -> std::process::Output {
    let run = dir.join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    Command::cargo_bin("vramfit")
        .unwrap()
        .env("HF_HUB_CACHE", dir.join("hub"))
        .env("HF_HUB_OFFLINE", "1")
        .args(["--no-gpu", "estimate", "--gpu-mem", "80GiB", "--config"])
        .arg(&run)
        .output()
        .unwrap()
}

#[test]
fn sound_headers_leave_the_estimate_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(&dir.path().join("hub"));
    let header = r#"{"__metadata__": {"format": "pt"},
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [4, 2], "data_offsets": [0, 16]}}"#;
    std::fs::write(snap.join("model.safetensors"), safetensors(header, 16)).unwrap();
    let out = estimate(dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("4.02B parameters"), "{text}");
}

#[test]
fn a_malformed_header_names_the_model_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(&dir.path().join("hub"));
    let header = r#"{"w": {"dtype": 16, "shape": [1], "data_offsets": [0, 2]}}"#;
    std::fs::write(snap.join("model.safetensors"), safetensors(header, 2)).unwrap();
    let out = estimate(dir.path());
    assert_ne!(out.status.code(), Some(0));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("Qwen/Qwen3-4B-Instruct-2507"), "{all}");
    assert!(all.contains("model.safetensors"), "{all}");
    assert!(all.contains("dtype is a number, not a string"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
}
