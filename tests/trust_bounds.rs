//! Numbers from files vramfit does not control (issue 23, audit "overflow"): an OOM message
//! with sizes past any GPU's, and a config.json with absurd counts, get a clear answer from a
//! debug build (which panics on overflow), never a panic nor a wrapped figure.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

fn vramfit() -> Command {
    let mut c = Command::cargo_bin("vramfit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

#[test]
fn an_oom_message_with_sizes_past_any_gpu_does_not_overflow() {
    let huge = "99999999999999 GiB";
    let message = format!(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty of 14.75 GiB of which 3.06 MiB is free. Process 2291 has {huge} memory in use. Process 2292 has {huge} memory in use. Of the allocated memory {huge} is allocated by PyTorch, and {huge} is reserved by PyTorch but unallocated.\n"
    );
    let out = vramfit()
        .args(["diagnose", "-", "--json"])
        .write_stdin(message)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // the sizes past 64 TiB are not read as measurements
    assert!(v["allocated_bytes"].is_null(), "{v}");
}

#[test]
fn absurd_counts_in_a_config_json_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#""num_local_experts": 549755813887, "num_experts_per_tok": 2"#,
            "`num_experts` = 549755813887",
        ),
        (
            r#""num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1099511627775"#,
            "`moe_intermediate_size` = 1099511627775",
        ),
    ];
    for (fields, said) in cases {
        let config = dir.path().join("config.json");
        std::fs::write(
            &config,
            format!(
                r#"{{"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                    "vocab_size": 32000, {fields}}}"#
            ),
        )
        .unwrap();
        let run = dir.path().join("run.toml");
        std::fs::write(
            &run,
            format!(
                "[vramfit]\nstack = \"trl\"\nmodel_config = {:?}\n\n[model]\nmodel_name_or_path = \"x/y\"\ndtype = \"bfloat16\"\n",
                config.display().to_string()
            ),
        )
        .unwrap();
        let out = vramfit()
            .args(["estimate", "--gpu-mem", "80GiB", "--config"])
            .arg(&run)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
    }
}
