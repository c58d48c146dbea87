//! `--svg FILE`: the memory bar as SVG, from the binary as a user runs it. Its numbers are
//! the `--json` ones; the picture is kept as a snapshot.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

/// The binary without NVML, and offline (as tests/cli.rs runs it).
fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

/// Runs `args` with `--svg` into a temporary folder: the picture and the `--json` answer.
fn picture_and_json(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bar.svg");
    let out = grpofit()
        .args(args)
        .arg("--json")
        .arg("--svg")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&path).unwrap();
    (svg, serde_json::from_slice(&out.stdout).unwrap())
}

/// Every `data-bytes` figure of the picture.
fn drawn(svg: &str) -> Vec<u64> {
    svg.split("data-bytes=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next()?.parse().ok())
        .collect()
}

/// Each phase's total and components, and each role's capacity, are drawn with the bytes
/// `--json` gives, and written in the text beside them.
fn assert_same_numbers(svg: &str, estimate: &serde_json::Value) {
    let figures = drawn(svg);
    for role in estimate["roles"].as_array().unwrap() {
        assert!(figures.contains(&role["capacity_bytes"].as_u64().unwrap()));
        let phases = role["phases"].as_array().cloned().unwrap_or_default();
        let bars: Vec<&serde_json::Value> = if phases.is_empty() {
            vec![role]
        } else {
            phases.iter().collect()
        };
        for bar in bars {
            assert!(figures.contains(&bar["total_bytes"].as_u64().unwrap()));
            for c in bar["components"].as_array().unwrap() {
                let bytes = c["bytes"].as_u64().unwrap();
                assert!(figures.contains(&bytes), "{} not drawn", c["name"]);
                let name = c["name"].as_str().unwrap();
                assert!(svg.contains(&format!(">{name}</text>")), "{name} not named");
            }
        }
    }
}

#[test]
fn estimate_svg_is_the_snapshot_and_has_the_json_numbers() {
    let (svg, json) = picture_and_json(&["estimate", "--preset", "24gb", "--gpu-mem", "24GiB"]);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_same_numbers(&svg, &json);
    assert!(svg.contains("fits: 12.27 GiB of 24.00 GiB"));
    insta::assert_snapshot!("estimate_24gb", svg);
    // the README's picture is this one: drawn again when it changes
    // (grpofit estimate --preset 24gb --gpu-mem 24GiB --no-gpu --svg docs/estimate-24gb.svg)
    let shown = include_str!("../../docs/estimate-24gb.svg");
    assert_eq!(shown, svg, "docs/estimate-24gb.svg is out of date");
}

#[test]
fn a_run_that_does_not_fit_is_drawn_past_the_capacity_line() {
    let (svg, json) = picture_and_json(&["fit", "--preset", "141gb", "--gpu-mem", "2GiB"]);
    let json = &json["estimate"];
    assert_eq!(json["fits"], false);
    assert_same_numbers(&svg, json);
    assert!(svg.contains("DOES NOT FIT") && svg.contains("url(#over)"));
}

#[test]
fn a_vllm_that_cannot_start_is_named_not_drawn_as_a_shortfall() {
    let (svg, json) = picture_and_json(&["estimate", "--preset", "24gb", "--gpu-mem", "10GiB"]);
    assert_eq!(json["fits"], false);
    assert!(json["headroom_bytes"].as_i64().unwrap() > 0);
    assert!(svg.contains("vLLM refuses to start"));
    assert!(!svg.contains("short by"));
}

#[test]
fn every_role_of_a_multi_gpu_run_has_its_bars() {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/multi-gpu/open-r1-7plus1-h100.toml"
    );
    let (svg, json) = picture_and_json(&["estimate", "--config", config]);
    assert!(json["roles"].as_array().unwrap().len() > 1);
    assert_same_numbers(&svg, &json);
    assert!(svg.contains("vLLM server ("));
}

#[test]
fn fit_draws_the_fitted_run() {
    let (svg, json) = picture_and_json(&["fit", "--preset", "24gb", "--gpu-mem", "12GiB"]);
    assert_eq!(json["outcome"], "fitted");
    assert_same_numbers(&svg, &json["estimate"]);
}

#[test]
fn check_marks_the_measured_peak() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let total = 24u64 << 30;
    std::fs::write(
        &log,
        format!(
            "{{\"kind\": \"start\", \"device\": \"NVIDIA GeForce RTX 4090\", \"total\": {total}}}\n\
             {{\"kind\": \"step\", \"step\": 1, \"max_allocated\": {}, \"max_reserved\": {}, \"free\": {}, \"total\": {total}}}\n",
            9u64 << 30,
            10u64 << 30,
            total - (13u64 << 30)
        ),
    )
    .unwrap();
    let (svg, _) = picture_and_json(&["check", log.to_str().unwrap(), "--preset", "24gb"]);
    assert!(svg.contains("measured, device in use: 13.00 GiB"));
    assert!(drawn(&svg).contains(&(13u64 << 30)));
}

#[test]
fn diagnose_draws_the_fit_it_proposes() {
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/oom/torch-2.5-other-process.txt"
    );
    let (svg, json) = picture_and_json(&["diagnose", log, "--preset", "24gb"]);
    assert_same_numbers(&svg, &json["fit"]["estimate"]);
    assert!(svg.contains("of the message's 23.57 GiB left to this run"));
    // without the run there is no fit, and no picture
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.svg");
    grpofit()
        .args(["diagnose", log, "--svg"])
        .arg(&path)
        .assert()
        .code(0);
    assert!(!path.exists());
}

#[test]
fn an_unwritable_svg_path_is_bad_input() {
    grpofit()
        .args([
            "estimate",
            "--preset",
            "24gb",
            "--svg",
            "/nonexistent-dir/bar.svg",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--svg"));
}

/// `--svg FILE` over a file that is there (the run file itself, say) is refused without
/// `--force`, by every command that draws, before any work: exit 2, the file unchanged
/// (issue 28: it was replaced). With `--force` it is drawn.
#[test]
fn svg_refuses_an_existing_file_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    let log = dir.path().join("run.jsonl");
    std::fs::write(&log, "{\"kind\":\"step\"}\n").unwrap();
    let log = log.to_str().unwrap();
    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.00 GiB is free.\n";
    let commands: [&[&str]; 4] = [
        &["estimate", "--preset", "24gb", "--gpu-mem", "24GiB"],
        &["fit", "--preset", "24gb", "--gpu-mem", "24GiB"],
        &["diagnose", "-", "--preset", "24gb"],
        &["check", log, "--preset", "24gb"],
    ];
    for args in commands {
        std::fs::write(&path, "# the user's run file\n").unwrap();
        let out = grpofit()
            .args(args)
            .arg("--svg")
            .arg(&path)
            .write_stdin(oom)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--force"), "{args:?}: {stderr}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# the user's run file\n",
            "{args:?}"
        );
    }
    let out = grpofit()
        .args([
            "estimate",
            "--preset",
            "24gb",
            "--gpu-mem",
            "24GiB",
            "--force",
            "--svg",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
}
