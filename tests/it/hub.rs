//! Any model by its Hugging Face name, from the local cache: the run file names a model the
//! catalog lacks, its config.json sits in a cache laid out as huggingface_hub lays it out, and
//! `estimate` answers offline, saying where the architecture came from.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::Path;

use crate::common::{RUN, qwen3_2507_snapshot};

fn estimate(hf_home: &Path, run: &Path, json: bool) -> std::process::Output {
    let mut cmd = Command::cargo_bin("grpofit").unwrap();
    cmd.env_remove("HF_HUB_CACHE")
        .env("HF_HOME", hf_home)
        .env("HF_HUB_OFFLINE", "1")
        .args(["--no-gpu", "estimate", "--gpu-mem", "80GiB", "--config"])
        .arg(run);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

#[test]
fn a_model_in_the_hugging_face_cache_estimates_offline() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    // HF_HOME/hub is the cache when HF_HUB_CACHE is unset
    let hf_home = dir.path().join("hf");
    qwen3_2507_snapshot(&hf_home.join("hub"));
    let out = estimate(&hf_home, &run, false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("model: Hugging Face cache, Qwen/Qwen3-4B-Instruct-2507 @ cdbee75f17c0"),
        "{text}"
    );
    // 36 layers of hidden 2560 (the 2507 release's shape), 4.02 B parameters, as its card says
    assert!(text.contains("4.02B parameters"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&estimate(&hf_home, &run, true).stdout).unwrap();
    assert_eq!(json["model_source"]["kind"], "cache");
    assert_eq!(json["model_source"]["repo"], "Qwen/Qwen3-4B-Instruct-2507");
    assert_eq!(json["parameters"], 4_022_468_096u64);
}

#[test]
fn a_model_nowhere_is_refused_naming_the_cache_it_looked_in() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    let out = estimate(&dir.path().join("empty"), &run, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("run.toml:7:") && err.contains("not in the Hugging Face cache"),
        "{err}"
    );
}
