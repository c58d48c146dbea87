//! A hostile or broken Hugging Face cache (issue 28): a FIFO, `/dev/zero` or a link loop as
//! `refs/main`, `model.safetensors` or the index is an error naming the file at once (it hung,
//! or read 4 GiB in 6 s); a local header of too many tensors is refused as the Hub's is; and a
//! Hub fetch never writes through a link planted as `refs/main`.
#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::hub_repos::{TINY_CONFIG, shard, tiny_tensors};
use crate::common::hub_server::{HubServer, Repo, SHA, Served};
use crate::common::{RUN, qwen3_2507_snapshot};

/// `estimate --offline` of the run naming Qwen3-4B-Instruct-2507 with `hub` as the cache, killed
/// after 20 s (a hang): exit code, standard error and how long it took.
fn offline_estimate(dir: &Path, hub: &Path) -> (Option<i32>, String, Duration) {
    let run = dir.join("run.toml");
    std::fs::write(&run, RUN).unwrap();
    let started = Instant::now();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("grpofit"))
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HUB_CACHE", hub)
        .args(["--no-gpu", "estimate", "--gpu-mem", "80GiB", "--config"])
        .arg(&run)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), stderr, took)
}

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) reads a NUL-terminated path that lives across the call
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

/// Puts a FIFO, a link to /dev/zero or a link loop at `path`.
fn plant(path: &Path, how: &str) {
    let _ = std::fs::remove_file(path);
    match how {
        "fifo" => mkfifo(path),
        "dev-zero" => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        _ => {
            let other: PathBuf = path.with_extension("loop");
            let _ = std::fs::remove_file(&other);
            std::os::unix::fs::symlink(&other, path).unwrap();
            std::os::unix::fs::symlink(path, &other).unwrap();
        }
    }
}

#[test]
fn a_fifo_dev_zero_or_a_link_loop_in_the_cache_is_an_error_naming_the_file() {
    for file in [
        "refs/main",
        "model.safetensors",
        "model.safetensors.index.json",
    ] {
        for how in ["fifo", "dev-zero", "loop"] {
            let dir = tempfile::tempdir().unwrap();
            let hub = dir.path().join("hub");
            let snap = qwen3_2507_snapshot(&hub);
            let path = if file == "refs/main" {
                hub.join("models--Qwen--Qwen3-4B-Instruct-2507/refs/main")
            } else {
                snap.join(file)
            };
            plant(&path, how);
            let (code, stderr, took) = offline_estimate(dir.path(), &hub);
            assert_eq!(code, Some(2), "{file} {how}: {stderr}");
            assert!(stderr.contains(file), "{file} {how}: {stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
            // the binary's start included: the read itself is refused at once (bounded.rs)
            assert!(took < Duration::from_secs(5), "{file} {how}: {took:?}");
        }
    }
}

#[test]
fn a_local_header_of_too_many_tensors_is_refused_as_the_hubs_is() {
    let dir = tempfile::tempdir().unwrap();
    let hub = dir.path().join("hub");
    let snap = qwen3_2507_snapshot(&hub);
    // written by hand, not through serde_json: the test process stays small (check_stream.rs
    // measures its children's resident memory, which a vfork'd child inherits)
    let entries: Vec<String> = (0..70_000u64)
        .map(|i| {
            format!(
                "\"t{i}\":{{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
                2 * i,
                2 * i + 2
            )
        })
        .collect();
    let header = format!("{{{}}}", entries.join(","));
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend(std::iter::repeat_n(0u8, 2 * 70_000));
    std::fs::write(snap.join("model.safetensors"), bytes).unwrap();
    let (code, stderr, _) = offline_estimate(dir.path(), &hub);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("model.safetensors")
            && stderr.contains("70000 tensors, more than the 65536"),
        "{stderr}"
    );
}

#[test]
fn a_hub_fetch_replaces_a_linked_refs_main_never_what_it_points_at() {
    let mut files = std::collections::BTreeMap::new();
    files.insert("config.json".to_string(), Served::whole(TINY_CONFIG.into()));
    files.insert("model.safetensors".to_string(), shard(&tiny_tensors()));
    let hub = HubServer::start(
        [(
            "test/linked".to_string(),
            Repo {
                files,
                ..Repo::default()
            },
        )]
        .into(),
    );
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("precious.txt");
    std::fs::write(&victim, "the user's file\n").unwrap();
    let refs = dir.path().join("hub/models--test--linked/refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::os::unix::fs::symlink(&victim, refs.join("main")).unwrap();
    let run = dir.path().join("run.toml");
    std::fs::write(
        &run,
        RUN.replace("Qwen/Qwen3-4B-Instruct-2507", "test/linked"),
    )
    .unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin("grpofit"))
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", dir.path().join("hf-home"))
        .env("HF_HUB_CACHE", dir.path().join("hub"))
        .env("HF_ENDPOINT", &hub.endpoint)
        .args(["--no-gpu", "estimate", "--gpu-mem", "8GiB", "--config"])
        .arg(&run)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the user's file\n"
    );
    let main = refs.join("main");
    assert!(main.symlink_metadata().unwrap().is_file());
    assert_eq!(std::fs::read_to_string(&main).unwrap(), SHA);
}
