//! A model only the Hub knows, end to end from the binary, against a Hub stand-in on 127.0.0.1
//! (tests/common/hub_server.rs; nothing here reaches the internet): the first run fetches
//! config.json, the index and the safetensors headers (by range requests, never the weights)
//! into a temporary cache in huggingface_hub's layout, saying so on standard error; the second
//! run, offline, answers the same from the cache. The Hub's failures and broken headers stop
//! `estimate` with exit 2, naming the model and the file.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use grpofit_core::resolve::safetensors;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::RUN;
use crate::common::hub_repos::{TINY, TINY_CONFIG, sharded, tiny_tensors};
use crate::common::hub_server::{HubServer, Repo, SHA, Served};

/// A repository of the tiny config and one `model.safetensors` of these first bytes.
fn single(first_bytes: Vec<u8>, len: u64) -> Repo {
    let mut files = BTreeMap::new();
    files.insert("config.json".into(), Served::whole(TINY_CONFIG.into()));
    files.insert(
        "model.safetensors".into(),
        Served {
            bytes: first_bytes,
            len,
        },
    );
    Repo {
        files,
        ..Repo::default()
    }
}

fn serve(repos: Vec<(&str, Repo)>) -> HubServer {
    HubServer::start(repos.into_iter().map(|(n, r)| (n.to_string(), r)).collect())
}

/// `grpofit estimate --json` of a run naming `model`, with the cache in `dir/hub`, the Hub at
/// `endpoint`, no token, and `offline` as HF_HUB_OFFLINE.
fn estimate(dir: &Path, endpoint: &str, model: &str, offline: bool) -> Command {
    estimate_as(dir, endpoint, model, offline, true)
}

/// `estimate`, with `--json` or the text report.
fn estimate_as(dir: &Path, endpoint: &str, model: &str, offline: bool, json: bool) -> Command {
    let run = dir.join("run.toml");
    std::fs::write(
        &run,
        RUN.replace("Qwen/Qwen3-4B-Instruct-2507", model).replace(
            "vllm_max_model_length = 2048",
            "vllm_max_model_length = 1024",
        ),
    )
    .unwrap();
    let mut cmd = Command::cargo_bin("grpofit").unwrap();
    cmd.env_remove("HF_TOKEN")
        .env_remove("HF_TOKEN_PATH")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", dir.join("hf-home"))
        .env("HF_HUB_CACHE", dir.join("hub"))
        .env("HF_ENDPOINT", endpoint)
        .args(["--no-gpu", "estimate", "--gpu-mem", "8GiB", "--config"])
        .arg(&run);
    if json {
        cmd.arg("--json");
    }
    if offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    }
    cmd
}

struct Ran {
    code: Option<i32>,
    json: Value,
    stderr: String,
}

fn run(cmd: &mut Command) -> Ran {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    Ran {
        code: out.status.code(),
        json: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stderr,
    }
}

#[test]
fn a_model_from_the_hub_lands_in_the_cache_and_the_second_run_is_offline() {
    let hub = serve(vec![(TINY, sharded(TINY_CONFIG, tiny_tensors()))]);
    let dir = tempfile::tempdir().unwrap();
    let first = run(&mut estimate(dir.path(), &hub.endpoint, TINY, false));
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert!(
        first.stderr.contains(&format!(
            "grpofit: fetching config.json of {TINY} from {} (HF_HUB_OFFLINE=1 or --offline to stop)",
            hub.endpoint
        )),
        "{}",
        first.stderr
    );
    assert!(
        first
            .stderr
            .contains("safetensors headers of test/tiny-llama (2 files"),
        "{}",
        first.stderr
    );
    assert_eq!(first.json["model_source"]["kind"], "hub");
    assert_eq!(first.json["model_source"]["repo"], TINY);
    assert_eq!(first.json["model_source"]["revision"], SHA);
    // the headers' bytes are the weights, exactly: 106,816 bf16 parameters
    assert_eq!(first.json["stored_weights"]["bytes"], 213_632);
    assert_eq!(first.json["parameters"], 106_816);

    // the cache, in huggingface_hub's layout; the weights' own names are left free
    let repo = dir.path().join("hub/models--test--tiny-llama");
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        SHA
    );
    let snap = repo.join("snapshots").join(SHA);
    let mut files: Vec<String> = std::fs::read_dir(&snap)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "config.json",
            "model-00001-of-00002.safetensors.grpofit-header",
            "model-00002-of-00002.safetensors.grpofit-header",
            "model.safetensors.index.json"
        ]
    );
    // never a byte of the weights: every shard request is a range within its header
    let requests = hub.requests();
    for r in requests.iter().filter(|r| r.path.ends_with(".safetensors")) {
        let (_, to) = r.range.unwrap_or_else(|| panic!("no Range: {r:?}"));
        assert!(to < 2_000, "{r:?}");
    }
    let asked = requests.len();

    let second = run(&mut estimate(dir.path(), &hub.endpoint, TINY, true));
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(!second.stderr.contains("fetching"), "{}", second.stderr);
    assert_eq!(hub.requests().len(), asked, "the offline run asked the Hub");
    assert_eq!(second.json["model_source"]["kind"], "cache");
    assert_eq!(second.json["model_source"]["revision"], SHA);
    let (mut a, mut b) = (first.json, second.json);
    a["model_source"] = Value::Null;
    b["model_source"] = Value::Null;
    assert_eq!(a, b);
}

/// bitsandbytes NF4, FP8 with its scale, MXFP4 blocks with their scales, and bf16.
fn packed_tensors() -> Vec<(String, &'static str, Vec<u64>)> {
    let down = "model.layers.0.mlp.down_proj.weight";
    let up = "model.layers.0.mlp.up_proj.weight";
    let experts = "model.layers.1.mlp.experts.gate_up_proj";
    vec![
        ("model.embed_tokens.weight".into(), "BF16", vec![256, 64]),
        (down.into(), "U8", vec![4096, 1]),
        (format!("{down}.absmax"), "F32", vec![128]),
        (format!("{down}.quant_map"), "F32", vec![16]),
        (
            format!("{down}.quant_state.bitsandbytes__nf4"),
            "U8",
            vec![90],
        ),
        (up.into(), "F8_E4M3", vec![128, 64]),
        (format!("{up}_scale_inv"), "F32", vec![1]),
        (format!("{experts}_blocks"), "U8", vec![4, 128, 2, 16]),
        (format!("{experts}_scales"), "U8", vec![4, 128, 2]),
    ]
}

#[test]
fn packed_tensors_fetched_by_their_headers_are_sized_exactly() {
    let repo = sharded(TINY_CONFIG, packed_tensors());
    // the same files whole, as a download would hold them
    let whole = tempfile::tempdir().unwrap();
    for (name, f) in &repo.files {
        let mut bytes = f.bytes.clone();
        bytes.resize(f.len as usize, 0);
        std::fs::write(whole.path().join(name), bytes).unwrap();
    }
    let expected = safetensors::read_snapshot(whole.path()).unwrap().unwrap();
    let hub = serve(vec![("test/packed", repo)]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(
        dir.path(),
        &hub.endpoint,
        "test/packed",
        false,
    ));
    assert!(matches!(out.code, Some(0 | 3)), "{}", out.stderr);
    let snap = dir
        .path()
        .join("hub/models--test--packed/snapshots")
        .join(SHA);
    let got = safetensors::read_snapshot(&snap).unwrap().unwrap();
    assert_eq!(got, expected);
    let p = &got.packed;
    // NF4 and MXFP4: two parameters a byte; FP8: one an element
    assert_eq!((p.bnb_nf4.tensors, p.bnb_nf4.parameters), (1, 8192));
    assert_eq!(
        (p.bnb_nf4.aux_tensors, p.bnb_nf4.aux_bytes),
        (3, 512 + 64 + 90)
    );
    assert_eq!(
        (p.fp8.tensors, p.fp8.bytes, p.fp8.parameters),
        (1, 8192, 8192)
    );
    assert_eq!((p.fp8.aux_tensors, p.fp8.aux_bytes), (1, 4));
    assert_eq!((p.mxfp4.bytes, p.mxfp4.parameters), (16_384, 32_768));
    assert_eq!((p.mxfp4.aux_tensors, p.mxfp4.aux_bytes), (1, 1024));
    assert_eq!(got.parameters, 16_384 + 8192 + 8192 + 32_768);
    assert_eq!(
        got.bytes,
        32_768 + 4096 + 512 + 64 + 90 + 8192 + 4 + 16_384 + 1024
    );
}

/// Exit 2, never a panic, the model and the file named, and `what` said.
fn refused(out: &Ran, model: &str, file: &str, what: &str) {
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    for needle in [model, file, what] {
        assert!(out.stderr.contains(needle), "{needle:?} in {}", out.stderr);
    }
}

#[test]
fn a_gated_model_names_the_file_the_token_and_the_license() {
    let mut gated = sharded(TINY_CONFIG, tiny_tensors());
    gated.gated = true;
    let hub = serve(vec![("org/gated", gated)]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(dir.path(), &hub.endpoint, "org/gated", false));
    refused(
        &out,
        "org/gated is gated",
        "config.json",
        "HF_TOKEN is unset",
    );
    assert!(
        out.stderr
            .contains(&format!("accept the license at {}/org/gated", hub.endpoint)),
        "{}",
        out.stderr
    );
    let out = run(estimate(dir.path(), &hub.endpoint, "org/gated", false).env("HF_TOKEN", "hf_x"));
    refused(
        &out,
        "org/gated",
        "config.json",
        "the token from HF_TOKEN was rejected",
    );
    assert!(
        hub.requests()
            .iter()
            .any(|r| r.authorization.as_deref() == Some("Bearer hf_x"))
    );
    // nothing written: the next run is not a half-fetched cache hit
    assert!(!dir.path().join("hub/models--org--gated").exists());
}

#[test]
fn a_model_the_hub_lacks_is_refused_with_the_closest_names() {
    let hub = serve(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(
        dir.path(),
        &hub.endpoint,
        "Qwen/Qwen3-5B",
        false,
    ));
    refused(
        &out,
        "Qwen/Qwen3-5B",
        "model info",
        "no such model on the Hub",
    );
    assert!(out.stderr.contains("closest: Qwen/"), "{}", out.stderr);
}

#[test]
fn missing_files_name_the_model_and_the_file() {
    let mut no_config = sharded(TINY_CONFIG, tiny_tensors());
    no_config.files.remove("config.json");
    let mut no_shard = sharded(TINY_CONFIG, tiny_tensors());
    no_shard.files.remove("model-00002-of-00002.safetensors");
    let hub = serve(vec![
        ("test/no-config", no_config),
        ("test/no-shard", no_shard),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(
        dir.path(),
        &hub.endpoint,
        "test/no-config",
        false,
    ));
    refused(&out, "test/no-config", "config.json", "has no config.json");
    let out = run(&mut estimate(
        dir.path(),
        &hub.endpoint,
        "test/no-shard",
        false,
    ));
    refused(
        &out,
        "test/no-shard",
        "model-00002-of-00002.safetensors",
        "which the Hub does not have",
    );
}

#[test]
fn broken_headers_exit_2_naming_the_model_and_the_file() {
    let mut truncated = 100u64.to_le_bytes().to_vec();
    truncated.extend([b'{'; 50]);
    let mut not_json = 12u64.to_le_bytes().to_vec();
    not_json.extend(b"not json at ");
    let cases = [
        (
            "test/truncated",
            single(truncated, 58),
            "header length 100 is larger than the file (58 bytes)",
        ),
        (
            "test/short",
            single(vec![1, 2, 3], 3),
            "truncated header: 3 bytes",
        ),
        (
            "test/huge",
            single((1u64 << 63).to_le_bytes().to_vec(), 1 << 40),
            "header length 9223372036854775808 is 2^63 or more",
        ),
        (
            "test/not-json",
            single(not_json, 4096),
            "header is not JSON",
        ),
    ];
    let hub = serve(cases.iter().map(|(n, r, _)| (*n, r.clone())).collect());
    let dir = tempfile::tempdir().unwrap();
    for (model, _, what) in &cases {
        let out = run(&mut estimate(dir.path(), &hub.endpoint, model, false));
        refused(&out, model, "model.safetensors", what);
    }
}

#[test]
fn offline_an_unknown_model_says_it_did_not_look_on_the_hub() {
    let hub = serve(vec![(TINY, sharded(TINY_CONFIG, tiny_tensors()))]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(dir.path(), &hub.endpoint, TINY, true));
    refused(
        &out,
        TINY,
        "not in the Hugging Face cache",
        "did not look on the Hugging Face Hub (HF_HUB_OFFLINE=1): unset it",
    );
    let out = run(estimate(dir.path(), &hub.endpoint, TINY, false).arg("--offline"));
    refused(
        &out,
        TINY,
        "not in the Hugging Face cache",
        "did not look on the Hugging Face Hub (--offline): drop it",
    );
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());
}

#[test]
fn an_unreachable_hub_is_named_and_nothing_hangs() {
    // a port nothing listens on: refused at once
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(dir.path(), &endpoint, TINY, false));
    refused(
        &out,
        TINY,
        "model info",
        &format!("cannot reach the Hub at {endpoint}"),
    );
    // a server that accepts and never answers: the read timeout ends it
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let out = run(&mut estimate(dir.path(), &endpoint, TINY, false));
    refused(&out, TINY, "model info", "timeout");
    assert!(started.elapsed() < Duration::from_secs(30));
    drop(silent);
}

#[test]
fn the_text_report_says_the_hub_answered_then_the_cache() {
    let hub = serve(vec![(TINY, sharded(TINY_CONFIG, tiny_tensors()))]);
    let dir = tempfile::tempdir().unwrap();
    let report = |offline: bool| {
        let out = estimate_as(dir.path(), &hub.endpoint, TINY, offline, false)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let short = &SHA[..12];
    let first = report(false);
    assert!(
        first.contains(&format!(
            "model: Hugging Face Hub, {TINY} @ {short} (fetched into the Hugging Face cache)"
        )),
        "{first}"
    );
    let second = report(true);
    assert!(
        second.contains(&format!("model: Hugging Face cache, {TINY} @ {short}")),
        "{second}"
    );
}

#[test]
fn a_server_that_ignores_ranges_gives_the_header_from_the_start_of_its_answer() {
    let mut repo = sharded(TINY_CONFIG, tiny_tensors());
    repo.ignore_range = true;
    let hub = serve(vec![(TINY, repo)]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut estimate(dir.path(), &hub.endpoint, TINY, false));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.json["stored_weights"]["bytes"], 213_632);
    // one request a shard: the rest of the answer is never read
    let shards = hub
        .requests()
        .iter()
        .filter(|r| r.path.ends_with(".safetensors"))
        .count();
    assert_eq!(shards, 2);
}
