//! Hub-shaped repositories for the Hub stand-in (hub_server.rs): a tiny Llama whose
//! safetensors shards are described by their headers alone.
#![allow(clippy::unwrap_used, dead_code)]

use super::hub_server::{Repo, Served};
use grpofit_core::resolve::safetensors::{self, dtype_bits};
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(crate) const TINY: &str = "test/tiny-llama";

/// A tiny Llama's config.json: 106,816 parameters.
pub(crate) const TINY_CONFIG: &str = r#"{"model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 256, "tie_word_embeddings": false,
    "max_position_embeddings": 2048}"#;

/// A safetensors file holding `tensors` (name, dtype, shape) end to end: its header and its
/// whole length (the data, zeros, is never stored).
pub(crate) fn shard(tensors: &[(String, &str, Vec<u64>)]) -> Served {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut at = 0u64;
    for (name, dtype, shape) in tensors {
        let bits = dtype_bits(dtype).unwrap();
        let bytes = (shape.iter().product::<u64>() * bits).div_ceil(8);
        header.insert(
            name.clone(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [at, at + bytes]}),
        );
        at += bytes;
    }
    let header = Value::Object(header).to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    let len = bytes.len() as u64 + at;
    Served { bytes, len }
}

/// Every tensor of the tiny Llama, in bf16.
pub(crate) fn tiny_tensors() -> Vec<(String, &'static str, Vec<u64>)> {
    let mut t = vec![(
        "model.embed_tokens.weight".to_string(),
        "BF16",
        vec![256, 64],
    )];
    for l in 0..2 {
        for (name, shape) in [
            ("self_attn.q_proj", vec![64, 64]),
            ("self_attn.k_proj", vec![32, 64]),
            ("self_attn.v_proj", vec![32, 64]),
            ("self_attn.o_proj", vec![64, 64]),
            ("mlp.gate_proj", vec![128, 64]),
            ("mlp.up_proj", vec![128, 64]),
            ("mlp.down_proj", vec![64, 128]),
            ("input_layernorm", vec![64]),
            ("post_attention_layernorm", vec![64]),
        ] {
            t.push((format!("model.layers.{l}.{name}.weight"), "BF16", shape));
        }
    }
    t.push(("model.norm.weight".into(), "BF16", vec![64]));
    t.push(("lm_head.weight".into(), "BF16", vec![256, 64]));
    t
}

/// A repository of `config` and the tensors split in two shards with an index.
pub(crate) fn sharded(config: &str, tensors: Vec<(String, &'static str, Vec<u64>)>) -> Repo {
    let (a, b) = tensors.split_at(tensors.len() / 2);
    let names = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ];
    let mut map = serde_json::Map::new();
    for (part, name) in [a, b].iter().zip(names) {
        for (t, _, _) in part.iter() {
            map.insert(t.clone(), json!(name));
        }
    }
    let index = json!({"metadata": {}, "weight_map": map}).to_string();
    let mut files = BTreeMap::new();
    files.insert("config.json".into(), Served::whole(config.into()));
    files.insert(
        safetensors::INDEX_FILE.into(),
        Served::whole(index.into_bytes()),
    );
    files.insert(names[0].into(), shard(a));
    files.insert(names[1].into(), shard(b));
    Repo {
        files,
        ..Repo::default()
    }
}
