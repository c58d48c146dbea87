//! A model in the local Hugging Face cache whose snapshot holds safetensors weights: sound
//! headers leave `estimate` answering; a malformed one stops it with the model and file named.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::Path;

use crate::common::{RUN, qwen3_2507_snapshot};

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
    Command::cargo_bin("grpofit")
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
    let snap = qwen3_2507_snapshot(&dir.path().join("hub"));
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
    let snap = qwen3_2507_snapshot(&dir.path().join("hub"));
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

/// A tiny Llama whose every tensor is in its model.safetensors: the headers' bytes are the
/// estimate's weights, exactly (the formula would round each tensor to the allocator's blocks).
#[test]
fn headers_that_match_the_config_give_the_weights_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir
        .path()
        .join("hub/models--test--tiny-llama/snapshots/0123456789ab");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::write(
        snap.join("config.json"),
        r#"{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": 256, "tie_word_embeddings": false, "max_position_embeddings": 2048}"#,
    )
    .unwrap();
    // (name, shape) of every tensor, in bf16
    let mut tensors: Vec<(String, [u64; 2])> =
        vec![("model.embed_tokens.weight".into(), [256, 64])];
    for l in 0..2 {
        for (name, shape) in [
            ("self_attn.q_proj", [64, 64]),
            ("self_attn.k_proj", [32, 64]),
            ("self_attn.v_proj", [32, 64]),
            ("self_attn.o_proj", [64, 64]),
            ("mlp.gate_proj", [128, 64]),
            ("mlp.up_proj", [128, 64]),
            ("mlp.down_proj", [64, 128]),
        ] {
            tensors.push((format!("model.layers.{l}.{name}.weight"), shape));
        }
        for norm in ["input_layernorm", "post_attention_layernorm"] {
            tensors.push((format!("model.layers.{l}.{norm}.weight"), [64, 1]));
        }
    }
    tensors.push(("model.norm.weight".into(), [64, 1]));
    tensors.push(("lm_head.weight".into(), [256, 64]));
    let mut entries = Vec::new();
    let mut offset = 0u64;
    for (name, [a, b]) in &tensors {
        let bytes = a * b * 2;
        let shape = if *b == 1 {
            format!("[{a}]")
        } else {
            format!("[{a}, {b}]")
        };
        entries.push(format!(
            r#""{name}": {{"dtype": "BF16", "shape": {shape}, "data_offsets": [{offset}, {}]}}"#,
            offset + bytes
        ));
        offset += bytes;
    }
    let header = format!("{{{}}}", entries.join(", "));
    std::fs::write(
        snap.join("model.safetensors"),
        safetensors(&header, offset as usize),
    )
    .unwrap();
    // 106816 parameters in bf16
    assert_eq!(offset, 213_632);
    let run = dir.path().join("run.toml");
    std::fs::write(
        &run,
        RUN.replace("Qwen/Qwen3-4B-Instruct-2507", "test/tiny-llama")
            .replace(
                "vllm_max_model_length = 2048",
                "vllm_max_model_length = 1024",
            ),
    )
    .unwrap();
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env("HF_HUB_CACHE", dir.path().join("hub"))
        .args([
            "--no-gpu",
            "estimate",
            "--json",
            "--gpu-mem",
            "8GiB",
            "--config",
        ])
        .arg(&run)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["stored_weights"]["bytes"], 213_632);
    let weights = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["components"].as_array().unwrap())
        .find(|c| c["part"] == "base_weights")
        .unwrap();
    assert_eq!(weights["bytes"], 213_632);
}
