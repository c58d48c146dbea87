//! Numbers from files grpofit does not control (issue 23, audit "overflow"): an OOM message
//! with sizes past any GPU's, and a config.json with absurd counts, get a clear answer from a
//! debug build (which panics on overflow), never a panic nor a wrapped figure.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

#[test]
fn an_oom_message_with_sizes_past_any_gpu_does_not_overflow() {
    let huge = "99999999999999 GiB";
    let message = format!(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacty of 14.75 GiB of which 3.06 MiB is free. Process 2291 has {huge} memory in use. Process 2292 has {huge} memory in use. Of the allocated memory {huge} is allocated by PyTorch, and {huge} is reserved by PyTorch but unallocated.\n"
    );
    let out = grpofit()
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
                "[grpofit]\nstack = \"trl\"\nmodel_config = {:?}\n\n[model]\nmodel_name_or_path = \"x/y\"\ndtype = \"bfloat16\"\n",
                config.display().to_string()
            ),
        )
        .unwrap();
        let out = grpofit()
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

fn run_file(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let path = dir.join("run.toml");
    // the 24gb preset without its own [env] table (the last), then `extra`
    let preset = include_str!("../../presets/24gb.toml");
    let cut = preset.find("\n[env]").unwrap_or(preset.len());
    let text = preset[..cut].to_string() + "\n" + extra;
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_logs_device_name_reaches_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let device = "GPU\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}2J\u{7f}";
    let total: u64 = 24 << 30;
    let log = format!(
        "{}\n{}\n",
        serde_json::json!({"kind": "start", "device": device, "total": total, "trl": "0.24.0"}),
        serde_json::json!({"kind": "step", "step": 1, "max_allocated": 10u64 << 30, "max_reserved": 11u64 << 30, "free": 12u64 << 30, "total": total}),
    );
    let path = dir.path().join("log.jsonl");
    std::fs::write(&path, log).unwrap();
    let out = grpofit()
        .env("GRPOFIT_CONFIG_DIR", dir.path())
        .arg("check")
        .arg(&path)
        .args(["--preset", "24gb"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
        "{stdout:?} {stderr:?}"
    );
    assert!(!out.stdout.contains(&0x07), "{stdout:?}");
    assert!(stdout.contains("GPU\\u001b]0;owned"), "{stdout}");
    // `--json` stays JSON, and gives the name back as the log has it
    let out = grpofit()
        .env("GRPOFIT_CONFIG_DIR", dir.path())
        .arg("check")
        .arg(&path)
        .args(["--preset", "24gb", "--json"])
        .output()
        .unwrap();
    assert!(!out.stdout.contains(&0x7f) && !out.stdout.windows(2).any(|w| w == [0xc2, 0x9b]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains("owned"), "{v}");
}

#[test]
fn a_ten_megabyte_unknown_key_is_cut_and_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let key = "k".repeat(10 << 20);
    let path = run_file(dir.path(), "");
    // an unknown key in [grpo], 10 MB long
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("[grpo]\n", &format!("[grpo]\n{key} = 1\n"));
    std::fs::write(&path, text).unwrap();
    let started = std::time::Instant::now();
    let out = grpofit()
        .arg("estimate")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        &stderr[..stderr.len().min(500)]
    );
    assert!(stderr.len() < 20_000, "{} bytes said", stderr.len());
    assert!(
        stderr.contains("more characters"),
        "{}",
        &stderr[..stderr.len().min(500)]
    );
    assert!(!stderr.contains("did you mean"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn env_keys_that_no_environment_holds_are_refused_and_what_is_set_is_said() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["\"A=B\"", "\"\""] {
        let path = run_file(dir.path(), &format!("\n[env]\n{bad} = \"1\"\n"));
        let out = grpofit()
            .arg("estimate")
            .arg("--config")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("not an environment variable's name"),
            "{stderr}"
        );
    }
    let path = run_file(
        dir.path(),
        "\n[env]\nPYTHONDONTWRITEBYTECODE = \"1\"\nMY_FLAG = \"x\"\n",
    );
    let out = grpofit()
        .current_dir(dir.path())
        .env("GRPOFIT_CONFIG_DIR", dir.path())
        .args([
            "run",
            "--gpu-mem",
            "24GiB",
            "--log",
            "env.jsonl",
            "--config",
        ])
        .arg(&path)
        .args(["--", "sh", "-c", "test \"$MY_FLAG\" = x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("[env] sets MY_FLAG=x PYTHONDONTWRITEBYTECODE=1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: [env] sets PYTHONDONTWRITEBYTECODE"),
        "{stderr}"
    );
    assert!(!stderr.contains("warning: [env] sets MY_FLAG"), "{stderr}");
}

#[test]
fn diagnose_reads_only_the_end_of_a_large_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.log");
    let mut text = "step 1 loss 0.5\n".repeat(40 << 16); // 40 MiB of training lines
    text += include_str!("../oom/torch-2.1-capacty.txt");
    std::fs::write(&path, text).unwrap();
    let out = grpofit().arg("diagnose").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("only its last 16 MiB are read"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("fragmentation"));
}
