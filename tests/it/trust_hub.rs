//! A Hub server that sends more than any checkpoint has (issue 23, audit "Hub resource
//! bounds"), against the stand-in on 127.0.0.1: an index of thousands of files is refused
//! before any shard is asked for, and a header of too many tensors before its JSON is parsed;
//! nothing is cached.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

use crate::common::RUN;
use crate::common::hub_repos::{TINY_CONFIG, shard};
use crate::common::hub_server::{HubServer, Repo, Served};

fn estimate(dir: &Path, endpoint: &str, model: &str) -> (Option<i32>, String) {
    let run = dir.join("run.toml");
    std::fs::write(&run, RUN.replace("Qwen/Qwen3-4B-Instruct-2507", model)).unwrap();
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", dir.join("hf-home"))
        .env("HF_HUB_CACHE", dir.join("hub"))
        .env("HF_ENDPOINT", endpoint)
        .args(["--no-gpu", "estimate", "--gpu-mem", "8GiB", "--config"])
        .arg(&run)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), stderr)
}

fn repo(files: Vec<(&str, Served)>) -> Repo {
    let mut map = BTreeMap::new();
    map.insert("config.json".to_string(), Served::whole(TINY_CONFIG.into()));
    for (name, served) in files {
        map.insert(name.to_string(), served);
    }
    Repo {
        files: map,
        ..Repo::default()
    }
}

#[test]
fn an_index_of_thousands_of_files_is_refused_before_any_shard() {
    let weight_map: serde_json::Map<String, serde_json::Value> = (0..2000)
        .map(|i| (format!("t{i}"), json!(format!("model-{i:05}.safetensors"))))
        .collect();
    let index = json!({"weight_map": weight_map}).to_string();
    let hub = HubServer::start(
        [(
            "test/many".to_string(),
            repo(vec![(
                "model.safetensors.index.json",
                Served::whole(index.into_bytes()),
            )]),
        )]
        .into(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = estimate(dir.path(), &hub.endpoint, "test/many");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("lists 2000 files, more than the 1024"),
        "{stderr}"
    );
    let asked: Vec<String> = hub.requests().into_iter().map(|r| r.path).collect();
    assert!(
        !asked.iter().any(|p| p.ends_with(".safetensors")),
        "{asked:?}"
    );
    assert!(!dir.path().join("hub/models--test--many").exists());
}

#[test]
fn a_header_of_too_many_tensors_is_refused_before_it_is_parsed() {
    let tensors: Vec<(String, &str, Vec<u64>)> = (0..70_000)
        .map(|i| (format!("t{i}"), "BF16", vec![1]))
        .collect();
    let hub = HubServer::start(
        [(
            "test/dense".to_string(),
            repo(vec![("model.safetensors", shard(&tensors))]),
        )]
        .into(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = estimate(dir.path(), &hub.endpoint, "test/dense");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("70000 tensors, more than the 65536"),
        "{stderr}"
    );
    assert!(!dir.path().join("hub/models--test--dense").exists());
}

#[test]
fn a_shard_name_with_a_space_is_asked_for_percent_encoded() {
    use crate::common::hub_repos::tiny_tensors;
    let name = "model 00001.safetensors";
    let tensors = tiny_tensors();
    let weight_map: serde_json::Map<String, serde_json::Value> = tensors
        .iter()
        .map(|(t, _, _)| (t.clone(), json!(name)))
        .collect();
    let index = json!({"weight_map": weight_map}).to_string();
    let hub = HubServer::start(
        [(
            "test/spaced".to_string(),
            repo(vec![
                (
                    "model.safetensors.index.json",
                    Served::whole(index.into_bytes()),
                ),
                // the stand-in matches the path as sent: only the encoded name is found
                ("model%2000001.safetensors", shard(&tensors)),
            ]),
        )]
        .into(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = estimate(dir.path(), &hub.endpoint, "test/spaced");
    assert_eq!(code, Some(0), "{stderr}");
}
