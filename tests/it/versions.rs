//! Trainer versions as an input, end to end: `[grpofit] trl_version` and friends, the versions
//! of a Python environment (`grpofit env`, and the estimate that uses them), refusals outside
//! the modelled range, and the behaviours that moved between releases.

// test code: helpers outside #[test] functions may unwrap (clippy.toml covers the tests themselves)
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A virtual environment holding `packages` (distribution name, version) as dist-info folders.
fn fake_venv(packages: &[(&str, &str)]) -> tempfile::TempDir {
    let venv = tempfile::tempdir().unwrap();
    let site = venv.path().join("lib/python3.11/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    for (name, version) in packages {
        let info = site.join(format!("{name}-{version}.dist-info"));
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: stand-in\n\nVersion: 9.9.9 in the description\n"),
        )
        .unwrap();
    }
    // a distribution whose name only starts like one: never taken for unsloth
    let zoo = site.join("unsloth_zoo-2099.1.1.dist-info");
    std::fs::create_dir_all(&zoo).unwrap();
    std::fs::write(
        zoo.join("METADATA"),
        "Name: unsloth_zoo\nVersion: 2099.1.1\n",
    )
    .unwrap();
    venv
}

/// `grpofit ARGS` with `VIRTUAL_ENV` at `venv`: (exit code, stdout, stderr).
fn grpofit(venv: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("grpofit")
        .unwrap()
        .env("VIRTUAL_ENV", venv)
        .env_remove("CONDA_PREFIX")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn estimate_json(venv: &Path, config: &Path) -> (i32, serde_json::Value) {
    let c = config.to_str().unwrap();
    let (code, out, err) = grpofit(
        venv,
        &["estimate", "--json", "--no-gpu", "--offline", "--config", c],
    );
    assert!(code == 0 || code == 3, "{err}");
    (
        code,
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")),
    )
}

/// The file with `[grpofit] key = "value"` set (replacing the key when present).
fn pinned(file: &str, pins: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let text = std::fs::read_to_string(repo(file)).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !pins.iter().any(|(k, _)| l.starts_with(&format!("{k} ="))))
        .map(str::to_string)
        .collect();
    let at = lines.iter().position(|l| l == "[grpofit]").unwrap() + 1;
    for (k, v) in pins {
        lines.insert(at, format!("{k} = \"{v}\""));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (dir, path)
}

fn version_of<'a>(est: &'a serde_json::Value, package: &str) -> &'a serde_json::Value {
    est["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["package"] == package)
        .unwrap()
}

#[test]
fn env_reports_a_virtual_environment_and_the_estimate_uses_it() {
    let venv = fake_venv(&[
        ("trl", "0.15.2"),
        ("unsloth", "2025.5.2"),
        ("vllm", "0.8.5.post1"),
    ]);
    let (code, out, err) = grpofit(venv.path(), &["env", "--json"]);
    assert_eq!(code, 0, "{err}");
    let env: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(env["from"], "$VIRTUAL_ENV");
    let packages = env["packages"].as_array().unwrap();
    let of = |p: &str| packages.iter().find(|x| x["package"] == p).unwrap();
    assert_eq!(of("trl")["version"], "0.15.2");
    assert_eq!(of("unsloth")["version"], "2025.5.2");
    assert_eq!(of("vllm")["version"], "0.8.5.post1");
    assert_eq!(of("transformers")["version"], serde_json::Value::Null);
    assert!(
        of("trl")["metadata"]
            .as_str()
            .unwrap()
            .ends_with("trl-0.15.2.dist-info/METADATA")
    );
    let (_, text, _) = grpofit(venv.path(), &["env"]);
    assert!(text.contains("trl 0.15.2 ("), "{text}");
    assert!(text.contains("transformers: not installed"), "{text}");

    // the Qwen3-4B T4 run without a version line: the environment's versions decide
    let (_keep_file, file) = pinned("tests/realworld/../fixtures/qwen3-4b-t4-trl0.15.toml", &[]);
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("trl_version = \"0.15.2\"\n", "");
    std::fs::write(&file, text).unwrap();
    let (code, est) = estimate_json(venv.path(), &file);
    assert_eq!(code, 3);
    let trl = version_of(&est, "trl");
    assert_eq!(trl["version"], "0.15.2");
    assert_eq!(trl["origin"]["from"], "environment");
    assert!(
        trl["origin"]["detail"]
            .as_str()
            .unwrap()
            .contains("trl-0.15.2.dist-info")
    );
    assert_eq!(version_of(&est, "vllm")["version"], "0.8.5");
    // unsloth 2025.5.2's METADATA pins `transformers==4.51.3`: implied from the environment's
    let transformers = version_of(&est, "transformers");
    assert_eq!(transformers["version"], "4.51.3");
    assert_eq!(transformers["origin"]["from"], "implied");
    // an empty environment: today's defaults, and the run fits
    let empty = fake_venv(&[]);
    let (code, est) = estimate_json(empty.path(), &file);
    assert_eq!(code, 0);
    assert_eq!(version_of(&est, "trl")["version"], "1.15.0");
}

#[test]
fn the_qwen3_4b_t4_run_does_not_fit_on_trl_0_15_and_fits_on_trl_1_15() {
    let empty = fake_venv(&[]);
    // with the vLLM its notebook installed (0.8.5, tests/realworld/then.json): on grpofit's
    // default vLLM (0.31, graphs inside the share) Unsloth 2025's 160 sequences make a profile
    // run whose cache the step reuses, and the run fits by 0.5 GiB
    let (_keep_then, then) = pinned(
        "tests/fixtures/qwen3-4b-t4-trl0.15.toml",
        &[("vllm_version", "0.8.5")],
    );
    let (code, est) = estimate_json(empty.path(), &then);
    assert_eq!(code, 3, "{est}");
    assert_eq!(version_of(&est, "unsloth")["origin"]["from"], "implied");
    let named: Vec<&str> = est["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(named.contains(&"fp32 seq. logits"), "{named:?}");
    let (_keep_today, today) = pinned(
        "tests/fixtures/qwen3-4b-t4-trl0.15.toml",
        &[("trl_version", "1.15.0")],
    );
    let (code, est) = estimate_json(empty.path(), &today);
    assert_eq!(code, 0, "{est}");
    assert_eq!(version_of(&est, "unsloth")["version"], "2026.10.9");
}

#[test]
fn a_version_outside_the_modelled_range_is_refused_with_the_range() {
    let empty = fake_venv(&[]);
    let (_keep_file, file) = pinned(
        "tests/fixtures/qwen3-4b-t4-trl0.15.toml",
        &[("trl_version", "0.13.0")],
    );
    let (code, _, err) = grpofit(
        empty.path(),
        &[
            "estimate",
            "--no-gpu",
            "--offline",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("trl_version") && err.contains("0.13.0") && err.contains("0.14 to 1.16"),
        "{err}"
    );
    // a release newer than the newest modelled is estimated with the newest rules, and said
    let (_keep_file, file) = pinned(
        "tests/fixtures/qwen3-4b-t4-trl0.15.toml",
        &[("unsloth_version", "2027.1.1")],
    );
    let (code, out, err) = grpofit(
        empty.path(),
        &[
            "estimate",
            "--no-gpu",
            "--offline",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert!(code == 0 || code == 3, "{err}");
    assert!(
        out.contains("warning: unsloth 2027.1.1 is newer than the newest release modelled, 2026.10.9: estimated with 2026.10's rules"),
        "{out}"
    );
    // said once: with the text report, not again on standard error; with `--json` (machine-read
    // standard output) on standard error and in the object's warnings
    let newer = "unsloth 2027.1.1 is newer than the newest release modelled";
    assert!(!err.contains(newer), "{err}");
    let (code, out, err) = grpofit(
        empty.path(),
        &[
            "estimate",
            "--no-gpu",
            "--offline",
            "--json",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert!(code == 0 || code == 3, "{err}");
    assert!(err.contains(newer), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(newer))
    );
    let (code, out, err) = grpofit(
        empty.path(),
        &[
            "fit",
            "--no-gpu",
            "--offline",
            "--gpu-mem",
            "15GiB",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    assert!(code == 0 || code == 3, "{err}");
    assert_eq!(
        err.matches(newer).count() + out.matches(newer).count(),
        1,
        "{out}{err}"
    );
    // from the environment: the METADATA is named, and the key that overrides it
    let old = fake_venv(&[("trl", "0.12.2")]);
    let cfg = repo("tests/fixtures/seed-gemma-22gib.toml");
    let (code, _, err) = grpofit(
        old.path(),
        &[
            "estimate",
            "--no-gpu",
            "--offline",
            "--config",
            cfg.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("trl-0.12.2.dist-info/METADATA") && err.contains("trl_version"),
        "{err}"
    );
}

#[test]
fn the_seed_articles_run_on_its_stack_does_not_fit_and_diagnose_names_the_fp32_logits() {
    let empty = fake_venv(&[]);
    let cfg = repo("tests/fixtures/seed-gemma-22gib-2025.toml");
    let (code, est) = estimate_json(empty.path(), &cfg);
    assert_eq!(code, 3);
    assert!(
        est["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "fp32 batch logits")
    );
    let log = repo("tests/oom/seed-article.txt");
    // a request is matched at the run's own lengths only: the 6.01 GiB are 769 positions, the
    // run of 768 completion tokens (at 1024 the same tensor is 8.01 GiB)
    let dir = tempfile::tempdir().unwrap();
    let cfg768 = dir.path().join("run.toml");
    std::fs::write(
        &cfg768,
        std::fs::read_to_string(&cfg).unwrap().replace(
            "max_completion_length = 1024",
            "max_completion_length = 768",
        ),
    )
    .unwrap();
    let (code, out, err) = grpofit(
        empty.path(),
        &[
            "diagnose",
            "--offline",
            "--config",
            cfg768.to_str().unwrap(),
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("6.01 GiB matches the micro-batch's fp32 logits (8 x 769 x 262144 x 4 bytes"),
        "{out}"
    );
    assert!(
        out.contains("unsloth 2025.5.2, the version this run is pinned to, builds it"),
        "{out}"
    );
    assert!(!out.contains("upgrade the trainer"), "{out}");
}

#[test]
fn diagnose_names_one_sequences_fp32_logits_on_unsloth_2025() {
    let empty = fake_venv(&[]);
    let (_keep_cfg, cfg) = pinned(
        "tests/fixtures/qwen3-4b-t4-trl0.15.toml",
        &[("unsloth_version", "2025.5.2")],
    );
    let log = repo("tests/oom/unsloth-2025.5-qwen3-4b-t4.txt");
    let (code, out, err) = grpofit(
        empty.path(),
        &[
            "diagnose",
            "--offline",
            "--config",
            cfg.to_str().unwrap(),
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("matches one sequence's fp32 logits (") && out.contains("x 151936 x 4 bytes"),
        "{out}"
    );
    assert!(
        out.contains("unsloth 2025.5.2, the version this run is pinned to"),
        "{out}"
    );
}

/// The advice says where the release that builds the tensor came from: found in the user's
/// environment, or implied by the pinned TRL, not "pinned" when nothing pins it.
#[test]
fn diagnose_says_where_the_unsloth_release_came_from() {
    let log = repo("tests/oom/unsloth-2025.5-qwen3-4b-t4.txt");
    let cfg = repo("tests/fixtures/qwen3-4b-t4-trl0.15.toml");
    let run = |venv: &Path| {
        let (code, out, err) = grpofit(
            venv,
            &[
                "diagnose",
                "--offline",
                "--config",
                cfg.to_str().unwrap(),
                log.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{err}");
        out
    };
    let found = fake_venv(&[("unsloth", "2025.5.2")]);
    let out = run(found.path());
    assert!(
        out.contains("unsloth 2025.5.2, the version found in your environment ("),
        "{out}"
    );
    assert!(!out.contains("the version this run is pinned to"), "{out}");
    let empty = fake_venv(&[]);
    let out = run(empty.path());
    // trl 0.15.2 pinned, Unsloth neither pinned nor installed: the release its requirements imply
    assert!(
        out.contains("unsloth 2025.8.9, the version implied by trl 0.15.2 (run file), builds it"),
        "{out}"
    );
    assert!(!out.contains("the version this run is pinned to"), "{out}");
}

#[test]
fn trl_0_14_counts_prompts_and_unsloth_2025_raises_the_batch_and_says_so() {
    let empty = fake_venv(&[]);
    // TRL 0.14 on the trl stack: 1 prompt x 8 generations = 8 completions a micro-batch
    let dir = tempfile::tempdir().unwrap();
    let trl = dir.path().join("trl.toml");
    std::fs::write(
        &trl,
        "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 512\ntrl_version = \"0.14.0\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 1\nnum_generations = 8\nmax_completion_length = 512\nuse_vllm = false\n",
    )
    .unwrap();
    let (_, est) = estimate_json(empty.path(), &trl);
    assert_eq!(est["running_micro_batch"], 8, "{est}");
    let warnings = est["warnings"].to_string();
    assert!(warnings.contains("TRL 0.14.0 counts prompts"), "{warnings}");
    assert!(
        est["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "micro-batch logits")
    );
    // Unsloth 2025.5: per_device_train_batch_size 2 is no multiple of num_generations 8: raised
    let (_keep_uns, uns) = pinned(
        "tests/fixtures/seed-gemma-22gib.toml",
        &[("unsloth_version", "2025.5.2"), ("trl_version", "0.15.2")],
    );
    let text = std::fs::read_to_string(&uns).unwrap().replace(
        "per_device_train_batch_size = 8",
        "per_device_train_batch_size = 2",
    );
    std::fs::write(&uns, text).unwrap();
    let (_, est) = estimate_json(empty.path(), &uns);
    assert_eq!(est["running_micro_batch"], 8);
    assert!(
        est["warnings"]
            .to_string()
            .contains("raises per_device_train_batch_size to num_generations")
    );
}

#[test]
fn defaults_follow_the_trl_release_where_the_file_is_silent() {
    use grpofit_core::run::Checkpointing;
    let dir = tempfile::tempdir().unwrap();
    // the run as read (an export edits the file in place, so a key the file does not write
    // stays unwritten, and reads back with the same release's default)
    let run = |trl: &str, grpo: &str| {
        let path = dir.path().join(format!("trl-{trl}.toml"));
        std::fs::write(
            &path,
            format!("[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 512\ntrl_version = \"{trl}\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nuse_vllm = false\n{grpo}"),
        )
        .unwrap();
        let file = grpofit_core::config::load(&path, &grpofit_core::resolve::Offline::default())
            .unwrap_or_else(|e| panic!("{e}"));
        (
            file.run.beta,
            file.run.completion_len,
            file.run.checkpointing,
        )
    };
    // trl 0.17.0's GRPOConfig: beta 0.04, max_completion_length 256, no gradient checkpointing
    assert_eq!(run("0.17.0", ""), (0.04, 256, Checkpointing::Off));
    // trl 1.15.0's: beta 0, 512 tokens, checkpointing on
    assert_eq!(run("1.15.0", ""), (0.0, 512, Checkpointing::On));
    // what the file says wins over any release's default
    let set = run("0.17.0", "beta = 0.0\nmax_completion_length = 300\n");
    assert_eq!((set.0, set.1), (0.0, 300));
}

#[test]
fn a_grpo_key_the_pinned_trl_does_not_take_is_named() {
    let empty = fake_venv(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.toml");
    std::fs::write(
        &path,
        "[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 512\ntrl_version = \"0.14.0\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nuse_vllm = true\nvllm_mode = \"colocate\"\nper_device_train_batch_size = 1\n",
    )
    .unwrap();
    let (code, _, err) = grpofit(
        empty.path(),
        &[
            "estimate",
            "--no-gpu",
            "--offline",
            "--config",
            path.to_str().unwrap(),
        ],
    );
    assert!(code == 0 || code == 3, "{err}");
    assert!(
        err.contains("`[grpo] vllm_mode`: trl 0.14.0's GRPOConfig does not take it"),
        "{err}"
    );
}

/// The training step's allocated peak of an Unsloth 2025.2 run with a long prompt, pinned to `unsloth`
/// and `trl`, `batch` sequences a micro-batch (TRL 0.14 counts prompts: `batch` there is 1 prompt
/// x `batch` generations).
fn unsloth_2025_2_logits(unsloth: &str, trl: &str) -> u64 {
    let empty = fake_venv(&[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    let per_device = if trl == "0.14.0" { 1 } else { 4 };
    std::fs::write(
        &path,
        format!("[grpofit]\nstack = \"unsloth\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 3072\nunsloth_version = \"{unsloth}\"\ntrl_version = \"{trl}\"\n\n[model]\nmodel_name = \"Qwen/Qwen2.5-3B-Instruct\"\nmax_seq_length = 3200\nload_in_4bit = true\nfast_inference = false\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = {per_device}\nnum_generations = 4\nmax_completion_length = 128\nbeta = 0.0\nuse_vllm = false\n"),
    )
    .unwrap();
    let (_, est) = estimate_json(empty.path(), &path);
    assert_eq!(est["running_micro_batch"], 4, "{est}");
    est["training_peak_allocated_bytes"].as_u64().unwrap()
}

#[test]
fn unsloth_2025_2_4_under_trl_0_15_returns_every_positions_logits() {
    // trl 0.15 asks for `logits_to_keep`, a name unsloth 2025.2.4's forward does not read: the
    // logits of all 3072 + 128 positions, where trl 0.14 (`num_logits_to_keep`) and unsloth
    // 2025.2.15 (both names) give the completion's 129
    let every = unsloth_2025_2_logits("2025.2.4", "0.15.2");
    let kept_by_name = unsloth_2025_2_logits("2025.2.4", "0.14.0");
    let kept_by_release = unsloth_2025_2_logits("2025.2.15", "0.15.2");
    assert_eq!(kept_by_name, kept_by_release);
    // the head's output over every position: 4 x 3200 x 151936 bf16 logits, 3.9 GB
    let head = 4 * (3072 + 128) * 151_936 * 2;
    assert!(every > kept_by_name + head / 2, "{every} vs {kept_by_name}");
}

/// trl 1.16.0 `GRPOConfig.pad_to_multiple_of` (default "auto"): a whole number pads the step's
/// prompts and completions to a multiple of it (`_generate_and_score_completions`' `pad`), so
/// 1000 completion tokens train as 1024 and the step's memory grows; "auto" pads only on
/// Neuron (`__post_init__`), so on a GPU it is the unpadded run.
#[test]
fn trl_1_16_pad_to_multiple_of_pads_the_steps_lengths() {
    let empty = fake_venv(&[]);
    let dir = tempfile::tempdir().unwrap();
    let total = |pad: &str| {
        let path = dir.path().join("run.toml");
        std::fs::write(
            &path,
            format!("[grpofit]\nstack = \"trl\"\ngpu_memory = \"79.19GiB\"\nmax_prompt_length = 200\ntrl_version = \"1.16.0\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\ndtype = \"bfloat16\"\n\n[lora]\nr = 16\n\n[grpo]\nper_device_train_batch_size = 8\nnum_generations = 8\nmax_completion_length = 1000\nuse_vllm = false\n{pad}"),
        )
        .unwrap();
        let (code, v) = estimate_json(empty.path(), &path);
        assert!(code == 0 || code == 3, "{v}");
        v["total_bytes"].as_u64().unwrap()
    };
    let unpadded = total("");
    assert_eq!(total("pad_to_multiple_of = \"auto\"\n"), unpadded);
    assert_eq!(
        total("pad_to_multiple_of = 8\n"),
        unpadded,
        "1000 and 200 are multiples of 8"
    );
    assert!(total("pad_to_multiple_of = 128\n") > unpadded);
    let path = dir.path().join("run.toml");
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("pad_to_multiple_of = 128", "pad_to_multiple_of = \"eight\""),
    )
    .unwrap();
    let (code, _, err) = grpofit(
        empty.path(),
        &[
            "estimate",
            "--no-gpu",
            "--offline",
            "--config",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("pad_to_multiple_of") && err.contains("eight"),
        "{err}"
    );
}

/// A `$VIRTUAL_ENV` that holds no Python (a typo, a removed environment) is said: every package
/// read as "not installed" with no word of why.
#[test]
fn env_says_when_the_environment_holds_no_site_packages() {
    let empty = tempfile::tempdir().unwrap();
    let (code, text, err) = grpofit(empty.path(), &["env"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(&format!(
            "site-packages: none found under {}",
            empty.path().display()
        )),
        "{text}"
    );
    let venv = fake_venv(&[("trl", "0.15.2")]);
    let (_, text, _) = grpofit(venv.path(), &["env"]);
    assert!(!text.contains("none found"), "{text}");
}
