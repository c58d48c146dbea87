//! What the Hugging Face cache tests share: a TRL run naming a model only the cache knows, and
//! that model's snapshot laid out as huggingface_hub lays it out.
#![allow(clippy::unwrap_used, dead_code)]

use std::path::{Path, PathBuf};

pub(crate) const RUN: &str = r#"
[grpofit]
stack = "trl"
max_prompt_length = 256

[model]
model_name_or_path = "Qwen/Qwen3-4B-Instruct-2507"
dtype = "bfloat16"

[grpo]
use_vllm = true
vllm_max_model_length = 2048
"#;

pub(crate) const REVISION: &str = "cdbee75f17c01a7cc42f958dc650907174af0554";

/// Qwen3-4B-Instruct-2507's config.json in a snapshot under `hub`, at the revision
/// `refs/main` names; returns the snapshot folder.
pub(crate) fn qwen3_2507_snapshot(hub: &Path) -> PathBuf {
    let repo = hub.join("models--Qwen--Qwen3-4B-Instruct-2507");
    let snap = repo.join("snapshots").join(REVISION);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), REVISION).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/configs/qwen3-4b-instruct-2507.json"),
        snap.join("config.json"),
    )
    .unwrap();
    snap
}
pub(crate) mod hub_repos;
pub(crate) mod hub_server;

/// A run of the binary, read: its exit code and both streams (a panic fails the test).
pub(crate) struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

pub(crate) fn run(cmd: &mut assert_cmd::Command) -> Out {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr,
    }
}

/// The binary without NVML, offline, in `dir`, with its config folder inside it.
pub(crate) fn grpofit_in(dir: &Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("grpofit").unwrap();
    c.current_dir(dir)
        .arg("--no-gpu")
        .env("HF_HUB_OFFLINE", "1")
        .env("GRPOFIT_CONFIG_DIR", dir.join("config"));
    c
}

/// `grpofit estimate --json` of `text`, written as `run.toml` in a folder of its own, on an
/// 80 GiB card, `extra` arguments added; a run that fits (0) or does not (3) is read, anything
/// else fails naming `what`.
pub(crate) fn estimate_80gib(text: &str, extra: &[&str], what: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), text).unwrap();
    let out = run(grpofit_in(dir.path())
        .args(["estimate", "--json"])
        .args(extra)
        .args(["--config", "run.toml", "--gpu-mem", "80GiB"]));
    assert!(matches!(out.code, Some(0 | 3)), "{what}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The bytes of `part` in an estimate's (or a role's) `components`, 0 when absent.
pub(crate) fn component(json: &serde_json::Value, part: &str) -> u64 {
    json["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["part"] == part)
        .map_or(0, |c| c["bytes"].as_u64().unwrap())
}
