//! A Hub server that trickles its bytes (issue 23, audit "Hub resource bounds"), against the
//! stand-in on 127.0.0.1: one model's fetch stops at its deadline (`GRPOFIT_HUB_DEADLINE_SECS`)
//! with a message that says how far it got, having said its progress on standard error; nothing
//! is cached. A deadline that is no number of seconds is refused.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::RUN;
use crate::common::hub_repos::{TINY_CONFIG, shard};
use crate::common::hub_server::{HubServer, Repo, Served};

/// `estimate` of a run on `model` from the Hub at `endpoint`, the deadline `deadline`: its exit
/// code, its standard error, and how long it took.
fn estimate(
    dir: &Path,
    endpoint: &str,
    model: &str,
    deadline: &str,
) -> (Option<i32>, String, Duration) {
    let run = dir.join("run.toml");
    std::fs::write(&run, RUN.replace("Qwen/Qwen3-4B-Instruct-2507", model)).unwrap();
    let started = Instant::now();
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", dir.join("hf-home"))
        .env("HF_HUB_CACHE", dir.join("hub"))
        .env("HF_ENDPOINT", endpoint)
        .env("GRPOFIT_HUB_DEADLINE_SECS", deadline)
        .args(["--no-gpu", "estimate", "--gpu-mem", "8GiB", "--config"])
        .arg(&run)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), stderr, started.elapsed())
}

/// A tiny Llama in `shards` files, each answer trickled over `trickle`.
fn slow_repo(shards: usize, trickle: Option<Duration>) -> Repo {
    let mut files = BTreeMap::new();
    files.insert("config.json".to_string(), Served::whole(TINY_CONFIG.into()));
    let names: Vec<String> = (1..=shards)
        .map(|i| format!("model-{i:05}-of-{shards:05}.safetensors"))
        .collect();
    let weight_map: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("t{i}"), json!(n)))
        .collect();
    let index = json!({"metadata": {}, "weight_map": weight_map}).to_string();
    files.insert(
        "model.safetensors.index.json".to_string(),
        Served::whole(index.into_bytes()),
    );
    for (i, name) in names.iter().enumerate() {
        files.insert(name.clone(), shard(&[(format!("t{i}"), "BF16", vec![64])]));
    }
    Repo {
        files,
        trickle,
        ..Repo::default()
    }
}

#[test]
fn a_trickling_hub_is_stopped_at_the_deadline_with_progress_said() {
    // each answer takes half a second (a shard's header two of them): 12 shards take over 12 s
    let hub = HubServer::start(
        [(
            "test/slow".to_string(),
            slow_repo(12, Some(Duration::from_millis(500))),
        )]
        .into(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, took) = estimate(dir.path(), &hub.endpoint, "test/slow", "7");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("test/slow: the Hub took over 7 s for")
            && stderr.contains("of 12 safetensors headers: stopped")
            && stderr.contains("GRPOFIT_HUB_DEADLINE_SECS"),
        "{stderr}"
    );
    // progress every 5 s while the headers come
    assert!(
        stderr.contains("of 12 safetensors headers read ("),
        "{stderr}"
    );
    // the deadline, the start of a debug build and a margin; the whole fetch is over 12 s
    assert!(took < Duration::from_secs(11), "{took:?}");
    assert!(!dir.path().join("hub/models--test--slow/refs").exists());
}

#[test]
fn a_deadline_that_is_no_number_of_seconds_is_refused() {
    let hub = HubServer::start([("test/slow".to_string(), slow_repo(2, None))].into());
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, _) = estimate(dir.path(), &hub.endpoint, "test/slow", "soon");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("GRPOFIT_HUB_DEADLINE_SECS = \"soon\": not a whole number of seconds"),
        "{stderr}"
    );
    let (code, stderr, _) = estimate(dir.path(), &hub.endpoint, "test/slow", "30");
    assert_eq!(code, Some(0), "a fast Hub within the deadline\n{stderr}");
}
