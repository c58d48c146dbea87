#![allow(clippy::unwrap_used)]
//! TRL CLI recipes (`--config recipe.yaml`) and accelerate configs (`--launch`) from the binary:
//! open-r1's recipes load and estimate per role, and a write changes only the tuned lines.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const RECIPES: &str = "tests/fixtures/recipes";
const ZERO2: &str = "tests/fixtures/recipes/accelerate_configs/zero2.yaml";
/// open-r1's Qwen2.5-1.5B demo as its README first ran it (`vllm_device: auto`)
const DEMO: &str = "tests/fixtures/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo_bd581c7.yaml";
/// a 40 GB A100 as `--gpu-mem` says it
const A100_40: &str = "39.39GiB";

fn grpofit() -> Command {
    let mut c = Command::cargo_bin("grpofit").unwrap();
    c.arg("--no-gpu").env("HF_HUB_OFFLINE", "1");
    c
}

/// Every copied GRPO recipe: recipes/<model>/grpo/config_*.yaml.
fn recipes() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for model in std::fs::read_dir(RECIPES).unwrap() {
        let grpo = model.unwrap().path().join("grpo");
        if let Ok(files) = std::fs::read_dir(grpo) {
            out.extend(files.map(|f| f.unwrap().path()));
        }
    }
    out.sort();
    assert!(out.len() >= 6, "{out:?}");
    out
}

fn json_estimate(args: &[&str]) -> (serde_json::Value, i32, String) {
    let out = grpofit()
        .arg("estimate")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (v, out.status.code().unwrap(), err)
}

fn roles(v: &serde_json::Value) -> Vec<(String, u64)> {
    v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["role"].as_str().unwrap().into(),
                r["gpus"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `fit` of `recipe` on `gpu_mem` written to a temporary `.yaml`: its text and stderr.
fn fit_to_yaml(recipe: &Path, launch: &[&str], gpu_mem: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tuned.yaml");
    let r = grpofit()
        .args(["fit", "--config"])
        .arg(recipe)
        .args(launch)
        .args(["--gpu-mem", gpu_mem, "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr).to_string();
    assert_eq!(r.status.code(), Some(0), "{err}");
    (std::fs::read_to_string(&out).unwrap(), err)
}

/// The lines of `written` that differ from `source`'s, the header line aside; both must have
/// the same lines otherwise (a key added goes at the end).
fn changed_lines(source: &str, written: &str) -> Vec<String> {
    let (header, body) = written.split_once('\n').unwrap();
    assert!(header.starts_with("# tuned by grpofit on "), "{header}");
    let (a, b): (Vec<&str>, Vec<&str>) = (source.lines().collect(), body.lines().collect());
    assert!(b.len() >= a.len(), "lines lost:\n{written}");
    let mut changed: Vec<String> = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x != y)
        .map(|(_, y)| y.to_string())
        .collect();
    changed.extend(b[a.len()..].iter().map(|l| l.to_string()));
    changed
}

#[test]
fn the_done_when_estimate_prints_one_breakdown_per_role() {
    let out = grpofit()
        .args([
            "estimate",
            "--config",
            DEMO,
            "--launch",
            ZERO2,
            "--num-processes",
            "7",
        ])
        .args(["--gpu-mem", "79.19GiB"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("training (7 GPUs), each GPU:"), "{text}");
    assert!(text.contains("vLLM server (1 GPU), each GPU:"), "{text}");
    assert!(text.contains("DeepSpeed ZeRO-2"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vllm_device"), "{err}");
}

#[test]
fn every_open_r1_recipe_loads_and_estimates_per_role() {
    for recipe in recipes() {
        let shown = recipe.display().to_string();
        let (v, code, err) = json_estimate(&[
            "--config",
            &shown,
            "--launch",
            ZERO2,
            "--num-processes",
            "7",
            "--gpu-mem",
            "79.19GiB",
        ]);
        if shown.contains("Coder-7B") && code != 0 {
            // a model outside the catalog, not in this machine's Hugging Face cache, and no Hub
            // offline: refused naming the key and line
            assert_eq!(code, 2, "{err}");
            assert!(
                err.contains(".yaml:2:") && err.contains("model_name_or_path"),
                "{err}"
            );
            continue;
        }
        assert_eq!(code, 0, "{shown}: {err}");
        assert_eq!(
            roles(&v),
            vec![("training".into(), 7), ("vllm_server".into(), 1)],
            "{shown}"
        );
        // the recipes' dataset, reward and hub keys are carried, and said to be
        assert!(
            err.contains("carried through untouched") && err.contains("reward_funcs"),
            "{err}"
        );
    }
}

#[test]
fn fit_on_40_gib_cards_writes_the_recipe_back_with_only_changed_keys() {
    for recipe in recipes()
        .iter()
        .filter(|r| !r.display().to_string().contains("Coder-7B"))
    {
        let source = std::fs::read_to_string(recipe).unwrap();
        let launch = ["--launch", ZERO2, "--num-processes", "7"];
        let (written, _) = fit_to_yaml(recipe, &launch, A100_40);
        // these recipes fit a 40 GB card as they are: only the header is new
        assert_eq!(
            changed_lines(&source, &written),
            Vec::<String>::new(),
            "{}",
            recipe.display()
        );
    }
}

#[test]
fn a_fit_that_changes_recipe_keys_edits_only_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("colocate.yaml");
    let source = "# Model arguments\nmodel_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\ntorch_dtype: bfloat16   # load in bf16\ndataset_name: open-r1/OpenR1-Math-220k\nsystem_prompt: \"think: <think>\\n...\\n</think>\"\n# GRPO\nbf16: true\nuse_vllm: true\nvllm_mode: colocate\nvllm_gpu_memory_utilization: 0.3\ngradient_checkpointing_kwargs:\n  use_reentrant: false\nlearning_rate: 2.0e-05\nmax_prompt_length: 512\nmax_completion_length: 4096   # long reasoning\nnum_generations: 16\nper_device_train_batch_size: 16  # per GPU\ngradient_accumulation_steps: 4\nreward_funcs:\n- accuracy\n- format\n";
    std::fs::write(&recipe, source).unwrap();
    let (written, _) = fit_to_yaml(&recipe, &[], A100_40);
    // the lines that differ are exactly the keys the header says the fit changed, each with
    // the value the header gives, its comment kept (which lever the fit takes is fit's test)
    let header = written.lines().next().unwrap();
    let changed: Vec<(String, String)> = header
        .split_once("changed ")
        .map(|(_, list)| {
            list.split(", ")
                .filter_map(|kv| kv.split_once(" = "))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    assert!(!changed.is_empty(), "{written}");
    let lines = changed_lines(source, &written);
    assert_eq!(lines.len(), changed.len(), "{written}");
    for (key, value) in &changed {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("{key} is not on a changed line\n{written}"));
        assert!(line.starts_with(&format!("{key}: {value}")), "{line}");
        let before = source
            .lines()
            .find(|l| l.starts_with(&format!("{key}: ")))
            .unwrap();
        if let Some((_, comment)) = before.split_once('#') {
            assert!(line.ends_with(comment), "{line}");
        }
    }
    // and the written recipe reads back as the tuned run
    let tuned = dir.path().join("tuned.yaml");
    std::fs::write(&tuned, &written).unwrap();
    let (v, code, err) =
        json_estimate(&["--config", tuned.to_str().unwrap(), "--gpu-mem", A100_40]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["effective_batch"], 64, "{v}");
}

#[test]
fn a_recipe_fit_with_a_launch_config_moves_only_the_recipe_s_own_keys() {
    // the ZeRO stage and its offload are the accelerate config's: a fit written to the recipe
    // keeps them and moves the recipe's keys, so that the header's "fits" is the file's
    let recipe = Path::new(RECIPES).join("Qwen2.5-1.5B-Instruct/grpo/config_demo_code.yaml");
    let source = std::fs::read_to_string(&recipe).unwrap();
    let zero3 = format!("{RECIPES}/accelerate_configs/zero3.yaml");
    let launch = ["--launch", zero3.as_str(), "--num-processes", "7"];
    let (written, err) = fit_to_yaml(&recipe, &launch, "17GiB");
    let header = written.lines().next().unwrap();
    assert!(!header.contains("not a recipe key"), "{header}");
    assert!(!err.contains("is not written to the recipe"), "{err}");
    let lines = changed_lines(&source, &written);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("per_device_train_batch_size: 8")),
        "{written}"
    );
    // and the written recipe fits under the same launch as the header says
    let dir = tempfile::tempdir().unwrap();
    let tuned = dir.path().join("tuned.yaml");
    std::fs::write(&tuned, &written).unwrap();
    let tuned = tuned.to_str().unwrap();
    let (_, code, err) =
        json_estimate(&[&["--config", tuned], &launch[..], &["--gpu-mem", "17GiB"]].concat());
    assert_eq!(code, 0, "{err}");
}

/// A full fine-tune of a 7B model, which no knob fits on one 80 GiB card.
const FULL_7B: &str = "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ntorch_dtype: bfloat16\nbf16: true\nuse_vllm: true\nvllm_mode: colocate\nvllm_gpu_memory_utilization: 0.3\ngradient_checkpointing: true\nmax_prompt_length: 512\nmax_completion_length: 1024\nnum_generations: 8\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\n";

/// `fit --config recipe.yaml ARGS -o out.yaml` in `dir` (on 12 GiB for the small recipe and
/// its rewrites, else 80 GiB): the exit code and stderr.
fn fit_recipe(dir: &Path, recipe: &str, args: &[&str], out: &str) -> (i32, String) {
    let gpu_mem = if recipe.contains("small") || out == "c.yaml" {
        "12GiB"
    } else {
        "80GiB"
    };
    let r = grpofit()
        .current_dir(dir)
        .args([
            "fit",
            "--config",
            recipe,
            "--gpu-mem",
            gpu_mem,
            "-o",
            out,
            "--force",
        ])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr).to_string();
    (r.status.code().unwrap_or(-1), err)
}

#[test]
fn a_recipe_no_knob_fits_is_not_written_as_fitting_on_gpus_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("recipe.yaml"), FULL_7B).unwrap();
    let zero2 = std::fs::canonicalize(ZERO2).unwrap();
    let launch = ["--launch", zero2.to_str().unwrap(), "--num-processes", "1"];
    let (code, err) = fit_recipe(dir.path(), "recipe.yaml", &launch, "same.yaml");
    // nothing the recipe holds fits: exit 3, no file said to fit, the GPUs given as advice
    assert_eq!(code, 3, "{err}");
    assert!(!dir.path().join("same.yaml").exists(), "{err}");
    assert!(err.contains("it would fit with gpus 1 -> "), "{err}");
    assert!(err.contains("accelerate launch --num_processes"), "{err}");
}

/// `fit --fastest` starts from the nearest fit: written to a recipe, that fit keeps the GPUs and
/// sharding the recipe cannot hold, as `fit -o` does, so nothing is written that fits only on
/// more GPUs.
#[test]
fn fastest_on_a_recipe_keeps_the_gpus_it_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("recipe.yaml"), FULL_7B).unwrap();
    let zero2 = std::fs::canonicalize(ZERO2).unwrap();
    let args = [
        "--launch",
        zero2.to_str().unwrap(),
        "--num-processes",
        "1",
        "--fastest",
        "--gpu",
        "H100 SXM",
    ];
    let (code, err) = fit_recipe(dir.path(), "recipe.yaml", &args, "same.yaml");
    assert_eq!(code, 3, "{err}");
    assert!(!dir.path().join("same.yaml").exists(), "{err}");
}

#[test]
fn with_a_launch_config_fit_moves_gpus_only_when_nothing_is_written() {
    // the accelerate config gives the GPU count and the sharding again on every read: a run
    // file written under it cannot carry 16 GPUs and ZeRO-3, so the write keeps them
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.yaml");
    std::fs::write(&recipe, FULL_7B).unwrap();
    let fit = |out: &[&str]| {
        let r = grpofit()
            .args([
                "fit",
                "--config",
                recipe.to_str().unwrap(),
                "--launch",
                ZERO2,
            ])
            .args(["--gpu-mem", "24GiB"])
            .args(out)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&r.stdout).to_string();
        (r.status.code(), text + &String::from_utf8_lossy(&r.stderr))
    };
    let (code, said) = fit(&[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("zero_stage"), "{said}");
    let out = dir.path().join("run.toml");
    let (code, said) = fit(&["-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(3), "{said}");
    assert!(!out.exists(), "{said}");
    assert!(said.contains("it would fit with "), "{said}");
}

#[test]
fn fit_on_its_own_written_recipe_changes_nothing_more() {
    // the first write must not take GPUs the recipe cannot hold (which halved the gradient
    // accumulation again on every run: 4 -> 2 -> 1)
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("recipe.yaml"), FULL_7B).unwrap();
    let accumulation = |name: &str| {
        std::fs::read_to_string(dir.path().join(name))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("gradient_accumulation_steps: "))
            .map(str::to_string)
    };
    let (code, err) = fit_recipe(dir.path(), "recipe.yaml", &[], "a.yaml");
    assert_ne!(code, 0, "{err}");
    assert!(!dir.path().join("a.yaml").exists(), "{err}");
    // a recipe that fits by its own keys is a fixed point
    let small = FULL_7B.replace("7B", "0.5B");
    std::fs::write(dir.path().join("small.yaml"), small).unwrap();
    let (code, err) = fit_recipe(dir.path(), "small.yaml", &[], "b.yaml");
    assert_eq!(code, 0, "{err}");
    let (code, err) = fit_recipe(dir.path(), "b.yaml", &[], "c.yaml");
    assert_eq!(code, 0, "{err}");
    assert_eq!(accumulation("b.yaml"), accumulation("c.yaml"));
    let c = std::fs::read_to_string(dir.path().join("c.yaml")).unwrap();
    assert!(
        c.lines().next().unwrap().ends_with("nothing changed"),
        "{c}"
    );
}

#[test]
fn recipe_lora_keys_feed_the_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let weights = |r: u64| {
        let recipe = dir.path().join(format!("lora{r}.yaml"));
        let text = format!(
            "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nuse_peft: true\nlora_r: {r}\nlora_target_modules: all-linear\nper_device_train_batch_size: 4\nnum_generations: 4\n"
        );
        std::fs::write(&recipe, text).unwrap();
        let (v, code, err) =
            json_estimate(&["--config", recipe.to_str().unwrap(), "--gpu-mem", "80GiB"]);
        assert_eq!(code, 0, "{err}");
        v["total_bytes"].as_u64().unwrap()
    };
    assert!(weights(256) > weights(8));
}

#[test]
fn toml_model_lora_keys_are_refused_naming_the_lora_key() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.toml");
    let text = "[grpofit]\nstack = \"trl\"\n\n[model]\nmodel_name_or_path = \"Qwen/Qwen2.5-1.5B-Instruct\"\nuse_peft = true\nlora_r = 16\n";
    std::fs::write(&f, text).unwrap();
    let out = grpofit()
        .args(["estimate", "--config"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("run.toml:7: `[model] lora_r = 16`") && err.contains("`[lora] r`"),
        "{err}"
    );
}

#[test]
fn launch_configs_give_the_spread() {
    let fsdp = format!("{RECIPES}/accelerate_configs/fsdp.yaml");
    let ddp = format!("{RECIPES}/accelerate_configs/ddp.yaml");
    let (v, code, err) =
        json_estimate(&["--config", DEMO, "--launch", &fsdp, "--gpu-mem", "80GiB"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(roles(&v)[0], ("training".into(), 8));
    let (w, _, _) = json_estimate(&["--config", DEMO, "--launch", &ddp, "--gpu-mem", "80GiB"]);
    // FULL_SHARD splits the weights over the 8 ranks (fp32 shards: 4 bytes / 8 against DDP's
    // whole 2-byte copy); DDP keeps them whole
    let weights = |v: &serde_json::Value| {
        v["roles"][0]["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["part"] == "weights")
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(
        weights(&v) * 3 < weights(&w),
        "{} vs {}",
        weights(&v),
        weights(&w)
    );

    // DeepSpeed through its own JSON, on two machines
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ds.json"),
        r#"{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}"#,
    )
    .unwrap();
    let launch = dir.path().join("accelerate.yaml");
    std::fs::write(
        &launch,
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\nnum_machines: 2\nnum_processes: 16\n",
    )
    .unwrap();
    let (v, code, err) = json_estimate(&[
        "--config",
        DEMO,
        "--launch",
        launch.to_str().unwrap(),
        "--gpu-mem",
        "80GiB",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["roles"][0]["gpus"], 16, "{v}");
    let text = grpofit()
        .args([
            "estimate",
            "--config",
            DEMO,
            "--gpu-mem",
            "80GiB",
            "--launch",
        ])
        .arg(&launch)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("2 nodes") && text.contains("ZeRO-3"),
        "{text}"
    );

    // a bad value names the file and key, exit 2
    std::fs::write(&launch, "distributed_type: XLA\nnum_processes: 8\n").unwrap();
    let (_, code, err) = json_estimate(&["--config", DEMO, "--launch", launch.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("accelerate.yaml: `distributed_type`: XLA"),
        "{err}"
    );
}

#[test]
fn writing_across_formats_says_what_it_does() {
    let dir = tempfile::tempdir().unwrap();
    // a recipe written as a run file: said, since its own keys are not in one
    let out = grpofit()
        .args([
            "estimate",
            "--config",
            DEMO,
            "--gpu-mem",
            "80GiB",
            "--export",
        ])
        .arg(dir.path().join("run.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("without") && err.contains("own keys"), "{err}");
    // a preset cannot become a recipe
    let out = grpofit()
        .args(["estimate", "--preset", "24gb", "--export"])
        .arg(dir.path().join("run.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a TRL recipe is written only"));
}

#[test]
fn a_misspelt_recipe_key_is_carried_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("typo.yaml");
    let text = "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nper_device_train_bach_size: 4\nper_device_train_batch_size: 4\nnum_generations: 4\n";
    std::fs::write(&recipe, text).unwrap();
    let (_, code, err) = json_estimate(&[
        "--config",
        recipe.to_str().unwrap(),
        "--gpu-mem",
        "79.19GiB",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("`per_device_train_bach_size` is no key of GRPOConfig or ModelConfig (did you mean `per_device_train_batch_size`?)"), "{err}");
}

/// The issue's first complaint, from the binary: `fit -o` on a run file with settings grpofit
/// does not model keeps them, and their comments, where they were.
#[test]
fn fit_o_keeps_what_the_user_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let source = grpofit::presets::built_in("24gb")
        .unwrap()
        .replace("r = 32\n", "r = 32  # adapter rank\n")
        .replace(
            "[grpo]\n",
            "[grpo]\nlearning_rate = 5e-6   # keep me\nmax_steps = 250\noutput_dir = \"out\"\ntemperature = 0.9\n",
        )
        .replace(
            "use_gradient_checkpointing = \"unsloth\"\n",
            "use_gradient_checkpointing = \"unsloth\"\nlora_dropout = 0.0\nrandom_state = 3407\n",
        );
    let run = dir.path().join("run.toml");
    std::fs::write(&run, &source).unwrap();
    let out = dir.path().join("fitted.toml");
    let r = grpofit()
        .args(["fit", "--config"])
        .arg(&run)
        .args(["--gpu-mem", "12GiB", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let written = std::fs::read_to_string(&out).unwrap();
    let changed = changed_lines(&source, &written);
    assert!(!changed.is_empty());
    // each changed line is a tuned key the header names with its new value
    let header = written.lines().next().unwrap();
    for line in &changed {
        let (key, value) = line.split_once('=').unwrap();
        let named = format!("{} = {}", key.trim(), value.trim());
        assert!(header.contains(&named), "{line} not in {header}");
    }
    for kept in [
        "learning_rate = 5e-6   # keep me",
        "random_state = 3407",
        "r = 32  # adapter rank",
    ] {
        assert!(written.contains(kept), "{kept}");
    }
}

/// open-r1's demo recipe on TRL 0.15.2 (`vllm_device: auto`, 7 training processes): that TRL has
/// no `trl vllm-serve` (it begins at 0.16), its trainer starts vLLM itself on `cuda:7`, so
/// `--export-dir`'s launch.sh starts no server and the training processes see GPU 7 too. On
/// 0.16.1 the same recipe generates in `trl vllm-serve`, which launch.sh starts.
#[test]
fn export_dir_on_trl_0_15_starts_no_vllm_server() {
    let launch_sh = |trl: &str| {
        let dir = tempfile::tempdir().unwrap();
        let set = dir.path().join("set");
        let out = grpofit()
            .args(["estimate", "--config", DEMO, "--launch", ZERO2])
            .args(["--num-processes", "7", "--gpu-mem", "79.19GiB"])
            .args(["--trl-version", trl, "--export-dir"])
            .arg(&set)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
        std::fs::read_to_string(set.join("launch.sh")).unwrap_or_else(|e| panic!("{e}: {err}"))
    };
    let sh = launch_sh("0.15.2");
    assert!(
        !sh.contains("vllm-serve\n") && !sh.contains("trl vllm-serve "),
        "{sh}"
    );
    assert!(!sh.contains("SERVER=$!"), "{sh}");
    assert!(sh.contains("its trainer starts vLLM there itself"), "{sh}");
    assert!(
        sh.contains("\nCUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 accelerate launch"),
        "{sh}"
    );
    let sh = launch_sh("0.16.1");
    assert!(sh.contains("trl vllm-serve --model"), "{sh}");
    assert!(
        sh.contains("\nCUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch"),
        "{sh}"
    );
}

/// A recipe naming a model neither cached nor catalogued, offline: the advice is what a recipe's
/// user can follow (`hf download`, or going online), never a `[grpofit]` table a YAML recipe
/// cannot hold; a run file still gets `[grpofit] model_config`.
#[test]
fn an_unknown_model_in_a_recipe_is_not_advised_a_run_file_table() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.yaml");
    std::fs::write(
        &recipe,
        "model_name_or_path: acme/no-such-model-7b\nper_device_train_batch_size: 8\nnum_generations: 8\n",
    )
    .unwrap();
    let run_file = dir.path().join("run.toml");
    std::fs::write(
        &run_file,
        "[grpofit]\nstack = \"trl\"\ngpu_memory = \"24GiB\"\n\n[model]\nmodel_name_or_path = \"acme/no-such-model-7b\"\n",
    )
    .unwrap();
    let err = |file: &Path| {
        let out = grpofit()
            .env("HF_HUB_CACHE", dir.path())
            .args(["--offline", "estimate", "--gpu-mem", "24GiB", "--config"])
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let from_recipe = err(&recipe);
    assert!(from_recipe.contains("recipe.yaml:1:"), "{from_recipe}");
    assert!(from_recipe.contains("unknown model"), "{from_recipe}");
    assert!(
        from_recipe.contains("hf download acme/no-such-model-7b config.json"),
        "{from_recipe}"
    );
    assert!(!from_recipe.contains("model_config"), "{from_recipe}");
    let from_run_file = err(&run_file);
    assert!(
        from_run_file.contains("or set `[grpofit] model_config"),
        "{from_run_file}"
    );
}

/// A process count `--num-processes` gives is refused naming the flag, not the accelerate
/// config's `num_processes` (which said "zero2.yaml: num_processes = 0 does not split evenly"
/// for `--num-processes 0`); a split over the config's machines that is uneven names the flag.
#[test]
fn a_bad_num_processes_names_the_flag() {
    let two = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    let text = std::fs::read_to_string(ZERO2).unwrap();
    assert!(text.contains("num_machines: 1"), "{text}");
    std::fs::write(
        two.path(),
        text.replace("num_machines: 1", "num_machines: 2"),
    )
    .unwrap();
    for (launch, n, said) in [
        (
            ZERO2,
            "0",
            "--num-processes <N>': out of range, expected 1 to 4096",
        ),
        (
            ZERO2,
            "-3",
            "--num-processes <N>': out of range, expected 1 to 4096",
        ),
        (
            two.path().to_str().unwrap(),
            "3",
            "--num-processes = 3 does not split evenly over 2",
        ),
    ] {
        let out = grpofit()
            .args(["estimate", "--config", DEMO, "--launch", launch])
            .args(["--num-processes", n, "--gpu-mem", "79.19GiB"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(said), "{n}: {err}");
    }
}

/// A key the pinned trl and transformers do not take is said as what it is: that pair refuses
/// the file at launch (TRL's docs' recipe writes `warmup_ratio`, which transformers 5 dropped).
#[test]
fn a_key_the_pinned_releases_lack_is_said_to_fail_at_launch() {
    let out = grpofit()
        .args(["--offline", "estimate", "--gpu-mem", "24GiB", "--config"])
        .arg("tests/fixtures/journeys/trl-docs-grpo.yaml")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`[grpo] warmup_ratio`: trl 1.15.0's GRPOConfig does not take it")
            && err.contains("trl 1.15.0 with transformers 5.17.0 refuses this file at launch"),
        "{err}"
    );
}
